//! The TCP listener as a source of the I/O loop: every accepted connection
//! becomes a [`TcpSource`] of the same loop.
//!
//! A stranger can open connections faster than Hellos time out, so the
//! listener bounds what it holds. Connections without a Hello yet are
//! capped per source address and in total, and the oldest such
//! connection gives way to a new one. All incoming connections are capped
//! per address and in total below the process's file descriptor limit; past
//! that, and with none to evict, a new connection is refused. When
//! `accept` still fails for want of descriptors, the listener says so once,
//! evicts, and retries on a timer (an edge-triggered listener is not woken
//! again for connections already waiting).

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ferry_transport::stats::ListenerCounters;
use ferry_wire::{EndpointId, ParticipantId};
use parking_lot::Mutex;

use super::tls::TlsState;
use super::{QueuePolicy, Role, TcpConn, TcpSource};
use crate::reactor::{IoHandle, LoopContext, Readiness, Served, Source};
use crate::transport::TransportSecurity;

/// Most connections accepted per loop turn: the ones accepted are watched
/// (and their Hellos read) before more are taken, so a legitimate burst of
/// connections from one host never pushes out its own members.
const ACCEPT_BATCH: usize = 16;
/// Most connections without a Hello yet from one address.
const PENDING_PER_ADDRESS: usize = 32;
/// How soon `accept` is tried again after running out of descriptors.
const FD_RETRY: Duration = Duration::from_millis(100);

/// The caps, from the process's file descriptor limit.
#[derive(Debug, Clone, Copy)]
struct Caps {
    /// Connections without a Hello, in total.
    pending: usize,
    /// Incoming connections, in total.
    total: usize,
    /// Incoming connections from one address.
    per_address: usize,
}

impl Caps {
    fn for_fd_limit(limit: usize) -> Caps {
        let total = (limit * 3 / 4).max(16);
        Caps {
            pending: (limit / 4).clamp(8, 256),
            total,
            per_address: (total / 2).max(8),
        }
    }
}

/// One accepted connection, as the listener tracks it.
struct Accepted {
    ip: IpAddr,
    conn: Weak<TcpConn>,
}

impl Accepted {
    /// Still open, and whether it sent its Hello.
    fn state(&self) -> Option<bool> {
        let c = self.conn.upgrade()?;
        (!c.is_closed()).then(|| c.peer_participant().is_some())
    }
}

/// A runtime's TCP listener.
pub(crate) struct ListenerSource {
    listener: mio::net::TcpListener,
    io: IoHandle,
    max_frame: usize,
    caps: Caps,
    /// Incoming connections, oldest first (closed ones pruned on accept).
    accepted: VecDeque<Accepted>,
    counters: Arc<ListenerCounters>,
    /// Try `accept` again then (out of descriptors, or a full batch).
    retry_at: Option<Instant>,
    /// `accept` ran out of descriptors and has not succeeded since (said
    /// once).
    exhausted: bool,
    /// The runtime's identity: accepted connections speak TLS (`enforce`)
    /// or may (`permissive`: told by their first byte).
    security: Option<Arc<TransportSecurity>>,
}

impl ListenerSource {
    /// Listens on `ip` (an ephemeral port); returns the source and the port.
    pub fn bind(
        ip: Ipv4Addr,
        io: IoHandle,
        max_frame: usize,
        counters: Arc<ListenerCounters>,
        security: Option<Arc<TransportSecurity>>,
    ) -> io::Result<(Self, u16)> {
        let listener = mio::net::TcpListener::bind(SocketAddr::V4(SocketAddrV4::new(ip, 0)))?;
        let port = listener.local_addr()?.port();
        Ok((
            ListenerSource {
                listener,
                io,
                max_frame,
                caps: Caps::for_fd_limit(fd_limit()),
                accepted: VecDeque::new(),
                counters,
                retry_at: None,
                exhausted: false,
                security,
            },
            port,
        ))
    }

    /// Makes room for a connection from `ip`: false when it must be
    /// refused.
    fn admit(&mut self, ip: IpAddr) -> bool {
        let mut states: Vec<Option<bool>> = self.accepted.iter().map(Accepted::state).collect();
        let mut i = 0;
        self.accepted.retain(|_| {
            let keep = states[i].is_some();
            i += 1;
            keep
        });
        states.retain(Option::is_some);
        let pending_from = |acc: &VecDeque<Accepted>, st: &[Option<bool>]| {
            acc.iter()
                .zip(st)
                .filter(|(a, s)| a.ip == ip && **s == Some(false))
                .count()
        };
        let pending = states.iter().filter(|s| **s == Some(false)).count();
        let from_ip = self.accepted.iter().filter(|a| a.ip == ip).count();
        // Which cap is reached decides whose oldest unidentified connection
        // gives way: this address's own, or anyone's.
        let own = pending_from(&self.accepted, &states) >= PENDING_PER_ADDRESS
            || from_ip >= self.caps.per_address;
        let any = pending >= self.caps.pending || self.accepted.len() >= self.caps.total;
        if !own && !any {
            return true;
        }
        let victim = self
            .accepted
            .iter()
            .zip(&states)
            .position(|(a, s)| *s == Some(false) && (!own || a.ip == ip));
        match victim.and_then(|v| self.accepted.remove(v)) {
            Some(old) => {
                if let Some(c) = old.conn.upgrade() {
                    tracing::debug!(
                        "closing connection from {}: no Hello yet, and a newer one came",
                        c.peer
                    );
                    c.mark_closed();
                }
                ListenerCounters::count(&self.counters.evicted);
                true
            }
            None => false,
        }
    }

    /// The oldest connection still without a Hello goes (to free a
    /// descriptor): whether there was one.
    fn evict_oldest_pending(&mut self) -> bool {
        let Some(v) = self.accepted.iter().position(|a| a.state() == Some(false)) else {
            return false;
        };
        if let Some(c) = self.accepted.remove(v).and_then(|a| a.conn.upgrade()) {
            c.mark_closed();
        }
        ListenerCounters::count(&self.counters.evicted);
        true
    }

    /// Accepts up to a batch: `More` when the batch filled.
    fn accept(&mut self, ctx: &mut dyn LoopContext) -> Served {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    if std::mem::take(&mut self.exhausted) {
                        tracing::info!("TCP listener: accepting connections again");
                    }
                    if !self.admit(peer.ip()) {
                        ListenerCounters::count(&self.counters.refused);
                        tracing::debug!(
                            "refusing a connection from {peer}: connection caps reached"
                        );
                        drop(stream);
                        continue;
                    }
                    ListenerCounters::count(&self.counters.accepted);
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
                    if let Some(sec) = self.security.as_ref().filter(|s| s.enforce) {
                        match TlsState::server(sec) {
                            Ok(t) => {
                                let _ = conn.tls.set(Mutex::new(t));
                            }
                            Err(e) => {
                                tracing::warn!("TLS for a connection from {peer}: {e}");
                                continue;
                            }
                        }
                    }
                    self.accepted.push_back(Accepted {
                        ip: peer.ip(),
                        conn: Arc::downgrade(&conn),
                    });
                    ctx.add_source(Box::new(TcpSource::accepted(
                        conn,
                        self.max_frame,
                        self.counters.clone(),
                        self.security.clone(),
                    )));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Served::Idle,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    ListenerCounters::count(&self.counters.fd_exhausted);
                    if !std::mem::replace(&mut self.exhausted, true) {
                        tracing::warn!(
                            "TCP listener: out of file descriptors ({e}; limit {}): \
                             closing connections that sent no Hello and retrying; \
                             raise `ulimit -n` if this host needs more connections",
                            fd_limit()
                        );
                    }
                    self.evict_oldest_pending();
                    self.retry_at = Some(Instant::now() + FD_RETRY);
                    return Served::Idle;
                }
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    return Served::Idle;
                }
            }
        }
        Served::More
    }
}

/// The process's open file limit, the soft limit raised to the hard one
/// first (once): a middleware with a connection per pair needs more than
/// the customary 1,024, and the hard limit is what the administrator
/// allows.
fn fd_limit() -> usize {
    static LIMIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit write/read one plain struct we own.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
                return 1024;
            }
            if r.rlim_cur < r.rlim_max {
                let raised = libc::rlimit {
                    rlim_cur: r.rlim_max,
                    rlim_max: r.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    r = raised;
                }
            }
        }
        usize::try_from(r.rlim_cur)
            .unwrap_or(usize::MAX)
            .min(1 << 20)
    })
}

impl Source for ListenerSource {
    fn fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }
    fn ready(&mut self, _ready: Readiness, ctx: &mut dyn LoopContext) -> Served {
        self.accept(ctx)
    }
    /// A listener only accepts.
    fn writable_interest(&self) -> bool {
        false
    }
    fn has_timers(&self) -> bool {
        true
    }
    fn service(&mut self, now: Instant, ctx: &mut dyn LoopContext) -> Option<Instant> {
        match self.retry_at {
            Some(t) if t <= now => {
                // Failing again sets the next retry; a full batch is
                // followed by another next turn.
                self.retry_at = None;
                if self.accept(ctx) == Served::More {
                    self.retry_at = Some(now);
                }
                self.retry_at
            }
            other => other,
        }
    }
    fn is_closed(&self) -> bool {
        false
    }
    fn removed(&mut self, _ctx: &mut dyn LoopContext) {
        tracing::error!("the TCP listener left the I/O loop: no incoming TCP connections");
    }
    fn shutdown(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::Caps;

    #[test]
    fn caps_stay_below_the_descriptor_limit_and_leave_one_address_half() {
        let c = Caps::for_fd_limit(1024);
        assert_eq!((c.pending, c.total, c.per_address), (256, 768, 384));
        let c = Caps::for_fd_limit(64);
        assert_eq!((c.pending, c.total, c.per_address), (16, 48, 24));
        assert!(Caps::for_fd_limit(1 << 20).pending <= 256);
    }
}
