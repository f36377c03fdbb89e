//! The sans-IO discovery state machine (crates/ferry-discovery/src/state.rs).
//!
//! The input is a script of received datagrams on a virtual clock:
//!
//! ```text
//! op  := ctrl:u8  dt:u8  len:u16le  datagram[len]      (repeated)
//! ctrl bit 7   : arrived via Via::Unicast (otherwise Via::Multicast)
//! ctrl bit 6   : first jump the clock to poll_timeout() (lease expiry etc.)
//! ctrl bits 0-3: sender address 10.0.0.{n+1}:{7400+n}
//! dt           : then advance the clock by dt * 20 ms (0..=5.1 s, past the 3 s lease)
//! ```
//! A short last op takes whatever bytes remain. After every datagram the
//! driver loop runs: handle_timeout, then drain poll_transmit and poll_event.
//! At the end the runtime leaves and everything is drained again.
//!
//! Properties: nothing panics; every datagram discovery asks to send is a
//! beacon that parses, in our domain, from our participant id.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use ferry_discovery::{Config, Discovery, Event, Via};
use ferry_wire::beacon::{Beacon, BeaconBody, EndpointRecord, NodeRecord, ParticipantInfo, Record};
use ferry_wire::{EndpointKind, Locator, ParticipantId, Qos, TransportKind, TypeHash};
use libfuzzer_sys::fuzz_target;

const DOMAIN: u16 = 0;
const ME: ParticipantId = ParticipantId(0x00c0_ffee);

fn machine(now: Instant) -> Discovery {
    let info = ParticipantInfo {
        host_id: 1,
        net_id: 1,
        pid: 1,
        lease_ms: 3000,
        name: "fuzz".into(),
        locators: vec![Locator::socket(
            TransportKind::Tcp,
            "127.0.0.1:7400".parse().expect("address"),
        )],
    };
    let mut d = Discovery::new(Config::new(DOMAIN, ME, info), now);
    d.set_records(
        vec![
            Record::Node(NodeRecord {
                id: 1,
                name: "fuzz".into(),
                namespace: "/".into(),
            }),
            Record::Endpoint(EndpointRecord {
                entity: 1,
                node: 1,
                kind: EndpointKind::Publisher,
                topic: "/chatter".into(),
                type_name: "std_msgs/msg/String".into(),
                type_hash: TypeHash([1; 32]),
                qos: Qos::default(),
            }),
        ],
        now,
    );
    d
}

fn drive(d: &mut Discovery, now: Instant) {
    d.handle_timeout(now);
    drain(d);
}

fn drain(d: &mut Discovery) {
    while let Some(t) = d.poll_transmit() {
        let b = Beacon::parse(&t.bytes).expect("discovery sent an unparseable beacon");
        assert_eq!(b.domain, DOMAIN);
        assert_eq!(b.participant, ME);
        if let BeaconBody::Announce(a) = &b.body {
            assert!(a.part < a.parts);
        }
    }
    while let Some(e) = d.poll_event() {
        if let Event::ParticipantJoined(id) | Event::ParticipantLeft { id, .. } = e {
            assert_ne!(id, ME, "discovery reported itself as a remote");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let start = Instant::now();
    let mut now = start;
    let mut d = machine(now);
    drive(&mut d, now);

    let mut rest = data;
    while !rest.is_empty() {
        let ctrl = rest[0];
        let dt = rest.get(1).copied().unwrap_or(0);
        let len = match rest.get(2..4) {
            Some(l) => usize::from(u16::from_le_bytes([l[0], l[1]])),
            None => 0,
        };
        rest = rest.get(4..).unwrap_or(&[]);
        let (datagram, tail) = rest.split_at(len.min(rest.len()));
        rest = tail;

        if ctrl & 0x40 != 0 {
            if let Some(t) = d.poll_timeout() {
                now = now.max(t);
            }
        }
        now += Duration::from_millis(u64::from(dt) * 20);
        let via = if ctrl & 0x80 != 0 {
            Via::Unicast
        } else {
            Via::Multicast
        };
        let n = ctrl & 0x0f;
        let from = SocketAddr::new(
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, n + 1)),
            7400 + u16::from(n),
        );
        let _ = d.handle_datagram(now, from, via, datagram);
        drive(&mut d, now);
    }

    d.leave();
    drain(&mut d);
    now += Duration::from_secs(10);
    drive(&mut d, now);
});
