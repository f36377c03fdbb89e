//! The embedded broker's TLS listener: rustls terminates TLS (client
//! certificates of the keystore's CA required) and each connection's bytes
//! are copied to the broker's own listener on loopback, so clients over
//! TLS and local plain clients share one router (rumqttd's own TLS would
//! file certificate holders under a separate tenant, out of sight of the
//! plain ones).
//!
//! Bounded: at most [`MAX_TLS_CONNECTIONS`] at once and
//! [`MAX_PER_ADDRESS`] from one address, a handshake within 5 s, and a
//! connection ends when either side closes (rumqttd closes a client that
//! never sends CONNECT or misses its keep-alive) or when the client's
//! certificate ends.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::BrokerError;

/// Most TLS connections at once; more are closed at accept.
pub const MAX_TLS_CONNECTIONS: usize = 1024;
/// Most TLS connections (handshaking or relayed) from one address.
pub const MAX_PER_ADDRESS: usize = 32;
/// How long a client's TLS handshake may take.
const HANDSHAKE: Duration = Duration::from_secs(5);

/// The broker's TLS listener.
#[derive(Clone)]
pub struct BrokerTls {
    /// Where it listens (port 0 picks one).
    pub listen: SocketAddr,
    /// Its rustls configuration
    /// (`ferry_security::tls::broker_server_config`).
    pub config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for BrokerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerTls")
            .field("listen", &self.listen)
            .finish()
    }
}

/// Two TLS listeners are the same when they listen at the same address.
impl PartialEq for BrokerTls {
    fn eq(&self, other: &Self) -> bool {
        self.listen == other.listen
    }
}

impl Eq for BrokerTls {}

/// Binds `tls.listen` (before the broker starts: a taken port is an error
/// of this listener, not a broker to connect to).
pub(crate) fn bind(tls: &BrokerTls) -> Result<std::net::TcpListener, BrokerError> {
    let bind = |e: std::io::Error| BrokerError::TlsBind {
        addr: tls.listen,
        why: e.to_string(),
    };
    let l = std::net::TcpListener::bind(tls.listen).map_err(bind)?;
    l.set_nonblocking(true).map_err(bind)?;
    Ok(l)
}

/// Serves the bound listener `l` on its own thread, relaying every
/// connection that completes a handshake to `upstream`.
pub(crate) fn serve(
    l: std::net::TcpListener,
    tls: &BrokerTls,
    upstream: SocketAddr,
) -> Result<(), BrokerError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| BrokerError::Config(e.to_string()))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
    std::thread::Builder::new()
        .name("ferry-broker-tls".into())
        .spawn(move || rt.block_on(accept_loop(l, acceptor, upstream)))
        .map_err(|e| BrokerError::Config(e.to_string()))?;
    Ok(())
}

/// Connections open, in all and per address.
#[derive(Default)]
struct Open {
    total: usize,
    by_ip: HashMap<IpAddr, usize>,
}

/// One connection's place in [`Open`], given back when dropped (also if
/// its task ends early).
struct Slot {
    open: Arc<Mutex<Open>>,
    ip: IpAddr,
}

impl Slot {
    fn take(open: &Arc<Mutex<Open>>, ip: IpAddr) -> Option<Slot> {
        let mut o = open.lock().unwrap_or_else(|p| p.into_inner());
        let here = o.by_ip.get(&ip).copied().unwrap_or(0);
        if o.total >= MAX_TLS_CONNECTIONS || here >= MAX_PER_ADDRESS {
            return None;
        }
        o.total += 1;
        o.by_ip.insert(ip, here + 1);
        Some(Slot {
            open: open.clone(),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut o = self.open.lock().unwrap_or_else(|p| p.into_inner());
        o.total = o.total.saturating_sub(1);
        if let Some(n) = o.by_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                o.by_ip.remove(&self.ip);
            }
        }
    }
}

async fn accept_loop(
    l: std::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    upstream: SocketAddr,
) {
    let l = match tokio::net::TcpListener::from_std(l) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("embedded broker TLS listener: {e}");
            return;
        }
    };
    let open = Arc::new(Mutex::new(Open::default()));
    loop {
        let (tcp, peer) = match l.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors, say: wait rather than spin.
                tracing::warn!("embedded broker TLS accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(slot) = Slot::take(&open, peer.ip()) else {
            tracing::debug!("embedded broker TLS: no room for {peer} (caps reached)");
            continue;
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            if let Err(e) = relay(tcp, &acceptor, upstream).await {
                tracing::debug!("embedded broker TLS connection from {peer}: {e}");
            }
            drop(slot);
        });
    }
}

/// How long the client's certificate has left (None: unreadable).
fn certificate_left(der: &[u8]) -> Option<Duration> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let end = u64::try_from(cert.validity().not_after.timestamp()).ok()?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    Some(Duration::from_secs(end.saturating_sub(now)))
}

/// One client: the handshake (bounded), then bytes both ways until either
/// side closes or the client's certificate ends.
async fn relay(
    tcp: tokio::net::TcpStream,
    acceptor: &tokio_rustls::TlsAcceptor,
    upstream: SocketAddr,
) -> std::io::Result<()> {
    tcp.set_nodelay(true)?;
    let tls = tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp))
        .await
        .map_err(|_| std::io::Error::other("TLS handshake timed out"))??;
    let left = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|c| certificate_left(c.as_ref()))
        .ok_or_else(|| std::io::Error::other("no readable client certificate"))?;
    let mut up = tokio::net::TcpStream::connect(upstream).await?;
    up.set_nodelay(true)?;
    let (mut from_client, mut to_client) = tokio::io::split(tls);
    let (mut from_broker, mut to_broker) = up.split();
    tokio::select! {
        r = tokio::io::copy(&mut from_client, &mut to_broker) => r.map(|_| ()),
        r = tokio::io::copy(&mut from_broker, &mut to_client) => r.map(|_| ()),
        _ = tokio::time::sleep(left) => Err(std::io::Error::other("the client's certificate ended")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_capped_per_address_and_in_all_and_given_back() {
        let open = Arc::new(Mutex::new(Open::default()));
        let a: IpAddr = [10, 0, 0, 1].into();
        let mine: Vec<Slot> = (0..MAX_PER_ADDRESS)
            .map(|_| Slot::take(&open, a).expect("within the per-address cap"))
            .collect();
        assert!(Slot::take(&open, a).is_none(), "one address past its cap");
        let other: IpAddr = [10, 0, 0, 2].into();
        let theirs = Slot::take(&open, other).expect("another address still gets in");
        drop(mine);
        assert!(
            Slot::take(&open, a).is_some(),
            "slots come back when dropped"
        );
        drop(theirs);
        let mut all = Vec::new();
        for i in 0..MAX_TLS_CONNECTIONS {
            let ip: IpAddr = [10, 1, (i / 200) as u8, (i % 200) as u8].into();
            all.push(Slot::take(&open, ip).expect("within the total"));
        }
        assert!(
            Slot::take(&open, [10, 2, 0, 1].into()).is_none(),
            "past the total"
        );
        drop(all);
        assert_eq!(open.lock().unwrap().total, 0);
        assert!(open.lock().unwrap().by_ip.is_empty());
    }
}
