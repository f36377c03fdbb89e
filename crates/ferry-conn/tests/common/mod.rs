//! A driver for the table on virtual time: carries out its actions the way
//! a runtime would (connects that succeed or fail, links, what each port was
//! told), and a brute-force reference matcher to hold it against.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_conn::{Action, PairState, PeerInfo, PortEvent, Route, Table};
use ferry_discovery::matching::{match_endpoints, MatchOutcome};
use ferry_testkit::Rng;
use ferry_wire::beacon::EndpointRecord;
use ferry_wire::{
    Durability, EndpointId, EndpointKind, Locator, ParticipantId, Qos, Reliability, TransportKind,
    TypeHash,
};

/// A route described by data: reaches what its predicate says.
pub struct TestRoute {
    pub kind: TransportKind,
    pub request_reply: bool,
    pub reaches: fn(&PeerInfo, &PeerInfo) -> bool,
}

impl Route for TestRoute {
    fn kind(&self) -> TransportKind {
        self.kind
    }
    fn request_reply(&self) -> bool {
        self.request_reply
    }
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        (self.reaches)(local, remote)
    }
}

fn has(kind: TransportKind, p: &PeerInfo) -> bool {
    p.locators.iter().any(|l| l.transport == kind)
}

/// In-process (same process), shared memory (same host), UDP (another host,
/// samples only), TCP (anyone with a TCP locator), MQTT (anyone).
pub fn routes() -> Vec<Arc<dyn Route>> {
    vec![
        Arc::new(TestRoute {
            kind: TransportKind::InProcess,
            request_reply: true,
            reaches: |l, r| l.same_process(r),
        }),
        Arc::new(TestRoute {
            kind: TransportKind::SharedMemory,
            request_reply: true,
            reaches: |l, r| l.host_id == r.host_id && !l.same_process(r),
        }),
        Arc::new(TestRoute {
            kind: TransportKind::Udp,
            request_reply: false,
            reaches: |l, r| l.host_id != r.host_id && has(TransportKind::Udp, r),
        }),
        Arc::new(TestRoute {
            kind: TransportKind::Tcp,
            request_reply: true,
            reaches: |_, r| has(TransportKind::Tcp, r),
        }),
        Arc::new(TestRoute {
            kind: TransportKind::Mqtt,
            request_reply: true,
            reaches: |_, _| true,
        }),
    ]
}

/// Like the runtime's forwarded path: reaches a runtime on another host
/// that names a leader; never chosen unless pinned or counted.
pub struct Forwarded;

impl Route for Forwarded {
    fn kind(&self) -> TransportKind {
        TransportKind::Forwarded
    }
    fn request_reply(&self) -> bool {
        false
    }
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        local.host_id != remote.host_id && remote.locators.iter().any(|l| l.host_leader().is_some())
    }
    fn automatic(&self, _: &PeerInfo, _: &PeerInfo) -> bool {
        false
    }
}

/// A runtime on `host` in its election, led by `leader`.
pub fn follower(id: u64, host: u64, leader: u64) -> PeerInfo {
    let mut p = peer(id, host, true);
    p.locators
        .push(Locator::forwarded_by(ParticipantId(leader)));
    p
}

pub fn peer(id: u64, host: u64, direct: bool) -> PeerInfo {
    PeerInfo {
        participant: ParticipantId(id),
        host_id: host,
        net_id: host,
        pid: id as u32,
        locators: vec![
            Locator::socket(TransportKind::Tcp, ([10, 0, 0, id as u8], 7000).into()),
            Locator::socket(TransportKind::Udp, ([10, 0, 0, id as u8], 7001).into()),
        ],
        direct,
        secured: false,
    }
}

pub const ME: u64 = 1;

pub fn record(entity: u32, kind: EndpointKind, topic: &str, qos: Qos) -> EndpointRecord {
    EndpointRecord {
        entity,
        node: 1,
        kind,
        topic: topic.into(),
        type_name: "std_msgs/msg/String".into(),
        type_hash: TypeHash([7; 32]),
        qos,
    }
}

pub fn eid(p: u64, entity: u32) -> EndpointId {
    EndpointId {
        participant: ParticipantId(p),
        entity,
    }
}

/// The table plus what a runtime would hold because of its actions.
pub struct Driver {
    pub table: Table,
    pub now: Instant,
    /// Links the local writers hold.
    pub links: BTreeSet<(EndpointId, EndpointId)>,
    /// Connects asked for and not answered yet.
    pub pending: Vec<(EndpointId, EndpointId, TransportKind)>,
    /// What each local port believes is matched (from Matched/Unmatched).
    pub told: BTreeMap<EndpointId, BTreeSet<EndpointId>>,
    /// Incompatibility events per port.
    pub incompatible: BTreeMap<EndpointId, BTreeSet<EndpointId>>,
    pub forgotten: Vec<EndpointId>,
    pub no_path: usize,
    pub suspended: usize,
    pub log: Vec<Action>,
    /// Every connect that was asked for, in order.
    pub connects: Vec<(EndpointId, EndpointId, TransportKind)>,
}

impl Driver {
    pub fn new(local: PeerInfo) -> Driver {
        Driver::with_routes(local, routes())
    }

    /// With the forwarded path among the routes.
    pub fn forwarding(local: PeerInfo) -> Driver {
        let mut r = routes();
        r.push(Arc::new(Forwarded));
        Driver::with_routes(local, r)
    }

    pub fn with_routes(local: PeerInfo, routes: Vec<Arc<dyn Route>>) -> Driver {
        Driver {
            table: Table::new(local, routes),
            now: Instant::now(),
            links: BTreeSet::new(),
            pending: Vec::new(),
            told: BTreeMap::new(),
            incompatible: BTreeMap::new(),
            forgotten: Vec::new(),
            no_path: 0,
            suspended: 0,
            log: Vec::new(),
            connects: Vec::new(),
        }
    }

    /// Carries out every action; connects stay pending until `finish`.
    pub fn drain(&mut self) {
        while let Some(a) = self.table.poll_action() {
            self.log.push(a.clone());
            match a {
                Action::Connect {
                    writer,
                    reader,
                    transport,
                    ..
                } => {
                    self.pending.push((writer, reader, transport));
                    self.connects.push((writer, reader, transport));
                }
                Action::Unlink { writer, reader } => {
                    self.links.remove(&(writer, reader));
                }
                Action::Notify { port, event } => match event {
                    PortEvent::Matched { remote, .. } => {
                        self.told.entry(port).or_default().insert(remote);
                    }
                    PortEvent::Unmatched { remote, .. } => {
                        self.told.entry(port).or_default().remove(&remote);
                    }
                    PortEvent::IncompatibleQos { remote, .. }
                    | PortEvent::IncompatibleType { remote, .. } => {
                        self.incompatible.entry(port).or_default().insert(remote);
                    }
                    PortEvent::DeadlineMissed { .. } | PortEvent::Ros2IncompatibleQos { .. } => {
                        unreachable!("not the table's")
                    }
                },
                Action::ForgetWriter { writer } => self.forgotten.push(writer),
                Action::NoPath { .. } => self.no_path += 1,
                Action::Suspended { .. } => self.suspended += 1,
            }
        }
    }

    /// Answers the pending connects: each succeeds with probability
    /// `success`.
    pub fn finish(&mut self, rng: &mut Rng, success: f64) {
        loop {
            self.drain();
            if self.pending.is_empty() {
                return;
            }
            for (w, r, t) in std::mem::take(&mut self.pending) {
                if rng.chance(success) {
                    if self.table.connected(w, r, t) {
                        self.links.insert((w, r));
                    }
                } else {
                    self.table.connect_failed(w, r, self.now);
                }
            }
        }
    }

    /// Moves virtual time on and handles what falls due.
    pub fn advance(&mut self, by: Duration) {
        self.now += by;
        if self.table.poll_timeout().is_some_and(|t| t <= self.now) {
            self.table.handle_timeout(self.now);
        }
        self.drain();
    }

    /// Lets every failed pair connect again until nothing is pending.
    pub fn settle(&mut self, rng: &mut Rng) {
        for _ in 0..10 {
            self.finish(rng, 1.0);
            match self.table.poll_timeout() {
                Some(t) if t > self.now + Duration::from_secs(60) => return,
                Some(t) => {
                    self.now = self.now.max(t);
                    self.table.handle_timeout(self.now);
                }
                None => return,
            }
        }
        self.finish(rng, 1.0);
    }
}

/// The reference: every writer×reader pair with at least one local side,
/// decided by brute force from the endpoints as they are.
pub struct Reference {
    pub matched: BTreeSet<(EndpointId, EndpointId)>,
    pub incompatible: BTreeSet<(EndpointId, EndpointId)>,
}

pub fn reference(me: ParticipantId, eps: &BTreeMap<EndpointId, EndpointRecord>) -> Reference {
    let mut matched = BTreeSet::new();
    let mut incompatible = BTreeSet::new();
    for (w, wr) in eps {
        for (r, rr) in eps {
            if w.participant != me && r.participant != me {
                continue;
            }
            match match_endpoints(wr, rr) {
                MatchOutcome::Unrelated => {}
                MatchOutcome::Incompatible(_) => {
                    incompatible.insert((*w, *r));
                }
                MatchOutcome::Matched => {
                    matched.insert((*w, *r));
                }
            }
        }
    }
    Reference {
        matched,
        incompatible,
    }
}

pub fn random_record(rng: &mut Rng, entity: u32, topics: u64) -> EndpointRecord {
    let kind = match rng.next_u64() % 4 {
        0 => EndpointKind::Publisher,
        1 => EndpointKind::Subscriber,
        2 => EndpointKind::Client,
        _ => EndpointKind::Service,
    };
    let mut qos = Qos::default();
    if rng.chance(0.2) {
        qos.reliability = Reliability::BestEffort;
    }
    if rng.chance(0.2) {
        qos.durability = Durability::TransientLocal;
    }
    let mut rec = record(entity, kind, &format!("/t{}", rng.next_u64() % topics), qos);
    if rng.chance(0.1) {
        rec.type_name = "other/msg/Type".into();
        rec.type_hash = TypeHash([9; 32]);
    }
    rec
}

/// Checks the table and what the driver did against the reference, after
/// settling (every connect answered, every retry done).
pub fn check(d: &Driver, eps: &BTreeMap<EndpointId, EndpointRecord>, what: &str) {
    let me = d.table.local().participant;
    let reference = reference(me, eps);
    let mut matched = BTreeSet::new();
    let mut incompatible = BTreeSet::new();
    for (w, r, s) in d.table.pairs() {
        if s == PairState::Incompatible {
            incompatible.insert((w, r));
        } else {
            matched.insert((w, r));
        }
    }
    assert_eq!(matched, reference.matched, "{what}: matched pairs");
    assert_eq!(
        incompatible, reference.incompatible,
        "{what}: incompatible pairs"
    );
    // Every matched pair with a local writer is connected, and the writer
    // holds exactly those links (suspended ones aside).
    let suspended: BTreeSet<_> = d.table.suspended().map(|(w, r, _)| (w, r)).collect();
    let want_links: BTreeSet<_> = reference
        .matched
        .iter()
        .filter(|(w, _)| w.participant == me)
        .copied()
        .collect();
    let links: BTreeSet<_> = d.links.difference(&suspended).copied().collect();
    assert_eq!(links, want_links, "{what}: links held");
    for (w, r) in &want_links {
        assert!(
            matches!(d.table.pair(*w, *r), Some(PairState::Connected(_))),
            "{what}: {w} -> {r} not connected: {:?}",
            d.table.pair(*w, *r)
        );
    }
    // Each local port was told exactly its matched peers.
    for id in eps.keys().filter(|id| id.participant == me) {
        let want: BTreeSet<EndpointId> = reference
            .matched
            .iter()
            .filter_map(|&(w, r)| {
                if w == *id {
                    Some(r)
                } else if r == *id {
                    Some(w)
                } else {
                    None
                }
            })
            .collect();
        let got = d.told.get(id).cloned().unwrap_or_default();
        assert_eq!(got, want, "{what}: what port {id} was told");
    }
}
