//! Machine facts, the Markdown table and the JSON results file.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::measure::{LatencySummary, TputSummary};
use crate::proto::Res;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub date_utc: String,
    pub nproc: usize,
    pub cpu: String,
    pub kernel: String,
    pub loadavg: String,
}

fn sh(cmd: &str, args: &[&str]) -> Option<String> {
    let o = std::process::Command::new(cmd).args(args).output().ok()?;
    Some(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    Machine {
        date_utc: sh("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]).unwrap_or_default(),
        nproc: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        cpu,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
        loadavg: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

/// The ferry sources this binary was built from (see build.rs).
pub fn source_state() -> String {
    env!("FERRY_BENCH_SOURCE").to_string()
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Results {
    pub command: String,
    pub ferry_source: String,
    pub mode: String,
    pub plan: serde_json::Value,
    pub machine_start: Machine,
    pub machine_end: Machine,
    pub zenoh_version: String,
    pub latency: Vec<LatencySummary>,
    pub throughput: Vec<TputSummary>,
}

/// Nanoseconds as microseconds, 3 significant figures or so.
pub fn us(ns: u64) -> String {
    let u = ns as f64 / 1000.0;
    if u < 10.0 {
        format!("{u:.2}")
    } else if u < 1000.0 {
        format!("{u:.1}")
    } else {
        format!("{u:.0}")
    }
}

fn rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2} M", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.1} k", r / 1e3)
    } else {
        format!("{r:.0}")
    }
}

/// `64 B`, `4 KiB`, `1 MiB`.
pub fn size_name(s: usize) -> String {
    if s >= 1 << 20 && s.is_multiple_of(1 << 20) {
        format!("{} MiB", s >> 20)
    } else if s >= 1024 && s.is_multiple_of(1024) {
        format!("{} KiB", s >> 10)
    } else {
        format!("{s} B")
    }
}

/// A measured cell: its system and size.
pub trait Cell {
    /// (transport, size).
    fn key(&self) -> (&str, usize);
}

impl Cell for LatencySummary {
    fn key(&self) -> (&str, usize) {
        (&self.transport, self.size)
    }
}

impl Cell for TputSummary {
    fn key(&self) -> (&str, usize) {
        (&self.transport, self.size)
    }
}

/// The cell of system `t` at `size`.
pub fn find<'a, C: Cell>(cells: &'a [C], t: &str, size: usize) -> Option<&'a C> {
    cells.iter().find(|c| c.key() == (t, size))
}

impl Results {
    fn lat(&self, t: &str, size: usize) -> Option<&LatencySummary> {
        find(&self.latency, t, size)
    }
    fn tput(&self, t: &str, size: usize) -> Option<&TputSummary> {
        find(&self.throughput, t, size)
    }
    fn sizes(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.latency.iter().map(|l| l.size).collect();
        v.extend(self.throughput.iter().map(|l| l.size));
        v.sort_unstable();
        v.dedup();
        v
    }

    pub fn markdown(&self) -> String {
        let mut m = String::new();
        let pp = |l: Option<&LatencySummary>| {
            l.map(|l| format!("{} / {}", us(l.p50_ns), us(l.p99_ns)))
                .unwrap_or_else(|| "–".into())
        };
        let _ = writeln!(
            m,
            "# ferry foundation benchmark: in-process, TCP, and Zenoh over TCP in one run\n"
        );
        let _ = writeln!(
            m,
            "Reproduce (from `/work/main`):\n\n```sh\n{}\n```\n",
            self.command
        );
        let ms = &self.machine_start;
        let _ = writeln!(
            m,
            "Machine: {} CPUs ({}), Linux {}, run started {}; load average at start `{}`, at end `{}` \
             (the machine is shared: another build may be running). Mode: {}. zenoh {} (peer, TCP). \
             ferry at `{}`.\n",
            ms.nproc, ms.cpu, ms.kernel, ms.date_utc, ms.loadavg, self.machine_end.loadavg, self.mode,
            self.zenoh_version, self.ferry_source
        );
        let _ = writeln!(
            m,
            "Latency in µs, p50 / p99. *intra* = publish → callback on one node (same thread, no \
             serialization); *TCP* = one-way = RTT/2 of a ping-pong between two processes on 127.0.0.1. \
             Ratios are ferry / Zenoh: latency < 1 and throughput > 1 mean ferry is better.\n"
        );
        let _ = writeln!(
            m,
            "| size | ferry intra p50 / p99 | ferry TCP p50 / p99 | Zenoh TCP p50 / p99 | p50 ferry/Zenoh | \
             ferry msg/s | ferry Gbit/s | Zenoh msg/s | Zenoh Gbit/s | msg/s ferry/Zenoh |"
        );
        let _ = writeln!(m, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for s in self.sizes() {
            let (fi, ft, zt) = (
                self.lat("ferry-intra", s),
                self.lat("ferry-tcp", s),
                self.lat("zenoh-tcp", s),
            );
            let lr = match (ft, zt) {
                (Some(f), Some(z)) => format!("{:.2}", f.p50_ns as f64 / z.p50_ns.max(1) as f64),
                _ => "–".into(),
            };
            let (f, z) = (self.tput("ferry-tcp", s), self.tput("zenoh-tcp", s));
            let cell = |t: Option<&TputSummary>| {
                t.map(|t| {
                    let mark = if t.stalled_rounds > 0 {
                        format!(" ({}/{} stalled)", t.stalled_rounds, t.rounds.len())
                    } else {
                        String::new()
                    };
                    (
                        format!("{}{mark}", rate(t.msgs_per_s)),
                        format!("{:.2}", t.gbit_per_s),
                    )
                })
                .unwrap_or(("–".into(), "–".into()))
            };
            let (fm, fg) = cell(f);
            let (zm, zg) = cell(z);
            let tr = match (f, z) {
                (Some(f), Some(z)) => format!("{:.2}", f.msgs_per_s / z.msgs_per_s.max(1e-9)),
                _ => "–".into(),
            };
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {lr} | {fm} | {fg} | {zm} | {zg} | {tr} |",
                size_name(s),
                pp(fi),
                pp(ft),
                pp(zt)
            );
        }
        let kl: Vec<&TputSummary> = self
            .throughput
            .iter()
            .filter(|t| t.transport == "ferry-tcp-keep_last")
            .collect();
        if !kl.is_empty() {
            let _ = writeln!(
                m,
                "\nDiagnostic, not the issue's QoS: ferry TCP with reliable **keep_last(1024)**, which never \
                 blocks the publisher (a full backlog drops its oldest unsent frame). It shows what the TCP \
                 path carries when no keep_all wait can occur (a check that keep_all costs little); *lost* = dropped in \
                 the writer's backlog:\n"
            );
            let _ = writeln!(
                m,
                "| size | received msg/s | Gbit/s | msg/s vs Zenoh | sent | lost |"
            );
            let _ = writeln!(m, "|---:|---:|---:|---:|---:|---:|");
            for t in kl {
                let z = self
                    .tput("zenoh-tcp", t.size)
                    .map(|z| format!("{:.2}", t.msgs_per_s / z.msgs_per_s.max(1e-9)));
                let _ = writeln!(
                    m,
                    "| {} | {} | {:.2} | {} | {} | {} |",
                    size_name(t.size),
                    rate(t.msgs_per_s),
                    t.gbit_per_s,
                    z.unwrap_or_else(|| "–".into()),
                    t.sent,
                    t.lost
                );
            }
        }
        let _ = writeln!(m, "\n## Targets (from the issue), as measured\n");
        let sizes = self.sizes();
        let intra_ok: Vec<String> = sizes
            .iter()
            .filter_map(|&s| self.lat("ferry-intra", s).map(|l| (s, l)))
            .map(|(s, l)| format!("{} {} µs", size_name(s), us(l.p50_ns)))
            .collect();
        let intra_pass = sizes
            .iter()
            .filter_map(|&s| self.lat("ferry-intra", s))
            .all(|l| l.p50_ns < 2000);
        let _ = writeln!(
            m,
            "- in-process publish → callback p50 < 2 µs: **{}** ({})",
            if intra_pass { "met" } else { "NOT met" },
            intra_ok.join(", ")
        );
        let mut lat_pass = true;
        let mut lat_cells = Vec::new();
        for &s in &sizes {
            if let (Some(f), Some(z)) = (self.lat("ferry-tcp", s), self.lat("zenoh-tcp", s)) {
                lat_pass &= f.p50_ns <= z.p50_ns;
                lat_cells.push(format!(
                    "{} {} vs {} µs",
                    size_name(s),
                    us(f.p50_ns),
                    us(z.p50_ns)
                ));
            }
        }
        let _ = writeln!(
            m,
            "- ferry TCP one-way p50 ≤ Zenoh TCP p50: **{}** ({})",
            if lat_pass { "met" } else { "NOT met" },
            lat_cells.join(", ")
        );
        let small = sizes.first().copied().unwrap_or(64);
        if let (Some(f), Some(z)) = (self.tput("ferry-tcp", small), self.tput("zenoh-tcp", small)) {
            let _ = writeln!(
                m,
                "- ferry {} throughput ≥ Zenoh: **{}** ({} vs {} msg/s)",
                size_name(small),
                if f.msgs_per_s >= z.msgs_per_s {
                    "met"
                } else {
                    "NOT met"
                },
                rate(f.msgs_per_s),
                rate(z.msgs_per_s)
            );
        }
        let _ = writeln!(m, "\n## Details\n");
        let _ = writeln!(
            m,
            "| transport | size | samples | timeouts | p50 | p90 | p99 | p99.9 | max (µs) |"
        );
        let _ = writeln!(m, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for l in &self.latency {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                l.transport,
                size_name(l.size),
                l.samples,
                l.timeouts,
                us(l.p50_ns),
                us(l.p90_ns),
                us(l.p99_ns),
                us(l.p999_ns),
                us(l.max_ns)
            );
        }
        let _ = writeln!(
            m,
            "\n| transport | size | sent | received | lost | refused publishes | stalled rounds | per-round msg/s |"
        );
        let _ = writeln!(m, "|---|---:|---:|---:|---:|---:|---:|---|");
        for t in &self.throughput {
            let per: Vec<String> = t
                .rounds
                .iter()
                .map(|r| rate(r.win_msgs as f64 / r.win_secs.max(1e-9)))
                .collect();
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                t.transport,
                size_name(t.size),
                t.sent,
                t.received,
                t.lost,
                t.not_sent,
                t.stalled_rounds,
                per.join(", ")
            );
        }
        let _ = writeln!(
            m,
            "\nMethod: {}",
            self.plan["method"].as_str().unwrap_or("")
        );
        let stalled: usize = self
            .throughput
            .iter()
            .filter(|t| t.transport == "ferry-tcp")
            .map(|t| t.stalled_rounds)
            .sum();
        let refused: u64 = self
            .throughput
            .iter()
            .filter(|t| t.transport == "ferry-tcp")
            .map(|t| t.not_sent)
            .sum();
        let _ = writeln!(
            m,
            "\nNotes: {stalled} ferry keep_all throughput run(s) stalled (the end marker could not be \
             published; the child's counts were read over stdin and the window ends with the parent's \
             last send) and {refused} publish(es) returned `PublishError::Blocked` after `keep_all_block_ms`. \
             Each throughput run uses a fresh ferry publisher, so one stalled connection does not carry over. \
             Issues this accounting exposed before: `bench/README.md`.",
        );
        for t in &self.throughput {
            for (i, r) in t.rounds.iter().enumerate() {
                if r.events.is_empty() {
                    continue;
                }
                let kinds: Vec<&str> = r
                    .events
                    .iter()
                    .map(|e| {
                        let head = e.split(" {").next().unwrap_or(e);
                        match e.find("reason: ") {
                            Some(k) => e[k + 8..].trim_end_matches([' ', '}']),
                            None => head,
                        }
                    })
                    .collect();
                let _ = writeln!(
                    m,
                    "\n- {} {} round {}: the publisher's connection was dropped and re-made during the run \
                     (events: {}){}; samples published while it had no link were accepted and never \
                     delivered (`bench/README.md`, issue 5).",
                    t.transport,
                    size_name(t.size),
                    i + 1,
                    kinds.join(", "),
                    if r.stalled { ", and the end marker never arrived (stalled)" } else { "" }
                );
            }
        }
        m
    }
}

/// Writes `results` and `md` to `out` (or `results/<name>`, `-quick` in
/// quick mode) `.json` / `.md`, and prints the Markdown.
pub fn publish(
    out: Option<&Path>,
    name: &str,
    quick: bool,
    results: &impl Serialize,
    md: String,
) -> Res<()> {
    let base = out.map(Path::to_path_buf).unwrap_or_else(|| {
        let file = if quick {
            format!("{name}-quick")
        } else {
            name.to_string()
        };
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("results")
            .join(file)
    });
    let md = write(&base, results, md)?;
    println!("{md}");
    eprintln!("wrote {} and .md", base.with_extension("json").display());
    Ok(())
}

/// Writes `results` to `<base>.json` and `md` to `<base>.md`; returns the
/// Markdown.
pub fn write(base: &Path, results: &impl Serialize, md: String) -> Res<String> {
    if let Some(dir) = base.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(
        base.with_extension("json"),
        serde_json::to_string_pretty(results)?,
    )?;
    std::fs::write(base.with_extension("md"), &md)?;
    Ok(md)
}
