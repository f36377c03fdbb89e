//! A writer's set of links.

use std::sync::Arc;

use ferry_wire::EndpointId;
use parking_lot::{Mutex, RwLock};

use super::Link;
use crate::priority::{Priority, PriorityError};
use crate::stats::{ConnectionInfo, Side};

/// A writer's connections, one link per matched reader. Copy-on-write:
/// publishing takes a snapshot (one atomic increment) and sends without
/// holding any lock, so a publisher blocked on a keep_all link never blocks
/// the I/O thread that adds, removes or prunes links.
///
/// Links are kept in priority order, highest first: a sample goes to the
/// prioritized connections before the others.
#[derive(Default)]
pub(crate) struct Links(RwLock<Arc<Vec<Arc<dyn Link>>>>, Mutex<Priority>);

/// Whether a port's own links reach reader `r` (held weakly: the port
/// holds the Zenoh link that asks).
pub(crate) type Reached = Arc<dyn Fn(EndpointId) -> bool + Send + Sync>;

/// [`Reached`] for `port`, whose links `links` gives.
pub(crate) fn reached_by<T: Send + Sync + 'static>(
    port: &Arc<T>,
    links: fn(&T) -> &Links,
) -> Reached {
    let port = Arc::downgrade(port);
    Arc::new(move |r| port.upgrade().is_some_and(|p| links(&p).reaches(r)))
}

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
    /// Whether a live link goes to reader `reader` (not through an
    /// intermediary: the broker, DDS, Zenoh).
    pub fn reaches(&self, reader: EndpointId) -> bool {
        self.snapshot()
            .iter()
            .any(|l| l.reaches_reader() && !l.is_closed() && l.remote() == reader)
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
    ) -> Vec<(EndpointId, Result<crate::priority::Applied, PriorityError>)> {
        let out: Vec<_> = self
            .snapshot()
            .iter()
            .filter(|l| !l.is_closed() && to(l.remote()))
            .map(|l| (l.remote(), l.set_priority(p)))
            .collect();
        self.update(|_| {}); // re-sort
        out
    }
    /// Closes and forgets the link to `reader`. A link to an intermediary
    /// (the broker, DDS) is not a reader's, whatever id a peer announced.
    /// True when there was one.
    pub fn remove(&self, reader: EndpointId) -> bool {
        let mut removed = false;
        self.update(|v| {
            v.retain(|l| {
                if l.remote() == reader && l.reaches_reader() {
                    l.close();
                    removed = true;
                    false
                } else {
                    true
                }
            })
        });
        removed
    }
    /// Closes and forgets the other links to `reader` than `keep` (the
    /// path a pair left, once the new one carries it). True when there
    /// was one.
    pub fn retire_others(&self, reader: EndpointId, keep: &Arc<dyn Link>) -> bool {
        let other = |l: &Arc<dyn Link>| {
            l.remote() == reader
                && l.reaches_reader()
                && !std::ptr::addr_eq(Arc::as_ptr(l), Arc::as_ptr(keep))
        };
        if !self.snapshot().iter().any(other) {
            return false;
        }
        self.update(|v| {
            v.retain(|l| {
                if other(l) {
                    l.close();
                    false
                } else {
                    true
                }
            })
        });
        true
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
        // From a snapshot, not under the lock: a link's `readers` may ask
        // this set again (Zenoh's link asks which readers are reached), and
        // a second read lock waits behind a writer that waits on the first.
        self.snapshot()
            .iter()
            .filter(|l| !l.is_closed())
            .map(|l| l.readers())
            .sum()
    }
    /// The link a call goes on: the first open one to a reader (ferry's
    /// own paths), else the first that serves one (DDS to a ROS 2 service).
    pub fn first_live(&self) -> Option<Arc<dyn Link>> {
        let links = self.snapshot();
        let open = || links.iter().filter(|l| !l.is_closed());
        open()
            .find(|l| l.reaches_reader())
            .or_else(|| open().find(|l| l.readers() > 0))
            .cloned()
    }
    pub fn connections(&self, topic: &str, id: EndpointId) -> Vec<ConnectionInfo> {
        self.snapshot()
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
                c.priority = Some(l.priority());
                c.protection = l.protection();
                c
            })
            .collect()
    }
}
