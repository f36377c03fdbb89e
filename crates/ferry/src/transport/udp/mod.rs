//! The UDP path: `ferry-rudp` streams over one socket per runtime — built
//! for lossy wireless links and large samples. Datagrams never exceed the
//! configured MTU; losses are repaired per fragment; the sender paces to the
//! link; an outage stops transmission until the reader answers again.
//!
//! A connection is a stream: the writer picks a random stream id and sends
//! HELLO (writer, reader, reliability) until the reader's runtime answers
//! with an ACKNACK; then data flows. The socket's `ferry_rudp::Endpoint`
//! parses each datagram once, routes it to its stream, repeats HELLOs and
//! bounds the reader streams the network can open (per source address and
//! in total); this driver keeps each stream's `Sender`/`Receiver` under a
//! lock of its own. Publishers write and send straight from their own
//! thread; the I/O thread handles ACKNACKs, incoming data and every
//! protocol timer (heartbeats, NACK delays, pacing slots, outage probes).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ferry_rudp::{
    Dropped, Endpoint, EndpointConfig, EndpointEvent, Incoming, Receiver, ReceiverConfig, Routed,
    Sender, SenderEvent, StreamHandle,
};
use ferry_transport::room::Stall;
use ferry_wire::rudp::Packet;
use ferry_wire::{EndpointId, ParticipantId, TransportKind};
use parking_lot::{Condvar, Mutex};

mod link;
mod reply;
mod source;

use link::UdpLink;
pub use link::UdpTransport;
use reply::UdpReplier;
pub(crate) use source::UdpSource;

use ferry_security::udp::{Opened, Outcome, ProvenUdp, Tuning, UdpSecurity};

use super::udp_sys;

/// The session a datagram came sealed under: its participant and proven
/// identity (security on).
type Proof<'a> = Option<(ParticipantId, &'a Arc<ferry_security::PeerIdentity>)>;

/// Whether a datagram for a reader stream comes from the stream's own
/// writer: sealed by its runtime's session when the stream was set up
/// sealed, plain when it was plain.
fn from_its_writer(proof: Proof<'_>, conn: &InboundConn) -> bool {
    match proof {
        Some((p, _)) => conn.identity.is_some() && p == conn.remote.participant,
        None => conn.identity.is_none(),
    }
}
use super::{Carries, InboundConn, Inbox, Replier};
use crate::host::Interface;
use crate::priority::{Lane, PacketClass, Priority};
use crate::reactor::IoHandle;
use crate::stats::ConnStats;

/// Starts UDP: its socket in the I/O loop (datagrams and the streams'
/// timers), announced on every address with the datagram size its
/// interface takes.
pub(crate) fn start(
    ctx: &super::StartContext<'_>,
) -> Result<Option<Arc<dyn super::Transport>>, crate::error::BuildError> {
    let cfg = ctx.cfg;
    // Security on: sessions with proven peers (Noise IK, AEAD per datagram).
    let protection = ctx
        .security
        .map(|sec| {
            let s = sec.clone();
            UdpSecurity::new(
                ctx.id,
                sec.domain,
                sec.enforce,
                Box::new(move |p| {
                    let proven = s.peers.get(p)?;
                    Some(ProvenUdp {
                        key: proven.udp_key?,
                        identity: proven.identity,
                    })
                }),
                Tuning {
                    rekey_after: ctx
                        .cfg
                        .security
                        .udp_rekey_s
                        .map_or(Tuning::default().rekey_after, |s| {
                            Duration::from_secs(u64::from(s))
                        }),
                    ..Tuning::default()
                },
            )
            .map(Arc::new)
            .map_err(|e| crate::error::BuildError::Io {
                what: "protected UDP".into(),
                source: std::io::Error::other(e.to_string()),
            })
        })
        .transpose()?;
    let link = cfg.udp_link_mbps * 1_000_000 / 8;
    let settings = UdpSettings {
        mtu: cfg.udp_mtu as usize,
        rate: link,
        history_bytes: match cfg.udp_history_mb {
            Some(mb) => (mb as usize) << 20,
            None => ferry_rudp::history_bytes_for(link, cfg.udp_utilization_pct as f64 / 100.0),
        },
        keep_all_block: Duration::from_millis(cfg.keep_all_block_ms),
        fec: cfg.udp_fec,
        adaptive_rate: cfg.udp_adaptive_rate,
        congestion_model: cfg.udp_congestion_model,
        lane_limit: cfg.priority_threads,
    };
    let mtu_for = {
        let (ifaces, cfg) = (ctx.ifaces.to_vec(), cfg.clone());
        Box::new(move |ip: IpAddr| match ip {
            IpAddr::V4(v4) => crate::host::udp_payload_for(v4, &ifaces, &cfg),
            IpAddr::V6(_) => cfg.udp_mtu as usize,
        })
    };
    let key = protection.as_ref().map(|p| p.public_key());
    if let Some(p) = &protection {
        let _ = ctx.listener_counters.udp.set(p.clone());
    }
    let (shared, port) = UdpShared::open(
        ctx.bind_ip,
        ctx.id,
        settings,
        ctx.io.clone(),
        ctx.ifaces,
        mtu_for,
        Guard {
            protection,
            counters: ctx.listener_counters.clone(),
        },
    )
    .map_err(|source| crate::error::BuildError::Io {
        what: "UDP socket".into(),
        source,
    })?;
    ctx.io.add(Box::new(UdpSource(shared.clone())));
    let locators = ctx
        .announce_ips
        .iter()
        .map(|ip| {
            // Readers take datagrams up to the interface's MTU: writers
            // elsewhere send no larger ones.
            let mut l = ferry_wire::Locator::socket(TransportKind::Udp, (*ip, port).into());
            l.params.mtu = u16::try_from(crate::host::udp_payload_for(*ip, ctx.ifaces, cfg))
                .ok()
                .filter(|m| ferry_wire::LOCATOR_MTU.contains(m));
            l.params.key = key;
            l
        })
        .collect();
    Ok(Some(Arc::new(UdpTransport::new(
        shared,
        locators,
        ctx.ifaces.to_vec(),
    ))))
}

/// A reader-side stream idle this long is dropped (its writer is gone); as
/// long as a writer keeps its side through an outage.
const RX_IDLE: Duration = ferry_conn::OUTAGE_GRACE;

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
    /// The congestion model (`udp_congestion_model`).
    pub congestion_model: bool,
    /// Dedicated sender threads at most (`priority_threads`).
    pub lane_limit: usize,
}

struct TxState {
    sender: Sender,
    /// Where its datagrams are written (reused).
    buf: Vec<u8>,
}

struct TxStream {
    handle: StreamHandle,
    peer: SocketAddr,
    /// Its datagrams travel sealed (security on, the reader's runtime
    /// proved a UDP key): feedback must come sealed by that runtime.
    sealed: bool,
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
            super::deliver_sample(&*reader, &conn, s.seq, s.stamp_ns, 0, s.data);
        }
    }
}

struct RxStream {
    receiver: Receiver,
    peer: SocketAddr,
    reader: Weak<dyn Inbox>,
    conn: Arc<InboundConn>,
    /// Waiting for room in the reader's queue (a waker will kick the I/O
    /// loop, whose next turn pumps every stream).
    waiting: Stall,
}

/// The endpoint and the buffer its HELLOs are written into.
struct EndpointState {
    endpoint: Endpoint,
    buf: Vec<u8>,
}

/// The UDP socket of a runtime and its streams.
pub(crate) struct UdpShared {
    /// Itself, for the reply streams its services open.
    me: Weak<UdpShared>,
    socket: mio::net::UdpSocket,
    epoch: Instant,
    /// Routing, HELLOs and the bounds on reader streams. Locked briefly
    /// and always innermost: it may be taken while a stream or a stream map
    /// is locked, never the other way round.
    endpoint: Mutex<EndpointState>,
    tx: Mutex<HashMap<StreamHandle, Arc<TxStream>>>,
    rx: Mutex<HashMap<StreamHandle, RxStream>>,
    /// Some writer stream may be in an outage (cleared when a look finds
    /// none): datagrams from a peer then wake its silent streams.
    any_silent: AtomicBool,
    /// Where reader streams write their acknowledgements (I/O thread).
    rx_buf: Mutex<Vec<u8>>,
    settings: UdpSettings,
    io: IoHandle,
    local_ips: Vec<IpAddr>,
    refused: AtomicU64,
    /// Largest datagram towards a peer address (per interface, ≤ its MTU).
    mtu_for: Box<dyn Fn(IpAddr) -> usize + Send + Sync>,
    /// Security on: sealing, opening, and where refusals are counted.
    guard: Guard,
}

/// What security adds to the UDP socket.
pub(crate) struct Guard {
    /// Sessions with proven peers (security on).
    protection: Option<Arc<UdpSecurity>>,
    /// Where refused streams are counted.
    counters: Arc<ferry_transport::stats::ListenerCounters>,
}

thread_local! {
    /// Where this thread seals datagrams (one copy of ≤ one datagram).
    static SEALED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn since(epoch: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(epoch).as_nanos() as u64
}

impl UdpShared {
    fn new(
        socket: mio::net::UdpSocket,
        local: ParticipantId,
        settings: UdpSettings,
        io: IoHandle,
        ifaces: &[Interface],
        mtu_for: Box<dyn Fn(IpAddr) -> usize + Send + Sync>,
        guard: Guard,
    ) -> Arc<Self> {
        udp_sys::enable_rx_timestamps(&socket);
        Arc::new_cyclic(|me| UdpShared {
            me: me.clone(),
            mtu_for,
            socket,
            epoch: Instant::now(),
            endpoint: Mutex::new(EndpointState {
                endpoint: Endpoint::new(EndpointConfig {
                    idle_timeout: RX_IDLE,
                    ..EndpointConfig::new(local)
                }),
                buf: Vec::new(),
            }),
            tx: Mutex::new(HashMap::new()),
            any_silent: AtomicBool::new(false),
            rx: Mutex::new(HashMap::new()),
            rx_buf: Mutex::new(Vec::new()),
            settings,
            io,
            local_ips: ifaces.iter().map(|i| IpAddr::V4(i.addr)).collect(),
            refused: AtomicU64::new(0),
            guard,
        })
    }

    fn send(&self, bytes: &[u8], to: SocketAddr, peer: ParticipantId) {
        self.send_tos(bytes, to, peer, None)
    }

    /// Sends with a TOS byte of its own (an `IP_TOS` control message: the
    /// socket is shared by every stream; the kernel derives the datagram's
    /// socket priority, hence its `pfifo_fast` band, from it). Security
    /// on: sealed under a session with runtime `peer` itself, or held
    /// while its handshake runs (the protocol repeats what it sends), never
    /// plain to a protected peer.
    fn send_tos(
        &self,
        bytes: &[u8],
        to: SocketAddr,
        peer: ParticipantId,
        class: Option<PacketClass>,
    ) {
        let Some(p) = &self.guard.protection else {
            return self.emit(bytes, to, class);
        };
        SEALED.with(|out| {
            let mut out = out.borrow_mut();
            let s = p.seal(Instant::now(), to, peer, bytes, &mut out);
            if let Some(shake) = s.shake {
                self.emit(&shake, to, class);
            }
            match s.outcome {
                Outcome::Sealed => self.emit(&out, to, class),
                Outcome::Plain => self.emit(bytes, to, class),
                Outcome::Held | Outcome::Refused => {}
            }
        });
    }

    fn emit(&self, bytes: &[u8], to: SocketAddr, class: Option<PacketClass>) {
        // A full socket buffer is a lost datagram: the protocol repairs it.
        let _ = match class {
            None => self.socket.send_to(bytes, to),
            Some(c) => udp_sys::send_with_class(&self.socket, bytes, to, c),
        };
    }

    /// Whether datagrams to runtime `peer` are sealed (they carry less).
    fn seal_overhead(&self, peer: ParticipantId) -> usize {
        match &self.guard.protection {
            Some(p) if p.protects(peer) => ferry_wire::seal::SEAL_OVERHEAD,
            _ => 0,
        }
    }

    /// Sends what the stream may send now; returns its next deadline.
    fn pump_tx(&self, tx: &TxStream, st: &mut TxState, now: Instant) -> Option<Instant> {
        let tos = *tx.class.lock();
        if st.sender.has_feedback() {
            let TxState { sender, buf } = st;
            let mut sent = false;
            while sender.poll_transmit(now, buf) {
                self.send_tos(buf, tx.peer, tx.reader.participant, tos);
                sent = true;
            }
            if sent && tx.block.is_some() {
                // A keep_all writer may wait for its backlog to go out.
                tx.acked.notify_all();
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
        let d = st.sender.poll_timeout(now);
        tx.io_deadline.store(
            d.map_or(u64::MAX, |d| since(self.epoch, d)),
            Ordering::Relaxed,
        );
        d
    }

    /// Sends a stream's feedback and takes its completed samples out into
    /// `ready` (delivered once the `rx` lock is released).
    ///
    /// A reliable keep_all reader gets no more than the room left in its
    /// queue; past that the stream holds its samples back, unacknowledged
    /// (the writer's window closes and its keep_all blocks), until the
    /// room's waker kicks the I/O loop.
    fn pump_rx(&self, rx: &mut RxStream, buf: &mut Vec<u8>, ready: &mut Ready, now: Instant) {
        if let Some(reader) = rx.reader.upgrade() {
            let room = reader.room().cloned();
            let mut free = room
                .as_ref()
                .map_or(usize::MAX, |r| r.depth().saturating_sub(r.len()));
            if free > 0 {
                // Room again: what was held goes now (and is acknowledged).
                rx.receiver.set_held(false, now);
            }
            while free > 0 {
                let Some(s) = rx.receiver.poll_sample() else {
                    break;
                };
                free -= 1;
                rx.conn.stats.message(s.data.len());
                ready.0.push((reader.clone(), rx.conn.clone(), s));
            }
            if let Some(room) = room.filter(|_| free == 0) {
                rx.receiver.set_held(true, now);
                let io = self.io.clone();
                rx.waiting.wait(&room, move || io.kick());
            }
        }
        while rx.receiver.poll_transmit(buf) {
            self.send(buf, rx.peer, rx.conn.remote.participant);
        }
        let rs = rx.receiver.stats();
        rx.conn.stats.lost.store(rs.lost, Ordering::Relaxed);
        rx.conn.stats.fec.store(rs.fec_recovered, Ordering::Relaxed);
    }

    /// Opens the runtime's UDP data socket on `ip` (an ephemeral port);
    /// returns the shared state and the port. [`UdpSource`] serves it.
    pub fn open(
        ip: std::net::Ipv4Addr,
        local: ParticipantId,
        settings: UdpSettings,
        io: IoHandle,
        ifaces: &[Interface],
        mtu_for: Box<dyn Fn(IpAddr) -> usize + Send + Sync>,
        guard: Guard,
    ) -> std::io::Result<(Arc<Self>, u16)> {
        use socket2::{Domain, Protocol, Socket, Type};
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        // Room for bursts of large samples (the kernel caps these at rmem_max).
        let _ = s.set_recv_buffer_size(8 << 20);
        let _ = s.set_send_buffer_size(8 << 20);
        s.bind(&std::net::SocketAddrV4::new(ip, 0).into())?;
        s.set_nonblocking(true)?;
        let socket = mio::net::UdpSocket::from_std(s.into());
        let port = socket.local_addr()?.port();
        Ok((
            Self::new(socket, local, settings, io, ifaces, mtu_for, guard),
            port,
        ))
    }

    /// Reads every pending datagram (I/O thread); tells `ctx` which
    /// participants the datagrams prove alive.
    pub fn on_readable(&self, ctx: &mut dyn crate::reactor::LoopContext) {
        let mut buf = [0u8; 65536];
        let mut opened = Vec::new();
        // Read once per batch: a session outlives no certificate.
        let unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        for _ in 0..4096 {
            let Ok((n, from, stamp)) = udp_sys::recv_stamped(&self.socket, &mut buf) else {
                break;
            };
            let clock = udp_sys::RxClock::now();
            let arrived = clock.arrival(stamp);
            let same_host = |p| ctx.same_clock(p);
            let (bytes, proof) = match &self.guard.protection {
                None => (&buf[..n], None),
                Some(p) => match p.open(clock.mono(), from, &buf[..n], &mut opened) {
                    Opened::Data { peer, identity, .. } if unix_s > identity.not_after() => {
                        // Its certificate ended since the handshake: its
                        // data is not taken (nor does it keep the peer
                        // alive), so discovery lets it go at its lease.
                        ferry_transport::stats::ListenerCounters::count(
                            &self.guard.counters.denied,
                        );
                        tracing::debug!(
                            "UDP datagram from {from} ({peer}) refused: the certificate of {} ended",
                            identity.enclave()
                        );
                        continue;
                    }
                    Opened::Data {
                        len,
                        peer,
                        identity,
                    } => (&opened[..len], Some((peer, identity))),
                    Opened::Plain => (&buf[..n], None),
                    Opened::Reply(answer) => {
                        self.emit(&answer, from, None);
                        continue;
                    }
                    Opened::Done => {
                        self.session_ready(clock.mono(), from);
                        continue;
                    }
                    Opened::Dropped(_) => continue,
                },
            };
            let proof = proof.as_ref().map(|(p, i)| (*p, i));
            if let Some(p) = self.on_datagram(clock.mono(), arrived, from, bytes, &same_host, proof)
            {
                ctx.alive(p);
            }
        }
    }

    /// A protected session with `peer` was just established: the HELLOs
    /// held for it go now, not at their next repeat.
    fn session_ready(&self, now: Instant, peer: SocketAddr) {
        let handles: Vec<StreamHandle> = self
            .tx
            .lock()
            .values()
            .filter(|t| t.peer == peer)
            .map(|t| t.handle)
            .collect();
        let mut e = self.endpoint.lock();
        for h in handles {
            e.endpoint.hello_now(now, h);
        }
        drop(e);
        self.io.kick();
    }

    /// Handles one datagram; returns the participant it proves alive.
    fn on_datagram(
        &self,
        now: Instant,
        arrived: Instant,
        from: SocketAddr,
        bytes: &[u8],
        same_host: &dyn Fn(ParticipantId) -> bool,
        proof: Proof<'_>,
    ) -> Option<ParticipantId> {
        let routed = self.endpoint.lock().endpoint.handle(now, from, bytes);
        if !matches!(routed, Routed::Dropped(_)) && self.any_silent.load(Ordering::Acquire) {
            self.sign_of_life(now, from);
        }
        match routed {
            Routed::Dropped(Dropped::Malformed(e)) => {
                let n = self.endpoint.lock().endpoint.stats().malformed;
                if n.is_power_of_two() {
                    tracing::warn!("malformed UDP datagram from {from} ({n} so far): {e}");
                }
                None
            }
            Routed::Dropped(_) => None,
            Routed::Incoming(inc) => {
                self.on_incoming(now, inc, same_host, proof);
                None
            }
            Routed::HelloAgain(h) => {
                self.with_rx(h, |s| {
                    if from_its_writer(proof, &s.conn) {
                        s.receiver.acknowledge(now);
                    }
                });
                None
            }
            Routed::Writer(h, p) => self.on_feedback(now, h, &p, proof),
            Routed::Reader(h, p) => self
                .with_rx(h, |s| {
                    // Only the session of the stream's own writer feeds it
                    // (streams are keyed by address and id, both in clear).
                    if !from_its_writer(proof, &s.conn) {
                        return None;
                    }
                    if s.receiver
                        .handle_packet_at(now, arrived, bytes.len(), &p)
                        .is_err()
                    {
                        s.conn.stats.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(s.conn.remote.participant)
                })
                .flatten(),
        }
    }

    /// Runs `f` on reader stream `h`, then sends its feedback and delivers
    /// what it completed (after the `rx` lock is released).
    fn with_rx<T>(&self, h: StreamHandle, f: impl FnOnce(&mut RxStream) -> T) -> Option<T> {
        let mut ready = Ready::default();
        let out = {
            let mut rx = self.rx.lock();
            let s = rx.get_mut(&h)?;
            let out = f(s);
            self.pump_rx(s, &mut self.rx_buf.lock(), &mut ready, Instant::now());
            out
        };
        ready.deliver();
        Some(out)
    }

    /// A datagram from `from`'s host while some writer stream is in an
    /// outage: those to that host probe at once (`Sender::peer_heard`).
    fn sign_of_life(&self, now: Instant, from: SocketAddr) {
        let txs: Vec<Arc<TxStream>> = self.tx.lock().values().cloned().collect();
        let mut silent = false;
        for tx in txs {
            let mut st = tx.state.lock();
            if !st.sender.is_silent() {
                continue;
            }
            silent = true;
            if tx.peer.ip() == from.ip() {
                st.sender.peer_heard(now);
                self.pump_tx(&tx, &mut st, now);
            }
        }
        if !silent {
            self.any_silent.store(false, Ordering::Release);
        }
    }

    /// An ACKNACK for writer stream `h`: taken only from the session of
    /// its reader's runtime (or plain, for a plain stream).
    fn on_feedback(
        &self,
        now: Instant,
        h: StreamHandle,
        p: &Packet<'_>,
        proof: Proof<'_>,
    ) -> Option<ParticipantId> {
        let tx = self.tx.lock().get(&h).cloned()?;
        let ok = match proof {
            Some((peer, _)) => tx.sealed && peer == tx.reader.participant,
            None => !tx.sealed,
        };
        if !ok {
            return None;
        }
        let mut st = tx.state.lock();
        st.sender.handle_packet(now, p);
        self.sender_events(now, &tx, &mut st);
        self.pump_tx(&tx, &mut st, now);
        drop(st);
        tx.acked.notify_all();
        Some(tx.reader.participant)
    }

    fn sender_events(&self, now: Instant, tx: &TxStream, st: &mut TxState) {
        while let Some(e) = st.sender.poll_event() {
            match e {
                SenderEvent::PeerSilent => {
                    self.any_silent.store(true, Ordering::Release);
                    tracing::warn!(
                        "{} → {}: no feedback, stopped sending into the void; probing",
                        tx.writer,
                        tx.reader
                    );
                    // The reader may have restarted and lost the stream: HELLO again.
                    self.endpoint.lock().endpoint.reopen(now, tx.handle);
                    self.io.kick();
                }
                SenderEvent::PeerBack => {
                    tracing::info!("{} → {}: peer back, resuming", tx.writer, tx.reader)
                }
            }
        }
    }

    /// A HELLO for a new stream: accepted if the reader is ours and the
    /// endpoint's bounds allow.
    fn on_incoming(
        &self,
        now: Instant,
        inc: Incoming,
        same_host: &dyn Fn(ParticipantId) -> bool,
        proof: Proof<'_>,
    ) {
        let Some(reader) = super::intra::lookup_reader(inc.hello.to) else {
            return;
        };
        let Ok(identity) = self.writer_may(&inc, reader.as_ref(), proof) else {
            return;
        };
        let accepted = {
            let mut e = self.endpoint.lock();
            let r = e.endpoint.accept(now, &inc);
            let closed: Vec<_> = std::iter::from_fn(|| e.endpoint.poll_event()).collect();
            drop(e);
            self.on_endpoint_events(closed);
            r
        };
        let h = match accepted {
            Ok(h) => h,
            Err(err) => {
                let n = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_power_of_two() {
                    tracing::warn!("UDP stream from {} refused ({n} so far): {err}", inc.peer);
                }
                return;
            }
        };
        let mut cfg = ReceiverConfig::new(inc.stream);
        cfg.reliable = inc.hello.reliable;
        cfg.mtu =
            (self.mtu_for)(inc.peer.ip()) - proof.map_or(0, |_| ferry_wire::seal::SEAL_OVERHEAD);
        let ip = inc.peer.ip();
        // A client's requests: the replies go back on a stream of their own
        // to where the requests came from, opened at the first reply.
        let replier = (reader.carries() == Carries::Requests).then(|| {
            Arc::new(UdpReplier::new(
                self.me.clone(),
                inc.hello.to,
                inc.hello.from,
                inc.peer,
            )) as Arc<dyn Replier>
        });
        let conn = Arc::new(InboundConn {
            remote: inc.hello.from,
            origin: crate::transport::Origin::network(inc.peer, &self.local_ips),
            transport: TransportKind::Udp,
            locator: format!("udp/{}", inc.peer),
            stats: Arc::new(ConnStats::new()),
            replier,
            same_clock: ip.is_loopback()
                || self.local_ips.contains(&ip)
                || same_host(inc.hello.from.participant),
            seqs: Default::default(),
            identity,
        });
        reader.attach(conn.clone());
        self.rx.lock().insert(
            h,
            RxStream {
                receiver: Receiver::new(cfg, now),
                peer: inc.peer,
                reader: Arc::downgrade(&reader),
                conn,
                waiting: Stall::default(),
            },
        );
        self.with_rx(h, |s| s.receiver.acknowledge(now));
    }

    /// Security on: whether the writer of a new stream may write into
    /// `reader` — its HELLO came sealed under a session of the participant
    /// it names, whose grants allow it (a plain HELLO only under
    /// `permissive`). Refusals are counted in `denied`.
    fn writer_may(
        &self,
        inc: &Incoming,
        reader: &dyn Inbox,
        proof: Proof<'_>,
    ) -> Result<Option<Arc<ferry_security::PeerIdentity>>, ()> {
        let Some(p) = &self.guard.protection else {
            return Ok(None);
        };
        let refuse = |why: String| {
            ferry_transport::stats::ListenerCounters::count(&self.guard.counters.denied);
            tracing::warn!("UDP stream from {} refused: {why}", inc.peer);
            Err(())
        };
        let Some((participant, identity)) = proof else {
            if p.enforcing() {
                return refuse("a plain HELLO under enforce".into());
            }
            // Permissive takes plain peers, not a plain HELLO in the name
            // of a runtime that speaks sealed (a downgrade).
            if p.protects(inc.hello.from.participant) {
                return refuse(format!(
                    "a plain HELLO naming {}, which speaks sealed",
                    inc.hello.from.participant
                ));
            }
            return Ok(None);
        };
        if participant != inc.hello.from.participant {
            return refuse(format!(
                "its session is participant {participant}'s, its HELLO claims {}",
                inc.hello.from.participant
            ));
        }
        let (_, action) = ferry_transport::secure::writer_grant(reader.carries());
        let name = reader.name();
        if !identity.allows(action, name) {
            return refuse(format!(
                "identity {} may not {action} `{name}`",
                identity.enclave()
            ));
        }
        Ok(Some(identity.clone()))
    }

    /// Reader streams the endpoint closed (idle, or evicted to make room).
    fn on_endpoint_events(&self, events: Vec<EndpointEvent>) {
        if events.is_empty() {
            return;
        }
        let gone: Vec<RxStream> = {
            let mut rx = self.rx.lock();
            events
                .into_iter()
                .filter_map(|EndpointEvent::Closed(h, _)| rx.remove(&h))
                .collect()
        };
        for s in gone {
            if let Some(r) = s.reader.upgrade() {
                r.detach(&s.conn);
            }
        }
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
            let closed: Vec<StreamHandle> = map
                .iter()
                .filter(|(_, t)| t.closed.load(Ordering::Relaxed))
                .map(|(h, _)| *h)
                .collect();
            if !closed.is_empty() {
                let mut e = self.endpoint.lock();
                for h in closed {
                    map.remove(&h);
                    e.endpoint.close(h);
                }
            }
            map.values().cloned().collect()
        };
        for tx in txs {
            let mut st = tx.state.lock();
            st.sender.handle_timeout(now);
            self.sender_events(now, &tx, &mut st);
            min(self.pump_tx(&tx, &mut st, now));
        }
        if let Some(p) = &self.guard.protection {
            p.handle_timeout(now);
        }
        // The endpoint: HELLOs due, idle reader streams.
        let (hellos, closed) = {
            let mut guard = self.endpoint.lock();
            let e = &mut *guard;
            e.endpoint.handle_timeout(now);
            let mut hellos = Vec::new();
            while let Some(t) = e.endpoint.poll_transmit(now, &mut e.buf) {
                hellos.push((t, e.buf.clone()));
            }
            min(e.endpoint.poll_timeout());
            let closed: Vec<_> = std::iter::from_fn(|| e.endpoint.poll_event()).collect();
            (hellos, closed)
        };
        for (t, bytes) in hellos {
            let Some((peer, class)) = self
                .tx
                .lock()
                .get(&t.stream)
                .map(|tx| (tx.reader.participant, *tx.class.lock()))
            else {
                continue;
            };
            self.send_tos(&bytes, t.to, peer, class);
        }
        self.on_endpoint_events(closed);
        let mut rx = self.rx.lock();
        // Streams whose reader is gone, and (permissive) plain streams in
        // the name of a participant that speaks sealed: a plain HELLO that
        // came before discovery proved that participant was a downgrade.
        // (Enforce takes no plain stream; each participant is looked up
        // once per sweep.)
        let permissive = self.guard.protection.as_ref().filter(|p| !p.enforcing());
        let mut sealed: HashMap<ParticipantId, bool> = HashMap::new();
        let mut downgrade = |s: &RxStream| match permissive {
            Some(p) if s.conn.identity.is_none() => *sealed
                .entry(s.conn.remote.participant)
                .or_insert_with(|| p.protects(s.conn.remote.participant)),
            _ => false,
        };
        let (mut orphaned, mut downgraded) = (Vec::new(), Vec::new());
        for (h, s) in rx.iter() {
            if s.reader.strong_count() == 0 {
                orphaned.push(*h);
            } else if downgrade(s) {
                downgraded.push(*h);
            }
        }
        let mut detach = Vec::new();
        if !orphaned.is_empty() || !downgraded.is_empty() {
            let mut e = self.endpoint.lock();
            for h in orphaned {
                rx.remove(&h);
                e.endpoint.close(h);
            }
            for h in downgraded {
                e.endpoint.close(h);
                if let Some(s) = rx.remove(&h) {
                    ferry_transport::stats::ListenerCounters::count(&self.guard.counters.denied);
                    tracing::warn!(
                        "UDP stream from {} closed: plain, in the name of {}, which speaks sealed",
                        s.peer,
                        s.conn.remote.participant
                    );
                    detach.push(s);
                }
            }
        }
        let mut ready = Ready::default();
        let mut buf = self.rx_buf.lock();
        for s in rx.values_mut() {
            s.receiver.handle_timeout(now);
            self.pump_rx(s, &mut buf, &mut ready, now);
            min(s.receiver.poll_timeout());
        }
        drop(buf);
        drop(rx);
        for s in detach {
            if let Some(r) = s.reader.upgrade() {
                r.detach(&s.conn);
            }
        }
        ready.deliver();
        next
    }

    /// The writer is gone (discovery): drop its reader-side streams now.
    pub fn forget_writer(&self, writer: EndpointId) {
        let gone: Vec<RxStream> = {
            let mut rx = self.rx.lock();
            let handles: Vec<StreamHandle> = rx
                .iter()
                .filter(|(_, s)| s.conn.remote == writer)
                .map(|(h, _)| *h)
                .collect();
            let mut e = self.endpoint.lock();
            handles
                .into_iter()
                .filter_map(|h| {
                    e.endpoint.close(h);
                    rx.remove(&h)
                })
                .collect()
        };
        for s in gone {
            if let Some(r) = s.reader.upgrade() {
                r.detach(&s.conn);
            }
        }
    }
}
