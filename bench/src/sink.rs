//! The throughput sink in a `serve` child, shared by both transports.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::proto::{self, KIND_END, KIND_MEASURE};

/// Counts what arrives between two end markers.
#[derive(Default)]
pub struct SinkCounter {
    first: Option<Instant>,
    /// Measured samples only (for the loss check).
    msgs: u64,
    bytes: u64,
    /// Every sample since the last reset, and per CLOCK_MONOTONIC
    /// millisecond the totals before its first sample: (ms, msgs, bytes).
    all_msgs: u64,
    all_bytes: u64,
    series: Vec<(u64, u64, u64)>,
    /// Samples / bytes since the clock was last read: the clock is read
    /// every 64 samples or 64 KiB (a read per 64 B sample would cost the
    /// receiving thread ~10 % at 2 M samples/s).
    unclocked: (u64, u64),
}

impl SinkCounter {
    /// Feeds one sample; returns the JSON line to print at an end marker.
    pub fn feed(&mut self, head: &[u8], len: usize) -> Option<serde_json::Value> {
        let (kind, run) = proto::parse(head)?;
        if kind == KIND_END || self.unclocked.0 >= 64 || self.unclocked.1 >= 64 * 1024 {
            // Samples since the last read are booked at this read's time
            // (at most 64 samples / 64 KiB late).
            let ms = proto::mono_ns() / 1_000_000;
            let before = (
                self.all_msgs - self.unclocked.0,
                self.all_bytes - self.unclocked.1,
            );
            if self.series.last().map(|e| e.0) != Some(ms) {
                self.series.push((ms, before.0, before.1));
            }
            self.unclocked = (0, 0);
        }
        if kind == KIND_END {
            let now = proto::mono_ns();
            let v = self.report(run, proto::parse_aux(head), now, false);
            *self = SinkCounter::default();
            return Some(v);
        }
        self.all_msgs += 1;
        self.all_bytes += len as u64;
        self.unclocked.0 += 1;
        self.unclocked.1 += len as u64;
        if kind == KIND_MEASURE {
            self.first.get_or_insert_with(Instant::now);
            self.msgs += 1;
            self.bytes += len as u64;
        }
        None
    }

    /// Samples that arrived from `t1_ns` on (1 ms resolution).
    fn since(&self, t1_ns: u64) -> (u64, u64) {
        let b = t1_ns / 1_000_000;
        let i = self.series.partition_point(|e| e.0 < b);
        match self.series.get(i) {
            Some(e) => (self.all_msgs - e.1, self.all_bytes - e.2),
            None => (0, 0),
        }
    }

    fn report(&self, run: u64, t1_ns: u64, end_ns: u64, forced: bool) -> serde_json::Value {
        let (win_msgs, win_bytes) = self.since(t1_ns);
        serde_json::json!({
            "run": run, "forced": forced,
            "msgs": self.msgs, "bytes": self.bytes,
            "first_to_end_secs": self.first.map(|f| f.elapsed().as_secs_f64()).unwrap_or(0.0),
            "win_msgs": win_msgs, "win_bytes": win_bytes,
            "win_secs": end_ns.saturating_sub(t1_ns) as f64 / 1e9,
        })
    }

    /// The counts so far for `run` (its end marker never arrived), over the
    /// window `t1_ns..t_end_ns`; resets.
    pub fn force(&mut self, run: u64, t1_ns: u64, t_end_ns: u64) -> serde_json::Value {
        let v = self.report(run, t1_ns, t_end_ns, true);
        *self = SinkCounter::default();
        v
    }
}

/// A child's stdin command handler: `report <run> <t1_ns> <t_end_ns>`
/// prints the counters.
pub fn on_command(counter: Arc<Mutex<SinkCounter>>) -> impl Fn(&str) + Send + 'static {
    move |line: &str| {
        let mut it = line.split_whitespace();
        if it.next() != Some("report") {
            return;
        }
        let mut num = || it.next().and_then(|x| x.parse::<u64>().ok());
        if let (Some(run), Some(t1), Some(t2)) = (num(), num(), num()) {
            let v = counter.lock().unwrap().force(run, t1, t2);
            proto::emit(&v);
        }
    }
}
