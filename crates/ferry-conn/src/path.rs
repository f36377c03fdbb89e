//! Path selection: which transport carries one pair, as a pure function of
//! what each transport reaches.

use ferry_wire::{EndpointKind, Locator, ParticipantId, TransportKind};

/// What path selection knows about a runtime (from discovery or itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    /// Runtime id.
    pub participant: ParticipantId,
    /// Shared-memory identity of its host.
    pub host_id: u64,
    /// Network-stack identity.
    pub net_id: u64,
    /// Process id.
    pub pid: u32,
    /// Where its transports listen.
    pub locators: Vec<Locator>,
    /// Heard on the network itself (multicast, unicast), not only through
    /// the MQTT broker: only then are UDP/TCP tried automatically (its
    /// addresses may be private ones of another site).
    pub direct: bool,
    /// Its discovery beacons were signed (security on): its TCP path
    /// speaks TLS.
    pub secured: bool,
}

impl PeerInfo {
    /// Same process (and the same host, so pids are comparable).
    pub fn same_process(&self, other: &PeerInfo) -> bool {
        self.host_id == other.host_id && self.net_id == other.net_id && self.pid == other.pid
    }
}

/// What path selection needs of a transport: its kind, whether it carries
/// requests, and which peers it reaches. Pure: answers from the two
/// runtimes' [`PeerInfo`] and the transport's own settings, no I/O.
pub trait Route: Send + Sync {
    /// Its kind (also its preference: [`TransportKind`]'s order).
    fn kind(&self) -> TransportKind;
    /// Carries service requests and replies, not only samples.
    fn request_reply(&self) -> bool;
    /// Whether it can carry data from `local`'s runtime to `remote`'s.
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool;
    /// Whether automatic selection may pick it for this pair (pinning only
    /// needs [`Route::reaches`]). Default: whenever it reaches.
    fn automatic(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        self.reaches(local, remote)
    }
}

/// Picks the transport for one connection: the pinned kind if any,
/// otherwise the most preferred transport that automatic selection allows
/// for the pair; `allowed` can rule kinds out (the MQTT path for a topic
/// that is not cloud-scoped, the broker when leaving it). Clients only get
/// transports that carry requests; UDP and TCP are chosen automatically
/// only for peers heard directly.
pub fn select<R: AsRef<dyn Route>>(
    routes: &[R],
    pin: Option<TransportKind>,
    writer: EndpointKind,
    local: &PeerInfo,
    remote: &PeerInfo,
    allowed: impl Fn(TransportKind) -> bool,
) -> Option<TransportKind> {
    routes
        .iter()
        .map(AsRef::as_ref)
        .filter(|t| writer != EndpointKind::Client || t.request_reply())
        .filter(|t| allowed(t.kind()))
        .filter(|t| match pin {
            Some(p) => t.kind() == p && t.reaches(local, remote),
            None => {
                t.automatic(local, remote)
                    && (remote.direct
                        || !matches!(t.kind(), TransportKind::Udp | TransportKind::Tcp))
            }
        })
        .map(|t| t.kind())
        .min()
}
