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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_shm::{Doorbell, Published, ReaderConn, Writer, WriterConn};
use ferry_wire::frame::FrameKind;
use ferry_wire::shm::{read_message, Attach, Control, RefuseReason};
use ferry_wire::WireError;
use ferry_wire::{EndpointId, History, Locator, ParticipantId, Reliability, TransportKind};
use parking_lot::Mutex;

use super::{
    Capabilities, ConnectError, ConnectRequest, InFrame, InboundConn, Inbox, Link, OutFrame,
    PeerInfo, SendError, Transport,
};
use crate::message::Payload;
use crate::priority::{Priority, PriorityError};
use crate::stats::ConnStats;

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

/// One writer connected to a local reader.
struct Inbound {
    conn: ReaderConn,
    reader: Arc<dyn Inbox>,
    inbound: Arc<InboundConn>,
    stream: UnixStream,
    dropped: u64,
}

/// The reader side of a runtime: control socket, doorbell, delivery thread.
struct Receiving {
    socket_name: String,
    listener: UnixListener,
    bell: Doorbell,
    wake: Wake,
    stop: AtomicBool,
    /// Scheduling asked for by subscribers (`thread_priority`).
    policy: crate::priority::PolicyCell,
}

/// How the delivery thread waits for samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Sleeps on the doorbell, after polling up to `max_spin` while that
    /// pays ([`SpinWindow`]).
    Event {
        /// The longest poll before sleeping.
        max_spin: Duration,
    },
    /// Never sleeps (one core busy; the lowest latency).
    BusyPoll,
}

impl Wake {
    /// The mode `cfg` asks for (`shm_busy_poll`, `shm_spin_us`).
    pub(crate) fn of(cfg: &crate::Config) -> Wake {
        if cfg.shm_busy_poll {
            Wake::BusyPoll
        } else {
            Wake::Event {
                max_spin: Duration::from_micros(u64::from(cfg.shm_spin_us)),
            }
        }
    }
}

/// The event-driven delivery thread's poll window before it sleeps,
/// adapted like a guest kernel's halt polling: after each idle stretch
/// that ended with a sample, the window doubles if a window of `max` would
/// have caught that sample (the gap from running dry to the sample's
/// publication) and halves (to zero) if not. A ping-pong or a burst keeps
/// the thread polling between samples (no futex wake-up on the round
/// trip); a stream whose samples come further apart than `max` — or no
/// stream at all — closes the window within a few samples, and the thread
/// sleeps at once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpinWindow {
    max: Duration,
    window: Duration,
}

impl SpinWindow {
    /// The first window a closed one opens to.
    const OPEN: Duration = Duration::from_micros(4);
    /// A window halved below this closes.
    const CLOSE: Duration = Duration::from_micros(2);

    /// A window that starts fully open.
    pub(crate) fn new(max: Duration) -> SpinWindow {
        SpinWindow { max, window: max }
    }

    /// How long to poll after the rings ran dry.
    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    /// An idle stretch ended with a sample published `gap` after the rings
    /// ran dry.
    pub(crate) fn ended_after(&mut self, gap: Duration) {
        self.window = if gap <= self.max {
            (self.window * 2).max(Self::OPEN).min(self.max)
        } else if self.window / 2 < Self::CLOSE {
            Duration::ZERO
        } else {
            self.window / 2
        };
    }
}

impl Receiving {
    fn accept(&self, local: ParticipantId, list: &mut Vec<Inbound>) {
        while let Ok((stream, _)) = self.listener.accept() {
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
            match self.attach(local, &stream) {
                Ok(inb) => {
                    let _ = (&stream).write_all(&Control::Accepted.encode());
                    inb.reader.attach(inb.inbound.clone());
                    list.push(inb);
                }
                Err((reason, detail)) => {
                    tracing::debug!("shared-memory attach refused ({reason:?}): {detail}");
                    let _ = (&stream).write_all(&Control::Refused { reason, detail }.encode());
                }
            }
        }
    }

    fn attach(
        &self,
        local: ParticipantId,
        stream: &UnixStream,
    ) -> Result<Inbound, (RefuseReason, String)> {
        let malformed = |e: WireError| (RefuseReason::Malformed, e.to_string());
        let msg = read_message(|buf| {
            (&*stream)
                .read_exact(buf)
                .map_err(|_| WireError::Truncated {
                    offset: 0,
                    needed: buf.len(),
                })
        })
        .map_err(malformed)?;
        let Control::Attach(Attach {
            writer,
            reader: reader_id,
            connection: conn,
            data_prefix: prefix,
        }) = msg
        else {
            return Err((RefuseReason::Malformed, "expected an attach request".into()));
        };
        if reader_id.participant != local {
            return Err((
                RefuseReason::WrongRuntime,
                format!("reader {reader_id} is not in this runtime"),
            ));
        }
        let reader = super::intra::lookup_reader(reader_id)
            .ok_or_else(|| (RefuseReason::NoReader, format!("no reader {reader_id}")))?;
        let locator = format!("shm/{conn}");
        let conn =
            ReaderConn::open(&conn, &prefix).map_err(|e| (RefuseReason::Segment, e.to_string()))?;
        let inbound = Arc::new(InboundConn {
            remote: writer,
            transport: TransportKind::SharedMemory,
            locator,
            stats: Arc::new(ConnStats::new()),
            replier: None,
            same_clock: true,
            seqs: Default::default(),
        });
        Ok(Inbound {
            conn,
            reader,
            inbound,
            stream: stream
                .try_clone()
                .map_err(|e| (RefuseReason::Segment, e.to_string()))?,
            dropped: 0,
        })
    }

    /// Delivers what is queued, as arrived at `arrival_ns` (wall clock; 0:
    /// the subscriber reads the clock); returns how many samples and the
    /// earliest source time among them (ns since the epoch; `u64::MAX` if
    /// none).
    fn drain(list: &[Inbound], arrival_ns: u64) -> (usize, u64) {
        let mut n = 0;
        let mut earliest = u64::MAX;
        for inb in list.iter() {
            // Bounded per connection per round: one busy writer cannot
            // starve the others.
            for _ in 0..256 {
                let got = match inb.conn.try_recv() {
                    Ok(Some(g)) => g,
                    Ok(None) => break,
                    Err(e) => {
                        inb.inbound.stats.errors.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!("shared-memory sample refused: {e}");
                        continue;
                    }
                };
                n += 1;
                earliest = earliest.min(got.stamp);
                let len = got.sample.len();
                inb.inbound.stats.message(len);
                // One wrapper per sample; every path clones the `Bytes`.
                let sample = Bytes::from_owner(got.sample);
                let bytes = move || Ok(sample.clone());
                inb.reader.deliver(
                    &inb.inbound,
                    &InFrame {
                        kind: FrameKind::Data,
                        seq: got.seq,
                        stamp_ns: got.stamp,
                        arrival_ns,
                        payload: Payload {
                            typed: None,
                            bytes: &bytes,
                        },
                    },
                );
            }
        }
        (n, earliest)
    }

    /// Ends connections whose writer went away; counts ring overflows.
    fn housekeeping(list: &mut Vec<Inbound>) {
        let mut gone = Vec::new();
        {
            list.retain_mut(|inb| {
                let d = inb.conn.dropped();
                if d > inb.dropped {
                    inb.inbound
                        .stats
                        .drops
                        .fetch_add(d - inb.dropped, Ordering::Relaxed);
                    inb.dropped = d;
                }
                // Deliver what is left before letting go of a closed one.
                if (inb.conn.is_closed() || hung_up(&inb.stream)) && !inb.conn.has_data() {
                    inb.conn.close();
                    gone.push((inb.reader.clone(), inb.inbound.clone()));
                    return false;
                }
                true
            });
        }
        if !gone.is_empty() {
            // A writer that died leaves segments: remove them now.
            ferry_shm::sweep_stale();
        }
        for (reader, conn) in gone {
            reader.detach(&conn);
        }
    }

    fn has_data(list: &[Inbound]) -> bool {
        list.iter().any(|i| i.conn.has_data())
    }

    /// The `ferry-shm` thread. It alone owns the list of inbound
    /// connections (no lock on the delivery path, none held while a
    /// subscriber's inline callback runs); it hands the list back when it
    /// stops.
    fn run(self: Arc<Self>, local: ParticipantId) -> Vec<Inbound> {
        let mut list: Vec<Inbound> = Vec::new();
        let busy_poll = self.wake == Wake::BusyPoll;
        let mut spin = SpinWindow::new(match self.wake {
            Wake::Event { max_spin } => max_spin,
            Wake::BusyPoll => Duration::ZERO,
        });
        let mut dry: Option<Dry> = None;
        let mut last_house = Instant::now();
        let mut wall = WallClock::new();
        let mut rounds = 0u32;
        while !self.stop.load(Ordering::Relaxed) {
            rounds = rounds.wrapping_add(1);
            // Busy-polling reads the clock every 256 rounds only.
            if busy_poll && !rounds.is_multiple_of(256) {
                if Self::drain(&list, 0).0 == 0 {
                    std::hint::spin_loop();
                }
                continue;
            }
            // One clock read per round serves housekeeping, polling and the
            // arrival time of what this round delivers.
            let now = Instant::now();
            let at_ns = wall.at(now);
            let (n, earliest) = Self::drain(&list, at_ns);
            if self.bell.take_attach() {
                self.accept(local, &mut list);
            }
            if now.saturating_duration_since(last_house) >= HOUSEKEEPING {
                self.policy.apply_if_raised("ferry-shm");
                self.accept(local, &mut list);
                Self::housekeeping(&mut list);
                last_house = now;
                wall = WallClock::new();
            }
            if n > 0 {
                if let Some(d) = dry.take() {
                    spin.ended_after(Duration::from_nanos(earliest.saturating_sub(d.wall)));
                }
                continue;
            }
            if busy_poll {
                std::hint::spin_loop();
                continue;
            }
            let d = dry.get_or_insert_with(|| Dry::at(now, at_ns));
            if now.saturating_duration_since(d.since) < spin.window() {
                d.poll(now);
                continue;
            }
            // A writer's connection request rings too: the next round
            // accepts it (`take_attach`), without a syscall per sample.
            self.bell.sleep(HOUSEKEEPING, || Self::has_data(&list));
        }
        list
    }
}

/// The wall clock (ns since the epoch, the clock of samples' source time)
/// derived from a monotonic reading, so a round reads one clock: set at
/// one instant and re-read every housekeeping period (it may step).
struct WallClock {
    base: Instant,
    base_ns: u64,
}

impl WallClock {
    fn new() -> WallClock {
        WallClock {
            base: Instant::now(),
            base_ns: crate::stats::now_ns(),
        }
    }

    /// Wall-clock ns at `now`.
    fn at(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.base).as_nanos();
        self.base_ns
            .saturating_add(u64::try_from(since).unwrap_or(u64::MAX))
    }
}

/// An idle stretch of the delivery thread: since when its rings are dry.
struct Dry {
    /// Monotonic, for the polling window.
    since: Instant,
    /// Wall clock (ns since the epoch), compared with the source time of
    /// the sample that ends the stretch.
    wall: u64,
    /// When polling last gave up the CPU (None: not yet this stretch).
    yielded: Option<Instant>,
    /// Whether the last yield is still to be timed (at the next round).
    timing: bool,
    /// Whether that yield ran another thread.
    shared: bool,
}

impl Dry {
    fn at(now: Instant, wall: u64) -> Dry {
        Dry {
            since: now,
            wall,
            yielded: None,
            timing: false,
            shared: false,
        }
    }

    /// One round of polling at `now`. Polling must not keep the CPU from
    /// the thread it waits for when both share one: the first round yields,
    /// every round does while yields run another thread (the round after
    /// one comes more than [`SHARED_CPU`] later: the CPU is shared), and
    /// otherwise one round in every [`SHARED_CPU`] of spinning does (the
    /// thread it waits for may have become runnable here since) — a cheap
    /// syscall when nobody waits.
    fn poll(&mut self, now: Instant) {
        let due = match self.yielded {
            None => true,
            Some(t) => {
                let since = now.saturating_duration_since(t);
                if std::mem::take(&mut self.timing) {
                    self.shared = since >= SHARED_CPU;
                }
                self.shared || since >= SHARED_CPU
            }
        };
        if due {
            self.yielded = Some(now);
            self.timing = true;
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// A yield that took longer ran another thread on this CPU; spinning this
/// long without one yields again.
const SHARED_CPU: Duration = Duration::from_micros(2);

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
    ) -> Result<ShmTransport, ferry_shm::ShmError> {
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
        let receiving = Arc::new(Receiving {
            socket_name,
            listener,
            bell,
            wake,
            stop: AtomicBool::new(false),
            policy: Default::default(),
        });
        let r = receiving.clone();
        let thread = std::thread::Builder::new()
            .name("ferry-shm".into())
            .spawn(move || r.run(local))
            .map_err(|e| ferry_shm::ShmError::Unavailable {
                name: "ferry-shm thread".into(),
                source: e,
            })?;
        Ok(ShmTransport {
            receiving,
            thread: Mutex::new(Some(thread)),
            writers: Mutex::new(HashMap::new()),
            budget,
            keep_all_block,
            degraded: Arc::new(AtomicBool::new(false)),
            lost: Arc::new(Mutex::new(Vec::new())),
        })
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

impl Transport for ShmTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::SharedMemory
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            zero_copy: true,
            mtu: None,
            request_reply: false,
        }
    }
    fn locators(&self) -> Vec<Locator> {
        vec![Locator {
            transport: TransportKind::SharedMemory,
            address: self.receiving.socket_name.clone(),
        }]
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
        let unreachable = |last: String, tried: &str| ConnectError::Unreachable {
            peer: req.remote.participant,
            tried: tried.to_string(),
            last,
        };
        let socket = req
            .remote
            .locators
            .iter()
            .find(|l| l.transport == TransportKind::SharedMemory)
            .map(|l| l.address.clone())
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
        let stream = UnixStream::connect(path_of(&socket))
            .map_err(|e| unreachable(e.to_string(), &tried))?;
        let _ = stream.set_read_timeout(Some(ATTACH_TIMEOUT));
        let bell = Doorbell::open(&bell_name).map_err(|e| unreachable(e.to_string(), &tried))?;
        let attach = Control::Attach(Attach {
            writer: req.writer,
            reader: req.reader,
            connection: conn.name().to_string(),
            data_prefix: pool.writer.data_prefix().to_string(),
        });
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
}

impl ShmTransport {
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
    fn published(&self, frame: &OutFrame<'_>) -> Result<(u64, Bytes), SendError> {
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
            .map_err(|e| {
                match e {
                    // /dev/shm full or refused: go to the network for good.
                    ferry_shm::PoolError::Shm(_) => degrade(&self.degraded, &e),
                    _ => tracing::warn!("{}: {e}", self.locator),
                }
                self.lose();
                SendError::Closed
            })?;
        Ok(stage(&mut last, frame.seq, p))
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
    fn set_priority(&self, p: Priority) -> Result<String, PriorityError> {
        *self.priority.lock() = p;
        Ok(
            "shared memory: no packets; the sample is queued on the publishing thread, \
            before those of lower-priority connections of the same publisher"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_micros(50);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn a_ping_pong_keeps_the_window_open() {
        let mut w = SpinWindow::new(MAX);
        for _ in 0..1000 {
            // Replies come 2 µs after the rings run dry.
            w.ended_after(us(2));
            assert_eq!(w.window(), MAX);
        }
    }

    #[test]
    fn a_slower_stream_closes_the_window_within_a_few_samples() {
        // 1 kHz: every sample comes 1 ms after the previous one.
        let mut w = SpinWindow::new(MAX);
        let mut spun = Duration::ZERO;
        for _ in 0..1000 {
            spun += w.window();
            w.ended_after(us(1000));
        }
        assert_eq!(w.window(), Duration::ZERO);
        assert!(spun < us(120), "spun {spun:?} over 1000 samples");
        // Samples just beyond the window (10 kHz with a 50 µs window) close
        // it as well: polling would never have caught them.
        let mut w = SpinWindow::new(MAX);
        for _ in 0..10 {
            w.ended_after(us(100));
        }
        assert_eq!(w.window(), Duration::ZERO);
    }

    #[test]
    fn a_closed_window_reopens_when_replies_come_quickly_again() {
        let mut w = SpinWindow::new(MAX);
        for _ in 0..10 {
            w.ended_after(us(5000));
        }
        assert_eq!(w.window(), Duration::ZERO);
        let mut opened = Vec::new();
        for _ in 0..6 {
            w.ended_after(us(3));
            opened.push(w.window().as_micros());
        }
        assert_eq!(opened, vec![4, 8, 16, 32, 50, 50]);
        // A zero maximum never polls.
        let mut w = SpinWindow::new(Duration::ZERO);
        w.ended_after(Duration::ZERO);
        assert_eq!(w.window(), Duration::ZERO);
    }
}
