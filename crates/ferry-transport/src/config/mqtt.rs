//! The `[mqtt]` section: the broker a runtime's cloud-scope topics use.
//!
//! ```toml
//! [mqtt]
//! broker = "mqtt://embedded"        # or mqtt://host:1883, mqtt://embedded:18830
//! user = "robot1"                   # optional, with password
//! password = "secret"
//! prefix = "ferry"                  # MQTT topics are <prefix>/<domain>/<name>
//! on_unreachable = "retry"          # or "fail": node creation fails
//! offline_queue_bytes = 8388608     # samples kept while the broker is away
//! [[topics]]
//! pattern = "/robot1/status/*"
//! scope = "cloud"                   # also through the broker
//! encoding = "json"                 # opt-in, for dashboards (default cdr)
//! ```

use std::str::FromStr;

use serde::Deserialize;

use super::ConfigError;

/// What to do when the broker cannot be reached at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnUnreachable {
    /// Keep retrying with backoff; local paths work meanwhile (default).
    #[default]
    Retry,
    /// Fail the node's creation with the connect error.
    Fail,
}

/// Where the broker is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BrokerUrl {
    /// `mqtt://embedded[:port]`: a broker inside this process (default port 1883).
    Embedded {
        /// Port of its MQTT 5 listener (all interfaces).
        port: u16,
    },
    /// `mqtt://host[:port]` (default 1883).
    Tcp {
        /// Host name or address.
        host: String,
        /// Port.
        port: u16,
    },
    /// `mqtts://host[:port]` (default 8883): TLS (the `mqtt-tls` feature).
    Tls {
        /// Host name or address.
        host: String,
        /// Port.
        port: u16,
    },
}

impl FromStr for BrokerUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "`{s}` is not mqtt://host[:port], mqtts://host[:port] or mqtt://embedded[:port]"
            )
        };
        let (tls, rest) = if let Some(r) = s.strip_prefix("mqtt://") {
            (false, r)
        } else if let Some(r) = s.strip_prefix("mqtts://") {
            (true, r)
        } else {
            return Err(bad());
        };
        let rest = rest.trim_end_matches('/');
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h, Some(p.parse::<u16>().map_err(|_| bad())?))
            }
            _ => (rest, None),
        };
        if host.is_empty() || host.contains('/') {
            return Err(bad());
        }
        Ok(match (host, tls) {
            ("embedded", false) => BrokerUrl::Embedded {
                port: port.unwrap_or(1883),
            },
            ("embedded", true) => {
                return Err(format!(
                    "`{s}`: the embedded broker speaks plain MQTT (mqtt://embedded)"
                ))
            }
            (h, false) => BrokerUrl::Tcp {
                host: h.to_string(),
                port: port.unwrap_or(1883),
            },
            (h, true) => BrokerUrl::Tls {
                host: h.to_string(),
                port: port.unwrap_or(8883),
            },
        })
    }
}

impl std::fmt::Display for BrokerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BrokerUrl::Embedded { port } => write!(f, "mqtt://embedded:{port}"),
            BrokerUrl::Tcp { host, port } => write!(f, "mqtt://{host}:{port}"),
            BrokerUrl::Tls { host, port } => write!(f, "mqtts://{host}:{port}"),
        }
    }
}

impl<'de> Deserialize<'de> for BrokerUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The `[mqtt]` section.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MqttConfig {
    /// The broker (`FERRY_MQTT`).
    pub broker: BrokerUrl,
    /// User name for brokers that require one.
    #[serde(default)]
    pub user: Option<String>,
    /// Password for `user`.
    #[serde(default)]
    pub password: Option<String>,
    /// CA certificates (PEM) that sign an `mqtts://` broker's certificate;
    /// default: the system's roots.
    #[serde(default)]
    pub ca_file: Option<std::path::PathBuf>,
    /// Client certificate chain (PEM) for an `mqtts://` broker that
    /// requires one (Mosquitto's `require_certificate`); with `key_file`.
    /// Default with security on: the enclave's own certificate.
    #[serde(default)]
    pub cert_file: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    #[serde(default)]
    pub key_file: Option<std::path::PathBuf>,
    /// First segment of every MQTT topic (`<prefix>/<domain>/<name>`).
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// Broker unreachable at start: keep retrying (default) or fail.
    #[serde(default)]
    pub on_unreachable: OnUnreachable,
    /// How long the first connect may take before `on_unreachable` applies, ms.
    #[serde(default = "default_connect_ms")]
    pub connect_timeout_ms: u64,
    /// Bytes of samples kept while the broker is away (oldest best-effort
    /// samples go first; reliable keep_all writers block, then fail).
    #[serde(default = "default_queue")]
    pub offline_queue_bytes: usize,
    /// Largest MQTT packet sent or accepted, bytes (default 64 MiB: a
    /// point cloud or a camera frame goes through; the broker's limit must
    /// be at least this). A larger sample fails to publish on this path.
    #[serde(default = "default_packet")]
    pub max_packet_bytes: usize,
    /// Keep-alive, seconds: a dead connection is noticed within 1.5× this.
    #[serde(default = "default_keep_alive")]
    pub keep_alive_s: u16,
    /// Persistent session kept by the broker while this runtime is away, s.
    #[serde(default = "default_session")]
    pub session_expiry_s: u32,
    /// Announce this runtime through the broker (see [`BrokerDiscovery`]).
    #[serde(default)]
    pub discovery: BrokerDiscovery,
    /// Where the embedded broker (`mqtt://embedded[:port]`) listens.
    /// Default `127.0.0.1:<port>`: this host only. To let other hosts in,
    /// give an address here and set `user`/`password` (the broker then
    /// requires them).
    #[serde(default)]
    pub listen: Option<std::net::SocketAddr>,
    /// The embedded broker also listens here with TLS 1.3, requiring a
    /// client certificate of the keystore's CA (`[security] keystore`):
    /// how other hosts reach it under `enforce`. Its clients share one
    /// router with the plain (loopback) ones.
    #[serde(default)]
    pub listen_tls: Option<std::net::SocketAddr>,
    /// The TLS listener's certificate: a directory with `cert.pem` and
    /// `key.pem` (`ferry security create-broker-cert` makes
    /// `<keystore>/brokers/<host>/`); default: the keystore's only one.
    #[serde(default)]
    pub broker_cert: Option<std::path::PathBuf>,
    /// Name this runtime's network addresses (UDP, TCP) in what it
    /// announces through the broker. Off by default: peers that can reach
    /// them hear us directly and get them then.
    #[serde(default)]
    pub announce_addresses: bool,
}

/// Whether a runtime announces itself (and listens for others) through
/// the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BrokerDiscovery {
    /// When discovery is not `off` and some `[[topics]]` rule gives a topic
    /// or service the cloud scope (default).
    #[default]
    Auto,
    /// Always (services called through the broker without a cloud rule).
    On,
    /// Never: cloud-scope samples still flow, but nothing is matched
    /// through the broker.
    Off,
}

fn default_prefix() -> String {
    "ferry".into()
}
fn default_connect_ms() -> u64 {
    3000
}
fn default_queue() -> usize {
    8 << 20
}
fn default_packet() -> usize {
    64 << 20
}
fn default_keep_alive() -> u16 {
    5
}
fn default_session() -> u32 {
    300
}

impl MqttConfig {
    /// The section with defaults for `broker`.
    pub fn new(broker: BrokerUrl) -> Self {
        MqttConfig {
            broker,
            user: None,
            password: None,
            ca_file: None,
            cert_file: None,
            key_file: None,
            prefix: default_prefix(),
            on_unreachable: OnUnreachable::default(),
            connect_timeout_ms: default_connect_ms(),
            offline_queue_bytes: default_queue(),
            max_packet_bytes: default_packet(),
            keep_alive_s: default_keep_alive(),
            session_expiry_s: default_session(),
            discovery: BrokerDiscovery::default(),
            listen: None,
            listen_tls: None,
            broker_cert: None,
            announce_addresses: false,
        }
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key, why: String| Err(ConfigError::Invalid { key, why });
        if self.prefix.is_empty()
            || self
                .prefix
                .chars()
                .any(|c| matches!(c, '#' | '+' | '\0') || c.is_whitespace())
        {
            return bad(
                "mqtt.prefix",
                format!("`{}` must be non-empty, without #, +, spaces", self.prefix),
            );
        }
        if self.password.is_some() && self.user.is_none() {
            return bad("mqtt.password", "given without mqtt.user".into());
        }
        if !(1024..=256 << 20).contains(&self.max_packet_bytes) {
            return bad(
                "mqtt.max_packet_bytes",
                format!("{} is outside 1024..=268435456", self.max_packet_bytes),
            );
        }
        if self.offline_queue_bytes < self.max_packet_bytes.min(1 << 20) {
            return bad(
                "mqtt.offline_queue_bytes",
                format!(
                    "{} is below one packet ({} bytes, at most 1 MiB)",
                    self.offline_queue_bytes,
                    self.max_packet_bytes.min(1 << 20)
                ),
            );
        }
        for (key, set) in [
            ("mqtt.listen", self.listen.is_some()),
            ("mqtt.listen_tls", self.listen_tls.is_some()),
            ("mqtt.broker_cert", self.broker_cert.is_some()),
        ] {
            if set && !matches!(self.broker, BrokerUrl::Embedded { .. }) {
                return bad(
                    key,
                    format!(
                        "is for the embedded broker only, and the broker is {}",
                        self.broker
                    ),
                );
            }
        }
        if self.keep_alive_s == 0 {
            return bad("mqtt.keep_alive_s", "must be at least 1".into());
        }
        if let BrokerUrl::Tls { .. } = self.broker {
            if !cfg!(feature = "mqtt-tls") {
                return bad(
                    "mqtt.broker",
                    format!(
                        "{} needs ferry built with the `mqtt-tls` feature",
                        self.broker
                    ),
                );
            }
        }
        for (key, file) in [
            ("mqtt.ca_file", &self.ca_file),
            ("mqtt.cert_file", &self.cert_file),
            ("mqtt.key_file", &self.key_file),
        ] {
            if let Some(p) = file {
                if !p.is_file() {
                    return bad(key, format!("{} is not a file", p.display()));
                }
            }
        }
        if self.cert_file.is_some() != self.key_file.is_some() {
            return bad(
                if self.cert_file.is_some() {
                    "mqtt.key_file"
                } else {
                    "mqtt.cert_file"
                },
                "a client certificate needs both cert_file and key_file".into(),
            );
        }
        Ok(())
    }
}

/// Where a topic travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Shared pointer, shared memory, UDP/TCP to directly reachable peers (default).
    #[default]
    Local,
    /// Also through the MQTT broker, to sites reachable only through it
    /// and to plain MQTT clients.
    Cloud,
}

/// Payload format on the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// CDR with its 4-byte encapsulation header, as every ferry path (default).
    #[default]
    Cdr,
    /// JSON of the message's fields, for dashboards (publish only; ferry
    /// subscribers decode it too).
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_urls() {
        assert_eq!(
            "mqtt://embedded".parse::<BrokerUrl>(),
            Ok(BrokerUrl::Embedded { port: 1883 })
        );
        assert_eq!(
            "mqtt://embedded:18830".parse::<BrokerUrl>(),
            Ok(BrokerUrl::Embedded { port: 18830 })
        );
        assert_eq!(
            "mqtt://10.0.0.1".parse::<BrokerUrl>(),
            Ok(BrokerUrl::Tcp {
                host: "10.0.0.1".into(),
                port: 1883
            })
        );
        assert_eq!(
            "mqtts://cloud.example:8884".parse::<BrokerUrl>(),
            Ok(BrokerUrl::Tls {
                host: "cloud.example".into(),
                port: 8884
            })
        );
        for bad in [
            "tcp://x",
            "mqtt://",
            "mqtt://h:port",
            "mqtts://embedded",
            "mqtt://a/b",
        ] {
            let e = bad.parse::<BrokerUrl>().unwrap_err();
            assert!(e.contains(bad) || e.contains("embedded"), "{bad}: {e}");
        }
    }
}
