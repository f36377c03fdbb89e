//! Round trip between two processes on this host, side by side in one run:
//! ferry over shared memory (event-driven and busy-poll), ferry over TCP
//! (shared memory off), and the floor of an event-driven design — a bare
//! futex ping-pong between two processes on a shared word.
//!
//! `ferry-shm-rtt run [--quick] [--out bench/results/shm]` spawns the echo
//! process itself (this binary, `echo` role) for every mode.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, Subcommand};
use ferry::{Config, DiscoveryRange, Node, Qos, RawBytes};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Measure every mode and size; print (and write) the table.
    Run(RunArgs),
    /// The echo side of one mode (spawned by `run`).
    #[command(hide = true)]
    Echo {
        mode: String,
        domain: u16,
        /// Pin this process to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
    },
}

/// Options of `run`.
#[derive(clap::Args)]
struct RunArgs {
    /// 300 round trips per cell instead of 3000 (CI).
    #[arg(long)]
    quick: bool,
    /// Write Markdown and JSON here (without extension).
    #[arg(long)]
    out: Option<String>,
    /// iceoryx2's ping-pong binary (`bench/iceoryx2`), measured in the
    /// same run when given.
    #[arg(long)]
    iceoryx2: Option<std::path::PathBuf>,
    /// Whole rounds of every measurement (default 3, quick 1).
    #[arg(long)]
    rounds: Option<usize>,
    /// Round trips per cell (default 3000, quick 300).
    #[arg(long)]
    count: Option<usize>,
    /// Only these ferry modes (default: all).
    #[arg(long, value_delimiter = ',')]
    modes: Option<Vec<String>>,
    /// Round trips per futex floor run (default 10 × count, at most
    /// 30000).
    #[arg(long)]
    floor_count: Option<usize>,
    /// Where the two sides run: `free` (the scheduler decides), `same`
    /// (both on CPU 0), `split` (CPU 0 and CPU 1) — for every
    /// measurement, the floor and iceoryx2 included.
    #[arg(long, value_enum, default_value_t = Placement::Free)]
    placement: Placement,
}

/// Where the ping and the echo side of every measurement run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Placement {
    /// Wherever the scheduler puts them (it may move them).
    Free,
    /// Both on CPU 0: every hop is a context switch.
    Same,
    /// Ping side on CPU 0, echo side on CPU 1: every hop crosses CPUs.
    Split,
}

impl Placement {
    /// (ping CPU, echo CPU), or None when free.
    fn cpus(self) -> Option<(usize, usize)> {
        match self {
            Placement::Free => None,
            Placement::Same => Some((0, 0)),
            Placement::Split => Some((0, 1)),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Placement::Free => "free (the scheduler places both sides and may move them)",
            Placement::Same => {
                "same CPU (both sides pinned to CPU 0: every hop is a context switch)"
            }
            Placement::Split => {
                "split CPUs (ping side pinned to CPU 0, echo side to CPU 1: every hop crosses CPUs)"
            }
        }
    }
}

/// The placement of this run (set once by `run`).
static PLACEMENT: std::sync::OnceLock<Placement> = std::sync::OnceLock::new();

fn placement() -> Placement {
    PLACEMENT.get().copied().unwrap_or(Placement::Free)
}

/// Pins the calling thread (and the threads it starts later, and a child
/// it forks) to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within
    // it for cpu < CPU_SETSIZE (checked), and the call only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert!(cpu < libc::CPU_SETSIZE as usize, "cpu {cpu}");
        libc::CPU_SET(cpu, &mut set);
        let rc = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(
            rc,
            0,
            "sched_setaffinity({cpu}): {}",
            std::io::Error::last_os_error()
        );
    }
}

const SIZES: [usize; 5] = [64, 4096, 65_536, 1 << 20, 4 << 20];

/// The ferry modes measured: (name, domain). `shm`: event-driven (the
/// default: adaptive polling window, then the doorbell), `busy`: busy-poll,
/// `sleep`: event-driven without the polling window (`shm_spin_us = 0`:
/// every sample is a futex wake-up), `-loan`: both sides publish loaned
/// samples written in place (only the 8-byte sequence number), otherwise
/// `publish` copies the payload; `tcp`: shared memory off.
const MODES: [(&str, u16); 6] = [
    ("shm", 171),
    ("busy", 172),
    ("shm-loan", 174),
    ("busy-loan", 175),
    ("tcp", 173),
    ("sleep-loan", 176),
];
/// Column of the event-driven loan mode (the default wake-up).
const EVENT_LOAN: usize = 2;
/// Column of the busy-poll loan mode.
const BUSY_LOAN: usize = 3;
/// Column of the event-driven loan mode without a polling window.
const SLEEP_LOAN: usize = 5;
/// Column of iceoryx2 (after the ferry modes).
const ICEORYX2: usize = MODES.len();

fn config(mode: &str, domain: u16) -> Config {
    Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        shared_memory: mode != "tcp",
        shm_busy_poll: mode.starts_with("busy"),
        shm_spin_us: if mode.starts_with("sleep") {
            0
        } else {
            Config::default().shm_spin_us
        },
        ..Config::default()
    }
}

/// Publishes `len` bytes whose first 8 are `seq`: loaned and written in
/// place, or copied from `payload`.
fn send(p: &ferry::Publisher<RawBytes>, loan: bool, seq: u64, payload: &Bytes) {
    if loan {
        let mut s = p.loan(payload.len());
        let n = s.len().min(8);
        s[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
        let _ = s.publish();
    } else {
        let _ = p.publish(RawBytes(payload.clone()));
    }
}

/// Echo: every /ping comes back on /pong, from the delivering thread.
fn echo(mode: &str, domain: u16, cpu: Option<usize>) {
    if let Some(c) = cpu {
        pin(c);
    }
    let node = Node::builder()
        .name("echo")
        .config(config(mode, domain))
        .build()
        .expect("node");
    let pong = node
        .publisher::<RawBytes>("/rtt/pong")
        .qos(Qos::default().keep_last(16))
        .build()
        .expect("publisher");
    let _ping = node
        .subscriber::<RawBytes>("/rtt/ping")
        .qos(Qos::default().keep_last(16))
        .inline_callback({
            let loan = mode.ends_with("-loan");
            move |s| {
                if loan {
                    let mut l = pong.loan(s.len());
                    let n = s.len().min(8);
                    l[..n].copy_from_slice(&s[..n]);
                    let _ = l.publish();
                } else {
                    let _ = pong.publish(RawBytes(s.0.clone()));
                }
            }
        })
        .build()
        .expect("subscriber");
    println!("ready");
    let _ = std::io::stdout().flush();
    std::thread::sleep(Duration::from_secs(3600));
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// (p50, p99) round trip in µs per size for one ferry mode.
fn measure_ferry(mode: &str, domain: u16, count: usize) -> Vec<(f64, f64)> {
    let exe = std::env::current_exe().expect("exe");
    let mut cmd = Command::new(exe);
    cmd.args(["echo", mode, &domain.to_string()]);
    if let Some((_, echo_cpu)) = placement().cpus() {
        cmd.args(["--cpu", &echo_cpu.to_string()]);
    }
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("echo process");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("echo ready");
    let node = Node::builder()
        .name("ping")
        .config(config(mode, domain))
        .build()
        .expect("node");
    let ping = Arc::new(
        node.publisher::<RawBytes>("/rtt/ping")
            .qos(Qos::default().keep_last(16))
            .build()
            .expect("publisher"),
    );
    let loan = mode.ends_with("-loan");
    // The pong callback (ferry's delivering thread) ends one round trip and
    // sends the next ping itself, like a reactive node: only the two
    // delivering threads run, as only the two polling threads do in
    // iceoryx2's ping-pong, and no thread wake-up sits between round trips.
    let state = Arc::new(Mutex::new(Round::default()));
    let _pong = node
        .subscriber::<RawBytes>("/rtt/pong")
        .qos(Qos::default().keep_last(16))
        .inline_callback({
            // Weak: the callback must not keep its own node alive (the
            // runtime, and its /dev/shm files, go when this function ends).
            let (state, ping) = (state.clone(), Arc::downgrade(&ping));
            move |_| {
                let now = Instant::now();
                let mut r = state.lock().unwrap_or_else(|e| e.into_inner());
                if r.left == 0 {
                    return;
                }
                if r.warmup > 0 {
                    r.warmup -= 1;
                } else {
                    let rtt = now.duration_since(r.sent).as_secs_f64() * 1e6;
                    r.rtts.push(rtt);
                    r.left -= 1;
                }
                if r.left == 0 {
                    if let Some(done) = r.done.take() {
                        let _ = done.send(std::mem::take(&mut r.rtts));
                    }
                    return;
                }
                let Some(ping) = ping.upgrade() else { return };
                r.seq += 1;
                r.sent = Instant::now();
                send(&ping, loan, r.seq, &r.payload);
            }
        })
        .build()
        .expect("subscriber");
    let mut out = Vec::new();
    if ping.wait_for_subscribers(1, Duration::from_secs(10)) {
        // The echo's publisher must have found us too.
        std::thread::sleep(Duration::from_millis(500));
        for size in SIZES {
            let n = if size >= 1 << 20 { count / 4 } else { count };
            let (tx, rx) = mpsc::channel();
            {
                let mut r = state.lock().unwrap_or_else(|e| e.into_inner());
                *r = Round {
                    left: n,
                    warmup: 20,
                    rtts: Vec::with_capacity(n),
                    payload: bytes_of(size),
                    done: Some(tx),
                    seq: 0,
                    sent: Instant::now(),
                };
                send(&ping, loan, 0, &r.payload);
            }
            let mut rtts = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
            // A lost round trip stops the chain: nothing measured for the cell.
            state.lock().unwrap_or_else(|e| e.into_inner()).left = 0;
            out.push(if rtts.is_empty() {
                (f64::NAN, f64::NAN)
            } else {
                (percentile(&mut rtts, 0.5), percentile(&mut rtts, 0.99))
            });
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    out
}

/// One cell's round trips, driven by the pong callback.
struct Round {
    left: usize,
    warmup: usize,
    rtts: Vec<f64>,
    payload: Bytes,
    done: Option<mpsc::Sender<Vec<f64>>>,
    seq: u64,
    sent: Instant,
}

impl Default for Round {
    fn default() -> Self {
        Round {
            left: 0,
            warmup: 0,
            rtts: Vec::new(),
            payload: Bytes::new(),
            done: None,
            seq: 0,
            sent: Instant::now(),
        }
    }
}

fn bytes_of(size: usize) -> Bytes {
    (0..size).map(|i| i as u8).collect::<Vec<u8>>().into()
}

/// The floor of event-driven wake-ups: two processes bounce a futex word.
fn measure_futex(count: usize) -> (f64, f64) {
    // SAFETY: an anonymous shared mapping of one page, inherited by fork.
    let word = unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert!(p != libc::MAP_FAILED, "mmap");
        &*(p as *const AtomicU32)
    };
    let wait = |expect: u32| {
        while word.load(Ordering::Acquire) == expect {
            ferry_shm::futex::wait(word, expect, Duration::from_millis(100));
        }
    };
    // SAFETY: the child only bounces the word and exits without unwinding.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        if let Some((_, echo_cpu)) = placement().cpus() {
            pin(echo_cpu);
        }
        let mut v = 0u32;
        loop {
            wait(v); // wait for the ping (odd)
            v = word.load(Ordering::Acquire);
            if v == u32::MAX {
                unsafe { libc::_exit(0) };
            }
            v += 1; // pong (even)
            word.store(v, Ordering::Release);
            ferry_shm::futex::wake_all(word);
        }
    }
    let mut rtts = Vec::with_capacity(count);
    let mut v = 0u32;
    for i in 0..count + 20 {
        let t = Instant::now();
        v += 1;
        word.store(v, Ordering::Release);
        ferry_shm::futex::wake_all(word);
        wait(v);
        v = word.load(Ordering::Acquire);
        if i >= 20 {
            rtts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    word.store(u32::MAX, Ordering::Release);
    ferry_shm::futex::wake_all(word);
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    (percentile(&mut rtts, 0.5), percentile(&mut rtts, 0.99))
}

/// iceoryx2's own ping-pong (`bench/iceoryx2`, busy-poll, loans): (p50,
/// p99) per size, or nothing when its binary is not built.
fn measure_iceoryx2(bin: &std::path::Path, count: usize) -> Vec<(f64, f64)> {
    let before = iox2_files();
    let out = measure_iceoryx2_sizes(bin, count);
    // iceoryx2 keeps some files in /dev/shm after its processes end: remove
    // the ones this measurement made (not any that were there before).
    for f in iox2_files().difference(&before) {
        let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(f));
    }
    out
}

/// iceoryx2's files in /dev/shm.
fn iox2_files() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("iox2_"))
                .collect()
        })
        .unwrap_or_default()
}

fn measure_iceoryx2_sizes(bin: &std::path::Path, count: usize) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for size in SIZES {
        let n = if size >= 1 << 20 { count / 4 } else { count };
        let (iters, warm) = (n.to_string(), "20".to_string());
        let spawn = |role: &str| {
            let mut cmd = match placement().cpus() {
                Some((ping_cpu, pong_cpu)) => {
                    let cpu = if role == "ping" { ping_cpu } else { pong_cpu };
                    let mut c = Command::new("taskset");
                    c.args(["-c", &cpu.to_string()]).arg(bin);
                    c
                }
                None => Command::new(bin),
            };
            cmd.args([role, &size.to_string(), &iters, &warm])
                .stdout(Stdio::piped())
                .spawn()
        };
        let (Ok(mut pong), Ok(ping)) = (spawn("pong"), spawn("ping")) else {
            return Vec::new();
        };
        let res = ping.wait_with_output();
        // pong exits by itself after ping's STOP (and removes its iceoryx2
        // resources); killed only if it does not within 5 s.
        let end = Instant::now() + Duration::from_secs(5);
        while matches!(pong.try_wait(), Ok(None)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = pong.kill();
        let _ = pong.wait();
        let mut rtts: Vec<f64> = res
            .ok()
            .and_then(|o| {
                let text = String::from_utf8_lossy(&o.stdout).to_string();
                serde_json::from_str::<serde_json::Value>(text.lines().last()?).ok()
            })
            .and_then(|v| {
                v["rtt_ns"].as_array().map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_f64())
                        .map(|ns| ns / 1e3)
                        .collect()
                })
            })
            .unwrap_or_default();
        out.push(if rtts.is_empty() {
            (f64::NAN, f64::NAN)
        } else {
            (percentile(&mut rtts, 0.5), percentile(&mut rtts, 0.99))
        });
    }
    out
}

fn run(args: RunArgs) {
    let RunArgs {
        quick,
        out,
        iceoryx2,
        modes: only,
        count,
        rounds,
        floor_count,
        placement,
    } = args;
    let _ = PLACEMENT.set(placement);
    if let Some((ping_cpu, _)) = placement.cpus() {
        pin(ping_cpu);
    }
    let count = count.unwrap_or(if quick { 300 } else { 3000 });
    let rounds = rounds.unwrap_or(if quick { 1 } else { 3 });
    // The floor is bimodal on a VM (a halted vCPU wakes tens of µs later
    // than a busy one): measured before, between and after the ferry modes;
    // the lowest p50 is the floor (the strictest bar).
    let floor_count = floor_count.unwrap_or((count * 10).min(30_000)).max(1);
    // Whole rounds, one after the other: this VM's wake-up latency drifts
    // (halted vCPUs), so every comparison is made inside a round and the
    // median over rounds is reported.
    let mut rounds_data: Vec<Sweep> = Vec::new();
    for _ in 0..rounds.max(1) {
        let mut floors = vec![measure_futex(floor_count)];
        let mut results: Vec<(&str, Vec<(f64, f64)>)> = Vec::new();
        for (k, (mode, domain)) in MODES.into_iter().enumerate() {
            if k == EVENT_LOAN {
                floors.push(measure_futex(floor_count));
            }
            let skip = only.as_ref().is_some_and(|o| !o.iter().any(|m| m == mode));
            let r = if skip {
                Vec::new()
            } else {
                measure_ferry(mode, domain, count)
            };
            results.push((mode, r));
        }
        let iox = iceoryx2
            .as_ref()
            .filter(|b| b.exists())
            .map(|b| measure_iceoryx2(b, count))
            .unwrap_or_default();
        results.push(("iceoryx2", iox));
        floors.push(measure_futex(floor_count));
        rounds_data.push(Sweep { results, floors });
    }
    // The echo processes were killed: remove what they left in /dev/shm.
    ferry_shm::sweep_stale();
    let floors: Vec<(f64, f64)> = rounds_data.iter().flat_map(|r| r.floors.clone()).collect();
    let results = median_results(&rounds_data);
    // The floor: the lowest-p50 futex run of the whole run (see `targets`).
    let floor = rounds_data
        .iter()
        .map(Sweep::floor)
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .unwrap_or((f64::NAN, f64::NAN));
    let floor_runs: Vec<String> = floors
        .iter()
        .map(|f| format!("{:.1} / {:.1}", f.0, f.1))
        .collect();
    let cell = |m: usize, i: usize| results[m].1.get(i).copied().unwrap_or((f64::NAN, f64::NAN));
    let mut md = vec![
        "# Shared-memory round trip between two processes".to_string(),
        String::new(),
        format!(
            "Command: `cargo build --release -p ferry-lab && (cd bench/iceoryx2 && cargo build --release) && \
             ./target/release/ferry-shm-rtt run{}{}{} --iceoryx2 bench/iceoryx2/target/release/iox2-rtt`. \
             {count} round trips per cell ({} at 1 and 4 MiB), payload `RawBytes`, ping → echo \
             process republishes from its delivering thread → pong; RTT from publish to the pong \
             callback, which sends the next ping itself (only the two delivering threads run). *copy*: `publish` of a prepared buffer (one copy into shared memory per \
             hop); *loan*: `Publisher::loan` on both sides, only the 8-byte sequence number \
             written (as iceoryx2's benchmark does). iceoryx2: crate 0.10 in the same run, \
             busy-poll ping-pong with loans. Futex floor: two processes bouncing one shared \
             futex word ({} round trips). Machine: 2 vCPUs, shared. Placement: {}.",
            if quick { " --quick" } else { "" },
            match placement {
                Placement::Free => String::new(),
                p => format!(" --placement {}", format!("{p:?}").to_lowercase()),
            },
            only.as_ref()
                .map(|m| format!(" --modes {}", m.join(",")))
                .unwrap_or_default(),
            count / 4,
            floor_count,
            placement.describe()
        ),
        String::new(),
        format!(
            "Futex ping-pong floor (event-driven wake-up, no data): p50 {:.1} µs, p99 {:.1} µs \
             (the lowest-p50 run of the whole run; three runs per round — before, between and after the \
             ferry modes; every run, p50 / p99: {}). Table cells: median over rounds.",
            floor.0,
            floor.1,
            floor_runs.join(", ")
        ),
        String::new(),
        "RTT p50 / p99 in µs:".into(),
        String::new(),
        "| size | event copy | busy copy | event loan | busy loan | TCP | event loan, no polling window | iceoryx2 busy | busy loan / iceoryx2 (p50) | event loan / futex floor (p50) | no-window loan / futex floor (p50) | busy loan / its 64 B (p50) |".into(),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|".into(),
    ];
    let mut json = Vec::new();
    for (i, size) in SIZES.iter().enumerate() {
        let cells: Vec<(f64, f64)> = (0..results.len()).map(|m| cell(m, i)).collect();
        let (el, bl, sl, ix) = (
            cells[EVENT_LOAN],
            cells[BUSY_LOAN],
            cells[SLEEP_LOAN],
            cells[ICEORYX2],
        );
        let mut row = format!("| {} |", human(*size));
        // "—": not run (mode not selected, iceoryx2 not built); NaN: run,
        // but no round trip came back.
        let ran = |m: usize| !results[m].1.is_empty();
        for (m, c) in cells.iter().enumerate() {
            row += &if ran(m) {
                format!(" {:.1} / {:.1} |", c.0, c.1)
            } else {
                " — |".to_string()
            };
        }
        let ratio = |ok: bool, v: f64| {
            if ok {
                format!(" {v:.2} |")
            } else {
                " — |".to_string()
            }
        };
        row += &ratio(ran(BUSY_LOAN) && ran(ICEORYX2), bl.0 / ix.0);
        row += &ratio(ran(EVENT_LOAN), el.0 / floor.0);
        row += &ratio(ran(SLEEP_LOAN), sl.0 / floor.0);
        row += &ratio(ran(BUSY_LOAN), bl.0 / cell(BUSY_LOAN, 0).0);
        md.push(row);
        let mut j = serde_json::json!({ "size": size });
        for (m, c) in results.iter().zip(&cells) {
            j[format!("{}_p50_us", m.0)] = c.0.into();
            j[format!("{}_p99_us", m.0)] = c.1.into();
        }
        json.push(j);
    }
    md.extend(targets(&rounds_data));
    let text = md.join("\n") + "\n";
    print!("{text}");
    if let Some(out) = out {
        let _ = std::fs::write(format!("{out}.md"), &text);
        let _ = std::fs::write(
            format!("{out}.json"),
            serde_json::to_string_pretty(&serde_json::json!({
                "futex_p50_us": floor.0, "futex_p99_us": floor.1, "futex_runs": floors, "cells": json,
                "placement": format!("{placement:?}").to_lowercase()
            }))
            .unwrap_or_default(),
        );
    }
}

/// One round of every measurement.
struct Sweep {
    results: Vec<(&'static str, Vec<(f64, f64)>)>,
    floors: Vec<(f64, f64)>,
}

impl Sweep {
    /// The round's futex floor: its lowest-p50 run (the strictest bar).
    fn floor(&self) -> (f64, f64) {
        self.floors
            .iter()
            .copied()
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap_or((f64::NAN, f64::NAN))
    }

    /// p50 per size of mode `m`.
    fn p50(&self, m: usize) -> Vec<f64> {
        self.results[m].1.iter().map(|c| c.0).collect()
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Per mode and size, the median over rounds of p50 and of p99.
fn median_results(rounds: &[Sweep]) -> Vec<(&'static str, Vec<(f64, f64)>)> {
    let first = &rounds[0].results;
    first
        .iter()
        .enumerate()
        .map(|(m, (name, cells))| {
            let cells = (0..cells.len())
                .map(|i| {
                    let at = |q: fn(&(f64, f64)) -> f64| {
                        median(
                            rounds
                                .iter()
                                .filter_map(|r| r.results[m].1.get(i).map(q))
                                .collect(),
                        )
                    };
                    (at(|c| c.0), at(|c| c.1))
                })
                .collect();
            (*name, cells)
        })
        .collect()
}

/// The targets, as measured: every ratio is taken inside one round
/// (same minute, same machine state), then its median over rounds.
fn targets(rounds: &[Sweep]) -> Vec<String> {
    let verdict = |ok: bool| if ok { "**met**" } else { "**not met**" };
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    // Median over rounds of a per-size ratio.
    let ratio = |f: &dyn Fn(&Sweep, usize) -> f64| -> Vec<f64> {
        (0..SIZES.len())
            .map(|i| median(rounds.iter().map(|r| f(r, i)).collect()))
            .collect()
    };
    let at = |v: Vec<f64>, i: usize| v.get(i).copied().unwrap_or(f64::NAN);
    let mut out = vec![
        String::new(),
        format!(
            "## Targets ({} round{}; each ratio taken inside a round, median over rounds)",
            rounds.len(),
            if rounds.len() == 1 { "" } else { "s" }
        ),
        String::new(),
    ];
    let busy_vs_iox = ratio(&|r, i| at(r.p50(BUSY_LOAN), i) / at(r.p50(ICEORYX2), i));
    if busy_vs_iox.iter().any(|x| !x.is_nan()) {
        out.push(format!(
            "- busy-poll RTT p50 ≤ 1.2× iceoryx2's at every size: {} (ferry busy loan / iceoryx2 = {} at 64 B … 4 MiB)",
            verdict(busy_vs_iox.iter().all(|x| *x <= 1.2)),
            list(&busy_vs_iox)
        ));
    }
    let flat = median(
        rounds
            .iter()
            .map(|r| at(r.p50(BUSY_LOAN), SIZES.len() - 1) / at(r.p50(BUSY_LOAN), 0))
            .collect(),
    );
    if !flat.is_nan() {
        out.push(format!(
            "- flat with loans, 4 MiB p50 ≤ 1.2× the 64 B p50: {} ({flat:.2}×)",
            verdict(flat <= 1.2)
        ));
    }
    // The floor is the lowest p50 of every futex run in the whole run: on
    // this VM a round can be "cold" (halted vCPUs wake tens of µs late) for
    // the floor and ferry alike, and a cold floor would flatter ferry.
    let best = rounds
        .iter()
        .map(|r| r.floor().0)
        .min_by(f64::total_cmp)
        .unwrap_or(f64::NAN);
    let event_vs_floor = ratio(&|r, i| at(r.p50(EVENT_LOAN), i) / best);
    if event_vs_floor.iter().any(|x| !x.is_nan()) {
        out.push(format!(
            "- event-driven p50 ≤ 1.1× the futex floor (the lowest futex p50 of the run, {best:.1} µs): {} (event loan / floor = {}; the default event-driven mode, whose delivery thread polls up to `shm_spin_us` = {} µs while samples keep coming that soon — here the replies — and otherwise sleeps on the doorbell)",
            verdict(event_vs_floor.iter().all(|x| *x <= 1.1)),
            list(&event_vs_floor),
            Config::default().shm_spin_us
        ));
    }
    let sleep_vs_floor = ratio(&|r, i| at(r.p50(SLEEP_LOAN), i) / best);
    if sleep_vs_floor.iter().any(|x| !x.is_nan()) {
        let bound = ratio(&|r, i| (best + at(r.p50(BUSY_LOAN), i)) / best);
        let arithmetic = if bound.iter().any(|x| !x.is_nan()) {
            format!(
                ". Arithmetic: such a round trip is two futex wake-ups (the floor) plus ferry's \
                 own work on both hops, which the busy-poll loan round trip measures without \
                 wake-ups: (floor + busy loan) / floor = {} — what it reaches when every wake-up \
                 is as fast as the floor's",
                list(&bound)
            )
        } else {
            String::new()
        };
        out.push(format!(
            "  - without the polling window (`shm_spin_us = 0`: every hop a futex wake-up, what a \
             stream slower than the window gets): no-window loan / floor = {}{arithmetic}",
            list(&sleep_vs_floor),
        ));
    }
    out
}

fn human(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{} MiB", n >> 20)
    } else if n >= 1024 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

fn main() {
    match Cli::parse().cmd {
        Cmd::Run(args) => run(args),
        Cmd::Echo { mode, domain, cpu } => echo(&mode, domain, cpu),
    }
}
