//! Events a port reports about its peers: matches, incompatibilities,
//! deadlines. Each port keeps a bounded queue of them.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// Most events kept per port; the oldest are dropped beyond this.
const MAX_EVENTS: usize = 256;

pub use ferry_conn::{PortEvent, UnmatchReason};

/// A bounded queue of port events.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    q: Mutex<VecDeque<PortEvent>>,
    cv: Condvar,
}

impl EventQueue {
    pub fn push(&self, e: PortEvent) {
        let mut q = self.q.lock();
        if q.len() >= MAX_EVENTS {
            q.pop_front();
        }
        q.push_back(e);
        self.cv.notify_all();
    }

    pub fn try_next(&self) -> Option<PortEvent> {
        self.q.lock().pop_front()
    }

    pub fn next_timeout(&self, timeout: Duration) -> Option<PortEvent> {
        let deadline = std::time::Instant::now() + timeout;
        let mut q = self.q.lock();
        loop {
            if let Some(e) = q.pop_front() {
                return Some(e);
            }
            if self.cv.wait_until(&mut q, deadline).timed_out() {
                return q.pop_front();
            }
        }
    }
}
