//! Simulated-network tests: many runtimes, one virtual clock, seeded loss.

use super::*;
use ferry_wire::beacon::EndpointRecord;
use ferry_wire::{EndpointKind, Locator, Qos, TransportKind, TypeHash};
use std::net::{IpAddr, Ipv4Addr};

pub(super) fn info() -> ParticipantInfo {
    ParticipantInfo {
        host_id: 1,
        net_id: 1,
        pid: 1,
        lease_ms: 3000,
        name: "test".into(),
        locators: vec![],
    }
}

pub(super) fn endpoint(entity: u32, topic: &str) -> Record {
    Record::Endpoint(EndpointRecord {
        entity,
        node: 1,
        kind: EndpointKind::Publisher,
        topic: topic.into(),
        type_name: "std_msgs/msg/String".into(),
        type_hash: TypeHash([1; 32]),
        qos: Qos::default(),
    })
}

pub(super) fn addr(i: usize) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8 + 1)), 7400)
}

/// N runtimes on a shared multicast group with seeded loss.
pub(super) struct Net {
    pub(super) nodes: Vec<Discovery>,
    pub(super) alive: Vec<bool>,
    pub(super) now: Instant,
    rng: u64,
    loss_pct: u64,
    sent: u64,
    bytes: u64,
    delivered: u64,
    /// Datagrams refused are a test failure (plain runtimes), or expected
    /// (signed ones meeting strangers).
    pub(super) strict: bool,
    /// Every datagram sent, with its sender's index, when set.
    pub(super) tap: Option<Vec<(usize, Transmit)>>,
}

impl Net {
    pub(super) fn new(n: usize, loss_pct: u64, seed: u64) -> Self {
        let now = Instant::now();
        let nodes = (0..n)
            .map(|i| {
                let mut d =
                    Discovery::new(Config::new(0, ParticipantId(i as u64 + 100), info()), now);
                d.set_records(vec![endpoint(1, &format!("/topic{i}"))], now);
                d
            })
            .collect();
        Self::with(nodes, now, loss_pct, seed)
    }

    /// A network of the given runtimes (node `i` at [`addr`]`(i)`).
    pub(super) fn with(nodes: Vec<Discovery>, now: Instant, loss_pct: u64, seed: u64) -> Self {
        let n = nodes.len();
        Net {
            nodes,
            alive: vec![true; n],
            now,
            rng: seed | 1,
            loss_pct,
            sent: 0,
            bytes: 0,
            delivered: 0,
            strict: true,
            tap: None,
        }
    }

    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// Runs the network for `dur` in 1 ms steps.
    pub(super) fn run(&mut self, dur: Duration) {
        let end = self.now + dur;
        while self.now < end {
            self.now += Duration::from_millis(1);
            for i in 0..self.nodes.len() {
                if !self.alive[i] {
                    continue;
                }
                self.nodes[i].handle_timeout(self.now);
                while let Some(t) = self.nodes[i].poll_transmit() {
                    self.sent += 1;
                    self.bytes += t.bytes.len() as u64;
                    if let Some(tap) = &mut self.tap {
                        tap.push((i, t.clone()));
                    }
                    for j in 0..self.nodes.len() {
                        if j == i || !self.alive[j] {
                            continue;
                        }
                        let deliver = match &t.to {
                            Destination::Group => true,
                            Destination::Peer(a) => *a == addr(j),
                            Destination::Broker => false,
                        };
                        if deliver && self.rand() % 100 >= self.loss_pct {
                            self.delivered += 1;
                            let via = if t.to == Destination::Group {
                                Via::Multicast
                            } else {
                                Via::Unicast
                            };
                            let r = self.nodes[j].handle_datagram(self.now, addr(i), via, &t.bytes);
                            if self.strict {
                                r.unwrap();
                            }
                        }
                    }
                }
            }
        }
    }

    pub(super) fn knows(&self, i: usize, j: usize) -> bool {
        self.nodes[i]
            .participant_info(ParticipantId(j as u64 + 100))
            .is_some_and(|p| p.endpoints.contains_key(&1))
    }

    pub(super) fn all_know_all(&self) -> bool {
        (0..self.nodes.len()).all(|i| {
            (0..self.nodes.len())
                .all(|j| i == j || !self.alive[i] || !self.alive[j] || self.knows(i, j))
        })
    }
}

#[test]
fn twenty_runtimes_discover_each_other_and_traffic_stays_linear() {
    let mut net = Net::new(20, 0, 1);
    net.run(Duration::from_millis(200));
    assert!(
        net.all_know_all(),
        "20 runtimes did not converge within 200 ms"
    );
    // Steady state: measure datagrams per second over 10 s.
    net.run(Duration::from_secs(5));
    let before = net.sent;
    net.run(Duration::from_secs(10));
    let per_sec = (net.sent - before) as f64 / 10.0;
    // 20 participants (> SMALL_DOMAIN): the period stretches to 20/8 s, one
    // 25 B heartbeat each per period: ~8/s in all, never N² = 800/s.
    assert!(per_sec <= 10.0, "{per_sec} datagrams/s for 20 runtimes");
    assert!(per_sec >= 5.5, "{per_sec} datagrams/s: heartbeats stopped?");
}

#[test]
fn converges_under_heavy_loss() {
    // 20 % loss in every direction: a lease spans six announcements, so a
    // live peer is only dropped if six in a row are lost (p = 6e-5).
    for seed in 1..50 {
        let mut net = Net::new(5, 20, seed);
        net.run(Duration::from_secs(5));
        assert!(
            net.all_know_all(),
            "seed {seed}: no convergence at 20 % loss"
        );
    }
}

#[test]
fn killed_runtime_expires_within_its_lease_and_bye_is_immediate() {
    let mut net = Net::new(3, 0, 7);
    net.run(Duration::from_millis(300));
    assert!(net.all_know_all());
    while net.nodes[0].poll_event().is_some() {}
    // kill -9: silent from now on.
    net.alive[2] = false;
    net.run(Duration::from_millis(2900));
    assert!(
        net.nodes[0].participant_info(ParticipantId(102)).is_some(),
        "expired before its lease"
    );
    net.run(Duration::from_millis(200));
    assert!(
        net.nodes[0].participant_info(ParticipantId(102)).is_none(),
        "not expired after lease"
    );
    let evs: Vec<Event> = std::iter::from_fn(|| net.nodes[0].poll_event()).collect();
    assert!(evs.contains(&Event::ParticipantLeft {
        id: ParticipantId(102),
        reason: LeaveReason::LeaseExpired
    }));
    assert!(evs.iter().any(|e| matches!(e, Event::EndpointLeft { participant, .. } if *participant == ParticipantId(102))));
    // Clean exit: goodbye is seen within one step.
    net.nodes[1].leave();
    net.run(Duration::from_millis(2));
    assert!(net.nodes[0].participant_info(ParticipantId(101)).is_none());
}

#[test]
fn withdrawn_endpoint_is_reported() {
    let mut net = Net::new(2, 0, 3);
    net.run(Duration::from_millis(100));
    while net.nodes[1].poll_event().is_some() {}
    let now = net.now;
    net.nodes[0].set_records(vec![endpoint(2, "/new")], now);
    net.run(Duration::from_millis(20));
    let evs: Vec<Event> = std::iter::from_fn(|| net.nodes[1].poll_event()).collect();
    assert!(evs
        .iter()
        .any(|e| matches!(e, Event::EndpointLeft { endpoint, .. } if endpoint.entity == 1)));
    assert!(evs
        .iter()
        .any(|e| matches!(e, Event::EndpointJoined { endpoint, .. } if endpoint.topic == "/new")));
}

#[test]
fn many_endpoints_travel_in_several_parts() {
    let now = Instant::now();
    let mut a = Discovery::new(Config::new(0, ParticipantId(1), info()), now);
    let mut b = Discovery::new(Config::new(0, ParticipantId(2), info()), now);
    a.set_records(
        (0..300)
            .map(|i| endpoint(i, &format!("/a/very/long/topic/name/{i}")))
            .collect(),
        now,
    );
    a.handle_timeout(now + Duration::from_millis(5));
    let mut n = 0;
    while let Some(t) = a.poll_transmit() {
        assert!(t.bytes.len() <= 1472);
        b.handle_datagram(now, addr(0), Via::Multicast, &t.bytes)
            .unwrap();
        n += 1;
    }
    assert!(n > 5);
    assert_eq!(
        b.participant_info(ParticipantId(1))
            .unwrap()
            .endpoints
            .len(),
        300
    );
}

#[test]
fn static_peers_work_without_multicast_and_are_answered() {
    let now = Instant::now();
    let mut ca = Config::new(0, ParticipantId(1), info());
    ca.multicast = false;
    ca.static_peers = vec![addr(1)];
    let mut cb = Config::new(0, ParticipantId(2), info());
    cb.multicast = false; // b knows nobody: it must answer a's unicast
    let mut a = Discovery::new(ca, now);
    let mut b = Discovery::new(cb, now);
    b.set_records(vec![endpoint(1, "/b")], now);
    a.handle_timeout(now);
    b.handle_timeout(now);
    if let Some(t) = b.poll_transmit() {
        panic!("b has nobody to send to, yet sent to {:?}", t.to);
    }
    while let Some(t) = a.poll_transmit() {
        assert_eq!(t.to, Destination::Peer(addr(1)));
        b.handle_datagram(now, addr(0), Via::Unicast, &t.bytes)
            .unwrap();
    }
    // b greets a (unicast: a is its only peer); they ask each other for
    // their records and answer, all by unicast.
    let mut t = now;
    let mut answered = false;
    for _ in 0..20 {
        t += Duration::from_millis(10);
        b.handle_timeout(t);
        while let Some(x) = b.poll_transmit() {
            assert_eq!(x.to, Destination::Peer(addr(0)));
            a.handle_datagram(t, addr(1), Via::Unicast, &x.bytes)
                .unwrap();
            answered = true;
        }
        a.handle_timeout(t);
        while let Some(x) = a.poll_transmit() {
            assert_eq!(x.to, Destination::Peer(addr(1)));
            b.handle_datagram(t, addr(0), Via::Unicast, &x.bytes)
                .unwrap();
        }
    }
    assert!(answered);
    assert!(a
        .participant_info(ParticipantId(2))
        .unwrap()
        .endpoints
        .contains_key(&1));
}

#[test]
fn bad_input_is_counted_not_fatal() {
    let now = Instant::now();
    let mut d = Discovery::new(Config::new(0, ParticipantId(1), info()), now);
    assert!(matches!(
        d.handle_datagram(now, addr(1), Via::Multicast, b"garbage"),
        Err(DatagramError::Malformed(_))
    ));
    let mut other = Discovery::new(Config::new(5, ParticipantId(2), info()), now);
    other.handle_timeout(now);
    let t = other.poll_transmit().unwrap();
    assert!(matches!(
        d.handle_datagram(now, addr(1), Via::Multicast, &t.bytes),
        Err(DatagramError::ForeignDomain(5))
    ));
    assert_eq!(d.stats().malformed, 1);
    assert_eq!(d.stats().foreign_domain, 1);
    assert_eq!(d.participants().count(), 0);
}

#[test]
fn a_shorter_lease_makes_peers_notice_death_sooner() {
    let mut net = Net::new(2, 0, 9);
    let now = net.now;
    net.nodes[1].set_lease(600, now);
    net.run(Duration::from_millis(300));
    assert!(net.all_know_all());
    net.alive[1] = false;
    net.run(Duration::from_millis(700));
    assert!(
        net.nodes[0].participant_info(ParticipantId(101)).is_none(),
        "600 ms lease not honoured"
    );
    // Traffic rises with the shorter lease: 6 beacons per lease.
    assert_eq!(net.nodes[1].lease_ms(), 600);
}

#[test]
fn data_plane_traffic_keeps_a_peer_alive_without_beacons() {
    let mut net = Net::new(2, 0, 4);
    net.run(Duration::from_millis(300));
    assert!(net.all_know_all());
    // Node 1's beacons are all lost from now on, but data keeps arriving.
    net.alive[1] = false;
    for _ in 0..50 {
        net.run(Duration::from_millis(100));
        let now = net.now;
        net.nodes[0].refresh(ParticipantId(101), now);
    }
    assert!(
        net.nodes[0].participant_info(ParticipantId(101)).is_some(),
        "expired despite traffic"
    );
    // Traffic stops: expires within the lease.
    net.run(Duration::from_millis(3100));
    assert!(net.nodes[0].participant_info(ParticipantId(101)).is_none());
}

#[test]
fn six_announcements_fit_every_lease_despite_jitter() {
    let p = period_for(3000);
    assert!(p.mul_f64(1.1) * 6 <= Duration::from_millis(3000), "{p:?}");
}

#[test]
fn broker_announcements_are_not_direct_until_heard_on_the_network() {
    let now = Instant::now();
    let mut ca = Config::new(0, ParticipantId(1), info());
    ca.multicast = false;
    ca.broker = true;
    let mut a = Discovery::new(ca, now);
    let mut b = Discovery::new(Config::new(0, ParticipantId(2), info()), now);
    a.set_records(vec![endpoint(1, "/a")], now);
    a.handle_timeout(now);
    let mut to_broker = 0;
    while let Some(t) = a.poll_transmit() {
        assert_eq!(t.to, Destination::Broker, "multicast is off");
        to_broker += 1;
        b.handle_datagram(now, addr(0), Via::Broker, &t.bytes)
            .unwrap();
    }
    assert!(to_broker > 0);
    let rp = b.participant_info(ParticipantId(1)).unwrap();
    assert!(!rp.direct && rp.unicast.is_none());
    assert!(rp.endpoints.contains_key(&1));
    // Heard on the group later: direct now, announced as a join again so
    // matching tries the network paths.
    while b.poll_event().is_some() {}
    a.announce_now(now);
    a.handle_timeout(now + Duration::from_millis(1));
    let t = a.poll_transmit().unwrap();
    b.handle_datagram(now, addr(0), Via::Multicast, &t.bytes)
        .unwrap();
    assert!(b.participant_info(ParticipantId(1)).unwrap().direct);
    assert!(std::iter::from_fn(|| b.poll_event())
        .any(|e| e == Event::ParticipantJoined(ParticipantId(1))));
}

#[test]
fn the_broker_gets_no_network_addresses_and_a_direct_peer_asks_for_them() {
    let now = Instant::now();
    let mut with_addrs = info();
    with_addrs.locators = vec![
        Locator::socket(TransportKind::Udp, addr(0)),
        Locator::socket(TransportKind::Tcp, addr(0)),
        Locator::named(TransportKind::SharedMemory, "ferry.s.1"),
        Locator::named(TransportKind::Zenoh, "aac3"),
    ];
    let mut ca = Config::new(0, ParticipantId(1), with_addrs);
    ca.broker = true;
    let mut a = Discovery::new(ca, now);
    let mut b = Discovery::new(Config::new(0, ParticipantId(2), info()), now);
    a.set_records(vec![endpoint(1, "/a")], now);
    a.handle_timeout(now);
    // Through the broker: the records, without UDP/TCP addresses.
    while let Some(t) = a.poll_transmit() {
        if t.to == Destination::Broker {
            b.handle_datagram(now, addr(0), Via::Broker, &t.bytes)
                .unwrap();
        }
    }
    let rp = b.participant_info(ParticipantId(1)).unwrap();
    assert!(!rp.direct);
    assert_eq!(
        rp.info.locators,
        vec![
            Locator::named(TransportKind::SharedMemory, "ferry.s.1"),
            Locator::named(TransportKind::Zenoh, "aac3"),
        ],
        "network addresses went to the broker (or names did not)"
    );
    while b.poll_event().is_some() {}
    // Then a heartbeat on the network (same revision): b asks a for its
    // records, a answers directly, and only then is a joined as direct,
    // with its addresses.
    let t1 = now + Duration::from_secs(1);
    let hb = a.heartbeat(false);
    b.handle_datagram(t1, addr(0), Via::Multicast, &hb).unwrap();
    assert!(std::iter::from_fn(|| b.poll_event())
        .all(|e| e != Event::ParticipantJoined(ParticipantId(1))));
    b.handle_timeout(t1);
    let rq: Vec<_> = std::iter::from_fn(|| b.poll_transmit())
        .filter(|t| t.to == Destination::Peer(addr(0)))
        .collect();
    assert!(!rq.is_empty(), "no request for the records");
    for t in rq {
        a.handle_datagram(t1, addr(1), Via::Unicast, &t.bytes)
            .unwrap();
    }
    // (Answers leave 2 ms after the request.)
    a.handle_timeout(t1 + Duration::from_millis(5));
    while let Some(t) = a.poll_transmit() {
        if t.to != Destination::Broker {
            b.handle_datagram(t1, addr(0), Via::Unicast, &t.bytes)
                .unwrap();
        }
    }
    let rp = b.participant_info(ParticipantId(1)).unwrap();
    assert!(rp.direct);
    assert_eq!(rp.info.locators.len(), 4, "{:?}", rp.info.locators);
    assert!(std::iter::from_fn(|| b.poll_event())
        .any(|e| e == Event::ParticipantJoined(ParticipantId(1))));
}

#[test]
fn at_rest_only_small_heartbeats_travel_and_each_participant_hears_a_bounded_number() {
    // 120 participants: the period stretches so that each one receives at
    // most HEARTBEATS_PER_S heartbeats a second (the domain's cost is
    // linear: 120 × 40/s received, not 120 × 120 / 0.45 s).
    let n = 120;
    let mut net = Net::new(n, 0, 11);
    net.run(Duration::from_secs(2));
    assert!(
        net.all_know_all(),
        "{n} runtimes did not converge within 2 s"
    );
    net.run(Duration::from_secs(10));
    let (sent, bytes, delivered) = (net.sent, net.bytes, net.delivered);
    net.run(Duration::from_secs(20));
    let per_sec = (net.delivered - delivered) as f64 / 20.0 / n as f64;
    let size = (net.bytes - bytes) as f64 / (net.sent - sent) as f64;
    assert!(
        per_sec <= f64::from(HEARTBEATS_PER_S) * 1.15,
        "each participant received {per_sec:.1} datagrams/s at rest"
    );
    assert!(per_sec > 4.0, "{per_sec:.1}/s: heartbeats stopped?");
    assert!(
        size <= 25.0,
        "{size:.0} B per datagram at rest: records resent?"
    );
    // Their announced lease covers the stretched period six times.
    let p = net.nodes[0].period();
    assert!(p > Duration::from_secs(2), "period {p:?} did not stretch");
    assert!(Duration::from_millis(u64::from(net.nodes[0].lease_ms())) >= p * 6);
    assert!(net.all_know_all(), "someone expired at rest");
}

#[test]
fn a_newcomer_in_a_large_domain_learns_everyone_at_once() {
    let mut net = Net::new(60, 0, 12);
    net.run(Duration::from_secs(3));
    assert!(net.all_know_all());
    // Another one joins (index 60): it is greeted by everyone and asks each
    // for its records; the domain learns its records from its announcement.
    let now = net.now;
    let mut d = Discovery::new(Config::new(0, ParticipantId(160), info()), now);
    d.set_records(vec![endpoint(1, "/late")], now);
    net.nodes.push(d);
    net.alive.push(true);
    net.run(Duration::from_millis(400));
    assert!(
        net.all_know_all(),
        "the newcomer and the domain did not learn each other in 400 ms"
    );
}
