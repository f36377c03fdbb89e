//! `ferry-bench --security`: what TLS costs ferry's TCP path and Zenoh's
//! TCP path, the four side by side in one run (issue 22's cost table; the
//! MQTT and UDP rows are in `ferry-sec-micro`).
//!
//! One keystore made for the run serves both systems: ferry's enclave
//! identity (`/bench`) and a server certificate for `localhost` from the
//! same CA. ferry: security `off` in one discovery domain, `enforce` (TLS
//! 1.3 with mutual certificates) in the next. Zenoh: `tcp/` against `tls/`
//! with `enable_mtls`, the name checked on connect. Four children echo
//! and count; the parent alternates the four in every round.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry::{Config, DiscoveryRange, Node};
use ferry_security::create::{
    create_broker_certificate, create_identity, create_keystore, create_permissions, Validity,
};
use ferry_security::Mode;
use serde::{Deserialize, Serialize};

use crate::measure::{Blaster, LatencySummary, PingRun, Pinger, TputSummary};
use crate::proto::{ChildProc, Res};
use crate::report::{self, size_name, us, Machine};
use crate::{ferry_side, zenoh_side, Plan, RunArgs, ZENOH_VERSION};

/// The enclave of both ferry ends, and the client certificate of Zenoh's.
pub const ENCLAVE: &str = "/bench";

/// The four systems, in the order they take turns.
const SYSTEMS: [&str; 4] = ["ferry-tcp", "ferry-tls", "zenoh-tcp", "zenoh-tls"];

/// Everything one run measured (the `.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct SecurityResults {
    pub command: String,
    pub ferry_source: String,
    pub mode: String,
    pub plan: serde_json::Value,
    pub machine_start: Machine,
    pub machine_end: Machine,
    pub zenoh_version: String,
    /// What each protected side negotiated, as its connection reports it.
    pub protection: Vec<(String, String)>,
    pub latency: Vec<LatencySummary>,
    pub throughput: Vec<TputSummary>,
}

/// One system's ends in the parent and its child.
struct Side {
    name: &'static str,
    child: ChildProc,
    ping: Box<dyn Pinger>,
    blast: Box<dyn Blaster>,
}

/// Removes the run's keystore when the run ends, however it ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A keystore with one enclave allowed everything under `/bench`, and a
/// server certificate for `localhost` / 127.0.0.1 (Zenoh's listener).
fn keystore(dir: &Path) -> Res<()> {
    let ks = create_keystore(dir, Validity::days(1))?;
    create_identity(&ks, ENCLAVE, Validity::days(1))?;
    let policy = dir.join("policy-in.yaml");
    std::fs::write(
        &policy,
        format!(
            "version: 1\nidentities:\n  {ENCLAVE}: {{ allow: {{ publish: [\"/bench/**\"], \
             subscribe: [\"/bench/**\"] }} }}\n"
        ),
    )?;
    create_permissions(&ks, &policy, Validity::days(1))?;
    create_broker_certificate(
        &ks,
        &["localhost".to_string(), "127.0.0.1".to_string()],
        Validity::days(1),
    )?;
    Ok(())
}

/// The parent's ferry runtime: domain `domain`, loopback discovery,
/// security `mode` with the run's keystore.
fn ferry_config(domain: u16, mode: Mode, ks: &Path) -> Config {
    let mut c = Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        ..Config::default()
    };
    c.security.mode = mode;
    if mode != Mode::Off {
        c.security.keystore = Some(ks.to_path_buf());
        c.security.enclave = Some(ENCLAVE.into());
    }
    c
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Starts the four children and waits until each is ready.
fn children(a: &RunArgs, ks: &Path) -> Res<(ChildProc, ChildProc, ChildProc, ChildProc, [u16; 2])> {
    let plain = [
        ("FERRY_DOMAIN_ID", a.domain.to_string()),
        ("FERRY_DISCOVERY", "localhost".to_string()),
        ("FERRY_SECURITY", "off".to_string()),
    ];
    let secure = [
        ("FERRY_DOMAIN_ID", (a.domain + 1).to_string()),
        ("FERRY_DISCOVERY", "localhost".to_string()),
        ("FERRY_SECURITY", "enforce".to_string()),
        ("FERRY_KEYSTORE", ks.display().to_string()),
        ("FERRY_ENCLAVE", ENCLAVE.to_string()),
    ];
    let ferry = args(&["serve", "--transport", "ferry"]);
    let f_plain = ChildProc::spawn("ferry-tcp-serve", &ferry, &plain)?;
    let f_tls = ChildProc::spawn("ferry-tls-serve", &ferry, &secure)?;
    let ports = [crate::proto::free_port()?, crate::proto::free_port()?];
    let zenoh = |port: u16| args(&["serve", "--transport", "zenoh", "--port", &port.to_string()]);
    let z_plain = ChildProc::spawn("zenoh-tcp-serve", &zenoh(ports[0]), &plain)?;
    let mut z_tls_args = zenoh(ports[1]);
    z_tls_args.extend(args(&["--tls-keystore", &ks.display().to_string()]));
    let z_tls = ChildProc::spawn("zenoh-tls-serve", &z_tls_args, &plain)?;
    let mut all = [f_plain, f_tls, z_plain, z_tls];
    for c in all.iter_mut() {
        c.expect(Duration::from_secs(20), |v| {
            v["ready"].as_bool() == Some(true)
        })?;
    }
    let [a1, a2, a3, a4] = all;
    Ok((a1, a2, a3, a4, ports))
}

/// The `--security` run: latency and throughput of the four systems,
/// written to `<out>.json` / `.md` (default `results/security-zenoh`).
pub fn run(a: &RunArgs, plan: &Plan, command: String) -> Res<()> {
    let dir = TempDir(std::env::temp_dir().join(format!("ferry-bench-ks-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    keystore(&dir.0)?;
    let ks = dir.0.as_path();
    let tls = zenoh_side::Tls::from_keystore(ks, ENCLAVE)?;
    let machine_start = report::machine();

    let (f_plain, f_tls, z_plain, z_tls, ports) = children(a, ks)?;
    let t = Duration::from_secs(15);
    let plain_node = Node::builder()
        .name("bench_main")
        .config(ferry_config(a.domain, Mode::Off, ks))
        .build()?;
    let tls_node = Node::builder()
        .name("bench_main_tls")
        .config(ferry_config(a.domain + 1, Mode::Enforce, ks))
        .build()?;
    let (zs_plain, zp_plain, zb_plain) = zenoh_side::connect(ports[0], None, t)?;
    let (zs_tls, zp_tls, zb_tls) = zenoh_side::connect(ports[1], Some(&tls), t)?;
    let ferry_tls_ping = ferry_side::pinger(&tls_node, true, t)?;
    let protection = vec![
        ("ferry-tls".to_string(), ferry_tls_ping.protection()),
        (
            "zenoh-tls".to_string(),
            "TLS 1.3 (rustls with ring's default suites at both ends: the client's first, \
             TLS13_AES_256_GCM_SHA384; Zenoh does not report it), mutual certificates"
                .to_string(),
        ),
    ];
    let mut sides = vec![
        Side {
            name: SYSTEMS[0],
            child: f_plain,
            ping: Box::new(ferry_side::pinger(&plain_node, false, t)?),
            blast: Box::new(ferry_side::blaster(
                &plain_node,
                ferry_side::keep_all(),
                false,
                t,
            )),
        },
        Side {
            name: SYSTEMS[1],
            child: f_tls,
            ping: Box::new(ferry_tls_ping),
            blast: Box::new(ferry_side::blaster(
                &tls_node,
                ferry_side::keep_all(),
                true,
                t,
            )),
        },
        Side {
            name: SYSTEMS[2],
            child: z_plain,
            ping: Box::new(zp_plain),
            blast: Box::new(zb_plain),
        },
        Side {
            name: SYSTEMS[3],
            child: z_tls,
            ping: Box::new(zp_tls),
            blast: Box::new(zb_tls),
        },
    ];

    let mut latency = Vec::new();
    for &size in &plan.sizes {
        let per_round = plan.samples_for(size).div_ceil(plan.rounds as u64);
        let mut runs: Vec<PingRun> = sides.iter().map(|_| PingRun::new(size)).collect();
        for (s, r) in sides.iter_mut().zip(runs.iter_mut()) {
            r.warm_up(s.ping.as_mut(), plan.warmup)?;
        }
        for _ in 0..plan.rounds {
            for (s, r) in sides.iter_mut().zip(runs.iter_mut()) {
                r.record(s.ping.as_mut(), per_round, Duration::from_secs(120))?;
            }
        }
        for (s, r) in sides.iter().zip(runs.iter()) {
            let l = LatencySummary::from_hist(s.name, size, "one-way = RTT/2", &r.hist, r.timeouts);
            eprintln!(
                "latency {size:>8} B  {:<9} p50 {:>8} p99 {:>8} ns",
                s.name, l.p50_ns, l.p99_ns
            );
            latency.push(l);
        }
    }

    let mut throughput = Vec::new();
    let mut run_id = 0u64;
    for &size in &plan.sizes {
        let mut rounds: Vec<Vec<_>> = sides.iter().map(|_| Vec::new()).collect();
        for _ in 0..plan.rounds {
            for (s, r) in sides.iter_mut().zip(rounds.iter_mut()) {
                run_id += 1;
                r.push(crate::measure::throughput(
                    s.blast.as_mut(),
                    &mut s.child,
                    size,
                    run_id,
                    plan.warmup,
                    plan.secs,
                )?);
            }
        }
        for (s, r) in sides.iter().zip(rounds) {
            let t = TputSummary::new(s.name, size, r);
            eprintln!(
                "throughput {size:>8} B  {:<9} {:>8.1} MB/s (lost {}, refused {}, stalled rounds {})",
                t.transport,
                t.gbit_per_s * 125.0,
                t.lost,
                t.not_sent,
                t.stalled_rounds
            );
            throughput.push(t);
        }
    }

    // Orderly end: the parent's ports and sessions, then the children (by
    // PID, in Drop).
    let children: Vec<ChildProc> = sides.into_iter().map(|s| s.child).collect();
    drop((plain_node, tls_node));
    for z in [zs_plain, zs_tls] {
        let _ = zenoh::Wait::wait(z.close());
    }
    drop(children);

    let results = SecurityResults {
        command,
        ferry_source: report::source_state(),
        mode: if a.quick { "quick" } else { "full" }.into(),
        plan: plan.json(),
        machine_start,
        machine_end: report::machine(),
        zenoh_version: ZENOH_VERSION.into(),
        protection,
        latency,
        throughput,
    };
    let md = results.markdown();
    report::publish(a.out.as_deref(), "security-zenoh", a.quick, &results, md)
}

impl SecurityResults {
    fn lat(&self, t: &str, size: usize) -> Option<&LatencySummary> {
        report::find(&self.latency, t, size)
    }
    fn tput(&self, t: &str, size: usize) -> Option<&TputSummary> {
        report::find(&self.throughput, t, size)
    }

    /// The Markdown report: one latency and one throughput table, each with
    /// TLS/plain for both systems and ferry TLS against Zenoh TLS.
    pub fn markdown(&self) -> String {
        let mut m = String::new();
        let _ = writeln!(
            m,
            "# What TLS costs: ferry TCP and Zenoh TCP, plain and TLS, in one run\n\n\
             Reproduce (from `/work/main`):\n\n```sh\n{}\n```\n",
            self.command
        );
        let ms = &self.machine_start;
        let _ = writeln!(
            m,
            "Machine: {} CPUs ({}), Linux {}, run started {}; load average at start `{}`, at end \
             `{}`. Mode: {}. zenoh {} (peer). ferry at `{}`.\n\nProtection negotiated: {}.\n",
            ms.nproc,
            ms.cpu,
            ms.kernel,
            ms.date_utc,
            ms.loadavg,
            self.machine_end.loadavg,
            self.mode,
            self.zenoh_version,
            self.ferry_source,
            self.protection
                .iter()
                .map(|(k, v)| format!("{k}: `{v}`"))
                .collect::<Vec<_>>()
                .join("; ")
        );
        let sizes = {
            let mut v: Vec<usize> = self.latency.iter().map(|l| l.size).collect();
            v.dedup();
            v
        };
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "–".into(),
        };
        let _ = writeln!(
            m,
            "## Latency, one-way = RTT/2, p50 / p99 (µs)\n\n\
             | size | ferry TCP | ferry TLS | ferry TLS/TCP p50 | Zenoh TCP | Zenoh TLS | Zenoh TLS/TCP p50 | ferry TLS / Zenoh TLS p50 |\n\
             |---|---|---|---|---|---|---|---|"
        );
        for &size in &sizes {
            let l: Vec<_> = SYSTEMS.iter().map(|s| self.lat(s, size)).collect();
            let pp = |l: Option<&LatencySummary>| {
                l.map(|l| format!("{} / {}", us(l.p50_ns), us(l.p99_ns)))
                    .unwrap_or_else(|| "–".into())
            };
            let p50 = |i: usize| l[i].map(|l| l.p50_ns as f64);
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                size_name(size),
                pp(l[0]),
                pp(l[1]),
                ratio(p50(1), p50(0)),
                pp(l[2]),
                pp(l[3]),
                ratio(p50(3), p50(2)),
                ratio(p50(1), p50(3)),
            );
        }
        let _ = writeln!(
            m,
            "\n## Throughput, reliable, back-to-back (MB/s delivered)\n\n\
             | size | ferry TCP | ferry TLS | ferry TLS/TCP | Zenoh TCP | Zenoh TLS | Zenoh TLS/TCP | ferry TLS / Zenoh TLS |\n\
             |---|---|---|---|---|---|---|---|"
        );
        for &size in &sizes {
            let t: Vec<_> = SYSTEMS
                .iter()
                .map(|s| self.tput(s, size).map(|t| t.gbit_per_s * 125.0))
                .collect();
            let mb = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "–".into());
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                size_name(size),
                mb(t[0]),
                mb(t[1]),
                ratio(t[1], t[0]),
                mb(t[2]),
                mb(t[3]),
                ratio(t[3], t[2]),
                ratio(t[1], t[3]),
            );
        }
        // Ferry's own trouble and the peer's, apart: CI fails on ferry's,
        // the peer's is reported (Zenoh TLS has lost samples under load).
        for (who, prefix) in [("ferry", "ferry"), ("Zenoh", "zenoh")] {
            let trouble: Vec<String> = self
                .throughput
                .iter()
                .filter(|t| t.transport.starts_with(prefix))
                .filter(|t| t.lost != 0 || t.stalled_rounds > 0)
                .map(|t| {
                    format!(
                        "{} at {}: lost {}, stalled rounds {}",
                        t.transport,
                        size_name(t.size),
                        t.lost,
                        t.stalled_rounds
                    )
                })
                .chain(
                    self.latency
                        .iter()
                        .filter(|l| l.transport.starts_with(prefix) && l.timeouts > 0)
                        .map(|l| {
                            format!(
                                "{} at {}: {} ping(s) timed out",
                                l.transport,
                                size_name(l.size),
                                l.timeouts
                            )
                        }),
                )
                .collect();
            let _ = writeln!(
                m,
                "\nNotes ({who}): {} cell(s) lost samples, stalled or timed out{}.",
                trouble.len(),
                if trouble.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", trouble.join("; "))
                },
            );
        }
        m
    }
}
