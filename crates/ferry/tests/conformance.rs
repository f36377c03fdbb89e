//! The transport conformance suite: one set of behaviours, written once and
//! run per transport (iceoryx2's per-backend conformance tests are the
//! model). Adding a transport to it is one `conformance!` line.
//!
//! Each test pins its ports to the transport under test by QoS (one
//! process: in-process, shared memory, TCP and UDP over loopback all reach
//! their own runtime), except `a_killed_writer_is_noticed_within_its_lease`,
//! which kills (-9) a writer in another process. Every test asserts the path
//! its samples took, so a transport that silently fell back fails.

use std::time::{Duration, Instant};

use ferry::msgs::{example_interfaces::*, std_msgs};
use ferry::{Config, DiscoveryRange, Node, PortEvent, Qos, RawBytes, TransportKind, UnmatchReason};
use ferry_testkit::peer::{report, role, Peer};

const T: Duration = Duration::from_secs(10);

fn node(name: &str, domain: u16) -> Node {
    let cfg = Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        lease_ms: 600,
        ..Config::default()
    };
    Node::builder()
        .name(name)
        .config(cfg)
        .build()
        .expect("node")
}

/// A subscriber and a publisher of `topic` with `qos` on `n`, matched.
fn matched<M: ferry::Codec>(
    n: &Node,
    topic: &str,
    qos: Qos,
) -> (ferry::Subscriber<M>, ferry::Publisher<M>) {
    let s = n.subscriber::<M>(topic).qos(qos).build().unwrap();
    let p = n.publisher::<M>(topic).qos(qos).build().unwrap();
    let path = qos.transport.expect("pinned");
    assert!(p.wait_for_subscribers(1, T), "{path}: no match on {topic}");
    (s, p)
}

/// What a transport is asked to do beyond pub/sub.
#[derive(Clone, Copy)]
struct Caps {
    services: bool,
}

fn reliable_ordered_delivery(path: TransportKind, domain: u16) {
    let n = node("conf", domain);
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
    let n = node("conf", domain);
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
    // Every sample that reached the queue and is not in it was counted
    // dropped. (Samples a path drops before the queue are counted where it
    // drops them: shared memory's ring overflow on the reader's connection,
    // a TCP backlog's on the writer's; the two ends' counters do not yet mean
    // the same on every transport — UDP's writer counts history evictions of
    // samples it delivered — so only the queue's own accounting is held here.)
    let drops: u64 = s.connections().iter().map(|c| c.stats.drops).sum();
    assert!(
        drops >= seen - got.len() as u64,
        "{path}: {seen} reached the queue, {} kept, only {drops} counted dropped",
        got.len()
    );
}

fn transient_local_late_joiner_gets_the_last_samples(path: TransportKind, domain: u16) {
    let n = node("conf", domain);
    let qos = Qos::default()
        .keep_last(3)
        .transient_local()
        .transport(path);
    let p = n
        .publisher::<std_msgs::Int64>("/conf/latched")
        .qos(qos)
        .build()
        .unwrap();
    for i in 1..=10 {
        p.publish(std_msgs::Int64 { data: i }).unwrap();
    }
    let s = n
        .subscriber::<std_msgs::Int64>("/conf/latched")
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
    let n = node("conf", domain);
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
    let n = node("conf", domain);
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
    n: &Node,
    path: TransportKind,
) -> (
    ferry::Service<AddTwoIntsRequest, AddTwoIntsResponse>,
    ferry::Client<AddTwoIntsRequest, AddTwoIntsResponse>,
) {
    let qos = Qos::default().transport(path);
    let srv = n
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/conf/add", |r| AddTwoIntsResponse {
            sum: r.a + r.b,
        })
        .qos(qos)
        .build()
        .unwrap();
    let c = n
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/conf/add")
        .qos(qos)
        .build()
        .unwrap();
    (srv, c)
}

fn services_answer(path: TransportKind, domain: u16) {
    let n = node("conf", domain);
    let (_srv, c) = adder(&n, path);
    assert!(c.wait_for_service(T), "{path}: no service");
    for i in 0..100 {
        let r = c.call(AddTwoIntsRequest { a: i, b: 1 }, T).unwrap();
        assert_eq!(r.sum, i + 1, "{path}: answer");
    }
}

/// A transport that carries no requests yet (issue 18 item 6: services on
/// shared memory and UDP): a client pinned to it finds no service, at once,
/// rather than hanging. Flip its `Caps` when it learns to.
fn services_are_refused_not_hung(path: TransportKind, domain: u16) {
    let n = node("conf", domain);
    let (_srv, c) = adder(&n, path);
    assert!(
        !c.wait_for_service(Duration::from_millis(500)),
        "{path}: carries services now: set its Caps"
    );
    let t0 = Instant::now();
    let r = c.call(AddTwoIntsRequest { a: 1, b: 1 }, Duration::from_secs(1));
    assert!(
        matches!(
            r,
            Err(ferry::CallError::NoService { .. }) | Err(ferry::CallError::Timeout { .. })
        ),
        "{path}: {r:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(3));
}

/// The writer process of the kill -9 test: publishes at 100 Hz until killed.
fn writer_role(arg: &str) {
    let mut a = arg.split(' ');
    let domain: u16 = a.next().unwrap().parse().unwrap();
    let path: TransportKind = a.next().unwrap().parse().unwrap();
    let n = node("writer", domain);
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
    let n = node("reader", domain);
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
    let p = n
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

/// One line per transport: every behaviour, as its own test.
macro_rules! conformance {
    ($name:ident, $path:expr, $domain:expr, $caps:expr) => {
        mod $name {
            use super::*;
            const PATH: TransportKind = $path;
            const CAPS: Caps = $caps;
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
                if CAPS.services {
                    super::services_answer(PATH, $domain + 5);
                } else {
                    super::services_are_refused_not_hung(PATH, $domain + 5);
                }
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
        }
    };
}

conformance!(
    in_process,
    TransportKind::InProcess,
    180,
    Caps { services: true }
);
conformance!(
    shared_memory,
    TransportKind::SharedMemory,
    188,
    Caps { services: false }
);
conformance!(tcp, TransportKind::Tcp, 196, Caps { services: true });
conformance!(udp, TransportKind::Udp, 204, Caps { services: false });
