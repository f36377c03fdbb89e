//! One process: in-process path, TCP path (pinned), services, QoS events.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::msgs::{example_interfaces::srv::*, std_msgs};
use ferry::{CallError, Config, DiscoveryRange, Node, PortEvent, Qos, QosPolicy, TransportKind};

/// A private domain per test so parallel tests do not see each other.
fn node(name: &str, domain: u16) -> Node {
    let cfg = Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        ..Config::default()
    };
    Node::builder().name(name).config(cfg).build().unwrap()
}

const T: Duration = Duration::from_secs(5);

#[test]
fn in_process_pub_sub_shares_the_arc() {
    let n = node("a", 101);
    let p = n.publisher::<std_msgs::String>("/chatter").build().unwrap();
    let s = n.subscriber::<std_msgs::String>("chatter").build().unwrap();
    assert!(p.wait_for_subscribers(1, T));
    let msg = Arc::new(std_msgs::String { data: "hi".into() });
    p.publish(msg.clone()).unwrap();
    let got = s.recv_timeout(T).unwrap();
    assert_eq!(got.data, "hi");
    assert_eq!(got.info.transport, TransportKind::InProcess);
    assert!(
        Arc::ptr_eq(&got.clone().into_arc(), &msg),
        "in-process path copied the message"
    );
    let c = p.connections();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].transport, TransportKind::InProcess);
    assert_eq!(s.connections()[0].stats.messages, 1);
}

#[test]
fn callback_and_async_receive() {
    let n = node("a", 102);
    let count = Arc::new(AtomicUsize::new(0));
    let c2 = count.clone();
    let _cb = n
        .subscriber::<std_msgs::Int32>("/n")
        .callback(move |s| {
            c2.fetch_add(s.data as usize, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    // An inline callback runs on the publishing thread: done when publish returns.
    let inline = Arc::new(AtomicUsize::new(0));
    let i2 = inline.clone();
    let _inline = n
        .subscriber::<std_msgs::Int32>("/n")
        .inline_callback(move |s| {
            i2.fetch_add(s.data as usize, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let q = n.subscriber::<std_msgs::Int32>("/n").build().unwrap();
    let p = n.publisher::<std_msgs::Int32>("/n").build().unwrap();
    assert!(p.wait_for_subscribers(3, T));
    for i in 1..=10 {
        p.publish(std_msgs::Int32 { data: i }).unwrap();
    }
    assert_eq!(inline.load(Ordering::SeqCst), 55);
    // The default callback runs on the subscriber's own thread, soon after.
    let end = Instant::now() + T;
    while count.load(Ordering::SeqCst) < 55 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(count.load(Ordering::SeqCst), 55);
    // Async receive on a tiny hand-rolled executor: poll with a no-op waker.
    let fut = q.recv_async();
    let mut fut = std::pin::pin!(fut);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match std::future::Future::poll(fut.as_mut(), &mut cx) {
        std::task::Poll::Ready(Ok(s)) => assert_eq!(s.data, 1),
        other => panic!("queued sample not ready: {:?}", other.is_ready()),
    }
}

#[test]
fn tcp_path_when_pinned() {
    let n = node("a", 103);
    let q = Qos::default().transport(TransportKind::Tcp);
    let p = n
        .publisher::<std_msgs::String>("/t")
        .qos(q)
        .build()
        .unwrap();
    let s = n.subscriber::<std_msgs::String>("/t").build().unwrap();
    assert!(p.wait_for_subscribers(1, T));
    for i in 0..100 {
        p.publish(std_msgs::String {
            data: format!("m{i}"),
        })
        .unwrap();
    }
    // keep_last 10 on the subscriber: whatever it could not hold is dropped
    // and counted; what it delivers is in order and ends with the newest.
    let mut got: Vec<String> = Vec::new();
    while got.last().map(String::as_str) != Some("m99") {
        let x = s.recv_timeout(T).expect("newest sample never arrived");
        assert_eq!(x.info.transport, TransportKind::Tcp);
        got.push(x.data.clone());
    }
    let nums: Vec<u32> = got.iter().map(|m| m[1..].parse().unwrap()).collect();
    assert!(
        nums.windows(2).all(|w| w[0] < w[1]),
        "out of order: {nums:?}"
    );
    let st = s.connections()[0].stats;
    assert_eq!(st.messages, 100);
    assert_eq!(
        got.len() as u64 + st.drops,
        100,
        "received {} + dropped {}",
        got.len(),
        st.drops
    );
    let c = &p.connections()[0];
    assert_eq!(c.transport, TransportKind::Tcp);
    assert!(c.locator.starts_with("tcp/127.0.0.1:"), "{}", c.locator);
}

#[test]
fn large_samples_over_tcp_are_byte_exact() {
    let n = node("a", 104);
    let q = Qos::default().transport(TransportKind::Tcp).keep_all();
    let p = n
        .publisher::<ferry::RawBytes>("/big")
        .qos(q)
        .build()
        .unwrap();
    let s = n
        .subscriber::<ferry::RawBytes>("/big")
        .qos(Qos::default().keep_all())
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, T));
    for size in [0usize, 1, 31, 32, 33, 65536, 1 << 20, 8 << 20] {
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
        p.publish(ferry::RawBytes::new(data.clone())).unwrap();
        let got = s.recv_timeout(T).unwrap();
        assert_eq!(got.len(), size);
        assert!(got[..] == data[..], "payload of {size} B corrupted");
    }
}

#[test]
fn services_in_process_and_over_tcp() {
    let n = node("a", 105);
    let _srv = n
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/add", |r| AddTwoIntsResponse {
            sum: r.a + r.b,
        })
        .build()
        .unwrap();
    let c = n
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/add")
        .build()
        .unwrap();
    let r = c.call(AddTwoIntsRequest { a: 2, b: 40 }, T).unwrap();
    assert_eq!(r.sum, 42);
    assert_eq!(c.connections()[0].transport, TransportKind::InProcess);
    let ct = n
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/add")
        .qos(Qos::services_default().transport(TransportKind::Tcp))
        .build()
        .unwrap();
    for i in 0..20 {
        assert_eq!(
            ct.call(AddTwoIntsRequest { a: i, b: 1 }, T).unwrap().sum,
            i + 1
        );
    }
    assert_eq!(ct.connections()[0].transport, TransportKind::Tcp);
}

#[test]
fn missing_service_and_failing_handler_are_clear_errors() {
    let n = node("a", 106);
    let c = n
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/nobody")
        .build()
        .unwrap();
    let t0 = std::time::Instant::now();
    let e = c
        .call(AddTwoIntsRequest::default(), Duration::from_millis(300))
        .unwrap_err();
    assert!(matches!(e, CallError::NoService { .. }), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(2));
    let _srv = n
        .try_service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/fails", |_| {
            Err("arm is e-stopped".into())
        })
        .build()
        .unwrap();
    let c = n
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/fails")
        .qos(Qos::services_default().transport(TransportKind::Tcp))
        .build()
        .unwrap();
    let e = c.call(AddTwoIntsRequest::default(), T).unwrap_err();
    assert!(e.to_string().contains("e-stopped"), "{e}");
    let _slow = n
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/slow", |_| {
            std::thread::sleep(Duration::from_secs(2));
            AddTwoIntsResponse::default()
        })
        .build()
        .unwrap();
    let c = n
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/slow")
        .build()
        .unwrap();
    let e = c
        .call(AddTwoIntsRequest::default(), Duration::from_millis(200))
        .unwrap_err();
    assert!(matches!(e, CallError::Timeout { .. }), "{e}");
}

#[test]
fn incompatible_qos_and_type_are_reported_to_both_sides() {
    let n = node("a", 107);
    let p = n
        .publisher::<std_msgs::String>("/q")
        .qos(Qos::sensor_data())
        .build()
        .unwrap();
    let s = n
        .subscriber::<std_msgs::String>("/q")
        .qos(Qos::default())
        .build()
        .unwrap();
    let want = |e: Option<PortEvent>| match e {
        Some(PortEvent::IncompatibleQos { policies, .. }) => {
            assert_eq!(policies, vec![QosPolicy::Reliability])
        }
        other => panic!("expected IncompatibleQos, got {other:?}"),
    };
    want(p.next_event(T));
    want(s.next_event(T));
    assert_eq!(p.subscriber_count(), 0);
    let s2 = n
        .subscriber::<std_msgs::Int32>("/q")
        .qos(Qos::sensor_data())
        .build()
        .unwrap();
    assert!(matches!(
        s2.next_event(T),
        Some(PortEvent::IncompatibleType { .. })
    ));
}

#[test]
fn transient_local_late_joiner_gets_the_last_samples() {
    let n = node("a", 108);
    let p = n
        .publisher::<std_msgs::Int32>("/latched")
        .qos(Qos::latched().keep_last(3))
        .build()
        .unwrap();
    for i in 0..10 {
        p.publish(std_msgs::Int32 { data: i }).unwrap();
    }
    for pin in [None, Some(TransportKind::Tcp)] {
        let mut q = Qos::latched().keep_last(3);
        q.transport = pin;
        let s = n
            .subscriber::<std_msgs::Int32>("/latched")
            .qos(q)
            .build()
            .unwrap();
        let got: Vec<i32> = (0..3).map(|_| s.recv_timeout(T).unwrap().data).collect();
        assert_eq!(got, vec![7, 8, 9], "pin {pin:?}");
    }
}

#[test]
fn bad_names_are_clear_errors() {
    let n = node("a", 109);
    let e = n
        .publisher::<std_msgs::String>("bad name")
        .build()
        .err()
        .unwrap();
    assert!(e.to_string().contains("bad name"), "{e}");
    assert!(Node::builder().name("a/b").build().is_err());
}

#[test]
fn config_rule_pins_a_topic_pattern_to_tcp() {
    let cfg = Config {
        domain_id: 110,
        discovery: DiscoveryRange::Localhost,
        topics: vec![ferry::TopicRule {
            pattern: "/camera/*".into(),
            transport: Some(TransportKind::Tcp),
            ..Default::default()
        }],
        ..Config::default()
    };
    let n = Node::builder().name("cam").config(cfg).build().unwrap();
    let pinned = n
        .publisher::<std_msgs::String>("/camera/front")
        .build()
        .unwrap();
    let free = n.publisher::<std_msgs::String>("/odom").build().unwrap();
    let _s1 = n
        .subscriber::<std_msgs::String>("/camera/front")
        .build()
        .unwrap();
    let _s2 = n.subscriber::<std_msgs::String>("/odom").build().unwrap();
    assert!(pinned.wait_for_subscribers(1, T) && free.wait_for_subscribers(1, T));
    assert_eq!(pinned.connections()[0].transport, TransportKind::Tcp);
    assert_eq!(free.connections()[0].transport, TransportKind::InProcess);
}

#[test]
fn deadline_missed_is_reported() {
    let n = node("a", 111);
    let q = Qos::default().deadline(Duration::from_millis(100));
    let p = n.publisher::<std_msgs::Int32>("/d").qos(q).build().unwrap();
    let s = n
        .subscriber::<std_msgs::Int32>("/d")
        .qos(q)
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, T));
    p.publish(std_msgs::Int32 { data: 1 }).unwrap();
    let missed = |e: Option<PortEvent>| matches!(e, Some(PortEvent::DeadlineMissed { .. }));
    let mut got = false;
    for _ in 0..20 {
        if missed(s.next_event(Duration::from_millis(100))) {
            got = true;
            break;
        }
    }
    assert!(
        got,
        "subscriber saw no missed deadline after 100 ms of silence"
    );
    let mut got = false;
    for _ in 0..20 {
        if missed(p.next_event(Duration::from_millis(100))) {
            got = true;
            break;
        }
    }
    assert!(got, "publisher saw no missed deadline");
}

#[test]
fn lifespan_drops_stale_history_for_late_joiners() {
    let n = node("a", 112);
    let q = Qos::latched()
        .keep_last(5)
        .lifespan(Duration::from_millis(200));
    let p = n
        .publisher::<std_msgs::Int32>("/ls")
        .qos(q)
        .build()
        .unwrap();
    p.publish(std_msgs::Int32 { data: 1 }).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    p.publish(std_msgs::Int32 { data: 2 }).unwrap();
    let s = n
        .subscriber::<std_msgs::Int32>("/ls")
        .qos(q)
        .build()
        .unwrap();
    assert_eq!(s.recv_timeout(T).unwrap().data, 2);
    assert!(
        s.recv_timeout(Duration::from_millis(200)).is_err(),
        "expired sample delivered"
    );
}

#[test]
fn a_panicking_callback_does_not_kill_the_node() {
    let n = node("a", 113);
    let _bad = n
        .subscriber::<std_msgs::Int32>("/p")
        .callback(|s| {
            if s.data == 1 {
                panic!("user bug");
            }
        })
        .build()
        .unwrap();
    let good = n.subscriber::<std_msgs::Int32>("/p").build().unwrap();
    let p = n.publisher::<std_msgs::Int32>("/p").build().unwrap();
    assert!(p.wait_for_subscribers(2, T));
    p.publish(std_msgs::Int32 { data: 1 }).unwrap();
    p.publish(std_msgs::Int32 { data: 2 }).unwrap();
    assert_eq!(good.recv_timeout(T).unwrap().data, 1);
    assert_eq!(good.recv_timeout(T).unwrap().data, 2);
}

#[test]
fn keep_all_tcp_never_stalls_under_back_to_back_publishing() {
    // Regression: a keep_all publisher woken after the I/O thread drained
    // the backlog used to queue onto the empty backlog and wait forever.
    for (domain, size, count) in [(114u16, 4096usize, 30_000u32), (115, 65_536, 3_000)] {
        let n = node("a", domain);
        let q = Qos::default().keep_all().transport(TransportKind::Tcp);
        let p = n
            .publisher::<ferry::RawBytes>("/flood")
            .qos(q)
            .build()
            .unwrap();
        let s = n
            .subscriber::<ferry::RawBytes>("/flood")
            .qos(Qos::default().keep_all())
            .build()
            .unwrap();
        assert!(p.wait_for_subscribers(1, T));
        let reader = std::thread::spawn(move || {
            let mut got = 0u32;
            while got < count {
                match s.recv_timeout(Duration::from_secs(5)) {
                    Ok(_) => got += 1,
                    Err(_) => break,
                }
            }
            got
        });
        let data = ferry::RawBytes::new(vec![7u8; size]);
        let t0 = std::time::Instant::now();
        for i in 0..count {
            if let Err(e) = p.publish(data.clone()) {
                panic!("{size} B: publish {i} failed after {:?}: {e}", t0.elapsed());
            }
        }
        assert_eq!(reader.join().unwrap(), count, "{size} B: samples missing");
    }
}

#[test]
fn a_loan_without_shared_memory_is_a_heap_buffer_with_the_same_api() {
    let n = node("loan", 131);
    let p = n.publisher::<ferry::RawBytes>("/loan").build().unwrap();
    let s = n.subscriber::<ferry::RawBytes>("/loan").build().unwrap();
    assert!(p.wait_for_subscribers(1, T));
    let mut l = p.loan(1000);
    assert!(!l.is_shared_memory(), "in-process pair: no shared memory");
    assert_eq!(l.len(), 1000);
    l.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let at = l.as_ptr();
    l.publish().unwrap();
    let got = s.recv_timeout(T).unwrap();
    assert_eq!(got.info.transport, TransportKind::InProcess);
    assert!(got.iter().enumerate().all(|(i, b)| *b == i as u8));
    assert_eq!(
        got.as_ptr(),
        at,
        "the in-process subscriber reads the lent buffer itself"
    );
    // A loan dropped unsent publishes nothing.
    drop(p.loan(10));
    assert!(s.recv_timeout(Duration::from_millis(100)).is_err());
}

#[test]
fn a_heap_loan_reuses_the_last_buffer_once_every_path_let_go() {
    let n = node("a", 116);
    let p = n
        .publisher::<ferry::RawBytes>("/loan/heap")
        .build()
        .unwrap();
    let mut first = p.loan(1 << 20);
    assert!(!first.is_shared_memory());
    first.fill(7);
    let at = first.as_ptr();
    first.publish().unwrap();
    // Nobody holds the last sample: the next loan is the same memory, as
    // it was (a loan is not cleared), with no allocation and no memset.
    let second = p.loan(1 << 20);
    assert_eq!(second.as_ptr(), at);
    assert!(second.iter().all(|b| *b == 7));
    second.publish().unwrap();
    // A subscriber that keeps the sample keeps its buffer: a new one.
    let s = n
        .subscriber::<ferry::RawBytes>("/loan/heap")
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, T));
    let mut third = p.loan(1 << 20);
    third.fill(9);
    third.publish().unwrap();
    let kept = s.recv_timeout(T).unwrap();
    let fourth = p.loan(1 << 20);
    assert_ne!(
        fourth.as_ptr(),
        kept.as_ptr(),
        "a held sample was lent again"
    );
    assert!(kept.iter().all(|b| *b == 9));
}

/// Discovery carries ROS 2's own type hash (RIHS01) for a compiled type
/// with a known definition: what `ros2 topic info -v` prints for
/// `std_msgs/msg/String` (rmw_zenoh's design document).
#[test]
fn discovery_carries_the_ros2_type_hash() {
    let a = node("hash_pub", 117);
    let b = node("hash_obs", 117);
    let _p = a.publisher::<std_msgs::String>("/hashed").build().unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let g = b.graph();
        if let Some(e) = g.endpoints_of("/hashed").next() {
            assert_eq!(
                e.type_hash.to_string(),
                "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
            );
            break;
        }
        assert!(Instant::now() < end, "the publisher was never discovered");
        std::thread::sleep(Duration::from_millis(20));
    }
}
