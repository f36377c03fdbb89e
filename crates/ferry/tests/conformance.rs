//! The transport conformance suite: one set of behaviours, written once and
//! run per transport (iceoryx2's per-backend conformance tests are the
//! model). Adding a transport to it is one `conformance!` line.
//!
//! Each test pins its ports to the transport under test by QoS (one
//! process: in-process, shared memory, TCP and UDP over loopback all reach
//! their own runtime; MQTT carries traffic only between runtimes that heard
//! each other through the broker, so its writers live in a second runtime
//! of the process, whose broker is embedded in the first), except
//! `a_killed_writer_is_noticed_within_its_lease`, which kills (-9) a writer
//! in another process. Every test asserts the path its samples took, so a
//! transport that silently fell back fails.

use std::time::{Duration, Instant};

use ferry::config::mqtt::{BrokerUrl, MqttConfig, Scope};
use ferry::msgs::{example_interfaces::srv::*, std_msgs};
use ferry::{
    Config, DiscoveryRange, Node, PortEvent, Qos, RawBytes, TopicRule, TransportKind, UnmatchReason,
};
use ferry_testkit::peer::{report, role, Peer};

const T: Duration = Duration::from_secs(10);

/// The MQTT path's broker for the test of `domain`: embedded in the test
/// process, on a port of its own.
fn broker_port(domain: u16) -> u16 {
    21000 + domain
}

/// Which runtime of a test a node is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The test's first runtime (subscribers, services; runs the broker).
    Reader,
    /// The writers' runtime: the reader's own, except on the MQTT path,
    /// which only carries traffic between runtimes that heard each other
    /// through the broker: then a second runtime, in this process or in
    /// the kill test's writer process.
    Writer,
}

fn node(name: &str, domain: u16, path: TransportKind, side: Side) -> Node {
    let mut cfg = Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        lease_ms: 600,
        ..Config::default()
    };
    if path == TransportKind::Mqtt {
        let port = broker_port(domain);
        let broker = match side {
            Side::Reader => BrokerUrl::Embedded { port },
            Side::Writer => BrokerUrl::Tcp {
                host: "127.0.0.1".into(),
                port,
            },
        };
        cfg.mqtt = Some(MqttConfig::new(broker));
        cfg.topics = vec![TopicRule {
            pattern: "/conf/*".into(),
            scope: Some(Scope::Cloud),
            ..Default::default()
        }];
    }
    Node::builder()
        .name(name)
        .config(cfg)
        .build()
        .expect("node")
}

/// The reader's and the writers' node of a test. On the MQTT path both
/// runtimes are connected to the broker and have heard each other through
/// it before the test starts: samples a writer queues while its broker is
/// still away go out when it comes, to whoever subscribed by then (the
/// offline queue's purpose), which is not what the tests are about.
fn nodes(domain: u16, path: TransportKind) -> (Node, Node) {
    let (r, w) = (
        node("reader", domain, path, Side::Reader),
        node("writer", domain, path, Side::Writer),
    );
    if path == TransportKind::Mqtt {
        let qos = Qos::default().transport(path);
        let p = w
            .publisher::<std_msgs::Int64>("/conf/warm_up")
            .qos(qos)
            .build()
            .unwrap();
        // Its link to the broker is not a subscriber.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            p.subscriber_count(),
            0,
            "mqtt: the broker counted as a reader"
        );
        let _s = r
            .subscriber::<std_msgs::Int64>("/conf/warm_up")
            .qos(qos)
            .build()
            .unwrap();
        assert!(p.wait_for_subscribers(1, T), "mqtt: runtimes never met");
    }
    (r, w)
}

/// A subscriber and a publisher of `topic` with `qos` on `n`, matched.
fn matched<M: ferry::Codec>(
    (r, w): &(Node, Node),
    topic: &str,
    qos: Qos,
) -> (ferry::Subscriber<M>, ferry::Publisher<M>) {
    let s = r.subscriber::<M>(topic).qos(qos).build().unwrap();
    let p = w.publisher::<M>(topic).qos(qos).build().unwrap();
    let path = qos.transport.expect("pinned");
    assert!(p.wait_for_subscribers(1, T), "{path}: no match on {topic}");
    (s, p)
}

fn reliable_ordered_delivery(path: TransportKind, domain: u16) {
    let n = nodes(domain, path);
    let qos = Qos::default().keep_all().transport(path);
    let (s, p) = matched::<std_msgs::Int64>(&n, "/conf/ordered", qos);
    for i in 0..2000 {
        p.publish(std_msgs::Int64 { data: i }).unwrap();
    }
    for i in 0..2000 {
        let got = s
            .recv_timeout(T)
            .unwrap_or_else(|e| panic!("{path}: sample {i}: {e}"));
        assert_eq!(got.data, i, "{path}: out of order or lost");
        assert_eq!(got.info.transport, path);
    }
}

fn keep_last_bounds_the_queue_and_counts_drops(path: TransportKind, domain: u16) {
    let n = nodes(domain, path);
    let qos = Qos::default().keep_last(5).transport(path);
    let (s, p) = matched::<std_msgs::Int64>(&n, "/conf/last", qos);
    for i in 1..=200 {
        p.publish(std_msgs::Int64 { data: i }).unwrap();
    }
    // Unread, the queue never holds more than its depth; wait until nothing
    // more arrives (what a path drops on its way never comes).
    let arrived = || -> u64 { s.connections().iter().map(|c| c.stats.messages).sum() };
    let end = Instant::now() + T;
    let (mut seen, mut since) = (u64::MAX, Instant::now());
    while Instant::now() < end && since.elapsed() < Duration::from_millis(300) {
        assert!(
            s.queued() <= 5,
            "{path}: {} queued with keep_last(5)",
            s.queued()
        );
        let now = arrived();
        if now != seen {
            (seen, since) = (now, Instant::now());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut got = Vec::new();
    while let Some(x) = s.try_recv() {
        got.push(x.data);
    }
    assert!(got.len() <= 5 && !got.is_empty(), "{path}: {got:?}");
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "{path}: out of order {got:?}"
    );
    assert_eq!(
        got.last(),
        Some(&200),
        "{path}: the newest sample is the one kept"
    );
    // Drops are counted on the side that dropped them: the reader's
    // connection counts exactly what its queue dropped (it saw `seen`, keeps
    // `got`), the writer's what its path dropped before sending; on this
    // loss-free loopback every one of the 200 is delivered or counted.
    let reader_drops: u64 = s.connections().iter().map(|c| c.stats.drops).sum();
    assert_eq!(
        reader_drops,
        seen - got.len() as u64,
        "{path}: {seen} reached the queue, {} kept, {reader_drops} counted dropped",
        got.len()
    );
    // (In-process both ends are one connection with one set of counters:
    // its drops are the reader's.)
    let writer_drops: u64 = match path {
        TransportKind::InProcess => 0,
        _ => p.connections().iter().map(|c| c.stats.drops).sum(),
    };
    assert_eq!(
        seen + writer_drops,
        200,
        "{path}: {seen} arrived, the writer counted {writer_drops} dropped: some went uncounted"
    );
}

fn transient_local_late_joiner_gets_the_last_samples(path: TransportKind, domain: u16) {
    let n = nodes(domain, path);
    let qos = Qos::default()
        .keep_last(3)
        .transient_local()
        .transport(path);
    let p =
        n.1.publisher::<std_msgs::Int64>("/conf/latched")
            .qos(qos)
            .build()
            .unwrap();
    for i in 1..=10 {
        p.publish(std_msgs::Int64 { data: i }).unwrap();
    }
    // Let them leave, to nobody (a broker could otherwise still be
    // forwarding them when the late joiner subscribes).
    std::thread::sleep(Duration::from_millis(300));
    let s =
        n.0.subscriber::<std_msgs::Int64>("/conf/latched")
            .qos(qos)
            .build()
            .unwrap();
    for want in 8..=10 {
        let got = s
            .recv_timeout(T)
            .unwrap_or_else(|e| panic!("{path}: late joiner: {e}"));
        assert_eq!(got.data, want, "{path}: replay");
        assert_eq!(got.info.transport, path);
    }
    assert!(
        s.recv_timeout(Duration::from_millis(200)).is_err(),
        "{path}: replayed more"
    );
    p.publish(std_msgs::Int64 { data: 11 }).unwrap();
    assert_eq!(
        s.recv_timeout(T).unwrap().data,
        11,
        "{path}: live after the replay"
    );
}

fn sixteen_mib_samples_arrive_intact(path: TransportKind, domain: u16) {
    let n = nodes(domain, path);
    let qos = Qos::default().keep_last(2).transport(path);
    let (s, p) = matched::<RawBytes>(&n, "/conf/big", qos);
    for round in 0..2u8 {
        let len = 16 << 20;
        let mut v = vec![0u8; len];
        for (i, b) in v.iter_mut().enumerate() {
            *b = (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(u32::from(round)) as u8;
        }
        let sum: u64 = v.iter().map(|b| u64::from(*b)).sum();
        p.publish(RawBytes(v.into())).unwrap();
        let got = s
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{path}: 16 MiB sample: {e}"));
        assert_eq!(got.len(), len, "{path}: length");
        assert_eq!(
            got.iter().map(|b| u64::from(*b)).sum::<u64>(),
            sum,
            "{path}: content"
        );
        assert_eq!(
            got[12345],
            (12345u32
                .wrapping_mul(2_654_435_761)
                .wrapping_add(u32::from(round))) as u8
        );
        assert_eq!(got.info.transport, path);
    }
}

fn a_missed_deadline_is_reported(path: TransportKind, domain: u16) {
    let n = nodes(domain, path);
    let qos = Qos::default()
        .deadline(Duration::from_millis(50))
        .transport(path);
    let (s, p) = matched::<std_msgs::Int64>(&n, "/conf/deadline", qos);
    for i in 0..3 {
        p.publish(std_msgs::Int64 { data: i }).unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    for _ in 0..3 {
        assert_eq!(s.recv_timeout(T).unwrap().info.transport, path);
    }
    let end = Instant::now() + Duration::from_secs(3);
    let mut missed = false;
    while !missed && Instant::now() < end {
        missed = matches!(
            s.next_event(Duration::from_millis(100)),
            Some(PortEvent::DeadlineMissed { .. })
        );
    }
    assert!(missed, "{path}: no DeadlineMissed after the stream stopped");
}

/// An adder service and a client of it, both pinned to `path`.
fn adder(
    (r, w): &(Node, Node),
    path: TransportKind,
) -> (
    ferry::Service<AddTwoIntsRequest, AddTwoIntsResponse>,
    ferry::Client<AddTwoIntsRequest, AddTwoIntsResponse>,
) {
    let qos = Qos::default().transport(path);
    let srv = r
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/conf/add", |r| AddTwoIntsResponse {
            sum: r.a.checked_add(r.b).expect("overflow"),
        })
        .qos(qos)
        .build()
        .unwrap();
    let c = w
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/conf/add")
        .qos(qos)
        .build()
        .unwrap();
    (srv, c)
}

/// Requests and replies on the pinned path: answers in order, two
/// clients at once get their own answers, and a failing handler reaches
/// its caller as the service's error.
fn services_answer(path: TransportKind, domain: u16) {
    let n = nodes(domain, path);
    let (_srv, c) = adder(&n, path);
    assert!(c.wait_for_service(T), "{path}: no service");
    let transport = &c.connections()[0].transport;
    assert_eq!(transport, &path, "{path}: the call took another path");
    for i in 0..100 {
        let r = c.call(AddTwoIntsRequest { a: i, b: 1 }, T).unwrap();
        assert_eq!(r.sum, i + 1, "{path}: answer");
    }
    let c2 =
        n.1.client::<AddTwoIntsRequest, AddTwoIntsResponse>("/conf/add")
            .qos(Qos::default().transport(path))
            .build()
            .unwrap();
    assert!(c2.wait_for_service(T));
    std::thread::scope(|s| {
        for (k, c) in [(1000, &c), (2000, &c2)] {
            s.spawn(move || {
                for i in 0..200 {
                    let r = c.call(AddTwoIntsRequest { a: k + i, b: 0 }, T).unwrap();
                    assert_eq!(r.sum, k + i, "{path}: another client's answer");
                }
            });
        }
    });
    // The adder panics on overflow: the panic is the caller's error.
    let e = c
        .call(AddTwoIntsRequest { a: i64::MAX, b: 1 }, T)
        .unwrap_err();
    assert!(
        matches!(e, ferry::CallError::Remote { .. }),
        "{path}: a failing handler gave {e:?}"
    );
    assert_eq!(c.call(AddTwoIntsRequest { a: 2, b: 2 }, T).unwrap().sum, 4);
}

/// The writer process of the kill -9 test: publishes at 100 Hz until killed.
fn writer_role(arg: &str) {
    let mut a = arg.split(' ');
    let domain: u16 = a.next().unwrap().parse().unwrap();
    let path: TransportKind = a.next().unwrap().parse().unwrap();
    let n = node("writer", domain, path, Side::Writer);
    let p = n
        .publisher::<std_msgs::Int64>("/conf/killed")
        .qos(Qos::default().transport(path))
        .build()
        .unwrap();
    report("ready");
    for i in 0.. {
        let _ = p.publish(std_msgs::Int64 { data: i });
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn a_killed_writer_is_noticed_within_its_lease(test: &str, path: TransportKind, domain: u16) {
    let n = node("reader", domain, path, Side::Reader);
    let s = n
        .subscriber::<std_msgs::Int64>("/conf/killed")
        .qos(Qos::default().transport(path))
        .build()
        .unwrap();
    let mut peer = Peer::spawn(test, "writer", &format!("{domain} {}", path.as_str()));
    assert_eq!(peer.line(), "ready");
    let first = s
        .recv_timeout(T)
        .unwrap_or_else(|e| panic!("{path}: from the writer: {e}"));
    assert_eq!(first.info.transport, path);
    let writer = first.info.publisher;
    // Matched first (a broker may deliver samples before discovery has
    // matched the pair: a writer never matched is never unmatched).
    let end = Instant::now() + T;
    loop {
        match s.next_event(Duration::from_millis(50)) {
            Some(PortEvent::Matched { remote, .. }) if remote == writer => break,
            _ => assert!(Instant::now() < end, "{path}: the writer was never matched"),
        }
    }
    peer.kill_9();
    let killed = Instant::now();
    // Unmatched within the lease (600 ms) plus an announce period or two.
    let mut gone = None;
    while gone.is_none() && killed.elapsed() < Duration::from_secs(5) {
        if let Some(PortEvent::Unmatched { remote, reason }) =
            s.next_event(Duration::from_millis(50))
        {
            if remote == writer {
                gone = Some((reason, killed.elapsed()));
            }
        }
    }
    let (reason, after) =
        gone.unwrap_or_else(|| panic!("{path}: the killed writer was never unmatched"));
    assert!(
        matches!(
            reason,
            UnmatchReason::LeaseExpired | UnmatchReason::ConnectionLost
        ),
        "{path}: {reason:?}"
    );
    assert!(
        after < Duration::from_secs(3),
        "{path}: noticed after {after:?}"
    );
    assert_eq!(s.publisher_count(), 0, "{path}: still counted as matched");
    // The reader's process is fine: a new writer is matched and heard.
    let w = node("writer", domain, path, Side::Writer);
    let p = w
        .publisher::<std_msgs::Int64>("/conf/killed")
        .qos(Qos::default().transport(path))
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, T));
    while s.try_recv().is_some() {}
    p.publish(std_msgs::Int64 { data: -1 }).unwrap();
    let end = Instant::now() + T;
    loop {
        let got = s.recv_timeout(T).unwrap();
        if got.data == -1 {
            break;
        }
        assert!(
            Instant::now() < end,
            "{path}: the new writer's sample never came"
        );
    }
}

/// A reliable keep_all subscriber that stalls again and again: the writer
/// is held back (a publish waits for room), nothing is dropped or
/// reordered. 1 KiB samples, more than the socket buffers hold.
fn a_slow_keep_all_subscriber_holds_the_writer_back(path: TransportKind, domain: u16) {
    let n = nodes(domain, path);
    let qos = Qos::default().keep_all().transport(path);
    let (s, p) = matched::<ferry::RawBytes>(&n, "/conf/slow", qos);
    let count = 20_000u64;
    let writer = std::thread::spawn(move || {
        let mut longest = Duration::ZERO;
        for i in 0..count {
            let mut b = vec![0u8; 1024];
            b[..8].copy_from_slice(&i.to_le_bytes());
            let t = Instant::now();
            // Blocked past keep_all_block_ms: an error, and the same sample again.
            while p.publish(ferry::RawBytes::new(b.clone())).is_err() {}
            longest = longest.max(t.elapsed());
        }
        (longest, p)
    });
    for i in 0..count {
        // Stalls well past what the socket buffers and the writer's
        // window absorb (about 0.2 s of samples on a loaded machine).
        if i > 0 && i % 5_000 == 0 {
            std::thread::sleep(Duration::from_millis(700));
        }
        let got = s
            .recv_timeout(T)
            .unwrap_or_else(|e| panic!("{path}: sample {i}: {e}"));
        let k = u64::from_le_bytes(got.0[..8].try_into().unwrap());
        assert_eq!(k, i, "{path}: lost or out of order");
    }
    let (longest, _p) = writer.join().unwrap();
    assert!(
        longest >= Duration::from_millis(100),
        "{path}: the writer was never held back (longest publish {longest:?})"
    );
    let drops: u64 = s.connections().iter().map(|c| c.stats.drops).sum();
    assert_eq!(drops, 0, "{path}: the subscriber dropped samples");
}

/// One line per transport: every behaviour, as its own test.
macro_rules! conformance {
    ($name:ident, $path:expr, $domain:expr) => {
        mod $name {
            use super::*;
            const PATH: TransportKind = $path;
            #[test]
            fn reliable_ordered_delivery() {
                super::reliable_ordered_delivery(PATH, $domain);
            }
            #[test]
            fn keep_last_bounds_the_queue_and_counts_drops() {
                super::keep_last_bounds_the_queue_and_counts_drops(PATH, $domain + 1);
            }
            #[test]
            fn transient_local_late_joiner_gets_the_last_samples() {
                super::transient_local_late_joiner_gets_the_last_samples(PATH, $domain + 2);
            }
            #[test]
            fn sixteen_mib_samples_arrive_intact() {
                super::sixteen_mib_samples_arrive_intact(PATH, $domain + 3);
            }
            #[test]
            fn a_missed_deadline_is_reported() {
                super::a_missed_deadline_is_reported(PATH, $domain + 4);
            }
            #[test]
            fn services_answer() {
                super::services_answer(PATH, $domain + 5);
            }
            #[test]
            fn a_killed_writer_is_noticed_within_its_lease() {
                if PATH == TransportKind::InProcess {
                    return; // a writer in the same process dies with the reader
                }
                if let Some((r, arg)) = role() {
                    if r == "writer" {
                        writer_role(&arg);
                    }
                    return;
                }
                let test = concat!(
                    stringify!($name),
                    "::a_killed_writer_is_noticed_within_its_lease"
                );
                super::a_killed_writer_is_noticed_within_its_lease(test, PATH, $domain + 6);
            }
            #[test]
            fn a_slow_keep_all_subscriber_holds_the_writer_back() {
                // Not through the broker (issue 19 notes): there the
                // subscriber's queue still drops past twice its depth.
                if PATH == TransportKind::Mqtt {
                    return;
                }
                super::a_slow_keep_all_subscriber_holds_the_writer_back(PATH, $domain + 7);
            }
        }
    };
}

conformance!(in_process, TransportKind::InProcess, 180);
conformance!(shared_memory, TransportKind::SharedMemory, 188);
conformance!(tcp, TransportKind::Tcp, 196);
conformance!(udp, TransportKind::Udp, 204);
conformance!(mqtt, TransportKind::Mqtt, 212);
