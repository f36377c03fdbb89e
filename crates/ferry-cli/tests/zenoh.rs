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

/// A network namespace with only its loopback up (its own ports, its own
/// nftables); deleted on drop. None (the test says SKIPPED) without root,
/// iproute2 or nftables.
struct Ns(String);

impl Ns {
    fn new(tag: &str) -> Option<Ns> {
        let have = Command::new("sh")
            .args(["-c", "command -v ip && command -v nft"])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if unsafe { libc::geteuid() } != 0 || !have {
            eprintln!("SKIPPED: namespace tests need root, iproute2 and nftables");
            return None;
        }
        let ns = Ns(format!("zh{}{tag}", std::process::id() % 100_000));
        ns.run(&format!(
            "ip netns add {0} && ip -n {0} link set lo up",
            ns.0
        ));
        Some(ns)
    }
    fn run(&self, script: &str) {
        let st = Command::new("sh").args(["-c", script]).status().unwrap();
        assert!(st.success(), "`{script}` failed");
    }
    /// Runs `script` inside the namespace.
    fn exec(&self, script: &str) {
        self.run(&format!("ip netns exec {} sh -c '{script}'", self.0));
    }
    /// `ferry args…` inside the namespace with config `cfg`.
    fn ferry(&self, cfg: &std::path::Path, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0, FERRY])
            .args(args)
            .env("FERRY_CONFIG", cfg);
        c
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

/// The deterministic hand-over: in a namespace where every UDP datagram is
/// dropped, ferry's discovery cannot join the two processes and only
/// Zenoh (TCP, through the subscriber's runtime as router) carries the
/// samples; three seconds later UDP is let through, discovery finds the
/// pair, and a direct path takes over — each sample once, none lost from
/// the first delivered on, and no Zenoh sample after the direct path
/// delivers but those already in flight.
#[test]
fn a_direct_path_that_comes_up_seconds_later_takes_over_from_zenoh_without_loss_or_duplicates() {
    let Some(ns) = Ns::new("ho") else { return };
    ns.exec(
        "nft add table inet hold && \
         nft add chain inet hold out \"{ type filter hook output priority 0 ; }\" && \
         nft add rule inet hold out meta l4proto udp drop",
    );
    let dir = std::env::temp_dir().join(format!("ferry-cli-zenoh-ho-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = |name: &str, zenoh: &str| {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!(
                "domain_id = 75\ndiscovery = \"localhost\"\nshared_memory = false\n\
                 [zenoh]\n{zenoh}\n"
            ),
        )
        .unwrap();
        p
    };
    // (Port 7447 is this namespace's own.)
    let router = cfg(
        "router.toml",
        "mode = \"router\"\nlisten = [\"tcp/127.0.0.1:7447\"]\nconnect = []",
    );
    let peer = cfg("peer.toml", "connect = [\"tcp/127.0.0.1:7447\"]");
    let n = 800u64;
    let qos = ["--qos-reliability", "reliable", "--qos-history", "keep_all"];
    let mut echo = ns
        .ferry(
            &router,
            &["topic", "echo", "/handover", "std_msgs/msg/String"],
        )
        .args(["--json", "-i", "--count", &n.to_string(), "--timeout", "60"])
        .args(qos)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = echo.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(1500));
    let mut publisher = ns
        .ferry(&peer, &["topic", "pub", "/handover", "std_msgs/msg/String"])
        .args(["data: x", "--rate", "100", "--times", &n.to_string()])
        .args(qos)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let opened = Instant::now();
    let (mut seqs, mut paths) = (Vec::<u64>::new(), Vec::<String>::new());
    let mut released = false;
    let end = Instant::now() + Duration::from_secs(45);
    while seqs.last() != Some(&n) && Instant::now() < end {
        if !released && opened.elapsed() >= Duration::from_secs(3) {
            ns.exec("nft delete table inet hold");
            released = true;
        }
        let Ok(l) = rx.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        seqs.push(v["info"]["seq"].as_u64().unwrap());
        paths.push(v["info"]["transport"].as_str().unwrap().to_string());
        assert_eq!(v["message"]["data"], "x", "{l}");
    }
    let _ = publisher.kill();
    let _ = publisher.wait();
    let _ = echo.kill();
    let _ = echo.wait();
    let first = *seqs.first().expect("samples over Zenoh");
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (first..=n).collect::<Vec<_>>(),
        "each sample once, none missing from the first on ({} samples)",
        seqs.len()
    );
    let switch = paths
        .iter()
        .position(|t| t != "zenoh")
        .expect("a direct path came up");
    let direct = &paths[switch];
    assert!(direct == "udp" || direct == "tcp", "{direct}");
    // UDP was held for 3 s at 100 Hz: Zenoh carried the start.
    assert!(switch >= 100, "Zenoh carried only {switch} samples first");
    let late: Vec<(u64, &String)> = seqs[switch..]
        .iter()
        .zip(&paths[switch..])
        .filter(|(_, t)| *t == "zenoh")
        .map(|(s, t)| (*s, t))
        .collect();
    assert!(
        late.len() <= 10,
        "after the direct path delivers, only Zenoh samples already in flight: {late:?}"
    );
    assert_eq!(
        paths.last(),
        Some(direct),
        "the direct path carries the end"
    );
    eprintln!(
        "hand-over: samples {first}..{} over Zenoh, then {direct} from sample {} ({} Zenoh samples in flight came after)",
        seqs[switch - 1],
        seqs[switch],
        late.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
