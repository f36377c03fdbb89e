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
use std::sync::mpsc;
use std::time::{Duration, Instant};

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
    Run {
        /// 300 round trips per cell instead of 3000 (CI).
        #[arg(long)]
        quick: bool,
        /// Write Markdown and JSON here (without extension).
        #[arg(long)]
        out: Option<String>,
    },
    /// The echo side of one mode (spawned by `run`).
    #[command(hide = true)]
    Echo { mode: String, domain: u16 },
}

const SIZES: [usize; 5] = [64, 4096, 65_536, 1 << 20, 4 << 20];

fn config(mode: &str, domain: u16) -> Config {
    Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        shared_memory: mode != "tcp",
        shm_busy_poll: mode == "busy",
        ..Config::default()
    }
}

/// Echo: every /ping comes back on /pong, from the delivering thread.
fn echo(mode: &str, domain: u16) {
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
        .callback(move |s| {
            let _ = pong.publish(RawBytes(s.0.clone()));
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
    let mut child = Command::new(exe)
        .args(["echo", mode, &domain.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("echo process");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("echo ready");
    let node = Node::builder()
        .name("ping")
        .config(config(mode, domain))
        .build()
        .expect("node");
    let ping = node
        .publisher::<RawBytes>("/rtt/ping")
        .qos(Qos::default().keep_last(16))
        .build()
        .expect("publisher");
    let (tx, rx) = mpsc::sync_channel::<Instant>(16);
    let _pong = node
        .subscriber::<RawBytes>("/rtt/pong")
        .qos(Qos::default().keep_last(16))
        .callback(move |_| {
            let _ = tx.try_send(Instant::now());
        })
        .build()
        .expect("subscriber");
    let mut out = Vec::new();
    if ping.wait_for_subscribers(1, Duration::from_secs(10)) {
        // The echo's publisher must have found us too.
        std::thread::sleep(Duration::from_millis(500));
        for size in SIZES {
            let payload = bytes_of(size);
            let n = if size >= 1 << 20 { count / 4 } else { count };
            let mut rtts = Vec::with_capacity(n);
            for i in 0..n + 20 {
                while rx.try_recv().is_ok() {}
                let t = Instant::now();
                let _ = ping.publish(RawBytes(payload.0.clone()));
                if let Ok(back) = rx.recv_timeout(Duration::from_secs(2)) {
                    if i >= 20 {
                        rtts.push(back.duration_since(t).as_secs_f64() * 1e6);
                    }
                }
            }
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

fn bytes_of(size: usize) -> RawBytes {
    RawBytes::new((0..size).map(|i| i as u8).collect::<Vec<u8>>())
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

fn run(quick: bool, out: Option<String>) {
    let count = if quick { 300 } else { 3000 };
    let floor = measure_futex(count * 10);
    let modes = [("shm", 171u16), ("busy", 172), ("tcp", 173)];
    let mut results = Vec::new();
    for (mode, domain) in modes {
        results.push((mode, measure_ferry(mode, domain, count)));
    }
    let mut md = vec![
        "# Shared-memory round trip between two processes".to_string(),
        String::new(),
        format!(
            "Command: `cargo build --release -p ferry-lab && ./target/release/ferry-shm-rtt run{}`. \
             {count} round trips per cell ({} at 1 and 4 MiB), payload `RawBytes`, ping → echo \
             process republishes from its delivering thread → pong; RTT from publish to the pong \
             callback. Futex floor: two processes bouncing one shared futex word ({} round trips).",
            if quick { " --quick" } else { "" },
            count / 4,
            count * 10
        ),
        String::new(),
        format!(
            "Futex ping-pong floor (event-driven wake-up, no data): p50 {:.1} µs, p99 {:.1} µs.",
            floor.0, floor.1
        ),
        String::new(),
        "| size | shm event p50 µs | p99 | shm busy-poll p50 µs | p99 | TCP p50 µs | p99 | shm event p50 / futex floor | TCP p50 / shm event p50 |".into(),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|".into(),
    ];
    let mut json = Vec::new();
    for (i, size) in SIZES.iter().enumerate() {
        let cell = |m: usize| results[m].1.get(i).copied().unwrap_or((f64::NAN, f64::NAN));
        let (e, b, t) = (cell(0), cell(1), cell(2));
        md.push(format!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} |",
            human(*size),
            e.0,
            e.1,
            b.0,
            b.1,
            t.0,
            t.1,
            e.0 / floor.0,
            t.0 / e.0
        ));
        json.push(serde_json::json!({
            "size": size, "shm_p50_us": e.0, "shm_p99_us": e.1, "busy_p50_us": b.0,
            "busy_p99_us": b.1, "tcp_p50_us": t.0, "tcp_p99_us": t.1,
        }));
    }
    let text = md.join("\n") + "\n";
    print!("{text}");
    if let Some(out) = out {
        let _ = std::fs::write(format!("{out}.md"), &text);
        let _ = std::fs::write(
            format!("{out}.json"),
            serde_json::to_string_pretty(&serde_json::json!({
                "futex_p50_us": floor.0, "futex_p99_us": floor.1, "cells": json
            }))
            .unwrap_or_default(),
        );
    }
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
        Cmd::Run { quick, out } => run(quick, out),
        Cmd::Echo { mode, domain } => echo(&mode, domain),
    }
}
