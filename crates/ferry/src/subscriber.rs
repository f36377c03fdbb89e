//! Subscribers: by callback, or by blocking / async receive.

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_wire::frame::FrameKind;
use ferry_wire::{EndpointId, EndpointKind, Qos, TypeHash};
use parking_lot::Mutex;

use crate::error::{BuildError, RecvError};
use crate::event::{EventQueue, PortEvent};
use crate::membership::NodeInner;
use crate::message::{Codec, Sample, SampleInfo};
use crate::port::{DeadlineWatch, Inbound};
use crate::priority::ThreadPolicy;
use crate::queue::SampleQueue;
use crate::room::Room;
use crate::runtime::ReaderPort;
use crate::stats::{now_ns, ConnectionInfo};
use crate::transport::{InFrame, InboundConn, Inbox};

type Callback<T> = Box<dyn Fn(Sample<T>) + Send + Sync>;

/// Where a subscriber's callback runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// On the subscriber's own `ferry-cb` thread, fed by a queue.
    Thread,
    /// On the thread that delivers the sample.
    Inline,
}

/// Builds a [`Subscriber`].
pub struct SubscriberBuilder<T> {
    node: Arc<NodeInner>,
    topic: String,
    qos: Qos,
    callback: Option<(Callback<T>, Mode)>,
    type_name: Option<(String, TypeHash)>,
    thread: Option<ThreadPolicy>,
    room: Option<Arc<Room>>,
}

/// The receive queue bound of a reliable keep_all subscriber: past it, the
/// paths hold back and the writer's keep_all blocks (`crate::room`).
pub const KEEP_ALL_DEPTH: usize = 4096;

impl<T: Codec> SubscriberBuilder<T> {
    pub(crate) fn new(node: Arc<NodeInner>, topic: &str) -> Self {
        SubscriberBuilder {
            node,
            topic: topic.to_string(),
            qos: Qos::default(),
            callback: None,
            type_name: None,
            thread: None,
            room: None,
        }
    }
    /// The reader side of channel priority: this subscriber's callback
    /// thread runs at `policy`, and so do — at least — the threads that
    /// deliver its samples on every path (the runtime's I/O thread for TCP
    /// and UDP, the shared-memory delivery thread, the MQTT thread), which
    /// serve every inbound connection of the process, so that raise is
    /// shared and lasts as long as the runtime. SCHED_FIFO/RR need
    /// CAP_SYS_NICE; refused → one warning. Default: the config's
    /// `[[topics]]` `sched`.
    pub fn thread_priority(mut self, policy: ThreadPolicy) -> Self {
        self.thread = Some(policy);
        self
    }
    /// Sets the QoS (default: ROS 2 `default`).
    pub fn qos(mut self, qos: Qos) -> Self {
        self.qos = qos;
        self
    }
    /// Delivers every sample to `f` instead of queueing it for `recv`.
    ///
    /// The callback runs on this subscriber's own thread (`ferry-cb`), in
    /// order, one sample at a time, fed by the subscriber's queue (bounded
    /// by its history depth, like `recv`): it may block, sleep, publish,
    /// call services, create or drop ports — its own subscriber included —
    /// without holding up any other subscriber or ferry itself. The cost is
    /// one thread wake-up per sample; [`SubscriberBuilder::inline_callback`]
    /// saves it where every microsecond counts. A panic in it is caught and
    /// logged. Dropping the subscriber waits for a running callback to
    /// return (except from inside the callback itself).
    pub fn callback(mut self, f: impl Fn(Sample<T>) + Send + Sync + 'static) -> Self {
        self.callback = Some((Box::new(f), Mode::Thread));
        self
    }
    /// Delivers every sample to `f` on the thread that delivers it, with no
    /// hop: the publisher's own thread in-process (a ~1 µs path), the
    /// shared-memory delivery thread, the I/O thread for TCP and UDP, the
    /// MQTT thread. No ferry lock is held while it runs, but that thread
    /// serves every other subscriber of the process on that path: `f` must
    /// return quickly and must not wait for ferry (a blocking service call
    /// from it waits for a reply that the same thread would deliver).
    pub fn inline_callback(mut self, f: impl Fn(Sample<T>) + Send + Sync + 'static) -> Self {
        self.callback = Some((Box::new(f), Mode::Inline));
        self
    }
    /// For an inline callback that queues samples itself (a language
    /// binding): the room in that queue. With reliable keep_all QoS the
    /// paths hold back while it is full, as they do for the subscriber's
    /// own queue, so the writer blocks instead of the queue dropping.
    pub fn room(mut self, room: Arc<Room>) -> Self {
        self.room = Some(room);
        self
    }
    /// For raw-byte subscribers: announce this type instead of matching any.
    pub fn type_info(mut self, name: &str, hash: TypeHash) -> Self {
        self.type_name = Some((name.to_string(), hash));
        self
    }
    /// Creates the subscriber and announces it.
    pub fn build(self) -> Result<Subscriber<T>, BuildError> {
        let ty = self
            .type_name
            .unwrap_or_else(|| (T::type_name().to_string(), T::type_hash()));
        let (id, record) =
            self.node
                .declare(&self.topic, EndpointKind::Subscriber, ty, self.qos)?;
        let rt = self.node.rt.clone();
        let policy = self.thread.or_else(|| {
            rt.shared
                .cfg
                .topic_priority(&record.topic)
                .and_then(|p| p.thread)
        });
        if let Some(p) = policy {
            rt.shared.raise_delivery_threads(p);
        }
        // Reliable keep_all: nothing read is dropped; the writer waits.
        let lossless = self.qos.reliability == ferry_wire::Reliability::Reliable
            && self.qos.history == ferry_wire::History::KeepAll;
        let (callback, mode) = match self.callback {
            Some((f, m)) => (Some(f), m),
            None => (None, Mode::Thread),
        };
        let shared = Arc::new(SubShared::<T> {
            id,
            topic: record.topic.clone(),
            qos: self.qos,
            callback,
            inline: mode == Mode::Inline,
            queue: if lossless && mode != Mode::Inline {
                SampleQueue::with_room(KEEP_ALL_DEPTH)
            } else {
                SampleQueue::new(self.qos.history.depth(1 << 16))
            },
            room: self.room.filter(|_| lossless && mode == Mode::Inline),
            conns: Inbound::default(),
            matched: Mutex::new(HashSet::new()),
            events: Arc::default(),
            deadline: DeadlineWatch::new(self.qos.deadline),
        });
        let inbox: Arc<dyn Inbox> = shared.clone();
        crate::transport::intra::register_reader(&inbox);
        #[cfg(feature = "mqtt")]
        if let Some(b) = &rt.shared.mqtt {
            if rt.shared.cfg.topic_scope(&record.topic) == crate::config::mqtt::Scope::Cloud {
                b.subscribe(&record.topic, id);
            }
        }
        let thread = match (&shared.callback, mode) {
            (Some(_), Mode::Thread) => {
                let s = shared.clone();
                Some(
                    std::thread::Builder::new()
                        .name(format!("ferry-cb{}", id.entity))
                        .spawn(move || s.run_callbacks(policy))
                        .map_err(|source| BuildError::Io {
                            what: "callback thread".into(),
                            source,
                        })?,
                )
            }
            _ => None,
        };
        if let Some(r) = &rt.shared.ros2 {
            r.subscribe(&rt.shared.cfg, id, &record, Arc::downgrade(&shared.events));
        }
        if let Some(z) = &rt.shared.zenoh {
            z.subscribe(&rt.shared.cfg, id, &record);
        }
        let port: Arc<dyn ReaderPort> = shared.clone();
        rt.shared.add_reader(record, Arc::downgrade(&port));
        Ok(Subscriber {
            shared,
            node: self.node,
            thread,
        })
    }
}

pub(crate) struct SubShared<T> {
    id: EndpointId,
    topic: String,
    qos: Qos,
    callback: Option<Callback<T>>,
    /// The callback runs on the delivering thread (else on `ferry-cb`).
    inline: bool,
    queue: SampleQueue<Sample<T>>,
    /// The room of an inline callback's own queue (back-pressure).
    room: Option<Arc<Room>>,
    conns: Inbound,
    matched: Mutex<HashSet<EndpointId>>,
    events: Arc<EventQueue>,
    deadline: DeadlineWatch,
}

impl<T: Codec> Inbox for SubShared<T> {
    fn id(&self) -> EndpointId {
        self.id
    }
    fn name(&self) -> &str {
        &self.topic
    }
    fn attach(&self, conn: Arc<InboundConn>) {
        self.conns.attach(conn);
    }
    fn detach(&self, conn: &Arc<InboundConn>) {
        self.conns.detach(conn);
    }
    fn broker_sample(&self, conn: &InboundConn, seq: u64) -> bool {
        self.conns.broker_sample(conn, seq)
    }
    fn forwarded_sample(&self, conn: &InboundConn, seq: u64, stamp_ns: u64) -> bool {
        self.conns.forwarded_sample(conn, seq, stamp_ns)
    }
    fn room(&self) -> Option<&Arc<Room>> {
        self.room.as_ref().or(self.queue.room())
    }
    fn deliver(&self, conn: &Arc<InboundConn>, frame: &InFrame<'_>) {
        if frame.kind != FrameKind::Data {
            return;
        }
        // A connection's first samples: at a hand-over from the broker to a
        // direct path, the broker may have delivered them already.
        if !self.conns.admit(conn, frame.seq, frame.stamp_ns) {
            return;
        }
        let value = match frame.payload.to_typed::<T>() {
            Ok(v) => v,
            Err(e) => {
                let n = conn.stats.errors.fetch_add(1, Ordering::Relaxed);
                if n.is_power_of_two() || n == 0 {
                    tracing::warn!(
                        "`{}`: undecodable sample from {} ({} so far): {e}",
                        self.topic,
                        conn.remote,
                        n + 1
                    );
                }
                return;
            }
        };
        if conn.transport == ferry_wire::TransportKind::InProcess {
            conn.stats.message(0);
        }
        if conn.same_clock && frame.stamp_ns > 0 {
            let now = match frame.arrival_ns {
                0 => now_ns(),
                t => t,
            };
            let age = now.saturating_sub(frame.stamp_ns);
            conn.stats.latency(age);
            if let Some(ls) = self.qos.lifespan {
                if age > ls.as_nanos() as u64 {
                    conn.stats.drops.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
        self.deadline.touch();
        let sample = Sample::new(
            value,
            SampleInfo {
                seq: frame.seq,
                source_time_ns: frame.stamp_ns,
                publisher: conn.remote,
                transport: conn.transport,
            },
        );
        match &self.callback {
            Some(cb) if self.inline => {
                if !self.call(cb, sample) {
                    conn.stats.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {
                if self.queue.push(sample) {
                    conn.stats.drops.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

impl<T: Codec> SubShared<T> {
    /// Runs the callback; false if it panicked (caught, logged).
    fn call(&self, cb: &Callback<T>, sample: Sample<T>) -> bool {
        let ok = catch_unwind(AssertUnwindSafe(|| cb(sample))).is_ok();
        if !ok {
            tracing::error!(
                "`{}`: subscriber callback panicked; sample dropped, node keeps running",
                self.topic
            );
        }
        ok
    }

    /// The `ferry-cb` thread: the callback for every queued sample, in
    /// order, until the subscriber is dropped.
    fn run_callbacks(self: Arc<Self>, policy: Option<ThreadPolicy>) {
        if let Some(p) = policy {
            if let Err(e) = crate::priority::apply_to_current_thread(p) {
                tracing::warn!(
                    "`{}`: callback thread stays at normal priority ({p:?} refused: {e})",
                    self.topic
                );
            }
        }
        let Some(cb) = &self.callback else {
            return;
        };
        while let Some(sample) = self.queue.pop_until_closed() {
            self.call(cb, sample);
        }
    }
}

impl<T: Codec> ReaderPort for SubShared<T> {
    fn connections(&self) -> Vec<ConnectionInfo> {
        self.conns.connections(&self.topic, self.id)
    }
    fn events(&self) -> &EventQueue {
        &self.events
    }
    fn set_matched(&self, writer: EndpointId, matched: bool) {
        let mut m = self.matched.lock();
        if matched {
            m.insert(writer);
        } else {
            m.remove(&writer);
        }
    }
    fn housekeeping(&self, now: Instant) {
        self.deadline.check(now, &self.events);
    }
}

/// Receives samples of `T` from every matched publisher.
pub struct Subscriber<T: Codec> {
    shared: Arc<SubShared<T>>,
    node: Arc<NodeInner>,
    /// The `ferry-cb` thread of a (non-inline) callback.
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<T: Codec> Subscriber<T> {
    fn check_mode(&self) -> Result<(), RecvError> {
        if self.shared.callback.is_some() {
            Err(RecvError::CallbackMode)
        } else {
            Ok(())
        }
    }

    /// Waits up to `timeout` for the next sample.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Sample<T>, RecvError> {
        self.check_mode()?;
        self.shared
            .queue
            .pop_timeout(timeout)
            .ok_or(RecvError::Timeout(timeout))
    }

    /// Waits for the next sample.
    pub fn recv(&self) -> Result<Sample<T>, RecvError> {
        loop {
            match self.recv_timeout(Duration::from_secs(3600)) {
                Err(RecvError::Timeout(_)) => continue,
                r => return r,
            }
        }
    }

    /// The next sample if one is queued.
    pub fn try_recv(&self) -> Option<Sample<T>> {
        self.shared.queue.try_pop()
    }

    /// Waits for the next sample without blocking a thread (any executor).
    pub async fn recv_async(&self) -> Result<Sample<T>, RecvError> {
        self.check_mode()?;
        Ok(self.shared.queue.pop_async().await)
    }

    /// Samples waiting in the queue.
    pub fn queued(&self) -> usize {
        self.shared.queue.len()
    }

    /// Number of matched publishers (known from discovery).
    pub fn publisher_count(&self) -> usize {
        self.shared.matched.lock().len()
    }

    /// Waits until at least `n` publishers are connected.
    pub fn wait_for_publishers(&self, n: usize, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while self.shared.conns.len() < n {
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

    /// The subscriber's global id.
    pub fn id(&self) -> EndpointId {
        self.shared.id
    }
}

impl<T: Codec> Drop for Subscriber<T> {
    fn drop(&mut self) {
        crate::transport::intra::unregister_reader(self.shared.id);
        #[cfg(feature = "mqtt")]
        if let Some(b) = &self.node.rt.shared.mqtt {
            b.unsubscribe(self.shared.id);
        }
        self.node.rt.shared.remove_endpoint(self.shared.id.entity);
        self.shared.queue.close();
        if let Some(t) = self.thread.take() {
            // From inside its own callback the thread ends when it returns.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}
