//! The discovery state machine.
//!
//! At rest a participant sends only a 25-byte heartbeat per period (its
//! record revision and lease). Its records (nodes, endpoints, locators) go
//! out once when they change, and to whoever asks with a `Request` — which a
//! peer sends when a heartbeat shows a revision it has not got. The period
//! grows with the number of participants (like RTCP's report interval) so
//! that in a domain of more than [`SMALL_DOMAIN`] each participant receives
//! at most [`HEARTBEATS_PER_S`] heartbeats a second whatever the domain's
//! size: the cost of a domain at rest is linear in its participants, not
//! quadratic. A newcomer is greeted by everyone (a unicast heartbeat) and
//! asks each for its records: a join costs O(N) datagrams once.
//!
//! A participant's state changes only through datagrams from the address it
//! was first heard from ([`guard::Origin`]); revisions advance by at most
//! [`MAX_REVISION_STEP`]; leases are capped at [`MAX_LEASE_MS`]; a
//! participant is only visible once it answered a request at that address,
//! and is dropped if it has not within [`FIRST_CONTACT`]; one source address
//! is capped in participants, records and rate.

mod auth;
mod guard;
mod outgoing;
mod pending;
mod records;
mod signed;
mod types;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry_security::KeyId;
use ferry_wire::beacon::{Beacon, BeaconBody, ParticipantInfo, Record, FLAG_FED};
use ferry_wire::ParticipantId;

pub use auth::{action_of, Auth, BadKey};
use auth::{Keys, Replay};
use guard::{Origin, Sources, Verdict};
pub use guard::{MAX_PARTICIPANTS_PER_SOURCE, MAX_RECORDS_PER_SOURCE, SOURCE_BURST, SOURCE_RATE};
use pending::{Pending, GROUP_ANSWER};
use signed::Checked;
pub use types::{
    period_for, Config, DatagramError, Destination, Event, LeaveReason, RemoteParticipant,
    SecurityStats, Stats, Transmit, Via, MAX_REVISION_STEP,
};

/// Most remote participants remembered (visible or still being learned).
pub const MAX_PARTICIPANTS: usize = 2048;
/// Most records remembered per remote participant.
pub const MAX_RECORDS_PER_PARTICIPANT: usize = 4096;
/// Most parts one announcement may be split into: enough for
/// [`MAX_RECORDS_PER_PARTICIPANT`] records of up to ~350 bytes each (long
/// topic and type names, a 32-byte type hash) in 1472-byte datagrams.
pub const MAX_PARTS: u16 = 1024;
/// Longest lease honoured: a participant claiming more is expired after this.
pub const MAX_LEASE_MS: u32 = 600_000;
/// How long a participant whose records have not arrived yet may stay
/// silent before it is forgotten (it is learned again from its next
/// heartbeat): a forged id that never answers our requests goes after this.
pub const FIRST_CONTACT: Duration = Duration::from_secs(5);
/// Under `enforce`, what an unsigned last will from the broker leaves of a
/// peer's lease.
pub const FORGED_WILL_LEASE: Duration = Duration::from_secs(3);
/// A participant greeted less than this ago is not greeted again.
pub const GREET_REPEAT: Duration = Duration::from_secs(5);
/// How long an id claimed from two addresses at first contact is ignored.
pub const CONTESTED: Duration = Duration::from_secs(10);
/// Heartbeats each participant receives per second at most in a domain of
/// more than [`SMALL_DOMAIN`] participants, whatever its size: the period is
/// stretched to keep within it (and the announced lease with it).
pub const HEARTBEATS_PER_S: u32 = 8;
/// Up to this many participants, the period is the configured one (each
/// receives at most ~35 heartbeats a second at the default lease).
pub const SMALL_DOMAIN: u32 = 16;

#[derive(Debug, Clone)]
struct Assembly {
    revision: u32,
    got: Vec<bool>,
    info: Option<ParticipantInfo>,
    records: Vec<Record>,
}

/// One entry of the participant table.
#[derive(Debug)]
struct Entry {
    origin: Origin,
    /// `None` until its first whole record set arrived.
    known: Option<RemoteParticipant>,
    /// Revision of `known` (0: none yet).
    revision: u32,
    /// Latest revision it said it has.
    advertised: u32,
    lease: Duration,
    expires: Instant,
    assembly: Option<Assembly>,
    /// When to ask for its records (again), while `advertised` is not had.
    next_request: Option<Instant>,
    request_gap: Duration,
    /// Requests sent for the records it advertised, unanswered so far.
    asks: u8,
    /// When the first of them went out.
    asked_at: Option<Instant>,
    first_seen: Instant,
    /// Last evidence from the data plane (a live connection).
    last_data: Option<Instant>,
    /// Where it sends us its periodic heartbeats by unicast (we send ours
    /// back there).
    unicast: Option<SocketAddr>,
    /// `known` came through the broker (perhaps without network
    /// addresses): once it is heard directly, its records are asked for.
    via_broker: bool,
    /// The key that signed its first beacon (`None`: a plain participant):
    /// only beacons signed by it speak for it.
    key: Option<KeyId>,
    /// Its signed beacons' stamps.
    replay: Replay,
    /// It echoed one of our challenges (or is plain): its records may
    /// become visible.
    proven: bool,
    /// Its whole record set, waiting for the proof.
    ready: Option<Assembly>,
    /// When a verified beacon of it was last taken.
    verified_at: Option<Instant>,
}

impl Entry {
    fn records(&self) -> usize {
        self.known
            .as_ref()
            .map_or(0, |k| k.nodes.len() + k.endpoints.len())
    }

    fn live(&self, now: Instant) -> bool {
        self.last_data
            .is_some_and(|t| now.duration_since(t) < self.lease)
    }
}

/// `to` is at most [`MAX_REVISION_STEP`] ahead of `from` (serial arithmetic).
fn ahead(to: u32, from: u32) -> bool {
    let d = to.wrapping_sub(from);
    d != 0 && d <= MAX_REVISION_STEP
}

/// After starting, ask everyone to greet us again after this, then at
/// doubling intervals while our table keeps growing.
const HELLO_FIRST: Duration = Duration::from_millis(300);
/// `Request` for this id: "everyone, greet me".
pub const EVERYONE: ParticipantId = ParticipantId(0);

/// The discovery state machine. See the module docs.
#[derive(Debug)]
pub struct Discovery {
    cfg: Config,
    records: Vec<Record>,
    revision: u32,
    table: HashMap<ParticipantId, Entry>,
    sources: Sources,
    /// Ids claimed from two addresses while being learned: ignored until then.
    contested: HashMap<ParticipantId, Instant>,
    /// Unicast peers that send us their heartbeats and get ours.
    learned_peers: Vec<SocketAddr>,
    next_periodic: Instant,
    /// Our records changed: send them to everyone at this time.
    changed: Option<Instant>,
    /// Earliest expiry or request due in the table (a lower bound).
    next_scan: Instant,
    fast_until: Instant,
    /// Smoothed time from a request to its answer.
    answer_time: Option<Duration>,
    /// Requests for our records, answered with an announcement.
    replies: Pending,
    /// Newcomers, greeted with a heartbeat so they learn about us.
    greetings: Pending,
    /// Whom we greeted lately, and when.
    greeted: HashMap<ParticipantId, Instant>,
    /// While our table still grows after we started: when to ask everyone
    /// to greet us again (a greeting lost in a crowd's burst is otherwise
    /// only repaired by the next, possibly long, period), and how many we
    /// knew when we last asked.
    hello: Option<(Instant, Duration, usize)>,
    /// Datagrams to send, each with the nonce its trailer carries.
    transmits: VecDeque<(Transmit, u64)>,
    events: VecDeque<Event>,
    /// Signing and checking (security on).
    keys: Option<Keys>,
    rng: u64,
    stats: Stats,
    left: bool,
    /// Our host leader feeds us discovery ([`Discovery::set_fed`]).
    fed: bool,
    /// Say nothing on our own before this ([`Discovery::hold_until`]).
    hold: Option<Instant>,
}

impl Discovery {
    /// Starts discovery; the first announcement is due at `now`.
    pub fn new(cfg: Config, now: Instant) -> Self {
        let rng = cfg.seed | 1;
        let fast_until = now + cfg.announce_period;
        let keys = cfg
            .auth
            .clone()
            .map(|a| Keys::new(a, cfg.domain, cfg.participant, cfg.unix_at_start_us, now));
        Discovery {
            keys,
            cfg,
            records: Vec::new(),
            revision: 1,
            table: HashMap::new(),
            sources: Sources::default(),
            contested: HashMap::new(),
            learned_peers: Vec::new(),
            next_periodic: now,
            changed: Some(now),
            next_scan: now,
            fast_until,
            answer_time: None,
            replies: Pending::default(),
            greetings: Pending::default(),
            greeted: HashMap::new(),
            hello: Some((now + HELLO_FIRST, HELLO_FIRST, 0)),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            rng,
            stats: Stats::default(),
            left: false,
            fed: false,
            hold: None,
        }
    }

    /// This runtime's id.
    pub fn participant(&self) -> ParticipantId {
        self.cfg.participant
    }

    /// Whether our host leader feeds us its host's discovery (it received
    /// the datagrams we would and hands them to
    /// [`Discovery::handle_datagram`]): our beacons say so
    /// ([`FLAG_FED`]), so nobody greets us, and we do not ask everyone to
    /// greet us. Ends a [`Discovery::hold_until`].
    pub fn set_fed(&mut self, fed: bool, now: Instant) {
        self.fed = fed;
        if fed {
            self.hello = None;
        }
        self.speak(now);
    }

    /// Whether [`Discovery::set_fed`] said our host leader feeds us.
    pub fn is_fed(&self) -> bool {
        self.fed
    }

    /// Says nothing on our own (announcements, heartbeats, greetings)
    /// before `until`, or until [`Discovery::speak`]: a runtime electing
    /// its host's leader waits to know whether the leader will feed it,
    /// so that a crowd starting at once does not greet every runtime.
    pub fn hold_until(&mut self, until: Instant) {
        self.hold = Some(until);
    }

    /// Ends a [`Discovery::hold_until`] now.
    pub fn speak(&mut self, now: Instant) {
        if self.hold.take().is_some() {
            self.next_periodic = self.next_periodic.min(now);
        }
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
        self.changed_at(now + Duration::from_millis(2));
    }

    fn changed_at(&mut self, at: Instant) {
        self.revision = self.revision.wrapping_add(1).max(1);
        // Coalesce bursts of local changes (a node creating ten ports) into one.
        self.changed = Some(self.changed.map_or(at, |t| t.min(at)));
    }

    /// Changes the announced lease (and the period: a sixth of it). Used to
    /// honour an endpoint's liveliness lease shorter than the runtime's.
    pub fn set_lease(&mut self, lease_ms: u32, now: Instant) {
        let lease_ms = lease_ms.clamp(60, MAX_LEASE_MS);
        if self.cfg.info.lease_ms == lease_ms {
            return;
        }
        let shorter = lease_ms < self.cfg.info.lease_ms;
        self.cfg.info.lease_ms = lease_ms;
        self.cfg.announce_period = period_for(lease_ms);
        if shorter {
            self.next_periodic = now;
        }
    }

    /// The lease this runtime announces: its configured lease, or longer
    /// when the domain is so large that the period had to stretch.
    pub fn lease_ms(&self) -> u32 {
        let p = self.period();
        let base = period_for(self.cfg.info.lease_ms);
        if p <= base {
            self.cfg.info.lease_ms
        } else {
            (p.as_millis() as u64 * 66 / 10).min(u64::from(MAX_LEASE_MS)) as u32
        }
    }

    /// Time between heartbeats: the configured period, stretched so that
    /// every participant receives at most [`HEARTBEATS_PER_S`] a second.
    pub fn period(&self) -> Duration {
        // Every participant heard (also those still being learned: in a
        // crowd starting at once the period must stretch before records
        // arrive). Forged ids are capped per source and in all; at worst
        // they stretch it to the lease cap.
        let n = self.table.len() as u32 + 1;
        if n <= SMALL_DOMAIN {
            // A lease shorter than the default (fast failure detection)
            // is honoured as configured.
            return self.cfg.announce_period;
        }
        let scaled = Duration::from_secs(1) * n / HEARTBEATS_PER_S;
        self.cfg
            .announce_period
            .max(scaled)
            .min(period_for(MAX_LEASE_MS))
    }

    /// Updates the announced locators (e.g. a transport started listening).
    pub fn set_locators(&mut self, locators: Vec<ferry_wire::Locator>, now: Instant) {
        if self.cfg.info.locators != locators {
            self.cfg.info.locators = locators;
            self.changed_at(now);
        }
    }

    /// Evidence from the data plane that `participant` is alive (a datagram
    /// or frame from it): extends its lease like a beacon would. A process
    /// that keeps sending is not expired because a lossy link ate its
    /// beacons; one that stops (kill -9) still expires within its lease.
    pub fn refresh(&mut self, participant: ParticipantId, now: Instant) {
        if let Some(e) = self.table.get_mut(&participant) {
            if e.known.is_some() {
                e.expires = e.expires.max(now + e.lease);
                e.last_data = Some(now);
            }
        }
    }

    /// Known remote participants (those whose records arrived).
    pub fn participants(&self) -> impl Iterator<Item = &RemoteParticipant> {
        self.table.values().filter_map(|e| e.known.as_ref())
    }

    /// One remote participant.
    pub fn participant_info(&self, id: ParticipantId) -> Option<&RemoteParticipant> {
        self.table.get(&id).and_then(|e| e.known.as_ref())
    }

    /// Feeds one received datagram.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        via: Via,
        bytes: &[u8],
    ) -> Result<(), DatagramError> {
        if self.cfg.loopback_only && via != Via::Broker && !from.ip().is_loopback() {
            self.stats.not_loopback += 1;
            return Err(DatagramError::NotLoopback(from));
        }
        let parsed = match Beacon::parse_signed(bytes) {
            Ok(b) => b,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e.into());
            }
        };
        if parsed.beacon.domain != self.cfg.domain {
            self.stats.foreign_domain += 1;
            return Err(DatagramError::ForeignDomain(parsed.beacon.domain));
        }
        let id = parsed.beacon.participant;
        if id == self.cfg.participant {
            return Ok(()); // our own multicast, looped back
        }
        if let Some(k) = &mut self.keys {
            k.now = now;
        }
        let signed = match self.authenticate(now, from, via, &parsed)? {
            Checked::Plain => None,
            Checked::Signed(s) => Some(s),
            Checked::Consumed => return Ok(()),
        };
        let beacon = parsed.beacon;
        let request = matches!(beacon.body, BeaconBody::Request { .. });
        if let Some(e) = self.table.get(&id) {
            // A participant first heard signed speaks only signed by that
            // key; one first heard plain (permissive) only plain.
            let key = signed.as_ref().and_then(|s| s.key);
            if !request && e.key != key && e.key.is_some() && key.is_some() && !e.proven {
                // Two keys claim an id neither has proven (another identity
                // of our CA raced its first beacons): neither is believed
                // for a while, as with two addresses.
                self.stats.not_owner += 1;
                self.remove(id, LeaveReason::LeaseExpired);
                if self.contested.len() < MAX_PARTICIPANTS {
                    self.contested.insert(id, now + CONTESTED);
                }
                return Err(DatagramError::Contested(id));
            }
            if !request && e.key != key {
                self.stats.not_owner += 1;
                return Err(DatagramError::NotOwner {
                    participant: id,
                    from,
                    origin: "the key that first signed for it".into(),
                });
            }
        }
        let nonce = signed.as_ref().map_or(0, |s| s.nonce);
        // Its host leader feeds it: nobody needs to greet it.
        let fed = parsed.flags & FLAG_FED != 0;
        let r = match beacon.body {
            BeaconBody::Bye => match self.verdict(now, id, from, via)? {
                Some(Verdict::Owner) => {
                    self.remove(id, LeaveReason::Bye);
                    Ok(())
                }
                _ => Ok(()),
            },
            BeaconBody::Heartbeat {
                revision,
                lease_ms,
                greeting,
            } => self
                .on_alive(
                    now, from, via, id, revision, lease_ms, !greeting, false, fed,
                )
                .map(|alive| {
                    if alive {
                        self.after_signed(now, id, signed.as_ref());
                    }
                }),
            BeaconBody::Announce(a) => {
                self.spend(from, via, now)?;
                let (rev, lease) = (a.revision, a.info.lease_ms);
                if self.on_alive(now, from, via, id, rev, lease, false, true, fed)? {
                    self.after_signed(now, id, signed.as_ref());
                    self.on_part(now, id, a)
                } else {
                    Ok(())
                }
            }
            BeaconBody::Credential { .. } => Ok(()),
            BeaconBody::Request { target } => {
                if via != Via::Broker && !self.left {
                    if target == self.cfg.participant {
                        self.spend(from, via, now)?;
                        if nonce != 0 && self.keys.is_some() {
                            // Its challenge answered at once by a small
                            // signed heartbeat: our records may already be
                            // there (from an announcement to the group) and
                            // only wait for this proof; the records follow,
                            // perhaps with a crowd's group answer.
                            let hb = self.heartbeat(true);
                            self.queue(Destination::Peer(from), hb, nonce);
                        }
                        self.replies
                            .add(from, nonce, now + Duration::from_millis(2));
                    } else if target == EVERYONE {
                        self.spend(from, via, now)?;
                        let at = now + self.greeting_jitter();
                        self.greetings.add(from, 0, at);
                    }
                }
                Ok(())
            }
        };
        if r.is_ok() {
            self.stats.received += 1;
        }
        r
    }

    fn spend(&mut self, from: SocketAddr, via: Via, now: Instant) -> Result<(), DatagramError> {
        if self.sources.spend(Origin::of(from, via).ip(), now) {
            Ok(())
        } else {
            self.stats.refused += 1;
            Err(DatagramError::Throttled(from.ip()))
        }
    }

    /// How a datagram naming `id` relates to it (`None`: unknown id).
    fn verdict(
        &mut self,
        now: Instant,
        id: ParticipantId,
        from: SocketAddr,
        via: Via,
    ) -> Result<Option<Verdict>, DatagramError> {
        if let Some(until) = self.contested.get(&id) {
            if now < *until {
                self.stats.not_owner += 1;
                return Err(DatagramError::Contested(id));
            }
            self.contested.remove(&id);
        }
        let Some(e) = self.table.get(&id) else {
            return Ok(None);
        };
        let v = e
            .origin
            .verdict(from, via, e.known.as_ref().map(|k| &k.info));
        if v == Verdict::Stranger {
            self.stats.not_owner += 1;
            let origin = format!("{:?}", e.origin);
            let young = now < e.first_seen + FIRST_CONTACT && !e.live(now);
            if e.known.is_none() || young {
                // Two addresses claim one id within its first seconds (an
                // attacker heard its first multicast and raced it): one of
                // them is forging. Neither is believed for a while. A
                // participant known longer, or with a live connection,
                // keeps its address: established peers cannot be taken
                // over.
                self.remove(id, LeaveReason::LeaseExpired);
                if self.contested.len() >= MAX_PARTICIPANTS {
                    self.contested.retain(|_, t| *t > now);
                }
                if self.contested.len() < MAX_PARTICIPANTS {
                    self.contested.insert(id, now + CONTESTED);
                }
            }
            return Err(DatagramError::NotOwner {
                participant: id,
                from,
                origin,
            });
        }
        Ok(Some(v))
    }

    /// A heartbeat or announcement part from `id`: admits it, checks that
    /// it comes from its origin, renews its lease and asks for its records
    /// when they are newer than ours.
    #[allow(clippy::too_many_arguments)]
    fn on_alive(
        &mut self,
        now: Instant,
        from: SocketAddr,
        via: Via,
        id: ParticipantId,
        revision: u32,
        lease_ms: u32,
        periodic: bool,
        announce: bool,
        fed: bool,
    ) -> Result<bool, DatagramError> {
        let lease = Duration::from_millis(u64::from(lease_ms.min(MAX_LEASE_MS)));
        match self.verdict(now, id, from, via)? {
            None => {
                self.spend(from, via, now)?;
                self.admit(now, from, via, id, revision, lease, fed)?;
            }
            Some(Verdict::BrokerCopy) => {
                let e = self.table.get_mut(&id).expect("verdict found it");
                if e.known.is_some() && revision == e.revision {
                    e.expires = e.expires.max(now + e.lease);
                }
                return Ok(false);
            }
            Some(Verdict::Upgrade) => {
                let first_gap = self.first_request_gap();
                let e = self.table.get_mut(&id).expect("verdict found it");
                let ip = e.origin.ip();
                e.origin = Origin::Direct(from);
                let records = e.records();
                if e.known.is_some() {
                    // Now reachable directly. What the broker carried may
                    // lack its network addresses: ask the owner for its
                    // records; matching tries the network paths when they
                    // come (`on_part`).
                    e.next_request = Some(now);
                    e.request_gap = first_gap;
                    self.next_scan = now;
                }
                self.sources.remove_participant(ip, records);
                self.sources.add_participant(Some(from.ip()), now);
                self.sources.set_records(Some(from.ip()), 0, records);
            }
            Some(Verdict::Copy) => return Ok(false),
            Some(Verdict::Owner | Verdict::Stranger) => {}
        }
        let spread_us = self.next_rand() % (self.table.len() as u64 * 500 + 1);
        let first_gap = self.first_request_gap();
        let first_contact = self.first_contact();
        let e = self.table.get_mut(&id).expect("admitted");
        if e.known.is_some() && revision != e.revision {
            if ahead(e.revision, revision) {
                return Ok(false); // an old datagram, reordered
            }
            if !ahead(revision, e.revision) {
                self.stats.refused += 1;
                return Err(DatagramError::RevisionJump {
                    from: e.revision,
                    to: revision,
                });
            }
        }
        if e.known.is_some() {
            e.lease = lease;
            e.expires = e.expires.max(now + lease);
        } else if e.key.is_some() && !e.proven {
            // Signed but not proven: it has FIRST_CONTACT from its first
            // beacon to echo a challenge, however many beacons it sends (a
            // recording or a forger never answers).
            e.expires = (now + first_contact).min(e.first_seen + first_contact);
        } else {
            // Still being learned: silent for FIRST_CONTACT, it is dropped.
            e.expires = now + first_contact;
        }
        if revision != e.revision && via != Via::Broker {
            // Records we have not got: ask for them, at once after a
            // heartbeat, after a grace period after a part of the
            // announcement itself (its other parts are on their way).
            let at = if announce {
                now + Duration::from_millis(100)
            } else if e.known.is_none() {
                // A crowd's newcomers: spread the requests (half a
                // millisecond per participant known).
                now + Duration::from_micros(spread_us)
            } else {
                now
            };
            if e.advertised != revision || e.next_request.is_none() {
                e.advertised = revision;
                e.asks = 0;
                e.asked_at = None;
                e.request_gap = first_gap;
                e.next_request = Some(e.next_request.map_or(at, |t| t.min(at)));
                self.next_scan = self.next_scan.min(at);
            }
        }
        if via == Via::Unicast && !announce && periodic && e.unicast.is_none() {
            let learned = &mut self.learned_peers;
            if !self.cfg.static_peers.contains(&from) && learned.len() < MAX_PARTICIPANTS {
                if !learned.contains(&from) {
                    learned.push(from);
                }
                e.unicast = Some(from);
                if let Some(k) = &mut e.known {
                    k.unicast = Some(from);
                }
            }
        }
        Ok(true)
    }

    /// A participant heard for the first time: into the table (making
    /// room if needed), greeted so that it learns about us soon (unless its
    /// host leader feeds it: it hears of us through the leader).
    #[allow(clippy::too_many_arguments)]
    fn admit(
        &mut self,
        now: Instant,
        from: SocketAddr,
        via: Via,
        id: ParticipantId,
        revision: u32,
        lease: Duration,
        fed: bool,
    ) -> Result<(), DatagramError> {
        let origin = Origin::of(from, via);
        if self.sources.participants(origin.ip()) >= MAX_PARTICIPANTS_PER_SOURCE
            && !self.evict(now, origin.ip())
        {
            self.stats.refused += 1;
            return Err(DatagramError::TableFull("per source address"));
        }
        if self.table.len() >= MAX_PARTICIPANTS && !self.evict(now, None) {
            self.stats.refused += 1;
            return Err(DatagramError::TableFull("in all"));
        }
        self.sources.add_participant(origin.ip(), now);
        self.table.insert(
            id,
            Entry {
                origin,
                known: None,
                revision: 0,
                advertised: revision,
                lease,
                expires: now + self.first_contact(),
                assembly: None,
                next_request: None,
                via_broker: false,
                request_gap: Duration::from_millis(100),
                asks: 0,
                asked_at: None,
                first_seen: now,
                last_data: None,
                unicast: None,
                key: None,
                replay: Replay::default(),
                proven: true,
                ready: None,
                verified_at: None,
            },
        );
        self.next_scan = self.next_scan.min(now + self.first_contact());
        // Let the newcomer learn about us quickly, with jitter so that a
        // crowd answering one join does not answer at the same instant.
        let jitter = self.greeting_jitter();
        match origin {
            Origin::Direct(a) if !self.left && !fed && self.first_greeting(id, now) => {
                self.greetings.add(a, 0, now + jitter)
            }
            Origin::Broker => {
                let at = now + jitter;
                self.changed = Some(self.changed.map_or(at, |t| t.min(at)));
            }
            _ => {}
        }
        Ok(())
    }

    /// Makes room for one participant (of source `ip` when given, else of
    /// any): forgets a participant still being learned, the oldest first;
    /// else the one whose source holds the most, without a live
    /// connection. Never one the data plane shows alive.
    fn evict(&mut self, now: Instant, ip: Option<std::net::IpAddr>) -> bool {
        let of_source = |e: &Entry| ip.is_none() || e.origin.ip() == ip;
        let learning = self
            .table
            .iter()
            .filter(|(_, e)| e.known.is_none() && of_source(e))
            .min_by_key(|(_, e)| e.first_seen)
            .map(|(id, _)| *id);
        let victim = learning.or_else(|| {
            self.table
                .iter()
                .filter(|(_, e)| !e.live(now) && of_source(e))
                .max_by_key(|(_, e)| {
                    (
                        self.sources.participants(e.origin.ip()),
                        std::cmp::Reverse(e.first_seen),
                    )
                })
                .map(|(id, _)| *id)
        });
        match victim {
            Some(id) => {
                self.stats.evicted += 1;
                self.remove(id, LeaveReason::LeaseExpired);
                true
            }
            None => false,
        }
    }

    /// The broker reported `id`'s connection lost (its last will): it
    /// leaves now, as [`LeaveReason::ConnectionLost`].
    ///
    /// With security enforced, the will is unsigned (the broker publishes
    /// it; any client of the broker could): it only shortens the peer's
    /// lease to [`FORGED_WILL_LEASE`], so a forged will cannot remove a
    /// live peer, whose next beacon renews it.
    pub fn peer_vanished(&mut self, id: ParticipantId) {
        let Some(e) = self.table.get_mut(&id) else {
            return;
        };
        if e.origin != Origin::Broker {
            return;
        }
        match &self.keys {
            Some(k) if k.auth.enforce => {
                e.expires = e.expires.min(k.now + FORGED_WILL_LEASE);
                self.next_scan = self.next_scan.min(e.expires);
            }
            _ => self.remove(id, LeaveReason::ConnectionLost),
        }
    }

    fn remove(&mut self, id: ParticipantId, reason: LeaveReason) {
        let Some(e) = self.table.remove(&id) else {
            return;
        };
        if e.key.is_some() && !e.proven && reason == LeaveReason::LeaseExpired {
            self.stats.security.unproven += 1;
        }
        if let (Some(k), Some(_)) = (&mut self.keys, e.key) {
            k.forget(id, e.replay.newest());
        }
        self.sources.remove_participant(e.origin.ip(), e.records());
        if let Some(u) = e.unicast {
            self.learned_peers.retain(|p| *p != u);
        }
        let Some(k) = e.known else { return };
        for endpoint in k.endpoints.into_values() {
            self.events.push_back(Event::EndpointLeft {
                participant: id,
                endpoint,
            });
        }
        self.events.push_back(Event::ParticipantLeft { id, reason });
    }

    /// Advances time: expires silent participants, asks for records,
    /// sends due heartbeats, announcements and answers.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(k) = &mut self.keys {
            k.now = now;
        }
        if self.next_scan <= now {
            self.scan(now);
        }
        if self.left {
            return;
        }
        if let Some(h) = self.hold {
            if now < h {
                return;
            }
            self.hold = None;
        }
        let group_ok = self.cfg.multicast;
        // One datagram to the group costs a reception at every member: it
        // beats unicast only when a good part of the domain asked at once
        // (a quarter for records, half for greetings — a group heartbeat
        // also makes those who have our records look again).
        let n = self.table.len();
        if let Some(due) = self.replies.due(now, group_ok, (n / 4).max(GROUP_ANSWER)) {
            self.answer(due);
        }
        if let Some(due) = self.greetings.due(now, group_ok, (n / 2).max(GROUP_ANSWER)) {
            self.greet(due);
        }
        if let Some((at, gap, known)) = self.hello {
            if at <= now {
                let n = self.table.len();
                // Stop once an interval passed without anyone new (after
                // the first two asks), after three, and in a large
                // domain: every ask costs a reception at every member and
                // a greeting from each, and in a crowd starting at once
                // the table grows for long. There, greetings at admission
                // and the periodic heartbeats repair what was lost.
                self.hello = if (n <= known && gap > HELLO_FIRST)
                    || gap > HELLO_FIRST * 4
                    || n >= SMALL_DOMAIN as usize * 4
                {
                    None
                } else {
                    let ask = self.beacon(BeaconBody::Request { target: EVERYONE });
                    for to in self.destinations(false) {
                        self.queue(to, ask.clone(), 0);
                    }
                    Some((now + gap * 2, gap * 2, n))
                };
            }
        }
        let announced = self.changed.is_some_and(|t| t <= now);
        if announced {
            self.changed = None;
            let all = self.destinations(true);
            self.send_announce(&all, 0);
        }
        if self.next_periodic <= now {
            // An announcement to everyone this turn is the heartbeat too
            // (at start, a crowd's first heartbeats doubled its traffic).
            if !announced {
                self.heartbeat_all();
            }
            let period = if now < self.fast_until && self.table.len() < SMALL_DOMAIN as usize {
                self.cfg.announce_period / 4
            } else {
                self.period()
            };
            // ±10 % jitter keeps a crowd of runtimes from synchronising.
            let tenth = (period.as_micros() as u64 / 10).max(1);
            let jitter = self.next_rand() % (2 * tenth);
            self.next_periodic =
                now + period - Duration::from_micros(tenth) + Duration::from_micros(jitter);
        }
    }

    /// Longest wait between two requests for one participant's records:
    /// 1 s, or 5 ms per participant in a large domain (a crowd of
    /// newcomers must not be asked faster than it can answer).
    fn max_request_gap(&self) -> Duration {
        Duration::from_secs(1).max(Duration::from_millis(5) * self.table.len() as u32)
    }

    /// First wait before asking again: 100 ms, or twice the time answers
    /// take lately (a crowd answers slowly; asking again before the answer
    /// could come only adds load).
    fn first_request_gap(&self) -> Duration {
        let base = Duration::from_millis(100);
        self.answer_time
            .map_or(base, |a| base.max(a * 2))
            .min(self.max_request_gap())
    }

    /// How long a participant being learned may stay silent: FIRST_CONTACT,
    /// or three request gaps in a large domain.
    fn first_contact(&self) -> Duration {
        FIRST_CONTACT.max(self.max_request_gap() * 3)
    }

    /// Expiries and requests due; the next such moment.
    fn scan(&mut self, now: Instant) {
        let max_gap = self.max_request_gap();
        let expired: Vec<ParticipantId> = self
            .table
            .iter()
            .filter(|(_, e)| e.expires <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.remove(id, LeaveReason::LeaseExpired);
        }
        let mut next = now + Duration::from_secs(3600);
        let domain = self.cfg.domain;
        let me = self.cfg.participant;
        for (id, e) in &mut self.table {
            if let (Some(t), Origin::Direct(a)) = (e.next_request, e.origin) {
                if t <= now && !self.left {
                    let rq = Beacon {
                        domain,
                        participant: me,
                        body: BeaconBody::Request { target: *id },
                    };
                    let nonce = self.keys.as_mut().map_or(0, |k| k.challenge(*id, now));
                    self.transmits.push_back((
                        Transmit {
                            to: Destination::Peer(a),
                            bytes: rq.encode(),
                        },
                        nonce,
                    ));
                    e.next_request = Some(now + e.request_gap);
                    e.request_gap = (e.request_gap * 2).min(max_gap);
                    if e.asks == 0 {
                        e.asked_at = Some(now);
                    }
                    e.asks = e.asks.saturating_add(1);
                }
            }
            next = next.min(e.expires);
            if let Some(t) = e.next_request {
                next = next.min(t);
            }
        }
        self.next_scan = next;
    }

    /// When [`Discovery::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.next_scan;
        if let Some(h) = self.hold.filter(|_| !self.left) {
            return Some(t.min(h));
        }
        if !self.left {
            t = t.min(self.next_periodic);
            for x in [
                self.changed,
                self.replies.at,
                self.greetings.at,
                self.hello.map(|h| h.0),
            ]
            .into_iter()
            .flatten()
            {
                t = t.min(x);
            }
        }
        Some(t)
    }

    /// Next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        let (mut t, nonce) = self.transmits.pop_front()?;
        if self.fed {
            ferry_wire::beacon::add_flags(&mut t.bytes, FLAG_FED);
        }
        if let Some(k) = &mut self.keys {
            t.bytes = k.seal(std::mem::take(&mut t.bytes), nonce);
        }
        self.stats.sent += 1;
        Some(t)
    }

    fn queue(&mut self, to: Destination, bytes: Vec<u8>, nonce: u64) {
        self.transmits.push_back((Transmit { to, bytes }, nonce));
    }

    /// Next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Sends the whole announcement at the next timeout (e.g. a broker
    /// connection just came up).
    pub fn announce_now(&mut self, now: Instant) {
        self.changed = Some(self.changed.map_or(now, |t| t.min(now)));
    }

    /// Clean exit: queues a goodbye to everyone; no further announcements.
    pub fn leave(&mut self) {
        if self.left {
            return;
        }
        self.left = true;
        let bye = self.beacon(BeaconBody::Bye);
        for to in self.destinations(true) {
            self.queue(to, bye.clone(), 0);
        }
    }

    /// Whether to greet `id`, heard for the first time: not if it was
    /// greeted less than [`GREET_REPEAT`] ago (a participant forgotten in a
    /// crowd's storm and heard again would otherwise cost a greeting each
    /// time). Its own "greet me" is always answered.
    fn first_greeting(&mut self, id: ParticipantId, now: Instant) -> bool {
        if self
            .greeted
            .get(&id)
            .is_some_and(|t| now < *t + GREET_REPEAT)
        {
            return false;
        }
        if self.greeted.len() >= MAX_PARTICIPANTS {
            self.greeted.retain(|_, t| now < *t + GREET_REPEAT);
            if self.greeted.len() >= MAX_PARTICIPANTS {
                return true;
            }
        }
        self.greeted.insert(id, now);
        true
    }

    /// Spread of a crowd's greetings: 50 ms, or half a millisecond per
    /// participant in a larger domain (the newcomer's socket takes them in).
    fn greeting_jitter(&mut self) -> Duration {
        let spread = (self.table.len() as u64 / 2).max(50);
        Duration::from_millis(self.next_rand() % spread)
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

#[cfg(test)]
mod attack_tests;

#[cfg(test)]
mod secure_tests;

#[cfg(test)]
mod fed_tests;
