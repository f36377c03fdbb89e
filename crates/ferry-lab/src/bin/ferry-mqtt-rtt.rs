//! Seed 000's RTT study: robot → broker → cloud → broker → robot, side by
//! side in one run over the same broker, for 15 payload sizes (8 B–128 KiB):
//!
//! - `ferry`: bridge-free, the robot node's port publishes to the broker
//!   itself (cloud-scope topic); the cloud side is a ferry node;
//! - `bridged`: the robot node publishes locally (shared memory / TCP) to a
//!   separate bridge process (a ferry subscriber + an MQTT client), the
//!   configuration the paper replaces; same ferry cloud node;
//! - the floors, bare MQTT client ping-pongs with the same payloads: `raw`
//!   (rumqttc, whose MQTT 5 codec ferry uses), `mosq` (libmosquitto in C
//!   with its network thread, as the paper's RTC port) and `mosq1`
//!   (libmosquitto in one thread: publish, then loop for the pong).
//!
//! Every round trip runs from just before the publish call to the pong's
//! arrival in the robot's receive callback (the C client measures itself).
//!
//! `ferry-mqtt-rtt run [--quick] [--broker mosquitto|ferry] [--trials N]
//! [--rate HZ] [--out bench/results/mqtt]` spawns the broker (Mosquitto on
//! a private port by default), the echo and bridge processes (this binary
//! in other roles; the C client compiled at start from `c/mosq_rtt.c`,
//! which needs `cc` and libmosquitto-dev) and prints medians and IQR per
//! size.

use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, Subcommand};
use ferry::config::mqtt::{BrokerUrl, MqttConfig, Scope};
use ferry::{Config, DiscoveryRange, Node, Qos, RawBytes, TopicRule};
use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{Client, Event, MqttOptions};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Measure every configuration and size; print (and write) the table.
    Run {
        /// 30 trials per cell at 50 Hz (CI).
        #[arg(long)]
        quick: bool,
        /// Trials per cell (default 1000; quick 30).
        #[arg(long)]
        trials: Option<usize>,
        /// Trials per second (default 1, as the paper; quick 50).
        #[arg(long)]
        rate: Option<f64>,
        /// `mosquitto` (a private instance, default) or `ferry` (`ferry broker`).
        #[arg(long, default_value = "mosquitto")]
        broker: String,
        /// Write Markdown and JSON here (without extension).
        #[arg(long)]
        out: Option<String>,
        /// Only these configurations (default raw,mosq,mosq1,ferry,bridged;
        /// also `rawp`: the rumqttc client with ferry-like MQTT 5
        /// properties on every message, and `half`: a ferry robot answered
        /// by a plain rumqttc echo — diagnostics).
        #[arg(long, value_delimiter = ',')]
        configs: Option<Vec<String>>,
        /// Only these sizes (bytes; default the 15 of the paper, 8 B–128 KiB).
        #[arg(long, value_delimiter = ',')]
        sizes: Option<Vec<usize>>,
        /// Use the broker at `--host`:PORT, whose echo processes run
        /// elsewhere (how `lab` runs the robot side), instead of starting
        /// both here.
        #[arg(long)]
        port: Option<u16>,
        /// The broker's address.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        /// A line for the table's header (what link is in between).
        #[arg(long, hide = true)]
        note: Option<String>,
    },
    /// The same study with the robot on one lab host and the broker and the
    /// cloud side on the other, through the userspace link emulator with a
    /// rate cap (root).
    Lab {
        /// Link rate cap, Mbit/s, both ways.
        #[arg(long, default_value_t = 20)]
        mbit: u64,
        /// One-way delay, ms (plus up to 1 ms jitter, in order).
        #[arg(long, default_value_t = 2)]
        delay_ms: u64,
        /// Trials per cell.
        #[arg(long, default_value_t = 100)]
        trials: usize,
        /// Trials per second.
        #[arg(long, default_value_t = 10.0)]
        rate: f64,
        /// Only these sizes.
        #[arg(long, value_delimiter = ',')]
        sizes: Option<Vec<usize>>,
        /// Write Markdown and JSON here (without extension).
        #[arg(long)]
        out: Option<String>,
    },
    /// Echo / bridge roles (spawned by `run`).
    #[command(hide = true)]
    Role {
        role: String,
        port: u16,
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
    },
}

static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The broker's address.
fn host() -> &'static str {
    HOST.get().map_or("127.0.0.1", String::as_str)
}

/// Robot and cloud ferry nodes meet only through the broker in this domain.
const CLOUD_DOMAIN: u16 = 191;
/// The robot and its bridge talk locally in this one.
const LOCAL_DOMAIN: u16 = 192;

static SIZES: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
static CONFIGS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();

fn sizes() -> Vec<usize> {
    SIZES
        .get()
        .cloned()
        .unwrap_or_else(|| (3..=17).map(|p| 1usize << p).collect())
}

fn cloud_config(port: u16) -> Config {
    let mut m = MqttConfig::new(BrokerUrl::Tcp {
        host: host().into(),
        port,
    });
    m.max_packet_bytes = 1 << 20;
    // Discovery is off (the pair meets only through the broker): ask for
    // announcements there.
    m.discovery = ferry::config::mqtt::BrokerDiscovery::On;
    Config {
        domain_id: CLOUD_DOMAIN,
        discovery: DiscoveryRange::Off,
        shared_memory: false,
        mqtt: Some(m),
        topics: vec![TopicRule {
            pattern: "/rtt/*".into(),
            scope: Some(Scope::Cloud),
            ..Default::default()
        }],
        ..Config::default()
    }
}

fn local_config() -> Config {
    Config {
        domain_id: LOCAL_DOMAIN,
        discovery: DiscoveryRange::Localhost,
        ..Config::default()
    }
}

fn mqtt_client(id: &str, port: u16) -> (Client, rumqttc::v5::Connection) {
    let mut o = MqttOptions::new(id, host(), port);
    o.set_max_packet_size(Some(1 << 20));
    o.set_keep_alive(Duration::from_secs(5));
    let mut net = rumqttc::NetworkOptions::new();
    net.set_tcp_nodelay(true);
    o.set_network_options(net);
    Client::new(o, 64)
}

fn mqtt_topic(name: &str) -> String {
    format!("ferry/{CLOUD_DOMAIN}/{}", name.trim_start_matches('/'))
}

/// Echo / bridge processes.
fn role(role: &str, port: u16) {
    match role {
        // The cloud side of `ferry` and `bridged`: a ferry node.
        "cloud" => {
            let n = Node::builder()
                .name("cloud")
                .config(cloud_config(port))
                .build()
                .unwrap();
            // One echo per configuration: /rtt/ping (bridge-free robot) and
            // /rtt/bping (the bridge), so both run at once.
            let mut keep = Vec::new();
            for (ping, pong) in [("/rtt/ping", "/rtt/pong"), ("/rtt/bping", "/rtt/bpong")] {
                let p = n.publisher::<RawBytes>(pong).build().unwrap();
                keep.push(
                    n.subscriber::<RawBytes>(ping)
                        .inline_callback(move |s| {
                            let _ = p.publish(RawBytes(s.0.clone()));
                        })
                        .build()
                        .unwrap(),
                );
            }
            println!("ready");
            std::thread::sleep(Duration::from_secs(24 * 3600));
        }
        // The bridge: ferry locally, a plain MQTT client to the broker.
        "bridge" => {
            let n = Node::builder()
                .name("bridge")
                .config(local_config())
                .build()
                .unwrap();
            let (client, mut conn) = mqtt_client("bridge", port);
            client
                .subscribe(mqtt_topic("/rtt/bpong"), QoS::AtLeastOnce)
                .unwrap();
            let c2 = client.clone();
            let _s = n
                .subscriber::<RawBytes>("/rtt/bping")
                .inline_callback(move |s| {
                    let _ = c2.publish(
                        mqtt_topic("/rtt/bping"),
                        QoS::AtLeastOnce,
                        false,
                        s.0.clone(),
                    );
                })
                .build()
                .unwrap();
            let p = n.publisher::<RawBytes>("/rtt/bpong").build().unwrap();
            println!("ready");
            for ev in conn.iter() {
                if let Ok(Event::Incoming(Packet::Publish(m))) = ev {
                    let _ = p.publish(RawBytes(m.payload));
                }
            }
        }
        // The floor's echo: a bare MQTT client.
        "raw" => {
            // Also the echo of `half`: a ferry robot's pings on its MQTT
            // topic, answered as a plain client would.
            let (client, mut conn) = mqtt_client("raw-echo", port);
            client.subscribe("raw/ping", QoS::AtLeastOnce).unwrap();
            client.subscribe("rawp/ping", QoS::AtLeastOnce).unwrap();
            client
                .subscribe(mqtt_topic("/rtt/hping"), QoS::AtLeastOnce)
                .unwrap();
            println!("ready");
            for ev in conn.iter() {
                if let Ok(Event::Incoming(Packet::Publish(m))) = ev {
                    let _ = match m.topic.as_ref() {
                        b"raw/ping" => {
                            client.publish("raw/pong", QoS::AtLeastOnce, false, m.payload)
                        }
                        b"rawp/ping" => client.publish_with_properties(
                            "rawp/pong",
                            QoS::AtLeastOnce,
                            false,
                            m.payload.clone(),
                            ferry_like_properties(seq_of(&m.payload)),
                        ),
                        _ => client.publish(
                            mqtt_topic("/rtt/hpong"),
                            QoS::AtLeastOnce,
                            false,
                            m.payload,
                        ),
                    };
                }
            }
        }
        // The libmosquitto floor's echo (C).
        "mosq" => {
            use std::os::unix::process::CommandExt;
            let exe = mosq_binary().expect("the C client (cc, libmosquitto-dev)");
            let e = Command::new(exe)
                .args(["echo", &port.to_string(), host()])
                .exec();
            panic!("exec the C echo: {e}");
        }
        r => panic!("unknown role {r}"),
    }
}

/// Where a parent process put the compiled C client for its roles.
const MOSQ_ENV: &str = "FERRY_MOSQ_RTT";

/// The libmosquitto client (`c/mosq_rtt.c`): the parent's (`MOSQ_ENV`), or
/// compiled once per run into a temporary directory that `mosq_cleanup`
/// removes; None (with a note) without `cc` or libmosquitto.
fn mosq_binary() -> Option<std::path::PathBuf> {
    static BIN: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os(MOSQ_ENV) {
            return Some(p.into());
        }
        let dir = mosq_dir();
        std::fs::create_dir_all(&dir).ok()?;
        let src = dir.join("mosq_rtt.c");
        let exe = dir.join("mosq_rtt");
        std::fs::write(&src, include_str!("../../c/mosq_rtt.c")).ok()?;
        let out = Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(&src)
            .args(["-lmosquitto", "-lpthread"])
            .output();
        match out {
            Ok(o) if o.status.success() => Some(exe),
            Ok(o) => {
                eprintln!(
                    "note: the libmosquitto floor is left out (cc failed: {})",
                    String::from_utf8_lossy(&o.stderr)
                        .lines()
                        .next()
                        .unwrap_or("")
                );
                None
            }
            Err(e) => {
                eprintln!("note: the libmosquitto floor is left out (no cc: {e})");
                None
            }
        }
    })
    .clone()
}

fn mosq_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("ferry-mosq-rtt-{}", std::process::id()))
}

/// Removes the C client this process compiled, if it did.
fn mosq_cleanup() {
    if std::env::var_os(MOSQ_ENV).is_none() {
        let _ = std::fs::remove_dir_all(mosq_dir());
    }
}

fn spawn_role(r: &str, port: u16) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["role", r, &port.to_string(), "--host", host()]);
    if r == "mosq" {
        if let Some(exe) = mosq_binary() {
            c.env(MOSQ_ENV, exe);
        }
    }
    started(c, r)
}

/// Spawns a role's process and waits for its `ready` line.
fn started(cmd: Command, role: &str) -> Child {
    started_with_output(cmd, role).0
}

/// `started`, keeping the rest of the process's output.
fn started_with_output(
    mut cmd: Command,
    role: &str,
) -> (Child, std::io::BufReader<std::process::ChildStdout>) {
    let mut c = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "role {role} did not start");
    (c, out)
}

/// MQTT 5 properties shaped like the ones a ferry sample carries (content
/// type + the `ferry` property: writer, sequence, source time, type name),
/// for `rawp`: a plain client paying for ferry's metadata and nothing else.
fn ferry_like_properties(seq: u64) -> rumqttc::v5::mqttbytes::v5::PublishProperties {
    rumqttc::v5::mqttbytes::v5::PublishProperties {
        content_type: Some("application/cdr".into()),
        user_properties: vec![(
            "ferry".into(),
            format!("0123456789abcdef.12 {seq} 1763900000000000000 ferry/msg/RawBytes"),
        )],
        ..Default::default()
    }
}

/// A payload of `len` bytes starting with `seq`.
fn payload(seq: u64, len: usize) -> Bytes {
    let mut v = vec![0xA5u8; len.max(8)];
    v[..8].copy_from_slice(&seq.to_le_bytes());
    v.truncate(len.max(8));
    Bytes::from(v)
}

fn seq_of(b: &[u8]) -> u64 {
    b.get(..8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

/// Round trips (µs) per payload size.
type Series = Vec<(usize, Vec<f64>)>;

/// A pong: when it reached the robot's receive callback, or the round trip
/// the robot measured itself (the C client; negative: none came).
enum Pong {
    At(u64, Instant),
    Rtt(u64, f64),
}

/// One configuration's robot side: sends pings, its channel gets the pongs.
struct Robot {
    send: Box<dyn Fn(u64, usize)>,
    pongs: mpsc::Receiver<Pong>,
    _keep: Vec<Box<dyn std::any::Any>>,
}

/// The robot side of `config` (its echo / bridge processes go to `children`).
fn robot(config: &str, port: u16, children: &mut Vec<Child>) -> Robot {
    let (tx, rx) = mpsc::channel::<Pong>();
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    let send: Box<dyn Fn(u64, usize)> = match config {
        "mosq" | "mosq1" => {
            let exe = mosq_binary().expect("the C client");
            let mode = if config == "mosq" {
                "threaded"
            } else {
                "single"
            };
            let mut c = Command::new(exe);
            c.args(["ping", &port.to_string(), host(), mode])
                .stdin(Stdio::piped());
            let (mut child, out) = started_with_output(c, config);
            let stdin = std::cell::RefCell::new(child.stdin.take().unwrap());
            children.push(child);
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in out.lines() {
                    let Ok(line) = line else { break };
                    let mut f = line.split(' ');
                    let seq = f.next().and_then(|x| x.parse().ok());
                    let ns = f.next().and_then(|x| x.parse::<f64>().ok());
                    if let (Some(seq), Some(ns)) = (seq, ns) {
                        let _ = tx.send(Pong::Rtt(seq, ns / 1000.0));
                    }
                }
            });
            Box::new(move |seq, len| {
                use std::io::Write;
                let _ = writeln!(stdin.borrow_mut(), "{seq} {len}");
            })
        }
        "raw" | "rawp" => {
            let props = config == "rawp";
            let (client, mut conn) = mqtt_client(&format!("{config}-robot"), port);
            client
                .subscribe(format!("{config}/pong"), QoS::AtLeastOnce)
                .unwrap();
            std::thread::spawn(move || {
                for ev in conn.iter() {
                    if let Ok(Event::Incoming(Packet::Publish(m))) = ev {
                        let _ = tx.send(Pong::At(seq_of(&m.payload), Instant::now()));
                    }
                }
            });
            let ping = format!("{config}/ping");
            Box::new(move |seq, len| {
                let _ = if props {
                    client.publish_with_properties(
                        ping.clone(),
                        QoS::AtLeastOnce,
                        false,
                        payload(seq, len),
                        ferry_like_properties(seq),
                    )
                } else {
                    client.publish(ping.clone(), QoS::AtLeastOnce, false, payload(seq, len))
                };
            })
        }
        _ => {
            let (cfg, ping, pong) = if config == "ferry" {
                (cloud_config(port), "/rtt/ping", "/rtt/pong")
            } else if config == "half" {
                (cloud_config(port), "/rtt/hping", "/rtt/hpong")
            } else {
                children.push(spawn_role("bridge", port));
                (local_config(), "/rtt/bping", "/rtt/bpong")
            };
            let n = Node::builder().name("robot").config(cfg).build().unwrap();
            let s = n
                .subscriber::<RawBytes>(pong)
                .qos(Qos::default().keep_last(100))
                .inline_callback(move |s| {
                    let _ = tx.send(Pong::At(seq_of(&s), Instant::now()));
                })
                .build()
                .unwrap();
            let p = n.publisher::<RawBytes>(ping).build().unwrap();
            p.wait_for_subscribers(1, Duration::from_secs(10));
            keep.push(Box::new(s));
            keep.push(Box::new(n));
            Box::new(move |seq, len| {
                let _ = p.publish(RawBytes(payload(seq, len)));
            })
        }
    };
    Robot {
        send,
        pongs: rx,
        _keep: keep,
    }
}

impl Robot {
    /// One round trip, µs (`None`: no answer within 5 s).
    fn ping(&self, seq: u64, len: usize) -> Option<f64> {
        let t0 = Instant::now();
        (self.send)(seq, len);
        let deadline = t0 + Duration::from_secs(6);
        loop {
            match self
                .pongs
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(Pong::At(s, at)) if s == seq => {
                    return Some(at.duration_since(t0).as_secs_f64() * 1e6)
                }
                Ok(Pong::Rtt(s, us)) if s == seq => return (us >= 0.0).then_some(us),
                Ok(_) => continue, // a late answer to an earlier trial
                Err(_) => return None,
            }
        }
    }
}

/// Round trips of every configuration, interleaved trial by trial (so
/// drift in this shared VM hits all alike): per configuration, (size,
/// rtts in µs) per size.
fn measure(configs: &[&str], port: u16, trials: usize, rate: f64, echoes: bool) -> Vec<Series> {
    let period = Duration::from_secs_f64(1.0 / rate);
    let mut children = if echoes {
        let mut v = vec![spawn_role("cloud", port), spawn_role("raw", port)];
        if configs.iter().any(|c| c.starts_with("mosq")) {
            v.push(spawn_role("mosq", port));
        }
        v
    } else {
        Vec::new()
    };
    let robots: Vec<Robot> = configs
        .iter()
        .map(|c| robot(c, port, &mut children))
        .collect();
    // Warm up (connections, discovery through the broker).
    let mut seq = 0u64;
    for (c, r) in configs.iter().zip(&robots) {
        let until = Instant::now() + Duration::from_secs(15);
        let mut warm = 0;
        while warm < 20 && Instant::now() < until {
            seq += 1;
            if r.ping(seq, 64).is_some() {
                warm += 1;
            }
        }
        assert!(warm >= 20, "{c}: no round trips during warm-up");
        while r.pongs.try_recv().is_ok() {}
    }
    let mut out: Vec<Series> = configs.iter().map(|_| Vec::new()).collect();
    for len in sizes() {
        let mut rtts: Vec<Vec<f64>> = configs.iter().map(|_| Vec::with_capacity(trials)).collect();
        for t in 0..trials {
            for k in 0..robots.len() {
                let i = (t + k) % robots.len(); // rotate who goes first
                let next = Instant::now() + period;
                seq += 1;
                if let Some(us) = robots[i].ping(seq, len) {
                    rtts[i].push(us);
                }
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        }
        for (i, v) in rtts.into_iter().enumerate() {
            eprintln!("{:>8} {len:>7} B: {} of {trials}", configs[i], v.len());
            out[i].push((len, v));
        }
    }
    drop(robots);
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
    // The killed roles (the bridge and its robot use shared memory) could not unlink
    // their segments; those of dead processes are swept, as `ferry shm gc` does.
    ferry_shm::sweep_stale();
    out
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn start_broker(kind: &str, port: u16, dir: &std::path::Path) -> Child {
    let child = match kind {
        "ferry" => {
            let ferry = std::env::current_exe().unwrap().with_file_name("ferry");
            Command::new(ferry)
                .args([
                    "broker",
                    "--listen",
                    &format!("127.0.0.1:{port}"),
                    "--max-payload",
                    "1048576",
                ])
                .stdout(Stdio::null())
                .spawn()
                .expect("`ferry` next to this binary (cargo build --release -p ferry-cli)")
        }
        _ => {
            std::fs::create_dir_all(dir).unwrap();
            let conf = dir.join("m.conf");
            std::fs::write(
                &conf,
                format!(
                    "listener {port} 127.0.0.1\nallow_anonymous true\nmax_packet_size 1048576\n\
                     set_tcp_nodelay true\nmax_queued_messages 10000\n"
                ),
            )
            .unwrap();
            Command::new("mosquitto")
                .arg("-c")
                .arg(&conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("mosquitto (scripts/setup.sh installs it)")
        }
    };
    assert!(
        ferry_testkit::wait_listening(port, Duration::from_secs(10)),
        "broker did not listen on {port}"
    );
    child
}

struct RunArgs {
    quick: bool,
    trials: Option<usize>,
    rate: Option<f64>,
    broker: String,
    out: Option<String>,
    port: Option<u16>,
    note: Option<String>,
}

fn run(a: RunArgs) {
    let RunArgs {
        quick,
        trials,
        rate,
        broker,
        out,
        port: given,
        note,
    } = a;
    let broker = broker.as_str();
    let trials = trials.unwrap_or(if quick { 30 } else { 1000 });
    let rate = rate.unwrap_or(if quick { 50.0 } else { 1.0 });
    let port = given.unwrap_or_else(|| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    });
    let dir = std::env::temp_dir().join(format!("ferry-mqtt-rtt-{}", std::process::id()));
    let mut b = given.is_none().then(|| start_broker(broker, port, &dir));
    let mut configs: Vec<&str> = CONFIGS
        .get()
        .cloned()
        .unwrap_or_else(|| vec!["raw", "mosq", "mosq1", "ferry", "bridged"]);
    if configs.iter().any(|c| c.starts_with("mosq")) && mosq_binary().is_none() {
        configs.retain(|c| !c.starts_with("mosq"));
    }
    let all = measure(&configs, port, trials, rate, given.is_none());
    if let Some(b) = &mut b {
        let _ = b.kill();
        let _ = b.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    mosq_cleanup();
    let (md, json) = report(&configs, &all, broker, trials, rate, note);
    println!("{md}");
    if let Some(o) = out {
        std::fs::write(format!("{o}.md"), &md).unwrap();
        std::fs::write(
            format!("{o}.json"),
            serde_json::to_string_pretty(&json).unwrap(),
        )
        .unwrap();
    }
}

/// What each configuration is called in the table.
fn label(config: &str) -> &str {
    match config {
        "raw" => "rumqttc client",
        "rawp" => "rumqttc + ferry-like properties",
        "mosq" => "libmosquitto, network thread",
        "mosq1" => "libmosquitto, one thread",
        "ferry" => "ferry bridge-free",
        "bridged" => "ferry bridged",
        "half" => "ferry robot, rumqttc echo",
        c => c,
    }
}

/// The Markdown table (medians, IQR, ratios of ferry to each other
/// configuration, the bridge's share) and the JSON rows.
fn report(
    configs: &[&str],
    all: &[Series],
    broker: &str,
    trials: usize,
    rate: f64,
    note: Option<String>,
) -> (String, Vec<serde_json::Value>) {
    let ferry = configs.iter().position(|c| *c == "ferry");
    let bridged = configs.iter().position(|c| *c == "bridged");
    let others: Vec<usize> = (0..configs.len()).filter(|&i| Some(i) != ferry).collect();
    let mut md = format!(
        "# MQTT round trip: bridge-free vs bridged vs bare clients (seed 000)\n\n\
         Broker: {broker} on {}, {trials} trials per cell at {rate} Hz, QoS 1, TCP_NODELAY.{}\n\
         RTT median [IQR] in µs, from the publish call to the pong in the robot's receive\n\
         callback; configurations interleaved trial by trial; ratios are of medians.\n",
        host(),
        note.map(|n| format!("\n{n}")).unwrap_or_default()
    );
    if bridged.is_some() && ferry.is_some() {
        md.push_str("Bridge share = (bridged − ferry) / bridged.\n");
    }
    md.push_str("\n| size |");
    for c in configs {
        md.push_str(&format!(" {} |", label(c)));
    }
    if ferry.is_some() {
        for &i in &others {
            md.push_str(&format!(" ferry / {} |", configs[i]));
        }
    }
    if ferry.is_some() && bridged.is_some() {
        md.push_str(" bridge share |");
    }
    md.push_str(" received |\n|---:|");
    let cols = configs.len()
        + ferry.map_or(0, |_| others.len())
        + usize::from(ferry.is_some() && bridged.is_some())
        + 1;
    md.push_str(&"---:|".repeat(cols));
    md.push('\n');
    let mut json = Vec::new();
    for (k, len) in sizes().into_iter().enumerate() {
        let mut row = serde_json::Map::new();
        row.insert("size".into(), len.into());
        let mut medians = Vec::new();
        let mut got = Vec::new();
        md.push_str(&format!("| {len} |"));
        for (i, c) in configs.iter().enumerate() {
            let mut v = all[i][k].1.clone();
            got.push(v.len().to_string());
            let (q1, q2, q3) = (
                quantile(&mut v, 0.25),
                quantile(&mut v, 0.5),
                quantile(&mut v, 0.75),
            );
            medians.push(q2);
            md.push_str(&format!(" {q2:.0} [{q1:.0}–{q3:.0}] |"));
            row.insert(
                (*c).into(),
                serde_json::json!({"q1": q1, "median": q2, "q3": q3, "n": v.len()}),
            );
        }
        if let Some(f) = ferry {
            for &i in &others {
                md.push_str(&format!(" {:.2} |", medians[f] / medians[i]));
            }
            if let Some(b) = bridged {
                md.push_str(&format!(
                    " {:.0} % |",
                    (medians[b] - medians[f]) / medians[b] * 100.0
                ));
            }
        }
        md.push_str(&format!(" {} |\n", got.join("/")));
        json.push(serde_json::Value::Object(row));
    }
    (md, json)
}

/// Robot on lab host B; broker, cloud echo and raw echo on host A.
fn lab(
    mbit: u64,
    delay_ms: u64,
    trials: usize,
    rate: f64,
    sizes: Option<Vec<usize>>,
    out: Option<String>,
) {
    use ferry_lab::{Lab, LabConfig, Side};
    let rate_bps = mbit * 1_000_000 / 8;
    let link = ferry_testkit::LinkConfig {
        rate: rate_bps,
        delay: Duration::from_millis(delay_ms),
        jitter: Duration::from_millis(1),
        reorder: false,
        mtu: 1500,
        queue: ((rate_bps as f64 * 0.05) / 1500.0).max(16.0) as usize,
        ..Default::default()
    };
    let lab = Lab::up(LabConfig::symmetric("fmq", 61, link)).expect("lab up (root, /dev/net/tun)");
    let (a, port) = (lab.addr(Side::A), 1883u16);
    let dir = std::env::temp_dir().join(format!("ferry-mqtt-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("m.conf");
    std::fs::write(
        &conf,
        format!("listener {port} {a}\nallow_anonymous true\nmax_packet_size 1048576\nset_tcp_nodelay true\nmax_queued_messages 10000\n"),
    )
    .unwrap();
    let mut procs = vec![lab
        .command(Side::A, &format!("exec mosquitto -c {}", conf.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()];
    std::thread::sleep(Duration::from_millis(1500));
    let exe = std::env::current_exe().unwrap();
    let mosq = mosq_binary();
    for r in ["cloud", "raw", "mosq"] {
        let env = match (r, &mosq) {
            ("mosq", Some(m)) => format!("{MOSQ_ENV}={} ", m.display()),
            ("mosq", None) => continue,
            _ => String::new(),
        };
        let cmd = lab.command(
            Side::A,
            &format!("{env}exec {} role {r} {port} --host {a}", exe.display()),
        );
        procs.push(started(cmd, r));
    }
    let mut cmd = format!(
        "{}exec {} run --port {port} --host {a} --trials {trials} --rate {rate} --note 'Lab: robot on host B, broker + cloud on host A, link {mbit} Mbit/s, {delay_ms} ms (+0–1 ms) one way, both ways (userspace emulator).'",
        mosq.as_ref()
            .map(|m| format!("{MOSQ_ENV}={} ", m.display()))
            .unwrap_or_default(),
        exe.display()
    );
    if let Some(v) = sizes {
        let v: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        cmd.push_str(&format!(" --sizes {}", v.join(",")));
    }
    if let Some(o) = out {
        cmd.push_str(&format!(" --out {o}"));
    }
    let st = lab.command(Side::B, &cmd).status().unwrap();
    for mut p in procs {
        let _ = p.kill();
        let _ = p.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    mosq_cleanup();
    drop(lab);
    assert!(st.success(), "robot side failed");
}

fn main() {
    match Cli::parse().cmd {
        Cmd::Run {
            quick,
            trials,
            rate,
            broker,
            out,
            sizes,
            configs,
            port,
            host,
            note,
        } => {
            if let Some(c) = configs {
                let c: Vec<&'static str> = c.into_iter().map(|s| &*s.leak()).collect();
                let _ = CONFIGS.set(c);
            }
            if let Some(v) = sizes {
                let _ = SIZES.set(v);
            }
            let _ = HOST.set(host);
            run(RunArgs {
                quick,
                trials,
                rate,
                broker,
                out,
                port,
                note,
            })
        }
        Cmd::Lab {
            mbit,
            delay_ms,
            trials,
            rate,
            sizes,
            out,
        } => lab(mbit, delay_ms, trials, rate, sizes, out),
        Cmd::Role {
            role: r,
            port,
            host,
        } => {
            let _ = HOST.set(host);
            role(&r, port)
        }
    }
}
