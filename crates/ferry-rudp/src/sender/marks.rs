//! Send records and the reader's arrival marks: the delivery samples of
//! the congestion controller (`cc.rs`).

use std::time::{Duration, Instant};

use ferry_wire::rudp::Arrival;

use super::Sender;
use crate::cc::Delivery;

/// What the writer knows of one datagram it sent (data fragment, repair or
/// recovery shard).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct SendRec {
    /// µs since the sender's epoch, wrapping (0: never sent).
    pub at_us: u32,
    /// Bytes of DATA/FEC datagrams sent on the stream, this one included.
    pub cum: u64,
    /// DATA/FEC datagrams sent, this one included.
    pub ctr: u64,
    /// How often the writer had run out of data before (equal counts: one
    /// busy period, the pacer set the spacing).
    pub idle: u32,
    /// Sent more than once: the reader's mark may name either copy.
    pub resent: bool,
    /// Sent while pacing above the estimate.
    pub probing: bool,
    /// The pacing rate then, bytes/s.
    pub paced: f32,
}

/// A reader's mark matched with the send record of its datagram.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mark {
    at_us: u32,
    bytes: u32,
    datagrams: u32,
    rec: SendRec,
}

/// Marks kept to pair with newer ones.
const MARKS: usize = 64;
/// The longest interval a sample spans (reader clock), µs.
const LONGEST_US: u32 = 250_000;
/// A dry spell at most this long (or one datagram at the pacing rate)
/// continues the busy period.
const WAKE_GAP: Duration = Duration::from_millis(2);
/// A sample spans at least this many datagrams.
const FEWEST: u64 = 4;

impl Sender {
    /// The send record of a DATA/FEC datagram `frag` of `seq` leaving now.
    pub(super) fn record_send(&mut self, seq: u64, frag: u16, len: usize, now_us: u32) {
        self.sent_bytes += len as u64;
        self.sent_datagrams += 1;
        let rec = SendRec {
            at_us: now_us,
            cum: self.sent_bytes,
            ctr: self.sent_datagrams,
            idle: self.idle,
            resent: false,
            probing: self.cc.probing(),
            paced: self.pacer.rate() as f32,
        };
        let Some(e) = self.entry_mut(seq) else {
            return;
        };
        if let Some(r) = e.sent.get_mut(frag as usize) {
            let resent = r.at_us != 0;
            *r = SendRec { resent, ..rec };
        }
    }

    /// The writer has nothing to send now.
    pub(super) fn ran_dry(&mut self, now: Instant) {
        if self.busy {
            self.busy = false;
            self.dry_since = now;
        }
    }

    /// A datagram leaves now. After a dry spell longer than a blocked
    /// writer's wake-up (2 ms, or one datagram at the pacing rate), a new
    /// busy period begins: a sample spanning it would read the
    /// application's pace, not the path's. A shorter one is no gap (the
    /// pacer's bucket makes it up): at 120 % of a 5 Mbit/s link a
    /// keep_all writer whose next sample waits for the last datagram of
    /// the one before ran dry after every sample, and the only delivery
    /// samples left were within one sample — one or none a round.
    pub(super) fn keep_busy(&mut self, now: Instant) {
        if !self.busy {
            let datagram = 1500.0 / self.pacer.rate().max(1) as f64;
            let wake = Duration::from_secs_f64(datagram).max(WAKE_GAP);
            if now.saturating_duration_since(self.dry_since) > wake {
                self.idle = self.idle.wrapping_add(1);
            }
            self.busy = true;
        }
    }

    /// The reader's mark from an ACKNACK: pairs it with an older mark of
    /// the same busy period and feeds the delivery sample to the
    /// controller.
    pub(super) fn on_arrival(&mut self, now: Instant, a: &Arrival) {
        let Some(rec) = self
            .entry(a.seq)
            .and_then(|e| e.sent.get(a.frag as usize))
            .copied()
        else {
            return;
        };
        if rec.at_us == 0 || rec.resent {
            return; // never sent, or ambiguous (Karn)
        }
        let m = Mark {
            at_us: a.at_us,
            bytes: a.bytes,
            datagrams: a.datagrams,
            rec,
        };
        // Loss since the previous mark, busy or not: most of what was sent
        // lost is congestion even when no delivery sample can be taken
        // (short bursts into a shallow buffer).
        if let Some(p) = self
            .last_mark
            .filter(|p| p.rec.ctr + FEWEST * 4 <= m.rec.ctr)
        {
            let sent = (m.rec.ctr - p.rec.ctr) as f64;
            let got = f64::from(m.datagrams.wrapping_sub(p.datagrams));
            self.cc.on_loss(1.0 - (got / sent).min(1.0));
            self.last_mark = Some(m);
        } else if self.last_mark.is_none_or(|p| p.rec.ctr >= m.rec.ctr) {
            self.last_mark = Some(m);
        }
        // Older busy periods and older marks beyond reach are of no use.
        while self
            .marks
            .front()
            .is_some_and(|o| o.rec.idle != m.rec.idle || m.at_us.wrapping_sub(o.at_us) > LONGEST_US)
        {
            self.marks.pop_front();
        }
        if self.marks.len() == MARKS {
            self.marks.pop_front();
        }
        // About one round back: longer would blur a probe into the rounds
        // around it; at least twice the shortest sample, or a round far
        // shorter than it (loopback, a LAN) leaves a window of one instant
        // and no sample ever forms.
        let shortest = self.cc.shortest_sample_us(self.srtt_us);
        let reach = (self.srtt_us as u32).clamp(2 * shortest, LONGEST_US.max(2 * shortest));
        let older = self
            .marks
            .iter()
            .find(|o| o.rec.ctr + FEWEST <= m.rec.ctr && m.at_us.wrapping_sub(o.at_us) <= reach)
            .copied();
        if self.marks.back().is_none_or(|b| b.rec.ctr < m.rec.ctr) {
            self.marks.push_back(m);
        }
        let Some(o) = older else { return };
        let recv_us = m.at_us.wrapping_sub(o.at_us);
        let sent_us = m.rec.at_us.wrapping_sub(o.rec.at_us);
        if recv_us > LONGEST_US || sent_us > LONGEST_US {
            return;
        }
        let (got_bytes, sent_bytes) = (
            f64::from(m.bytes.wrapping_sub(o.bytes)),
            (m.rec.cum - o.rec.cum) as f64,
        );
        // Datagrams sent within half a millisecond went out in one pacer
        // burst: at least at the pacing rate.
        let paced = f64::from(o.rec.paced.max(m.rec.paced));
        if recv_us < shortest {
            let sent_us = f64::from(sent_us).max(sent_bytes / paced.max(1.0) * 1e6);
            self.cc
                .on_short_pair(got_bytes, f64::from(recv_us), sent_us);
            return;
        }
        let sent_dgrams = (m.rec.ctr - o.rec.ctr) as f64;
        let got_dgrams = f64::from(m.datagrams.wrapping_sub(o.datagrams));
        let recv = got_bytes / (f64::from(recv_us) / 1e6);
        let sent = if sent_us >= 500 {
            sent_bytes / (f64::from(sent_us) / 1e6)
        } else {
            paced
        };
        let raw = m.at_us.wrapping_sub(m.rec.at_us);
        let reference = *self.owd_ref.get_or_insert(raw);
        let d = Delivery {
            recv,
            sent,
            loss: (1.0 - got_dgrams / sent_dgrams).clamp(0.0, 1.0),
            owd_us: i64::from(raw.wrapping_sub(reference) as i32),
            probing: o.rec.probing || m.rec.probing,
        };
        self.cc.on_delivery(now, d);
    }
}
