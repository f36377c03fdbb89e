//! The admin plane: every node serves `/_ferry/admin<node name>`, a ferry
//! service that reports the node's connections (and, later, changes them).
//! The CLI and `ferry demo` read paths, rates and latencies through it.

use serde::{Deserialize, Serialize};

use crate::stats::ConnectionInfo;

/// Prefix of admin service names; the node's full name follows.
pub const ADMIN_PREFIX: &str = "/_ferry/admin";

/// The admin service name of a node (`/robot1/cam` → `/_ferry/admin/robot1/cam`).
pub fn service_name(node_fqn: &str) -> String {
    format!("{ADMIN_PREFIX}{node_fqn}")
}

/// A request to a node's admin service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminRequest {
    /// `connections`: list the node's connections.
    pub command: String,
}
crate::message!(
    AdminRequest,
    "ferry_msgs/srv/Admin_Request",
    "string command"
);

/// The reply: JSON text (a list of [`ConnectionInfo`] for `connections`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminReply {
    /// JSON document.
    pub json: String,
}
crate::message!(AdminReply, "ferry_msgs/srv/Admin_Response", "string json");

/// Parses a `connections` reply.
pub fn parse_connections(reply: &AdminReply) -> Result<Vec<ConnectionInfo>, serde_json::Error> {
    serde_json::from_str(&reply.json)
}
