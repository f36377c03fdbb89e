//! TLS 1.3 with mutual authentication for ferry's TCP path (rustls, ring).
//!
//! Both ends present their enclave certificate and check the other's
//! against the keystore's CA. Peers have no DNS names: the client sends the
//! constant [`SERVER_NAME`] and does not compare names; what identifies a
//! peer is its certificate (CA chain, validity, EKU), and what it may do is
//! its grants, checked by the transport once the handshake is done
//! ([`peer_identity`]). TLS 1.3 only, no resumption, no 0-RTT.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, ParsedCertificate, WebPkiClientVerifier};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use thiserror::Error;

use crate::keystore::Identity;
use crate::peer::{PeerError, PeerIdentity};

/// The server name a client sends (peers have no DNS names).
pub const SERVER_NAME: &str = "ferry";
/// The application protocol both ends must agree on.
pub const ALPN: &[u8] = b"ferry/1";

/// Why TLS could not be set up with an identity.
#[derive(Debug, Error)]
pub enum TlsError {
    /// rustls refused the certificate, key or CA.
    #[error("TLS setup for {enclave}: {why}")]
    Setup {
        /// The enclave.
        enclave: String,
        /// rustls' reason.
        why: String,
    },
}

/// A runtime's TLS configurations, built once from its identity.
#[derive(Debug, Clone)]
pub struct TlsConfigs {
    /// For connections it makes (writers, clients).
    pub client: Arc<ClientConfig>,
    /// For connections it accepts (readers, services).
    pub server: Arc<ServerConfig>,
}

/// ring's provider with TLS 1.3 suites only: AES-128-GCM first (128-bit
/// security, the cheapest on CPUs with AES instructions: large samples are
/// where TLS costs), then AES-256-GCM and ChaCha20-Poly1305.
fn provider() -> Arc<CryptoProvider> {
    use rustls::crypto::ring::{cipher_suite, default_provider};
    Arc::new(CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        ],
        ..default_provider()
    })
}

/// Checks a server's certificate against the CA, not its name.
#[derive(Debug)]
struct CaVerifier {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for CaVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl Identity {
    /// This identity's certificate and key as a TLS client presents them
    /// (to an MQTT broker that requires client certificates).
    pub fn client_auth(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (
            vec![CertificateDer::from(self.cert_der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_pkcs8().to_vec())),
        )
    }

    /// This identity's TLS configurations: its certificate and key on both
    /// sides, the keystore's CA as the only trust anchor, client
    /// certificates required.
    pub fn tls_configs(&self) -> Result<TlsConfigs, TlsError> {
        let err = |e: &dyn std::fmt::Display| TlsError::Setup {
            enclave: self.enclave().into(),
            why: e.to_string(),
        };
        let provider = provider();
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from(self.ca_der().to_vec()))
            .map_err(|e| err(&e))?;
        let roots = Arc::new(roots);
        let chain = vec![CertificateDer::from(self.cert_der().to_vec())];
        let key = || PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_pkcs8().to_vec()));
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| err(&e))?;
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| err(&e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key())
            .map_err(|e| err(&e))?;
        server.alpn_protocols = vec![ALPN.to_vec()];
        server.session_storage = Arc::new(NoServerSessionStorage {});
        server.send_tls13_tickets = 0;
        let mut client = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| err(&e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CaVerifier { roots, provider }))
            .with_client_auth_cert(chain, key())
            .map_err(|e| err(&e))?;
        client.alpn_protocols = vec![ALPN.to_vec()];
        client.resumption = rustls::client::Resumption::disabled();
        Ok(TlsConfigs {
            client: Arc::new(client),
            server: Arc::new(server),
        })
    }
}

/// The TLS server configuration of an MQTT broker's listener (the
/// embedded broker): the broker certificate and key in `cert_dir`
/// (`cert.pem`, `key.pem`: what `ferry security create-broker-cert` writes),
/// TLS 1.3 only, and a client certificate signed by the CA `ca_der`
/// required (the keystore's: any enclave of it; ACLs are not the embedded
/// broker's).
pub fn broker_server_config(ca_der: &[u8], cert_dir: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    use rustls::pki_types::pem::PemObject;
    let err = |e: &dyn std::fmt::Display| TlsError::Setup {
        enclave: format!("the broker certificate in {}", cert_dir.display()),
        why: e.to_string(),
    };
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(cert_dir.join("cert.pem"))
            .and_then(|i| i.collect::<Result<_, _>>())
            .map_err(|e| err(&format!("cert.pem: {e}")))?;
    let key = PrivateKeyDer::from_pem_file(cert_dir.join("key.pem"))
        .map_err(|e| err(&format!("key.pem: {e}")))?;
    let provider = provider();
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca_der.to_vec()))
        .map_err(|e| err(&e))?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| err(&e))?;
    let mut server = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| err(&e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| err(&e))?;
    server.session_storage = Arc::new(NoServerSessionStorage {});
    server.send_tls13_tickets = 0;
    Ok(Arc::new(server))
}

/// The identity of the peer at the other end of a finished handshake
/// (rustls checked its chain; this reads its name, grants and validity).
pub fn peer_identity(
    tls: &rustls::CommonState,
    identity: &Identity,
    domain: u16,
) -> Result<PeerIdentity, PeerError> {
    let der = tls
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or_else(|| PeerError::Malformed("no certificate presented".into()))?;
    identity.verify_peer(der.as_ref(), domain)
}

/// The name clients send.
pub fn server_name() -> ServerName<'static> {
    ServerName::try_from(SERVER_NAME).expect("a valid DNS name")
}
