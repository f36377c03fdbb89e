//! The embedded broker's TLS listener: rustls terminates TLS (client
//! certificates of the keystore's CA required) and each connection's bytes
//! are copied to the broker's own listener on loopback, so clients over
//! TLS and local plain clients share one router (rumqttd's own TLS would
//! file certificate holders under a separate tenant, out of sight of the
//! plain ones).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::BrokerError;

/// Most TLS connections at once; more are closed at accept.
pub const MAX_TLS_CONNECTIONS: usize = 1024;
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

/// Binds `tls.listen` and serves it on its own thread, copying every
/// connection that completes a handshake to `upstream`. Returns the bound
/// address.
pub(crate) fn start(tls: &BrokerTls, upstream: SocketAddr) -> Result<SocketAddr, BrokerError> {
    let bind = |e: std::io::Error| BrokerError::Bind {
        addr: tls.listen,
        why: e.to_string(),
        in_use: e.kind() == std::io::ErrorKind::AddrInUse,
    };
    let l = std::net::TcpListener::bind(tls.listen).map_err(bind)?;
    l.set_nonblocking(true).map_err(bind)?;
    let addr = l.local_addr().map_err(bind)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| BrokerError::Config(e.to_string()))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
    std::thread::Builder::new()
        .name("ferry-broker-tls".into())
        .spawn(move || rt.block_on(serve(l, acceptor, upstream)))
        .map_err(|e| BrokerError::Config(e.to_string()))?;
    Ok(addr)
}

async fn serve(
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
    let open = Arc::new(AtomicUsize::new(0));
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
        if open.fetch_add(1, Ordering::AcqRel) >= MAX_TLS_CONNECTIONS {
            open.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!(
                "embedded broker TLS: {MAX_TLS_CONNECTIONS} connections open, {peer} closed"
            );
            continue;
        }
        let (acceptor, open) = (acceptor.clone(), open.clone());
        tokio::spawn(async move {
            if let Err(e) = relay(tcp, &acceptor, upstream).await {
                tracing::debug!("embedded broker TLS connection from {peer}: {e}");
            }
            open.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// One client: the handshake (bounded), then bytes both ways until either
/// side closes.
async fn relay(
    tcp: tokio::net::TcpStream,
    acceptor: &tokio_rustls::TlsAcceptor,
    upstream: SocketAddr,
) -> std::io::Result<()> {
    tcp.set_nodelay(true)?;
    let mut tls = tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp))
        .await
        .map_err(|_| std::io::Error::other("TLS handshake timed out"))??;
    let mut up = tokio::net::TcpStream::connect(upstream).await?;
    up.set_nodelay(true)?;
    tokio::io::copy_bidirectional_with_sizes(&mut tls, &mut up, 64 << 10, 64 << 10).await?;
    Ok(())
}
