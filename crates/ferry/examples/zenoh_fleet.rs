//! The processes of `bench/zenoh_fleet.py` (issue 24's fleet lab): a Zenoh
//! router, robots that publish telemetry and a camera stream, and a cloud
//! subscriber — each a ferry runtime whose only way out is `[zenoh]`
//! (ferry's own discovery off), run in network namespaces of their own.
//!
//! ```text
//! zenoh_fleet router LISTEN SECS
//! zenoh_fleet robot ID CONNECT MODE SECS TEL_HZ CAM_BYTES CAM_HZ
//! zenoh_fleet cloud ROBOTS CONNECT MODE SECS CALL_SECS
//! ```
//!
//! Telemetry (`/robotN/telemetry`, 64 B): reliable, transient local, keep
//! last 1000 — rmw_zenoh maps that to an advanced publisher with a cache
//! and miss detection, so a subscriber recovers what a router restart
//! lost. Camera (`/robotN/camera`, CAM_BYTES): best effort, keep last 1.
//! Bytes 8..16 of every sample carry its number and 16..24 its send time
//! (ns since the Unix epoch; the lab's namespaces share one clock). Every
//! robot also serves `/robotN/add` (`example_interfaces/srv/AddTwoInts`, a
//! Zenoh queryable as rmw_zenoh has it), which the cloud calls round-robin
//! at 10 calls/s from 3 s to CALL_SECS after it starts. Robots and the
//! cloud print one JSON line at the end.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferry::config::zenoh::{Mode, ZenohConfig};
use ferry::msgs::example_interfaces::srv::{AddTwoIntsRequest, AddTwoIntsResponse};
use ferry::{Config, DiscoveryRange, Node, Qos, RawBytes, TypeHash};

const TYPE: &str = "ferry_bench/msg/Blob";

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn node(name: &str, mode: Mode, connect: &str, listen: &str) -> Node {
    let z = ZenohConfig {
        mode,
        connect: if connect.is_empty() {
            vec![]
        } else {
            vec![format!("tcp/{connect}")]
        },
        listen: if listen.is_empty() {
            vec![]
        } else {
            vec![format!("tcp/{listen}")]
        },
        ..ZenohConfig::default()
    };
    Node::builder()
        .name(name)
        .config(Config {
            domain_id: 70,
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

fn telemetry_qos() -> Qos {
    Qos::default().keep_last(1000).transient_local()
}

fn camera_qos() -> Qos {
    Qos::sensor_data().keep_last(1)
}

fn mode(s: &str) -> Mode {
    match s {
        "peer" => Mode::Peer,
        "client" => Mode::Client,
        _ => {
            eprintln!("MODE is peer or client");
            std::process::exit(2)
        }
    }
}

fn sample(size: usize, seq: u64) -> RawBytes {
    // CDR: encapsulation (little endian), then the sequence's length.
    let mut s = vec![0u8; 8 + size.max(16)];
    s[1] = 1;
    s[4..8].copy_from_slice(&(size.max(16) as u32).to_le_bytes());
    s[8..16].copy_from_slice(&seq.to_le_bytes());
    s[16..24].copy_from_slice(&now_ns().to_le_bytes());
    RawBytes::new(s)
}

fn robot(args: &[String]) {
    let [id, connect, m, secs, tel_hz, cam_bytes, cam_hz] = args else {
        eprintln!("robot ID CONNECT MODE SECS TEL_HZ CAM_BYTES CAM_HZ");
        std::process::exit(2)
    };
    let num = |s: &String| s.parse::<f64>().unwrap_or(0.0);
    let n = node(&format!("robot{id}"), mode(m), connect, "");
    let tel = n
        .publisher::<RawBytes>(&format!("/robot{id}/telemetry"))
        .qos(telemetry_qos())
        .type_info(TYPE, TypeHash([7; 32]))
        .build()
        .unwrap();
    let cam = n
        .publisher::<RawBytes>(&format!("/robot{id}/camera"))
        .qos(camera_qos())
        .type_info(TYPE, TypeHash([7; 32]))
        .build()
        .unwrap();
    let _add = n
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>(&format!("/robot{id}/add"), |r| {
            AddTwoIntsResponse { sum: r.a + r.b }
        })
        .build()
        .unwrap();
    // The cloud subscribes before the robots start.
    let _ = tel.wait_for_subscribers(1, Duration::from_secs(20));
    let end = Instant::now() + Duration::from_secs_f64(num(secs));
    let (tel_period, cam_period) = (
        Duration::from_secs_f64(1.0 / num(tel_hz).max(0.1)),
        Duration::from_secs_f64(1.0 / num(cam_hz).max(0.1)),
    );
    let (mut next_tel, mut next_cam) = (Instant::now(), Instant::now());
    let (mut t, mut c, mut errors) = (0u64, 0u64, 0u64);
    let cam_size = num(cam_bytes) as usize;
    while Instant::now() < end {
        let now = Instant::now();
        if now >= next_tel {
            t += 1;
            errors += u64::from(tel.publish(sample(64, t)).is_err());
            next_tel += tel_period;
        }
        if cam_size > 0 && now >= next_cam {
            c += 1;
            errors += u64::from(cam.publish(sample(cam_size, c)).is_err());
            next_cam += cam_period;
        }
        let next = next_tel.min(if cam_size > 0 { next_cam } else { next_tel });
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    println!(
        r#"{{"role": "robot", "id": {id}, "telemetry": {t}, "camera": {c}, "errors": {errors}}}"#
    );
    // Stay a while: a subscriber may still recover from the cache.
    std::thread::sleep(Duration::from_secs(3));
}

#[derive(Default)]
struct Stream {
    seqs: HashSet<u64>,
    dups: u64,
    latencies_us: Vec<u64>,
}

fn cloud(args: &[String]) {
    let [robots, connect, m, secs, call_secs] = args else {
        eprintln!("cloud ROBOTS CONNECT MODE SECS CALL_SECS");
        std::process::exit(2)
    };
    let robots: u32 = robots.parse().unwrap_or(1);
    let n = node("cloud", mode(m), connect, "");
    let mut subs = Vec::new();
    let tel = Arc::new(Mutex::new(Stream::default()));
    let cam = Arc::new(Mutex::new(Stream::default()));
    for id in 1..=robots {
        for (topic, qos, stream) in [
            ("telemetry", telemetry_qos(), &tel),
            ("camera", camera_qos(), &cam),
        ] {
            let stream = stream.clone();
            let sub = n
                .subscriber::<RawBytes>(&format!("/robot{id}/{topic}"))
                .qos(qos)
                .type_info(TYPE, TypeHash([7; 32]))
                .callback(move |s| {
                    let b = &s.0;
                    if b.len() < 24 {
                        return;
                    }
                    let word = |i: usize| {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(&b[i..i + 8]);
                        u64::from_le_bytes(a)
                    };
                    let (seq, sent) = (word(8), word(16));
                    let mut st = stream.lock().unwrap();
                    if !st.seqs.insert((u64::from(id) << 40) | seq) {
                        st.dups += 1;
                    }
                    st.latencies_us.push(now_ns().saturating_sub(sent) / 1000);
                })
                .build()
                .unwrap();
            subs.push(sub);
        }
    }
    println!(r#"{{"role": "cloud", "ready": true}}"#);
    let start = Instant::now();
    let calls = calls(
        &n,
        robots,
        start + Duration::from_secs_f64(call_secs.parse().unwrap_or(0.0)),
    );
    let secs = Duration::from_secs_f64(secs.parse().unwrap_or(10.0));
    if let Some(d) = (start + secs).checked_duration_since(Instant::now()) {
        std::thread::sleep(d);
    }
    let line = |name: &str, s: &Stream| {
        let mut l = s.latencies_us.clone();
        l.sort_unstable();
        let q = |p: f64| {
            l.get(((l.len() as f64 - 1.0) * p) as usize)
                .copied()
                .unwrap_or(0)
        };
        format!(
            r#""{name}": {{"received": {}, "duplicates": {}, "p50_us": {}, "p99_us": {}, "max_us": {}}}"#,
            s.seqs.len(),
            s.dups,
            q(0.5),
            q(0.99),
            l.last().copied().unwrap_or(0)
        )
    };
    let (t, c) = (tel.lock().unwrap(), cam.lock().unwrap());
    // The telemetry missing per robot, as ranges below its last sample
    // received (to tell a lost start from a gap), and that last sample (a
    // stream that stopped shows a low one).
    let mut missing = Vec::new();
    for id in 1..=u64::from(robots) {
        let mine: std::collections::BTreeSet<u64> = t
            .seqs
            .iter()
            .filter(|k| *k >> 40 == id)
            .map(|k| k & ((1 << 40) - 1))
            .collect();
        let top = mine.last().copied().unwrap_or(0);
        let mut ranges = Vec::new();
        let mut seq = 1;
        while seq <= top {
            if mine.contains(&seq) {
                seq += 1;
                continue;
            }
            let from = seq;
            while seq <= top && !mine.contains(&seq) {
                seq += 1;
            }
            ranges.push(format!("{from}..{}", seq - 1));
        }
        if !ranges.is_empty() {
            missing.push(format!("robot {id}: {} (last {top})", ranges.join(" ")));
        }
    }
    eprintln!(
        "telemetry missing below each robot's last: [{}]",
        missing.join("; ")
    );
    let (ok, failed, mut l) = calls;
    l.sort_unstable();
    let q = |p: f64| {
        l.get(((l.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    println!(
        r#"{{"role": "cloud", {}, {}, "calls": {{"ok": {ok}, "failed": {failed}, "p50_us": {}, "p99_us": {}}}}}"#,
        line("telemetry", &t),
        line("camera", &c),
        q(0.5),
        q(0.99)
    );
}

/// Calls the robots' `/robotN/add` round-robin at 10 calls/s from 3 s in
/// until `end` (while the robots run), each with a 2 s timeout: (answered
/// right, failed, latencies of the answered in µs).
fn calls(n: &Node, robots: u32, end: Instant) -> (u64, u64, Vec<u64>) {
    let clients: Vec<_> = (1..=robots)
        .map(|id| {
            n.client::<AddTwoIntsRequest, AddTwoIntsResponse>(&format!("/robot{id}/add"))
                .build()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    let (mut ok, mut failed, mut lat) = (0u64, 0u64, Vec::new());
    let mut next = Instant::now();
    for (i, c) in clients.iter().cycle().enumerate() {
        if Instant::now() >= end {
            break;
        }
        let a = i as i64;
        let t = Instant::now();
        match c.call(AddTwoIntsRequest { a, b: 1 }, Duration::from_secs(2)) {
            Ok(r) if r.sum == a + 1 => {
                ok += 1;
                lat.push(t.elapsed().as_micros() as u64);
            }
            _ => failed += 1,
        }
        next += Duration::from_millis(100);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    (ok, failed, lat)
}

fn main() {
    // FERRY_LOG=zenoh_ext=trace,… : what Zenoh's advanced subscriber did.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("FERRY_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("router") => {
            let [_, listen, secs] = &args[..] else {
                eprintln!("router LISTEN SECS");
                std::process::exit(2)
            };
            let _n = node("router", Mode::Router, "", listen);
            println!(r#"{{"role": "router", "ready": true}}"#);
            std::thread::sleep(Duration::from_secs_f64(secs.parse().unwrap_or(60.0)));
        }
        Some("robot") => robot(&args[1..]),
        Some("cloud") => cloud(&args[1..]),
        _ => {
            eprintln!("zenoh_fleet router|robot|cloud …");
            std::process::exit(2)
        }
    }
}
