//! The `[zenoh]` section: ferry's ports also as Zenoh publishers and
//! subscribers with rmw_zenoh's conventions, so ROS 2 nodes on rmw_zenoh
//! see and talk to ferry's nodes, and ferry runtimes that ferry's own
//! discovery does not reach (other sites, a fleet) meet through Zenoh
//! routers (`docs/ZENOH.md`).
//!
//! ```toml
//! [zenoh]                            # or FERRY_ZENOH=1 (FERRY_ZENOH=0 turns it off)
//! mode = "peer"                      # peer, client or router
//! connect = ["tcp/localhost:7447"]   # routers or peers (FERRY_ZENOH_CONNECT=a,b); rmw_zenoh's default
//! listen = []                        # default: peer tcp/localhost:0, router tcp/localhost:7447
//! domain = 0                         # ROS domain in the key expressions; default: [ros2] domain, else domain_id
//! enclave = "/"                      # the enclave chunk of the liveliness tokens
//! multicast_scouting = false         # rmw_zenoh's default: off
//! [zenoh.tls]                        # endpoints `tls/host:port`
//! root_ca = "ca.pem"
//! cert = "me.pem"                    # with key: this side's certificate (mTLS)
//! key = "me.key"
//! mtls = false                       # mutual: listeners ask for a certificate, connecting
//!                                    # sides present theirs (set it on both ends)
//! [zenoh.auth]                       # Zenoh's user/password authentication
//! user = "robot1"                    # with password_file: the name this session presents
//! password_file = "robot1.pass"      # its password (the file's first line)
//! dictionary_file = "users.txt"      # a router's list of who may connect: `user:password`
//!                                    # per line; a session with one refuses everyone else
//! [[topics]]
//! pattern = "/camera/*"
//! zenoh = false                      # these topics stay off Zenoh
//! [[topics]]
//! pattern = "/fleet/*"
//! transport = "zenoh"                # only Zenoh between runtimes (a runtime's own
//!                                    # subscribers keep the in-process path)
//! ```
//!
//! Without a pin, a topic is on Zenoh but a publisher puts a sample only
//! for the subscriptions its own paths do not reach (ROS 2 nodes on
//! rmw_zenoh, ferry runtimes at other sites): a pair that ferry's own
//! discovery joins keeps its faster path.
//!
//! Defaults are rmw_zenoh's (Jazzy): a peer that connects to a router on
//! this host, listens on loopback only, and scouts nothing; a router mode
//! listens on loopback unless `listen` says otherwise (a default must not
//! open a port to the LAN).

use std::path::PathBuf;

use serde::Deserialize;

use super::ConfigError;

/// The role of the Zenoh session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A peer (rmw_zenoh's nodes are peers): talks to routers and, through
    /// gossip, directly to other peers.
    #[default]
    Peer,
    /// A client: everything through one router.
    Client,
    /// A router (like `zenohd`): other sessions connect to it.
    Router,
}

impl Mode {
    /// Zenoh's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Peer => "peer",
            Mode::Client => "client",
            Mode::Router => "router",
        }
    }
}

/// `[zenoh.tls]`: TLS on `tls/…` endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ZenohTls {
    /// CA certificates (PEM) the other side's certificate must chain to.
    pub root_ca: PathBuf,
    /// This side's certificate chain (PEM), for listening and for mTLS.
    pub cert: Option<PathBuf>,
    /// Its private key (PEM).
    pub key: Option<PathBuf>,
    /// Mutual TLS, on both ends as Zenoh has it: a listener requires the
    /// connecting side's certificate, and a connecting side presents its
    /// own (`cert`, `key`) — which it does only with `mtls` on.
    #[serde(default)]
    pub mtls: bool,
}

/// `[zenoh.auth]`: Zenoh's user/password authentication (`usrpwd`), checked
/// in the session's handshake. A listening session with a `dictionary_file`
/// admits only sessions that present one of its users; a connecting session
/// presents `user` and the password read from `password_file` (kept out of
/// the configuration, so the file can be a secret mounted on its own).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ZenohAuth {
    /// The user this session presents when it connects.
    pub user: Option<String>,
    /// The file whose first line is `user`'s password.
    pub password_file: Option<PathBuf>,
    /// Who may connect to this session: `user:password` per line.
    pub dictionary_file: Option<PathBuf>,
}

impl ZenohAuth {
    /// The password: `password_file`'s first line (`None` without a file).
    pub fn password(&self) -> Result<Option<String>, ConfigError> {
        let Some(path) = &self.password_file else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Invalid {
            key: "zenoh.auth.password_file",
            why: format!("cannot read {}: {e}", path.display()),
        })?;
        match text.lines().next().filter(|l| !l.is_empty()) {
            Some(line) => Ok(Some(line.to_string())),
            None => Err(ConfigError::Invalid {
                key: "zenoh.auth.password_file",
                why: format!("{} has no password on its first line", path.display()),
            }),
        }
    }
}

/// `[zenoh]`: the Zenoh path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZenohConfig {
    /// Peer, client or router.
    pub mode: Mode,
    /// Endpoints to connect to (`tcp/host:7447`, `tls/host:7447`).
    pub connect: Vec<String>,
    /// Endpoints to listen on; empty: [`ZenohConfig::listen_endpoints`].
    pub listen: Vec<String>,
    /// The ROS domain in key expressions and tokens; `None`: `[ros2]`'s
    /// domain, else the runtime's `domain_id`.
    pub domain: Option<u16>,
    /// The enclave chunk of the liveliness tokens.
    pub enclave: String,
    /// Zenoh's multicast scouting (rmw_zenoh turns it off).
    pub multicast_scouting: bool,
    /// TLS for `tls/` endpoints.
    pub tls: Option<ZenohTls>,
    /// User/password authentication.
    pub auth: Option<ZenohAuth>,
}

/// rmw_zenoh's router endpoint on this host.
pub const DEFAULT_ROUTER: &str = "tcp/localhost:7447";

impl Default for ZenohConfig {
    fn default() -> Self {
        ZenohConfig {
            mode: Mode::Peer,
            connect: vec![DEFAULT_ROUTER.into()],
            listen: Vec::new(),
            domain: None,
            enclave: "/".into(),
            multicast_scouting: false,
            tls: None,
            auth: None,
        }
    }
}

impl ZenohConfig {
    /// Where the session listens: `listen`, else loopback only (a peer on
    /// any port, as rmw_zenoh; a router on 7447).
    pub fn listen_endpoints(&self) -> Vec<String> {
        if !self.listen.is_empty() {
            return self.listen.clone();
        }
        match self.mode {
            Mode::Peer => vec!["tcp/localhost:0".into()],
            Mode::Client => Vec::new(),
            Mode::Router => vec![DEFAULT_ROUTER.into()],
        }
    }

    /// `FERRY_ZENOH_CONNECT` (comma-separated endpoints) on top.
    pub fn apply_env(&mut self) -> Result<(), ConfigError> {
        if let Ok(v) = std::env::var("FERRY_ZENOH_CONNECT") {
            self.connect = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
        }
        Ok(())
    }

    /// Checks the section; errors name the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key, why: String| Err(ConfigError::Invalid { key, why });
        if self.domain.is_some_and(|d| d > super::MAX_DOMAIN_ID) {
            return bad(
                "zenoh.domain",
                format!(
                    "{:?} is above the maximum {}",
                    self.domain,
                    super::MAX_DOMAIN_ID
                ),
            );
        }
        if !self.enclave.starts_with('/') || self.enclave.contains(['%', '*', '$', '#', '?']) {
            return bad(
                "zenoh.enclave",
                format!(
                    "`{}` is not an absolute name without `%`, `*`, `$`, `#`, `?`",
                    self.enclave
                ),
            );
        }
        for (key, list) in [
            ("zenoh.connect", &self.connect),
            ("zenoh.listen", &self.listen),
        ] {
            for e in list {
                let Some((proto, addr)) = e.split_once('/') else {
                    return bad(
                        key,
                        format!("`{e}` is not `tcp/host:port` or `tls/host:port`"),
                    );
                };
                if !matches!(proto, "tcp" | "tls") || !addr.contains(':') {
                    return bad(
                        key,
                        format!(
                            "`{e}`: ferry's Zenoh speaks `tcp/host:port` and `tls/host:port` \
                             (rmw_zenoh's default is TCP)"
                        ),
                    );
                }
                if proto == "tls" && self.tls.is_none() {
                    return bad(key, format!("`{e}` needs a `[zenoh.tls]` section"));
                }
            }
        }
        if self.mode == Mode::Client && self.connect.is_empty() {
            return bad(
                "zenoh.connect",
                "a client needs a router to connect to".into(),
            );
        }
        if let Some(a) = &self.auth {
            if a.user.is_some() != a.password_file.is_some() {
                return bad(
                    "zenoh.auth",
                    "`user` and `password_file` go together (the name this side presents \
                     and its password)"
                        .into(),
                );
            }
            if a.user.is_none() && a.dictionary_file.is_none() {
                return bad(
                    "zenoh.auth",
                    "give `user` and `password_file` (to connect) or `dictionary_file` \
                     (who may connect), or both"
                        .into(),
                );
            }
            if a.user
                .as_deref()
                .is_some_and(|u| u.is_empty() || u.contains(':'))
            {
                return bad(
                    "zenoh.auth.user",
                    "a user is a non-empty name without `:`".into(),
                );
            }
        }
        if let Some(t) = &self.tls {
            if t.cert.is_some() != t.key.is_some() {
                return bad(
                    "zenoh.tls",
                    "`cert` and `key` go together (this side's certificate and its key)".into(),
                );
            }
            if t.mtls && t.cert.is_none() {
                return bad(
                    "zenoh.tls.mtls",
                    "mutual TLS needs this side's `cert` and `key` too".into(),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ZenohConfig, String> {
        let c: ZenohConfig = toml::from_str(s).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn defaults_are_rmw_zenohs_and_listen_on_loopback() {
        let c = parse("").unwrap();
        assert_eq!(c.mode, Mode::Peer);
        assert_eq!(c.connect, vec![DEFAULT_ROUTER.to_string()]);
        assert_eq!(c.listen_endpoints(), vec!["tcp/localhost:0".to_string()]);
        assert!(!c.multicast_scouting);
        let r = parse("mode = \"router\"\nconnect = []\n").unwrap();
        assert_eq!(r.listen_endpoints(), vec![DEFAULT_ROUTER.to_string()]);
    }

    #[test]
    fn errors_name_the_key() {
        for (text, key) in [
            ("mdoe = \"peer\"", "mdoe"),
            ("connect = [\"udp/1.2.3.4:7447\"]", "zenoh.connect"),
            ("listen = [\"tcp/nowhere\"]", "zenoh.listen"),
            ("connect = [\"tls/r:7447\"]", "zenoh.connect"),
            ("mode = \"client\"\nconnect = []", "zenoh.connect"),
            ("domain = 300", "zenoh.domain"),
            ("enclave = \"x\"", "zenoh.enclave"),
            ("[tls]\nroot_ca = \"ca\"\ncert = \"c\"", "zenoh.tls"),
            ("[tls]\nroot_ca = \"ca\"\nmtls = true", "zenoh.tls.mtls"),
            ("[auth]\nuser = \"r1\"", "zenoh.auth"),
            ("[auth]\n", "zenoh.auth"),
            (
                "[auth]\nuser = \"a:b\"\npassword_file = \"p\"",
                "zenoh.auth.user",
            ),
            (
                "[auth]\nuser = \"r1\"\npasword_file = \"p\"",
                "pasword_file",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(key), "{text}: {e}");
        }
        let tls = parse("connect = [\"tls/r:7447\"]\n[tls]\nroot_ca = \"ca\"\n").unwrap();
        assert_eq!(tls.tls.unwrap().root_ca, PathBuf::from("ca"));
    }

    #[test]
    fn a_password_is_the_first_line_of_its_file_and_a_missing_file_names_the_key() {
        let dir = std::env::temp_dir().join(format!("ferry-zenoh-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("robot1.pass");
        std::fs::write(&file, "s3cret\n").unwrap();
        let auth = |f: &std::path::Path| ZenohAuth {
            user: Some("robot1".into()),
            password_file: Some(f.to_path_buf()),
            dictionary_file: None,
        };
        assert_eq!(auth(&file).password().unwrap().as_deref(), Some("s3cret"));
        std::fs::write(&file, "\n").unwrap();
        let e = auth(&file).password().unwrap_err().to_string();
        assert!(e.contains("zenoh.auth.password_file"), "{e}");
        let e = auth(&dir.join("missing"))
            .password()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("zenoh.auth.password_file") && e.contains("missing"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
