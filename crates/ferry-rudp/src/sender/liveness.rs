//! When the writer speaks without data: heartbeats while samples are
//! unacknowledged, right after a burst, and probes in an outage.

use std::time::{Duration, Instant};

use super::{Sender, PROBE_FAST_FOR, PROBE_SLOW, REORDER_US};

impl Sender {
    /// Heartbeat period: half the publish interval (n = 2r), but at most
    /// a round trip and its variation while data is unacknowledged, within
    /// bounds. A heartbeat is what makes a reader NACK again after a lost
    /// NACK, a lost heartbeat or a lost repair; at 20 % loss both ways one
    /// heartbeat/answer pair in three is lost, and half a publish interval
    /// (17 ms at 30 Hz) per loss was most of the latency of the slowest
    /// tenth of samples. Spurious heartbeats cost ~40 bytes.
    pub(super) fn heartbeat_period(&self) -> Duration {
        let unacked = self.acked < self.next_seq;
        if !unacked {
            return self.cfg.heartbeat_idle;
        }
        let mut period = match self.write_interval {
            Some(i) if i > 0.0 => Duration::from_secs_f64(i / 2.0),
            _ => self.cfg.heartbeat_max,
        };
        if self.srtt_us > 0.0 {
            let round = self.srtt_us + 2.0 * self.rttvar_us + f64::from(REORDER_US);
            period = period.min(Duration::from_micros(round as u64));
        }
        period.clamp(self.cfg.heartbeat_min, self.cfg.heartbeat_max)
    }

    /// Time to the next probe in an outage: short for the first
    /// [`PROBE_FAST_FOR`] (the link's return is noticed within ~50 ms),
    /// then doubling up to [`PROBE_SLOW`] (a dead link is not kept busy).
    pub(super) fn probe_period(&mut self, now: Instant) -> Duration {
        let half_rtt = Duration::from_micros((self.srtt_us / 2.0) as u64);
        let fast = Duration::from_millis(50).saturating_sub(half_rtt).clamp(
            Duration::from_millis(10),
            self.cfg.probe_interval.max(Duration::from_millis(10)),
        );
        if now.saturating_duration_since(self.silent_at) < PROBE_FAST_FOR {
            return fast;
        }
        self.probe_gap = (self.probe_gap * 2).clamp(fast, PROBE_SLOW.max(fast));
        self.probe_gap
    }

    /// A sign of life from the peer's host (any datagram from it, on
    /// another stream too): in an outage, probe now and fast again — the
    /// link may be back, and a backed-off probe would notice only a second
    /// later.
    pub fn peer_heard(&mut self, now: Instant) {
        if self.silent {
            self.silent_at = now;
            self.probe_gap = Duration::ZERO;
            self.heartbeat_soon(now);
        }
    }

    /// Since when the peer has been silent while data was outstanding.
    pub(super) fn silent_since(&self) -> Instant {
        self.last_feedback.max(self.waiting_since)
    }

    pub(super) fn silence_limit(&self) -> Duration {
        self.cfg
            .silence
            .max(Duration::from_micros((8.0 * self.srtt_us) as u64))
    }

    /// Brings the next heartbeat forward to just after a burst that ends
    /// now: REORDER later, so that the NACK answering it may name every
    /// datagram of the burst as lost (a heartbeat right behind the burst
    /// covered none of its last millisecond, and a lost tail waited for the
    /// next periodic heartbeat: tens of ms at 30 Hz).
    pub(super) fn tail_heartbeat(&mut self, now: Instant) {
        let at = now + Duration::from_micros(u64::from(REORDER_US) + 1);
        let earliest = self
            .last_heartbeat
            .map_or(at, |t| (t + self.cfg.heartbeat_min).max(at));
        self.next_heartbeat = self.next_heartbeat.min(earliest);
    }

    /// Brings the next heartbeat forward to now, at most one per `heartbeat_min`.
    pub(super) fn heartbeat_soon(&mut self, now: Instant) {
        let earliest = self
            .last_heartbeat
            .map_or(now, |t| (t + self.cfg.heartbeat_min).max(now));
        self.next_heartbeat = self.next_heartbeat.min(earliest);
    }
}
