//! The writing side of one stream.

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_wire::rudp::{
    self, Data, Datagram, Fec, Heartbeat, Missing, Packet, DATA_HEADER, FEC_HEADER, MAX_FRAGS,
};

use crate::cc::Controller;
use crate::pacer::Pacer;
use crate::rate::RateControl;

mod backlog;
mod liveness;
mod marks;
mod nack;
pub use backlog::BACKLOG_TIME;

/// Settings of a [`Sender`].
#[derive(Debug, Clone)]
pub struct SenderConfig {
    /// Stream id carried in every datagram.
    pub stream: u32,
    /// Largest datagram (UDP payload).
    pub mtu: usize,
    /// Repair losses (false: best effort, fragments only).
    pub reliable: bool,
    /// keep_all: `write` fails with [`WriteError::Full`] at the bounds instead
    /// of dropping the oldest sample.
    pub keep_all: bool,
    /// Most samples held.
    pub history_samples: usize,
    /// Most bytes held (see [`crate::history_bytes_for`]).
    pub history_bytes: usize,
    /// Pacing rate, bytes/s (0: unpaced).
    pub rate: u64,
    /// Largest burst the pacer lets out at once, bytes. `None`: 2 ms of the
    /// rate (at least 4 datagrams), so a driver whose timers tick in whole
    /// milliseconds still reaches the full rate.
    pub burst: Option<usize>,
    /// Samples older than this are dropped from history unsent/unrepaired.
    pub lifespan: Option<Duration>,
    /// Fastest heartbeat (the rate-following period is clamped to this).
    pub heartbeat_min: Duration,
    /// Slowest heartbeat while data is unacknowledged.
    pub heartbeat_max: Duration,
    /// Heartbeat while everything is acknowledged (liveness, RTT).
    pub heartbeat_idle: Duration,
    /// Silence (no feedback while data is unacknowledged) before the peer is
    /// declared gone; at least 8 RTTs.
    pub silence: Duration,
    /// Longest probe period in the first [`PROBE_FAST_FOR`] of an outage
    /// (probes then come every `50 ms − SRTT/2`, at least 10 ms, at most
    /// this, so that the first sample after the link's return is delivered
    /// within about one RTT + 50 ms); later probes back off to
    /// [`PROBE_SLOW`].
    pub probe_interval: Duration,
    /// Forward error correction: samples of at least `FEC_MIN_FRAGS` (4)
    /// fragments get Reed–Solomon recovery shards sized to the loss the
    /// reader reports, so most losses are rebuilt without a repair round.
    pub fec: bool,
    /// Follow the path: `rate` becomes a cap; the paced rate comes from
    /// the reader's feedback (`congestion_model`: `cc.rs`; else the older
    /// receive-rate rule of `rate.rs`); random loss is not taken for
    /// congestion. Off: always `rate`.
    pub adaptive_rate: bool,
    /// With `adaptive_rate`: follow the reader's arrival marks (`cc.rs`:
    /// a bandwidth model that needs no link hint; `rate` is then only a
    /// cap) once the reader sends them. Off: the older busy-time rule of
    /// `rate.rs` (kept for comparison and for readers without marks).
    pub congestion_model: bool,
}

/// Smallest sample (in fragments) that gets recovery shards.
pub const FEC_MIN_FRAGS: u16 = 4;
/// Largest sample (in fragments, ≈ 5.8 MB) that gets recovery shards: the
/// decoder's work grows with the sample.
pub const FEC_MAX_FRAGS: u16 = 4096;
/// Below this reported loss no recovery shards are sent.
pub const FEC_MIN_LOSS: f64 = 0.005;

/// Recovery shards for `k` fragments at loss `p`: the expected losses of
/// the `k + r` datagrams plus a margin of two standard deviations, so that
/// most samples arrive rebuildable, at most `k`. The margin is capped at
/// 6 % of the data on the wire (`0.06 k / (1 − p)`), so that the first
/// transmission stays within `1.06 / (1 − p)` of the payload and repairs
/// have the rest of issue 20's `1.15 / (1 − p)` (k = 23, p = 0.2 → 8;
/// k = 91, p = 0.2 → 30; k = 91, p = 0.01 → 3). Best effort has no repair
/// to fall back on: [`fec_shards_best_effort`]. A [`Sender`] does not
/// round up per sample: it carries the fraction to the next one.
pub fn fec_shards(k: u16, p: f64) -> u16 {
    reliable_shards_mean(k, p).ceil() as u16
}

/// [`fec_shards`] before rounding.
fn reliable_shards_mean(k: u16, p: f64) -> f64 {
    shards_mean(k, p, 2.0, 0.06)
}

/// Recovery shards for a best-effort sample: two and a half standard
/// deviations (k = 45, p = 0.01 → 3: 0.2 % of samples lost instead of
/// 1.2 %), the margin capped at 10 % of the data on the wire so that
/// shards and headers stay within 1.15 / (1 − p) × the payload
/// (k = 45, p = 0.1 → 10).
pub fn fec_shards_best_effort(k: u16, p: f64) -> u16 {
    shards_mean(k, p, 2.5, 0.10).ceil() as u16
}

/// Expected losses of the `k + r` datagrams plus `sigmas` standard
/// deviations, the margin at most `cap × k / (1 − p)`; within 1..=k, 0
/// when FEC does not apply.
fn shards_mean(k: u16, p: f64, sigmas: f64, cap: f64) -> f64 {
    if p < FEC_MIN_LOSS || !(FEC_MIN_FRAGS..=FEC_MAX_FRAGS).contains(&k) {
        return 0.0;
    }
    let p = p.min(0.5);
    let k = f64::from(k);
    let margin = (sigmas * (k * p).sqrt()).min(cap * k / (1.0 - p));
    (k * p / (1.0 - p) + margin).clamp(1.0, k)
}

/// Recovery shards for the next reliable sample: [`fec_shards`] without
/// its rounding up, the fraction carried to the next sample in `carry`, so
/// that on average the shards are what the formula says (rounding up cost
/// up to one shard per sample: 4 % of a 32 KB sample on the wire, which
/// put 10 % loss at 5 Mbit/s over issue 20's bound).
fn fec_shards_carried(k: u16, p: f64, carry: &mut f64) -> u16 {
    let mean = reliable_shards_mean(k, p);
    if mean == 0.0 {
        *carry = 0.0;
        return 0;
    }
    *carry += mean;
    let r = carry.floor().min(f64::from(k));
    *carry = (*carry - r).clamp(0.0, 1.0);
    r as u16
}

impl SenderConfig {
    /// Defaults for a 300 Mbit/s wireless link used at 60 %: 1472 B
    /// datagrams, reliable keep_last, 1 s of link in history.
    pub fn new(stream: u32) -> Self {
        let link = 300_000_000 / 8;
        SenderConfig {
            stream,
            mtu: crate::DEFAULT_MTU,
            reliable: true,
            keep_all: false,
            history_samples: 1024,
            history_bytes: crate::history_bytes_for(link, 0.6),
            rate: link,
            burst: None,
            lifespan: None,
            heartbeat_min: Duration::from_millis(2),
            heartbeat_max: Duration::from_millis(100),
            heartbeat_idle: Duration::from_secs(1),
            silence: Duration::from_millis(500),
            probe_interval: Duration::from_millis(200),
            fec: true,
            adaptive_rate: true,
            congestion_model: true,
        }
    }
}

/// Why a write was refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// keep_all: the history is at its bound; retry when the peer acknowledges.
    #[error("history full ({samples} samples, {bytes} bytes): the reader has not acknowledged; retry later or use keep_last")]
    Full {
        /// Samples held.
        samples: usize,
        /// Bytes held.
        bytes: usize,
    },
    /// keep_all: more is waiting to go out than the path carries in time
    /// (see [`BACKLOG_TIME`]); retry once it has gone out (the driver
    /// blocks), lower the rate or use keep_last.
    #[error("{unsent} bytes wait unsent (limit {limit}): the path carries less than is written; retry once they are out, or use keep_last")]
    Backlog {
        /// Bytes not yet sent the first time.
        unsent: usize,
        /// The most the new sample may find ahead of it.
        limit: usize,
    },
    /// The sample needs more than 65 535 fragments.
    #[error("sample of {0} bytes exceeds the {1}-byte maximum for this MTU")]
    TooLarge(usize, usize),
}

/// A fragment sent this little before a heartbeat may still arrive after
/// it (reordering); it is not repeated for that heartbeat's NACK.
const REORDER_US: u32 = 1000;

/// How long an outage is probed fast (see [`SenderConfig::probe_interval`]).
pub const PROBE_FAST_FOR: Duration = Duration::from_secs(30);
/// Longest probe period in a long outage: probes back off to this.
pub const PROBE_SLOW: Duration = Duration::from_secs(1);

/// What happened on the sending side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenderEvent {
    /// No feedback for the silence period: transmission stopped, probing.
    PeerSilent,
    /// The peer answered again: resuming, paced.
    PeerBack,
}

/// Counters and estimates.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SenderStats {
    /// Samples accepted by `write`.
    pub written: u64,
    /// Samples dropped before they had all gone out (keep_last): by the
    /// history bounds, or unsent by back-pressure.
    pub dropped: u64,
    /// keep_all writes refused by back-pressure ([`WriteError::Backlog`]).
    pub backpressure: u64,
    /// Bytes not yet sent the first time.
    pub unsent_bytes: usize,
    /// Samples whose lifespan ended before they had all gone out.
    pub expired: u64,
    /// Fragments sent the first time.
    pub fragments: u64,
    /// Fragments sent again after a NACK.
    pub retransmitted: u64,
    /// Heartbeats sent.
    pub heartbeats: u64,
    /// Of them, probes sent while the peer was silent.
    pub probes: u64,
    /// ACKNACKs received.
    pub acknacks: u64,
    /// Bytes sent (all datagrams).
    pub bytes: u64,
    /// Smoothed round-trip time, µs (0: unknown).
    pub srtt_us: f64,
    /// Current pacing rate, bytes/s.
    pub pacing_rate: u64,
    /// Smallest recent RTT, µs (the queue-free path; 0: unknown).
    pub min_rtt_us: f64,
    /// Times the pacing rate was cut to a slower path (or, with arrival
    /// marks, because the path delivered less than was sent).
    pub rate_cuts: u64,
    /// Bandwidth estimate from the reader's arrival marks, bytes/s (0: no
    /// estimate: the reader sends no marks or nothing was measured yet).
    pub bw: u64,
    /// One-way queueing delay of the newest mark over its 5–10 s minimum, µs.
    pub queue_delay_us: u64,
    /// Loss taken as random (not congestion), 0..0.3.
    pub random_loss: f64,
    /// Samples held.
    pub history_samples: usize,
    /// Bytes held.
    pub history_bytes: usize,
    /// Outages seen.
    pub outages: u64,
    /// FEC recovery shards sent.
    pub fec_shards: u64,
    /// Loss of first transmissions the reader reports (0..1).
    pub loss: f64,
}

struct Entry {
    seq: u64,
    stamp_ns: u64,
    data: Bytes,
    frags: u16,
    piece: usize,
    written: Instant,
    /// The last send of each fragment, then of each recovery shard.
    sent: Vec<marks::SendRec>,
    /// Recovery shards still to send the first time (freed once sent).
    fec: Vec<Vec<u8>>,
    /// Recovery shards made for the sample.
    recovery: u16,
}

impl Entry {
    fn fragment(&self, frag: u16) -> &[u8] {
        let start = frag as usize * self.piece;
        let end = (start + self.piece).min(self.data.len());
        &self.data[start.min(end)..end]
    }
}

/// The writing side of one stream. See the crate docs.
pub struct Sender {
    cfg: SenderConfig,
    epoch: Instant,
    history: VecDeque<Entry>,
    history_bytes: usize,
    next_seq: u64,
    /// Every sample below this is acknowledged.
    acked: u64,
    /// Samples (by seq) with fragments still to send the first time, and the
    /// next fragment of the front one.
    fresh: VecDeque<u64>,
    fresh_frag: u16,
    repair: BTreeSet<(u64, u16)>,
    pacer: Pacer,
    rate: RateControl,
    next_heartbeat: Instant,
    last_heartbeat: Option<Instant>,
    hb_count: u32,
    last_feedback: Instant,
    /// When data became outstanding after everything had been
    /// acknowledged: silence counts from here at the earliest (an idle
    /// stream hears little, and that is not an outage).
    waiting_since: Instant,
    silent: bool,
    /// When the current outage began.
    silent_at: Instant,
    /// Probe period in a long outage (doubles up to [`PROBE_SLOW`]).
    probe_gap: Duration,
    srtt_us: f64,
    /// Mean deviation of the RTT, µs (RFC 6298's RTTVAR).
    rttvar_us: f64,
    write_interval: Option<f64>,
    last_write: Option<Instant>,
    events: VecDeque<SenderEvent>,
    stats: SenderStats,
    /// Loss of first transmissions, as the reader last reported it.
    loss: f64,
    /// Recovery shards owed to the next sample (a fraction).
    fec_carry: f64,
    /// Bytes not yet sent the first time (fresh fragments and shards).
    unsent: usize,
    /// Back-pressure allowance after the stream resumed, and the repair
    /// bytes sent when it was last set (see `backlog.rs`).
    allowance: Option<(usize, u64)>,
    /// Payload bytes of repairs sent.
    repaired_bytes: u64,
    /// Congestion control from the reader's arrival marks (`cc.rs`); on
    /// from the first mark (a reader without marks leaves `rate.rs` on).
    cc: Controller,
    cc_on: bool,
    /// Bytes and DATA/FEC datagrams sent on the stream.
    sent_bytes: u64,
    sent_datagrams: u64,
    /// Times the writer ran out of data for longer than a wake-up, whether
    /// it has data since, and since when it has none.
    idle: u32,
    busy: bool,
    dry_since: Instant,
    marks: std::collections::VecDeque<marks::Mark>,
    /// The newest mark taken, for the loss between marks.
    last_mark: Option<marks::Mark>,
    /// First raw one-way delay seen (the clocks' offset, roughly).
    owd_ref: Option<u32>,
}

impl Sender {
    /// A sender starting at `now`.
    pub fn new(cfg: SenderConfig, now: Instant) -> Self {
        let burst = cfg
            .burst
            .unwrap_or((cfg.rate / 500) as usize)
            .max(cfg.mtu * 4);
        let mut s = Sender {
            pacer: Pacer::new(cfg.rate, burst, cfg.mtu * 4, now),
            cc: Controller::new(cfg.rate, now),
            rate: RateControl::new(cfg.rate, now),
            cfg,
            epoch: now,
            history: VecDeque::new(),
            history_bytes: 0,
            next_seq: 1,
            acked: 1,
            fresh: VecDeque::new(),
            fresh_frag: 0,
            repair: BTreeSet::new(),
            next_heartbeat: now,
            last_heartbeat: None,
            hb_count: 0,
            last_feedback: now,
            waiting_since: now,
            silent: false,
            silent_at: now,
            probe_gap: Duration::ZERO,
            srtt_us: 0.0,
            rttvar_us: 0.0,
            write_interval: None,
            last_write: None,
            events: VecDeque::new(),
            stats: SenderStats::default(),
            loss: 0.0,
            fec_carry: 0.0,
            unsent: 0,
            allowance: None,
            repaired_bytes: 0,
            cc_on: false,
            sent_bytes: 0,
            sent_datagrams: 0,
            idle: 0,
            busy: false,
            dry_since: now,
            marks: std::collections::VecDeque::new(),
            last_mark: None,
            owd_ref: None,
        };
        // The model starts low and finds the path; without it (or until a
        // best-effort reader's first mark), the configured rate. Bursts stay
        // 2 ms of whatever the rate is (`set_rate` scales them).
        if s.model() {
            s.pacer.set_rate(s.cc.rate());
        }
        s
    }

    /// Fragment size: with FEC, a fragment padded to even length must fit
    /// a FEC datagram too.
    fn max_payload(&self) -> usize {
        let header = if self.cfg.fec {
            FEC_HEADER + 1
        } else {
            DATA_HEADER
        };
        self.cfg.mtu.saturating_sub(header).max(1)
    }

    /// Largest sample this MTU can carry.
    pub fn max_sample(&self) -> usize {
        self.max_payload() * MAX_FRAGS as usize
    }

    /// Adds a sample; it goes out paced by [`Sender::poll_transmit`].
    pub fn write(&mut self, now: Instant, data: Bytes, stamp_ns: u64) -> Result<u64, WriteError> {
        if data.len() > self.max_sample() {
            return Err(WriteError::TooLarge(data.len(), self.max_sample()));
        }
        self.expire(now);
        self.make_room(data.len())?;
        while !self.history.is_empty()
            && (self.history.len() >= self.cfg.history_samples
                || self.history_bytes + data.len() > self.cfg.history_bytes)
        {
            if self.cfg.keep_all && self.cfg.reliable {
                return Err(WriteError::Full {
                    samples: self.history.len(),
                    bytes: self.history_bytes,
                });
            }
            if self.pop_front() {
                self.stats.dropped += 1;
            }
        }
        let frags = data.len().div_ceil(self.max_payload()).max(1) as u16;
        let piece = data.len().div_ceil(frags as usize);
        let seq = self.next_seq;
        if self.acked >= self.next_seq {
            self.waiting_since = now;
        }
        self.next_seq += 1;
        self.history_bytes += data.len();
        // Best effort too, when its reader reports loss: a large sample is
        // lost whole when any fragment is, and shards rebuild it.
        let r = match (self.cfg.fec, self.cfg.reliable) {
            (false, _) => 0,
            (true, true) => fec_shards_carried(frags, self.loss, &mut self.fec_carry),
            (true, false) => fec_shards_best_effort(frags, self.loss),
        };
        let fec = recovery_shards(&data, frags, piece, r);
        self.unsent += data.len() + fec.iter().map(Vec::len).sum::<usize>();
        self.history.push_back(Entry {
            seq,
            stamp_ns,
            data,
            frags,
            piece,
            written: now,
            sent: vec![marks::SendRec::default(); frags as usize + fec.len()],
            recovery: fec.len() as u16,
            fec,
        });
        self.fresh.push_back(seq);
        self.stats.written += 1;
        // Publish-rate estimate (EWMA of intervals) for the heartbeat period.
        if let Some(last) = self.last_write {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            self.write_interval = Some(match self.write_interval {
                Some(i) => 0.875 * i + 0.125 * dt,
                None => dt,
            });
        }
        self.last_write = Some(now);
        // In an outage the probe schedule rules (a writing application
        // would otherwise probe a dead link at twice its publish rate).
        if self.cfg.reliable && !self.silent && self.next_heartbeat > now + self.heartbeat_period()
        {
            self.next_heartbeat = now + self.heartbeat_period();
        }
        Ok(seq)
    }

    /// Forgets the oldest sample; true when it had not all gone out yet
    /// (a sample dropped on the writer's side, rather than one sent and
    /// not yet acknowledged: whether that one arrived is the reader's to
    /// count).
    fn pop_front(&mut self) -> bool {
        let Some(e) = self.history.pop_front() else {
            return false;
        };
        self.history_bytes -= e.data.len();
        if self.fresh.front() == Some(&e.seq) {
            self.unsent -= e.unsent_from(self.fresh_frag);
            self.fresh.pop_front();
            self.fresh_frag = 0;
            return true;
        }
        false
    }

    fn first_seq(&self) -> u64 {
        self.history.front().map_or(self.next_seq, |e| e.seq)
    }

    fn entry(&self, seq: u64) -> Option<&Entry> {
        entry_in(&self.history, seq)
    }

    fn entry_mut(&mut self, seq: u64) -> Option<&mut Entry> {
        let first = self.history.front()?.seq;
        self.history.get_mut(seq.checked_sub(first)? as usize)
    }

    fn expire(&mut self, now: Instant) {
        let Some(ls) = self.cfg.lifespan else { return };
        while self
            .history
            .front()
            .is_some_and(|e| now.saturating_duration_since(e.written) > ls)
        {
            if self.pop_front() {
                self.stats.expired += 1;
            }
        }
    }

    /// Feeds a datagram from the reader (ACKNACK). Errors are malformed input.
    /// Parses it; a driver that already parsed it (an [`crate::Endpoint`]
    /// routes parsed packets) calls [`Sender::handle_packet`].
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        bytes: &[u8],
    ) -> Result<(), ferry_wire::WireError> {
        self.handle_packet(now, &Packet::parse(bytes)?);
        Ok(())
    }

    /// Feeds a parsed datagram from the reader; anything but an ACKNACK of
    /// this stream is ignored.
    pub fn handle_packet(&mut self, now: Instant, p: &Packet<'_>) {
        if p.stream != self.cfg.stream {
            return;
        }
        let Datagram::AckNack(a) = &p.body else {
            return;
        };
        // The first answer after an outage: the backlog then may drain,
        // but must not grow (`backlog.rs`).
        let resumed = self.silent;
        self.on_acknack(now, a);
        if resumed {
            self.flowing_again();
        }
    }

    fn on_acknack(&mut self, now: Instant, a: &rudp::AckNack) {
        self.stats.acknacks += 1;
        self.last_feedback = now;
        self.loss = f64::from(a.loss_permille) / 1000.0;
        if self.silent {
            self.silent = false;
            self.events.push_back(SenderEvent::PeerBack);
            // Marks from before the outage tell nothing of the path now.
            self.marks.clear();
            self.last_mark = None;
            self.cc.path_back(now);
        }
        if a.echo_us != 0 {
            let rtt = micros(self.epoch, now)
                .wrapping_sub(a.echo_us)
                .saturating_sub(a.hold_us) as f64;
            if rtt < 60e6 {
                if self.srtt_us == 0.0 {
                    self.srtt_us = rtt;
                    self.rttvar_us = rtt / 2.0;
                } else {
                    self.rttvar_us = 0.75 * self.rttvar_us + 0.25 * (self.srtt_us - rtt).abs();
                    self.srtt_us = 0.875 * self.srtt_us + 0.125 * rtt;
                }
                if self.cfg.adaptive_rate && !self.cfg.congestion_model {
                    let recv = u64::from(a.rate_kbps) * 1000;
                    if let Some(r) = self.rate.on_rtt(now, rtt, self.srtt_us, recv, self.loss) {
                        self.pacer.set_rate(r);
                    }
                }
            }
        }
        if self.cfg.adaptive_rate && self.cfg.congestion_model {
            match &a.arrival {
                Some(m) => {
                    self.cc_on = true;
                    self.cc.on_receive_rate(f64::from(a.rate_kbps) * 1000.0);
                    self.on_arrival(now, m);
                    self.cc.tick(now, self.srtt_us);
                    self.pacer.set_rate(self.cc.rate());
                }
                None if !self.cc_on => {
                    // A reader from before arrival marks: the older rule,
                    // from the configured rate.
                    self.cfg.congestion_model = false;
                    self.pacer.set_rate(self.rate.rate());
                }
                None => {}
            }
        }
        if a.base > self.acked {
            self.acked = a.base.min(self.next_seq);
            if self.cfg.reliable {
                while self.history.front().is_some_and(|e| e.seq < self.acked) {
                    self.pop_front();
                }
                self.drop_leading_tombstones();
                let acked = self.acked;
                self.repair = self.repair.split_off(&(acked, 0));
                if self.acked == self.next_seq && !self.silent {
                    // All acknowledged: the heartbeats scheduled for it
                    // would only be answered (and their answers, spread
                    // over idle time, would tell the rate estimate of
                    // nothing but idleness).
                    self.next_heartbeat = now + self.cfg.heartbeat_idle;
                }
            }
        }
        if !self.cfg.reliable {
            return;
        }
        let evidence = nack::Evidence::new(self, now, a);
        for m in &a.missing {
            let Some(e) = entry_in(&self.history, m.seq()) else {
                continue;
            };
            let seq = e.seq;
            let want = |frag: u16, e: &Entry, repair: &mut BTreeSet<(u64, u16)>| {
                if evidence.repeat(e, frag) {
                    repair.insert((seq, frag));
                }
            };
            match m {
                Missing::Sample(_) => {
                    for f in 0..e.frags {
                        want(f, e, &mut self.repair);
                    }
                }
                Missing::Fragments {
                    frag_base, bitmap, ..
                } => {
                    for (i, byte) in bitmap.iter().enumerate() {
                        for bit in 0..8 {
                            if byte & (1 << bit) != 0 {
                                if let Some(f) = frag_base.checked_add((i * 8 + bit) as u16) {
                                    want(f, e, &mut self.repair);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Advances time: lifespan expiry and outage detection.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.expire(now);
        if self.cfg.reliable
            && !self.silent
            && self.acked < self.next_seq
            && now.saturating_duration_since(self.silent_since()) > self.silence_limit()
        {
            self.silent = true;
            self.silent_at = now;
            self.probe_gap = Duration::ZERO;
            self.stats.outages += 1;
            self.events.push_back(SenderEvent::PeerSilent);
            self.next_heartbeat = now;
        }
    }

    /// Writes the next datagram to send now, if any (paced), into `out`
    /// (cleared first; its capacity is reused, so a driver that keeps one
    /// buffer allocates nothing per datagram). Returns false when there is
    /// nothing to send now; `out` is then unspecified.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        self.next_datagram(now, out).is_some()
    }

    fn next_datagram(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<()> {
        if self.cfg.reliable && now >= self.next_heartbeat {
            let period = if self.silent {
                self.stats.probes += 1;
                self.probe_period(now)
            } else {
                self.heartbeat_period()
            };
            self.next_heartbeat = now + period;
            self.last_heartbeat = Some(now);
            self.hb_count = self.hb_count.wrapping_add(1);
            self.stats.heartbeats += 1;
            let hb = Heartbeat {
                first: self.first_seq(),
                last: self.next_seq - 1,
                count: self.hb_count,
                sent_us: micros(self.epoch, now),
            };
            rudp::encode_heartbeat_into(out, self.cfg.stream, &hb);
            self.stats.bytes += out.len() as u64;
            return Some(());
        }
        if self.silent {
            return None;
        }
        let Some((seq, frag, is_repair)) = self.next_fragment() else {
            self.ran_dry(now);
            return None;
        };
        let len = {
            let e = self.entry(seq)?;
            if frag >= e.frags {
                FEC_HEADER + e.fec.get((frag - e.frags) as usize).map_or(0, Vec::len)
            } else {
                DATA_HEADER + e.fragment(frag).len()
            }
        };
        if !self.pacer.try_send(now, len) {
            self.rate.limited(now);
            self.cc.limited();
            return None;
        }
        self.keep_busy(now);
        if !is_repair && self.send_shard(now, seq, frag, out).is_some() {
            return Some(());
        }
        let now_us = micros(self.epoch, now);
        let stream = self.cfg.stream;
        let first = self.first_seq();
        let e = self.history.get_mut((seq - first) as usize)?;
        let d = Data {
            seq,
            stamp_ns: e.stamp_ns,
            sample_len: e.data.len() as u32,
            frag,
            frags: e.frags,
            payload: e.fragment(frag),
        };
        rudp::encode_data(out, stream, &d);
        let last_of_sample = frag + 1 == e.frags + e.recovery;
        let payload = d.payload.len();
        self.record_send(seq, frag, out.len(), now_us);
        if is_repair {
            self.repaired_bytes += payload as u64;
            self.repair.remove(&(seq, frag));
            self.stats.retransmitted += 1;
            if self.repair.is_empty() && self.cfg.reliable {
                // End of a repair burst: let the reader re-NACK what was lost again.
                self.tail_heartbeat(now);
            }
        } else {
            self.stats.fragments += 1;
            self.unsent -= payload;
            self.fresh_frag += 1;
            if last_of_sample {
                self.sample_out(now, seq);
            }
        }
        self.stats.bytes += out.len() as u64;
        Some(())
    }

    /// Writes the next fresh datagram into `out` when it is a recovery
    /// shard (after the data fragments of its sample); None for a data
    /// fragment.
    fn send_shard(&mut self, now: Instant, seq: u64, frag: u16, out: &mut Vec<u8>) -> Option<()> {
        let first = self.first_seq();
        let stream = self.cfg.stream;
        let e = self.history.get_mut((seq - first) as usize)?;
        if frag < e.frags {
            return None;
        }
        let index = frag - e.frags;
        let f = Fec {
            seq,
            stamp_ns: e.stamp_ns,
            sample_len: e.data.len() as u32,
            index,
            frags: e.frags,
            recovery: e.recovery,
            payload: e.fec.get(index as usize).map_or(&[][..], Vec::as_slice),
        };
        rudp::encode_fec(out, stream, &f);
        self.unsent -= f.payload.len();
        let last = index + 1 == e.recovery;
        if last {
            e.fec = Vec::new(); // sent: shards are not kept for repair
        }
        self.record_send(seq, frag, out.len(), micros(self.epoch, now));
        self.stats.fec_shards += 1;
        self.fresh_frag += 1;
        if last {
            self.sample_out(now, seq);
        }
        self.stats.bytes += out.len() as u64;
        Some(())
    }

    /// The last datagram of fresh sample `seq` (fragment or recovery shard)
    /// has left: on to the next sample.
    fn sample_out(&mut self, now: Instant, seq: u64) {
        self.fresh.pop_front();
        self.fresh_frag = 0;
        if self.cfg.reliable {
            // A lost tail fragment is only noticed by a heartbeat: send one
            // right after the sample, not a period later.
            self.tail_heartbeat(now);
        } else {
            // Best effort keeps nothing once it is out.
            while self.history.front().is_some_and(|e| e.seq <= seq) {
                self.pop_front();
            }
            self.drop_leading_tombstones();
        }
    }

    /// Repairs first (oldest first), then new fragments in order.
    fn next_fragment(&mut self) -> Option<(u64, u16, bool)> {
        let first = self.first_seq();
        while let Some(&(seq, frag)) = self.repair.first() {
            if seq >= first {
                return Some((seq, frag, true));
            }
            self.repair.pop_first();
        }
        while let Some(&seq) = self.fresh.front() {
            if seq >= first && self.entry(seq).is_some() {
                return Some((seq, self.fresh_frag, false));
            }
            self.fresh.pop_front();
            self.fresh_frag = 0;
        }
        None
    }

    /// When to call again (next heartbeat, pacing slot or silence check).
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        let mut t = if self.cfg.reliable {
            Some(self.next_heartbeat)
        } else {
            None
        };
        let has_data = !self.silent && (!self.repair.is_empty() || !self.fresh.is_empty());
        if has_data {
            let p = self.pacer.next_send(now).unwrap_or(now);
            t = Some(t.map_or(p, |t| t.min(p)));
        }
        if self.cfg.reliable && !self.silent && self.acked < self.next_seq {
            let s = self.silent_since() + self.silence_limit() + Duration::from_micros(1);
            t = Some(t.map_or(s, |t| t.min(s)));
        }
        if let (Some(ls), Some(e)) = (self.cfg.lifespan, self.history.front()) {
            let x = e.written + ls + Duration::from_micros(1);
            t = Some(t.map_or(x, |t| t.min(x)));
        }
        t
    }

    /// Next event.
    pub fn poll_event(&mut self) -> Option<SenderEvent> {
        self.events.pop_front()
    }

    /// True while the peer is considered gone.
    pub fn is_silent(&self) -> bool {
        self.silent
    }

    /// True when every written sample is acknowledged (reliable) or sent.
    pub fn is_idle(&self) -> bool {
        if self.cfg.reliable {
            self.acked >= self.next_seq
        } else {
            self.fresh.is_empty()
        }
    }

    /// True once the reader has answered at least once.
    pub fn has_feedback(&self) -> bool {
        self.stats.acknacks > 0
    }

    /// Changes the configured link rate (with `adaptive_rate`, the ceiling).
    pub fn set_rate(&mut self, rate: u64) {
        self.rate.set_ceiling(rate);
        self.cc.set_cap(rate);
        self.pacer.set_rate(if self.model() {
            self.cc.rate()
        } else if self.cfg.adaptive_rate {
            self.rate.rate()
        } else {
            rate
        });
    }

    /// Whether the congestion model paces (adaptive, not turned off by
    /// config or by a reader without arrival marks; best effort once its
    /// reader's first mark came: before, it paces at the configured rate).
    fn model(&self) -> bool {
        self.cfg.adaptive_rate && self.cfg.congestion_model && (self.cfg.reliable || self.cc_on)
    }

    /// Counters and estimates.
    pub fn stats(&self) -> SenderStats {
        SenderStats {
            srtt_us: self.srtt_us,
            pacing_rate: self.pacer.rate(),
            min_rtt_us: self.rate.min_rtt_us(),
            rate_cuts: self.rate.cuts() + self.cc.cuts(),
            bw: self.cc.bw() as u64,
            queue_delay_us: self.cc.queue_delay_us(),
            random_loss: self.cc.random_loss(),
            loss: self.loss,
            history_samples: self.history.len(),
            history_bytes: self.history_bytes,
            unsent_bytes: self.unsent,
            ..self.stats
        }
    }
}

/// Reed–Solomon recovery shards of a sample cut into `frags` fragments of
/// `piece` bytes (the last one shorter), each zero-padded to even length.
fn recovery_shards(data: &[u8], frags: u16, piece: usize, r: u16) -> Vec<Vec<u8>> {
    if r == 0 {
        return Vec::new();
    }
    let shard = piece + (piece & 1);
    let originals: Vec<Vec<u8>> = (0..frags as usize)
        .map(|f| {
            let start = (f * piece).min(data.len());
            let end = (start + piece).min(data.len());
            let mut v = data[start..end].to_vec();
            v.resize(shard, 0);
            v
        })
        .collect();
    // Counts and sizes are within the codec's limits (k ≤ 4096, r ≤ k,
    // even non-zero shards); an error would only mean no shards.
    reed_solomon_simd::encode(frags as usize, r as usize, &originals).unwrap_or_default()
}

fn micros(epoch: Instant, now: Instant) -> u32 {
    crate::micros(epoch, now)
}

fn entry_in(history: &VecDeque<Entry>, seq: u64) -> Option<&Entry> {
    let first = history.front()?.seq;
    history.get(seq.checked_sub(first)? as usize)
}
