//! Protected UDP alone: one sealed datagram and its opening, per call, on
//! two `UdpSecurity` instances after a real Noise IK handshake (no sockets):
//! what a datagram costs each side, apart from the path.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use ferry_security::udp::{Opened, Outcome, ProvenUdp, Tuning, UdpSecurity};
use ferry_security::Identity;
use ferry_wire::ParticipantId;
use serde_json::json;

use super::per_call;

/// µs per seal and per open, and the handshake's round (both sides' work).
pub fn run(identity: &Arc<Identity>, n: usize) -> serde_json::Value {
    let peer = Arc::new(
        identity
            .verify_peer(identity.cert_der(), 0)
            .expect("own certificate checks"),
    );
    let dir: Arc<RwLock<Vec<(ParticipantId, ProvenUdp)>>> = Arc::default();
    let make = |p: u64| {
        let d = dir.clone();
        UdpSecurity::new(
            ParticipantId(p),
            0,
            true,
            Box::new(move |q| {
                let v = d.read().ok()?;
                v.iter().find(|(x, _)| *x == q).map(|(_, u)| u.clone())
            }),
            Tuning::default(),
        )
        .expect("udp security")
    };
    let (a, b) = (make(1), make(2));
    for (p, u) in [(1, &a), (2, &b)] {
        dir.write().expect("lock").push((
            ParticipantId(p),
            ProvenUdp {
                key: u.public_key(),
                identity: peer.clone(),
            },
        ));
    }
    let (a_addr, b_addr): (SocketAddr, SocketAddr) = (
        "10.0.0.1:7400".parse().expect("addr"),
        "10.0.0.2:7400".parse().expect("addr"),
    );
    let now = Instant::now();
    let mut out = Vec::new();
    let t = Instant::now();
    let s = a.seal(now, b_addr, ParticipantId(2), b"x", &mut out);
    let shake1 = s.shake.expect("a handshake starts");
    let Opened::Reply(shake2) = b.open(now, a_addr, &shake1, &mut out) else {
        panic!("no SHAKE2");
    };
    assert!(matches!(
        a.open(now, b_addr, &shake2, &mut out),
        Opened::Done
    ));
    let handshake = t.elapsed();
    let mut sealed = Vec::new();
    let mut opened = Vec::new();
    let mut row = |size: usize| {
        let inner = vec![7u8; size];
        let seal = per_call(n, || {
            let s = a.seal(now, b_addr, ParticipantId(2), &inner, &mut sealed);
            assert_eq!(s.outcome, Outcome::Sealed);
        });
        // Fresh datagrams to open (each counter once).
        let batch: Vec<Vec<u8>> = (0..n + 9)
            .map(|_| {
                a.seal(now, b_addr, ParticipantId(2), &inner, &mut sealed);
                sealed.clone()
            })
            .collect();
        let mut it = batch.iter();
        let open = per_call(n, || {
            let d = it.next().expect("one per call");
            let r = b.open(now, a_addr, d, &mut opened);
            assert!(matches!(r, Opened::Data { .. }), "{r:?}");
        });
        json!({
            "bytes": size,
            "seal_us": seal.as_secs_f64() * 1e6,
            "open_us": open.as_secs_f64() * 1e6,
            "seal_gb_s": size as f64 / seal.as_secs_f64() / 1e9,
        })
    };
    let rows = vec![row(1400), row(65_000)];
    json!({
        "handshake_us": handshake.as_secs_f64() * 1e6,
        "datagrams": rows,
    })
}
