//! Futex wait/wake on a 32-bit word in shared memory (not the process-private
//! flavour: waiter and waker are different processes).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `word` holds `expected`, at most `timeout`. Returns early on
/// a wake, a signal or a changed value; callers re-check their condition.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: the word lives in a mapping that outlives the call; FUTEX_WAIT
    // only reads it.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every waiter on `word`.
pub fn wake_all(word: &AtomicU32) {
    // SAFETY: as for `wait`.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn wait_returns_on_wake_and_on_timeout() {
        let w = Arc::new(AtomicU32::new(0));
        let t = Instant::now();
        wait(&w, 0, Duration::from_millis(20));
        assert!(t.elapsed() >= Duration::from_millis(15));
        // A changed value returns at once.
        w.store(1, Ordering::SeqCst);
        let t = Instant::now();
        wait(&w, 0, Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(1));
        let w2 = w.clone();
        let h = std::thread::spawn(move || {
            let t = Instant::now();
            wait(&w2, 1, Duration::from_secs(5));
            t.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        w.store(2, Ordering::SeqCst);
        wake_all(&w);
        assert!(h.join().unwrap() < Duration::from_secs(2));
    }
}
