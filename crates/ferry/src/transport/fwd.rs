//! Forwarding through a host leader (issue 25, `docs/FORWARDER.md`).
//!
//! **Writer side** ([`ForwardTransport`], kind `fwd`): a pair whose reader's
//! runtime names a host leader `L` (its own `fwd/L` locator — the reader's
//! consent — while `L` names itself and runs on the reader's host) is
//! carried by one TCP connection per (writer, `L`), the *host stream*,
//! shared by every reader of that host: a sample crosses the network once
//! per host, whatever the number of readers there.
//!
//! **Leader side** ([`Relay`]): the host stream binds to the leader's relay
//! reader (`RELAY_ENTITY`). For each sample, the relay writes it into a
//! shared-memory slot of its pool for that writer once, and queues that
//! slot on one shared-memory connection per reader of its host that
//! follows it and matches the writer ([`ShmTransport::connect_forwarded`]).
//! Each reader's runtime accepts such a connection only from the process
//! it elected as its leader, and takes it as a relayed path (kind
//! `Forwarded`): numbered with the writer's own sequence, so a direct path
//! from the same writer makes its samples duplicates, dropped at the
//! hand-over as for the MQTT broker.
//!
//! Not built yet (see `docs/FORWARDER.md`): automatic selection (a pair
//! takes this path when pinned, `transport = "fwd"`), UDP as the host
//! stream, forwarding with security on, the hand-over of history when the
//! leader dies (the pair reconnects through the new leader, or fails
//! over to no path and is retried every second).

use std::collections::{HashMap, HashSet, VecDeque};

use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use ferry_wire::frame::FrameKind;
use ferry_wire::{EndpointId, EndpointKind, History, Locator, ParticipantId, Qos, TransportKind};
use parking_lot::{Mutex, RwLock};

use super::shm::ShmTransport;
use super::{
    Capabilities, ConnectError, ConnectRequest, InFrame, InboundConn, Inbox, Link, OutFrame,
    PeerInfo, SendError, Transport,
};
use crate::message::Payload;
use crate::priority::{Applied, Priority, PriorityError};
use crate::stats::ConnStats;

/// The entity of a runtime's relay reader, which host streams bind to.
pub(crate) const RELAY_ENTITY: u32 = u32::MAX - 1;

/// How often the relay looks a writer's readers up again without a
/// discovery change (a reader it could not connect to, one of its own).
const RETRY: Duration = Duration::from_secs(1);

/// One stream from a local writer to one host's leader.
struct HostStream {
    inner: Arc<dyn Link>,
    /// The newest sample sent on it: the links of the host's other readers
    /// see it was and do not send it again.
    last: AtomicU64,
    readers: Mutex<HashSet<EndpointId>>,
}

/// Carries pairs to readers on other hosts through their host's leader.
pub struct ForwardTransport {
    host_id: u64,
    tcp: Arc<dyn Transport>,
    /// Runtimes that lead their host (announce `fwd/` naming themselves).
    leaders: RwLock<HashMap<ParticipantId, PeerInfo>>,
    hosts: Mutex<HashMap<(EndpointId, ParticipantId), Arc<HostStream>>>,
    /// One connect at a time, so two readers of a host share one stream.
    connecting: Mutex<()>,
    relay: Arc<Relay>,
    me: Weak<ForwardTransport>,
}

impl ForwardTransport {
    /// The writer side over `tcp`, and this runtime's relay (which
    /// redistributes over `shm` while this runtime leads its host).
    pub(crate) fn new(
        host_id: u64,
        me_id: ParticipantId,
        tcp: Arc<dyn Transport>,
        shm: Option<Arc<ShmTransport>>,
    ) -> Arc<ForwardTransport> {
        let relay = Arc::new_cyclic(|me| Relay {
            id: EndpointId {
                participant: me_id,
                entity: RELAY_ENTITY,
            },
            shm,
            targets: OnceLock::new(),
            generation: AtomicU64::new(1),
            leading: AtomicBool::new(false),
            writers: Mutex::new(HashMap::new()),
            me: me.clone(),
        });
        let inbox: Arc<dyn Inbox> = relay.clone();
        super::intra::register_reader(&inbox);
        Arc::new_cyclic(|me| ForwardTransport {
            host_id,
            tcp,
            leaders: RwLock::new(HashMap::new()),
            hosts: Mutex::new(HashMap::new()),
            connecting: Mutex::new(()),
            relay,
            me: me.clone(),
        })
    }

    /// The relay this runtime serves its host with while it leads.
    pub(crate) fn relay(&self) -> &Arc<Relay> {
        &self.relay
    }

    /// What discovery knows of `peer` now: a runtime whose locators name
    /// itself as its host's leader is one, else not (any more).
    pub(crate) fn peer_seen(&self, peer: &PeerInfo) {
        let leads = peer
            .locators
            .iter()
            .filter_map(Locator::host_leader)
            .any(|l| l == peer.participant);
        let mut leaders = self.leaders.write();
        if leads {
            leaders.insert(peer.participant, peer.clone());
        } else {
            leaders.remove(&peer.participant);
        }
    }

    /// `peer` left the domain.
    pub(crate) fn peer_gone(&self, peer: ParticipantId) {
        self.leaders.write().remove(&peer);
    }

    /// The leader a reader on `remote` consents to be served by, when that
    /// leader announces itself as one and runs on the reader's host, and
    /// that host is not ours.
    fn leader_for(&self, remote: &PeerInfo) -> Option<PeerInfo> {
        if remote.host_id == self.host_id {
            return None;
        }
        let l = remote.locators.iter().find_map(Locator::host_leader)?;
        let lp = self.leaders.read().get(&l).cloned()?;
        (lp.host_id == remote.host_id).then_some(lp)
    }

    fn forget(&self, key: (EndpointId, ParticipantId), host: &Arc<HostStream>) {
        let mut hosts = self.hosts.lock();
        if hosts.get(&key).is_some_and(|h| Arc::ptr_eq(h, host)) {
            hosts.remove(&key);
        }
    }
}

impl Transport for ForwardTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Forwarded
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            zero_copy: false,
            mtu: None,
            request_reply: false,
        }
    }
    fn locators(&self) -> Vec<Locator> {
        Vec::new()
    }
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        self.leader_for(remote)
            .is_some_and(|lp| self.tcp.reaches(local, &lp))
    }
    fn automatic(&self, _local: &PeerInfo, _remote: &PeerInfo) -> bool {
        false
    }
    fn connect(&self, req: ConnectRequest) -> Result<Arc<dyn Link>, ConnectError> {
        let lp = self
            .leader_for(&req.remote)
            .ok_or_else(|| ConnectError::Unreachable {
                peer: req.remote.participant,
                tried: "fwd".into(),
                last: "its runtime names no host leader that announces itself".into(),
            })?;
        let key = (req.writer, lp.participant);
        let _one = self.connecting.lock();
        let live = self
            .hosts
            .lock()
            .get(&key)
            .filter(|h| !h.inner.is_closed())
            .cloned();
        let host = match live {
            Some(h) => h,
            None => {
                let inner = self.tcp.connect(ConnectRequest {
                    writer: req.writer,
                    writer_kind: req.writer_kind,
                    reader: EndpointId {
                        participant: lp.participant,
                        entity: RELAY_ENTITY,
                    },
                    topic: req.topic.clone(),
                    qos: req.qos,
                    remote: lp.clone(),
                    reply_sink: None,
                })?;
                let h = Arc::new(HostStream {
                    inner,
                    last: AtomicU64::new(0),
                    readers: Mutex::new(HashSet::new()),
                });
                self.hosts.lock().insert(key, h.clone());
                h
            }
        };
        host.readers.lock().insert(req.reader);
        Ok(Arc::new(ForwardLink {
            host,
            key,
            reader: req.reader,
            closed: AtomicBool::new(false),
            transport: self.me.clone(),
        }))
    }
    fn forget_writer(&self, writer: EndpointId) {
        let gone: Vec<Arc<HostStream>> = {
            let mut hosts = self.hosts.lock();
            let keys: Vec<_> = hosts.keys().filter(|k| k.0 == writer).copied().collect();
            keys.iter().filter_map(|k| hosts.remove(k)).collect()
        };
        for h in gone {
            h.inner.close();
        }
    }
    fn take_lost(&self) -> Vec<(EndpointId, EndpointId)> {
        let mut hosts = self.hosts.lock();
        let broken: Vec<_> = hosts
            .iter()
            .filter(|(_, h)| h.inner.is_closed())
            .map(|(k, _)| *k)
            .collect();
        let mut lost = Vec::new();
        for k in broken {
            if let Some(h) = hosts.remove(&k) {
                lost.extend(h.readers.lock().iter().map(|r| (k.0, *r)));
            }
        }
        lost
    }
    fn shutdown(&self) {
        super::intra::unregister_reader(self.relay.id);
        self.relay.close_all();
    }
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

/// A writer's link to one reader on another host, through the host stream
/// it shares with the host's other readers.
struct ForwardLink {
    host: Arc<HostStream>,
    key: (EndpointId, ParticipantId),
    reader: EndpointId,
    closed: AtomicBool,
    transport: Weak<ForwardTransport>,
}

impl Link for ForwardLink {
    fn transport(&self) -> TransportKind {
        TransportKind::Forwarded
    }
    fn remote(&self) -> EndpointId {
        self.reader
    }
    fn locator(&self) -> String {
        format!(
            "{} via {}",
            Locator::forwarded_by(self.key.1),
            self.host.inner.locator()
        )
    }
    fn protection(&self) -> String {
        self.host.inner.protection()
    }
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        // Sent already for another reader of this host: the leader gives
        // it to every reader there.
        if frame.kind == FrameKind::Data
            && self.host.last.fetch_max(frame.seq, Ordering::AcqRel) >= frame.seq
        {
            return Ok(());
        }
        self.host.inner.send(frame)
    }
    fn replay(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        // History for a late joiner: through the stream again (the
        // readers there that had it drop it by its number).
        self.host.inner.send(frame)
    }
    fn stats(&self) -> &ConnStats {
        self.host.inner.stats()
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.host.inner.is_closed()
    }
    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let empty = {
            let mut r = self.host.readers.lock();
            r.remove(&self.reader);
            r.is_empty()
        };
        if empty {
            if let Some(t) = self.transport.upgrade() {
                t.forget(self.key, &self.host);
            }
            self.host.inner.close();
        }
    }
    fn priority(&self) -> Priority {
        self.host.inner.priority()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        self.host.inner.set_priority(p)
    }
}

/// A reader of this host the relay serves a writer to.
pub(crate) struct Target {
    /// The reader.
    pub reader: EndpointId,
    /// Its runtime.
    pub peer: PeerInfo,
    /// The writer's topic.
    pub topic: String,
    /// The writer's QoS.
    pub qos: Qos,
}

/// The readers of this host that follow this runtime and match a writer
/// (the runtime answers from discovery).
pub(crate) type Targets = Box<dyn Fn(EndpointId) -> Vec<Target> + Send + Sync>;

/// What the relay keeps per writer it relays.
#[derive(Default)]
struct Relayed {
    /// Host streams from it (normally one).
    streams: usize,
    /// The discovery generation its readers were last looked up at.
    seen: u64,
    /// When to look them up again anyway (a reader that could not be
    /// connected, a reader of this runtime's own).
    next_look: Option<Instant>,
    links: HashMap<EndpointId, Arc<dyn Link>>,
    /// Readers being connected, with the samples that came meanwhile
    /// (the newest `PENDING`): they go first once the reader accepted, so
    /// a reader misses nothing from the moment the relay looked it up.
    pending: HashMap<EndpointId, VecDeque<(u64, u64, Bytes)>>,
}

/// Samples kept for a reader while its connection is being made.
const PENDING: usize = 256;

/// The leader's end of host streams: redistributes each sample over
/// shared memory to the readers of its host.
pub struct Relay {
    id: EndpointId,
    shm: Option<Arc<ShmTransport>>,
    targets: OnceLock<Targets>,
    generation: AtomicU64,
    leading: AtomicBool,
    writers: Mutex<HashMap<EndpointId, Relayed>>,
    me: Weak<Relay>,
}

impl Relay {
    /// How the runtime answers which readers a writer goes to.
    pub(crate) fn bind(&self, targets: Targets) {
        let _ = self.targets.set(targets);
    }

    /// Discovery changed: readers are looked up again at the next sample.
    pub(crate) fn graph_changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether this runtime leads its host now (a relay that does not
    /// lead passes nothing on).
    pub(crate) fn set_leading(&self, leading: bool) {
        self.leading.store(leading, Ordering::Release);
        self.graph_changed();
        if !leading {
            self.close_all();
        }
    }

    fn close_all(&self) {
        let links: Vec<_> = self
            .writers
            .lock()
            .values_mut()
            .flat_map(|w| w.links.drain().map(|(_, l)| l))
            .collect();
        for l in links {
            l.close();
        }
    }

    /// The links of `writer`'s readers, after looking them up again when
    /// discovery changed (new readers connect on a thread of their own;
    /// `frame` waits for them in their pending queue).
    fn links_of(&self, writer: EndpointId, frame: &OutFrame<'_>) -> Vec<Arc<dyn Link>> {
        let generation = self.generation.load(Ordering::Acquire);
        let now = Instant::now();
        let stale = {
            let w = self.writers.lock();
            w.get(&writer)
                .is_some_and(|r| r.seen != generation || r.next_look.is_none_or(|t| t <= now))
        };
        if stale {
            self.refresh(writer, generation, now);
        }
        let mut w = self.writers.lock();
        let Some(r) = w.get_mut(&writer) else {
            return Vec::new();
        };
        if !r.pending.is_empty() {
            if let Ok(b) = (frame.payload.bytes)() {
                for q in r.pending.values_mut() {
                    if q.len() == PENDING {
                        q.pop_front();
                    }
                    q.push_back((frame.seq, frame.stamp_ns, b.clone()));
                }
            }
        }
        r.links.values().cloned().collect()
    }

    fn refresh(&self, writer: EndpointId, generation: u64, now: Instant) {
        let (Some(targets), Some(shm)) = (self.targets.get(), &self.shm) else {
            return;
        };
        let want: HashMap<EndpointId, Target> =
            targets(writer).into_iter().map(|t| (t.reader, t)).collect();
        let (dropped, new) = {
            let mut w = self.writers.lock();
            let Some(r) = w.get_mut(&writer) else {
                return;
            };
            r.seen = generation;
            r.next_look = Some(now + RETRY);
            let gone: Vec<_> = r
                .links
                .iter()
                .filter(|(id, l)| !want.contains_key(id) || l.is_closed())
                .map(|(id, _)| *id)
                .collect();
            let dropped: Vec<_> = gone.iter().filter_map(|id| r.links.remove(id)).collect();
            let new: Vec<Target> = want
                .into_values()
                .filter(|t| !r.links.contains_key(&t.reader) && !r.pending.contains_key(&t.reader))
                .collect();
            for t in &new {
                r.pending.insert(t.reader, VecDeque::new());
            }
            (dropped, new)
        };
        for l in dropped {
            l.close();
        }
        for t in new {
            let (shm, me) = (shm.clone(), self.me.clone());
            let spawned = std::thread::Builder::new()
                .name("ferry-fwd".into())
                .spawn(move || {
                    let reader = t.reader;
                    let got = shm.connect_forwarded(ConnectRequest {
                        writer,
                        writer_kind: EndpointKind::Publisher,
                        reader,
                        topic: t.topic,
                        qos: relay_qos(t.qos),
                        remote: t.peer,
                        reply_sink: None,
                    });
                    let Some(relay) = me.upgrade() else { return };
                    let mut w = relay.writers.lock();
                    let r = w.get_mut(&writer);
                    match (got, r) {
                        (Ok(link), Some(r)) => {
                            // What came meanwhile goes first, under the
                            // lock `deliver` queues it under: no gap, no
                            // sample twice.
                            for (seq, stamp_ns, b) in r.pending.remove(&reader).unwrap_or_default()
                            {
                                let bytes = move || Ok(b.clone());
                                let _ = link.send(&OutFrame {
                                    kind: FrameKind::Data,
                                    seq,
                                    stamp_ns,
                                    payload: Payload {
                                        typed: None,
                                        bytes: &bytes,
                                    },
                                });
                            }
                            r.links.insert(reader, link);
                        }
                        (Ok(link), None) => {
                            drop(w);
                            link.close();
                        }
                        (Err(e), r) => {
                            tracing::debug!("relay of {writer} to {reader}: {e}");
                            if let Some(r) = r {
                                r.pending.remove(&reader);
                            }
                        }
                    }
                });
            if spawned.is_err() {
                if let Some(r) = self.writers.lock().get_mut(&writer) {
                    r.pending.remove(&t.reader);
                }
            }
        }
    }
}

/// The relay never holds the host stream back for one reader: a reader
/// that falls behind loses its oldest samples (keep_all relays keep the
/// last 256), the others go on.
fn relay_qos(mut q: Qos) -> Qos {
    if q.history == History::KeepAll {
        q.history = History::KeepLast(256);
    }
    q
}

impl Inbox for Relay {
    fn id(&self) -> EndpointId {
        self.id
    }
    fn name(&self) -> &str {
        ""
    }
    fn attach(&self, conn: Arc<InboundConn>) {
        self.writers.lock().entry(conn.remote).or_default().streams += 1;
        // Its readers here are connected now, before its first sample.
        if self.leading.load(Ordering::Acquire) {
            let generation = self.generation.load(Ordering::Acquire);
            self.refresh(conn.remote, generation, Instant::now());
        }
    }
    fn detach(&self, conn: &Arc<InboundConn>) {
        let gone = {
            let mut w = self.writers.lock();
            match w.get_mut(&conn.remote) {
                Some(r) if r.streams > 1 => {
                    r.streams -= 1;
                    None
                }
                Some(_) => w.remove(&conn.remote),
                None => None,
            }
        };
        if let Some(r) = gone {
            for l in r.links.into_values() {
                l.close();
            }
            if let Some(shm) = &self.shm {
                shm.forget_writer(conn.remote);
            }
        }
    }
    fn deliver(&self, conn: &Arc<InboundConn>, frame: &InFrame<'_>) {
        if frame.kind != FrameKind::Data || !self.leading.load(Ordering::Acquire) {
            return;
        }
        let out = OutFrame {
            kind: FrameKind::Data,
            seq: frame.seq,
            stamp_ns: frame.stamp_ns,
            payload: Payload {
                typed: None,
                bytes: frame.payload.bytes,
            },
        };
        for link in self.links_of(conn.remote, &out) {
            if let Err(e) = link.send(&out) {
                tracing::debug!("relay of {} to {}: {e}", conn.remote, link.remote());
            }
        }
    }
}
