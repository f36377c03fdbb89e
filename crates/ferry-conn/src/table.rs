//! The connection table: pairs, their states, and the actions that follow.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_discovery::matching::{match_endpoints, MatchOutcome};
use ferry_discovery::LeaveReason;
use ferry_wire::beacon::EndpointRecord;
use ferry_wire::{EndpointId, EndpointKind, ParticipantId, TransportKind};

use crate::event::{PortEvent, UnmatchReason};
use crate::path::{select, PeerInfo, Route};

/// How long a UDP connection outlives its reader's lease, waiting for the
/// link to come back (the seed paper's outages last 10–20 s).
pub const OUTAGE_GRACE: Duration = Duration::from_secs(120);

/// How long a pair waits before connecting again after a failed connect, a
/// lost link, or finding no transport that reaches the peer.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// How many matched subscribers on one remote host make a publisher send
/// to that host once, through its leader (`Table::set_forward_threshold`).
pub const FORWARD_THRESHOLD: usize = 2;

/// Where one writer→reader pair stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairState {
    /// A connect over this transport is under way (local writer).
    Connecting(TransportKind),
    /// Connected over this transport (local writer).
    Connected(TransportKind),
    /// No transport reached the peer, the connect failed or the link broke;
    /// connect again at this instant (local writer).
    Failed(Instant),
    /// Remote writer → local reader: the writer's runtime connects.
    Matched,
    /// Same topic, but types or QoS conflict.
    Incompatible,
}

impl PairState {
    /// The pair matches (whatever its connection is doing).
    pub fn is_matched(self) -> bool {
        !matches!(self, PairState::Incompatible)
    }
}

/// What the caller of the table must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Connect the local `writer` to `reader` over `transport`, then report
    /// [`Table::connected`] or [`Table::connect_failed`]. `replaces`: the
    /// pair leaves this path for the new one, make before break: the old
    /// link carries on until the new one is connected, and is dropped then
    /// (the reader drops the samples the two paths both carried).
    Connect {
        /// The local writer.
        writer: EndpointId,
        /// The reader.
        reader: EndpointId,
        /// The path chosen.
        transport: TransportKind,
        /// The path it leaves, if any.
        replaces: Option<TransportKind>,
    },
    /// Drop the local `writer`'s link to `reader` (if it has one).
    Unlink {
        /// The local writer.
        writer: EndpointId,
        /// The reader.
        reader: EndpointId,
    },
    /// Tell a local port about a peer (a reader also counts the writer as
    /// matched or not from `Matched` / `Unmatched`).
    Notify {
        /// The local port.
        port: EndpointId,
        /// What happened.
        event: PortEvent,
    },
    /// A remote writer left for good: drop the datagram streams it had into
    /// this runtime.
    ForgetWriter {
        /// The remote writer.
        writer: EndpointId,
    },
    /// No transport reaches the reader (said once per pair; retried).
    NoPath {
        /// The local writer.
        writer: EndpointId,
        /// The reader.
        reader: EndpointId,
        /// The transport the pair is pinned to, if any.
        pinned: Option<TransportKind>,
    },
    /// A UDP pair's reader went silent: its stream is kept (probing,
    /// history bounded) until `until`, and resumes if the reader returns.
    Suspended {
        /// The local writer.
        writer: EndpointId,
        /// The reader.
        reader: EndpointId,
        /// When the stream is given up.
        until: Instant,
    },
}

/// How a local endpoint may be connected (decided by the runtime's config
/// when the port is created).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalOptions {
    /// The transport `[[topics]]` pins this topic to (the QoS pins of either
    /// side come first).
    pub pin: Option<TransportKind>,
    /// A writer that may reach broker-only readers over MQTT (a publisher
    /// of a cloud-scoped topic; clients always may).
    pub broker_ok: bool,
    /// The writer has a Zenoh link that carries its pairs pinned to Zenoh
    /// (without one, such a pair has no path, and says so).
    pub zenoh: bool,
}

/// Counters of the table's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Writer×reader evaluations (`match_endpoints` calls) since creation.
    pub evaluations: u64,
    /// Pairs that match or conflict now.
    pub pairs: usize,
    /// Endpoints known (local and remote).
    pub endpoints: usize,
}

struct Endpoint {
    record: EndpointRecord,
    /// Some for this runtime's own endpoints.
    local: Option<LocalOptions>,
}

#[derive(Default)]
struct Topic {
    writers: BTreeSet<EndpointId>,
    readers: BTreeSet<EndpointId>,
}

/// The connection table. See the crate docs.
pub struct Table {
    local: PeerInfo,
    routes: Vec<Arc<dyn Route>>,
    peers: HashMap<ParticipantId, PeerInfo>,
    /// Each participant's endpoints (this runtime's too).
    by_peer: HashMap<ParticipantId, BTreeSet<u32>>,
    endpoints: HashMap<EndpointId, Endpoint>,
    topics: HashMap<String, Topic>,
    pairs: HashMap<(EndpointId, EndpointId), PairState>,
    /// UDP pairs whose reader expired: kept until the instant, resumed if
    /// the same reader comes back.
    suspended: BTreeMap<(EndpointId, EndpointId), Instant>,
    /// Failed pairs by retry time (entries whose pair moved on are skipped).
    retries: BTreeSet<(Instant, EndpointId, EndpointId)>,
    actions: VecDeque<Action>,
    evaluations: u64,
    /// Transports that refused a peer for good (shared memory between
    /// processes of different users), with why: its pairs take another
    /// path until the peer leaves.
    refused: HashMap<ParticipantId, Vec<(TransportKind, String)>>,
    /// Matched readers on one remote host at which a publisher forwards
    /// (0: never automatically).
    forward_threshold: usize,
}

impl Table {
    /// A table for the runtime `local`, choosing among `routes`.
    pub fn new(local: PeerInfo, routes: Vec<Arc<dyn Route>>) -> Table {
        Table {
            local,
            routes,
            peers: HashMap::new(),
            by_peer: HashMap::new(),
            endpoints: HashMap::new(),
            topics: HashMap::new(),
            pairs: HashMap::new(),
            suspended: BTreeMap::new(),
            retries: BTreeSet::new(),
            actions: VecDeque::new(),
            evaluations: 0,
            refused: HashMap::new(),
            forward_threshold: FORWARD_THRESHOLD,
        }
    }

    /// How many matched subscribers of one publisher on one remote host
    /// make it send to that host once, through the host's leader (the
    /// [`TransportKind::Forwarded`] path), instead of once per subscriber;
    /// 0 turns automatic forwarding off (a pin still forwards). Counted are
    /// the readers whose runtime names a host leader (joined its host's
    /// election) and whose pair no one pinned. Default
    /// [`FORWARD_THRESHOLD`].
    pub fn set_forward_threshold(&mut self, n: usize) {
        self.forward_threshold = n;
    }

    /// This runtime.
    pub fn local(&self) -> &PeerInfo {
        &self.local
    }

    /// The next action to carry out.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When [`Table::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let retry = self.retries.first().map(|r| r.0);
        let grace = self.suspended.values().min().copied();
        match (retry, grace) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Counters.
    pub fn stats(&self) -> TableStats {
        TableStats {
            evaluations: self.evaluations,
            pairs: self.pairs.len(),
            endpoints: self.endpoints.len(),
        }
    }

    /// The record of a known endpoint.
    pub fn endpoint(&self, id: EndpointId) -> Option<&EndpointRecord> {
        self.endpoints.get(&id).map(|e| &e.record)
    }

    /// What is known of a runtime (this one included).
    pub fn peer(&self, id: ParticipantId) -> Option<&PeerInfo> {
        if id == self.local.participant {
            Some(&self.local)
        } else {
            self.peers.get(&id)
        }
    }

    /// Where a pair stands.
    pub fn pair(&self, writer: EndpointId, reader: EndpointId) -> Option<PairState> {
        self.pairs.get(&(writer, reader)).copied()
    }

    /// Every pair and its state, in no order.
    pub fn pairs(&self) -> impl Iterator<Item = (EndpointId, EndpointId, PairState)> + '_ {
        self.pairs.iter().map(|(&(w, r), &s)| (w, r, s))
    }

    /// UDP pairs kept through their reader's outage, and until when.
    pub fn suspended(&self) -> impl Iterator<Item = (EndpointId, EndpointId, Instant)> + '_ {
        self.suspended.iter().map(|(&(w, r), &t)| (w, r, t))
    }

    /// A local port was created.
    pub fn add_local(&mut self, record: EndpointRecord, opts: LocalOptions, now: Instant) {
        let id = EndpointId {
            participant: self.local.participant,
            entity: record.entity,
        };
        self.upsert(id, record, Some(opts), now);
    }

    /// A local port was dropped: its pairs end (remote peers learn it from
    /// discovery; local peers are told `Withdrawn`).
    pub fn remove_local(&mut self, entity: u32, now: Instant) {
        let id = EndpointId {
            participant: self.local.participant,
            entity,
        };
        self.remove(id, UnmatchReason::Withdrawn, now);
    }

    /// A remote runtime was heard from for the first time, or what is known
    /// of it changed (heard directly after only through the broker, new
    /// locators). Pairs it is in that ride the broker move to a direct path
    /// once one reaches it.
    pub fn peer_up(&mut self, peer: PeerInfo, now: Instant) {
        let id = peer.participant;
        if id == self.local.participant {
            return;
        }
        let was_direct = self.peers.get(&id).is_some_and(|p| p.direct);
        let direct = peer.direct;
        let host = peer.host_id;
        let relocated = self.peers.get(&id).map(|p| &p.locators) != Some(&peer.locators);
        self.peers.insert(id, peer);
        if relocated {
            // It may have joined or left its host's election, or now lead
            // it: the publishers' pairs to that host are counted again.
            self.regroup_host(host, now);
        }
        if !direct || was_direct {
            return;
        }
        // Pairs on the broker to this peer's readers: try a direct path.
        let on_broker: Vec<(EndpointId, EndpointId)> = self
            .readers_of(id)
            .flat_map(|r| self.writers_paired_with(r).map(move |w| (w, r)))
            .filter(|k| self.pairs.get(k) == Some(&PairState::Connected(TransportKind::Mqtt)))
            .collect();
        for (w, r) in on_broker {
            self.connect(w, r, Some(TransportKind::Mqtt), now);
        }
    }

    /// A remote runtime left (`Bye`) or expired: all its endpoints leave
    /// with it.
    pub fn peer_left(&mut self, id: ParticipantId, reason: LeaveReason, now: Instant) {
        if id == self.local.participant {
            return;
        }
        let why = match reason {
            LeaveReason::LeaseExpired => UnmatchReason::LeaseExpired,
            LeaveReason::ConnectionLost => UnmatchReason::ConnectionLost,
            LeaveReason::Bye => UnmatchReason::Withdrawn,
        };
        let entities: Vec<u32> = self
            .by_peer
            .get(&id)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        for entity in entities {
            self.remove(
                EndpointId {
                    participant: id,
                    entity,
                },
                why,
                now,
            );
        }
        self.peers.remove(&id);
        self.by_peer.remove(&id);
        self.refused.remove(&id);
    }

    /// A remote endpoint appeared or its record changed.
    pub fn endpoint_up(
        &mut self,
        participant: ParticipantId,
        record: EndpointRecord,
        now: Instant,
    ) {
        if participant == self.local.participant {
            return;
        }
        let id = EndpointId {
            participant,
            entity: record.entity,
        };
        self.upsert(id, record, None, now);
    }

    /// A remote endpoint was withdrawn (its runtime lives on).
    pub fn endpoint_left(&mut self, participant: ParticipantId, entity: u32, now: Instant) {
        if participant == self.local.participant {
            return;
        }
        self.remove(
            EndpointId {
                participant,
                entity,
            },
            UnmatchReason::Withdrawn,
            now,
        );
    }

    /// A connect finished. True: the caller keeps the link and the writer
    /// is told; false: the pair moved on meanwhile, close the link.
    pub fn connected(
        &mut self,
        writer: EndpointId,
        reader: EndpointId,
        transport: TransportKind,
    ) -> bool {
        let key = (writer, reader);
        if self.pairs.get(&key) != Some(&PairState::Connecting(transport)) {
            return false;
        }
        self.pairs.insert(key, PairState::Connected(transport));
        self.actions.push_back(Action::Notify {
            port: writer,
            event: PortEvent::Matched {
                remote: reader,
                transport: Some(transport),
            },
        });
        true
    }

    /// A connect failed: retried after [`RETRY_AFTER`] if the pair still
    /// matches.
    pub fn connect_failed(&mut self, writer: EndpointId, reader: EndpointId, now: Instant) {
        let key = (writer, reader);
        if matches!(self.pairs.get(&key), Some(PairState::Connecting(_))) {
            self.fail(key, now);
        }
    }

    /// A connect failed for good on `transport` (it will never work for
    /// this reader's runtime): that transport is no longer chosen for the
    /// peer, and the pair connects over the next best path at once. True
    /// the first time `transport` refuses this peer (say it once).
    pub fn connect_refused(
        &mut self,
        writer: EndpointId,
        reader: EndpointId,
        transport: TransportKind,
        cause: &str,
        now: Instant,
    ) -> bool {
        let key = (writer, reader);
        let list = self.refused.entry(reader.participant).or_default();
        let first = !list.iter().any(|(k, _)| *k == transport);
        if first {
            list.push((transport, cause.to_string()));
        }
        if self.pairs.get(&key) == Some(&PairState::Connecting(transport)) {
            self.connect(writer, reader, None, now);
        }
        first
    }

    /// The transports that refused `peer` for good, with why.
    pub fn refused(&self, peer: ParticipantId) -> &[(TransportKind, String)] {
        self.refused.get(&peer).map_or(&[], Vec::as_slice)
    }

    /// A live link broke: the writer drops it, is told `ConnectionLost`,
    /// and the pair connects again after [`RETRY_AFTER`] while it matches.
    pub fn link_lost(&mut self, writer: EndpointId, reader: EndpointId, now: Instant) {
        let key = (writer, reader);
        if !matches!(self.pairs.get(&key), Some(PairState::Connected(_))) {
            return; // closed on purpose, or already replaced
        }
        self.actions.push_back(Action::Unlink { writer, reader });
        self.actions.push_back(Action::Notify {
            port: writer,
            event: PortEvent::Unmatched {
                remote: reader,
                reason: UnmatchReason::ConnectionLost,
            },
        });
        self.fail(key, now);
    }

    /// Advances time: failed pairs connect again, outage grace ends.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(at, w, r)) = self.retries.first() {
            if at > now {
                break;
            }
            self.retries.pop_first();
            if self.pairs.get(&(w, r)) == Some(&PairState::Failed(at)) {
                self.connect(w, r, None, now);
            }
        }
        let over: Vec<(EndpointId, EndpointId)> = self
            .suspended
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(k, _)| *k)
            .collect();
        for (writer, reader) in over {
            // Grace over: the reader never came back.
            self.suspended.remove(&(writer, reader));
            self.actions.push_back(Action::Unlink { writer, reader });
        }
    }

    // ----- internals -----

    fn is_local(&self, id: EndpointId) -> bool {
        id.participant == self.local.participant
    }

    fn readers_of(&self, p: ParticipantId) -> impl Iterator<Item = EndpointId> + '_ {
        self.by_peer
            .get(&p)
            .into_iter()
            .flatten()
            .map(move |&entity| EndpointId {
                participant: p,
                entity,
            })
            .filter(|id| {
                self.endpoints
                    .get(id)
                    .is_some_and(|e| !is_writer(e.record.kind))
            })
    }

    /// The writers that share a topic with reader `r` and have a pair with it.
    fn writers_paired_with(&self, r: EndpointId) -> impl Iterator<Item = EndpointId> + '_ {
        let topic = self
            .endpoints
            .get(&r)
            .and_then(|e| self.topics.get(&e.record.topic));
        topic
            .into_iter()
            .flat_map(|t| t.writers.iter().copied())
            .filter(move |w| self.pairs.contains_key(&(*w, r)))
    }

    fn upsert(
        &mut self,
        id: EndpointId,
        record: EndpointRecord,
        local: Option<LocalOptions>,
        now: Instant,
    ) {
        if let Some(old) = self.endpoints.get(&id) {
            if old.record == record && old.local == local {
                return;
            }
            if old.record.topic != record.topic || old.record.kind != record.kind {
                // Not the same port any more: the old one leaves first.
                self.remove(id, UnmatchReason::Withdrawn, now);
            }
        }
        let writer = is_writer(record.kind);
        let topic = self.topics.entry(record.topic.clone()).or_default();
        if writer {
            topic.writers.insert(id);
        } else {
            topic.readers.insert(id);
        }
        let others: Vec<EndpointId> = if writer {
            topic.readers.iter().copied().collect()
        } else {
            topic.writers.iter().copied().collect()
        };
        self.by_peer
            .entry(id.participant)
            .or_default()
            .insert(id.entity);
        self.endpoints.insert(id, Endpoint { record, local });
        for other in others {
            let (w, r) = if writer { (id, other) } else { (other, id) };
            self.evaluate(w, r, now);
        }
    }

    /// Re-decides one pair from the two records as they are now.
    fn evaluate(&mut self, w: EndpointId, r: EndpointId, now: Instant) {
        let (local_w, local_r) = (self.is_local(w), self.is_local(r));
        if !local_w && !local_r {
            return;
        }
        let (Some(we), Some(re)) = (self.endpoints.get(&w), self.endpoints.get(&r)) else {
            return;
        };
        self.evaluations += 1;
        let outcome = match_endpoints(&we.record, &re.record);
        let key = (w, r);
        let state = self.pairs.get(&key).copied();
        match outcome {
            MatchOutcome::Unrelated => {
                if state.is_some() {
                    self.unpair(w, r, UnmatchReason::Withdrawn, now);
                }
            }
            MatchOutcome::Incompatible(why) => {
                if state == Some(PairState::Incompatible) {
                    return;
                }
                if state.is_some() {
                    self.unpair(w, r, UnmatchReason::Withdrawn, now);
                }
                self.pairs.insert(key, PairState::Incompatible);
                if local_w {
                    self.notify(w, PortEvent::incompatible(r, &why));
                }
                if local_r {
                    self.notify(r, PortEvent::incompatible(w, &why));
                }
            }
            MatchOutcome::Matched => {
                if state.is_some_and(PairState::is_matched) {
                    return; // a change that keeps the match: nothing to do
                }
                if local_r {
                    self.notify(
                        r,
                        PortEvent::Matched {
                            remote: w,
                            transport: None,
                        },
                    );
                }
                if !local_w {
                    self.pairs.insert(key, PairState::Matched);
                } else if self.suspended.remove(&key).is_some() {
                    // The reader is back after an outage: same stream, history flows.
                    self.pairs
                        .insert(key, PairState::Connected(TransportKind::Udp));
                    self.notify(
                        w,
                        PortEvent::Matched {
                            remote: r,
                            transport: Some(TransportKind::Udp),
                        },
                    );
                } else {
                    self.connect(w, r, None, now);
                    if let Some(host) = self.forward_host(w, r) {
                        self.regroup(w, host, now);
                    }
                }
            }
        }
    }

    /// Chooses a path for a matched pair with a local writer and asks for
    /// the connect; `leaving`: the pair is on this path and moves off it.
    fn connect(
        &mut self,
        w: EndpointId,
        r: EndpointId,
        leaving: Option<TransportKind>,
        now: Instant,
    ) {
        let (Some(we), true) = (self.endpoints.get(&w), self.endpoints.contains_key(&r)) else {
            return;
        };
        let Some(opts) = we.local else {
            return;
        };
        let pin = self.pinned(w, r);
        let key = (w, r);
        if pin == Some(TransportKind::Zenoh) && opts.zenoh && w.participant != r.participant {
            // The writer's Zenoh link carries the pair (it puts for every
            // reader no link of the writer's reaches): nothing to connect.
            // (A runtime's own readers never hear its Zenoh session: they
            // keep the runtime's own paths.)
            if leaving.is_some() {
                self.actions.push_back(Action::Unlink {
                    writer: w,
                    reader: r,
                });
            }
            self.pairs.insert(key, PairState::Matched);
            return;
        }
        let pin = pin.filter(|p| *p != TransportKind::Zenoh || w.participant != r.participant);
        let kind = we.record.kind;
        let choose = |pin| {
            // A reader whose runtime was not heard from yet has no path (its
            // announcement brings it; until then the pair retries).
            self.peer(r.participant).and_then(|remote| {
                select(&self.routes, pin, kind, &self.local, remote, |k| {
                    (k != TransportKind::Mqtt
                        || (opts.broker_ok && leaving != Some(TransportKind::Mqtt)))
                        && !self
                            .refused
                            .get(&r.participant)
                            .is_some_and(|l| l.iter().any(|(x, _)| *x == k))
                })
            })
        };
        // Enough readers on the reader's host: through its leader, if that
        // path reaches it (else the pair's own path, moved when it does).
        let forward = self
            .forward_host(w, r)
            .is_some_and(|host| self.forwarding(w, host, r))
            .then(|| choose(Some(TransportKind::Forwarded)))
            .flatten();
        let chosen = forward.or_else(|| choose(pin));
        match chosen {
            Some(transport) if leaving == Some(transport) => {} // stays
            Some(transport) => {
                self.pairs.insert(key, PairState::Connecting(transport));
                self.actions.push_back(Action::Connect {
                    writer: w,
                    reader: r,
                    transport,
                    replaces: leaving,
                });
            }
            None if leaving.is_some() => {} // stays where it is
            None => {
                if !matches!(self.pairs.get(&key), Some(PairState::Failed(_))) {
                    self.actions.push_back(Action::NoPath {
                        writer: w,
                        reader: r,
                        pinned: pin,
                    });
                }
                self.fail(key, now);
            }
        }
    }

    /// The remote host whose leader may carry pair `w`→`r` when enough of
    /// the host's readers match `w`: `w` is a local publisher, no one
    /// pinned the pair, and `r`'s runtime runs on another host and names a
    /// leader there (it joined the host's election: its consent).
    fn forward_host(&self, w: EndpointId, r: EndpointId) -> Option<u64> {
        if self.forward_threshold == 0 {
            return None;
        }
        let we = self.endpoints.get(&w)?;
        if we.local.is_none()
            || we.record.kind != EndpointKind::Publisher
            || !self.endpoints.contains_key(&r)
            || self.pinned(w, r).is_some()
        {
            return None;
        }
        self.forward_candidate(r)
    }

    /// The transport pair `w`→`r` is pinned to: either side's QoS first,
    /// then the writer's `[[topics]]` rule.
    fn pinned(&self, w: EndpointId, r: EndpointId) -> Option<TransportKind> {
        let (we, re) = (self.endpoints.get(&w)?, self.endpoints.get(&r)?);
        we.record
            .qos
            .transport
            .or(re.record.qos.transport)
            .or(we.local?.pin)
    }

    /// `r`'s host when its runtime runs on another host and names a leader.
    fn forward_candidate(&self, r: EndpointId) -> Option<u64> {
        let peer = self.peers.get(&r.participant)?;
        let names_leader = peer.locators.iter().any(|l| l.host_leader().is_some());
        (peer.host_id != self.local.host_id && names_leader).then_some(peer.host_id)
    }

    /// Whether `w`'s matched readers on `host` that may be forwarded reach
    /// the threshold (`also`: one more that is being matched now).
    fn forwarding(&self, w: EndpointId, host: u64, also: EndpointId) -> bool {
        let Some(topic) = self
            .endpoints
            .get(&w)
            .and_then(|e| self.topics.get(&e.record.topic))
        else {
            return false;
        };
        let n = topic
            .readers
            .iter()
            .filter(|r| **r == also || self.pairs.get(&(w, **r)).is_some_and(|s| s.is_matched()))
            .filter(|r| self.forward_host(w, **r) == Some(host))
            .count();
        n >= self.forward_threshold
    }

    /// Moves `w`'s live pairs to `host`'s readers onto the path the count
    /// asks for now: all through the leader at the threshold, each on its
    /// own path below it (make before break; failed pairs choose when they
    /// retry).
    fn regroup(&mut self, w: EndpointId, host: u64, now: Instant) {
        let Some(topic) = self
            .endpoints
            .get(&w)
            .and_then(|e| self.topics.get(&e.record.topic))
        else {
            return;
        };
        // The pairs counted, and those forwarded automatically that no
        // longer count (their runtime left the election).
        let group: Vec<(EndpointId, TransportKind, bool)> = topic
            .readers
            .iter()
            .filter_map(|r| {
                let counted = self.forward_host(w, *r) == Some(host);
                let stale = !counted
                    && self.forward_candidate(*r).is_none()
                    && self.peers.get(&r.participant).map(|p| p.host_id) == Some(host)
                    && self.pinned(w, *r).is_none();
                match self.pairs.get(&(w, *r)) {
                    Some(PairState::Connected(k) | PairState::Connecting(k))
                        if counted || (stale && *k == TransportKind::Forwarded) =>
                    {
                        Some((*r, *k, counted))
                    }
                    _ => None,
                }
            })
            .collect();
        let forward = group
            .iter()
            .find(|g| g.2)
            .is_some_and(|g| self.forwarding(w, host, g.0));
        for (r, k, counted) in group {
            if (forward && counted) != (k == TransportKind::Forwarded) {
                self.connect(w, r, Some(k), now);
            }
        }
    }

    fn regroup_host_of(&mut self, w: EndpointId, host: u64, now: Instant) {
        if self.forward_threshold != 0 && host != self.local.host_id {
            self.regroup(w, host, now);
        }
    }

    /// Every local publisher's pairs to `host` counted again (a runtime
    /// there joined or left the election, or leads it now).
    fn regroup_host(&mut self, host: u64, now: Instant) {
        if self.forward_threshold == 0 || host == self.local.host_id {
            return;
        }
        let writers: Vec<EndpointId> = self
            .endpoints
            .iter()
            .filter(|(id, e)| self.is_local(**id) && e.record.kind == EndpointKind::Publisher)
            .map(|(id, _)| *id)
            .collect();
        for w in writers {
            self.regroup(w, host, now);
        }
    }

    fn fail(&mut self, key: (EndpointId, EndpointId), now: Instant) {
        let at = now + RETRY_AFTER;
        self.pairs.insert(key, PairState::Failed(at));
        self.retries.insert((at, key.0, key.1));
    }

    fn notify(&mut self, port: EndpointId, event: PortEvent) {
        self.actions.push_back(Action::Notify { port, event });
    }

    /// An endpoint leaves: every pair it is in ends.
    fn remove(&mut self, id: EndpointId, reason: UnmatchReason, now: Instant) {
        let Some(ep) = self.endpoints.remove(&id) else {
            return;
        };
        if let Some(set) = self.by_peer.get_mut(&id.participant) {
            set.remove(&id.entity);
        }
        let writer = is_writer(ep.record.kind);
        let mut others = Vec::new();
        if let Some(t) = self.topics.get_mut(&ep.record.topic) {
            if writer {
                t.writers.remove(&id);
                others.extend(t.readers.iter().copied());
            } else {
                t.readers.remove(&id);
                others.extend(t.writers.iter().copied());
            }
            if t.writers.is_empty() && t.readers.is_empty() {
                self.topics.remove(&ep.record.topic);
            }
        }
        if writer && self.is_local(id) {
            // A local writer's suspended streams go with its port.
            self.suspended.retain(|(w, _), _| *w != id);
        }
        for other in others {
            let (w, r) = if writer { (id, other) } else { (other, id) };
            self.unpair(w, r, reason, now);
        }
    }

    /// Ends one pair: an endpoint left (it is no longer in the table, so it
    /// is told nothing) or the pair stopped matching.
    fn unpair(&mut self, w: EndpointId, r: EndpointId, reason: UnmatchReason, now: Instant) {
        let Some(state) = self.pairs.remove(&(w, r)) else {
            return;
        };
        if state == PairState::Incompatible {
            return;
        }
        if self.stays_local(w) {
            if state == PairState::Connected(TransportKind::Udp)
                && reason == UnmatchReason::LeaseExpired
            {
                // An outage, not a departure: keep the stream and its history.
                let until = now + OUTAGE_GRACE;
                self.suspended.insert((w, r), until);
                self.actions.push_back(Action::Suspended {
                    writer: w,
                    reader: r,
                    until,
                });
            } else {
                self.actions.push_back(Action::Unlink {
                    writer: w,
                    reader: r,
                });
            }
            self.notify(w, PortEvent::Unmatched { remote: r, reason });
        }
        if self.is_local(r)
            && !self.is_local(w)
            && !self.endpoints.contains_key(&w)
            && reason == UnmatchReason::Withdrawn
        {
            // The remote writer left for good (one that only went silent
            // may come back on the same stream).
            self.actions.push_back(Action::ForgetWriter { writer: w });
        }
        if self.stays_local(r) {
            self.notify(r, PortEvent::Unmatched { remote: w, reason });
        }
        if self.stays_local(w) {
            // One reader fewer on its host: the others may leave its leader.
            if let Some(host) = self.peers.get(&r.participant).map(|p| p.host_id) {
                self.regroup_host_of(w, host, now);
            }
        }
    }

    /// `port` is one of this runtime's endpoints and still exists.
    fn stays_local(&self, port: EndpointId) -> bool {
        self.is_local(port) && self.endpoints.contains_key(&port)
    }
}

fn is_writer(k: EndpointKind) -> bool {
    matches!(k, EndpointKind::Publisher | EndpointKind::Client)
}
