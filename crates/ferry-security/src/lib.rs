//! Ferry's security: who a runtime is and what it may do.
//!
//! - A **keystore** holds one CA (Ed25519) and, per **enclave** (a path
//!   like `/robot1/talker`, one per runtime, as in SROS2), a key and a
//!   certificate signed by the CA ([`Keystore`], [`Identity`]).
//! - A **policy** (YAML) says per enclave what it may `publish`,
//!   `subscribe`, `call`, `serve`, `admin` and `monitor` ([`Policy`]);
//!   `create-permissions` compiles each enclave's rules into **grants**
//!   carried by its own certificate ([`Grants`]), so whoever checks the
//!   certificate's chain has its grants, with nothing else to ship.
//! - [`Mode`]: `off` (default), `permissive` (check and count, refuse
//!   nothing), `enforce`.
//!
//! Creating keystores and certificates (feature `keygen`, used by the
//! `ferry security` commands) is separate from loading and checking, which
//! runtimes do. The design, the threat model and what is still to come:
//! `docs/design/security.md` and `docs/SECURITY.md`.

mod der;
pub mod enclave;
pub mod grants;
pub mod keystore;
pub mod mqtt_acl;
pub mod peer;
pub mod policy;
pub mod tls;
pub mod udp;

#[cfg(feature = "keygen")]
pub mod create;

use std::fmt;
use std::str::FromStr;

pub use enclave::{check_enclave, EnclaveError};
pub use grants::{Action, Effect, Grants, GrantsError, Pattern, PatternError, Rule};
pub use keystore::{Identity, IdentityError, Keystore, KeystoreError, OutsideValidity, Summary};
pub use peer::{
    admin_service_node, is_internal, key_id, random_u64, KeyId, PeerError, PeerIdentity,
    ADMIN_PREFIX,
};
pub use policy::{Policy, PolicyError};
/// The TLS library the configurations are for (one version for all users).
pub use rustls;

/// How much security a runtime applies (`FERRY_SECURITY`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// No identity is loaded; nothing is checked.
    #[default]
    Off,
    /// The identity is loaded if there is one; what the policy would
    /// refuse is logged and counted, not refused.
    Permissive,
    /// An identity is required; the policy is enforced.
    Enforce,
}

impl Mode {
    /// The word for the mode.
    pub fn word(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Permissive => "permissive",
            Mode::Enforce => "enforce",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// A word that is not a mode.
#[derive(Debug, Clone, thiserror::Error)]
#[error("security mode {0:?}: use off, permissive or enforce")]
pub struct ModeError(pub String);

impl FromStr for Mode {
    type Err = ModeError;

    fn from_str(s: &str) -> Result<Mode, ModeError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" | "" => Ok(Mode::Off),
            "permissive" => Ok(Mode::Permissive),
            "enforce" => Ok(Mode::Enforce),
            _ => Err(ModeError(s.into())),
        }
    }
}
