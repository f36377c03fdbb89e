//! `[security]`: who this runtime is and how strictly it checks
//! (`FERRY_SECURITY`, `FERRY_KEYSTORE`, `FERRY_ENCLAVE`, like ROS 2's
//! `ROS_SECURITY_*` and `--enclave`).
//!
//! ```toml
//! [security]
//! mode = "enforce"              # off (default) | permissive | enforce
//! keystore = "/etc/ferry/ks"    # made by `ferry security create-keystore`
//! enclave = "/robot1/talker"    # default: the keystore's only enclave
//! udp_rekey_s = 120             # protected UDP: a new handshake this often
//! tcp_rekey_s = 120             # TLS on TCP: a TLS 1.3 key update this often
//! ```

use std::path::PathBuf;

use ferry_security::Mode;
use serde::Deserialize;

use super::ConfigError;

/// The `[security]` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityConfig {
    /// `off` (default): nothing is loaded or checked. `permissive`: the
    /// identity is loaded when there is one, and what its grants would
    /// refuse is logged and counted. `enforce`: an identity is required and
    /// its grants are enforced.
    pub mode: Mode,
    /// The keystore (`FERRY_KEYSTORE`).
    pub keystore: Option<PathBuf>,
    /// This runtime's enclave (`FERRY_ENCLAVE`); default: the keystore's
    /// only one.
    pub enclave: Option<String>,
    /// Protected UDP renews each session's keys with a new handshake this
    /// often, seconds (1–3600; default 120, as WireGuard).
    pub udp_rekey_s: Option<u32>,
    /// TLS connections (TCP) renew their traffic keys with a TLS 1.3 key
    /// update this often while they carry data, seconds (1–3600; default
    /// 120). rustls also renews them by volume, before the cipher's limit.
    pub tcp_rekey_s: Option<u32>,
}

impl SecurityConfig {
    /// How often TLS connections renew their keys (`tcp_rekey_s`).
    pub fn tcp_rekey(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(self.tcp_rekey_s.unwrap_or(120)))
    }
}

impl SecurityConfig {
    /// `FERRY_SECURITY`, `FERRY_KEYSTORE` and `FERRY_ENCLAVE` over the file.
    pub(crate) fn apply_env(&mut self) -> Result<(), ConfigError> {
        if let Ok(v) = std::env::var("FERRY_SECURITY") {
            self.mode = v.parse().map_err(|_| ConfigError::Env {
                var: "FERRY_SECURITY",
                value: v,
                expected: "off, permissive or enforce",
            })?;
        }
        if let Some(v) = std::env::var_os("FERRY_KEYSTORE").filter(|v| !v.is_empty()) {
            self.keystore = Some(PathBuf::from(v));
        }
        if let Ok(v) = std::env::var("FERRY_ENCLAVE") {
            self.enclave = Some(v).filter(|v| !v.is_empty());
        }
        Ok(())
    }

    /// An enforcing runtime needs a keystore; an enclave must be a path.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.mode == Mode::Enforce && self.keystore.is_none() {
            return Err(ConfigError::Invalid {
                key: "security.keystore",
                why: "security mode enforce needs a keystore: set FERRY_KEYSTORE or [security] keystore (make one with `ferry security create-keystore`)".into(),
            });
        }
        if let Some(e) = &self.enclave {
            ferry_security::check_enclave(e).map_err(|e| ConfigError::Invalid {
                key: "security.enclave",
                why: e.to_string(),
            })?;
        }
        for (key, v) in [
            ("security.udp_rekey_s", self.udp_rekey_s),
            ("security.tcp_rekey_s", self.tcp_rekey_s),
        ] {
            if v.is_some_and(|s| !(1..=3600).contains(&s)) {
                return Err(ConfigError::Invalid {
                    key,
                    why: "between 1 and 3600 seconds".into(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use ferry_security::Mode;

    #[test]
    fn the_security_section_is_typed_and_strict() {
        let c: Config = toml::from_str(
            "[security]\nmode = \"enforce\"\nkeystore = \"/etc/ferry/ks\"\nenclave = \"/robot1/talker\"\n",
        )
        .unwrap();
        assert_eq!(c.security.mode, Mode::Enforce);
        assert_eq!(c.security.enclave.as_deref(), Some("/robot1/talker"));
        assert!(c.validate().is_ok());
        let e = toml::from_str::<Config>("[security]\nmode = \"strict\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("strict"), "{e}");
        let e = toml::from_str::<Config>("[security]\nkeystor = \"/x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("keystor"), "{e}");
        let c: Config = toml::from_str("[security]\nmode = \"enforce\"\n").unwrap();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("security.keystore"));
        let c: Config = toml::from_str("[security]\nenclave = \"robot\"\n").unwrap();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("security.enclave"));
    }
}
