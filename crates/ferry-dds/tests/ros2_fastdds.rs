//! ferry-dds against a real ROS 2 node: rclpy of ROS 2 Jazzy with its
//! default RMW, rmw_fastrtps_cpp (Fast DDS 2.14), installed from PyPI by
//! `scripts/setup.sh` into its own virtualenv (`FERRY_ROS2_PYTHON`, default
//! `/opt/ferry-ros2/bin/python`). Both sides run in network namespaces of
//! their own (a veth pair between two; needs root, as CI is), so DDS's
//! multicast never leaves the test.

mod common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{string_cdr, string_from_cdr, wait_for, Lab};
use ferry_dds::{names, DdsQos, Participant};

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
                // ROS 2's graph is asked while the writer still exists.
                let shown = wait_for(&graph, "topic", Duration::from_secs(30));
                drop(w);
                (lines, shown)
            })
            .join()
            .unwrap()
        });
        let (got, shown) = got;
        let got: Vec<_> = got.iter().filter_map(|l| l.strip_prefix("got ")).collect();
        assert_eq!(
            got,
            common::numbered("ferry", 0..20),
            "same host: {same_host}"
        );
        assert!(
            shown
                .last()
                .is_some_and(|l| l == "topic /chatter std_msgs/msg/String publishers 1"),
            "{shown:?}"
        );
        drop((listener, graph_child));
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

            let (stay, _out) = lab_ref.ros2(&lab_ref.b, domain, &["stay", "20"]);
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
            drop(stay);
            assert!(names.iter().any(|n| n == "/ ros2_peer_stay"), "{names:?}");
        });
    });
}

/// A late joiner (two hosts): ferry writes 10 samples transient local
/// before any reader exists; a ROS 2 subscription (transient local) that
/// starts afterwards gets all 10 — the writer's history, not only its last.
#[test]
fn a_late_ros2_subscription_gets_the_transient_local_history() {
    let Some(lab) = Lab::new(9) else { return };
    let domain = 90;
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let pp = Participant::new(domain, b"enclave=/;").unwrap();
            let topic = pp
                .topic("rt/latched", "std_msgs::msg::dds_::String_")
                .unwrap();
            let qos = DdsQos {
                keep_last: Some(100),
                transient_local: true,
                ..DdsQos::default()
            };
            let w = pp.writer(&topic, &qos).unwrap();
            for i in 0..10 {
                w.write(&string_cdr(&format!("late {i}"))).unwrap();
            }
            let (mut listener, heard) = lab_ref.ros2(
                &lab_ref.b,
                domain,
                &["listen", "/latched", "10", "30", "transient_local"],
            );
            let got = common::heard(&mut listener, &heard, Duration::from_secs(40));
            assert_eq!(got, common::numbered("late", 0..10));
        });
    });
}
