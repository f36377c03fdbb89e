//! A protected network path against the same path plain (TLS on TCP, and
//! Noise with AEAD on UDP): two runtimes of this process, pinned to the path
//! over loopback, security `off` against `enforce`, alternating in rounds
//! (the machine's load drifts). Round trip (ping → pong) per size, and
//! reliable keep_all throughput.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry::{Config, DiscoveryRange, Node, Qos, RawBytes, TransportKind};
use ferry_security::Mode;
use serde_json::json;

/// Runtimes of one mode: the pinger and the echoer.
struct Pair {
    _a: Node,
    _b: Node,
    ping: ferry::Publisher<RawBytes>,
    pong: ferry::Subscriber<RawBytes>,
    echo: std::thread::JoinHandle<()>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tput: ferry::Publisher<RawBytes>,
    tput_sub: ferry::Subscriber<RawBytes>,
}

/// The path a pair is pinned to.
#[derive(Debug, Clone, Copy)]
pub enum Via {
    /// TCP (TLS when protected).
    Tcp,
    /// UDP (Noise IK + AEAD when protected).
    Udp,
    /// Through Mosquitto: `plain` port, or `tls` (client certificates
    /// required) when protected.
    Mqtt {
        /// Mosquitto without TLS.
        plain: u16,
        /// Mosquitto with TLS and `require_certificate`.
        tls: u16,
    },
}

impl Via {
    fn kind(self) -> TransportKind {
        match self {
            Via::Tcp => TransportKind::Tcp,
            Via::Udp => TransportKind::Udp,
            Via::Mqtt { .. } => TransportKind::Mqtt,
        }
    }
}

/// Runtime `side` (0 or 1) of a pair: configs differ (the lease), or the
/// two nodes would share one runtime and never cross the path.
fn config(domain: u16, mode: Mode, ks: &Path, side: u32, via: Via) -> Config {
    let mut c = Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        lease_ms: 3000 + side,
        // Loopback: the default 300 Mbit/s pacing cap would measure the
        // pacer, not the cost of protection.
        udp_link_mbps: 4000,
        ..Config::default()
    };
    if let Via::Mqtt { plain, tls } = via {
        use ferry::config::mqtt::{BrokerDiscovery, BrokerUrl, MqttConfig, Scope};
        // They meet through the broker only, as a robot and the cloud do.
        c.discovery = DiscoveryRange::Off;
        c.shared_memory = false;
        c.topics = vec![ferry::TopicRule {
            pattern: "/sec/**".into(),
            scope: Some(Scope::Cloud),
            ..Default::default()
        }];
        let url = if mode == Mode::Off {
            BrokerUrl::Tcp {
                host: "127.0.0.1".into(),
                port: plain,
            }
        } else {
            BrokerUrl::Tls {
                host: "localhost".into(),
                port: tls,
            }
        };
        c.mqtt = Some(MqttConfig {
            discovery: BrokerDiscovery::On,
            max_packet_bytes: 8 << 20,
            ..MqttConfig::new(url)
        });
    }
    c.security.mode = mode;
    if mode != Mode::Off {
        c.security.keystore = Some(ks.to_path_buf());
        c.security.enclave = Some("/robot".into());
    }
    c
}

impl Pair {
    fn new(domain: u16, mode: Mode, ks: &Path, via: Via) -> Pair {
        let kind = via.kind();
        let qos = || Qos::default().keep_all().transport(kind);
        let node = |name: &str, side| {
            Node::builder()
                .name(name)
                .config(config(domain, mode, ks, side, via))
                .build()
                .expect("node")
        };
        let (a, b) = (node("pinger", 0), node("echoer", 1));
        let ping = a
            .publisher::<RawBytes>("/sec/ping")
            .qos(qos())
            .build()
            .expect("ping");
        let pong = a
            .subscriber::<RawBytes>("/sec/pong")
            .qos(qos())
            .build()
            .expect("pong");
        let tput = a
            .publisher::<RawBytes>("/sec/tput")
            .qos(qos())
            .build()
            .expect("tput");
        let tput_sub = b
            .subscriber::<RawBytes>("/sec/tput")
            .qos(qos())
            .build()
            .expect("sub");
        let ping_sub = b
            .subscriber::<RawBytes>("/sec/ping")
            .qos(qos())
            .build()
            .expect("sub");
        let pong_pub = b
            .publisher::<RawBytes>("/sec/pong")
            .qos(qos())
            .build()
            .expect("pub");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let echo = std::thread::spawn(move || {
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(s) = ping_sub.recv_timeout(Duration::from_millis(50)) {
                    let _ = pong_pub.publish(RawBytes(s.0.clone()));
                }
            }
        });
        let wait = Duration::from_secs(10);
        assert!(ping.wait_for_subscribers(1, wait), "ping not matched");
        assert!(tput.wait_for_subscribers(1, wait), "tput not matched");
        let deadline = Instant::now() + wait;
        while pong.try_recv().is_none() {
            // The pong direction is matched once an echo comes back.
            assert!(Instant::now() < deadline, "pong not matched");
            let _ = ping.publish(RawBytes(Bytes::from_static(b"warm")));
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        while pong.try_recv().is_some() {}
        let want = match (mode, kind) {
            (Mode::Off, _) => "none",
            (_, TransportKind::Udp) => "aead",
            _ => "tls",
        };
        for c in ping.connections().iter().chain(&tput.connections()) {
            assert_eq!(c.transport, kind);
            assert!(c.protection.starts_with(want), "{:?}", c.protection);
        }
        Pair {
            _a: a,
            _b: b,
            ping,
            pong,
            echo,
            stop,
            tput,
            tput_sub,
        }
    }

    /// `n` round trips of `size` bytes: sorted µs.
    fn rtt(&self, size: usize, n: usize) -> Vec<f64> {
        let mut out = Vec::with_capacity(n);
        let body = Bytes::from(vec![7u8; size]);
        for _ in 0..n {
            let t = Instant::now();
            self.ping.publish(RawBytes(body.clone())).expect("ping");
            if let Err(e) = self.pong.recv_timeout(Duration::from_secs(5)) {
                panic!(
                    "no pong of {size} B within 5 s ({e:?}): {:?}",
                    self.ping.connections()
                );
            }
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
        out.sort_by(f64::total_cmp);
        out
    }

    /// Back-to-back samples of `size` for `secs`: MB/s of payload received.
    fn throughput(&self, size: usize, secs: f64) -> f64 {
        let body = Bytes::from(vec![9u8; size]);
        let t = Instant::now();
        let mut sent = 0usize;
        while t.elapsed().as_secs_f64() < secs {
            if self.tput.publish(RawBytes(body.clone())).is_ok() {
                sent += 1;
            }
        }
        let mut got = 0usize;
        while got < sent {
            if self.tput_sub.recv_timeout(Duration::from_secs(10)).is_err() {
                break;
            }
            got += 1;
        }
        (got * size) as f64 / t.elapsed().as_secs_f64() / 1e6
    }

    fn close(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.echo.join();
    }
}

fn pct(v: &[f64], p: f64) -> f64 {
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// The rows of one path (`Tcp`: TLS, `Udp`: AEAD; domains `domain` and
/// `domain + 1`): per size, p50/p99 round trip and (from 64 KiB)
/// throughput, plain and protected, and the protected one's ratio to plain.
pub fn run(ks: &Path, quick: bool, via: Via, domain: u16) -> (String, serde_json::Value) {
    let sizes: &[usize] = &[64, 1024, 64 * 1024, 1 << 20, 4 << 20];
    let (pings, secs, rounds) = if quick { (40, 0.3, 1) } else { (400, 2.0, 3) };
    let modes = [Mode::Off, Mode::Enforce];
    let pairs: Vec<Pair> = modes
        .iter()
        .enumerate()
        .map(|(i, m)| Pair::new(domain + i as u16, *m, ks, via))
        .collect();
    let mut rows = Vec::new();
    let p = if matches!(via, Via::Udp) {
        "AEAD"
    } else {
        "TLS"
    };
    let mut md = format!(
        "| size | plain RTT p50 / p99 (µs) | {p} RTT p50 / p99 (µs) | {p}/plain p50 | plain MB/s | {p} MB/s | {p}/plain |\n|---|---|---|---|---|---|---|\n",
    );
    for &size in sizes {
        let n = if size >= 1 << 20 { pings / 4 } else { pings };
        let mut rtts = [Vec::new(), Vec::new()];
        let mut tputs = [0.0f64; 2];
        for _ in 0..rounds {
            for (i, p) in pairs.iter().enumerate() {
                rtts[i].extend(p.rtt(size, n / rounds + 1));
                if size >= 64 * 1024 {
                    tputs[i] += p.throughput(size, secs) / rounds as f64;
                }
            }
        }
        for r in &mut rtts {
            r.sort_by(f64::total_cmp);
        }
        let (p50, p99) = (
            [pct(&rtts[0], 0.5), pct(&rtts[1], 0.5)],
            [pct(&rtts[0], 0.99), pct(&rtts[1], 0.99)],
        );
        let tp = if size >= 64 * 1024 {
            format!(
                "{:.0} | {:.0} | {:.2}",
                tputs[0],
                tputs[1],
                tputs[1] / tputs[0]
            )
        } else {
            "– | – | –".into()
        };
        md.push_str(&format!(
            "| {} | {:.0} / {:.0} | {:.0} / {:.0} | {:.2} | {tp} |\n",
            human(size),
            p50[0],
            p99[0],
            p50[1],
            p99[1],
            p50[1] / p50[0]
        ));
        rows.push(json!({
            "size": size,
            "plain_rtt_us": {"p50": p50[0], "p99": p99[0]},
            "protected_rtt_us": {"p50": p50[1], "p99": p99[1]},
            "plain_mb_s": (size >= 64 * 1024).then_some(tputs[0]),
            "protected_mb_s": (size >= 64 * 1024).then_some(tputs[1]),
        }));
    }
    for p in pairs {
        p.close();
    }
    (md, json!(rows))
}

fn human(n: usize) -> String {
    match n {
        n if n >= 1 << 20 => format!("{} MiB", n >> 20),
        n if n >= 1024 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}
