//! Protocol-level types: identifiers, QoS, locators. They travel in
//! discovery beacons and data frames, and the user API re-exports them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::codec::{Reader, WireError, Writer};

/// Identifies one ferry runtime (one per process and domain): random, 64 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParticipantId(pub u64);

impl fmt::Display for ParticipantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Identifies one endpoint (publisher, subscriber, service, client) globally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId {
    /// The runtime that owns the endpoint.
    pub participant: ParticipantId,
    /// Number of the endpoint inside its runtime.
    pub entity: u32,
}

impl fmt::Display for EndpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.participant, self.entity)
    }
}

/// Error for a malformed endpoint id (`<16 hex digits>.<entity>`).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("endpoint id `{0}` must look like `<participant: 16 hex digits>.<entity>`")]
pub struct BadEndpointId(pub String);

impl FromStr for EndpointId {
    type Err = BadEndpointId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadEndpointId(s.to_string());
        let (p, e) = s.split_once('.').ok_or_else(bad)?;
        if p.is_empty() || p.len() > 16 {
            return Err(bad());
        }
        Ok(EndpointId {
            participant: ParticipantId(u64::from_str_radix(p, 16).map_err(|_| bad())?),
            entity: e.parse().map_err(|_| bad())?,
        })
    }
}

impl EndpointId {
    /// Encoded size in bytes.
    pub const LEN: usize = 12;
    pub(crate) fn write(&self, w: &mut Writer) {
        w.u64(self.participant.0);
        w.u32(self.entity);
    }
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(Self {
            participant: ParticipantId(r.u64()?),
            entity: r.u32()?,
        })
    }
}

/// What an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EndpointKind {
    /// Sends samples on a topic.
    Publisher = 1,
    /// Receives samples from a topic.
    Subscriber = 2,
    /// Answers requests.
    Service = 3,
    /// Sends requests to a service.
    Client = 4,
}

impl EndpointKind {
    pub(crate) fn from_u8(v: u8) -> Result<Self, WireError> {
        Ok(match v {
            1 => Self::Publisher,
            2 => Self::Subscriber,
            3 => Self::Service,
            4 => Self::Client,
            _ => {
                return Err(WireError::InvalidValue {
                    field: "endpoint.kind",
                    value: v as u64,
                })
            }
        })
    }
}

/// A message type's hash: ROS 2's RIHS01 (SHA-256 of the type description,
/// REP-2011) for every type with a known definition. Two endpoints with the
/// same type name but different hashes are not matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TypeHash(pub [u8; 32]);

impl TypeHash {
    /// The hash of raw byte ports, which match any type.
    pub const ANY: TypeHash = TypeHash([0; 32]);

    /// True for the wildcard hash of raw ports.
    pub fn is_any(&self) -> bool {
        *self == Self::ANY
    }
}

impl fmt::Display for TypeHash {
    /// `RIHS01_` + 64 hex digits, as ROS 2 prints it (`*` for raw ports).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_any() {
            return f.write_str("*");
        }
        f.write_str("RIHS01_")?;
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Whether lost samples are repaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// Samples may be dropped; never blocks the publisher.
    BestEffort = 0,
    /// Samples within the history bound are delivered.
    Reliable = 1,
}

/// How many samples a port keeps for a slow or late peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum History {
    /// Keep the newest N (N ≥ 1); older ones are dropped and counted.
    KeepLast(u32),
    /// Keep everything up to the resource bound; the publisher blocks.
    KeepAll,
}

impl History {
    /// The depth used to bound queues: N, or `all_bound` for keep_all.
    pub fn depth(&self, all_bound: usize) -> usize {
        match *self {
            History::KeepLast(n) => n.max(1) as usize,
            History::KeepAll => all_bound,
        }
    }
}

/// Whether late joiners receive samples published before they matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Only samples published after the match.
    Volatile = 0,
    /// The publisher keeps its last N samples for late joiners.
    TransientLocal = 1,
}

/// A transport kind: the path one connection takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransportKind {
    /// Same process: shared pointer hand-off, no serialization.
    InProcess = 1,
    /// Same host: zero-copy shared memory.
    SharedMemory = 2,
    /// Ferry's reliable/best-effort UDP protocol.
    Udp = 3,
    /// TCP stream.
    Tcp = 4,
    /// Through an MQTT broker.
    Mqtt = 5,
    /// Through Zenoh.
    Zenoh = 6,
    /// DDS-RTPS to ROS 2 nodes (`[ros2]`): carries samples between ferry
    /// ports and DDS endpoints that are not ferry's.
    Dds = 7,
    /// Through the remote host's leader, which redistributes over shared
    /// memory (issue 25). Its locator, `fwd/<leader participant>`, says
    /// which host leader a runtime follows (a leader names itself).
    Forwarded = 8,
}

impl TransportKind {
    /// Every kind, in order of preference when several can reach a peer.
    pub const ALL: [TransportKind; 8] = [
        Self::InProcess,
        Self::SharedMemory,
        Self::Udp,
        Self::Tcp,
        Self::Mqtt,
        Self::Zenoh,
        Self::Dds,
        Self::Forwarded,
    ];

    /// Short name used in locators, config and the CLI.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::InProcess => "intra",
            Self::SharedMemory => "shm",
            Self::Udp => "udp",
            Self::Tcp => "tcp",
            Self::Mqtt => "mqtt",
            Self::Zenoh => "zenoh",
            Self::Dds => "dds",
            Self::Forwarded => "fwd",
        }
    }

    fn from_u8(v: u8) -> Result<Self, WireError> {
        Self::ALL
            .into_iter()
            .find(|k| *k as u8 == v)
            .ok_or(WireError::InvalidValue {
                field: "transport",
                value: v as u64,
            })
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for a transport name that is not one of ferry's.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("unknown transport `{0}`: expected one of intra, shm, udp, tcp, mqtt, zenoh, dds, fwd")]
pub struct UnknownTransport(pub String);

impl FromStr for TransportKind {
    type Err = UnknownTransport;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownTransport(s.to_string()))
    }
}

/// Where a transport of a participant can be reached:
/// `tcp/10.0.0.2:7400`, `udp/10.0.0.2:7411?mtu=1400`,
/// `shm/ferry.s.4026531836.77.123.abcd`.
///
/// Checked once, where it is parsed (a peer's announcement, a config):
/// IP transports carry a socket address, shared memory a segment name that
/// cannot leave `/dev/shm`; parameters after `?` are typed
/// ([`LocatorParams`]), an unknown one is an error.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Locator {
    /// The transport.
    pub transport: TransportKind,
    /// Where.
    pub address: Address,
    /// How (optional parameters).
    pub params: LocatorParams,
}

/// The address part of a [`Locator`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// `ip:port` (TCP, UDP, Zenoh).
    Socket(std::net::SocketAddr),
    /// A name under `/dev/shm` (shared memory: the runtime's control socket).
    Name(String),
}

/// Parameters of a [`Locator`] (`?key=value&…`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct LocatorParams {
    /// Largest datagram the receiver takes at this address, bytes (UDP):
    /// a writer sends no larger ones.
    pub mtu: Option<u16>,
    /// The receiver's X25519 static key for protected UDP (security on,
    /// `?key=` 64 hex digits): the Noise IK handshake needs it up front,
    /// and the signed announcement that carries it binds it to the
    /// runtime's certificate.
    pub key: Option<[u8; 32]>,
}

/// Smallest and largest `mtu` parameter (IPv4 minimum reassembly buffer
/// minus headers; the largest UDP payload).
pub const LOCATOR_MTU: std::ops::RangeInclusive<u16> = 548..=65_507;

impl Locator {
    /// An IP locator without parameters.
    pub fn socket(transport: TransportKind, addr: std::net::SocketAddr) -> Locator {
        Locator {
            transport,
            address: Address::Socket(addr),
            params: LocatorParams::default(),
        }
    }

    /// A named locator (shared memory) without parameters.
    pub fn named(transport: TransportKind, name: &str) -> Locator {
        Locator {
            transport,
            address: Address::Name(name.to_string()),
            params: LocatorParams::default(),
        }
    }

    /// The socket address, for IP transports.
    pub fn socket_addr(&self) -> Option<std::net::SocketAddr> {
        match self.address {
            Address::Socket(a) => Some(a),
            Address::Name(_) => None,
        }
    }

    /// `fwd/<leader>`: the runtime follows host leader `leader` (a leader
    /// names itself).
    pub fn forwarded_by(leader: ParticipantId) -> Locator {
        Locator::named(TransportKind::Forwarded, &format!("{:016x}", leader.0))
    }

    /// The host leader a `fwd/` locator names.
    pub fn host_leader(&self) -> Option<ParticipantId> {
        if self.transport != TransportKind::Forwarded {
            return None;
        }
        u64::from_str_radix(self.name()?, 16)
            .ok()
            .map(ParticipantId)
    }

    /// The name, for named transports.
    pub fn name(&self) -> Option<&str> {
        match &self.address {
            Address::Name(n) => Some(n),
            Address::Socket(_) => None,
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Socket(a) => write!(f, "{a}"),
            Address::Name(n) => f.write_str(n),
        }
    }
}

impl fmt::Display for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.transport, self.address)?;
        let mut sep = '?';
        if let Some(m) = self.params.mtu {
            write!(f, "{sep}mtu={m}")?;
            sep = '&';
        }
        if let Some(k) = &self.params.key {
            write!(f, "{sep}key=")?;
            for b in k {
                write!(f, "{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// A Zenoh id as Zenoh writes it: 1-32 lowercase hex digits.
pub fn is_zenoh_id(s: &str) -> bool {
    (1..=32).contains(&s.len()) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// 32 bytes from 64 hex digits.
fn parse_key(v: &str) -> Option<[u8; 32]> {
    if v.len() != 64 || !v.is_ascii() {
        return None;
    }
    let mut k = [0u8; 32];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(&v[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(k)
}

/// Error for a malformed locator string.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum LocatorError {
    /// No `/` between transport and address.
    #[error("locator `{0}` must look like `transport/address`, e.g. `tcp/10.0.0.2:7400`")]
    Shape(String),
    /// The transport part is unknown.
    #[error(transparent)]
    Transport(#[from] UnknownTransport),
    /// The address does not fit the transport.
    #[error("locator `{locator}`: {why}")]
    Address {
        /// The locator.
        locator: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A parameter is unknown or its value out of range.
    #[error("locator `{locator}`: parameter `{param}`: {why}")]
    Param {
        /// The locator.
        locator: String,
        /// The parameter as written.
        param: String,
        /// What is wrong.
        why: &'static str,
    },
}

impl FromStr for Locator {
    type Err = LocatorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (t, rest) = s
            .split_once('/')
            .ok_or_else(|| LocatorError::Shape(s.to_string()))?;
        let transport: TransportKind = t.parse()?;
        let (a, query) = match rest.split_once('?') {
            Some((a, q)) => (a, Some(q)),
            None => (rest, None),
        };
        let bad = |why| LocatorError::Address {
            locator: s.to_string(),
            why,
        };
        let address = match transport {
            TransportKind::Tcp | TransportKind::Udp => Address::Socket(
                a.parse()
                    .map_err(|_| bad("expected ip:port, e.g. 10.0.0.2:7400"))?,
            ),
            // A Zenoh session's id (what a runtime announces so that its
            // `@ferry_lv` claim is believed), or an ip:port.
            TransportKind::Zenoh => match a.parse() {
                Ok(sa) => Address::Socket(sa),
                Err(_) if is_zenoh_id(a) => Address::Name(a.to_string()),
                Err(_) => {
                    return Err(bad(
                        "expected a Zenoh id (1-32 lowercase hex digits) or ip:port",
                    ))
                }
            },
            TransportKind::SharedMemory => {
                let ok = !a.is_empty()
                    && a.len() <= 200
                    && a != "."
                    && a != ".."
                    && a.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
                if !ok {
                    return Err(bad(
                        "expected a name under /dev/shm (1-200 letters, digits, `.`, `_`, `-`)",
                    ));
                }
                Address::Name(a.to_string())
            }
            // The host leader a runtime follows (or is): its participant.
            TransportKind::Forwarded => {
                if a.len() != 16 || !is_zenoh_id(a) {
                    return Err(bad("expected a participant id (16 lowercase hex digits)"));
                }
                Address::Name(a.to_string())
            }
            TransportKind::InProcess | TransportKind::Mqtt | TransportKind::Dds => {
                return Err(bad("this transport has no locators"))
            }
        };
        let mut params = LocatorParams::default();
        for kv in query.into_iter().flat_map(|q| q.split('&')) {
            let param = |why| LocatorError::Param {
                locator: s.to_string(),
                param: kv.to_string(),
                why,
            };
            match kv.split_once('=') {
                Some(("mtu", v)) => {
                    let m: u16 = v.parse().map_err(|_| param("not a number"))?;
                    if !LOCATOR_MTU.contains(&m) {
                        return Err(param("outside 548..=65507"));
                    }
                    if transport != TransportKind::Udp {
                        return Err(param("only UDP locators take an mtu"));
                    }
                    params.mtu = Some(m);
                }
                Some(("key", v)) => {
                    if transport != TransportKind::Udp {
                        return Err(param("only UDP locators take a key"));
                    }
                    params.key = Some(parse_key(v).ok_or_else(|| param("not 64 hex digits"))?);
                }
                _ => return Err(param("unknown (known: mtu, key)")),
            }
        }
        Ok(Locator {
            transport,
            address,
            params,
        })
    }
}

/// Quality of service of a port, with ROS 2's policies and compatibility.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Qos {
    /// Repair losses or not.
    pub reliability: Reliability,
    /// Queue and history depth.
    pub history: History,
    /// Replay for late joiners.
    pub durability: Durability,
    /// The endpoint counts as alive while its runtime renews this lease
    /// (`None`: infinite; the runtime lease still applies).
    pub liveliness_lease: Option<Duration>,
    /// Maximum expected period between samples (`None`: no deadline).
    pub deadline: Option<Duration>,
    /// Samples older than this are not delivered (`None`: forever).
    pub lifespan: Option<Duration>,
    /// Pin this port's connections to one transport (`None`: automatic).
    pub transport: Option<TransportKind>,
}

impl Default for Qos {
    fn default() -> Self {
        Self::default_profile()
    }
}

impl Qos {
    /// ROS 2 `default`: reliable, keep_last 10, volatile.
    pub const fn default_profile() -> Self {
        Qos {
            reliability: Reliability::Reliable,
            history: History::KeepLast(10),
            durability: Durability::Volatile,
            liveliness_lease: None,
            deadline: None,
            lifespan: None,
            transport: None,
        }
    }
    /// ROS 2 `sensor_data`: best_effort, keep_last 5, volatile.
    pub const fn sensor_data() -> Self {
        Qos {
            reliability: Reliability::BestEffort,
            history: History::KeepLast(5),
            ..Self::default_profile()
        }
    }
    /// ROS 2 `services_default`: reliable, keep_last 10, volatile.
    pub const fn services_default() -> Self {
        Self::default_profile()
    }
    /// Latched topic: reliable, keep_last 1, transient_local — a late joiner
    /// gets the last sample (ROS 1's latching, ROS 2's "transient local").
    pub const fn latched() -> Self {
        Qos {
            history: History::KeepLast(1),
            durability: Durability::TransientLocal,
            ..Self::default_profile()
        }
    }
    /// Looks a profile up by its ROS-style name.
    pub fn profile(name: &str) -> Option<Self> {
        Some(match name {
            "default" => Self::default_profile(),
            "sensor_data" => Self::sensor_data(),
            "services_default" => Self::services_default(),
            "latched" => Self::latched(),
            _ => return None,
        })
    }
    /// Sets reliability to reliable.
    pub const fn reliable(mut self) -> Self {
        self.reliability = Reliability::Reliable;
        self
    }
    /// Sets reliability to best effort.
    pub const fn best_effort(mut self) -> Self {
        self.reliability = Reliability::BestEffort;
        self
    }
    /// Keep the last `n` samples.
    pub const fn keep_last(mut self, n: u32) -> Self {
        self.history = History::KeepLast(n);
        self
    }
    /// Keep all samples (bounded by resource limits).
    pub const fn keep_all(mut self) -> Self {
        self.history = History::KeepAll;
        self
    }
    /// Late joiners get the history.
    pub const fn transient_local(mut self) -> Self {
        self.durability = Durability::TransientLocal;
        self
    }
    /// Late joiners get nothing from before.
    pub const fn volatile(mut self) -> Self {
        self.durability = Durability::Volatile;
        self
    }
    /// Sets the deadline.
    pub const fn deadline(mut self, d: Duration) -> Self {
        self.deadline = Some(d);
        self
    }
    /// Sets the lifespan.
    pub const fn lifespan(mut self, d: Duration) -> Self {
        self.lifespan = Some(d);
        self
    }
    /// Sets the liveliness lease.
    pub const fn liveliness_lease(mut self, d: Duration) -> Self {
        self.liveliness_lease = Some(d);
        self
    }
    /// Pins the transport for this port's connections.
    pub const fn transport(mut self, t: TransportKind) -> Self {
        self.transport = Some(t);
        self
    }

    /// Encoded size in bytes.
    pub const WIRE_LEN: usize = 1 + 1 + 4 + 1 + 8 * 3 + 1;

    pub(crate) fn write(&self, w: &mut Writer) {
        w.u8(self.reliability as u8);
        let (kind, depth) = match self.history {
            History::KeepLast(n) => (0, n),
            History::KeepAll => (1, 0),
        };
        w.u8(kind);
        w.u32(depth);
        w.u8(self.durability as u8);
        for d in [self.liveliness_lease, self.deadline, self.lifespan] {
            w.u64(duration_to_wire(d));
        }
        w.u8(self.transport.map(|t| t as u8).unwrap_or(0));
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let reliability = match r.u8()? {
            0 => Reliability::BestEffort,
            1 => Reliability::Reliable,
            v => return Err(invalid("qos.reliability", v)),
        };
        let kind = r.u8()?;
        let depth = r.u32()?;
        let history = match kind {
            0 if depth >= 1 => History::KeepLast(depth),
            1 => History::KeepAll,
            _ => return Err(invalid("qos.history", kind)),
        };
        let durability = match r.u8()? {
            0 => Durability::Volatile,
            1 => Durability::TransientLocal,
            v => return Err(invalid("qos.durability", v)),
        };
        let liveliness_lease = duration_from_wire(r.u64()?);
        let deadline = duration_from_wire(r.u64()?);
        let lifespan = duration_from_wire(r.u64()?);
        let transport = match r.u8()? {
            0 => None,
            v => Some(TransportKind::from_u8(v)?),
        };
        Ok(Qos {
            reliability,
            history,
            durability,
            liveliness_lease,
            deadline,
            lifespan,
            transport,
        })
    }
}

fn invalid(field: &'static str, v: u8) -> WireError {
    WireError::InvalidValue {
        field,
        value: v as u64,
    }
}

fn duration_to_wire(d: Option<Duration>) -> u64 {
    d.map(|d| d.as_nanos().min(u64::MAX as u128 - 1) as u64)
        .unwrap_or(u64::MAX)
}

fn duration_from_wire(v: u64) -> Option<Duration> {
    (v != u64::MAX).then(|| Duration::from_nanos(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_ids_round_trip_as_text() {
        let e = EndpointId {
            participant: ParticipantId(0x00ab_cdef_0123_4567),
            entity: 42,
        };
        assert_eq!(e.to_string().parse::<EndpointId>(), Ok(e));
        for bad in ["", "abc", ".1", "zz.1", "1.x", "00000000000000001.1"] {
            assert!(bad.parse::<EndpointId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn locator_parses_and_prints() {
        let l: Locator = "tcp/10.0.0.2:7400".parse().unwrap();
        assert_eq!(l.transport, TransportKind::Tcp);
        assert_eq!(l.address, Address::Socket("10.0.0.2:7400".parse().unwrap()));
        assert_eq!(l.to_string(), "tcp/10.0.0.2:7400");
        for s in [
            "udp/10.0.0.2:7411?mtu=1400",
            "shm/ferry.s.4026531836.77.123.abcd",
            "tcp/[::1]:7400",
            "zenoh/aac3178e146ba6f1fc6e6a4085e77f21",
            "zenoh/10.0.0.2:7447",
            "fwd/00000000000000ab",
        ] {
            assert_eq!(s.parse::<Locator>().unwrap().to_string(), s);
        }
        let u: Locator = "udp/10.0.0.2:7411?mtu=1400".parse().unwrap();
        assert_eq!(u.params.mtu, Some(1400));
        let key = format!("udp/10.0.0.2:7411?mtu=1400&key={}", "0a".repeat(32));
        let k: Locator = key.parse().unwrap();
        assert_eq!(k.params.key, Some([10; 32]));
        assert_eq!(k.to_string(), key);
        for bad in [
            format!("udp/10.0.0.2:7411?key={}", "0a".repeat(31)),
            format!("udp/10.0.0.2:7411?key={}", "zz".repeat(32)),
            format!("tcp/10.0.0.2:7411?key={}", "0a".repeat(32)),
        ] {
            assert!(bad.parse::<Locator>().is_err(), "{bad}");
        }
        assert_eq!(u.socket_addr(), Some("10.0.0.2:7411".parse().unwrap()));
        let z: Locator = "zenoh/aac3".parse().unwrap();
        assert_eq!(z.name(), Some("aac3"));
        let f = Locator::forwarded_by(ParticipantId(0xab));
        assert_eq!(f.to_string(), "fwd/00000000000000ab");
        let back: Locator = f.to_string().parse().unwrap();
        assert_eq!(back.host_leader(), Some(ParticipantId(0xab)));
        assert_eq!(z.host_leader(), None);
        for bad in [
            "tcp/10.0.0.2",                             // no port
            "udp/robot.local:7411",                     // not an IP
            "shm/../../etc/passwd",                     // leaves /dev/shm
            "shm/",                                     // empty
            "udp/10.0.0.2:7411?mtu=100",                // below the minimum
            "udp/10.0.0.2:7411?mtu=x",                  // not a number
            "tcp/10.0.0.2:7400?mtu=1400",               // mtu on a stream
            "udp/10.0.0.2:7411?speed=9",                // unknown
            "mqtt/broker:1883",                         // announces no locators
            "zenoh/AAC3",                               // not as Zenoh writes ids
            "zenoh/aac3178e146ba6f1fc6e6a4085e77f21ff", // 34 digits
            "zenoh/",                                   // empty
            "fwd/ab",                                   // not 16 digits
            "fwd/00000000000000AB",                     // not as ferry writes ids
        ] {
            let e = bad.parse::<Locator>().unwrap_err();
            assert!(e.to_string().contains(bad), "{bad}: {e}");
        }
        assert!(matches!(
            "carrier-pigeon/x".parse::<Locator>(),
            Err(LocatorError::Transport(_))
        ));
        assert!(matches!(
            "tcp".parse::<Locator>(),
            Err(LocatorError::Shape(_))
        ));
    }

    #[test]
    fn qos_round_trips_every_profile() {
        for name in ["default", "sensor_data", "services_default", "latched"] {
            let q = Qos::profile(name)
                .unwrap()
                .deadline(Duration::from_millis(100))
                .transport(TransportKind::Tcp);
            let mut w = Writer::new();
            q.write(&mut w);
            let v = w.into_vec();
            assert_eq!(v.len(), Qos::WIRE_LEN);
            assert_eq!(Qos::read(&mut Reader::new(&v)).unwrap(), q);
        }
    }

    #[test]
    fn type_hash_prints_as_ros2() {
        let h = TypeHash([0xab; 32]);
        assert_eq!(h.to_string(), format!("RIHS01_{}", "ab".repeat(32)));
        assert_eq!(TypeHash::ANY.to_string(), "*");
    }
}
