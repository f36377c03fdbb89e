//! Transports and path selection.
//!
//! The contract every transport implements ([`Transport`], [`Link`],
//! [`Inbox`], …) lives in the `ferry-transport` crate and is re-exported
//! here; see its documentation for how a match becomes a connection. The
//! transports themselves: in-process ([`intra`]), shared memory ([`shm`]),
//! UDP ([`udp`]) and TCP ([`tcp`]) are modules of this crate; MQTT is its
//! own crate, `ferry-mqtt` (re-exported as [`mqtt`]). Each is one line in
//! `start::registry`.

pub(crate) mod fwd;
pub mod intra;
mod links;
pub mod shm;
pub(crate) mod start;
pub mod tcp;
pub mod udp;
mod udp_sys;

#[cfg(feature = "mqtt")]
pub use ferry_mqtt as mqtt;
pub use ferry_transport::transport::*;

pub(crate) use links::{reached_by, Links, Reached};
