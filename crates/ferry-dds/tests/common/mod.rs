//! What the DDS interop tests share: namespaces, peers as processes, CDR
//! of std_msgs/String.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The ROS 2 peer script (the path works from ferry-dds's tests and from
/// ferry's, which share this file).
pub const PEER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../ferry-dds/tests/ros2_peer.py"
);

pub fn sh(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .status()
        .is_ok_and(|s| s.success())
}

pub fn python() -> String {
    let py = std::env::var("FERRY_ROS2_PYTHON")
        .unwrap_or_else(|_| "/opt/ferry-ros2/bin/python".to_string());
    assert!(
        Command::new(&py)
            .args(["-c", "import rclpy, std_msgs"])
            .status()
            .is_ok_and(|s| s.success()),
        "no ROS 2 rclpy at {py}: run scripts/setup.sh (it installs ROS 2 Jazzy's rclpy with \
         rmw_fastrtps_cpp from PyPI into /opt/ferry-ros2) or set FERRY_ROS2_PYTHON"
    );
    py
}

/// Two namespaces joined by a veth pair (10.79.N.1 / .2, multicast routed
/// on the veth); deleted on drop.
pub struct Lab {
    pub a: String,
    pub b: String,
}

impl Lab {
    pub fn new(net: u8) -> Option<Lab> {
        // SAFETY: plain syscall.
        if unsafe { libc::geteuid() } != 0 || !sh("command -v ip >/dev/null") {
            eprintln!("SKIPPED: the ROS 2 tests need root and iproute2 (bash scripts/setup.sh)");
            return None;
        }
        let tag = format!("{}{net}", std::process::id() % 10000);
        let lab = Lab {
            a: format!("da{tag}"),
            b: format!("db{tag}"),
        };
        let (a, b) = (&lab.a, &lab.b);
        assert!(sh(&format!(
            "ip netns add {a} && ip netns add {b} && \
             ip link add dva{tag} netns {a} type veth peer name dvb{tag} netns {b}"
        )));
        for (ns, dev, host) in [(a, format!("dva{tag}"), 1), (b, format!("dvb{tag}"), 2)] {
            assert!(sh(&format!(
                "ip -n {ns} link set lo up && ip -n {ns} addr add 10.79.{net}.{host}/24 dev {dev} && \
                 ip -n {ns} link set {dev} up && ip -n {ns} route add 224.0.0.0/4 dev {dev}"
            )));
        }
        Some(lab)
    }

    /// Moves the calling thread (and the DDS threads it starts) into
    /// namespace `ns`.
    pub fn enter(&self, ns: &str) {
        let f = std::fs::File::open(format!("/run/netns/{ns}")).expect("netns file");
        use std::os::fd::AsRawFd;
        // SAFETY: a valid namespace fd; affects this thread only.
        let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
    }

    /// Runs the ROS 2 peer with `args` in `ns`; its stdout lines arrive on
    /// the channel.
    pub fn ros2(&self, ns: &str, domain: u32, args: &[&str]) -> (Peer, mpsc::Receiver<String>) {
        let py = python();
        let mut argv = vec![py.as_str(), PEER];
        argv.extend_from_slice(args);
        spawn(
            ns,
            &argv,
            &[
                ("ROS_DOMAIN_ID", domain.to_string()),
                ("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp".to_string()),
                // UDP only: Fast DDS's shared-memory transport leaves
                // segments in /dev/shm when a peer is killed (and Cyclone
                // does not speak it).
                ("FASTDDS_BUILTIN_TRANSPORTS", "UDPv4".to_string()),
            ],
        )
    }
}

/// A peer process, killed when the test ends (also when it fails).
pub struct Peer(Child);

impl Peer {
    /// Waits for the peer to exit.
    pub fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.wait()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `argv` in namespace `ns` with `env`; its stdout lines arrive on the
/// channel.
pub fn spawn(ns: &str, argv: &[&str], env: &[(&str, String)]) -> (Peer, mpsc::Receiver<String>) {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns]).args(argv);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn a peer");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (Peer(child), rx)
}

impl Drop for Lab {
    fn drop(&mut self) {
        sh(&format!(
            "ip netns del {} 2>/dev/null; ip netns del {} 2>/dev/null",
            self.a, self.b
        ));
    }
}

/// CDR of std_msgs/msg/String (little endian, encapsulation header).
pub fn string_cdr(s: &str) -> Vec<u8> {
    let mut w = ferry_idl::cdr::Writer::new();
    w.string(s);
    w.finish()
}

pub fn string_from_cdr(cdr: &[u8]) -> String {
    assert_eq!(&cdr[..4], &[0, 1, 0, 0], "little-endian plain CDR");
    ferry_idl::cdr::Reader::new(cdr)
        .and_then(|mut r| r.string("data"))
        .expect("a std_msgs/String")
}

/// What a listening peer got (its `got <data>` lines), once it said
/// `done` within `within` and exited.
pub fn heard(peer: &mut Peer, rx: &mpsc::Receiver<String>, within: Duration) -> Vec<String> {
    let lines = wait_for(rx, "done", within);
    let _ = peer.wait();
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("got ").map(str::to_string))
        .collect()
}

/// `<prefix> <i>` for every i in `range`: what a talker sends.
pub fn numbered(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix} {i}")).collect()
}

pub fn wait_for(rx: &mpsc::Receiver<String>, what: &str, within: Duration) -> Vec<String> {
    let end = Instant::now() + within;
    let mut lines = Vec::new();
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) => {
                let done = l.starts_with(what);
                lines.push(l);
                if done {
                    return lines;
                }
            }
            Err(_) => break,
        }
    }
    panic!("the ROS 2 peer never said `{what}` within {within:?}; it said {lines:?}");
}
