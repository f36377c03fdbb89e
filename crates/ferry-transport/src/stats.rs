//! Per-connection statistics, shared by both ends of an in-process
//! connection and kept separately on each side of a network connection.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use ferry_wire::{EndpointId, TransportKind};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Live counters of one connection (lock-free on the data path).
#[derive(Debug)]
pub struct ConnStats {
    /// Messages carried.
    pub messages: AtomicU64,
    /// Payload bytes carried.
    pub bytes: AtomicU64,
    /// Samples dropped, counted where they were dropped (see
    /// [`StatsSnapshot::drops`]).
    pub drops: AtomicU64,
    /// Samples that failed to decode or deliver.
    pub errors: AtomicU64,
    /// Round-trip estimate, µs (0: unknown) — datagram transports.
    pub rtt_us: AtomicU64,
    /// Fragments sent again after a loss.
    pub retransmitted: AtomicU64,
    /// Samples given up (no longer in the writer's history).
    pub lost: AtomicU64,
    /// FEC: recovery shards sent (writer) / fragments rebuilt from them
    /// without a repair round (reader).
    pub fec: AtomicU64,
    /// Pacing rate, bytes/s (0: unpaced or not a datagram transport).
    pub pacing_rate: AtomicU64,
    /// Bytes held in the writer's history.
    pub history_bytes: AtomicU64,
    latency_sum_ns: AtomicU64,
    latency_count: AtomicU64,
    latency_last_ns: AtomicU64,
    latency_max_ns: AtomicU64,
    created: Instant,
    /// (window start, messages, bytes at start, last rate, last byte rate)
    window: Mutex<(Instant, u64, u64, f64, f64)>,
}

impl Default for ConnStats {
    fn default() -> Self {
        Self::new()
    }
}

impl ConnStats {
    /// Fresh counters.
    pub fn new() -> Self {
        let now = Instant::now();
        ConnStats {
            messages: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            drops: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            rtt_us: AtomicU64::new(0),
            retransmitted: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            fec: AtomicU64::new(0),
            pacing_rate: AtomicU64::new(0),
            history_bytes: AtomicU64::new(0),
            latency_sum_ns: AtomicU64::new(0),
            latency_count: AtomicU64::new(0),
            latency_last_ns: AtomicU64::new(0),
            latency_max_ns: AtomicU64::new(0),
            created: now,
            window: Mutex::new((now, 0, 0, 0.0, 0.0)),
        }
    }

    /// Counts one message of `len` bytes.
    #[inline]
    pub fn message(&self, len: usize) {
        self.messages.fetch_add(1, Relaxed);
        self.bytes.fetch_add(len as u64, Relaxed);
    }

    /// Records a one-way latency sample.
    #[inline]
    pub fn latency(&self, ns: u64) {
        self.latency_sum_ns.fetch_add(ns, Relaxed);
        self.latency_count.fetch_add(1, Relaxed);
        self.latency_last_ns.store(ns, Relaxed);
        self.latency_max_ns.fetch_max(ns, Relaxed);
    }

    /// A snapshot; rates are over the time since the previous snapshot.
    pub fn snapshot(&self) -> StatsSnapshot {
        let messages = self.messages.load(Relaxed);
        let bytes = self.bytes.load(Relaxed);
        let now = Instant::now();
        // Rates over windows of at least 0.5 s; a snapshot taken sooner (the
        // other end of an in-process connection reads the same counters)
        // gets the last full window's rate.
        let (rate_hz, bytes_per_sec) = {
            let mut w = self.window.lock();
            let dt = now.duration_since(w.0).as_secs_f64();
            if dt >= 0.5 {
                let r = ((messages - w.1) as f64 / dt, (bytes - w.2) as f64 / dt);
                *w = (now, messages, bytes, r.0, r.1);
            }
            (w.3, w.4)
        };
        let n = self.latency_count.load(Relaxed);
        StatsSnapshot {
            messages,
            bytes,
            drops: self.drops.load(Relaxed),
            errors: self.errors.load(Relaxed),
            rate_hz,
            bytes_per_sec,
            latency_avg_us: (n > 0)
                .then(|| self.latency_sum_ns.load(Relaxed) as f64 / n as f64 / 1e3),
            latency_last_us: (n > 0).then(|| self.latency_last_ns.load(Relaxed) as f64 / 1e3),
            latency_max_us: (n > 0).then(|| self.latency_max_ns.load(Relaxed) as f64 / 1e3),
            age_s: now.duration_since(self.created).as_secs_f64(),
            rtt_us: match self.rtt_us.load(Relaxed) {
                0 => None,
                v => Some(v as f64),
            },
            retransmitted: self.retransmitted.load(Relaxed),
            lost: self.lost.load(Relaxed),
            fec: self.fec.load(Relaxed),
            pacing_rate: match self.pacing_rate.load(Relaxed) {
                0 => None,
                v => Some(v),
            },
            history_bytes: self.history_bytes.load(Relaxed),
        }
    }
}

/// Counters of a connection at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct StatsSnapshot {
    /// Messages carried.
    pub messages: u64,
    /// Payload bytes carried.
    pub bytes: u64,
    /// Samples dropped, counted on the side that dropped them. A writer's
    /// connection counts what its path dropped before it went out (a TCP
    /// backlog or a shared-memory ring full under keep_last, UDP history
    /// evictions and lifespan expiry of samples not yet sent); a reader's
    /// counts what the reader dropped (its queue full under keep_last,
    /// samples past their lifespan). Samples a network lost after they left
    /// are `lost` on the reader's side, not drops.
    pub drops: u64,
    /// Samples that could not be decoded or delivered.
    pub errors: u64,
    /// Messages per second since the previous snapshot.
    pub rate_hz: f64,
    /// Bytes per second since the previous snapshot.
    pub bytes_per_sec: f64,
    /// Mean one-way latency (µs), when source timestamps are comparable.
    pub latency_avg_us: Option<f64>,
    /// Latest one-way latency (µs).
    pub latency_last_us: Option<f64>,
    /// Largest one-way latency (µs).
    pub latency_max_us: Option<f64>,
    /// Seconds since the connection was made.
    pub age_s: f64,
    /// Round-trip estimate (µs), datagram transports.
    pub rtt_us: Option<f64>,
    /// Fragments retransmitted after losses.
    pub retransmitted: u64,
    /// Samples given up by the reader (gone from the writer's history).
    pub lost: u64,
    /// FEC: recovery shards sent (writer side) / fragments rebuilt from
    /// them (reader side).
    #[serde(default)]
    pub fec: u64,
    /// Pacing rate (bytes/s), datagram transports.
    pub pacing_rate: Option<u64>,
    /// Bytes in the writer's history.
    pub history_bytes: u64,
}

/// Which end of a connection a report is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The publisher/client end.
    Writer,
    /// The subscriber/service end.
    Reader,
}

/// One connection between a local and a remote endpoint. Ids and the path
/// are typed (as text in JSON: `ferry info --json`, the admin socket).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionInfo {
    /// Topic or service name.
    pub topic: String,
    /// The local endpoint.
    #[serde(with = "as_text")]
    pub local: EndpointId,
    /// The other endpoint.
    #[serde(with = "as_text")]
    pub remote: EndpointId,
    /// Which end `local` is.
    pub side: Side,
    /// The path it takes.
    #[serde(with = "as_text")]
    pub transport: TransportKind,
    /// Where the other end is, as the path names it (`udp/10.0.0.2:7411`,
    /// the shared-memory connection segment, the broker's URL), when the
    /// path has an address.
    pub locator: String,
    /// The node of the other endpoint, when discovery knows it.
    #[serde(default)]
    pub remote_node: String,
    /// Priority (writer side: packet class + thread policy; `None` on the
    /// reader side).
    #[serde(default)]
    pub priority: Option<crate::priority::Priority>,
    /// Why the pair is not on its best path, when it is not (`shm refused:
    /// …`); empty otherwise.
    #[serde(default)]
    pub note: String,
    /// What protects it (`process`, `os`, `tls (…)`, `none`; see
    /// `Link::protection`).
    #[serde(default)]
    pub protection: String,
    /// The host leader a forwarded connection goes through (`sensors
    /// (pid 4711)`, `this runtime`); empty on other paths. Its counters are
    /// the hop this side sees: a writer's, the stream to that leader
    /// (shared by the host's readers); a reader's, the leader's relay.
    #[serde(default)]
    pub via: String,
    /// Counters.
    pub stats: StatsSnapshot,
}

/// Serde as the type's text form (`Display` / `FromStr`).
mod as_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<T: std::fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub fn deserialize<'de, T, D>(d: D) -> Result<T, D::Error>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
        D: Deserializer<'de>,
    {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl ConnectionInfo {
    pub fn new(
        topic: &str,
        local: EndpointId,
        remote: EndpointId,
        side: Side,
        transport: TransportKind,
        locator: &str,
        stats: &ConnStats,
    ) -> Self {
        ConnectionInfo {
            topic: topic.to_string(),
            local,
            remote,
            side,
            transport,
            locator: locator.to_string(),
            remote_node: String::new(),
            priority: None,
            note: String::new(),
            protection: String::new(),
            via: String::new(),
            stats: stats.snapshot(),
        }
    }
}

/// Nanoseconds since the Unix epoch (the source timestamp of samples).
///
/// One `clock_gettime(CLOCK_REALTIME)` (vDSO) and integer arithmetic:
/// `SystemTime::now().duration_since(UNIX_EPOCH)` costs twice as much, and
/// this runs once per published sample (a tenth of a 64 B publish).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass and nothing else.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if r != 0 || ts.tv_sec < 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_ns_is_the_unix_time() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let t = now_ns();
        let after = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(before <= t && t <= after, "{before} <= {t} <= {after}");
    }
}

/// What a runtime's listeners accepted and turned away (lock-free; the
/// listener counts, [`ListenerCounters::snapshot`] reads).
#[derive(Debug, Default)]
pub struct ListenerCounters {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Accepted connections closed for sending no Hello in time.
    pub no_hello: AtomicU64,
    /// Accepted connections closed for a first frame that was not a Hello
    /// of a Hello's size.
    pub bad_hello: AtomicU64,
    /// Connections still without a Hello closed to make room for newer
    /// ones (too many from one address, or in total).
    pub evicted: AtomicU64,
    /// Connections refused at once: the caps were reached by connections
    /// that had all sent their Hello.
    pub refused: AtomicU64,
    /// Times `accept` failed for want of file descriptors.
    pub fd_exhausted: AtomicU64,
    /// Closed because the TLS handshake failed (not TLS under `enforce`,
    /// another CA, an expired certificate, tampering).
    pub tls_refused: AtomicU64,
    /// Closed because the writer's grants do not allow writing the reader's
    /// topic (or calling its service).
    pub denied: AtomicU64,
    /// Admin requests refused because the caller's identity lacks the
    /// `admin` (changes) or `monitor` (reads) grant on the node.
    pub admin_denied: AtomicU64,
    /// Protected UDP's sessions (security on), for its counters.
    pub udp: std::sync::OnceLock<std::sync::Arc<ferry_security::udp::UdpSecurity>>,
}

impl ListenerCounters {
    /// Adds one to `c`.
    pub fn count(c: &AtomicU64) {
        c.fetch_add(1, Relaxed);
    }
    /// The counters now.
    pub fn snapshot(&self) -> ConnectionStats {
        ConnectionStats {
            accepted: self.accepted.load(Relaxed),
            no_hello: self.no_hello.load(Relaxed),
            bad_hello: self.bad_hello.load(Relaxed),
            evicted: self.evicted.load(Relaxed),
            refused: self.refused.load(Relaxed),
            fd_exhausted: self.fd_exhausted.load(Relaxed),
            tls_refused: self.tls_refused.load(Relaxed),
            denied: self.denied.load(Relaxed),
            admin_denied: self.admin_denied.load(Relaxed),
            udp: self.udp.get().map(|u| u.stats()).unwrap_or_default(),
        }
    }
}

/// Incoming connections a runtime accepted and turned away, since it
/// started (see [`ListenerCounters`] for each field's meaning).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Closed for sending no Hello within the Hello timeout.
    pub no_hello: u64,
    /// Closed for a first frame that was not a Hello of a Hello's size.
    pub bad_hello: u64,
    /// Closed while still without a Hello, to make room for newer ones.
    pub evicted: u64,
    /// Refused at once: every connection under the caps had sent its Hello.
    pub refused: u64,
    /// Times `accept` failed for want of file descriptors.
    pub fd_exhausted: u64,
    /// Closed for a failed TLS handshake.
    #[serde(default)]
    pub tls_refused: u64,
    /// Closed because the writer's grants do not allow it.
    #[serde(default)]
    pub denied: u64,
    /// Admin requests refused for want of the `admin`/`monitor` grant.
    #[serde(default)]
    pub admin_denied: u64,
    /// Protected UDP (security on): sessions, refused handshakes, sealed
    /// datagrams that failed authentication or were replayed, plain ones
    /// refused.
    #[serde(default)]
    pub udp: ferry_security::udp::UdpSecurityStats,
}
