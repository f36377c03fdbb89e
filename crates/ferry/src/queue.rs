//! The receive queue of a subscriber: bounded by its history depth,
//! drop-oldest, with blocking and async waiting.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

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
    depth: usize,
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
        }
    }

    /// Pushes; returns true if an old item was dropped to make room. A
    /// closed queue takes nothing.
    pub fn push(&self, s: S) -> bool {
        let mut g = self.inner.lock();
        if g.closed {
            return false;
        }
        let dropped = if g.items.len() >= self.depth {
            g.items.pop_front();
            true
        } else {
            false
        };
        g.items.push_back(s);
        let wakers = std::mem::take(&mut g.wakers);
        drop(g);
        self.cv.notify_one();
        for w in wakers {
            w.wake();
        }
        dropped
    }

    pub fn try_pop(&self) -> Option<S> {
        self.inner.lock().items.pop_front()
    }

    pub fn pop_timeout(&self, timeout: Duration) -> Option<S> {
        let deadline = Instant::now() + timeout;
        let mut g = self.inner.lock();
        loop {
            if let Some(s) = g.items.pop_front() {
                return Some(s);
            }
            if self.cv.wait_until(&mut g, deadline).timed_out() {
                return g.items.pop_front();
            }
        }
    }

    /// Waits for the next item; None once the queue is closed (what it
    /// still holds then is dropped: nobody wants it any more).
    pub fn pop_until_closed(&self) -> Option<S> {
        let mut g = self.inner.lock();
        loop {
            if g.closed {
                g.items.clear();
                return None;
            }
            if let Some(s) = g.items.pop_front() {
                return Some(s);
            }
            self.cv.wait(&mut g);
        }
    }

    /// Ends [`SampleQueue::pop_until_closed`] waits.
    pub fn close(&self) {
        self.inner.lock().closed = true;
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
        if let Some(s) = g.items.pop_front() {
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
}
