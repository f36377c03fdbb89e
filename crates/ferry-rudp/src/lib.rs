//! Sans-IO reliable and best-effort UDP for ferry.
//!
//! Built for lossy wireless links and large samples (seed paper
//! `001_10b8b18b6f5db8a8`): every datagram fits the path MTU (no IP
//! fragmentation), losses are repaired per fragment by NACK, heartbeats
//! follow the publish rate (n = 2r), the history is bounded in samples *and*
//! bytes (the paper's N_HC = ⌈T·ω/u⌉ generalised to bytes), the sender paces
//! to the link instead of bursting, and an outage stops transmission until
//! the peer answers again, after which what is left in history goes out
//! paced.
//!
//! [`Sender`] and [`Receiver`] are pure state machines: they take `now` and
//! bytes and hand back datagrams and deadlines; no socket, clock or thread.
//! An [`Endpoint`] sits in front of them for one socket: it parses each
//! datagram once, routes it to its stream, opens streams (HELLO, repeated
//! until answered) and bounds the streams the network can create; its
//! module docs give the call order a driver follows. Every `poll_transmit`
//! writes into a buffer the caller owns.
//!
//! The paced rate follows the path with no link hint (`cc.rs`): every
//! ACKNACK carries the reader's mark of the newest datagram it received
//! (arrival time, byte and datagram counters); two marks of one busy period
//! give the writer a delivery rate, a loss count and a queueing delay over
//! the same datagrams. Start-up doubles from 32 Mbit/s; a queue that stands
//! and grows cuts the rate to 0.85 × what was delivered (AIMD, so streams
//! sharing a bottleneck converge); loss at a flat delay is random and only
//! corrects the samples. `SenderConfig::rate` (`udp_link_mbps`) is a cap.
//! Readers without marks leave the older receive-rate rule on (`rate.rs`).
//! The unsent backlog is bounded by time at the pacing rate
//! (`sender/backlog.rs`): keep_last drops the oldest unsent samples,
//! keep_all refuses writes, so latency stays bounded above capacity.

mod cc;
mod endpoint;
mod pacer;
mod rate;
mod receiver;
mod sender;

pub use endpoint::{
    AcceptError, CloseReason, Dropped, Endpoint, EndpointConfig, EndpointEvent, EndpointStats,
    Incoming, Routed, StreamHandle, Transmit,
};
pub use receiver::{Receiver, ReceiverConfig, ReceiverStats, Sample};
pub use sender::{
    fec_shards, fec_shards_best_effort, Sender, SenderConfig, SenderEvent, SenderStats, WriteError,
    BACKLOG_TIME, PROBE_FAST_FOR, PROBE_SLOW,
};

/// Largest datagram by default: a 1500 B Ethernet/Wi-Fi MTU minus IP and UDP headers.
pub const DEFAULT_MTU: usize = 1472;

/// The paper's history bound in bytes: what the link can carry in one second
/// at the share `utilization` of `link_rate` (bytes/s).
pub fn history_bytes_for(link_rate: u64, utilization: f64) -> usize {
    ((link_rate as f64) * utilization.clamp(0.05, 1.0)) as usize
}

/// Microseconds on a wrapping u32 clock relative to `epoch` (for RTT echoes).
pub(crate) fn micros(epoch: std::time::Instant, now: std::time::Instant) -> u32 {
    (now.saturating_duration_since(epoch).as_micros() as u64 & 0xffff_ffff) as u32 | 1
}
