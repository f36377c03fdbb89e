//! Token-bucket pacer: datagrams leave at the link rate, never in bursts
//! larger than a few datagrams.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub(crate) struct Pacer {
    rate: f64,
    burst: f64,
    /// Burst length in seconds of the rate, and its floor in bytes: a slower
    /// rate gets a proportionally smaller burst.
    burst_secs: f64,
    min_burst: f64,
    tokens: f64,
    last: Instant,
}

impl Pacer {
    /// `rate` in bytes/s (0 = unpaced); bursts of at most `burst` bytes at
    /// that rate, scaled with later rates but never below `min_burst`.
    pub fn new(rate: u64, burst: usize, min_burst: usize, now: Instant) -> Self {
        let burst = burst.max(min_burst) as f64;
        Pacer {
            rate: rate as f64,
            burst,
            burst_secs: if rate > 0 { burst / rate as f64 } else { 0.0 },
            min_burst: min_burst as f64,
            tokens: burst,
            last: now,
        }
    }

    pub fn rate(&self) -> u64 {
        self.rate as u64
    }

    pub fn set_rate(&mut self, rate: u64) {
        self.rate = rate as f64;
        if self.burst_secs > 0.0 {
            self.burst = (self.rate * self.burst_secs).max(self.min_burst);
            self.tokens = self.tokens.min(self.burst);
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
    }

    /// Whether a datagram of `len` may leave now; spends the tokens if so.
    pub fn try_send(&mut self, now: Instant, len: usize) -> bool {
        if self.rate <= 0.0 {
            return true;
        }
        self.refill(now);
        if self.tokens >= 0.0 {
            // Allow going negative by one datagram: the debt delays the next.
            self.tokens -= len as f64;
            true
        } else {
            false
        }
    }

    /// When the next datagram may leave (None: now).
    pub fn next_send(&self, now: Instant) -> Option<Instant> {
        if self.rate <= 0.0 {
            return None;
        }
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        let tokens = (self.tokens + dt * self.rate).min(self.burst);
        if tokens >= 0.0 {
            None
        } else {
            Some(now + Duration::from_secs_f64(-tokens / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paces_to_the_rate() {
        let t0 = Instant::now();
        let mut p = Pacer::new(1_000_000, 3000, 3000, t0);
        let mut now = t0;
        let mut sent = 0;
        while now < t0 + Duration::from_secs(1) {
            if p.try_send(now, 1000) {
                sent += 1;
            } else {
                now = p.next_send(now).unwrap_or(now + Duration::from_micros(1));
            }
        }
        assert!(
            (1000..=1005).contains(&sent),
            "{sent} datagrams of 1000 B in 1 s at 1 MB/s"
        );
    }
}
