//! A keystore on disk and the identity of one enclave loaded from it.
//!
//! ```text
//! KS/
//!   ferry-keystore.toml        version = 1, algorithm = "ed25519"
//!   public/ca.cert.pem         the trust anchor
//!   private/ca.key.pem         the CA's key (0600): keep it off robots
//!   policy.yaml                the last policy applied
//!   enclaves/robot1/talker/
//!       key.pem                PKCS#8 Ed25519 (0600)
//!       cert.pem               CN=/robot1/talker, signed by the CA, with the grants extension
//!       grants.yaml            the same grants in words (for people)
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use ring::signature::{Ed25519KeyPair, KeyPair as _};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use thiserror::Error;
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

use crate::enclave::{check_enclave, enclave_dir, EnclaveError};
use crate::grants::{Grants, GrantsError, GRANTS_OID};

/// The file that marks a directory as a keystore.
pub const MARKER: &str = "ferry-keystore.toml";

/// A keystore directory.
#[derive(Debug, Clone)]
pub struct Keystore {
    root: PathBuf,
}

/// A directory that is not a usable keystore.
#[derive(Debug, Error)]
pub enum KeystoreError {
    /// No marker file.
    #[error("{0} is not a ferry keystore (no {MARKER}): create one with `ferry security create-keystore {0}`")]
    NotAKeystore(String),
    /// The marker names another version.
    #[error("{path}: keystore version {version:?}, this ferry reads version 1")]
    Version {
        /// The marker file.
        path: String,
        /// What it says.
        version: String,
    },
    /// Reading failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A bad enclave name.
    #[error(transparent)]
    Enclave(#[from] EnclaveError),
    /// No enclave was named and the keystore has none.
    #[error("keystore {0} has no enclave: run `ferry security create-identity {0} /your/enclave`")]
    NoEnclave(String),
    /// No broker certificate in the keystore, or not the one named, or
    /// several and none named.
    #[error("keystore {keystore}: {why}")]
    BrokerCertificate {
        /// The keystore.
        keystore: String,
        /// What is missing and how to make it.
        why: String,
    },
    /// No enclave was named and the keystore has several.
    #[error("keystore {keystore} has {} enclaves ({}): choose one with FERRY_ENCLAVE or [security] enclave", .enclaves.len(), .enclaves.join(", "))]
    SeveralEnclaves {
        /// The keystore.
        keystore: String,
        /// Its enclaves.
        enclaves: Vec<String>,
    },
}

impl Keystore {
    /// Opens the keystore at `root` (checks its marker).
    pub fn open(root: impl AsRef<Path>) -> Result<Keystore, KeystoreError> {
        let root = root.as_ref().to_path_buf();
        let marker = root.join(MARKER);
        let text = std::fs::read_to_string(&marker)
            .map_err(|_| KeystoreError::NotAKeystore(root.display().to_string()))?;
        let version = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("version"))
            .map(|v| v.trim().trim_start_matches('=').trim().to_string())
            .unwrap_or_default();
        if version != "1" {
            return Err(KeystoreError::Version {
                path: marker.display().to_string(),
                version,
            });
        }
        Ok(Keystore { root })
    }

    /// The keystore's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The CA certificate (the trust anchor).
    pub fn ca_cert_path(&self) -> PathBuf {
        self.root.join("public").join("ca.cert.pem")
    }

    /// The CA's private key (absent on robots that only run).
    pub fn ca_key_path(&self) -> PathBuf {
        self.root.join("private").join("ca.key.pem")
    }

    /// The directory of an enclave.
    pub fn enclave_dir(&self, enclave: &str) -> Result<PathBuf, EnclaveError> {
        check_enclave(enclave)?;
        Ok(enclave_dir(&self.root, enclave))
    }

    /// The CA certificate (DER), read from `public/ca.cert.pem` (not
    /// checked: it is the trust anchor).
    pub fn ca_der(&self) -> Result<Vec<u8>, IdentityError> {
        read_cert(&self.ca_cert_path())
    }

    /// The directory of a broker certificate (`brokers/<name>/`, made by
    /// `ferry security create-broker-cert`): `name`, else the only one.
    pub fn broker_cert_dir(&self, name: Option<&str>) -> Result<PathBuf, KeystoreError> {
        let err = |why: String| KeystoreError::BrokerCertificate {
            keystore: self.root.display().to_string(),
            why,
        };
        let top = self.root.join("brokers");
        let mut all: Vec<String> = std::fs::read_dir(&top)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.path().join("cert.pem").is_file())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        all.sort();
        let make = "make one with `ferry security create-broker-cert KEYSTORE HOST…`";
        match name {
            Some(n) if all.iter().any(|a| a == n) => Ok(top.join(n)),
            Some(n) => Err(err(format!(
                "no broker certificate `{n}` in brokers/: {make}"
            ))),
            None if all.len() == 1 => Ok(top.join(&all[0])),
            None if all.is_empty() => Err(err(format!("no broker certificate: {make}"))),
            None => Err(err(format!(
                "{} broker certificates ({}): name one ([mqtt] broker_cert)",
                all.len(),
                all.join(", ")
            ))),
        }
    }

    /// The enclave a runtime runs as: `configured`, else the keystore's
    /// only one.
    pub fn choose_enclave(&self, configured: Option<&str>) -> Result<String, KeystoreError> {
        if let Some(e) = configured {
            return Ok(e.to_string());
        }
        let mut all = self.enclaves()?;
        match all.len() {
            1 => Ok(all.remove(0)),
            0 => Err(KeystoreError::NoEnclave(self.root.display().to_string())),
            _ => Err(KeystoreError::SeveralEnclaves {
                keystore: self.root.display().to_string(),
                enclaves: all,
            }),
        }
    }

    /// Every enclave with a certificate, sorted.
    pub fn enclaves(&self) -> Result<Vec<String>, KeystoreError> {
        let mut out = Vec::new();
        let top = self.root.join("enclaves");
        let mut stack = vec![(top.clone(), String::new())];
        while let Some((dir, name)) = stack.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if dir == top && e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(KeystoreError::Io {
                        path: dir.display().to_string(),
                        source,
                    })
                }
            };
            if dir.join("cert.pem").is_file() {
                out.push(if name.is_empty() {
                    "/".into()
                } else {
                    name.clone()
                });
            }
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    let seg = e.file_name().to_string_lossy().into_owned();
                    stack.push((e.path(), format!("{name}/{seg}")));
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

/// Why an identity cannot be used.
#[derive(Debug, Error)]
pub enum IdentityError {
    /// The keystore itself.
    #[error(transparent)]
    Keystore(#[from] KeystoreError),
    /// A bad enclave name.
    #[error(transparent)]
    Enclave(#[from] EnclaveError),
    /// No certificate or key for the enclave.
    #[error("no {what} for enclave {enclave} at {path}: run `ferry security create-identity {keystore} {enclave}`")]
    Missing {
        /// `certificate` or `key`.
        what: &'static str,
        /// The enclave.
        enclave: String,
        /// Where it was looked for.
        path: String,
        /// The keystore.
        keystore: String,
    },
    /// A file that is not the PEM it should be.
    #[error("{path}: {reason}")]
    Pem {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A certificate that does not parse.
    #[error("{path}: not an X.509 certificate ({reason})")]
    Certificate {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// Not signed by this keystore's CA.
    #[error("the certificate of {enclave} is not signed by this keystore's CA (copied from another keystore?): re-run `ferry security create-identity` here")]
    ForeignCa {
        /// The enclave.
        enclave: String,
    },
    /// The certificate's name is another enclave's.
    #[error("the certificate in {enclave}'s directory is for {cn:?}")]
    WrongName {
        /// The enclave asked for.
        enclave: String,
        /// The certificate's common name.
        cn: String,
    },
    /// Outside the certificate's validity.
    #[error("{0}: check the clock, or re-issue it with `ferry security create-permissions`")]
    Validity(OutsideValidity),
    /// The key is not the certificate's.
    #[error("the key of {enclave} does not belong to its certificate")]
    KeyMismatch {
        /// The enclave.
        enclave: String,
    },
    /// Not an Ed25519 key.
    #[error("{path}: not an Ed25519 PKCS#8 key ({reason})")]
    Key {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A key readable by others.
    #[error("{path} is readable by group or others (mode {mode:o}): `chmod 600 {path}`")]
    KeyTooOpen {
        /// The file.
        path: String,
        /// Its mode bits.
        mode: u32,
    },
    /// Grants that do not decode.
    #[error("the grants of {enclave}: {source}")]
    Grants {
        /// The enclave.
        enclave: String,
        /// Why.
        source: GrantsError,
    },
}

/// A certificate used outside its validity (its own or a peer's).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("the certificate of {enclave} is {state} (valid {not_before} to {not_after}, Unix seconds; now {now})")]
pub struct OutsideValidity {
    /// The enclave.
    pub enclave: String,
    /// `expired` or `not yet valid`.
    pub state: &'static str,
    /// Start, Unix seconds.
    pub not_before: i64,
    /// End, Unix seconds.
    pub not_after: i64,
    /// Now, Unix seconds.
    pub now: i64,
}

impl OutsideValidity {
    /// Whether `now` is within `[not_before, not_after]` (Unix seconds).
    pub(crate) fn check(
        enclave: &str,
        not_before: i64,
        not_after: i64,
        now: i64,
    ) -> Result<(), OutsideValidity> {
        if now >= not_before && now <= not_after {
            return Ok(());
        }
        Err(OutsideValidity {
            enclave: enclave.into(),
            state: if now > not_after {
                "expired"
            } else {
                "not yet valid"
            },
            not_before,
            not_after,
            now,
        })
    }
}

/// One enclave's proven identity: its key, its certificate (checked against
/// the keystore's CA, its validity and its name) and its grants.
pub struct Identity {
    enclave: String,
    key: Ed25519KeyPair,
    /// The key, PKCS#8 DER (for TLS).
    key_pkcs8: Vec<u8>,
    cert_der: Vec<u8>,
    ca_der: Vec<u8>,
    grants: Grants,
    serial: String,
    not_before: i64,
    not_after: i64,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("enclave", &self.enclave)
            .field("serial", &self.serial)
            .field("not_after", &self.not_after)
            .field("grants", &self.grants)
            .finish_non_exhaustive()
    }
}

/// Reads a PEM certificate.
pub(crate) fn read_cert(path: &Path) -> Result<Vec<u8>, IdentityError> {
    CertificateDer::from_pem_file(path)
        .map(|c| c.as_ref().to_vec())
        .map_err(|e| IdentityError::Pem {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
}

/// Reads a PEM PKCS#8 key, refusing one readable by group or others.
pub(crate) fn read_key(path: &Path) -> Result<Vec<u8>, IdentityError> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path).map_err(|e| IdentityError::Pem {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(IdentityError::KeyTooOpen {
            path: path.display().to_string(),
            mode,
        });
    }
    PrivatePkcs8KeyDer::from_pem_file(path)
        .map(|k| k.secret_pkcs8_der().to_vec())
        .map_err(|e| IdentityError::Pem {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
}

/// Parses a DER certificate read from `path`.
fn parse_cert<'a>(der: &'a [u8], path: &Path) -> Result<X509Certificate<'a>, IdentityError> {
    X509Certificate::from_der(der)
        .map(|(_, c)| c)
        .map_err(|e| IdentityError::Certificate {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
}

/// The grants carried by a certificate (none: nothing allowed).
pub(crate) fn cert_grants(cert: &X509Certificate<'_>) -> Result<Grants, GrantsError> {
    let oid = GRANTS_OID
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(".");
    match cert
        .extensions()
        .iter()
        .find(|e| e.oid.to_id_string() == oid)
    {
        Some(ext) => {
            Grants::decode(crate::der::octet_string(ext.value).ok_or(GrantsError::Truncated(0))?)
        }
        None => Ok(Grants::default()),
    }
}

/// Now, Unix seconds.
pub(crate) fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Identity {
    /// Loads and checks the identity of `enclave` from a keystore: the
    /// certificate must be signed by the keystore's CA, name the enclave,
    /// be valid now, and match the key; the key file must be private.
    pub fn load(ks: &Keystore, enclave: &str) -> Result<Identity, IdentityError> {
        let dir = ks.enclave_dir(enclave)?;
        let missing = |what, path: &Path| IdentityError::Missing {
            what,
            enclave: enclave.into(),
            path: path.display().to_string(),
            keystore: ks.root().display().to_string(),
        };
        let cert_path = dir.join("cert.pem");
        let key_path = dir.join("key.pem");
        if !cert_path.is_file() {
            return Err(missing("certificate", &cert_path));
        }
        if !key_path.is_file() {
            return Err(missing("key", &key_path));
        }
        let ca_path = ks.ca_cert_path();
        let ca_der = read_cert(&ca_path)?;
        let cert_der = read_cert(&cert_path)?;
        let key_der = read_key(&key_path)?;
        let ca = parse_cert(&ca_der, &ca_path)?;
        let cert = parse_cert(&cert_der, &cert_path)?;
        // The signature is the proof; names are not compared (a CA name
        // proves nothing, and re-encodings of it may differ).
        if cert.verify_signature(Some(ca.public_key())).is_err() {
            return Err(IdentityError::ForeignCa {
                enclave: enclave.into(),
            });
        }
        let cn = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|c| c.as_str().ok())
            .unwrap_or("")
            .to_string();
        if cn != enclave {
            return Err(IdentityError::WrongName {
                enclave: enclave.into(),
                cn,
            });
        }
        let (not_before, not_after, now) = (
            cert.validity().not_before.timestamp(),
            cert.validity().not_after.timestamp(),
            now_unix(),
        );
        OutsideValidity::check(enclave, not_before, not_after, now)
            .map_err(IdentityError::Validity)?;
        let key = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&key_der).map_err(|e| {
            IdentityError::Key {
                path: key_path.display().to_string(),
                reason: e.to_string(),
            }
        })?;
        if key.public_key().as_ref() != cert.public_key().subject_public_key.data.as_ref() {
            return Err(IdentityError::KeyMismatch {
                enclave: enclave.into(),
            });
        }
        let grants = cert_grants(&cert).map_err(|source| IdentityError::Grants {
            enclave: enclave.into(),
            source,
        })?;
        let serial = cert.raw_serial_as_string().replace(':', "");
        Ok(Identity {
            enclave: enclave.into(),
            key,
            key_pkcs8: key_der,
            cert_der,
            ca_der,
            grants,
            serial,
            not_before,
            not_after,
        })
    }

    /// The enclave (`/robot1/talker`).
    pub fn enclave(&self) -> &str {
        &self.enclave
    }

    /// What it may do.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The certificate's serial number, hex.
    pub fn serial(&self) -> &str {
        &self.serial
    }

    /// Start and end of the certificate's validity, Unix seconds.
    pub fn validity(&self) -> (i64, i64) {
        (self.not_before, self.not_after)
    }

    /// The certificate, DER.
    pub fn cert_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// The CA certificate (trust anchor), DER.
    pub fn ca_der(&self) -> &[u8] {
        &self.ca_der
    }

    /// SHA-256 of the CA certificate, hex (what `ferry doctor` shows).
    pub fn ca_fingerprint(&self) -> String {
        ring::digest::digest(&ring::digest::SHA256, &self.ca_der)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The enclave's public key (32 bytes, Ed25519).
    pub fn public_key(&self) -> &[u8] {
        self.key.public_key().as_ref()
    }

    /// The key, PKCS#8 DER (only for TLS, in this crate).
    pub(crate) fn key_pkcs8(&self) -> &[u8] {
        &self.key_pkcs8
    }

    /// Signs `msg` with the enclave's key (Ed25519, 64 bytes).
    pub fn sign(&self, msg: &[u8]) -> [u8; 64] {
        let mut out = [0u8; 64];
        out.copy_from_slice(self.key.sign(msg).as_ref());
        out
    }
}

/// What `ferry security list` shows of one enclave (read, not checked).
#[derive(Debug, Clone)]
pub struct Summary {
    /// The enclave.
    pub enclave: String,
    /// The certificate's serial number, hex.
    pub serial: String,
    /// End of validity, Unix seconds.
    pub not_after: i64,
    /// Its grants.
    pub grants: Grants,
}

impl Summary {
    /// Reads the certificate of `enclave` without checking it.
    pub fn read(ks: &Keystore, enclave: &str) -> Result<Summary, IdentityError> {
        let path = ks.enclave_dir(enclave)?.join("cert.pem");
        let der = read_cert(&path)?;
        let cert = parse_cert(&der, &path)?;
        Ok(Summary {
            enclave: enclave.into(),
            serial: cert.raw_serial_as_string().replace(':', ""),
            not_after: cert.validity().not_after.timestamp(),
            grants: cert_grants(&cert).map_err(|source| IdentityError::Grants {
                enclave: enclave.into(),
                source,
            })?,
        })
    }
}
