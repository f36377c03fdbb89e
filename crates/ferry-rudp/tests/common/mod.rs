//! The simulated-network harness shared by the scenario tests: one
//! writer and one reader over two seeded [`SimLink`]s on a virtual clock.

#![allow(dead_code)] // each test file uses part of it

use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_rudp::{Receiver, ReceiverConfig, Sender, SenderConfig, SenderEvent};
use ferry_testkit::{LinkConfig, SimLink};

/// Deterministic sample content: checks byte-exact delivery.
pub fn payload(seq: u64, len: usize) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i as u64 * 31 + seq * 7) as u8)
            .collect::<Vec<u8>>(),
    )
}

#[derive(Clone)]
pub struct Scenario {
    pub link: LinkConfig,
    pub hz: f64,
    pub size: usize,
    pub count: u64,
    pub seed: u64,
    pub sender: SenderConfig,
    pub receiver: ReceiverConfig,
    /// Extra time after the last write to let repairs finish.
    pub drain: Duration,
}

impl Scenario {
    pub fn new(loss: f64, size: usize, count: u64, seed: u64) -> Self {
        Scenario {
            link: LinkConfig {
                loss,
                ..LinkConfig::default()
            },
            hz: 30.0,
            size,
            count,
            seed,
            sender: SenderConfig::new(7),
            receiver: ReceiverConfig::new(7),
            drain: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, Default)]
pub struct Outcome {
    pub delivered: Vec<u64>,
    pub latencies: Vec<Duration>,
    /// Latency from the application's first attempt to write the sample
    /// (time blocked by back-pressure included), per delivered sample.
    pub from_call: Vec<Duration>,
    /// When each delivered sample arrived, from the start.
    pub arrivals: Vec<Duration>,
    pub lost: u64,
    pub dropped: u64,
    pub oversize: u64,
    pub silent_events: u64,
    pub back_events: u64,
    pub heartbeats: u64,
    pub probes: u64,
    pub retransmitted: u64,
    pub max_pending: usize,
    pub link_queue_drops: u64,
    pub fec_shards: u64,
    pub fec_recovered: u64,
    pub pacing_rate: u64,
    pub rate_cuts: u64,
    /// Samples the writer accepted.
    pub written: u64,
    /// Writes refused (keep_all at a bound, or back-pressure); the
    /// application retries them, like a blocked `publish`.
    pub refused: u64,
    /// Longest wait from a sample's first write attempt to its acceptance.
    pub longest_block: Duration,
    /// Most bytes waiting unsent in the writer.
    pub max_unsent: usize,
    /// Every 100 ms: (time, pacing rate, bandwidth estimate), bytes/s.
    pub trace: Vec<(Duration, u64, u64)>,
    /// Bytes the forward link delivered.
    pub link_bytes: u64,
    /// Bytes offered to the forward link (what the writer put on the wire).
    pub link_sent_bytes: u64,
}

pub fn run(s: &Scenario) -> Outcome {
    let t0 = Instant::now();
    let mut fwd = SimLink::new(s.link.clone(), s.seed, t0);
    let mut back = SimLink::new(
        LinkConfig {
            outages: s.link.outages.clone(),
            ..s.link.clone()
        },
        s.seed ^ 0xabcdef,
        t0,
    );
    let mut tx = Sender::new(s.sender.clone(), t0);
    let mut rx = Receiver::new(s.receiver.clone(), t0);
    let period = Duration::from_secs_f64(1.0 / s.hz);
    let end = t0 + period * s.count as u32 + s.drain;
    let mut now = t0;
    let mut written = 0u64;
    let mut next_write = t0;
    let mut written_at = Vec::new();
    let mut called_at = Vec::new();
    let mut first_try = None;
    let mut o = Outcome::default();
    let mut steps = 0u64;
    let mut buf = Vec::new();
    // A refused write waits for the writer's next event, not for the clock.
    let mut blocked = false;
    let mut next_sample: Option<Bytes> = None;
    // FERRY_SIM_TRACE=1: the sender's figures every 100 ms on stderr.
    let trace = std::env::var_os("FERRY_SIM_TRACE").is_some();
    while now < end {
        steps += 1;
        assert!(steps < 20_000_000, "simulation does not progress");
        if written < s.count && now >= next_write {
            // A refused write is retried until accepted (a blocked
            // publish); the application's next one follows on schedule, or
            // at once when it fell behind.
            let data = next_sample
                .get_or_insert_with(|| payload(written + 1, s.size))
                .clone();
            let called = *first_try.get_or_insert(now);
            match tx.write(now, data, written + 1) {
                Ok(_) => {
                    blocked = false;
                    next_sample = None;
                    written += 1;
                    o.longest_block = o.longest_block.max(now - next_write);
                    written_at.push(now);
                    called_at.push(called);
                    first_try = None;
                    next_write = (next_write + period).max(now);
                }
                Err(_) => {
                    o.refused += 1;
                    blocked = true;
                }
            }
        }
        tx.handle_timeout(now);
        while tx.poll_transmit(now, &mut buf) {
            fwd.send(now, buf.clone());
        }
        while let Some(d) = fwd.recv(now) {
            rx.handle_datagram(now, &d)
                .expect("sender produced a malformed datagram");
        }
        rx.handle_timeout(now);
        while rx.poll_transmit(&mut buf) {
            back.send(now, buf.clone());
        }
        while let Some(d) = back.recv(now) {
            tx.handle_datagram(now, &d)
                .expect("receiver produced a malformed datagram");
        }
        while let Some(smp) = rx.poll_sample() {
            assert_eq!(
                smp.data,
                payload(smp.seq, s.size),
                "sample {} corrupted",
                smp.seq
            );
            o.latencies.push(now - written_at[smp.seq as usize - 1]);
            o.from_call.push(now - called_at[smp.seq as usize - 1]);
            o.arrivals.push(now - t0);
            o.delivered.push(smp.seq);
        }
        while let Some(e) = tx.poll_event() {
            match e {
                SenderEvent::PeerSilent => o.silent_events += 1,
                SenderEvent::PeerBack => o.back_events += 1,
            }
        }
        o.max_pending = o.max_pending.max(rx.pending_bytes());
        let ts = tx.stats();
        o.max_unsent = o.max_unsent.max(ts.unsent_bytes);
        if o.trace
            .last()
            .is_none_or(|l| now - t0 >= l.0 + Duration::from_millis(100))
        {
            o.trace.push((now - t0, ts.pacing_rate, ts.bw));
            if trace {
                eprintln!(
                    "t {:>6} ms  rate {:>5.2} bw {:>5.2} Mbit/s  q {:>5.1} ms  p_free {:.3}  cuts {:>3}  queue drops {:>5}  unsent {:>7}  srtt {:>5.1} ms",
                    (now - t0).as_millis(),
                    ts.pacing_rate as f64 * 8e-6,
                    ts.bw as f64 * 8e-6,
                    ts.queue_delay_us as f64 / 1e3,
                    ts.random_loss,
                    ts.rate_cuts,
                    fwd.stats().queue_drops,
                    ts.unsent_bytes,
                    ts.srtt_us / 1e3
                );
            }
        }
        if written == s.count
            && tx.is_idle()
            && fwd.next_arrival().is_none()
            && back.next_arrival().is_none()
        {
            break;
        }
        // Jump to the next thing that can happen.
        let mut next = end;
        for t in [
            Some(next_write).filter(|_| written < s.count && !blocked),
            tx.poll_timeout(now),
            rx.poll_timeout(),
            fwd.next_arrival(),
            back.next_arrival(),
        ]
        .into_iter()
        .flatten()
        {
            next = next.min(t);
        }
        now = next.max(now + Duration::from_micros(1));
    }
    let ts = tx.stats();
    let rs = rx.stats();
    o.lost = rs.lost;
    o.dropped = ts.dropped + ts.expired;
    o.oversize = fwd.stats().oversize + back.stats().oversize;
    o.heartbeats = ts.heartbeats;
    o.probes = ts.probes;
    o.retransmitted = ts.retransmitted;
    o.link_queue_drops = fwd.stats().queue_drops;
    o.fec_shards = ts.fec_shards;
    o.fec_recovered = rs.fec_recovered;
    o.pacing_rate = ts.pacing_rate;
    o.rate_cuts = ts.rate_cuts;
    o.written = written;
    o.link_bytes = fwd.stats().bytes;
    o.link_sent_bytes = fwd.stats().sent_bytes;
    o
}

pub fn assert_in_order(o: &Outcome) {
    assert!(
        o.delivered.windows(2).all(|w| w[0] < w[1]),
        "not in order / duplicated: {:?}",
        &o.delivered[..o.delivered.len().min(50)]
    );
}

pub fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len().max(1) as u32
}
