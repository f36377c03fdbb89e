//! The UDP path (ferry-rudp streams) through a real socket, pinned on one host.

use std::time::Duration;

use ferry::msgs::std_msgs;
use ferry::{Config, DiscoveryRange, Node, Qos, RawBytes, TransportKind};

const T: Duration = Duration::from_secs(10);

fn node(domain: u16) -> Node {
    let cfg = Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        ..Config::default()
    };
    Node::builder().name("u").config(cfg).build().unwrap()
}

#[test]
fn pinned_udp_is_byte_exact_from_empty_to_8_mib() {
    let n = node(120);
    let q = Qos::default().keep_all().transport(TransportKind::Udp);
    let p = n.publisher::<RawBytes>("/big").qos(q).build().unwrap();
    let s = n
        .subscriber::<RawBytes>("/big")
        .qos(Qos::default().keep_all())
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, T));
    for size in [0usize, 1, 1439, 1440, 1441, 65_536, 1 << 20, 8 << 20] {
        let data: Vec<u8> = (0..size).map(|i| (i * 13 + size) as u8).collect();
        p.publish(RawBytes::new(data.clone())).unwrap();
        let got = s
            .recv_timeout(T)
            .unwrap_or_else(|e| panic!("{size} B: {e}"));
        assert_eq!(got.info.transport, TransportKind::Udp);
        assert_eq!(got.len(), size);
        assert!(got[..] == data[..], "{size} B corrupted");
    }
    let w = &p.connections()[0];
    assert_eq!(w.transport, TransportKind::Udp);
    assert!(w.locator.starts_with("udp/127.0.0.1:"), "{}", w.locator);
    assert!(w.stats.rtt_us.is_some(), "no RTT estimate: {:?}", w.stats);
    assert!(w.stats.pacing_rate.is_some());
    let r = &s.connections()[0];
    assert_eq!(r.transport, TransportKind::Udp);
    assert_eq!(r.stats.messages, 8);
}

#[test]
fn many_small_samples_in_order_over_udp() {
    let n = node(121);
    let q = Qos::default().keep_all().transport(TransportKind::Udp);
    let p = n.publisher::<std_msgs::Int64>("/n").qos(q).build().unwrap();
    let s = n
        .subscriber::<std_msgs::Int64>("/n")
        .qos(Qos::default().keep_all())
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, T));
    for i in 0..5000 {
        p.publish(std_msgs::Int64 { data: i }).unwrap();
    }
    for i in 0..5000 {
        assert_eq!(s.recv_timeout(T).unwrap().data, i);
    }
}

#[test]
fn best_effort_over_udp_delivers_whole_samples() {
    let n = node(122);
    let q = Qos::sensor_data().transport(TransportKind::Udp);
    let p = n.publisher::<RawBytes>("/be").qos(q).build().unwrap();
    let s = n
        .subscriber::<RawBytes>("/be")
        .qos(Qos::sensor_data().keep_last(100))
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, T));
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..20u8 {
        p.publish(RawBytes::new(vec![i; 20_000])).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut got = 0;
    while let Ok(x) = s.recv_timeout(Duration::from_millis(500)) {
        assert_eq!(x.len(), 20_000);
        assert!(x.iter().all(|b| *b == x[0]), "mixed sample");
        got += 1;
    }
    assert!(got >= 15, "only {got} of 20 on loopback");
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// An attacker on the same host floods the subscriber's UDP port with
/// forged HELLOs (random stream ids and writer ids, from 41 addresses, its
/// own included) naming the real reader, while a real writer streams to it.
/// Memory stays flat, the reader never holds more streams than the bound,
/// and the real stream delivers every sample in order.
#[test]
fn a_forged_hello_flood_holds_memory_and_spares_the_real_stream() {
    use ferry_wire::rudp::{encode_hello, Hello};
    use ferry_wire::{EndpointId, ParticipantId};
    use std::net::UdpSocket;

    let n = node(124);
    let q = Qos::default().keep_all().transport(TransportKind::Udp);
    let p = n
        .publisher::<std_msgs::Int64>("/flood")
        .qos(q)
        .build()
        .unwrap();
    let s = n
        .subscriber::<std_msgs::Int64>("/flood")
        .qos(Qos::default().keep_all())
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, T));
    p.publish(std_msgs::Int64 { data: 0 }).unwrap();
    assert_eq!(s.recv_timeout(T).unwrap().data, 0);
    let target = p.connections()[0]
        .locator
        .strip_prefix("udp/")
        .unwrap()
        .to_string();
    let reader = s.id();
    let before = rss_kib();

    const SAMPLES: i64 = 600;
    let writer = std::thread::spawn(move || {
        for i in 1..=SAMPLES {
            p.publish(std_msgs::Int64 { data: i }).unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        p
    });
    let attackers: Vec<UdpSocket> = (1..=41u8)
        .map(|h| UdpSocket::bind(format!("127.0.0.{h}:0")).unwrap())
        .collect();
    let mut x = 0x9e37_79b9u32;
    let start = std::time::Instant::now();
    let mut sent = 0u32;
    while sent < 200_000 && start.elapsed() < Duration::from_secs(10) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let hello = Hello {
            from: EndpointId {
                participant: ParticipantId(u64::from(x) << 7),
                entity: x,
            },
            to: reader,
            reliable: true,
        };
        let a = &attackers[(sent % 41) as usize];
        let _ = a.send_to(&encode_hello(x, &hello), &target);
        sent += 1;
        if sent.is_multiple_of(2000) {
            std::thread::sleep(Duration::from_millis(1)); // let the socket drain
        }
    }
    for i in 1..=SAMPLES {
        assert_eq!(s.recv_timeout(T).expect("the real stream stalled").data, i);
    }
    let _p = writer.join().unwrap();
    let conns = s.connections().len();
    let grew = rss_kib().saturating_sub(before);
    eprintln!("{sent} forged HELLOs: reader holds {conns} streams, RSS +{grew} KiB");
    assert!(conns <= 4097, "{conns} streams: the bound does not hold");
    assert!(
        conns > 256,
        "{conns} streams: the flood never reached the reader"
    );
    assert!(grew < 64 << 10, "RSS grew by {grew} KiB");
}

/// A node whose UDP path is paced at 8 Mbit/s (1 MB/s) at a fixed rate: a
/// writer that publishes 64 KB samples as fast as it can offers far more.
fn slow_node(domain: u16) -> Node {
    let cfg = Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        udp_link_mbps: 8,
        udp_adaptive_rate: false,
        ..Config::default()
    };
    Node::builder().name("slow").config(cfg).build().unwrap()
}

/// Back-pressure: above what the path carries, keep_last drops the oldest
/// unsent samples and keep_all blocks the writer, so that a delivered
/// sample is never older than about two transfers (2 × 64 ms here) plus
/// the path — not the whole backlog (100 samples: 6.4 s).
#[test]
fn a_writer_faster_than_the_path_is_held_back_instead_of_queueing() {
    let n = slow_node(125);
    for keep_all in [false, true] {
        let topic = format!("/flood{keep_all}");
        let qos = if keep_all {
            Qos::default().reliable().keep_all()
        } else {
            Qos::default().reliable().keep_last(1000)
        };
        let p = n
            .publisher::<RawBytes>(&topic)
            .qos(qos.transport(TransportKind::Udp))
            .build()
            .unwrap();
        let s = n.subscriber::<RawBytes>(&topic).qos(qos).build().unwrap();
        assert!(p.wait_for_subscribers(1, T));
        let count = if keep_all { 30 } else { 100 };
        // Read while writing: a sample's age is the path's doing, not a
        // queue at the reader's end.
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut worst = Duration::ZERO;
            while let Ok(x) = s.recv_timeout(Duration::from_secs(2)) {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64;
                let age = Duration::from_nanos(now.saturating_sub(x.info.source_time_ns));
                worst = worst.max(age);
                got.push(x[0]);
            }
            (got, worst)
        });
        let started = std::time::Instant::now();
        for i in 0..count {
            let mut data = vec![0u8; 64_000];
            data[0] = i as u8;
            // keep_all may report Blocked after keep_all_block_ms: retry.
            let give_up = std::time::Instant::now() + T;
            while let Err(e) = p.publish(RawBytes::new(data.clone())) {
                assert!(std::time::Instant::now() < give_up, "publish: {e}");
            }
        }
        let writing = started.elapsed();
        let stats = p.connections()[0].stats;
        let (got, worst) = reader.join().unwrap();
        let last = got.last().copied();
        assert_eq!(last, Some((count - 1) as u8), "keep_all {keep_all}");
        assert!(
            worst < Duration::from_millis(400),
            "keep_all {keep_all}: a sample {worst:?} old arrived ({} of {count})",
            got.len()
        );
        if keep_all {
            assert_eq!(got.len(), count, "keep_all loses nothing");
            assert_eq!(stats.drops, 0);
            // The writer went at the path's rate: 30 × 64 ms.
            assert!(writing > Duration::from_millis(1200), "{writing:?}");
        } else {
            assert!(got.len() < count, "keep_last dropped nothing");
            assert!(stats.drops > 0, "{stats:?}");
        }
    }
}
