//! The CLI with `[zenoh]`, as processes: `ferry doctor` shows the session,
//! `ferry topic info -v` the endpoints seen over Zenoh, and a `ferry topic
//! pub` process whose samples reach a subscriber through Zenoh and over a
//! direct path once ferry's discovery finds the pair — each sample once,
//! none missing.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry::config::zenoh::{Mode, ZenohConfig};
use ferry::msgs::std_msgs;
use ferry::{Config, DiscoveryRange, Node, Qos, TransportKind};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

use ferry_testkit::free_port;

/// A ferry node that is also the Zenoh router, on 127.0.0.1:`port`.
fn router_node(name: &str, domain: u16, port: u16, discovery: DiscoveryRange) -> Node {
    Node::builder()
        .name(name)
        .config(Config {
            domain_id: domain,
            discovery,
            shared_memory: false,
            zenoh: Some(ZenohConfig {
                mode: Mode::Router,
                connect: vec![],
                listen: vec![format!("tcp/127.0.0.1:{port}")],
                ..ZenohConfig::default()
            }),
            ..Config::default()
        })
        .build()
        .unwrap()
}

/// A config file for the CLI: a Zenoh peer of the router at `port`.
fn config_file(tag: &str, domain: u16, port: u16, discovery: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ferry-cli-zenoh-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("ferry.toml");
    std::fs::write(
        &p,
        format!(
            "domain_id = {domain}\ndiscovery = \"{discovery}\"\nshared_memory = false\n\
             [zenoh]\nconnect = [\"tcp/127.0.0.1:{port}\"]\n"
        ),
    )
    .unwrap();
    p
}

fn ferry(cfg: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(FERRY)
        .args(args)
        .env("FERRY_CONFIG", cfg)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "ferry {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn doctor_and_topic_info_show_the_zenoh_path() {
    let port = free_port();
    let robot = router_node("robot7", 65, port, DiscoveryRange::Off);
    let _p = robot
        .publisher::<std_msgs::String>("/fleet/odom")
        .build()
        .unwrap();
    let cfg = config_file("doctor", 65, port, "off");
    let doctor = ferry(&cfg, &["doctor"]);
    let line = doctor
        .lines()
        .find(|l| l.starts_with("zenoh: "))
        .unwrap_or_else(|| panic!("{doctor}"));
    assert!(
        line.starts_with("zenoh: peer ") && line.contains("routers 1"),
        "{line}"
    );
    // The robot is seen over Zenoh only (ferry's discovery is off).
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let info = ferry(&cfg, &["topic", "info", "-v", "/fleet/odom"]);
        if info.contains("node /robot7  over Zenoh  type std_msgs/msg/String") {
            assert!(info.contains("Publisher count: 1"), "{info}");
            break;
        }
        assert!(Instant::now() < end, "{info}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let nodes = ferry(&cfg, &["node", "list"]);
    assert!(nodes.lines().any(|l| l == "/robot7"), "{nodes}");
}

#[test]
fn a_publisher_process_hands_over_from_zenoh_to_a_direct_path() {
    let port = free_port();
    // The subscriber's runtime is the router; both runtimes also run
    // ferry's discovery on this host, so a direct path (UDP or TCP) comes
    // up after Zenoh has carried the first samples.
    let cloud = router_node("cloud", 66, port, DiscoveryRange::Localhost);
    let sub = cloud
        .subscriber::<std_msgs::String>("/handover")
        .qos(Qos::default().keep_all())
        .build()
        .unwrap();
    let cfg = config_file("handover", 66, port, "localhost");
    let n = 1500u64;
    let mut publisher = Command::new(FERRY)
        .args([
            "topic",
            "pub",
            "/handover",
            "std_msgs/msg/String",
            "data: x",
            "--rate",
            "500",
            "--times",
            &n.to_string(),
        ])
        .env("FERRY_CONFIG", &cfg)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (mut seqs, mut paths) = (Vec::new(), Vec::new());
    let end = Instant::now() + Duration::from_secs(30);
    while seqs.last() != Some(&n) && Instant::now() < end {
        if let Ok(s) = sub.recv_timeout(Duration::from_millis(200)) {
            seqs.push(s.info.seq);
            paths.push(s.info.transport);
        }
    }
    let _ = publisher.kill();
    let _ = publisher.wait();
    let first = *seqs.first().expect("samples");
    // Each once, none missing. In order, but for a Zenoh sample that was
    // in flight when the direct path delivered its first: it arrives late,
    // once, not lost (as at the MQTT broker's hand-over).
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    let want: Vec<u64> = (first..=n).collect();
    assert_eq!(sorted, want, "each sample once, none missing");
    let late: Vec<(u64, TransportKind)> = seqs
        .iter()
        .zip(&paths)
        .enumerate()
        .filter(|(i, (s, _))| seqs[..*i].iter().any(|e| e > s))
        .map(|(_, (s, t))| (*s, *t))
        .collect();
    assert!(
        late.iter().all(|(_, t)| *t == TransportKind::Zenoh),
        "only Zenoh samples in flight at the hand-over may come late: {late:?}"
    );
    seqs.retain(|s| !late.iter().any(|(l, _)| l == s));
    let want: Vec<u64> = want
        .into_iter()
        .filter(|s| !late.iter().any(|(l, _)| l == s))
        .collect();
    if seqs != want {
        let at = seqs
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        let lo = at.saturating_sub(3);
        panic!(
            "from its first sample on, each once and in order: at {at} got {:?} on {:?} ({} samples)",
            &seqs[lo..(at + 6).min(seqs.len())],
            &paths[lo..(at + 6).min(paths.len())],
            seqs.len()
        );
    }
    // Which path each sample came on: Zenoh first, then one direct path.
    let zenoh = paths.iter().filter(|t| **t == TransportKind::Zenoh).count();
    let switch = paths
        .iter()
        .position(|t| *t != TransportKind::Zenoh)
        .unwrap_or(paths.len());
    eprintln!(
        "hand-over: first sample {first}; {zenoh} over Zenoh, then {} over {:?} from sample {}",
        paths.len() - zenoh,
        paths.last(),
        first + switch as u64
    );
    // Which path wins the start is a race (on one host ferry's discovery
    // often connects before the Zenoh session has its tokens); what must
    // hold either way: once the direct path delivers, Zenoh delivers
    // nothing more.
    assert!(switch < paths.len(), "a direct path came up: {paths:?}");
    assert!(
        paths[switch..].iter().all(|t| *t != TransportKind::Zenoh),
        "once the direct path is up, it carries everything: {paths:?}"
    );
}
