//! Ferry's connection table, sans-IO.
//!
//! Every publisher→subscriber and client→service pair that ferry connects is
//! decided here: [`Table`] takes discovery events (peers and their endpoints
//! joining, changing and leaving), local port events (a port created or
//! dropped), transport events (connected, failed, link lost) and the passage
//! of time, and returns [`Action`]s: connect this pair over transport X,
//! unlink that one, tell this port it was matched, forget that writer's
//! streams. QoS and type matching (ROS 2 rules, `ferry_discovery::matching`)
//! and path selection ([`select`]) are pure functions it calls.
//!
//! No socket, clock, thread or lock is used inside: the caller passes `now`
//! into every call and carries out the actions (quinn-proto and smoltcp are
//! the model). The cost of one event is the pairs it affects — the endpoints
//! of one topic, or of one peer — never a rebuild of every pair; `tests/`
//! checks thousands of random join/leave/change sequences against a
//! brute-force reference matcher and a 1,000-endpoint churn.
//!
//! Call order: feed events (`add_local`, `remove_local`, `peer_up`,
//! `peer_left`, `endpoint_up`, `endpoint_left`, `connected`,
//! `connect_failed`, `link_lost`), call [`Table::handle_timeout`] when
//! [`Table::poll_timeout`] is due, and drain [`Table::poll_action`] after each
//! call.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod event;
mod path;
mod table;

pub use event::{PortEvent, UnmatchReason};
pub use path::{select, PeerInfo, Route};
pub use table::{
    Action, LocalOptions, PairState, Table, TableStats, FORWARD_THRESHOLD, OUTAGE_GRACE,
    RETRY_AFTER,
};
