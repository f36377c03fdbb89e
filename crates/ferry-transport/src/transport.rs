//! Transports and path selection.
//!
//! A match between a writer (publisher or client) and a reader (subscriber or
//! service) becomes a *connection*: the writer's runtime's connection table
//! (`ferry_conn::Table`, path selection in `ferry_conn::select`) picks the
//! most preferred transport that reaches the reader's runtime (or the one
//! pinned by QoS/config), and that transport's [`Transport::connect`]
//! returns a [`Link`] the writer sends on. The reader
//! side receives through its [`Inbox`], whatever the transport.
//!
//! Preference follows [`TransportKind::ALL`]: in-process, shared memory, UDP,
//! TCP, MQTT, Zenoh (DDS, last, never carries a ferry pair). A transport is a module of `ferry` or a crate of its
//! own over this one (`ferry-mqtt`): a start function ([`Start`]) that opens
//! its sockets (handed to the I/O loop as [`crate::reactor::Source`]s) and
//! returns its [`Transport`], plus one line in `ferry`'s registry; the runtime, the
//! connection table and the I/O loop know no transport by name. (The
//! runtime keeps typed handles for shared-memory loans of publishers, the
//! broker connection of cloud-scope ports, and the `[ros2]` DDS path, which
//! is not a transport of path selection: it never carries ferry pairs.)

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};

use bytes::Bytes;
use ferry_wire::frame::{Envelope, EnvelopeKind, FrameKind, ENVELOPE_LEN};
use ferry_wire::{EndpointId, EndpointKind, Locator, ParticipantId, Qos, TransportKind};
use parking_lot::RwLock;

use crate::error::EncodeError;
use crate::message::Payload;
use crate::priority::{Applied, Priority, PriorityError};
use crate::stats::ConnStats;

/// What a transport guarantees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Delivers every sample it accepts (or reports the connection lost).
    pub reliable: bool,
    /// Delivers in publish order.
    pub ordered: bool,
    /// The reader sees the writer's memory; no copy, no serialization.
    pub zero_copy: bool,
    /// Largest datagram, for packet transports; `None` for streams.
    pub mtu: Option<usize>,
    /// Carries service requests and replies (not only samples).
    pub request_reply: bool,
}

pub use ferry_conn::PeerInfo;

/// A request to connect a local writer to a reader.
pub struct ConnectRequest {
    /// The local writer.
    pub writer: EndpointId,
    /// Publisher or client.
    pub writer_kind: EndpointKind,
    /// The reader.
    pub reader: EndpointId,
    /// Topic or service name.
    pub topic: String,
    /// The writer's QoS (queue policy of the link).
    pub qos: Qos,
    /// Where the reader lives.
    pub remote: PeerInfo,
    /// For clients: where replies go.
    pub reply_sink: Option<Arc<dyn ReplySink>>,
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The reader is not (or no longer) there.
    #[error("reader {0} is not available")]
    NoReader(EndpointId),
    /// No locator of the peer answered.
    #[error("cannot reach {peer} at any of [{tried}]: {last}")]
    Unreachable {
        /// The peer runtime.
        peer: ParticipantId,
        /// Locators tried.
        tried: String,
        /// The last error.
        last: String,
    },
    /// This transport will never work for this peer (shared memory
    /// between processes of different users): the pair takes another path.
    #[error("{transport} to {peer} refused: {cause}")]
    Refused {
        /// The peer runtime.
        peer: ParticipantId,
        /// The transport that refused.
        transport: TransportKind,
        /// Why, with the remedy.
        cause: String,
    },
}

/// One frame a writer sends.
pub struct OutFrame<'a> {
    /// Data, request or reply.
    pub kind: FrameKind,
    /// Sequence number or request id.
    pub seq: u64,
    /// Source time, ns since the epoch.
    pub stamp_ns: u64,
    /// The payload, typed and/or as bytes on demand.
    pub payload: Payload<'a>,
}

/// Why a send failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The payload could not be encoded for this path.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// A keep_all link stayed full for the whole blocking bound.
    #[error("link full for {0:?}")]
    Blocked(std::time::Duration),
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
}

/// The writer's end of one connection.
pub trait Link: Send + Sync {
    /// The path.
    fn transport(&self) -> TransportKind;
    /// The reader at the other end.
    fn remote(&self) -> EndpointId;
    /// The remote locator (`tcp/10.0.0.2:7400`), empty in-process.
    fn locator(&self) -> String;
    /// What protects the bytes on this path: `process` (in-process), `os`
    /// (shared memory: the segments' file permissions), `tls (…)` (TCP
    /// with security on), `none`.
    fn protection(&self) -> String {
        match self.transport() {
            TransportKind::InProcess => "process".into(),
            TransportKind::SharedMemory => "os".into(),
            _ => "none".into(),
        }
    }
    /// Sends one frame; never blocks except keep_all + reliable up to its bound.
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError>;
    /// Sends one sample of the writer's transient_local history to this
    /// link's reader only: a late joiner's replay. The same as `send` on
    /// every path with a connection per reader; a path that carries live
    /// samples once for all readers (MQTT) addresses the reader here.
    fn replay(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        self.send(frame)
    }
    /// False for a link to an intermediary rather than to a reader (a
    /// cloud-scope writer's link to the MQTT broker): it carries samples
    /// but is not a matched subscriber.
    fn reaches_reader(&self) -> bool {
        true
    }
    /// How many subscribers it serves, for `subscriber_count`: one for a
    /// link to a reader, none for an intermediary, the matched ROS 2
    /// readers for the DDS path.
    fn readers(&self) -> usize {
        usize::from(self.reaches_reader())
    }
    /// Writer-side counters.
    fn stats(&self) -> &ConnStats;
    /// True once the connection broke or was closed.
    fn is_closed(&self) -> bool;
    /// Closes the connection.
    fn close(&self);
    /// The connection's priority.
    fn priority(&self) -> Priority;
    /// Changes the priority of the live connection (no reconnect). Ok: what
    /// took effect, in words (a refused thread policy is a warning there,
    /// not an error: the packet class still applies).
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError>;
}

/// A transport: how connections of one kind are made.
pub trait Transport: Send + Sync {
    /// Its kind.
    fn kind(&self) -> TransportKind;
    /// What it guarantees.
    fn capabilities(&self) -> Capabilities;
    /// Where this runtime listens on it (announced in discovery).
    fn locators(&self) -> Vec<Locator>;
    /// Whether it can carry data from `local`'s runtime to `remote`'s.
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool;
    /// Whether automatic selection may pick it for this pair (pinning only
    /// needs [`Transport::reaches`]). Default: whenever it reaches.
    fn automatic(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        self.reaches(local, remote)
    }
    /// Opens a link (may block for a connect; runs off the I/O thread).
    fn connect(&self, req: ConnectRequest) -> Result<Arc<dyn Link>, ConnectError>;
    /// A local writer endpoint is gone: drop what the transport keeps for
    /// it (its reader-side streams, its shared-memory pool).
    fn forget_writer(&self, _writer: EndpointId) {}
    /// A datagram from host `ip` arrived on another socket (discovery): a
    /// transport whose connections to that host are in an outage may try
    /// them now — the link is back.
    fn heard_from(&self, _ip: std::net::IpAddr) {}
    /// A subscriber asked for its deliveries to run at least at `p`:
    /// raise the transport's own delivery thread, if it has one.
    fn raise_delivery(&self, _p: crate::priority::ThreadPolicy) {}
    /// Connections that ended by themselves since the last call (writer,
    /// reader), for the connection table to retry or end.
    fn take_lost(&self) -> Vec<(EndpointId, EndpointId)> {
        Vec::new()
    }
    /// The runtime stops (after its I/O thread): stop the transport's own
    /// threads and connections.
    fn shutdown(&self) {}
    /// Itself as `Any`: the runtime's few typed uses (shared-memory loans,
    /// the broker connection).
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

pub use crate::secure::{ProvenPeer, ProvenPeers, TransportSecurity};

/// What a transport gets to start in a runtime.
pub struct StartContext<'a> {
    /// The runtime.
    pub id: ParticipantId,
    /// Its config.
    pub cfg: &'a crate::config::Config,
    /// This host's interfaces.
    pub ifaces: &'a [crate::host::Interface],
    /// The runtime's I/O loop: sockets go there as sources.
    pub io: &'a crate::reactor::IoHandle,
    /// Where to bind sockets: loopback when discovery stays on this host,
    /// every interface otherwise.
    pub bind_ip: std::net::Ipv4Addr,
    /// The addresses to announce: loopback, and every other interface
    /// unless discovery stays on this host.
    pub announce_ips: &'a [std::net::Ipv4Addr],
    /// Where listeners count what they accept and turn away.
    pub listener_counters: &'a Arc<crate::stats::ListenerCounters>,
    /// The runtime's identity, when security is on.
    pub security: Option<&'a Arc<TransportSecurity>>,
}

/// Starts one transport: `Ok(None)` when it is off or unavailable here
/// (the reason logged); an error fails the runtime's build with it.
pub type Start =
    fn(&StartContext<'_>) -> Result<Option<Arc<dyn Transport>>, crate::error::BuildError>;

/// A transport as path selection sees it (the connection table decides
/// which transport carries each pair from this alone).
pub struct RouteOf(pub Arc<dyn Transport>);

impl ferry_conn::Route for RouteOf {
    fn kind(&self) -> TransportKind {
        self.0.kind()
    }
    fn request_reply(&self) -> bool {
        self.0.capabilities().request_reply
    }
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        self.0.reaches(local, remote)
    }
    fn automatic(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        self.0.automatic(local, remote)
    }
}

/// The peer's addresses for `kind`, best first: loopback when both share a
/// network stack, then addresses on one of our subnets, then the rest.
pub fn rank_addresses(
    interfaces: &[crate::host::Interface],
    kind: TransportKind,
    local: &PeerInfo,
    remote: &PeerInfo,
) -> Vec<std::net::SocketAddr> {
    rank_locators(interfaces, kind, local, remote)
        .into_iter()
        .filter_map(Locator::socket_addr)
        .collect()
}

/// `remote`'s IP locators of `kind`, best first (see [`rank_addresses`]),
/// with their parameters.
pub fn rank_locators<'a>(
    interfaces: &[crate::host::Interface],
    kind: TransportKind,
    local: &PeerInfo,
    remote: &'a PeerInfo,
) -> Vec<&'a Locator> {
    let mut v: Vec<(u8, &Locator)> = remote
        .locators
        .iter()
        .filter(|l| l.transport == kind)
        .filter_map(|l| {
            let a = l.socket_addr()?;
            let std::net::IpAddr::V4(ip) = a.ip() else {
                return None;
            };
            let rank = if ip.is_loopback() {
                if local.net_id == remote.net_id {
                    0
                } else {
                    return None;
                }
            } else if interfaces.iter().any(|i| !i.loopback && i.contains(ip)) {
                1
            } else {
                2
            };
            Some((rank, l))
        })
        .collect();
    v.sort_by_key(|(r, _)| *r);
    v.into_iter().map(|(_, l)| l).collect()
}

/// A frame arriving at a reader.
pub struct InFrame<'a> {
    /// Data or request.
    pub kind: FrameKind,
    /// Sequence number or request id.
    pub seq: u64,
    /// Source time.
    pub stamp_ns: u64,
    /// Local wall-clock time the frame arrived, ns (0: take it on delivery).
    /// A transport that reads many frames at once stamps them with one
    /// clock read.
    pub arrival_ns: u64,
    /// The payload.
    pub payload: Payload<'a>,
}

/// Answers requests that arrived on one connection.
pub trait Replier: Send + Sync {
    /// Sends the reply for `request_id`: the response bytes or an error text.
    fn reply(&self, request_id: u64, result: Result<ReplyBody, String>);
}

/// A response as the service produced it.
pub struct ReplyBody {
    /// The typed response (used by in-process clients).
    pub typed: Arc<dyn Any + Send + Sync>,
    /// Encodes it for network paths.
    pub encode: Box<dyn Fn() -> Result<Bytes, EncodeError> + Send + Sync>,
}

/// Where a client's replies arrive.
pub trait ReplySink: Send + Sync {
    /// A reply (or the service's error text) for `request_id`.
    fn on_reply(&self, request_id: u64, result: Result<Payload<'_>, String>);
    /// A reply for `request_id` through intermediary `service` (DDS): taken
    /// only when the call went that way. Default: as [`ReplySink::on_reply`].
    fn on_reply_from(
        &self,
        service: EndpointId,
        request_id: u64,
        result: Result<Payload<'_>, String>,
    ) {
        let _ = service;
        self.on_reply(request_id, result);
    }
    /// Call `request_id` through intermediary `service` ended without any
    /// reply (Zenoh: every service it reached went away, or none was
    /// there): it fails as when a service's own link breaks. Default:
    /// nothing (the call times out).
    fn on_unanswered(&self, service: EndpointId, request_id: u64) {
        let _ = (service, request_id);
    }
    /// The link to `service` broke: calls in flight on it fail.
    fn on_link_lost(&self, service: EndpointId);
}

/// Where a connection really comes from, as the receiving transport saw
/// it (never what the writer declared about itself): what authorisation
/// without security can rest on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// This process.
    SameProcess,
    /// Shared memory: a process of the same user (or root) on this host
    /// (the control socket and segments are 0600, checked with the
    /// socket's peer credentials).
    SharedMemory,
    /// A network connection from `addr`; `local` when that is a loopback
    /// address or one of this host's own.
    Network {
        /// The source address the socket reported.
        addr: std::net::SocketAddr,
        /// Whether it is loopback or one of this host's addresses.
        local: bool,
    },
    /// Through the MQTT broker: anyone the broker let in.
    Broker,
    /// A DDS writer (`[ros2]`): anyone on the DDS domain.
    Dds,
    /// A Zenoh publisher (`[zenoh]`): anyone the Zenoh network lets in.
    Zenoh,
}

impl Origin {
    /// A network origin: local when `addr` is loopback or in `local_ips`.
    pub fn network(addr: std::net::SocketAddr, local_ips: &[std::net::IpAddr]) -> Origin {
        let ip = addr.ip();
        Origin::Network {
            addr,
            local: ip.is_loopback() || local_ips.contains(&ip),
        }
    }
    /// Whether it is this host, by something the peer cannot forge.
    pub fn is_this_host(&self) -> bool {
        match self {
            Origin::SameProcess | Origin::SharedMemory => true,
            Origin::Network { local, .. } => *local,
            Origin::Broker | Origin::Dds | Origin::Zenoh => false,
        }
    }
}

/// The reader's end of one connection.
pub struct InboundConn {
    /// The writer (as it declared itself).
    pub remote: EndpointId,
    /// Where the connection really comes from.
    pub origin: Origin,
    /// The path.
    pub transport: TransportKind,
    /// The writer's address, when known.
    pub locator: String,
    /// Reader-side counters.
    pub stats: Arc<ConnStats>,
    /// For services: answers go here.
    pub replier: Option<Arc<dyn Replier>>,
    /// Source timestamps are comparable (same host clock): latency is measured.
    pub same_clock: bool,
    /// Which samples it delivered, for the hand-over between the broker and
    /// a direct path from the same writer.
    pub seqs: SeqMarks,
    /// Who the writer is, as the channel proved it (security on): its TLS
    /// certificate, or the identity discovery proved for the participant
    /// whose process attached by shared memory. `None`: no proof (security
    /// off, a plain peer under `permissive`, this process, the broker).
    pub identity: Option<Arc<ferry_security::PeerIdentity>>,
}

impl InboundConn {
    /// What protects this connection's bytes, for the reader's stats:
    /// `process`, `os`, `tls (from <enclave>)` / `aead (from <enclave>)`
    /// when the channel proved the writer, `tls (to the broker)` over
    /// `mqtts://`, else `none`.
    pub fn protection(&self) -> String {
        let from = |how: &str| match &self.identity {
            Some(p) => format!("{how} (from {})", p.enclave()),
            None => "none".into(),
        };
        match self.transport {
            TransportKind::InProcess => "process".into(),
            TransportKind::SharedMemory => "os".into(),
            TransportKind::Forwarded => "os (relayed by the host leader)".into(),
            TransportKind::Tcp => from("tls"),
            TransportKind::Udp => from("aead"),
            TransportKind::Mqtt if self.locator.starts_with("mqtts://") => {
                "tls (to the broker)".into()
            }
            _ => "none".into(),
        }
    }
}

pub use crate::seqs::SeqMarks;

/// A reader (subscriber or service) as transports see it.
pub trait Inbox: Send + Sync {
    /// The reader's id.
    fn id(&self) -> EndpointId;
    /// Its topic or service name (what a writer's grants are checked on).
    fn name(&self) -> &str;
    /// A writer connected.
    fn attach(&self, conn: Arc<InboundConn>);
    /// A writer's connection ended. Only that connection goes: a peer can
    /// declare any writer id, so other connections naming the same writer
    /// are not touched.
    fn detach(&self, conn: &Arc<InboundConn>);
    /// A frame arrived on `conn`.
    fn deliver(&self, conn: &Arc<InboundConn>, frame: &InFrame<'_>);
    /// Sample `seq` came through the broker on `conn`: false when a direct
    /// path from the same writer covers it (then it is a duplicate).
    fn broker_sample(&self, _conn: &InboundConn, _seq: u64) -> bool {
        true
    }
    /// Sample `seq` stamped `stamp_ns` came from a host leader on `conn`:
    /// false when it is a duplicate (relayed already, or received over a
    /// direct path from the same writer).
    fn forwarded_sample(&self, conn: &InboundConn, seq: u64, _stamp_ns: u64) -> bool {
        self.broker_sample(conn, seq)
    }
    /// What the reader takes in: samples (subscriber), requests (service)
    /// or replies (client). Transports that carry plain samples (shared
    /// memory, UDP) read service traffic as [`Envelope`]s by this.
    fn carries(&self) -> Carries {
        Carries::Samples
    }
    /// The room in its receive queue, for a reader that must not drop
    /// (reliable keep_all): paths hold back while it is full
    /// ([`crate::room`]). None: deliver always.
    fn room(&self) -> Option<&Arc<crate::room::Room>> {
        None
    }
    /// A reply (or the service's error text) for `request_id` arrived on
    /// `conn`; clients only.
    fn on_reply(
        &self,
        _conn: &Arc<InboundConn>,
        _request_id: u64,
        _result: Result<Payload<'_>, String>,
    ) {
    }
}

/// What an [`Inbox`] takes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carries {
    /// Published samples (a subscriber).
    Samples,
    /// Requests (a service).
    Requests,
    /// Replies (a client: the connection a service opens back to it).
    Replies,
}

/// Hands one sample that arrived on a sample transport (shared memory,
/// UDP) to `reader`: a subscriber gets it as data; for a service or a
/// client it is an [`Envelope`] (request, reply or error) and its body.
/// A sample that is not a well-formed envelope of the kind the reader
/// takes counts as an error on `conn` and goes nowhere.
pub fn deliver_sample(
    reader: &dyn Inbox,
    conn: &Arc<InboundConn>,
    seq: u64,
    stamp_ns: u64,
    arrival_ns: u64,
    sample: Bytes,
) {
    let carries = reader.carries();
    if carries == Carries::Samples {
        let bytes = move || Ok(sample.clone());
        reader.deliver(
            conn,
            &InFrame {
                kind: FrameKind::Data,
                seq,
                stamp_ns,
                arrival_ns,
                payload: Payload {
                    typed: None,
                    bytes: &bytes,
                },
            },
        );
        return;
    }
    let env = match Envelope::parse(&sample) {
        Ok(e) => e,
        Err(e) => {
            let n = conn.stats.errors.fetch_add(1, Ordering::Relaxed);
            if n.is_power_of_two() || n == 0 {
                tracing::warn!("malformed service sample from {}: {e}", conn.remote);
            }
            return;
        }
    };
    let body = sample.slice(ENVELOPE_LEN..);
    match (carries, env.kind) {
        (Carries::Requests, EnvelopeKind::Request) => {
            let bytes = move || Ok(body.clone());
            reader.deliver(
                conn,
                &InFrame {
                    kind: FrameKind::Request,
                    seq: env.request_id,
                    stamp_ns,
                    arrival_ns,
                    payload: Payload {
                        typed: None,
                        bytes: &bytes,
                    },
                },
            );
        }
        (Carries::Replies, EnvelopeKind::Reply) => {
            let bytes = move || Ok(body.clone());
            reader.on_reply(
                conn,
                env.request_id,
                Ok(Payload {
                    typed: None,
                    bytes: &bytes,
                }),
            );
        }
        (Carries::Replies, EnvelopeKind::ReplyError) => {
            let text = String::from_utf8_lossy(&body).into_owned();
            reader.on_reply(conn, env.request_id, Err(text));
        }
        _ => {
            conn.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Sends a reply on a connection a service opened back to its client
/// (shared memory, UDP): one sample, [`reply_sample`], as a Reply frame.
/// A reply that cannot go out is logged; the client's call times out.
pub fn send_reply(
    link: Option<&dyn Link>,
    service: EndpointId,
    request_id: u64,
    result: Result<ReplyBody, String>,
) {
    let Some(link) = link else {
        return;
    };
    let sample = reply_sample(request_id, result);
    let bytes = move || Ok(sample.clone());
    let frame = OutFrame {
        kind: FrameKind::Reply,
        seq: request_id,
        stamp_ns: crate::stats::now_ns(),
        payload: Payload {
            typed: None,
            bytes: &bytes,
        },
    };
    if let Err(e) = link.send(&frame) {
        tracing::debug!("{service}: reply {request_id} not sent: {e}");
    }
}

/// The sample a reply travels as on a sample transport: its [`Envelope`]
/// and the encoded response, or the error text.
pub fn reply_sample(request_id: u64, result: Result<ReplyBody, String>) -> Bytes {
    let (kind, body) = match result.and_then(|b| (b.encode)().map_err(|e| e.to_string())) {
        Ok(b) => (EnvelopeKind::Reply, b),
        Err(e) => (EnvelopeKind::ReplyError, Bytes::from(e.into_bytes())),
    };
    enveloped(kind, request_id, &body)
}

/// `body` behind an envelope of `kind` (one copy).
pub fn enveloped(kind: EnvelopeKind, request_id: u64, body: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(ENVELOPE_LEN + body.len());
    out.extend_from_slice(&Envelope { kind, request_id }.encode());
    out.extend_from_slice(body);
    Bytes::from(out)
}

/// The readers of this process, by id: every runtime's subscribers,
/// services and clients register here, so in-process writers and inbound
/// connections of any transport find them.
fn readers() -> &'static RwLock<HashMap<EndpointId, Weak<dyn Inbox>>> {
    static R: OnceLock<RwLock<HashMap<EndpointId, Weak<dyn Inbox>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// Makes a reader reachable by in-process writers and stream acceptors.
pub fn register_reader(inbox: &Arc<dyn Inbox>) {
    readers().write().insert(inbox.id(), Arc::downgrade(inbox));
}

/// Removes a reader.
pub fn unregister_reader(id: EndpointId) {
    readers().write().remove(&id);
}

/// Finds a live reader of this process.
pub fn lookup_reader(id: EndpointId) -> Option<Arc<dyn Inbox>> {
    readers().read().get(&id).and_then(Weak::upgrade)
}
