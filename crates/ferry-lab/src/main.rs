//! `ferry-lab`: bring the lab up, check it against ping and iperf3, or run
//! commands on its two hosts.

use std::process::Stdio;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use ferry_lab::{custom, ideal, lte, wifi, Lab, LabConfig, LinkConfig, LinkStats, Side};

#[derive(Parser)]
#[command(
    name = "ferry-lab",
    about = "Two namespaces joined by a userspace link emulator"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct LinkArgs {
    /// wifi (300 Mbit/s, 2 ± 1 ms), lte (50 Mbit/s, 25 ± 10 ms) or ideal.
    #[arg(long, default_value = "wifi")]
    preset: String,
    /// Loss in percent, applied in both directions.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Outage `START:END` in seconds from link start (both directions).
    #[arg(long)]
    outage: Option<String>,
    /// Third octet of the lab subnet 10.99.N.0.
    #[arg(long, default_value_t = 7)]
    subnet: u8,
    /// Rate in Mbit/s instead of the preset's (a 50 ms queue at that rate).
    #[arg(long)]
    rate_mbps: Option<f64>,
    /// Mean one-way delay in ms instead of the preset's; the delay of each
    /// packet is uniform in ±40 % of it, in order.
    #[arg(long)]
    delay_ms: Option<f64>,
    /// Join the hosts with the kernel (veth + tbf + nftables loss, no
    /// delay) instead of the emulator.
    #[arg(long)]
    kernel: bool,
}

impl LinkArgs {
    fn config(&self, name: &str) -> Result<LabConfig, String> {
        let mut link: LinkConfig = match self.preset.as_str() {
            "wifi" => wifi(),
            "lte" => lte(),
            "ideal" => ideal(),
            p => return Err(format!("unknown preset `{p}` (wifi, lte, ideal)")),
        };
        if let Some(mbps) = self.rate_mbps {
            let custom = custom(mbps, self.delay_ms.unwrap_or(0.0));
            link.rate = custom.rate;
            link.queue = custom.queue;
        }
        if let Some(ms) = self.delay_ms {
            let custom = custom(0.0, ms);
            link.delay = custom.delay;
            link.jitter = custom.jitter;
        }
        link.loss = self.loss / 100.0;
        if let Some(o) = &self.outage {
            let (a, b) = o
                .split_once(':')
                .ok_or("outage must be START:END seconds")?;
            let a: f64 = a.parse().map_err(|_| "bad outage start")?;
            let b: f64 = b.parse().map_err(|_| "bad outage end")?;
            link.outages = vec![(Duration::from_secs_f64(a), Duration::from_secs_f64(b))];
        }
        if self.kernel && (!link.outages.is_empty()) {
            return Err("the kernel link has no outages (use the emulator)".into());
        }
        let mut cfg = LabConfig::symmetric(name, self.subnet, link);
        cfg.kernel = self.kernel;
        Ok(cfg)
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Validate the emulator with ping and iperf3 and measure its ceiling.
    Check {
        /// Shorter runs (CI).
        #[arg(long)]
        quick: bool,
    },
    /// Run a command on each host over the emulated link.
    Run {
        #[command(flatten)]
        link: LinkArgs,
        /// Command on host A (10.99.N.1).
        #[arg(long)]
        a: Option<String>,
        /// Command on host B (10.99.N.2).
        #[arg(long)]
        b: Option<String>,
        /// Kill both after this many seconds.
        #[arg(long, default_value_t = 60.0)]
        timeout: f64,
        /// End when B's command ends (A gets 8 s more to finish, then it
        /// is killed): B is the measuring side.
        #[arg(long)]
        until_b: bool,
    },
}

fn output(lab: &Lab, side: Side, cmd: &str) -> String {
    let o = lab.command(side, cmd).output().expect("run command");
    String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
}

/// (avg rtt ms, mdev ms, loss %) from ping's summary.
fn ping(lab: &Lab, count: u32) -> (f64, f64, f64) {
    let out = output(
        lab,
        Side::A,
        &format!("ping -q -c {count} -i 0.01 -W 1 {}", lab.addr(Side::B)),
    );
    let loss = out
        .split(" packet loss")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|s| s.trim_end_matches('%').parse().ok())
        .unwrap_or(f64::NAN);
    let rtt: Vec<f64> = out
        .split(" = ")
        .nth(1)
        .map(|s| {
            s.split(' ')
                .next()
                .unwrap_or("")
                .split('/')
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    (
        rtt.get(1).copied().unwrap_or(f64::NAN),
        rtt.get(3).copied().unwrap_or(f64::NAN),
        loss,
    )
}

/// TCP goodput A → B in Mbit/s.
fn iperf(lab: &Lab, secs: u32) -> f64 {
    let mut server = lab
        .command(
            Side::B,
            &format!("exec iperf3 -s -1 -B {}", lab.addr(Side::B)),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server");
    std::thread::sleep(Duration::from_millis(300));
    let out = output(
        lab,
        Side::A,
        &format!("iperf3 -J -t {secs} -c {}", lab.addr(Side::B)),
    );
    let _ = server.kill();
    let _ = server.wait();
    serde_json::from_str::<serde_json::Value>(&out)
        .ok()
        .and_then(|v| v["end"]["sum_received"]["bits_per_second"].as_f64())
        .map(|b| b / 1e6)
        .unwrap_or(f64::NAN)
}

fn check(quick: bool) -> Result<(), String> {
    let secs = if quick { 2 } else { 5 };
    let pings = if quick { 100 } else { 500 };
    println!(
        "| link | ping RTT avg (ms) | RTT mdev (ms) | ping loss | TCP A→B (Mbit/s) | expected |"
    );
    println!("|---|---:|---:|---:|---:|---|");
    let cases: Vec<(&str, LinkConfig, &str)> = vec![
        (
            "ideal (emulator ceiling)",
            ideal(),
            "RTT ≈ 0, TCP = emulator ceiling",
        ),
        (
            "wifi: 300 Mbit/s, 2 ± 1 ms",
            wifi(),
            "RTT ≈ 4 ms, TCP ≤ 300",
        ),
        (
            "wifi + 1 % loss both ways",
            LinkConfig {
                loss: 0.01,
                ..wifi()
            },
            "ping loss ≈ 2 %",
        ),
        (
            "wifi + 20 % loss both ways",
            LinkConfig {
                loss: 0.2,
                ..wifi()
            },
            "ping loss ≈ 36 %",
        ),
        ("lte: 50 Mbit/s, 25 ± 10 ms", lte(), "RTT ≈ 50 ms, TCP ≤ 50"),
    ];
    for (name, link, expected) in cases {
        let lab = Lab::up(LabConfig::symmetric("flchk", 8, link)).map_err(|e| e.to_string())?;
        let (rtt, mdev, loss) = ping(&lab, pings);
        let tcp = iperf(&lab, secs);
        println!("| {name} | {rtt:.2} | {mdev:.2} | {loss:.1} % | {tcp:.0} | {expected} |");
    }
    Ok(())
}

fn run_cmds(
    link: LinkArgs,
    a: Option<String>,
    b: Option<String>,
    timeout: f64,
    until_b: bool,
) -> Result<(), String> {
    let lab = Lab::up(link.config("flrun")?).map_err(|e| e.to_string())?;
    eprintln!(
        "lab up: A {} ⇄ B {} ({} preset, rate {:?} Mbit/s, delay {:?} ms, {} % loss, {} link)",
        lab.addr(Side::A),
        lab.addr(Side::B),
        link.preset,
        link.rate_mbps,
        link.delay_ms,
        link.loss,
        if link.kernel { "kernel" } else { "emulated" }
    );
    let mut kids = Vec::new();
    let b_started = b.is_some();
    if let Some(b) = b {
        kids.push(
            lab.command(Side::B, &b)
                .spawn()
                .map_err(|e| e.to_string())?,
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    if let Some(a) = a {
        kids.push(
            lab.command(Side::A, &a)
                .spawn()
                .map_err(|e| e.to_string())?,
        );
    }
    let mut end = Instant::now() + Duration::from_secs_f64(timeout);
    let has_b = until_b && b_started;
    let mut b_done = false;
    while Instant::now() < end && kids.iter_mut().any(|k| matches!(k.try_wait(), Ok(None))) {
        if has_b && !b_done && !matches!(kids[0].try_wait(), Ok(None)) {
            b_done = true;
            end = end.min(Instant::now() + Duration::from_secs(8));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for k in &mut kids {
        let _ = k.kill();
        let _ = k.wait();
    }
    let [ab, ba] = lab.stats();
    eprintln!("link A→B: {ab:?}\nlink B→A: {ba:?}");
    let js = |s: LinkStats| {
        serde_json::json!({"sent": s.sent, "delivered": s.delivered, "lost": s.lost,
            "outage_drops": s.outage_drops, "queue_drops": s.queue_drops,
            "bytes": s.bytes, "sent_bytes": s.sent_bytes})
    };
    eprintln!(
        "link json {}",
        serde_json::json!({"a_to_b": js(ab), "b_to_a": js(ba)})
    );
    Ok(())
}

fn main() {
    let r = match Cli::parse().cmd {
        Cmd::Check { quick } => check(quick),
        Cmd::Run {
            link,
            a,
            b,
            timeout,
            until_b,
        } => run_cmds(link, a, b, timeout, until_b),
    };
    if let Err(e) = r {
        eprintln!("ferry-lab: {e}");
        std::process::exit(1);
    }
}
