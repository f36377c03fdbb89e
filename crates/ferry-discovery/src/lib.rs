//! Sans-IO discovery for ferry.
//!
//! [`Discovery`] is a pure state machine: the driver feeds it datagrams
//! ([`Discovery::handle_datagram`]) and the passing of time
//! ([`Discovery::handle_timeout`]) and sends what it asks for
//! ([`Discovery::poll_transmit`]). It owns no socket, no clock and no thread,
//! so loss, restarts and storms are tested deterministically in-process.
//!
//! [`matching`] holds the rules that decide whether a publisher and a
//! subscriber (or a client and a service) may be connected: same topic, same
//! type, and ROS 2's QoS compatibility rules.

pub mod matching;
mod state;

pub use state::*;
