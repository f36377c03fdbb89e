//! A stranger floods a subscriber's TCP listener with connections that
//! never send a Hello, in a process with few file descriptors: a new
//! publisher that connects after the flood is still heard within seconds,
//! and the subscriber says once that it ran short of descriptors, if it did.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferry::msgs::std_msgs;
use ferry::{Config, DiscoveryRange, Node, Qos, TransportKind};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const DOMAIN: u16 = 213;
const T: Duration = Duration::from_secs(10);

fn publisher(node: &Node) -> ferry::Publisher<std_msgs::Int64> {
    node.publisher::<std_msgs::Int64>("/conn/flood")
        .qos(Qos::default().keep_all().transport(TransportKind::Tcp))
        .build()
        .unwrap()
}

#[test]
fn a_connection_flood_does_not_shut_out_a_new_publisher() {
    // The victim: `topic echo` with 96 descriptors (soft and hard).
    let mut victim = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 96 && exec {FERRY} topic echo /conn/flood --timeout 60 --node-name conn_victim"
        ))
        .env("FERRY_DOMAIN_ID", DOMAIN.to_string())
        .env("FERRY_DISCOVERY", "localhost")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ferry topic echo");
    let lines = {
        let (tx, rx) = mpsc::channel::<String>();
        let out = victim.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        rx
    };
    let node = Node::builder()
        .name("conn_flood")
        .config(Config {
            domain_id: DOMAIN,
            discovery: DiscoveryRange::Localhost,
            ..Config::default()
        })
        .build()
        .unwrap();
    // A first publisher finds the victim's TCP listener, then goes.
    let first = publisher(&node);
    assert!(first.wait_for_subscribers(1, T), "the echo never matched");
    let conn = &first.connections()[0];
    assert_eq!(conn.transport, TransportKind::Tcp);
    let addr: std::net::SocketAddr = conn
        .locator
        .strip_prefix("tcp/")
        .expect("a TCP locator")
        .parse()
        .unwrap();
    drop(first);

    // 600 connections that never say Hello, held open: six times the
    // victim's descriptors. The kernel completes them all into the backlog.
    // (Before the listener bounded them, the victim stopped accepting and
    // these connects timed out.)
    let t0 = Instant::now();
    let flood: Vec<TcpStream> = (0..600)
        .take_while(|_| t0.elapsed() < Duration::from_secs(10))
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok())
        .collect();
    assert!(
        flood.len() >= 300,
        "only {} flood connections in {:?}: the listener stopped accepting",
        flood.len(),
        t0.elapsed()
    );

    // A new publisher connects after the flood and must be heard soon.
    let second = publisher(&node);
    let t0 = Instant::now();
    let mut heard = None;
    let mut i = 0;
    while t0.elapsed() < Duration::from_secs(20) && heard.is_none() {
        let _ = second.publish(std_msgs::Int64 { data: 7_000 + i });
        i += 1;
        if let Ok(l) = lines.recv_timeout(Duration::from_millis(50)) {
            if l.contains("700") {
                heard = Some(t0.elapsed());
            }
        }
    }
    // What the victim turned away is visible from the shell.
    let counters = Command::new(FERRY)
        .args(["admin", "/conn_victim", "counters"])
        .env("FERRY_DOMAIN_ID", DOMAIN.to_string())
        .env("FERRY_DISCOVERY", "localhost")
        .output()
        .expect("ferry admin");
    let counters = String::from_utf8_lossy(&counters.stdout).into_owned();
    drop(flood);
    let _ = victim.kill();
    let _ = victim.wait();
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut victim.stderr.take().unwrap(), &mut err);
    assert!(!err.contains("panicked"), "the victim panicked:\n{err}");
    let heard = heard.unwrap_or_else(|| panic!("the new publisher was never heard:\n{err}"));
    assert!(
        heard < Duration::from_secs(3),
        "the new publisher was heard only after {heard:?} (the Hello timeout is 2 s)"
    );
    let evicted: u64 = counters
        .split("evicted ")
        .nth(2)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no connection counters: {counters:?}"));
    assert!(evicted >= 100, "{counters}");
    eprintln!(
        "{} flood connections; new publisher heard after {heard:?}; {}",
        600,
        counters.trim()
    );
    // Running short of descriptors, if it happened, is said once.
    assert!(
        err.matches("out of file descriptors").count() <= 1,
        "the shortage was logged more than once:\n{err}"
    );
}
