//! Cyclone DDS's log messages in ferry's log: errors as errors, warnings
//! as warnings, at most [`BURST`] per [`WINDOW`] — then one line counting
//! the rest — because a peer decides how often Cyclone warns (one warning
//! per malformed packet it is sent).

use std::ffi::c_char;
use std::sync::Once;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::ffi;

/// Messages logged per window; more are counted.
pub const BURST: u32 = 10;
/// The window.
pub const WINDOW: Duration = Duration::from_secs(10);

const FATAL: u32 = 1;
const ERROR: u32 = 2;
const WARNING: u32 = 4;

/// Routes Cyclone's log to ferry's, once per process (before the first
/// domain).
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    // SAFETY: registers a function that lives for the process.
    ONCE.call_once(|| unsafe { ffi::ferry_dds_set_log(on_log) });
}

/// One window: when it began, messages logged, messages held back.
struct Budget {
    start: Instant,
    logged: u32,
    held: u64,
}

impl Budget {
    fn new(now: Instant) -> Self {
        Budget {
            start: now,
            logged: 0,
            held: 0,
        }
    }

    /// Whether one more message may be logged now, and how many were held
    /// back in the window that just ended (if one did).
    fn admit(&mut self, now: Instant) -> (bool, u64) {
        let mut ended = 0;
        if now.duration_since(self.start) >= WINDOW {
            ended = self.held;
            *self = Budget::new(now);
        }
        if self.logged < BURST {
            self.logged += 1;
            (true, ended)
        } else {
            self.held += 1;
            (false, ended)
        }
    }
}

static BUDGET: Mutex<Option<Budget>> = Mutex::new(None);

extern "C" fn on_log(priority: u32, msg: *const c_char, len: usize) {
    // A panic must not cross into C.
    let _ = std::panic::catch_unwind(|| log(priority, msg, len));
}

fn log(priority: u32, msg: *const c_char, len: usize) {
    let now = Instant::now();
    let (log, held) = BUDGET
        .lock()
        .get_or_insert_with(|| Budget::new(now))
        .admit(now);
    if held > 0 {
        tracing::warn!("Cyclone DDS: {held} more message(s) in the last {WINDOW:?} not logged");
    }
    if !log || msg.is_null() {
        return;
    }
    // SAFETY: Cyclone hands `len` bytes valid for the call.
    let bytes = unsafe { std::slice::from_raw_parts(msg.cast::<u8>(), len) };
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end();
    if priority & (FATAL | ERROR) != 0 {
        tracing::error!("Cyclone DDS: {text}");
    } else if priority & WARNING != 0 {
        tracing::warn!("Cyclone DDS: {text}");
    } else {
        tracing::debug!("Cyclone DDS: {text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_logged_and_the_rest_counted_once_the_window_ends() {
        let t0 = Instant::now();
        let mut b = Budget::new(t0);
        let admitted = (0..100).filter(|_| b.admit(t0).0).count();
        assert_eq!(admitted, BURST as usize);
        let (ok, held) = b.admit(t0 + WINDOW);
        assert!(ok);
        assert_eq!(held, 100 - u64::from(BURST));
    }
}
