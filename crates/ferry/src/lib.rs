//! # Ferry
//!
//! A robotics communication middleware: nodes, publishers, subscribers and
//! services whose every connection takes the best path for the pair — a
//! shared pointer inside a process, shared memory between processes on a
//! host, ferry's reliable UDP (built for lossy wireless links) between
//! hosts, TCP when pinned, and MQTT through a broker for cloud-scoped
//! topics. Path selection is the connection table's (`ferry-conn`); which
//! thread runs a subscriber's callback is the subscriber's choice
//! ([`SubscriberBuilder::callback`] on its own thread,
//! [`SubscriberBuilder::inline_callback`] on the delivering one).
//!
//! ```no_run
//! use ferry::{msgs::std_msgs, Node, Qos};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let node = Node::builder().name("talker").build()?;
//! let publisher = node.publisher::<std_msgs::String>("/chatter").qos(Qos::default()).build()?;
//! let listener = node.subscriber::<std_msgs::String>("/chatter").build()?;
//! publisher.publish(std_msgs::String { data: "hello".into() })?;
//! let sample = listener.recv()?;
//! println!("{} via {}", sample.data, sample.info.transport);
//! # Ok(()) }
//! ```

pub mod admin;
pub mod event;
pub mod graph;
mod membership;
pub mod msgs;
mod names;
mod node;
mod port;
mod publisher;
mod queue;
mod ros2;
mod runtime;
mod security;
mod service;
mod subscriber;
pub mod transport;
mod zenoh;

use ferry_transport::reactor;
pub use ferry_transport::{
    config, error, host, idl_support, interfaces, leader, message, priority, room, stats,
};

pub use config::{AdminAccess, Config, DiscoveryRange, TopicRule};
pub use error::{BuildError, CallError, DecodeError, EncodeError, PublishError, RecvError};
pub use event::{PortEvent, UnmatchReason};
pub use ferry_discovery::matching::QosPolicy;
/// What signed discovery refused, by reason ([`DiscoveryStats::security`]).
pub use ferry_discovery::SecurityStats as DiscoverySecurityStats;
/// Counters of a runtime's discovery ([`Node::discovery_stats`]).
pub use ferry_discovery::Stats as DiscoveryStats;
pub use ferry_wire::{
    Durability, EndpointId, EndpointKind, History, Locator, ParticipantId, Qos, Reliability,
    TransportKind, TypeHash,
};
pub use message::{
    decode_cdr, encode_cdr, Codec, Message, RawBytes, Sample, SampleInfo, ServiceType,
};
pub use node::{Node, NodeBuilder};
pub use priority::{
    Applied, PacketClass, Packets, Priority, PriorityError, SetOutcome, ThreadChange, ThreadPolicy,
};
pub use publisher::{Publisher, PublisherBuilder, SampleMut};
pub use room::Room;
pub use ros2::{Ros2Endpoint, Ros2Node};
pub use service::{CallFuture, Client, ClientBuilder, Service, ServiceBuilder};
pub use stats::{ConnectionInfo, ConnectionStats, StatsSnapshot};
pub use subscriber::{Subscriber, SubscriberBuilder, KEEP_ALL_DEPTH};
#[cfg(feature = "mqtt")]
pub use transport::mqtt::{BrokerState, FOREIGN_WRITER};
pub use zenoh::ZenohSession;

/// Includes the Rust types that `ferry_idl::codegen::build` generated in
/// this crate's build script from a folder of ROS 2 packages: one module
/// per package, `msg`/`srv`/`action` inside.
///
/// ```ignore
/// // build.rs: ferry_idl::codegen::build(&["interfaces"]).unwrap();
/// mod interfaces {
///     ferry::include_interfaces!();
/// }
/// use interfaces::my_robot_msgs::msg::ArmCommand;
/// ```
#[macro_export]
macro_rules! include_interfaces {
    () => {
        include!(concat!(env!("OUT_DIR"), "/ferry_interfaces.rs"));
    };
}
