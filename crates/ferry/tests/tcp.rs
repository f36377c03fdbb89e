//! The TCP listener against a stranger on the same host: a stream that
//! does not open with a Hello of the Hello's real size is cut off at its
//! first header, one that sends nothing is closed after the Hello timeout,
//! and the real subscriber on the same listener goes on receiving.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ferry::msgs::std_msgs;
use ferry::{Config, DiscoveryRange, Node, Qos, TransportKind};
use ferry_wire::frame::{FrameHeader, FrameKind};

const T: Duration = Duration::from_secs(10);

fn header(kind: FrameKind, body_len: u32) -> [u8; 32] {
    FrameHeader {
        kind,
        flags: 0,
        body_len,
        seq: 1,
        stamp_ns: 0,
    }
    .encode()
}

/// Reads until the server closes the connection (EOF or reset); how long
/// that took, or `None` if it stayed open for `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    let mut buf = [0u8; 4096];
    while t0.elapsed() < within {
        s.set_read_timeout(Some(
            within
                .saturating_sub(t0.elapsed())
                .max(Duration::from_millis(1)),
        ))
        .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return Some(t0.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(t0.elapsed()),
        }
    }
    None
}

#[test]
fn strangers_without_a_proper_hello_are_cut_off_and_the_subscriber_goes_on() {
    let node = Node::builder()
        .name("tcp_listener")
        .config(Config {
            domain_id: 140,
            discovery: DiscoveryRange::Localhost,
            ..Config::default()
        })
        .build()
        .unwrap();
    let qos = Qos::default().keep_all().transport(TransportKind::Tcp);
    let sub = node
        .subscriber::<std_msgs::Int64>("/tcp/guarded")
        .qos(qos)
        .build()
        .unwrap();
    let publ = node
        .publisher::<std_msgs::Int64>("/tcp/guarded")
        .qos(qos)
        .build()
        .unwrap();
    assert!(publ.wait_for_subscribers(1, T));
    let conn = &publ.connections()[0];
    assert_eq!(conn.transport, TransportKind::Tcp);
    let addr = conn.locator.strip_prefix("tcp/").expect("a TCP locator");

    // A Hello announcing 256 MiB (a Hello is 25 B): cut off at its header,
    // although the body keeps coming.
    let mut big = TcpStream::connect(addr).unwrap();
    big.write_all(&header(FrameKind::Hello, 256 << 20)).unwrap();
    let _ = big.write_all(&[0u8; 64 * 1024]);
    assert!(
        closed_within(&mut big, Duration::from_secs(5)).is_some(),
        "a 256 MiB Hello was not refused"
    );
    // Data before any Hello: cut off.
    let mut early = TcpStream::connect(addr).unwrap();
    early.write_all(&header(FrameKind::Data, 8)).unwrap();
    early.write_all(&[0u8; 8]).unwrap();
    assert!(
        closed_within(&mut early, Duration::from_secs(5)).is_some(),
        "data before a Hello was accepted"
    );
    // Silence: closed after the Hello timeout (2 s), not before.
    let mut idle = TcpStream::connect(addr).unwrap();
    let took = closed_within(&mut idle, Duration::from_secs(8))
        .expect("an idle stranger stayed connected");
    assert!(
        took >= Duration::from_millis(1500),
        "closed after {took:?}, before the Hello timeout"
    );

    // 50 idle strangers from one address: past 32 without a Hello, the
    // oldest give way at once (not after the Hello timeout).
    let idle: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let t0 = Instant::now();
    while node.connection_stats().evicted < 18 && t0.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let stats = node.connection_stats();
    assert!(stats.evicted >= 18, "{stats:?}");
    assert!(stats.bad_hello >= 2 && stats.no_hello >= 1, "{stats:?}");
    drop(idle);

    // The real connection on the same listener is untouched.
    for i in 0..100 {
        publ.publish(std_msgs::Int64 { data: i }).unwrap();
    }
    for i in 0..100 {
        assert_eq!(sub.recv_timeout(T).unwrap().data, i);
    }
    assert_eq!(publ.connections()[0].transport, TransportKind::Tcp);
}
