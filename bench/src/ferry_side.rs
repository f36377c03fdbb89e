//! ferry's side: the in-process publish → callback bench, the `serve` child
//! (echo /bench/ping → /bench/pong, count /bench/tp) and the parent's ends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry::{Node, PublishError, Publisher, Qos, RawBytes, RecvError, Subscriber, TransportKind};

use crate::measure::{new_hist, Blaster, LatencySummary, Pinger};
use crate::proto::{self, Res, KIND_MEASURE};
use crate::sink::{on_command, SinkCounter};

/// Reliable, keep_all: nothing is dropped silently; a full backlog blocks
/// the publisher (up to `keep_all_block_ms`, then `PublishError::Blocked`).
/// Between the two processes: reliable keep_all, pinned to TCP (on one
/// host ferry would otherwise pick shared memory, and this bench compares
/// TCP with Zenoh's TCP).
fn qos() -> Qos {
    Qos::default().keep_all().transport(TransportKind::Tcp)
}

/// In-process: publish → callback on the same node (the callback runs inline
/// on the publishing thread). Time from just before `publish` to inside the
/// callback, both read from one `Instant` base.
pub fn intra(
    sizes: &[usize],
    samples: impl Fn(usize) -> u64,
    warmup: Duration,
) -> Res<Vec<LatencySummary>> {
    let node = Node::builder().name("bench_intra").build()?;
    let base = Instant::now();
    let stamp = Arc::new(AtomicU64::new(0));
    let s2 = stamp.clone();
    let _sub = node
        .subscriber::<RawBytes>("/bench/intra")
        .qos(Qos::default().keep_all())
        .inline_callback(move |s| {
            let now = base.elapsed().as_nanos() as u64;
            std::hint::black_box(s.len());
            s2.store(now, Ordering::Release);
        })
        .build()?;
    let publ = node
        .publisher::<RawBytes>("/bench/intra")
        .qos(Qos::default().keep_all())
        .build()?;
    if !publ.wait_for_subscribers(1, Duration::from_secs(5)) {
        return Err("in-process subscriber never connected".into());
    }
    let path = publ.connections().first().map(|c| c.transport);
    if path != Some(TransportKind::InProcess) {
        return Err(format!("expected the in-process path, got {path:?}").into());
    }
    let mut out = Vec::new();
    for &size in sizes {
        let data = Bytes::from(proto::payload(size, KIND_MEASURE, 0));
        let end = Instant::now() + warmup;
        for _ in 0..100_000_000u64 {
            if Instant::now() >= end {
                break;
            }
            publ.publish(RawBytes(data.clone()))?;
        }
        let mut hist = new_hist();
        let limit = Instant::now() + Duration::from_secs(60);
        for _ in 0..samples(size) {
            if Instant::now() >= limit {
                break;
            }
            // The message value is made outside the timed region; `publish`
            // still boxes it into an Arc, as every user's publish does.
            let msg = RawBytes(data.clone());
            let t0 = base.elapsed().as_nanos() as u64;
            publ.publish(msg)?;
            let t1 = stamp.load(Ordering::Acquire);
            if t1 < t0 {
                return Err("the in-process callback did not run inline".into());
            }
            hist.saturating_record((t1 - t0).max(1));
        }
        out.push(LatencySummary::from_hist(
            "ferry-intra",
            size,
            "publish -> callback",
            &hist,
            0,
        ));
    }
    Ok(out)
}

/// The child: echoes pings and counts throughput samples until the parent
/// closes stdin (or `max` passes).
pub fn serve(max: Duration) -> Res<()> {
    let node = Node::builder().name("bench_serve").build()?;
    let pong = Arc::new(
        node.publisher::<RawBytes>("/bench/pong")
            .qos(qos())
            .build()?,
    );
    let p2 = pong.clone();
    let _ping = node
        .subscriber::<RawBytes>("/bench/ping")
        .qos(qos())
        .inline_callback(move |s| {
            // Same bytes back, no copy (the Arc is re-published).
            if let Err(e) = p2.publish(s.into_arc()) {
                eprintln!("pong publish failed: {e}");
            }
        })
        .build()?;
    let counter = Arc::new(Mutex::new(SinkCounter::default()));
    let c2 = counter.clone();
    let _tp = node
        .subscriber::<RawBytes>("/bench/tp")
        .qos(qos())
        .inline_callback(move |s| {
            let line = c2.lock().unwrap().feed(&s, s.len());
            if let Some(v) = line {
                proto::emit(&v);
            }
        })
        .build()?;
    proto::emit(
        &serde_json::json!({"ready": true, "transport": "ferry", "pid": std::process::id()}),
    );
    proto::wait_for_parent(max, on_command(counter));
    Ok(())
}

/// Parent's ping-pong end.
pub struct FerryPinger {
    publ: Publisher<RawBytes>,
    sub: Subscriber<RawBytes>,
}

/// Parent's throughput end: a fresh publisher (hence a fresh TCP
/// connection) per run, so one stalled connection cannot spoil later runs.
pub struct FerryBlaster {
    node: Node,
    qos: Qos,
    timeout: Duration,
    tls: bool,
    publ: Option<Publisher<RawBytes>>,
    msgs: Option<[Arc<RawBytes>; 2]>,
}

/// Builds the parent's ping-pong ports on `node` and waits until both TCP
/// connections exist (TLS-protected when `tls`, plain otherwise).
pub fn pinger(node: &Node, tls: bool, timeout: Duration) -> Res<FerryPinger> {
    let publ = node
        .publisher::<RawBytes>("/bench/ping")
        .qos(qos())
        .build()?;
    let sub = node
        .subscriber::<RawBytes>("/bench/pong")
        .qos(qos())
        .build()?;
    if !(publ.wait_for_subscribers(1, timeout) && sub.wait_for_publishers(1, timeout)) {
        return Err("ferry: the serve child did not connect in time (ping/pong)".into());
    }
    check_tcp(&publ, tls)?;
    Ok(FerryPinger { publ, sub })
}

/// A throughput end on `node` publishing /bench/tp with `qos` (over TLS
/// when `tls`).
pub fn blaster(node: &Node, qos: Qos, tls: bool, timeout: Duration) -> FerryBlaster {
    FerryBlaster {
        node: node.clone(),
        qos,
        timeout,
        tls,
        publ: None,
        msgs: None,
    }
}

/// The bench's default QoS for throughput: reliable keep_all.
pub fn keep_all() -> Qos {
    qos()
}

/// Ok(false) for `PublishError::Blocked` (keep_all bound reached).
fn refused(r: Result<(), PublishError>) -> Res<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(PublishError::Blocked { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Every connection of `p` is TCP, and TLS-protected exactly when `tls`:
/// the figures are of the path they are labelled with.
fn check_tcp(p: &Publisher<RawBytes>, tls: bool) -> Res<()> {
    for c in p.connections() {
        if c.transport != TransportKind::Tcp {
            return Err(format!("ferry: expected the TCP path, got {}", c.transport).into());
        }
        if c.protection.starts_with("tls") != tls {
            return Err(format!(
                "ferry: expected {} on the TCP path, got `{}`",
                if tls { "TLS" } else { "no protection" },
                c.protection
            )
            .into());
        }
    }
    Ok(())
}

impl FerryPinger {
    /// What protects the ping connection, as its stats say (`tls (…)`).
    pub fn protection(&self) -> String {
        self.publ
            .connections()
            .first()
            .map(|c| c.protection.clone())
            .unwrap_or_default()
    }
}

impl Pinger for FerryPinger {
    fn send(&mut self, payload: Vec<u8>) -> Res<()> {
        self.publ.publish(RawBytes(Bytes::from(payload)))?;
        Ok(())
    }
    fn recv_seq(&mut self, timeout: Duration) -> Res<Option<u64>> {
        match self.sub.recv_timeout(timeout) {
            Ok(s) => Ok(proto::parse(&s).map(|(_, n)| n)),
            Err(RecvError::Timeout(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl Blaster for FerryBlaster {
    fn load(&mut self, warm: Vec<u8>, measure: Vec<u8>) -> Res<()> {
        drop(self.publ.take()); // closes the previous run's connection
        let publ = self
            .node
            .publisher::<RawBytes>("/bench/tp")
            .qos(self.qos)
            .build()?;
        if !publ.wait_for_subscribers(1, self.timeout) {
            return Err("ferry: the serve child's sink did not connect in time".into());
        }
        check_tcp(&publ, self.tls)?;
        self.publ = Some(publ);
        let m = |v: Vec<u8>| Arc::new(RawBytes(Bytes::from(v)));
        self.msgs = Some([m(warm), m(measure)]);
        Ok(())
    }
    fn send(&mut self, kind: u8) -> Res<bool> {
        let (Some(publ), Some(msgs)) = (self.publ.as_ref(), self.msgs.as_ref()) else {
            return Err("load() first".into());
        };
        refused(publ.publish(msgs[kind as usize].clone()))
    }
    fn send_payload(&mut self, payload: Vec<u8>) -> Res<bool> {
        let publ = self.publ.as_ref().ok_or("load() first")?;
        refused(publ.publish(RawBytes(Bytes::from(payload))))
    }
    fn events(&mut self) -> Vec<String> {
        let Some(p) = self.publ.as_ref() else {
            return Vec::new();
        };
        // The first Matched (the connection made in load) is expected.
        std::iter::from_fn(|| p.try_event())
            .take(1000)
            .map(|e| format!("{e:?}"))
            .skip_while(|e| e.starts_with("Matched"))
            .collect()
    }
    fn diag(&self) -> String {
        let c = self
            .publ
            .as_ref()
            .map(|p| p.connections())
            .unwrap_or_default();
        serde_json::to_string(&c.iter().map(|c| &c.stats).collect::<Vec<_>>()).unwrap_or_default()
    }
}
