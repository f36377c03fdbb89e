//! Sub-millisecond wake-ups for the I/O loop.
//!
//! `epoll_wait` takes its timeout in whole milliseconds (mio rounds up), so
//! a deadline 100 µs away would fire 1 ms late. When the loop's next
//! deadline is closer than a millisecond it also arms this one-shot
//! `timerfd` (nanosecond resolution), which wakes the poll on time.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A one-shot relative `timerfd` on `CLOCK_MONOTONIC`.
pub(crate) struct PreciseTimer {
    fd: OwnedFd,
}

impl PreciseTimer {
    /// Creates a disarmed timer (non-blocking, close-on-exec).
    pub fn new() -> io::Result<PreciseTimer> {
        // SAFETY: timerfd_create takes no pointers; a non-negative result
        // is a new descriptor that we own from here on.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(PreciseTimer {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Fires once, `after` from now (replacing any earlier arming). A zero
    /// `after` would disarm a timerfd, so it is raised to 1 ns.
    pub fn arm(&self, after: Duration) -> io::Result<()> {
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: `spec` is a valid itimerspec for the call's duration; the
        // old value is not asked for (null).
        let r =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Consumes an expiry so the descriptor stops being readable.
    pub fn clear(&self) {
        let mut n = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `n`, which has 8.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), n.as_mut_ptr().cast(), n.len()) };
    }

    /// The descriptor the poll watches.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn wakes_a_poll_well_before_a_millisecond() {
        let timer = PreciseTimer::new().unwrap();
        let mut poll = mio::Poll::new().unwrap();
        poll.registry()
            .register(
                &mut mio::unix::SourceFd(&timer.fd()),
                mio::Token(1),
                mio::Interest::READABLE,
            )
            .unwrap();
        let mut events = mio::Events::with_capacity(4);
        let mut best = Duration::MAX;
        // The best of a few tries: a loaded machine may deschedule us.
        for _ in 0..20 {
            let t0 = Instant::now();
            timer.arm(Duration::from_micros(100)).unwrap();
            poll.poll(&mut events, Some(Duration::from_millis(50)))
                .unwrap();
            let took = t0.elapsed();
            assert!(
                events.iter().any(|e| e.token() == mio::Token(1)),
                "the timer fired"
            );
            timer.clear();
            best = best.min(took);
        }
        assert!(
            best >= Duration::from_micros(100),
            "not before its time: {best:?}"
        );
        assert!(
            best < Duration::from_micros(900),
            "woke at {best:?}, not within the millisecond"
        );
    }
}
