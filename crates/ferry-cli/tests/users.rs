//! Processes of different users on one host: shared memory is refused
//! (ferry's sockets and segments are 0600, as they should be), and the pair
//! falls back to TCP at once — said once in the log and shown by `topic
//! info -v` — instead of retrying shared memory forever. Both directions:
//! the other user's process as subscriber and as publisher.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferry::msgs::std_msgs;
use ferry::{Config, DiscoveryRange, Node, TransportKind};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const T: Duration = Duration::from_secs(10);

/// Root, with `setpriv` to run a process as `nobody`.
fn can_switch_user() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() == 0 };
    root && Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn node(domain: u16) -> Node {
    Node::builder()
        .name("root_side")
        .config(Config {
            domain_id: domain,
            discovery: DiscoveryRange::Localhost,
            ..Config::default()
        })
        .build()
        .unwrap()
}

/// `ferry ARGS` as user `nobody`.
fn as_nobody(domain: u16, args: &[&str]) -> Child {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", FERRY])
        .args(args)
        .env("FERRY_DOMAIN_ID", domain.to_string())
        .env("FERRY_DISCOVERY", "localhost")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn setpriv ferry")
}

fn lines_of(c: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = c.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

fn stderr_of(mut c: Child) -> String {
    let _ = c.kill();
    let _ = c.wait();
    let mut err = String::new();
    let _ = c.stderr.take().unwrap().read_to_string(&mut err);
    err
}

fn topic_info(domain: u16, topic: &str) -> String {
    let o = Command::new(FERRY)
        .args(["topic", "info", "-v", topic])
        .env("FERRY_DOMAIN_ID", domain.to_string())
        .env("FERRY_DISCOVERY", "localhost")
        .output()
        .expect("ferry topic info");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn another_users_subscriber_gets_samples_over_tcp() {
    if !can_switch_user() {
        return;
    }
    let domain = 214;
    let mut echo = as_nobody(domain, &["topic", "echo", "/users/down", "--timeout", "30"]);
    let lines = lines_of(&mut echo);
    let n = node(domain);
    let publ = n
        .publisher::<std_msgs::Int64>("/users/down")
        .build()
        .unwrap();
    assert!(publ.wait_for_subscribers(1, T), "the echo never matched");
    let t0 = Instant::now();
    let mut heard = None;
    let mut i = 0;
    while heard.is_none() && t0.elapsed() < Duration::from_secs(10) {
        publ.publish(std_msgs::Int64 { data: 4200 + i }).unwrap();
        i += 1;
        if let Ok(l) = lines.recv_timeout(Duration::from_millis(50)) {
            heard = l.contains("42").then(|| t0.elapsed());
        }
    }
    let info = topic_info(domain, "/users/down");
    let conns = publ.connections();
    let err = stderr_of(echo);
    let heard = heard.unwrap_or_else(|| panic!("nothing reached the other user's echo: {err}"));
    assert!(
        heard < Duration::from_secs(3),
        "first sample after {heard:?}"
    );
    assert_eq!(conns.len(), 1, "{conns:?}");
    assert_eq!(conns[0].transport, TransportKind::Tcp, "{conns:?}");
    assert!(
        info.contains("path tcp (shm refused: permission denied"),
        "topic info does not say why: {info}"
    );
}

#[test]
fn another_users_publisher_reaches_us_over_tcp_and_says_so_once() {
    if !can_switch_user() {
        return;
    }
    let domain = 215;
    let n = node(domain);
    let sub = n
        .subscriber::<std_msgs::Int64>("/users/up")
        .build()
        .unwrap();
    let publ = as_nobody(
        domain,
        &[
            "topic",
            "pub",
            "/users/up",
            "std_msgs/msg/Int64",
            "data: 7",
            "--rate",
            "20",
        ],
    );
    let t0 = Instant::now();
    let got = sub.recv_timeout(T);
    let first = t0.elapsed();
    // Several more samples: the refusal must not come back per sample.
    for _ in 0..20 {
        let _ = sub.recv_timeout(Duration::from_secs(1));
    }
    let err = stderr_of(publ);
    assert_eq!(got.map(|s| s.data).ok(), Some(7), "nothing arrived: {err}");
    assert!(
        first < Duration::from_secs(5),
        "first sample after {first:?}"
    );
    assert_eq!(
        err.matches("refused").count(),
        1,
        "the refusal was not said exactly once:\n{err}"
    );
    assert!(!err.contains("retrying"), "it kept retrying:\n{err}");
}
