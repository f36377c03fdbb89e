//! Pieces every port shares: declaring an endpoint, the writer's set of
//! links, the reader's set of inbound connections, deadline tracking.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_wire::beacon::EndpointRecord;
use ferry_wire::{EndpointId, EndpointKind, Qos, TypeHash};
use parking_lot::{Mutex, RwLock};

use crate::error::BuildError;
use crate::event::{EventQueue, PortEvent};
use crate::node::NodeInner;
use crate::priority::{Priority, PriorityError};
use crate::stats::{ConnectionInfo, Side};
use crate::transport::{InboundConn, Link};

/// Expands the name and allocates the id and discovery record of a new
/// endpoint of `node` (the caller registers it with the runtime).
pub(crate) fn declare(
    node: &NodeInner,
    name: &str,
    kind: EndpointKind,
    (type_name, type_hash): (String, TypeHash),
    qos: Qos,
) -> Result<(EndpointId, EndpointRecord), BuildError> {
    let topic = crate::names::expand(name, &node.namespace, &node.name)?;
    let entity = node.rt.shared.new_entity();
    let id = EndpointId {
        participant: node.rt.shared.id,
        entity,
    };
    Ok((
        id,
        EndpointRecord {
            entity,
            node: node.id,
            kind,
            topic,
            type_name,
            type_hash,
            qos,
        },
    ))
}

/// A writer's connections, one link per matched reader. Copy-on-write:
/// publishing takes a snapshot (one atomic increment) and sends without
/// holding any lock, so a publisher blocked on a keep_all link never blocks
/// the I/O thread that adds, removes or prunes links.
///
/// Links are kept in priority order, highest first: a sample goes to the
/// prioritized connections before the others.
#[derive(Default)]
pub(crate) struct Links(RwLock<Arc<Vec<Arc<dyn Link>>>>, Mutex<Priority>);

impl Links {
    /// The links now, for sending.
    pub fn snapshot(&self) -> Arc<Vec<Arc<dyn Link>>> {
        self.0.read().clone()
    }
    fn update(&self, f: impl FnOnce(&mut Vec<Arc<dyn Link>>)) {
        let mut g = self.0.write();
        let mut v = (**g).clone();
        f(&mut v);
        v.sort_by_key(|l| std::cmp::Reverse(l.priority().rank()));
        *g = Arc::new(v);
    }
    /// The priority new connections start with (QoS/config at creation).
    pub fn set_default_priority(&self, p: Priority) {
        *self.1.lock() = p;
    }
    /// Adds a new connection with the port's starting priority.
    pub fn push(&self, link: Arc<dyn Link>) {
        let p = *self.1.lock();
        if p != Priority::default() {
            match link.set_priority(p) {
                Ok(note) => tracing::debug!("{} priority {p}: {note}", link.remote()),
                Err(e) => tracing::warn!(
                    "connection to {}: priority {p} not applied: {e}",
                    link.remote()
                ),
            }
        }
        self.update(|v| v.push(link));
    }
    /// Changes the priority of the live connections whose reader `to`
    /// accepts; returns each one's reader and outcome.
    pub fn set_priority(
        &self,
        to: impl Fn(EndpointId) -> bool,
        p: Priority,
    ) -> Vec<(EndpointId, Result<String, PriorityError>)> {
        let out: Vec<_> = self
            .snapshot()
            .iter()
            .filter(|l| !l.is_closed() && to(l.remote()))
            .map(|l| (l.remote(), l.set_priority(p)))
            .collect();
        self.update(|_| {}); // re-sort
        out
    }
    /// Closes and forgets the link to `reader`.
    pub fn remove(&self, reader: EndpointId) {
        self.update(|v| {
            v.retain(|l| {
                if l.remote() == reader {
                    l.close();
                    false
                } else {
                    true
                }
            })
        });
    }
    pub fn prune_closed(&self) {
        if self.0.read().iter().any(|l| l.is_closed()) {
            self.update(|v| v.retain(|l| !l.is_closed()));
        }
    }
    pub fn close_all(&self) {
        let old = std::mem::take(&mut *self.0.write());
        for l in old.iter() {
            l.close();
        }
    }
    pub fn live(&self) -> usize {
        self.0.read().iter().filter(|l| !l.is_closed()).count()
    }
    pub fn first_live(&self) -> Option<Arc<dyn Link>> {
        self.0.read().iter().find(|l| !l.is_closed()).cloned()
    }
    pub fn connections(&self, topic: &str, id: EndpointId) -> Vec<ConnectionInfo> {
        self.0
            .read()
            .iter()
            .map(|l| {
                let mut c = ConnectionInfo::new(
                    topic,
                    id,
                    l.remote(),
                    Side::Writer,
                    l.transport(),
                    &l.locator(),
                    l.stats(),
                );
                c.priority = l.priority().to_string();
                c
            })
            .collect()
    }
}

/// A reader's connections, one per writer that connected to it.
#[derive(Default)]
pub(crate) struct Inbound(Mutex<Vec<Arc<InboundConn>>>);

impl Inbound {
    pub fn attach(&self, conn: Arc<InboundConn>) {
        self.0.lock().push(conn);
    }
    pub fn detach(&self, remote: EndpointId) {
        self.0.lock().retain(|c| c.remote != remote);
    }
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }
    /// The first sequence number `writer` delivered here on a path other
    /// than MQTT, if any.
    pub fn direct_from(&self, writer: EndpointId) -> Option<u64> {
        self.0
            .lock()
            .iter()
            .filter(|c| c.remote == writer && c.transport != ferry_wire::TransportKind::Mqtt)
            .map(|c| c.first_seq.load(std::sync::atomic::Ordering::Relaxed))
            .filter(|s| *s != 0)
            .min()
    }
    pub fn connections(&self, topic: &str, id: EndpointId) -> Vec<ConnectionInfo> {
        self.0
            .lock()
            .iter()
            .map(|c| {
                ConnectionInfo::new(
                    topic,
                    id,
                    c.remote,
                    Side::Reader,
                    c.transport,
                    &c.locator,
                    &c.stats,
                )
            })
            .collect()
    }
}

/// Tracks the QoS deadline of a port: reports each period without a sample.
pub(crate) struct DeadlineWatch {
    period: Option<Duration>,
    last: Mutex<Option<Instant>>,
    misses: AtomicU64,
}

impl DeadlineWatch {
    pub fn new(period: Option<Duration>) -> Self {
        DeadlineWatch {
            period,
            last: Mutex::new(None),
            misses: AtomicU64::new(0),
        }
    }
    /// A sample went out / came in.
    #[inline]
    pub fn touch(&self) {
        if self.period.is_some() {
            *self.last.lock() = Some(Instant::now());
        }
    }
    /// Called periodically: pushes `DeadlineMissed` when a period passed.
    pub fn check(&self, now: Instant, events: &EventQueue) {
        let Some(d) = self.period else { return };
        let mut last = self.last.lock();
        let since = last.get_or_insert(now);
        if now.duration_since(*since) > d {
            *since = now;
            let total = self.misses.fetch_add(1, Ordering::Relaxed) + 1;
            events.push(PortEvent::DeadlineMissed { total });
        }
    }
}
