//! The UDP path: `ferry-rudp` streams over one socket per runtime — built
//! for lossy wireless links and large samples. Datagrams never exceed the
//! configured MTU; losses are repaired per fragment; the sender paces to the
//! link; an outage stops transmission until the reader answers again.
//!
//! A connection is a stream: the writer picks a random stream id and sends
//! HELLO (writer, reader, reliability) until the reader's runtime answers
//! with an ACKNACK; then data flows. Publishers write and send straight from
//! their own thread; the I/O thread handles ACKNACKs, incoming data and every
//! protocol timer (heartbeats, NACK delays, pacing slots, outage probes).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ferry_rudp::{Receiver, ReceiverConfig, Sender, SenderConfig, SenderEvent, WriteError};
use ferry_wire::frame::FrameKind;
use ferry_wire::rudp::{encode_hello, Datagram, Hello, Packet};
use ferry_wire::{EndpointId, History, Locator, ParticipantId, Reliability, TransportKind};
use parking_lot::{Condvar, Mutex};

use super::udp_sys;
use super::{
    Capabilities, ConnectError, ConnectRequest, InFrame, InboundConn, Inbox, Link, OutFrame,
    PeerInfo, SendError, Transport,
};
use crate::error::EncodeError;
use crate::host::Interface;
use crate::message::Payload;
use crate::priority::{Lane, LaneTurn, PacketClass, Priority, PriorityError};
use crate::reactor::IoHandle;
use crate::stats::ConnStats;

/// A reader-side stream idle this long is dropped (its writer is gone); as
/// long as a writer keeps its side through an outage.
const RX_IDLE: Duration = ferry_conn::OUTAGE_GRACE;
/// HELLO is repeated this often until answered.
const HELLO_EVERY: Duration = Duration::from_millis(100);

/// Link settings from the runtime config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UdpSettings {
    pub mtu: usize,
    pub rate: u64,
    pub history_bytes: usize,
    pub keep_all_block: Duration,
    /// Forward error correction sized to the reader's reported loss.
    pub fec: bool,
    /// Pace to the rate the path carries (`udp_adaptive_rate`).
    pub adaptive_rate: bool,
}

struct TxState {
    sender: Sender,
    /// Next HELLO while not yet answered (and while the peer is silent).
    next_hello: Option<Instant>,
}

struct TxStream {
    stream: u32,
    peer: SocketAddr,
    hello: Vec<u8>,
    state: Mutex<TxState>,
    acked: Condvar,
    closed: AtomicBool,
    stats: Arc<ConnStats>,
    writer: EndpointId,
    reader: EndpointId,
    block: Option<Duration>,
    /// When the I/O thread will next look at this stream (ns since epoch).
    io_deadline: AtomicU64,
    /// Class of its datagrams, set per datagram (the socket is shared);
    /// None = the socket's default (DSCP 0).
    class: Mutex<Option<PacketClass>>,
    priority: Mutex<Priority>,
    /// A dedicated sender thread pumps this stream (thread priority).
    lane: Mutex<Option<Arc<Lane>>>,
    /// `lane` is set (read on the data path without taking `lane`).
    lane_active: AtomicBool,
}

/// Samples taken out of streams under the `rx` lock, delivered after it
/// is released: no subscriber code runs under a ferry lock.
#[derive(Default)]
struct Ready(Vec<(Arc<dyn Inbox>, Arc<InboundConn>, ferry_rudp::Sample)>);

impl Ready {
    fn deliver(self) {
        for (reader, conn, s) in self.0 {
            let data = s.data;
            let bytes = move || Ok(data.clone());
            reader.deliver(
                &conn,
                &InFrame {
                    kind: FrameKind::Data,
                    seq: s.seq,
                    stamp_ns: s.stamp_ns,
                    arrival_ns: 0,
                    payload: Payload {
                        typed: None,
                        bytes: &bytes,
                    },
                },
            );
        }
    }
}

struct RxStream {
    receiver: Receiver,
    reader: Weak<dyn Inbox>,
    conn: Arc<InboundConn>,
    last_rx: Instant,
}

/// The UDP socket of a runtime and its streams.
pub(crate) struct UdpShared {
    socket: mio::net::UdpSocket,
    epoch: Instant,
    tx: Mutex<HashMap<(SocketAddr, u32), Arc<TxStream>>>,
    rx: Mutex<HashMap<(SocketAddr, u32), RxStream>>,
    settings: UdpSettings,
    io: IoHandle,
    local_ips: Vec<IpAddr>,
    malformed: AtomicU64,
    /// Largest datagram towards a peer address (per interface, ≤ its MTU).
    mtu_for: Box<dyn Fn(IpAddr) -> usize + Send + Sync>,
}

fn since(epoch: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(epoch).as_nanos() as u64
}

impl UdpShared {
    pub fn new(
        socket: mio::net::UdpSocket,
        settings: UdpSettings,
        io: IoHandle,
        ifaces: &[Interface],
        mtu_for: Box<dyn Fn(IpAddr) -> usize + Send + Sync>,
    ) -> Self {
        udp_sys::enable_rx_timestamps(&socket);
        UdpShared {
            mtu_for,
            socket,
            epoch: Instant::now(),
            tx: Mutex::new(HashMap::new()),
            rx: Mutex::new(HashMap::new()),
            settings,
            io,
            local_ips: ifaces.iter().map(|i| IpAddr::V4(i.addr)).collect(),
            malformed: AtomicU64::new(0),
        }
    }

    fn send(&self, bytes: &[u8], to: SocketAddr) {
        // A full socket buffer is a lost datagram: the protocol repairs it.
        let _ = self.socket.send_to(bytes, to);
    }

    /// Sends with a TOS byte of its own (an `IP_TOS` control message: the
    /// socket is shared by every stream; the kernel derives the datagram's
    /// socket priority, hence its `pfifo_fast` band, from it).
    fn send_tos(&self, bytes: &[u8], to: SocketAddr, class: Option<PacketClass>) {
        match class {
            None => self.send(bytes, to),
            Some(c) => {
                let _ = udp_sys::send_with_class(&self.socket, bytes, to, c);
            }
        }
    }

    /// Sends what the stream may send now; returns its next deadline.
    fn pump_tx(&self, tx: &TxStream, st: &mut TxState, now: Instant) -> Option<Instant> {
        let tos = *tx.class.lock();
        if let Some(t) = st.next_hello {
            if now >= t {
                self.send_tos(&tx.hello, tx.peer, tos);
                st.next_hello = Some(now + HELLO_EVERY);
            }
        }
        if st.sender.has_feedback() {
            while let Some(d) = st.sender.poll_transmit(now) {
                self.send_tos(&d, tx.peer, tos);
            }
        }
        let s = st.sender.stats();
        tx.stats.rtt_us.store(s.srtt_us as u64, Ordering::Relaxed);
        tx.stats
            .retransmitted
            .store(s.retransmitted, Ordering::Relaxed);
        tx.stats.fec.store(s.fec_shards, Ordering::Relaxed);
        tx.stats.pacing_rate.store(s.pacing_rate, Ordering::Relaxed);
        tx.stats
            .history_bytes
            .store(s.history_bytes as u64, Ordering::Relaxed);
        tx.stats
            .drops
            .store(s.dropped + s.expired, Ordering::Relaxed);
        let d = match (st.sender.poll_timeout(now), st.next_hello) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        tx.io_deadline.store(
            d.map_or(u64::MAX, |d| since(self.epoch, d)),
            Ordering::Relaxed,
        );
        d
    }

    /// Sends a stream's feedback and takes its completed samples out into
    /// `ready` (delivered once the `rx` lock is released).
    fn pump_rx(&self, peer: SocketAddr, rx: &mut RxStream, ready: &mut Ready) {
        while let Some(d) = rx.receiver.poll_transmit() {
            self.send(&d, peer);
        }
        if let Some(reader) = rx.reader.upgrade() {
            while let Some(s) = rx.receiver.poll_sample() {
                rx.conn.stats.message(s.data.len());
                ready.0.push((reader.clone(), rx.conn.clone(), s));
            }
        }
        let rs = rx.receiver.stats();
        rx.conn.stats.lost.store(rs.lost, Ordering::Relaxed);
        rx.conn.stats.fec.store(rs.fec_recovered, Ordering::Relaxed);
    }

    /// Reads every pending datagram (I/O thread).
    /// `alive` is told which participants the datagrams prove alive.
    pub fn on_readable(
        &self,
        local: ParticipantId,
        same_host: &dyn Fn(ParticipantId) -> bool,
        alive: &mut dyn FnMut(ParticipantId),
    ) {
        let mut buf = [0u8; 65536];
        for _ in 0..4096 {
            let Ok((n, from, stamp)) = udp_sys::recv_stamped(&self.socket, &mut buf) else {
                break;
            };
            let clock = udp_sys::RxClock::now();
            let arrived = clock.arrival(stamp);
            if let Some(p) =
                self.on_datagram(clock.mono(), arrived, from, &buf[..n], local, same_host)
            {
                alive(p);
            }
        }
    }

    /// Handles one datagram; returns the participant it proves alive.
    fn on_datagram(
        &self,
        now: Instant,
        arrived: Instant,
        from: SocketAddr,
        bytes: &[u8],
        local: ParticipantId,
        same_host: &dyn Fn(ParticipantId) -> bool,
    ) -> Option<ParticipantId> {
        let p = match Packet::parse(bytes) {
            Ok(p) => p,
            Err(e) => {
                let n = self.malformed.fetch_add(1, Ordering::Relaxed);
                if n.is_power_of_two() {
                    tracing::warn!("malformed UDP datagram from {from} ({} so far): {e}", n + 1);
                }
                return None;
            }
        };
        let key = (from, p.stream);
        match p.body {
            Datagram::Hello(h) => {
                self.on_hello(now, key, h, local, same_host);
                None
            }
            Datagram::AckNack(_) => {
                let tx = self.tx.lock().get(&key).cloned()?;
                let mut st = tx.state.lock();
                st.sender.handle_datagram(now, bytes).ok()?;
                st.next_hello = None;
                while let Some(e) = st.sender.poll_event() {
                    match e {
                        SenderEvent::PeerSilent => tracing::warn!(
                            "{} → {}: peer silent, stopped sending, probing",
                            tx.writer,
                            tx.reader
                        ),
                        SenderEvent::PeerBack => {
                            tracing::info!("{} → {}: peer back, resuming", tx.writer, tx.reader)
                        }
                    }
                }
                self.pump_tx(&tx, &mut st, now);
                drop(st);
                tx.acked.notify_all();
                Some(tx.reader.participant)
            }
            Datagram::Data(_) | Datagram::Heartbeat(_) | Datagram::Fec(_) => {
                let mut ready = Ready::default();
                let alive = {
                    let mut rx = self.rx.lock();
                    let s = rx.get_mut(&key)?;
                    s.last_rx = now;
                    if s.receiver.handle_datagram_at(now, arrived, bytes).is_err() {
                        s.conn.stats.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    self.pump_rx(from, s, &mut ready);
                    s.conn.remote.participant
                };
                ready.deliver();
                Some(alive)
            }
        }
    }

    fn on_hello(
        &self,
        now: Instant,
        key: (SocketAddr, u32),
        h: Hello,
        local: ParticipantId,
        same_host: &dyn Fn(ParticipantId) -> bool,
    ) {
        if h.to.participant != local {
            return;
        }
        let mut rx = self.rx.lock();
        if let std::collections::hash_map::Entry::Vacant(slot) = rx.entry(key) {
            let Some(reader) = super::intra::lookup_reader(h.to) else {
                return;
            };
            let mut cfg = ReceiverConfig::new(key.1);
            cfg.reliable = h.reliable;
            cfg.mtu = (self.mtu_for)(key.0.ip());
            let ip = key.0.ip();
            let conn = Arc::new(InboundConn {
                remote: h.from,
                transport: TransportKind::Udp,
                locator: format!("udp/{}", key.0),
                stats: Arc::new(ConnStats::new()),
                replier: None,
                same_clock: ip.is_loopback()
                    || self.local_ips.contains(&ip)
                    || same_host(h.from.participant),
                seqs: Default::default(),
            });
            reader.attach(conn.clone());
            slot.insert(RxStream {
                receiver: Receiver::new(cfg, now),
                reader: Arc::downgrade(&reader),
                conn,
                last_rx: now,
            });
        }
        let s = rx.get_mut(&key).expect("inserted above");
        s.last_rx = now;
        s.receiver.acknowledge(now);
        let mut ready = Ready::default();
        self.pump_rx(key.0, s, &mut ready);
        drop(rx);
        ready.deliver();
    }

    /// Runs every stream's timers (I/O thread); returns the next deadline.
    pub fn service(&self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut min = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Instant| n.min(t)));
            }
        };
        let txs: Vec<Arc<TxStream>> = {
            let mut map = self.tx.lock();
            map.retain(|_, t| !t.closed.load(Ordering::Relaxed));
            map.values().cloned().collect()
        };
        for tx in txs {
            let mut st = tx.state.lock();
            st.sender.handle_timeout(now);
            if st.sender.is_silent() && st.next_hello.is_none() {
                // The reader may have restarted and lost the stream: re-open it.
                st.next_hello = Some(now + HELLO_EVERY);
            }
            while let Some(e) = st.sender.poll_event() {
                if e == SenderEvent::PeerSilent {
                    tracing::warn!(
                        "{} → {}: no feedback, stopped sending into the void; probing",
                        tx.writer,
                        tx.reader
                    );
                }
            }
            min(self.pump_tx(&tx, &mut st, now));
        }
        let mut rx = self.rx.lock();
        rx.retain(|key, s| {
            let alive =
                s.reader.strong_count() > 0 && now.saturating_duration_since(s.last_rx) < RX_IDLE;
            if !alive {
                if let Some(r) = s.reader.upgrade() {
                    r.detach(s.conn.remote);
                }
                return false;
            }
            s.receiver.handle_timeout(now);
            let _ = key;
            true
        });
        let mut ready = Ready::default();
        for (key, s) in rx.iter_mut() {
            self.pump_rx(key.0, s, &mut ready);
            min(s.receiver.poll_timeout());
        }
        drop(rx);
        ready.deliver();
        next
    }

    /// The writer is gone (discovery): drop its reader-side streams now.
    pub fn forget_writer(&self, writer: EndpointId) {
        self.rx.lock().retain(|_, s| {
            if s.conn.remote == writer {
                if let Some(r) = s.reader.upgrade() {
                    r.detach(writer);
                }
                false
            } else {
                true
            }
        });
    }
}

/// Writer end of a UDP connection.
struct UdpLink {
    shared: Arc<UdpShared>,
    tx: Arc<TxStream>,
    lane_limit: usize,
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
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        if self.tx.closed.load(Ordering::Relaxed) {
            return Err(SendError::Closed);
        }
        let body = (frame.payload.bytes)()?;
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
                Err(WriteError::Full { .. }) => {
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
    fn set_priority(&self, p: Priority) -> Result<String, PriorityError> {
        // The thread first: when no thread is left, nothing has changed.
        let mut thread_note = String::new();
        let mut lane = self.tx.lane.lock();
        match (p.thread, lane.as_ref()) {
            (Some(t), Some(l)) => {
                l.set_policy(t);
                thread_note = format!("; sender thread now {t}");
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
                thread_note = format!("; dedicated sender thread {t}");
            }
            (None, Some(l)) => {
                l.stop();
                self.tx.lane_active.store(false, Ordering::Release);
                *lane = None;
                self.shared.io.kick();
                thread_note = "; dedicated sender thread stopped".into();
            }
            (None, None) => {}
        }
        drop(lane);
        *self.tx.class.lock() = (p.class != PacketClass::Normal).then_some(p.class);
        *self.tx.priority.lock() = p;
        let note = format!(
            "udp: TOS 0x{:02x} (DSCP {}), socket priority {} (pfifo_fast band {}) per datagram",
            p.class.tos(),
            p.class.dscp(),
            p.class.socket_priority(),
            p.class.band()
        );
        Ok(note + &thread_note)
    }
}

/// The UDP transport of one runtime.
pub struct UdpTransport {
    shared: Arc<UdpShared>,
    locators: Vec<Locator>,
    interfaces: Vec<Interface>,
    lane_limit: usize,
}

impl UdpTransport {
    pub(crate) fn new(
        shared: Arc<UdpShared>,
        locators: Vec<Locator>,
        interfaces: Vec<Interface>,
        lane_limit: usize,
    ) -> Self {
        UdpTransport {
            shared,
            locators,
            interfaces,
            lane_limit,
        }
    }
}

impl Transport for UdpTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Udp
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            zero_copy: false,
            mtu: Some(self.shared.settings.mtu),
            request_reply: false,
        }
    }
    fn locators(&self) -> Vec<Locator> {
        self.locators.clone()
    }
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        !super::rank_addresses(&self.interfaces, TransportKind::Udp, local, remote).is_empty()
    }
    /// Automatically only between hosts: on one host TCP (and later shared
    /// memory) is the better path; pin `udp` to use it anyway.
    fn automatic(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        local.host_id != remote.host_id && self.reaches(local, remote)
    }
    fn connect(&self, req: ConnectRequest) -> Result<Arc<dyn Link>, ConnectError> {
        let addrs = super::rank_addresses(
            &self.interfaces,
            TransportKind::Udp,
            &local_peer(req.writer.participant),
            &req.remote,
        );
        let peer = *addrs.first().ok_or_else(|| ConnectError::Unreachable {
            peer: req.remote.participant,
            tried: String::new(),
            last: "no udp locator".into(),
        })?;
        let s = self.shared.settings;
        let mut cfg = SenderConfig::new(random_stream());
        cfg.mtu = (self.shared.mtu_for)(peer.ip());
        cfg.rate = s.rate;
        cfg.history_bytes = s.history_bytes;
        cfg.reliable = req.qos.reliability == Reliability::Reliable;
        cfg.keep_all = req.qos.history == History::KeepAll;
        cfg.history_samples = req.qos.history.depth(1024);
        cfg.lifespan = req.qos.lifespan;
        cfg.fec = s.fec;
        cfg.adaptive_rate = s.adaptive_rate;
        let stream = cfg.stream;
        let hello = encode_hello(
            stream,
            &Hello {
                from: req.writer,
                to: req.reader,
                reliable: cfg.reliable,
            },
        );
        let now = Instant::now();
        let tx = Arc::new(TxStream {
            stream,
            peer,
            hello,
            state: Mutex::new(TxState {
                sender: Sender::new(cfg.clone(), now),
                next_hello: Some(now),
            }),
            acked: Condvar::new(),
            closed: AtomicBool::new(false),
            stats: Arc::new(ConnStats::new()),
            writer: req.writer,
            reader: req.reader,
            block: (cfg.reliable && cfg.keep_all).then_some(s.keep_all_block),
            io_deadline: AtomicU64::new(0),
            class: Mutex::new(None),
            lane: Mutex::new(None),
            lane_active: AtomicBool::new(false),
            priority: Mutex::new(Priority::default()),
        });
        self.shared.tx.lock().insert((peer, tx.stream), tx.clone());
        {
            let mut st = tx.state.lock();
            self.shared.pump_tx(&tx, &mut st, now);
        }
        self.shared.io.kick();
        Ok(Arc::new(UdpLink {
            shared: self.shared.clone(),
            tx,
            lane_limit: self.lane_limit,
        }))
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
    }
}

fn random_stream() -> u32 {
    let mut b = [0u8; 4];
    // SAFETY: getrandom writes at most 4 bytes into b.
    unsafe { libc::getrandom(b.as_mut_ptr().cast(), 4, 0) };
    u32::from_le_bytes(b) | 1
}
