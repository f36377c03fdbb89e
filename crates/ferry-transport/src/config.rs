//! Typed, strict configuration: defaults, then a TOML file named by
//! `FERRY_CONFIG`, then the `FERRY_*` environment variables. Unknown keys
//! are errors that name the key.
//!
//! ```toml
//! domain_id = 3
//! discovery = "subnet"          # localhost | subnet | off
//! peers = ["10.0.0.2", "10.0.0.3:7449"]  # host: its 8 unicast ports; host:port
//! lease_ms = 3000
//! [[topics]]
//! pattern = "/camera/*"
//! transport = "tcp"
//! [security]                    # see `security::SecurityConfig`
//! mode = "enforce"
//! keystore = "/etc/ferry/ks"
//! ```

pub mod mqtt;
pub mod ros2;
pub mod security;
pub mod zenoh;

use std::path::PathBuf;
use std::str::FromStr;

use ferry_wire::TransportKind;

use crate::priority::{PacketClass, Priority, ThreadPolicy};
use serde::{Deserialize, Deserializer};

/// Largest domain id: keeps every discovery port below 11 200.
pub const MAX_DOMAIN_ID: u16 = 232;

/// A configuration problem; the message names the key or variable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not valid (unknown key, wrong type, bad syntax).
    #[error("config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, naming the key.
        message: String,
    },
    /// An environment variable has a value ferry cannot use.
    #[error("environment variable {var}={value:?} is invalid: expected {expected}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What would be valid.
        expected: &'static str,
    },
    /// A value is out of range.
    #[error("config key `{key}`: {why}")]
    Invalid {
        /// The key.
        key: &'static str,
        /// What is wrong.
        why: String,
    },
}

/// Which machines discovery reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiscoveryRange {
    /// This host only: multicast on the loopback interface, never sent out.
    Localhost,
    /// The local subnets: multicast (TTL 1) on every interface.
    Subnet,
    /// No automatic discovery: only static peers and this process.
    Off,
}

impl FromStr for DiscoveryRange {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.to_ascii_lowercase().as_str() {
            "localhost" => Ok(Self::Localhost),
            "subnet" => Ok(Self::Subnet),
            "off" => Ok(Self::Off),
            _ => Err(()),
        }
    }
}

/// Settings of every topic whose name matches `pattern`: a pinned
/// transport and/or the priority its publishers' connections start with.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TopicRule {
    /// Topic name with `*` wildcards, e.g. `/camera/*`.
    pub pattern: String,
    /// The transport to use.
    #[serde(default, deserialize_with = "de_transport")]
    pub transport: Option<TransportKind>,
    /// Packet class of the connections: low, normal, high, critical, dscp:N.
    #[serde(default)]
    pub priority: Option<PacketClass>,
    /// Thread policy of a dedicated sender thread: fifo:N, rr:N, nice:N.
    #[serde(default)]
    pub sched: Option<ThreadPolicy>,
    /// `cloud`: the topic also travels through the `[mqtt]` broker.
    #[serde(default)]
    pub scope: Option<mqtt::Scope>,
    /// Payload format on the broker: cdr (default) or json.
    #[serde(default)]
    pub encoding: Option<mqtt::Encoding>,
    /// MQTT QoS override (0, 1, 2); default: best_effort → 0, reliable → 1.
    #[serde(default)]
    pub mqtt_qos: Option<u8>,
    /// `false`: the topic stays off DDS when `[ros2]` is on (default: on it).
    #[serde(default)]
    pub ros2: Option<bool>,
    /// `false`: the topic stays off Zenoh when `[zenoh]` is on (default: on it).
    #[serde(default)]
    pub zenoh: Option<bool>,
}

fn de_transport<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TransportKind>, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map(Some).map_err(serde::de::Error::custom)
}

/// Who may use a node's admin plane (`FERRY_ADMIN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AdminAccess {
    /// No admin service at all.
    Off,
    /// Reading is open; changes only from processes on this host.
    #[default]
    Local,
    /// Reading and changes from anywhere in the domain.
    Open,
}

impl FromStr for AdminAccess {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s.to_ascii_lowercase().as_str() {
            "off" => Ok(Self::Off),
            "local" => Ok(Self::Local),
            "open" => Ok(Self::Open),
            _ => Err(()),
        }
    }
}

/// Runtime configuration. See the module docs for the file format.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Discovery domain (`FERRY_DOMAIN_ID`); runtimes only see their domain.
    pub domain_id: u16,
    /// Discovery range (`FERRY_DISCOVERY`). Default `localhost`: nothing leaves
    /// the host until you say `subnet`.
    pub discovery: DiscoveryRange,
    /// Static peers (`FERRY_PEERS=host[:port],…`) for networks where multicast
    /// is blocked or floods (Wi-Fi, VPN).
    pub peers: Vec<String>,
    /// Lease in ms: a crashed process disappears from peers within this.
    pub lease_ms: u32,
    /// Largest frame accepted from a peer on a stream transport (bytes).
    pub max_frame_bytes: usize,
    /// How long a reliable keep_all publisher may block on a slow subscriber.
    pub keep_all_block_ms: u64,
    /// UDP path: rate of the link to pace to, Mbit/s (default 300, an
    /// 802.11ac link's effective rate).
    pub udp_link_mbps: u64,
    /// UDP path: share of the link this traffic may use, percent (history
    /// is one second of that: the seed paper's N_HC in bytes).
    pub udp_utilization_pct: u8,
    /// UDP path: history bound in MiB per stream, overriding the one
    /// second of link above (e.g. sized to ride out an outage without
    /// blocking a keep_all writer: 20 s × 30 Hz × 256 KB ≈ 150 MiB).
    pub udp_history_mb: Option<u32>,
    /// UDP path: largest datagram (UDP payload, bytes; 1472 fits a 1500 B MTU).
    pub udp_mtu: u16,
    /// UDP path: forward error correction (Reed–Solomon recovery shards for
    /// samples of ≥ 4 fragments, sized to the loss the reader reports; none
    /// while it reports < 0.5 %). Default on.
    pub udp_fec: bool,
    /// UDP path: follow the path's rate. `udp_link_mbps` becomes a cap;
    /// the paced rate is found from the reader's feedback (see
    /// `udp_congestion_model`); random loss is not taken for congestion.
    /// Off: always pace at `udp_link_mbps`. Default on.
    pub udp_adaptive_rate: bool,
    /// UDP path, with `udp_adaptive_rate`: the congestion model of
    /// `ferry-rudp`'s `cc.rs` — start-up from 32 Mbit/s, cuts when a queue
    /// stands and grows, random loss corrected — once the reader sends
    /// arrival marks (ferry ≥ 0.1 with issue 20). Off: the older rule that
    /// only cuts to the reader's receive rate when it falls under 0.35 ×
    /// the paced rate. Default on.
    pub udp_congestion_model: bool,
    /// UDP path: largest datagram per interface name (`wlan0 = 1400`,
    /// `eth1 = 8972` for jumbo frames). Whatever is configured, a datagram
    /// never exceeds the interface's own MTU minus 28 B of headers.
    pub udp_mtu_per_interface: std::collections::BTreeMap<String, u16>,
    /// Per-topic transport pins and priorities.
    pub topics: Vec<TopicRule>,
    /// Dedicated priority sender threads allowed per process.
    pub priority_threads: usize,
    /// Admin plane access (`FERRY_ADMIN`): off, local (default), open.
    pub admin: AdminAccess,
    /// Shared memory between processes on this host (`FERRY_SHM=off` to
    /// disable). Default on; unavailable shared memory falls back to the
    /// network with a warning.
    pub shared_memory: bool,
    /// Shared memory: the reader's delivery thread spins instead of
    /// sleeping on its doorbell (lowest latency, one busy core).
    pub shm_busy_poll: bool,
    /// Shared memory, event-driven mode: the longest the delivery thread
    /// polls its rings after they run dry before it sleeps on its doorbell
    /// (µs; 0 = sleep at once). Adaptive: it spins only while samples keep
    /// arriving within this window (a reply in a ping-pong, a burst), and
    /// stops spinning for streams whose samples come further apart, so an
    /// idle or slow reader costs no CPU.
    pub shm_spin_us: u32,
    /// Shared memory: most bytes of slots one publisher may hold (MiB).
    pub shm_pool_mb: u32,
    /// Join this host's leader election (`FERRY_HOST_LEADER=on`): the ferry
    /// runtimes of a host (same machine, IPC and network namespace, same
    /// user) elect one of them, and another takes over when it exits or is
    /// killed (`ferry_transport::leader`). The leader relays forwarded
    /// streams (`transport = "fwd"`) to the readers of the runtimes that
    /// follow it, over shared memory (`docs/FORWARDER.md`); joining is a
    /// runtime's consent to be served so (`ferry doctor` shows the role).
    /// Default off.
    pub host_leader: bool,
    /// Whether this runtime may lead its host's election, not only follow
    /// (not a file key: tools that come and go, such as the `ferry` CLI,
    /// follow only, so that their exit never moves the host's streams).
    /// Default true.
    #[serde(skip)]
    pub host_leader_may_lead: bool,
    /// With `host_leader`: the leader alone listens to the discovery group
    /// for its host and feeds every datagram it accepts to the runtimes
    /// that follow it, which leave the group (`FERRY_HOST_DISCOVERY=on`).
    /// A host's kernel then copies each discovery datagram once instead of
    /// once per runtime, and nobody greets a fed runtime (it hears of
    /// newcomers through its leader). Every runtime still checks each
    /// datagram itself (ownership, signatures). Default off, experimental:
    /// a fleet of 10 hosts × 20 runtimes completes 3× sooner, but 50 × 20
    /// did not complete in 150 s and idle CPU is higher
    /// (`docs/design/host-discovery.md`, "Stage 0").
    pub host_discovery: bool,
    /// How many matched subscribers of one publisher on one remote host
    /// make the publisher send to that host once, through the host's
    /// leader, instead of once per subscriber (`FERRY_FORWARD_THRESHOLD`;
    /// default 2; 0 = only pinned topics are forwarded). Counted are the
    /// subscribers whose runtime joined its host's election
    /// (`host_leader`) and whose pair no one pinned to a transport.
    pub forward_threshold: u32,
    /// Host streams (one per publisher and remote host, to the host's
    /// leader) over UDP, the lossy-link protocol, instead of TCP
    /// (`FERRY_FORWARD_UDP=on`). Default off: on a wired link TCP's stream
    /// reached the leader sooner (ferry's UDP paces large samples;
    /// `bench/results/forwarder-udp-stream.md`); on a lossy wireless link
    /// UDP does not stall the whole stream behind one lost segment.
    pub forward_udp: bool,
    /// The MQTT broker of cloud-scope topics (`FERRY_MQTT=url`).
    pub mqtt: Option<mqtt::MqttConfig>,
    /// DDS to ROS 2 nodes (`FERRY_ROS2=1`): every port also a DDS endpoint
    /// with ROS 2's names and QoS (`docs/DDS.md`).
    pub ros2: Option<ros2::Ros2Config>,
    /// Zenoh to ROS 2 nodes on rmw_zenoh and to ferry runtimes beyond
    /// ferry's discovery (`FERRY_ZENOH=1`, `docs/ZENOH.md`).
    pub zenoh: Option<zenoh::ZenohConfig>,
    /// Identity and access control (`FERRY_SECURITY`, `FERRY_KEYSTORE`,
    /// `FERRY_ENCLAVE`).
    pub security: security::SecurityConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            domain_id: 0,
            discovery: DiscoveryRange::Localhost,
            peers: Vec::new(),
            lease_ms: 3000,
            max_frame_bytes: 256 << 20,
            keep_all_block_ms: 1000,
            udp_link_mbps: 300,
            udp_utilization_pct: 60,
            udp_history_mb: None,
            udp_mtu: 1472,
            udp_fec: true,
            udp_adaptive_rate: true,
            udp_congestion_model: true,
            udp_mtu_per_interface: Default::default(),
            topics: Vec::new(),
            priority_threads: 8,
            admin: AdminAccess::Local,
            shared_memory: true,
            shm_busy_poll: false,
            shm_spin_us: 50,
            shm_pool_mb: 1024,
            host_leader: false,
            host_leader_may_lead: true,
            host_discovery: false,
            forward_threshold: 2,
            forward_udp: false,
            mqtt: None,
            ros2: None,
            zenoh: None,
            security: Default::default(),
        }
    }
}

/// An optional section turned on (its defaults, or as the file set it)
/// or off by the variable `var` (`on`/`1`/`true`, `off`/`0`/`false`).
fn switch_section<T: Default>(
    section: &mut Option<T>,
    var: &'static str,
) -> Result<(), ConfigError> {
    let Ok(v) = std::env::var(var) else {
        return Ok(());
    };
    match v.as_str() {
        "on" | "1" | "true" => {
            section.get_or_insert_with(Default::default);
        }
        "off" | "0" | "false" => *section = None,
        _ => {
            return Err(ConfigError::Env {
                var,
                value: v,
                expected: "on or off",
            })
        }
    }
    Ok(())
}

/// Where the domain id of [`Config::from_env`] comes from: `FERRY_DOMAIN_ID`,
/// else `ROS_DOMAIN_ID`, else the `FERRY_CONFIG` file or the default (0).
/// Tools print it next to the domain ("domain 5 from ROS_DOMAIN_ID").
pub fn domain_source() -> &'static str {
    if std::env::var_os("FERRY_DOMAIN_ID").is_some() {
        "FERRY_DOMAIN_ID"
    } else if std::env::var_os("ROS_DOMAIN_ID").is_some() {
        "ROS_DOMAIN_ID"
    } else if std::env::var_os("FERRY_CONFIG").is_some_and(|p| !p.is_empty()) {
        "FERRY_CONFIG"
    } else {
        "the default"
    }
}

impl Config {
    /// Defaults, overridden by `FERRY_CONFIG`'s file and `FERRY_*` variables
    /// (the domain also by ROS 2's `ROS_DOMAIN_ID` when `FERRY_DOMAIN_ID`
    /// is unset: see [`domain_source`]).
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut cfg = match std::env::var_os("FERRY_CONFIG") {
            Some(p) if !p.is_empty() => Self::from_file(PathBuf::from(p))?,
            _ => Config::default(),
        };
        // FERRY_DOMAIN_ID, else ROS 2's ROS_DOMAIN_ID (one number for a
        // system where ferry and ROS 2 nodes live together).
        for var in ["FERRY_DOMAIN_ID", "ROS_DOMAIN_ID"] {
            if let Ok(v) = std::env::var(var) {
                cfg.domain_id = v.trim().parse().map_err(|_| ConfigError::Env {
                    var,
                    value: v.clone(),
                    expected: "an integer 0..=232",
                })?;
                break;
            }
        }
        if let Ok(v) = std::env::var("FERRY_FORWARD_THRESHOLD") {
            cfg.forward_threshold = v.trim().parse().map_err(|_| ConfigError::Env {
                var: "FERRY_FORWARD_THRESHOLD",
                value: v.clone(),
                expected: "a number of subscribers (0 = only pinned topics)",
            })?;
        }
        if let Ok(v) = std::env::var("FERRY_DISCOVERY") {
            cfg.discovery = v.parse().map_err(|_| ConfigError::Env {
                var: "FERRY_DISCOVERY",
                value: v.clone(),
                expected: "localhost, subnet or off",
            })?;
        }
        if let Ok(v) = std::env::var("FERRY_ADMIN") {
            cfg.admin = v.parse().map_err(|_| ConfigError::Env {
                var: "FERRY_ADMIN",
                value: v.clone(),
                expected: "off, local or open",
            })?;
        }
        for (var, field) in [
            ("FERRY_SHM", &mut cfg.shared_memory),
            ("FERRY_HOST_LEADER", &mut cfg.host_leader),
            ("FERRY_HOST_DISCOVERY", &mut cfg.host_discovery),
            ("FERRY_FORWARD_UDP", &mut cfg.forward_udp),
        ] {
            if let Ok(v) = std::env::var(var) {
                *field = match v.as_str() {
                    "on" | "1" | "true" => true,
                    "off" | "0" | "false" => false,
                    _ => {
                        return Err(ConfigError::Env {
                            var,
                            value: v.clone(),
                            expected: "on or off",
                        })
                    }
                };
            }
        }
        if let Ok(v) = std::env::var("FERRY_MQTT") {
            let url = v.parse().map_err(|_| ConfigError::Env {
                var: "FERRY_MQTT",
                value: v.clone(),
                expected: "mqtt://host[:port] or mqtt://embedded[:port]",
            })?;
            match &mut cfg.mqtt {
                Some(m) => m.broker = url,
                None => cfg.mqtt = Some(mqtt::MqttConfig::new(url)),
            }
        }
        if let Ok(v) = std::env::var("FERRY_MQTT_DISCOVERY") {
            let d = match v.as_str() {
                "auto" => mqtt::BrokerDiscovery::Auto,
                "on" => mqtt::BrokerDiscovery::On,
                "off" => mqtt::BrokerDiscovery::Off,
                _ => {
                    return Err(ConfigError::Env {
                        var: "FERRY_MQTT_DISCOVERY",
                        value: v.clone(),
                        expected: "auto, on or off",
                    })
                }
            };
            if let Some(m) = &mut cfg.mqtt {
                m.discovery = d;
            }
        }
        cfg.security.apply_env()?;
        switch_section(&mut cfg.ros2, "FERRY_ROS2")?;
        if let Some(r) = &mut cfg.ros2 {
            r.apply_env()?;
        }
        switch_section(&mut cfg.zenoh, "FERRY_ZENOH")?;
        if let Some(z) = &mut cfg.zenoh {
            z.apply_env()?;
        }
        if let Ok(v) = std::env::var("FERRY_PEERS") {
            cfg.peers = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads a TOML file strictly.
    pub fn from_file(path: PathBuf) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::File {
            path: path.clone(),
            source,
        })?;
        let cfg: Config = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path,
            message: e.to_string().trim_end().to_string(),
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.domain_id > MAX_DOMAIN_ID {
            return Err(ConfigError::Invalid {
                key: "domain_id",
                why: format!("{} is above the maximum {MAX_DOMAIN_ID}", self.domain_id),
            });
        }
        if !(100..=600_000).contains(&self.lease_ms) {
            return Err(ConfigError::Invalid {
                key: "lease_ms",
                why: format!("{} is outside 100..=600000", self.lease_ms),
            });
        }
        if self.max_frame_bytes < 1024 {
            return Err(ConfigError::Invalid {
                key: "max_frame_bytes",
                why: "must be at least 1024".into(),
            });
        }
        for p in &self.peers {
            self.peer_addrs_of(p)?;
        }
        if !(1..=100).contains(&self.udp_utilization_pct) {
            return Err(ConfigError::Invalid {
                key: "udp_utilization_pct",
                why: format!("{} is outside 1..=100", self.udp_utilization_pct),
            });
        }
        if self.forward_threshold > 1024 {
            return Err(ConfigError::Invalid {
                key: "forward_threshold",
                why: format!(
                    "{} is outside 0..=1024 (a host leader serves at most 1024 runtimes)",
                    self.forward_threshold
                ),
            });
        }
        if !(1..=65_536).contains(&self.shm_pool_mb) {
            return Err(ConfigError::Invalid {
                key: "shm_pool_mb",
                why: format!("{} is outside 1..=65536", self.shm_pool_mb),
            });
        }
        if self.shm_spin_us > 10_000 {
            return Err(ConfigError::Invalid {
                key: "shm_spin_us",
                why: format!(
                    "{} is above 10000 (spinning longer than 10 ms between samples is busy polling: set shm_busy_poll)",
                    self.shm_spin_us
                ),
            });
        }
        if self
            .udp_history_mb
            .is_some_and(|m| !(1..=4096).contains(&m))
        {
            return Err(ConfigError::Invalid {
                key: "udp_history_mb",
                why: format!("{:?} is outside 1..=4096", self.udp_history_mb),
            });
        }
        if !(576..=65_000).contains(&self.udp_mtu) {
            return Err(ConfigError::Invalid {
                key: "udp_mtu",
                why: format!("{} is outside 576..=65000", self.udp_mtu),
            });
        }
        for (name, m) in &self.udp_mtu_per_interface {
            if !(548..=65_000).contains(m) {
                return Err(ConfigError::Invalid {
                    key: "udp_mtu_per_interface",
                    why: format!("{name} = {m} is outside 548..=65000"),
                });
            }
        }
        if let Some(m) = &self.mqtt {
            m.validate()?;
        }
        if let Some(r) = &self.ros2 {
            r.validate()?;
        }
        if let Some(z) = &self.zenoh {
            z.validate()?;
        }
        self.security.validate()?;
        for r in &self.topics {
            if r.transport == Some(TransportKind::Dds) {
                return Err(ConfigError::Invalid {
                    key: "topics.transport",
                    why: format!(
                        "`dds` for `{}`: DDS carries a topic to ROS 2 nodes (`[ros2]`), never \
                         between ferry nodes; pin udp, tcp, shm or mqtt",
                        r.pattern
                    ),
                });
            }
            if r.transport == Some(TransportKind::Forwarded)
                && self.security.mode != ferry_security::Mode::Off
            {
                return Err(ConfigError::Invalid {
                    key: "topics.transport",
                    why: format!(
                        "`fwd` for `{}`: forwarding through a host leader is not built with \
                         security on (docs/FORWARDER.md); pin udp, tcp, shm, mqtt or zenoh",
                        r.pattern
                    ),
                });
            }
            if r.transport == Some(TransportKind::Zenoh) && self.zenoh.is_none() {
                return Err(ConfigError::Invalid {
                    key: "topics.transport",
                    why: format!(
                        "`zenoh` for `{}` needs the Zenoh path: add a `[zenoh]` section \
                         (or FERRY_ZENOH=1)",
                        r.pattern
                    ),
                });
            }
            if r.transport == Some(TransportKind::Zenoh) && r.zenoh == Some(false) {
                return Err(ConfigError::Invalid {
                    key: "topics.zenoh",
                    why: format!(
                        "`{}` is pinned to Zenoh and kept off it (`zenoh = false`): pick one",
                        r.pattern
                    ),
                });
            }
            if r.mqtt_qos.is_some_and(|q| q > 2) {
                return Err(ConfigError::Invalid {
                    key: "topics.mqtt_qos",
                    why: format!("{:?} for `{}` is not 0, 1 or 2", r.mqtt_qos, r.pattern),
                });
            }
        }
        if self.udp_link_mbps == 0 {
            return Err(ConfigError::Invalid {
                key: "udp_link_mbps",
                why: "must be at least 1".into(),
            });
        }
        Ok(())
    }

    /// Multicast port of the domain; unicast discovery ports follow it.
    pub fn discovery_port(&self) -> u16 {
        7400 + 16 * self.domain_id
    }

    /// How many unicast discovery ports per host a static peer is tried on.
    pub const UNICAST_PORTS: u16 = 8;

    /// The unicast discovery ports of the domain, in the order a runtime
    /// tries them: the [`UNICAST_PORTS`](Self::UNICAST_PORTS) ports after
    /// [`discovery_port`](Self::discovery_port) that are not one of DDS's
    /// two well-known multicast ports of any DDS domain (RTPS 9.6.1.1:
    /// 7400 + 250·d and 7401 + 250·d, which Cyclone and Fast DDS bind for
    /// every participant of domain d: a ferry socket there would keep a
    /// ROS 2 node — or ferry's own `[ros2]` path — off domain 0).
    pub fn unicast_discovery_ports(&self) -> impl Iterator<Item = u16> {
        let dds_multicast = |p: u16| matches!(p.checked_sub(7400), Some(o) if o % 250 < 2);
        (self.discovery_port() + 1..)
            .filter(move |&p| !dds_multicast(p))
            .take(Self::UNICAST_PORTS as usize)
    }

    /// The unicast addresses a static peer entry stands for: `host:port`, or
    /// `host` = every unicast discovery port of the domain on that host.
    pub fn peer_addrs_of(&self, entry: &str) -> Result<Vec<std::net::SocketAddr>, ConfigError> {
        use std::net::{SocketAddr, ToSocketAddrs};
        let err = || ConfigError::Invalid {
            key: "peers",
            why: format!("`{entry}` is not `host` or `host:port`"),
        };
        if let Ok(a) = entry.parse::<SocketAddr>() {
            return Ok(vec![a]);
        }
        if entry.contains(':') {
            return entry
                .to_socket_addrs()
                .map(|i| i.filter(|a| a.is_ipv4()).take(1).collect())
                .map_err(|_| err());
        }
        let ip = (entry, 0u16)
            .to_socket_addrs()
            .map_err(|_| err())?
            .find(|a| a.is_ipv4())
            .ok_or_else(err)?
            .ip();
        Ok(self
            .unicast_discovery_ports()
            .map(|port| SocketAddr::new(ip, port))
            .collect())
    }

    /// The transport pinned for `topic` by a rule, if any (first match wins).
    pub fn pinned_transport(&self, topic: &str) -> Option<TransportKind> {
        self.topics
            .iter()
            .filter(|r| glob(&r.pattern, topic))
            .find_map(|r| r.transport)
    }

    /// Whether this runtime announces itself through the broker: `[mqtt]
    /// discovery`, where `auto` means discovery is not off and a rule gives
    /// something the cloud scope.
    pub fn announces_through_broker(&self) -> bool {
        let Some(m) = &self.mqtt else {
            return false;
        };
        match m.discovery {
            mqtt::BrokerDiscovery::On => true,
            mqtt::BrokerDiscovery::Off => false,
            mqtt::BrokerDiscovery::Auto => {
                self.discovery != DiscoveryRange::Off
                    && self
                        .topics
                        .iter()
                        .any(|r| r.scope == Some(mqtt::Scope::Cloud))
            }
        }
    }

    /// Whether `topic` travels through the broker (first rule with a scope
    /// wins; needs `[mqtt]`).
    pub fn topic_scope(&self, topic: &str) -> mqtt::Scope {
        if self.mqtt.is_none() {
            return mqtt::Scope::Local;
        }
        self.topics
            .iter()
            .filter(|r| glob(&r.pattern, topic))
            .find_map(|r| r.scope)
            .unwrap_or_default()
    }

    /// Whether `topic` is also a DDS topic for ROS 2 nodes: `[ros2]` is on
    /// and no rule (first with a `ros2` key) keeps it off.
    pub fn topic_ros2(&self, topic: &str) -> bool {
        self.ros2.is_some()
            && self
                .topics
                .iter()
                .filter(|r| glob(&r.pattern, topic))
                .find_map(|r| r.ros2)
                .unwrap_or(true)
    }

    /// Whether `topic` is also on Zenoh: `[zenoh]` is on and no rule (first
    /// with a `zenoh` key) keeps it off.
    pub fn topic_zenoh(&self, topic: &str) -> bool {
        self.zenoh.is_some()
            && self
                .topics
                .iter()
                .filter(|r| glob(&r.pattern, topic))
                .find_map(|r| r.zenoh)
                .unwrap_or(true)
    }

    /// The ROS domain of the `[zenoh]` path: its `domain`, else `[ros2]`'s,
    /// else `domain_id`.
    pub fn zenoh_domain(&self) -> Option<u16> {
        self.zenoh.as_ref().map(|z| {
            z.domain
                .or_else(|| self.ros2_domain())
                .unwrap_or(self.domain_id)
        })
    }

    /// The DDS domain of the `[ros2]` path: its `domain`, else `domain_id`.
    pub fn ros2_domain(&self) -> Option<u16> {
        self.ros2
            .as_ref()
            .map(|r| r.domain.unwrap_or(self.domain_id))
    }

    /// The broker payload format of `topic` and its MQTT QoS override.
    pub fn topic_mqtt(&self, topic: &str) -> (mqtt::Encoding, Option<u8>) {
        let rules = || self.topics.iter().filter(|r| glob(&r.pattern, topic));
        (
            rules().find_map(|r| r.encoding).unwrap_or_default(),
            rules().find_map(|r| r.mqtt_qos),
        )
    }

    /// The priority a rule gives `topic`'s connections (first rule with a
    /// priority or sched wins), if any.
    pub fn topic_priority(&self, topic: &str) -> Option<Priority> {
        self.topics
            .iter()
            .filter(|r| glob(&r.pattern, topic))
            .find(|r| r.priority.is_some() || r.sched.is_some())
            .map(|r| Priority {
                class: r.priority.unwrap_or_default(),
                thread: r.sched,
            })
    }
}

/// `*` matches any run of characters (including `/`).
fn glob(pattern: &str, s: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let mut rest = s;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(p) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else if let Some(pos) = rest.find(p) {
            rest = &rest[pos + p.len()..];
        } else {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_named() {
        let dir = std::env::temp_dir().join(format!("ferry-cfg-{}", std::process::id()));
        std::fs::write(&dir, "domain_id = 1\ndiscovery_mode = \"subnet\"\n").unwrap();
        let e = Config::from_file(dir.clone()).unwrap_err().to_string();
        assert!(e.contains("discovery_mode"), "{e}");
        std::fs::write(
            &dir,
            "[[topics]]\npattern = \"/cam/*\"\ntransport = \"carrier\"\n",
        )
        .unwrap();
        let e = Config::from_file(dir.clone()).unwrap_err().to_string();
        assert!(e.contains("carrier"), "{e}");
        std::fs::write(&dir, "domain_id = 300\n").unwrap();
        let e = Config::from_file(dir.clone()).unwrap_err().to_string();
        assert!(e.contains("domain_id"), "{e}");
        for (text, key) in [
            ("udp_history_mb = 0\n", "udp_history_mb"),
            ("shm_pool_mb = 0\n", "shm_pool_mb"),
            ("forward_threshold = 2000\n", "forward_threshold"),
            ("shm_spin_us = 20000\n", "shm_spin_us"),
        ] {
            std::fs::write(&dir, text).unwrap();
            let e = Config::from_file(dir.clone()).unwrap_err().to_string();
            assert!(e.contains(key), "{e}");
        }
        std::fs::write(
            &dir,
            "udp_history_mb = 200\nshared_memory = false\nshm_spin_us = 0\n",
        )
        .unwrap();
        let c = Config::from_file(dir.clone()).unwrap();
        assert_eq!(
            (c.udp_history_mb, c.shared_memory, c.shm_spin_us),
            (Some(200), false, 0)
        );
        std::fs::write(
            &dir,
            "discovery = \"subnet\"\n[[topics]]\npattern = \"/cam/*\"\ntransport = \"tcp\"\n",
        )
        .unwrap();
        let c = Config::from_file(dir.clone()).unwrap();
        assert_eq!(c.discovery, DiscoveryRange::Subnet);
        assert_eq!(c.pinned_transport("/cam/front"), Some(TransportKind::Tcp));
        assert_eq!(c.pinned_transport("/lidar"), None);
        std::fs::write(
            &dir,
            "admin = \"open\"\npriority_threads = 2\n[[topics]]\npattern = \"/arm/*\"\npriority = \"high\"\nsched = \"fifo:30\"\n",
        )
        .unwrap();
        let c = Config::from_file(dir.clone()).unwrap();
        assert_eq!(c.admin, AdminAccess::Open);
        assert_eq!(c.priority_threads, 2);
        assert_eq!(
            c.topic_priority("/arm/joints"),
            Some(Priority::class(PacketClass::High).with_thread(ThreadPolicy::Fifo(30)))
        );
        assert_eq!(c.pinned_transport("/arm/joints"), None);
        std::fs::write(
            &dir,
            "[[topics]]\npattern = \"/a\"\npriority = \"urgent\"\n",
        )
        .unwrap();
        let e = Config::from_file(dir.clone()).unwrap_err().to_string();
        assert!(e.contains("urgent") && e.contains("critical"), "{e}");
        std::fs::write(&dir, "admin = \"sometimes\"\n").unwrap();
        let e = Config::from_file(dir.clone()).unwrap_err().to_string();
        assert!(e.contains("sometimes"), "{e}");
        std::fs::remove_file(dir).ok();
    }

    #[test]
    fn globs() {
        assert!(glob("/a/*", "/a/b/c"));
        assert!(glob("*", "/x"));
        assert!(glob("/a/*/c", "/a/b/c"));
        assert!(!glob("/a/*/c", "/a/b/d"));
        assert!(glob("/exact", "/exact"));
        assert!(!glob("/exact", "/exact2"));
    }

    #[test]
    fn peers_expand_to_the_unicast_port_range() {
        let c = Config::default();
        assert_eq!(c.peer_addrs_of("10.0.0.2:9000").unwrap().len(), 1);
        let all = c.peer_addrs_of("10.0.0.2").unwrap();
        assert_eq!(all.len(), Config::UNICAST_PORTS as usize);
        // 7401 is DDS domain 0's multicast user-data port.
        assert_eq!(all[0].port(), 7402);
        assert!(c.peer_addrs_of("not a host!").is_err());
    }

    #[test]
    fn unicast_discovery_ports_leave_dds_multicast_ports_free() {
        let ports = |domain_id| -> Vec<u16> {
            Config {
                domain_id,
                ..Config::default()
            }
            .unicast_discovery_ports()
            .collect()
        };
        assert_eq!(ports(0), (7402..=7409).collect::<Vec<_>>());
        assert_eq!(ports(1), (7417..=7424).collect::<Vec<_>>());
        // Domain 31's range would hold DDS domain 2's 7900 and 7901.
        assert_eq!(ports(31), [7897, 7898, 7899, 7902, 7903, 7904, 7905, 7906]);
        for d in 0..=MAX_DOMAIN_ID {
            let p = ports(d);
            assert_eq!(p.len(), Config::UNICAST_PORTS as usize);
            assert!(
                p.iter().all(|&p| (p - 7400) % 250 >= 2),
                "domain {d}: {p:?}"
            );
        }
    }

    #[test]
    fn ros2_section_and_rules() {
        let c: Config = toml::from_str(
            "[ros2]\ndomain = 3\ndiscovery_range = \"localhost\"\n\
             [[topics]]\npattern = \"/cam/*\"\nros2 = false\n",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.ros2_domain(), Some(3));
        assert!(!c.topic_ros2("/cam/left") && c.topic_ros2("/odom"));
        assert_eq!(
            c.ros2.as_ref().map(|r| r.discovery_range),
            Some(ros2::DiscoveryRange::Localhost)
        );
        let e = toml::from_str::<Config>("[ros2]\ndomian = 3\n").unwrap_err();
        assert!(e.to_string().contains("domian"), "{e}");
        let pinned: Config =
            toml::from_str("[[topics]]\npattern = \"/x\"\ntransport = \"dds\"\n").unwrap();
        let e = pinned.validate().unwrap_err().to_string();
        assert!(e.contains("topics.transport") && e.contains("ROS 2"), "{e}");
        assert!(!Config::default().topic_ros2("/odom"), "off by default");
    }

    #[test]
    fn zenoh_section_and_rules() {
        let c: Config = toml::from_str(
            "domain_id = 7\n[ros2]\ndomain = 3\n[zenoh]\nconnect = [\"tcp/10.0.0.1:7447\"]\n\
             [[topics]]\npattern = \"/cam/*\"\nzenoh = false\n",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.zenoh_domain(),
            Some(3),
            "[ros2]'s domain when it has none"
        );
        assert!(!c.topic_zenoh("/cam/left") && c.topic_zenoh("/odom"));
        assert!(!Config::default().topic_zenoh("/odom"), "off by default");
        let e = toml::from_str::<Config>("[zenoh]\nmdoe = \"peer\"\n").unwrap_err();
        assert!(e.to_string().contains("mdoe"), "{e}");
        let pinned: Config =
            toml::from_str("[[topics]]\npattern = \"/x\"\ntransport = \"zenoh\"\n").unwrap();
        let e = pinned.validate().unwrap_err().to_string();
        assert!(
            e.contains("topics.transport") && e.contains("[zenoh]"),
            "a Zenoh pin needs the path: {e}"
        );
        let pinned: Config = toml::from_str(
            "[zenoh]
[[topics]]
pattern = \"/x\"\ntransport = \"zenoh\"\n",
        )
        .unwrap();
        pinned.validate().unwrap();
        assert_eq!(pinned.pinned_transport("/x"), Some(TransportKind::Zenoh));
        let both: Config = toml::from_str(
            "[zenoh]
[[topics]]
pattern = \"/x\"\ntransport = \"zenoh\"\nzenoh = false\n",
        )
        .unwrap();
        let e = both.validate().unwrap_err().to_string();
        assert!(e.contains("topics.zenoh"), "{e}");
    }
}
