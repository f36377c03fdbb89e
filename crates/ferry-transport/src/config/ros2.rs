//! The `[ros2]` section: ferry's ports also as DDS endpoints, so ROS 2
//! nodes (rmw_fastrtps, rmw_cyclonedds) exchange messages with them.
//!
//! ```toml
//! [ros2]                     # or FERRY_ROS2=1 (FERRY_ROS2=0 turns it off)
//! domain = 0                 # DDS domain; default: domain_id (ROS_DOMAIN_ID)
//! enclave = "/"              # participant user data `enclave=/;`
//! discovery_range = "subnet" # ROS_AUTOMATIC_DISCOVERY_RANGE: subnet, localhost, off, system_default
//! static_peers = []          # ROS_STATIC_PEERS: hosts DDS discovery also asks
//! [[topics]]
//! pattern = "/camera/*"
//! ros2 = false               # these topics stay off DDS
//! ```

use serde::Deserialize;

use super::ConfigError;

/// How far DDS discovery looks (ROS 2's `ROS_AUTOMATIC_DISCOVERY_RANGE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DiscoveryRange {
    /// Multicast on the local subnet (ROS 2's default).
    #[default]
    Subnet,
    /// Only this host.
    Localhost,
    /// No automatic discovery: only `static_peers`.
    Off,
    /// Whatever the DDS configuration says (`CYCLONEDDS_URI`).
    SystemDefault,
}

impl std::str::FromStr for DiscoveryRange {
    type Err = ();
    /// ROS 2's spelling (`SUBNET`, `LOCALHOST`, `OFF`, `SYSTEM_DEFAULT`), any case.
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.trim().to_ascii_uppercase().as_str() {
            "SUBNET" => Ok(Self::Subnet),
            "LOCALHOST" => Ok(Self::Localhost),
            "OFF" => Ok(Self::Off),
            "SYSTEM_DEFAULT" => Ok(Self::SystemDefault),
            _ => Err(()),
        }
    }
}

/// `[ros2]`: the DDS path to ROS 2 nodes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Ros2Config {
    /// The DDS domain; `None`: the runtime's `domain_id` (which follows
    /// `ROS_DOMAIN_ID`).
    pub domain: Option<u16>,
    /// The security enclave named in the participant's user data.
    pub enclave: String,
    /// How far DDS discovery looks (`ROS_AUTOMATIC_DISCOVERY_RANGE`).
    pub discovery_range: DiscoveryRange,
    /// Hosts DDS discovery asks besides its range (`ROS_STATIC_PEERS`,
    /// `;`-separated there).
    pub static_peers: Vec<String>,
}

impl Default for Ros2Config {
    fn default() -> Self {
        Ros2Config {
            domain: None,
            enclave: "/".into(),
            discovery_range: DiscoveryRange::Subnet,
            static_peers: Vec::new(),
        }
    }
}

impl Ros2Config {
    /// ROS 2's own variables on top: `ROS_AUTOMATIC_DISCOVERY_RANGE`,
    /// `ROS_STATIC_PEERS` (as rcl reads them: empty means unset).
    pub fn apply_env(&mut self) -> Result<(), ConfigError> {
        if let Ok(v) = std::env::var("ROS_AUTOMATIC_DISCOVERY_RANGE") {
            if !v.trim().is_empty() {
                self.discovery_range = v.parse().map_err(|_| ConfigError::Env {
                    var: "ROS_AUTOMATIC_DISCOVERY_RANGE",
                    value: v.clone(),
                    expected: "SUBNET, LOCALHOST, OFF or SYSTEM_DEFAULT",
                })?;
            }
        }
        if let Ok(v) = std::env::var("ROS_STATIC_PEERS") {
            let peers: Vec<String> = v
                .split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            if !peers.is_empty() {
                self.static_peers = peers;
            }
        }
        Ok(())
    }

    /// Checks the section; errors name the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.domain.is_some_and(|d| d > super::MAX_DOMAIN_ID) {
            return Err(ConfigError::Invalid {
                key: "ros2.domain",
                why: format!(
                    "{:?} is above the maximum {}",
                    self.domain,
                    super::MAX_DOMAIN_ID
                ),
            });
        }
        if !self.enclave.starts_with('/') || self.enclave.contains([';', '=', '\0']) {
            return Err(ConfigError::Invalid {
                key: "ros2.enclave",
                why: format!(
                    "`{}` is not an absolute name without `;`, `=`",
                    self.enclave
                ),
            });
        }
        for p in &self.static_peers {
            let bad = p.is_empty()
                || p.len() > 253
                || !p
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-:[]_".contains(c));
            if bad {
                return Err(ConfigError::Invalid {
                    key: "ros2.static_peers",
                    why: format!("`{p}` is not a host name or address"),
                });
            }
        }
        Ok(())
    }
}
