//! Other runtimes' identities: a certificate received from the network,
//! checked against this runtime's CA, becomes a [`PeerIdentity`] whose key
//! verifies that peer's signatures and whose grants say what it may do.

use std::fmt;

use ring::signature::{UnparsedPublicKey, ED25519};
use thiserror::Error;
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

use crate::grants::{Action, Grants, GrantsError};
use crate::keystore::{cert_grants, now_unix, Identity, OutsideValidity};

/// Short name of a certificate: the first 8 bytes of its SHA-256. Beacons
/// name their signer by it; a certificate received is only taken for the
/// key id its hash gives.
pub type KeyId = [u8; 8];

/// The key id of a DER certificate.
pub fn key_id(cert_der: &[u8]) -> KeyId {
    let d = ring::digest::digest(&ring::digest::SHA256, cert_der);
    let mut id = [0u8; 8];
    id.copy_from_slice(&d.as_ref()[..8]);
    id
}

/// A fresh random number from the operating system's generator (challenge
/// nonces: they must not be guessable).
pub fn random_u64() -> u64 {
    use ring::rand::SecureRandom as _;
    let mut b = [0u8; 8];
    // The OS generator does not fail on Linux once booted; a zero is
    // treated as "no nonce" by its users and simply retried.
    let _ = ring::rand::SystemRandom::new().fill(&mut b);
    u64::from_le_bytes(b)
}

/// Ferry's own services (`/_ferry/…`, type definitions and admin) are not
/// governed by name patterns: `admin` and `monitor` grants govern them where
/// they are called.
pub fn is_internal(name: &str) -> bool {
    const HIDDEN: &str = "/_ferry";
    name == HIDDEN
        || name
            .strip_prefix(HIDDEN)
            .is_some_and(|r| r.starts_with('/'))
}

/// Prefix of the admin service names: a node `/robot1/cam` serves
/// `/_ferry/admin/robot1/cam`.
pub const ADMIN_PREFIX: &str = "/_ferry/admin";

/// The node whose admin service `name` is (`/_ferry/admin/robot1/cam` →
/// `/robot1/cam`), if it is one.
pub fn admin_service_node(name: &str) -> Option<&str> {
    name.strip_prefix(ADMIN_PREFIX)
        .filter(|n| n.starts_with('/'))
}

/// Why a peer's certificate is not accepted.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum PeerError {
    /// Not a certificate.
    #[error("not an X.509 certificate: {0}")]
    Malformed(String),
    /// Not signed by this runtime's CA (another keystore, or forged).
    #[error("certificate of {enclave:?} is not signed by this keystore's CA")]
    ForeignCa {
        /// The name it claims.
        enclave: String,
    },
    /// Outside its validity.
    #[error(transparent)]
    Validity(OutsideValidity),
    /// A key ferry does not use (only Ed25519 today).
    #[error("certificate of {enclave} has no Ed25519 key")]
    KeyType {
        /// Its enclave.
        enclave: String,
    },
    /// Grants that do not decode.
    #[error("grants of {enclave}: {source}")]
    Grants {
        /// Its enclave.
        enclave: String,
        /// Why.
        source: GrantsError,
    },
    /// Its grants do not cover this domain.
    #[error("{enclave} is not granted domain {domain}")]
    Domain {
        /// Its enclave.
        enclave: String,
        /// The domain.
        domain: u16,
    },
}

/// A peer runtime's identity, proven by its CA-signed certificate.
#[derive(Clone, PartialEq, Eq)]
pub struct PeerIdentity {
    enclave: String,
    key_id: KeyId,
    public_key: [u8; 32],
    not_after: i64,
    grants: Grants,
}

impl fmt::Debug for PeerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerIdentity")
            .field("enclave", &self.enclave)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl PeerIdentity {
    /// Its enclave (`/robot1/talker`).
    pub fn enclave(&self) -> &str {
        &self.enclave
    }

    /// Its certificate's key id.
    pub fn key_id(&self) -> KeyId {
        self.key_id
    }

    /// End of its certificate's validity, Unix seconds.
    pub fn not_after(&self) -> i64 {
        self.not_after
    }

    /// What it may do.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// Whether it may do `action` on `name` (ferry's internal services
    /// always: see [`is_internal`]).
    pub fn allows(&self, action: Action, name: &str) -> bool {
        is_internal(name) || self.grants.allows(action, name)
    }

    /// Whether `sig` is its Ed25519 signature of `msg`.
    pub fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, &self.public_key)
            .verify(msg, sig)
            .is_ok()
    }
}

impl Identity {
    /// This identity's key id (of its certificate).
    pub fn key_id(&self) -> KeyId {
        key_id(self.cert_der())
    }

    /// Checks a peer's certificate against this identity's CA: signed by
    /// it, valid now, an Ed25519 key, grants that decode and cover `domain`.
    pub fn verify_peer(&self, der: &[u8], domain: u16) -> Result<PeerIdentity, PeerError> {
        self.verify_peer_at(der, domain, now_unix())
    }

    /// [`Identity::verify_peer`] at `now` (Unix seconds).
    pub fn verify_peer_at(
        &self,
        der: &[u8],
        domain: u16,
        now: i64,
    ) -> Result<PeerIdentity, PeerError> {
        let parse = |d| {
            X509Certificate::from_der(d)
                .map(|(_, c)| c)
                .map_err(|e| PeerError::Malformed(e.to_string()))
        };
        let ca = parse(self.ca_der())?;
        let cert = parse(der)?;
        let enclave = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|c| c.as_str().ok())
            .unwrap_or("")
            .to_string();
        if cert.verify_signature(Some(ca.public_key())).is_err() {
            return Err(PeerError::ForeignCa { enclave });
        }
        let (not_before, not_after) = (
            cert.validity().not_before.timestamp(),
            cert.validity().not_after.timestamp(),
        );
        OutsideValidity::check(&enclave, not_before, not_after, now)
            .map_err(PeerError::Validity)?;
        let spki = cert.public_key();
        let ed25519 = spki.algorithm.algorithm.to_id_string() == "1.3.101.112";
        let public_key: [u8; 32] = match spki.subject_public_key.data.as_ref().try_into() {
            Ok(k) if ed25519 => k,
            _ => return Err(PeerError::KeyType { enclave }),
        };
        let grants = cert_grants(&cert).map_err(|source| PeerError::Grants {
            enclave: enclave.clone(),
            source,
        })?;
        if !grants.covers_domain(domain) {
            return Err(PeerError::Domain { enclave, domain });
        }
        Ok(PeerIdentity {
            enclave,
            key_id: key_id(der),
            public_key,
            not_after,
            grants,
        })
    }
}
