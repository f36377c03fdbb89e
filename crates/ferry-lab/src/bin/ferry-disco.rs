//! What discovery costs as participants grow (issue 19, item 1).
//!
//! Two experiments, each in network namespaces of its own (root needed):
//! - **host**: P processes × K participants (runtimes) on one host, each
//!   with one node, one publisher and its admin service, idle once the graph
//!   is complete. Measured over a window at rest: CPU of all processes (from
//!   `/proc`, in % of one core), discovery datagrams and bytes sent per
//!   second (an nftables counter), threads and RSS per process.
//! - **fleet**: H namespaces ("hosts") on one bridge, K participants each.
//!   Measured: time from the first process's start until every participant
//!   knows every node (complete graph), and discovery bytes per host per
//!   second at rest (sent + received on the host's interface).
//!
//! Measured at rest: 10 s after the graph is complete (2 s in quick mode).
//!
//! `ferry-disco run [--quick] [--out bench/results/discovery-cost]`. The
//! participants are processes of this binary (`child` role).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use ferry::{Config, DiscoveryRange, Node, RawBytes};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run both experiments; print (and write) the tables.
    Run {
        /// Small sizes (CI): host 4×10, fleet 4×5.
        #[arg(long)]
        quick: bool,
        /// Write Markdown and JSON here (without extension).
        #[arg(long)]
        out: Option<String>,
        /// Host experiment sizes as PROCESSESxPARTICIPANTS (default 8x25).
        #[arg(long)]
        host: Option<String>,
        /// Fleet experiment sizes as HOSTSxPARTICIPANTS (default 50x20).
        #[arg(long)]
        fleet: Option<String>,
        /// Seconds of the measurement window at rest (default 10, quick 3).
        #[arg(long)]
        window: Option<u64>,
        /// Every participant joins its host's leader election with host
        /// discovery on: the leader alone listens to the group and feeds
        /// the others (`host_leader`, `host_discovery`).
        #[arg(long)]
        host_leader: bool,
    },
    /// Publishes COUNT samples on TOPIC at RATE Hz once a subscriber is
    /// matched (attack tests); prints `published N` and its discovery stats.
    #[command(hide = true)]
    Pub {
        domain: u16,
        topic: String,
        count: usize,
        rate: f64,
        #[arg(long)]
        localhost: bool,
    },
    /// Counts samples on TOPIC for SECS s; prints `received N` and its
    /// discovery stats.
    #[command(hide = true)]
    Sub {
        domain: u16,
        topic: String,
        secs: u64,
        /// Static discovery peers (`host` or `host:port`).
        #[arg(long)]
        peer: Vec<String>,
    },
    /// A LAN attacker: for MS ms, forges a goodbye, a heartbeat and an
    /// empty announcement with its own locators for every participant it
    /// hears on the discovery group, 20 of each per second, to the group
    /// and to the participant's address.
    #[command(hide = true)]
    Attack { domain: u16, ms: u64 },
    /// An admin `set` of TOPIC's priority on node NODE over a raw TCP
    /// connection whose Hello claims the victim's own runtime; prints
    /// `accepted` or `denied: …`.
    #[command(hide = true)]
    ForgeAdmin {
        domain: u16,
        node: String,
        topic: String,
        /// Use the victim's loopback address (the control: same host).
        #[arg(long)]
        loopback: bool,
    },
    /// K participants in this process (spawned by `run`).
    #[command(hide = true)]
    Child {
        domain: u16,
        runtimes: usize,
        /// Nodes in the whole domain: report once every runtime knows them.
        expect: usize,
        tag: String,
        #[arg(long)]
        subnet: bool,
        /// Join the host's election with host discovery on.
        #[arg(long)]
        host_leader: bool,
    },
}

/// K runtimes (distinct configs make distinct runtimes), one node and one
/// publisher each; prints `complete <ms>` when all of them know `expect`
/// nodes, then idles until stdin closes.
fn child(domain: u16, runtimes: usize, expect: usize, tag: &str, subnet: bool, host_leader: bool) {
    // FERRY_DISCO_LOG=debug: the child logs to stderr.
    if let Some(level) = std::env::var("FERRY_DISCO_LOG")
        .ok()
        .and_then(|l| l.parse::<tracing_subscriber::filter::LevelFilter>().ok())
    {
        let _ = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init();
    }
    let t0 = Instant::now();
    let mut nodes = Vec::new();
    let mut pubs = Vec::new();
    for k in 0..runtimes {
        let cfg = Config {
            domain_id: domain,
            discovery: if subnet {
                DiscoveryRange::Subnet
            } else {
                DiscoveryRange::Localhost
            },
            keep_all_block_ms: 1000 + k as u64,
            host_leader,
            host_discovery: host_leader,
            ..Config::default()
        };
        let node = match Node::builder()
            .name(format!("n{tag}_{k}"))
            .config(cfg)
            .build()
        {
            Ok(n) => n,
            Err(e) => {
                println!("error {e}");
                return;
            }
        };
        pubs.push(
            node.publisher::<RawBytes>(&format!("/disco/t{tag}_{k}"))
                .build()
                .expect("publisher"),
        );
        nodes.push(node);
    }
    let deadline = t0 + Duration::from_secs(120);
    loop {
        if nodes.iter().all(|n| n.graph().nodes.len() >= expect) {
            println!("complete {}", t0.elapsed().as_millis());
            break;
        }
        if Instant::now() > deadline {
            let least = nodes.iter().map(|n| n.graph().nodes.len()).min();
            let mut t = ferry::DiscoveryStats::default();
            for n in &nodes {
                let s = n.discovery_stats();
                t.sent += s.sent;
                t.received += s.received;
                t.not_owner += s.not_owner;
                t.refused += s.refused;
                t.malformed += s.malformed;
                t.evicted += s.evicted;
            }
            println!("incomplete {} {t:?}", least.unwrap_or(0));
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

fn sh(cmd: &str) {
    let ok = Command::new("sh")
        .args(["-c", cmd])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("ferry-disco: `{cmd}` failed");
    }
}

fn out_of(cmd: &str) -> String {
    Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// (packets, bytes) of an nftables counter.
fn counter(ns: &str, name: &str) -> (u64, u64) {
    let s = out_of(&format!(
        "ip netns exec {ns} nft list counter inet disco {name}"
    ));
    let mut it = s.split_whitespace();
    let mut pk = 0;
    let mut by = 0;
    while let Some(w) = it.next() {
        match w {
            "packets" => pk = it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            "bytes" => by = it.next().and_then(|v| v.parse().ok()).unwrap_or(0),
            _ => {}
        }
    }
    (pk, by)
}

/// CPU ticks (user + system) of a process and all its threads.
fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat; index 0 here is field 3.
    let p = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    p(11) + p(12)
}

fn status_field(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Proc {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

/// Every participant joins its host's election with host discovery on
/// (`run --host-leader`).
static HOST_LEADER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn spawn(ns: &str, args: &[String]) -> Proc {
    let exe = std::env::current_exe().expect("exe");
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .arg("child")
        .args(args)
        .args(
            HOST_LEADER
                .load(std::sync::atomic::Ordering::Relaxed)
                .then_some("--host-leader"),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("child process");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    Proc { child, lines: rx }
}

/// Waits for every child's `complete`/`incomplete` line; the slowest
/// child's own time to completion (ms) and how many completed.
fn await_complete(procs: &[Proc], limit: Duration) -> (Option<u128>, usize) {
    let deadline = Instant::now() + limit;
    let mut worst = 0u128;
    let mut done = 0;
    for p in procs {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Ok(l) = p.lines.recv_timeout(left) {
            if let Some(ms) = l.strip_prefix("complete ") {
                done += 1;
                worst = worst.max(ms.parse().unwrap_or(0));
            } else {
                eprintln!("ferry-disco: child says {l}");
            }
        }
    }
    ((done == procs.len()).then_some(worst), done)
}

/// Ends every child cleanly (stdin closed: its nodes drop and remove their
/// shared memory), kills those still running after 5 s, and sweeps what a
/// killed one left in `/dev/shm`.
fn stop(procs: Vec<Proc>) {
    let mut procs = procs;
    for p in &mut procs {
        drop(p.child.stdin.take());
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    for mut p in procs {
        while Instant::now() < deadline && matches!(p.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = p.child.kill();
        let _ = p.child.wait();
    }
    ferry_shm::sweep_stale();
}

fn dims(s: &str) -> (usize, usize) {
    let (a, b) = s.split_once('x').expect("sizes as AxB");
    (a.parse().expect("number"), b.parse().expect("number"))
}

struct HostResult {
    procs: usize,
    per: usize,
    complete_ms: Option<u128>,
    cpu_pct: f64,
    dgrams_s: f64,
    bytes_s: f64,
    threads: u64,
    rss_mb: f64,
}

/// Time after the graph is complete before measuring: newcomers' greeting
/// rounds end (at doubling intervals while their tables still grow).
fn settle(window: Duration) -> Duration {
    if window.as_secs() >= 10 {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(2)
    }
}

fn host(procs_n: usize, per: usize, window: Duration, domain: u16) -> HostResult {
    let ns = format!("ferrydisco{}", std::process::id());
    sh(&format!("ip netns add {ns} && ip -n {ns} link set lo up"));
    sh(&format!(
        "ip netns exec {ns} nft -f - <<'EOF'\ntable inet disco {{\n counter sent {{ }}\n chain out {{ type filter hook output priority 0; meta l4proto udp counter name sent; }}\n}}\nEOF"
    ));
    let total = procs_n * per;
    let procs: Vec<Proc> = (0..procs_n)
        .map(|i| {
            spawn(
                &ns,
                &[
                    domain.to_string(),
                    per.to_string(),
                    total.to_string(),
                    format!("{i}"),
                ],
            )
        })
        .collect();
    let (complete_ms, _) = await_complete(&procs, Duration::from_secs(150));
    std::thread::sleep(settle(window));
    let pids: Vec<u32> = procs.iter().map(|p| p.child.id()).collect();
    let c0: u64 = pids.iter().map(|p| cpu_ticks(*p)).sum();
    let (p0, b0) = counter(&ns, "sent");
    let t0 = Instant::now();
    std::thread::sleep(window);
    let c1: u64 = pids.iter().map(|p| cpu_ticks(*p)).sum();
    let (p1, b1) = counter(&ns, "sent");
    let secs = t0.elapsed().as_secs_f64();
    let hz = 100.0; // USER_HZ
    let threads = pids.iter().map(|p| status_field(*p, "Threads:")).max();
    let rss = pids.iter().map(|p| status_field(*p, "VmRSS:")).max();
    stop(procs);
    sh(&format!("ip netns del {ns}"));
    HostResult {
        procs: procs_n,
        per,
        complete_ms,
        cpu_pct: (c1 - c0) as f64 / hz / secs * 100.0,
        dgrams_s: (p1 - p0) as f64 / secs,
        bytes_s: (b1 - b0) as f64 / secs,
        threads: threads.unwrap_or(0),
        rss_mb: rss.unwrap_or(0) as f64 / 1024.0,
    }
}

struct FleetResult {
    hosts: usize,
    per: usize,
    complete_ms: Option<u128>,
    completed: usize,
    kbit_per_host: f64,
    dgrams_per_host: f64,
    cpu_pct: f64,
}

/// Raises the kernel's neighbour (ARP) table limits for the fleet and puts
/// them back when dropped. The table is one for all namespaces of a kernel
/// (default hard limit 1,024 entries): 50 emulated hosts that each talk to
/// 49 others need 2,450, and past the limit unicast sends fail with
/// ENOBUFS ("neighbor table overflow") — a lab artifact, a real host only
/// holds its own neighbours.
struct Neighbours(Vec<(String, String)>);

impl Neighbours {
    fn raise() -> Self {
        let mut old = Vec::new();
        for (k, v) in [
            ("gc_thresh1", "8192"),
            ("gc_thresh2", "16384"),
            ("gc_thresh3", "32768"),
        ] {
            let key = format!("net.ipv4.neigh.default.{k}");
            let was = out_of(&format!("sysctl -n {key}")).trim().to_string();
            sh(&format!("sysctl -qw {key}={v}"));
            old.push((key, was));
        }
        Neighbours(old)
    }
}

impl Drop for Neighbours {
    fn drop(&mut self) {
        for (k, v) in &self.0 {
            if !v.is_empty() {
                sh(&format!("sysctl -qw {k}={v}"));
            }
        }
    }
}

fn fleet(hosts: usize, per: usize, window: Duration, domain: u16) -> FleetResult {
    let _neigh = Neighbours::raise();
    let tag = std::process::id() % 10_000;
    let hub = format!("fdhub{tag}");
    let host_ns = |h: usize| format!("fdh{tag}_{h}");
    sh(&format!(
        "ip netns add {hub} && ip -n {hub} link add br0 type bridge mcast_snooping 0 && ip -n {hub} link set br0 up"
    ));
    for h in 0..hosts {
        let ns = host_ns(h);
        sh(&format!(
            "ip netns add {ns} && ip -n {ns} link set lo up && \
             ip -n {hub} link add p{h} type veth peer name eth0 netns {ns} && \
             ip -n {hub} link set p{h} master br0 up && \
             ip -n {ns} addr add 10.77.{}.{}/16 dev eth0 && ip -n {ns} link set eth0 up",
            h / 250,
            h % 250 + 1
        ));
        sh(&format!(
            "ip netns exec {ns} nft -f - <<'EOF'\ntable inet disco {{\n counter io {{ }}\n chain in {{ type filter hook input priority 0; iifname \"eth0\" meta l4proto udp counter name io; }}\n chain out {{ type filter hook output priority 0; oifname \"eth0\" meta l4proto udp counter name io; }}\n}}\nEOF"
        ));
    }
    let total = hosts * per;
    let t0 = Instant::now();
    let procs: Vec<Proc> = (0..hosts)
        .map(|h| {
            spawn(
                &host_ns(h),
                &[
                    domain.to_string(),
                    per.to_string(),
                    total.to_string(),
                    format!("{h}"),
                    "--subnet".into(),
                ],
            )
        })
        .collect();
    let (own_ms, completed) = await_complete(&procs, Duration::from_secs(150));
    // From the first process's start: spawning all of them is part of it.
    let complete_ms = own_ms.map(|_| t0.elapsed().as_millis());
    std::thread::sleep(settle(window));
    let pids: Vec<u32> = procs.iter().map(|p| p.child.id()).collect();
    let c0: u64 = pids.iter().map(|p| cpu_ticks(*p)).sum();
    let before: Vec<(u64, u64)> = (0..hosts).map(|h| counter(&host_ns(h), "io")).collect();
    let t1 = Instant::now();
    std::thread::sleep(window);
    let c1: u64 = pids.iter().map(|p| cpu_ticks(*p)).sum();
    let after: Vec<(u64, u64)> = (0..hosts).map(|h| counter(&host_ns(h), "io")).collect();
    let secs = t1.elapsed().as_secs_f64();
    stop(procs);
    let (mut pk, mut by) = (0u64, 0u64);
    for (a, b) in after.iter().zip(&before) {
        pk += a.0 - b.0;
        by += a.1 - b.1;
    }
    for h in 0..hosts {
        sh(&format!("ip netns del {}", host_ns(h)));
    }
    sh(&format!("ip netns del {hub}"));
    FleetResult {
        hosts,
        per,
        complete_ms,
        completed,
        kbit_per_host: by as f64 * 8.0 / 1000.0 / secs / hosts as f64,
        dgrams_per_host: pk as f64 / secs / hosts as f64,
        cpu_pct: (c1 - c0) as f64 / 100.0 / secs * 100.0,
    }
}

fn run(
    quick: bool,
    out: Option<String>,
    host_dims: Option<String>,
    fleet_dims: Option<String>,
    window: Option<u64>,
) {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("ferry-disco: needs root (network namespaces)");
        std::process::exit(2);
    }
    let (hp, hk) = dims(&host_dims.unwrap_or(if quick { "4x10" } else { "8x25" }.into()));
    let (fh, fk) = dims(&fleet_dims.unwrap_or(if quick { "4x5" } else { "50x20" }.into()));
    let window = Duration::from_secs(window.unwrap_or(if quick { 3 } else { 10 }));
    let domain = 200 + (std::process::id() % 16) as u16;
    let h = host(hp, hk, window, domain);
    let f = fleet(fh, fk, window, domain + 1);
    let ms = |m: Option<u128>| m.map_or("never (150 s)".into(), |m| format!("{m}"));
    let mut md = String::new();
    md.push_str(&format!(
        "Discovery at rest, measured over {} s once the graph was complete \
         (`ferry-disco run{}{}`).\n\n",
        window.as_secs(),
        if quick { " --quick" } else { "" },
        if HOST_LEADER.load(std::sync::atomic::Ordering::Relaxed) {
            " --host-leader"
        } else {
            ""
        }
    ));
    md.push_str("| host: participants (processes × each) | graph complete (ms) | CPU, % of one core | datagrams/s sent | bytes/s sent | threads/process | RSS/process (MB) |\n|---|---|---|---|---|---|---|\n");
    md.push_str(&format!(
        "| {} ({}×{}) | {} | {:.1} | {:.0} | {:.0} | {} | {:.0} |\n\n",
        h.procs * h.per,
        h.procs,
        h.per,
        ms(h.complete_ms),
        h.cpu_pct,
        h.dgrams_s,
        h.bytes_s,
        h.threads,
        h.rss_mb
    ));
    md.push_str("| fleet: participants (hosts × each) | graph complete (ms, from first start) | hosts complete | discovery kbit/s per host (in + out) | datagrams/s per host | CPU, % of one core (all) |\n|---|---|---|---|---|---|\n");
    md.push_str(&format!(
        "| {} ({}×{}) | {} | {}/{} | {:.1} | {:.0} | {:.1} |\n",
        f.hosts * f.per,
        f.hosts,
        f.per,
        ms(f.complete_ms),
        f.completed,
        f.hosts,
        f.kbit_per_host,
        f.dgrams_per_host,
        f.cpu_pct
    ));
    print!("{md}");
    if let Some(o) = out {
        let json = serde_json::json!({
            "host": {"processes": h.procs, "per_process": h.per,
                "complete_ms": h.complete_ms.map(|m| m as u64), "cpu_pct_one_core": h.cpu_pct,
                "datagrams_per_s": h.dgrams_s, "bytes_per_s": h.bytes_s,
                "threads_per_process": h.threads, "rss_mb_per_process": h.rss_mb},
            "fleet": {"hosts": f.hosts, "per_host": f.per,
                "complete_ms": f.complete_ms.map(|m| m as u64), "hosts_complete": f.completed,
                "kbit_per_s_per_host": f.kbit_per_host, "datagrams_per_s_per_host": f.dgrams_per_host,
                "cpu_pct_one_core": f.cpu_pct},
        });
        let _ = std::fs::write(format!("{o}.md"), &md);
        let _ = std::fs::write(format!("{o}.json"), format!("{json:#}\n"));
    }
}

fn stats_line(node: &Node) -> String {
    let s = node.discovery_stats();
    let x = s.security;
    format!(
        "stats received={} not_owner={} refused={} not_loopback={} malformed={} unsigned={} bad_signature={} foreign_ca={} replayed={}",
        s.received, s.not_owner, s.refused, s.not_loopback, s.malformed,
        x.unsigned, x.bad_signature, x.foreign_ca, x.replayed
    )
}

/// The lab's config; security as `FERRY_SECURITY`, `FERRY_KEYSTORE` and
/// `FERRY_ENCLAVE` say (the signed-discovery attack test sets them).
fn lab_config(domain: u16, localhost: bool, peers: Vec<String>) -> Config {
    let mut c = lab_config_plain(domain, localhost, peers);
    if let Ok(m) = std::env::var("FERRY_SECURITY") {
        c.security.mode = m
            .parse()
            .expect("FERRY_SECURITY: off, permissive or enforce");
        c.security.keystore = std::env::var_os("FERRY_KEYSTORE").map(Into::into);
        c.security.enclave = std::env::var("FERRY_ENCLAVE").ok();
    }
    c
}

fn lab_config_plain(domain: u16, localhost: bool, peers: Vec<String>) -> Config {
    Config {
        domain_id: domain,
        discovery: if localhost {
            DiscoveryRange::Localhost
        } else {
            DiscoveryRange::Subnet
        },
        peers,
        ..Config::default()
    }
}

fn publish(domain: u16, topic: &str, count: usize, rate: f64, localhost: bool) {
    let node = Node::builder()
        .name("victim_pub")
        .config(lab_config(domain, localhost, Vec::new()))
        .build()
        .expect("node");
    let p = node
        .publisher::<RawBytes>(topic)
        .build()
        .expect("publisher");
    let matched = p.wait_for_subscribers(1, Duration::from_secs(8));
    println!("matched {matched}");
    let gap = Duration::from_secs_f64(1.0 / rate);
    let mut sent = 0;
    for i in 0..count {
        if p.publish(RawBytes(bytes::Bytes::from(
            (i as u32).to_le_bytes().to_vec(),
        )))
        .is_ok()
        {
            sent += 1;
        }
        std::thread::sleep(gap);
    }
    // Let the last ones be delivered (and retransmitted) before leaving.
    std::thread::sleep(Duration::from_secs(1));
    println!("published {sent}");
    println!("{}", stats_line(&node));
}

fn subscribe(domain: u16, topic: &str, secs: u64, peer: Vec<String>) {
    let node = Node::builder()
        .name("victim_sub")
        .config(lab_config(domain, false, peer))
        .build()
        .expect("node");
    let s = node
        .subscriber::<RawBytes>(topic)
        .build()
        .expect("subscriber");
    let end = Instant::now() + Duration::from_secs(secs);
    let mut n = 0;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        if s.recv_timeout(left).is_ok() {
            n += 1;
        }
    }
    println!("received {n}");
    println!("{}", stats_line(&node));
}

fn attack(domain: u16, ms: u64) {
    use ferry_wire::beacon::{Beacon, BeaconBody, ParticipantInfo};
    use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
    let port = Config {
        domain_id: domain,
        ..Config::default()
    }
    .discovery_port();
    let group = Ipv4Addr::new(239, 255, 70, 1);
    let listen = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )
    .expect("socket");
    listen.set_reuse_address(true).expect("reuse");
    listen.set_reuse_port(true).expect("reuse");
    listen
        .bind(&SocketAddr::from((group, port)).into())
        .expect("bind");
    for i in ferry::host::interfaces().iter().filter(|i| !i.loopback) {
        let _ = listen.join_multicast_v4(&group, &i.addr);
    }
    let listen: UdpSocket = listen.into();
    listen
        .set_read_timeout(Some(Duration::from_millis(10)))
        .expect("timeout");
    let send = UdpSocket::bind("0.0.0.0:0").expect("send socket");
    let own_ip = ferry::host::interfaces()
        .iter()
        .find(|i| !i.loopback)
        .map(|i| i.addr)
        .unwrap_or(Ipv4Addr::LOCALHOST);
    let mut victims: std::collections::HashMap<ferry::ParticipantId, SocketAddr> =
        Default::default();
    let end = Instant::now() + Duration::from_millis(ms);
    let mut next = Instant::now();
    let mut forged = 0u64;
    let mut buf = [0u8; 2048];
    while Instant::now() < end {
        if let Ok((n, from)) = listen.recv_from(&mut buf) {
            if let Ok(b) = Beacon::parse(&buf[..n]) {
                if b.domain == domain {
                    victims.insert(b.participant, from);
                }
            }
        }
        if Instant::now() < next {
            continue;
        }
        next += Duration::from_millis(50);
        for (&id, &addr) in &victims {
            let info = ParticipantInfo {
                host_id: 1,
                net_id: 1,
                pid: 1,
                lease_ms: u32::MAX,
                name: "evil".into(),
                locators: vec![ferry::Locator::socket(
                    ferry::TransportKind::Tcp,
                    SocketAddr::from((own_ip, 9)),
                )],
            };
            let mut out = vec![
                Beacon {
                    domain,
                    participant: id,
                    body: BeaconBody::Bye,
                }
                .encode(),
                Beacon {
                    domain,
                    participant: id,
                    body: BeaconBody::Heartbeat {
                        revision: u32::MAX,
                        lease_ms: u32::MAX,
                        greeting: false,
                    },
                }
                .encode(),
            ];
            out.extend(Beacon::pack_announce(
                domain,
                id,
                &info,
                u32::MAX,
                &[],
                1472,
            ));
            for d in &out {
                for to in [addr, SocketAddr::from((group, port))] {
                    if send.send_to(d, to).is_ok() {
                        forged += 1;
                    }
                }
            }
        }
    }
    println!("forged {forged} for {} participants", victims.len());
}

fn main() {
    match Cli::parse().cmd {
        Cmd::Pub {
            domain,
            topic,
            count,
            rate,
            localhost,
        } => publish(domain, &topic, count, rate, localhost),
        Cmd::Sub {
            domain,
            topic,
            secs,
            peer,
        } => subscribe(domain, &topic, secs, peer),
        Cmd::Attack { domain, ms } => attack(domain, ms),
        Cmd::ForgeAdmin {
            domain,
            node,
            topic,
            loopback,
        } => println!(
            "{}",
            ferry_lab::forge::admin_with_forged_hello(domain, &node, &topic, loopback)
        ),
        Cmd::Run {
            quick,
            out,
            host,
            fleet,
            window,
            host_leader,
        } => {
            HOST_LEADER.store(host_leader, std::sync::atomic::Ordering::Relaxed);
            run(quick, out, host, fleet, window)
        }
        Cmd::Child {
            domain,
            runtimes,
            expect,
            tag,
            subnet,
            host_leader,
        } => child(domain, runtimes, expect, &tag, subnet, host_leader),
    }
}
