//! What transports need of security: the runtime's identity, and what
//! discovery proved about each remote runtime, so that a channel (a TLS
//! connection, a shared-memory attach) can be tied to the participant it
//! claims to come from.

use std::collections::HashMap;
use std::sync::Arc;

use ferry_security::PeerIdentity;
use ferry_wire::ParticipantId;
use parking_lot::RwLock;

/// What transports need of the runtime's identity (security `permissive`
/// or `enforce`).
pub struct TransportSecurity {
    /// The identity: its CA checks peers' certificates.
    pub identity: Arc<ferry_security::Identity>,
    /// TLS configurations built from it (TCP).
    pub tls: ferry_security::tls::TlsConfigs,
    /// Plain connections refused (`enforce`), or taken from plain peers
    /// (`permissive`).
    pub enforce: bool,
    /// The domain (a peer's grants must cover it).
    pub domain: u16,
    /// Remote runtimes whose signed beacons proved an identity.
    pub peers: ProvenPeers,
    /// TLS connections renew their traffic keys this often while they
    /// carry data (`[security] tcp_rekey_s`).
    pub tls_rekey: std::time::Duration,
}

impl std::fmt::Debug for TransportSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportSecurity")
            .field("enclave", &self.identity.enclave())
            .field("enforce", &self.enforce)
            .finish()
    }
}

impl TransportSecurity {
    /// Whether a channel's proven `peer` may speak for `participant`: it
    /// must hold the key that participant's signed beacons proved. A
    /// participant discovery has not proved yet (its beacons may still be
    /// on their way) passes: the channel's own certificate is then what
    /// grants are checked against.
    pub fn speaks_for(&self, participant: ParticipantId, peer: &PeerIdentity) -> bool {
        self.peers
            .get(participant)
            .is_none_or(|p| p.identity.key_id() == peer.key_id())
    }
}

/// The grant a writer needs to write into a reader that carries `carries`,
/// and the endpoint kind such a writer is: what the reader takes in decides
/// it, never what the writer says it is.
pub fn writer_grant(
    carries: crate::transport::Carries,
) -> (ferry_wire::EndpointKind, ferry_security::Action) {
    use crate::transport::Carries;
    use ferry_security::Action;
    use ferry_wire::EndpointKind;
    match carries {
        Carries::Samples => (EndpointKind::Publisher, Action::Publish),
        Carries::Requests => (EndpointKind::Client, Action::Call),
        Carries::Replies => (EndpointKind::Service, Action::Serve),
    }
}

/// A remote runtime as signed discovery proved it.
#[derive(Debug, Clone)]
pub struct ProvenPeer {
    /// Its process id, as its signed announcement states it (shared memory
    /// checks the attaching socket's `SO_PEERCRED` pid against it).
    pub pid: u32,
    /// Its host id, as signed.
    pub host_id: u64,
    /// The X25519 static key its signed UDP locator names (protected UDP).
    pub udp_key: Option<[u8; 32]>,
    /// Its certificate's identity: key and grants.
    pub identity: Arc<PeerIdentity>,
}

/// The proven remote runtimes of this runtime's discovery (filled by the
/// runtime as participants join and leave; read by transports at accept).
#[derive(Debug, Default)]
pub struct ProvenPeers(RwLock<HashMap<ParticipantId, ProvenPeer>>);

impl ProvenPeers {
    /// Records (or refreshes) a proven participant.
    pub fn insert(&self, id: ParticipantId, peer: ProvenPeer) {
        self.0.write().insert(id, peer);
    }
    /// Forgets a participant that left.
    pub fn remove(&self, id: ParticipantId) {
        self.0.write().remove(&id);
    }
    /// What discovery proved about `id`, if anything.
    pub fn get(&self, id: ParticipantId) -> Option<ProvenPeer> {
        self.0.read().get(&id).cloned()
    }
}
