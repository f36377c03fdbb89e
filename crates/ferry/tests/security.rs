//! Security modes on real keystores made by `ferry_security::create` (what
//! `ferry security` runs): an enforcing runtime refuses to start without a
//! valid identity and refuses ports its grants do not allow; what they
//! allow still flows; permissive allows and counts; off ignores it all.

use std::path::Path;
use std::time::Duration;

use ferry::msgs::std_msgs;
use ferry::{BuildError, Config, DiscoveryRange, Node};
use ferry_security::create::{create_identity, create_keystore, create_permissions, Validity};
use ferry_security::{Action, Mode};

use ferry_testkit::TempDir as Dir;

const POLICY: &str = r#"
version: 1
domains: [160, 161, 162, 163, 165, 166, 167, 168, 221, 223, 224, 225, 227, 228, 98, 99]
identities:
  /robot1/talker:
    allow: { publish: [/chatter, "/robot1/**"] }
    deny:  { publish: [/robot1/cmd_vel] }
  /robot1/listener:
    allow: { subscribe: [/chatter, /secret] }
  /robot1/intruder:
    allow: { subscribe: [/chatter] }
"#;

/// A keystore with the two enclaves of [`POLICY`] (and `/spare`, with no
/// grants).
fn keystore(name: &str) -> Dir {
    let d = Dir::new(&format!("security-{name}"));
    let ks = create_keystore(&d.0, Validity::days(1)).unwrap();
    for e in [
        "/robot1/talker",
        "/robot1/listener",
        "/robot1/intruder",
        "/spare",
    ] {
        create_identity(&ks, e, Validity::days(1)).unwrap();
    }
    let policy = d.0.join("policy-in.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    create_permissions(&ks, &policy, Validity::days(1)).unwrap();
    d
}

fn cfg(domain: u16, mode: Mode, ks: Option<&Path>, enclave: Option<&str>) -> Config {
    let mut c = Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        ..Config::default()
    };
    c.security.mode = mode;
    c.security.keystore = ks.map(Path::to_path_buf);
    c.security.enclave = enclave.map(String::from);
    c
}

fn node(name: &str, c: Config) -> Result<Node, BuildError> {
    Node::builder().name(name).config(c).build()
}

/// `/chatter` from the talker to the listener, matched.
fn chatter(
    talker: &Node,
    listener: &Node,
) -> (
    ferry::Publisher<std_msgs::String>,
    ferry::Subscriber<std_msgs::String>,
) {
    let p = talker
        .publisher::<std_msgs::String>("/chatter")
        .build()
        .unwrap();
    let s = listener
        .subscriber::<std_msgs::String>("/chatter")
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, Duration::from_secs(10)));
    (p, s)
}

/// The talker and the listener of [`POLICY`], each in its own runtime of
/// `domain`, with security `mode` (each config through `shape`).
fn pair(domain: u16, mode: Mode, ks: Option<&Path>, shape: fn(Config) -> Config) -> (Node, Node) {
    let make = |name: &str, enclave: &str| {
        node(name, shape(cfg(domain, mode, ks, Some(enclave)))).unwrap()
    };
    (
        make("talker", "/robot1/talker"),
        make("listener", "/robot1/listener"),
    )
}

#[test]
fn enforce_refuses_what_the_grants_do_not_allow_and_carries_what_they_do() {
    let d = keystore("enforce");
    let (talker, listener) = pair(160, Mode::Enforce, Some(&d.0), |c| c);

    match talker
        .publisher::<std_msgs::String>("/robot1/cmd_vel")
        .build()
    {
        Err(BuildError::PermissionDenied {
            enclave,
            action,
            name,
        }) => {
            assert_eq!(
                (enclave.as_str(), action, name.as_str()),
                ("/robot1/talker", Action::Publish, "/robot1/cmd_vel")
            );
        }
        other => panic!("deny rule: {:?}", other.map(|_| ())),
    }
    let e = talker
        .subscriber::<std_msgs::String>("/chatter")
        .build()
        .err()
        .expect("not granted: refused");
    assert!(
        e.to_string().contains("may not subscribe `/chatter`"),
        "{e}"
    );
    assert!(talker
        .publisher::<std_msgs::String>("/other")
        .build()
        .is_err());
    assert!(listener
        .publisher::<std_msgs::String>("/chatter")
        .build()
        .is_err());

    // What is granted works end to end, between two runtimes.
    let _ok = talker
        .publisher::<std_msgs::String>("/robot1/odom")
        .build()
        .unwrap();
    let (p, s) = chatter(&talker, &listener);
    p.publish(std_msgs::String {
        data: "granted".into(),
    })
    .unwrap();
    assert_eq!(
        s.recv_timeout(Duration::from_secs(5)).unwrap().data,
        "granted"
    );
}

#[test]
fn enforce_does_not_start_without_a_valid_identity() {
    let d = keystore("start");
    let fails = |c: Config| match node("n", c) {
        Err(BuildError::Security {
            mode: Mode::Enforce,
            why,
        }) => why,
        other => panic!("expected a security error, got {:?}", other.map(|_| ())),
    };
    // Three enclaves and none chosen.
    let why = fails(cfg(161, Mode::Enforce, Some(&d.0), None));
    assert!(why.contains("FERRY_ENCLAVE"), "{why}");
    let why = fails(cfg(161, Mode::Enforce, Some(&d.0), Some("/ghost")));
    assert!(why.contains("create-identity"), "{why}");
    let why = fails(cfg(
        161,
        Mode::Enforce,
        Some(&d.0.join("enclaves")),
        Some("/spare"),
    ));
    assert!(why.contains("not a ferry keystore"), "{why}");
    // /spare was never named by a policy: it starts (no domain list: every
    // domain) and may create nothing.
    let spare = node("spare", cfg(161, Mode::Enforce, Some(&d.0), Some("/spare"))).unwrap();
    assert!(spare.publisher::<std_msgs::String>("/x").build().is_err());
    // The talker's grants hold in domains 160–163 only.
    let why = fails(cfg(7, Mode::Enforce, Some(&d.0), Some("/robot1/talker")));
    assert!(why.contains("domain 7"), "{why}");
    // A key others can read.
    use std::os::unix::fs::PermissionsExt as _;
    let key = d.0.join("enclaves/robot1/listener/key.pem");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let why = fails(cfg(
        161,
        Mode::Enforce,
        Some(&d.0),
        Some("/robot1/listener"),
    ));
    assert!(why.contains("chmod 600"), "{why}");
    // Enforce without a keystore is a configuration error.
    let e = node("n", cfg(161, Mode::Enforce, None, None))
        .err()
        .unwrap();
    assert!(e.to_string().contains("security.keystore"), "{e}");
}

#[test]
fn permissive_allows_and_off_ignores() {
    let d = keystore("permissive");
    let n = node(
        "p",
        cfg(162, Mode::Permissive, Some(&d.0), Some("/robot1/listener")),
    )
    .unwrap();
    let _p = n
        .publisher::<std_msgs::String>("/robot1/cmd_vel")
        .build()
        .unwrap();
    // Permissive with a broken identity runs without one.
    let n = node("q", cfg(163, Mode::Permissive, Some(&d.0), Some("/ghost"))).unwrap();
    let _p = n.publisher::<std_msgs::String>("/x").build().unwrap();
    let n = node("o", cfg(163, Mode::Off, Some(&d.0.join("nowhere")), None)).unwrap();
    let _p = n.publisher::<std_msgs::String>("/x").build().unwrap();
}

#[test]
fn discovery_is_signed_and_runtimes_without_our_ca_or_security_never_meet() {
    let d = keystore("signed");
    let other = keystore("signed-other");
    let (talker, listener) = pair(165, Mode::Enforce, Some(&d.0), |c| c);
    let plain = node("plain", cfg(165, Mode::Off, None, None)).unwrap();
    let stranger = node(
        "stranger",
        cfg(165, Mode::Enforce, Some(&other.0), Some("/robot1/listener")),
    )
    .unwrap();
    let p = talker
        .publisher::<std_msgs::String>("/chatter")
        .build()
        .unwrap();
    let subs: Vec<_> = [&listener, &plain, &stranger]
        .iter()
        .map(|n| {
            n.subscriber::<std_msgs::String>("/chatter")
                .build()
                .unwrap()
        })
        .collect();
    assert!(p.wait_for_subscribers(1, Duration::from_secs(10)));
    // Time for the others to be found, were they found at all.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        p.subscriber_count(),
        1,
        "only the listener of our CA matches"
    );
    p.publish(std_msgs::String {
        data: "signed".into(),
    })
    .unwrap();
    assert_eq!(
        subs[0].recv_timeout(Duration::from_secs(5)).unwrap().data,
        "signed"
    );
    for s in &subs[1..] {
        assert!(s.recv_timeout(Duration::from_millis(300)).is_err());
    }
    let t = talker.discovery_stats().security;
    assert!(t.unsigned > 0, "the plain runtime's beacons: {t:?}");
    assert!(t.foreign_ca > 0, "the stranger's certificate: {t:?}");
    assert_eq!((t.bad_signature, t.replayed), (0, 0), "{t:?}");
    let o = plain.discovery_stats().security;
    assert!(o.needs_security > 0, "{o:?}");
    let s = stranger.discovery_stats().security;
    assert!(s.foreign_ca > 0, "{s:?}");
}

/// `c` with `/chatter` and `/secret` pinned to `kind` (two runtimes of one
/// process would otherwise meet in process).
fn pinned(mut c: Config, kind: ferry::TransportKind) -> Config {
    c.topics = ["/chatter", "/secret"]
        .iter()
        .map(|t| ferry::TopicRule {
            pattern: (*t).into(),
            transport: Some(kind),
            ..Default::default()
        })
        .collect();
    c
}

fn over_tcp(c: Config) -> Config {
    pinned(c, ferry::TransportKind::Tcp)
}

fn over_udp(c: Config) -> Config {
    pinned(c, ferry::TransportKind::Udp)
}

/// Publishes samples carrying `marker` from `talker` to `listener` over TCP;
/// whether the marker crossed `lo` in clear (`None` without the right to
/// capture), and the writer's connection protection.
fn marker_on_the_wire(
    domain: u16,
    mode: Mode,
    d: &Dir,
    shape: fn(Config) -> Config,
) -> (Option<bool>, String) {
    let ks = (mode != Mode::Off).then_some(d.0.as_path());
    let (talker, listener) = pair(domain, mode, ks, shape);
    let (p, s) = chatter(&talker, &listener);
    let protection = p.connections()[0].protection.clone();
    let cap = ferry_testkit::capture::Capture::open("lo");
    if let Some(c) = &cap {
        c.drain();
    }
    let marker = format!("FERRYMARK{}{domain}", std::process::id());
    // Small and large samples (a large one spans many TLS records).
    for i in 0..40usize {
        let data = if i % 10 == 9 {
            marker.repeat(4000)
        } else {
            format!("{marker} {i}")
        };
        p.publish(std_msgs::String { data }).unwrap();
        let got = s.recv_timeout(Duration::from_secs(5)).expect("delivered");
        assert!(got.data.starts_with(&marker), "sample {i} corrupted");
    }
    let seen = cap.map(|c| {
        c.count_marker(marker.as_bytes(), Duration::from_millis(500), |_| false)
            .1
            > 0
    });
    (seen, protection)
}

#[test]
fn tcp_between_enforcing_runtimes_is_tls_and_no_payload_crosses_the_wire_in_clear() {
    no_payload_in_clear("tls-wire", (166, 167), over_tcp, "tls");
}

/// Enforcing runtimes on the path `shape` pins (domain `domains.0`) show
/// `protection` and no payload on `lo`; the same path plain (domain
/// `domains.1`) shows the payload to the same capture (the control).
fn no_payload_in_clear(
    name: &str,
    domains: (u16, u16),
    shape: fn(Config) -> Config,
    protection: &str,
) {
    let d = keystore(name);
    let (seen, got) = marker_on_the_wire(domains.0, Mode::Enforce, &d, shape);
    assert!(got.starts_with(protection), "{got}");
    if let Some(seen) = seen {
        assert!(!seen, "the payload crossed lo in clear under enforce");
        let (plain, got) = marker_on_the_wire(domains.1, Mode::Off, &d, shape);
        assert_eq!(got, "none");
        assert_eq!(
            plain,
            Some(true),
            "the capture does not see payloads at all"
        );
    } else {
        eprintln!("SKIPPED the capture: no AF_PACKET socket (needs root)");
    }
}

#[test]
fn a_writer_whose_grants_deny_the_topic_is_refused_at_the_tls_accept() {
    writer_refused_at_the_accept(168, over_tcp);
}

#[test]
fn a_writer_whose_grants_deny_the_topic_is_refused_at_the_udp_accept() {
    writer_refused_at_the_accept(223, over_udp);
}

/// An intruder whose grants do not allow publishing `/secret` tries, over
/// the path `shape` pins: refused by discovery and at the reader's accept.
fn writer_refused_at_the_accept(domain: u16, shape: fn(Config) -> Config) {
    let d = keystore(&format!("deny-{domain}"));
    // The intruder may subscribe /chatter but not publish /secret; it runs
    // permissive, so its own check only warns, and it tries to write.
    let intruder = node(
        "intruder",
        shape(cfg(
            domain,
            Mode::Permissive,
            Some(&d.0),
            Some("/robot1/intruder"),
        )),
    )
    .unwrap();
    let listener = node(
        "listener",
        shape(cfg(
            domain,
            Mode::Enforce,
            Some(&d.0),
            Some("/robot1/listener"),
        )),
    )
    .unwrap();
    let s = listener
        .subscriber::<std_msgs::String>("/secret")
        .build()
        .unwrap();
    let p = intruder
        .publisher::<std_msgs::String>("/secret")
        .build()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let _ = p.publish(std_msgs::String {
        data: "injected".into(),
    });
    assert!(
        s.recv_timeout(Duration::from_secs(1)).is_err(),
        "an injected sample arrived"
    );
    // Refused twice: the listener's discovery dropped the intruder's
    // publisher record (never matched), and the intruder, which does see
    // the listener, connected anyway and was refused at the accept.
    let (discovery, accept) = (
        listener.discovery_stats().security.denied,
        listener.connection_stats().denied,
    );
    assert!(discovery > 0, "the intruder's record was not dropped");
    assert!(accept > 0, "the intruder's connection was not refused");
}

#[test]
fn udp_between_enforcing_runtimes_is_sealed_and_no_payload_crosses_the_wire_in_clear() {
    no_payload_in_clear("udp-wire", (221, 222), over_udp, "aead");
}

/// Adds to `out` the IP packets captured off `lo` within `limit` whose UDP
/// payload is a sealed ferry datagram (`FX`, version 1, kind 3) to or from
/// `port`, each once.
fn sealed_packets(
    cap: &ferry_testkit::capture::Capture,
    limit: Duration,
    port: u16,
    out: &mut Vec<Vec<u8>>,
) {
    let end = std::time::Instant::now() + limit;
    let mut buf = vec![0u8; 70_000];
    while std::time::Instant::now() < end {
        let Some(n) = cap.next(&mut buf) else {
            continue;
        };
        // Ethernet (14) | IPv4 | UDP (8) | payload.
        let ip = &buf[14.min(n)..n];
        if ip.len() < 28 || ip[0] >> 4 != 4 || ip[9] != 17 {
            continue;
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let ports = &ip[ihl.min(ip.len())..(ihl + 4).min(ip.len())];
        let ours = ports.len() == 4
            && (ports[..2] == port.to_be_bytes() || ports[2..] == port.to_be_bytes());
        let payload = &ip[(ihl + 8).min(ip.len())..];
        if ours && payload.starts_with(b"FX\x01\x03") && !out.iter().any(|p| p == ip) {
            out.push(ip.to_vec());
        }
    }
}

/// The reader's UDP port, from the writer's connection (`udp/addr:port`).
fn udp_port(p: &ferry::Publisher<std_msgs::String>) -> u16 {
    p.connections()[0]
        .locator
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a udp/addr:port locator")
}

/// Sends a whole IPv4 packet as it is (source address included) from a
/// raw socket: a replay exactly as an attacker on the link would make it.
fn inject(packet: &[u8]) {
    // SAFETY: plain socket calls on valid buffers; the fd is closed here.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW);
        assert!(fd >= 0, "raw socket");
        let mut to: libc::sockaddr_in = std::mem::zeroed();
        to.sin_family = libc::AF_INET as u16;
        to.sin_addr.s_addr = u32::from_ne_bytes([packet[16], packet[17], packet[18], packet[19]]);
        libc::sendto(
            fd,
            packet.as_ptr().cast(),
            packet.len(),
            0,
            &to as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        );
        libc::close(fd);
    }
}

#[test]
fn replayed_and_tampered_udp_datagrams_are_dropped_and_counted() {
    let Some(cap) = ferry_testkit::capture::Capture::open("lo") else {
        eprintln!("SKIPPED: no AF_PACKET socket (needs root)");
        return;
    };
    let d = keystore("udp-replay");
    let (talker, listener) = pair(224, Mode::Enforce, Some(&d.0), over_udp);
    let (p, s) = chatter(&talker, &listener);
    // The listener's UDP port: its side of every datagram of the stream.
    let port = udp_port(&p);
    cap.drain();
    let mut packets = Vec::new();
    for i in 0..20 {
        p.publish(std_msgs::String {
            data: format!("sample {i}"),
        })
        .unwrap();
        assert!(s.recv_timeout(Duration::from_secs(5)).is_ok(), "sample {i}");
        sealed_packets(&cap, Duration::from_millis(20), port, &mut packets);
    }
    sealed_packets(&cap, Duration::from_millis(300), port, &mut packets);
    assert!(
        packets.len() >= 20,
        "captured {} sealed datagrams",
        packets.len()
    );
    let before = listener.connection_stats().udp;
    let before_talker = talker.connection_stats().udp;
    for pkt in &packets {
        // UDP checksum off: on `lo` the captured one is left to offload.
        let mut replay = pkt.clone();
        let ihl = usize::from(replay[0] & 0x0f) * 4;
        replay[ihl + 6] = 0;
        replay[ihl + 7] = 0;
        inject(&replay);
        // Tampered: a counter never used (so the replay window lets it
        // through to authentication) and one ciphertext byte flipped.
        let mut t = replay.clone();
        t[ihl + 8 + 15] = 0x7f;
        let last = t.len() - 1;
        t[last] ^= 0x01;
        inject(&t);
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        s.try_recv().is_none(),
        "a replayed datagram delivered a sample again"
    );
    let (after, after_talker) = (
        listener.connection_stats().udp,
        talker.connection_stats().udp,
    );
    let replayed =
        after.replayed + after_talker.replayed - before.replayed - before_talker.replayed;
    let failed = after.aead_failed + after_talker.aead_failed
        - before.aead_failed
        - before_talker.aead_failed;
    assert!(
        replayed >= packets.len() as u64 / 2 && failed >= packets.len() as u64 / 2,
        "{} packets replayed: replayed {replayed}, failed authentication {failed}",
        packets.len()
    );
    // And the stream still works.
    p.publish(std_msgs::String {
        data: "after".into(),
    })
    .unwrap();
    let got = s
        .recv_timeout(Duration::from_secs(5))
        .expect("delivered after");
    assert_eq!(got.data, "after");
}

/// A reliable 100 Hz stream of `secs` from the talker to the listener
/// (enforce, the path and settings `shape` gives): every sample arrives,
/// in order. Returns the runtimes and the ports.
fn long_stream(
    name: &str,
    domain: u16,
    shape: fn(Config) -> Config,
    secs: u64,
) -> (
    Node,
    Node,
    ferry::Publisher<std_msgs::String>,
    ferry::Subscriber<std_msgs::String>,
) {
    let d = keystore(name);
    let (talker, listener) = pair(domain, Mode::Enforce, Some(&d.0), shape);
    let qos = ferry::Qos::default().reliable().keep_all();
    let p = talker
        .publisher::<std_msgs::String>("/chatter")
        .qos(qos)
        .build()
        .unwrap();
    let s = listener
        .subscriber::<std_msgs::String>("/chatter")
        .qos(qos)
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, Duration::from_secs(10)));
    let t0 = std::time::Instant::now();
    let mut sent = 0u32;
    while t0.elapsed() < Duration::from_secs(secs) {
        p.publish(std_msgs::String {
            data: sent.to_string(),
        })
        .unwrap();
        sent += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    for i in 0..sent {
        let got = s
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("sample {i} of {sent} missing"));
        assert_eq!(got.data, i.to_string(), "out of order or lost");
    }
    (talker, listener, p, s)
}

#[test]
fn udp_keys_are_renewed_on_a_long_stream_without_losing_a_sample() {
    // 6 s: about six new handshakes under a live stream.
    let (talker, listener, _p, s) = long_stream(
        "udp-rekey",
        225,
        |c| {
            let mut c = over_udp(c);
            c.security.udp_rekey_s = Some(1);
            c
        },
        6,
    );
    let (a, b) = (
        talker.connection_stats().udp,
        listener.connection_stats().udp,
    );
    assert!(a.sessions >= 4 && b.sessions >= 4, "{a:?} {b:?}");
    assert_eq!((a.aead_failed, b.aead_failed), (0, 0));
    // The reader's side says who the channel proved.
    let r = s.connections();
    assert!(
        r.iter()
            .all(|c| c.protection == "aead (from /robot1/talker)")
            && !r.is_empty(),
        "{r:?}"
    );
}

#[test]
fn tls_keys_are_renewed_on_a_long_tcp_stream_without_losing_a_sample() {
    // 4 s: a key update about every second under a live stream (the
    // reader answers each with its own).
    let (_talker, listener, p, s) = long_stream(
        "tcp-rekey",
        228,
        |c| {
            let mut c = over_tcp(c);
            c.security.tcp_rekey_s = Some(1);
            c
        },
        4,
    );
    let c = p.connections();
    assert_eq!(c.len(), 1, "one connection for the whole stream: {c:?}");
    let renewed: u32 = c[0]
        .protection
        .split("keys renewed ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        (2..=5).contains(&renewed),
        "key updates on a 4 s stream with tcp_rekey_s = 1: `{}`",
        c[0].protection
    );
    assert_eq!(listener.connection_stats().tls_refused, 0);
    let r = s.connections();
    assert!(
        r.len() == 1 && r[0].protection == "tls (from /robot1/talker)",
        "{r:?}"
    );
}

#[test]
fn a_talker_whose_certificate_expires_mid_stream_is_cut_off_over_tcp() {
    expiry_cuts_off(98, over_tcp);
}

#[test]
fn a_talker_whose_certificate_expires_mid_stream_is_cut_off_over_udp() {
    expiry_cuts_off(99, over_udp);
}

/// A talker streams to a listener on the path `shape` pins; its
/// certificate ends 5 s in: the stream must stop within the lease after.
fn expiry_cuts_off(domain: u16, shape: fn(Config) -> Config) {
    let d = keystore(&format!("expiry-{domain}"));
    // The talker's certificate re-issued (same key, same grants) to end
    // in 5 s; the listener's stays valid for a day.
    let now = std::time::SystemTime::now();
    let short = Validity {
        not_before: now - Duration::from_secs(300),
        not_after: now + Duration::from_secs(5),
    };
    let only_talker = d.0.join("policy-talker.yaml");
    std::fs::write(
        &only_talker,
        format!(
            "version: 1\ndomains: [{domain}]\nidentities:\n  /robot1/talker:\n    allow: {{ publish: [/chatter] }}\n"
        ),
    )
    .unwrap();
    let ks = ferry_security::Keystore::open(&d.0).unwrap();
    create_permissions(&ks, &only_talker, short).unwrap();
    let (talker, listener) = pair(domain, Mode::Enforce, Some(&d.0), shape);
    let (p, s) = chatter(&talker, &listener);
    let expiry = std::time::Instant::now()
        + now
            .elapsed()
            .map_or(Duration::ZERO, |e| Duration::from_secs(5).saturating_sub(e));
    // 20 Hz for 14 s: delivered until the certificate ends, then, once
    // its beacons are refused and its lease (3 s) runs out, nothing.
    let mut last_delivered = None;
    let mut delivered = 0u32;
    let t0 = std::time::Instant::now();
    let mut i = 0u32;
    while t0.elapsed() < Duration::from_secs(14) {
        p.publish(std_msgs::String {
            data: i.to_string(),
        })
        .unwrap();
        i += 1;
        while s.recv_timeout(Duration::from_millis(50)).is_ok() {
            delivered += 1;
            last_delivered = Some(std::time::Instant::now());
        }
    }
    let last = last_delivered.expect("nothing was delivered while the certificate was valid");
    assert!(delivered >= 40, "only {delivered} samples while valid");
    assert!(
        last > expiry - Duration::from_secs(1),
        "the stream stopped {:?} before the certificate ended",
        expiry.saturating_duration_since(last)
    );
    assert!(
        last < expiry + Duration::from_secs(3 + 3),
        "still delivered {:?} after the certificate ended",
        last.saturating_duration_since(expiry)
    );
}

#[test]
fn permissive_refuses_a_plain_hello_in_the_name_of_a_runtime_that_speaks_sealed() {
    let d = keystore("udp-downgrade");
    let (talker, listener) = pair(227, Mode::Permissive, Some(&d.0), over_udp);
    let (p, s) = chatter(&talker, &listener);
    assert!(p.connections()[0].protection.starts_with("aead"));
    let port = udp_port(&p);
    let before = listener.connection_stats().denied;
    // A plain HELLO naming the talker's publisher, from another socket: the
    // stream it would open would carry anything in the talker's name.
    let hello = ferry_wire::rudp::encode_hello(
        0x5151,
        &ferry_wire::rudp::Hello {
            from: p.id(),
            to: s.id(),
            reliable: true,
        },
    );
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.send_to(&hello, ("127.0.0.1", port)).unwrap();
    let t0 = std::time::Instant::now();
    while listener.connection_stats().denied == before && t0.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Refused at once, or closed as soon as discovery proves the talker
    // (when the forged HELLO came first).
    assert_eq!(listener.connection_stats().denied, before + 1);
    // The real stream carries on.
    p.publish(std_msgs::String {
        data: "still here".into(),
    })
    .unwrap();
    let got = s.recv_timeout(Duration::from_secs(5)).expect("delivered");
    assert_eq!(got.data, "still here");
}
