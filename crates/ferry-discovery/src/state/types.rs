//! The types discovery takes and gives: its config, what it sends, how a
//! datagram arrived, what it learned, its errors and counters.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use ferry_wire::beacon::{EndpointRecord, NodeRecord, ParticipantInfo};
use ferry_wire::{ParticipantId, WireError};

/// Largest forward step of a record revision: a participant changes its
/// records far less often between two of its heartbeats.
pub const MAX_REVISION_STEP: u32 = 1 << 16;

/// Announcement period for a lease: six announcements fit in every lease
/// even when the ±10 % jitter stretches each period (lease / 6.6).
pub fn period_for(lease_ms: u32) -> Duration {
    Duration::from_millis(u64::from(lease_ms) * 10 / 66).max(Duration::from_millis(10))
}

/// Settings of one discovery instance.
#[derive(Debug, Clone)]
pub struct Config {
    /// Domain id: beacons from other domains are ignored.
    pub domain: u16,
    /// This runtime's id.
    pub participant: ParticipantId,
    /// What this runtime tells others (lease, locators, host identity).
    pub info: ParticipantInfo,
    /// Time between heartbeats with few participants (default: lease / 6.6).
    pub announce_period: Duration,
    /// Largest datagram to send.
    pub mtu: usize,
    /// Whether to send to the multicast group.
    pub multicast: bool,
    /// Unicast addresses to announce to (for networks without multicast).
    pub static_peers: Vec<SocketAddr>,
    /// Whether announcements also go to an MQTT broker (cloud scope).
    pub broker: bool,
    /// Whether what goes to the broker names this runtime's network
    /// addresses (UDP, TCP). Off by default: a broker is often another
    /// organisation's machine. Peers that meet us directly ask us for our
    /// records and get the addresses then.
    pub broker_addresses: bool,
    /// Accept datagrams from loopback addresses only (`discovery =
    /// localhost`): anything else is counted and ignored.
    pub loopback_only: bool,
    /// Seed for the announcement jitter.
    pub seed: u64,
    /// Sign beacons and check others' (security `permissive`/`enforce`);
    /// `None`: plain beacons, and signed ones only from peers that accept
    /// plain ones too.
    pub auth: Option<super::auth::Auth>,
    /// The wall clock when discovery starts, µs since the Unix epoch (the
    /// base of signed beacons' stamps; set by the driver, 0 by default:
    /// stamps then only count up from the start, which is enough on a
    /// LAN but not for freshness through the broker).
    pub unix_at_start_us: u64,
}

impl Config {
    /// A config with ferry's defaults: the period is a sixth of the lease
    /// (454 ms for the default 3 s lease), so a live peer is only expired
    /// after six heartbeats in a row are lost; 1472 B MTU.
    pub fn new(domain: u16, participant: ParticipantId, info: ParticipantInfo) -> Self {
        let period = period_for(info.lease_ms);
        Config {
            domain,
            participant,
            info,
            announce_period: period,
            mtu: ferry_wire::beacon::DEFAULT_MTU,
            multicast: true,
            static_peers: Vec::new(),
            broker: false,
            broker_addresses: false,
            loopback_only: false,
            seed: participant.0 | 1,
            auth: None,
            unix_at_start_us: 0,
        }
    }
}

/// Where a datagram should go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// The domain's multicast group.
    Group,
    /// One unicast address (static peer, or a peer that reached us by unicast).
    Peer(SocketAddr),
    /// The MQTT broker (the driver publishes it on the domain's discovery topic).
    Broker,
}

/// A datagram for the driver to send.
#[derive(Debug, Clone)]
pub struct Transmit {
    /// Where to.
    pub to: Destination,
    /// The datagram.
    pub bytes: Vec<u8>,
}

/// How a datagram arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// On the multicast group.
    Multicast,
    /// On this runtime's unicast socket.
    Unicast,
    /// Through the MQTT broker (`from` is meaningless): the peer is not
    /// known to be reachable directly.
    Broker,
}

/// Why a participant is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaveReason {
    /// It said goodbye (clean exit).
    Bye,
    /// It was silent for longer than its lease (crash, kill -9, link loss).
    LeaseExpired,
    /// Its connection to the MQTT broker broke without a goodbye: the
    /// broker delivered its last will (crash, kill -9, link loss).
    ConnectionLost,
}

/// What discovery learned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A new participant appeared.
    ParticipantJoined(ParticipantId),
    /// A participant is gone; its endpoints were withdrawn (with events).
    ParticipantLeft {
        /// Who.
        id: ParticipantId,
        /// Why.
        reason: LeaveReason,
    },
    /// A remote endpoint appeared.
    EndpointJoined {
        /// Its participant.
        participant: ParticipantId,
        /// The endpoint.
        endpoint: EndpointRecord,
    },
    /// A remote endpoint was withdrawn.
    EndpointLeft {
        /// Its participant.
        participant: ParticipantId,
        /// The endpoint.
        endpoint: EndpointRecord,
    },
}

/// Why a datagram was rejected (counted; never fatal).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum DatagramError {
    /// Not parseable.
    #[error("malformed discovery datagram: {0}")]
    Malformed(#[from] WireError),
    /// From another domain.
    #[error("beacon for domain {0} ignored (this runtime is in another domain)")]
    ForeignDomain(u16),
    /// Too many participants already known (from this source or in all).
    #[error("participant table full ({0}); beacon dropped")]
    TableFull(&'static str),
    /// An announcement exceeds the per-participant or per-source bounds.
    #[error("announcement exceeds bounds: {0}")]
    TooLarge(&'static str),
    /// Names a known participant but comes from another address than the
    /// one it was first heard from (a forgery, or a peer whose address
    /// changed: it is learned again once its lease ends).
    #[error("datagram for participant {participant} from {from}, not from its address {origin}")]
    NotOwner {
        /// The participant named.
        participant: ParticipantId,
        /// Where the datagram came from.
        from: SocketAddr,
        /// Where that participant's datagrams come from.
        origin: String,
    },
    /// The id was claimed from two addresses before either proved it:
    /// ignored for [`super::CONTESTED`].
    #[error("participant {0} is claimed from two addresses; ignored for a while (a forgery?)")]
    Contested(ParticipantId),
    /// A revision that jumps further than [`MAX_REVISION_STEP`].
    #[error("revision jump from {from} to {to} ignored (at most {MAX_REVISION_STEP} forward)")]
    RevisionJump {
        /// The revision known.
        from: u32,
        /// The revision claimed.
        to: u32,
    },
    /// The source address spent its rate budget.
    #[error("source {0} is over its discovery rate budget (1,000 parts, requests and new ids a second); datagram dropped")]
    Throttled(std::net::IpAddr),
    /// `discovery = localhost` and the datagram came from elsewhere.
    #[error("datagram from {0} ignored: discovery is limited to this host (localhost)")]
    NotLoopback(SocketAddr),
    /// A signed beacon from a runtime that talks only to secured ones,
    /// and this one runs without security.
    #[error("signed beacon from {0} ignored: that runtime runs with FERRY_SECURITY=enforce and this one without security")]
    NeedsSecurity(SocketAddr),
    /// An unsigned beacon while security is enforced.
    #[error("unsigned beacon from {0} ignored (FERRY_SECURITY=enforce)")]
    Unsigned(SocketAddr),
    /// Signed by a key whose certificate has not arrived yet: it is asked for.
    #[error("beacon from {0} signed by a key not known yet; its certificate is asked for")]
    UnknownKey(SocketAddr),
    /// Signed by a key whose certificate was refused.
    #[error("beacon from {from} signed by a refused certificate ({why:?})")]
    BadCredential {
        /// The source.
        from: SocketAddr,
        /// Why it was refused.
        why: super::auth::BadKey,
    },
    /// A signature that does not verify (tampered or forged).
    #[error("beacon from {0} has a bad signature (tampered or forged)")]
    BadSignature(SocketAddr),
    /// A signed beacon older than the participant's replay window.
    #[error("replayed beacon of participant {0} ignored")]
    Replayed(ParticipantId),
}

/// Counters for the driver and the CLI.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    /// Datagrams handed to the driver.
    pub sent: u64,
    /// Datagrams accepted.
    pub received: u64,
    /// Datagrams rejected as malformed or oversized.
    pub malformed: u64,
    /// Datagrams from other domains.
    pub foreign_domain: u64,
    /// Datagrams naming a known participant from another address (forged).
    pub not_owner: u64,
    /// Datagrams dropped by a source's rate budget, caps or a revision jump.
    pub refused: u64,
    /// Datagrams from outside this host while limited to it.
    pub not_loopback: u64,
    /// Participants forgotten to make room for new ones.
    pub evicted: u64,
    /// What signed discovery refused.
    #[serde(default)]
    pub security: SecurityStats,
}

/// What signed discovery refused or skipped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SecurityStats {
    /// Unsigned beacons under `enforce`.
    pub unsigned: u64,
    /// Signed-only beacons seen without security (`off`).
    pub needs_security: u64,
    /// Signed by a key whose certificate had not arrived (it is asked for).
    pub unknown_key: u64,
    /// Certificates (and beacons signed by them) not of our CA.
    pub foreign_ca: u64,
    /// Certificates (and beacons signed by them) outside their validity.
    pub expired: u64,
    /// Certificates whose grants do not cover the domain; and records a
    /// participant's grants do not allow (dropped, never matched).
    pub denied: u64,
    /// Signatures that do not verify.
    pub bad_signature: u64,
    /// Stamps older than the replay window.
    pub replayed: u64,
    /// Beacons seen twice (a copy per interface, or a replay of a recent
    /// one): ignored.
    pub duplicate: u64,
    /// Participants forgotten before they echoed a challenge.
    pub unproven: u64,
    /// Heartbeats not verified because they would change nothing (a
    /// proven participant's, verified less than a third of its lease ago):
    /// not taken, so a forged one among them is not noticed either.
    pub skipped: u64,
}

impl SecurityStats {
    /// Every counter with its name, in a fixed order (for the CLI and the
    /// Python dict).
    pub fn entries(&self) -> [(&'static str, u64); 11] {
        [
            ("unsigned", self.unsigned),
            ("needs_security", self.needs_security),
            ("unknown_key", self.unknown_key),
            ("foreign_ca", self.foreign_ca),
            ("expired", self.expired),
            ("denied", self.denied),
            ("bad_signature", self.bad_signature),
            ("replayed", self.replayed),
            ("duplicate", self.duplicate),
            ("unproven", self.unproven),
            ("skipped", self.skipped),
        ]
    }
}

/// What is known about one remote participant.
#[derive(Debug, Clone)]
pub struct RemoteParticipant {
    /// Its id.
    pub id: ParticipantId,
    /// Its info from its latest announcement.
    pub info: ParticipantInfo,
    /// Its nodes.
    pub nodes: BTreeMap<u32, NodeRecord>,
    /// Its endpoints.
    pub endpoints: BTreeMap<u32, EndpointRecord>,
    /// Where its unicast beacons come from, if it sends them periodically
    /// (a peer without multicast).
    pub unicast: Option<SocketAddr>,
    /// Heard on multicast or unicast at least once (not only through the
    /// broker): its network locators are worth trying.
    pub direct: bool,
    /// The enclave its signed beacons proved (security on), or `None` for
    /// a plain participant.
    pub enclave: Option<String>,
    /// The identity its signed beacons proved: its certificate's key and
    /// grants (security on), or `None` for a plain participant.
    pub identity: Option<std::sync::Arc<ferry_security::PeerIdentity>>,
}
