//! The TCP listener as a source of the I/O loop: every accepted connection
//! becomes a [`TcpSource`] of the same loop.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use ferry_wire::{EndpointId, ParticipantId};
use parking_lot::Mutex;

use super::{QueuePolicy, Role, TcpConn, TcpSource};
use crate::reactor::{IoHandle, LoopContext, Readiness, Served, Source};

/// A runtime's TCP listener.
pub(crate) struct ListenerSource {
    listener: mio::net::TcpListener,
    io: IoHandle,
    max_frame: usize,
}

impl ListenerSource {
    /// Listens on `ip` (an ephemeral port); returns the source and the port.
    pub fn bind(ip: Ipv4Addr, io: IoHandle, max_frame: usize) -> io::Result<(Self, u16)> {
        let listener = mio::net::TcpListener::bind(SocketAddr::V4(SocketAddrV4::new(ip, 0)))?;
        let port = listener.local_addr()?.port();
        Ok((
            ListenerSource {
                listener,
                io,
                max_frame,
            },
            port,
        ))
    }
}

impl Source for ListenerSource {
    fn fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }
    fn ready(&mut self, _ready: Readiness, ctx: &mut dyn LoopContext) -> Served {
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    // Unbound until its Hello names the writer and reader.
                    let conn = Arc::new(TcpConn::new(
                        stream,
                        peer,
                        EndpointId {
                            participant: ParticipantId(0),
                            entity: 0,
                        },
                        Role::Incoming {
                            bound: Mutex::new(None),
                        },
                        QueuePolicy {
                            depth: 1024,
                            block: None,
                        },
                        self.io.clone(),
                    ));
                    ctx.add_source(Box::new(TcpSource::accepted(conn, self.max_frame)));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Served::Idle,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    return Served::Idle;
                }
            }
        }
    }
    /// A listener only accepts.
    fn writable_interest(&self) -> bool {
        false
    }
    fn is_closed(&self) -> bool {
        false
    }
    fn removed(&mut self, _ctx: &mut dyn LoopContext) {
        tracing::error!("the TCP listener left the I/O loop: no incoming TCP connections");
    }
    fn shutdown(&mut self) {}
}
