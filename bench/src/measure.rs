//! Transport-independent measuring loops: ping-pong latency (one-way =
//! RTT/2) and timed throughput, each bounded in count and in time.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::proto::{self, ChildProc, Res, KIND_MEASURE, KIND_WARMUP};

/// The parent's end of a ping-pong pair.
pub trait Pinger {
    /// Publishes one ping (the buffer is moved in, not copied).
    fn send(&mut self, payload: Vec<u8>) -> Res<()>;
    /// Waits up to `timeout` for the next pong; returns its sequence number.
    fn recv_seq(&mut self, timeout: Duration) -> Res<Option<u64>>;
}

/// The parent's end of a throughput pair.
pub trait Blaster {
    /// Prepares a run: the warm-up and measured payloads (sent many times,
    /// shared, not copied); ferry also gets a fresh publisher (a fresh
    /// connection) here.
    fn load(&mut self, warm: Vec<u8>, measure: Vec<u8>) -> Res<()>;
    /// Publishes the prepared payload of `kind` (warm-up or measured);
    /// Ok(false) = not sent (publisher blocked / refused), Err = broken.
    fn send(&mut self, kind: u8) -> Res<bool>;
    /// Publishes one payload (the end marker); Ok(false) = refused.
    fn send_payload(&mut self, payload: Vec<u8>) -> Res<bool>;
    /// Connection events seen since `load` (ferry: `PortEvent`s), drained.
    fn events(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// Transport-specific state for error messages.
    fn diag(&self) -> String {
        String::new()
    }
}

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000_000, 3).expect("histogram bounds")
}

/// Latency of one (transport, size) cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencySummary {
    pub transport: String,
    pub size: usize,
    /// What the figures are: "one-way = RTT/2" or "publish -> callback".
    pub metric: String,
    pub samples: u64,
    pub timeouts: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}

impl LatencySummary {
    pub fn from_hist(
        transport: &str,
        size: usize,
        metric: &str,
        h: &Histogram<u64>,
        timeouts: u64,
    ) -> Self {
        LatencySummary {
            transport: transport.into(),
            size,
            metric: metric.into(),
            samples: h.len(),
            timeouts,
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            min_ns: h.min(),
            max_ns: h.max(),
            mean_ns: h.mean(),
        }
    }
}

/// One ping: builds the payload outside the timed region, then times
/// publish → matching pong. None = timed out (stale pongs are skipped).
fn one_ping(
    p: &mut dyn Pinger,
    template: &[u8],
    seq: u64,
    timeout: Duration,
) -> Res<Option<Duration>> {
    let mut v = template.to_vec();
    v[1..9].copy_from_slice(&seq.to_le_bytes());
    let t0 = Instant::now();
    p.send(v)?;
    let deadline = t0 + timeout;
    for _ in 0..1_000_000 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        match p.recv_seq(left)? {
            Some(s) if s == seq => return Ok(Some(t0.elapsed())),
            Some(_) => continue, // a late pong of an earlier, timed-out ping
            None => return Ok(None),
        }
    }
    Ok(None)
}

/// Ping-pong state of one transport at one size, across rounds.
pub struct PingRun {
    pub hist: Histogram<u64>,
    pub timeouts: u64,
    seq: u64,
    template: Vec<u8>,
}

impl PingRun {
    pub fn new(size: usize) -> Self {
        PingRun {
            hist: new_hist(),
            timeouts: 0,
            seq: 0,
            template: proto::payload(size, KIND_MEASURE, 0),
        }
    }

    /// Pings for `dur` without recording (routes, caches, TCP windows and
    /// CPU frequency settle). Errs if not one pong came back.
    pub fn warm_up(&mut self, p: &mut dyn Pinger, dur: Duration) -> Res<u64> {
        let end = Instant::now() + dur;
        let mut ok = 0u64;
        for _ in 0..10_000_000u64 {
            if Instant::now() >= end {
                break;
            }
            self.seq += 1;
            if one_ping(p, &self.template, self.seq, Duration::from_millis(250))?.is_some() {
                ok += 1;
            }
        }
        if ok == 0 {
            return Err("warm-up: no pong came back".into());
        }
        Ok(ok)
    }

    /// Records `n` pings (one-way = RTT/2), stopping early after `max_time`
    /// or 20 timeouts.
    pub fn record(&mut self, p: &mut dyn Pinger, n: u64, max_time: Duration) -> Res<()> {
        let end = Instant::now() + max_time;
        for _ in 0..n {
            if Instant::now() >= end {
                eprintln!("  (time bound {max_time:?} reached)");
                break;
            }
            self.seq += 1;
            match one_ping(p, &self.template, self.seq, Duration::from_secs(2))? {
                Some(rtt) => {
                    let one_way = (rtt.as_nanos() as u64 / 2).max(1);
                    self.hist.saturating_record(one_way);
                }
                None => {
                    self.timeouts += 1;
                    if self.timeouts > 20 {
                        return Err("more than 20 pings timed out".into());
                    }
                }
            }
        }
        Ok(())
    }
}

/// One timed throughput run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TputRun {
    /// The end marker never got through; counts come from a `report`
    /// command on the child's stdin, the window ends with the parent's sends.
    pub stalled: bool,
    /// Measured samples the publisher accepted / refused (ferry Blocked).
    pub sent: u64,
    pub not_sent: u64,
    /// Measured samples the child received.
    pub received: u64,
    /// Window = parent's start of measured publishing → end marker arrival
    /// (CLOCK_MONOTONIC, both processes); every sample arriving in it counts.
    pub win_msgs: u64,
    pub win_bytes: u64,
    pub win_secs: f64,
    /// The publisher's connection events during the run (e.g. a connection
    /// lost and re-made: samples published meanwhile are gone).
    #[serde(default)]
    pub events: Vec<String>,
}

/// Throughput of one (transport, size) cell, all rounds together.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TputSummary {
    pub transport: String,
    pub size: usize,
    /// Delivered during the windows / window time.
    pub msgs_per_s: f64,
    pub gbit_per_s: f64,
    pub sent: u64,
    pub received: u64,
    /// sent - received: must be 0 for reliable, blocking QoS.
    pub lost: i64,
    pub not_sent: u64,
    pub stalled_rounds: usize,
    pub rounds: Vec<TputRun>,
}

impl TputSummary {
    pub fn new(transport: &str, size: usize, rounds: Vec<TputRun>) -> Self {
        let sent: u64 = rounds.iter().map(|r| r.sent).sum();
        let received: u64 = rounds.iter().map(|r| r.received).sum();
        let msgs: u64 = rounds.iter().map(|r| r.win_msgs).sum();
        let bytes: u64 = rounds.iter().map(|r| r.win_bytes).sum();
        let secs: f64 = rounds.iter().map(|r| r.win_secs).sum::<f64>().max(1e-9);
        TputSummary {
            transport: transport.into(),
            size,
            msgs_per_s: msgs as f64 / secs,
            gbit_per_s: bytes as f64 * 8.0 / secs / 1e9,
            sent,
            received,
            lost: sent as i64 - received as i64,
            not_sent: rounds.iter().map(|r| r.not_sent).sum(),
            stalled_rounds: rounds.iter().filter(|r| r.stalled).count(),
            rounds,
        }
    }
}

/// Publishes warm-up samples for `warmup`, measured samples for `dur`, then
/// an end marker carrying `run_id` and the window start; the sink child
/// answers with one JSON line (see `sink.rs`).
pub fn throughput(
    b: &mut dyn Blaster,
    sink: &mut ChildProc,
    size: usize,
    run_id: u64,
    warmup: Duration,
    dur: Duration,
) -> Res<TputRun> {
    b.load(
        proto::payload(size, KIND_WARMUP, 0),
        proto::payload(size, KIND_MEASURE, 0),
    )?;
    // Bounded: a send blocks at most ~1 s (ferry keep_all bound / zenoh
    // Block), and the count cap is far beyond any rate reachable here.
    const CAP: u64 = 1 << 34;
    let t0 = Instant::now();
    for _ in 0..CAP {
        if t0.elapsed() >= warmup {
            break;
        }
        b.send(KIND_WARMUP)?;
    }
    let (mut sent, mut not_sent) = (0u64, 0u64);
    let t1_ns = proto::mono_ns();
    let t1 = Instant::now();
    for i in 0..CAP {
        // Instant::now is ~25 ns; checking every 8 sends keeps it off the
        // path (after a refused send, at once: that one may have waited).
        if i % 8 == 0 && t1.elapsed() >= dur {
            break;
        }
        if b.send(KIND_MEASURE)? {
            sent += 1;
        } else {
            // Refused (ferry: PublishError::Blocked after keep_all_block_ms):
            // not queued; the next iteration sends the same bytes again.
            not_sent += 1;
            if t1.elapsed() >= dur {
                break;
            }
        }
    }
    let t_end_ns = proto::mono_ns();
    if std::env::var_os("FERRY_BENCH_MARKS").is_some() {
        // For profiling one run: `perf record -k CLOCK_MONOTONIC`, then
        // `perf report --time <start>,<end>` with these seconds.
        eprintln!(
            "mark run {run_id} size {size}: measured window {:.6},{:.6} (CLOCK_MONOTONIC s)",
            t1_ns as f64 / 1e9,
            t_end_ns as f64 / 1e9
        );
    }
    let end = proto::end_marker(size, run_id, t1_ns);
    let mut ended = false;
    for _ in 0..3 {
        if b.send_payload(end.clone())? {
            ended = true;
            break;
        }
    }
    let answer = if ended {
        sink.expect(Duration::from_secs(20), |v| {
            v["run"].as_u64() == Some(run_id)
        })
    } else {
        Err("end marker refused".into())
    };
    let (v, stalled) = match answer {
        Ok(v) => (v, false),
        Err(e) => {
            eprintln!("  run {run_id} ({size} B) stalled: {e}; {}", b.diag());
            // Ask the child for what it got; it resets its counters.
            sink.send_line(&format!("report {run_id} {t1_ns} {t_end_ns}"))?;
            let v = sink.expect(Duration::from_secs(10), |v| {
                v["run"].as_u64() == Some(run_id)
            })?;
            (v, true)
        }
    };
    let u = |k: &str| v[k].as_u64().unwrap_or(0);
    let events = b.events();
    if !events.is_empty() {
        eprintln!(
            "  run {run_id} ({size} B) publisher events: {}",
            events.join("; ")
        );
    }
    Ok(TputRun {
        events,
        stalled,
        sent,
        not_sent,
        received: u("msgs"),
        win_msgs: u("win_msgs"),
        win_bytes: u("win_bytes"),
        win_secs: v["win_secs"].as_f64().unwrap_or(0.0),
    })
}
