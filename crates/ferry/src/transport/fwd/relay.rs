//! The leader's side of forwarding: the relay reader that host streams
//! bind to, which lands each sample in shared memory once for the readers
//! of its host (see the parent module).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_wire::frame::{Envelope, EnvelopeKind, FrameKind, ENVELOPE_LEN};
use ferry_wire::{EndpointId, EndpointKind, History, Qos, TransportKind};
use parking_lot::Mutex;

use super::super::shm::ShmTransport;
use super::super::{ConnectRequest, InFrame, InboundConn, Inbox, Link, OutFrame, PeerInfo};
use crate::message::Payload;

/// How often the relay looks a writer's readers up again without a
/// discovery change (a reader it could not connect to, one of its own).
const RETRY: Duration = Duration::from_secs(1);

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
    /// Readers being connected, with the samples that came meanwhile:
    /// they go first once the reader accepted, so a reader misses nothing
    /// from the moment the relay looked it up.
    pending: HashMap<EndpointId, Backlog>,
}

/// Samples kept for a reader while its connection is being made (a new
/// leader's readers accept it once they learnt it leads).
const PENDING: usize = 1024;
/// Bytes kept likewise.
const PENDING_BYTES: usize = 64 << 20;

/// Samples kept for readers not connected yet: the newest [`PENDING`], at
/// most [`PENDING_BYTES`].
#[derive(Default)]
struct Backlog {
    samples: VecDeque<(u64, u64, Bytes)>,
    bytes: usize,
}

impl Backlog {
    fn push(&mut self, seq: u64, stamp_ns: u64, b: Bytes) {
        self.bytes += b.len();
        self.samples.push_back((seq, stamp_ns, b));
        while self.samples.len() > PENDING || self.bytes > PENDING_BYTES {
            match self.samples.pop_front() {
                Some(old) => self.bytes -= old.2.len(),
                None => break,
            }
        }
    }
}

/// The leader's end of host streams: redistributes each sample over
/// shared memory to the readers of its host.
pub struct Relay {
    id: EndpointId,
    shm: Option<Arc<ShmTransport>>,
    targets: OnceLock<Targets>,
    generation: AtomicU64,
    leading: AtomicBool,
    /// The runtimes that follow this one in the election (their consent).
    followers: parking_lot::RwLock<std::collections::HashSet<ferry_wire::ParticipantId>>,
    writers: Mutex<HashMap<EndpointId, Relayed>>,
    me: Weak<Relay>,
}

impl Relay {
    /// The relay reader of runtime `me`, registered where host streams
    /// find it.
    pub(super) fn start(
        me: ferry_wire::ParticipantId,
        shm: Option<Arc<ShmTransport>>,
    ) -> Arc<Relay> {
        let relay = Arc::new_cyclic(|w| Relay {
            id: EndpointId {
                participant: me,
                entity: super::RELAY_ENTITY,
            },
            shm,
            targets: OnceLock::new(),
            generation: AtomicU64::new(1),
            leading: AtomicBool::new(false),
            followers: Default::default(),
            writers: Mutex::new(HashMap::new()),
            me: w.clone(),
        });
        let inbox: Arc<dyn Inbox> = relay.clone();
        super::super::intra::register_reader(&inbox);
        relay
    }

    /// The runtime stops.
    pub(super) fn stop(&self) {
        super::super::intra::unregister_reader(self.id);
        self.close_all();
    }

    /// Whether runtime `p` follows this one in the election.
    pub(crate) fn follows_me(&self, p: ferry_wire::ParticipantId) -> bool {
        self.followers.read().contains(&p)
    }

    /// How the runtime answers which readers a writer goes to.
    pub(crate) fn bind(&self, targets: Targets) {
        let _ = self.targets.set(targets);
    }

    /// Discovery changed: readers are looked up again at the next sample.
    pub(crate) fn graph_changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether this runtime leads its host now (a relay that does not
    /// lead passes nothing on), and the runtimes that follow it.
    pub(crate) fn set_leading(&self, leading: bool, followers: &[ferry_wire::ParticipantId]) {
        *self.followers.write() = followers.iter().copied().collect();
        self.leading.store(leading, Ordering::Release);
        self.graph_changed();
        if !leading {
            self.close_all();
        }
    }

    pub(super) fn close_all(&self) {
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
                    q.push(frame.seq, frame.stamp_ns, b.clone());
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
                r.pending.insert(t.reader, Backlog::default());
            }
            (dropped, new)
        };
        for l in dropped {
            l.close();
        }
        for t in new {
            let (shm, me, reader) = (shm.clone(), self.me.clone(), t.reader);
            let spawned = std::thread::Builder::new()
                .name("ferry-fwd".into())
                .spawn(move || connect_reader(&me, &shm, writer, t));
            if spawned.is_err() {
                if let Some(r) = self.writers.lock().get_mut(&writer) {
                    r.pending.remove(&reader);
                }
            }
        }
    }
}

/// Attempts at connecting a reader, one per `CONNECT_GAP`: its runtime
/// accepts the relay once it has learnt that this runtime leads (a turn of
/// its I/O thread after the election).
const CONNECT_TRIES: u32 = 100;
const CONNECT_GAP: Duration = Duration::from_millis(10);

/// Connects the relay of `writer` to reader `t` (on a thread of its own),
/// then sends it what came meanwhile and adds it to the writer's links —
/// under the lock `deliver` queues samples under: no gap, no sample twice.
fn connect_reader(me: &Weak<Relay>, shm: &Arc<ShmTransport>, writer: EndpointId, t: Target) {
    let reader = t.reader;
    let mut last_err = String::new();
    for _ in 0..CONNECT_TRIES {
        let got = shm.connect_forwarded(ConnectRequest {
            writer,
            writer_kind: EndpointKind::Publisher,
            reader,
            topic: t.topic.clone(),
            qos: relay_qos(t.qos),
            remote: t.peer.clone(),
            reply_sink: None,
        });
        let Some(relay) = me.upgrade() else { return };
        let mut w = relay.writers.lock();
        let Some(r) = w.get_mut(&writer) else {
            drop(w);
            if let Ok(link) = got {
                link.close();
            }
            return;
        };
        match got {
            Ok(link) => {
                let pending = r.pending.remove(&reader).unwrap_or_default();
                for (seq, stamp_ns, b) in pending.samples {
                    let _ = super::kept_sample(seq, stamp_ns, &b, |f| link.send(f));
                }
                r.links.insert(reader, link);
                return;
            }
            Err(super::super::ConnectError::NoReader(_)) => {
                r.pending.remove(&reader);
                return;
            }
            Err(e) => last_err = e.to_string(),
        }
        drop(w);
        std::thread::sleep(CONNECT_GAP);
    }
    tracing::debug!("relay of {writer} to {reader}: {last_err}");
    if let Some(relay) = me.upgrade() {
        if let Some(r) = relay.writers.lock().get_mut(&writer) {
            r.pending.remove(&reader);
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
        // A path that numbers samples itself (UDP) carries the writer's
        // number in an envelope; TCP frames carry it.
        let (seq, body) = if conn.transport == TransportKind::Tcp {
            (frame.seq, None)
        } else {
            let Ok(b) = (frame.payload.bytes)() else {
                return;
            };
            match Envelope::parse(&b) {
                Ok(e) if e.kind == EnvelopeKind::Relayed => {
                    (e.request_id, Some(b.slice(ENVELOPE_LEN..)))
                }
                _ => {
                    conn.stats.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(
                        "relay: a sample from {} without its sequence number",
                        conn.remote
                    );
                    return;
                }
            }
        };
        let unwrapped = move || Ok(body.clone().unwrap_or_default());
        let out = OutFrame {
            kind: FrameKind::Data,
            seq,
            stamp_ns: frame.stamp_ns,
            payload: Payload {
                typed: None,
                bytes: if conn.transport == TransportKind::Tcp {
                    frame.payload.bytes
                } else {
                    &unwrapped
                },
            },
        };
        for link in self.links_of(conn.remote, &out) {
            if let Err(e) = link.send(&out) {
                tracing::debug!("relay of {} to {}: {e}", conn.remote, link.remote());
            }
        }
    }
}
