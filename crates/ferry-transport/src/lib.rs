//! # ferry-transport
//!
//! The contract between ferry's runtime and its transports, in a crate of
//! its own so that a transport can live in its own crate (`ferry-mqtt`)
//! and depend on this one rather than on the runtime:
//!
//! - [`transport`]: what a transport implements ([`Transport`], its
//!   writer-side [`Link`]) and what it delivers into (a reader's [`Inbox`]);
//!   how it is started ([`StartContext`]); the process's reader registry.
//! - [`reactor`]: the I/O loop's [`reactor::Source`] API through which a
//!   transport registers its sockets, listeners and timers.
//! - What runtime and transports both speak: the typed [`config`],
//!   [`message`](mod@message) codecs and payloads, [`error`]s, [`priority`] (thread
//!   policy + DSCP), [`stats`], and the [`host`]'s interfaces.
//!
//! The `ferry` crate re-exports all of it; applications use `ferry`.

pub mod config;
pub mod error;
pub mod host;
pub mod idl_support;
pub mod interfaces;
pub mod leader;
pub mod message;
pub mod priority;
pub mod reactor;
pub mod room;
pub mod secure;
pub mod seqs;
pub mod stats;
pub mod transport;

pub use config::Config;
pub use message::{Codec, Message, ServiceType};
pub use transport::{
    Capabilities, Carries, ConnectError, ConnectRequest, InFrame, InboundConn, Inbox, Link,
    OutFrame, PeerInfo, Replier, ReplyBody, ReplySink, SendError, SeqMarks, StartContext,
    Transport,
};
