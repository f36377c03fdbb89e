//! An 8 MB message from a ferry node to a ROS 2 node (rclpy on Fast DDS)
//! over DDS, across a link that drops IP fragments: with `ferry tune`'s
//! 1472 B profile in `CYCLONEDDS_URI` — the variable rmw_cyclonedds reads,
//! and ferry's `[ros2]` path too — no datagram is an IP fragment and the
//! message arrives whole; with Cyclone's default (14,720 B datagrams)
//! every sample goes out as IP fragments, which this link drops (Cyclone
//! then repairs them with smaller retransmits: the data crosses twice).
//! Its own binary: it sets `CYCLONEDDS_URI` for the process.
#![cfg(feature = "ros2")]

#[path = "../../ferry-dds/tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{sh, Lab};
use ferry::config::ros2::Ros2Config;
use ferry::msgs::std_msgs;
use ferry::{Config, DiscoveryRange, Node, Qos};

/// `ferry tune`'s step 1 in Cyclone's XML: no RTPS message above 1472 B
/// (1500 B MTU − 28 B IP/UDP), fragments that fit it.
const PROFILE: &str =
    "<General><MaxMessageSize>1472B</MaxMessageSize><FragmentSize>1400B</FragmentSize></General>";

/// Publishes `size` bytes of `x` every 2 s until the ROS 2 listener (in
/// `ns`, `domain`) hears one, at most `within`; what it heard.
fn send_large(lab: &Lab, domain: u16, size: usize, within: Duration) -> Vec<String> {
    let node = Node::builder()
        .name("big_talker")
        .config(Config {
            domain_id: domain,
            discovery: DiscoveryRange::Off,
            shared_memory: false,
            ros2: Some(Ros2Config::default()),
            ..Config::default()
        })
        .build()
        .unwrap();
    let publisher = node
        .publisher::<std_msgs::String>("/big")
        .qos(Qos::default().keep_last(2))
        .build()
        .unwrap();
    let (listener, said) = lab.ros2(&lab.b, domain.into(), &["sizes", "/big", "1", "60"]);
    common::wait_for(&said, "ready", Duration::from_secs(30));
    assert!(publisher.wait_for_subscribers(1, Duration::from_secs(30)));
    let data = "x".repeat(size);
    let end = Instant::now() + within;
    let mut lines = Vec::new();
    while Instant::now() < end && !lines.iter().any(|l: &String| l.starts_with("got ")) {
        publisher
            .publish(std_msgs::String { data: data.clone() })
            .unwrap();
        let step = Instant::now() + Duration::from_secs(2);
        while let Some(left) = step.checked_duration_since(Instant::now()) {
            match said.recv_timeout(left) {
                Ok(l) => lines.push(l),
                Err(_) => break,
            }
        }
    }
    drop(listener); // killed
    lines
}

#[test]
fn an_8_mb_message_crosses_a_fragment_dropping_link_with_the_1472_profile() {
    let Some(lab) = Lab::new(21) else { return };
    // The ROS 2 host drops IP fragments before reassembly, and counts them.
    assert!(sh(&format!(
        "ip netns exec {} nft -f - <<'EOF'
table ip nofrag {{
  chain pre {{
    type filter hook prerouting priority -500;
    ip frag-off & 0x3fff != 0 counter drop
  }}
}}
EOF",
        lab.b
    )));
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            std::env::remove_var("CYCLONEDDS_URI");
            // Cyclone's default: a 1 MB message goes out as IP fragments.
            send_large(lab_ref, 97, 1 << 20, Duration::from_secs(10));
            std::thread::sleep(Duration::from_secs(1));
            let before = dropped_fragments(&lab_ref.b);
            assert!(
                before > 100,
                "Cyclone's default sent {before} IP fragments (the check cannot fail?)"
            );
            // The profile (another domain: a domain reads the variable
            // once, when this process creates it).
            std::env::set_var("CYCLONEDDS_URI", PROFILE);
            let heard = send_large(lab_ref, 99, 8 << 20, Duration::from_secs(40));
            assert!(
                heard
                    .iter()
                    .any(|l| l == &format!("got {} xxxxxxxx", 8 << 20)),
                "the 8 MB message did not arrive with the 1472 B profile: {heard:?}"
            );
            let after = dropped_fragments(&lab_ref.b);
            assert_eq!(after, before, "IP fragments sent with the 1472 B profile");
        })
        .join()
        .unwrap();
    });
}

/// IP fragments dropped so far on the ROS 2 host.
fn dropped_fragments(ns: &str) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "nft", "list", "table", "ip", "nofrag"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("counter packets ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no counter in {text}"))
}
