//! The reader side of the shared-memory transport: the control socket
//! that accepts writers' connections, and the `ferry-shm` delivery thread.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_shm::{Doorbell, ReaderConn};
use ferry_transport::room::Stall;
use ferry_wire::shm::{read_message, Attach, Control, RefuseReason};
use ferry_wire::WireError;
use ferry_wire::{ParticipantId, TransportKind};

use super::reply::ShmReplier;
use super::{hung_up, ShmTransport, HOUSEKEEPING};
use crate::stats::ConnStats;
use crate::transport::{deliver_sample, Carries, InboundConn, Inbox, Replier};

/// Longest sleep of an idle delivery thread (no connections): attaching
/// and stopping ring the doorbell, so this only bounds a lost ring.
const IDLE_NAP: Duration = Duration::from_secs(2);

/// One writer connected to a local reader.
pub(super) struct Inbound {
    pub(super) conn: ReaderConn,
    pub(super) reader: Arc<dyn Inbox>,
    pub(super) inbound: Arc<InboundConn>,
    stream: UnixStream,
    /// The reader's queue is full: its samples wait in the writer's ring
    /// (which blocks a reliable keep_all writer) until room frees.
    paused: Stall,
}

impl Inbound {
    /// Whether its reader takes samples now; if not, asks to be woken
    /// (the doorbell rings) when it does.
    fn open(&self, bell: &Weak<Receiving>) -> bool {
        let Some(room) = self.reader.room() else {
            return true;
        };
        let bell = bell.clone();
        !self.paused.full(room, move || {
            if let Some(r) = bell.upgrade() {
                r.bell.ring();
            }
        })
    }
}

/// The reader side of a runtime: control socket, doorbell, delivery thread.
pub(super) struct Receiving {
    pub(super) socket_name: String,
    pub(super) listener: UnixListener,
    pub(super) bell: Doorbell,
    pub(super) wake: Wake,
    pub(super) stop: AtomicBool,
    /// Scheduling asked for by subscribers (`thread_priority`).
    pub(super) policy: crate::priority::PolicyCell,
    /// The transport, to open reply connections to clients.
    pub(super) transport: Weak<ShmTransport>,
    /// Security on: attaching processes must be proven participants whose
    /// grants allow writing.
    pub(super) security: Option<Arc<crate::transport::TransportSecurity>>,
    /// Where refusals by grant are counted.
    pub(super) counters: Arc<ferry_transport::stats::ListenerCounters>,
    /// The process of the host leader this runtime follows or leads (0:
    /// none): forwarded connections are accepted from it alone.
    pub(super) leader_pid: std::sync::atomic::AtomicU32,
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
    /// Security on: who the attaching `writer` is. Its participant must be
    /// one signed discovery proved, running in the process at the other end
    /// of the socket (the kernel's `pid`, against the pid its signed
    /// announcement states), and its grants must allow writing the reader's
    /// name. A plain participant passes only under `permissive`.
    fn writer_identity(
        &self,
        writer: ferry_wire::EndpointId,
        pid: u32,
        reader: &dyn crate::transport::Inbox,
    ) -> Result<Option<Arc<ferry_security::PeerIdentity>>, (RefuseReason, String)> {
        let Some(sec) = &self.security else {
            return Ok(None);
        };
        let refuse = |why: String| {
            ferry_transport::stats::ListenerCounters::count(&self.counters.denied);
            tracing::warn!("shared-memory attach of {writer} refused: {why}");
            Err((RefuseReason::NotPermitted, why))
        };
        let Some(proven) = sec.peers.get(writer.participant) else {
            if sec.enforce {
                return refuse(format!(
                    "participant {} is not (yet) proven by signed discovery",
                    writer.participant
                ));
            }
            return Ok(None);
        };
        if proven.pid != pid {
            return refuse(format!(
                "the attaching process (pid {pid}) is not participant {}, whose signed pid is {}",
                writer.participant, proven.pid
            ));
        }
        let (_, action) = ferry_transport::secure::writer_grant(reader.carries());
        let name = reader.name();
        if !proven.identity.allows(action, name) {
            return refuse(format!(
                "identity {} may not {action} `{name}`",
                proven.identity.enclave()
            ));
        }
        Ok(Some(proven.identity))
    }

    fn accept(&self, local: ParticipantId, list: &mut Vec<Inbound>) {
        while let Ok((stream, _)) = self.listener.accept() {
            // The socket is 0600, but between its bind and its chmod
            // anyone could connect: only this user (or root) gets in, so a
            // shared-memory origin means this user on this host.
            let Some(pid) = peer_pid_of_same_user(&stream) else {
                tracing::debug!("shared-memory connection from another user refused");
                continue;
            };
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
            match self.attach(local, &stream, pid) {
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
        pid: u32,
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
        let (
            Control::Attach(Attach {
                writer,
                reader: reader_id,
                connection: conn,
                data_prefix: prefix,
                reply_to,
            })
            | Control::Forward(Attach {
                writer,
                reader: reader_id,
                connection: conn,
                data_prefix: prefix,
                reply_to,
            }),
            forwarded,
        ) = (msg.clone(), matches!(msg, Control::Forward(_)))
        else {
            return Err((RefuseReason::Malformed, "expected an attach request".into()));
        };
        if forwarded {
            // Consent: only the leader this runtime elected relays to it,
            // and not under security (the relayed writer's identity is
            // proven to the leader, not here).
            let leader = self.leader_pid.load(Ordering::Acquire);
            if leader == 0 || leader != pid || self.security.is_some() {
                ferry_transport::stats::ListenerCounters::count(&self.counters.denied);
                return Err((
                    RefuseReason::NotPermitted,
                    format!(
                        "forwarded connection from pid {pid}, which is not this runtime's host \
                         leader{}",
                        if self.security.is_some() {
                            " (forwarding is not available with security on)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
        if reader_id.participant != local {
            return Err((
                RefuseReason::WrongRuntime,
                format!("reader {reader_id} is not in this runtime"),
            ));
        }
        let reader = crate::transport::intra::lookup_reader(reader_id)
            .ok_or_else(|| (RefuseReason::NoReader, format!("no reader {reader_id}")))?;
        let identity = if forwarded {
            None
        } else {
            self.writer_identity(writer, pid, reader.as_ref())?
        };
        let (locator, transport) = if forwarded {
            (format!("fwd/{conn}"), TransportKind::Forwarded)
        } else {
            (format!("shm/{conn}"), TransportKind::SharedMemory)
        };
        let conn = ReaderConn::open(&conn, &prefix).map_err(|e| match e {
            ferry_shm::ShmError::Denied { .. } => (RefuseReason::Denied, e.to_string()),
            e => (RefuseReason::Segment, e.to_string()),
        })?;
        // A client's requests: replies go back on a connection of their own
        // to its runtime's control socket, opened at the first reply.
        let replier = match (reader.carries(), reply_to) {
            (Carries::Requests, Some(socket)) => Some(Arc::new(ShmReplier::new(
                self.transport.clone(),
                reader_id,
                writer,
                socket,
            )) as Arc<dyn Replier>),
            _ => None,
        };
        let inbound = Arc::new(InboundConn {
            remote: writer,
            origin: crate::transport::Origin::SharedMemory,
            transport,
            locator,
            stats: Arc::new(ConnStats::new()),
            replier,
            same_clock: true,
            seqs: Default::default(),
            identity,
        });
        Ok(Inbound {
            conn,
            reader,
            inbound,
            stream: stream
                .try_clone()
                .map_err(|e| (RefuseReason::Segment, e.to_string()))?,
            paused: Stall::default(),
        })
    }

    /// Delivers what is queued, as arrived at `arrival_ns` (wall clock; 0:
    /// the subscriber reads the clock); returns how many samples and the
    /// earliest source time among them (ns since the epoch; `u64::MAX` if
    /// none).
    fn drain(list: &[Inbound], arrival_ns: u64, me: &Weak<Receiving>) -> (usize, u64) {
        let mut n = 0;
        let mut earliest = u64::MAX;
        for inb in list.iter() {
            // Bounded per connection per round: one busy writer cannot
            // starve the others.
            for _ in 0..256 {
                if !inb.open(me) {
                    break;
                }
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
                // A relayed path: a sample a direct path from the same
                // writer delivered already, or a relay did (a replay), is a
                // duplicate (`Inbox::broker_sample` knows both).
                if inb.inbound.transport == TransportKind::Forwarded
                    && !inb
                        .reader
                        .forwarded_sample(&inb.inbound, got.seq, got.stamp)
                {
                    continue;
                }
                earliest = earliest.min(got.stamp);
                let len = got.sample.len();
                inb.inbound.stats.message(len);
                deliver_sample(
                    &*inb.reader,
                    &inb.inbound,
                    got.seq,
                    got.stamp,
                    arrival_ns,
                    Bytes::from_owner(got.sample),
                );
            }
        }
        (n, earliest)
    }

    /// Ends connections whose writer went away. (Ring overflow is counted
    /// on the writer's side, where the sample was dropped.)
    fn housekeeping(list: &mut Vec<Inbound>) {
        let mut gone = Vec::new();
        {
            list.retain_mut(|inb| {
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

    /// Whether a connection has samples its reader takes now.
    fn has_data(list: &[Inbound]) -> bool {
        list.iter()
            .any(|i| !i.paused.is_stalled() && i.conn.has_data())
    }

    /// The `ferry-shm` thread. It alone owns the list of inbound
    /// connections (no lock on the delivery path, none held while a
    /// subscriber's inline callback runs); it hands the list back when it
    /// stops.
    pub(super) fn run(self: Arc<Self>, local: ParticipantId) -> Vec<Inbound> {
        let mut list: Vec<Inbound> = Vec::new();
        let me = Arc::downgrade(&self);
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
                if Self::drain(&list, 0, &me).0 == 0 {
                    std::hint::spin_loop();
                }
                continue;
            }
            // One clock read per round serves housekeeping, polling and the
            // arrival time of what this round delivers.
            let now = Instant::now();
            let at_ns = wall.at(now);
            let (n, earliest) = Self::drain(&list, at_ns, &me);
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
            // Without connections there is nothing to look after: sleep
            // until a connection request (or the stop) rings.
            let nap = if list.is_empty() {
                IDLE_NAP
            } else {
                HOUSEKEEPING
            };
            self.bell.sleep(nap, || Self::has_data(&list));
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

/// The pid of the process at the other end of `stream` if it runs as this
/// user or as root (`SO_PEERCRED`).
fn peer_pid_of_same_user(stream: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, which we own.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: geteuid has no preconditions.
    let same = r == 0 && (cred.uid == 0 || cred.uid == unsafe { libc::geteuid() });
    same.then_some(cred.pid as u32)
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
