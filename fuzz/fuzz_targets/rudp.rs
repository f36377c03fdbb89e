//! Reliable-UDP datagrams (crates/ferry-wire/src/rudp.rs) and both state
//! machines of crates/ferry-rudp.
//!
//! Input: a script of datagrams, each `len u8` + bytes, fed alternately to a
//! Receiver (as if from a writer) and a Sender (as if from a reader), with
//! time advancing 1 ms per step. Properties: nothing panics; every parsed
//! datagram re-encodes (heartbeats); the receiver's memory stays within its
//! configured bound; everything either emits parses.
#![no_main]

use std::time::{Duration, Instant};

use ferry_rudp::{Receiver, ReceiverConfig, Sender, SenderConfig};
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
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        let (dgram, tail) = tail.split_at(n);
        rest = tail;
        now += Duration::from_millis(1);
        if i % 2 == 0 {
            let _ = rx.handle_datagram(now, dgram);
            rx.handle_timeout(now);
        } else {
            let _ = tx.handle_datagram(now, dgram);
            tx.handle_timeout(now);
        }
        i += 1;
        assert!(rx.pending_bytes() <= 1 << 20, "receiver holds {} bytes", rx.pending_bytes());
        while let Some(d) = rx.poll_transmit() {
            assert!(Packet::parse(&d).is_ok());
        }
        for _ in 0..64 {
            match tx.poll_transmit(now) {
                Some(d) => assert!(Packet::parse(&d).is_ok()),
                None => break,
            }
        }
        while rx.poll_sample().is_some() {}
    }
});
