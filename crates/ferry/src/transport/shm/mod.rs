//! Shared-memory transport: pairs on the same host in different processes.
//!
//! Built on `ferry-shm` (segments, slot pool, rings, doorbells). Each runtime
//! has a **control socket** `/dev/shm/ferry.s.<pidns>.<pid>.<start>.<participant>`
//! (a Unix stream socket, announced as locator `shm/<name>`) and a
//! **doorbell** segment of the same tag. A writer connecting to a reader:
//! 1. takes its pool (one per writer endpoint, shared by its connections)
//!    and creates a connection segment with rings sized from the QoS;
//! 2. connects to the reader runtime's control socket, sends an `Attach`
//!    (writer, reader, connection segment, data prefix:
//!    `ferry_wire::shm`, a checked binary format), rings the doorbell and
//!    waits for `Accepted` (or `Refused` with a typed reason);
//! 3. keeps the socket open: it is the liveness of the pair. Either side
//!    seeing it close (a clean exit or `kill -9`) ends the connection,
//!    takes back the slots the reader held and sweeps the dead process's
//!    segments at once.
//!
//! Sending writes the sample once into a slot (shared by all of the
//! writer's shared-memory connections for that sample), queues its id on
//! the connection and rings the doorbell. The reader runtime's `ferry-shm`
//! thread drains every connection and delivers samples as `Bytes` that
//! point into the writer's read-only mapping; the slot returns when the
//! last of them drops. When every ring is empty it polls a little longer
//! (an adaptive window, `shm_spin_us`: kept while samples keep coming
//! within it, closed for streams that come further apart) and then sleeps
//! on the doorbell (futex); with `shm_busy_poll` it never sleeps.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferry_shm::{Doorbell, Published, Writer, WriterConn};
use ferry_wire::frame::{Envelope, EnvelopeKind, FrameKind};
use ferry_wire::shm::{read_message, Attach, Control, RefuseReason};
use ferry_wire::WireError;
use ferry_wire::{
    EndpointId, EndpointKind, History, Locator, ParticipantId, Reliability, TransportKind,
};
use parking_lot::Mutex;

use super::{
    Capabilities, ConnectError, ConnectRequest, Link, OutFrame, PeerInfo, SendError, Transport,
};
use crate::priority::{Applied, Packets, Priority, PriorityError};
use crate::stats::ConnStats;

mod receiving;
mod reply;

pub(crate) use receiving::Wake;
use receiving::{Inbound, Receiving};

/// How long a writer waits for the reader runtime to accept a connection.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the delivery thread looks for new and closed connections
/// while idle.
const HOUSEKEEPING: Duration = Duration::from_millis(50);

fn path_of(name: &str) -> String {
    format!("{}/{name}", ferry_shm::segment::SHM_DIR)
}

fn bell_of(socket: &str) -> Option<String> {
    socket
        .strip_prefix("ferry.s.")
        .map(|rest| format!("ferry.b.{rest}"))
}

/// Whether the peer closed `stream` (EOF or error), without blocking. The
/// peer never writes after the handshake, so readable means closed.
fn hung_up(stream: &UnixStream) -> bool {
    let mut b = [0u8; 1];
    // SAFETY: a non-blocking peek into a live one-byte buffer.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            b.as_mut_ptr() as *mut libc::c_void,
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock;
    }
    n == 0
}

/// A writer endpoint's pool as its publisher holds it.
pub(crate) struct ShmWriter(WriterPool);

impl ShmWriter {
    /// Lends a slot of at least `len` bytes, to be filled in place and then
    /// [`ShmLoan::stage`]d.
    pub(crate) fn loan(&self, len: usize) -> Result<ShmLoan, ferry_shm::PoolError> {
        Ok(ShmLoan {
            loan: self.0.writer.loan(len)?,
            last: self.0.last.clone(),
        })
    }
}

/// A slot lent from a writer's pool ([`ShmWriter::loan`]).
pub(crate) struct ShmLoan {
    loan: ferry_shm::Loan,
    last: Arc<Mutex<Option<LastSample>>>,
}

impl ShmLoan {
    /// The slot's bytes (its full capacity).
    pub(crate) fn as_slice(&self) -> &[u8] {
        self.loan.as_slice()
    }

    /// The slot's bytes, writable in place.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        self.loan.as_mut_slice()
    }

    /// Makes the first `len` bytes the slot that sample `seq` goes out in
    /// on every shared-memory link of the writer (no copy), and returns
    /// them as bytes (a view of the slot) for the writer's other paths.
    pub(crate) fn stage(self, seq: u64, len: usize) -> Result<Bytes, ferry_shm::PoolError> {
        let p = self.loan.commit(len)?;
        Ok(stage(&mut self.last.lock(), seq, p).1)
    }
}

/// Makes `p` the writer's last sample, `seq`, that every shared-memory link
/// sends: its slot id and the bytes that hold it.
fn stage(last: &mut Option<LastSample>, seq: u64, p: Published) -> (u64, Bytes) {
    let slot = p.slot();
    let bytes = Bytes::from_owner(p);
    *last = Some((seq, slot, bytes.clone()));
    (slot, bytes)
}

/// A sample's sequence number, its slot, and its bytes (which hold the
/// slot: `Bytes::from_owner` of the `Published`).
type LastSample = (u64, u64, Bytes);

/// A writer endpoint's pool and the sample last written into it (shared by
/// its connections, so a sample is written once for all readers).
#[derive(Clone)]
struct WriterPool {
    writer: Writer,
    last: Arc<Mutex<Option<LastSample>>>,
}

/// Connections that ended by themselves (reader gone, shared memory full),
/// for the runtime to forget so the pair reconnects.
type LostLinks = Arc<Mutex<Vec<(EndpointId, EndpointId)>>>;

/// The shared-memory transport of one runtime.
pub struct ShmTransport {
    receiving: Arc<Receiving>,
    thread: Mutex<Option<std::thread::JoinHandle<Vec<Inbound>>>>,
    writers: Mutex<HashMap<EndpointId, WriterPool>>,
    budget: usize,
    keep_all_block: Duration,
    /// Shared memory failed here (full, refused): automatic selection stops
    /// choosing it, so pairs reconnect over the network.
    degraded: Arc<AtomicBool>,
    lost: LostLinks,
}

impl ShmTransport {
    /// Starts the transport: sweeps stale segments, creates the doorbell
    /// and control socket, starts the delivery thread. An error means no
    /// shared memory here (the runtime falls back to the network).
    pub(crate) fn start(
        local: ParticipantId,
        wake: Wake,
        budget: usize,
        keep_all_block: Duration,
        security: Option<Arc<crate::transport::TransportSecurity>>,
        counters: Arc<ferry_transport::stats::ListenerCounters>,
    ) -> Result<Arc<ShmTransport>, ferry_shm::ShmError> {
        let swept = ferry_shm::sweep_stale();
        if !swept.removed.is_empty() {
            tracing::info!(
                "removed {} shared-memory segments of processes that died",
                swept.removed.len()
            );
        }
        let tag = format!("{local}");
        let bell = Doorbell::create(&tag)?;
        let socket_name = ferry_shm::segment::name('s', &tag);
        let path = path_of(&socket_name);
        let unavailable = |e: std::io::Error| ferry_shm::ShmError::Unavailable {
            name: socket_name.clone(),
            source: e,
        };
        let listener = UnixListener::bind(&path).map_err(unavailable)?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
        listener.set_nonblocking(true).map_err(unavailable)?;
        let t = Arc::new_cyclic(|me| ShmTransport {
            receiving: Arc::new(Receiving {
                socket_name,
                listener,
                bell,
                wake,
                stop: AtomicBool::new(false),
                policy: Default::default(),
                transport: me.clone(),
                security,
                counters,
                leader_pid: AtomicU32::new(0),
            }),
            thread: Mutex::new(None),
            writers: Mutex::new(HashMap::new()),
            budget,
            keep_all_block,
            degraded: Arc::new(AtomicBool::new(false)),
            lost: Arc::new(Mutex::new(Vec::new())),
        });
        let r = t.receiving.clone();
        // On failure `t` drops and its shutdown removes the socket.
        let thread = std::thread::Builder::new()
            .name("ferry-shm".into())
            .spawn(move || r.run(local))
            .map_err(|e| ferry_shm::ShmError::Unavailable {
                name: "ferry-shm thread".into(),
                source: e,
            })?;
        *t.thread.lock() = Some(thread);
        Ok(t)
    }

    /// Raises the delivery thread to at least `p` (within one housekeeping
    /// period, 50 ms).
    pub(crate) fn raise(&self, p: crate::priority::ThreadPolicy) {
        self.receiving.policy.raise(p);
    }

    /// Connections that ended by themselves since the last call.
    pub(crate) fn take_lost(&self) -> Vec<(EndpointId, EndpointId)> {
        std::mem::take(&mut *self.lost.lock())
    }

    /// Stops the delivery thread and removes the control socket.
    pub(crate) fn shutdown(&self) {
        self.receiving.stop.store(true, Ordering::Relaxed);
        self.receiving.bell.ring();
        let gone = match self.thread.lock().take() {
            Some(t) => t.join().unwrap_or_default(),
            None => Vec::new(),
        };
        let _ = std::fs::remove_file(path_of(&self.receiving.socket_name));
        for inb in gone {
            inb.conn.close();
            inb.reader.detach(&inb.inbound);
        }
    }

    /// A writer endpoint's pool (made on first use).
    fn pool(&self, writer: EndpointId) -> WriterPool {
        self.writers
            .lock()
            .entry(writer)
            .or_insert_with(|| WriterPool {
                writer: Writer::new(&format!("{writer}"), self.budget),
                last: Arc::new(Mutex::new(None)),
            })
            .clone()
    }

    /// `writer`'s pool, for a publisher to keep and lend slots from without
    /// a lookup per sample.
    pub(crate) fn writer(&self, writer: EndpointId) -> ShmWriter {
        ShmWriter(self.pool(writer))
    }

    /// Forgets a writer endpoint's pool (its links hold what they need).
    pub(crate) fn forget_writer(&self, writer: EndpointId) {
        self.writers.lock().remove(&writer);
    }
}

impl Drop for ShmTransport {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts shared memory when the config wants it; unavailable here (no
/// `/dev/shm`, no room) it is left out and the network serves this host.
pub(crate) fn start(
    ctx: &super::StartContext<'_>,
) -> Result<Option<Arc<dyn Transport>>, crate::error::BuildError> {
    if !ctx.cfg.shared_memory {
        return Ok(None);
    }
    match ShmTransport::start(
        ctx.id,
        Wake::of(ctx.cfg),
        (ctx.cfg.shm_pool_mb as usize) << 20,
        Duration::from_millis(ctx.cfg.keep_all_block_ms),
        ctx.security.cloned(),
        ctx.listener_counters.clone(),
    ) {
        Ok(t) => Ok(Some(t)),
        Err(e) => {
            tracing::warn!(
                "shared memory unavailable, processes on this host use the network: {e}"
            );
            Ok(None)
        }
    }
}

impl Transport for ShmTransport {
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
    fn forget_writer(&self, writer: EndpointId) {
        ShmTransport::forget_writer(self, writer);
    }
    fn raise_delivery(&self, p: crate::priority::ThreadPolicy) {
        self.raise(p);
    }
    fn take_lost(&self) -> Vec<(EndpointId, EndpointId)> {
        ShmTransport::take_lost(self)
    }
    fn shutdown(&self) {
        ShmTransport::shutdown(self);
    }
    fn kind(&self) -> TransportKind {
        TransportKind::SharedMemory
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            zero_copy: true,
            mtu: None,
            request_reply: true,
        }
    }
    fn locators(&self) -> Vec<Locator> {
        vec![Locator::named(
            TransportKind::SharedMemory,
            &self.receiving.socket_name,
        )]
    }
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        local.host_id == remote.host_id
            && remote
                .locators
                .iter()
                .any(|l| l.transport == TransportKind::SharedMemory)
    }
    fn automatic(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        !self.degraded.load(Ordering::Relaxed) && self.reaches(local, remote)
    }
    fn connect(&self, req: ConnectRequest) -> Result<Arc<dyn Link>, ConnectError> {
        self.attach(req, false)
    }
}

impl ShmTransport {
    /// The process of the host leader this runtime follows (or leads):
    /// the only one whose forwarded connections it accepts (0: none).
    pub(crate) fn set_host_leader_pid(&self, pid: u32) {
        self.receiving.leader_pid.store(pid, Ordering::Release);
    }

    /// A host leader's connection relaying `req.writer`, a writer of
    /// another host, to a reader of this host: the sample lands in this
    /// runtime's pool for that writer once, shared by all its readers
    /// here. The reader's runtime accepts it only from its own leader.
    pub(crate) fn connect_forwarded(
        &self,
        req: ConnectRequest,
    ) -> Result<Arc<dyn Link>, ConnectError> {
        self.attach(req, true)
    }

    fn attach(&self, req: ConnectRequest, forwarded: bool) -> Result<Arc<dyn Link>, ConnectError> {
        let unreachable = |last: String, tried: &str| ConnectError::Unreachable {
            peer: req.remote.participant,
            tried: tried.to_string(),
            last,
        };
        let socket = req
            .remote
            .locators
            .iter()
            .filter(|l| l.transport == TransportKind::SharedMemory)
            .find_map(|l| l.name().map(str::to_string))
            .ok_or_else(|| unreachable("no shared-memory locator".into(), ""))?;
        let tried = format!("shm/{socket}");
        let bell_name =
            bell_of(&socket).ok_or_else(|| unreachable("bad locator".into(), &tried))?;
        let pool = self.pool(req.writer);
        let (depth, block) = match (req.qos.history, req.qos.reliability) {
            (History::KeepAll, Reliability::Reliable) => (64, Some(self.keep_all_block)),
            (History::KeepAll, _) => (64, None),
            (History::KeepLast(n), _) => ((n as usize).clamp(16, 4096), None),
        };
        // The pool's first generation now: a /dev/shm too full for it fails
        // the connection before any sample, and the pair goes to the network.
        if let Err(e) = pool.writer.publish(0, |_| {}) {
            self.degrade(&e);
            return Err(unreachable(e.to_string(), &tried));
        }
        // Unique per attempt: a reconnect must not meet the old segment.
        static ATTEMPT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let conn_tag = format!(
            "{}.{}.{}",
            req.writer,
            req.reader,
            ATTEMPT.fetch_add(1, Ordering::Relaxed)
        );
        let conn = pool.writer.connect(&conn_tag, depth).map_err(|e| {
            self.degrade(&e);
            unreachable(e.to_string(), &tried)
        })?;
        // Segments and sockets are 0600: a process of another user is
        // refused for good, and the pair takes the network.
        let denied = || ConnectError::Refused {
            peer: req.remote.participant,
            transport: TransportKind::SharedMemory,
            cause: "permission denied, a process of another user (run both as one user \
                    to share memory)"
                .into(),
        };
        let stream = UnixStream::connect(path_of(&socket)).map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                denied()
            } else {
                unreachable(e.to_string(), &tried)
            }
        })?;
        let _ = stream.set_read_timeout(Some(ATTACH_TIMEOUT));
        let bell = Doorbell::open(&bell_name).map_err(|e| match e {
            ferry_shm::ShmError::Denied { .. } => denied(),
            e => unreachable(e.to_string(), &tried),
        })?;
        let attach = Attach {
            writer: req.writer,
            reader: req.reader,
            connection: conn.name().to_string(),
            data_prefix: pool.writer.data_prefix().to_string(),
            reply_to: (req.writer_kind == EndpointKind::Client)
                .then(|| self.receiving.socket_name.clone()),
        };
        let attach = if forwarded {
            Control::Forward(attach)
        } else {
            Control::Attach(attach)
        };
        (&stream)
            .write_all(&attach.encode())
            .map_err(|e| unreachable(e.to_string(), &tried))?;
        bell.ring_attach();
        let reply = read_message(|buf| {
            (&stream).read_exact(buf).map_err(|_| WireError::Truncated {
                offset: 0,
                needed: buf.len(),
            })
        })
        .map_err(|e| unreachable(format!("no answer: {e}"), &tried))?;
        match reply {
            Control::Accepted => {}
            Control::Refused {
                reason: RefuseReason::NoReader,
                ..
            } => return Err(ConnectError::NoReader(req.reader)),
            Control::Refused {
                reason: RefuseReason::Denied,
                ..
            } => return Err(denied()),
            other => return Err(unreachable(format!("refused: {other:?}"), &tried)),
        }
        Ok(Arc::new(ShmLink {
            writer: req.writer,
            degraded: self.degraded.clone(),
            lost: self.lost.clone(),
            pool,
            conn,
            bell,
            stream,
            reader: req.reader,
            locator: tried,
            stats: ConnStats::new(),
            block,
            closed: AtomicBool::new(false),
            last_check_ns: AtomicU64::new(0),
            priority: Mutex::new(Priority::default()),
        }))
    }

    fn degrade(&self, e: &dyn std::fmt::Display) {
        degrade(&self.degraded, e);
    }
}

/// Stops automatic selection of shared memory in this runtime, once.
fn degrade(flag: &AtomicBool, e: &dyn std::fmt::Display) {
    if !flag.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "shared memory failed ({e}); processes on this host now connect over the network"
        );
    }
}

/// Writer end of one shared-memory connection.
struct ShmLink {
    writer: EndpointId,
    degraded: Arc<AtomicBool>,
    lost: LostLinks,
    pool: WriterPool,
    conn: WriterConn,
    bell: Doorbell,
    stream: UnixStream,
    reader: EndpointId,
    locator: String,
    stats: ConnStats,
    block: Option<Duration>,
    closed: AtomicBool,
    /// Source time of the send that last checked the reader's socket.
    last_check_ns: AtomicU64,
    priority: Mutex<Priority>,
}

impl ShmLink {
    /// The slot holding sample `seq`: written by the first of the writer's
    /// connections to send it, shared by the others.
    ///
    /// Service traffic is never shared: a request goes out behind its
    /// [`Envelope`] (written into the slot, no extra copy); a reply comes
    /// from [`reply::ShmReplier`] already enveloped.
    fn published(&self, frame: &OutFrame<'_>) -> Result<(u64, Bytes), SendError> {
        if frame.kind != FrameKind::Data {
            let bytes = (frame.payload.bytes)()?;
            let env = (frame.kind == FrameKind::Request).then(|| {
                Envelope {
                    kind: EnvelopeKind::Request,
                    request_id: frame.seq,
                }
                .encode()
            });
            let head = env.as_ref().map_or(&[][..], |e| &e[..]);
            let p = self
                .pool
                .writer
                .publish(head.len() + bytes.len(), |buf| {
                    buf[..head.len()].copy_from_slice(head);
                    buf[head.len()..].copy_from_slice(&bytes);
                })
                .map_err(|e| self.publish_failed(e))?;
            return Ok((p.slot(), Bytes::from_owner(p)));
        }
        let mut last = self.pool.last.lock();
        if let Some((seq, slot, b)) = &*last {
            if *seq == frame.seq {
                return Ok((*slot, b.clone()));
            }
        }
        let bytes = (frame.payload.bytes)()?;
        let p = self
            .pool
            .writer
            .publish(bytes.len(), |buf| buf.copy_from_slice(&bytes))
            .map_err(|e| self.publish_failed(e))?;
        Ok(stage(&mut last, frame.seq, p))
    }

    fn publish_failed(&self, e: ferry_shm::PoolError) -> SendError {
        match e {
            // /dev/shm full or refused: go to the network for good.
            ferry_shm::PoolError::Shm(_) => degrade(&self.degraded, &e),
            _ => tracing::warn!("{}: {e}", self.locator),
        }
        self.lose();
        SendError::Closed
    }

    /// Every HOUSEKEEPING of sends (by the frames' own time stamps: no
    /// clock read, no lock), checks that the reader's socket is still up.
    fn check_reader(&self, now_ns: u64) {
        let last = self.last_check_ns.load(Ordering::Relaxed);
        if now_ns.saturating_sub(last) < HOUSEKEEPING.as_nanos() as u64
            || self
                .last_check_ns
                .compare_exchange(last, now_ns, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        if hung_up(&self.stream) {
            self.lose();
            ferry_shm::sweep_stale();
        }
    }

    /// Ends the connection on its own and tells the runtime.
    fn lose(&self) {
        if !self.closed.load(Ordering::Relaxed) {
            self.close();
            self.lost.lock().push((self.writer, self.reader));
        }
    }
}

impl Link for ShmLink {
    fn transport(&self) -> TransportKind {
        TransportKind::SharedMemory
    }
    fn remote(&self) -> EndpointId {
        self.reader
    }
    fn locator(&self) -> String {
        self.locator.clone()
    }
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        self.check_reader(frame.stamp_ns);
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        // `held` keeps the slot alive until the reader's reference exists.
        let (slot, held) = self.published(frame)?;
        match self
            .conn
            .send_slot(slot, held.len(), frame.seq, frame.stamp_ns, self.block)
        {
            Ok(()) => {
                self.bell.ring();
                self.stats.message(held.len());
                Ok(())
            }
            Err(ferry_shm::SendError::Blocked(d)) => Err(SendError::Blocked(d)),
            Err(_) => {
                self.lose();
                Err(SendError::Closed)
            }
        }
    }
    fn stats(&self) -> &ConnStats {
        self.stats
            .drops
            .store(self.conn.dropped(), Ordering::Relaxed);
        &self.stats
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed) || self.conn.is_closed()
    }
    fn close(&self) {
        if !self.closed.swap(true, Ordering::Relaxed) {
            self.conn.close();
            let _ = self.stream.shutdown(std::net::Shutdown::Both);
        }
    }
    fn priority(&self) -> Priority {
        *self.priority.lock()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        *self.priority.lock() = p;
        Ok(Applied::packets(Packets::None {
            shared_memory: true,
        }))
    }
}
