//! Every transport a runtime starts, in one list: [`registry`].
//!
//! A transport is its module: a [`Start`] function (given a
//! [`super::StartContext`]) that opens what it needs
//! (sockets it hands the I/O loop as `reactor::Source`s, threads of its
//! own) and returns its [`Transport`]. Adding one touches its module and
//! one line of [`registry`]; the runtime, the connection table and the I/O
//! loop do not change.

use super::Start;

/// Every transport, started in this order.
pub(crate) fn registry() -> Vec<Start> {
    #[allow(unused_mut)]
    let mut v: Vec<Start> = vec![
        super::intra::start,
        super::shm::start,
        super::udp::start,
        super::tcp::start,
    ];
    #[cfg(feature = "mqtt")]
    v.push(ferry_mqtt::start);
    v
}
