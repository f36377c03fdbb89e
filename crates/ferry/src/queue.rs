//! The receive queue of a subscriber: bounded by its history depth,
//! drop-oldest, with blocking and async waiting. A reliable keep_all
//! subscriber's queue has a [`Room`] instead: the paths stop delivering
//! while it is full (back-pressure to the writer), and it drops only past
//! twice its depth (a writer that does not block, such as keep_last).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::room::Room;

struct Inner<S> {
    items: VecDeque<S>,
    wakers: Vec<Waker>,
    /// No more items will come: waiters return.
    closed: bool,
}

/// Bounded FIFO: pushing into a full queue drops the oldest item.
pub(crate) struct SampleQueue<S> {
    inner: Mutex<Inner<S>>,
    cv: Condvar,
    /// Items kept before the oldest is dropped.
    depth: usize,
    /// Back-pressure (reliable keep_all).
    room: Option<Arc<Room>>,
}

impl<S> SampleQueue<S> {
    pub fn new(depth: usize) -> Self {
        SampleQueue {
            inner: Mutex::new(Inner {
                items: VecDeque::new(),
                wakers: Vec::new(),
                closed: false,
            }),
            cv: Condvar::new(),
            depth: depth.max(1),
            room: None,
        }
    }

    /// A queue that paths hold back for at `depth` items (see the module
    /// docs).
    pub fn with_room(depth: usize) -> Self {
        let room = Room::new(depth);
        SampleQueue {
            depth: room.depth() * 2,
            room: Some(room),
            ..Self::new(depth)
        }
    }

    /// Its room, with back-pressure.
    pub fn room(&self) -> Option<&Arc<Room>> {
        self.room.as_ref()
    }

    /// `n` items left the queue.
    fn took(&self, n: usize) {
        if let Some(r) = &self.room {
            r.taken(n);
        }
    }

    fn pop_front(&self, g: &mut Inner<S>) -> Option<S> {
        let s = g.items.pop_front();
        if s.is_some() {
            self.took(1);
        }
        s
    }

    /// Pushes; returns true if an old item was dropped to make room. A
    /// closed queue takes nothing.
    pub fn push(&self, s: S) -> bool {
        let mut g = self.inner.lock();
        if g.closed {
            return false;
        }
        let dropped = if g.items.len() >= self.depth {
            self.pop_front(&mut g);
            true
        } else {
            false
        };
        g.items.push_back(s);
        if let Some(r) = &self.room {
            r.put();
        }
        let wakers = std::mem::take(&mut g.wakers);
        drop(g);
        self.cv.notify_one();
        for w in wakers {
            w.wake();
        }
        dropped
    }

    pub fn try_pop(&self) -> Option<S> {
        self.pop_front(&mut self.inner.lock())
    }

    pub fn pop_timeout(&self, timeout: Duration) -> Option<S> {
        let deadline = Instant::now() + timeout;
        let mut g = self.inner.lock();
        loop {
            if let Some(s) = self.pop_front(&mut g) {
                return Some(s);
            }
            if self.cv.wait_until(&mut g, deadline).timed_out() {
                return self.pop_front(&mut g);
            }
        }
    }

    /// Waits for the next item; None once the queue is closed (what it
    /// still holds then is dropped: nobody wants it any more).
    pub fn pop_until_closed(&self) -> Option<S> {
        let mut g = self.inner.lock();
        loop {
            if g.closed {
                self.took(g.items.len());
                g.items.clear();
                return None;
            }
            if let Some(s) = self.pop_front(&mut g) {
                return Some(s);
            }
            self.cv.wait(&mut g);
        }
    }

    /// Ends [`SampleQueue::pop_until_closed`] waits.
    pub fn close(&self) {
        let mut g = self.inner.lock();
        g.closed = true;
        // Nobody reads any more: paths waiting for room go on (and drop).
        self.took(g.items.len());
        g.items.clear();
        drop(g);
        self.cv.notify_all();
    }

    pub fn len(&self) -> usize {
        self.inner.lock().items.len()
    }

    /// Waits without a thread: resolves with the next item.
    pub fn pop_async(&self) -> PopFuture<'_, S> {
        PopFuture { q: self }
    }
}

/// Future of [`SampleQueue::pop_async`].
pub(crate) struct PopFuture<'a, S> {
    q: &'a SampleQueue<S>,
}

impl<S> Future for PopFuture<'_, S> {
    type Output = S;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<S> {
        let mut g = self.q.inner.lock();
        if let Some(s) = self.q.pop_front(&mut g) {
            return Poll::Ready(s);
        }
        if !g.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            g.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_oldest_when_full() {
        let q = SampleQueue::new(2);
        assert!(!q.push(1));
        assert!(!q.push(2));
        assert!(q.push(3));
        assert_eq!(q.try_pop(), Some(2));
        assert_eq!(q.try_pop(), Some(3));
        assert_eq!(q.pop_timeout(Duration::from_millis(1)), None);
    }

    #[test]
    fn closing_ends_the_wait_and_takes_nothing_more() {
        let q = std::sync::Arc::new(SampleQueue::new(4));
        q.push(1);
        assert_eq!(q.pop_until_closed(), Some(1));
        let q2 = q.clone();
        let t = std::thread::spawn(move || q2.pop_until_closed());
        std::thread::sleep(Duration::from_millis(20));
        q.close();
        assert_eq!(t.join().expect("waiter"), None);
        assert!(!q.push(2));
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn a_queue_with_room_counts_what_it_holds_and_drops_only_past_twice_its_depth() {
        let q = SampleQueue::with_room(2);
        let room = q.room().unwrap().clone();
        assert!(!q.push(1));
        assert!(!q.push(2));
        assert!(!room.has_room());
        assert!(!q.push(3) && !q.push(4), "kept past its depth");
        assert!(q.push(5), "dropped past twice its depth");
        assert_eq!(q.try_pop(), Some(2));
        assert_eq!(room.len(), 3);
        q.close();
        assert!(room.is_empty() && room.has_room());
    }
}
