//! What a port is told about its peers.

use ferry_discovery::matching::{Incompatibility, QosPolicy};
use ferry_wire::{EndpointId, TransportKind};

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

impl PortEvent {
    /// The event telling a port that `remote` is on its topic but cannot be
    /// connected, and why.
    pub fn incompatible(remote: EndpointId, why: &Incompatibility) -> PortEvent {
        match why {
            Incompatibility::Qos(p) => PortEvent::IncompatibleQos {
                remote,
                policies: p.clone(),
            },
            Incompatibility::Type { offered, requested } => PortEvent::IncompatibleType {
                remote,
                offered: offered.clone(),
                requested: requested.clone(),
            },
        }
    }
}
