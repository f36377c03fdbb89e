//! Ferry nodes with `[zenoh]`: ferry runtimes that ferry's own discovery
//! does not reach meet through a Zenoh router; a peer that speaks as
//! rmw_zenoh (eclipse-zenoh from PyPI, `crates/ferry-zenoh/tests/
//! rmw_zenoh_peer.py`) sees ferry's nodes and endpoints and exchanges
//! samples with them; junk from a Zenoh peer is dropped. (The hand-over
//! from Zenoh to a direct path needs two processes: ferry-cli's
//! `tests/zenoh.rs`.)
//!
//! Everything runs on this host's loopback: Zenoh's I/O threads are the
//! process's (started once), so they cannot be moved into a namespace per
//! test. Every test has its own router port and ferry domain.
#![cfg(feature = "zenoh")]

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferry::config::zenoh::{Mode, ZenohConfig};
use ferry::msgs::std_msgs;
use ferry::{Config, DiscoveryRange, Node, Qos, TransportKind};

use ferry_testkit::free_port;

mod auth;
mod claims;
mod pin;
mod services;

/// A runtime config in ferry `domain` whose only way out is Zenoh.
fn zenoh_only(domain: u16, mode: Mode, connect: &[String], listen: &[String]) -> Config {
    Config {
        domain_id: domain,
        discovery: DiscoveryRange::Off,
        shared_memory: false,
        zenoh: Some(ZenohConfig {
            mode,
            connect: connect.to_vec(),
            listen: listen.to_vec(),
            ..ZenohConfig::default()
        }),
        ..Config::default()
    }
}

fn node(name: &str, cfg: Config) -> Node {
    Node::builder().name(name).config(cfg).build().unwrap()
}

/// Waits until `f` holds, for at most `within`.
fn until(within: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < end, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A publisher of `topic` on `from` and a subscriber on `to` (keep last
/// 100), once the publisher sees the subscription (within 10 s).
fn matched_pair(
    from: &Node,
    to: &Node,
    topic: &str,
) -> (
    ferry::Publisher<std_msgs::String>,
    ferry::Subscriber<std_msgs::String>,
) {
    let publisher = from.publisher::<std_msgs::String>(topic).build().unwrap();
    let sub = to
        .subscriber::<std_msgs::String>(topic)
        .qos(Qos::default().keep_last(100))
        .build()
        .unwrap();
    until(
        Duration::from_secs(10),
        &format!("the subscription of {topic}"),
        || publisher.subscriber_count() == 1,
    );
    (publisher, sub)
}

/// Publishes `n` strings `"{tag} {i}"`; `sub` must get each, in order.
fn exchange(
    publisher: &ferry::Publisher<std_msgs::String>,
    sub: &ferry::Subscriber<std_msgs::String>,
    tag: &str,
    n: usize,
) {
    for i in 0..n {
        publisher
            .publish(std_msgs::String {
                data: format!("{tag} {i}"),
            })
            .unwrap();
    }
    for i in 0..n {
        let s = sub.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(s.data, format!("{tag} {i}"));
    }
}

struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the rmw_zenoh peer with `args`; its stdout lines arrive on the
/// channel.
fn rmw_zenoh(args: &[&str]) -> (Peer, mpsc::Receiver<String>) {
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ferry-zenoh/tests/rmw_zenoh_peer.py"
    );
    let mut child = Command::new(py)
        .arg(script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 with eclipse-zenoh and xxhash (bash scripts/setup.sh)");
    let out = child.stdout.take().unwrap();
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

/// The peer's lines until one starts with `what` (that one included).
fn lines_until(rx: &mpsc::Receiver<String>, what: &str, within: Duration) -> Vec<String> {
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
    panic!("the rmw_zenoh peer never said `{what}` within {within:?}; it said {lines:?}");
}

#[test]
fn ferry_runtimes_meet_through_a_zenoh_router() {
    let port = free_port();
    let router = format!("tcp/127.0.0.1:{port}");
    // A ferry runtime as the router (no `zenohd` needed), a robot as a
    // peer, the cloud as a client; ferry's own discovery off everywhere.
    let _router = node(
        "router",
        zenoh_only(61, Mode::Router, &[], std::slice::from_ref(&router)),
    );
    let robot = node(
        "robot1",
        zenoh_only(61, Mode::Peer, std::slice::from_ref(&router), &[]),
    );
    let cloud = node(
        "cloud",
        zenoh_only(61, Mode::Client, std::slice::from_ref(&router), &[]),
    );
    let s = robot.zenoh_session().unwrap();
    assert_eq!(s.mode, "peer");
    until(Duration::from_secs(10), "the robot sees its router", || {
        !robot.zenoh_session().unwrap().routers.is_empty()
    });

    let sub = cloud
        .subscriber::<std_msgs::String>("/fleet/status")
        .qos(Qos::default().keep_last(100))
        .build()
        .unwrap();
    let publisher = robot
        .publisher::<std_msgs::String>("/fleet/status")
        .build()
        .unwrap();
    until(Duration::from_secs(10), "the subscription on Zenoh", || {
        publisher.subscriber_count() == 1
    });
    // The cloud's graph lists the robot's node and publisher, via Zenoh.
    until(Duration::from_secs(10), "the robot in the graph", || {
        let g = cloud.graph();
        g.ros2_nodes
            .iter()
            .any(|n| n.name == "robot1" && n.via == TransportKind::Zenoh)
            && g.ros2_endpoints.iter().any(|e| {
                e.name == "/fleet/status"
                    && e.type_name == "std_msgs/msg/String"
                    && e.node == "/robot1"
                    && e.via == TransportKind::Zenoh
            })
    });
    for i in 0..50 {
        publisher
            .publish(std_msgs::String {
                data: format!("status {i}"),
            })
            .unwrap();
    }
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    while got.len() < 50 && Instant::now() < end {
        if let Ok(s) = sub.recv_timeout(Duration::from_millis(200)) {
            got.push(s.data.clone());
        }
    }
    let want: Vec<String> = (0..50).map(|i| format!("status {i}")).collect();
    assert_eq!(got, want, "every sample, once, in order");
    // One connection, from the robot's publisher itself (its runtime's
    // `@ferry_lv` token names it): numbered and deduplicated as ferry's.
    let conns = sub.connections();
    assert!(
        conns.len() == 1
            && conns.iter().all(|c| c.transport == TransportKind::Zenoh
                && c.stats.messages == 50
                && c.remote.participant == robot.participant()),
        "{conns:?}"
    );
}

#[test]
fn a_ros2_node_on_rmw_zenoh_and_a_ferry_node_see_and_hear_each_other() {
    let port = free_port();
    let router = format!("tcp/127.0.0.1:{port}");
    let ferry = node(
        "ferry_talker",
        zenoh_only(62, Mode::Router, &[], std::slice::from_ref(&router)),
    );
    let zid = ferry.zenoh_session().unwrap().zid;
    let publisher = ferry
        .publisher::<std_msgs::String>("/chatter")
        .qos(Qos::default().keep_last(10))
        .build()
        .unwrap();
    let sub = ferry
        .subscriber::<std_msgs::String>("/chatter")
        .qos(Qos::default().keep_last(100))
        .build()
        .unwrap();

    // rmw_zenoh's listener: sees ferry's node and publisher tokens, hears
    // ferry's samples with rmw_zenoh's attachment.
    let (_l, lrx) = rmw_zenoh(&["--connect", &router, "--domain", "62", "listener", "20"]);
    let mut lines = lines_until(&lrx, "ready", Duration::from_secs(20));
    // Ferry's own subscriber, and the listener's over Zenoh.
    until(
        Duration::from_secs(10),
        "the listener's subscription",
        || publisher.subscriber_count() == 2,
    );
    for i in 0..20 {
        publisher
            .publish(std_msgs::String {
                data: format!("ferry {i}"),
            })
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    lines.extend(lines_until(&lrx, "heard 20 ", Duration::from_secs(10)));
    let tokens: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("token "))
        .collect();
    let hash = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
    let mp = tokens
        .iter()
        .find(|t| t.contains("/MP/"))
        .unwrap_or_else(|| panic!("no publisher token of ferry's in {tokens:?}"));
    assert!(
        mp.starts_with(&format!("@ros2_lv/62/{zid}/"))
            && mp.ends_with(&format!(
                "/MP/%/%/ferry_talker/%chatter/std_msgs::msg::dds_::String_/{hash}/::,10:,:,:,,"
            )),
        "{mp}"
    );
    let nid = mp.split('/').nth(3).unwrap();
    assert!(
        tokens.contains(&format!("@ros2_lv/62/{zid}/{nid}/{nid}/NN/%/%/ferry_talker").as_str()),
        "{tokens:?}"
    );
    let heard: Vec<(u64, String, String)> = lines
        .iter()
        .filter_map(|l| {
            let mut p = l.strip_prefix("heard ")?.splitn(4, ' ');
            let seq = p.next()?.parse().ok()?;
            let text = format!("{} {}", p.next()?, p.next()?);
            Some((seq, text, p.next()?.to_string()))
        })
        .collect();
    assert_eq!(heard.len(), 20, "{lines:?}");
    let gid: String = ferry_zenoh::gid_of(mp)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    for (i, (seq, text, g)) in heard.iter().enumerate() {
        assert_eq!(
            *seq,
            i as u64 + 1,
            "rmw_zenoh's sequence numbers start at 1"
        );
        assert_eq!(text, &format!("ferry {i}"));
        assert_eq!(g, &gid, "the GID is XXH3-128 of the publisher's token");
    }
    // Ferry's own subscriber got them in-process, not again over Zenoh.
    let mut own = 0;
    while sub.try_recv().is_some() {
        own += 1;
    }
    assert_eq!(own, 20);

    // rmw_zenoh's talker: ferry's graph lists it; ferry hears it.
    let (_t, trx) = rmw_zenoh(&[
        "--connect",
        &router,
        "--domain",
        "62",
        "--node",
        "py_talker",
        "talker",
        "30",
    ]);
    lines_until(&trx, "ready", Duration::from_secs(20));
    until(
        Duration::from_secs(10),
        "the ROS 2 talker in ferry's graph",
        || {
            let g = ferry.graph();
            g.ros2_nodes.iter().any(|n| n.name == "py_talker")
                && g.ros2_endpoints.iter().any(|e| {
                    e.name == "/chatter"
                        && e.kind == ferry::EndpointKind::Publisher
                        && e.node == "/py_talker"
                        && e.type_name == "std_msgs/msg/String"
                })
        },
    );
    let mut got = HashSet::new();
    let end = Instant::now() + Duration::from_secs(15);
    while got.len() < 30 && Instant::now() < end {
        if let Ok(s) = sub.recv_timeout(Duration::from_millis(200)) {
            assert!(got.insert(s.data.clone()), "duplicate {}", s.data);
        }
    }
    let want: HashSet<String> = (1..=30).map(|i| format!("py {i}")).collect();
    assert_eq!(got, want);
}

#[test]
fn junk_from_a_zenoh_peer_is_dropped_and_counted_and_good_samples_still_arrive() {
    let port = free_port();
    let router = format!("tcp/127.0.0.1:{port}");
    let ferry = node(
        "ferry_listener",
        zenoh_only(64, Mode::Router, &[], std::slice::from_ref(&router)),
    );
    let sub = ferry
        .subscriber::<std_msgs::String>("/chatter")
        .qos(Qos::default().keep_last(5000))
        .build()
        .unwrap();
    let (mut peer, rx) = rmw_zenoh(&[
        "--connect",
        &router,
        "--domain",
        "64",
        "--node",
        "hostile",
        "hostile",
        "20",
    ]);
    lines_until(&rx, "sent 20", Duration::from_secs(30));
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while !got.contains(&"good 20".to_string()) && Instant::now() < end {
        if let Ok(s) = sub.recv_timeout(Duration::from_millis(100)) {
            got.push(s.data.clone());
        }
    }
    let _ = peer.0.kill();
    assert!(
        !got.iter().any(|s| s == "junk"),
        "junk went through: {got:?}"
    );
    let good: Vec<&String> = got.iter().filter(|s| s.starts_with("good")).collect();
    let want: Vec<String> = (1..=20).map(|i| format!("good {i}")).collect();
    assert_eq!(good, want.iter().collect::<Vec<_>>());
    let flood = got.iter().filter(|s| *s == "flood").count();
    let conns = sub.connections();
    eprintln!(
        "flood samples taken: {flood} of 1500; connection records now {}",
        conns.len()
    );
    assert!(
        conns.len() <= 1024,
        "connection records stay bounded: {}",
        conns.len()
    );
    // The two malformed payloads with good attachments are counted.
    let errors: u64 = conns.iter().map(|c| c.stats.errors).sum();
    assert!(
        errors == 2,
        "{:?}",
        conns
            .iter()
            .filter(|c| c.stats.messages != 1)
            .map(|c| (c.remote, c.stats.messages, c.stats.errors))
            .collect::<Vec<_>>()
    );
}

/// A ROS 2 talker and listener on ferry's topic and type but another type
/// hash (another version of the message): both sides list each other in
/// the graph, and no sample crosses (the hash is part of the key).
#[test]
fn a_type_hash_mismatch_is_listed_but_never_matched() {
    let port = free_port();
    let router = format!("tcp/127.0.0.1:{port}");
    let ferry = node(
        "ferry_v2",
        zenoh_only(58, Mode::Router, &[], std::slice::from_ref(&router)),
    );
    let sub = ferry
        .subscriber::<std_msgs::String>("/versioned")
        .qos(Qos::default().keep_last(100))
        .build()
        .unwrap();
    let publisher = ferry
        .publisher::<std_msgs::String>("/versioned")
        .build()
        .unwrap();
    let other = format!("RIHS01_{}", "ab".repeat(32));
    let (_t, trx) = rmw_zenoh(&[
        "--connect",
        &router,
        "--domain",
        "58",
        "--topic",
        "/versioned",
        "--hash",
        &other,
        "--node",
        "old_talker",
        "talker",
        "20",
    ]);
    let (_l, lrx) = rmw_zenoh(&[
        "--connect",
        &router,
        "--domain",
        "58",
        "--topic",
        "/versioned",
        "--hash",
        &other,
        "--node",
        "old_listener",
        "listener",
        "20",
    ]);
    lines_until(&lrx, "ready", Duration::from_secs(20));
    let said = lines_until(&trx, "ready", Duration::from_secs(20));
    until(Duration::from_secs(10), "both in ferry's graph", || {
        let g = ferry.graph();
        ["/old_talker", "/old_listener"].iter().all(|n| {
            g.ros2_endpoints
                .iter()
                .any(|e| e.node == *n && e.name == "/versioned")
        })
    });
    // Ferry's publisher has its own subscriber and nobody over Zenoh.
    assert_eq!(publisher.subscriber_count(), 1);
    for i in 0..20 {
        publisher
            .publish(std_msgs::String {
                data: format!("v2 {i}"),
            })
            .unwrap();
    }
    let said = [said, lines_until(&trx, "sent 20", Duration::from_secs(20))].concat();
    let mut heard = Vec::new();
    while let Ok(s) = sub.recv_timeout(Duration::from_millis(500)) {
        heard.push(s.data.clone());
    }
    assert_eq!(
        heard,
        (0..20).map(|i| format!("v2 {i}")).collect::<Vec<_>>(),
        "only ferry's own samples: {said:?}"
    );
    // The old listener hears the old talker (their hashes agree), never
    // ferry.
    let mut heard = Vec::new();
    while let Ok(l) = lrx.recv_timeout(Duration::from_millis(300)) {
        if l.starts_with("heard ") {
            heard.push(l);
        }
    }
    assert!(
        heard.iter().all(|l| l.contains(" py ")),
        "a sample of ferry's crossed the hash: {heard:?}"
    );
}

/// Two runtimes that ferry's discovery joins directly (`discovery =
/// localhost`) and that are also Zenoh peers of a router, with a
/// publisher and a subscriber of `topic` (keep last `depth`) connected
/// directly; Zenoh domain `domain`.
struct DirectPair {
    /// The router's endpoint.
    router: String,
    _nodes: [Node; 3],
    publisher: ferry::Publisher<std_msgs::String>,
    sub: ferry::Subscriber<std_msgs::String>,
}

impl DirectPair {
    fn new(domain: u16, topic: &str, depth: u32) -> DirectPair {
        let router = format!("tcp/127.0.0.1:{}", free_port());
        let r = node(
            "router",
            zenoh_only(domain, Mode::Router, &[], std::slice::from_ref(&router)),
        );
        let cfg = |lease_ms| Config {
            discovery: DiscoveryRange::Localhost,
            lease_ms,
            ..zenoh_only(domain, Mode::Peer, std::slice::from_ref(&router), &[])
        };
        // (Configs of their own: two runtimes, as two processes.)
        let a = node("pair_pub", cfg(8_000));
        let b = node("pair_sub", cfg(9_000));
        let qos = Qos::default().keep_last(depth);
        let publisher = a
            .publisher::<std_msgs::String>(topic)
            .qos(qos)
            .build()
            .unwrap();
        let sub = b
            .subscriber::<std_msgs::String>(topic)
            .qos(qos)
            .build()
            .unwrap();
        until(Duration::from_secs(20), "the direct connection", || {
            publisher
                .connections()
                .iter()
                .any(|c| c.transport != TransportKind::Zenoh)
        });
        DirectPair {
            router,
            _nodes: [r, a, b],
            publisher,
            sub,
        }
    }
}

/// A Zenoh peer that puts as a ferry publisher (its GID, from its token)
/// with sequence numbers far ahead of the real ones, before that
/// publisher's first sample: its samples are its word and get through, but
/// they cannot make the publisher's real samples on its direct path look
/// delivered already (which would cut the pair off).
#[test]
fn a_forged_sample_with_a_huge_sequence_number_does_not_cut_a_direct_path_off() {
    let d = DirectPair::new(60, "/victim", 100);
    let (router, publisher, sub) = (&d.router, &d.publisher, &d.sub);
    let (_f, frx) = rmw_zenoh(&[
        "--connect",
        router,
        "--domain",
        "60",
        "--topic",
        "/victim",
        "forger",
        "5",
    ]);
    lines_until(&frx, "forged 5", Duration::from_secs(30));
    for i in 1..=5 {
        let s = sub.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(s.data, format!("forged {i}"));
        assert_eq!(s.info.transport, TransportKind::Zenoh);
    }
    for i in 0..20 {
        publisher
            .publish(std_msgs::String {
                data: format!("real {i}"),
            })
            .unwrap();
    }
    for i in 0..20 {
        let s = sub
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("real sample {i} never came: {e}"));
        assert_eq!(s.data, format!("real {i}"));
        assert_ne!(s.info.transport, TransportKind::Zenoh);
    }
}

#[test]
fn zenoh_over_tls_with_ferry_security_certificates_and_a_wrong_ca_is_refused() {
    use ferry::config::zenoh::ZenohTls;
    use ferry_security::create::{create_broker_certificate, create_keystore, Validity};
    let d = ferry_testkit::TempDir::new("zenoh-tls");
    let ks = create_keystore(&d.path().join("ks"), Validity::days(1)).unwrap();
    // The router's certificate, as `ferry security create-broker-cert` makes it.
    let names = ["localhost".to_string(), "127.0.0.1".to_string()];
    let dir = create_broker_certificate(&ks, &names, Validity::days(1)).unwrap();
    let port = free_port();
    let endpoint = format!("tls/127.0.0.1:{port}");
    let tls = |root_ca: std::path::PathBuf, own: bool| ZenohTls {
        root_ca,
        cert: own.then(|| dir.join("cert.pem")),
        key: own.then(|| dir.join("key.pem")),
        mtls: false,
    };
    let with_tls = |mut c: Config, t: ZenohTls| {
        c.zenoh.as_mut().unwrap().tls = Some(t);
        c
    };
    let router = node(
        "tls_router",
        with_tls(
            zenoh_only(67, Mode::Router, &[], std::slice::from_ref(&endpoint)),
            tls(ks.ca_cert_path(), true),
        ),
    );
    let client = node(
        "tls_client",
        with_tls(
            zenoh_only(67, Mode::Client, std::slice::from_ref(&endpoint), &[]),
            tls(ks.ca_cert_path(), false),
        ),
    );
    let sub = client
        .subscriber::<std_msgs::String>("/secure")
        .qos(Qos::default().keep_last(100))
        .build()
        .unwrap();
    let publisher = router
        .publisher::<std_msgs::String>("/secure")
        .build()
        .unwrap();
    until(Duration::from_secs(10), "the subscription over TLS", || {
        publisher.subscriber_count() == 1
    });
    for i in 0..10 {
        publisher
            .publish(std_msgs::String {
                data: format!("s {i}"),
            })
            .unwrap();
    }
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(10);
    while got.len() < 10 && Instant::now() < end {
        if let Ok(s) = sub.recv_timeout(Duration::from_millis(200)) {
            got.push(s.data.clone());
        }
    }
    assert_eq!(got, (0..10).map(|i| format!("s {i}")).collect::<Vec<_>>());
    let conns = sub.connections();
    assert!(
        conns
            .iter()
            .all(|c| c.locator.starts_with("zenoh/67/secure/")),
        "{conns:?}"
    );

    // A client that trusts another CA: the handshake fails, and a client
    // (which needs its router) does not start, with a clear error.
    let other = create_keystore(&d.path().join("other"), Validity::days(1)).unwrap();
    let built = Node::builder()
        .name("stranger")
        .config(with_tls(
            zenoh_only(67, Mode::Client, std::slice::from_ref(&endpoint), &[]),
            tls(other.ca_cert_path(), false),
        ))
        .build();
    let Err(e) = built else {
        panic!("a client with the wrong CA must not start");
    };
    let e = e.to_string();
    assert!(e.contains("Zenoh path") && e.contains(&endpoint), "{e}");
}

#[test]
fn zenoh_with_mtls_takes_only_clients_whose_certificate_the_ca_signed() {
    use ferry::config::zenoh::ZenohTls;
    use ferry_security::create::{
        create_broker_certificate, create_identity, create_keystore, Validity,
    };
    let d = ferry_testkit::TempDir::new("zenoh-mtls");
    let ks = create_keystore(&d.path().join("ks"), Validity::days(1)).unwrap();
    let names = ["localhost".to_string(), "127.0.0.1".to_string()];
    let router_dir = create_broker_certificate(&ks, &names, Validity::days(1)).unwrap();
    // A robot's identity (`ferry security create-identity`): its client
    // certificate.
    let robot_dir = create_identity(&ks, "/fleet/robot1", Validity::days(1)).unwrap();
    let other = create_keystore(&d.path().join("other"), Validity::days(1)).unwrap();
    let stranger_dir = create_identity(&other, "/fleet/robot1", Validity::days(1)).unwrap();
    let port = free_port();
    let endpoint = format!("tls/127.0.0.1:{port}");
    let tls = |own: Option<&std::path::Path>, mtls: bool| ZenohTls {
        root_ca: ks.ca_cert_path(),
        cert: own.map(|d| d.join("cert.pem")),
        key: own.map(|d| d.join("key.pem")),
        mtls,
    };
    let with_tls = |mut c: Config, t: ZenohTls| {
        c.zenoh.as_mut().unwrap().tls = Some(t);
        c
    };
    let client = |name: &str, t: ZenohTls| {
        Node::builder()
            .name(name)
            .config(with_tls(
                zenoh_only(74, Mode::Client, std::slice::from_ref(&endpoint), &[]),
                t,
            ))
            .build()
    };
    let router = node(
        "mtls_router",
        with_tls(
            zenoh_only(74, Mode::Router, &[], std::slice::from_ref(&endpoint)),
            tls(Some(&router_dir), true),
        ),
    );
    // (Zenoh's mTLS is on both ends: a connecting side presents its
    // certificate only with it on.)
    let robot = client("robot1", tls(Some(&robot_dir), true)).unwrap();
    let (publisher, sub) = matched_pair(&robot, &router, "/fleet/pose");
    exchange(&publisher, &sub, "p", 10);

    // No certificate, or one another CA signed: the router refuses the
    // handshake, and a client (which needs its router) does not start.
    for (who, own, mtls) in [
        ("anonymous", None, false),
        ("stranger", Some(stranger_dir.as_path()), true),
    ] {
        let Err(e) = client(who, tls(own, mtls)) else {
            panic!("{who} must not get in");
        };
        let e = e.to_string();
        assert!(
            e.contains("Zenoh path") && e.contains(&endpoint),
            "{who}: {e}"
        );
    }
    // The robot was not disturbed by them.
    exchange(&publisher, &sub, "still here", 1);
}

#[test]
fn a_late_joiner_gets_a_transient_local_history_over_zenoh_and_the_owner_no_duplicates() {
    let port = free_port();
    let router = format!("tcp/127.0.0.1:{port}");
    let a = node(
        "latched",
        zenoh_only(68, Mode::Router, &[], std::slice::from_ref(&router)),
    );
    let qos = Qos::default().keep_last(10).transient_local();
    let publisher = a
        .publisher::<std_msgs::String>("/map")
        .qos(qos)
        .build()
        .unwrap();
    let own = a
        .subscriber::<std_msgs::String>("/map")
        .qos(qos)
        .build()
        .unwrap();
    for i in 0..5 {
        publisher
            .publish(std_msgs::String {
                data: format!("map {i}"),
            })
            .unwrap();
    }
    // A runtime that joins later, through the router only.
    let b = node(
        "late",
        zenoh_only(68, Mode::Client, std::slice::from_ref(&router), &[]),
    );
    let late = b
        .subscriber::<std_msgs::String>("/map")
        .qos(qos)
        .build()
        .unwrap();
    let take = |sub: &ferry::Subscriber<std_msgs::String>, n: usize| {
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        while got.len() < n && Instant::now() < end {
            if let Ok(s) = sub.recv_timeout(Duration::from_millis(100)) {
                got.push(s.data.clone());
            }
        }
        // Nothing more may come (no duplicates).
        while let Ok(s) = sub.recv_timeout(Duration::from_millis(500)) {
            got.push(s.data.clone());
        }
        got
    };
    let want: Vec<String> = (0..5).map(|i| format!("map {i}")).collect();
    assert_eq!(take(&late, 5), want, "the late joiner's history");
    assert_eq!(take(&own, 5), want, "the owner's own subscriber, once each");
}
