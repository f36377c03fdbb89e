//! Pacing rate from the reader's feedback.
//!
//! The configured link rate is the ceiling and the start; the rate actually
//! paced follows what the path delivers. The signal is the reader's
//! **busy-time receive rate** (`rate_kBps` in every ACKNACK: bytes over the
//! time between arrivals at most 2 ms apart, by kernel receive stamps, so
//! idle time between samples and repair round trips do not count, while a
//! lost datagram's slot does). Loss alone is never taken as congestion: on a
//! Wi-Fi link with 20 % random loss a loss-driven pacer would slow down for
//! nothing. Queueing delay is not used either: on a bursty 30 Hz stream the
//! queue each burst builds is transient and harmless, and cutting for it
//! only stretches the next burst (measured on the lab: 512 KB at 20 % loss
//! went from 29 ms to 64 ms mean latency with a delay rule).
//!
//! One decision per smoothed RTT:
//! - far less arrives than is sent — the receive rate, corrected for the
//!   loss the reader reports when that loss is plausibly random (< 30 %),
//!   below 0.35 × the paced rate (a path much slower than configured):
//!   the rate becomes that receive rate, and the pacer is *engaged*: from
//!   then on it paces at most 1.25 × the largest receive rate of the last
//!   10 s, so it follows the path up as far as the path delivers;
//! - otherwise, while the pacer is the limit (data held back within the
//!   last RTT): × 1.125 per RTT, within that cap when engaged, up to the
//!   ceiling (reaching it disengages).
//!
//! The 0.35 threshold and the loss correction keep a jittery, 20 %-loss
//! radio link from ever looking slower than configured (on the lab its
//! busy-time rate reads 0.5–0.7 × the pacing rate); the price is that a
//! path between 0.35× and 1× of `udp_link_mbps` is not detected.

use std::time::{Duration, Instant};

/// Minimum RTT is the smallest sample of the last one to two windows.
const MIN_RTT_WINDOW: Duration = Duration::from_secs(5);
/// A (loss-corrected) receive rate below this share of the paced rate is a
/// slower path.
const MISMATCH: f64 = 0.35;
/// Reported loss below this is taken as random and corrected for.
const RANDOM_LOSS: f64 = 0.3;
const GROW: f64 = 1.125;
/// Engaged: pace at most this much above the largest recent receive rate.
const HEADROOM: f64 = 1.25;
/// Window of the largest receive rate.
const DELIVERY_WINDOW: Duration = Duration::from_secs(10);
/// Slowest pacing the controller chooses, bytes/s (128 kbit/s).
const FLOOR: f64 = 16_000.0;

#[derive(Debug, Clone)]
pub(crate) struct RateControl {
    ceiling: f64,
    rate: f64,
    /// Smallest RTT (µs) in the current and in the previous window.
    min_now: f64,
    min_prev: f64,
    window_start: Instant,
    /// No change before this (one RTT after the last).
    next_change: Instant,
    /// Last time the pacer, not the application, held data back.
    limited_at: Option<Instant>,
    /// Engaged (after a cut): the largest receive rate of the current
    /// window (bytes/s) and when that window started; 0: not engaged.
    delivered: f64,
    delivered_since: Instant,
    cuts: u64,
}

impl RateControl {
    pub fn new(ceiling: u64, now: Instant) -> Self {
        RateControl {
            ceiling: ceiling as f64,
            rate: ceiling as f64,
            min_now: f64::INFINITY,
            min_prev: f64::INFINITY,
            window_start: now,
            next_change: now,
            limited_at: None,
            delivered: 0.0,
            delivered_since: now,
            cuts: 0,
        }
    }

    pub fn rate(&self) -> u64 {
        self.rate as u64
    }

    /// Times the rate was cut to a slower path.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// Smallest recent RTT, µs (0: none yet).
    pub fn min_rtt_us(&self) -> f64 {
        let m = self.min_now.min(self.min_prev);
        if m.is_finite() {
            m
        } else {
            0.0
        }
    }

    /// A new ceiling (configuration); the rate follows it down at once.
    pub fn set_ceiling(&mut self, ceiling: u64) {
        self.ceiling = ceiling as f64;
        self.rate = self.rate.min(self.ceiling);
    }

    /// The pacer held a datagram back at `now`.
    pub fn limited(&mut self, now: Instant) {
        self.limited_at = Some(now);
    }

    /// One RTT sample `rtt_us` (smoothed: `srtt_us`) with the reader's
    /// busy-time receive rate (bytes/s, 0: unknown) and reported loss (0..1).
    /// Returns the new rate if it changed.
    pub fn on_rtt(
        &mut self,
        now: Instant,
        rtt_us: f64,
        srtt_us: f64,
        recv: u64,
        loss: f64,
    ) -> Option<u64> {
        if now.saturating_duration_since(self.window_start) >= MIN_RTT_WINDOW {
            self.min_prev = self.min_now;
            self.min_now = f64::INFINITY;
            self.window_start = now;
        }
        self.min_now = self.min_now.min(rtt_us);
        let recv = recv as f64;
        if self.delivered > 0.0 && recv > 0.0 {
            if now.saturating_duration_since(self.delivered_since) >= DELIVERY_WINDOW {
                self.delivered = recv;
                self.delivered_since = now;
            } else {
                self.delivered = self.delivered.max(recv);
            }
        }
        if now < self.next_change {
            return None;
        }
        let rtt = Duration::from_micros(srtt_us.max(self.min_rtt_us()) as u64);
        let before = self.rate;
        let limited = self
            .limited_at
            .is_some_and(|t| now.saturating_duration_since(t) <= rtt);
        let corrected = if loss < RANDOM_LOSS {
            recv / (1.0 - loss.max(0.0))
        } else {
            recv
        };
        if recv > 0.0 && corrected < MISMATCH * self.rate {
            self.rate = recv.max(FLOOR.min(self.ceiling));
            self.delivered = recv;
            self.delivered_since = now;
            self.cuts += 1;
        } else if self.rate < self.ceiling && limited {
            let mut r = (self.rate * GROW).min(self.ceiling);
            if self.delivered > 0.0 {
                r = r.min(self.delivered * HEADROOM).max(self.rate);
            }
            if r >= self.ceiling {
                self.delivered = 0.0;
            }
            self.rate = r;
        } else {
            return None;
        }
        self.next_change = now + rtt.max(Duration::from_millis(1));
        (self.rate != before).then_some(self.rate as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_loss_keeps_the_ceiling() {
        let t0 = Instant::now();
        let mut rc = RateControl::new(10_000_000, t0);
        for i in 0..1000u64 {
            let now = t0 + Duration::from_millis(5 * i);
            rc.limited(now);
            // The reader gets half the rate at 25 % reported loss (jitter
            // stretches its busy time): not a slower path.
            let rtt = 3000.0 + (i % 7) as f64 * 300.0;
            rc.on_rtt(now, rtt, 4000.0, 5_000_000, 0.25);
        }
        assert_eq!(rc.rate(), 10_000_000);
        assert_eq!(rc.cuts(), 0);
    }

    #[test]
    fn a_slower_path_sets_the_rate_which_follows_the_path_back_up() {
        let t0 = Instant::now();
        let mut rc = RateControl::new(37_500_000, t0);
        // 93 % loss is no radio: 2.5 MB/s arrive of 37.5.
        assert_eq!(
            rc.on_rtt(t0, 3000.0, 3000.0, 2_500_000, 0.93),
            Some(2_500_000)
        );
        // Not again within one RTT.
        assert_eq!(rc.on_rtt(t0, 3000.0, 3000.0, 1_000_000, 0.0), None);
        // Held back by the pacer: grows, but at most 1.25 x what arrives.
        let mut now = t0;
        for _ in 0..50 {
            now += Duration::from_millis(4);
            rc.limited(now);
            rc.on_rtt(now, 3000.0, 3000.0, 2_500_000, 0.2);
        }
        assert_eq!(rc.rate(), 3_125_000);
        // The path got faster: what arrives rises, the rate follows.
        for _ in 0..200 {
            now += Duration::from_millis(4);
            rc.limited(now);
            let recv = (rc.rate() as f64 * 0.95) as u64;
            rc.on_rtt(now, 3000.0, 3000.0, recv, 0.0);
        }
        assert_eq!(rc.rate(), 37_500_000, "back at the ceiling");
        assert_eq!(rc.cuts(), 1);
    }

    #[test]
    fn an_application_below_the_rate_does_not_raise_it() {
        let t0 = Instant::now();
        let mut rc = RateControl::new(10_000_000, t0);
        rc.on_rtt(t0, 3000.0, 3000.0, 1_000_000, 0.0);
        let low = rc.rate();
        assert_eq!(low, 1_000_000);
        for i in 0..100u64 {
            let now = t0 + Duration::from_millis(40 + 4 * i);
            rc.on_rtt(now, 3000.0, 3000.0, 0, 0.0);
        }
        assert_eq!(rc.rate(), low);
    }
}
