//! The UDP data socket as a source of the I/O loop: datagrams in, and
//! every stream's timers (heartbeats, NACK delays, pacing, outage probes).

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Instant;

use super::UdpShared;
use crate::reactor::{LoopContext, Readiness, Served, Source};

/// The runtime's UDP socket in its I/O loop.
pub(crate) struct UdpSource(pub Arc<UdpShared>);

impl Source for UdpSource {
    fn fd(&self) -> RawFd {
        self.0.socket.as_raw_fd()
    }
    fn ready(&mut self, ready: Readiness, ctx: &mut dyn LoopContext) -> Served {
        if ready.readable || ready.error {
            self.0.on_readable(ctx);
        }
        Served::Idle
    }
    fn has_timers(&self) -> bool {
        true
    }
    fn service(&mut self, now: Instant, _ctx: &mut dyn LoopContext) -> Option<Instant> {
        self.0.service(now)
    }
    /// Sends never wait for the I/O loop: only reads are watched (a
    /// writable edge per datagram sent would wake the loop for nothing).
    fn writable_interest(&self) -> bool {
        false
    }
    fn is_closed(&self) -> bool {
        false
    }
    fn removed(&mut self, _ctx: &mut dyn LoopContext) {
        tracing::error!("the UDP socket left the I/O loop: the UDP path is down");
    }
    fn shutdown(&mut self) {}
}
