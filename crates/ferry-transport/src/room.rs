//! Room in a reader's receive queue: how back-pressure reaches a writer.
//!
//! A reliable keep_all subscriber must not drop what it has not read. Its
//! queue counts what it holds against a [`Room`]; while the room is full,
//! every path holds back instead of delivering — the in-process writer
//! waits, the shared-memory receiver leaves samples in the writer's ring,
//! a TCP connection stops being read — so the writer's own keep_all queue
//! fills and its `publish` blocks (up to `keep_all_block_ms`, then fails)
//! the way it does for a slow network. When the reader takes samples out
//! and room frees, the paths that held back are woken.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

/// A callback that resumes a path that held back.
pub type RoomWaker = Arc<dyn Fn() + Send + Sync>;

/// Room in a bounded receive queue (see the module docs).
///
/// The counter and the "someone waits" flag are sequentially consistent: a
/// taker stores the count then reads the flag while a waiter stores the
/// flag then reads the count, and weaker orderings would let both miss the
/// other (a stalled path that is never woken).
pub struct Room {
    depth: usize,
    len: AtomicUsize,
    /// Someone waits for room (fast path of [`Room::taken`]).
    waiting: AtomicBool,
    wakers: Mutex<Vec<RoomWaker>>,
    cv: Condvar,
}

impl std::fmt::Debug for Room {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Room")
            .field("depth", &self.depth)
            .field("len", &self.len())
            .finish()
    }
}

impl Room {
    /// Room for `depth` items.
    pub fn new(depth: usize) -> Arc<Room> {
        Arc::new(Room {
            depth: depth.max(1),
            len: AtomicUsize::new(0),
            waiting: AtomicBool::new(false),
            wakers: Mutex::new(Vec::new()),
            cv: Condvar::new(),
        })
    }
    /// Items it holds room for.
    pub fn depth(&self) -> usize {
        self.depth
    }
    /// Items held now.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::SeqCst)
    }
    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether one more item fits.
    pub fn has_room(&self) -> bool {
        self.len() < self.depth
    }
    /// One item went in.
    pub fn put(&self) {
        self.len.fetch_add(1, Ordering::SeqCst);
    }
    /// `n` items came out: wakes whoever waits once there is room.
    pub fn taken(&self, n: usize) {
        if n == 0 {
            return;
        }
        let before = self
            .len
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| {
                Some(l.saturating_sub(n))
            })
            .unwrap_or(0);
        if self.waiting.load(Ordering::SeqCst) && before.saturating_sub(n) <= self.low_water() {
            self.wake();
        }
    }
    /// Waiters are woken once this few are held: a quarter of the room is
    /// free, so a path that resumes moves a batch, not one sample per wake.
    fn low_water(&self) -> usize {
        self.depth - (self.depth / 4).max(1)
    }
    fn wake(&self) {
        let wakers = {
            let mut w = self.wakers.lock();
            self.waiting.store(false, Ordering::SeqCst);
            std::mem::take(&mut *w)
        };
        self.cv.notify_all();
        for w in wakers {
            w();
        }
    }
    /// Calls `waker` once when a quarter of the room is free: at once if
    /// it is now.
    pub fn on_room(&self, waker: RoomWaker) {
        {
            let mut w = self.wakers.lock();
            self.waiting.store(true, Ordering::SeqCst);
            if self.len() > self.low_water() {
                w.push(waker);
                return;
            }
        }
        waker();
    }
    /// Waits until there is room or `until`: whether there is.
    pub fn wait_room(&self, until: Instant) -> bool {
        let mut w = self.wakers.lock();
        loop {
            self.waiting.store(true, Ordering::SeqCst);
            if self.has_room() {
                return true;
            }
            if self.cv.wait_until(&mut w, until).timed_out() {
                return self.has_room();
            }
        }
    }
}

/// One path's stall on a reader's [`Room`]: the path holds back while the
/// room is full and asks to be resumed once per stall, not once per look.
#[derive(Debug, Clone, Default)]
pub struct Stall(Arc<AtomicBool>);

impl Stall {
    /// Whether the path is stalled now (a waker is registered and has not
    /// run yet).
    pub fn is_stalled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Whether `room` is full; if it is, `resume` runs once when a quarter
    /// of it is free (registered only on the first look of a stall).
    pub fn full(&self, room: &Room, resume: impl Fn() + Send + Sync + 'static) -> bool {
        if room.has_room() {
            return false;
        }
        self.wait(room, resume);
        true
    }

    /// Registers `resume` for when room frees, unless this stall already
    /// did.
    pub fn wait(&self, room: &Room, resume: impl Fn() + Send + Sync + 'static) {
        if !self.0.swap(true, Ordering::AcqRel) {
            let flag = self.0.clone();
            room.on_room(Arc::new(move || {
                flag.store(false, Ordering::Release);
                resume();
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    #[test]
    fn a_full_room_wakes_its_waiters_when_items_are_taken() {
        let room = Room::new(2);
        room.put();
        assert!(room.has_room());
        room.put();
        assert!(!room.has_room());
        let woken = Arc::new(AtomicU32::new(0));
        let w = woken.clone();
        room.on_room(Arc::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        }));
        assert_eq!(woken.load(Ordering::Relaxed), 0);
        let r = room.clone();
        let t = std::thread::spawn(move || r.wait_room(Instant::now() + Duration::from_secs(5)));
        std::thread::sleep(Duration::from_millis(20));
        room.taken(1);
        assert!(t.join().unwrap());
        assert_eq!(woken.load(Ordering::Relaxed), 1, "woken once");
        room.taken(1);
        assert_eq!(woken.load(Ordering::Relaxed), 1);
        // Room already: the waker runs at once; a timed wait ends at once.
        let w = woken.clone();
        room.on_room(Arc::new(move || {
            w.fetch_add(1, Ordering::Relaxed);
        }));
        assert_eq!(woken.load(Ordering::Relaxed), 2);
        room.put();
        room.put();
        assert!(!room.wait_room(Instant::now() + Duration::from_millis(10)));
    }

    #[test]
    fn a_stall_registers_one_waker_however_often_it_looks() {
        let room = Room::new(4);
        for _ in 0..4 {
            room.put();
        }
        let stall = Stall::default();
        let woken = Arc::new(AtomicU32::new(0));
        for _ in 0..3 {
            let w = woken.clone();
            assert!(stall.full(&room, move || {
                w.fetch_add(1, Ordering::Relaxed);
            }));
        }
        assert!(stall.is_stalled());
        room.taken(1);
        assert_eq!(woken.load(Ordering::Relaxed), 1, "three looks, one waker");
        assert!(!stall.is_stalled());
        assert!(!stall.full(&room, || {}));
    }
}
