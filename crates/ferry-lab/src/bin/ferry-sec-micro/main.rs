//! What security costs, in-process (issue 22, `docs/design/security.md` §9):
//! Ed25519 signing and verifying of a beacon, the check of a peer's
//! certificate, and signed discovery against plain discovery — time to
//! converge and CPU and bytes at rest — for a domain of N runtimes on a
//! simulated network (the real `ferry_discovery` state machines, real
//! keys and signatures; one virtual millisecond per step).
//!
//! Then each protected path against the same path plain between two
//! runtimes ([`path`]): TLS on TCP, Noise IK + AEAD on UDP, and TLS with
//! client certificates to a Mosquitto broker ([`broker`]); and sealing a
//! UDP datagram alone ([`mod@seal`]).
//!
//! `ferry-sec-micro [--quick] [--out PATH]` prints Markdown tables and,
//! with `--out`, writes PATH.md and PATH.json.

mod broker;
mod path;
mod seal;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use ferry_discovery::{Auth, Config, Destination, Discovery, Via};
use ferry_security::create::{create_identity, create_keystore, create_permissions, Validity};
use ferry_security::{Identity, Keystore};
use ferry_wire::beacon::{
    seal, signing_message, Beacon, BeaconBody, EndpointRecord, ParticipantInfo, Record,
};
use ferry_wire::{EndpointKind, ParticipantId, Qos, TypeHash};
use serde_json::json;

#[derive(Parser)]
#[command(name = "ferry-sec-micro")]
struct Cli {
    /// Small domains and short runs (what CI runs).
    #[arg(long)]
    quick: bool,
    /// Write PATH.md and PATH.json.
    #[arg(long)]
    out: Option<String>,
}

/// CPU time of this thread.
fn cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Median time of one call of `f`, over `n` calls in 9 batches.
fn per_call(n: usize, mut f: impl FnMut()) -> Duration {
    let mut batches: Vec<Duration> = (0..9)
        .map(|_| {
            let t = cpu();
            for _ in 0..n / 9 + 1 {
                f();
            }
            (cpu() - t) / (n / 9 + 1) as u32
        })
        .collect();
    batches.sort();
    batches[4]
}

fn keystore(dir: &std::path::Path) -> Keystore {
    let _ = std::fs::remove_dir_all(dir);
    let ks = create_keystore(dir, Validity::days(1)).expect("keystore");
    create_identity(&ks, "/robot", Validity::days(1)).expect("identity");
    let policy = dir.join("policy-in.yaml");
    std::fs::write(
        &policy,
        "version: 1\nidentities:\n  /robot: { allow: { publish: [\"/**\"], subscribe: [\"/**\"] } }\n",
    )
    .expect("policy");
    create_permissions(&ks, &policy, Validity::days(1)).expect("permissions");
    ks
}

fn addr(i: usize) -> SocketAddr {
    SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(10, 1, (i / 250) as u8, (i % 250) as u8 + 1)),
        7400,
    )
}

/// One domain of `n` runtimes, signed or plain, on a lossless simulated
/// network.
struct Domain {
    nodes: Vec<Discovery>,
    now: Instant,
    datagrams: u64,
    bytes: u64,
}

impl Domain {
    fn new(n: usize, identity: Option<&Arc<Identity>>) -> Domain {
        let now = Instant::now();
        let nodes = (0..n)
            .map(|i| {
                let info = ParticipantInfo {
                    host_id: i as u64,
                    net_id: i as u64,
                    pid: i as u32,
                    lease_ms: 3000,
                    name: format!("r{i}"),
                    locators: vec![],
                };
                let mut cfg = Config::new(0, ParticipantId(i as u64 + 1), info);
                cfg.auth = identity.map(|id| Auth {
                    identity: id.clone(),
                    enforce: true,
                });
                let mut d = Discovery::new(cfg, now);
                d.set_records(
                    vec![Record::Endpoint(EndpointRecord {
                        entity: 1,
                        node: 1,
                        kind: EndpointKind::Publisher,
                        topic: format!("/robot/topic_{i}"),
                        type_name: "std_msgs/msg/String".into(),
                        type_hash: TypeHash([1; 32]),
                        qos: Qos::default(),
                    })],
                    now,
                );
                d
            })
            .collect();
        Domain {
            nodes,
            now,
            datagrams: 0,
            bytes: 0,
        }
    }

    fn step(&mut self) {
        self.now += Duration::from_millis(1);
        let n = self.nodes.len();
        for i in 0..n {
            self.nodes[i].handle_timeout(self.now);
            while let Some(t) = self.nodes[i].poll_transmit() {
                self.datagrams += 1;
                self.bytes += t.bytes.len() as u64;
                for j in 0..n {
                    let (deliver, via) = match &t.to {
                        Destination::Group => (j != i, Via::Multicast),
                        Destination::Peer(a) => (*a == addr(j), Via::Unicast),
                        Destination::Broker => (false, Via::Broker),
                    };
                    if deliver {
                        let _ = self.nodes[j].handle_datagram(self.now, addr(i), via, &t.bytes);
                    }
                }
            }
        }
    }

    fn converged(&self) -> bool {
        let n = self.nodes.len();
        self.nodes.iter().all(|d| d.participants().count() == n - 1)
    }
}

/// Converge (time), settle, then measure `rest` of virtual time at rest.
/// Lazy verification checks a peer's heartbeat about every third of its
/// lease (165 s with 200 runtimes), so the full run settles for a minute
/// and measures two.
fn domain_row(
    n: usize,
    identity: Option<&Arc<Identity>>,
    settle: Duration,
    rest: Duration,
) -> serde_json::Value {
    let mut d = Domain::new(n, identity);
    let start = d.now;
    let limit = Duration::from_secs(60);
    while !d.converged() && d.now - start < limit {
        d.step();
    }
    let converged = d.converged();
    let converge_ms = (d.now - start).as_millis() as u64;
    // Settle (the start-up's fast period ends), then measure.
    let settled = d.now + settle;
    while d.now < settled {
        d.step();
    }
    let (dg, by, t0, v0) = (d.datagrams, d.bytes, cpu(), d.now);
    while d.now - v0 < rest {
        d.step();
    }
    let cpu_s = (cpu() - t0).as_secs_f64();
    let secs = rest.as_secs_f64();
    // The simulator's own stepping (1 ms steps × n runtimes) is in the CPU
    // time too: the same for plain and signed, so the difference is
    // what signing costs.
    json!({
        "runtimes": n,
        "signed": identity.is_some(),
        "converged": converged,
        "converge_ms": converge_ms,
        "datagrams_per_s_per_runtime": (d.datagrams - dg) as f64 / secs / n as f64,
        "bytes_per_s_per_runtime": (d.bytes - by) as f64 / secs / n as f64,
        "cpu_pct_of_core_per_runtime": cpu_s / secs / n as f64 * 100.0,
        "all_visible_at_end": d.converged(),
    })
}

fn main() {
    let cli = Cli::parse();
    let dir = std::env::temp_dir().join(format!("ferry-sec-micro-{}", std::process::id()));
    let ks = keystore(&dir);
    let identity = Arc::new(Identity::load(&ks, "/robot").expect("identity"));

    // Micro: a heartbeat sealed, parsed and verified.
    let hb = Beacon {
        domain: 0,
        participant: ParticipantId(1),
        body: BeaconBody::Heartbeat {
            revision: 1,
            lease_ms: 3000,
            greeting: false,
        },
    }
    .encode();
    let n = if cli.quick { 450 } else { 9000 };
    let sealed = seal(hb.clone(), 0, identity.key_id(), 1, 0, |m| identity.sign(m));
    let sign = per_call(n, || {
        std::hint::black_box(seal(hb.clone(), 0, identity.key_id(), 1, 0, |m| {
            identity.sign(m)
        }));
    });
    let peer = identity
        .verify_peer(identity.cert_der(), 0)
        .expect("own certificate checks");
    let verify = per_call(n, || {
        let p = Beacon::parse_signed(&sealed).expect("parses");
        let t = p.trailer.expect("signed");
        assert!(peer.verify(&signing_message(p.covered), &t.sig));
    });
    let cert = per_call(n / 10, || {
        std::hint::black_box(identity.verify_peer(identity.cert_der(), 0).is_ok());
    });
    let udp = seal::run(&identity, n * 4);
    let micro = json!({
        "udp": udp,
        "seal_heartbeat_us": sign.as_secs_f64() * 1e6,
        "parse_verify_heartbeat_us": verify.as_secs_f64() * 1e6,
        "check_certificate_us": cert.as_secs_f64() * 1e6,
        "certificate_bytes": identity.cert_der().len(),
        "heartbeat_bytes": [hb.len(), sealed.len()],
    });

    let (sizes, settle, rest): (&[usize], _, _) = if cli.quick {
        (&[8, 32], Duration::from_secs(5), Duration::from_secs(3))
    } else {
        (
            &[16, 64, 200],
            Duration::from_secs(60),
            Duration::from_secs(120),
        )
    };
    let mut rows = Vec::new();
    for &n in sizes {
        for signed in [false, true] {
            rows.push(domain_row(n, signed.then_some(&identity), settle, rest));
        }
    }
    let mut md = String::new();
    md.push_str(&format!(
        "Ed25519 on this machine: seal a heartbeat {:.1} µs, parse + verify {:.1} µs, check a certificate {:.1} µs ({} B); heartbeat {} B plain, {} B signed.\n\n",
        micro["seal_heartbeat_us"].as_f64().unwrap_or(0.0),
        micro["parse_verify_heartbeat_us"].as_f64().unwrap_or(0.0),
        micro["check_certificate_us"].as_f64().unwrap_or(0.0),
        identity.cert_der().len(),
        hb.len(),
        sealed.len()
    ));
    md.push_str(&format!(
        "A domain of N runtimes on a lossless simulated network, {} s at rest measured after {} s.\n\n",
        rest.as_secs(),
        settle.as_secs()
    ));
    md.push_str("| runtimes | discovery | converged in | datagrams/s per runtime at rest | bytes/s per runtime | CPU per runtime (% of a core, simulator included) |\n|---|---|---|---|---|---|\n");
    for r in &rows {
        md.push_str(&format!(
            "| {} | {} | {} | {:.2} | {:.0} | {:.3} |\n",
            r["runtimes"],
            if r["signed"].as_bool() == Some(true) {
                "signed"
            } else {
                "plain"
            },
            if r["converged"].as_bool() == Some(true) {
                format!("{} ms", r["converge_ms"])
            } else {
                "no".into()
            },
            r["datagrams_per_s_per_runtime"].as_f64().unwrap_or(0.0),
            r["bytes_per_s_per_runtime"].as_f64().unwrap_or(0.0),
            r["cpu_pct_of_core_per_runtime"].as_f64().unwrap_or(0.0),
        ));
    }
    print!("{md}");
    let (tcp_md, tcp_rows) = path::run(&dir, cli.quick, path::Via::Tcp, 96);
    let tcp_md = format!(
        "\nTCP over loopback between two runtimes of one process, reliable keep_all, security off against enforce (TLS 1.3, AES-128-GCM), alternating:\n\n{tcp_md}"
    );
    print!("{tcp_md}");
    md.push_str(&tcp_md);
    let (udp_md, udp_rows) = path::run(&dir, cli.quick, path::Via::Udp, 94);
    let udp_md = format!(
        "\nUDP over loopback between two runtimes of one process, reliable keep_all, security off against enforce (Noise IK, AES-256-GCM per datagram), alternating:\n\n{udp_md}"
    );
    print!("{udp_md}");
    md.push_str(&udp_md);
    // MQTT through Mosquitto: plain against TLS with client certificates.
    let mqtt_rows = match broker::Brokers::start(&ks, &dir) {
        Ok(b) => {
            let via = path::Via::Mqtt {
                plain: b.plain,
                tls: b.tls,
            };
            let (mqtt_md, rows) = path::run(&dir, cli.quick, via, 92);
            drop(b);
            let mqtt_md = format!(
                "\nMQTT through Mosquitto 2 on loopback between two runtimes of one process (they meet through the broker only), reliable keep_all: a plain broker against TLS 1.3 with the enclaves' certificates required by the broker, alternating:\n\n{mqtt_md}"
            );
            print!("{mqtt_md}");
            md.push_str(&mqtt_md);
            rows
        }
        Err(e) => {
            eprintln!("note: the MQTT rows are left out: {e}");
            json!(null)
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let failed = rows.iter().any(|r| {
        r["converged"].as_bool() != Some(true) || r["all_visible_at_end"].as_bool() != Some(true)
    });
    if let Some(out) = cli.out {
        std::fs::write(format!("{out}.md"), &md).expect("write md");
        let all = json!({ "micro": micro, "domains": rows, "tcp": tcp_rows, "udp": udp_rows, "mqtt": mqtt_rows, "quick": cli.quick });
        std::fs::write(
            format!("{out}.json"),
            serde_json::to_string_pretty(&all).expect("json"),
        )
        .expect("write json");
    }
    if failed {
        eprintln!("ferry-sec-micro: a domain did not converge or lost a participant at rest");
        std::process::exit(1);
    }
}
