//! Publishers.

use std::any::Any;
use std::cell::OnceCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_wire::frame::FrameKind;
use ferry_wire::{Durability, EndpointId, EndpointKind, Qos, TransportKind, TypeHash};
use parking_lot::Mutex;

use crate::error::{BuildError, EncodeError, PublishError};
use crate::event::{EventQueue, PortEvent};
use crate::membership::NodeInner;
use crate::message::{Codec, Payload, RawBytes};
use crate::port::DeadlineWatch;
use crate::priority::{Priority, PriorityError};
use crate::runtime::WriterPort;
use crate::stats::{now_ns, ConnectionInfo};
use crate::transport::shm::{ShmLoan, ShmWriter};
use crate::transport::Links;
use crate::transport::{Link, OutFrame, ReplySink, SendError};

/// Builds a [`Publisher`].
pub struct PublisherBuilder<T> {
    node: Arc<NodeInner>,
    topic: String,
    qos: Qos,
    type_name: Option<(String, TypeHash)>,
    priority: Option<Priority>,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<T: Codec> PublisherBuilder<T> {
    pub(crate) fn new(node: Arc<NodeInner>, topic: &str) -> Self {
        PublisherBuilder {
            node,
            topic: topic.to_string(),
            qos: Qos::default(),
            type_name: None,
            priority: None,
            _t: Default::default(),
        }
    }
    /// Sets the QoS (default: ROS 2 `default`).
    pub fn qos(mut self, qos: Qos) -> Self {
        self.qos = qos;
        self
    }
    /// The priority every connection of this publisher starts with (packet
    /// class and, optionally, a dedicated sender thread). Default: the
    /// config's `[[topics]]` rule for the topic, else Normal. The admin
    /// plane can change each connection later.
    pub fn priority(mut self, p: Priority) -> Self {
        self.priority = Some(p);
        self
    }
    /// For raw-byte publishers: the type name and hash to announce, so typed
    /// subscribers match (the bytes must then be that type's CDR).
    pub fn type_info(mut self, name: &str, hash: TypeHash) -> Self {
        self.type_name = Some((name.to_string(), hash));
        self
    }
    /// Creates the publisher and announces it.
    pub fn build(self) -> Result<Publisher<T>, BuildError> {
        let ty = self
            .type_name
            .unwrap_or_else(|| (T::type_name().to_string(), T::type_hash()));
        // A subscriber that lacks the type's files may ask for it.
        crate::interfaces::remember(T::type_name(), T::definition());
        let (id, record) = self
            .node
            .declare(&self.topic, EndpointKind::Publisher, ty, self.qos)?;
        let rt = self.node.rt.clone();
        let shared = Arc::new(PubShared::<T> {
            id,
            topic: record.topic.clone(),
            qos: self.qos,
            links: Links::default(),
            history: Mutex::new(VecDeque::new()),
            seq: AtomicU64::new(1),
            encoded_len: AtomicUsize::new(0),
            shm_writer: OnceLock::new(),
            events: Arc::default(),
            deadline: DeadlineWatch::new(self.qos.deadline),
        });
        if let Some(p) = self
            .priority
            .or_else(|| rt.shared.cfg.topic_priority(&record.topic))
        {
            shared.links.set_default_priority(p);
        }
        #[cfg(feature = "mqtt")]
        if let Some(b) = &rt.shared.mqtt {
            if rt.shared.cfg.topic_scope(&record.topic) == crate::config::mqtt::Scope::Cloud {
                shared.add_link(ferry_mqtt::writer_link::<T>(
                    b,
                    &rt.shared.cfg,
                    id,
                    &record.topic,
                    &self.qos,
                    &record.type_name,
                ));
            }
        }
        if let Some(link) = rt.shared.ros2.as_ref().and_then(|r| {
            let events = Arc::downgrade(&shared.events);
            r.writer_link(&rt.shared.cfg, id, &record, events)
        }) {
            shared.add_link(link);
        }
        if let Some(link) = rt.shared.zenoh.as_ref().and_then(|z| {
            let reached = crate::transport::reached_by(&shared, |s| &s.links);
            z.writer_link(&rt.shared.cfg, id, &record, reached)
        }) {
            shared.add_link(link);
        }
        let port: Arc<dyn WriterPort> = shared.clone();
        rt.shared.add_writer(record, Arc::downgrade(&port));
        Ok(Publisher {
            shared,
            node: self.node,
            heap_spare: Mutex::new(None),
        })
    }
}

struct HistEntry<T> {
    seq: u64,
    stamp_ns: u64,
    value: Arc<T>,
    bytes: OnceCell<Bytes>,
}

pub(crate) struct PubShared<T> {
    id: EndpointId,
    topic: String,
    qos: Qos,
    links: Links,
    history: Mutex<VecDeque<HistEntry<T>>>,
    seq: AtomicU64,
    /// Length of the last sample encoded straight into shared memory (the
    /// size of the next slot to try).
    encoded_len: AtomicUsize,
    /// This publisher's shared-memory pool, once it has a shm subscriber.
    shm_writer: OnceLock<ShmWriter>,
    events: Arc<EventQueue>,
    deadline: DeadlineWatch,
}

// SAFETY-free note: HistEntry holds a OnceCell (not Sync) but is only touched
// under the history mutex, so PubShared is Sync through the Mutex.

impl<T: Codec> PubShared<T> {
    /// Sends sample `seq` on `links` (`replay`: a late joiner's history,
    /// [`Link::replay`]).
    fn send_all(
        &self,
        links: &[Arc<dyn Link>],
        seq: u64,
        stamp_ns: u64,
        value: &Arc<T>,
        cell: &OnceCell<Bytes>,
        replay: bool,
    ) -> Result<(), PublishError> {
        let typed: Arc<dyn Any + Send + Sync> = value.clone();
        let mut enc_err: Option<EncodeError> = None;
        let bytes = || -> Result<Bytes, EncodeError> {
            if let Some(b) = cell.get() {
                return Ok(b.clone());
            }
            let b = value.encode()?;
            let _ = cell.set(b.clone());
            Ok(b)
        };
        let frame = OutFrame {
            kind: FrameKind::Data,
            seq,
            stamp_ns,
            payload: Payload {
                typed: Some(&typed),
                bytes: &bytes,
            },
        };
        let mut blocked = None;
        for link in links {
            let sent = if replay {
                link.replay(&frame)
            } else {
                link.send(&frame)
            };
            match sent {
                Ok(()) => {}
                Err(SendError::Encode(e)) => enc_err = Some(e),
                Err(SendError::Blocked(d)) => blocked = Some((link.remote(), d)),
                Err(SendError::Closed) => {}
            }
        }
        if let Some(e) = enc_err {
            return Err(e.into());
        }
        if let Some((remote, waited)) = blocked {
            return Err(PublishError::Blocked {
                remote: remote.to_string(),
                waited,
            });
        }
        Ok(())
    }
}

impl<T: Codec> PubShared<T> {
    /// The next sample's sequence number.
    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends sample `seq` on every link and keeps it in the transient_local
    /// history. `stage` may encode it in place first (shared memory); the
    /// bytes it returns are what the network paths send.
    fn deliver(
        &self,
        seq: u64,
        value: Arc<T>,
        stage: impl FnOnce(&[Arc<dyn Link>], &T) -> Option<Bytes>,
    ) -> Result<(), PublishError> {
        let stamp_ns = now_ns();
        self.deadline.touch();
        // transient_local: the history lock is held from before the links
        // are read until the sample is in the history, so a connection
        // added meanwhile gets it exactly once (by replay or live).
        let mut hist =
            (self.qos.durability == Durability::TransientLocal).then(|| self.history.lock());
        let links = self.links.snapshot();
        let cell = OnceCell::new();
        if let Some(b) = stage(&links, &value) {
            let _ = cell.set(b);
        }
        let r = self.send_all(&links, seq, stamp_ns, &value, &cell, false);
        drop(links);
        if let Some(hist) = hist.as_mut() {
            let depth = self.qos.history.depth(1024);
            if hist.len() >= depth {
                hist.pop_front();
            }
            hist.push_back(HistEntry {
                seq,
                stamp_ns,
                value,
                bytes: cell,
            });
        }
        r
    }
}

impl<T: Codec> WriterPort for PubShared<T> {
    fn connections(&self) -> Vec<ConnectionInfo> {
        self.links.connections(&self.topic, self.id)
    }
    fn links(&self) -> &Links {
        &self.links
    }
    fn add_link(&self, link: Arc<dyn Link>) {
        if self.qos.durability == Durability::TransientLocal {
            // Replay the history, then go live, under the history lock so no
            // sample is missed or sent twice.
            let hist = self.history.lock();
            let now = now_ns();
            for h in hist.iter() {
                if let Some(ls) = self.qos.lifespan {
                    if now.saturating_sub(h.stamp_ns) > ls.as_nanos() as u64 {
                        continue;
                    }
                }
                let _ = self.send_all(
                    std::slice::from_ref(&link),
                    h.seq,
                    h.stamp_ns,
                    &h.value,
                    &h.bytes,
                    true,
                );
            }
            self.links.push(link);
        } else {
            self.links.push(link);
        }
    }
    fn remove_link(&self, reader: EndpointId) {
        self.links.remove(reader);
    }
    fn events(&self) -> &EventQueue {
        &self.events
    }
    fn reply_sink(self: Arc<Self>) -> Option<Arc<dyn ReplySink>> {
        None
    }
    fn housekeeping(&self, now: Instant) {
        self.deadline.check(now, &self.events);
        self.links.prune_closed();
    }
}

/// Sends samples of `T` on a topic to every matched subscriber, each over
/// its own connection and path.
pub struct Publisher<T: Codec> {
    shared: Arc<PubShared<T>>,
    node: Arc<NodeInner>,
    /// The last heap-loaned sample's bytes: the next heap loan reuses them
    /// once every path let go, so a loan costs no allocation or memset.
    heap_spare: Mutex<Option<Bytes>>,
}

impl<T: Codec> Publisher<T> {
    /// Publishes a sample. In-process subscribers get the same `Arc` (no copy,
    /// no serialization); the other paths share one encoding, written
    /// straight into shared memory when a subscriber is on this host.
    /// A bounded string or sequence over its bound is refused
    /// ([`PublishError::OutOfBounds`]) on every path.
    pub fn publish(&self, msg: impl Into<Arc<T>>) -> Result<(), PublishError> {
        let msg = msg.into();
        msg.validate().map_err(|error| PublishError::OutOfBounds {
            type_name: T::type_name().to_string(),
            error,
        })?;
        let seq = self.shared.next_seq();
        self.shared.deliver(seq, msg, |links, value| {
            self.encode_in_place(seq, links, value)
        })
    }

    /// Whether a subscriber gets this publisher's samples through shared
    /// memory now (a [`Publisher::loan`] of `RawBytes` is then a slot).
    /// When none does, bytes that already exist can be published as they
    /// are, without a copy into a loan.
    pub fn shares_memory(&self) -> bool {
        self.shm_for(&self.shared.links.snapshot()).is_some()
    }

    /// This publisher's shared-memory pool, when one of `links` uses it.
    fn shm_for(&self, links: &[Arc<dyn Link>]) -> Option<&ShmWriter> {
        let shm = self.node.rt.shared.shm.as_ref()?;
        links
            .iter()
            .any(|l| l.transport() == TransportKind::SharedMemory && !l.is_closed())
            .then(|| {
                self.shared
                    .shm_writer
                    .get_or_init(|| shm.writer(self.shared.id))
            })
    }

    /// Encodes sample `seq` straight into a shared-memory slot that every
    /// shared-memory link then sends as it is; its bytes serve the network
    /// paths too. The slot tried is the size of the last encoding: a sample
    /// that does not fit is encoded the usual way (and copied by the links),
    /// and the next one gets a slot of its size.
    fn encode_in_place(&self, seq: u64, links: &[Arc<dyn Link>], value: &T) -> Option<Bytes> {
        let shm = self.shm_for(links)?;
        let guess = self.shared.encoded_len.load(Ordering::Relaxed).max(64);
        let mut loan = shm.loan(guess).ok()?;
        match value.encode_into(loan.as_mut_slice()) {
            Ok(Some(len)) => {
                self.shared.encoded_len.store(len, Ordering::Relaxed);
                loan.stage(seq, len).ok()
            }
            Ok(None) => {
                drop(loan);
                let b = value.encode().ok()?;
                self.shared.encoded_len.store(b.len(), Ordering::Relaxed);
                Some(b)
            }
            Err(_) => None,
        }
    }

    /// Changes the priority of every live connection of this publisher (and
    /// of those it makes later); returns each subscriber's outcome.
    pub fn set_priority(
        &self,
        p: Priority,
    ) -> Vec<(EndpointId, Result<crate::priority::Applied, PriorityError>)> {
        self.shared.links.set_default_priority(p);
        self.shared.links.set_priority(|_| true, p)
    }

    /// Number of connected subscribers (with `[ros2]`, matched ROS 2
    /// subscriptions count too).
    pub fn subscriber_count(&self) -> usize {
        self.shared.links.live()
    }

    /// Waits until at least `n` subscribers are connected.
    pub fn wait_for_subscribers(&self, n: usize, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while self.subscriber_count() < n {
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    /// The connections with their paths and statistics (a forwarded one
    /// names its host leader: [`ConnectionInfo::via`]).
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        let mut c = self.shared.connections();
        self.node.rt.shared.name_forwarded(&mut c);
        c
    }

    /// The next event, if any.
    pub fn try_event(&self) -> Option<PortEvent> {
        self.shared.events.try_next()
    }

    /// Waits up to `timeout` for the next event.
    pub fn next_event(&self, timeout: Duration) -> Option<PortEvent> {
        self.shared.events.next_timeout(timeout)
    }

    /// The fully qualified topic name.
    pub fn topic(&self) -> &str {
        &self.shared.topic
    }

    /// The publisher's global id.
    pub fn id(&self) -> EndpointId {
        self.shared.id
    }

    /// The publisher's QoS.
    pub fn qos(&self) -> &Qos {
        &self.shared.qos
    }
}

impl Publisher<RawBytes> {
    /// Lends a buffer of `len` bytes to fill in place and then
    /// [`SampleMut::publish`]. When a subscriber of this publisher is on
    /// this host (shared-memory path) the buffer *is* a shared-memory slot
    /// that every such subscriber then reads where it was written: no copy
    /// and no serialization, whatever the size. Otherwise (no subscriber
    /// yet, network paths only, shared memory full) it is an ordinary heap
    /// buffer and the sample goes out as usual. The bytes are not cleared:
    /// write every byte you publish.
    pub fn loan(&self, len: usize) -> SampleMut<'_> {
        let links = self.shared.links.snapshot();
        let buf = match self.shm_for(&links) {
            Some(shm) => match shm.loan(len) {
                Ok(loan) => LoanBuf::Shm(loan),
                Err(e) => {
                    tracing::debug!("{}: no shared-memory loan ({e}); heap buffer", self.topic());
                    LoanBuf::Heap(self.heap_buffer(len))
                }
            },
            None => LoanBuf::Heap(self.heap_buffer(len)),
        };
        SampleMut {
            publisher: self,
            buf,
            len,
        }
    }
}

impl Publisher<RawBytes> {
    /// A heap buffer of `len` bytes: the last loan's, if no path holds it
    /// any more and it is large enough (its old bytes stay: a loan is not
    /// cleared), else a new one.
    fn heap_buffer(&self, len: usize) -> Vec<u8> {
        let spare = self.heap_spare.lock().take();
        if let Some(mut v) = spare.and_then(|b| b.try_into_mut().ok()).map(Vec::from) {
            if v.capacity() >= len {
                if v.len() >= len {
                    v.truncate(len);
                } else {
                    v.resize(len, 0); // only the part never written before
                }
                return v;
            }
        }
        vec![0; len]
    }
}

enum LoanBuf {
    Shm(ShmLoan),
    Heap(Vec<u8>),
}

/// A sample lent by [`Publisher::loan`]: dereferences to its bytes, which
/// you fill in place; [`SampleMut::publish`] sends it. Dropping it unsent
/// gives the buffer back.
pub struct SampleMut<'a> {
    publisher: &'a Publisher<RawBytes>,
    buf: LoanBuf,
    len: usize,
}

impl SampleMut<'_> {
    /// True when the buffer is a shared-memory slot (published without a
    /// copy to this host's subscribers).
    pub fn is_shared_memory(&self) -> bool {
        matches!(self.buf, LoanBuf::Shm(..))
    }

    /// Publishes the sample to every subscriber, like
    /// [`Publisher::publish`]. In-process subscribers get the same bytes.
    pub fn publish(self) -> Result<(), PublishError> {
        let SampleMut {
            publisher,
            buf,
            len,
        } = self;
        let shared = &publisher.shared;
        let seq = shared.next_seq();
        let bytes = match buf {
            LoanBuf::Shm(loan) => match loan.stage(seq, len) {
                Ok(b) => b,
                Err(e) => unreachable!("len <= capacity by construction: {e}"),
            },
            LoanBuf::Heap(v) => {
                let b = Bytes::from(v);
                *publisher.heap_spare.lock() = Some(b.clone());
                b
            }
        };
        let value = Arc::new(RawBytes(bytes.clone()));
        shared.deliver(seq, value, |_, _| Some(bytes))
    }
}

impl std::ops::Deref for SampleMut<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.buf {
            LoanBuf::Shm(loan) => &loan.as_slice()[..self.len],
            LoanBuf::Heap(v) => v,
        }
    }
}

impl std::ops::DerefMut for SampleMut<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.buf {
            LoanBuf::Shm(loan) => &mut loan.as_mut_slice()[..self.len],
            LoanBuf::Heap(v) => v,
        }
    }
}

impl<T: Codec> Drop for Publisher<T> {
    fn drop(&mut self) {
        self.node.rt.shared.remove_endpoint(self.shared.id.entity);
        self.shared.links.close_all();
    }
}
