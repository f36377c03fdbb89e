//! A crowd of runtimes starting at once on a machine with limited capacity:
//! how long until every runtime knows every other, and how many datagrams
//! that took.
//!
//! Unlike the unit tests' network (every datagram delivered at once), each
//! reception here costs a slot of a machine-wide budget (`--capacity`
//! receptions per second, what the kernel and the runtimes' threads can
//! take in), each runtime's socket holds `--queue` datagrams and drops the
//! rest — the emulated fleet of `ferry-disco` on a 2-vCPU guest, where all
//! 50 "hosts" share two cores.
//!
//! `cargo run --release -p ferry-discovery --example crowd -- 50 20 150000`

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use ferry_discovery::{Config, Destination, Discovery, Via};
use ferry_wire::beacon::{EndpointRecord, NodeRecord, ParticipantInfo, Record};
use ferry_wire::{EndpointKind, ParticipantId, Qos, TypeHash};

struct Node {
    d: Discovery,
    addr: SocketAddr,
    start: Duration,
    started: bool,
    queue: VecDeque<(SocketAddr, Via, std::rc::Rc<Vec<u8>>)>,
}

fn records(i: usize) -> Vec<Record> {
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
        ep(1, EndpointKind::Publisher, format!("/disco/t{i}")),
        ep(2, EndpointKind::Service, format!("/n{i}/_ferry/admin")),
    ]
}

fn config(i: usize, per: usize) -> Config {
    let h = (i / per) as u64 + 1;
    let info = ParticipantInfo {
        host_id: h,
        net_id: h,
        pid: h as u32,
        lease_ms: 3000,
        name: format!("p{i}"),
        locators: vec![],
    };
    let mut cfg = Config::new(1, ParticipantId(i as u64 + 1000), info);
    cfg.seed = i as u64 * 7919 + 1;
    cfg
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numbers: HOSTS PER CAPACITY [QUEUE]"))
        .collect();
    let hosts = args.first().copied().unwrap_or(50);
    let per = args.get(1).copied().unwrap_or(20);
    let capacity = args.get(2).copied().unwrap_or(150_000);
    let queue = args.get(3).copied().unwrap_or(1500);
    let n = hosts * per;
    let t0 = Instant::now();
    let mut nodes: Vec<Node> = (0..n)
        .map(|i| {
            let (h, k) = (i / per, i % per);
            let ip = IpAddr::V4(Ipv4Addr::new(10, 77, (h / 250) as u8, (h % 250 + 1) as u8));
            Node {
                d: Discovery::new(config(i, per), t0),
                addr: SocketAddr::new(ip, 20_000 + k as u16),
                // Processes start 20 ms apart, runtimes in one 3 ms apart.
                start: Duration::from_millis((h * 20 + k * 3) as u64),
                started: false,
                queue: VecDeque::new(),
            }
        })
        .collect();
    let per_ms = (capacity / 1000).max(1);
    let (mut sent, mut received, mut dropped) = (0u64, 0u64, 0u64);
    let mut cursor = 0usize;
    // Sent, by beacon kind (0..=4) × (unicast, group).
    let mut by_kind = [0u64; 10];
    let mut complete = None;
    let mut last_report = 0;
    for ms in 1..=args.get(4).map_or(120_000, |s| *s as u64 * 1000) {
        let el = Duration::from_millis(ms);
        let now = t0 + el;
        for (i, nd) in nodes.iter_mut().enumerate() {
            if !nd.started && el >= nd.start {
                nd.started = true;
                nd.d = Discovery::new(config(i, per), now);
                nd.d.set_records(records(i), now);
            }
        }
        // Timers and sends.
        let mut out = Vec::new();
        for (i, nd) in nodes.iter_mut().enumerate() {
            if !nd.started {
                continue;
            }
            nd.d.handle_timeout(now);
            while let Some(t) = nd.d.poll_transmit() {
                sent += 1;
                out.push((i, t));
            }
        }
        for (i, t) in out {
            let from = nodes[i].addr;
            let kind = t.bytes.get(3).copied().unwrap_or(0) as usize;
            let group = usize::from(t.to == Destination::Group);
            by_kind[kind.min(4) * 2 + group] += 1;
            let bytes = std::rc::Rc::new(t.bytes);
            match t.to {
                Destination::Group => {
                    for (j, nd) in nodes.iter_mut().enumerate() {
                        if j == i || !nd.started {
                            continue;
                        }
                        if nd.queue.len() >= queue {
                            dropped += 1;
                        } else {
                            nd.queue.push_back((from, Via::Multicast, bytes.clone()));
                        }
                    }
                }
                Destination::Peer(a) => {
                    if let Some(nd) = nodes.iter_mut().find(|x| x.addr == a && x.started) {
                        if nd.queue.len() >= queue {
                            dropped += 1;
                        } else {
                            nd.queue.push_back((from, Via::Unicast, bytes));
                        }
                    }
                }
                Destination::Broker => {}
            }
        }
        // The machine takes in `per_ms` datagrams this millisecond, round
        // robin over the runtimes with something queued.
        let mut budget = per_ms;
        let mut idle = 0;
        while budget > 0 && idle < n {
            let nd = &mut nodes[cursor];
            cursor = (cursor + 1) % n;
            match nd.queue.pop_front() {
                Some((from, via, bytes)) => {
                    idle = 0;
                    budget -= 1;
                    received += 1;
                    let _ = nd.d.handle_datagram(now, from, via, &bytes);
                }
                None => idle += 1,
            }
        }
        if ms % 250 == 0 || ms - last_report >= 1000 {
            let least = nodes
                .iter()
                .map(|x| x.d.participants().count())
                .min()
                .unwrap_or(0);
            let backlog: usize = nodes.iter().map(|x| x.queue.len()).sum();
            if ms - last_report >= 1000 {
                last_report = ms;
                println!(
                    "{:>6} ms: least knows {least}/{}, sent {sent}, received {received}, dropped {dropped}, backlog {backlog}",
                    ms,
                    n - 1
                );
            }
            if least == n - 1 && complete.is_none() {
                complete = Some(ms);
                println!(
                    "complete at {ms} ms: sent {sent}, received {received}, dropped {dropped}"
                );
                println!("sent by kind (unicast, group): announce {:?} bye {:?} heartbeat {:?} request {:?}", &by_kind[2..4], &by_kind[4..6], &by_kind[6..8], &by_kind[8..10]);
                break;
            }
        }
    }
    if complete.is_none() {
        println!("never complete");
        println!(
            "sent by kind (unicast, group): announce {:?} bye {:?} heartbeat {:?} request {:?}",
            &by_kind[2..4],
            &by_kind[4..6],
            &by_kind[6..8],
            &by_kind[8..10]
        );
    }
}
