//! Making keystores, identities and permissions (the `ferry security`
//! commands; feature `keygen`).

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use ring::rand::SecureRandom as _;
use thiserror::Error;

use crate::enclave::EnclaveError;
use crate::grants::{Grants, GrantsError, GRANTS_OID};
use crate::keystore::{IdentityError, Keystore, KeystoreError, MARKER};
use crate::policy::{grants_yaml, Policy, PolicyError};

/// When a certificate is valid.
#[derive(Debug, Clone, Copy)]
pub struct Validity {
    /// Start.
    pub not_before: SystemTime,
    /// End.
    pub not_after: SystemTime,
}

impl Validity {
    /// From five minutes ago (clocks differ a little) for `days` days.
    pub fn days(days: u32) -> Validity {
        let now = SystemTime::now();
        Validity {
            not_before: now - Duration::from_secs(300),
            not_after: now + Duration::from_secs(u64::from(days) * 86_400),
        }
    }
}

/// Why a keystore, identity or permission could not be made.
#[derive(Debug, Error)]
pub enum CreateError {
    /// Would overwrite.
    #[error("{0} already exists: remove it first, or use another directory")]
    Exists(String),
    /// A file or directory could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The CA key is not in this keystore.
    #[error("{0} is missing: identities and permissions are made where the CA key is (keep it off robots, not out of the keystore that signs)")]
    NoCaKey(String),
    /// The keystore.
    #[error(transparent)]
    Keystore(#[from] KeystoreError),
    /// A bad enclave name.
    #[error(transparent)]
    Enclave(#[from] EnclaveError),
    /// An identity that does not load.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The policy.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The policy names an enclave that has no identity yet.
    #[error("the policy names {enclave}, which has no identity in {keystore}: run `ferry security create-identity {keystore} {enclave}` first")]
    UnknownEnclave {
        /// The enclave.
        enclave: String,
        /// The keystore.
        keystore: String,
    },
    /// Grants too large for a certificate.
    #[error(transparent)]
    Grants(#[from] GrantsError),
    /// The certificate library refused.
    #[error("certificate: {0}")]
    Certificate(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CreateError + '_ {
    move |source| CreateError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn cert_err(e: rcgen::Error) -> CreateError {
    CreateError::Certificate(e.to_string())
}

/// Writes `text` to a new file (or replaces one) with `mode`.
fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), CreateError> {
    // Replace through a temporary file: a reader never sees half a file,
    // and a key never exists with wider permissions.
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(text.as_bytes()).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

fn mkdir(path: &Path, mode: u32) -> Result<(), CreateError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .map_err(io(path))
}

fn serial() -> SerialNumber {
    let mut b = [0u8; 16];
    // The system RNG does not fail on Linux; a zero serial would still be
    // a valid (if not unique) one.
    let _ = ring::rand::SystemRandom::new().fill(&mut b);
    b[0] &= 0x7f; // positive
    b[0] |= 0x01; // no leading zero byte
    SerialNumber::from_slice(&b)
}

fn name(common: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "ferry");
    dn.push(DnType::CommonName, common);
    dn
}

/// Creates a keystore at `root` (a new or empty directory): a CA key and
/// its self-signed certificate.
pub fn create_keystore(root: &Path, validity: Validity) -> Result<Keystore, CreateError> {
    if root.join(MARKER).exists() {
        return Err(CreateError::Exists(root.join(MARKER).display().to_string()));
    }
    mkdir(root, 0o755)?;
    mkdir(&root.join("public"), 0o755)?;
    mkdir(&root.join("private"), 0o700)?;
    mkdir(&root.join("enclaves"), 0o755)?;
    let key = KeyPair::generate_for(&rcgen::PKCS_ED25519).map_err(cert_err)?;
    let mut p = CertificateParams::default();
    p.distinguished_name = name("ferry keystore CA");
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p.not_before = validity.not_before.into();
    p.not_after = validity.not_after.into();
    p.serial_number = Some(serial());
    let cert = p.self_signed(&key).map_err(cert_err)?;
    write_file(
        &root.join("private").join("ca.key.pem"),
        &key.serialize_pem(),
        0o600,
    )?;
    write_file(&root.join("public").join("ca.cert.pem"), &cert.pem(), 0o644)?;
    write_file(
        &root.join(MARKER),
        "version = 1\nalgorithm = \"ed25519\"\n",
        0o644,
    )?;
    Ok(Keystore::open(root)?)
}

/// The CA as an issuer (its key must be in this keystore).
fn ca_issuer(ks: &Keystore) -> Result<Issuer<'static, KeyPair>, CreateError> {
    let ca_key_path = ks.ca_key_path();
    let ca_key = std::fs::read_to_string(&ca_key_path)
        .map_err(|_| CreateError::NoCaKey(ca_key_path.display().to_string()))?;
    let ca_key = KeyPair::from_pem(&ca_key).map_err(cert_err)?;
    let ca_cert_path = ks.ca_cert_path();
    let ca_cert = std::fs::read_to_string(&ca_cert_path).map_err(io(&ca_cert_path))?;
    Issuer::from_ca_cert_pem(&ca_cert, ca_key).map_err(cert_err)
}

/// Issues a TLS server certificate for an MQTT broker (Mosquitto, EMQX)
/// reachable as `names` (DNS names or IP addresses), signed by the
/// keystore's CA, with an ECDSA P-256 key (what every broker's TLS library
/// takes). Written to `brokers/<first name>/{cert,key}.pem` (the key
/// 0600); the broker trusts `public/ca.cert.pem` for client certificates,
/// and ferry runtimes with this keystore trust the broker. Returns the
/// directory.
pub fn create_broker_certificate(
    ks: &Keystore,
    names: &[String],
    validity: Validity,
) -> Result<PathBuf, CreateError> {
    let first = names.first().ok_or_else(|| {
        CreateError::Certificate("a broker certificate needs at least one name".into())
    })?;
    if first.is_empty() || first.contains(['/', '\\']) || first.starts_with('.') {
        return Err(CreateError::Certificate(format!(
            "`{first}` is not a host name or address"
        )));
    }
    let issuer = ca_issuer(ks)?;
    let dir = ks.root().join("brokers").join(first);
    mkdir(&dir, 0o755)?;
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(cert_err)?;
    let mut p = CertificateParams::new(names.to_vec()).map_err(cert_err)?;
    p.distinguished_name = name(first);
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    p.use_authority_key_identifier_extension = true;
    p.not_before = validity.not_before.into();
    p.not_after = validity.not_after.into();
    p.serial_number = Some(serial());
    let cert = p.signed_by(&key, &issuer).map_err(cert_err)?;
    write_file(&dir.join("key.pem"), &key.serialize_pem(), 0o600)?;
    write_file(&dir.join("cert.pem"), &cert.pem(), 0o644)?;
    Ok(dir)
}

/// Issues the certificate of `enclave` for `key` with `grants`.
fn issue(
    ks: &Keystore,
    enclave: &str,
    key: &KeyPair,
    grants: &Grants,
    validity: Validity,
) -> Result<String, CreateError> {
    let issuer = ca_issuer(ks)?;
    let mut p = CertificateParams::default();
    p.distinguished_name = name(enclave);
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    p.use_authority_key_identifier_extension = true;
    p.not_before = validity.not_before.into();
    p.not_after = validity.not_after.into();
    p.serial_number = Some(serial());
    p.custom_extensions = vec![CustomExtension::from_oid_content(
        GRANTS_OID,
        crate::der::wrap_octet_string(&grants.encode()?),
    )];
    Ok(p.signed_by(key, &issuer).map_err(cert_err)?.pem())
}

/// Creates the identity of `enclave`: a key and a certificate signed by
/// the keystore's CA, with no grants (nothing allowed until
/// [`create_permissions`]). Refuses to replace an existing identity.
pub fn create_identity(
    ks: &Keystore,
    enclave: &str,
    validity: Validity,
) -> Result<PathBuf, CreateError> {
    let dir = ks.enclave_dir(enclave)?;
    let key_path = dir.join("key.pem");
    if key_path.exists() {
        return Err(CreateError::Exists(key_path.display().to_string()));
    }
    mkdir(&dir, 0o755)?;
    let key = KeyPair::generate_for(&rcgen::PKCS_ED25519).map_err(cert_err)?;
    let grants = Grants::default();
    let cert = issue(ks, enclave, &key, &grants, validity)?;
    write_file(&key_path, &key.serialize_pem(), 0o600)?;
    write_file(&dir.join("cert.pem"), &cert, 0o644)?;
    write_file(
        &dir.join("grants.yaml"),
        &grants_yaml(enclave, &grants),
        0o644,
    )?;
    Ok(dir)
}

/// Applies a policy: re-issues the certificate of every enclave it names
/// (same key) with its grants, writes each `grants.yaml` and keeps a copy
/// of the policy. Returns the enclaves updated. Nothing is written unless
/// every enclave it names has an identity.
pub fn create_permissions(
    ks: &Keystore,
    policy_path: &Path,
    validity: Validity,
) -> Result<Vec<String>, CreateError> {
    let text = std::fs::read_to_string(policy_path).map_err(io(policy_path))?;
    let policy = Policy::parse(&text)?;
    let mut keys = Vec::new();
    for enclave in policy.identities.keys() {
        let key_path = ks.enclave_dir(enclave)?.join("key.pem");
        if !key_path.is_file() {
            return Err(CreateError::UnknownEnclave {
                enclave: enclave.clone(),
                keystore: ks.root().display().to_string(),
            });
        }
        let pem = std::fs::read_to_string(&key_path).map_err(io(&key_path))?;
        keys.push(KeyPair::from_pem(&pem).map_err(cert_err)?);
    }
    let mut certs = Vec::new();
    for ((enclave, grants), key) in policy.identities.iter().zip(&keys) {
        certs.push(issue(ks, enclave, key, grants, validity)?);
    }
    for ((enclave, grants), cert) in policy.identities.iter().zip(&certs) {
        let dir = ks.enclave_dir(enclave)?;
        write_file(&dir.join("cert.pem"), cert, 0o644)?;
        write_file(
            &dir.join("grants.yaml"),
            &grants_yaml(enclave, grants),
            0o644,
        )?;
    }
    write_file(&ks.root().join("policy.yaml"), &text, 0o644)?;
    Ok(policy.identities.keys().cloned().collect())
}
