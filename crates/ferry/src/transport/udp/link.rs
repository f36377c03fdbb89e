//! The writer end of UDP connections and the transport itself.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_rudp::{Sender, SenderConfig, WriteError};
use ferry_wire::frame::{EnvelopeKind, FrameKind};
use ferry_wire::rudp::Hello;
use ferry_wire::{EndpointId, History, Locator, ParticipantId, Qos, Reliability, TransportKind};
use parking_lot::{Condvar, Mutex};

use super::{since, TxState, TxStream, UdpShared};
use crate::error::EncodeError;
use crate::host::Interface;
use crate::priority::{
    Applied, Lane, LaneTurn, PacketClass, Packets, Priority, PriorityError, ThreadChange,
};
use crate::stats::ConnStats;
use crate::transport::{
    Capabilities, ConnectError, ConnectRequest, Link, OutFrame, PeerInfo, SendError, Transport,
};

/// Writer end of a UDP connection.
pub(super) struct UdpLink {
    shared: Arc<UdpShared>,
    tx: Arc<TxStream>,
    lane_limit: usize,
}

impl UdpShared {
    /// Opens a writer stream from `writer` to `reader` at `peer`: the I/O
    /// thread HELLOs it until the reader's runtime answers.
    /// `remote_mtu`: the largest datagram the reader takes there (its
    /// locator's `mtu`), when it said.
    pub(super) fn open_link(
        self: &Arc<Self>,
        peer: SocketAddr,
        remote_mtu: Option<u16>,
        writer: EndpointId,
        reader: EndpointId,
        qos: &Qos,
    ) -> UdpLink {
        let s = self.settings;
        let mut cfg = SenderConfig::new(random_stream());
        // Sealed datagrams carry their header and tag within the same MTU:
        // no IP fragmentation added.
        cfg.mtu = (self.mtu_for)(peer.ip()).min(remote_mtu.map_or(usize::MAX, usize::from))
            - self.seal_overhead(reader.participant);
        cfg.rate = s.rate;
        cfg.history_bytes = s.history_bytes;
        cfg.reliable = qos.reliability == Reliability::Reliable;
        cfg.keep_all = qos.history == History::KeepAll;
        cfg.history_samples = qos.history.depth(1024);
        cfg.lifespan = qos.lifespan;
        cfg.fec = s.fec;
        cfg.adaptive_rate = s.adaptive_rate;
        cfg.congestion_model = s.congestion_model;
        let hello = Hello {
            from: writer,
            to: reader,
            reliable: cfg.reliable,
        };
        let now = Instant::now();
        let tx = {
            // Opened and registered together: the ACKNACK that answers the
            // HELLO finds the stream.
            let mut map = self.tx.lock();
            let handle = self
                .endpoint
                .lock()
                .endpoint
                .open(now, peer, cfg.stream, hello);
            let tx = Arc::new(TxStream {
                handle,
                peer,
                sealed: self.seal_overhead(reader.participant) > 0,
                state: Mutex::new(TxState {
                    sender: Sender::new(cfg.clone(), now),
                    buf: Vec::new(),
                }),
                acked: Condvar::new(),
                closed: AtomicBool::new(false),
                stats: Arc::new(ConnStats::new()),
                writer,
                reader,
                block: (cfg.reliable && cfg.keep_all).then_some(s.keep_all_block),
                io_deadline: AtomicU64::new(0),
                class: Mutex::new(None),
                lane: Mutex::new(None),
                lane_active: AtomicBool::new(false),
                priority: Mutex::new(Priority::default()),
            });
            map.insert(handle, tx.clone());
            tx
        };
        // The I/O thread sends the HELLO (due now) and runs the stream.
        self.io.kick();
        UdpLink {
            shared: self.clone(),
            tx,
            lane_limit: s.lane_limit,
        }
    }
}

impl Link for UdpLink {
    fn transport(&self) -> TransportKind {
        TransportKind::Udp
    }
    fn remote(&self) -> EndpointId {
        self.tx.reader
    }
    fn locator(&self) -> String {
        format!("udp/{}", self.tx.peer)
    }
    fn protection(&self) -> String {
        if self.tx.sealed {
            format!("aead ({})", ferry_security::udp::NOISE)
        } else {
            "none".into()
        }
    }
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        if self.tx.closed.load(Ordering::Relaxed) {
            return Err(SendError::Closed);
        }
        let body = (frame.payload.bytes)()?;
        // A request travels behind its envelope (a reply comes enveloped).
        let body = match frame.kind {
            FrameKind::Request => {
                crate::transport::enveloped(EnvelopeKind::Request, frame.seq, &body)
            }
            _ => body,
        };
        let len = body.len();
        let now = Instant::now();
        let mut st = self.tx.state.lock();
        let deadline = now + self.tx.block.unwrap_or(Duration::ZERO);
        loop {
            match st
                .sender
                .write(Instant::now(), body.clone(), frame.stamp_ns)
            {
                Ok(_) => break,
                Err(WriteError::Full { .. } | WriteError::Backlog { .. }) => {
                    // On the I/O thread (a callback publishing) nobody else
                    // would process the acknowledgements we wait for.
                    if crate::reactor::on_io_thread() {
                        return Err(SendError::Blocked(Duration::ZERO));
                    }
                    let Some(limit) = self.tx.block else {
                        return Err(SendError::Blocked(Duration::ZERO));
                    };
                    if self.tx.acked.wait_until(&mut st, deadline).timed_out() {
                        return Err(SendError::Blocked(limit));
                    }
                }
                Err(e @ WriteError::TooLarge(..)) => {
                    return Err(SendError::Encode(EncodeError {
                        type_name: "sample".into(),
                        reason: e.to_string(),
                    }));
                }
            }
        }
        if self.tx.lane_active.load(Ordering::Acquire) {
            drop(st);
            self.tx.stats.message(len);
            match self.tx.lane.lock().as_ref() {
                Some(l) => l.wake(),
                None => self.shared.io.kick(), // the lane stopped meanwhile
            }
            return Ok(());
        }
        let next = self.shared.pump_tx(&self.tx, &mut st, Instant::now());
        drop(st);
        self.tx.stats.message(len);
        // Wake the I/O thread only if this stream now needs it sooner.
        if let Some(n) = next {
            if since(self.shared.epoch, n)
                < self
                    .tx
                    .io_deadline
                    .load(Ordering::Relaxed)
                    .saturating_add(1)
            {
                self.shared.io.kick();
            }
        }
        Ok(())
    }
    fn stats(&self) -> &ConnStats {
        &self.tx.stats
    }
    fn is_closed(&self) -> bool {
        self.tx.closed.load(Ordering::Relaxed)
    }
    fn close(&self) {
        self.tx.closed.store(true, Ordering::Relaxed);
        self.tx.acked.notify_all();
    }
    fn priority(&self) -> Priority {
        *self.tx.priority.lock()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        // The thread first: when no thread is left, nothing has changed.
        let mut lane = self.tx.lane.lock();
        let thread = match (p.thread, lane.as_ref()) {
            (Some(t), Some(l)) => {
                l.set_policy(t);
                ThreadChange::Changed(t)
            }
            (Some(t), None) => {
                let (tx, shared) = (Arc::downgrade(&self.tx), Arc::downgrade(&self.shared));
                let what = format!("{} → {}", self.tx.writer, self.tx.reader);
                let l = Lane::start(t, self.lane_limit, what, move || {
                    let (Some(tx), Some(shared)) = (tx.upgrade(), shared.upgrade()) else {
                        return LaneTurn::Done;
                    };
                    if tx.closed.load(Ordering::Relaxed) {
                        return LaneTurn::Done;
                    }
                    let now = Instant::now();
                    let before = tx.io_deadline.load(Ordering::Relaxed);
                    let next = shared.pump_tx(&tx, &mut tx.state.lock(), now);
                    if next.is_some_and(|n| since(shared.epoch, n) < before.saturating_add(1)) {
                        shared.io.kick(); // its timers (heartbeats) are due sooner now
                    }
                    // Pacing: come back when the next datagram is due (the
                    // I/O thread keeps the stream's other timers).
                    next.map_or(LaneTurn::Idle, |n| {
                        LaneTurn::After(
                            n.saturating_duration_since(now)
                                .max(Duration::from_micros(50)),
                        )
                    })
                })?;
                *lane = Some(l);
                self.tx.lane_active.store(true, Ordering::Release);
                ThreadChange::Started(t)
            }
            (None, Some(l)) => {
                l.stop();
                self.tx.lane_active.store(false, Ordering::Release);
                *lane = None;
                self.shared.io.kick();
                ThreadChange::Stopped
            }
            (None, None) => ThreadChange::Unchanged,
        };
        drop(lane);
        *self.tx.class.lock() = (p.class != PacketClass::Normal).then_some(p.class);
        *self.tx.priority.lock() = p;
        Ok(Applied {
            packets: Packets::PerDatagram(p.class),
            thread,
        })
    }
}

/// The UDP transport of one runtime.
pub struct UdpTransport {
    shared: Arc<UdpShared>,
    locators: Vec<Locator>,
    interfaces: Vec<Interface>,
}

impl UdpTransport {
    pub(crate) fn new(
        shared: Arc<UdpShared>,
        locators: Vec<Locator>,
        interfaces: Vec<Interface>,
    ) -> Self {
        UdpTransport {
            shared,
            locators,
            interfaces,
        }
    }
}

impl Transport for UdpTransport {
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
    fn forget_writer(&self, writer: EndpointId) {
        self.shared.forget_writer(writer);
    }
    fn heard_from(&self, ip: std::net::IpAddr) {
        if self.shared.any_silent.load(Ordering::Acquire) {
            self.shared
                .sign_of_life(Instant::now(), SocketAddr::new(ip, 0));
        }
    }
    fn kind(&self) -> TransportKind {
        TransportKind::Udp
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            zero_copy: false,
            mtu: Some(self.shared.settings.mtu),
            request_reply: true,
        }
    }
    fn locators(&self) -> Vec<Locator> {
        self.locators.clone()
    }
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        !crate::transport::rank_addresses(&self.interfaces, TransportKind::Udp, local, remote)
            .is_empty()
    }
    /// Automatically only between hosts: on one host TCP (and later shared
    /// memory) is the better path; pin `udp` to use it anyway.
    fn automatic(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        local.host_id != remote.host_id && self.reaches(local, remote)
    }
    fn connect(&self, req: ConnectRequest) -> Result<Arc<dyn Link>, ConnectError> {
        let local = local_peer(req.writer.participant);
        let ranked = crate::transport::rank_locators(
            &self.interfaces,
            TransportKind::Udp,
            &local,
            &req.remote,
        );
        let best = ranked.first().ok_or_else(|| ConnectError::Unreachable {
            peer: req.remote.participant,
            tried: String::new(),
            last: "no udp locator".into(),
        })?;
        let peer = best.socket_addr().expect("ranked locators are IP locators");
        if let Some(p) = &self.shared.guard.protection {
            if p.enforcing() && !p.protects(req.reader.participant) {
                return Err(ConnectError::Refused {
                    peer: req.remote.participant,
                    transport: TransportKind::Udp,
                    cause: "under enforce UDP goes only to runtimes whose signed announcement \
                            names a UDP key"
                        .into(),
                });
            }
        }
        Ok(Arc::new(self.shared.open_link(
            peer,
            best.params.mtu,
            req.writer,
            req.reader,
            &req.qos,
        )))
    }
}

fn local_peer(participant: ParticipantId) -> PeerInfo {
    PeerInfo {
        participant,
        host_id: crate::host::host_id(),
        net_id: crate::host::net_id(),
        pid: std::process::id(),
        locators: Vec::new(),
        direct: true,
        secured: false,
    }
}

fn random_stream() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom writes at most 4 bytes into b.
    unsafe { libc::getrandom(b.as_mut_ptr().cast(), 4, 0) };
    u32::from_le_bytes(b) | 1
}
