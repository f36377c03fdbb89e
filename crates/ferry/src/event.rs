//! Events a port reports about its peers: matches, incompatibilities,
//! deadlines. Each port keeps a bounded queue of them.

use std::collections::VecDeque;
use std::time::Duration;

use ferry_discovery::matching::QosPolicy;
use ferry_wire::{EndpointId, TransportKind};
use parking_lot::{Condvar, Mutex};

/// Most events kept per port; the oldest are dropped beyond this.
const MAX_EVENTS: usize = 256;

/// Why a peer stopped being matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnmatchReason {
    /// The peer endpoint was destroyed, or its process exited cleanly.
    Withdrawn,
    /// Its process went silent past its lease (crash, kill -9, link loss).
    LeaseExpired,
    /// The connection to it broke.
    ConnectionLost,
}

/// Something that happened to a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortEvent {
    /// A peer was matched; a connection over `transport` carries the data.
    Matched {
        /// The peer endpoint.
        remote: EndpointId,
        /// The path chosen (writers only; readers learn the path when the
        /// connection arrives, see `Subscriber::connections`).
        transport: Option<TransportKind>,
    },
    /// A matched peer is gone.
    Unmatched {
        /// The peer endpoint.
        remote: EndpointId,
        /// Why.
        reason: UnmatchReason,
    },
    /// Same topic, but QoS policies conflict: not connected.
    IncompatibleQos {
        /// The peer endpoint.
        remote: EndpointId,
        /// The conflicting policies.
        policies: Vec<QosPolicy>,
    },
    /// Same topic, different message type: not connected.
    IncompatibleType {
        /// The peer endpoint.
        remote: EndpointId,
        /// The writer's type.
        offered: String,
        /// The reader's type.
        requested: String,
    },
    /// No sample within the deadline (count since creation).
    DeadlineMissed {
        /// Total misses.
        total: u64,
    },
}

/// A bounded queue of port events.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    q: Mutex<VecDeque<PortEvent>>,
    cv: Condvar,
}

impl EventQueue {
    pub fn push(&self, e: PortEvent) {
        let mut q = self.q.lock();
        if q.len() >= MAX_EVENTS {
            q.pop_front();
        }
        q.push_back(e);
        self.cv.notify_all();
    }

    pub fn try_next(&self) -> Option<PortEvent> {
        self.q.lock().pop_front()
    }

    pub fn next_timeout(&self, timeout: Duration) -> Option<PortEvent> {
        let deadline = std::time::Instant::now() + timeout;
        let mut q = self.q.lock();
        loop {
            if let Some(e) = q.pop_front() {
                return Some(e);
            }
            if self.cv.wait_until(&mut q, deadline).timed_out() {
                return q.pop_front();
            }
        }
    }
}
