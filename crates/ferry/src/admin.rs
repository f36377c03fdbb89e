//! The admin plane: every node serves `/_ferry/admin<node name>`, a ferry
//! service that reports the node's connections and changes the priority of
//! live ones. The CLI (`ferry admin`, `topic info`, `demo`) uses it.
//!
//! Access (`admin` in the config, `FERRY_ADMIN`): `off` serves nothing,
//! `local` (default) answers reads from anyone in the domain but changes
//! only from processes on this host, `open` accepts changes from anywhere.
//! "On this host" is decided by the transport that carried the request
//! ([`crate::transport::Origin`]): this process, shared memory, or a TCP/UDP source address
//! that is loopback or one of this host's — never by the participant or
//! host id the caller declares.
//!
//! With security on, the caller's identity as its channel proved it (TLS
//! certificate, or the signed participant that attached by shared memory)
//! must also hold `monitor` (or `admin`) on the node for `connections` and
//! `counters`, and `admin` for `set`; this process passes, a request with
//! no proven identity (a plain peer, the broker) does not.

use crate::transport::InboundConn;
use ferry_security::Action;
use serde::{Deserialize, Serialize};

use crate::config::AdminAccess;
use crate::priority::{PacketClass, ThreadPolicy};
use crate::runtime::Shared;
use crate::stats::ConnectionInfo;

/// Prefix of admin service names; the node's full name follows.
pub use ferry_security::ADMIN_PREFIX;

/// The admin service name of a node (`/robot1/cam` → `/_ferry/admin/robot1/cam`).
pub fn service_name(node_fqn: &str) -> String {
    format!("{ADMIN_PREFIX}{node_fqn}")
}

/// A request to a node's admin service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminRequest {
    /// `connections`: list the node's connections; `counters`: what its
    /// runtime refused and counted; `set`: change the priority of the
    /// connections of `topic` to `to`; `definition`: the definition bundle
    /// of the type named in `topic` (for a peer that lacks its files).
    pub command: String,
    /// `set`: the publisher's topic (full name); `definition`: the type.
    pub topic: String,
    /// `set`: the subscriber's node name (`/planner`), endpoint id, or `*`.
    pub to: String,
    /// `set`: packet class (`low`, `normal`, `high`, `critical`, `dscp:N`).
    pub priority: String,
    /// `set`: thread policy (`fifo:N`, `rr:N`, `nice:N`, `other`), or
    /// `none` for no dedicated thread; empty = keep the current one.
    pub sched: String,
}
crate::message!(
    AdminRequest,
    "ferry_msgs/srv/Admin_Request",
    "string command\nstring topic\nstring to\nstring priority\nstring sched"
);

impl AdminRequest {
    /// A `connections` request.
    pub fn connections() -> Self {
        AdminRequest {
            command: "connections".into(),
            ..Default::default()
        }
    }
}

pub use crate::priority::SetOutcome;

/// Parses a `set` reply.
pub fn parse_set(reply: &AdminReply) -> Result<Vec<SetOutcome>, serde_json::Error> {
    serde_json::from_str(&reply.json)
}

/// The reply: JSON text (a list of [`ConnectionInfo`] for `connections`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminReply {
    /// JSON document.
    pub json: String,
}
crate::message!(AdminReply, "ferry_msgs/srv/Admin_Response", "string json");

/// What a node's runtime refused and counted (`counters`): discovery
/// datagrams and incoming connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Discovery datagrams sent, accepted and refused.
    pub discovery: crate::DiscoveryStats,
    /// Incoming connections accepted and turned away.
    pub connections: crate::ConnectionStats,
}

/// Parses a `counters` reply.
pub fn parse_counters(reply: &AdminReply) -> Result<Counters, serde_json::Error> {
    serde_json::from_str(&reply.json)
}

/// Parses a `connections` reply.
pub fn parse_connections(reply: &AdminReply) -> Result<Vec<ConnectionInfo>, serde_json::Error> {
    serde_json::from_str(&reply.json)
}

/// Serves one admin request for node `node` (the admin service's handler).
pub(crate) fn handle(
    shared: &Shared,
    (node, node_name): (u32, &str),
    access: AdminAccess,
    req: &AdminRequest,
    caller: &InboundConn,
) -> Result<AdminReply, String> {
    let origin = caller.origin;
    // Security on: reads need `monitor` (or `admin`), changes `admin`, on
    // this node, by the identity the channel proved.
    let grant = match req.command.as_str() {
        "connections" | "counters" => Some(Action::Monitor),
        "set" => Some(Action::Admin),
        _ => None,
    };
    if let (Some(sec), Some(action)) = (&shared.security, grant) {
        sec.check_admin(
            caller,
            action,
            node_name,
            &shared.listener_counters.admin_denied,
        )?;
    }
    match req.command.as_str() {
        "connections" => json(&shared.node_connections(node)),
        // A peer that lacks a type's files asks for its definition (a
        // bundle: the type and every type it uses); it checks the bundle
        // against the hash this node announced before it trusts it.
        "definition" => match crate::interfaces::definition_of(&req.topic) {
            Some(d) => json(&d),
            None => Err(format!("this node does not know the type `{}`", req.topic)),
        },
        "counters" => json(&Counters {
            discovery: shared.core.lock().discovery.stats(),
            connections: shared.listener_counters.snapshot(),
        }),
        "set" => {
            // By where the request really came from: a Hello or a beacon
            // can claim any participant id or host id.
            if access != AdminAccess::Open && !origin.is_this_host() {
                return Err(format!(
                    "permission denied: this node accepts admin changes only from its own host \
                     (admin = \"{}\"); set admin = \"open\" (FERRY_ADMIN=open) on it to allow remote changes",
                    match access {
                        AdminAccess::Off => "off",
                        AdminAccess::Local => "local",
                        AdminAccess::Open => "open",
                    }
                ));
            }
            if req.topic.is_empty() {
                return Err("`set` needs a topic".into());
            }
            let class = match req.priority.as_str() {
                "" => PacketClass::Normal,
                p => p.parse::<PacketClass>().map_err(|e| e.to_string())?,
            };
            let sched = match req.sched.as_str() {
                "" => None,
                "none" => Some(None),
                t => Some(Some(t.parse::<ThreadPolicy>().map_err(|e| e.to_string())?)),
            };
            let out = shared
                .set_priority(node, &req.topic, &req.to, class, sched)
                .map_err(|e| e.to_string())?;
            json(&out)
        }
        other => Err(format!(
            "unknown admin command `{other}` (known: connections, counters, set, definition)"
        )),
    }
}

fn json<T: Serialize>(v: &T) -> Result<AdminReply, String> {
    serde_json::to_string(v)
        .map(|json| AdminReply { json })
        .map_err(|e| e.to_string())
}

/// The definition bundle in a `definition` reply.
pub fn parse_definition(reply: &AdminReply) -> Result<String, serde_json::Error> {
    serde_json::from_str(&reply.json)
}
