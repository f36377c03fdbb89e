//! `ferry node list`, `topic list` and `topic info -v` with `FERRY_ROS2=1`
//! show the ROS 2 nodes and endpoints on DDS (a real rclpy node on Fast DDS
//! in another network namespace), as `ros2 node list` lists ferry's.

#[path = "../../ferry-dds/tests/common/mod.rs"]
mod dds;

use std::process::Command;
use std::time::{Duration, Instant};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// Runs `ferry ARGS` in `ns` with the ROS 2 path on until its output has
/// a line `want` (within 30 s).
fn ferry_until(ns: &str, domain: u32, args: &[&str], want: &str) -> String {
    let end = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while Instant::now() < end {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, FERRY])
            .args(args)
            .args(["--spin-time", "2000"])
            .env("FERRY_ROS2", "1")
            .env("ROS_DOMAIN_ID", domain.to_string())
            .env("FERRY_SHM", "off")
            .output()
            .expect("run ferry");
        let err = String::from_utf8_lossy(&out.stderr);
        // `topic info` of a topic not yet discovered within the spin:
        // asked again.
        if !out.status.success() && err.contains("unknown topic") {
            continue;
        }
        assert!(out.status.success(), "ferry {args:?} failed: {err}");
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        if last.lines().any(|l| l.trim() == want) {
            return last;
        }
    }
    panic!("`ferry {args:?}` never printed `{want}`; last said:\n{last}");
}

#[test]
fn topic_list_and_info_show_ros2_topics() {
    let Some(lab) = dds::Lab::new(15) else { return };
    let domain = 91u32;
    // A talker waits (up to 20 s) for a subscription, then publishes for
    // 20 s: its publisher is there.
    let (_ros, _said) = lab.ros2(
        &lab.b,
        domain,
        &["talk", "/from_ros", "20", "1", "volatile"],
    );
    ferry_until(&lab.a, domain, &["topic", "list"], "/from_ros");
    let typed = ferry_until(
        &lab.a,
        domain,
        &["topic", "list", "-t"],
        "/from_ros [std_msgs/msg/String]",
    );
    assert!(!typed.contains("_ferry"), "{typed}");
    let info = ferry_until(
        &lab.a,
        domain,
        &["topic", "info", "-v", "/from_ros"],
        "node /ros2_peer_talk  ROS 2 node over DDS  type std_msgs/msg/String",
    );
    assert!(info.contains("Type: std_msgs/msg/String"), "{info}");
    assert!(info.contains("Publisher count: 1"), "{info}");
}

#[test]
fn node_list_shows_ros2_nodes() {
    let Some(lab) = dds::Lab::new(13) else { return };
    let domain = 91u32;
    let (_ros, _said) = lab.ros2(&lab.b, domain, &["stay", "40"]);
    let listed = ferry_until(&lab.a, domain, &["node", "list"], "/ros2_peer_stay");
    // ferry's own CLI node is hidden, as ROS 2 hides `_` nodes.
    assert!(!listed.contains("_ferry_cli"), "{listed}");
}
