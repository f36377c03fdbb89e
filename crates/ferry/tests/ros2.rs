//! Ferry nodes with `[ros2]` and real ROS 2 nodes (rclpy of ROS 2 Jazzy on
//! rmw_fastrtps_cpp, from PyPI: `scripts/setup.sh`), in network namespaces:
//! ferry's publishers and subscribers are DDS endpoints ROS 2 matches, with
//! no code of the application's for it, and ferry runtimes never meet each
//! other over DDS.
#![cfg(feature = "ros2")]

#[path = "../../ferry-dds/tests/common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{heard, wait_for, Lab};
use ferry::config::ros2::Ros2Config;
use ferry::msgs::std_msgs;
use ferry::{Config, DiscoveryRange, Node, Qos, TransportKind};

// Every test here uses a DDS domain of its own: a process creates a domain
// once, in the network namespace of the thread that first joins it, so two
// tests sharing one would share one namespace's sockets.
fn ros2_config(domain: u16) -> Config {
    Config {
        domain_id: domain,
        // Ferry's own discovery off: whatever arrives came over DDS.
        discovery: DiscoveryRange::Off,
        shared_memory: false,
        ros2: Some(Ros2Config::default()),
        ..Config::default()
    }
}

/// Nodes `a` and `b` of two runtimes with `[ros2]` in `domain` that meet
/// over ferry's own discovery (this host).
fn two_runtimes_meeting(domain: u16) -> (Node, Node) {
    let node = |name, lease_ms| {
        Node::builder()
            .name(name)
            .config(Config {
                discovery: DiscoveryRange::Localhost,
                lease_ms,
                ..ros2_config(domain)
            })
            .build()
            .unwrap()
    };
    (node("a", 3000), node("b", 3100))
}

/// Runs the peer that speaks as rmw_cyclonedds (`rmw_cyclonedds_client.py`
/// with `args`, on `$PYTHON` or `python3`) in namespace `ns`.
fn rmw_cyclonedds(ns: &str, args: &[&str]) -> (common::Peer, std::sync::mpsc::Receiver<String>) {
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ferry-dds/tests/rmw_cyclonedds_client.py"
    );
    let argv: Vec<&str> = [py.as_str(), script]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    common::spawn(ns, &argv, &[])
}

/// Whether `cond` holds within `within` (checked every 50 ms).
fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// Whether `got` is `prefix i, prefix i+1, …` with no gap or repeat.
fn consecutive(got: &[String], prefix: &str) -> bool {
    let n: Vec<u64> = got
        .iter()
        .filter_map(|s| s.strip_prefix(prefix)?.trim().parse().ok())
        .collect();
    n.len() == got.len() && n.windows(2).all(|w| w[1] == w[0] + 1)
}

/// Publishes (`publish(i)`, every 50 ms, at most 40 s) until the ROS 2
/// listener is done; what it heard.
fn publish_until_heard(
    listener: &mut common::Peer,
    said: &std::sync::mpsc::Receiver<String>,
    mut publish: impl FnMut(u64),
) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs(40);
    let mut lines = Vec::new();
    let mut i = 0;
    while !lines.iter().any(|l: &String| l == "done") && Instant::now() < end {
        publish(i);
        i += 1;
        std::thread::sleep(Duration::from_millis(50));
        lines.extend(said.try_iter());
    }
    if !lines.iter().any(|l| l == "done") {
        let rest = heard(listener, said, Duration::from_secs(5));
        lines.extend(rest.into_iter().map(|g| format!("got {g}")));
    }
    let _ = listener.wait();
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("got ").map(str::to_string))
        .collect()
}

/// Two hosts: ferry's publisher → a ROS 2 subscription, a ROS 2 publisher
/// → ferry's subscriber, and each side's node graph names the other's
/// nodes. The application code is plain ferry: `[ros2]` does the rest.
#[test]
fn a_ferry_node_and_a_ros2_node_exchange_messages_and_names() {
    let Some(lab) = Lab::new(10) else { return };
    let domain = 91u16;
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let node = Node::builder()
                .name("ferry_talker")
                .namespace("/robot")
                .config(ros2_config(domain))
                .build()
                .unwrap();
            let publisher = node
                .publisher::<std_msgs::String>("/chatter")
                .qos(Qos::default())
                .build()
                .unwrap();
            let sub = node
                .subscriber::<std_msgs::String>("/ros_chatter")
                .qos(Qos::default().keep_last(100))
                .build()
                .unwrap();

            assert_eq!(publisher.subscriber_count(), 0, "no ROS 2 node yet");
            // ferry → ROS 2: publish until the listener has 20.
            let (mut listener, said) = lab_ref.ros2(
                &lab_ref.b,
                domain.into(),
                &["listen", "/chatter", "20", "40"],
            );
            wait_for(&said, "ready", Duration::from_secs(30));
            // The ROS 2 subscription counts as a subscriber of ferry's.
            assert!(publisher.wait_for_subscribers(1, Duration::from_secs(30)));
            // Ferry's graph shows the ROS 2 subscription and its node.
            let seen = Instant::now() + Duration::from_secs(20);
            let mut endpoints = Vec::new();
            while Instant::now() < seen {
                endpoints = node.graph().ros2_endpoints;
                if endpoints.iter().any(|e| e.node == "/ros2_peer_listen") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            assert!(
                endpoints.contains(&ferry::Ros2Endpoint {
                    name: "/chatter".into(),
                    kind: ferry::EndpointKind::Subscriber,
                    type_name: "std_msgs/msg/String".into(),
                    node: "/ros2_peer_listen".into(),
                    via: TransportKind::Dds,
                }),
                "{endpoints:?}"
            );
            assert!(
                !endpoints.iter().any(|e| e.node.contains("ferry_talker")),
                "ferry's own endpoints are not ROS 2's: {endpoints:?}"
            );
            let got = publish_until_heard(&mut listener, &said, |i| {
                publisher
                    .publish(std_msgs::String {
                        data: format!("ferry {i}"),
                    })
                    .unwrap()
            });
            assert_eq!(got.len(), 20, "the ROS 2 subscription got {got:?}");
            assert!(consecutive(&got, "ferry "), "gaps or repeats: {got:?}");

            // ROS 2 → ferry: the talker waits for ferry's DDS reader.
            let (mut talker, out) = lab_ref.ros2(
                &lab_ref.b,
                domain.into(),
                &["talk", "/ros_chatter", "40", "20", "volatile"],
            );
            wait_for(&out, "done", Duration::from_secs(60));
            let _ = talker.wait();
            let mut samples = Vec::new();
            while let Ok(s) = sub.recv_timeout(Duration::from_millis(500)) {
                samples.push(s);
            }
            let texts: Vec<String> = samples.iter().map(|s| s.data.clone()).collect();
            assert!(
                texts.len() >= 30 && texts.last().map(String::as_str) == Some("hello 39"),
                "ferry got {texts:?}"
            );
            assert!(consecutive(&texts, "hello "), "gaps or repeats: {texts:?}");
            assert!(samples
                .iter()
                .all(|s| s.info.transport == TransportKind::Dds));

            // The graph both ways: ROS 2 names ferry's node and its
            // publisher; ferry names a ROS 2 node (one that stays: the
            // asker leaves as soon as it has its answer).
            let (_stayer, _) = lab_ref.ros2(&lab_ref.b, domain.into(), &["stay", "40"]);
            let (mut asker, out) =
                lab_ref.ros2(&lab_ref.b, domain.into(), &["node", "ferry_talker", "30"]);
            let ferry_seen = Instant::now() + Duration::from_secs(30);
            let mut ros_nodes = Vec::new();
            while Instant::now() < ferry_seen {
                ros_nodes = node.graph().ros2_nodes;
                if ros_nodes.iter().any(|n| n.name == "ros2_peer_stay") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let lines = wait_for(&out, "done", Duration::from_secs(40));
            let _ = asker.wait();
            assert!(
                lines.iter().any(|l| l == "node /robot ferry_talker"),
                "ROS 2 did not list ferry's node: {lines:?}"
            );
            assert!(
                lines
                    .iter()
                    .any(|l| l == "pub /chatter std_msgs/msg/String"),
                "ROS 2 did not list ferry's publisher: {lines:?}"
            );
            assert!(
                ros_nodes
                    .iter()
                    .any(|n| n.fully_qualified_name() == "/ros2_peer_stay"),
                "ferry's graph: {ros_nodes:?}"
            );
            drop(publisher);
        })
        .join()
        .unwrap();
    });
}

/// Two ferry runtimes with `[ros2]` and ferry's own discovery off do not
/// match each other over DDS (ferry's endpoints share a wildcard
/// partition), while a ROS 2 node beside them gets the same samples; with
/// ferry's discovery on they meet over ferry's own path, each sample once.
#[test]
fn ferry_runtimes_never_meet_over_dds() {
    let Some(lab) = Lab::new(11) else { return };
    let domain = 100u16;
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let a = Node::builder()
                .name("a")
                .config(ros2_config(domain))
                .build()
                .unwrap();
            // Another runtime: another config (any field differs).
            let b = Node::builder()
                .name("b")
                .config(Config {
                    lease_ms: 3100,
                    ..ros2_config(domain)
                })
                .build()
                .unwrap();
            assert_ne!(a.participant(), b.participant());
            let publisher = a.publisher::<std_msgs::String>("/both").build().unwrap();
            let sub = b
                .subscriber::<std_msgs::String>("/both")
                .qos(Qos::default().keep_last(100))
                .build()
                .unwrap();
            let (mut listener, said) =
                lab_ref.ros2(&lab_ref.a, domain.into(), &["listen", "/both", "10", "40"]);
            wait_for(&said, "ready", Duration::from_secs(30));
            let ros_got = publish_until_heard(&mut listener, &said, |i| {
                publisher
                    .publish(std_msgs::String {
                        data: format!("x {i}"),
                    })
                    .unwrap()
            });
            assert_eq!(ros_got.len(), 10, "the ROS 2 node got {ros_got:?}");
            let to_dds: u64 = publisher
                .connections()
                .iter()
                .filter(|c| c.transport == TransportKind::Dds)
                .map(|c| c.stats.messages)
                .sum();
            assert!(to_dds >= 10, "{to_dds} sample(s) went to DDS");
            // Meanwhile the other ferry runtime heard nothing over DDS.
            std::thread::sleep(Duration::from_millis(500));
            let leaked: Vec<_> = std::iter::from_fn(|| sub.try_recv()).collect();
            assert!(
                leaked.is_empty(),
                "ferry runtime b got {} sample(s) over {:?} with ferry's discovery off",
                leaked.len(),
                leaked.first().map(|s| s.info.transport)
            );
        })
        .join()
        .unwrap();
    });

    // Discovery on (this host): the runtimes meet over ferry's own path
    // and each sample arrives once.
    let Some(lab) = Lab::new(12) else { return };
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let (a, b) = two_runtimes_meeting(domain);
            let publisher = a.publisher::<std_msgs::String>("/once").build().unwrap();
            let sub = b
                .subscriber::<std_msgs::String>("/once")
                .qos(Qos::default().keep_last(100))
                .build()
                .unwrap();
            assert!(publisher.wait_for_subscribers(1, Duration::from_secs(10)));
            for i in 0..50 {
                publisher
                    .publish(std_msgs::String {
                        data: format!("y {i}"),
                    })
                    .unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            let mut got = Vec::new();
            while let Ok(s) = sub.recv_timeout(Duration::from_millis(1000)) {
                got.push(s);
            }
            let texts: Vec<String> = got.iter().map(|s| s.data.clone()).collect();
            let unique: HashSet<&String> = texts.iter().collect();
            assert_eq!(texts.len(), 50, "{texts:?}");
            assert_eq!(unique.len(), 50, "duplicates: {texts:?}");
            assert!(got.iter().all(|s| s.info.transport != TransportKind::Dds));
            // Another ferry runtime's DDS reader is not a subscriber.
            assert_eq!(publisher.subscriber_count(), 1);
            // With no ROS 2 reader, nothing went to DDS at all.
            let dds: Vec<_> = publisher
                .connections()
                .into_iter()
                .filter(|c| c.transport == TransportKind::Dds)
                .collect();
            assert_eq!(dds.len(), 1, "the DDS link is listed");
            assert_eq!(dds[0].stats.messages, 0, "{:?}", dds[0]);
        })
        .join()
        .unwrap();
    });
}

/// A ROS 2 client as rmw_cyclonedds puts it on the wire (request header
/// {client id, sequence} after the encapsulation, `clientid=` in the user
/// data; a Cyclone DDS peer from PyPI, in another namespace) calls a plain
/// ferry service: every call answered with its own header.
#[test]
fn an_rmw_cyclonedds_client_calls_a_ferry_service() {
    use ferry::msgs::example_interfaces::srv::{AddTwoIntsRequest, AddTwoIntsResponse};
    let Some(lab) = Lab::new(16) else { return };
    let domain = 92u16;
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let node = Node::builder()
                .name("adder")
                .config(ros2_config(domain))
                .build()
                .unwrap();
            let _service = node
                .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/add_two_ints", |r| {
                    AddTwoIntsResponse { sum: r.a + r.b }
                })
                .build()
                .unwrap();
            let (mut client, said) = rmw_cyclonedds(
                &lab_ref.b,
                &["call", "/add_two_ints", "5", &domain.to_string()],
            );
            let lines = wait_for(&said, "done", Duration::from_secs(60));
            let _ = client.wait();
            let sums: Vec<&str> = lines
                .iter()
                .filter_map(|l| l.strip_prefix("sum "))
                .collect();
            assert_eq!(sums, ["100", "101", "102", "103", "104"], "{lines:?}");
            assert!(lines.iter().any(|l| l == "stray 0"), "{lines:?}");
        })
        .join()
        .unwrap();
    });
}

/// A plain ferry client calls a ROS 2 service as rmw_cyclonedds serves it
/// (a Cyclone DDS peer from PyPI putting rmw_cyclonedds's samples on the
/// wire, in another namespace): `wait_for_service` sees it, every call is
/// answered; with no service, a call says so instead of timing out blind.
#[test]
fn a_ferry_client_calls_an_rmw_cyclonedds_service() {
    use ferry::msgs::example_interfaces::srv::{AddTwoIntsRequest, AddTwoIntsResponse};
    let Some(lab) = Lab::new(17) else { return };
    let domain = 93u16;
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let node = Node::builder()
                .name("asker")
                .config(ros2_config(domain))
                .build()
                .unwrap();
            let client = node
                .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/ros_adder")
                .build()
                .unwrap();
            assert!(!client.service_is_ready(), "no service yet");
            let (server, said) = rmw_cyclonedds(
                &lab_ref.b,
                &["serve", "/ros_adder", "30", &domain.to_string()],
            );
            wait_for(&said, "ready", Duration::from_secs(30));
            assert!(client.wait_for_service(Duration::from_secs(20)));
            // The service's side of the match (discovery is per side).
            std::thread::sleep(Duration::from_millis(500));
            for i in 0..5i64 {
                let r = client
                    .call(AddTwoIntsRequest { a: i, b: 1000 }, Duration::from_secs(5))
                    .unwrap_or_else(|e| panic!("call {i}: {e}"));
                assert_eq!(r.sum, 1000 + i);
            }
            let dds: Vec<_> = client
                .connections()
                .into_iter()
                .filter(|c| c.transport == TransportKind::Dds)
                .collect();
            assert_eq!(dds.len(), 1);
            assert_eq!(dds[0].stats.messages, 5, "{:?}", dds[0]);
            drop(server);

            // A ROS 2 service that takes a call, never answers (ROS 2 has
            // no error replies) and leaves: the call fails as soon as it
            // has gone (ServiceGone), not at its 60 s timeout.
            assert!(
                wait_until(Duration::from_secs(20), || !client.service_is_ready()),
                "the killed service is still matched"
            );
            let (_mute, mute_said) = rmw_cyclonedds(
                &lab_ref.b,
                &["serve", "/ros_adder", "4", &domain.to_string(), "mute"],
            );
            wait_for(&mute_said, "ready", Duration::from_secs(30));
            assert!(client.wait_for_service(Duration::from_secs(20)));
            std::thread::sleep(Duration::from_millis(500));
            let asked = Instant::now();
            let r = client.call(AddTwoIntsRequest { a: 1, b: 2 }, Duration::from_secs(60));
            assert!(
                matches!(r, Err(ferry::CallError::ServiceGone { .. })),
                "{r:?} after {:?}",
                asked.elapsed()
            );
            assert!(
                asked.elapsed() < Duration::from_secs(20),
                "{:?}",
                asked.elapsed()
            );
            let said = wait_for(&mute_said, "done", Duration::from_secs(10));
            assert!(said.iter().any(|l| l.starts_with("taken ")), "{said:?}");
        })
        .join()
        .unwrap();
    });
}

/// `discovery_range = localhost` (ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST)
/// as rmw_cyclonedds sets it: a ROS 2 node on this host is found, one on
/// another host is not.
#[test]
fn localhost_range_keeps_other_hosts_out() {
    use ferry::config::ros2::DiscoveryRange as Range;
    let Some(lab) = Lab::new(18) else { return };
    let domain = 94u16;
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let node = Node::builder()
                .name("local_only")
                .config(Config {
                    ros2: Some(Ros2Config {
                        discovery_range: Range::Localhost,
                        ..Ros2Config::default()
                    }),
                    ..ros2_config(domain)
                })
                .build()
                .unwrap();
            let sub = node
                .subscriber::<std_msgs::String>("/near_far")
                .qos(Qos::default().keep_last(100))
                .build()
                .unwrap();
            // Another host: its talker never matches ferry's reader.
            let (mut far, far_out) = lab_ref.ros2(
                &lab_ref.b,
                domain.into(),
                &["talk", "/near_far", "3", "10", "volatile"],
            );
            // This host: found over unicast to localhost.
            let (mut near, near_out) = lab_ref.ros2(
                &lab_ref.a,
                domain.into(),
                &["talk", "/near_far", "20", "10", "volatile"],
            );
            let near_lines = wait_for(&near_out, "done", Duration::from_secs(60));
            let far_lines = wait_for(&far_out, "done", Duration::from_secs(60));
            let _ = (near.wait(), far.wait());
            assert!(
                near_lines.iter().any(|l| l == "matched 1"),
                "the ROS 2 node on this host did not match ferry: {near_lines:?}"
            );
            assert!(
                far_lines.iter().any(|l| l == "matched 0"),
                "a ROS 2 node on another host matched ferry: {far_lines:?}"
            );
            let got: Vec<String> = std::iter::from_fn(|| sub.try_recv())
                .map(|s| s.data.clone())
                .collect();
            // Volatile: what the talker sent before ferry's side of the
            // match (slower over unicast discovery) is not for ferry; from
            // then on every sample.
            assert!(
                got.last().map(String::as_str) == Some("hello 19") && consecutive(&got, "hello "),
                "from this host: {got:?}"
            );
        })
        .join()
        .unwrap();
    });
}

/// The next `Ros2IncompatibleQos` event of a port within 30 s.
fn next_conflict(
    mut next: impl FnMut(Duration) -> Option<ferry::PortEvent>,
) -> (String, Vec<String>) {
    let end = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match next(left) {
            Some(ferry::PortEvent::Ros2IncompatibleQos { policy, nodes, .. }) => {
                return (policy, nodes)
            }
            Some(other) => seen.push(other),
            None => break,
        }
    }
    panic!("no Ros2IncompatibleQos event within 30 s; events: {seen:?}");
}

/// A QoS conflict between a ferry port and a ROS 2 endpoint is reported on
/// both sides, naming the policy: ferry's best-effort publisher and a
/// reliable ROS 2 subscription (reliability); ferry's transient-local
/// subscriber and a volatile ROS 2 publisher (durability). Nothing
/// crosses, and ferry's event names the ROS 2 node.
#[test]
fn qos_conflicts_with_ros2_nodes_are_reported_on_both_sides() {
    let Some(lab) = Lab::new(19) else { return };
    let domain = 95u16;
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let node = Node::builder()
                .name("picky")
                .config(ros2_config(domain))
                .build()
                .unwrap();
            let publisher = node
                .publisher::<std_msgs::String>("/lossy")
                .qos(Qos::default().best_effort())
                .build()
                .unwrap();
            let sub = node
                .subscriber::<std_msgs::String>("/durable")
                .qos(Qos::default().transient_local())
                .build()
                .unwrap();
            let (_ros_sub, sub_said) =
                lab_ref.ros2(&lab_ref.b, domain.into(), &["qos", "/lossy", "sub", "40"]);
            let (_ros_pub, pub_said) =
                lab_ref.ros2(&lab_ref.b, domain.into(), &["qos", "/durable", "pub", "40"]);

            // Ferry's side.
            let (policy, nodes) = next_conflict(|t| publisher.next_event(t));
            assert_eq!(policy, "reliability");
            assert_eq!(nodes, ["/ros2_peer_qos"]);
            let (policy, nodes) = next_conflict(|t| sub.next_event(t));
            assert_eq!(policy, "durability");
            assert_eq!(nodes, ["/ros2_peer_qos"]);
            assert_eq!(publisher.subscriber_count(), 0, "not matched");
            // The ROS 2 side (rclpy's incompatible-QoS event).
            let said = wait_for(&sub_said, "incompatible", Duration::from_secs(30));
            assert_eq!(
                said.last().unwrap(),
                "incompatible RMW_QOS_POLICY_RELIABILITY"
            );
            let said = wait_for(&pub_said, "incompatible", Duration::from_secs(30));
            assert_eq!(
                said.last().unwrap(),
                "incompatible RMW_QOS_POLICY_DURABILITY"
            );
        })
        .join()
        .unwrap();
    });
}

/// Sends `count` garbage datagrams from the calling thread's namespace to
/// every UDP port open in namespace `target` (`addr`), and to Cyclone's
/// discovery and data multicast ports of `domain`: random bytes, and RTPS
/// headers followed by random submessages (DATA, DATA_FRAG, HEARTBEAT,
/// ACKNACK, INFO_TS, INFO_DST, GAP) with random lengths and contents.
fn flood(target: &str, addr: &str, domain: u16, count: usize) -> usize {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", target, "ss", "-Huln"])
        .output()
        .expect("ss");
    let mut to: Vec<std::net::SocketAddr> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .nth(3)?
                .rsplit(':')
                .next()?
                .parse()
                .ok()
        })
        .map(|port: u16| format!("{addr}:{port}").parse().unwrap())
        .collect();
    let base = 7400 + 250 * domain;
    to.push(format!("239.255.0.1:{base}").parse().unwrap());
    to.push(format!("239.255.0.1:{}", base + 1).parse().unwrap());
    to.sort();
    to.dedup();
    let sock = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    sock.set_multicast_loop_v4(false).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut sent = 0;
    for i in 0..count {
        let len = 1 + (next() % 1400) as usize;
        let mut d: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if i % 2 == 0 {
            // RTPS 2.3, a made-up vendor and GUID prefix, then submessages.
            let mut rtps = b"RTPS\x02\x03\x01\x99".to_vec();
            rtps.extend((0..12).map(|_| next() as u8));
            const IDS: [u8; 7] = [0x15, 0x16, 0x07, 0x06, 0x09, 0x0e, 0x08];
            while rtps.len() < len + 20 {
                let body = (next() % 200) as u16;
                rtps.push(IDS[(next() % 7) as usize]);
                rtps.push((next() % 4) as u8); // flags: endianness, inline QoS
                                               // A declared length that is sometimes a lie.
                let declared = if next() % 5 == 0 { next() as u16 } else { body };
                rtps.extend_from_slice(&declared.to_le_bytes());
                rtps.extend((0..body).map(|_| next() as u8));
            }
            d = rtps;
        }
        if sock.send_to(&d, to[i % to.len()]).is_ok() {
            sent += 1;
        }
        if i % 200 == 199 {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    sent
}

/// Garbage datagrams at every UDP port of a ferry process with `[ros2]`
/// (DDS's and ferry's) disturb neither ferry's own path nor the DDS path:
/// 200 reliable samples between two ferry runtimes all arrive in order
/// during the flood, a ROS 2 listener still gets its samples, and the
/// process stays up.
#[test]
fn garbage_at_the_dds_ports_disturbs_no_path() {
    let Some(lab) = Lab::new(20) else { return };
    let domain = 96u16;
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let (a, b) = two_runtimes_meeting(domain);
            let publisher = a
                .publisher::<std_msgs::String>("/steady")
                .qos(Qos::default().keep_all())
                .build()
                .unwrap();
            let sub = b
                .subscriber::<std_msgs::String>("/steady")
                .qos(Qos::default().keep_all())
                .build()
                .unwrap();
            assert!(publisher.wait_for_subscribers(1, Duration::from_secs(10)));
            let (mut listener, said) = lab_ref.ros2(
                &lab_ref.b,
                domain.into(),
                &["listen", "/steady", "20", "60"],
            );
            wait_for(&said, "ready", Duration::from_secs(30));
            assert!(publisher.wait_for_subscribers(2, Duration::from_secs(30)));

            let attacker = s.spawn(move || {
                lab_ref.enter(&lab_ref.b);
                flood(&lab_ref.a, "10.79.20.1", domain, 20_000)
            });
            let mut got = Vec::new();
            for i in 0..200 {
                publisher
                    .publish(std_msgs::String {
                        data: format!("z {i}"),
                    })
                    .unwrap();
                std::thread::sleep(Duration::from_millis(10));
                got.extend(std::iter::from_fn(|| sub.try_recv()).map(|s| s.data.clone()));
            }
            let sent = attacker.join().unwrap();
            assert!(sent > 15_000, "only {sent} garbage datagrams sent");
            while got.len() < 200 {
                match sub.recv_timeout(Duration::from_secs(5)) {
                    Ok(s) => got.push(s.data.clone()),
                    Err(_) => break,
                }
            }
            assert_eq!(got.len(), 200, "ferry's own path lost samples: {got:?}");
            assert!(consecutive(&got, "z "), "gaps or repeats: {got:?}");
            // The DDS path still carries samples to the ROS 2 node.
            let ros_got = publish_until_heard(&mut listener, &said, |i| {
                publisher
                    .publish(std_msgs::String {
                        data: format!("after {i}"),
                    })
                    .unwrap()
            });
            assert_eq!(ros_got.len(), 20, "the ROS 2 node got {ros_got:?}");
        })
        .join()
        .unwrap();
    });
}

/// ROS 2's default domain 0 on one host: a ferry runtime already there
/// (ferry's discovery on domain 0's ports), then a ROS 2 node, then a ferry
/// node with `[ros2]`, all in domain 0 — and the ROS 2 node hears the ferry
/// node. (Ferry's unicast discovery socket once took port 7401, DDS domain
/// 0's multicast data port: no DDS participant of domain 0 could start
/// beside a ferry runtime, ferry's own `[ros2]` path included.)
#[test]
fn domain_0_is_shared_with_ros2_on_one_host() {
    let Some(lab) = Lab::new(22) else { return };
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(move || {
            lab_ref.enter(&lab_ref.a);
            let plain = Node::builder()
                .name("plain")
                .config(Config {
                    discovery: DiscoveryRange::Subnet,
                    shared_memory: false,
                    ..Config::default()
                })
                .build()
                .unwrap();
            let (mut listener, said) =
                lab_ref.ros2(&lab_ref.a, 0, &["listen", "/chatter0", "10", "40"]);
            wait_for(&said, "ready", Duration::from_secs(30));
            let node = Node::builder()
                .name("talker0")
                .config(ros2_config(0))
                .build()
                .expect("a ferry node with [ros2] in domain 0 beside a ferry runtime");
            let publisher = node
                .publisher::<std_msgs::String>("/chatter0")
                .qos(Qos::default())
                .build()
                .unwrap();
            assert!(publisher.wait_for_subscribers(1, Duration::from_secs(30)));
            let got = publish_until_heard(&mut listener, &said, |i| {
                publisher
                    .publish(std_msgs::String {
                        data: format!("zero {i}"),
                    })
                    .unwrap()
            });
            assert_eq!(got.len(), 10, "the ROS 2 subscription got {got:?}");
            assert!(consecutive(&got, "zero "), "gaps or repeats: {got:?}");
            drop(plain);
        })
        .join()
        .unwrap();
    });
}
