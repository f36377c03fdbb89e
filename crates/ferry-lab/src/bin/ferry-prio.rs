//! Seed 002's Fig. 4/5 on the lab: does a prioritized channel (High =
//! AF42/band 0, plus a SCHED_FIFO 30 sender thread) keep its round trip
//! while another channel loads a rate-capped link?
//!
//! Topologies (network namespaces + veth; the bottleneck is a `tbf` root
//! with a `pfifo_fast` child, which has the TOS bands; GSO/TSO/GRO off so
//! the qdisc sees wire-sized packets):
//! - **a** congestion at the sender's NIC: Pub1 and Pub2 in one namespace,
//!   Sub1 and Sub2 in another; the cap is on the publishers' veth.
//! - **b** congestion at a shared link: Pub1 and Pub2 in two namespaces,
//!   routed through a third whose egress to the subscribers is capped.
//!
//! Pub1 publishes a ping (sequence number inside), Sub1 echoes it on a pong
//! topic, Pub1 measures the round trip per message; Pub2 → Sub2 loads the
//! link at 0 / 20 / 70 % of the cap. Each cell runs with both channel ends
//! (ping and pong publishers) at Normal, then at High + fifo:30, for every
//! measurement/load transport pair (tcp/tcp, tcp/udp, udp/tcp, udp/udp).
//!
//! `ferry-prio run [--quick]` orchestrates; it starts itself in the
//! namespaces as `ping`, `echo`, `load` and `sink`.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use ferry::{Node, PacketClass, Priority, Qos, RawBytes, ThreadPolicy};
use serde_json::json;

#[derive(Parser)]
#[command(name = "ferry-prio")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the grid and write the tables.
    Run {
        /// Topology a, tcp/tcp and udp/udp, loads 0 and 70 %, 150 pings (CI).
        #[arg(long)]
        quick: bool,
        /// Pings per cell (default 400, quick 150).
        #[arg(long)]
        samples: Option<u32>,
        /// Bottleneck rate, Mbit/s.
        #[arg(long, default_value_t = 100)]
        rate_mbit: u32,
        /// Topologies: a, b.
        #[arg(long, value_delimiter = ',')]
        topologies: Option<Vec<String>>,
        /// Measurement/load transports: tcp/tcp, tcp/udp, udp/tcp, udp/udp.
        #[arg(long, value_delimiter = ',')]
        combos: Option<Vec<String>>,
        /// Loads, percent of the rate.
        #[arg(long, value_delimiter = ',')]
        loads: Option<Vec<u32>>,
        /// Write Markdown and JSON here (without extension).
        #[arg(long)]
        out: Option<String>,
    },
    /// Pub1: pings and measures; prints one JSON line.
    Ping {
        size: usize,
        count: u32,
        #[arg(long)]
        prio: bool,
    },
    /// Sub1: echoes pings as pongs.
    Echo {
        #[arg(long)]
        prio: bool,
    },
    /// Pub2: `size`-byte messages at `hz`.
    Load { size: usize, hz: f64 },
    /// Sub2: takes the load.
    Sink,
}

const DOMAIN: &str = "79";
const PING_HZ: f64 = 50.0;
const LOAD_MSG: usize = 64 * 1024;

fn priority(on: bool) -> Option<Priority> {
    on.then(|| Priority::class(PacketClass::High).with_thread(ThreadPolicy::Fifo(30)))
}

fn node(name: &str) -> Node {
    Node::builder().name(name).build().expect("node")
}

fn ping(size: usize, count: u32, prio: bool) {
    let n = node("pub1");
    let mut b = n
        .publisher::<RawBytes>("/m/ping")
        .qos(Qos::default().keep_last(10));
    if let Some(p) = priority(prio) {
        b = b.priority(p);
    }
    let publ = b.build().expect("ping publisher");
    // The round trip ends in the pong callback, on the thread ferry delivers
    // with (raised with the channel when prioritized): the figure is what
    // ferry delivers, not how fast this program's main thread wakes up.
    type InFlight = (u64, Instant, Option<f64>);
    let flight: Arc<(Mutex<InFlight>, Condvar)> =
        Arc::new((Mutex::new((u64::MAX, Instant::now(), None)), Condvar::new()));
    let f2 = flight.clone();
    let mut sb = n
        .subscriber::<RawBytes>("/m/pong")
        .qos(Qos::default().keep_last(100))
        .inline_callback(move |s| {
            let seq = s
                .get(..8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
            let mut g = f2.0.lock().unwrap_or_else(|e| e.into_inner());
            if seq == Some(g.0) && g.2.is_none() {
                g.2 = Some(g.1.elapsed().as_secs_f64() * 1e3);
                f2.1.notify_all();
            }
        });
    if prio {
        sb = sb.thread_priority(ThreadPolicy::Fifo(30));
    }
    let sub = sb.build().expect("pong subscriber");
    let ready = publ.wait_for_subscribers(1, Duration::from_secs(20))
        && sub.wait_for_publishers(1, Duration::from_secs(20));
    let mut rtts: Vec<f64> = Vec::new();
    let mut timeouts = 0u32;
    if ready {
        let mut buf = vec![0u8; size.max(8)];
        let period = Duration::from_secs_f64(1.0 / PING_HZ);
        // Warm-up pings (connections, caches, the pacer), not counted.
        let warm = 20;
        let mut next = Instant::now();
        for seq in 0..(count + warm) as u64 {
            buf[..8].copy_from_slice(&seq.to_le_bytes());
            *flight.0.lock().unwrap_or_else(|e| e.into_inner()) = (seq, Instant::now(), None);
            let sent = publ.publish(RawBytes::new(buf.clone())).is_ok();
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut g = flight.0.lock().unwrap_or_else(|e| e.into_inner());
            while sent && g.2.is_none() {
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    break;
                };
                g = flight
                    .1
                    .wait_timeout(g, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            let rtt = g.2;
            drop(g);
            if seq >= warm as u64 {
                match rtt {
                    Some(r) => rtts.push(r),
                    None => timeouts += 1,
                }
            }
            next += period;
            if let Some(d) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            } else {
                next = Instant::now();
            }
        }
    }
    println!(
        "{}",
        json!({"ready": ready, "rtt_ms": rtts, "timeouts": timeouts})
    );
}

fn echo(prio: bool) {
    let n = node("sub1");
    let mut b = n
        .publisher::<RawBytes>("/m/pong")
        .qos(Qos::default().keep_last(10));
    if let Some(p) = priority(prio) {
        b = b.priority(p);
    }
    let publ = b.build().expect("pong publisher");
    let mut sb = n
        .subscriber::<RawBytes>("/m/ping")
        .qos(Qos::default().keep_last(10))
        .inline_callback(move |s| {
            let _ = publ.publish(RawBytes::new(s.0.clone()));
        });
    if prio {
        sb = sb.thread_priority(ThreadPolicy::Fifo(30));
    }
    let _sub = sb.build().expect("ping subscriber");
    park();
}

fn load(size: usize, hz: f64) {
    let n = node("pub2");
    let publ = n
        .publisher::<RawBytes>("/l/load")
        .qos(Qos::default().keep_last(50))
        .build()
        .expect("load publisher");
    let body = RawBytes::new(vec![0x55u8; size]);
    let period = Duration::from_secs_f64(1.0 / hz);
    let mut next = Instant::now();
    loop {
        let _ = publ.publish(body.clone());
        next += period;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        } else {
            next = Instant::now();
        }
    }
}

fn sink() {
    let n = node("sub2");
    let _sub = n
        .subscriber::<RawBytes>("/l/load")
        .qos(Qos::default().keep_last(50))
        .inline_callback(|_| {})
        .build()
        .expect("load subscriber");
    park();
}

/// Runs until the parent kills us (bounded: an orphan exits after 10 min).
fn park() {
    std::thread::sleep(Duration::from_secs(600));
}

// ---------------------------------------------------------------- the lab

fn sh(cmd: &str) -> Result<(), String> {
    let o = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{cmd}` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// Namespaces of one topology; removed (with every process in them) on drop.
struct Net {
    spaces: Vec<String>,
    /// Namespace of Pub1, of Pub2, of the subscribers.
    pub1: String,
    pub2: String,
    subs: String,
    /// Addresses of every endpoint namespace (static discovery peers).
    peers: Vec<String>,
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in &self.spaces {
            let _ = sh(&format!(
                "ip netns pids {ns} 2>/dev/null | xargs -r kill -9; ip netns del {ns} 2>/dev/null"
            ));
        }
    }
}

/// veth `a`(in `na`, `ipa`) ↔ `b`(in `nb`, `ipb`), /24, offloads off.
fn veth(na: &str, a: &str, ipa: &str, nb: &str, b: &str, ipb: &str) -> Result<(), String> {
    sh(&format!(
        "ip link add {a} netns {na} type veth peer name {b} netns {nb}"
    ))?;
    for (ns, dev, ip) in [(na, a, ipa), (nb, b, ipb)] {
        sh(&format!(
            "ip -n {ns} addr add {ip}/24 dev {dev} && ip -n {ns} link set {dev} up && \
             ip netns exec {ns} ethtool -K {dev} tso off gso off gro off >/dev/null 2>&1"
        ))?;
    }
    Ok(())
}

/// The bottleneck: `tbf` at `mbit` with a `pfifo_fast` child (TOS bands).
fn bottleneck(ns: &str, dev: &str, mbit: u32) -> Result<(), String> {
    sh(&format!(
        "tc -n {ns} qdisc add dev {dev} root handle 1: tbf rate {mbit}mbit burst 16kb latency 2s && \
         tc -n {ns} qdisc add dev {dev} parent 1:1 handle 10: pfifo_fast"
    ))
}

fn topology(t: &str, mbit: u32) -> Result<Net, String> {
    let tag = std::process::id() % 10000;
    let ns = |n: &str| format!("fp{tag}{t}{n}");
    match t {
        "a" => {
            let (p, s) = (ns("p"), ns("s"));
            let net = Net {
                spaces: vec![p.clone(), s.clone()],
                pub1: p.clone(),
                pub2: p.clone(),
                subs: s.clone(),
                peers: vec!["10.88.1.1".into(), "10.88.1.2".into()],
            };
            for n in &net.spaces {
                sh(&format!("ip netns add {n} && ip -n {n} link set lo up"))?;
            }
            veth(
                &p,
                &format!("vp{tag}"),
                "10.88.1.1",
                &s,
                &format!("vs{tag}"),
                "10.88.1.2",
            )?;
            bottleneck(&p, &format!("vp{tag}"), mbit)?;
            Ok(net)
        }
        "b" => {
            let (p1, p2, r, s) = (ns("1"), ns("2"), ns("r"), ns("s"));
            let net = Net {
                spaces: vec![p1.clone(), p2.clone(), r.clone(), s.clone()],
                pub1: p1.clone(),
                pub2: p2.clone(),
                subs: s.clone(),
                peers: vec!["10.88.2.1".into(), "10.88.3.1".into(), "10.88.4.2".into()],
            };
            for n in &net.spaces {
                sh(&format!("ip netns add {n} && ip -n {n} link set lo up"))?;
            }
            veth(
                &p1,
                &format!("v1{tag}"),
                "10.88.2.1",
                &r,
                &format!("r1{tag}"),
                "10.88.2.254",
            )?;
            veth(
                &p2,
                &format!("v2{tag}"),
                "10.88.3.1",
                &r,
                &format!("r2{tag}"),
                "10.88.3.254",
            )?;
            veth(
                &s,
                &format!("vs{tag}"),
                "10.88.4.2",
                &r,
                &format!("rs{tag}"),
                "10.88.4.254",
            )?;
            sh(&format!(
                "ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1"
            ))?;
            for (n, gw) in [
                (&p1, "10.88.2.254"),
                (&p2, "10.88.3.254"),
                (&s, "10.88.4.254"),
            ] {
                sh(&format!("ip -n {n} route add default via {gw}"))?;
            }
            bottleneck(&r, &format!("rs{tag}"), mbit)?;
            Ok(net)
        }
        other => Err(format!("unknown topology `{other}` (a, b)")),
    }
}

/// Killed on drop.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Cell<'a> {
    net: &'a Net,
    meas: &'a str,
    load: &'a str,
    mbit: u32,
    cfg: String,
}

impl Cell<'_> {
    fn spawn(&self, ns: &str, args: &[String], out: Stdio) -> Result<Proc, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(exe)
            .args(args)
            .env("FERRY_DOMAIN_ID", DOMAIN)
            .env("FERRY_DISCOVERY", "subnet")
            .env("FERRY_PEERS", self.net.peers.join(","))
            .env("FERRY_CONFIG", &self.cfg)
            .env("FERRY_LOG", "error")
            .stdout(out)
            .stderr(Stdio::null())
            .spawn()
            .map(Proc)
            .map_err(|e| e.to_string())
    }
}

/// Transport pins. The UDP pacer keeps its default link rate (300 Mbit/s):
/// like the paper's switch, the bottleneck is not known to the endpoints.
fn config(path: &str, meas: &str, load: &str) -> Result<(), String> {
    std::fs::write(
        path,
        format!(
            "[[topics]]\npattern = \"/m/*\"\ntransport = \"{meas}\"\n\
             [[topics]]\npattern = \"/l/*\"\ntransport = \"{load}\"\n"
        ),
    )
    .map_err(|e| format!("{path}: {e}"))
}

#[derive(Clone, Default, serde::Serialize)]
struct Stat {
    n: usize,
    timeouts: u32,
    mean: f64,
    std: f64,
    p50: f64,
    p99: f64,
    max: f64,
}

fn stat(mut v: Vec<f64>, timeouts: u32) -> Stat {
    if v.is_empty() {
        return Stat {
            timeouts,
            ..Stat::default()
        };
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    let q = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    Stat {
        n,
        timeouts,
        mean,
        std: var.sqrt(),
        p50: q(0.5),
        p99: q(0.99),
        max: v[n - 1],
    }
}

fn measure(
    cell: &Cell,
    load_pct: u32,
    prio: bool,
    size: usize,
    count: u32,
) -> Result<Stat, String> {
    let net = cell.net;
    let p = if prio {
        vec!["--prio".to_string()]
    } else {
        vec![]
    };
    let _echo = cell.spawn(
        &net.subs,
        &[vec!["echo".into()], p.clone()].concat(),
        Stdio::null(),
    )?;
    let mut _load = Vec::new();
    if load_pct > 0 {
        let bytes_per_s = f64::from(cell.mbit) * 1e6 / 8.0 * f64::from(load_pct) / 100.0;
        let hz = bytes_per_s / LOAD_MSG as f64;
        _load.push(cell.spawn(&net.subs, &["sink".into()], Stdio::null())?);
        _load.push(cell.spawn(
            &net.pub2,
            &["load".into(), LOAD_MSG.to_string(), format!("{hz:.2}")],
            Stdio::null(),
        )?);
        // Let the load reach its steady state.
        std::thread::sleep(Duration::from_secs(2));
    }
    let args = [vec!["ping".into(), size.to_string(), count.to_string()], p].concat();
    let ping = cell.spawn(&net.pub1, &args, Stdio::piped())?;
    let limit = Duration::from_secs(40 + u64::from(count) / 10);
    let out = wait_output(ping, limit)?;
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).map_err(|e| format!("ping said {out:?}: {e}"))?;
    if v["ready"] != true {
        return Err(format!(
            "{} {}/{} load {load_pct}%: ping and echo never matched",
            net.pub1, cell.meas, cell.load
        ));
    }
    let rtts: Vec<f64> = v["rtt_ms"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
        .unwrap_or_default();
    Ok(stat(rtts, v["timeouts"].as_u64().unwrap_or(0) as u32))
}

fn wait_output(mut p: Proc, limit: Duration) -> Result<String, String> {
    let end = Instant::now() + limit;
    loop {
        if let Ok(Some(_)) = p.0.try_wait() {
            break;
        }
        if Instant::now() > end {
            return Err("ping did not finish in time".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut s = String::new();
    if let Some(mut o) = p.0.stdout.take() {
        use std::io::Read;
        let _ = o.read_to_string(&mut s);
    }
    Ok(s)
}

#[derive(serde::Serialize)]
struct Row {
    topology: String,
    meas: String,
    load: String,
    load_pct: u32,
    normal: Stat,
    prio: Stat,
}

#[allow(clippy::too_many_arguments)]
fn run_grid(
    quick: bool,
    samples: Option<u32>,
    mbit: u32,
    topologies: Option<Vec<String>>,
    combos: Option<Vec<String>>,
    loads: Option<Vec<u32>>,
    out: Option<String>,
) -> Result<(), String> {
    if unsafe { libc::geteuid() } != 0 {
        return Err("the lab needs root (network namespaces, tc, SCHED_FIFO)".into());
    }
    let count = samples.unwrap_or(if quick { 150 } else { 400 });
    let tops = topologies.unwrap_or_else(|| {
        if quick {
            vec!["a".into()]
        } else {
            vec!["a".into(), "b".into()]
        }
    });
    let combos = combos.unwrap_or_else(|| {
        let all = ["tcp/tcp", "tcp/udp", "udp/tcp", "udp/udp"];
        let q = ["tcp/tcp", "udp/udp"];
        (if quick { &q[..] } else { &all[..] })
            .iter()
            .map(|s| s.to_string())
            .collect()
    });
    let loads = loads.unwrap_or_else(|| if quick { vec![0, 70] } else { vec![0, 20, 70] });
    let cfg = format!("/tmp/ferry-prio-{}.toml", std::process::id());
    let mut rows = Vec::new();
    let started = Instant::now();
    for t in &tops {
        let net = topology(t, mbit)?;
        // Fig. 5b: Pub1 pushes larger samples through the switch.
        let size = if t == "b" { 4096 } else { 1024 };
        for combo in &combos {
            let (meas, load) = combo
                .split_once('/')
                .filter(|(m, l)| ["tcp", "udp"].contains(m) && ["tcp", "udp"].contains(l))
                .ok_or_else(|| {
                    format!("bad combo `{combo}` (tcp/tcp, tcp/udp, udp/tcp, udp/udp)")
                })?;
            config(&cfg, meas, load)?;
            let cell = Cell {
                net: &net,
                meas,
                load,
                mbit,
                cfg: cfg.clone(),
            };
            for &l in &loads {
                let normal = measure(&cell, l, false, size, count)?;
                let prio = measure(&cell, l, true, size, count)?;
                eprintln!(
                    "{t} {meas}/{load} load {l:>2}%: normal p50 {:.2} p99 {:.2} ms | high+fifo:30 p50 {:.2} p99 {:.2} ms",
                    normal.p50, normal.p99, prio.p50, prio.p99
                );
                rows.push(Row {
                    topology: t.clone(),
                    meas: meas.into(),
                    load: load.into(),
                    load_pct: l,
                    normal,
                    prio,
                });
            }
        }
        drop(net);
    }
    let _ = std::fs::remove_file(&cfg);
    let base = out.unwrap_or_else(|| {
        if quick {
            "bench/results/priority-quick".into()
        } else {
            "bench/results/priority".into()
        }
    });
    let md = report(&rows, mbit, count, quick, started.elapsed());
    std::fs::write(format!("{base}.md"), &md).map_err(|e| format!("{base}.md: {e}"))?;
    std::fs::write(
        format!("{base}.json"),
        serde_json::to_string_pretty(&json!({"rate_mbit": mbit, "pings": count, "rows": rows}))
            .map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("{base}.json: {e}"))?;
    let _ = std::io::stdout().write_all(md.as_bytes());
    eprintln!("wrote {base}.md and .json");
    Ok(())
}

fn report(rows: &[Row], mbit: u32, count: u32, quick: bool, took: Duration) -> String {
    let mut s = String::new();
    s += "# Channel priority under load (seed 002, Fig. 4/5) on the lab\n\n";
    s += &format!(
        "Reproduce: `cargo build --release -p ferry-lab && sudo ./target/release/ferry-prio run{}` ({} s).\n\n",
        if quick { " --quick" } else { "" },
        took.as_secs()
    );
    s += &format!(
        "Bottleneck: `tbf` {mbit} Mbit/s with a `pfifo_fast` child (TOS bands), GSO/TSO/GRO off. \
         **a**: Pub1+Pub2 in one namespace, Sub1+Sub2 in another, cap on the publishers' veth (NIC congestion). \
         **b**: Pub1 and Pub2 in two namespaces routed through a third whose egress to the subscribers is capped (shared-link congestion). \
         Pub1 → Sub1: {count} pings at {PING_HZ} Hz (1 KiB in a, 4 KiB in b), Sub1 echoes each one, RTT per message in ms. \
         Pub2 → Sub2: {} KiB messages at the rate that makes the load % of the cap. \
         *normal*: both ends of the measured channel at Normal (DSCP 0, band 1); *prio*: ping and pong publishers at High (AF42, band 0) + a SCHED_FIFO 30 sender thread (`Priority::class(High).with_thread(Fifo(30))`), and the ping and pong subscribers with `thread_priority(Fifo(30))` (the I/O thread that delivers them runs at SCHED_FIFO 30). The RTT ends in the pong callback (ferry's delivering thread), so it is what ferry delivers, not how fast the program's main thread wakes. \
         Transports pinned per topic (`meas/load`); the UDP pacer keeps its default 300 Mbit/s link rate (the endpoints do not know the bottleneck, like the paper's switch). Namespaces share /dev/shm and IPC: one host for discovery, so the network transports are pinned.\n\n",
        LOAD_MSG / 1024
    );
    s += "| topo | meas/load | load | normal mean ± std | normal p50 / p99 | prio mean ± std | prio p50 / p99 | p99 normal/prio | prio p99 / its unloaded p99 | timeouts n/p |\n";
    s += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    let mut verdicts = Vec::new();
    for r in rows {
        let unloaded = rows
            .iter()
            .find(|u| {
                u.topology == r.topology && u.meas == r.meas && u.load == r.load && u.load_pct == 0
            })
            .map(|u| u.prio.p99);
        let vs_unloaded = unloaded.filter(|u| *u > 0.0).map(|u| r.prio.p99 / u);
        let better = (r.prio.p99 > 0.0).then(|| r.normal.p99 / r.prio.p99);
        s += &format!(
            "| {} | {}/{} | {}% | {:.2} ± {:.2} | {:.2} / {:.2} | {:.2} ± {:.2} | {:.2} / {:.2} | {} | {} | {}/{} |\n",
            r.topology, r.meas, r.load, r.load_pct,
            r.normal.mean, r.normal.std, r.normal.p50, r.normal.p99,
            r.prio.mean, r.prio.std, r.prio.p50, r.prio.p99,
            better.map_or("-".into(), |b| format!("{b:.1}×")),
            vs_unloaded.map_or("-".into(), |v| format!("{v:.2}×")),
            r.normal.timeouts, r.prio.timeouts,
        );
        if r.load_pct == 70 {
            let ok1 = vs_unloaded.is_some_and(|v| v <= 1.5);
            let ok2 = better.is_some_and(|b| b >= 3.0);
            verdicts.push(format!(
                "- {} {}/{}: prio p99 {:.2} ms = {} its unloaded p99 (target ≤ 1.5×: **{}**); normal p99 / prio p99 = {} (target ≥ 3×: **{}**)",
                r.topology, r.meas, r.load, r.prio.p99,
                vs_unloaded.map_or("-".into(), |v| format!("{v:.2}×")),
                if ok1 { "met" } else { "NOT met" },
                better.map_or("-".into(), |b| format!("{b:.1}×")),
                if ok2 { "met" } else { "NOT met" },
            ));
        }
    }
    s += "\n## Targets at 70 % load\n\n";
    s += &verdicts.join("\n");
    s += "\n";
    s
}

fn main() {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run {
            quick,
            samples,
            rate_mbit,
            topologies,
            combos,
            loads,
            out,
        } => {
            if let Err(e) = run_grid(quick, samples, rate_mbit, topologies, combos, loads, out) {
                eprintln!("ferry-prio: {e}");
                std::process::exit(1);
            }
        }
        Cmd::Ping { size, count, prio } => ping(size, count, prio),
        Cmd::Echo { prio } => echo(prio),
        Cmd::Load { size, hz } => load(size, hz),
        Cmd::Sink => sink(),
    }
}
