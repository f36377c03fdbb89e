//! Seed 000's RTT study: robot → broker → cloud → broker → robot, side by
//! side in one run over the same broker, for 15 payload sizes (8 B–128 KiB):
//!
//! - `ferry`: bridge-free, the robot node's port publishes to the broker
//!   itself (cloud-scope topic); the cloud side is a ferry node;
//! - `bridged`: the robot node publishes locally (shared memory / TCP) to a
//!   separate bridge process (a ferry subscriber + an MQTT client), the
//!   configuration the paper replaces; same ferry cloud node;
//! - `raw`: the floor, a bare MQTT client ping-pong (rumqttc, the client
//!   library ferry itself uses) with the same payloads.
//!
//! `ferry-mqtt-rtt run [--quick] [--broker mosquitto|ferry] [--trials N]
//! [--rate HZ] [--out bench/results/mqtt]` spawns the broker (Mosquitto on
//! a private port by default), the echo and bridge processes (this binary
//! in other roles) and prints medians and IQR per size.

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
        /// Only these configurations (default raw,ferry,bridged,half; the
        /// table needs all four; `rawp`: the plain client with ferry-like
        /// MQTT 5 properties on every message, a diagnostic).
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
                        .callback(move |s| {
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
                .callback(move |s| {
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
        r => panic!("unknown role {r}"),
    }
}

fn spawn_role(r: &str, port: u16) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["role", r, &port.to_string(), "--host", host()]);
    started(c, r)
}

/// Spawns a role's process and waits for its `ready` line.
fn started(mut cmd: Command, role: &str) -> Child {
    let mut c = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(c.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "role {role} did not start");
    c
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

/// One configuration's robot side: sends pings, its channel gets the
/// sequence numbers of the pongs.
struct Robot {
    send: Box<dyn Fn(u64, usize)>,
    pongs: mpsc::Receiver<u64>,
    _keep: Vec<Box<dyn std::any::Any>>,
}

/// The robot side of `config` (its echo / bridge processes go to `children`).
fn robot(config: &str, port: u16, children: &mut Vec<Child>) -> Robot {
    let (tx, rx) = mpsc::channel::<u64>();
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    let send: Box<dyn Fn(u64, usize)> = match config {
        "raw" | "rawp" => {
            let props = config == "rawp";
            let (client, mut conn) = mqtt_client(&format!("{config}-robot"), port);
            client
                .subscribe(format!("{config}/pong"), QoS::AtLeastOnce)
                .unwrap();
            std::thread::spawn(move || {
                for ev in conn.iter() {
                    if let Ok(Event::Incoming(Packet::Publish(m))) = ev {
                        let _ = tx.send(seq_of(&m.payload));
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
                .callback(move |s| {
                    let _ = tx.send(seq_of(&s));
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
        let deadline = t0 + Duration::from_secs(5);
        loop {
            match self
                .pongs
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(s) if s == seq => return Some(t0.elapsed().as_secs_f64() * 1e6),
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
        vec![spawn_role("cloud", port), spawn_role("raw", port)]
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
    let configs: Vec<&str> = CONFIGS
        .get()
        .cloned()
        .unwrap_or_else(|| vec!["raw", "ferry", "bridged", "half"]);
    let all = measure(&configs, port, trials, rate, given.is_none());
    if configs.len() != 4 {
        for (c, r) in configs.iter().zip(&all) {
            for (len, v) in r {
                let mut v = v.clone();
                println!("{c:>8} {len:>7} B: median {:.0} µs", quantile(&mut v, 0.5));
            }
        }
        if let Some(b) = &mut b {
            let _ = b.kill();
            let _ = b.wait();
        }
        return;
    }
    let results: Vec<(&str, Series)> = configs.iter().copied().zip(all).collect();
    if let Some(b) = &mut b {
        let _ = b.kill();
        let _ = b.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut md = format!(
        "# MQTT round trip: bridge-free vs bridged vs raw client (seed 000)\n\n\
         Broker: {broker} on {}, {trials} trials per cell at {rate} Hz, QoS 1, TCP_NODELAY.{}\n\
         RTT median [IQR] in µs; ratios are of medians. Bridge share = (bridged − ferry) / bridged.\n\
         Configurations interleaved trial by trial. `half`: a ferry robot node answered by a plain\n\
         client echo (one ferry side instead of two).\n\n\
         | size | raw client | ferry bridge-free | ferry bridged | half | ferry / raw | ferry / bridged | bridge share | received (raw/ferry/bridged/half) |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        host(),
        note.map(|n| format!("\n{n}")).unwrap_or_default()
    );
    let mut json = Vec::new();
    for (i, len) in sizes().into_iter().enumerate() {
        let mut cells = Vec::new();
        let mut got = Vec::new();
        for (_, r) in &results {
            let mut v = r[i].1.clone();
            got.push(v.len());
            let (q1, q2, q3) = (
                quantile(&mut v, 0.25),
                quantile(&mut v, 0.5),
                quantile(&mut v, 0.75),
            );
            cells.push((q1, q2, q3));
        }
        let (raw, fer, bri) = (cells[0].1, cells[1].1, cells[2].1);
        md.push_str(&format!(
            "| {len} | {:.0} [{:.0}–{:.0}] | {:.0} [{:.0}–{:.0}] | {:.0} [{:.0}–{:.0}] | {:.0} | {:.2} | {:.2} | {:.0} % | {}/{}/{}/{} |\n",
            cells[0].1, cells[0].0, cells[0].2,
            cells[1].1, cells[1].0, cells[1].2,
            cells[2].1, cells[2].0, cells[2].2,
            cells[3].1,
            fer / raw,
            fer / bri,
            (bri - fer) / bri * 100.0,
            got[0], got[1], got[2], got[3]
        ));
        json.push(serde_json::json!({
            "size": len,
            "raw": {"q1": cells[0].0, "median": raw, "q3": cells[0].2, "n": got[0]},
            "ferry": {"q1": cells[1].0, "median": fer, "q3": cells[1].2, "n": got[1]},
            "bridged": {"q1": cells[2].0, "median": bri, "q3": cells[2].2, "n": got[2]},
            "half": {"q1": cells[3].0, "median": cells[3].1, "q3": cells[3].2, "n": got[3]},
        }));
    }
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
    for r in ["cloud", "raw"] {
        let cmd = lab.command(
            Side::A,
            &format!("exec {} role {r} {port} --host {a}", exe.display()),
        );
        procs.push(started(cmd, r));
    }
    let mut cmd = format!(
        "exec {} run --port {port} --host {a} --trials {trials} --rate {rate} --note 'Lab: robot on host B, broker + cloud on host A, link {mbit} Mbit/s, {delay_ms} ms (+0–1 ms) one way, both ways (userspace emulator).'",
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
