//! The TCP path: one socket per connection (so each connection can later get
//! its own priority), a fixed 32-byte frame header ([`ferry_wire::frame`]),
//! `TCP_NODELAY`. Writers write straight from the publishing thread when the
//! socket has room; what does not fit waits in a per-connection backlog that
//! the I/O thread flushes when the socket becomes writable. A publisher
//! faster than 50 k frames/s batches: frames queue, the publishing thread
//! writes each full batch (256 frames) at once, and the I/O
//! thread writes what is left 100 µs after the batch began (`source::LINGER`).
//! The backlog obeys the writer's QoS: keep_last drops the oldest unsent
//! samples, keep_all blocks the publisher up to a bound.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_wire::frame::{FrameHeader, FrameKind, Hello, FLAG_ERROR, HEADER_LEN};
use ferry_wire::{EndpointId, History, Locator, Reliability, TransportKind};
use parking_lot::{Condvar, Mutex};

mod listener;
mod reader;
mod source;
pub(crate) mod tls;
pub(crate) use listener::ListenerSource;
pub(crate) use reader::{FrameReader, RawFrame};
pub(crate) use source::TcpSource;

use super::{
    Capabilities, ConnectError, ConnectRequest, InFrame, InboundConn, Inbox, Link, OutFrame,
    PeerInfo, Replier, ReplyBody, ReplySink, SendError, Transport,
};
use crate::host::Interface;
use crate::message::Payload;
use crate::priority::{Applied, Lane, LaneTurn, Packets, Priority, PriorityError, ThreadChange};
use crate::reactor::IoHandle;
use crate::stats::ConnStats;

/// Queue policy of a connection's backlog.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueuePolicy {
    /// Most unsent frames kept.
    pub depth: usize,
    /// keep_all + reliable: block the writer up to this long instead of dropping.
    pub block: Option<Duration>,
}

struct Pending {
    header: [u8; HEADER_LEN],
    body: Bytes,
    sent: usize,
}

impl Pending {
    fn len(&self) -> usize {
        HEADER_LEN + self.body.len()
    }
}

/// The reader an incoming connection delivers to, and its end of it.
pub(crate) type BoundReader = (Arc<dyn Inbox>, Arc<InboundConn>);

/// What the connection is for, decided when it is made.
pub(crate) enum Role {
    /// We connected (publisher or client); replies may come back.
    Outgoing {
        writer: EndpointId,
        reply_sink: Option<Arc<dyn ReplySink>>,
    },
    /// A peer connected to us; bound to a reader by its Hello frame.
    Incoming { bound: Mutex<Option<BoundReader>> },
}

/// One TCP connection, shared by the writing threads and the I/O thread.
/// Frames waiting for the socket, and the publish-rate estimate that
/// decides between writing directly and batching.
struct OutQueue {
    frames: VecDeque<Pending>,
    /// Bytes of `frames` not written yet.
    queued_bytes: usize,
    /// Source stamp of the previous frame (wall clock, ns; 0 = none): the
    /// publisher's one clock read per sample also drives the rate estimate.
    last_send: u64,
    /// Reused buffer that gathers small frames into one contiguous write.
    scratch: Vec<u8>,
    /// EWMA of the interval between frames, ns.
    interval_ns: f64,
}

impl OutQueue {
    /// Queues a frame (its bytes not yet written count as queued).
    fn push(&mut self, p: Pending) {
        self.queued_bytes += p.len() - p.sent;
        self.frames.push_back(p);
    }

    /// As many frames as one coalesced write takes (or the queue policy's
    /// depth): the publishing thread writes them itself.
    fn full(&self, depth: usize) -> bool {
        self.frames.len() >= depth.min(COALESCE_FRAMES)
    }
}

/// Below this interval between frames (> 50 k frames/s) a connection
/// batches: frames queue, the publishing thread writes full batches and the
/// I/O thread the rest after a linger. Above it every frame is written at
/// once from the publishing thread.
const BATCH_BELOW_NS: f64 = 20_000.0;
/// Most frames in one `writev` (two iovecs each).
const BATCH_FRAMES: usize = 64;
/// Frames with bodies up to this size are copied into the coalesced write.
const COALESCE_MAX: usize = 2048;
/// Most frames in one coalesced write, and the batch the publishing thread
/// writes itself when it fills.
const COALESCE_FRAMES: usize = 256;
/// A coalesced write stops growing past this many bytes.
const COALESCE_BYTES: usize = 64 * 1024;

pub(crate) struct TcpConn {
    pub stream: mio::net::TcpStream,
    out: Mutex<OutQueue>,
    pub(super) io: IoHandle,
    drained: Condvar,
    closed: AtomicBool,
    pub stats: Arc<ConnStats>,
    pub role: Role,
    pub peer: SocketAddr,
    pub remote: EndpointId,
    policy: QueuePolicy,
    /// The connection's priority (writer side).
    priority: Mutex<Priority>,
    /// A dedicated sender thread serves this connection (thread priority).
    lane: Mutex<Option<Arc<Lane>>>,
    /// `lane` is set (read on the data path without taking `lane`).
    lane_active: AtomicBool,
    /// TLS, when the connection is protected: set before the first byte
    /// of a frame crosses it.
    pub tls: OnceLock<Mutex<tls::TlsState>>,
}

impl TcpConn {
    pub fn new(
        stream: mio::net::TcpStream,
        peer: SocketAddr,
        remote: EndpointId,
        role: Role,
        policy: QueuePolicy,
        io: IoHandle,
    ) -> Self {
        TcpConn {
            stream,
            out: Mutex::new(OutQueue {
                frames: VecDeque::new(),
                queued_bytes: 0,
                last_send: 0,
                scratch: Vec::new(),
                interval_ns: f64::MAX,
            }),
            io,
            drained: Condvar::new(),
            closed: AtomicBool::new(false),
            stats: Arc::new(ConnStats::new()),
            role,
            peer,
            remote,
            policy,
            priority: Mutex::new(Priority::default()),
            lane: Mutex::new(None),
            lane_active: AtomicBool::new(false),
            tls: OnceLock::new(),
        }
    }

    /// Writes plaintext bytes: to the socket, or through TLS.
    fn wire_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self.tls.get() {
            Some(t) => tls::write_vectored(t, &self.stream, bufs),
            None => (&self.stream).write_vectored(bufs),
        }
    }

    /// The connection's protection, for its stats: `tls` with the suite
    /// and the key updates this side asked for, or `none`.
    pub fn protection(&self) -> String {
        match self.tls.get() {
            Some(t) => t.lock().describe(),
            None => "none".into(),
        }
    }

    /// Applies a priority to the live connection: TOS + socket priority at
    /// once (the next segment carries them), and a dedicated sender thread
    /// started, re-prioritized or stopped.
    pub fn set_priority(
        self: &Arc<Self>,
        p: Priority,
        lane_limit: usize,
    ) -> Result<Applied, PriorityError> {
        // The thread first: when no thread is left, nothing has changed.
        let mut lane = self.lane.lock();
        let thread = match (p.thread, lane.as_ref()) {
            (Some(t), Some(l)) => {
                l.set_policy(t);
                ThreadChange::Changed(t)
            }
            (Some(t), None) => {
                let conn = Arc::downgrade(self);
                let l = Lane::start(
                    t,
                    lane_limit,
                    format!("{} → {}", self.peer, self.remote),
                    move || conn.upgrade().map_or(LaneTurn::Done, |c| c.lane_turn()),
                )?;
                *lane = Some(l);
                self.lane_active.store(true, Ordering::Release);
                ThreadChange::Started(t)
            }
            (None, Some(l)) => {
                l.stop();
                self.lane_active.store(false, Ordering::Release);
                *lane = None;
                // Frames it left behind go out through the I/O thread.
                self.io.kick();
                ThreadChange::Stopped
            }
            (None, None) => ThreadChange::Unchanged,
        };
        drop(lane);
        crate::priority::apply_to_socket(socket2::SockRef::from(&self.stream), p.class).map_err(
            |source| PriorityError::Socket {
                transport: "tcp",
                source,
            },
        )?;
        *self.priority.lock() = p;
        Ok(Applied {
            packets: Packets::Socket(p.class),
            thread,
        })
    }

    /// The connection's priority.
    pub fn priority(&self) -> Priority {
        *self.priority.lock()
    }

    /// One turn of the lane thread: write whatever is queued.
    fn lane_turn(&self) -> LaneTurn {
        if self.is_closed() {
            return LaneTurn::Done;
        }
        let mut out = self.out.lock();
        if self.flush_queue(&mut out).is_err() {
            drop(out);
            self.mark_closed();
            return LaneTurn::Done;
        }
        let full = !out.frames.is_empty();
        drop(out);
        self.drained.notify_all();
        if full {
            // Socket buffer full: retry soon (the I/O thread's writable
            // event may get there first).
            LaneTurn::After(Duration::from_micros(200))
        } else {
            LaneTurn::Idle
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The runtime at the other end, once known.
    pub fn peer_participant(&self) -> Option<ferry_wire::ParticipantId> {
        match &self.role {
            Role::Outgoing { .. } => Some(self.remote.participant),
            Role::Incoming { bound } => bound.lock().as_ref().map(|(_, c)| c.remote.participant),
        }
    }

    /// Marks closed, wakes blocked writers, tells the other side.
    pub fn mark_closed(&self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
            self.drained.notify_all();
        }
    }

    /// Queues one frame, writing directly when the backlog is empty.
    pub fn send_frame(&self, header: FrameHeader, body: Bytes) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        let now = match header.stamp_ns {
            0 => crate::stats::now_ns(),
            t => t,
        };
        let lane = self.lane_active.load(Ordering::Acquire);
        let mut out = self.out.lock();
        if out.last_send != 0 {
            let dt = now.saturating_sub(out.last_send) as f64;
            out.interval_ns = if out.interval_ns == f64::MAX {
                dt
            } else {
                0.9 * out.interval_ns + 0.1 * dt
            };
        }
        out.last_send = now;
        let batching = out.interval_ns < BATCH_BELOW_NS;
        if batching && !lane && out.full(self.policy.depth) {
            // A full batch: write it now rather than let the queue policy
            // drop or block on frames the socket would take at once.
            if self.flush_queue(&mut out).is_err() {
                drop(out);
                self.mark_closed();
                return Err(SendError::Closed);
            }
        }
        if out.frames.len() >= self.policy.depth {
            match self.policy.block {
                // keep_all: wait for the I/O thread to drain — unless we are
                // the I/O thread (a callback publishing), which would wait
                // for itself: flush what the socket takes and otherwise fail.
                Some(_) if crate::reactor::on_io_thread() => {
                    drop(out);
                    let _ = self.flush();
                    out = self.out.lock();
                    if out.frames.len() >= self.policy.depth {
                        return Err(SendError::Blocked(Duration::ZERO));
                    }
                }
                Some(limit) => {
                    let deadline = Instant::now() + limit;
                    while out.frames.len() >= self.policy.depth && !self.is_closed() {
                        if self.drained.wait_until(&mut out, deadline).timed_out() {
                            return Err(SendError::Blocked(limit));
                        }
                    }
                    if self.is_closed() {
                        return Err(SendError::Closed);
                    }
                }
                None => {
                    // keep_last: drop the oldest frame that has not started going out.
                    let idx = usize::from(out.frames.front().is_some_and(|p| p.sent > 0));
                    if let Some(p) = out.frames.remove(idx) {
                        out.queued_bytes -= p.len() - p.sent;
                        self.stats.drops.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        if lane {
            // The dedicated sender thread writes.
            out.push(Pending {
                header: header.encode(),
                body,
                sent: 0,
            });
            drop(out);
            match self.lane.lock().as_ref() {
                Some(l) => l.wake(),
                // The lane stopped meanwhile: the I/O thread sends it.
                None => self.io.kick(),
            }
            return Ok(());
        }
        // An empty backlog means nothing is in flight and no writable edge is
        // pending: write directly (also after waking from a drained backlog,
        // or the frame would wait for an edge that never comes) — unless the
        // publisher is so fast that batching beats a syscall per frame.
        if out.frames.is_empty() && !batching {
            let h = header.encode();
            match self.write_frame_from(&h, &body, 0) {
                Ok(n) if n == HEADER_LEN + body.len() => {}
                Ok(n) => out.push(Pending {
                    header: h,
                    body,
                    sent: n,
                }),
                Err(_) => {
                    drop(out);
                    self.mark_closed();
                    return Err(SendError::Closed);
                }
            }
            return Ok(());
        }
        let was_empty = out.frames.is_empty();
        let was_below = out.queued_bytes < COALESCE_BYTES;
        out.push(Pending {
            header: header.encode(),
            body,
            sent: 0,
        });
        let now_above = out.queued_bytes >= COALESCE_BYTES;
        drop(out);
        if was_empty || (was_below && now_above) {
            // Batch mode: the I/O thread writes what is queued — at once
            // from 64 KiB on (a large frame; the I/O thread's write overlaps
            // the publisher's next sample), else after a linger
            // (`source::LINGER`) unless the publisher fills a batch first.
            self.io.kick();
        }
        Ok(())
    }

    /// Whether queued frames should wait for more (the I/O thread's
    /// linger): the publisher is fast enough that frames batch, and less
    /// than one coalesced write (64 KiB) waits.
    pub fn lingers(&self) -> bool {
        let out = self.out.lock();
        out.interval_ns < BATCH_BELOW_NS && out.queued_bytes < COALESCE_BYTES
    }

    /// True when frames (or TLS records) wait for the socket.
    pub fn has_backlog(&self) -> bool {
        !self.out.lock().frames.is_empty()
            || self.tls.get().is_some_and(|t| t.lock().conn.wants_write())
    }

    /// Flushes the backlog (I/O thread, on writable). Err = connection broken.
    pub fn flush(&self) -> io::Result<()> {
        let r = self.flush_queue(&mut self.out.lock());
        self.drained.notify_all();
        r
    }

    /// Writes queued frames until done or `WouldBlock`: runs of small frames
    /// are copied into one contiguous buffer and written with one `write`
    /// (many tiny iovecs cost the kernel more than the copy); large frames
    /// go out by `writev` straight from their buffers.
    fn flush_queue(&self, out: &mut OutQueue) -> io::Result<()> {
        if let Some(t) = self.tls.get() {
            // Records rustls holds go first (frames after them).
            if !tls::push_records(&mut t.lock().conn, &self.stream)? {
                return Ok(());
            }
        }
        while !out.frames.is_empty() {
            let OutQueue {
                frames, scratch, ..
            } = out;
            scratch.clear();
            for p in frames.iter().take(COALESCE_FRAMES) {
                if p.body.len() > COALESCE_MAX || scratch.len() >= COALESCE_BYTES {
                    break;
                }
                if p.sent < HEADER_LEN {
                    scratch.extend_from_slice(&p.header[p.sent..]);
                    scratch.extend_from_slice(&p.body);
                } else {
                    scratch.extend_from_slice(&p.body[p.sent - HEADER_LEN..]);
                }
            }
            let r = if !scratch.is_empty() {
                self.wire_write(&[IoSlice::new(scratch)])
            } else {
                let mut iov: Vec<IoSlice<'_>> = Vec::with_capacity(2 * BATCH_FRAMES);
                for p in frames.iter().take(BATCH_FRAMES) {
                    if p.sent < HEADER_LEN {
                        iov.push(IoSlice::new(&p.header[p.sent..]));
                        iov.push(IoSlice::new(&p.body));
                    } else {
                        iov.push(IoSlice::new(&p.body[p.sent - HEADER_LEN..]));
                    }
                }
                self.wire_write(&iov)
            };
            let n = match r {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            // Consume n bytes across the frames.
            let mut left = n;
            while left > 0 {
                let p = out.frames.front_mut().expect("wrote more than queued");
                let rest = p.len() - p.sent;
                if left >= rest {
                    left -= rest;
                    out.queued_bytes -= rest;
                    out.frames.pop_front();
                } else {
                    p.sent += left;
                    out.queued_bytes -= left;
                    left = 0;
                }
            }
        }
        Ok(())
    }
}

impl TcpConn {
    /// Writes `header ++ body` starting at offset `from`; returns the new
    /// offset (stops early on `WouldBlock`).
    fn write_frame_from(
        &self,
        header: &[u8; HEADER_LEN],
        body: &[u8],
        mut from: usize,
    ) -> io::Result<usize> {
        let total = HEADER_LEN + body.len();
        while from < total {
            let r = if from < HEADER_LEN {
                self.wire_write(&[IoSlice::new(&header[from..]), IoSlice::new(body)])
            } else {
                self.wire_write(&[IoSlice::new(&body[from - HEADER_LEN..])])
            };
            match r {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => from += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(from)
    }
}

/// How long one connect attempt may take: the kernel resends a lost SYN
/// after 1 s and 3 s, so on a lossy wireless link a 1 s bound fails on the
/// first lost SYN (connects run on their own thread: nothing waits on this).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// What the I/O thread knows while it dispatches the frames of one read.
pub(crate) struct DispatchCtx<'a> {
    /// This runtime.
    pub local: ferry_wire::ParticipantId,
    /// Whether a remote endpoint's stamps are on our clock.
    pub same_clock: &'a dyn Fn(EndpointId) -> bool,
    /// Local wall-clock time of the read the frames came from, ns.
    pub arrival_ns: u64,
    /// The reader this connection is bound to, looked up once per read.
    pub bound: Option<BoundReader>,
    /// Where the connection comes from (its socket's peer address).
    pub origin: crate::transport::Origin,
    /// The runtime's identity (security on).
    pub security: Option<&'a super::TransportSecurity>,
    /// The listener's counters (an accepted connection).
    pub counters: Option<&'a ferry_transport::stats::ListenerCounters>,
}

/// Handles one frame from a connection (I/O thread). Returns false if the
/// frame was invalid for this connection and it must be closed.
pub(crate) fn dispatch(conn: &Arc<TcpConn>, frame: RawFrame, ctx: &mut DispatchCtx<'_>) -> bool {
    let local = ctx.local;
    let same_clock = ctx.same_clock;
    match (&conn.role, frame.header.kind) {
        (Role::Incoming { bound }, FrameKind::Hello) => {
            let Ok(hello) = Hello::parse(&frame.body) else {
                return false;
            };
            if hello.to.participant != local || bound.lock().is_some() {
                return false;
            }
            let Some(reader) = super::intra::lookup_reader(hello.to) else {
                tracing::debug!(
                    "connection from {} for unknown reader {}",
                    conn.peer,
                    hello.to
                );
                return false;
            };
            if !writer_may(conn, &hello, reader.as_ref(), ctx) {
                return false;
            }
            let replier = (hello.from_kind == ferry_wire::EndpointKind::Client)
                .then(|| Arc::new(TcpReplier(Arc::downgrade(conn))) as Arc<dyn Replier>);
            let inbound = Arc::new(InboundConn {
                remote: hello.from,
                origin: ctx.origin,
                transport: TransportKind::Tcp,
                locator: format!("tcp/{}", conn.peer),
                stats: conn.stats.clone(),
                replier,
                same_clock: same_clock(hello.from),
                seqs: Default::default(),
                identity: conn.tls.get().and_then(|t| t.lock().peer.clone()),
            });
            reader.attach(inbound.clone());
            *bound.lock() = Some((reader, inbound));
            ctx.bound = None;
            true
        }
        (Role::Incoming { bound }, FrameKind::Data | FrameKind::Request) => {
            if ctx.bound.is_none() {
                ctx.bound = bound.lock().clone();
            }
            let Some((reader, inbound)) = &ctx.bound else {
                return false; // data before hello
            };
            inbound.stats.message(frame.body.len());
            let body = frame.body;
            let bytes = move || Ok(body.clone());
            reader.deliver(
                inbound,
                &InFrame {
                    kind: frame.header.kind,
                    seq: frame.header.seq,
                    stamp_ns: frame.header.stamp_ns,
                    arrival_ns: ctx.arrival_ns,
                    payload: Payload {
                        typed: None,
                        bytes: &bytes,
                    },
                },
            );
            true
        }
        (
            Role::Outgoing {
                reply_sink: Some(sink),
                ..
            },
            FrameKind::Reply,
        ) => {
            if frame.header.flags & FLAG_ERROR != 0 {
                let msg = String::from_utf8_lossy(&frame.body).into_owned();
                sink.on_reply(frame.header.seq, Err(msg));
            } else {
                let body = frame.body;
                let bytes = move || Ok(body.clone());
                sink.on_reply(
                    frame.header.seq,
                    Ok(Payload {
                        typed: None,
                        bytes: &bytes,
                    }),
                );
            }
            true
        }
        (_, FrameKind::Close) => false,
        _ => false,
    }
}

/// Security on: whether the writer at the other end of `conn` may write
/// `name` (its certificate, proven by the TLS handshake, and its grants).
/// A plain connection passes only under `permissive`.
fn writer_may(conn: &TcpConn, hello: &Hello, reader: &dyn Inbox, ctx: &DispatchCtx<'_>) -> bool {
    let Some(sec) = ctx.security else {
        return true;
    };
    // What the reader takes in decides the grant, not what the writer says
    // it is (a Hello naming itself a client must not carry samples past a
    // `call` grant): and a Hello that does not fit the reader is refused.
    let (kind, action) = ferry_transport::secure::writer_grant(reader.carries());
    let name = reader.name();
    let count =
        |c: fn(&ferry_transport::stats::ListenerCounters) -> &std::sync::atomic::AtomicU64| {
            if let Some(k) = ctx.counters {
                ferry_transport::stats::ListenerCounters::count(c(k));
            }
        };
    let Some(t) = conn.tls.get() else {
        if sec.enforce {
            count(|k| &k.tls_refused);
            return false;
        }
        return true;
    };
    let mut t = t.lock();
    let peer = match ferry_security::tls::peer_identity(&t.conn, &sec.identity, sec.domain) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!("closing connection from {}: {e}", conn.peer);
            count(|k| &k.tls_refused);
            return false;
        }
    };
    if hello.from_kind != kind || !peer.allows(action, name) {
        tracing::warn!(
            "closing connection from {}: identity {} may not {action} `{name}`",
            conn.peer,
            peer.enclave()
        );
        count(|k| &k.denied);
        return false;
    }
    if !sec.speaks_for(hello.from.participant, &peer) {
        tracing::warn!(
            "closing connection from {}: its certificate ({}) is not the one participant {} proved in discovery",
            conn.peer,
            peer.enclave(),
            hello.from.participant
        );
        count(|k| &k.tls_refused);
        return false;
    }
    t.peer = Some(Arc::new(peer));
    true
}

/// Called by the I/O thread when a connection ends.
pub(crate) fn on_closed(conn: &TcpConn) {
    conn.mark_closed();
    match &conn.role {
        Role::Incoming { bound } => {
            if let Some((reader, inbound)) = bound.lock().take() {
                reader.detach(&inbound);
            }
        }
        Role::Outgoing { reply_sink, .. } => {
            if let Some(s) = reply_sink {
                s.on_link_lost(conn.remote);
            }
        }
    }
}

struct TcpReplier(Weak<TcpConn>);

impl Replier for TcpReplier {
    fn reply(&self, request_id: u64, result: Result<ReplyBody, String>) {
        let Some(conn) = self.0.upgrade() else { return };
        let (flags, body) = match result.and_then(|b| (b.encode)().map_err(|e| e.to_string())) {
            Ok(b) => (0, b),
            Err(e) => (FLAG_ERROR, Bytes::from(e.into_bytes())),
        };
        let h = FrameHeader {
            kind: FrameKind::Reply,
            flags,
            body_len: body.len() as u32,
            seq: request_id,
            stamp_ns: crate::stats::now_ns(),
        };
        let _ = conn.send_frame(h, body);
    }
}

/// Writer end of a TCP connection.
struct TcpLink {
    conn: Arc<TcpConn>,
    remote: EndpointId,
    lane_limit: usize,
}

impl Link for TcpLink {
    fn transport(&self) -> TransportKind {
        TransportKind::Tcp
    }
    fn remote(&self) -> EndpointId {
        self.remote
    }
    fn locator(&self) -> String {
        format!("tcp/{}", self.conn.peer)
    }
    fn protection(&self) -> String {
        self.conn.protection()
    }
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        let body = (frame.payload.bytes)()?;
        let len = body.len();
        let h = FrameHeader {
            kind: frame.kind,
            flags: 0,
            body_len: len as u32,
            seq: frame.seq,
            stamp_ns: frame.stamp_ns,
        };
        self.conn.send_frame(h, body)?;
        self.conn.stats.message(len);
        Ok(())
    }
    fn stats(&self) -> &ConnStats {
        &self.conn.stats
    }
    fn is_closed(&self) -> bool {
        self.conn.is_closed()
    }
    fn close(&self) {
        self.conn.mark_closed();
    }
    fn priority(&self) -> Priority {
        self.conn.priority()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        self.conn.set_priority(p, self.lane_limit)
    }
}

/// The TCP transport of one runtime.
pub struct TcpTransport {
    locators: Vec<Locator>,
    io: IoHandle,
    max_frame: usize,
    keep_all_block: Duration,
    interfaces: Vec<Interface>,
    priority_threads: usize,
    /// The runtime's identity (security on): connections speak TLS.
    security: Option<Arc<super::TransportSecurity>>,
}

impl TcpTransport {
    pub(crate) fn new(
        locators: Vec<Locator>,
        io: IoHandle,
        max_frame: usize,
        keep_all_block: Duration,
        interfaces: Vec<Interface>,
        priority_threads: usize,
        security: Option<Arc<super::TransportSecurity>>,
    ) -> Self {
        TcpTransport {
            locators,
            io,
            max_frame,
            keep_all_block,
            interfaces,
            priority_threads,
            security,
        }
    }

    /// The peer's TCP addresses, best first: loopback when we share a network
    /// stack, then addresses on one of our subnets, then the rest.
    fn candidates(&self, local: &PeerInfo, remote: &PeerInfo) -> Vec<SocketAddr> {
        super::rank_addresses(&self.interfaces, TransportKind::Tcp, local, remote)
    }
}

/// Starts TCP: a listener in the I/O loop, announced on every address.
pub(crate) fn start(
    ctx: &super::StartContext<'_>,
) -> Result<Option<Arc<dyn Transport>>, crate::error::BuildError> {
    let (listener, port) = ListenerSource::bind(
        ctx.bind_ip,
        ctx.io.clone(),
        ctx.cfg.max_frame_bytes,
        ctx.listener_counters.clone(),
        ctx.security.cloned(),
    )
    .map_err(|source| crate::error::BuildError::Io {
        what: "TCP listener".into(),
        source,
    })?;
    ctx.io.add(Box::new(listener));
    let locators = ctx
        .announce_ips
        .iter()
        .map(|ip| Locator::socket(TransportKind::Tcp, (*ip, port).into()))
        .collect();
    Ok(Some(Arc::new(TcpTransport::new(
        locators,
        ctx.io.clone(),
        ctx.cfg.max_frame_bytes,
        Duration::from_millis(ctx.cfg.keep_all_block_ms),
        ctx.ifaces.to_vec(),
        ctx.cfg.priority_threads,
        ctx.security.cloned(),
    ))))
}

impl Transport for TcpTransport {
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
    fn kind(&self) -> TransportKind {
        TransportKind::Tcp
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            zero_copy: false,
            mtu: None,
            request_reply: true,
        }
    }
    fn locators(&self) -> Vec<Locator> {
        self.locators.clone()
    }
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        !self.candidates(local, remote).is_empty()
    }
    fn connect(&self, req: ConnectRequest) -> Result<Arc<dyn Link>, ConnectError> {
        let local = PeerInfo {
            participant: req.writer.participant,
            host_id: crate::host::host_id(),
            net_id: crate::host::net_id(),
            pid: std::process::id(),
            locators: Vec::new(),
            direct: true,
            secured: false,
        };
        let addrs = self.candidates(&local, &req.remote);
        let mut last = String::from("no tcp locator");
        // TLS under `enforce`, and with peers that run security.
        let secure = self
            .security
            .as_ref()
            .filter(|s| s.enforce || req.remote.secured);
        for addr in &addrs {
            match StdTcpStream::connect_timeout(addr, CONNECT_TIMEOUT) {
                Ok(s) => {
                    let mut tls = None;
                    if let Some(sec) = secure {
                        // The reader's side must be allowed to read what we
                        // write (or to serve what we call).
                        let action = match req.writer_kind {
                            ferry_wire::EndpointKind::Client => ferry_security::Action::Serve,
                            _ => ferry_security::Action::Subscribe,
                        };
                        match tls::client_handshake(
                            sec,
                            &s,
                            action,
                            &req.topic,
                            req.reader.participant,
                        ) {
                            Ok(t) => tls = Some(t),
                            Err(cause) if cause.contains("may not") => {
                                return Err(ConnectError::Refused {
                                    peer: req.remote.participant,
                                    transport: TransportKind::Tcp,
                                    cause,
                                })
                            }
                            Err(e) => {
                                last = e;
                                continue;
                            }
                        }
                    }
                    let hello = Hello {
                        from: req.writer,
                        from_kind: req.writer_kind,
                        to: req.reader,
                    }
                    .encode();
                    let h = FrameHeader {
                        kind: FrameKind::Hello,
                        flags: 0,
                        body_len: hello.len() as u32,
                        seq: 0,
                        stamp_ns: 0,
                    }
                    .encode();
                    let setup = (|| -> io::Result<()> {
                        s.set_nodelay(true)?;
                        match &mut tls {
                            Some(t) => tls::write_blocking(t, &s, &[&h, &hello])?,
                            None => {
                                let mut s2 = &s;
                                s2.write_all(&h)?;
                                s2.write_all(&hello)?;
                            }
                        }
                        s.set_read_timeout(None)?;
                        s.set_write_timeout(None)?;
                        s.set_nonblocking(true)
                    })();
                    if let Err(e) = setup {
                        last = e.to_string();
                        continue;
                    }
                    let policy = QueuePolicy {
                        depth: req.qos.history.depth(1024),
                        block: (req.qos.reliability == Reliability::Reliable
                            && req.qos.history == History::KeepAll)
                            .then_some(self.keep_all_block),
                    };
                    let conn = Arc::new(TcpConn::new(
                        mio::net::TcpStream::from_std(s),
                        *addr,
                        req.reader,
                        Role::Outgoing {
                            writer: req.writer,
                            reply_sink: req.reply_sink.clone(),
                        },
                        policy,
                        self.io.clone(),
                    ));
                    if let Some(t) = tls {
                        let _ = conn.tls.set(Mutex::new(t));
                    }
                    self.io
                        .add(Box::new(TcpSource::new(conn.clone(), self.max_frame)));
                    return Ok(Arc::new(TcpLink {
                        conn,
                        remote: req.reader,
                        lane_limit: self.priority_threads,
                    }));
                }
                Err(e) => last = e.to_string(),
            }
        }
        let _ = self.max_frame;
        Err(ConnectError::Unreachable {
            peer: req.remote.participant,
            tried: addrs
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            last,
        })
    }
}
