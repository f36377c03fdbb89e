//! Protected UDP sessions between two runtimes on a simulated network
//! (virtual time, seeded loss), with real identities from a real keystore:
//! the handshake, sealing both ways, tampering, replay, a participant that
//! is not who it claims, enforce's refusal of plain datagrams, and keys
//! renewed on a long stream without losing a datagram.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_security::create::{create_identity, create_keystore, create_permissions, Validity};
use ferry_security::udp::{Opened, Outcome, ProvenUdp, Tuning, UdpSecurity};
use ferry_security::{Identity, Keystore};
use ferry_wire::ParticipantId;
use parking_lot::RwLock;

type Directory = Arc<RwLock<HashMap<ParticipantId, ProvenUdp>>>;

fn keystore(name: &str) -> (ferry_testkit::TempDir, Keystore) {
    let d = ferry_testkit::TempDir::new(name);
    let ks = create_keystore(d.path(), Validity::days(1)).unwrap();
    for e in ["/a", "/b", "/mallory"] {
        create_identity(&ks, e, Validity::days(1)).unwrap();
    }
    let policy = d.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "version: 1\nidentities:\n  /a: { allow: { publish: [/t] } }\n  /b: { allow: { subscribe: [/t] } }\n  /mallory: { allow: { subscribe: [/t] } }\n",
    )
    .unwrap();
    create_permissions(&ks, &policy, Validity::days(1)).unwrap();
    (d, ks)
}

struct Runtime {
    id: ParticipantId,
    addr: SocketAddr,
    udp: UdpSecurity,
}

/// A runtime signing as `enclave`, registered in `dir` as discovery would.
fn runtime(
    ks: &Keystore,
    enclave: &str,
    id: u64,
    port: u16,
    dir: &Directory,
    enforce: bool,
    tuning: Tuning,
) -> Runtime {
    let identity = Identity::load(ks, enclave).unwrap();
    let d = dir.clone();
    let udp = UdpSecurity::new(
        ParticipantId(id),
        0,
        enforce,
        Box::new(move |p| d.read().get(&p).cloned()),
        tuning,
    )
    .unwrap();
    let peer = identity.verify_peer(identity.cert_der(), 0).unwrap();
    dir.write().insert(
        ParticipantId(id),
        ProvenUdp {
            key: udp.public_key(),
            identity: Arc::new(peer),
        },
    );
    Runtime {
        id: ParticipantId(id),
        addr: format!("10.0.0.{id}:{port}").parse().unwrap(),
        udp,
    }
}

/// A datagram in flight.
struct Flight {
    to: usize,
    from: SocketAddr,
    bytes: Vec<u8>,
}

/// Two (or more) runtimes, a virtual clock and a lossy wire.
struct Net {
    rts: Vec<Runtime>,
    now: Instant,
    wire: Vec<Flight>,
    /// Inner datagrams delivered, per receiver.
    got: Vec<Vec<Vec<u8>>>,
    loss_every: Option<u64>,
    sent: u64,
}

impl Net {
    fn new(rts: Vec<Runtime>) -> Net {
        let n = rts.len();
        Net {
            rts,
            now: Instant::now(),
            wire: Vec::new(),
            got: vec![Vec::new(); n],
            loss_every: None,
            sent: 0,
        }
    }

    fn index_of(&self, addr: SocketAddr) -> usize {
        self.rts.iter().position(|r| r.addr == addr).unwrap()
    }

    fn put(&mut self, from: usize, to: usize, bytes: Vec<u8>) {
        self.sent += 1;
        if self.loss_every.is_some_and(|k| self.sent.is_multiple_of(k)) {
            return;
        }
        self.wire.push(Flight {
            to,
            from: self.rts[from].addr,
            bytes,
        });
    }

    /// `from` sends `inner` to `to` through its protection.
    fn send(&mut self, from: usize, to: usize, inner: &[u8]) -> Outcome {
        let mut out = Vec::new();
        let (addr, peer) = (self.rts[to].addr, self.rts[to].id);
        let s = self.rts[from]
            .udp
            .seal(self.now, addr, peer, inner, &mut out);
        if let Some(shake) = s.shake {
            self.put(from, to, shake);
        }
        match s.outcome {
            Outcome::Sealed => self.put(from, to, out),
            Outcome::Plain => self.put(from, to, inner.to_vec()),
            _ => {}
        }
        s.outcome
    }

    /// Delivers everything in flight (answers included).
    fn deliver(&mut self) {
        for _ in 0..8 {
            let flights = std::mem::take(&mut self.wire);
            if flights.is_empty() {
                return;
            }
            for f in flights {
                let mut out = Vec::new();
                let r = self.rts[f.to]
                    .udp
                    .open(self.now, f.from, &f.bytes, &mut out);
                match r {
                    Opened::Data { len, .. } => self.got[f.to].push(out[..len].to_vec()),
                    Opened::Plain => self.got[f.to].push(f.bytes.clone()),
                    Opened::Reply(b) => {
                        let back = self.index_of(f.from);
                        self.put(f.to, back, b);
                    }
                    Opened::Done | Opened::Dropped(_) => {}
                }
            }
        }
    }

    fn step(&mut self, d: Duration) {
        self.now += d;
        for r in &self.rts {
            r.udp.handle_timeout(self.now);
        }
    }
}

fn pair(name: &str, tuning: Tuning) -> (ferry_testkit::TempDir, Net) {
    let (d, ks) = keystore(name);
    let dir = Directory::default();
    let a = runtime(&ks, "/a", 1, 7400, &dir, true, tuning);
    let b = runtime(&ks, "/b", 2, 7400, &dir, true, tuning);
    (d, Net::new(vec![a, b]))
}

#[test]
fn a_handshake_then_sealed_datagrams_both_ways() {
    let (_d, mut net) = pair("udp-basic", Tuning::default());
    // No session yet: held, and the handshake starts.
    assert_eq!(net.send(0, 1, b"hello 0"), Outcome::Held);
    net.deliver();
    assert_eq!(net.rts[0].udp.stats().sessions, 1);
    assert_eq!(net.rts[1].udp.stats().sessions, 1);
    for i in 0..100 {
        assert_eq!(
            net.send(0, 1, format!("a→b {i}").as_bytes()),
            Outcome::Sealed
        );
    }
    net.deliver();
    assert_eq!(net.got[1].len(), 100);
    assert_eq!(net.got[1][99], b"a\xe2\x86\x92b 99");
    // The responder answers on the confirmed session.
    assert_eq!(net.send(1, 0, b"ack"), Outcome::Sealed);
    net.deliver();
    assert_eq!(net.got[0], vec![b"ack".to_vec()]);
    // Nothing on the wire carries the plain bytes.
    let mut out = Vec::new();
    let addr = net.rts[1].addr;
    net.rts[0]
        .udp
        .seal(net.now, addr, ParticipantId(2), b"SECRETSECRET", &mut out);
    assert!(!out.windows(12).any(|w| w == b"SECRETSECRET"));
    assert_eq!(out.len(), 12 + ferry_wire::seal::SEAL_OVERHEAD);
}

#[test]
fn tampered_and_replayed_datagrams_are_dropped_and_counted() {
    let (_d, mut net) = pair("udp-tamper", Tuning::default());
    net.send(0, 1, b"x");
    net.deliver();
    let (to, from) = (net.rts[1].addr, net.rts[0].addr);
    let mut sealed = Vec::new();
    net.rts[0]
        .udp
        .seal(net.now, to, ParticipantId(2), b"payload", &mut sealed);
    let b = &net.rts[1].udp;
    let mut out = Vec::new();
    for i in 0..sealed.len() {
        let mut t = sealed.clone();
        t[i] ^= 0x40;
        assert!(
            matches!(b.open(net.now, from, &t, &mut out), Opened::Dropped(_)),
            "byte {i} flipped and still opened"
        );
    }
    assert!(matches!(
        b.open(net.now, from, &sealed, &mut out),
        Opened::Data { len: 7, .. }
    ));
    assert!(matches!(
        b.open(net.now, from, &sealed, &mut out),
        Opened::Dropped("replayed")
    ));
    let other: SocketAddr = "10.0.0.9:7400".parse().unwrap();
    assert!(matches!(
        b.open(net.now, other, &sealed, &mut out),
        Opened::Dropped(_)
    ));
    let s = b.stats();
    assert!(s.aead_failed > 0 && s.replayed == 1, "{s:?}");
    // Under enforce a plain datagram is refused (as were the copies whose
    // first two bytes the loop above flipped).
    let before = b.stats().plaintext_refused;
    assert!(matches!(
        b.open(net.now, from, b"FU\x03plain", &mut out),
        Opened::Dropped(_)
    ));
    assert_eq!(b.stats().plaintext_refused, before + 1);
}

#[test]
fn a_runtime_that_is_not_who_it_claims_gets_no_session() {
    let (_d, ks) = keystore("udp-mallory");
    let dir = Directory::default();
    let a = runtime(&ks, "/a", 1, 7400, &dir, true, Tuning::default());
    let b = runtime(&ks, "/b", 2, 7400, &dir, true, Tuning::default());
    // Mallory holds a valid identity of the same CA, and claims to be
    // participant 1 (a) to b: its static key is not the one a announced.
    let other = Directory::default();
    let m = runtime(&ks, "/mallory", 1, 7400, &other, true, Tuning::default());
    let b_proven = dir.read()[&b.id].clone();
    other.write().insert(b.id, b_proven);
    let mut net = Net::new(vec![a, b, m]);
    net.rts[2].addr = "10.0.0.3:7400".parse().unwrap();
    assert_eq!(net.send(2, 1, b"let me in"), Outcome::Held);
    net.deliver();
    assert_eq!(net.rts[1].udp.stats().sessions, 0);
    assert_eq!(net.rts[1].udp.stats().shake_refused, 1);
    // And a participant discovery has not proved gets none either.
    dir.write().remove(&ParticipantId(1));
    net.send(0, 1, b"unproven");
    net.deliver();
    assert_eq!(net.rts[1].udp.stats().sessions, 0);
}

#[test]
fn a_lost_answer_is_repeated_and_an_old_handshake_replayed_is_refused() {
    let (_d, mut net) = pair("udp-shake-loss", Tuning::default());
    // The first SHAKE2 is lost: drop everything b answers once.
    net.send(0, 1, b"1");
    let f = net.wire.pop().unwrap();
    let shake1 = f.bytes.clone();
    let mut out = Vec::new();
    let r = net.rts[1].udp.open(net.now, f.from, &f.bytes, &mut out);
    assert!(matches!(r, Opened::Reply(_)));
    // 100 ms later a repeats its SHAKE1 (the same bytes) and gets the same
    // answer without new work.
    net.step(Duration::from_millis(150));
    assert_eq!(net.send(0, 1, b"2"), Outcome::Held);
    let again = net.wire.pop().unwrap();
    assert_eq!(again.bytes, shake1);
    net.wire.push(again);
    net.deliver();
    assert_eq!(net.rts[0].udp.stats().sessions, 1);
    assert_eq!(net.send(0, 1, b"3"), Outcome::Sealed);
    net.deliver();
    assert_eq!(net.got[1], vec![b"3".to_vec()]);
    // A later handshake, then the first one replayed: refused.
    net.step(Duration::from_secs(200));
    net.send(0, 1, b"rekey");
    net.deliver();
    let r = net.rts[1]
        .udp
        .open(net.now, net.rts[0].addr, &shake1, &mut out);
    assert!(matches!(r, Opened::Dropped(_)), "{r:?}");
    assert_eq!(net.rts[1].udp.stats().shake_replayed, 1);
}

#[test]
fn keys_are_renewed_on_a_long_stream_without_losing_a_datagram() {
    let tuning = Tuning {
        rekey_after: Duration::from_secs(2),
        rekey_datagrams: 500,
        ..Tuning::default()
    };
    let (_d, mut net) = pair("udp-rekey", tuning);
    net.send(0, 1, b"start");
    net.deliver();
    // The responder seals only once the initiator did (key confirmation).
    assert_eq!(net.send(1, 0, b"too early"), Outcome::Held);
    assert_eq!(net.send(0, 1, b"go"), Outcome::Sealed);
    net.deliver();
    // 60 s at 100 datagrams/s each way; 1 % of datagrams lost on the wire
    // (handshakes included), answers every 10 ms.
    net.loss_every = Some(97);
    let mut sent = [0u64; 2];
    for tick in 0..6000u64 {
        for (from, to) in [(0, 1), (1, 0)] {
            let msg = format!("{from}:{tick}");
            match net.send(from, to, msg.as_bytes()) {
                Outcome::Sealed => sent[from] += 1,
                other => panic!("tick {tick}: {from}→{to} {other:?}"),
            }
        }
        net.deliver();
        net.step(Duration::from_millis(10));
    }
    let lost = net.sent / 97;
    let got = (net.got[0].len() + net.got[1].len()) as u64;
    assert!(
        got + lost >= sent[0] + sent[1],
        "sent {sent:?}, got {got}, the wire lost {lost}"
    );
    for r in &net.rts {
        let s = r.udp.stats();
        assert!(
            s.sessions >= 25,
            "keys renewed only {} times: {s:?}",
            s.sessions
        );
        assert_eq!(
            (s.aead_failed, s.replayed, s.unknown_session),
            (0, 0, 0),
            "{s:?}"
        );
    }
}

#[test]
fn a_peer_handshaking_from_ever_new_addresses_holds_a_bounded_number_of_sessions() {
    let (_d, mut net) = pair("udp-addresses", Tuning::default());
    let b_addr = net.rts[1].addr;
    let mut out = Vec::new();
    for port in 0..40u16 {
        // A fresh handshake of a's (the last one given up), arriving from
        // a new source port each time.
        net.step(Duration::from_secs(6));
        let s = net.rts[0]
            .udp
            .seal(net.now, b_addr, ParticipantId(2), b"x", &mut out);
        let shake1 = s.shake.expect("a new SHAKE1");
        let from: SocketAddr = format!("10.0.0.1:{}", 20_000 + port).parse().unwrap();
        let r = net.rts[1].udp.open(net.now, from, &shake1, &mut out);
        assert!(matches!(r, Opened::Reply(_)), "{r:?}");
    }
    let b = &net.rts[1].udp;
    assert_eq!(b.stats().sessions, 40);
    assert!(
        b.live_sessions() <= 8,
        "{} sessions held",
        b.live_sessions()
    );
}

#[test]
fn sessions_outlive_an_outage_that_outlasts_the_lease_and_end_with_a_new_key() {
    let (_d, ks) = keystore("udp-outage");
    let dir = Directory::default();
    let t = Tuning::default();
    let a = runtime(&ks, "/a", 1, 7400, &dir, true, t);
    let b = runtime(&ks, "/b", 2, 7400, &dir, true, t);
    let mut net = Net::new(vec![a, b]);
    net.send(0, 1, b"x");
    net.deliver();
    assert_eq!(net.send(0, 1, b"before"), Outcome::Sealed);
    net.deliver();
    // A 20 s outage: each side's discovery lets the other expire.
    let saved: Vec<(ParticipantId, ProvenUdp)> = dir.write().drain().collect();
    for _ in 0..20 {
        net.step(Duration::from_secs(1));
    }
    // The link is back before discovery has heard again: the streams carry
    // on under the sessions they had (no handshake needed).
    assert_eq!(net.send(0, 1, b"after"), Outcome::Sealed);
    assert_eq!(net.send(1, 0, b"ack"), Outcome::Sealed);
    net.deliver();
    assert_eq!(net.got[1].last().map(Vec::as_slice), Some(&b"after"[..]));
    assert_eq!(net.got[0].last().map(Vec::as_slice), Some(&b"ack"[..]));
    // Discovery hears b again, with another certificate (re-issued): the
    // old sessions end at once, and a new handshake follows.
    dir.write().extend(saved);
    let other = Identity::load(&ks, "/mallory").unwrap();
    let new_b = Arc::new(other.verify_peer(other.cert_der(), 0).unwrap());
    dir.write().get_mut(&ParticipantId(2)).unwrap().identity = new_b;
    net.step(Duration::from_secs(1));
    assert_eq!(net.rts[0].udp.live_sessions(), 0);
    assert_eq!(net.send(0, 1, b"renewed"), Outcome::Held);
}

#[test]
fn another_identity_at_the_same_address_neither_reads_nor_displaces_a_session() {
    let (_d, ks) = keystore("udp-same-address");
    let dir = Directory::default();
    let t = Tuning::default();
    let a = runtime(&ks, "/a", 1, 7400, &dir, true, t);
    let b = runtime(&ks, "/b", 2, 7400, &dir, true, t);
    // Mallory: a valid identity of the same CA, proven as participant 3.
    let m = runtime(&ks, "/mallory", 3, 7400, &dir, true, t);
    let mut net = Net::new(vec![a, b, m]);
    net.send(0, 1, b"x");
    net.deliver();
    assert_eq!(net.send(0, 1, b"a to b"), Outcome::Sealed);
    net.deliver();
    let (a_addr, b_addr) = (net.rts[0].addr, net.rts[1].addr);
    // Mallory's handshakes reach b with a's source address, many times.
    let mut out = Vec::new();
    for _ in 0..10 {
        net.step(Duration::from_secs(6));
        let s = net.rts[2]
            .udp
            .seal(net.now, b_addr, ParticipantId(2), b"m", &mut out);
        let shake = s.shake.expect("a SHAKE1");
        let r = net.rts[1].udp.open(net.now, a_addr, &shake, &mut out);
        assert!(matches!(r, Opened::Reply(_)), "{r:?}");
    }
    // b still seals for a under a's own session, which a opens; nothing
    // b sends to a is sealed under mallory's keys.
    assert_eq!(net.send(1, 0, b"b to a"), Outcome::Sealed);
    net.deliver();
    assert_eq!(net.got[0].last().map(Vec::as_slice), Some(&b"b to a"[..]));
    assert!(
        net.rts[1].udp.live_sessions() <= 1 + 1,
        "mallory's answers piled up"
    );
}

#[test]
fn a_forged_answer_does_not_cancel_a_handshake() {
    let (_d, mut net) = pair("udp-forged-shake2", Tuning::default());
    assert_eq!(net.send(0, 1, b"x"), Outcome::Held);
    let shake1 = net.wire.pop().unwrap();
    // The initiator's index is in clear (bytes 4..8): a forged SHAKE2 for
    // it, from the responder's address, arrives first.
    let index = u32::from_le_bytes(shake1.bytes[4..8].try_into().unwrap());
    let forged = ferry_wire::seal::shake2(99, index, &[7u8; 48]);
    let mut out = Vec::new();
    let (a_addr, b_addr) = (net.rts[0].addr, net.rts[1].addr);
    assert!(matches!(
        net.rts[0].udp.open(net.now, b_addr, &forged, &mut out),
        Opened::Dropped(_)
    ));
    // The real answer still completes it.
    let Opened::Reply(shake2) = net.rts[1]
        .udp
        .open(net.now, a_addr, &shake1.bytes, &mut out)
    else {
        panic!("no answer");
    };
    assert!(matches!(
        net.rts[0].udp.open(net.now, b_addr, &shake2, &mut out),
        Opened::Done
    ));
    assert_eq!(net.send(0, 1, b"through"), Outcome::Sealed);
}
