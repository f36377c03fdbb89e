//! Seed 001's Table II on the lab: 32–512 KB at 30 Hz, reliable, over an
//! emulated 802.11ac link (300 Mbit/s, 2 ± 1 ms), ideal / 1 % / 20 % loss in
//! both directions / a 20 s outage. Reception rate (received / span from
//! first to last), mean latency and jitter (std dev), per cell.
//!
//! `ferry-wireless run [--quick]` orchestrates; it starts itself as `pub` on
//! host A and `sub` on host B (separate network, IPC and /dev/shm).

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};
use ferry::{Node, Qos, RawBytes};
use ferry_lab::{lte, wifi, Lab, LabConfig, Side};

#[derive(Parser)]
#[command(name = "ferry-wireless")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the grid and print the table.
    Run {
        /// 60 messages per cell, 64 and 512 KB, no outage cell (CI).
        #[arg(long)]
        quick: bool,
        /// Messages per cell (default 1000, quick 60).
        #[arg(long)]
        count: Option<u32>,
        /// Payload sizes in KB.
        #[arg(long, value_delimiter = ',')]
        sizes: Option<Vec<u32>>,
        /// Conditions: ideal, loss1, loss10, loss20, outage.
        #[arg(long, value_delimiter = ',')]
        conditions: Option<Vec<String>>,
        /// Write Markdown and JSON here (without extension).
        #[arg(long)]
        out: Option<String>,
        /// Outage window `START:END`, seconds from link start.
        #[arg(long, default_value = "8:28")]
        outage: String,
        /// Link preset: wifi (seed 001's) or lte.
        #[arg(long, default_value = "wifi")]
        link: String,
    },
    /// The same samples at 0.2, 1 and 10 Hz on the LTE-like link: a slow
    /// stream must not pay for its idleness (issue 20, item 3).
    Rates {
        /// Fewer samples per rate (CI).
        #[arg(long)]
        quick: bool,
        /// Payload in KB.
        #[arg(long, default_value_t = 32)]
        size_kb: u32,
        /// Write Markdown and JSON here (without extension).
        #[arg(long)]
        out: Option<String>,
    },
    /// Publisher role (host A).
    Pub {
        size: usize,
        count: u32,
        #[arg(long, default_value_t = HZ)]
        hz: f64,
    },
    /// Subscriber role (host B): prints one JSON line of results.
    Sub {
        count: u32,
        #[arg(long, default_value_t = 0)]
        outage_end_ns: u64,
        #[arg(long, default_value_t = HZ)]
        hz: f64,
    },
}

const HZ: f64 = 30.0;
const DOMAIN: &str = "77";

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn node(name: &str) -> Node {
    Node::builder()
        .name(name)
        .build()
        .unwrap_or_else(|e| panic!("node: {e}"))
}

/// The QoS of both roles: the paper's strict reliability, or best effort
/// with `FERRY_WIRELESS_QOS=best-effort` (a camera stream: every sample that
/// arrives whole counts; the subscriber keeps up to 1000).
fn qos() -> Qos {
    match std::env::var("FERRY_WIRELESS_QOS").as_deref() {
        Ok("best-effort") => Qos::default().best_effort().keep_last(1000),
        _ => Qos::default().reliable().keep_all(),
    }
}

/// `FERRY_WIRELESS_ZENOH=1`: a ROS 2 type name and hash on `/table2`,
/// which the Zenoh path's keys need (bench/grid.py's `ferry-zenoh` peer,
/// with a `[[topics]]` pin to Zenoh in `FERRY_CONFIG`).
fn ros_type() -> Option<(&'static str, ferry::TypeHash)> {
    std::env::var_os("FERRY_WIRELESS_ZENOH")
        .map(|_| ("ferry_lab/msg/Table2", ferry::TypeHash([0x7a; 32])))
}

fn publisher(size: usize, count: u32, hz: f64) {
    let n = node("table2_pub");
    let mut b = n
        .publisher::<RawBytes>("/table2") // The paper's strict reliability: RELIABLE + KEEP_ALL with the
        // history bounded (ferry bounds it in bytes: one second of the link,
        // = N_HC samples); a full history blocks the writer instead of
        // dropping, and the application retries.
        .qos(qos());
    if let Some((name, hash)) = ros_type() {
        b = b.type_info(name, hash);
    }
    let p = b.build().unwrap();
    if !p.wait_for_subscribers(1, Duration::from_secs(20)) {
        eprintln!("pub: no subscriber");
        std::process::exit(2);
    }
    std::thread::sleep(Duration::from_millis(500));
    let period = Duration::from_secs_f64(1.0 / hz);
    let mut next = Instant::now();
    let mut data = vec![0u8; size.max(16)];
    let (mut failed, mut blocked_samples) = (0u32, 0u32);
    let mut in_publish = Duration::ZERO;
    let t_send = Instant::now();
    // FERRY_LAB_TRACE=1: the connection's figures once a second.
    let trace = std::env::var_os("FERRY_LAB_TRACE").is_some();
    for seq in 0..count {
        if trace && seq % hz.max(1.0) as u32 == 0 {
            if let Some(c) = p.connections().first() {
                eprintln!("pub {seq}: {:?}", c.stats);
            }
        }
        data[..4].copy_from_slice(&seq.to_le_bytes());
        // The send time rides in the payload (as the peers' do), stamped
        // before the first attempt: time spent blocked counts as latency.
        data[8..16].copy_from_slice(&now_ns().to_le_bytes());
        let mut blocked = false;
        let called = Instant::now();
        let give_up = called + Duration::from_secs(120);
        while let Err(e) = p.publish(RawBytes::new(data.clone())) {
            if !matches!(e, ferry::PublishError::Blocked { .. }) || Instant::now() > give_up {
                eprintln!("pub: sample {seq}: {e}");
                failed += 1;
                break;
            }
            blocked = true;
        }
        // Held back: refused at least once, or the call itself blocked
        // (keep_all waits inside `publish` up to keep_all_block_ms) for
        // more than a tenth of the period (at least 2 ms).
        let took = called.elapsed();
        in_publish += took;
        if blocked || took > (period / 10).max(Duration::from_millis(2)) {
            blocked_samples += 1;
        }
        next += period;
        if blocked {
            // Like a ROS timer: no burst to catch up after a blocked publish.
            next = Instant::now() + period;
        }
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    let send_s = t_send.elapsed().as_secs_f64();
    // Let repairs finish before the connection goes.
    std::thread::sleep(Duration::from_secs(4));
    let c = p.connections();
    eprintln!("pub: {:?}", c.first().map(|c| (c.transport, c.stats)));
    // Back-pressure as the writer saw it: samples held back, samples given
    // up, and the time spent in `publish`.
    println!(
        "{{\"role\":\"pub\",\"attempted\":{count},\"written\":{},\"blocked\":{blocked_samples},\"failed\":{failed},\"send_s\":{send_s:.2},\"publish_s\":{:.2}}}",
        count - failed,
        in_publish.as_secs_f64()
    );
}

fn subscriber(count: u32, outage_end_ns: u64, sent_hz: f64) {
    let n = node("table2_sub");
    let mut b = n.subscriber::<RawBytes>("/table2").qos(qos());
    if let Some((name, hash)) = ros_type() {
        b = b.type_info(name, hash);
    }
    let s = b.build().unwrap();
    let mut rx: Vec<(u64, u32, f64)> = Vec::new(); // (recv ns, seq, latency ms)
    let limit = Instant::now() + Duration::from_secs_f64(count as f64 / sent_hz + 60.0);
    let mut last = Instant::now();
    let mut path = String::new();
    while Instant::now() < limit && rx.len() < count as usize {
        match s.recv_timeout(Duration::from_millis(200)) {
            Ok(x) => {
                let t = now_ns();
                let seq = u32::from_le_bytes(x[..4].try_into().unwrap_or([0; 4]));
                let sent = x
                    .get(8..16)
                    .and_then(|b| b.try_into().ok())
                    .map_or(x.info.source_time_ns, u64::from_le_bytes);
                rx.push((t, seq, t.saturating_sub(sent) as f64 / 1e6));
                last = Instant::now();
                if path.is_empty() {
                    path = x.info.transport.to_string();
                }
            }
            // Done when nothing came for 12 s — counted from the link's
            // return when there is an outage.
            Err(_)
                if !rx.is_empty()
                    && last.elapsed() > Duration::from_secs_f64(12.0 + 1.0 / sent_hz)
                    && now_ns() > outage_end_ns + 12_000_000_000 =>
            {
                break
            }
            Err(_) => {}
        }
    }
    let received = rx.len();
    let span = match (rx.first(), rx.last()) {
        (Some(a), Some(b)) if received > 1 => (b.0 - a.0) as f64 / 1e9,
        _ => 0.0,
    };
    let hz = if span > 0.0 {
        (received - 1) as f64 / span
    } else {
        0.0
    };
    let lat: Vec<f64> = rx.iter().map(|r| r.2).collect();
    let mean = lat.iter().sum::<f64>() / lat.len().max(1) as f64;
    let std =
        (lat.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / lat.len().max(1) as f64).sqrt();
    // Recovery: after the link returns, when do 30 consecutive samples
    // arrive at ≥ 29 Hz (each within 1/29 s of the previous on average)?
    let recovery = (outage_end_ns > 0).then(|| {
        let after: Vec<u64> = rx
            .iter()
            .map(|r| r.0)
            .filter(|t| *t >= outage_end_ns)
            .collect();
        after
            .windows(30)
            .find(|w| (w[29] - w[0]) as f64 / 1e9 <= 1.0) // 29 gaps in ≤ 1 s: ≥ 29 Hz
            .map(|w| (w[0] - outage_end_ns) as f64 / 1e9)
            .unwrap_or(f64::NAN)
    });
    // First sample delivered after the link returned.
    let first_after = (outage_end_ns > 0)
        .then(|| rx.iter().map(|r| r.0).find(|t| *t >= outage_end_ns))
        .flatten()
        .map(|t| (t - outage_end_ns) as f64 / 1e9);
    let lost = count as usize - received;
    let mut seqs: Vec<u32> = rx.iter().map(|r| r.1).collect();
    let out_of_order = seqs.windows(2).filter(|w| w[1] < w[0]).count();
    seqs.sort_unstable();
    seqs.dedup();
    let unique = seqs.len();
    let mut sorted = lat.clone();
    sorted.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        sorted
            .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let j = |v: f64| {
        if v.is_finite() {
            format!("{v:.1}")
        } else {
            "null".into()
        }
    };
    let (p50, p99, max) = (j(pct(0.5)), j(pct(0.99)), j(pct(1.0)));
    println!(
        "{{\"role\":\"sub\",\"received\":{received},\"unique\":{unique},\"out_of_order\":{out_of_order},\"lost\":{lost},\"hz\":{hz:.2},\"lat_ms\":{mean:.1},\"jitter_ms\":{std:.1},\"p50_ms\":{p50},\"p99_ms\":{p99},\"max_ms\":{max},\"recovery_s\":{},\"first_after_s\":{},\"path\":\"{path}\"}}",
        recovery.filter(|r| r.is_finite()).map(|r| format!("{r:.2}")).unwrap_or("null".into()),
        first_after.map(|r| format!("{r:.3}")).unwrap_or("null".into())
    );
}

struct Cell {
    cond: String,
    size_kb: u32,
    result: serde_json::Value,
}

#[allow(clippy::too_many_arguments)]
fn run_cell(
    exe: &str,
    mut link: ferry_lab::LinkConfig,
    cond: &str,
    size_kb: u32,
    count: u32,
    hz: f64,
    subnet: u8,
    outage: (Duration, Duration),
) -> serde_json::Value {
    match cond {
        "loss1" => link.loss = 0.01,
        "loss10" => link.loss = 0.1,
        "loss20" => link.loss = 0.2,
        "outage" => link.outages = vec![outage],
        _ => {}
    }
    let lab = Lab::up(LabConfig::symmetric("flw", subnet, link)).expect("lab up");
    let start_ns = now_ns() - lab.elapsed().as_nanos() as u64;
    let env = format!("FERRY_DOMAIN_ID={DOMAIN} FERRY_DISCOVERY=subnet");
    let outage_end = if cond == "outage" {
        start_ns + outage.1.as_nanos() as u64
    } else {
        0
    };
    let sub = lab
        .command(
            Side::B,
            &format!("{env} exec {exe} sub {count} --outage-end-ns {outage_end} --hz {hz}"),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut publ = lab
        .command(
            Side::A,
            &format!(
                "{env} exec {exe} pub {} {count} --hz {hz}",
                size_kb as usize * 1000
            ),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = sub.wait_with_output().unwrap();
    let _ = publ.kill();
    let _ = publ.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("{}"))
        .unwrap_or(serde_json::json!({"error": text.to_string()}))
}

fn run(
    quick: bool,
    count: Option<u32>,
    sizes: Option<Vec<u32>>,
    conds: Option<Vec<String>>,
    out: Option<String>,
    outage: &str,
    link: &str,
) {
    let preset = match link {
        "wifi" => wifi(),
        "lte" => lte(),
        other => {
            eprintln!("ferry-wireless: unknown --link {other} (wifi, lte)");
            std::process::exit(2);
        }
    };
    let (a, b) = outage.split_once(':').expect("--outage START:END");
    let outage = (
        Duration::from_secs_f64(a.parse().expect("outage start")),
        Duration::from_secs_f64(b.parse().expect("outage end")),
    );
    let exe = std::env::current_exe().unwrap().display().to_string();
    let count = count.unwrap_or(if quick { 60 } else { 1000 });
    let sizes = sizes.unwrap_or(if quick {
        vec![64, 512]
    } else {
        vec![32, 64, 128, 256, 512]
    });
    let conds = conds.unwrap_or_else(|| {
        if quick {
            vec!["ideal", "loss20"]
        } else {
            vec!["ideal", "loss1", "loss20", "outage"]
        }
        .into_iter()
        .map(String::from)
        .collect()
    });
    let mut cells = Vec::new();
    for cond in &conds {
        for &kb in &sizes {
            let t = Instant::now();
            let r = run_cell(&exe, preset.clone(), cond, kb, count, HZ, 11, outage);
            eprintln!(
                "{cond:>7} {kb:>4} KB: {r} ({:.0} s)",
                t.elapsed().as_secs_f64()
            );
            cells.push(Cell {
                cond: cond.clone(),
                size_kb: kb,
                result: r,
            });
        }
    }
    let mut md = String::new();
    md.push_str("| condition | payload | received | rate (Hz) | mean latency (ms) | jitter (ms) | recovery after outage (s) | path |\n|---|---:|---:|---:|---:|---:|---:|---|\n");
    for c in &cells {
        let r = &c.result;
        md.push_str(&format!(
            "| {} | {} KB | {}/{} | {} | {} | {} | {} | {} |\n",
            c.cond,
            c.size_kb,
            r["received"],
            count,
            r["hz"],
            r["lat_ms"],
            r["jitter_ms"],
            if r["recovery_s"].is_null() {
                "-".to_string()
            } else {
                r["recovery_s"].to_string()
            },
            r["path"].as_str().unwrap_or("?")
        ));
    }
    println!("{md}");
    if let Some(o) = out {
        std::fs::File::create(format!("{o}.md"))
            .and_then(|mut f| f.write_all(md.as_bytes()))
            .expect("write md");
        let json: Vec<serde_json::Value> = cells.iter().map(|c| serde_json::json!({"condition": c.cond, "size_kb": c.size_kb, "count": count, "result": c.result})).collect();
        std::fs::write(
            format!("{o}.json"),
            serde_json::to_string_pretty(&json).unwrap(),
        )
        .expect("write json");
    }
}

/// The same payload at 0.2, 1 and 10 Hz on the LTE-like link; latency of
/// each relative to the 10 Hz stream.
fn rates(quick: bool, size_kb: u32, out: Option<String>) {
    let exe = std::env::current_exe().unwrap().display().to_string();
    let cells: &[(f64, u32)] = if quick {
        &[(0.2, 4), (1.0, 8), (10.0, 40)]
    } else {
        &[(0.2, 24), (1.0, 60), (10.0, 300)]
    };
    let mut rows = Vec::new();
    for &(hz, count) in cells {
        let t = Instant::now();
        let r = run_cell(
            &exe,
            lte(),
            "ideal",
            size_kb,
            count,
            hz,
            12,
            (Duration::ZERO, Duration::ZERO),
        );
        eprintln!(
            "{hz:>5} Hz {size_kb} KB: {r} ({:.0} s)",
            t.elapsed().as_secs_f64()
        );
        rows.push((hz, count, r));
    }
    let base = rows
        .iter()
        .find(|r| r.0 == 10.0)
        .and_then(|r| r.2["lat_ms"].as_f64())
        .unwrap_or(f64::NAN);
    let mut md = format!(
        "LTE-like link (50 Mbit/s, 25 ± 10 ms one way), {size_kb} KB reliable keep_all samples, \
         default config (`ferry-wireless rates{}`).\n\n\
         | rate | received | mean latency (ms) | jitter (ms) | vs 10 Hz |\n|---:|---:|---:|---:|---:|\n",
        if quick { " --quick" } else { "" }
    );
    for (hz, count, r) in &rows {
        let lat = r["lat_ms"].as_f64().unwrap_or(f64::NAN);
        md.push_str(&format!(
            "| {hz} Hz | {}/{count} | {lat:.1} | {} | {:.2}× |\n",
            r["received"],
            r["jitter_ms"],
            lat / base
        ));
    }
    println!("{md}");
    if let Some(o) = out {
        let json: Vec<serde_json::Value> = rows
            .iter()
            .map(|(hz, count, r)| serde_json::json!({"hz": hz, "count": count, "size_kb": size_kb, "result": r}))
            .collect();
        std::fs::write(format!("{o}.md"), &md).expect("write md");
        std::fs::write(
            format!("{o}.json"),
            serde_json::to_string_pretty(&json).unwrap(),
        )
        .expect("write json");
    }
}

fn main() {
    match Cli::parse().cmd {
        Cmd::Run {
            quick,
            count,
            sizes,
            conditions,
            out,
            outage,
            link,
        } => run(quick, count, sizes, conditions, out, &outage, &link),
        Cmd::Rates {
            quick,
            size_kb,
            out,
        } => rates(quick, size_kb, out),
        Cmd::Pub { size, count, hz } => publisher(size, count, hz),
        Cmd::Sub {
            count,
            outage_end_ns,
            hz,
        } => subscriber(count, outage_end_ns, hz),
    }
}
