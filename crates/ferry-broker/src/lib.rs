//! Ferry's embedded MQTT broker: `rumqttd` behind ferry's own type, so the
//! zero-setup default (`mqtt://embedded`, `ferry broker`) needs no
//! installed broker.
//!
//! One broker serves MQTT 5 (what ferry nodes speak: user properties carry
//! the writer id, sequence number and source time) and, on a second port,
//! MQTT 3.1.1 for plain clients that only speak that; both share one router,
//! so a 3.1.1 client sees what ferry nodes publish and vice versa.
//!
//! rumqttd cannot be stopped once started (its listener and router threads
//! live until the process exits), so a process runs at most one embedded
//! broker per address: [`EmbeddedBroker::start`] returns the running one when
//! asked again for the same address.

mod tls;

pub use tls::{BrokerTls, MAX_PER_ADDRESS, MAX_TLS_CONNECTIONS};

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How to run the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// MQTT 5 listener (default `127.0.0.1:1883`: this host only; port 0
    /// picks a free port).
    pub listen: SocketAddr,
    /// MQTT 3.1.1 listener for plain clients, if any (port 0 picks one).
    pub listen_v311: Option<SocketAddr>,
    /// Largest payload a client may publish, bytes.
    pub max_payload: usize,
    /// User name → password; `None` accepts anyone.
    pub users: Option<HashMap<String, String>>,
    /// A TLS listener too (client certificates required), for clients on
    /// other hosts; its connections join the MQTT 5 listener's router.
    pub tls: Option<BrokerTls>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 1883)),
            listen_v311: None,
            max_payload: 16 << 20,
            users: None,
            tls: None,
        }
    }
}

/// Why the broker did not start.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The address is taken or not ours.
    #[error("cannot listen on {addr}: {why} (another broker there? connect to it with mqtt://{addr} instead)")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What failed.
        why: String,
        /// Something listens there already (perhaps a broker).
        in_use: bool,
    },
    /// The TLS listener's address is taken or not ours.
    #[error("cannot listen with TLS on {addr}: {why} ([mqtt] listen_tls / --listen-tls)")]
    TlsBind {
        /// The address.
        addr: SocketAddr,
        /// What failed.
        why: String,
    },
    /// The broker's configuration was refused.
    #[error("embedded broker configuration refused: {0}")]
    Config(String),
    /// The broker threads could not be started.
    #[error("embedded broker did not come up on {0} within 5 s")]
    NotUp(SocketAddr),
}

/// A running embedded broker (lives until the process exits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedBroker {
    addr: SocketAddr,
    addr_v311: Option<SocketAddr>,
    addr_tls: Option<SocketAddr>,
}

fn running() -> &'static Mutex<Vec<(BrokerConfig, EmbeddedBroker)>> {
    static R: OnceLock<Mutex<Vec<(BrokerConfig, EmbeddedBroker)>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// A concrete free port for `addr` when it asks for port 0.
fn concrete(addr: SocketAddr) -> Result<SocketAddr, BrokerError> {
    let bind = |e: std::io::Error| BrokerError::Bind {
        addr,
        why: e.to_string(),
        in_use: e.kind() == std::io::ErrorKind::AddrInUse,
    };
    let l = TcpListener::bind(addr).map_err(bind)?;
    let a = l.local_addr().map_err(bind)?;
    Ok(a)
}

fn server(name: &str, listen: SocketAddr, cfg: &BrokerConfig) -> serde_json::Value {
    let mut conn = serde_json::json!({
        "connection_timeout_ms": 60000,
        "max_payload_size": cfg.max_payload,
        "max_inflight_count": 500,
        "dynamic_filters": true,
    });
    if let Some(users) = &cfg.users {
        conn["auth"] = serde_json::to_value(users).unwrap_or_default();
    }
    serde_json::json!({
        "1": {
            "name": name,
            "listen": listen.to_string(),
            "next_connection_delay_ms": 1,
            "connections": conn,
        }
    })
}

impl EmbeddedBroker {
    /// Starts the broker (or returns the one this process already runs with
    /// this configuration) and waits until it accepts connections.
    pub fn start(cfg: &BrokerConfig) -> Result<EmbeddedBroker, BrokerError> {
        let mut reg = running().lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, b)) = reg.iter().find(|(c, _)| c == cfg) {
            return Ok(b.clone());
        }
        // Bind once ourselves: a taken port is an error here, while rumqttd
        // would only log it on its listener thread.
        let listen = concrete(cfg.listen)?;
        let v311 = cfg.listen_v311.map(concrete).transpose()?;
        let tls_listener = cfg.tls.as_ref().map(tls::bind).transpose()?;
        let segment = cfg.max_payload.max(1 << 20) * 2;
        let mut conf = serde_json::json!({
            "id": 0,
            "router": {
                "id": 0,
                "max_connections": 10010,
                "max_outgoing_packet_count": 200,
                "max_segment_size": segment,
                "max_segment_count": 4,
            },
            "v5": server("ferry-v5", listen, cfg),
        });
        if let Some(a) = v311 {
            conf["v4"] = server("ferry-v311", a, cfg);
        }
        let rc: rumqttd::Config =
            serde_json::from_value(conf).map_err(|e| BrokerError::Config(e.to_string()))?;
        std::thread::Builder::new()
            .name("ferry-broker".into())
            .spawn(move || {
                let mut broker = rumqttd::Broker::new(rc);
                if let Err(e) = broker.start() {
                    tracing::error!("embedded MQTT broker stopped: {e}");
                }
            })
            .map_err(|e| BrokerError::Config(e.to_string()))?;
        let probe = |a: SocketAddr| {
            let a = if a.ip().is_unspecified() {
                SocketAddr::from(([127, 0, 0, 1], a.port()))
            } else {
                a
            };
            let until = Instant::now() + Duration::from_secs(5);
            while Instant::now() < until {
                if TcpStream::connect_timeout(&a, Duration::from_millis(200)).is_ok() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            false
        };
        if !probe(listen) {
            return Err(BrokerError::NotUp(listen));
        }
        if let Some(a) = v311 {
            if !probe(a) {
                return Err(BrokerError::NotUp(a));
            }
        }
        let mut b = EmbeddedBroker {
            addr: listen,
            addr_v311: v311,
            addr_tls: None,
        };
        if let (Some(t), Some(l)) = (&cfg.tls, tls_listener) {
            b.addr_tls = l.local_addr().ok();
            tls::serve(l, t, b.local_addr())?;
        }
        tracing::info!(
            "embedded MQTT broker on {listen} (MQTT 5){}{}",
            v311.map(|a| format!(" and {a} (MQTT 3.1.1)"))
                .unwrap_or_default(),
            b.addr_tls
                .map(|a| format!(" and {a} (MQTT 5 over TLS, client certificates required)"))
                .unwrap_or_default()
        );
        reg.push((cfg.clone(), b.clone()));
        Ok(b)
    }

    /// Where the MQTT 5 listener is.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the TLS listener is, if configured.
    pub fn addr_tls(&self) -> Option<SocketAddr> {
        self.addr_tls
    }

    /// Where the MQTT 3.1.1 listener is, if configured.
    pub fn addr_v311(&self) -> Option<SocketAddr> {
        self.addr_v311
    }

    /// An address clients on this host can connect to.
    pub fn local_addr(&self) -> SocketAddr {
        if self.addr.ip().is_unspecified() {
            SocketAddr::from(([127, 0, 0, 1], self.addr.port()))
        } else {
            self.addr
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_free_port_and_refuses_a_taken_one() {
        let cfg = BrokerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            listen_v311: Some("127.0.0.1:0".parse().unwrap()),
            ..Default::default()
        };
        let b = EmbeddedBroker::start(&cfg).unwrap();
        assert_ne!(b.addr().port(), 0);
        TcpStream::connect(b.local_addr()).unwrap();
        TcpStream::connect(b.addr_v311().unwrap()).unwrap();
        // Same config again: the running broker, not a second one.
        assert_eq!(EmbeddedBroker::start(&cfg).unwrap(), b);
        // Its port, asked for explicitly by another config: taken.
        let taken = BrokerConfig {
            listen: b.addr(),
            max_payload: 1 << 20,
            ..Default::default()
        };
        let e = EmbeddedBroker::start(&taken).unwrap_err();
        assert!(matches!(e, BrokerError::Bind { in_use: true, .. }), "{e}");
        assert!(e.to_string().contains("connect to it"), "{e}");
    }
}
