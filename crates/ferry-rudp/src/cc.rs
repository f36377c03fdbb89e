//! Congestion control from the reader's arrival marks: the pacing rate
//! follows what the path delivers, with no link hint.
//!
//! Every ACKNACK carries the reader's mark of the newest datagram it
//! received (its id, arrival time and the reader's byte and datagram
//! counters: `ferry_wire::rudp::Arrival`). The writer keeps a send record
//! per datagram (time, bytes and datagrams sent so far, how often it had run
//! out of data). Two marks whose datagrams were sent in one busy period (the
//! writer never ran dry in between: the pacer, not the application, set the
//! spacing) and about one round apart give a *delivery sample* over the same
//! datagrams:
//!
//! - the receive rate `x_r` (reader clock) and the send rate `x_s`;
//! - the loss (datagrams sent − received);
//! - the one-way delay of the newer datagram, up to the clocks' offset:
//!   minus its 5–10 s minimum, the *queueing delay* `q`;
//! - the sample `x = min(x_r, x_s (1 − loss)) / (1 − p_free)`, at most
//!   `x_s`: what was received, by time and by count (jitter squeezes the
//!   reader's interval when a late frame holds the sample's first datagram;
//!   it never changes how many arrived), corrected for random loss only,
//!   never above what was sent (radio aggregation bunches arrivals, which
//!   would otherwise read as a faster path; BBR's sampler does the same). A
//!   sample spans at least four times the delay jitter (a late datagram
//!   holds those behind it in order).
//!
//! The rate (after GCC's AIMD and BBR's start-up), decided once a round
//! (the smoothed RTT, 10–200 ms):
//!
//! - **Congestion is a queue that stands and grows**: when the smallest
//!   queueing delay of a round is above `Q_T = clamp(3 J, 5 ms, 20 ms)`
//!   (`J` the mean change of the delay between samples: jitter alone stays
//!   under it) and either grew by 2 ms over each of the two rounds before
//!   (jitter moves a round's minimum up and down, a queue only up), or
//!   every sample of two rounds running arrived at under 0.97 of the rate
//!   it left at (the queue grows, however slowly: 5 % above a 50 Mbit/s
//!   path with no delay it grows half a millisecond a round and stood
//!   10–30 ms), or exceeds 30 ms, the rate is cut to 0.85 × the best sample of the round
//!   — what the path just delivered — and the queue drains at 15 % of it.
//!   A round with fewer than four samples (an application's bursts, each
//!   sampled at its end, where in-order jitter holds the most) needs a
//!   second such round. A transient queue inside one burst never stands a
//!   whole round; a delay floor that merely rises with the rate (a radio
//!   that delivers in order holds what follows a late frame) does not keep
//!   growing. Two cuts pace at the best sample itself: the one that ends
//!   start-up (its drain round empties the queue, as BBR's does), and one
//!   whose samples left at under 0.8 × the pacing rate and arrived at
//!   their own rate (the application set the pace, the path carried all
//!   of it, and the queue came from bursts above the path: 0.85 × it
//!   would hold back a writer whose load the path carries — at 60 % of a
//!   50 Mbit/s, 50 ± 20 ms path it did, for seconds).
//! - **An overflowing queue shows no delay**: once a drop-tail queue stays
//!   full for the 5–10 s of the delay minimum, the minimum is taken with it
//!   full. What shows is that the path carried less than was sent: when in
//!   every sample of a round (at least two) under 80 % of the datagrams
//!   arrived, corrected for the random loss (under 70 % — more than any
//!   random loss — in every sample and every loss measurement of at least
//!   64 datagrams, while fewer than eight samples have taught it), the rate
//!   is cut as for a standing queue. The level of the cuts never stays
//!   above 1.25 × what the path just delivered, so that an overflowing
//!   queue's losses are not taken for random ones.
//! - **A full queue is drained**: after the cut that ends start-up, and
//!   after one for an overflowing queue, a round paces at half the new
//!   rate (BBR's drain). A delay minimum taken with the queue full hides
//!   every later queue, and its losses would be learned as random.
//! - **Three more signals when no sample comes**: a buffer too shallow to
//!   show a queue — when more than half of the datagrams sent between two
//!   marks were lost, in every measurement of two rounds running (no
//!   random loss is that high: `p_free` stops at 30 %; reordering makes
//!   single measurements high; in start-up one round with two such
//!   measurements), the rate becomes what got through (at most half);
//!   start-up that doubled past the path — a round whose best sample is
//!   under half of what was sent a round before (BBR's full pipe, at once),
//!   or whose samples all arrived at under 0.4 of the rate they left at
//!   (whoever set the pace: the application's bursts at start-up's rate
//!   overflow a slow path's queue just as well), or with no sample at all,
//!   whose pairs of marks within bursts (each too short to be a sample:
//!   in-order jitter squeezes or stretches it) arrived, summed over the
//!   round, at under 0.4 of the rate they left at — ends with a cut (at
//!   that summed receive rate when there was no sample); and bursts too
//!   short to give a delivery sample —
//!   a reader whose busy-time receive rate (in every ACKNACK) is under
//!   0.35 × the pacing rate two rounds running sets the rate to it. The
//!   round after a cut measures the old rate's losses and is not counted.
//! - **Random loss never cuts**: loss at a flat delay (no queue) is the
//!   radio's; it is averaged into `p_free` (≤ 30 %) and corrects the
//!   samples. Loss that comes with a queue is congestion and never enters
//!   it (taken for random, it would be corrected for, and the estimate
//!   would climb with the very losses it causes).
//! - **Growth while the pacer is the limit**: start-up doubles every round
//!   (once a round trip is known: in every round with a delivery sample)
//!   from 32 Mbit/s (or the cap) until the first queue; then the rate grows by one datagram per round per round while
//!   within 10 % of the level of the last cuts or while a cut or a standing
//!   queue came in the last 20 rounds (additive
//!   increase where the path is full: with the multiplicative decrease,
//!   streams that share a bottleneck converge to equal shares, as Chiu and
//!   Jain showed), and by 8 % per round otherwise (the path changed: a rate
//!   that stepped up is found in about 20 rounds). A round in which the application, not the pacer,
//!   set the pace changes nothing.
//! - `udp_link_mbps` caps the rate; nothing else needs a link hint.

use std::time::{Duration, Instant};

/// Start-up rate when no cap is lower, bytes/s (32 Mbit/s): low enough
/// that the first samples see the path's queue empty (the delay minimum
/// must be the path's).
const START: f64 = 4_000_000.0;
/// Multiplicative decrease: the share of the best sample a cut paces at.
const BETA: f64 = 0.85;
/// A round whose best sample is under the pacing rate by this factor, and
/// arrived at [`CARRIED_WHOLE`] of its own send rate or more, was paced by
/// the application.
const APP_PACED: f64 = 1.25;
/// Receive/send rate ratio of a sample the path carried whole.
const CARRIED_WHOLE: f64 = 0.9;
/// Share of the new rate a drain round paces at.
const DRAIN: f64 = 0.5;
/// Additive increase near the last cuts: this many bytes per round more
/// each round (one datagram per RTT per RTT, Reno's step as a rate).
const AI_BYTES: f64 = 1500.0;
/// Growth per round away from the last cuts.
const GROW: f64 = 1.08;
/// Random loss above this is not corrected for.
const RANDOM_LOSS: f64 = 0.3;
/// A standing queue this much longer than the round before is growing, µs.
const GROWING_US: i64 = 2_000;
/// Receive/send rate ratio under which every sample of a round says the
/// queue grows.
const OUTPACED: f64 = 0.97;
/// Rounds running that must show [`OUTPACED`] (one may be jitter's).
const OUTPACED_ROUNDS: u8 = 2;
/// A standing queue this long is congestion whether it grows or not, µs.
const LONG_QUEUE_US: i64 = 30_000;
/// With no delivery sample in a round, a busy-time receive rate under this
/// share of the pacing rate is a path far slower than paced.
const MISMATCH: f64 = 0.35;
/// Loss between two marks above this is congestion whatever the delay: no
/// random loss is that high (`p_free` stops at 30 %).
const HEAVY_LOSS: f64 = 0.5;
/// A delivery sample of which under this share of the datagrams arrived,
/// corrected for the random loss, saw the path carry less than was sent:
/// the pacing is above the bottleneck (a drop-tail queue overflows).
const EXCESS: f64 = 0.8;
/// The same while the random loss is not known yet (fewer than
/// [`KNOWN_LOSS_SAMPLES`] samples taught it): only a share no random loss
/// reaches (`p_free` stops at 30 %) is an overflow, in every sample and
/// in every loss measurement between marks (≥ 64 datagrams) of the round.
const EXCESS_UNKNOWN_LOSS: f64 = 0.7;
/// Start-up's full-pipe test also wants this share of datagrams (or
/// fewer) arriving in every sample of the round.
const OVERSHOT_CARRIED: f64 = 0.9;
/// In start-up, samples that all arrived at under this share of their send
/// rate show a path far slower than the bursts.
const OVERRUN: f64 = 0.4;
/// Pairs of marks within bursts a round sums before they may end start-up
/// (see [`Controller::on_short_pair`]).
const SHORT_PAIRS: u32 = 2;
/// Samples at a flat delay after which the random loss counts as known.
const KNOWN_LOSS_SAMPLES: u32 = 8;
/// Growth turns multiplicative only after this many rounds without a
/// standing queue: while the path is shared and full, every stream grows
/// additively (a stream that was not cut last would otherwise grow
/// × 1.08 a round past the one that was, and keep the larger share).
const QUIET_ROUNDS: u32 = 20;
/// A standing queue shows in every one of at least this many samples.
const RECENT_Q: usize = 6;
/// Rounds a queue must stand before a cut: one with at least
/// [`FEW_SAMPLES`] samples, two otherwise (the few samples of an
/// application's bursts are each taken at a burst's end, where in-order
/// jitter holds the most).
const STANDING_ROUNDS: u8 = 1;
/// Fewer samples than this in a round make a weak queue signal.
const FEW_SAMPLES: u32 = 4;
/// Slowest pacing the controller chooses, bytes/s (128 kbit/s).
const FLOOR: f64 = 16_000.0;
/// Smallest and largest queueing delay that counts as a standing queue, µs.
const Q_MIN_US: f64 = 5_000.0;
const Q_MAX_US: f64 = 20_000.0;
/// Window of the one-way-delay minimum (two buckets of this).
const OWD_WINDOW: Duration = Duration::from_secs(5);
/// Window of the reported bandwidth (two buckets of this).
const BW_WINDOW: Duration = Duration::from_secs(1);

/// One delivery sample (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Delivery {
    /// Receive rate, bytes/s.
    pub recv: f64,
    /// Send rate of the same datagrams, bytes/s.
    pub sent: f64,
    /// Share of those datagrams lost (0..1).
    pub loss: f64,
    /// One-way delay of the newer mark's datagram, µs, up to a constant
    /// clock offset.
    pub owd_us: i64,
    /// The datagrams went out while the rate was above the level of the
    /// last cuts (start-up, growth).
    pub probing: bool,
}

/// What one round's feedback showed.
#[derive(Debug, Clone, Copy)]
struct Round {
    /// The pacer held data back (the rate, not the application, set the
    /// pace) at least once.
    limited: bool,
    /// Delivery samples.
    samples: u32,
    /// Best sample, bytes/s (0: none).
    best: f64,
    /// Receive/send rate ratio of the best sample.
    best_ratio: f64,
    /// Smallest queueing delay, µs (`i64::MAX`: none).
    min_q: i64,
    /// Lowest loss between marks (2: none measured): every measurement
    /// must show it (reordering makes single ones high).
    loss: f64,
    /// Loss measurements.
    losses: u8,
    /// Highest busy-time receive rate the reader reported, bytes/s.
    recv: f64,
    /// Highest share of its datagrams that arrived, corrected for the
    /// random loss, among the samples (0: none).
    carried: f64,
    /// Highest receive/send rate ratio among the samples (0: none).
    ratio: f64,
    /// Pairs of marks within one burst too short for a delivery sample
    /// (see [`Controller::on_short_pair`]), summed: pairs, bytes received,
    /// reader µs, writer µs.
    short: (u32, f64, f64, f64),
}

impl Default for Round {
    fn default() -> Self {
        Round {
            limited: false,
            samples: 0,
            best: 0.0,
            best_ratio: 0.0,
            min_q: i64::MAX,
            loss: 2.0,
            losses: 0,
            recv: 0.0,
            carried: 0.0,
            ratio: 0.0,
            short: (0, 0.0, 0.0, 0.0),
        }
    }
}

/// The controller (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Controller {
    cap: f64,
    rate: f64,
    startup: bool,
    /// Level of the last cuts (EWMA of the best samples then; 0: none).
    cut_level: f64,
    /// Best samples of the last one to two seconds (reported only).
    bw: [f64; 2],
    bw_since: Instant,
    owd: [i64; 2],
    owd_since: Instant,
    /// Queueing delay of the newest sample, µs.
    queue_us: i64,
    /// Mean change of the queueing delay between samples, µs.
    jitter_us: f64,
    p_free: f64,
    /// Samples that taught `p_free` (saturating).
    p_samples: u32,
    next_round: Instant,
    round_len: Duration,
    /// What this round's feedback showed so far.
    round: Round,
    /// Queueing delays of the last [`RECENT_Q`] samples (ring).
    recent_q: [i64; RECENT_Q],
    recent_at: usize,
    /// Rounds in a row with heavy loss.
    heavy_rounds: u8,
    /// Rounds in a row with a busy-time receive rate far under the pacing.
    mismatch_rounds: u8,
    /// A cut ended the round before: this round's loss is the old rate's.
    after_cut: bool,
    standing_rounds: u8,
    /// Rounds in a row with a queue and every sample received slower
    /// than sent.
    outpaced_rounds: u8,
    /// Pacing rate during the round before the one now ending (what this
    /// round's samples were sent at, one round ago).
    prev_rate: f64,
    /// Smallest queueing delay of the last two rounds with samples, µs
    /// (newest first).
    prev_min_q: [i64; 2],
    /// Rounds since a cut or a standing queue.
    quiet_rounds: u32,
    /// Rate after the drain round under way (0: none).
    drain_to: f64,
    /// A round-trip time was measured.
    rtt_known: bool,
    cuts: u64,
}

impl Controller {
    /// A controller starting at 32 Mbit/s or `cap` (bytes/s), whichever is
    /// lower.
    pub fn new(cap: u64, now: Instant) -> Self {
        let cap = cap as f64;
        Controller {
            cap,
            rate: START.min(cap),
            startup: true,
            cut_level: 0.0,
            bw: [0.0; 2],
            bw_since: now,
            owd: [i64::MAX; 2],
            owd_since: now,
            queue_us: 0,
            jitter_us: 0.0,
            p_free: 0.0,
            p_samples: 0,
            next_round: now,
            round_len: Duration::from_millis(10),
            round: Round::default(),
            recent_q: [i64::MAX; RECENT_Q],
            recent_at: 0,
            heavy_rounds: 0,
            after_cut: false,
            mismatch_rounds: 0,
            standing_rounds: 0,
            outpaced_rounds: 0,
            prev_rate: START.min(cap),
            prev_min_q: [i64::MAX; 2],
            quiet_rounds: 0,
            drain_to: 0.0,
            rtt_known: false,
            cuts: 0,
        }
    }

    /// Best delivery sample of the last one to two seconds, bytes/s (0:
    /// none yet).
    pub fn bw(&self) -> f64 {
        self.bw[0].max(self.bw[1])
    }

    /// Pacing rate, bytes/s.
    pub fn rate(&self) -> u64 {
        self.rate.clamp(FLOOR.min(self.cap), self.cap) as u64
    }

    /// The rate the path may carry: the cap until the first cut (start-up
    /// has not found the path yet), then the pacing rate.
    pub fn path_rate(&self) -> u64 {
        if self.startup {
            self.cap as u64
        } else if self.drain_to > 0.0 {
            // One round at half: a transient, not a reason to drop.
            (self.drain_to.clamp(FLOOR.min(self.cap), self.cap)) as u64
        } else {
            self.rate()
        }
    }

    /// Whether datagrams sent now go out above the level of the last cuts.
    pub fn probing(&self) -> bool {
        self.startup || self.rate > self.cut_level
    }

    /// Times the rate was cut for a standing queue.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// Random loss estimate (0..0.3).
    pub fn random_loss(&self) -> f64 {
        self.p_free
    }

    /// Queueing delay of the newest sample over the 5–10 s minimum, µs.
    pub fn queue_delay_us(&self) -> u64 {
        self.queue_us.max(0) as u64
    }

    /// A new ceiling (configuration).
    pub fn set_cap(&mut self, cap: u64) {
        self.cap = cap as f64;
    }

    /// An outage ended: the path may have changed (another access point,
    /// another cell). The delay minimum restarts; the rate does not.
    pub fn path_back(&mut self, now: Instant) {
        self.owd = [i64::MAX; 2];
        self.owd_since = now;
        self.standing_rounds = 0;
    }

    /// Shortest interval a delivery sample may span on the reader's clock,
    /// µs: four times the delay jitter (at most 40 ms), a quarter of the
    /// RTT, at least 2 ms.
    pub fn shortest_sample_us(&self, srtt_us: f64) -> u32 {
        (4.0 * self.jitter_us)
            .min(40_000.0)
            .max(srtt_us / 4.0)
            .clamp(2_000.0, 100_000.0) as u32
    }

    /// Queueing delay that counts as a queue: above the jitter's reach.
    fn queue_target_us(&self) -> f64 {
        (3.0 * self.jitter_us).clamp(Q_MIN_US, Q_MAX_US)
    }

    /// The pacer held data back (the rate, not the application, set the
    /// pace).
    pub fn limited(&mut self) {
        self.round.limited = true;
    }

    /// One delivery sample at `now` (rounds end in [`Controller::tick`]).
    pub fn on_delivery(&mut self, now: Instant, d: Delivery) {
        if now.saturating_duration_since(self.owd_since) >= OWD_WINDOW {
            self.owd = [d.owd_us, self.owd[0]];
            self.owd_since = now;
        } else {
            self.owd[0] = self.owd[0].min(d.owd_us);
        }
        let q = d.owd_us.saturating_sub(self.owd[0].min(self.owd[1]));
        self.jitter_us += ((q - self.queue_us).abs() as f64 - self.jitter_us) / 16.0;
        self.queue_us = q;
        self.round.min_q = self.round.min_q.min(q);
        self.recent_q[self.recent_at % RECENT_Q] = q;
        self.recent_at = self.recent_at.wrapping_add(1);
        if (q as f64) < self.queue_target_us() && !d.probing && d.sent > 0.0 {
            self.p_free += (d.loss.clamp(0.0, RANDOM_LOSS) - self.p_free) / 8.0;
            self.p_samples = self.p_samples.saturating_add(1);
        }
        if d.sent > 0.0 {
            // By count, not by rate: jitter stretches a short sample's
            // arrivals, never the share of its datagrams that arrived.
            let carried = (1.0 - d.loss.clamp(0.0, 1.0)) / (1.0 - self.p_free);
            self.round.carried = self.round.carried.max(carried);
            self.round.ratio = self.round.ratio.max(d.recv / d.sent);
        }
        // What arrived, by time on the reader's clock and by count over
        // the send interval (jitter stretches or squeezes the first, never
        // the second: a late frame holding the sample's first datagram
        // made an overflowing 5 Mbit/s path read 6), corrected for random
        // loss, never above what was sent.
        let counted = d.sent * (1.0 - d.loss.clamp(0.0, 1.0));
        let x = (d.recv.min(counted) / (1.0 - self.p_free)).min(d.sent);
        if x > 0.0 {
            if now.saturating_duration_since(self.bw_since) >= BW_WINDOW {
                self.bw = [x, self.bw[0]];
                self.bw_since = now;
            } else {
                self.bw[0] = self.bw[0].max(x);
            }
            if x > self.round.best {
                self.round.best = x;
                self.round.best_ratio = d.recv / d.sent;
            }
            self.round.samples += 1;
        }
    }

    /// The reader's busy-time receive rate (bytes/s over arrivals at most
    /// 2 ms apart, by kernel stamps; 0: unknown), from an ACKNACK.
    pub fn on_receive_rate(&mut self, recv: f64) {
        if recv > 0.0 {
            self.round.recv = self.round.recv.max(recv);
        }
    }

    /// Two marks of one burst closer on the reader's clock than a delivery
    /// sample may be (`recv_us` of arrivals for `sent_us` of sending;
    /// `recv` bytes received in between). Alone such a pair is noise: in-order
    /// jitter holds a burst's datagrams behind a late one and releases them
    /// together, squeezing or stretching it. Summed over a round in
    /// start-up they say whether the path is far slower than the bursts
    /// (see `end_round`).
    pub fn on_short_pair(&mut self, recv: f64, recv_us: f64, sent_us: f64) {
        if self.startup && recv_us > 0.0 && sent_us > 0.0 {
            let s = &mut self.round.short;
            *s = (s.0 + 1, s.1 + recv, s.2 + recv_us, s.3 + sent_us);
        }
    }

    /// The share of datagrams lost between two marks (busy or idle between).
    pub fn on_loss(&mut self, loss: f64) {
        self.round.loss = self.round.loss.min(loss);
        self.round.losses = self.round.losses.saturating_add(1);
    }

    /// Feedback arrived at `now`: a round ends every smoothed RTT.
    pub fn tick(&mut self, now: Instant, srtt_us: f64) {
        self.rtt_known |= srtt_us > 0.0;
        if now >= self.next_round {
            self.end_round();
            self.round_len = Duration::from_micros(srtt_us as u64)
                .clamp(Duration::from_millis(10), Duration::from_millis(200));
            self.next_round = now + self.round_len;
        }
    }

    /// Paces at `rate` (within the floor) from now on, with `level` as the
    /// level of the last cuts; start-up is over.
    fn cut(&mut self, rate: f64, level: f64) {
        self.rate = rate.max(FLOOR.min(self.cap));
        self.cut_level = level;
        self.startup = false;
        self.standing_rounds = 0;
        self.outpaced_rounds = 0;
        self.heavy_rounds = 0;
        self.after_cut = true;
        self.quiet_rounds = 0;
        self.cuts += 1;
    }

    fn end_round(&mut self) {
        if self.drain_to > 0.0 {
            // The drain round: its feedback is of what went out before
            // the cut.
            self.rate = std::mem::take(&mut self.drain_to);
            self.prev_rate = self.rate;
            self.round = Round::default();
            self.recent_q = [i64::MAX; RECENT_Q];
            return;
        }
        let Round {
            limited,
            samples,
            best,
            best_ratio,
            min_q,
            loss,
            losses,
            recv,
            carried,
            ratio,
            short,
        } = std::mem::take(&mut self.round);
        // The smallest queueing delay of the round, and of at least the
        // last few samples: a round with one or two samples on a jittery
        // path would otherwise show a queue that is only jitter.
        let min_q = min_q.min(self.recent_q.iter().copied().min().unwrap_or(i64::MAX));
        let sent_at = std::mem::replace(&mut self.prev_rate, self.rate).min(self.rate);
        // Two rounds running (jitter bunches a single round's arrivals).
        self.mismatch_rounds =
            if samples == 0 && limited && recv > 0.0 && recv < MISMATCH * self.rate {
                self.mismatch_rounds + 1
            } else {
                0
            };
        if self.mismatch_rounds >= 2 {
            self.mismatch_rounds = 0;
            // Bursts too short to sample, into a path far slower than the
            // pacing: what the reader receives while busy is the rate.
            self.cut(recv, recv);
            return;
        }
        // The first round after a cut measures what was sent before it.
        let settled = !std::mem::take(&mut self.after_cut);
        self.heavy_rounds = match loss {
            l if l > 1.0 || !settled => self.heavy_rounds,
            l if l > HEAVY_LOSS => self.heavy_rounds + 1,
            _ => 0,
        };
        // Start-up acts on one round (its rate doubles every round: a slow
        // path behind a shallow buffer may give no sample before it has
        // overshot many times) in which the pacer, not the application,
        // set the pace, and at least two measurements showed it.
        let needed = if self.startup && limited && losses >= 2 {
            1
        } else {
            2
        };
        if self.heavy_rounds >= needed {
            // Most of what was sent lost, and no sample to say what the
            // path delivers: pace at what got through (at most half),
            // every other round while it lasts.
            let rate = sent_at * (1.0 - loss).clamp(0.1, 0.5);
            let bw = self.bw();
            self.cut(rate, if bw > 0.0 { rate.min(bw) } else { rate });
            return;
        }
        if samples == 0 && !limited {
            return; // the application set the pace
        }
        // A queue that stands the whole round and grows, or is long: a
        // delay floor that merely rises with the rate (a radio that
        // delivers in order holds what follows a late frame) does not grow
        // from round to round.
        // Grown over each of the last two rounds with samples: jitter
        // moves a round's minimum up and down, a queue only up.
        let prev = self.prev_min_q[0].max(self.prev_min_q[1]);
        if samples > 0 {
            self.prev_min_q = [min_q, self.prev_min_q[0]];
        }
        let queued = samples > 0 && min_q as f64 > self.queue_target_us();
        // Or every sample of the round arrived slower than it left while
        // the queue stood, two rounds running: the queue grows, however
        // slowly (pacing 5 % above a 50 Mbit/s path with no delay grows
        // it by half a millisecond a round, under the 2 ms a round that
        // growth between round minimums must show, and it stood 10–30 ms).
        self.outpaced_rounds = if queued && ratio > 0.0 && ratio < OUTPACED {
            self.outpaced_rounds.saturating_add(1)
        } else {
            0
        };
        let standing = queued
            && (min_q >= prev.saturating_add(GROWING_US)
                || min_q > LONG_QUEUE_US
                || self.outpaced_rounds >= OUTPACED_ROUNDS);
        // Quiet: no cut (see `cut`) and no queue that stands. (A delay
        // floor that merely rises with the rate is no reason to grow
        // slowly: after a 10 → 50 Mbit/s step with 15 ± 5 ms of in-order
        // jitter, one kept the growth additive for 3 s.)
        self.quiet_rounds = if standing {
            0
        } else {
            self.quiet_rounds.saturating_add(1)
        };
        self.standing_rounds = if standing {
            self.standing_rounds.saturating_add(1)
        } else {
            0
        };
        // Every sample of the round: the path carried well under what was
        // sent, beyond the random loss (a full drop-tail queue shows no
        // queueing delay once the delay minimum is taken with it full).
        // While the random loss is unknown, the share over 64 datagrams
        // or more must show it too: a sample of a few datagrams at 20 %
        // random loss often carries under 70 %; 64 do one time in forty.
        let overflow = samples >= 2
            && carried > 0.0
            && if self.p_samples >= KNOWN_LOSS_SAMPLES {
                carried < EXCESS
            } else {
                carried < EXCESS_UNKNOWN_LOSS && losses > 0 && loss > 1.0 - EXCESS_UNKNOWN_LOSS
            };
        // Start-up doubled past a path that delivers under half of what
        // was sent a round ago and loses what it cannot carry (BBR's full
        // pipe, at once: a slow path would otherwise see several doublings
        // overflow its buffer; without the losses, the application, not
        // the path, may have set what was delivered).
        let overshot = self.startup
            && ((limited && samples >= 2 && best < 0.5 * sent_at && carried < OVERSHOT_CARRIED)
                // Every sample of the round (two or more) arrived at under
                // 0.4 of the rate its datagrams left at: a path far slower than
                // start-up's bursts, whoever set the pace (at 60 % of a
                // 5 Mbit/s link the application did, and start-up's
                // 256 Mbit/s bursts overflowed its queue for 14 rounds).
                || (samples >= 2 && ratio > 0.0 && ratio < OVERRUN));
        // No sample at all, but pairs of marks within bursts, summed over
        // the round, arrived at under 0.4 of the rate they left at, and
        // every loss measurement of the round lost over 10 %: with 40 ms
        // of in-order jitter on a 5 Mbit/s path every pair within
        // start-up's 32 Mbit/s bursts was squeezed under the shortest
        // sample, no sample formed, and start-up overflowed the path's
        // queue for a second (a third of what was sent dropped). (Without
        // the losses, jitter that reorders stretches a pair of a few
        // datagrams sent within 0.2 ms by milliseconds: 5 KB samples at
        // 200 Hz read 18 Mbit/s on a 100 Mbit/s path.)
        // The test is by time (the same datagrams took 2.5 times longer to
        // arrive than to leave); counts of bytes between two marks are
        // off when the reader's newest datagram was reordered.
        let (pairs, recv_b, recv_us, sent_us) = short;
        let overrun = self.startup
            && samples == 0
            && pairs >= SHORT_PAIRS
            && loss <= 1.0 // measured (2: none)
            && loss > 1.0 - OVERSHOT_CARRIED
            && OVERRUN * recv_us > sent_us;
        let short_rate = recv_b / recv_us.max(1.0) * 1e6;
        let best = if overrun { short_rate } else { best };
        let overshot = overshot || overrun;
        let needed = STANDING_ROUNDS + u8::from(samples < FEW_SAMPLES);
        if self.standing_rounds >= needed || overflow || overshot {
            // The queue stood, or the path carried well under what was
            // sent: pace under what it delivered. The level of the cuts
            // moves slowly, but never stays far above what the path just
            // delivered (a level far too high would take the losses of an
            // overflowing queue for random ones).
            let level = if self.cut_level > 0.0 {
                (0.8 * self.cut_level + 0.2 * best).min(1.25 * best)
            } else {
                best
            };
            // Start-up's overshoot, or an overflowing queue, left the
            // path's queue full: pace at half of the new rate for a round
            // so that it empties (BBR's drain). The delay minimum taken
            // with it full would hide every later queue, and the losses of
            // an overflowing one would be learned as random loss (on a
            // 5 Mbit/s, 50 ± 20 ms path the rate then climbed to 7 Mbit/s
            // with 30 % of it "random" loss).
            let drain = self.startup || overflow;
            // Pace at what the path carried, not under it, when start-up
            // ends (its drain round empties the queue, as BBR's does) or
            // when the samples left far under the pacing rate and arrived
            // at their own rate (the application's pace: the path carried
            // all of it, and the queue came from bursts above the path,
            // which pacing at what was carried ends). 0.85 × it would hold
            // back a writer whose load the path carries.
            let app_paced = sent_at >= APP_PACED * best && best_ratio >= CARRIED_WHOLE;
            let startup = self.startup;
            self.cut(
                if startup || app_paced {
                    best
                } else {
                    BETA * best
                },
                level,
            );
            if drain {
                self.drain_to = self.rate;
                self.rate *= DRAIN;
            }
            return;
        }
        if standing || !limited {
            return; // a queue: no growth; or the application's pace
        }
        if self.startup && samples == 0 && (losses > 0 || self.rtt_known) {
            // Feedback came, but no delivery sample to say the path
            // carries this rate (short bursts into a slow path; or a round
            // trip is known, and no sample formed in it — doubling then
            // sent 64 Mbit/s into a 5 Mbit/s, 100 ms path before its first
            // sample): hold. (Best effort, with no heartbeat to time a
            // round trip, doubles every 10 ms while the pacer is the limit.)
            return;
        }
        self.rate = if self.startup {
            self.rate * 2.0
        } else if self.rate < 1.1 * self.cut_level || self.quiet_rounds < QUIET_ROUNDS {
            self.rate + AI_BYTES / self.round_len.as_secs_f64()
        } else {
            self.rate * GROW
        }
        .min(self.cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(recv: f64, q_ms: i64) -> Delivery {
        Delivery {
            recv,
            sent: recv,
            loss: 0.0,
            owd_us: 10_000 + q_ms * 1000,
            probing: false,
        }
    }

    /// `n` rounds of 20 ms, each with six samples `s`; returns the rate
    /// after.
    fn rounds(c: &mut Controller, t: &mut Instant, n: usize, s: Delivery) -> u64 {
        for _ in 0..n {
            for _ in 0..RECENT_Q {
                *t += Duration::from_millis(3);
                c.limited();
                c.on_delivery(*t, s);
            }
            *t += Duration::from_millis(2);
            c.tick(*t, 20_000.0);
        }
        c.rate()
    }

    #[test]
    fn start_up_doubles_until_a_queue_stands_then_paces_at_what_was_delivered() {
        let mut t = Instant::now();
        let mut c = Controller::new(37_500_000, t);
        assert_eq!(c.rate(), 4_000_000);
        // The path takes 6.25 MB/s with no queue: doubling.
        rounds(&mut c, &mut t, 1, sample(4e6, 0));
        let r = rounds(&mut c, &mut t, 2, sample(6.25e6, 0));
        assert_eq!(r, 32_000_000);
        // A long queue stands a round, the samples sent at the pacing rate
        // and received at the path's: start-up ends at 6.25, after a round
        // at half of that that drains what start-up queued.
        let over = Delivery {
            sent: 32e6,
            ..sample(6.25e6, 31)
        };
        let r = rounds(&mut c, &mut t, 1, over);
        assert_eq!(r, 3_125_000);
        assert_eq!(c.cuts(), 1);
        let r = rounds(&mut c, &mut t, 1, sample(6.25e6, 31));
        assert_eq!(r, 6_250_000);
        // Near the cut level: one datagram per round (20 ms) per round.
        let r = rounds(&mut c, &mut t, 2, sample(6.25e6, 0));
        assert_eq!(r, 6_400_000);
        // A queue that grows at the pacing rate: 0.85 × what was carried.
        rounds(&mut c, &mut t, 1, sample(6.25e6, 3));
        let r = rounds(&mut c, &mut t, 1, sample(6.25e6, 36));
        assert_eq!(c.cuts(), 2);
        assert_eq!(r, 5_312_500);
    }

    #[test]
    fn a_queue_from_bursts_above_the_path_cuts_to_what_the_application_sent() {
        let mut t = Instant::now();
        let mut c = Controller::new(37_500_000, t);
        rounds(&mut c, &mut t, 3, sample(3.75e6, 0));
        assert_eq!(c.rate(), 32_000_000);
        // The application sends 3.75 MB/s in bursts at 32 MB/s; the path
        // carries all of it, the bursts queue: pacing at what was carried
        // (after the drain round) still carries the application's load.
        rounds(&mut c, &mut t, 1, sample(3.75e6, 31));
        assert_eq!(c.cuts(), 1);
        assert_eq!(rounds(&mut c, &mut t, 1, sample(3.75e6, 0)), 3_750_000);
    }

    #[test]
    fn jitter_and_random_loss_at_a_flat_delay_never_cut() {
        let mut t = Instant::now();
        let mut c = Controller::new(37_500_000, t);
        for i in 0..1600 {
            // 0–8 ms of jitter, 20 % loss, no standing queue; four samples
            // a round.
            let s = Delivery {
                recv: 0.8 * c.rate() as f64,
                sent: c.rate() as f64,
                loss: 0.2,
                owd_us: 10_000 + (i * 7919 % 9) * 1000,
                probing: false,
            };
            t += Duration::from_millis(5);
            c.limited();
            c.on_delivery(t, s);
            c.tick(t, 20_000.0);
        }
        assert_eq!(c.cuts(), 0);
        assert_eq!(c.rate(), 37_500_000);
    }

    #[test]
    fn a_delay_floor_that_does_not_grow_is_no_queue_but_a_growing_one_is() {
        let mut t = Instant::now();
        let mut c = Controller::new(37_500_000, t);
        rounds(&mut c, &mut t, 1, sample(4e6, 0));
        // 12 ms above the minimum, steady (a radio holding frames in order):
        // the rise itself may look like a queue once, then no more.
        rounds(&mut c, &mut t, 2, sample(30e6, 12));
        let before = c.cuts();
        rounds(&mut c, &mut t, 20, sample(30e6, 12));
        assert_eq!(c.cuts(), before);
        // Growing by 3 ms a round: a queue. The samples left at 30 MB/s
        // under a pacing of 37.5 (the application's pace): after the
        // drain round, pacing at what was carried.
        rounds(&mut c, &mut t, 1, sample(30e6, 15));
        assert_eq!(c.cuts(), before + 1);
        assert_eq!(rounds(&mut c, &mut t, 1, sample(30e6, 15)), 30_000_000);
        // Still growing, now at the pacing rate: 0.85 × what was carried.
        rounds(&mut c, &mut t, 1, sample(30e6, 18));
        assert_eq!(c.cuts(), before + 2);
        assert_eq!(c.rate(), 25_500_000);
    }

    #[test]
    fn the_application_setting_the_pace_changes_nothing() {
        let mut t = Instant::now();
        let mut c = Controller::new(37_500_000, t);
        for _ in 0..50 {
            t += Duration::from_millis(20);
            c.tick(t, 20_000.0); // no sample, pacer never the limit
        }
        assert_eq!(c.rate(), 4_000_000);
    }
}
