//! Which fragments a NACK's names are to be repeated: the reader names every
//! fragment it lacks, also those still in flight, and the writer repeats
//! only those the reader's own report shows lost.

use std::time::Instant;

use ferry_wire::rudp::AckNack;

use super::{entry_in, marks::SendRec, Entry, Sender, REORDER_US};
use crate::micros;

/// A fragment sent this many datagrams before the newest one the reader
/// has is lost rather than reordered (TCP's duplicate-ACK threshold): at
/// 300 Mbit/s a whole 32 KB sample leaves within REORDER, so time alone
/// never named one of its fragments lost, and each such loss waited for a
/// heartbeat instead.
const REORDER_DATAGRAMS: u64 = 3;

/// What one ACKNACK proves about the datagrams sent before it.
pub(super) struct Evidence {
    /// Sent this long ago (µs): lost whatever the reports say.
    guard: u32,
    now_us: u32,
    /// `sent_us` of the heartbeat the ACKNACK answers, less REORDER.
    heartbeat: Option<u32>,
    /// The send record of the newest datagram the reader has.
    arrived: Option<SendRec>,
    /// That datagram: (sample, fragment or shard index).
    mark: Option<(u64, u32)>,
}

impl Evidence {
    /// The evidence in `a`, read by `s` at `now`.
    pub(super) fn new(s: &Sender, now: Instant, a: &AckNack) -> Self {
        // Age alone (older than four RFC 6298 RTOs, srtt + 4 rttvar) is a
        // last resort: a queue that builds within a round (a burst into a
        // tbf) holds fragments longer than any RTT measured before it, and
        // repeating them by age cost 5-12 % of a saturated 50 Mbit/s link
        // at 0 % loss (`bench/results/grid.md`, k-loss0).
        let guard = 4 * ((s.srtt_us + 4.0 * s.rttvar_us) as u32).max(1000);
        let arrived = a.arrival.as_ref().and_then(|m| {
            entry_in(&s.history, m.seq)?
                .sent
                .get(usize::from(m.frag))
                .copied()
        });
        Evidence {
            guard,
            now_us: micros(s.epoch, now),
            heartbeat: (a.echo_us != 0).then(|| a.echo_us.wrapping_sub(REORDER_US)),
            arrived: arrived.filter(|r| r.at_us != 0),
            mark: a.arrival.as_ref().map(|m| (m.seq, u32::from(m.frag))),
        }
    }

    /// Whether fragment `frag` of `e`, named missing, is to be repeated:
    /// it is lost, and the sample cannot be rebuilt from its shards.
    pub(super) fn repeat(&self, e: &Entry, frag: u16) -> bool {
        let Some(sent) = e.sent.get(usize::from(frag)).filter(|_| frag < e.frags) else {
            return false;
        };
        self.lost(sent) && self.shards_in(e)
    }

    fn old(&self, t: u32) -> bool {
        self.now_us.wrapping_sub(t) >= self.guard
    }

    /// Lost: sent before the heartbeat answered or well before the newest
    /// datagram the reader has (a link delivers in order, give or take
    /// REORDER in time or REORDER_DATAGRAMS in count), or very long ago.
    fn lost(&self, r: &SendRec) -> bool {
        if r.at_us == 0 {
            return false;
        }
        let after = |a: u32| (a.wrapping_sub(r.at_us) as i32) >= 0;
        let by_mark = self.arrived.is_some_and(|m| {
            after(m.at_us.wrapping_sub(REORDER_US))
                || !m.resent && m.ctr >= r.ctr.saturating_add(REORDER_DATAGRAMS)
        });
        self.old(r.at_us) || self.heartbeat.is_some_and(after) || by_mark
    }

    /// A sample with recovery shards may still be rebuilt from them: its
    /// fragments are repeated only once the last shard is in, or lost —
    /// the reader has it or anything sent after it (no slack: nothing of
    /// the sample comes later), the heartbeat answered followed it, or it
    /// is very old.
    fn shards_in(&self, e: &Entry) -> bool {
        if e.recovery == 0 {
            return true;
        }
        let Some(last) = e.sent.last().filter(|r| r.at_us != 0) else {
            return false;
        };
        let after = |a: u32| (a.wrapping_sub(last.at_us) as i32) >= 0;
        let last_index = u32::from(e.frags) + u32::from(e.recovery) - 1;
        self.old(last.at_us)
            || self.heartbeat.is_some_and(after)
            || self.arrived.is_some_and(|m| !m.resent && m.ctr > last.ctr)
            || self
                .mark
                .is_some_and(|(seq, i)| seq > e.seq || seq == e.seq && i == last_index)
    }
}
