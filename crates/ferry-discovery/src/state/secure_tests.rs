//! Signed discovery on the simulated network, with real keystores made by
//! `ferry_security::create` (real Ed25519 certificates and signatures).

use std::sync::Arc;

use ferry_security::create::{create_identity, create_keystore, create_permissions, Validity};
use ferry_security::{Identity, Keystore};
use ferry_testkit::TempDir;

use super::tests::{addr, endpoint, info, Net};
use super::*;
use ferry_wire::beacon::{EndpointRecord, FLAG_PLAIN_OK, TRAILER_LEN};
use ferry_wire::EndpointKind;

/// `/a`, `/b`, `/c` may publish `/topic*`; `/b` may also publish `/b/**`
/// but not `/b/secret`.
const POLICY: &str = r#"
version: 1
identities:
  /a: { allow: { publish: ["/topic*"], subscribe: ["/**"] } }
  /b:
    allow: { publish: ["/topic*", "/b/**"] }
    deny: { publish: [/b/secret] }
  /c: { allow: { publish: ["/topic*"] } }
"#;

/// A keystore with identities `/a`, `/b`, `/c` and [`POLICY`].
fn keystore(name: &str) -> (TempDir, Keystore) {
    let dir = TempDir::new(name);
    let ks = create_keystore(dir.path(), Validity::days(30)).unwrap();
    for e in ["/a", "/b", "/c"] {
        create_identity(&ks, e, Validity::days(30)).unwrap();
    }
    let policy = dir.path().join("policy-in.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    create_permissions(&ks, &policy, Validity::days(30)).unwrap();
    (dir, ks)
}

/// A runtime of participant id `100 + i`, signing as `enclave` (or plain
/// without), publishing `/topic{i}`.
fn node(ks: Option<(&Keystore, &str)>, i: usize, enforce: bool, now: Instant) -> Discovery {
    let mut cfg = Config::new(0, ParticipantId(i as u64 + 100), info());
    cfg.auth = ks.map(|(ks, enclave)| Auth {
        identity: Arc::new(Identity::load(ks, enclave).unwrap()),
        enforce,
    });
    let mut d = Discovery::new(cfg, now);
    d.set_records(vec![endpoint(1, &format!("/topic{i}"))], now);
    d
}

fn secure_net(ks: &Keystore, enclaves: &[&str], loss: u64, seed: u64) -> Net {
    let now = Instant::now();
    let nodes = enclaves
        .iter()
        .enumerate()
        .map(|(i, e)| node(Some((ks, e)), i, true, now))
        .collect();
    let mut net = Net::with(nodes, now, loss, seed);
    net.strict = false;
    net
}

#[test]
fn signed_runtimes_find_each_other_and_every_beacon_is_signed() {
    let (_d, ks) = keystore("disc-signed");
    let mut net = secure_net(&ks, &["/a", "/b", "/c"], 0, 1);
    net.tap = Some(Vec::new());
    net.run(Duration::from_millis(500));
    assert!(
        net.all_know_all(),
        "three signed runtimes did not converge in 0.5 s"
    );
    for (i, t) in net.tap.take().unwrap() {
        let p = Beacon::parse_signed(&t.bytes).unwrap();
        assert!(
            p.trailer.is_some(),
            "node {i} sent an unsigned {:?}",
            p.beacon.body
        );
        assert_eq!(
            p.flags & FLAG_PLAIN_OK,
            0,
            "enforce offers plain peers nothing"
        );
        assert!(t.bytes.len() <= ferry_wire::beacon::DEFAULT_MTU);
    }
    for n in &net.nodes {
        let s = n.stats().security;
        assert_eq!(
            (
                s.bad_signature,
                s.replayed,
                s.foreign_ca,
                s.unsigned,
                s.denied
            ),
            (0, 0, 0, 0, 0),
            "{s:?}"
        );
    }
    // At rest: signed heartbeats only (114 B).
    net.tap = Some(Vec::new());
    net.run(Duration::from_secs(3));
    let tap = net.tap.take().unwrap();
    assert!(!tap.is_empty());
    assert!(tap.iter().all(|(_, t)| t.bytes.len() == 25 + TRAILER_LEN));
    assert!(net.all_know_all());
}

#[test]
fn signed_runtimes_converge_under_loss() {
    let (_d, ks) = keystore("disc-loss");
    for seed in 1..12 {
        let mut net = secure_net(&ks, &["/a", "/b", "/c", "/a"], 20, seed);
        net.run(Duration::from_secs(6));
        assert!(
            net.all_know_all(),
            "seed {seed}: no convergence at 20 % loss"
        );
    }
}

#[test]
fn unsigned_and_foreign_beacons_are_ignored_and_counted() {
    let (_d, ks) = keystore("disc-foreign-1");
    let (_d2, other) = keystore("disc-foreign-2");
    let now = Instant::now();
    let nodes = vec![
        node(Some((&ks, "/a")), 0, true, now),
        node(None, 1, false, now),
        node(Some((&other, "/b")), 2, true, now),
    ];
    let mut net = Net::with(nodes, now, 0, 3);
    net.strict = false;
    net.run(Duration::from_secs(2));
    for (i, j) in [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)] {
        assert!(!net.knows(i, j), "{i} learned {j}");
    }
    let a = net.nodes[0].stats().security;
    assert!(a.unsigned > 0, "{a:?}");
    assert!(a.foreign_ca > 0, "{a:?}");
    let c = net.nodes[2].stats().security;
    assert!(c.foreign_ca > 0, "{c:?}");
    let plain = net.nodes[1].stats().security;
    assert!(plain.needs_security > 0, "{plain:?}");
}

#[test]
fn off_and_enforce_never_meet_while_permissive_meets_both() {
    let (_d, ks) = keystore("disc-modes");
    let now = Instant::now();
    let nodes = vec![
        node(None, 0, false, now),
        node(Some((&ks, "/a")), 1, false, now),
        node(Some((&ks, "/b")), 2, true, now),
    ];
    let mut net = Net::with(nodes, now, 0, 5);
    net.strict = false;
    net.run(Duration::from_secs(2));
    assert!(!net.knows(0, 2) && !net.knows(2, 0), "off and enforce met");
    for (i, j) in [(0, 1), (1, 0), (1, 2), (2, 1)] {
        assert!(net.knows(i, j), "{i} did not learn {j}");
    }
}

/// Two signed runtimes that know each other, with every datagram recorded.
fn pair(ks: &Keystore) -> Net {
    let mut net = secure_net(ks, &["/a", "/b"], 0, 9);
    net.tap = Some(Vec::new());
    net.run(Duration::from_millis(500));
    assert!(net.all_know_all());
    net
}

/// What node `i` sent while the tap was on.
fn sent_by(net: &Net, i: usize) -> Vec<Transmit> {
    net.tap
        .as_ref()
        .unwrap()
        .iter()
        .filter(|(from, _)| *from == i)
        .map(|(_, t)| t.clone())
        .collect()
}

#[test]
fn a_tampered_beacon_is_dropped() {
    let (_d, ks) = keystore("disc-tamper");
    let mut net = pair(&ks);
    let sent = |kind: fn(&BeaconBody) -> bool| {
        net.tap
            .as_ref()
            .unwrap()
            .iter()
            .rev()
            .find(|(i, t)| *i == 1 && kind(&Beacon::parse(&t.bytes).unwrap().body))
            .map(|(_, t)| t.bytes.clone())
            .unwrap()
    };
    let hb = sent(|b| matches!(b, BeaconBody::Heartbeat { .. }));
    let part = sent(|b| matches!(b, BeaconBody::Announce(_)));
    let now = net.now;
    // A heartbeat's revision (it would change state: always verified),
    // and an announcement's body, trailer stamp and signature.
    let flips = [
        (&hb, 17),
        (&part, 33),
        (&part, part.len() - 80),
        (&part, part.len() - 1),
    ];
    for (d, at) in flips {
        let mut bad = d.clone();
        bad[at] ^= 0x40;
        let r = net.nodes[0].handle_datagram(now, addr(1), Via::Multicast, &bad);
        assert!(
            matches!(r, Err(DatagramError::BadSignature(_))),
            "byte {at} flipped: {r:?}"
        );
    }
    assert_eq!(net.nodes[0].stats().security.bad_signature, 4);
    assert!(net.knows(0, 1));
    // A heartbeat that would change nothing, soon after a verified one, is
    // not verified (lazy) and not taken.
    net.run(Duration::from_millis(2));
    let skipped = net.nodes[0].stats().security.skipped;
    let mut same = hb.clone();
    same[hb.len() - 1] ^= 1;
    let _ = net.nodes[0].handle_datagram(now, addr(1), Via::Multicast, &same);
    let s = net.nodes[0].stats().security;
    assert_eq!(s.skipped + s.bad_signature, skipped + 5, "{s:?}");
}

#[test]
fn a_replayed_beacon_is_refused_and_a_forged_bye_does_not_remove() {
    let (_d, ks) = keystore("disc-replay");
    let mut net = pair(&ks);
    let old = sent_by(&net, 1);
    net.run(Duration::from_secs(3));
    let now = net.now;
    let before = net.nodes[0].stats().security.replayed;
    for t in &old {
        let _ = net.nodes[0].handle_datagram(now, addr(1), Via::Multicast, &t.bytes);
    }
    let s = net.nodes[0].stats().security;
    assert!(s.replayed > before, "{s:?}");
    assert!(net.knows(0, 1));
    // A Bye signed by another identity of the same CA, for /b's id.
    let mut forger = node(Some((&ks, "/c")), 1, true, now);
    forger.leave();
    while let Some(t) = forger.poll_transmit() {
        let p = Beacon::parse_signed(&t.bytes).unwrap();
        if matches!(p.beacon.body, BeaconBody::Bye) {
            let _ = net.nodes[0].handle_datagram(now, addr(1), Via::Multicast, &t.bytes);
        }
    }
    assert!(net.knows(0, 1), "a Bye signed by another key removed /b");
}

#[test]
fn a_recording_of_a_runtime_that_is_gone_never_becomes_visible() {
    let (_d, ks) = keystore("disc-record");
    let net = pair(&ks);
    let recording = sent_by(&net, 1);
    assert!(recording.len() > 3);
    // A new runtime (same identity as node 0, new id) hears the recording
    // of /b, which has exited: its challenges go unanswered.
    let mut now = net.now + Duration::from_secs(1);
    let mut fresh = node(Some((&ks, "/a")), 5, true, now);
    for round in 0..20 {
        for t in &recording {
            let _ = fresh.handle_datagram(now, addr(1), Via::Multicast, &t.bytes);
        }
        for _ in 0..500 {
            now += Duration::from_millis(1);
            fresh.handle_timeout(now);
            while fresh.poll_transmit().is_some() {}
        }
        assert!(
            fresh.participant_info(ParticipantId(101)).is_none(),
            "round {round}: a recording became a participant"
        );
    }
    while let Some(e) = fresh.poll_event() {
        assert!(!matches!(e, Event::ParticipantJoined(_)), "{e:?}");
    }
    let s = fresh.stats().security;
    assert!(s.unproven > 0 || s.replayed > 0, "{s:?}");
}

#[test]
fn records_the_owner_may_not_publish_are_dropped() {
    let (_d, ks) = keystore("disc-grants");
    let mut net = secure_net(&ks, &["/a", "/b"], 0, 4);
    let now = net.now;
    net.nodes[1].set_records(
        vec![
            endpoint(1, "/topic1"),
            endpoint(2, "/b/secret"),
            endpoint(3, "/b/open"),
            endpoint(4, "/elsewhere"),
        ],
        now,
    );
    net.run(Duration::from_millis(500));
    let b = net.nodes[0].participant_info(ParticipantId(101)).unwrap();
    let topics: Vec<&str> = b.endpoints.values().map(|e| e.topic.as_str()).collect();
    assert_eq!(topics, ["/topic1", "/b/open"]);
    assert!(net.nodes[0].stats().security.denied >= 2);
}

#[test]
fn another_identity_cannot_speak_for_a_known_participant() {
    let (_d, ks) = keystore("disc-pin");
    let mut net = pair(&ks);
    let now = net.now;
    // /c claims /b's participant id, from /b's own address.
    let mut forger = node(Some((&ks, "/c")), 1, true, now);
    forger.set_records(vec![], now);
    let before = net.nodes[0].stats();
    for _ in 0..50 {
        forger.handle_timeout(now);
        while let Some(t) = forger.poll_transmit() {
            let _ = net.nodes[0].handle_datagram(now, addr(1), Via::Multicast, &t.bytes);
        }
    }
    let after = net.nodes[0].stats();
    assert!(after.not_owner > before.not_owner, "{after:?}");
    let b = net.nodes[0].participant_info(ParticipantId(101)).unwrap();
    assert!(b.endpoints.contains_key(&1), "/b's records were replaced");
}

#[test]
fn a_forged_certificate_chunk_does_not_block_the_real_one() {
    let (_d, ks) = keystore("disc-chunk");
    let now = Instant::now();
    let b = Identity::load(&ks, "/b").unwrap();
    let mut net = secure_net(&ks, &["/a", "/b"], 0, 6);
    // Before anyone met, a stranger sends a one-byte "certificate" claiming
    // /b's key id, from another address.
    let forged = Beacon {
        domain: 0,
        participant: ParticipantId(999),
        body: BeaconBody::Credential {
            offset: 0,
            total: 1,
            bytes: vec![0],
        },
    }
    .encode();
    let forged = ferry_wire::beacon::seal(forged, 0, b.key_id(), 1, 0, |_| [0; 64]);
    let r = net.nodes[0].handle_datagram(now, addr(7), Via::Multicast, &forged);
    assert!(r.is_err());
    net.run(Duration::from_millis(500));
    assert!(net.all_know_all(), "the forged chunk kept /b's key out");
}

#[test]
fn a_recording_replayed_after_a_goodbye_does_not_bring_the_participant_back() {
    let (_d, ks) = keystore("disc-bye");
    let mut net = pair(&ks);
    net.nodes[1].leave();
    net.run(Duration::from_millis(5));
    assert!(!net.knows(0, 1), "the goodbye was not taken");
    net.alive[1] = false;
    let recording = sent_by(&net, 1);
    let mut now = net.now;
    for _ in 0..10 {
        for t in &recording {
            let _ = net.nodes[0].handle_datagram(now, addr(1), Via::Multicast, &t.bytes);
        }
        now += Duration::from_millis(300);
        net.nodes[0].handle_timeout(now);
        while net.nodes[0].poll_transmit().is_some() {}
        assert!(!net.knows(0, 1), "a recording brought /b back");
    }
    assert!(net.nodes[0].stats().security.replayed > 0);
}

#[test]
fn two_keys_racing_for_a_new_id_are_both_held_off_until_one_proves_it() {
    let (_d, ks) = keystore("disc-race");
    let now = Instant::now();
    let mut a = node(Some((&ks, "/a")), 0, true, now);
    // /c claims id 101 first, then /b (the real 101) is heard.
    let mut forger = node(Some((&ks, "/c")), 1, true, now);
    let mut real = node(Some((&ks, "/b")), 1, true, now);
    for d in [&mut forger, &mut real] {
        d.handle_timeout(now);
        while let Some(t) = d.poll_transmit() {
            let _ = a.handle_datagram(now, addr(1), Via::Multicast, &t.bytes);
        }
    }
    assert!(a.participant_info(ParticipantId(101)).is_none());
    assert!(a.stats().not_owner > 0, "the second key was not noticed");
    // The forger goes quiet; after the contest the real one is learned.
    let mut net = Net::with(vec![a, real], now, 0, 8);
    net.strict = false;
    net.run(CONTESTED + Duration::from_secs(3));
    assert!(
        net.all_know_all(),
        "the real participant was not learned after the contest"
    );
}

#[test]
fn a_runtime_may_serve_the_admin_plane_of_its_own_nodes_only() {
    let (_d, ks) = keystore("disc-admin");
    let mut net = secure_net(&ks, &["/a", "/c"], 0, 5);
    let now = net.now;
    let service = |entity: u32, node: u32, name: &str| {
        Record::Endpoint(EndpointRecord {
            entity,
            node,
            kind: EndpointKind::Service,
            topic: name.into(),
            type_name: "ferry_msgs/srv/Admin".into(),
            type_hash: ferry_wire::TypeHash([2; 32]),
            qos: ferry_wire::Qos::default(),
        })
    };
    let node_rec = |id: u32, ns: &str, name: &str| {
        Record::Node(ferry_wire::beacon::NodeRecord {
            id,
            name: name.into(),
            namespace: ns.into(),
        })
    };
    // `/c` (no grant beyond publishing /topic*) runs node /robot1/arm and
    // serves its admin plane, and also poses as /robot1/cam's.
    net.nodes[1].set_records(
        vec![
            node_rec(7, "/robot1", "arm"),
            service(1, 7, "/_ferry/admin/robot1/arm"),
            service(2, 7, "/_ferry/admin/robot1/cam"),
            service(3, 9, "/_ferry/admin/robot1/ghost"),
        ],
        now,
    );
    net.run(Duration::from_millis(500));
    let c = net.nodes[0].participant_info(ParticipantId(101)).unwrap();
    let names: Vec<&str> = c.endpoints.values().map(|e| e.topic.as_str()).collect();
    assert_eq!(names, ["/_ferry/admin/robot1/arm"]);
    assert_eq!(net.nodes[0].stats().security.denied, 2);
    assert_eq!(
        c.identity.as_ref().map(|p| p.enclave()),
        Some("/c"),
        "the proven identity is kept with the participant"
    );
}
