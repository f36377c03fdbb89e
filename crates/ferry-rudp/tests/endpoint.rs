//! The endpoint on virtual time: stream opening and its retries, routing,
//! and the bounds a forged-HELLO flood runs into.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use ferry_rudp::{
    AcceptError, CloseReason, Dropped, Endpoint, EndpointConfig, EndpointEvent, Receiver,
    ReceiverConfig, Routed, Sender, SenderConfig,
};
use ferry_wire::rudp::{encode_hello, Hello};
use ferry_wire::{EndpointId, ParticipantId};

fn pid(n: u8) -> ParticipantId {
    ParticipantId(u64::from(n))
}

fn ep(p: ParticipantId, e: u32) -> EndpointId {
    EndpointId {
        participant: p,
        entity: e,
    }
}

fn addr(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port)
}

fn hello(reader_runtime: ParticipantId) -> Hello {
    Hello {
        from: ep(pid(1), 7),
        to: ep(reader_runtime, 3),
        reliable: true,
    }
}

/// One writer stream from A to B over a perfect link: HELLO, accept, data
/// flows both ways through the routing, HELLOs stop once answered.
#[test]
fn a_stream_opens_routes_and_stops_saying_hello() {
    let t0 = Instant::now();
    let (a_addr, b_addr) = (addr([10, 0, 0, 1], 7000), addr([10, 0, 0, 2], 7000));
    let mut a = Endpoint::new(EndpointConfig::new(pid(1)));
    let mut b = Endpoint::new(EndpointConfig::new(pid(2)));
    let w = a.open(t0, b_addr, 77, hello(pid(2)));
    let mut sender = Sender::new(SenderConfig::new(77), t0);
    let mut buf = Vec::new();

    // Unanswered: one HELLO now, the next one a hello_interval later.
    let t = a.poll_transmit(t0, &mut buf).expect("HELLO due now");
    assert_eq!((t.to, t.stream), (b_addr, w));
    assert!(a.poll_transmit(t0, &mut buf).is_none());
    assert_eq!(a.poll_timeout(), Some(t0 + Duration::from_millis(100)));
    let hello_bytes = buf.clone();

    let Routed::Incoming(inc) = b.handle(t0, a_addr, &hello_bytes) else {
        panic!("a HELLO for a new stream is Incoming");
    };
    assert_eq!((inc.peer, inc.stream), (a_addr, 77));
    let r = b.accept(t0, &inc).expect("room for one stream");
    assert_eq!(b.stats().half_open, 1);
    // The same HELLO again (our answer was lost) is HelloAgain, not a second stream.
    assert_eq!(b.handle(t0, a_addr, &hello_bytes), Routed::HelloAgain(r));
    assert!(matches!(b.accept(t0, &inc), Err(AcceptError::Exists(h)) if h == r));

    let mut receiver = Receiver::new(ReceiverConfig::new(77), t0);
    receiver.acknowledge(t0);
    assert!(receiver.poll_transmit(&mut buf));
    match a.handle(t0, b_addr, &buf) {
        Routed::Writer(h, p) => {
            assert_eq!(h, w);
            sender.handle_packet(t0, &p);
        }
        other => panic!("an ACKNACK goes to the writer stream, got {other:?}"),
    }
    assert!(!a.is_opening(w));
    assert!(a
        .poll_transmit(t0 + Duration::from_secs(5), &mut buf)
        .is_none());

    sender
        .write(t0, bytes::Bytes::from_static(b"hello"), 1)
        .expect("room");
    let mut sent = 0;
    while sender.poll_transmit(t0, &mut buf) {
        sent += 1;
        match b.handle(t0, a_addr, &buf) {
            Routed::Reader(h, p) => {
                assert_eq!(h, r);
                receiver.handle_packet_at(t0, t0, buf.len(), &p).unwrap();
            }
            other => panic!("data and heartbeats go to the reader stream, got {other:?}"),
        }
    }
    assert!(sent >= 1);
    assert_eq!(b.stats().half_open, 0, "data makes the stream established");
    assert_eq!(&receiver.poll_sample().unwrap().data[..], b"hello");
}

#[test]
fn hellos_repeat_until_answered_and_again_after_reopen() {
    let t0 = Instant::now();
    let mut a = Endpoint::new(EndpointConfig::new(pid(1)));
    let w = a.open(t0, addr([10, 0, 0, 2], 1), 5, hello(pid(2)));
    let mut buf = Vec::new();
    let mut sent = 0;
    let mut now = t0;
    while now < t0 + Duration::from_millis(1000) {
        while a.poll_transmit(now, &mut buf).is_some() {
            sent += 1;
        }
        now += Duration::from_millis(10);
    }
    assert_eq!(sent, 10, "one HELLO per 100 ms");
    a.reopen(now, w); // still opening: no change
    assert!(a.is_opening(w));
    // The path just became usable: the next HELLO goes now, once, and the
    // repeats resume 100 ms later.
    assert!(a.poll_transmit(now, &mut buf).is_some(), "due at 1000 ms");
    let soon = now + Duration::from_millis(30);
    assert!(a.poll_transmit(soon, &mut buf).is_none());
    a.hello_now(soon, w);
    assert!(a.poll_transmit(soon, &mut buf).is_some());
    assert!(a.poll_transmit(soon, &mut buf).is_none());
    assert_eq!(a.poll_timeout(), Some(soon + Duration::from_millis(100)));
    a.close(w);
    assert!(a
        .poll_transmit(now + Duration::from_secs(1), &mut buf)
        .is_none());
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn foreign_malformed_and_wrong_side_datagrams_are_dropped() {
    let t0 = Instant::now();
    let mut b = Endpoint::new(EndpointConfig::new(pid(2)));
    let from = addr([10, 0, 0, 1], 9);
    assert_eq!(
        b.handle(t0, from, &encode_hello(3, &hello(pid(9)))),
        Routed::Dropped(Dropped::NotForUs)
    );
    assert!(matches!(
        b.handle(t0, from, b"not a datagram"),
        Routed::Dropped(Dropped::Malformed(_))
    ));
    // Data for a stream nobody opened.
    let mut s = Sender::new(SenderConfig::new(3), t0);
    s.write(t0, bytes::Bytes::from_static(b"x"), 1).unwrap();
    let mut buf = Vec::new();
    let mut fake_ack = Receiver::new(ReceiverConfig::new(3), t0);
    fake_ack.acknowledge(t0);
    assert!(fake_ack.poll_transmit(&mut buf));
    s.handle_datagram(t0, &buf).unwrap();
    assert!(s.poll_transmit(t0, &mut buf));
    assert_eq!(
        b.handle(t0, from, &buf),
        Routed::Dropped(Dropped::UnknownStream)
    );
    // An ACKNACK sent to a reader stream.
    let Routed::Incoming(inc) = b.handle(t0, from, &encode_hello(3, &hello(pid(2)))) else {
        panic!()
    };
    b.accept(t0, &inc).unwrap();
    fake_ack.acknowledge(t0);
    assert!(fake_ack.poll_transmit(&mut buf));
    assert_eq!(
        b.handle(t0, from, &buf),
        Routed::Dropped(Dropped::UnknownStream),
        "an ACKNACK is for a writer stream, and b has none"
    );
    assert_eq!(b.stats().malformed, 1);
}

/// A data-carrying stream from `legit`; then `hellos` forged HELLOs from
/// spoofed addresses (a few hosts, many ports) and random stream ids.
fn flood(cfg: EndpointConfig, hellos: u32, spoofed_hosts: u8) -> (Endpoint, bool) {
    let t0 = Instant::now();
    let mut b = Endpoint::new(cfg);
    let legit = addr([10, 0, 0, 1], 7000);
    let Routed::Incoming(inc) = b.handle(t0, legit, &encode_hello(42, &hello(pid(2)))) else {
        panic!()
    };
    let r = b.accept(t0, &inc).unwrap();
    let mut s = Sender::new(SenderConfig::new(42), t0);
    let mut buf = Vec::new();
    let mut ack = Receiver::new(ReceiverConfig::new(42), t0);
    ack.acknowledge(t0);
    assert!(ack.poll_transmit(&mut buf));
    s.handle_datagram(t0, &buf).unwrap();
    s.write(t0, bytes::Bytes::from_static(b"d"), 1).unwrap();
    assert!(s.poll_transmit(t0, &mut buf));
    assert!(matches!(b.handle(t0, legit, &buf), Routed::Reader(h, _) if h == r));
    let data = buf.clone();

    let mut x = 0x1234_5678u32;
    for i in 0..hellos {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        // The legit host's address is spoofed too.
        let host = (i % u32::from(spoofed_hosts)) as u8 + 1;
        let from = addr([10, 0, 0, host], (x >> 16) as u16);
        let now = t0 + Duration::from_micros(u64::from(i));
        match b.handle(now, from, &encode_hello(x, &hello(pid(2)))) {
            Routed::Incoming(inc) => {
                let _ = b.accept(now, &inc);
            }
            Routed::HelloAgain(_) => {}
            other => panic!("{other:?}"),
        }
        let st = b.stats();
        assert!(st.readers <= b.config().max_incoming, "{st:?}");
    }
    while let Some(EndpointEvent::Closed(h, why)) = b.poll_event() {
        assert_ne!(h, r, "the stream carrying data was closed ({why:?})");
        assert_eq!(why, CloseReason::Evicted);
    }
    let still_routed = matches!(b.handle(t0, legit, &data), Routed::Reader(h, _) if h == r);
    (b, still_routed)
}

#[test]
fn a_forged_hello_flood_holds_the_tables_and_spares_streams_carrying_data() {
    let mut cfg = EndpointConfig::new(pid(2));
    cfg.max_incoming = 512;
    cfg.max_incoming_per_peer = 64;
    // 200,000 HELLOs from 50 spoofed hosts: the total bound is reached and
    // churned; from one host, the per-host bound.
    let (b, routed) = flood(cfg.clone(), 200_000, 50);
    assert!(routed, "the data stream survives the flood");
    let st = b.stats();
    assert!(st.readers <= 512 && st.half_open < 512, "{st:?}");
    assert!(st.evicted > 190_000, "{st:?}");
    let (b, routed) = flood(cfg, 50_000, 1);
    assert!(routed);
    assert!(b.stats().readers <= 64, "{:?}", b.stats());
}

#[test]
fn a_peer_whose_streams_all_carry_data_is_refused_not_evicted() {
    let t0 = Instant::now();
    let mut cfg = EndpointConfig::new(pid(2));
    cfg.max_incoming_per_peer = 2;
    let mut b = Endpoint::new(cfg);
    let from = addr([10, 0, 0, 1], 1);
    let mut established = Vec::new();
    for stream in [10u32, 11] {
        let Routed::Incoming(inc) = b.handle(t0, from, &encode_hello(stream, &hello(pid(2))))
        else {
            panic!()
        };
        established.push(b.accept(t0, &inc).unwrap());
        let mut s = Sender::new(SenderConfig::new(stream), t0);
        let mut buf = Vec::new();
        let mut ack = Receiver::new(ReceiverConfig::new(stream), t0);
        ack.acknowledge(t0);
        ack.poll_transmit(&mut buf);
        s.handle_datagram(t0, &buf).unwrap();
        s.write(t0, bytes::Bytes::from_static(b"d"), 1).unwrap();
        assert!(s.poll_transmit(t0, &mut buf));
        assert!(matches!(b.handle(t0, from, &buf), Routed::Reader(..)));
    }
    let Routed::Incoming(inc) = b.handle(t0, from, &encode_hello(12, &hello(pid(2)))) else {
        panic!()
    };
    assert!(matches!(
        b.accept(t0, &inc),
        Err(AcceptError::PeerFull { limit: 2, .. })
    ));
    // Another host still gets in.
    let other = addr([10, 0, 0, 2], 1);
    let Routed::Incoming(inc) = b.handle(t0, other, &encode_hello(12, &hello(pid(2)))) else {
        panic!()
    };
    assert!(b.accept(t0, &inc).is_ok());
    assert_eq!(b.stats().refused, 1);
}

#[test]
fn idle_reader_streams_close() {
    let t0 = Instant::now();
    let mut cfg = EndpointConfig::new(pid(2));
    cfg.idle_timeout = Duration::from_secs(5);
    let mut b = Endpoint::new(cfg);
    let from = addr([10, 0, 0, 1], 1);
    let Routed::Incoming(inc) = b.handle(t0, from, &encode_hello(1, &hello(pid(2)))) else {
        panic!()
    };
    let h = b.accept(t0, &inc).unwrap();
    let mut now = t0;
    let mut closed = None;
    for _ in 0..100 {
        now += Duration::from_millis(100);
        if b.poll_timeout().is_some_and(|t| t <= now) {
            b.handle_timeout(now);
        }
        if let Some(e) = b.poll_event() {
            closed = Some((e, now));
            break;
        }
    }
    let (e, at) = closed.expect("closed within 10 s");
    assert_eq!(e, EndpointEvent::Closed(h, CloseReason::Idle));
    assert!(at >= t0 + Duration::from_secs(5) && at <= t0 + Duration::from_secs(7));
    assert_eq!(b.stats().readers, 0);
    assert_eq!(b.poll_timeout(), None);
}

/// A runtime may write to its own reader through its own socket: both sides
/// of the stream then share address and id, and the endpoint keeps them apart.
#[test]
fn a_stream_to_itself_routes_each_side() {
    let t0 = Instant::now();
    let me = addr([127, 0, 0, 1], 7000);
    let mut e = Endpoint::new(EndpointConfig::new(pid(1)));
    let w = e.open(t0, me, 9, hello(pid(1)));
    let mut buf = Vec::new();
    e.poll_transmit(t0, &mut buf).unwrap();
    let Routed::Incoming(inc) = e.handle(t0, me, &buf) else {
        panic!("own HELLO is Incoming")
    };
    let r = e.accept(t0, &inc).unwrap();
    assert_ne!(w, r);
    let mut receiver = Receiver::new(ReceiverConfig::new(9), t0);
    receiver.acknowledge(t0);
    assert!(receiver.poll_transmit(&mut buf));
    assert!(matches!(e.handle(t0, me, &buf), Routed::Writer(h, _) if h == w));
    let st = e.stats();
    assert_eq!((st.writers, st.readers), (1, 1));
}
