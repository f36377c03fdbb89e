//! Test kit for ferry's sans-IO protocol cores.
//!
//! [`SimLink`] is one direction of a network link on a virtual clock: it
//! serialises datagrams at a rate (a FIFO like a `tbf` qdisc), adds delay and
//! jitter, loses, duplicates and reorders them with a seeded RNG, drops
//! everything during outages and counts datagrams above the MTU (which a
//! well-behaved protocol never sends). Thousands of seeded scenarios run in
//! seconds because nothing sleeps.

pub mod capture;
pub mod peer;
pub mod sample;
pub mod shell;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Small, fast, seeded RNG (xorshift64*) — deterministic scenarios.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (any value).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// How a link behaves.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// Bytes per second (0: unlimited).
    pub rate: u64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Uniform extra delay in [0, jitter) per datagram.
    pub jitter: Duration,
    /// Whether jitter may reorder datagrams (netem-like). Off, arrivals keep
    /// their sending order, as on 802.11, which delivers in order per flow.
    pub reorder: bool,
    /// Loss probability per datagram.
    pub loss: f64,
    /// Duplication probability per datagram.
    pub duplicate: f64,
    /// Largest datagram carried; larger ones are dropped and counted.
    pub mtu: usize,
    /// Datagrams that can wait for the rate limiter (like a qdisc limit).
    pub queue: usize,
    /// Windows (from the link's start) in which everything is dropped.
    pub outages: Vec<(Duration, Duration)>,
    /// Rate changes: from each time (from the link's start) on, the rate
    /// is the given bytes/s (a radio changing its modulation, a cell
    /// getting busy). The queue stays as long in time.
    pub rate_steps: Vec<(Duration, u64)>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate: 0,
            delay: Duration::from_millis(2),
            jitter: Duration::ZERO,
            reorder: true,
            loss: 0.0,
            duplicate: 0.0,
            mtu: 1472,
            queue: 10_000,
            outages: Vec::new(),
            rate_steps: Vec::new(),
        }
    }
}

/// Counters of a link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams offered.
    pub sent: u64,
    /// Datagrams delivered (duplicates included).
    pub delivered: u64,
    /// Lost to random loss.
    pub lost: u64,
    /// Dropped during an outage.
    pub outage_drops: u64,
    /// Dropped because the rate queue was full.
    pub queue_drops: u64,
    /// Dropped for exceeding the MTU.
    pub oversize: u64,
    /// Bytes delivered.
    pub bytes: u64,
    /// Bytes offered (what the sender put on the wire, lost ones included).
    pub sent_bytes: u64,
}

/// One direction of a simulated link.
#[derive(Debug)]
pub struct SimLink {
    cfg: LinkConfig,
    rng: Rng,
    start: Instant,
    /// When the rate limiter is free again.
    busy_until: Instant,
    last_arrival: Instant,
    queued: usize,
    seq: u64,
    flight: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>,
    stats: LinkStats,
}

impl SimLink {
    /// A link starting at `start`.
    pub fn new(cfg: LinkConfig, seed: u64, start: Instant) -> Self {
        SimLink {
            cfg,
            rng: Rng::new(seed),
            start,
            busy_until: start,
            last_arrival: start,
            queued: 0,
            seq: 0,
            flight: BinaryHeap::new(),
            stats: LinkStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// True if `now` is inside an outage window.
    pub fn in_outage(&self, now: Instant) -> bool {
        let t = now.saturating_duration_since(self.start);
        self.cfg.outages.iter().any(|(a, b)| t >= *a && t < *b)
    }

    /// The rate at `now`, bytes/s (0: unlimited).
    pub fn rate_at(&self, now: Instant) -> u64 {
        let t = now.saturating_duration_since(self.start);
        self.cfg
            .rate_steps
            .iter()
            .filter(|(from, _)| t >= *from)
            .max_by_key(|(from, _)| *from)
            .map_or(self.cfg.rate, |(_, r)| *r)
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Offers a datagram at `now`.
    pub fn send(&mut self, now: Instant, bytes: Vec<u8>) {
        self.stats.sent += 1;
        self.stats.sent_bytes += bytes.len() as u64;
        if bytes.len() > self.cfg.mtu {
            self.stats.oversize += 1;
            return;
        }
        if self.in_outage(now) {
            self.stats.outage_drops += 1;
            return;
        }
        // Rate limiter: FIFO serialisation.
        let mut depart = now;
        let rate = self.rate_at(now);
        if rate > 0 {
            if self.busy_until > now {
                let backlog = self.busy_until - now;
                let per = Duration::from_secs_f64(self.cfg.mtu as f64 / rate as f64);
                if backlog > per * self.cfg.queue as u32 {
                    self.stats.queue_drops += 1;
                    return;
                }
            }
            let start = self.busy_until.max(now);
            depart = start + Duration::from_secs_f64(bytes.len() as f64 / rate as f64);
            self.busy_until = depart;
        }
        if self.rng.chance(self.cfg.loss) {
            self.stats.lost += 1;
            return;
        }
        let copies = if self.rng.chance(self.cfg.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let jitter = if self.cfg.jitter.is_zero() {
                Duration::ZERO
            } else {
                self.cfg.jitter.mul_f64(self.rng.unit())
            };
            let mut at = depart + self.cfg.delay + jitter;
            if !self.cfg.reorder {
                at = at.max(self.last_arrival);
                self.last_arrival = at;
            }
            self.seq += 1;
            self.queued += 1;
            self.flight.push(Reverse((at, self.seq, bytes.clone())));
        }
    }

    /// When the next datagram arrives.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.flight.peek().map(|Reverse((t, _, _))| *t)
    }

    /// A datagram that has arrived by `now`.
    pub fn recv(&mut self, now: Instant) -> Option<Vec<u8>> {
        match self.flight.peek() {
            Some(Reverse((t, _, _))) if *t <= now => {
                let Reverse((_, _, b)) = self.flight.pop().expect("peeked");
                self.queued -= 1;
                self.stats.delivered += 1;
                self.stats.bytes += b.len() as u64;
                Some(b)
            }
            _ => None,
        }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (for a listener a
/// test starts next; another process may take it in between, rarely).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port` (a
/// broker a test just started); false after `within`.
pub fn wait_listening(port: u16, within: Duration) -> bool {
    let until = Instant::now() + within;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A fresh directory under the system's temporary directory, named after
/// the test process and `name`, removed (with its contents) when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// Creates it, emptied of what an earlier run may have left.
    pub fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("ferry-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        TempDir(d)
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_without_reorder_keeps_order() {
        let t0 = Instant::now();
        for reorder in [false, true] {
            let cfg = LinkConfig {
                jitter: Duration::from_millis(5),
                reorder,
                ..LinkConfig::default()
            };
            let mut l = SimLink::new(cfg, 3, t0);
            for i in 0..200u8 {
                l.send(t0 + Duration::from_micros(i as u64 * 100), vec![i]);
            }
            let mut got = Vec::new();
            while let Some(b) = l.recv(t0 + Duration::from_secs(1)) {
                got.push(b[0]);
            }
            let ordered = got.windows(2).all(|w| w[0] < w[1]);
            assert_eq!(ordered, !reorder, "reorder={reorder}");
        }
    }

    #[test]
    fn rate_delay_loss_and_outage() {
        let t0 = Instant::now();
        let cfg = LinkConfig {
            rate: 1_000_000,
            delay: Duration::from_millis(10),
            loss: 0.2,
            outages: vec![(Duration::from_millis(500), Duration::from_millis(600))],
            ..LinkConfig::default()
        };
        let mut l = SimLink::new(cfg, 1, t0);
        for i in 0..1000 {
            l.send(t0 + Duration::from_millis(i), vec![0; 1000]);
        }
        l.send(t0, vec![0; 2000]);
        let s = l.stats();
        assert_eq!(s.oversize, 1);
        assert_eq!(s.outage_drops, 100);
        assert!((150..250).contains(&s.lost), "{} lost of 900", s.lost);
        // 1 MB/s and 1000 B each: one per ms, none before 1 ms + 10 ms.
        assert!(l.next_arrival().unwrap() >= t0 + Duration::from_millis(11));
        let mut n = 0;
        while l.recv(t0 + Duration::from_secs(5)).is_some() {
            n += 1;
        }
        assert_eq!(n as u64, 900 - s.lost);
    }
}
