//! The I/O thread of a runtime: one `mio` poll loop for the discovery
//! sockets (the loop's own) and every source a transport hands it
//! (`reactor::Source`: the TCP listener and each TCP connection, the UDP
//! data socket and its timers), plus the timers of discovery and
//! housekeeping. No thread per connection.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_discovery::{Destination, Event as DiscEvent, Via};
use ferry_wire::leader::{Fed, FedVia};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use super::Shared;
use crate::config::DiscoveryRange;
use crate::reactor::{self, Command, IoHandle, LoopContext, Readiness, Served, Source, WAKER};

/// Multicast group of ferry discovery (administratively scoped).
pub const DISCOVERY_GROUP: Ipv4Addr = Ipv4Addr::new(239, 255, 70, 1);

/// Receive (and send) buffer asked for the discovery sockets (the kernel
/// caps it at `net.core.rmem_max` / `wmem_max`).
const DISCOVERY_RCVBUF: usize = 2 << 20;

const MCAST: Token = Token(1);
const UCAST: Token = Token(2);
const TIMER: Token = Token(3);
const TWIN: Token = Token(4);
const FIRST_CONN: usize = 16;
/// Port housekeeping (deadlines, closed links) while some port has a
/// deadline or a connection; `IDLE_HOUSEKEEPING` otherwise.
const HOUSEKEEPING: Duration = Duration::from_millis(100);
const IDLE_HOUSEKEEPING: Duration = Duration::from_secs(2);

/// Sockets opened before the thread starts (so errors reach the builder).
pub(crate) struct Sockets {
    poll: Poll,
    /// Wakes the poll for deadlines under a millisecond away.
    timer: super::timer::PreciseTimer,
    mcast: Option<UdpSocket>,
    /// A second member of the group (host discovery, see `open`).
    twin: Option<UdpSocket>,
    ucast: UdpSocket,
    /// Where transports bind their sockets: loopback when discovery stays
    /// on this host, every interface otherwise.
    pub bind_ip: Ipv4Addr,
    mcast_ifaces: Vec<Ipv4Addr>,
    mcast_port: u16,
    /// Whether `mcast` is a member of the group (a follower fed by its
    /// host leader leaves it).
    joined: bool,
    pub handle: IoHandle,
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> crate::error::BuildError {
    let what = what.into();
    move |source| crate::error::BuildError::Io { what, source }
}

impl Sockets {
    pub fn open(
        cfg: &crate::config::Config,
        ifaces: &[crate::host::Interface],
    ) -> Result<Self, crate::error::BuildError> {
        let poll = Poll::new().map_err(io_err("epoll"))?;
        let handle = IoHandle::new(&poll).map_err(io_err("waker"))?;
        let local_only = cfg.discovery == DiscoveryRange::Localhost;
        let bind_ip = if local_only {
            Ipv4Addr::LOCALHOST
        } else {
            Ipv4Addr::UNSPECIFIED
        };
        let port = cfg.discovery_port();
        let mcast_ifaces: Vec<Ipv4Addr> = match cfg.discovery {
            DiscoveryRange::Off => vec![],
            DiscoveryRange::Localhost => vec![Ipv4Addr::LOCALHOST],
            DiscoveryRange::Subnet => {
                let mut v: Vec<Ipv4Addr> = ifaces
                    .iter()
                    .filter(|i| i.multicast && !i.loopback)
                    .map(|i| i.addr)
                    .collect();
                v.push(Ipv4Addr::LOCALHOST);
                v
            }
        };
        let mcast = group_socket(port, &mcast_ifaces)?;
        // With host discovery, a second member: a host leader's socket is
        // otherwise the only member of the group on its host once its
        // followers left, and Linux's UDP early demux then hands it
        // datagrams with a route cached from another interface or source,
        // and drops many (`docs/design/host-discovery.md`, "Stage 0"). Its
        // copies are read and dropped.
        let twin = if cfg.host_leader && cfg.host_discovery {
            group_socket(port, &mcast_ifaces)?
        } else {
            None
        };
        // Unicast discovery socket: the first free port of the domain's range,
        // so static peers can find us; an ephemeral one otherwise.
        let mut ucast = None;
        for p in cfg.unicast_discovery_ports().chain([0]) {
            if let Ok(s) = std::net::UdpSocket::bind(SocketAddrV4::new(bind_ip, p)) {
                ucast = Some(s);
                break;
            }
        }
        let ucast = ucast.ok_or_else(|| crate::error::BuildError::Io {
            what: "unicast discovery socket".into(),
            source: io::Error::other("no port available"),
        })?;
        let sr = SockRef::from(&ucast);
        let _ = sr.set_recv_buffer_size(DISCOVERY_RCVBUF);
        let _ = sr.set_send_buffer_size(DISCOVERY_RCVBUF);
        sr.set_multicast_ttl_v4(if local_only { 0 } else { 1 })
            .map_err(io_err("IP_MULTICAST_TTL"))?;
        sr.set_multicast_loop_v4(true)
            .map_err(io_err("IP_MULTICAST_LOOP"))?;
        ucast
            .set_nonblocking(true)
            .map_err(io_err("unicast socket"))?;
        let mut ucast = UdpSocket::from_std(ucast);
        let (mut mcast, mut twin) = (mcast, twin);
        for (m, t) in [(mcast.as_mut(), MCAST), (twin.as_mut(), TWIN)] {
            if let Some(m) = m {
                poll.registry()
                    .register(m, t, Interest::READABLE)
                    .map_err(io_err("register"))?;
            }
        }
        poll.registry()
            .register(&mut ucast, UCAST, Interest::READABLE)
            .map_err(io_err("register"))?;
        let timer = super::timer::PreciseTimer::new().map_err(io_err("timerfd"))?;
        poll.registry()
            .register(
                &mut mio::unix::SourceFd(&timer.fd()),
                TIMER,
                Interest::READABLE,
            )
            .map_err(io_err("register"))?;
        Ok(Sockets {
            poll,
            timer,
            mcast,
            twin,
            ucast,
            bind_ip,
            mcast_ifaces,
            mcast_port: port,
            joined: true,
            handle,
        })
    }

    /// Joins or leaves the discovery group on every interface of the
    /// range: a follower fed by its host leader leaves it, so the kernel
    /// copies each discovery datagram into the leader's socket only.
    fn listen_to_group(&mut self, join: bool) {
        if join == self.joined {
            return;
        }
        for m in self.mcast.iter().chain(self.twin.iter()) {
            for ip in &self.mcast_ifaces {
                let r = if join {
                    m.join_multicast_v4(&DISCOVERY_GROUP, ip)
                } else {
                    m.leave_multicast_v4(&DISCOVERY_GROUP, ip)
                };
                if let Err(e) = r {
                    tracing::debug!("discovery group on {ip}: join {join}: {e}");
                }
            }
        }
        tracing::debug!(
            "discovery group: {}",
            if join {
                "listening"
            } else {
                "left to the host leader"
            }
        );
        self.joined = join;
    }
}

/// A socket bound to the discovery group's port and a member of the
/// group on `ifaces` (`None` without interfaces).
fn group_socket(
    port: u16,
    ifaces: &[Ipv4Addr],
) -> Result<Option<UdpSocket>, crate::error::BuildError> {
    if ifaces.is_empty() {
        return Ok(None);
    }
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))
        .map_err(io_err("discovery socket"))?;
    s.set_reuse_address(true).map_err(io_err("SO_REUSEADDR"))?;
    s.set_reuse_port(true).map_err(io_err("SO_REUSEPORT"))?;
    // Bound to the group (not 0.0.0.0): unicast datagrams to the
    // discovery port are not taken for multicast ones.
    s.bind(&SocketAddrV4::new(DISCOVERY_GROUP, port).into())
        .map_err(io_err(format!("discovery port {port}")))?;
    // Only the memberships of this socket, on the interfaces it joined
    // (Linux otherwise delivers every group any socket of the host joined,
    // on any interface).
    s.set_multicast_all_v4(false)
        .map_err(io_err("IP_MULTICAST_ALL"))?;
    let mut joined = 0;
    for ip in ifaces {
        match s.join_multicast_v4(&DISCOVERY_GROUP, ip) {
            Ok(()) => joined += 1,
            Err(e) => tracing::debug!("cannot join discovery group on {ip}: {e}"),
        }
    }
    if joined == 0 {
        return Err(crate::error::BuildError::Io {
            what: format!("joining multicast group {DISCOVERY_GROUP} on {ifaces:?}"),
            source: io::Error::other("no interface accepted the membership"),
        });
    }
    // A crowd starting at once sends bursts: room for them.
    let _ = s.set_recv_buffer_size(DISCOVERY_RCVBUF);
    s.set_nonblocking(true)
        .map_err(io_err("discovery socket"))?;
    Ok(Some(UdpSocket::from_std(s.into())))
}

fn fed_via(v: Via) -> FedVia {
    if v == Via::Multicast {
        FedVia::Multicast
    } else {
        FedVia::Unicast
    }
}

/// The sources transports handed the loop, by token.
struct Sources {
    map: HashMap<Token, Box<dyn Source>>,
    /// Those with timers (served every turn).
    timed: Vec<Token>,
    next: usize,
}

impl Sources {
    fn add(&mut self, poll: &Poll, mut src: Box<dyn Source>, ctx: &mut dyn LoopContext) {
        let t = Token(self.next);
        self.next += 1;
        let interest = if src.writable_interest() {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        match poll
            .registry()
            .register(&mut mio::unix::SourceFd(&src.fd()), t, interest)
        {
            Ok(()) => {
                if src.has_timers() {
                    self.timed.push(t);
                }
                self.map.insert(t, src);
            }
            Err(e) => {
                tracing::warn!("cannot watch a connection: {e}");
                src.removed(ctx);
            }
        }
    }

    /// Runs the timers of the sources that have them; the earliest next,
    /// and the earliest of those that asked for sub-millisecond precision.
    fn service(
        &mut self,
        now: Instant,
        ctx: &mut dyn LoopContext,
    ) -> (Option<Instant>, Option<Instant>) {
        let earliest = |a: Option<Instant>, b: Instant| Some(a.map_or(b, |x| x.min(b)));
        let (mut next, mut precise) = (None, None);
        for t in &self.timed {
            let Some(src) = self.map.get_mut(t) else {
                continue;
            };
            if let Some(n) = src.service(now, ctx) {
                next = earliest(next, n);
                if src.precise_timers() {
                    precise = earliest(precise, n);
                }
            }
        }
        (next, precise)
    }

    fn remove(&mut self, poll: &Poll, t: Token, ctx: &mut dyn LoopContext) {
        self.timed.retain(|x| *x != t);
        if let Some(mut src) = self.map.remove(&t) {
            let _ = poll
                .registry()
                .deregister(&mut mio::unix::SourceFd(&src.fd()));
            src.removed(ctx);
        }
    }

    /// Serves one event; true when it wants to be served again next turn.
    fn serve(&mut self, poll: &Poll, t: Token, r: Readiness, ctx: &mut dyn LoopContext) -> bool {
        let Some(src) = self.map.get_mut(&t) else {
            return false;
        };
        match src.ready(r, ctx) {
            Served::Idle => false,
            Served::More => true,
            Served::Done => {
                self.remove(poll, t, ctx);
                false
            }
        }
    }
}

/// Renews the discovery lease of peers that the data plane shows alive, at
/// most every 250 ms per peer (a lossy link may eat beacons, not liveness).
#[derive(Default)]
struct Alive(HashMap<ferry_wire::ParticipantId, Instant>);

impl Alive {
    fn saw(&mut self, shared: &Shared, p: ferry_wire::ParticipantId) {
        let now = Instant::now();
        if self
            .0
            .get(&p)
            .is_some_and(|t| now.duration_since(*t) < Duration::from_millis(250))
        {
            return;
        }
        if self.0.len() > 4096 {
            self.0
                .retain(|_, t| now.duration_since(*t) < Duration::from_secs(10));
        }
        self.0.insert(p, now);
        shared.core.lock().discovery.refresh(p, now);
    }
}

/// What the loop offers its sources: the runtime, seen through
/// `reactor::LoopContext`.
struct Ctx<'a> {
    shared: &'a Arc<Shared>,
    local_ips: &'a [std::net::IpAddr],
    alive: &'a mut Alive,
    /// Sources to watch from the next turn (accepted connections).
    added: &'a mut Vec<Box<dyn Source>>,
}

impl LoopContext for Ctx<'_> {
    fn local(&self) -> ferry_wire::ParticipantId {
        self.shared.id
    }
    fn same_clock(&self, p: ferry_wire::ParticipantId) -> bool {
        self.shared.same_clock(p)
    }
    fn local_ips(&self) -> &[std::net::IpAddr] {
        self.local_ips
    }
    fn alive(&mut self, p: ferry_wire::ParticipantId) {
        self.alive.saw(self.shared, p);
    }
    fn link_lost(&mut self, writer: ferry_wire::EndpointId, reader: ferry_wire::EndpointId) {
        self.shared.link_lost(writer, reader);
    }
    fn add_source(&mut self, source: Box<dyn Source>) {
        self.added.push(source);
    }
}

/// Runs the loop until shutdown.
pub(crate) fn run(mut s: Sockets, shared: Arc<Shared>) {
    reactor::enter_io_thread();
    let mut events = Events::with_capacity(256);
    let mut sources = Sources {
        map: HashMap::new(),
        timed: Vec::new(),
        next: FIRST_CONN,
    };
    let mut added: Vec<Box<dyn Source>> = Vec::new();
    let mut buf = vec![0u8; 65536];
    let mut outbox = super::outbox::Outbox::default();
    // Bytes of the host leader's feed wait for room in a follower's socket.
    let mut feed_pending = false;
    let mut next_housekeeping = Instant::now();
    // A peer at one of our own addresses runs on this machine's clock.
    let mut alive = Alive::default();
    // Connections to read again next turn (their read budget ran out).
    let mut again: Vec<Token> = Vec::new();
    let local_ips: Vec<std::net::IpAddr> = crate::host::interfaces()
        .iter()
        .map(|i| std::net::IpAddr::V4(i.addr))
        .collect();
    loop {
        shared.io_policy.apply_if_raised("ferry-io");
        let now = Instant::now();
        if shared
            .host_role_changed
            .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            shared.announce_host_role(now);
            if let Some(h) = &shared.host_leader {
                s.listen_to_group(!h.fed());
            }
        }
        let mut timeout = next_housekeeping.saturating_duration_since(now);
        let (next, precise) = sources.service(
            now,
            &mut Ctx {
                shared: &shared,
                local_ips: &local_ips,
                alive: &mut alive,
                added: &mut added,
            },
        );
        if let Some(t) = next {
            timeout = timeout.min(t.saturating_duration_since(now));
        }
        if let Some(t) = shared.core.lock().discovery.poll_timeout() {
            timeout = timeout.min(t.saturating_duration_since(now));
        }
        if !again.is_empty() {
            timeout = Duration::ZERO;
        }
        if !outbox.is_empty() || feed_pending {
            // Discovery datagrams (or a host leader's feed) wait for room
            // in the send buffer.
            timeout = timeout.min(Duration::from_millis(2));
        }
        if let Some(p) = precise {
            let after = p.saturating_duration_since(now);
            if timeout > Duration::ZERO && after < Duration::from_millis(1) {
                // epoll would round this up to 1 ms.
                if let Err(e) = s.timer.arm(after) {
                    tracing::debug!("timerfd: {e}");
                }
            }
        }
        if let Err(e) = s.poll.poll(&mut events, Some(timeout)) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::error!("ferry I/O loop: poll failed: {e}");
                return;
            }
        }
        let retry = std::mem::take(&mut again);
        let mut shutdown = false;
        for ev in events.iter() {
            match ev.token() {
                WAKER => {
                    for c in s.handle.take() {
                        match c {
                            Command::Add(src) => {
                                let mut ctx = Ctx {
                                    shared: &shared,
                                    local_ips: &local_ips,
                                    alive: &mut alive,
                                    added: &mut added,
                                };
                                sources.add(&s.poll, src, &mut ctx);
                            }
                            Command::Kick => {
                                for (t, src) in sources.map.iter_mut() {
                                    if src.kicked() && !again.contains(t) {
                                        again.push(*t);
                                    }
                                }
                            }
                            Command::Shutdown => shutdown = true,
                        }
                    }
                }
                TIMER => s.timer.clear(),
                TWIN => {
                    if let Some(t) = &s.twin {
                        for _ in 0..4096 {
                            if t.recv_from(&mut buf).is_err() {
                                break;
                            }
                        }
                    }
                }
                MCAST | UCAST => {
                    let (sock, via) = if ev.token() == MCAST {
                        (s.mcast.as_ref(), Via::Multicast)
                    } else {
                        (Some(&s.ucast), Via::Unicast)
                    };
                    let Some(sock) = sock else { continue };
                    for _ in 0..1024 {
                        match sock.recv_from(&mut buf) {
                            Ok((n, from)) => {
                                let r = shared.core.lock().discovery.handle_datagram(
                                    Instant::now(),
                                    from,
                                    via,
                                    &buf[..n],
                                );
                                match r {
                                    // A sign of life from that host: a UDP
                                    // stream in an outage toward it probes now.
                                    Ok(_) => {
                                        for t in &shared.transports {
                                            t.heard_from(from.ip());
                                        }
                                        if let Some(h) = &shared.host_leader {
                                            h.relay(Fed {
                                                via: fed_via(via),
                                                from,
                                                datagram: &buf[..n],
                                            });
                                        }
                                    }
                                    Err(e) => tracing::debug!(
                                        "discovery datagram from {from} ignored: {e}"
                                    ),
                                }
                            }
                            Err(_) => break,
                        }
                    }
                }
                t => {
                    let r = Readiness {
                        readable: ev.is_readable() || ev.is_read_closed(),
                        writable: ev.is_writable(),
                        error: ev.is_error(),
                    };
                    let mut ctx = Ctx {
                        shared: &shared,
                        local_ips: &local_ips,
                        alive: &mut alive,
                        added: &mut added,
                    };
                    if sources.serve(&s.poll, t, r, &mut ctx) && !again.contains(&t) {
                        again.push(t);
                    }
                }
            }
        }
        let mut new_sources = std::mem::take(&mut added);
        let mut ctx = Ctx {
            shared: &shared,
            local_ips: &local_ips,
            alive: &mut alive,
            added: &mut added,
        };
        for src in new_sources.drain(..) {
            sources.add(&s.poll, src, &mut ctx);
        }
        // Sources whose read budget ran out last turn: read on.
        for t in retry {
            let r = Readiness {
                readable: true,
                ..Readiness::default()
            };
            if sources.serve(&s.poll, t, r, &mut ctx) && !again.contains(&t) {
                again.push(t);
            }
        }
        // Drop sources closed by their owners (unmatched, port dropped).
        let closed: Vec<Token> = sources
            .map
            .iter()
            .filter(|(_, src)| src.is_closed())
            .map(|(t, _)| *t)
            .collect();
        for t in closed {
            sources.remove(&s.poll, t, &mut ctx);
        }
        let now = Instant::now();
        if let Some(h) = &shared.host_leader {
            take_fed(&shared, h, now);
        }
        if shutdown {
            shared.core.lock().discovery.leave();
        }
        let (transmits, disc_events) = {
            let mut core = shared.core.lock();
            core.discovery.handle_timeout(now);
            let t: Vec<_> = std::iter::from_fn(|| core.discovery.poll_transmit()).collect();
            let e: Vec<_> = std::iter::from_fn(|| core.discovery.poll_event()).collect();
            (t, e)
        };
        outbox.flush(&s.ucast);
        if let Some(h) = &shared.host_leader {
            for e in &disc_events {
                if let DiscEvent::ParticipantLeft { id, .. } = e {
                    h.forget(*id);
                }
            }
        }
        for t in transmits {
            match t.to {
                Destination::Group => {
                    let group = SocketAddr::V4(SocketAddrV4::new(DISCOVERY_GROUP, s.mcast_port));
                    for ip in &s.mcast_ifaces {
                        outbox.send(&s.ucast, Some(*ip), group, t.bytes.clone());
                    }
                }
                Destination::Peer(a) => outbox.send(&s.ucast, None, a, t.bytes),
                Destination::Broker =>
                {
                    #[cfg(feature = "mqtt")]
                    if let Some(b) = &shared.mqtt {
                        b.announce(&t.bytes);
                    }
                }
            }
        }
        feed_pending = shared.host_leader.as_ref().is_some_and(|h| h.flush());
        if shutdown {
            for (_, mut src) in sources.map.drain() {
                src.shutdown();
            }
            return;
        }
        if shared
            .housekeep_soon
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            next_housekeeping = now;
        }
        let housekeeping = now >= next_housekeeping;
        if housekeeping {
            let every = if shared.busy() {
                HOUSEKEEPING
            } else {
                IDLE_HOUSEKEEPING
            };
            next_housekeeping = now + every;
        } else if !disc_events.is_empty() {
            // Matching may have connected ports: housekeep them soon.
            next_housekeeping = next_housekeeping.min(now + HOUSEKEEPING);
        }
        if !disc_events.is_empty() || housekeeping {
            shared.on_discovery(disc_events, housekeeping);
        }
    }
}

/// Following a host leader that feeds us: its datagrams into discovery,
/// each checked as if it had arrived on our own sockets.
fn take_fed(shared: &Shared, h: &ferry_transport::leader::HostLeader, now: Instant) {
    let mut core = None;
    let mut heard: Vec<std::net::IpAddr> = Vec::new();
    h.take_fed(|f| {
        let via = match f.via {
            FedVia::Multicast => Via::Multicast,
            FedVia::Unicast => Via::Unicast,
        };
        let core = core.get_or_insert_with(|| shared.core.lock());
        match core.discovery.handle_datagram(now, f.from, via, f.datagram) {
            Ok(()) => {
                if !heard.contains(&f.from.ip()) {
                    heard.push(f.from.ip());
                }
                h.relay(f);
            }
            Err(e) => tracing::debug!("fed discovery datagram from {} ignored: {e}", f.from),
        }
    });
    drop(core);
    // Signs of life, with the runtime unlocked (transports lock it).
    for ip in heard {
        for t in &shared.transports {
            t.heard_from(ip);
        }
    }
}
