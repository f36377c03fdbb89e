//! Zenoh as a path of ferry's ports, speaking as ROS 2's rmw_zenoh
//! (Jazzy ≥ 0.2.4, Kilted, Rolling) speaks, so that a ferry node and a ROS 2
//! node on rmw_zenoh see each other's nodes and endpoints and exchange
//! samples and service calls through the same Zenoh network (a `zenohd`
//! router, or peers).
//!
//! This crate holds the conventions, without I/O — what a ferry port
//! writes and what it accepts from the network:
//! - [`keys`]: the key expression of a topic's or service's data
//!   (`<domain>/<name>/<type>/<RIHS01 hash>`);
//! - [`token`]: the liveliness tokens under `@ros2_lv/…` that make up
//!   rmw_zenoh's graph (nodes, publishers, subscriptions, services,
//!   clients), built and parsed as strictly as rmw_zenoh parses them;
//! - [`qos`]: the QoS chunk of a token, relative to rmw_zenoh's defaults;
//! - [`attachment`]: the 33 bytes rmw_zenoh attaches to every sample,
//!   query and reply (sequence number, source time, source GID).
//!
//! Sources: rmw_zenoh's `docs/design.md` and
//! `rmw_zenoh_cpp/src/detail/{liveliness_utils,attachment_helpers,qos}.cpp`
//! (tag `upstream/0.2.10` of `ros2-gbp/rmw_zenoh-release`); the golden
//! strings in the tests are the design document's.

pub mod attachment;
pub mod graph;
pub mod keys;
#[cfg(feature = "session")]
pub mod path;
pub mod qos;
#[cfg(feature = "session")]
pub mod service;
pub mod token;

pub use attachment::{Attachment, AttachmentError};
pub use keys::{data_key, service_key, service_type, KeyError};
pub use qos::{QosError, RmwQos};
pub use token::{gid_of, EntityKind, Token, TokenError, TopicInfo};

/// rmw_zenoh's slash replacement in token chunks: every `/` of a name
/// becomes `%` (and back), nothing else is escaped.
pub(crate) fn mangle(name: &str) -> String {
    name.replace('/', "%")
}

/// The inverse of [`mangle`].
pub(crate) fn demangle(chunk: &str) -> String {
    chunk.replace('%', "/")
}
