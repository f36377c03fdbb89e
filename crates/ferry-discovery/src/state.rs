//! The discovery state machine.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry_wire::beacon::{
    Announce, Beacon, BeaconBody, EndpointRecord, NodeRecord, ParticipantInfo, Record,
};
use ferry_wire::{ParticipantId, WireError};

/// Most remote participants remembered; beacons from more are dropped and counted.
pub const MAX_PARTICIPANTS: usize = 1024;
/// Most records remembered per remote participant.
pub const MAX_RECORDS_PER_PARTICIPANT: usize = 4096;
/// Most parts one announcement may be split into.
pub const MAX_PARTS: u16 = 256;

/// Announcement period for a lease: six announcements fit in every lease
/// even when the ±10 % jitter stretches each period (lease / 6.6).
pub fn period_for(lease_ms: u32) -> Duration {
    Duration::from_millis(u64::from(lease_ms) * 10 / 66).max(Duration::from_millis(10))
}

/// Settings of one discovery instance.
#[derive(Debug, Clone)]
pub struct Config {
    /// Domain id: beacons from other domains are ignored.
    pub domain: u16,
    /// This runtime's id.
    pub participant: ParticipantId,
    /// What this runtime tells others (lease, locators, host identity).
    pub info: ParticipantInfo,
    /// Time between periodic announcements (default: lease / 6).
    pub announce_period: Duration,
    /// Largest datagram to send.
    pub mtu: usize,
    /// Whether to send to the multicast group.
    pub multicast: bool,
    /// Unicast addresses to announce to (for networks without multicast).
    pub static_peers: Vec<SocketAddr>,
    /// Whether announcements also go to an MQTT broker (cloud scope).
    pub broker: bool,
    /// Seed for the announcement jitter.
    pub seed: u64,
}

impl Config {
    /// A config with ferry's defaults: the period is a sixth of the lease
    /// (500 ms for the default 3 s lease), so a live peer is only expired
    /// after six announcements in a row are lost; 1472 B MTU.
    pub fn new(domain: u16, participant: ParticipantId, info: ParticipantInfo) -> Self {
        let period = period_for(info.lease_ms);
        Config {
            domain,
            participant,
            info,
            announce_period: period,
            mtu: ferry_wire::beacon::DEFAULT_MTU,
            multicast: true,
            static_peers: Vec::new(),
            broker: false,
            seed: participant.0 | 1,
        }
    }
}

/// Where a datagram should go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// The domain's multicast group.
    Group,
    /// One unicast address (static peer, or a peer that reached us by unicast).
    Peer(SocketAddr),
    /// The MQTT broker (the driver publishes it on the domain's discovery topic).
    Broker,
}

/// A datagram for the driver to send.
#[derive(Debug, Clone)]
pub struct Transmit {
    /// Where to.
    pub to: Destination,
    /// The datagram.
    pub bytes: Vec<u8>,
}

/// How a datagram arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// On the multicast group.
    Multicast,
    /// On this runtime's unicast socket.
    Unicast,
    /// Through the MQTT broker (`from` is meaningless): the peer is not
    /// known to be reachable directly.
    Broker,
}

/// Why a participant is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveReason {
    /// It said goodbye (clean exit).
    Bye,
    /// It was silent for longer than its lease (crash, kill -9, link loss).
    LeaseExpired,
    /// Its connection to the MQTT broker broke without a goodbye: the
    /// broker delivered its last will (crash, kill -9, link loss).
    ConnectionLost,
}

/// What discovery learned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A new participant appeared.
    ParticipantJoined(ParticipantId),
    /// A participant is gone; its endpoints were withdrawn (with events).
    ParticipantLeft {
        /// Who.
        id: ParticipantId,
        /// Why.
        reason: LeaveReason,
    },
    /// A remote endpoint appeared.
    EndpointJoined {
        /// Its participant.
        participant: ParticipantId,
        /// The endpoint.
        endpoint: EndpointRecord,
    },
    /// A remote endpoint was withdrawn.
    EndpointLeft {
        /// Its participant.
        participant: ParticipantId,
        /// The endpoint.
        endpoint: EndpointRecord,
    },
}

/// Why a datagram was rejected (counted; never fatal).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum DatagramError {
    /// Not parseable.
    #[error("malformed discovery datagram: {0}")]
    Malformed(#[from] WireError),
    /// From another domain.
    #[error("beacon for domain {0} ignored (this runtime is in another domain)")]
    ForeignDomain(u16),
    /// Too many participants already known.
    #[error("participant table full ({MAX_PARTICIPANTS}); beacon dropped")]
    TableFull,
    /// An announcement exceeds the per-participant bounds.
    #[error("announcement exceeds bounds: {0}")]
    TooLarge(&'static str),
}

/// Counters for the driver and the CLI.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams handed to the driver.
    pub sent: u64,
    /// Datagrams accepted.
    pub received: u64,
    /// Datagrams rejected as malformed or oversized.
    pub malformed: u64,
    /// Datagrams from other domains.
    pub foreign_domain: u64,
}

/// What is known about one remote participant.
#[derive(Debug, Clone)]
pub struct RemoteParticipant {
    /// Its id.
    pub id: ParticipantId,
    /// Its info from the latest beacon.
    pub info: ParticipantInfo,
    /// Its nodes.
    pub nodes: BTreeMap<u32, NodeRecord>,
    /// Its endpoints.
    pub endpoints: BTreeMap<u32, EndpointRecord>,
    /// Where its unicast beacons come from, if it ever used unicast.
    pub unicast: Option<SocketAddr>,
    /// Heard on multicast or unicast at least once (not only through the
    /// broker): its network locators are worth trying.
    pub direct: bool,
    expires: Instant,
    revision: u32,
    assembly: Option<Assembly>,
}

#[derive(Debug, Clone)]
struct Assembly {
    revision: u32,
    got: Vec<bool>,
    records: Vec<Record>,
}

/// The discovery state machine. See the crate docs.
#[derive(Debug)]
pub struct Discovery {
    cfg: Config,
    records: Vec<Record>,
    revision: u32,
    remotes: HashMap<ParticipantId, RemoteParticipant>,
    /// Unicast peers that reached us and get our announcements too.
    learned_peers: Vec<SocketAddr>,
    next_periodic: Instant,
    next_soon: Option<Instant>,
    fast_until: Instant,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    rng: u64,
    stats: Stats,
    left: bool,
}

impl Discovery {
    /// Starts discovery; the first announcement is due at `now`.
    pub fn new(cfg: Config, now: Instant) -> Self {
        let rng = cfg.seed | 1;
        let fast_until = now + cfg.announce_period;
        Discovery {
            cfg,
            records: Vec::new(),
            revision: 1,
            remotes: HashMap::new(),
            learned_peers: Vec::new(),
            next_periodic: now,
            next_soon: None,
            fast_until,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            rng,
            stats: Stats::default(),
            left: false,
        }
    }

    /// This runtime's id.
    pub fn participant(&self) -> ParticipantId {
        self.cfg.participant
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Replaces the local node and endpoint records; announces soon.
    pub fn set_records(&mut self, records: Vec<Record>, now: Instant) {
        if records == self.records {
            return;
        }
        self.records = records;
        self.revision = self.revision.wrapping_add(1).max(1);
        // Coalesce bursts of local changes (a node creating ten ports) into one.
        self.schedule_soon(now + Duration::from_millis(2));
    }

    /// Changes the announced lease (and the period: a sixth of it). Used to
    /// honour an endpoint's liveliness lease shorter than the runtime's.
    pub fn set_lease(&mut self, lease_ms: u32, now: Instant) {
        let lease_ms = lease_ms.max(60);
        if self.cfg.info.lease_ms == lease_ms {
            return;
        }
        let shorter = lease_ms < self.cfg.info.lease_ms;
        self.cfg.info.lease_ms = lease_ms;
        self.cfg.announce_period = period_for(lease_ms);
        if shorter {
            self.next_periodic = self.next_periodic.min(now + self.cfg.announce_period);
            self.schedule_soon(now);
        }
    }

    /// The lease this runtime announces.
    pub fn lease_ms(&self) -> u32 {
        self.cfg.info.lease_ms
    }

    /// Updates the announced locators (e.g. a transport started listening).
    pub fn set_locators(&mut self, locators: Vec<ferry_wire::Locator>, now: Instant) {
        if self.cfg.info.locators != locators {
            self.cfg.info.locators = locators;
            self.schedule_soon(now);
        }
    }

    /// Evidence from the data plane that `participant` is alive (a datagram
    /// or frame from it): extends its lease like a beacon would. A process
    /// that keeps sending is not expired because a lossy link ate its
    /// beacons; one that stops (kill -9) still expires within its lease.
    pub fn refresh(&mut self, participant: ParticipantId, now: Instant) {
        if let Some(rp) = self.remotes.get_mut(&participant) {
            let t = now + Duration::from_millis(u64::from(rp.info.lease_ms));
            rp.expires = rp.expires.max(t);
        }
    }

    /// Known remote participants.
    pub fn participants(&self) -> impl Iterator<Item = &RemoteParticipant> {
        self.remotes.values()
    }

    /// One remote participant.
    pub fn participant_info(&self, id: ParticipantId) -> Option<&RemoteParticipant> {
        self.remotes.get(&id)
    }

    /// Feeds one received datagram.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        via: Via,
        bytes: &[u8],
    ) -> Result<(), DatagramError> {
        let beacon = match Beacon::parse(bytes) {
            Ok(b) => b,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e.into());
            }
        };
        if beacon.domain != self.cfg.domain {
            self.stats.foreign_domain += 1;
            return Err(DatagramError::ForeignDomain(beacon.domain));
        }
        if beacon.participant == self.cfg.participant {
            return Ok(()); // our own multicast, looped back
        }
        self.stats.received += 1;
        match beacon.body {
            BeaconBody::Bye => {
                self.remove(beacon.participant, LeaveReason::Bye);
                Ok(())
            }
            BeaconBody::Announce(a) => self.on_announce(now, from, via, beacon.participant, a),
        }
    }

    fn on_announce(
        &mut self,
        now: Instant,
        from: SocketAddr,
        via: Via,
        id: ParticipantId,
        a: Announce,
    ) -> Result<(), DatagramError> {
        if a.parts > MAX_PARTS {
            self.stats.malformed += 1;
            return Err(DatagramError::TooLarge("more than 256 parts"));
        }
        if !self.remotes.contains_key(&id) {
            if self.remotes.len() >= MAX_PARTICIPANTS {
                return Err(DatagramError::TableFull);
            }
            self.remotes.insert(
                id,
                RemoteParticipant {
                    id,
                    info: a.info.clone(),
                    nodes: BTreeMap::new(),
                    endpoints: BTreeMap::new(),
                    unicast: None,
                    direct: via != Via::Broker,
                    expires: now,
                    revision: 0,
                    assembly: None,
                },
            );
            self.events.push_back(Event::ParticipantJoined(id));
            // Let the newcomer learn about us quickly, with jitter so that a
            // crowd answering one join does not answer at the same instant.
            let jitter = Duration::from_millis(self.next_rand() % 50);
            self.schedule_soon(now + jitter);
        }
        if via == Via::Unicast
            && !self.learned_peers.contains(&from)
            && !self.cfg.static_peers.contains(&from)
        {
            if self.learned_peers.len() < MAX_PARTICIPANTS {
                self.learned_peers.push(from);
            }
            self.schedule_soon(now);
        }
        let rp = self.remotes.get_mut(&id).expect("inserted above");
        if via == Via::Unicast {
            rp.unicast = Some(from);
        }
        if via != Via::Broker && !rp.direct {
            rp.direct = true;
            // Now reachable directly: let matching try the network paths.
            self.events.push_back(Event::ParticipantJoined(id));
        }
        rp.info = a.info;
        rp.expires = now + Duration::from_millis(u64::from(rp.info.lease_ms));
        if a.revision < rp.revision {
            return Ok(()); // stale part of an older revision
        }
        let asm = match &mut rp.assembly {
            Some(asm) if asm.revision == a.revision && asm.got.len() == a.parts as usize => asm,
            _ => rp.assembly.insert(Assembly {
                revision: a.revision,
                got: vec![false; a.parts as usize],
                records: Vec::new(),
            }),
        };
        if asm.records.len() + a.records.len() > MAX_RECORDS_PER_PARTICIPANT {
            rp.assembly = None;
            self.stats.malformed += 1;
            return Err(DatagramError::TooLarge("more than 4096 records"));
        }
        let mut added = Vec::new();
        if !asm.got[a.part as usize] {
            asm.got[a.part as usize] = true;
            for rec in a.records {
                match &rec {
                    Record::Node(n) => {
                        rp.nodes.insert(n.id, n.clone());
                    }
                    Record::Endpoint(e) => {
                        if rp.endpoints.get(&e.entity) != Some(e) {
                            rp.endpoints.insert(e.entity, e.clone());
                            added.push(e.clone());
                        }
                    }
                }
                asm.records.push(rec);
            }
        }
        let complete = asm.got.iter().all(|g| *g);
        let mut removed = Vec::new();
        if complete {
            let asm = rp.assembly.take().expect("matched above");
            rp.revision = asm.revision;
            let keep_ep: std::collections::HashSet<u32> = asm
                .records
                .iter()
                .filter_map(|r| match r {
                    Record::Endpoint(e) => Some(e.entity),
                    _ => None,
                })
                .collect();
            let keep_nodes: std::collections::HashSet<u32> = asm
                .records
                .iter()
                .filter_map(|r| match r {
                    Record::Node(n) => Some(n.id),
                    _ => None,
                })
                .collect();
            rp.nodes.retain(|k, _| keep_nodes.contains(k));
            let gone: Vec<u32> = rp
                .endpoints
                .keys()
                .filter(|k| !keep_ep.contains(k))
                .copied()
                .collect();
            for k in gone {
                if let Some(e) = rp.endpoints.remove(&k) {
                    removed.push(e);
                }
            }
        }
        for endpoint in removed {
            self.events.push_back(Event::EndpointLeft {
                participant: id,
                endpoint,
            });
        }
        for endpoint in added {
            self.events.push_back(Event::EndpointJoined {
                participant: id,
                endpoint,
            });
        }
        Ok(())
    }

    /// The broker reported `id`'s connection lost (its last will): it
    /// leaves now, as [`LeaveReason::ConnectionLost`].
    pub fn peer_vanished(&mut self, id: ParticipantId) {
        self.remove(id, LeaveReason::ConnectionLost);
    }

    fn remove(&mut self, id: ParticipantId, reason: LeaveReason) {
        if let Some(rp) = self.remotes.remove(&id) {
            for endpoint in rp.endpoints.into_values() {
                self.events.push_back(Event::EndpointLeft {
                    participant: id,
                    endpoint,
                });
            }
            if let Some(u) = rp.unicast {
                self.learned_peers.retain(|p| *p != u);
            }
            self.events.push_back(Event::ParticipantLeft { id, reason });
        }
    }

    /// Advances time: expires silent participants, sends due announcements.
    pub fn handle_timeout(&mut self, now: Instant) {
        let expired: Vec<ParticipantId> = self
            .remotes
            .values()
            .filter(|rp| rp.expires <= now)
            .map(|rp| rp.id)
            .collect();
        for id in expired {
            self.remove(id, LeaveReason::LeaseExpired);
        }
        if self.left {
            return;
        }
        let soon_due = self.next_soon.is_some_and(|t| t <= now);
        if soon_due || self.next_periodic <= now {
            self.announce();
            self.next_soon = None;
            let period = if now < self.fast_until {
                self.cfg.announce_period / 4
            } else {
                self.cfg.announce_period
            };
            // ±10 % jitter keeps a crowd of runtimes from synchronising.
            let tenth = (period.as_micros() as u64 / 10).max(1);
            let jitter = self.next_rand() % (2 * tenth);
            self.next_periodic =
                now + period - Duration::from_micros(tenth) + Duration::from_micros(jitter);
        }
    }

    /// When [`Discovery::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = if self.left {
            None
        } else {
            Some(self.next_periodic)
        };
        if let Some(s) = self.next_soon {
            t = Some(t.map_or(s, |t| t.min(s)));
        }
        for rp in self.remotes.values() {
            t = Some(t.map_or(rp.expires, |t| t.min(rp.expires)));
        }
        t
    }

    /// Next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let t = self.transmits.pop_front();
        if t.is_some() {
            self.stats.sent += 1;
        }
        t
    }

    /// Next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Sends a full announcement at the next timeout (e.g. a broker
    /// connection just came up).
    pub fn announce_now(&mut self, now: Instant) {
        self.schedule_soon(now);
    }

    /// Clean exit: queues a goodbye to everyone; no further announcements.
    pub fn leave(&mut self) {
        if self.left {
            return;
        }
        self.left = true;
        let bye = Beacon {
            domain: self.cfg.domain,
            participant: self.cfg.participant,
            body: BeaconBody::Bye,
        }
        .encode();
        for to in self.destinations() {
            self.transmits.push_back(Transmit {
                to,
                bytes: bye.clone(),
            });
        }
    }

    fn destinations(&self) -> Vec<Destination> {
        let mut d = Vec::new();
        if self.cfg.multicast {
            d.push(Destination::Group);
        }
        for p in self.cfg.static_peers.iter().chain(&self.learned_peers) {
            d.push(Destination::Peer(*p));
        }
        if self.cfg.broker {
            d.push(Destination::Broker);
        }
        d
    }

    fn announce(&mut self) {
        let parts = Beacon::pack_announce(
            self.cfg.domain,
            self.cfg.participant,
            &self.cfg.info,
            self.revision,
            &self.records,
            self.cfg.mtu,
        );
        for to in self.destinations() {
            for p in &parts {
                self.transmits.push_back(Transmit {
                    to: to.clone(),
                    bytes: p.clone(),
                });
            }
        }
    }

    fn schedule_soon(&mut self, at: Instant) {
        self.next_soon = Some(self.next_soon.map_or(at, |s| s.min(at)));
    }

    fn next_rand(&mut self) -> u64 {
        // xorshift64*: jitter only, no security role.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[cfg(test)]
mod tests;
