//! Ferry wire formats.
//!
//! Everything that crosses a process boundary is defined here: the data-plane
//! [`frame`] (header + body used by stream transports such as TCP), the
//! discovery [`beacon`] and the protocol-level types both carry (identifiers,
//! QoS, locators). The crate does no I/O and reads no clock; parsers validate
//! lengths once and then never panic, whatever bytes they are given.

pub mod beacon;
pub mod codec;
pub mod frame;
pub mod leader;
pub mod ros_names;
pub mod rudp;
pub mod seal;
pub mod shm;
pub mod types;

pub use codec::WireError;
pub use types::*;
