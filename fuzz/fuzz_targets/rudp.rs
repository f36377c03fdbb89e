//! Reliable-UDP datagrams (crates/ferry-wire/src/rudp.rs) and both state
//! machines of crates/ferry-rudp.
//!
//! Input: a script of datagrams, each `len u8` + bytes, fed alternately to a
//! Receiver (as if from a writer) and a Sender (as if from a reader), with
//! time advancing 1 ms per step. Properties: nothing panics; every parsed
//! datagram re-encodes (heartbeats); the receiver's memory stays within its
//! configured bound; everything either emits parses. Every datagram also
//! goes through an `Endpoint` (from one of 4 source addresses) that
//! accepts every HELLO it can: its reader streams stay within its bounds.
//! Bit 7 of a datagram's length byte holds the receiver's samples back (an
//! application without room) for that step.
#![no_main]

use std::time::{Duration, Instant};

use ferry_rudp::{Endpoint, EndpointConfig, Receiver, ReceiverConfig, Routed, Sender, SenderConfig};
use ferry_wire::rudp::{self, Datagram, Packet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::parse(data) {
        if let Datagram::Heartbeat(h) = p.body {
            assert_eq!(Packet::parse(&rudp::encode_heartbeat(p.stream, &h)).unwrap().body, Datagram::Heartbeat(h));
        }
    }
    let t0 = Instant::now();
    let mut rcfg = ReceiverConfig::new(0);
    rcfg.max_pending_bytes = 1 << 20;
    rcfg.max_sample = 256 << 10;
    let mut rx = Receiver::new(rcfg, t0);
    let mut tx = Sender::new(SenderConfig::new(0), t0);
    let _ = tx.write(t0, bytes::Bytes::from(vec![1u8; 5000]), 1);
    let mut rest = data;
    let mut now = t0;
    let mut i = 0u32;
    let mut buf = Vec::new();
    let mut ecfg = EndpointConfig::new(ferry_wire::ParticipantId(0));
    ecfg.max_incoming = 8;
    ecfg.max_incoming_per_peer = 3;
    let mut ep = Endpoint::new(ecfg);
    ep.open(t0, "10.0.0.1:1".parse().unwrap(), 0, rudp::Hello {
        from: ferry_wire::EndpointId { participant: ferry_wire::ParticipantId(1), entity: 1 },
        to: ferry_wire::EndpointId { participant: ferry_wire::ParticipantId(2), entity: 1 },
        reliable: true,
    });
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        let (dgram, tail) = tail.split_at(n);
        rest = tail;
        now += Duration::from_millis(1);
        let from = std::net::SocketAddr::from(([10, 0, 0, (i % 4) as u8], 1));
        if let Routed::Incoming(inc) = ep.handle(now, from, dgram) {
            let _ = ep.accept(now, &inc);
        }
        ep.handle_timeout(now);
        while ep.poll_transmit(now, &mut buf).is_some() {
            assert!(Packet::parse(&buf).is_ok());
        }
        while ep.poll_event().is_some() {}
        assert!(ep.stats().readers <= 8, "{:?}", ep.stats());
        // The application's room comes and goes (bit 7 of the length).
        let held = len & 0x80 != 0;
        rx.set_held(held, now);
        if i % 2 == 0 {
            let _ = rx.handle_datagram(now, dgram);
            rx.handle_timeout(now);
        } else {
            let _ = tx.handle_datagram(now, dgram);
            tx.handle_timeout(now);
        }
        i += 1;
        assert!(rx.pending_bytes() <= 1 << 20, "receiver holds {} bytes", rx.pending_bytes());
        while rx.poll_transmit(&mut buf) {
            assert!(Packet::parse(&buf).is_ok());
        }
        for _ in 0..64 {
            if !tx.poll_transmit(now, &mut buf) {
                break;
            }
            assert!(Packet::parse(&buf).is_ok());
        }
        if !held {
            while rx.poll_sample().is_some() {}
        }
    }
});
