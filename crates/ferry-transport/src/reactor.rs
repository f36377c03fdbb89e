//! The reactor API between a runtime's I/O thread and the transports.
//!
//! The I/O thread (`runtime/io.rs`) runs one `mio` poll. A transport hands
//! it a [`Source`] — a socket and the code that serves it — through an
//! [`IoHandle`] from any thread; from then on the I/O thread calls the
//! source on every event, runs its timers if it has any, and asks it each
//! turn whether its owner closed it. Every transport socket is such a
//! source (TCP listener and connections, the UDP data socket); the loop
//! itself owns only the discovery sockets.
//! The loop knows no transport: what a source needs of the runtime it gets
//! through [`LoopContext`]. This module depends on neither, so transports
//! and the runtime both build on it.

use std::net::IpAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ferry_wire::{EndpointId, ParticipantId};
use mio::{Poll, Token, Waker};
use parking_lot::Mutex;

/// The waker's token in every I/O loop.
pub const WAKER: Token = Token(0);

/// What happened on a source's socket.
#[derive(Debug, Clone, Copy, Default)]
pub struct Readiness {
    /// Bytes (or the peer's close) can be read.
    pub readable: bool,
    /// The socket has room to write.
    pub writable: bool,
    /// The socket reported an error.
    pub error: bool,
}

/// What a served source wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// Wait for the next event.
    Idle,
    /// Its read budget ran out: serve it again next turn.
    More,
    /// It is finished (the peer closed, an error, a bad frame): remove it.
    Done,
}

/// What the I/O thread offers the sources it serves.
pub trait LoopContext {
    /// This runtime.
    fn local(&self) -> ParticipantId;
    /// Whether source timestamps of `p` are from our clock (same host).
    fn same_clock(&self, p: ParticipantId) -> bool;
    /// This host's addresses (a peer at one of them shares our clock).
    fn local_ips(&self) -> &[IpAddr];
    /// Data from `p` arrived: it is alive whatever discovery lost.
    fn alive(&mut self, p: ParticipantId);
    /// A writer's connection to `reader` ended by itself.
    fn link_lost(&mut self, writer: EndpointId, reader: EndpointId);
    /// Watches a new source from the next turn (a listener's accepted
    /// connection).
    fn add_source(&mut self, source: Box<dyn Source>);
}

/// A socket the I/O thread watches, with the code that serves it.
pub trait Source: Send {
    /// The file descriptor to watch.
    fn fd(&self) -> RawFd;
    /// Whether to watch it for room to write too (a connection with a
    /// backlog); datagram sockets and listeners only read.
    fn writable_interest(&self) -> bool {
        true
    }
    /// Serves one event (I/O thread).
    fn ready(&mut self, ready: Readiness, ctx: &mut dyn LoopContext) -> Served;
    /// A kick: output was queued for the I/O thread to write, or room
    /// freed in a reader's queue. True: serve it as readable now (it held
    /// back reading and may go on).
    fn kicked(&mut self) -> bool {
        false
    }
    /// Whether it has timers: then [`Source::service`] runs every turn.
    fn has_timers(&self) -> bool {
        false
    }
    /// Runs its due timers (every turn, for sources with timers); returns
    /// when it wants to run next.
    fn service(
        &mut self,
        _now: std::time::Instant,
        _ctx: &mut dyn LoopContext,
    ) -> Option<std::time::Instant> {
        None
    }
    /// Whether its timers need sub-millisecond precision: the loop then
    /// wakes for them on a `timerfd` rather than at `epoll`'s whole
    /// milliseconds (a TCP connection's batch linger of 100 µs). Off by
    /// default: timers that tolerate a millisecond cost no extra wake-ups.
    fn precise_timers(&self) -> bool {
        false
    }
    /// Whether its owner closed it (asked every turn; closed ones go).
    fn is_closed(&self) -> bool;
    /// It left the loop: it closed, its owner closed it, or it could not
    /// be watched.
    fn removed(&mut self, ctx: &mut dyn LoopContext);
    /// The runtime stops: close without reporting anything.
    fn shutdown(&mut self);
}

pub enum Command {
    Add(Box<dyn Source>),
    Kick,
    Shutdown,
}

/// Lets other threads hand work to the I/O thread.
#[derive(Clone)]
pub struct IoHandle {
    waker: Arc<Waker>,
    cmds: Arc<Mutex<Vec<Command>>>,
    /// A kick is queued and not yet taken: further kicks add nothing (a
    /// fast publisher in batch mode would otherwise wake the loop per batch).
    kicked: Arc<AtomicBool>,
}

impl IoHandle {
    /// A handle that wakes `poll` (the I/O loop's, or a unit test's own).
    pub fn new(poll: &Poll) -> std::io::Result<Self> {
        Ok(IoHandle {
            waker: Arc::new(Waker::new(poll.registry(), WAKER)?),
            cmds: Arc::new(Mutex::new(Vec::new())),
            kicked: Arc::new(AtomicBool::new(false)),
        })
    }
    fn push(&self, c: Command) {
        self.cmds.lock().push(c);
        let _ = self.waker.wake();
    }
    /// Hands a source to the I/O thread (from any thread).
    pub fn add(&self, s: Box<dyn Source>) {
        self.push(Command::Add(s));
    }
    /// Something is queued for the I/O thread (discovery, batched output).
    pub fn kick(&self) {
        if !self.kicked.swap(true, Ordering::AcqRel) {
            self.push(Command::Kick);
        }
    }
    /// Stops the loop after sending the goodbye.
    pub fn shutdown(&self) {
        self.push(Command::Shutdown);
    }
    /// The commands queued since the last call (I/O thread); the next kick
    /// wakes the loop again.
    pub fn take(&self) -> Vec<Command> {
        let cmds = std::mem::take(&mut *self.cmds.lock());
        self.kicked.store(false, Ordering::Release);
        cmds
    }
}

thread_local! {
    static IO_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as a runtime's I/O thread.
pub fn enter_io_thread() {
    IO_THREAD.with(|c| c.set(true));
}

/// True on a runtime's I/O thread (where inline callbacks of network paths
/// run): code that would wait for the I/O thread must not wait there.
pub fn on_io_thread() -> bool {
    IO_THREAD.with(|c| c.get())
}
