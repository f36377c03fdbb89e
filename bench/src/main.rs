//! `ferry-bench`: ferry's in-process and TCP paths beside Zenoh over TCP, in
//! one run, on one machine. See bench/README.md.
//!
//! The parent measures; it spawns itself twice as `serve` children (one
//! ferry, one zenoh) that echo pings and count throughput samples, and kills
//! them (by PID) when done or on error.

mod ferry_side;
mod measure;
mod proto;
mod report;
mod secure;
mod sink;
mod zenoh_side;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use measure::{LatencySummary, PingRun, TputSummary};
use proto::{ChildProc, Res};

const ZENOH_VERSION: &str = "1.10.2";

#[derive(Parser)]
#[command(
    name = "ferry-bench",
    about = "ferry in-process / TCP vs Zenoh over TCP, side by side"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// (internal) the child: echo pings, count throughput samples.
    #[command(alias = "pong")]
    Serve(ServeArgs),
    /// Rewrites <file>.md from a results <file>.json (report format changes).
    Render { json: PathBuf },
}

#[derive(Args)]
struct ServeArgs {
    #[arg(long, value_enum)]
    transport: Transport,
    /// zenoh: TCP port to listen on (127.0.0.1).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// zenoh: TLS with mutual certificates from this ferry keystore
    /// (`--security` runs).
    #[arg(long)]
    tls_keystore: Option<PathBuf>,
    /// Exit after this long even if the parent never closes stdin.
    #[arg(long, default_value_t = 1800)]
    max_secs: u64,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Transport {
    Ferry,
    Zenoh,
}

#[derive(Args, Clone, Debug)]
struct RunArgs {
    /// CI smoke: a few hundred samples, 0.5 s throughput runs, 1 round.
    #[arg(long)]
    quick: bool,
    /// Payload sizes in bytes [64,4096,65536,1048576; with --security
    /// 64,1024,65536,1048576,4194304: issue 22 names 1 KiB and 64 KiB].
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// Latency samples per size below 1 MiB [full 20000, quick 300].
    #[arg(long)]
    samples: Option<u64>,
    /// Latency samples at sizes ≥ 1 MiB [full 2000, quick 100].
    #[arg(long)]
    samples_large: Option<u64>,
    /// Length of one throughput run, seconds [full 2, quick 0.5].
    #[arg(long)]
    secs: Option<f64>,
    /// Warm-up before every latency cell and throughput run, seconds [full 1, quick 0.3].
    #[arg(long)]
    warmup: Option<f64>,
    /// ferry and Zenoh alternate this many times per cell (shared machine:
    /// load drifts) [full 3, quick 1].
    #[arg(long)]
    rounds: Option<u32>,
    /// ferry discovery domain of the parent and its child.
    #[arg(long, default_value_t = 150)]
    domain: u16,
    /// Output base path (.md and .json are added) [results/foundation, quick: results/foundation-quick].
    #[arg(long)]
    out: Option<PathBuf>,
    /// What TLS costs instead: ferry TCP and Zenoh TCP, each plain and
    /// with TLS (mutual certificates, one keystore), in one run [out:
    /// results/security-zenoh]. Uses discovery domains `domain` and
    /// `domain`+1.
    #[arg(long)]
    security: bool,
    /// ZENOH_RUNTIME value for both zenoh processes (default: zenoh's own).
    #[arg(long)]
    zenoh_runtime: Option<String>,
}

struct Plan {
    sizes: Vec<usize>,
    samples: u64,
    samples_large: u64,
    secs: Duration,
    warmup: Duration,
    rounds: u32,
}

impl Plan {
    fn new(a: &RunArgs) -> Self {
        let q = a.quick;
        Plan {
            sizes: a.sizes.clone().unwrap_or_else(|| {
                if a.security {
                    vec![64, 1024, 65536, 1 << 20, 4 << 20]
                } else {
                    vec![64, 4096, 65536, 1 << 20]
                }
            }),
            samples: a.samples.unwrap_or(if q { 300 } else { 20_000 }),
            samples_large: a.samples_large.unwrap_or(if q { 100 } else { 2_000 }),
            secs: Duration::from_secs_f64(a.secs.unwrap_or(if q { 0.5 } else { 2.0 })),
            warmup: Duration::from_secs_f64(a.warmup.unwrap_or(if q { 0.3 } else { 1.0 })),
            rounds: a.rounds.unwrap_or(if q { 1 } else { 3 }).max(1),
        }
    }
    fn samples_for(&self, size: usize) -> u64 {
        if size >= 1 << 20 {
            self.samples_large
        } else {
            self.samples
        }
    }
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "sizes": self.sizes, "samples": self.samples, "samples_large": self.samples_large,
            "throughput_secs": self.secs.as_secs_f64(), "warmup_secs": self.warmup.as_secs_f64(),
            "rounds": self.rounds,
            "method": format!(
                "ferry intra: {s} samples/size (1 MiB: {l}), publish→callback, Instant before publish to \
                 Instant in the callback. TCP latency: parent publishes one ping, blocks on its subscriber's \
                 receive (ferry recv_timeout / zenoh FIFO recv_timeout) for the pong with the same sequence \
                 number, one-way = RTT/2; the child echoes from its subscriber callback. {w:.1} s warm-up per \
                 cell, then {r} alternating rounds ferry/Zenoh. Throughput: {w:.1} s warm-up + {t:.1} s of \
                 back-to-back publishing per run, {r} alternating rounds; rate = payload delivered to the child \
                 between the parent's start of measured publishing and the end marker's arrival (both on \
                 CLOCK_MONOTONIC), over that window; a stall inside the window counts against the rate. ferry QoS \
                 reliable keep_all; Zenoh CongestionControl::Block (express for the ping-pong, batching for \
                 throughput), peer mode, TCP 127.0.0.1, scouting off.",
                s = self.samples, l = self.samples_large, w = self.warmup.as_secs_f64(),
                r = self.rounds, t = self.secs.as_secs_f64()
            ),
        })
    }
}

fn main() {
    if let Ok(filter) = std::env::var("FERRY_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let cli = Cli::parse();
    let r = match cli.cmd {
        Some(Cmd::Serve(s)) => serve(s),
        Some(Cmd::Render { json }) => render(&json),
        None => run(cli.run),
    };
    if let Err(e) = r {
        eprintln!("ferry-bench: {e}");
        std::process::exit(1);
    }
}

fn render(json: &std::path::Path) -> Res<()> {
    let r: report::Results = serde_json::from_str(&std::fs::read_to_string(json)?)?;
    let md = r.markdown();
    std::fs::write(json.with_extension("md"), &md)?;
    println!("{md}");
    Ok(())
}

fn serve(s: ServeArgs) -> Res<()> {
    let max = Duration::from_secs(s.max_secs);
    match s.transport {
        Transport::Ferry => ferry_side::serve(max),
        Transport::Zenoh => {
            let tls = match &s.tls_keystore {
                Some(dir) => Some(zenoh_side::Tls::from_keystore(dir, secure::ENCLAVE)?),
                None => None,
            };
            zenoh_side::serve(s.port, tls.as_ref(), max)
        }
    }
}

/// One run at a time on this machine: two parents in one ferry domain would
/// match each other's children and measure cross-talk.
fn exclusive() -> Res<std::fs::File> {
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/ferry-bench.lock")?;
    // SAFETY: flock on a file descriptor we own; no memory is involved.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err("another ferry-bench run holds /tmp/ferry-bench.lock".into());
    }
    Ok(f)
}

fn run(a: RunArgs) -> Res<()> {
    let _lock = exclusive()?;
    let plan = Plan::new(&a);
    if let Some(rt) = &a.zenoh_runtime {
        std::env::set_var("ZENOH_RUNTIME", rt);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = format!(
        "cd bench && CARGO_BUILD_JOBS=1 cargo build --release && ./target/release/ferry-bench {}",
        args.join(" ")
    )
    .trim_end()
    .to_string();
    if a.security {
        return secure::run(&a, &plan, command);
    }
    // Set before any runtime starts; the children inherit them.
    std::env::set_var("FERRY_DOMAIN_ID", a.domain.to_string());
    std::env::set_var("FERRY_DISCOVERY", "localhost");
    let machine_start = report::machine();

    eprintln!("ferry in-process: publish -> callback ...");
    let mut latency = ferry_side::intra(&plan.sizes, |s| plan.samples_for(s), plan.warmup)?;
    for l in &latency {
        eprintln!(
            "  {:>8} B  p50 {:>8} ns  p99 {:>8} ns",
            l.size, l.p50_ns, l.p99_ns
        );
    }

    let zport = proto::free_port()?;
    let env = [
        ("FERRY_DOMAIN_ID", a.domain.to_string()),
        ("FERRY_DISCOVERY", "localhost".to_string()),
    ];
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut fchild = ChildProc::spawn("ferry-serve", &s(&["serve", "--transport", "ferry"]), &env)?;
    let mut zchild = ChildProc::spawn(
        "zenoh-serve",
        &s(&[
            "serve",
            "--transport",
            "zenoh",
            "--port",
            &zport.to_string(),
        ]),
        &env,
    )?;
    let ready = |v: &serde_json::Value| v["ready"].as_bool() == Some(true);
    fchild.expect(Duration::from_secs(20), ready)?;
    zchild.expect(Duration::from_secs(20), ready)?;
    eprintln!(
        "children: ferry pid {}, zenoh pid {} (port {zport})",
        fchild.pid(),
        zchild.pid()
    );

    let t = Duration::from_secs(15);
    let node = ferry::Node::builder().name("bench_main").build()?;
    let mut fping = ferry_side::pinger(&node, false, t)?;
    let mut fblast = ferry_side::blaster(&node, ferry_side::keep_all(), false, t);
    // Diagnostic only (not the spec's QoS): reliable keep_last(1024) never
    // blocks the publisher (a full backlog drops its oldest frame, counted
    // as lost here), so it shows the path's capacity without the keep_all
    // stall described in bench/README.md.
    let mut fblast_kl = ferry_side::blaster(&node, ferry::Qos::default().keep_last(1024), false, t);
    let (zsession, mut zping, mut zblast) =
        zenoh_side::connect(zport, None, Duration::from_secs(15))?;

    for &size in &plan.sizes {
        let n = plan.samples_for(size);
        let per_round = n.div_ceil(plan.rounds as u64);
        let (mut f, mut z) = (PingRun::new(size), PingRun::new(size));
        f.warm_up(&mut fping, plan.warmup)?;
        z.warm_up(&mut zping, plan.warmup)?;
        for _ in 0..plan.rounds {
            f.record(&mut fping, per_round, Duration::from_secs(120))?;
            z.record(&mut zping, per_round, Duration::from_secs(120))?;
        }
        let m = "one-way = RTT/2";
        let fl = LatencySummary::from_hist("ferry-tcp", size, m, &f.hist, f.timeouts);
        let zl = LatencySummary::from_hist("zenoh-tcp", size, m, &z.hist, z.timeouts);
        eprintln!(
            "latency {size:>8} B  ferry p50 {:>7} p99 {:>7} ns | zenoh p50 {:>7} p99 {:>7} ns",
            fl.p50_ns, fl.p99_ns, zl.p50_ns, zl.p99_ns
        );
        latency.push(fl);
        latency.push(zl);
    }

    let mut throughput = Vec::new();
    let mut run_id = 0u64;
    for &size in &plan.sizes {
        let (mut fr, mut fklr, mut zr) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..plan.rounds {
            run_id += 1;
            fr.push(measure::throughput(
                &mut fblast,
                &mut fchild,
                size,
                run_id,
                plan.warmup,
                plan.secs,
            )?);
            run_id += 1;
            zr.push(measure::throughput(
                &mut zblast,
                &mut zchild,
                size,
                run_id,
                plan.warmup,
                plan.secs,
            )?);
            run_id += 1;
            fklr.push(measure::throughput(
                &mut fblast_kl,
                &mut fchild,
                size,
                run_id,
                plan.warmup,
                plan.secs,
            )?);
        }
        let f = TputSummary::new("ferry-tcp", size, fr);
        let z = TputSummary::new("zenoh-tcp", size, zr);
        let fkl = TputSummary::new("ferry-tcp-keep_last", size, fklr);
        for t in [&f, &z, &fkl] {
            eprintln!(
                "throughput {size:>8} B  {:<19} {:>10.0} msg/s {:>6.2} Gbit/s (lost {}, refused {}, stalled rounds {})",
                t.transport, t.msgs_per_s, t.gbit_per_s, t.lost, t.not_sent, t.stalled_rounds
            );
        }
        throughput.push(f);
        throughput.push(z);
        throughput.push(fkl);
    }

    // Orderly end: our ports first, then the children (by PID, in Drop).
    drop((fping, fblast, fblast_kl, node));
    drop((zping, zblast));
    let _ = zenoh::Wait::wait(zsession.close());
    drop(fchild);
    drop(zchild);

    let results = report::Results {
        command,
        ferry_source: report::source_state(),
        mode: if a.quick {
            "quick".into()
        } else {
            "full".into()
        },
        plan: plan.json(),
        machine_start,
        machine_end: report::machine(),
        zenoh_version: ZENOH_VERSION.into(),
        latency,
        throughput,
    };
    let md = results.markdown();
    report::publish(a.out.as_deref(), "foundation", a.quick, &results, md)
}
