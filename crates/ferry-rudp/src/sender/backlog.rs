//! Back-pressure: the bytes not yet sent the first time are bounded by time
//! at the pacing rate, so that latency stays bounded when the application
//! offers more than the path carries (instead of growing with a history
//! that holds seconds of the path).
//!
//! A new sample of `L` bytes is admitted when the unsent backlog `U`
//! (fresh fragments and recovery shards of earlier samples) is at most
//! `max(R × BACKLOG_TIME − L, R × WAKE_TIME)`, `R` the pacing rate: the
//! backlog with the new sample stays within `BACKLOG_TIME` of the path,
//! except that `WAKE_TIME` may always wait ahead (the path stays busy while
//! a blocked writer wakes). Bursts of small samples (a loop publishing a
//! thousand 1 KB messages) within `BACKLOG_TIME` go out whole; a sample
//! larger than that finds at most `WAKE_TIME` ahead of it, so its latency
//! from the write stays within `WAKE_TIME + L / R + RTT / 2`, and from the
//! moment the application called a `publish` that blocked for the sample
//! ahead within about `2 L / R + RTT` (issue 20's bound above capacity).
//! (A first rule, `max(L, R × BACKLOG_TIME)`, let a whole sample wait ahead
//! of each new one: 3 L / R from the call, 145 ms for 256 KB at 120 % of a
//! 50 Mbit/s kernel link where the bound is 82 ms.) Otherwise keep_last (and best effort) drops the oldest
//! *entirely unsent* samples — a dropped sample in the middle of the
//! history stays as a tombstone (no data, no fragments; the heartbeat's
//! `first` skips it once the samples before it are acknowledged, so the
//! reader gives it up) — and reliable keep_all refuses the write with
//! [`WriteError::Backlog`] (the driver blocks up to `keep_all_block_ms`).
//!
//! In an outage the rule is off: only the history bounds apply, so a large
//! `udp_history_mb` still rides out an outage. (Before the reader's first
//! answer it holds: a driver that sends nothing until then makes keep_all
//! wait for the handshake instead of piling up seconds of samples.) When
//! the outage ends, the unsent backlog then becomes an allowance that only
//! shrinks (each write lowers it to the backlog it finds; repairs sent
//! since are credited, as they took the path first): writes go on as long
//! as the backlog does not grow, and it drains at the path's rate; once it
//! is under the rule, the rule alone applies.

use std::time::Duration;

use super::{Entry, Sender, WriteError};

/// A backlog this long at the pacing rate is never refused, so an
/// application burst of small samples is not thinned out.
pub const BACKLOG_TIME: Duration = Duration::from_millis(20);

/// This much of the path may always wait ahead of a new sample: it keeps
/// the path busy while a writer blocked by back-pressure wakes and writes.
pub const WAKE_TIME: Duration = Duration::from_millis(2);

impl Entry {
    /// A sample dropped unsent from the middle of the history.
    pub(super) fn is_tombstone(&self) -> bool {
        self.frags == 0
    }

    /// Bytes of this sample not yet sent the first time when its next
    /// fresh datagram is `next` (data fragments, then recovery shards).
    pub(super) fn unsent_from(&self, next: u16) -> usize {
        if self.is_tombstone() {
            return 0;
        }
        let data = self
            .data
            .len()
            .saturating_sub(usize::from(next.min(self.frags)) * self.piece);
        let shards_sent = usize::from(next.saturating_sub(self.frags));
        let shard = self.fec.first().map_or(0, Vec::len);
        data + self.fec.len().saturating_sub(shards_sent) * shard
    }
}

impl Sender {
    /// The most unsent bytes a new sample of `len` bytes may find ahead of
    /// it, or None when the rule is off (not flowing, or unpaced).
    fn backlog_limit(&self, len: usize) -> Option<usize> {
        // In start-up the pacing rate is a guess from below: not a reason to
        // drop a burst.
        let rate = if self.model() {
            self.cc.path_rate()
        } else {
            self.pacer.rate()
        };
        if rate == 0 || self.silent {
            return None;
        }
        let at_rate = |t: Duration| (rate as f64 * t.as_secs_f64()) as usize;
        Some(
            at_rate(BACKLOG_TIME)
                .saturating_sub(len)
                .max(at_rate(WAKE_TIME)),
        )
    }

    /// Back from an outage: what waits now may drain, but must not grow.
    pub(super) fn flowing_again(&mut self) {
        self.allowance = Some((self.unsent, self.repaired_bytes));
    }

    /// Applies the rule before a sample of `len` bytes joins the history:
    /// keep_last drops the oldest unsent samples, keep_all refuses.
    pub(super) fn make_room(&mut self, len: usize) -> Result<(), WriteError> {
        let Some(mut limit) = self.backlog_limit(len) else {
            return Ok(());
        };
        if let Some((a, mark)) = self.allowance {
            // Repairs of what the outage lost go first: what they sent
            // since is credited (the backlog would have drained by that).
            let a = a + (self.repaired_bytes - mark) as usize;
            let mark = self.repaired_bytes;
            if self.unsent <= a {
                self.allowance = Some((self.unsent, mark)).filter(|&(u, _)| u > limit);
                return Ok(());
            }
            // Grown: back to the allowance, not to the rule.
            self.allowance = Some((a, mark));
            limit = limit.max(a);
        }
        while self.unsent > limit {
            if self.cfg.keep_all && self.cfg.reliable {
                self.stats.backpressure += 1;
                return Err(WriteError::Backlog {
                    unsent: self.unsent,
                    limit,
                });
            }
            // The oldest sample none of which has gone out yet.
            let index = usize::from(self.fresh_frag > 0);
            let Some(&seq) = self.fresh.get(index) else {
                break; // only a partly sent one is left: it goes on
            };
            self.fresh.remove(index);
            self.tombstone(seq);
            self.stats.dropped += 1;
        }
        Ok(())
    }

    /// Empties unsent sample `seq` (already out of `fresh`), keeping its
    /// place in the sequence.
    fn tombstone(&mut self, seq: u64) {
        let Some(e) = self.entry_mut(seq) else {
            return;
        };
        let (unsent, bytes) = (e.unsent_from(0), e.data.len());
        e.data = bytes::Bytes::new();
        e.frags = 0;
        e.fec = Vec::new();
        e.recovery = 0;
        e.sent = Vec::new();
        self.unsent -= unsent;
        self.history_bytes -= bytes;
        self.drop_leading_tombstones();
    }

    /// Tombstones at the front of the history have nothing before them
    /// left to acknowledge: forget them, so that the heartbeat's `first`
    /// tells the reader to stop waiting for them.
    pub(super) fn drop_leading_tombstones(&mut self) {
        while self.history.front().is_some_and(Entry::is_tombstone) {
            self.history.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use ferry_testkit::{LinkConfig, SimLink};

    use crate::{Receiver, ReceiverConfig, Sender, SenderConfig};

    /// Bytes not yet sent the first time, recounted from the history.
    fn unsent_recount(tx: &Sender) -> usize {
        tx.fresh
            .iter()
            .enumerate()
            .filter_map(|(i, &seq)| {
                let next = if i == 0 { tx.fresh_frag } else { 0 };
                Some(tx.entry(seq)?.unsent_from(next))
            })
            .sum()
    }

    /// The running count of unsent bytes matches a recount after every
    /// step, through loss (FEC shards), keep_last drops, tombstones and
    /// repairs, for every mix of sample sizes.
    #[test]
    fn the_unsent_count_stays_exact() {
        for seed in 0..6u64 {
            let t0 = Instant::now();
            let link = LinkConfig {
                rate: 2_000_000,
                loss: 0.05 * (seed % 3) as f64,
                ..LinkConfig::default()
            };
            let mut fwd = SimLink::new(link.clone(), seed, t0);
            let mut back = SimLink::new(link, seed + 100, t0);
            let mut cfg = SenderConfig::new(1);
            cfg.rate = 2_000_000;
            cfg.adaptive_rate = false;
            cfg.reliable = seed % 2 == 0;
            let mut tx = Sender::new(cfg, t0);
            let mut rx = Receiver::new(ReceiverConfig::new(1), t0);
            let mut buf = Vec::new();
            let mut tombstones = 0;
            for step in 0..3000u64 {
                let now = t0 + Duration::from_micros(500 * step);
                if step % 20 == 0 {
                    let len = [10, 5_000, 60_000, 150_000][(step / 20 % 4) as usize];
                    tx.write(now, Bytes::from(vec![step as u8; len]), step)
                        .unwrap();
                }
                tx.handle_timeout(now);
                while tx.poll_transmit(now, &mut buf) {
                    fwd.send(now, buf.clone());
                }
                while let Some(d) = fwd.recv(now) {
                    let _ = rx.handle_datagram(now, &d);
                }
                rx.handle_timeout(now);
                while rx.poll_transmit(&mut buf) {
                    back.send(now, buf.clone());
                }
                while let Some(d) = back.recv(now) {
                    tx.handle_datagram(now, &d).unwrap();
                }
                while rx.poll_sample().is_some() {}
                assert_eq!(tx.unsent, unsent_recount(&tx), "seed {seed} step {step}");
                tombstones += tx.history.iter().filter(|e| e.is_tombstone()).count();
            }
            assert!(
                tx.stats().dropped > 0,
                "seed {seed}: the rule never dropped"
            );
            if tx.cfg.reliable {
                assert!(tombstones > 0, "seed {seed}: no tombstone was made");
            }
        }
    }
}
