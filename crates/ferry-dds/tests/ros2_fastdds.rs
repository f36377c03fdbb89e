//! ferry-dds against a real ROS 2 node: rclpy of ROS 2 Jazzy with its
//! default RMW, rmw_fastrtps_cpp (Fast DDS 2.14), installed from PyPI by
//! `scripts/setup.sh` into its own virtualenv (`FERRY_ROS2_PYTHON`, default
//! `/opt/ferry-ros2/bin/python`). Both sides run in network namespaces of
//! their own (a veth pair between two; needs root, as CI is), so DDS's
//! multicast never leaves the test.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferry_dds::{names, DdsQos, Participant};

const PEER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ros2_peer.py");

fn sh(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .status()
        .is_ok_and(|s| s.success())
}

fn python() -> String {
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
struct Lab {
    a: String,
    b: String,
}

impl Lab {
    fn new(net: u8) -> Option<Lab> {
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
    fn enter(&self, ns: &str) {
        let f = std::fs::File::open(format!("/run/netns/{ns}")).expect("netns file");
        use std::os::fd::AsRawFd;
        // SAFETY: a valid namespace fd; affects this thread only.
        let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
    }

    /// Runs the ROS 2 peer with `args` in `ns`; its stdout lines arrive on
    /// the channel.
    fn ros2(&self, ns: &str, domain: u32, args: &[&str]) -> (Child, mpsc::Receiver<String>) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, &python(), PEER])
            .args(args)
            .env("ROS_DOMAIN_ID", domain.to_string())
            .env("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the ROS 2 peer");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        (child, rx)
    }
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
fn string_cdr(s: &str) -> Vec<u8> {
    let mut v = vec![0, 1, 0, 0];
    v.extend_from_slice(&(s.len() as u32 + 1).to_le_bytes());
    v.extend_from_slice(s.as_bytes());
    v.push(0);
    v
}

fn string_from_cdr(cdr: &[u8]) -> String {
    assert_eq!(&cdr[..4], &[0, 1, 0, 0], "little-endian plain CDR");
    let n = u32::from_le_bytes(cdr[4..8].try_into().unwrap()) as usize;
    String::from_utf8(cdr[8..8 + n - 1].to_vec()).unwrap()
}

fn wait_for(rx: &mpsc::Receiver<String>, what: &str, within: Duration) -> Vec<String> {
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

/// A ferry-dds writer → a ROS 2 subscription (rclpy on Fast DDS), on one
/// host and across two: every sample arrives, in order, and ROS 2's graph
/// shows the topic with ROS 2's type name.
#[test]
fn a_ros2_node_on_fast_dds_receives_what_ferry_writes() {
    for (net, same_host) in [(1u8, true), (2, false)] {
        let Some(lab) = Lab::new(net) else { return };
        let domain = 80 + u32::from(net);
        let ros_ns = if same_host { &lab.a } else { &lab.b };
        let (listener, rx) = lab.ros2(ros_ns, domain, &["listen", "/chatter", "20", "30"]);
        wait_for(&rx, "ready", Duration::from_secs(20));
        let (graph_child, graph) = lab.ros2(ros_ns, domain, &["graph", "/chatter", "30"]);

        let lab_ref = &lab;
        let got = std::thread::scope(|s| {
            s.spawn(move || {
                lab_ref.enter(&lab_ref.a);
                let pp = Participant::new(domain, b"enclave=/;").unwrap();
                let topic = pp
                    .topic(
                        &names::topic("/chatter").unwrap(),
                        &names::dds_type("std_msgs/msg/String").unwrap(),
                    )
                    .unwrap();
                let qos = DdsQos {
                    keep_last: Some(100),
                    ..DdsQos::default()
                };
                let w = pp.writer(&topic, &qos).unwrap();
                let end = Instant::now() + Duration::from_secs(20);
                while w.matched().unwrap() == 0 && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(20));
                }
                assert!(
                    w.matched().unwrap() >= 1,
                    "the ROS 2 subscription never matched"
                );
                for i in 0..20 {
                    w.write(&string_cdr(&format!("ferry {i}"))).unwrap();
                    std::thread::sleep(Duration::from_millis(20));
                }
                let lines = wait_for(&rx, "done", Duration::from_secs(30));
                drop(w);
                lines
            })
            .join()
            .unwrap()
        });
        let got: Vec<_> = got.iter().filter_map(|l| l.strip_prefix("got ")).collect();
        let want: Vec<_> = (0..20).map(|i| format!("ferry {i}")).collect();
        assert_eq!(got, want, "same host: {same_host}");
        let shown = wait_for(&graph, "topic", Duration::from_secs(30));
        assert!(
            shown
                .last()
                .is_some_and(|l| l == "topic /chatter std_msgs/msg/String"),
            "{shown:?}"
        );
        for mut c in [listener, graph_child] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A ROS 2 publisher (rclpy on Fast DDS) → a ferry-dds reader, on one host
/// and across two. Transient local: every sample arrives, in order (the
/// late-joining reader gets the writer's history). Volatile: from the first
/// sample the reader gets, every later one arrives in order (what a writer
/// sent before the reader had matched it is, by DDS's rules, not for that
/// reader). The writer's discovery data carries ROS 2 Jazzy's type hash.
#[test]
fn ferry_reads_what_a_ros2_node_on_fast_dds_publishes() {
    for (net, same_host, durability) in [
        (3u8, true, "transient_local"),
        (4, false, "volatile"),
        (5, true, "volatile"),
        (6, false, "transient_local"),
    ] {
        let Some(lab) = Lab::new(net) else { return };
        let domain = 80 + u32::from(net);
        let ros_ns = if same_host { &lab.a } else { &lab.b };
        let lab_ref = &lab;
        let (samples, user_data) = std::thread::scope(|s| {
            s.spawn(move || {
                lab_ref.enter(&lab_ref.a);
                let pp = Participant::new(domain, b"enclave=/;").unwrap();
                let topic = pp
                    .topic("rt/chatter", "std_msgs::msg::dds_::String_")
                    .unwrap();
                let (tx, rx) = mpsc::channel();
                let qos = DdsQos {
                    keep_last: Some(100),
                    transient_local: durability == "transient_local",
                    ..DdsQos::default()
                };
                let r = pp
                    .reader(&topic, &qos, move |s| {
                        let _ = tx.send(s);
                    })
                    .unwrap();
                let (mut talker, out) = lab_ref.ros2(
                    ros_ns,
                    domain,
                    &["talk", "/chatter", "40", "20", durability],
                );
                // The writer's discovery data, while it is matched.
                let Ok(first) = rx.recv_timeout(Duration::from_secs(40)) else {
                    let said: Vec<_> = out.try_iter().collect();
                    panic!(
                        "same host {same_host}: no sample from the ROS 2 publisher within 40 s \
                         ({} writer(s) matched); it said {said:?}",
                        r.matched().unwrap()
                    );
                };
                let user_data = r.publication(first.publication).unwrap().user_data;
                wait_for(&out, "done", Duration::from_secs(40));
                let _ = talker.wait();
                let samples: Vec<_> = std::iter::once(first).chain(rx.try_iter()).collect();
                (samples, Some(user_data))
            })
            .join()
            .unwrap()
        });
        let got: Vec<_> = samples.iter().map(|s| string_from_cdr(&s.cdr)).collect();
        let first = if durability == "volatile" {
            40 - got.len().min(40)
        } else {
            0
        };
        let want: Vec<_> = (first..40).map(|i| format!("hello {i}")).collect();
        assert_eq!(got, want, "same host: {same_host}, {durability}");
        assert!(
            got.len() >= 30,
            "{durability}: only the last {} of 40 arrived",
            got.len()
        );
        let user_data = String::from_utf8(user_data.unwrap()).unwrap();
        assert!(
            user_data.contains(
                "typehash=RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18;"
            ),
            "{user_data}"
        );
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        assert!(samples
            .iter()
            .all(|s| (now_ns - s.source_timestamp_ns) < 60_000_000_000));
    }
}

/// ROS 2's node graph both ways (two hosts): ROS 2 sees ferry's node name
/// and, from the writer GUIDs ferry announces, that node's publisher; ferry
/// sees the ROS 2 node's name.
#[test]
fn node_names_are_seen_both_ways() {
    let Some(lab) = Lab::new(7) else { return };
    let domain = 87;
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let pp = Participant::new(domain, b"enclave=/;").unwrap();
            let graph = ferry_dds::Graph::new(&pp).unwrap();
            let topic = pp
                .topic("rt/chatter", "std_msgs::msg::dds_::String_")
                .unwrap();
            let w = pp.writer(&topic, &DdsQos::default()).unwrap();
            graph
                .announce(vec![ferry_dds::graph::NodeEntities {
                    namespace: "/".into(),
                    name: "ferry_talker".into(),
                    readers: vec![],
                    writers: vec![w.guid().unwrap()],
                }])
                .unwrap();

            let (mut looker, seen) =
                lab_ref.ros2(&lab_ref.b, domain, &["node", "ferry_talker", "30"]);
            let lines = wait_for(&seen, "done", Duration::from_secs(40));
            let _ = looker.wait();
            assert!(
                lines.iter().any(|l| l == "node / ferry_talker"),
                "{lines:?}"
            );
            assert!(
                lines
                    .iter()
                    .any(|l| l == "pub /chatter std_msgs/msg/String"),
                "{lines:?}"
            );

            let (mut stay, _out) = lab_ref.ros2(&lab_ref.b, domain, &["stay", "20"]);
            let end = Instant::now() + Duration::from_secs(30);
            let mut names = Vec::new();
            while Instant::now() < end {
                names = graph
                    .participants()
                    .into_iter()
                    .flat_map(|p| p.nodes)
                    .map(|n| format!("{} {}", n.namespace, n.name))
                    .collect();
                if names.iter().any(|n| n == "/ ros2_peer_stay") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = stay.kill();
            let _ = stay.wait();
            assert!(names.iter().any(|n| n == "/ ros2_peer_stay"), "{names:?}");
        });
    });
}
