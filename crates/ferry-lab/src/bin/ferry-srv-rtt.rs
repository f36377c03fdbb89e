//! Service round trip on every path, side by side in one run: a client
//! calls an echo service (the request's bytes come back) pinned to the
//! in-process path (both in this process), shared memory, UDP and TCP
//! (the service in a second process on this host). TCP is what every
//! same-host call paid before services learned shared memory and UDP; the
//! table gives each path's ratio to it.
//!
//! `ferry-srv-rtt run [--quick] [--out bench/results/services]` spawns the
//! service process itself (this binary, `serve` role) for every path.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, Subcommand};
use ferry::{Config, DiscoveryRange, Node, Qos, RawBytes, TransportKind};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Measure every path and size; print (and write) the table.
    Run {
        /// 200 calls per cell and two sizes instead of 2000 and three (CI).
        #[arg(long)]
        quick: bool,
        /// Write Markdown and JSON here (without extension).
        #[arg(long)]
        out: Option<String>,
        /// Whole rounds over every path (default 3, quick 1); the figures
        /// are each cell's median over the rounds.
        #[arg(long)]
        rounds: Option<usize>,
        /// Pace UDP at `udp_link_mbps` on both sides (`udp_adaptive_rate =
        /// false`) instead of the default (following the path).
        #[arg(long)]
        udp_fixed_rate: bool,
    },
    /// The service side of one path (spawned by `run`).
    #[command(hide = true)]
    Serve {
        path: String,
        domain: u16,
        #[arg(long)]
        udp_fixed_rate: bool,
    },
}

const PATHS: [TransportKind; 4] = [
    TransportKind::InProcess,
    TransportKind::SharedMemory,
    TransportKind::Udp,
    TransportKind::Tcp,
];

/// `--udp-fixed-rate`: both sides pace UDP at `udp_link_mbps` instead of
/// following the path (`udp_adaptive_rate = false`).
static FIXED_RATE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn config(domain: u16) -> Config {
    Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        udp_adaptive_rate: !FIXED_RATE.load(std::sync::atomic::Ordering::Relaxed),
        ..Config::default()
    }
}

fn qos(path: TransportKind) -> Qos {
    Qos::services_default().transport(path)
}

/// An echo service on `node`, pinned to `path`.
fn echo(node: &Node, path: TransportKind) -> ferry::Service<RawBytes, RawBytes> {
    node.service::<RawBytes, RawBytes, _>("/rtt/echo", |r| RawBytes(r.0.clone()))
        .qos(qos(path))
        .build()
        .expect("service")
}

fn serve(path: &str, domain: u16) {
    let path: TransportKind = path.parse().expect("path");
    let node = Node::builder()
        .name("echo")
        .config(config(domain))
        .build()
        .expect("node");
    let _srv = echo(&node, path);
    println!("ready");
    let _ = std::io::stdout().flush();
    std::thread::sleep(Duration::from_secs(3600));
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// (p50, p99) call round trip in µs per size over `path`; NaN when a call
/// failed (the cell is not measured).
fn measure(path: TransportKind, domain: u16, sizes: &[usize], count: usize) -> Vec<(f64, f64)> {
    let node = Node::builder()
        .name("client")
        .config(config(domain))
        .build()
        .expect("node");
    // In-process: the service lives here; otherwise in its own process.
    let mut child = None;
    let _local = if path == TransportKind::InProcess {
        Some(echo(&node, path))
    } else {
        let mut c = Command::new(std::env::current_exe().expect("exe"))
            .args(["serve", path.as_str(), &domain.to_string()])
            .args(
                FIXED_RATE
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .then_some("--udp-fixed-rate"),
            )
            .stdout(Stdio::piped())
            .spawn()
            .expect("service process");
        let mut line = String::new();
        BufReader::new(c.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("service ready");
        child = Some(c);
        None
    };
    let client = node
        .client::<RawBytes, RawBytes>("/rtt/echo")
        .qos(qos(path))
        .build()
        .expect("client");
    let t = Duration::from_secs(10);
    let mut out = Vec::new();
    if client.wait_for_service(t) {
        let took = &client.connections()[0].transport;
        assert_eq!(*took, path, "pinned to {path}, the call took {took}");
        for &size in sizes {
            let payload = Bytes::from(vec![0x5a; size]);
            let mut rtts = Vec::with_capacity(count);
            let mut ok = true;
            for i in 0..count + 20 {
                let t0 = Instant::now();
                match client.call(RawBytes(payload.clone()), t) {
                    Ok(r) if r.0.len() == size => {}
                    _ => {
                        ok = false;
                        break;
                    }
                }
                if i >= 20 {
                    rtts.push(t0.elapsed().as_secs_f64() * 1e6);
                }
            }
            out.push(if ok {
                (percentile(&mut rtts, 0.5), percentile(&mut rtts, 0.99))
            } else {
                (f64::NAN, f64::NAN)
            });
        }
    }
    while out.len() < sizes.len() {
        out.push((f64::NAN, f64::NAN));
    }
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
    out
}

fn size_name(n: usize) -> String {
    match n {
        n if n >= 1 << 20 => format!("{} MiB", n >> 20),
        n if n >= 1024 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    percentile(&mut v, 0.5)
}

fn run(quick: bool, out: Option<String>, rounds: Option<usize>, fixed: bool) {
    let sizes: &[usize] = if quick {
        &[64, 4096]
    } else {
        &[64, 4096, 65_536]
    };
    let count = if quick { 200 } else { 2000 };
    let rounds = rounds.unwrap_or(if quick { 1 } else { 3 });
    // cells[path][size] = per-round (p50, p99)
    let mut cells = vec![vec![Vec::new(); sizes.len()]; PATHS.len()];
    let base = 140 + (std::process::id() % 10) as u16 * 8;
    for round in 0..rounds {
        for (pi, &path) in PATHS.iter().enumerate() {
            let domain = base + pi as u16 + (round as u16 % 2) * 4;
            let r = measure(path, domain, sizes, count);
            for (si, v) in r.into_iter().enumerate() {
                cells[pi][si].push(v);
            }
        }
    }
    let tcp = PATHS
        .iter()
        .position(|p| *p == TransportKind::Tcp)
        .expect("tcp measured");
    let p50 = |pi: usize, si: usize| median(cells[pi][si].iter().map(|c| c.0).collect());
    let p99 = |pi: usize, si: usize| median(cells[pi][si].iter().map(|c| c.1).collect());
    let mut md = String::new();
    md.push_str(&format!(
        "Service call round trip (client → echo service → client), µs, p50 / p99; \
         {count} calls per cell after 20 warm-up calls, median of {rounds} round(s); \
         in-process: one process, the others: two processes on this host. \
         `× tcp`: p50 over TCP's p50 (below 1: faster than the TCP path every \
         same-host call took before). UDP paces {}.\n\n",
        if fixed {
            "at `udp_link_mbps` (`--udp-fixed-rate`)"
        } else {
            "following the path (default `udp_adaptive_rate`)"
        }
    ));
    md.push_str("| size | path | p50 | p99 | × tcp |\n|---|---|---|---|---|\n");
    let mut json = Vec::new();
    for (si, &size) in sizes.iter().enumerate() {
        for (pi, path) in PATHS.iter().enumerate() {
            let ratio = p50(pi, si) / p50(tcp, si);
            md.push_str(&format!(
                "| {} | {} | {:.1} | {:.1} | {:.2} |\n",
                size_name(size),
                path,
                p50(pi, si),
                p99(pi, si),
                ratio
            ));
            json.push(format!(
                "{{\"size\":{size},\"path\":\"{path}\",\"p50_us\":{:.2},\"p99_us\":{:.2}}}",
                p50(pi, si),
                p99(pi, si)
            ));
        }
    }
    print!("{md}");
    if let Some(o) = out {
        let _ = std::fs::write(format!("{o}.md"), &md);
        let _ = std::fs::write(format!("{o}.json"), format!("[{}]\n", json.join(",\n")));
    }
}

fn main() {
    match Cli::parse().cmd {
        Cmd::Run {
            quick,
            out,
            rounds,
            udp_fixed_rate,
        } => {
            FIXED_RATE.store(udp_fixed_rate, std::sync::atomic::Ordering::Relaxed);
            run(quick, out, rounds, udp_fixed_rate)
        }
        Cmd::Serve {
            path,
            domain,
            udp_fixed_rate,
        } => {
            FIXED_RATE.store(udp_fixed_rate, std::sync::atomic::Ordering::Relaxed);
            serve(&path, domain)
        }
    }
}
