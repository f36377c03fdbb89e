//! Issue 24's benchmark: ferry's Zenoh path beside plain Zenoh — the same
//! zenoh 1.10.2, the same session settings — in one run, on one machine:
//! round-trip time and throughput for 64 B – 4 MiB, with the two ends as
//! Zenoh peers and as clients of a router.
//!
//! ```text
//! zenoh_path run [--quick] [--out DIR] [--sizes 64,4096] [--modes peer,router]
//!                                    the parent: spawns the others, measures
//! zenoh_path echo ferry|zenoh|zenoh-att MODE ENDPOINT
//!                                    a child: echoes pings, counts a blast
//! zenoh_path router ENDPOINT         a plain Zenoh router
//! ```
//!
//! `ZENOH_PATH_VERBOSE=1` prints when each blast's last sample was sent
//! and when its count came back (a blast whose two times are close was
//! bound by the sender).
//!
//! Three systems, each with its own echo process:
//! - **ferry**: a ferry runtime with `[zenoh]` and its own discovery off
//!   (Zenoh is its only way out): reliable publishers (Zenoh's `Block`),
//!   rmw_zenoh's keys, tokens and attachment, and inline callbacks (on the
//!   receiving thread, as Zenoh's callbacks run; ferry's default callback
//!   thread costs a wake-up per sample). Its echo forwards the received
//!   bytes without a copy, as a ferry user would (`RawBytes` shares them).
//! - **zenoh**: a plain publisher (reliable, `Block`) and subscriber on a
//!   key of its own.
//! - **zenoh-att**: the same, with rmw_zenoh's 33-byte attachment (sequence
//!   number, time, GID) on every sample, which its echo decodes — what
//!   ferry's path and rmw_zenoh carry, so what an rmw_zenoh-compatible path
//!   can at best reach.
//!
//! Every receiver makes the payload contiguous once (Zenoh hands it over in
//! fragments; a ferry sample is one buffer). Each ping carries its number
//! in bytes 0..8; the echo sends it back. A blast sends N samples back to
//! back (the last marked) and the echo answers with how many it got.
//! The systems take turns: five rounds per size, each round some pings and
//! one blast per system; throughput is the median of the five blasts.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry::config::zenoh::{Mode, ZenohConfig};
use ferry::{Config, DiscoveryRange, Node, Qos, RawBytes, TypeHash};
use ferry_zenoh::Attachment;
use zenoh::Wait;

const TYPE: &str = "ferry_bench/msg/Blob";
const HASH: TypeHash = TypeHash([9; 32]);
/// The systems measured side by side, as the echo knows them: ferry's
/// Zenoh path, plain Zenoh, and plain Zenoh carrying rmw_zenoh's 33-byte
/// attachment on every sample (as ferry's path and rmw_zenoh must).
const SYSTEMS: [&str; 3] = ["ferry", "zenoh", "zenoh-att"];
/// Byte 8 of a blast sample: 1 on its last one.
const LAST: usize = 8;

fn zenoh_config(mode: &str, listen: Option<&str>, connect: Option<&str>) -> zenoh::Config {
    let mut c = zenoh::Config::default();
    let list = |e: Option<&str>| format!("{:?}", e.map(|e| vec![e]).unwrap_or_default());
    c.insert_json5("mode", &format!("{mode:?}")).unwrap();
    c.insert_json5("listen/endpoints", &list(listen)).unwrap();
    c.insert_json5("connect/endpoints", &list(connect)).unwrap();
    c.insert_json5("scouting/multicast/enabled", "false")
        .unwrap();
    // The queue ferry's sessions have, so that the comparison is of the
    // paths, not of queue sizes.
    c.insert_json5(
        "transport/link/tx/queue/size/data",
        &ferry_zenoh::path::TX_QUEUE_BATCHES.to_string(),
    )
    .unwrap();
    c
}

fn ferry_node(name: &str, mode: &str, listen: Option<&str>, connect: Option<&str>) -> Node {
    let z = ZenohConfig {
        mode: if mode == "client" {
            Mode::Client
        } else {
            Mode::Peer
        },
        listen: listen.map(|l| vec![l.to_string()]).unwrap_or_default(),
        connect: connect.map(|c| vec![c.to_string()]).unwrap_or_default(),
        ..ZenohConfig::default()
    };
    Node::builder()
        .name(name)
        .config(Config {
            domain_id: 57,
            discovery: DiscoveryRange::Off,
            shared_memory: false,
            zenoh: Some(z),
            ..Config::default()
        })
        .build()
        .unwrap_or_else(|e| {
            eprintln!("{name}: {e}");
            std::process::exit(1)
        })
}

fn qos() -> Qos {
    Qos::default().keep_all()
}

/// What the parent talks to: send a ping or blast sample, receive pongs.
trait Side {
    fn send(&self, topic: Topic, bytes: Vec<u8>);
    fn pongs(&self) -> &mpsc::Receiver<Bytes>;
}

#[derive(Clone, Copy)]
enum Topic {
    Ping,
    Blast,
}

struct FerrySide {
    _node: Node,
    ping: ferry::Publisher<RawBytes>,
    blast: ferry::Publisher<RawBytes>,
    _pong: ferry::Subscriber<RawBytes>,
    rx: mpsc::Receiver<Bytes>,
}

impl Side for FerrySide {
    fn send(&self, topic: Topic, bytes: Vec<u8>) {
        let p = match topic {
            Topic::Ping => &self.ping,
            Topic::Blast => &self.blast,
        };
        if let Err(e) = p.publish(RawBytes::new(bytes)) {
            eprintln!("ferry publish: {e}");
        }
    }
    fn pongs(&self) -> &mpsc::Receiver<Bytes> {
        &self.rx
    }
}

struct ZenohSide {
    _session: zenoh::Session,
    ping: zenoh::pubsub::Publisher<'static>,
    blast: zenoh::pubsub::Publisher<'static>,
    _pong: zenoh::pubsub::Subscriber<()>,
    rx: mpsc::Receiver<Bytes>,
    attach: Option<Attacher>,
}

impl Side for ZenohSide {
    fn send(&self, topic: Topic, bytes: Vec<u8>) {
        let p = match topic {
            Topic::Ping => &self.ping,
            Topic::Blast => &self.blast,
        };
        if let Err(e) = put(p, bytes, self.attach.as_ref()) {
            eprintln!("zenoh put: {e}");
        }
    }
    fn pongs(&self) -> &mpsc::Receiver<Bytes> {
        &self.rx
    }
}

/// What plain Zenoh sends when it carries rmw_zenoh's attachment as ferry
/// and rmw_zenoh do: a fresh sequence number, the time and a GID per sample.
#[derive(Default)]
struct Attacher {
    seq: std::sync::atomic::AtomicI64,
}

impl Attacher {
    fn next(&self) -> [u8; Attachment::LEN] {
        use std::sync::atomic::Ordering::Relaxed;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Attachment {
            sequence: self.seq.fetch_add(1, Relaxed) + 1,
            timestamp_ns: i64::try_from(now.as_nanos()).unwrap_or(i64::MAX),
            gid: [5; 16],
        }
        .encode()
    }
}

/// `p.put(bytes)`, with rmw_zenoh's attachment when `attach` is there.
fn put(
    p: &zenoh::pubsub::Publisher<'static>,
    bytes: impl Into<zenoh::bytes::ZBytes>,
    attach: Option<&Attacher>,
) -> zenoh::Result<()> {
    match attach {
        Some(a) => p.put(bytes).attachment(a.next()).wait(),
        None => p.put(bytes).wait(),
    }
}

fn zenoh_publisher(s: &zenoh::Session, key: &str) -> zenoh::pubsub::Publisher<'static> {
    s.declare_publisher(key.to_string())
        .congestion_control(zenoh::qos::CongestionControl::Block)
        .reliability(zenoh::qos::Reliability::Reliable)
        .wait()
        .unwrap()
}

/// Plain Zenoh's keys: its own prefix per system, so the two plain
/// systems' echoes never hear each other.
fn plain_prefix(attach: bool) -> &'static str {
    if attach {
        "plain_att"
    } else {
        "plain"
    }
}

fn ferry_side(mode: &str, listen: Option<&str>, connect: Option<&str>) -> FerrySide {
    let node = ferry_node("bench_parent", mode, listen, connect);
    let publisher = |t: &str| {
        node.publisher::<RawBytes>(t)
            .qos(qos())
            .type_info(TYPE, HASH)
            .build()
            .unwrap()
    };
    let (ping, blast) = (publisher("/bench/ping"), publisher("/bench/blast"));
    let (tx, rx) = mpsc::channel();
    let pong = node
        .subscriber::<RawBytes>("/bench/pong")
        .qos(qos())
        .type_info(TYPE, HASH)
        .inline_callback(move |s| {
            let _ = tx.send(s.0.clone());
        })
        .build()
        .unwrap();
    FerrySide {
        _node: node,
        ping,
        blast,
        _pong: pong,
        rx,
    }
}

fn zenoh_side(mode: &str, listen: Option<&str>, connect: Option<&str>, attach: bool) -> ZenohSide {
    let s = zenoh::open(zenoh_config(mode, listen, connect))
        .wait()
        .unwrap();
    let prefix = plain_prefix(attach);
    let (tx, rx) = mpsc::channel();
    let pong = s
        .declare_subscriber(format!("{prefix}/pong"))
        .callback(move |x: zenoh::sample::Sample| {
            let _ = tx.send(Bytes::from(x.payload().to_bytes().into_owned()));
        })
        .wait()
        .unwrap();
    ZenohSide {
        ping: zenoh_publisher(&s, &format!("{prefix}/ping")),
        blast: zenoh_publisher(&s, &format!("{prefix}/blast")),
        _pong: pong,
        rx,
        attach: attach.then(Attacher::default),
        _session: s,
    }
}

/// The echo: pings back as pongs; a blast counted, its count sent back
/// after its last sample.
fn echo(args: &[String]) {
    let [which, mode, endpoint] = args else {
        eprintln!("echo ferry|zenoh|zenoh-att MODE ENDPOINT");
        std::process::exit(2)
    };
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let answer = |b: &[u8], send: &dyn Fn(Vec<u8>), count: &std::sync::atomic::AtomicU64| {
        use std::sync::atomic::Ordering::Relaxed;
        let n = count.fetch_add(1, Relaxed) + 1;
        if b.get(LAST) == Some(&1) {
            count.store(0, Relaxed);
            send(n.to_le_bytes().to_vec());
        }
    };
    // (A peer connects to the parent's session, a client to the router.)
    let (listen, connect) = (None, Some(endpoint.as_str()));
    if which == "ferry" {
        let node = ferry_node("bench_echo", mode, listen, connect);
        let pong = std::sync::Arc::new(
            node.publisher::<RawBytes>("/bench/pong")
                .qos(qos())
                .type_info(TYPE, HASH)
                .build()
                .unwrap(),
        );
        let p = pong.clone();
        let _ping = node
            .subscriber::<RawBytes>("/bench/ping")
            .qos(qos())
            .type_info(TYPE, HASH)
            .inline_callback(move |s| {
                let _ = p.publish(RawBytes::new(s.0.clone()));
            })
            .build()
            .unwrap();
        let c = count.clone();
        let _blast = node
            .subscriber::<RawBytes>("/bench/blast")
            .qos(qos())
            .type_info(TYPE, HASH)
            .inline_callback(move |s| {
                answer(
                    &s.0,
                    &|b| {
                        let _ = pong.publish(RawBytes::new(b));
                    },
                    &c,
                )
            })
            .build()
            .unwrap();
        println!("ready");
        wait_for_parent();
    } else {
        let s = zenoh::open(zenoh_config(mode, listen, connect))
            .wait()
            .unwrap();
        let attach = which == "zenoh-att";
        let prefix = plain_prefix(attach);
        let attacher = std::sync::Arc::new(attach.then(Attacher::default));
        // (With the attachment, the echo reads it as a receiver of
        // rmw_zenoh's samples does.)
        let read = move |x: &zenoh::sample::Sample| {
            if let Some(a) = x.attachment() {
                std::hint::black_box(Attachment::decode(&a.to_bytes()).ok());
            }
        };
        let pong = std::sync::Arc::new(zenoh_publisher(&s, &format!("{prefix}/pong")));
        let (p, a) = (pong.clone(), attacher.clone());
        let _ping = s
            .declare_subscriber(format!("{prefix}/ping"))
            .callback(move |x: zenoh::sample::Sample| {
                read(&x);
                let _ = put(&p, x.payload().to_bytes().into_owned(), a.as_ref().as_ref());
            })
            .wait()
            .unwrap();
        let c = count.clone();
        let _blast = s
            .declare_subscriber(format!("{prefix}/blast"))
            .callback(move |x: zenoh::sample::Sample| {
                read(&x);
                let b = x.payload().to_bytes();
                answer(
                    &b,
                    &|v| {
                        let _ = put(&pong, v, attacher.as_ref().as_ref());
                    },
                    &c,
                )
            })
            .wait()
            .unwrap();
        println!("ready");
        wait_for_parent();
    }
}

/// Until the parent closes stdin (or 30 minutes).
fn wait_for_parent() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(Duration::from_secs(1800));
}

struct Child(std::process::Child);

impl Child {
    fn spawn(args: &[&str]) -> Child {
        use std::io::BufRead;
        let exe = std::env::current_exe().unwrap();
        let mut c = std::process::Command::new(exe)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let out = c.stdout.take().unwrap();
        let _ = std::io::BufReader::new(out).read_line(&mut line);
        if line.trim() != "ready" {
            eprintln!("child {args:?} did not start");
            std::process::exit(1);
        }
        Child(c)
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(17447)
}

#[derive(Default, Clone, Copy)]
struct Cell {
    rtt_p50_us: f64,
    rtt_p99_us: f64,
    lost_pings: u64,
    mb_per_s: f64,
    blast_sent: u64,
    blast_got: u64,
}

/// Round trips of `n` pings of `size` bytes (after `warm` unmeasured).
fn pings(side: &dyn Side, size: usize, n: usize, warm: usize) -> (Vec<f64>, u64) {
    let mut rtts = Vec::with_capacity(n);
    let mut lost = 0;
    for i in 0..(n + warm) as u64 {
        let mut b = vec![0u8; size.max(16)];
        b[..8].copy_from_slice(&i.to_le_bytes());
        let t = Instant::now();
        side.send(Topic::Ping, b);
        let end = t + Duration::from_secs(2);
        loop {
            let Some(left) = end.checked_duration_since(Instant::now()) else {
                lost += 1;
                break;
            };
            match side.pongs().recv_timeout(left) {
                Ok(p) if p.len() >= 8 && p[..8] == i.to_le_bytes() => {
                    if i >= warm as u64 {
                        rtts.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                    break;
                }
                Ok(_) => continue,
                Err(_) => {
                    lost += 1;
                    break;
                }
            }
        }
    }
    (rtts, lost)
}

/// Sends `n` samples of `size` back to back; (MB/s until the echo's count
/// came back, samples the echo got).
fn blast(side: &dyn Side, size: usize, n: u64) -> (f64, u64) {
    while side.pongs().try_recv().is_ok() {}
    let t = Instant::now();
    for i in 0..n {
        let mut b = vec![0u8; size.max(16)];
        b[..8].copy_from_slice(&i.to_le_bytes());
        if i + 1 == n {
            b[LAST] = 1;
        }
        side.send(Topic::Blast, b);
    }
    let sent_at = t.elapsed();
    let got = match side.pongs().recv_timeout(Duration::from_secs(60)) {
        Ok(p) if p.len() == 8 => u64::from_le_bytes(p[..8].try_into().unwrap_or([0; 8])),
        _ => 0,
    };
    let secs = t.elapsed().as_secs_f64();
    if std::env::var_os("ZENOH_PATH_VERBOSE").is_some() {
        eprintln!(
            "blast {size} B x{n}: sent in {:.3} s, counted at {secs:.3} s",
            sent_at.as_secs_f64()
        );
    }
    ((got * size as u64) as f64 / secs / 1e6, got)
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(((v.len() as f64 - 1.0) * q) as usize)
        .copied()
        .unwrap_or(0.0)
}

/// Every system's cell at `size`, measured in rounds: each round sends
/// every system its share of the pings and one blast, system after
/// system, so a slow stretch of this shared machine falls on all of them
/// alike. Throughput is the median of the rounds' blasts.
fn measure(sides: &[Box<dyn Side>], size: usize, quick: bool) -> Vec<Cell> {
    let n = match (quick, size) {
        (true, _) => 100,
        (false, s) if s >= 1 << 20 => 300,
        _ => 2000,
    };
    let rounds = if quick { 1 } else { 5 };
    let bytes: u64 = if quick { 8 << 20 } else { 128 << 20 };
    // (Small samples: enough of them that a blast lasts a fair fraction
    // of a second, not a few milliseconds of start-up.)
    let count = (bytes / size as u64).clamp(20, 200_000);
    let mut rtts = vec![Vec::new(); sides.len()];
    let mut lost = vec![0; sides.len()];
    let mut blasts = vec![Vec::new(); sides.len()];
    for round in 0..rounds {
        for (i, side) in sides.iter().enumerate() {
            let warm = if round == 0 { n / 20 } else { 0 };
            let (r, l) = pings(side.as_ref(), size, n / rounds, warm);
            rtts[i].extend(r);
            lost[i] += l;
            blasts[i].push(blast(side.as_ref(), size, count));
        }
    }
    (0..sides.len())
        .map(|i| {
            let b = &mut blasts[i];
            b.sort_by(|x, y| x.0.total_cmp(&y.0));
            Cell {
                rtt_p50_us: quantile(&mut rtts[i], 0.5),
                rtt_p99_us: quantile(&mut rtts[i], 0.99),
                lost_pings: lost[i],
                mb_per_s: b[b.len() / 2].0,
                blast_sent: count,
                // (Any blast that came up short shows.)
                blast_got: b.iter().map(|x| x.1).min().unwrap_or(0),
            }
        })
        .collect()
}

fn run(args: &[String]) {
    let quick = args.iter().any(|a| a == "--quick");
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let sizes: Vec<usize> = match flag("--sizes") {
        Some(list) => list.split(',').filter_map(|s| s.parse().ok()).collect(),
        None if quick => vec![64, 65_536, 1 << 20],
        None => vec![64, 4096, 65_536, 1 << 20, 4 << 20],
    };
    let modes: Vec<&str> = match flag("--modes") {
        Some(list) => list.split(',').collect(),
        None => vec!["peer", "router"],
    };
    let mut rows = Vec::new();
    for mode in modes {
        // Peer: the parent's sessions listen, each echo connects to its
        // own. Router: every session is a client of one plain router.
        let ports = [free_port(), free_port(), free_port()];
        let router = (mode == "router").then(|| {
            let ep = format!("tcp/127.0.0.1:{}", free_port());
            (Child::spawn(&["router", &ep]), ep)
        });
        // Each system's endpoint: its own listening port as peers, the
        // router's as clients.
        let ep = |i: usize| match &router {
            Some((_, ep)) => ep.clone(),
            None => format!("tcp/127.0.0.1:{}", ports[i]),
        };
        let (parent_mode, echo_mode) = match router {
            Some(_) => ("client", "client"),
            None => ("peer", "peer"),
        };
        let ends = |i: usize| {
            let e = ep(i);
            match router {
                Some(_) => (None, Some(e)),
                None => (Some(e), None),
            }
        };
        let sides: Vec<Box<dyn Side>> = SYSTEMS
            .iter()
            .enumerate()
            .map(|(i, which)| {
                let (l, c) = ends(i);
                let (l, c) = (l.as_deref(), c.as_deref());
                match *which {
                    "ferry" => Box::new(ferry_side(parent_mode, l, c)) as Box<dyn Side>,
                    w => Box::new(zenoh_side(parent_mode, l, c, w == "zenoh-att")),
                }
            })
            .collect();
        let _echoes: Vec<Child> = SYSTEMS
            .iter()
            .enumerate()
            .map(|(i, which)| Child::spawn(&["echo", which, echo_mode, &ep(i)]))
            .collect();
        // Until each echoes (routes and ferry's need for the subscription).
        for side in &sides {
            let end = Instant::now() + Duration::from_secs(20);
            while pings(side.as_ref(), 64, 1, 0).1 > 0 {
                if Instant::now() > end {
                    eprintln!("{mode}: an echo never answered");
                    std::process::exit(1);
                }
            }
        }
        for &size in &sizes {
            let cells = measure(&sides, size, quick);
            eprintln!(
                "{mode} {size:>8} B  rtt p50 µs {}  MB/s {}",
                cells
                    .iter()
                    .zip(SYSTEMS)
                    .map(|(c, w)| format!("{w} {:.0}", c.rtt_p50_us))
                    .collect::<Vec<_>>()
                    .join(" "),
                cells
                    .iter()
                    .zip(SYSTEMS)
                    .map(|(c, w)| format!("{w} {:.1}", c.mb_per_s))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            rows.push((mode, size, cells));
        }
    }
    let mut md = String::from(
        "| mode | size | RTT p50 / p99 µs: ferry over Zenoh | plain Zenoh | plain + attachment | \
         p50 ratio to plain / + att. | throughput MB/s: ferry | plain | plain + att. | \
         ratio to plain / + att. | lost pings / blast short |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut json = Vec::new();
    let mut complete = true;
    for (mode, size, cells) in &rows {
        let [f, z, za] = [&cells[0], &cells[1], &cells[2]];
        let short: u64 = cells.iter().map(|c| c.blast_sent - c.blast_got).sum();
        let lost: u64 = cells.iter().map(|c| c.lost_pings).sum();
        complete &= lost + short == 0;
        let ratio = |a: f64, b: f64| a / b.max(1e-9);
        md.push_str(&format!(
            "| {mode} | {} | {:.0} / {:.0} | {:.0} / {:.0} | {:.0} / {:.0} | {:.2} / {:.2} | \
             {:.1} | {:.1} | {:.1} | {:.2} / {:.2} | {lost} / {short} |\n",
            human(*size),
            f.rtt_p50_us,
            f.rtt_p99_us,
            z.rtt_p50_us,
            z.rtt_p99_us,
            za.rtt_p50_us,
            za.rtt_p99_us,
            ratio(f.rtt_p50_us, z.rtt_p50_us),
            ratio(f.rtt_p50_us, za.rtt_p50_us),
            f.mb_per_s,
            z.mb_per_s,
            za.mb_per_s,
            ratio(f.mb_per_s, z.mb_per_s),
            ratio(f.mb_per_s, za.mb_per_s),
        ));
        for (who, c) in SYSTEMS.iter().zip(cells) {
            json.push(format!(
                r#"{{"mode": "{mode}", "size": {size}, "system": "{who}", "rtt_p50_us": {:.1}, "rtt_p99_us": {:.1}, "lost_pings": {}, "mb_per_s": {:.2}, "blast_sent": {}, "blast_got": {}}}"#,
                c.rtt_p50_us, c.rtt_p99_us, c.lost_pings, c.mb_per_s, c.blast_sent, c.blast_got
            ));
        }
    }
    println!("{md}");
    if let Some(dir) = out {
        let _ = std::fs::create_dir_all(&dir);
        std::fs::write(format!("{dir}/zenoh_path.md"), &md).unwrap();
        std::fs::write(
            format!("{dir}/zenoh_path.json"),
            format!("[\n{}\n]\n", json.join(",\n")),
        )
        .unwrap();
    }
    if !complete {
        eprintln!("zenoh_path: pings lost or a blast came up short");
        std::process::exit(1);
    }
}

fn human(b: usize) -> String {
    match b {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1024 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("echo") => echo(&args[1..]),
        Some("router") => {
            let Some(ep) = args.get(1) else {
                eprintln!("router ENDPOINT");
                std::process::exit(2)
            };
            let _s = zenoh::open(zenoh_config("router", Some(ep), None))
                .wait()
                .unwrap();
            println!("ready");
            wait_for_parent();
        }
        _ => {
            eprintln!(
                "zenoh_path run [--quick] [--out DIR] [--sizes …] [--modes …] | echo … | router …"
            );
            std::process::exit(2)
        }
    }
}
