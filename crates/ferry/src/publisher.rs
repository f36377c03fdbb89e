//! Publishers.

use std::any::Any;
use std::cell::OnceCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_wire::frame::FrameKind;
use ferry_wire::{Durability, EndpointId, EndpointKind, Qos, TypeHash};
use parking_lot::Mutex;

use crate::error::{BuildError, EncodeError, PublishError};
use crate::event::{EventQueue, PortEvent};
use crate::message::{Codec, Payload};
use crate::node::NodeInner;
use crate::port::{declare, DeadlineWatch, Links};
use crate::priority::{Priority, PriorityError};
use crate::runtime::WriterPort;
use crate::stats::{now_ns, ConnectionInfo};
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
        let (id, record) = declare(
            &self.node,
            &self.topic,
            EndpointKind::Publisher,
            ty,
            self.qos,
        )?;
        let rt = self.node.rt.clone();
        let shared = Arc::new(PubShared::<T> {
            id,
            topic: record.topic.clone(),
            qos: self.qos,
            links: Links::default(),
            history: Mutex::new(VecDeque::new()),
            seq: AtomicU64::new(1),
            events: EventQueue::default(),
            deadline: DeadlineWatch::new(self.qos.deadline),
        });
        if let Some(p) = self
            .priority
            .or_else(|| rt.shared.cfg.topic_priority(&record.topic))
        {
            shared.links.set_default_priority(p);
        }
        let port: Arc<dyn WriterPort> = shared.clone();
        rt.shared.add_writer(record, Arc::downgrade(&port));
        Ok(Publisher {
            shared,
            node: self.node,
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
    events: EventQueue,
    deadline: DeadlineWatch,
}

// SAFETY-free note: HistEntry holds a OnceCell (not Sync) but is only touched
// under the history mutex, so PubShared is Sync through the Mutex.

impl<T: Codec> PubShared<T> {
    fn send_all(
        &self,
        links: &[Arc<dyn Link>],
        seq: u64,
        stamp_ns: u64,
        value: &Arc<T>,
        cell: &OnceCell<Bytes>,
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
            match link.send(&frame) {
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
}

impl<T: Codec> Publisher<T> {
    /// Publishes a sample. In-process subscribers get the same `Arc` (no copy,
    /// no serialization); network paths serialize once, shared by all.
    pub fn publish(&self, msg: impl Into<Arc<T>>) -> Result<(), PublishError> {
        let value: Arc<T> = msg.into();
        let seq = self.shared.seq.fetch_add(1, Ordering::Relaxed);
        let stamp_ns = now_ns();
        self.shared.deadline.touch();
        if self.shared.qos.durability == Durability::TransientLocal {
            let mut hist = self.shared.history.lock();
            let cell = OnceCell::new();
            let links = self.shared.links.snapshot();
            let r = self.shared.send_all(&links, seq, stamp_ns, &value, &cell);
            drop(links);
            let depth = self.shared.qos.history.depth(1024);
            if hist.len() >= depth {
                hist.pop_front();
            }
            hist.push_back(HistEntry {
                seq,
                stamp_ns,
                value,
                bytes: cell,
            });
            return r;
        }
        let links = self.shared.links.snapshot();
        let cell = OnceCell::new();
        self.shared.send_all(&links, seq, stamp_ns, &value, &cell)
    }

    /// Changes the priority of every live connection of this publisher (and
    /// of those it makes later); returns each subscriber's outcome.
    pub fn set_priority(&self, p: Priority) -> Vec<(EndpointId, Result<String, PriorityError>)> {
        self.shared.links.set_default_priority(p);
        self.shared.links.set_priority(|_| true, p)
    }

    /// Number of connected subscribers.
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

    /// The connections with their paths and statistics.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.shared.connections()
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

impl<T: Codec> Drop for Publisher<T> {
    fn drop(&mut self) {
        self.node.rt.shared.remove_endpoint(self.shared.id.entity);
        self.shared.links.close_all();
    }
}
