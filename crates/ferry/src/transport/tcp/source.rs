//! A TCP connection as the I/O thread serves it: flush the backlog when the
//! socket has room or a batch's linger ends, read and dispatch frames up to
//! a budget, and report the end of the connection.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_transport::room::Stall;
use ferry_transport::stats::ListenerCounters;

use super::tls::{self, TlsState};
use super::{dispatch, on_closed, DispatchCtx, FrameReader, Role, TcpConn};
use crate::reactor::{LoopContext, Readiness, Served, Source};
use crate::transport::TransportSecurity;

/// Most bytes read from one connection per loop turn (a saturated
/// connection must not starve the I/O thread's timers).
const READ_BUDGET: usize = 4 << 20;
/// How long frames of a batching connection may wait for more before the
/// I/O thread writes them. The publishing thread writes a full batch
/// itself (256 frames) and 64 KiB queued end the linger at once, so a
/// sustained stream never waits for this;
/// it bounds the delay of the last frames of a burst. Flushing at once
/// instead woke the I/O thread for a few frames per write, and held 64 B
/// throughput to 0.83x Zenoh's (`bench/results/core-redesign.md`).
const LINGER: Duration = Duration::from_micros(100);
/// An accepted connection that has not sent its Hello by then is closed:
/// idle connections from a stranger must not hold descriptors and memory.
/// (A writer sends its Hello right after connecting.)
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);

/// One TCP connection in the I/O loop: the connection and its reader.
pub(crate) struct TcpSource {
    conn: Arc<TcpConn>,
    reader: FrameReader,
    /// A batch waits until then for more frames (see [`LINGER`]).
    linger_until: Option<Instant>,
    /// An accepted connection is closed unless its Hello is in by then.
    hello_by: Option<Instant>,
    /// The listener's counters (an accepted connection).
    counters: Option<Arc<ListenerCounters>>,
    /// Reading stopped because the bound reader's queue is full: the
    /// socket fills, TCP's flow control stops the writer, and its keep_all
    /// blocks. Resumed by a kick once the room's waker cleared `paused`.
    held: bool,
    /// Waiting for room; ended by the room's waker.
    paused: Stall,
    /// The runtime's identity (security on): a writer's certificate is
    /// checked at its Hello.
    security: Option<Arc<TransportSecurity>>,
    /// `permissive`: whether this accepted connection speaks TLS is told
    /// by its first byte, not known yet.
    detect: bool,
}

impl TcpSource {
    pub fn new(conn: Arc<TcpConn>, max_frame: usize) -> TcpSource {
        TcpSource {
            conn,
            reader: FrameReader::new(max_frame),
            linger_until: None,
            hello_by: None,
            counters: None,
            held: false,
            paused: Stall::default(),
            security: None,
            detect: false,
        }
    }

    /// An accepted connection: its first frame must be a Hello of the
    /// Hello's real size (`FrameReader::expecting_hello`), within
    /// [`HELLO_TIMEOUT`].
    pub fn accepted(
        conn: Arc<TcpConn>,
        max_frame: usize,
        counters: Arc<ListenerCounters>,
        security: Option<Arc<TransportSecurity>>,
    ) -> TcpSource {
        let detect = security.is_some() && conn.tls.get().is_none();
        TcpSource {
            security,
            detect,
            conn,
            reader: FrameReader::expecting_hello(max_frame),
            linger_until: None,
            hello_by: Some(Instant::now() + HELLO_TIMEOUT),
            counters: Some(counters),
            held: false,
            paused: Stall::default(),
        }
    }

    /// A kick with frames queued: write them, or let a batch linger.
    fn flush_kicked(&mut self) {
        // Batching connections queue frames and kick.
        if !self.conn.has_backlog() {
            return;
        }
        if self.conn.lingers() {
            // More frames are likely on their way: write them together.
            self.linger_until
                .get_or_insert_with(|| Instant::now() + LINGER);
            return;
        }
        self.linger_until = None;
        if self.conn.flush().is_err() {
            self.conn.mark_closed();
        }
    }

    /// Reads and dispatches one `read` at a time, up to the budget: false
    /// when the connection is finished; `more` when the budget ran out.
    fn read(&mut self, ctx: &mut dyn LoopContext, more: &mut bool) -> bool {
        if self.detect {
            // `permissive`: TLS if the writer starts a handshake, else plain.
            match tls::starts_with_tls(&self.conn.stream) {
                Ok(None) => return true,
                Ok(Some(is_tls)) => {
                    self.detect = false;
                    if is_tls {
                        let sec = self.security.as_ref().expect("detect implies security");
                        match TlsState::server(sec) {
                            Ok(t) => {
                                let _ = self.conn.tls.set(parking_lot::Mutex::new(t));
                            }
                            Err(_) => return false,
                        }
                    }
                }
                Err(_) => return false,
            }
        }
        let peer_ip = self.conn.peer.ip();
        let local_peer = peer_ip.is_loopback() || ctx.local_ips().contains(&peer_ip);
        let mut frames = Vec::new();
        let mut total = 0usize;
        let mut any = false;
        let mut ok = true;
        {
            let view: &dyn LoopContext = &*ctx;
            let same_clock =
                |id: ferry_wire::EndpointId| local_peer || view.same_clock(id.participant);
            let mut dctx = DispatchCtx {
                local: view.local(),
                same_clock: &same_clock,
                arrival_ns: 0,
                bound: None,
                origin: crate::transport::Origin::Network {
                    addr: self.conn.peer,
                    local: local_peer,
                },
                security: self.security.as_deref(),
                counters: self.counters.as_deref(),
            };
            while ok {
                if dctx.bound.is_none() {
                    if let Role::Incoming { bound } = &self.conn.role {
                        dctx.bound = bound.lock().clone();
                    }
                }
                if let Some(room) = dctx.bound.as_ref().and_then(|(r, _)| r.room()) {
                    let io = self.conn.io.clone();
                    if self.paused.full(room, move || io.kick()) {
                        self.held = true;
                        break;
                    }
                }
                let r = match self.conn.tls.get() {
                    Some(t) => self.reader.read_once_tls(t, &self.conn.stream, &mut frames),
                    None => self.reader.read_once(&self.conn.stream, &mut frames),
                };
                if !frames.is_empty() {
                    any = true;
                    dctx.arrival_ns = crate::stats::now_ns();
                }
                for f in frames.drain(..) {
                    if !dispatch(&self.conn, f, &mut dctx) {
                        ok = false;
                        break;
                    }
                }
                match r {
                    Ok(0) => break,
                    Ok(n) => {
                        total += n;
                        if total >= READ_BUDGET {
                            *more = true;
                            break;
                        }
                    }
                    Err(e) => {
                        if e.kind() == io::ErrorKind::InvalidData {
                            match (&self.counters, self.conn.peer_participant()) {
                                // A stranger's garbage: counted, not logged
                                // per connection (a flood would flood the log).
                                (Some(c), None) => {
                                    // Not TLS under `enforce`, another
                                    // CA, a tampered record: the handshake.
                                    ListenerCounters::count(match self.conn.tls.get() {
                                        Some(_) => &c.tls_refused,
                                        None => &c.bad_hello,
                                    });
                                    tracing::debug!(
                                        "closing connection from {}: {e}",
                                        self.conn.peer
                                    );
                                }
                                _ => tracing::warn!(
                                    "closing connection from {}: {e}",
                                    self.conn.peer
                                ),
                            }
                        }
                        ok = false;
                    }
                }
            }
        }
        if ok && any {
            if let Some(p) = self.conn.peer_participant() {
                ctx.alive(p);
            }
        }
        ok
    }
}

impl Source for TcpSource {
    fn fd(&self) -> RawFd {
        self.conn.stream.as_raw_fd()
    }

    fn ready(&mut self, ready: Readiness, ctx: &mut dyn LoopContext) -> Served {
        let mut ok = !self.conn.is_closed();
        let mut more = false;
        if ok && ready.writable {
            ok = self.conn.flush().is_ok();
        }
        if ok && ready.readable {
            ok = self.read(ctx, &mut more);
        }
        match (ok && !ready.error, more) {
            (false, _) => Served::Done,
            (true, true) => Served::More,
            (true, false) => Served::Idle,
        }
    }

    fn kicked(&mut self) -> bool {
        // Room freed in the bound reader's queue: read on.
        let resume = self.held && !self.paused.is_stalled();
        if resume {
            self.held = false;
        }
        self.flush_kicked();
        resume
    }

    fn has_timers(&self) -> bool {
        true
    }

    fn precise_timers(&self) -> bool {
        true
    }

    fn service(&mut self, now: Instant, _ctx: &mut dyn LoopContext) -> Option<Instant> {
        if let Some(by) = self.hello_by {
            if self.conn.peer_participant().is_some() {
                self.hello_by = None;
            } else if now >= by {
                tracing::debug!(
                    "closing connection from {}: no Hello within {HELLO_TIMEOUT:?}",
                    self.conn.peer
                );
                self.hello_by = None;
                if let Some(c) = &self.counters {
                    ListenerCounters::count(&c.no_hello);
                }
                self.conn.mark_closed();
                return None;
            }
        }
        let linger = match self.linger_until {
            Some(t) if t <= now => {
                self.linger_until = None;
                if self.conn.flush().is_err() {
                    self.conn.mark_closed();
                }
                None
            }
            other => other,
        };
        match (linger, self.hello_by) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }

    fn removed(&mut self, ctx: &mut dyn LoopContext) {
        on_closed(&self.conn);
        if let Role::Outgoing { writer, .. } = &self.conn.role {
            ctx.link_lost(*writer, self.conn.remote);
        }
    }

    fn shutdown(&mut self) {
        self.conn.mark_closed();
    }
}
