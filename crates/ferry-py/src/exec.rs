//! The executor side of a node: bounded queues that ferry's delivery threads
//! fill without the GIL, and the wake-up the spinning Python thread waits on
//! with the GIL released.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// A wake-up counter: every event bumps it; a waiter sleeps until it moves.
/// A node's wake-up also bumps the executors it was added to.
#[derive(Default)]
pub struct Wake {
    epoch: Mutex<u64>,
    cv: Condvar,
    listeners: Mutex<Vec<std::sync::Weak<Wake>>>,
    has_listeners: AtomicBool,
}

impl Wake {
    /// Signals every waiter (and every listening executor's).
    pub fn bump(&self) {
        *self.epoch.lock() += 1;
        self.cv.notify_all();
        if self.has_listeners.load(Ordering::Acquire) {
            for l in self.listeners.lock().iter() {
                if let Some(w) = l.upgrade() {
                    w.bump();
                }
            }
        }
    }
    /// Forwards every bump to `other` too (an executor's wake-up).
    pub fn listen(&self, other: &Arc<Wake>) {
        let mut l = self.listeners.lock();
        l.retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(other)));
        l.push(Arc::downgrade(other));
        self.has_listeners.store(true, Ordering::Release);
    }
    /// Stops forwarding to `other`.
    pub fn unlisten(&self, other: &Arc<Wake>) {
        let mut l = self.listeners.lock();
        l.retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(other)));
        self.has_listeners.store(!l.is_empty(), Ordering::Release);
    }
    /// The current count: read it before looking for work, wait with it.
    pub fn epoch(&self) -> u64 {
        *self.epoch.lock()
    }
    /// Sleeps until the count differs from `seen` or `until` passes.
    pub fn wait(&self, seen: u64, until: Instant) {
        let mut g = self.epoch.lock();
        while *g == seen {
            if self.cv.wait_until(&mut g, until).timed_out() {
                return;
            }
        }
    }
}

impl std::task::Wake for Wake {
    fn wake(self: Arc<Self>) {
        self.bump();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.bump();
    }
}

/// An eventfd that is readable while its queue has items: what asyncio's
/// `add_reader` watches (no GIL taken by the writer).
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A non-blocking, close-on-exec eventfd.
    pub fn new() -> std::io::Result<Self> {
        // SAFETY: plain syscall; the fd is owned from here on.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    /// Makes the fd readable.
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64; a full counter (EAGAIN)
        // already means "readable", so the result is ignored.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
    /// Clears readability.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; EAGAIN when already clear.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
    /// The descriptor number.
    pub fn raw(&self) -> i32 {
        self.0.as_raw_fd()
    }
}

/// A bounded FIFO between a delivery thread and Python: when full, the
/// oldest item is dropped and counted (keep_last semantics), so memory stays
/// bounded however fast a peer publishes and however rarely Python spins.
/// With a [`ferry::Room`] (reliable keep_all) ferry's paths hold back while
/// the room is full, so the writer blocks instead; the queue then drops
/// only past twice the room's depth (a writer that does not block).
pub struct Queue<T> {
    items: Mutex<VecDeque<T>>,
    cap: usize,
    room: Option<Arc<ferry::Room>>,
    dropped: AtomicU64,
    closed: AtomicBool,
    wake: Arc<Wake>,
    event: Option<EventFd>,
}

impl<T> Queue<T> {
    /// A queue of at most `cap` items that bumps `wake` (and `event`, when
    /// given) on every push.
    pub fn new(cap: usize, wake: Arc<Wake>, event: Option<EventFd>) -> Self {
        Queue {
            items: Mutex::new(VecDeque::new()),
            cap: cap.max(1),
            room: None,
            dropped: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            wake,
            event,
        }
    }
    /// A queue with back-pressure through `room` (see the type's docs).
    pub fn with_room(room: Arc<ferry::Room>, wake: Arc<Wake>, event: Option<EventFd>) -> Self {
        Queue {
            cap: room.depth() * 2,
            room: Some(room),
            ..Self::new(1, wake, event)
        }
    }
    fn took(&self, n: usize) {
        if let Some(r) = &self.room {
            r.taken(n);
        }
    }
    /// Appends, dropping the oldest item when full (and every item once
    /// closed).
    pub fn push(&self, item: T) {
        {
            let mut q = self.items.lock();
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            if q.len() >= self.cap {
                q.pop_front();
                self.took(1);
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            q.push_back(item);
            if let Some(r) = &self.room {
                r.put();
            }
        }
        self.wake.bump();
        if let Some(e) = &self.event {
            e.signal();
        }
    }
    /// The oldest item, if any. Taking the last one clears the eventfd (a
    /// push that appended before but signals after makes it readable again:
    /// a spurious wake-up, never a missed one).
    pub fn pop(&self) -> Option<T> {
        let mut q = self.items.lock();
        let item = q.pop_front();
        if item.is_some() {
            self.took(1);
        }
        if let (Some(e), true) = (&self.event, q.is_empty()) {
            e.drain();
        }
        item
    }
    /// Items waiting.
    pub fn len(&self) -> usize {
        self.items.lock().len()
    }
    /// Drops everything waiting and everything pushed from now on (which
    /// closes the reply channels the items hold).
    pub fn close(&self) {
        let mut q = self.items.lock();
        self.closed.store(true, Ordering::Release);
        // Nobody reads any more: paths waiting for room go on.
        self.took(q.len());
        q.clear();
    }
    /// Items dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
    /// The eventfd, when this queue has one.
    pub fn event(&self) -> Option<&EventFd> {
        self.event.as_ref()
    }
}
