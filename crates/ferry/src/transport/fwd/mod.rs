//! Forwarding through a host leader (issue 25, `docs/FORWARDER.md`).
//!
//! **Writer side** ([`ForwardTransport`], kind `fwd`): a pair whose reader's
//! runtime names a host leader `L` (its own `fwd/L` locator — the reader's
//! consent — while `L` names itself and runs on the reader's host) is
//! carried by one connection per (writer, host), the *host stream*, shared
//! by every reader of that host: a sample crosses the network once per
//! host, whatever the number of readers there. The host stream is TCP, or
//! UDP (the lossy-link protocol) with `forward_udp = true` when it reaches
//! the leader; UDP numbers its datagrams itself, so each sample travels
//! behind an `EnvelopeKind::Relayed` envelope with the writer's sequence
//! number.
//!
//! **Leader side** ([`Relay`]): the host stream binds to the leader's relay
//! reader (`RELAY_ENTITY`). For each sample, the relay writes it into a
//! shared-memory slot of its pool for that writer once, and queues that
//! slot on one shared-memory connection per reader of its host that
//! follows it and matches the writer (`ShmTransport::connect_forwarded`).
//! Each reader's runtime accepts such a connection only from the process
//! it elected as its leader, and takes it as a relayed path (kind
//! `Forwarded`): numbered with the writer's own sequence, so a direct path
//! from the same writer makes its samples duplicates, dropped at the
//! hand-over as for the MQTT broker, and so are samples another leader
//! relayed already.
//!
//! **Hand-over**: a host stream keeps the samples it sent last (up to
//! [`REPLAY_SAMPLES`] and [`REPLAY_BYTES`]). When its leader goes (the
//! connection breaks: kill -9 included), it connects to the leader the
//! host's readers elect next and sends them again; the readers drop those
//! they had. Publishing never waits for this: samples queue behind the
//! replay. A host with no new leader within [`GIVE_UP`] ends its pairs
//! (the connection table retries them).
//!
//! **A new leader** is looked for when the connection breaks (TCP: at once
//! when the leader dies) or when the host's readers name another leader
//! than the stream's (UDP has no break to see: the followers' new
//! announcements say it).
//!
//! Not built yet (see `docs/FORWARDER.md`): forwarding with security on.

mod relay;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_wire::frame::{EnvelopeKind, FrameKind};
use ferry_wire::{EndpointId, Locator, ParticipantId, TransportKind};
use parking_lot::{Mutex, RwLock};

pub(crate) use relay::{Relay, Target};

use super::shm::ShmTransport;
use super::{
    Capabilities, ConnectError, ConnectRequest, Link, OutFrame, PeerInfo, SendError, Transport,
};
use crate::message::Payload;
use crate::priority::{Applied, Priority, PriorityError};
use crate::stats::ConnStats;

/// The entity of a runtime's relay reader, which host streams bind to.
pub(crate) const RELAY_ENTITY: u32 = u32::MAX - 1;

/// Samples a host stream keeps to send again through the next leader.
pub const REPLAY_SAMPLES: usize = 1024;
/// Bytes a host stream keeps to send again through the next leader.
pub const REPLAY_BYTES: usize = 64 << 20;
/// How long a host stream looks for a new leader before its pairs end.
pub const GIVE_UP: Duration = Duration::from_secs(10);
/// A broken stream goes back to the leader it lost only after this long
/// (the leader may live and the connection alone have failed).
const SAME_LEADER_AFTER: Duration = Duration::from_millis(500);

/// A sample a host stream sent, kept for the next leader.
struct Sent {
    seq: u64,
    stamp_ns: u64,
    bytes: Bytes,
}

/// The connection a host stream sends on now.
struct Carrier {
    inner: Arc<dyn Link>,
    /// `inner` numbers its samples itself (UDP): each goes enveloped with
    /// the writer's sequence number.
    enveloped: bool,
    leader: ParticipantId,
    /// Looking for the next leader (a thread does): samples only queue.
    moving: bool,
    replay: VecDeque<Sent>,
    replay_bytes: usize,
}

/// One stream from a local writer to one host, through its leader.
struct HostStream {
    host: u64,
    writer: EndpointId,
    /// What the stream was opened with, to open it again (its `reader`
    /// and `remote` are the first reader's, unused).
    opened: ConnectRequest,
    carrier: Mutex<Carrier>,
    /// The newest sample sent on it: the links of the host's other readers
    /// see it was and do not send it again.
    last: AtomicU64,
    readers: Mutex<HashSet<EndpointId>>,
    /// No new leader came: its pairs end.
    dead: AtomicBool,
    stats: ConnStats,
}

impl HostStream {
    /// Sends one frame (keeping it for a replay); a broken connection
    /// starts the move to the next leader. Never waits for that move.
    fn send(
        &self,
        t: &Weak<ForwardTransport>,
        me: &Arc<HostStream>,
        frame: &OutFrame<'_>,
    ) -> Result<(), SendError> {
        let bytes = (frame.payload.bytes)()?;
        let len = bytes.len();
        let mut c = self.carrier.lock();
        // Kept under the lock, sent after it: a send may wait (a full UDP
        // window, keep_all), and the move to a new leader must not.
        if frame.kind == FrameKind::Data {
            c.replay_bytes += len;
            c.replay.push_back(Sent {
                seq: frame.seq,
                stamp_ns: frame.stamp_ns,
                bytes: bytes.clone(),
            });
            while c.replay.len() > REPLAY_SAMPLES || c.replay_bytes > REPLAY_BYTES {
                if let Some(old) = c.replay.pop_front() {
                    c.replay_bytes -= old.bytes.len();
                }
            }
        }
        if c.moving {
            return Ok(());
        }
        let (inner, enveloped) = (c.inner.clone(), c.enveloped);
        drop(c);
        let sent = carry(&inner, enveloped, frame, &bytes);
        if sent.is_ok() {
            self.stats.message(len);
            return Ok(());
        }
        let mut c = self.carrier.lock();
        if c.moving || !Arc::ptr_eq(&c.inner, &inner) {
            // Moved meanwhile: the sample was kept, and sent again.
            return Ok(());
        }
        match sent {
            Err(SendError::Closed) => {
                c.moving = true;
                drop(c);
                move_on(t.clone(), me.clone());
                Ok(())
            }
            other => other,
        }
    }
}

/// Sends one frame on `inner`, enveloped with the writer's sequence number
/// on a path that numbers samples itself (`enveloped`).
fn carry(
    inner: &Arc<dyn Link>,
    enveloped: bool,
    frame: &OutFrame<'_>,
    bytes: &Bytes,
) -> Result<(), SendError> {
    if !enveloped || frame.kind != FrameKind::Data {
        return inner.send(frame);
    }
    let wrapped = crate::transport::enveloped(EnvelopeKind::Relayed, frame.seq, bytes);
    let body = move || Ok(wrapped.clone());
    inner.send(&OutFrame {
        payload: Payload {
            typed: None,
            bytes: &body,
        },
        ..*frame
    })
}

/// Sends what `h` kept on its new connection `inner`, then what came while
/// it did, until nothing new came; then the stream carries on there with
/// `leader` (checked and switched under one lock: no sample slips between).
/// The carrier's lock is held only to look: a send may wait for
/// acknowledgements, which the I/O thread processes, and publishers only
/// queue meanwhile. Returns how many were sent.
fn replay(h: &HostStream, inner: &Arc<dyn Link>, enveloped: bool, leader: ParticipantId) -> usize {
    let (mut after, mut sent) = (None::<u64>, 0);
    loop {
        let batch: Vec<(u64, u64, Bytes)> = {
            let mut c = h.carrier.lock();
            let batch: Vec<_> = c
                .replay
                .iter()
                .filter(|s| after.is_none_or(|a| s.seq > a))
                .map(|s| (s.seq, s.stamp_ns, s.bytes.clone()))
                .collect();
            if batch.is_empty() {
                c.leader = leader;
                c.enveloped = enveloped;
                c.moving = false;
                return sent;
            }
            batch
        };
        for (seq, stamp_ns, b) in batch {
            after = Some(seq);
            let ok = kept_sample(seq, stamp_ns, &b, |f| carry(inner, enveloped, f, &b)).is_ok();
            sent += usize::from(ok);
        }
    }
}

/// Calls `f` with a data frame of a kept sample.
pub(super) fn kept_sample<R>(
    seq: u64,
    stamp_ns: u64,
    b: &Bytes,
    f: impl FnOnce(&OutFrame<'_>) -> R,
) -> R {
    let body = b.clone();
    let bytes = move || Ok(body.clone());
    f(&OutFrame {
        kind: FrameKind::Data,
        seq,
        stamp_ns,
        payload: Payload {
            typed: None,
            bytes: &bytes,
        },
    })
}

/// Looks for the leader the host's readers elect next, on a thread of its
/// own, connects to it and replays what the stream kept; ends the stream's
/// pairs after [`GIVE_UP`].
fn move_on(t: Weak<ForwardTransport>, h: Arc<HostStream>) {
    let spawned = std::thread::Builder::new()
        .name("ferry-fwd-move".into())
        .spawn(move || {
            let (lost, t0) = (h.carrier.lock().leader, Instant::now());
            while t0.elapsed() < GIVE_UP && !h.readers.lock().is_empty() {
                let Some(ft) = t.upgrade() else { return };
                let allow_same = t0.elapsed() >= SAME_LEADER_AFTER;
                if let Some(lp) = ft.next_leader(&h, lost, allow_same) {
                    match ft.open(&h.opened, &lp) {
                        Ok((inner, enveloped)) => {
                            let old = std::mem::replace(&mut h.carrier.lock().inner, inner.clone());
                            old.close();
                            let replayed = replay(&h, &inner, enveloped, lp.participant);
                            tracing::info!(
                                "{}: the stream to host {:016x} moved from leader {lost} to {} \
                                 after {:?}, {replayed} samples sent again",
                                h.writer,
                                h.host,
                                lp.participant,
                                t0.elapsed()
                            );
                            return;
                        }
                        Err(e) => tracing::debug!(
                            "{}: leader {} not reached: {e}",
                            h.writer,
                            lp.participant
                        ),
                    }
                }
                drop(ft);
                std::thread::sleep(Duration::from_millis(10));
            }
            tracing::warn!(
                "{}: no leader took over host {:016x} within {GIVE_UP:?}; its pairs end",
                h.writer,
                h.host
            );
            h.dead.store(true, Ordering::Release);
        });
    if spawned.is_err() {
        tracing::warn!("no thread to move a forwarded stream; its pairs end");
    }
}

/// Carries pairs to readers on other hosts through their host's leader.
pub struct ForwardTransport {
    host_id: u64,
    tcp: Arc<dyn Transport>,
    /// Host streams over UDP (`forward_udp`) when it reaches the leader.
    udp: Option<Arc<dyn Transport>>,
    /// Runtimes that lead their host (announce `fwd/` naming themselves).
    leaders: RwLock<HashMap<ParticipantId, PeerInfo>>,
    /// The leader each runtime names (its consent), by runtime.
    follows: RwLock<HashMap<ParticipantId, ParticipantId>>,
    hosts: Mutex<HashMap<(EndpointId, u64), Arc<HostStream>>>,
    /// One connect at a time, so two readers of a host share one stream.
    connecting: Mutex<()>,
    relay: Arc<Relay>,
    me: Weak<ForwardTransport>,
}

impl ForwardTransport {
    /// The writer side over `udp` (when it reaches a leader) or `tcp`, and
    /// this runtime's relay (which redistributes over `shm` while this
    /// runtime leads its host).
    pub(crate) fn new(
        host_id: u64,
        me_id: ParticipantId,
        tcp: Arc<dyn Transport>,
        udp: Option<Arc<dyn Transport>>,
        shm: Option<Arc<ShmTransport>>,
    ) -> Arc<ForwardTransport> {
        let relay = Relay::start(me_id, shm);
        Arc::new_cyclic(|me| ForwardTransport {
            host_id,
            tcp,
            udp,
            leaders: RwLock::new(HashMap::new()),
            follows: RwLock::new(HashMap::new()),
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

    /// What discovery knows of `peer` now: the leader it names, and whether
    /// it names itself (leads its host).
    pub(crate) fn peer_seen(&self, peer: &PeerInfo) {
        let named = peer.locators.iter().find_map(Locator::host_leader);
        {
            let mut follows = self.follows.write();
            match named {
                Some(l) => follows.insert(peer.participant, l),
                None => follows.remove(&peer.participant),
            };
        }
        {
            let mut leaders = self.leaders.write();
            if named == Some(peer.participant) {
                leaders.insert(peer.participant, peer.clone());
            } else {
                leaders.remove(&peer.participant);
            }
        }
        self.follow_new_leaders();
    }

    /// Host streams whose readers now name another leader than theirs
    /// move to it (a UDP stream sees no break when its leader dies; a TCP
    /// one may see it later than the followers' announcements say it).
    fn follow_new_leaders(&self) {
        let streams: Vec<Arc<HostStream>> = self.hosts.lock().values().cloned().collect();
        // Runs on the I/O thread: never waits for a carrier (a move holds
        // it while its replay waits for acknowledgements the I/O thread
        // processes); a carrier in use now is moving or looked at again at
        // the next discovery change.
        for h in streams {
            let lost = match h.carrier.try_lock() {
                Some(c) if !c.moving => c.leader,
                _ => continue,
            };
            if self.next_leader(&h, lost, false).is_none() {
                continue;
            }
            match h.carrier.try_lock() {
                Some(mut c) if !c.moving && c.leader == lost => c.moving = true,
                _ => continue,
            }
            move_on(self.me.clone(), h);
        }
    }

    /// `peer` left the domain.
    pub(crate) fn peer_gone(&self, peer: ParticipantId) {
        self.leaders.write().remove(&peer);
        self.follows.write().remove(&peer);
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

    /// The leader `h`'s readers name now, if it leads their host (not
    /// `lost` unless `allow_same`).
    fn next_leader(
        &self,
        h: &HostStream,
        lost: ParticipantId,
        allow_same: bool,
    ) -> Option<PeerInfo> {
        let readers: Vec<ParticipantId> = h.readers.lock().iter().map(|r| r.participant).collect();
        let follows = self.follows.read();
        let leaders = self.leaders.read();
        readers
            .iter()
            .filter_map(|r| follows.get(r))
            .filter(|l| allow_same || **l != lost)
            .filter_map(|l| leaders.get(l))
            .find(|lp| lp.host_id == h.host)
            .cloned()
    }

    /// Opens a host stream's connection to leader `lp`: UDP when it
    /// reaches it (then its samples go enveloped: true), else TCP.
    fn open(
        &self,
        req: &ConnectRequest,
        lp: &PeerInfo,
    ) -> Result<(Arc<dyn Link>, bool), ConnectError> {
        let local = PeerInfo {
            participant: req.writer.participant,
            host_id: self.host_id,
            net_id: crate::host::net_id(),
            pid: std::process::id(),
            locators: Vec::new(),
            direct: true,
            secured: false,
        };
        let udp = self.udp.as_ref().filter(|u| u.reaches(&local, lp));
        let path = udp.unwrap_or(&self.tcp);
        let link = path.connect(ConnectRequest {
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
        Ok((link, udp.is_some()))
    }

    fn forget(&self, h: &Arc<HostStream>) {
        let mut hosts = self.hosts.lock();
        let key = (h.writer, h.host);
        if hosts.get(&key).is_some_and(|x| Arc::ptr_eq(x, h)) {
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
        let key = (req.writer, lp.host_id);
        let _one = self.connecting.lock();
        let live = self
            .hosts
            .lock()
            .get(&key)
            .filter(|h| !h.dead.load(Ordering::Acquire))
            .cloned();
        let host = match live {
            Some(h) => h,
            None => {
                let (inner, enveloped) = self.open(&req, &lp)?;
                let h = Arc::new(HostStream {
                    host: lp.host_id,
                    writer: req.writer,
                    opened: ConnectRequest {
                        writer: req.writer,
                        writer_kind: req.writer_kind,
                        reader: req.reader,
                        topic: req.topic.clone(),
                        qos: req.qos,
                        remote: req.remote.clone(),
                        reply_sink: None,
                    },
                    carrier: Mutex::new(Carrier {
                        inner,
                        enveloped,
                        leader: lp.participant,
                        moving: false,
                        replay: VecDeque::new(),
                        replay_bytes: 0,
                    }),
                    last: AtomicU64::new(0),
                    readers: Mutex::new(HashSet::new()),
                    dead: AtomicBool::new(false),
                    stats: ConnStats::new(),
                });
                self.hosts.lock().insert(key, h.clone());
                h
            }
        };
        host.readers.lock().insert(req.reader);
        Ok(Arc::new(ForwardLink {
            host,
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
            h.readers.lock().clear();
            h.carrier.lock().inner.close();
        }
    }
    fn take_lost(&self) -> Vec<(EndpointId, EndpointId)> {
        let mut lost = Vec::new();
        let mut idle_broken = Vec::new();
        {
            let mut hosts = self.hosts.lock();
            hosts.retain(|_, h| {
                if h.dead.load(Ordering::Acquire) {
                    lost.extend(h.readers.lock().iter().map(|r| (h.writer, *r)));
                    return false;
                }
                let mut c = h.carrier.lock();
                if !c.moving && c.inner.is_closed() {
                    // Broken while the writer was quiet: move now.
                    c.moving = true;
                    idle_broken.push(h.clone());
                }
                true
            });
        }
        for h in idle_broken {
            move_on(self.me.clone(), h);
        }
        lost
    }
    fn shutdown(&self) {
        self.relay.stop();
    }
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

/// A writer's link to one reader on another host, through the host stream
/// it shares with the host's other readers.
struct ForwardLink {
    host: Arc<HostStream>,
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
        let c = self.host.carrier.lock();
        format!(
            "{} via {}",
            Locator::forwarded_by(c.leader),
            c.inner.locator()
        )
    }
    fn protection(&self) -> String {
        self.host.carrier.lock().inner.protection()
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
        self.host.send(&self.transport, &self.host, frame)
    }
    fn replay(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        // History for a late joiner: through the stream again (the
        // readers there that had it drop it by its number).
        self.host.send(&self.transport, &self.host, frame)
    }
    fn stats(&self) -> &ConnStats {
        &self.host.stats
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.host.dead.load(Ordering::Acquire)
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
                t.forget(&self.host);
            }
            self.host.carrier.lock().inner.close();
        }
    }
    fn priority(&self) -> Priority {
        self.host.carrier.lock().inner.priority()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        self.host.carrier.lock().inner.set_priority(p)
    }
}
