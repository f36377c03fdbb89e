//! Protected UDP datagrams and their handshake
//! (crates/ferry-wire/src/seal.rs, crates/ferry-security/src/udp.rs).
//!
//! Properties: `SealView::parse` never panics, and a datagram that parses
//! re-encodes to the same bytes; `UdpSecurity::open` never panics on any
//! input, whether it reaches a responder (SHAKE1 into Noise) or an
//! initiator waiting for its SHAKE2, and never yields data from bytes that
//! were not sealed by the peer.
#![no_main]

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ferry_security::create::{create_identity, create_keystore, Validity};
use ferry_security::udp::{Opened, ProvenUdp, Tuning, UdpSecurity};
use ferry_security::Identity;
use ferry_wire::seal::{sealed_header, shake1, shake2, SealView, SEALED_HEADER};
use ferry_wire::ParticipantId;
use libfuzzer_sys::fuzz_target;

struct Pair {
    a: UdpSecurity,
    b: UdpSecurity,
    a_addr: SocketAddr,
    b_addr: SocketAddr,
    t0: Instant,
}

/// Participant → what discovery proved (filled once at start).
#[derive(Default)]
struct Proven(std::sync::RwLock<Vec<(ParticipantId, ProvenUdp)>>);

impl Proven {
    fn get(&self, p: ParticipantId) -> Option<ProvenUdp> {
        let v = self.0.read().ok()?;
        v.iter().find(|(q, _)| *q == p).map(|(_, u)| u.clone())
    }
}

fn pair() -> &'static Pair {
    static P: OnceLock<Pair> = OnceLock::new();
    P.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ferry-fuzz-seal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let ks = create_keystore(&dir, Validity::days(1)).expect("keystore");
        create_identity(&ks, "/a", Validity::days(1)).expect("identity");
        let id = Identity::load(&ks, "/a").expect("load");
        let peer = Arc::new(id.verify_peer(id.cert_der(), 0).expect("own certificate"));
        let map: Arc<Proven> = Arc::default();
        let make = |p: u64| {
            let m = map.clone();
            UdpSecurity::new(
                ParticipantId(p),
                0,
                true,
                Box::new(move |q| m.get(q)),
                Tuning {
                    shake_repeat: Duration::ZERO,
                    shakes_per_s: u32::MAX,
                    ..Tuning::default()
                },
            )
            .expect("udp security")
        };
        let (a, b) = (make(1), make(2));
        for (p, u) in [(1, &a), (2, &b)] {
            map.0.write().unwrap().push((
                ParticipantId(p),
                ProvenUdp {
                    key: u.public_key(),
                    identity: peer.clone(),
                },
            ));
        }
        let b_addr: SocketAddr = "10.0.0.2:7400".parse().unwrap();
        Pair {
            a,
            b,
            a_addr: "10.0.0.1:7400".parse().unwrap(),
            b_addr,
            t0: Instant::now(),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = SealView::parse(data) {
        let again = match v {
            SealView::Shake1 {
                sender_index,
                initiator,
                responder,
                noise,
            } => shake1(sender_index, initiator, responder, noise),
            SealView::Shake2 {
                sender_index,
                receiver_index,
                noise,
            } => shake2(sender_index, receiver_index, noise),
            SealView::Sealed {
                receiver_index,
                phase,
                counter,
                sealed,
                ..
            } => {
                let mut d = sealed_header(receiver_index, phase, counter).to_vec();
                d.extend_from_slice(sealed);
                assert_eq!(d.len(), SEALED_HEADER + sealed.len());
                d
            }
        };
        assert_eq!(again, data, "parse/encode is not the identity");
    }
    let p = pair();
    let now = p.t0;
    // Keep a handshake of a's waiting for its SHAKE2.
    let mut out = Vec::new();
    let _ = p.a.seal(now, p.b_addr, ParticipantId(2), b"x", &mut out);
    for (u, from) in [(&p.a, p.b_addr), (&p.b, p.a_addr)] {
        if let Opened::Data { .. } = u.open(now, from, data, &mut out) {
            panic!("bytes never sealed by the peer opened as data");
        }
    }
});
