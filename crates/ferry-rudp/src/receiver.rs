//! The reading side of one stream.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_wire::rudp::{self, AckNack, Datagram, Missing, Packet, MAX_BITMAP};
use ferry_wire::WireError;

/// Settings of a [`Receiver`].
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    /// Stream id to accept.
    pub stream: u32,
    /// Largest datagram to send (ACKNACKs).
    pub mtu: usize,
    /// Repair losses and deliver in order (false: best effort).
    pub reliable: bool,
    /// Largest sample accepted; a peer announcing more is ignored.
    pub max_sample: usize,
    /// Most bytes held in partial and out-of-order samples.
    pub max_pending_bytes: usize,
    /// Most samples ahead of the next expected one that are tracked.
    pub window: u64,
    /// Wait this long after a gap before NACKing it (reordering tolerance).
    pub nack_delay: Duration,
    /// Least time between two gap-triggered NACKs.
    pub nack_interval: Duration,
    /// Best effort: a partial sample older than this is abandoned.
    pub partial_timeout: Duration,
}

impl ReceiverConfig {
    /// Defaults matching [`crate::SenderConfig::new`].
    pub fn new(stream: u32) -> Self {
        ReceiverConfig {
            stream,
            mtu: crate::DEFAULT_MTU,
            reliable: true,
            max_sample: 64 << 20,
            max_pending_bytes: 256 << 20,
            window: 4096,
            nack_delay: Duration::from_micros(500),
            nack_interval: Duration::from_millis(2),
            partial_timeout: Duration::from_secs(1),
        }
    }
}

/// A delivered sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Sequence number on this stream.
    pub seq: u64,
    /// Source time, ns since the epoch.
    pub stamp_ns: u64,
    /// The bytes.
    pub data: Bytes,
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// DATA fragments accepted.
    pub fragments: u64,
    /// Fragments already held (duplicates, late repairs).
    pub duplicates: u64,
    /// Samples delivered.
    pub delivered: u64,
    /// Samples given up: no longer in the writer's history, or abandoned
    /// partials (best effort).
    pub lost: u64,
    /// Fragments dropped by the memory or window bounds.
    pub refused: u64,
    /// Malformed or inconsistent datagrams.
    pub malformed: u64,
    /// ACKNACKs sent.
    pub acknacks: u64,
    /// FEC recovery shards accepted.
    pub fec_shards: u64,
    /// Fragments rebuilt from recovery shards (no repair round needed).
    pub fec_recovered: u64,
}

struct Partial {
    stamp_ns: u64,
    len: usize,
    frags: u16,
    piece: usize,
    got: Vec<u64>,
    have: u16,
    buf: Vec<u8>,
    first_seen: Instant,
    /// Recovery shards the writer sent (0: none seen) and those received.
    recovery: u16,
    shards: Vec<(u16, Vec<u8>)>,
    /// Bytes held in `shards` (counted in `pending_bytes`).
    shard_bytes: usize,
    /// Highest data fragment seen (+1): the loss estimate's denominator.
    reach: u16,
    /// Its loss has entered the estimate.
    measured: bool,
}

impl Partial {
    fn has(&self, f: u16) -> bool {
        self.got[f as usize / 64] & (1 << (f % 64)) != 0
    }
    /// Bytes it holds in `pending_bytes`.
    fn held(&self) -> usize {
        self.len + self.shard_bytes
    }
    /// Share of the data fragments up to the highest seen that are missing.
    fn loss(&self) -> f64 {
        if self.reach == 0 {
            return 0.0;
        }
        1.0 - f64::from(self.have.min(self.reach)) / f64::from(self.reach)
    }
}

/// The reading side of one stream. See the crate docs.
pub struct Receiver {
    cfg: ReceiverConfig,
    epoch: Instant,
    /// Next sample to deliver (reliable) / lowest still wanted (best effort).
    base: u64,
    partial: BTreeMap<u64, Partial>,
    complete: BTreeMap<u64, Sample>,
    pending_bytes: usize,
    /// Newest sample the writer said it has.
    writer_last: u64,
    /// Newest sample seen in any datagram.
    highest: u64,
    /// Newest sample seen in a DATA or FEC datagram: the first
    /// transmission of every older one is over (samples go out in order).
    data_highest: u64,
    last_hb: Option<(u32, Instant)>,
    nack_due: Option<Instant>,
    last_nack: Option<Instant>,
    ack_count: u32,
    out: VecDeque<Sample>,
    /// The ACKNACK to send (an ACKNACK is a cumulative snapshot: a newer
    /// one replaces one not yet sent) and whether it is due.
    ack: Vec<u8>,
    ack_due: bool,
    stats: ReceiverStats,
    /// Receive rate while data flows: bytes and time between arrivals no
    /// more than [`BUSY_GAP`] apart: idle time between bursts and repair
    /// round trips are left out, a lost datagram's slot is not, so it
    /// measures what the path delivers, not what the application sends.
    rate_bytes: u64,
    rate_busy: Duration,
    rate_since: Instant,
    last_arrival: Option<Instant>,
    rate_kbps: u32,
    /// Loss of first transmissions (0..1), averaged over fragments.
    loss: f64,
    /// Fragments in that average (up to [`LOSS_WINDOW`]).
    loss_measured: f64,
    /// The newest DATA/FEC datagram and the counters then (the ACKNACK's
    /// ARRIVAL block: the writer's congestion control).
    arrival: Option<rudp::Arrival>,
    /// DATA/FEC datagrams since the last ACKNACK.
    since_ack: u32,
    /// The application has no room: complete samples stay here,
    /// unacknowledged, so a reliable writer's window closes and its
    /// keep_all blocks (see [`Receiver::set_held`]).
    held: bool,
}

/// Fragments over which the loss estimate averages (an exponential
/// average weighted by each sample's fragments): a per-sample average
/// flickered under FEC's 0.5 % threshold at 1 % loss (45-fragment samples
/// lose 0 or 1 fragment), and 1 % in 8 samples went unprotected.
const LOSS_WINDOW: f64 = 1000.0;

/// Folds a sample of `frags` fragments that lost `lost` (0..1) into the
/// loss estimate: the plain mean of everything measured until a window's
/// worth of fragments (a quick and unbiased start), an exponential average
/// over the last [`LOSS_WINDOW`] fragments from then on.
fn loss_average(estimate: &mut f64, measured: &mut f64, lost: f64, frags: u16) {
    let frags = f64::from(frags.max(1));
    *measured = (*measured + frags).min(LOSS_WINDOW);
    *estimate += frags / *measured * (lost - *estimate);
}

/// Fragments to ask for when a sample with recovery shards lacks `need`
/// to be rebuilt, at loss `p`: the fewest whose repeats bring at least
/// `need` home nine times in ten (need 2 at 20 % loss: 3, 0.90; asking
/// for exactly 2 got both only 0.64 of the time, and each shortfall cost
/// one more round trip, two when the NACK was lost as well).
/// Above [`EXACT_ASK`] needed fragments the normal approximation serves
/// (the exact sum is quadratic in `need`, and `q^n` underflows).
fn repair_ask(need: u16, p: f64) -> u16 {
    if need == 0 || p < crate::sender::FEC_MIN_LOSS {
        return need;
    }
    let q = 1.0 - p.min(0.5);
    if need > EXACT_ASK {
        // Mean n·q, deviation √(n·p·q); 1.28 deviations: nine in ten.
        let n = (f64::from(need) + 1.28 * (f64::from(need) * (1.0 - q)).sqrt()) / q;
        return n.ceil().min(f64::from(need.saturating_mul(3))) as u16;
    }
    let mut n = need;
    // P(at least `need` of `n` arrive), binomial.
    while n < need.saturating_mul(3) {
        let (mut term, mut total) = (q.powi(i32::from(n)), 0.0);
        // Sum from all n arriving down to `need` arriving.
        for k in (need..=n).rev() {
            total += term;
            if k > 0 {
                term *= f64::from(k) / f64::from(n - k + 1) * (1.0 - q) / q;
            }
        }
        if total >= 0.9 {
            break;
        }
        n += 1;
    }
    n
}

/// Largest need [`repair_ask`] sums the binomial for.
const EXACT_ASK: u16 = 64;

/// An ACKNACK (with its arrival mark) goes out after this many DATA/FEC
/// datagrams at the latest (and at most every `nack_interval`): about 0.3 %
/// of the bytes received, as feedback.
const MARK_EVERY: u32 = 16;

/// Arrivals further apart than this are idle time, not path rate
/// (repairs come an RTT later, ≥ 2 ms on any radio link) — or than a
/// datagram's own time on a [`BUSY_RATE`] path: a full datagram takes
/// 2.4 ms on a 5 Mbit/s path, and with the gap fixed at 2 ms a burst into
/// such a path read as idle throughout, so the writer learnt no receive
/// rate, start-up ran at 64 Mbit/s for two seconds and the link's queue
/// dropped a third of what was sent.
const BUSY_GAP: Duration = Duration::from_millis(2);
/// The slowest path whose bursts still read as busy, bytes/s (1 Mbit/s).
const BUSY_RATE: f64 = 125_000.0;

/// Whether an arrival of `len` bytes `gap` after the one before came
/// within a burst.
fn busy(gap: Duration, len: usize) -> bool {
    gap <= BUSY_GAP || gap.as_secs_f64() <= len as f64 / BUSY_RATE
}

impl Receiver {
    /// A receiver starting at `now`; the stream's first sample is 1.
    pub fn new(cfg: ReceiverConfig, now: Instant) -> Self {
        Receiver {
            cfg,
            epoch: now,
            base: 1,
            partial: BTreeMap::new(),
            complete: BTreeMap::new(),
            pending_bytes: 0,
            writer_last: 0,
            highest: 0,
            data_highest: 0,
            last_hb: None,
            nack_due: None,
            last_nack: None,
            ack_count: 0,
            out: VecDeque::new(),
            ack: Vec::new(),
            ack_due: false,
            stats: ReceiverStats::default(),
            rate_bytes: 0,
            rate_busy: Duration::ZERO,
            rate_since: now,
            last_arrival: None,
            rate_kbps: 0,
            loss: 0.0,
            loss_measured: 0.0,
            arrival: None,
            since_ack: 0,
            held: false,
        }
    }

    /// Holds complete samples back while the application has no room for
    /// them (`true`), or lets them go again (`false`: what is complete is
    /// delivered and acknowledged at once, so the writer goes on without
    /// waiting for its next heartbeat). Held samples are neither delivered
    /// nor acknowledged, nor asked for again.
    pub fn set_held(&mut self, held: bool, now: Instant) {
        let was = std::mem::replace(&mut self.held, held);
        if was && !held {
            let base = self.base;
            self.deliver();
            if self.base != base {
                self.send_acknack(now);
            }
        }
    }

    /// Busy-time receive rate over windows of 100 ms (reported in ACKNACKs).
    fn measure_rate(&mut self, now: Instant, len: usize) {
        if let Some(last) = self.last_arrival {
            let gap = now.saturating_duration_since(last);
            if busy(gap, len) {
                self.rate_bytes += len as u64;
                self.rate_busy += gap;
            }
        }
        self.last_arrival = Some(now);
        if now.saturating_duration_since(self.rate_since) >= Duration::from_millis(100) {
            if self.rate_busy >= Duration::from_millis(2) {
                let r = self.rate_bytes as f64 / self.rate_busy.as_secs_f64() / 1000.0;
                self.rate_kbps = r.min(f64::from(u32::MAX)) as u32;
            }
            self.rate_bytes = 0;
            self.rate_busy = Duration::ZERO;
            self.rate_since = now;
        }
    }

    /// Feeds a datagram from the writer.
    pub fn handle_datagram(&mut self, now: Instant, bytes: &[u8]) -> Result<(), WireError> {
        self.handle_datagram_at(now, now, bytes)
    }

    /// Feeds a datagram that reached the host at `arrived` (a kernel receive
    /// timestamp) and is handled at `now`. The busy-time receive rate counts
    /// arrivals, so it measures the path, not how busy this process was.
    /// (RTT echoes keep counting from `now`: the writer's repair guard and
    /// silence limit must include this process's own delay.)
    pub fn handle_datagram_at(
        &mut self,
        now: Instant,
        arrived: Instant,
        bytes: &[u8],
    ) -> Result<(), WireError> {
        let p = match Packet::parse(bytes) {
            Ok(p) => p,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e);
            }
        };
        self.handle_packet_at(now, arrived, bytes.len(), &p)
    }

    /// Feeds a parsed datagram of `len` bytes that reached the host at
    /// `arrived` (see [`Receiver::handle_datagram_at`]); a driver that
    /// already parsed it (an [`crate::Endpoint`] routes parsed packets)
    /// calls this. Errors are fragments inconsistent with the stream.
    pub fn handle_packet_at(
        &mut self,
        now: Instant,
        arrived: Instant,
        len: usize,
        p: &Packet<'_>,
    ) -> Result<(), WireError> {
        let arrived = arrived.min(now);
        if p.stream != self.cfg.stream {
            return Ok(());
        }
        // The receive rate counts first transmissions only: a repair
        // arrives a round trip after the burst it belongs to, and counted
        // it stretched the burst (20 % loss at 300 Mbit/s: half the rate).
        let fresh = match &p.body {
            Datagram::Data(d) => {
                d.seq > self.data_highest
                    || d.seq == self.data_highest
                        && self.partial.get(&d.seq).is_none_or(|q| d.frag >= q.reach)
            }
            Datagram::Fec(_) => true,
            _ => false,
        };
        if fresh {
            self.measure_rate(arrived, len);
        }
        let id = match &p.body {
            Datagram::Data(d) => Some((d.seq, d.frag)),
            Datagram::Fec(f) => Some((f.seq, f.frags.saturating_add(f.index))),
            _ => None,
        };
        if let Some((seq, frag)) = id {
            let (bytes, datagrams) = self.arrival.map_or((0, 0), |a| (a.bytes, a.datagrams));
            self.arrival = Some(rudp::Arrival {
                seq,
                frag,
                at_us: crate::micros(self.epoch, arrived),
                bytes: bytes.wrapping_add(len as u32),
                datagrams: datagrams.wrapping_add(1),
            });
            // A mark within every train of MARK_EVERY datagrams: the writer
            // needs two marks of one burst for a delivery sample.
            self.since_ack += 1;
            // (Best effort too: its writer sizes recovery shards and its
            // rate from these, though it repairs nothing.)
            if self.since_ack >= MARK_EVERY && self.nack_due.is_none() {
                self.nack_due = Some(now);
            }
        }
        match &p.body {
            Datagram::Data(d) => self.on_data(now, *d),
            Datagram::Heartbeat(h) => {
                self.writer_last = self.writer_last.max(h.last);
                self.highest = self.highest.max(h.last);
                if self.cfg.reliable {
                    if h.first > self.base {
                        self.give_up_below(h.first);
                    }
                    self.last_hb = Some((h.sent_us, now));
                    // Answer every heartbeat: acknowledgement, NACKs, RTT echo.
                    self.send_acknack(now);
                }
                Ok(())
            }
            Datagram::Fec(f) => self.on_fec(now, *f),
            Datagram::AckNack(_) | Datagram::Hello(_) => Ok(()),
        }
    }

    fn on_data(&mut self, now: Instant, d: rudp::Data<'_>) -> Result<(), WireError> {
        let len = d.sample_len as usize;
        if len > self.cfg.max_sample {
            self.stats.refused += 1;
            return Ok(());
        }
        // Fragments are ceil(len / frags) long, the last one the remainder.
        let piece = len.div_ceil(d.frags as usize);
        let start = d.frag as usize * piece;
        let bad_split = if len == 0 { d.frags != 1 } else { start >= len };
        if bad_split || d.payload.len() != piece.min(len.saturating_sub(start)) {
            self.stats.malformed += 1;
            return Err(WireError::InvalidValue {
                field: "data.payload",
                value: d.payload.len() as u64,
            });
        }
        let Some(p) = self.admit(now, d.seq, d.stamp_ns, len, d.frags)? else {
            return Ok(());
        };
        if p.has(d.frag) {
            self.stats.duplicates += 1;
            return Ok(());
        }
        let start = d.frag as usize * p.piece;
        p.buf[start..start + d.payload.len()].copy_from_slice(d.payload);
        p.got[d.frag as usize / 64] |= 1 << (d.frag % 64);
        p.have += 1;
        p.reach = p.reach.max(d.frag + 1);
        let gap_inside = (0..d.frag).any(|f| !p.has(f));
        self.stats.fragments += 1;
        self.try_complete(d.seq);
        if self.cfg.reliable
            && (gap_inside
                || d.seq > self.base
                    && (self.base..d.seq)
                        .any(|s| !self.complete.contains_key(&s) && !self.partial.contains_key(&s)))
            && self.nack_due.is_none()
        {
            self.nack_due = Some(now + self.cfg.nack_delay);
        }
        Ok(())
    }

    /// The partial sample a fragment or shard of `seq` goes into, created if
    /// new; None when the datagram is to be ignored (duplicate, outside the
    /// window, over the memory bound), counted.
    fn admit(
        &mut self,
        now: Instant,
        seq: u64,
        stamp_ns: u64,
        len: usize,
        frags: u16,
    ) -> Result<Option<&mut Partial>, WireError> {
        if seq < self.base || self.complete.contains_key(&seq) {
            self.stats.duplicates += 1;
            return Ok(None);
        }
        if seq >= self.base.saturating_add(self.cfg.window) {
            if !self.cfg.reliable {
                // Best effort: the writer moved on; so do we.
                self.give_up_below(seq.saturating_sub(self.cfg.window / 2));
            } else {
                self.stats.refused += 1;
                return Ok(None);
            }
        }
        self.highest = self.highest.max(seq);
        self.data_highest = self.data_highest.max(seq);
        let cfg_pending = self.cfg.max_pending_bytes;
        if !self.partial.contains_key(&seq) {
            if self.pending_bytes + len > cfg_pending {
                if self.cfg.reliable {
                    self.stats.refused += 1;
                    return Ok(None);
                }
                // Best effort: make room by abandoning the oldest partials.
                while self.pending_bytes + len > cfg_pending {
                    let Some((_, p)) = self.partial.pop_first() else {
                        break;
                    };
                    self.pending_bytes -= p.held();
                    self.stats.lost += 1;
                }
            }
            self.pending_bytes += len;
            self.partial.insert(
                seq,
                Partial {
                    stamp_ns,
                    len,
                    frags,
                    piece: len.div_ceil(frags as usize),
                    got: vec![0; (frags as usize).div_ceil(64)],
                    have: 0,
                    buf: vec![0; len],
                    first_seen: now,
                    recovery: 0,
                    shards: Vec::new(),
                    shard_bytes: 0,
                    reach: 0,
                    measured: false,
                },
            );
        }
        let p = self.partial.get_mut(&seq).expect("inserted above");
        if p.len != len || p.frags != frags {
            self.stats.malformed += 1;
            return Err(WireError::InvalidValue {
                field: "data.sample_len",
                value: len as u64,
            });
        }
        Ok(Some(p))
    }

    fn on_fec(&mut self, now: Instant, f: rudp::Fec<'_>) -> Result<(), WireError> {
        let len = f.sample_len as usize;
        if len > self.cfg.max_sample {
            self.stats.refused += 1;
            return Ok(());
        }
        if self.admit(now, f.seq, f.stamp_ns, len, f.frags)?.is_none() {
            return Ok(());
        }
        let over = self.pending_bytes + f.payload.len() > self.cfg.max_pending_bytes;
        let p = self.partial.get_mut(&f.seq).expect("admitted");
        if p.recovery != 0 && p.recovery != f.recovery {
            self.stats.malformed += 1;
            return Err(WireError::InvalidValue {
                field: "fec.recovery",
                value: f.recovery as u64,
            });
        }
        p.recovery = f.recovery;
        if p.shards.iter().any(|(i, _)| *i == f.index) {
            self.stats.duplicates += 1;
            return Ok(());
        }
        if over {
            self.stats.refused += 1;
            return Ok(());
        }
        p.shards.push((f.index, f.payload.to_vec()));
        p.shard_bytes += f.payload.len();
        self.pending_bytes += f.payload.len();
        self.stats.fec_shards += 1;
        let last = f.index + 1 == f.recovery;
        self.try_complete(f.seq);
        if last && self.cfg.reliable && self.partial.contains_key(&f.seq) {
            // The sample's last datagram is in and it still cannot be
            // rebuilt: ask now (the writer's next heartbeat comes a
            // millisecond later, and a NACK spaced behind the last one
            // up to two).
            self.send_acknack(now);
        }
        Ok(())
    }

    /// Completes `seq` when all its fragments are in, or rebuilds the missing
    /// ones once fragments + recovery shards reach the fragment count.
    fn try_complete(&mut self, seq: u64) {
        let Some(p) = self.partial.get_mut(&seq) else {
            return;
        };
        let rebuildable = p.have < p.frags
            && !p.shards.is_empty()
            && p.have as usize + p.shards.len() >= p.frags as usize;
        if !p.measured && (rebuildable || p.have >= p.frags) {
            // Its loss enters the estimate before shards rebuild it (which
            // would hide the very loss they are sized to).
            p.measured = true;
            let lost = 1.0 - f64::from(p.have.min(p.frags)) / f64::from(p.frags.max(1));
            loss_average(&mut self.loss, &mut self.loss_measured, lost, p.frags);
        }
        if rebuildable {
            let (piece, len) = (p.piece, p.len);
            let shard = piece + (piece & 1);
            let fragment = move |f: usize| {
                let start = (f * piece).min(len);
                let end = (start + piece).min(len);
                (start, end)
            };
            let originals: Vec<(usize, Vec<u8>)> = (0..p.frags as usize)
                .filter(|f| p.has(*f as u16))
                .map(|f| {
                    let (a, b) = fragment(f);
                    let mut v = p.buf[a..b].to_vec();
                    v.resize(shard, 0);
                    (f, v)
                })
                .collect();
            let recovery = p.shards.iter().map(|(i, v)| (*i as usize, v));
            match reed_solomon_simd::decode(
                p.frags as usize,
                p.recovery as usize,
                originals,
                recovery,
            ) {
                Ok(restored) => {
                    for (f, v) in restored {
                        if f < p.frags as usize && !p.has(f as u16) {
                            let (a, b) = fragment(f);
                            p.buf[a..b].copy_from_slice(&v[..b - a]);
                            p.got[f / 64] |= 1 << (f % 64);
                            p.have += 1;
                            self.stats.fec_recovered += 1;
                        }
                    }
                }
                Err(_) => self.stats.malformed += 1,
            }
        }
        let Some(p) = self.partial.get(&seq) else {
            return;
        };
        if p.have < p.frags {
            return;
        }
        let p = self.partial.remove(&seq).expect("present");
        // The data stays counted in pending_bytes until delivered.
        self.pending_bytes -= p.shard_bytes;
        self.complete.insert(
            seq,
            Sample {
                seq,
                stamp_ns: p.stamp_ns,
                data: Bytes::from(p.buf),
            },
        );
        self.deliver();
    }

    /// Moves complete samples to the output.
    fn deliver(&mut self) {
        if self.cfg.reliable {
            if self.held {
                return;
            }
            while let Some(s) = self.complete.remove(&self.base) {
                self.pending_bytes -= s.data.len();
                self.base += 1;
                self.stats.delivered += 1;
                self.out.push_back(s);
            }
        } else {
            // Best effort: newest complete wins; older partials are abandoned.
            while let Some((seq, s)) = self.complete.pop_first() {
                self.pending_bytes -= s.data.len();
                if seq >= self.base {
                    self.base = seq + 1;
                    self.stats.delivered += 1;
                    self.out.push_back(s);
                }
            }
            let base = self.base;
            let stale: Vec<u64> = self.partial.range(..base).map(|(k, _)| *k).collect();
            for k in stale {
                if let Some(p) = self.partial.remove(&k) {
                    self.pending_bytes -= p.held();
                    self.stats.lost += 1;
                }
            }
        }
    }

    /// The writer no longer has samples below `first`: stop waiting for them.
    /// Walks only the samples held, never every number below `first` (a
    /// heartbeat may name any `first`: one that named 2^63 used to keep
    /// the I/O thread counting for good).
    fn give_up_below(&mut self, first: u64) {
        while self.base < first {
            let next_complete = self
                .complete
                .range(self.base..first)
                .next()
                .map(|(k, _)| *k);
            let next_partial = self.partial.range(self.base..first).next().map(|(k, _)| *k);
            let Some(seq) = next_complete.into_iter().chain(next_partial).min() else {
                self.stats.lost = self.stats.lost.saturating_add(first - self.base);
                self.base = first;
                break;
            };
            self.stats.lost = self.stats.lost.saturating_add(seq - self.base);
            if let Some(s) = self.complete.remove(&seq) {
                self.pending_bytes -= s.data.len();
                self.stats.delivered += 1;
                self.out.push_back(s);
            } else {
                if let Some(p) = self.partial.remove(&seq) {
                    self.pending_bytes -= p.held();
                }
                self.stats.lost += 1;
            }
            self.base = seq + 1;
        }
        self.deliver();
    }

    /// Incomplete samples whose loss is known enter the estimate now
    /// (repairs would hide it later): those older than the newest one with
    /// data (their whole first transmission is over), and any with a gap
    /// below the highest fragment seen (what is lost is known up to there;
    /// it is about to be NACKed and repaired). A newest sample without a
    /// gap is left alone: an ACKNACK in the middle of it (one every 16
    /// datagrams) would count only its first fragments, lost-free.
    fn measure_partials(&mut self) {
        let newest = self.data_highest;
        for (&seq, p) in self.partial.iter_mut() {
            let gap = p.have < p.reach;
            if !p.measured && p.reach > 0 && (seq < newest || gap) {
                p.measured = true;
                loss_average(&mut self.loss, &mut self.loss_measured, p.loss(), p.reach);
            }
        }
    }

    fn missing(&mut self) -> Vec<Missing> {
        self.measure_partials();
        let loss = self.loss;
        let mut v = Vec::new();
        let top = self.highest.max(self.writer_last);
        let mut seq = self.base;
        while seq <= top && v.len() < 1024 {
            if let Some(p) = self.partial.get(&seq) {
                let mut bitmap = Vec::new();
                let mut frag_base = None;
                // Recovery shards received count towards the sample: ask
                // only for as many fragments as it still lacks, plus what
                // the loss will likely take of them.
                let mut need = if p.shards.is_empty() {
                    p.frags
                } else {
                    repair_ask(
                        p.frags
                            .saturating_sub(p.have)
                            .saturating_sub(p.shards.len().min(usize::from(u16::MAX)) as u16),
                        loss,
                    )
                };
                for f in 0..p.frags {
                    if need == 0 {
                        break;
                    }
                    if !p.has(f) {
                        need -= 1;
                        let fb = *frag_base.get_or_insert(f);
                        let i = (f - fb) as usize;
                        if i / 8 >= MAX_BITMAP {
                            break;
                        }
                        if bitmap.len() <= i / 8 {
                            bitmap.resize(i / 8 + 1, 0);
                        }
                        bitmap[i / 8] |= 1 << (i % 8);
                    }
                }
                if let Some(frag_base) = frag_base {
                    v.push(Missing::Fragments {
                        seq,
                        frag_base,
                        bitmap,
                    });
                }
            } else if !self.complete.contains_key(&seq) {
                v.push(Missing::Sample(seq));
            }
            let Some(next) = seq.checked_add(1) else {
                break;
            };
            seq = next;
        }
        v
    }

    fn send_acknack(&mut self, now: Instant) {
        let (echo_us, hold_us) = match self.last_hb {
            Some((sent, at)) => (
                sent,
                now.saturating_duration_since(at)
                    .as_micros()
                    .min(u32::MAX as u128) as u32,
            ),
            None => (0, 0),
        };
        self.ack_count = self.ack_count.wrapping_add(1);
        let a = AckNack {
            base: self.base,
            count: self.ack_count,
            echo_us,
            hold_us,
            rate_kbps: self.rate_kbps,
            loss_permille: 0,
            // Best effort asks for nothing again.
            missing: if self.cfg.reliable {
                self.missing()
            } else {
                self.measure_partials();
                Vec::new()
            },
            // Always present (seq 0 before any data): it tells the writer
            // this reader marks arrivals.
            arrival: Some(self.arrival.unwrap_or_default()),
        };
        let a = AckNack {
            loss_permille: (self.loss * 1000.0).round().clamp(0.0, 1000.0) as u16,
            ..a
        };
        rudp::encode_acknack_into(&mut self.ack, self.cfg.stream, &a, self.cfg.mtu);
        self.ack_due = true;
        self.stats.acknacks += 1;
        self.nack_due = None;
        self.last_nack = Some(now);
        self.since_ack = 0;
    }

    /// Queues an ACKNACK now (e.g. to confirm a stream opening).
    pub fn acknowledge(&mut self, now: Instant) {
        self.send_acknack(now);
    }

    /// Advances time: sends due NACKs, abandons stale best-effort partials.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(t) = self.nack_due {
            let spaced = self
                .last_nack
                .is_none_or(|l| now.saturating_duration_since(l) >= self.cfg.nack_interval);
            if t <= now && spaced {
                self.send_acknack(now);
            }
        }
        if !self.cfg.reliable {
            let limit = self.cfg.partial_timeout;
            let stale: Vec<u64> = self
                .partial
                .iter()
                .filter(|(_, p)| now.saturating_duration_since(p.first_seen) > limit)
                .map(|(k, _)| *k)
                .collect();
            for k in stale {
                if let Some(p) = self.partial.remove(&k) {
                    self.pending_bytes -= p.held();
                    self.stats.lost += 1;
                }
            }
        }
    }

    /// When to call [`Receiver::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        let nack = self.nack_due.map(|t| match self.last_nack {
            Some(l) => t.max(l + self.cfg.nack_interval),
            None => t,
        });
        let partial = if self.cfg.reliable {
            None
        } else {
            self.partial
                .values()
                .map(|p| p.first_seen + self.cfg.partial_timeout)
                .min()
        };
        match (nack, partial) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Writes the datagram to send to the writer, if any, into `out`
    /// (cleared first; its capacity is reused). Returns false when there is
    /// nothing to send.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) -> bool {
        if !std::mem::take(&mut self.ack_due) {
            return false;
        }
        out.clear();
        out.extend_from_slice(&self.ack);
        true
    }

    /// The next delivered sample.
    pub fn poll_sample(&mut self) -> Option<Sample> {
        self.out.pop_front()
    }

    /// Bytes held in partial and out-of-order samples.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Counters.
    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    #[doc(hidden)]
    pub fn epoch(&self) -> Instant {
        self.epoch
    }
}
