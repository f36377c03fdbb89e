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
    /// A ROS 2 endpoint on the topic (a DDS reader or writer that is not
    /// ferry's, with `[ros2]` on) has QoS this port's DDS side conflicts
    /// with: DDS does not match them, so no sample crosses.
    Ros2IncompatibleQos {
        /// The last policy in conflict (`reliability`, `durability`,
        /// `deadline`, `liveliness`, or DDS's name of another).
        policy: String,
        /// The ROS 2 nodes with endpoints of the other kind on the topic
        /// (one of them conflicts; DDS does not say which): fully
        /// qualified names, or an endpoint's GUID when no node is named.
        nodes: Vec<String>,
        /// Conflicts DDS has counted on this port so far.
        total: u32,
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
