//! One delivery model on every path: a subscriber callback may sleep,
//! publish, call a service and drop its own subscriber — nothing deadlocks
//! (a watchdog bounds each path), and the other subscribers of the process
//! keep their rate meanwhile. In one process, each path pinned by QoS.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry::msgs::{example_interfaces::srv::*, std_msgs};
use ferry::{Config, DiscoveryRange, Node, Qos, Subscriber, TransportKind};

const RATE_HZ: u64 = 200;
const WINDOW: Duration = Duration::from_millis(1500);

fn node(domain: u16) -> Node {
    let cfg = Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        ..Config::default()
    };
    Node::builder()
        .name("delivery")
        .config(cfg)
        .build()
        .expect("node")
}

/// What the misbehaving callback managed to do.
#[derive(Default)]
struct Done {
    calls: AtomicUsize,
    published: AtomicUsize,
    service_answers: AtomicUsize,
    dropped_itself: AtomicUsize,
}

fn misbehaving_callback_on(path: TransportKind, domain: u16) {
    let n = node(domain);
    let pinned = Qos::default().transport(path);
    let _adder = n
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/delivery/add", |r| {
            AddTwoIntsResponse { sum: r.a + r.b }
        })
        .build()
        .expect("service");
    // The steady stream: another subscriber of this process, same path.
    let steady_got = Arc::new(AtomicU64::new(0));
    // The longest time between two of its samples, once measuring (µs).
    let measuring = Arc::new(AtomicBool::new(false));
    let worst_gap_us = Arc::new(AtomicU64::new(0));
    let (g, m, w) = (steady_got.clone(), measuring.clone(), worst_gap_us.clone());
    let last = Mutex::new(Instant::now());
    let steady_sub = n
        .subscriber::<std_msgs::Int32>("/delivery/steady")
        .qos(pinned)
        .callback(move |s| {
            assert_eq!(s.info.transport, path);
            g.fetch_add(1, Ordering::Relaxed);
            let now = Instant::now();
            let gap = now.duration_since(std::mem::replace(&mut *last.lock().expect("last"), now));
            if m.load(Ordering::Relaxed) {
                w.fetch_max(gap.as_micros() as u64, Ordering::Relaxed);
            }
        })
        .build()
        .expect("steady subscriber");
    let steady = n
        .publisher::<std_msgs::Int32>("/delivery/steady")
        .qos(pinned)
        .build()
        .expect("steady publisher");
    // The misbehaving subscriber, which holds itself so it can drop itself.
    let done = Arc::new(Done::default());
    let holder: Arc<Mutex<Option<Subscriber<std_msgs::Int32>>>> = Arc::new(Mutex::new(None));
    let (d, h, n2) = (done.clone(), holder.clone(), n.clone());
    let bad = n
        .subscriber::<std_msgs::Int32>("/delivery/trigger")
        .qos(pinned)
        .callback(move |s| {
            assert_eq!(s.info.transport, path);
            d.calls.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
            let side = n2
                .publisher::<std_msgs::Int32>("/delivery/side")
                .build()
                .expect("publisher from a callback");
            side.publish(std_msgs::Int32 { data: s.data })
                .expect("publish from a callback");
            d.published.fetch_add(1, Ordering::SeqCst);
            let client = n2
                .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/delivery/add")
                .build()
                .expect("client from a callback");
            if client.wait_for_service(Duration::from_secs(5)) {
                let r = client
                    .call(AddTwoIntsRequest { a: 2, b: 40 }, Duration::from_secs(5))
                    .expect("service call from a callback");
                assert_eq!(r.sum, 42);
                d.service_answers.fetch_add(1, Ordering::SeqCst);
            }
            if s.data == 3 {
                let me = h.lock().expect("holder").take();
                drop(me);
                d.dropped_itself.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build()
        .expect("misbehaving subscriber");
    *holder.lock().expect("holder") = Some(bad);
    let trigger = n
        .publisher::<std_msgs::Int32>("/delivery/trigger")
        .qos(pinned)
        .build()
        .expect("trigger publisher");
    assert!(trigger.wait_for_subscribers(1, Duration::from_secs(10)));
    assert!(steady.wait_for_subscribers(1, Duration::from_secs(10)));
    assert!(steady_sub.wait_for_publishers(1, Duration::from_secs(10)));
    // Warm the steady stream, then measure it while the bad callback works.
    let period = Duration::from_nanos(1_000_000_000 / RATE_HZ);
    for i in 0..20 {
        steady.publish(std_msgs::Int32 { data: i }).expect("steady");
        std::thread::sleep(period);
    }
    measuring.store(true, Ordering::Relaxed);
    for i in 1..=3 {
        trigger
            .publish(std_msgs::Int32 { data: i })
            .expect("trigger");
    }
    let before = steady_got.load(Ordering::Relaxed);
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < WINDOW {
        steady
            .publish(std_msgs::Int32 { data: sent as i32 })
            .expect("steady");
        sent += 1;
        std::thread::sleep(period);
    }
    std::thread::sleep(Duration::from_millis(100));
    measuring.store(false, Ordering::Relaxed);
    let got = steady_got.load(Ordering::Relaxed) - before;
    // Three callbacks of > 100 ms each ran inside the window: on the
    // delivering thread they would stall the steady stream 100 ms at a time.
    let worst = Duration::from_micros(worst_gap_us.load(Ordering::Relaxed));
    assert!(
        got * 100 >= sent * 95,
        "{path}: the steady subscriber got {got} of {sent} while another callback slept"
    );
    assert!(
        worst < Duration::from_millis(80),
        "{path}: the steady subscriber waited {worst:?} between two samples while another callback slept"
    );
    let end = Instant::now() + Duration::from_secs(20);
    while done.dropped_itself.load(Ordering::SeqCst) == 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        done.calls.load(Ordering::SeqCst),
        3,
        "{path}: callbacks run"
    );
    assert_eq!(
        done.published.load(Ordering::SeqCst),
        3,
        "{path}: publishes"
    );
    assert_eq!(
        done.service_answers.load(Ordering::SeqCst),
        3,
        "{path}: service calls"
    );
    assert_eq!(
        done.dropped_itself.load(Ordering::SeqCst),
        1,
        "{path}: self-drop"
    );
    assert!(holder.lock().expect("holder").is_none());
    // The dropped subscriber gets nothing more, and nothing hangs.
    trigger
        .publish(std_msgs::Int32 { data: 4 })
        .expect("publish after the drop");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        done.calls.load(Ordering::SeqCst),
        3,
        "{path}: a dropped subscriber's callback ran"
    );
}

/// Runs `f` on its own thread; fails if it does not finish in time.
fn with_watchdog(what: &str, limit: Duration, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => t.join().expect("test thread"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(p) = t.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: not finished within {limit:?} (deadlock?)")
        }
    }
}

#[test]
fn in_process_callbacks_may_block_publish_call_and_drop_themselves() {
    with_watchdog("in-process", Duration::from_secs(60), || {
        misbehaving_callback_on(TransportKind::InProcess, 171)
    });
}

#[test]
fn shared_memory_callbacks_may_block_publish_call_and_drop_themselves() {
    with_watchdog("shared memory", Duration::from_secs(60), || {
        misbehaving_callback_on(TransportKind::SharedMemory, 172)
    });
}

#[test]
fn tcp_callbacks_may_block_publish_call_and_drop_themselves() {
    with_watchdog("tcp", Duration::from_secs(60), || {
        misbehaving_callback_on(TransportKind::Tcp, 173)
    });
}

#[test]
fn udp_callbacks_may_block_publish_call_and_drop_themselves() {
    with_watchdog("udp", Duration::from_secs(60), || {
        misbehaving_callback_on(TransportKind::Udp, 174)
    });
}
