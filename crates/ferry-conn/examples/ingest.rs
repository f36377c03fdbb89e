//! What one runtime spends learning one other runtime ("ingesting a record
//! set"): the discovery datagrams it receives from a runtime that starts
//! (its beacon and record parts, through `Discovery::handle_datagram`),
//! the events they give, and the connection table's work on them
//! (`Table::peer_up` / `endpoint_up`). `docs/design/host-discovery.md` §4
//! calls this *c*: with a thousand runtimes on a 2-vCPU lab, whether a
//! graph completes within 3 s depends on it.
//!
//! One receiver learns `N` runtimes one after another, each with a node, a
//! publisher and a service (as `ferry-disco`'s children and the crowd
//! example), in virtual time; only the receiver's own calls are timed
//! (wall clock), not the senders'. Repeated `--runs` times; the median run
//! is reported, with how the cost grows as the receiver's tables fill.
//!
//! `cargo run --release -p ferry-conn --example ingest -- [N] [RUNS]`

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_conn::{PeerInfo, Route, Table};
use ferry_discovery::{Config, Destination, Discovery, Event, Via};
use ferry_wire::beacon::{EndpointRecord, NodeRecord, ParticipantInfo, Record};
use ferry_wire::{EndpointKind, Locator, ParticipantId, Qos, TransportKind, TypeHash};

/// A path that reaches every runtime (the table's choice is not what is
/// measured here).
struct Everywhere;

impl Route for Everywhere {
    fn kind(&self) -> TransportKind {
        TransportKind::Udp
    }
    fn request_reply(&self) -> bool {
        true
    }
    fn reaches(&self, _: &PeerInfo, _: &PeerInfo) -> bool {
        true
    }
}

fn records(i: usize, topic: usize) -> Vec<Record> {
    let ep = |entity, kind, topic: String| {
        Record::Endpoint(EndpointRecord {
            entity,
            node: 1,
            kind,
            topic,
            type_name: "ferry_msgs/msg/RawBytes".into(),
            type_hash: TypeHash([2; 32]),
            qos: Qos::default(),
        })
    };
    vec![
        Record::Node(NodeRecord {
            id: 1,
            name: format!("n{i}"),
            namespace: "/".into(),
        }),
        ep(1, EndpointKind::Publisher, format!("/disco/t{topic}")),
        ep(2, EndpointKind::Service, format!("/n{i}/_ferry/admin")),
    ]
}

fn addr(i: usize) -> SocketAddr {
    let ip = IpAddr::V4(Ipv4Addr::new(10, 77, (i / 250) as u8, (i % 250 + 1) as u8));
    SocketAddr::new(ip, 7400)
}

fn info(i: usize) -> ParticipantInfo {
    ParticipantInfo {
        host_id: i as u64 + 1,
        net_id: i as u64 + 1,
        pid: i as u32 + 1,
        lease_ms: 3000,
        name: format!("p{i}"),
        locators: vec![Locator::socket(TransportKind::Udp, addr(i))],
    }
}

fn discovery(i: usize, now: Instant) -> Discovery {
    let mut cfg = Config::new(1, ParticipantId(i as u64 + 1000), info(i));
    cfg.seed = i as u64 * 7919 + 1;
    Discovery::new(cfg, now)
}

fn peer_info(p: &ferry_discovery::RemoteParticipant) -> PeerInfo {
    PeerInfo {
        participant: p.id,
        host_id: p.info.host_id,
        net_id: p.info.net_id,
        pid: p.info.pid,
        locators: p.info.locators.clone(),
        direct: true,
        secured: false,
    }
}

/// One run: the receiver's time per learnt runtime (discovery, table), in
/// order, and the datagrams and bytes it received.
struct Run {
    disc_ns: Vec<u64>,
    table_ns: Vec<u64>,
    datagrams: u64,
    bytes: u64,
}

fn run(n: usize) -> Run {
    let t0 = Instant::now();
    let mut now = t0;
    // The receiver: runtime 0, a subscriber on topic 7 (one pair to make).
    let me = 0;
    let mut rx = discovery(me, now);
    rx.set_records(records(me, 7), now);
    let local = PeerInfo {
        participant: ParticipantId(1000),
        host_id: 1,
        net_id: 1,
        pid: 1,
        locators: info(me).locators,
        direct: true,
        secured: false,
    };
    let mut table = Table::new(local, vec![Arc::new(Everywhere) as Arc<dyn Route>]);
    let sub = EndpointRecord {
        entity: 9,
        node: 1,
        kind: EndpointKind::Subscriber,
        topic: "/disco/t7".into(),
        type_name: "ferry_msgs/msg/RawBytes".into(),
        type_hash: TypeHash([2; 32]),
        qos: Qos::default(),
    };
    table.add_local(sub, Default::default(), now);
    let mut out = Run {
        disc_ns: Vec::with_capacity(n),
        table_ns: Vec::with_capacity(n),
        datagrams: 0,
        bytes: 0,
    };
    for i in 1..=n {
        let mut tx = discovery(i, now);
        tx.set_records(records(i, i % 50), now);
        let id = ParticipantId(i as u64 + 1000);
        let (mut disc, mut tab) = (0u64, 0u64);
        // Until the receiver knows the sender's two endpoints (≤ 2 s).
        for _ in 0..2000 {
            let known = rx
                .participant_info(id)
                .is_some_and(|p| p.endpoints.len() == 2);
            if known {
                break;
            }
            now += Duration::from_millis(1);
            tx.handle_timeout(now);
            rx.handle_timeout(now);
            while let Some(t) = tx.poll_transmit() {
                if matches!(t.to, Destination::Group | Destination::Peer(_)) {
                    out.datagrams += 1;
                    out.bytes += t.bytes.len() as u64;
                    let via = match t.to {
                        Destination::Group => Via::Multicast,
                        _ => Via::Unicast,
                    };
                    let s = Instant::now();
                    let _ = rx.handle_datagram(now, addr(i), via, &t.bytes);
                    disc += s.elapsed().as_nanos() as u64;
                }
            }
            while let Some(t) = rx.poll_transmit() {
                if matches!(t.to, Destination::Group | Destination::Peer(_)) {
                    let _ = tx.handle_datagram(now, addr(me), Via::Unicast, &t.bytes);
                }
            }
            while tx.poll_event().is_some() {}
            // The runtime's work on what the receiver learnt.
            let s = Instant::now();
            while let Some(e) = rx.poll_event() {
                match e {
                    Event::ParticipantJoined(p) => {
                        if let Some(rp) = rx.participant_info(p) {
                            table.peer_up(peer_info(rp), now);
                        }
                    }
                    Event::EndpointJoined {
                        participant,
                        endpoint,
                    } => table.endpoint_up(participant, endpoint, now),
                    _ => {}
                }
            }
            while table.poll_action().is_some() {}
            tab += s.elapsed().as_nanos() as u64;
        }
        assert!(
            rx.participant_info(id)
                .is_some_and(|p| p.endpoints.len() == 2),
            "runtime {i} was not learnt within 2 s"
        );
        out.disc_ns.push(disc);
        out.table_ns.push(tab);
    }
    out
}

fn mean_us(v: &[u64]) -> f64 {
    v.iter().sum::<u64>() as f64 / v.len().max(1) as f64 / 1e3
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers: [N] [RUNS]"))
        .collect();
    let n = args.first().copied().unwrap_or(999).max(10);
    let runs = args.get(1).copied().unwrap_or(5).max(1);
    let mut all: Vec<Run> = (0..runs).map(|_| run(n)).collect();
    all.sort_by_key(|r| r.disc_ns.iter().sum::<u64>() + r.table_ns.iter().sum::<u64>());
    let r = &all[runs / 2];
    let total = |r: &Run| mean_us(&r.disc_ns) + mean_us(&r.table_ns);
    println!(
        "one receiver learning {n} runtimes (node + publisher + service each), median of {runs} runs:"
    );
    println!(
        "  per runtime: {:.1} datagrams, {:.0} B received",
        r.datagrams as f64 / n as f64,
        r.bytes as f64 / n as f64
    );
    println!(
        "  c = {:.2} µs per record set: discovery {:.2} µs + connection table {:.2} µs",
        total(r),
        mean_us(&r.disc_ns),
        mean_us(&r.table_ns)
    );
    let tenth = n / 10;
    for (what, range) in [("first tenth", 0..tenth), ("last tenth", n - tenth..n)] {
        println!(
            "  {what} ({} known before): discovery {:.2} µs + table {:.2} µs",
            range.start,
            mean_us(&r.disc_ns[range.clone()]),
            mean_us(&r.table_ns[range.clone()])
        );
    }
    let spread: Vec<String> = all.iter().map(|r| format!("{:.2}", total(r))).collect();
    println!("  c in each run (µs): {}", spread.join(", "));
}
