//! This runtime's identity and the check of its own ports against its
//! grants (`[security]`, `FERRY_SECURITY`).
//!
//! Milestone 1 of `docs/design/security.md`: identities load, local ports
//! are checked, and discovery signs and checks beacons with the identity
//! loaded here (`ferry_discovery::Auth`). Protected TCP/UDP paths are next.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ferry_security::{Identity, Keystore, Mode};
use ferry_wire::EndpointKind;

use crate::config::security::SecurityConfig;
use crate::error::BuildError;

/// The identity a runtime runs as, and what its grants turned away.
pub(crate) struct Security {
    pub mode: Mode,
    pub identity: Arc<Identity>,
    /// Ports the grants would refuse, under `permissive`.
    pub would_deny: AtomicU64,
}

/// Loads the identity `cfg` asks for. `off`: none. `permissive`: none
/// (with a warning) when there is no keystore or it does not load.
/// `enforce`: an error unless it loads and its grants cover `domain`.
pub(crate) fn load(cfg: &SecurityConfig, domain: u16) -> Result<Option<Arc<Security>>, BuildError> {
    let mode = cfg.mode;
    if mode == Mode::Off {
        return Ok(None);
    }
    let loaded = (|| {
        let path = cfg
            .keystore
            .as_ref()
            .ok_or_else(|| "no keystore: set FERRY_KEYSTORE or [security] keystore".to_string())?;
        let ks = Keystore::open(path).map_err(|e| e.to_string())?;
        let enclave = ks
            .choose_enclave(cfg.enclave.as_deref())
            .map_err(|e| e.to_string())?;
        let identity = Identity::load(&ks, &enclave).map_err(|e| e.to_string())?;
        if !identity.grants().covers_domain(domain) {
            return Err(format!(
                "the grants of {enclave} do not cover domain {domain} (the policy's `domains`)"
            ));
        }
        Ok(identity)
    })();
    match loaded {
        Ok(identity) => {
            let (allow, deny) = identity.grants().counts();
            tracing::info!(
                "security {mode}: enclave {} (certificate {}, {allow} allow / {deny} deny rules)",
                identity.enclave(),
                identity.serial()
            );
            Ok(Some(Arc::new(Security {
                mode,
                identity: Arc::new(identity),
                would_deny: AtomicU64::new(0),
            })))
        }
        Err(why) if mode == Mode::Permissive => {
            tracing::warn!("security permissive: {why}; this runtime runs without an identity");
            Ok(None)
        }
        Err(why) => Err(BuildError::Security { mode, why }),
    }
}

impl Security {
    /// What transports need: the identity, its TLS configurations, how
    /// often TLS renews its keys.
    pub fn for_transports(
        &self,
        domain: u16,
        tls_rekey: std::time::Duration,
    ) -> Result<Arc<crate::transport::TransportSecurity>, BuildError> {
        let tls = self
            .identity
            .tls_configs()
            .map_err(|e| BuildError::Security {
                mode: self.mode,
                why: e.to_string(),
            })?;
        Ok(Arc::new(crate::transport::TransportSecurity {
            identity: self.identity.clone(),
            tls,
            enforce: self.mode == Mode::Enforce,
            domain,
            peers: Default::default(),
            tls_rekey,
        }))
    }

    /// Whether `caller` may `action` (admin or monitor) node `node` (its
    /// full name) through the admin plane: by the identity the channel
    /// proved, never by what the request declares. This process is one
    /// trust boundary and passes; a request with no proven identity (a
    /// plain peer, the broker) does not. `permissive` logs and counts what
    /// `enforce` refuses, and allows it.
    pub fn check_admin(
        &self,
        caller: &crate::transport::InboundConn,
        action: ferry_security::Action,
        node: &str,
        denied: &AtomicU64,
    ) -> Result<(), String> {
        use ferry_security::Action;
        if caller.origin == crate::transport::Origin::SameProcess {
            return Ok(());
        }
        let allowed = caller.identity.as_ref().is_some_and(|p| {
            p.grants().allows(action, node)
                || (action == Action::Monitor && p.grants().allows(Action::Admin, node))
        });
        if allowed {
            return Ok(());
        }
        let who = caller.identity.as_ref().map_or_else(
            || "a caller with no proven identity".to_string(),
            |p| format!("identity {}", p.enclave()),
        );
        if self.mode == Mode::Enforce {
            denied.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("admin request refused: {who} may not {action} {node}");
            return Err(format!(
                "permission denied: {who} may not {action} {node} (grant `{action}` on {node} in the policy, then `ferry security create-permissions`)"
            ));
        }
        self.would_deny.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "security permissive: {who} may not {action} {node}; allowed anyway (enforce would refuse)"
        );
        Ok(())
    }

    /// What signed discovery needs: this identity, and whether plain
    /// peers are refused.
    pub fn discovery_auth(&self) -> ferry_discovery::Auth {
        ferry_discovery::Auth {
            identity: self.identity.clone(),
            enforce: self.mode == Mode::Enforce,
        }
    }

    /// Whether this runtime may create a port of `kind` on `name` (fully
    /// qualified). Ferry's own `/_ferry/…` services are governed by the
    /// `admin` and `monitor` grants where they are called, not here.
    pub fn check_port(&self, kind: EndpointKind, name: &str) -> Result<(), BuildError> {
        if ferry_security::is_internal(name) {
            return Ok(());
        }
        let action = ferry_discovery::action_of(kind);
        if self.identity.grants().allows(action, name) {
            return Ok(());
        }
        if self.mode == Mode::Enforce {
            return Err(BuildError::PermissionDenied {
                enclave: self.identity.enclave().into(),
                action,
                name: name.into(),
            });
        }
        self.would_deny.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "security permissive: enclave {} may not {action} `{name}`; allowed anyway (enforce would refuse)",
            self.identity.enclave()
        );
        Ok(())
    }
}
