//! `ferry security create-keystore|create-identity|create-permissions|create-broker-cert|export-mqtt-acl|list|check`:
//! keystores, enclave identities and their grants, as `ros2 security` makes
//! them.

use std::path::PathBuf;

use clap::Subcommand;
use ferry_security::create::{self, Validity};
use ferry_security::{Action, Effect, Identity, Keystore, Summary};

#[derive(Subcommand)]
pub enum SecurityCmd {
    /// Create a keystore: a CA key (private/) and its certificate (public/).
    CreateKeystore {
        /// The keystore's directory (new or empty).
        keystore: PathBuf,
        /// Days the CA certificate is valid.
        #[arg(long, default_value_t = 3650)]
        days: u32,
    },
    /// Create an enclave's identity: a key and a CA-signed certificate,
    /// allowed nothing until `create-permissions`.
    CreateIdentity {
        /// The keystore.
        keystore: PathBuf,
        /// The enclave, e.g. `/robot1/talker` (one per runtime; `/` for one
        /// identity for a whole system).
        enclave: String,
        /// Days the certificate is valid.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
    /// Apply a policy (YAML): re-issue the certificate of every enclave it
    /// names with its grants.
    CreatePermissions {
        /// The keystore.
        keystore: PathBuf,
        /// The policy file.
        policy: PathBuf,
        /// Days the certificates are valid.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
    /// Issue an MQTT broker's TLS certificate (Mosquitto, EMQX) signed by
    /// the keystore's CA, for the names clients reach it by.
    CreateBrokerCert {
        /// The keystore.
        keystore: PathBuf,
        /// DNS names or IP addresses of the broker (the first names the
        /// directory: `brokers/<name>/`).
        #[arg(required = true)]
        names: Vec<String>,
        /// Days the certificate is valid.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
    /// Print a Mosquitto `acl_file` from the grants of every enclave in the
    /// keystore (users are enclaves: `use_identity_as_username true`).
    ExportMqttAcl {
        /// The keystore.
        keystore: PathBuf,
        /// ferry's `[mqtt] prefix`, the first topic segment.
        #[arg(long, default_value = "ferry")]
        prefix: String,
    },
    /// List the keystore's enclaves: serial, expiry, grants.
    List {
        /// The keystore.
        keystore: PathBuf,
    },
    /// Check that an enclave's identity loads as a runtime would load it:
    /// CA signature, name, validity, key match, key file mode.
    Check {
        /// The keystore.
        keystore: PathBuf,
        /// The enclave.
        enclave: String,
    },
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// `2027-11-27 (365 d)` for a Unix time.
fn expiry(not_after: i64) -> String {
    let days = (not_after - unix_now()).div_euclid(86_400);
    let (y, m, d) = civil(not_after.div_euclid(86_400));
    if days < 0 {
        format!("{y:04}-{m:02}-{d:02} (expired)")
    } else {
        format!("{y:04}-{m:02}-{d:02} ({days} d)")
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `allow publish /chatter` lines of grants.
fn grant_lines(g: &ferry_security::Grants) -> Vec<String> {
    let mut out = Vec::new();
    for r in &g.rules {
        let actions: Vec<&str> = Action::ALL
            .iter()
            .filter(|a| r.actions & a.bit() != 0)
            .map(|a| a.word())
            .collect();
        let effect = match r.effect {
            Effect::Allow => "allow",
            Effect::Deny => "deny ",
        };
        out.push(format!("{effect} {} {}", actions.join(","), r.pattern));
    }
    if out.is_empty() {
        out.push(
            "(nothing allowed: apply a policy with `ferry security create-permissions`)".into(),
        );
    }
    out
}

/// `ferry doctor` warns when the identity's certificate expires sooner.
const EXPIRY_WARNING_DAYS: i64 = 30;

/// The `security:` line of `ferry doctor`: the mode, and the identity a
/// runtime here would load (or why it would not).
pub fn doctor_line(cfg: &ferry::config::security::SecurityConfig) -> String {
    let mode = cfg.mode;
    if mode == ferry_security::Mode::Off {
        return "security: off (FERRY_SECURITY=enforce and FERRY_KEYSTORE turn it on; see docs/SECURITY.md)".into();
    }
    let Some(path) = &cfg.keystore else {
        return format!("security: {mode} without a keystore: this runtime has no identity");
    };
    let ks = match Keystore::open(path) {
        Ok(k) => k,
        Err(e) => return format!("security: {mode}: {e}"),
    };
    let enclave = match ks.choose_enclave(cfg.enclave.as_deref()) {
        Ok(e) => e,
        Err(e) => return format!("security: {mode}: {e}"),
    };
    let mut line = match Identity::load(&ks, &enclave) {
        Ok(id) => {
            let (allow, deny) = id.grants().counts();
            let not_after = id.validity().1;
            let mut l = format!(
                "security: {mode} · enclave {enclave} · CA {}… · certificate {} expires {} · {allow} allow / {deny} deny rules",
                &id.ca_fingerprint()[..16],
                id.serial().chars().take(12).collect::<String>(),
                expiry(not_after)
            );
            let days = (not_after - unix_now()).div_euclid(86_400);
            if days < EXPIRY_WARNING_DAYS {
                l.push_str(&format!(
                    "\nsecurity: warning: the certificate of {enclave} expires in {days} d; peers refuse it \
                     from then on: re-issue it with `ferry security create-permissions KEYSTORE POLICY --days N`"
                ));
            }
            l
        }
        Err(e) => format!("security: {mode}: {e}"),
    };
    if ks.ca_key_path().exists() {
        line.push_str(
            "\nsecurity: warning: this keystore holds the CA key (private/ca.key.pem): deploy robots without private/",
        );
    }
    line
}

pub fn run(cmd: SecurityCmd) -> Result<(), String> {
    let open = |p: &PathBuf| Keystore::open(p).map_err(|e| e.to_string());
    match cmd {
        SecurityCmd::CreateKeystore { keystore, days } => {
            create::create_keystore(&keystore, Validity::days(days)).map_err(|e| e.to_string())?;
            out!("created keystore {}", keystore.display());
            out!(
                "  CA certificate: {}",
                keystore.join("public/ca.cert.pem").display()
            );
            out!(
                "  CA key:         {} (keep it off robots: deploy the keystore without private/)",
                keystore.join("private/ca.key.pem").display()
            );
        }
        SecurityCmd::CreateBrokerCert {
            keystore,
            names,
            days,
        } => {
            let ks = open(&keystore)?;
            let dir = create::create_broker_certificate(&ks, &names, Validity::days(days))
                .map_err(|e| e.to_string())?;
            out!(
                "created the broker certificate for {} in {}",
                names.join(", "),
                dir.display()
            );
            out!(
                "  Mosquitto: certfile {0}/cert.pem, keyfile {0}/key.pem, cafile {1}, \
                 require_certificate true, use_identity_as_username true",
                dir.display(),
                ks.ca_cert_path().display()
            );
        }
        SecurityCmd::CreateIdentity {
            keystore,
            enclave,
            days,
        } => {
            let ks = open(&keystore)?;
            let dir = create::create_identity(&ks, &enclave, Validity::days(days))
                .map_err(|e| e.to_string())?;
            out!("created identity {enclave} in {}", dir.display());
            out!(
                "  it may do nothing yet: apply a policy with `ferry security create-permissions`"
            );
        }
        SecurityCmd::CreatePermissions {
            keystore,
            policy,
            days,
        } => {
            let ks = open(&keystore)?;
            let done = create::create_permissions(&ks, &policy, Validity::days(days))
                .map_err(|e| e.to_string())?;
            for enclave in done {
                let s = Summary::read(&ks, &enclave).map_err(|e| e.to_string())?;
                let (allow, deny) = s.grants.counts();
                out!("{enclave}: {allow} allow, {deny} deny rules (certificate re-issued)");
            }
        }
        SecurityCmd::ExportMqttAcl { keystore, prefix } => {
            let ks = open(&keystore)?;
            let mut enclaves = Vec::new();
            for enclave in ks.enclaves().map_err(|e| e.to_string())? {
                let s = Summary::read(&ks, &enclave).map_err(|e| e.to_string())?;
                enclaves.push((enclave, s.grants));
            }
            let acl = ferry_security::mqtt_acl::mosquitto_acl(&enclaves, &prefix)
                .map_err(|e| e.to_string())?;
            out!("{}", acl.trim_end());
        }
        SecurityCmd::List { keystore } => {
            let ks = open(&keystore)?;
            let mut rows = Vec::new();
            for enclave in ks.enclaves().map_err(|e| e.to_string())? {
                match Summary::read(&ks, &enclave) {
                    Ok(s) => {
                        let (allow, deny) = s.grants.counts();
                        let domains = match &s.grants.domains {
                            None => "all".to_string(),
                            Some(d) => d
                                .iter()
                                .map(|d| d.to_string())
                                .collect::<Vec<_>>()
                                .join(","),
                        };
                        rows.push(vec![
                            enclave,
                            s.serial.chars().take(12).collect(),
                            expiry(s.not_after),
                            format!("{allow} allow, {deny} deny"),
                            domains,
                        ]);
                    }
                    Err(e) => rows.push(vec![
                        enclave,
                        "-".into(),
                        e.to_string(),
                        "-".into(),
                        "-".into(),
                    ]),
                }
            }
            out!(
                "{}",
                crate::table::render(
                    &["ENCLAVE", "SERIAL", "EXPIRES", "GRANTS", "DOMAINS"],
                    rows,
                    &[]
                )
            );
        }
        SecurityCmd::Check { keystore, enclave } => {
            let ks = open(&keystore)?;
            let id = Identity::load(&ks, &enclave).map_err(|e| e.to_string())?;
            out!("{enclave}: ok");
            out!("  CA        {} (SHA-256)", id.ca_fingerprint());
            out!("  serial    {}", id.serial());
            out!("  expires   {}", expiry(id.validity().1));
            for l in grant_lines(id.grants()) {
                out!("  {l}");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::civil;

    #[test]
    fn civil_dates() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(19_723), (2024, 1, 1));
        assert_eq!(civil(20_784), (2026, 11, 27));
        assert_eq!(civil(11_016), (2000, 2, 29));
    }
}
