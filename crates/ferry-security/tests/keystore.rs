//! Keystores, identities and permissions made and loaded on real files,
//! and every way an identity must refuse to load.

use std::path::Path;
use std::time::{Duration, SystemTime};

use ferry_security::create::{
    create_identity, create_keystore, create_permissions, CreateError, Validity,
};
use ferry_security::{Action, Identity, IdentityError, Keystore, Summary};

use ferry_testkit::TempDir as Dir;

fn keystore(d: &Path) -> Keystore {
    create_keystore(d, Validity::days(30)).expect("keystore")
}

const POLICY: &str = r#"
version: 1
domains: [0, 42]
identities:
  /robot1/talker:
    allow: { publish: [/chatter, "/robot1/**"] }
    deny:  { publish: [/robot1/cmd_vel] }
  /robot1/listener:
    allow: { subscribe: [/chatter], call: ["/robot1/planner/*"] }
"#;

#[test]
fn an_identity_may_do_nothing_until_a_policy_grants_it() {
    let d = Dir::new("flow");
    let ks = keystore(&d.0);
    for e in ["/robot1/talker", "/robot1/listener", "/ops"] {
        create_identity(&ks, e, Validity::days(30)).unwrap();
    }
    assert_eq!(
        ks.enclaves().unwrap(),
        ["/ops", "/robot1/listener", "/robot1/talker"]
    );
    let id = Identity::load(&ks, "/robot1/talker").unwrap();
    assert!(!id.grants().allows(Action::Publish, "/chatter"));
    let key_before = std::fs::read(d.0.join("enclaves/robot1/talker/key.pem")).unwrap();

    let policy = d.0.join("policy-in.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let done = create_permissions(&ks, &policy, Validity::days(30)).unwrap();
    assert_eq!(done, ["/robot1/listener", "/robot1/talker"]);
    let t = Identity::load(&ks, "/robot1/talker").unwrap();
    assert!(t.grants().allows(Action::Publish, "/chatter"));
    assert!(t.grants().allows(Action::Publish, "/robot1/odom"));
    assert!(!t.grants().allows(Action::Publish, "/robot1/cmd_vel"));
    assert!(!t.grants().allows(Action::Subscribe, "/chatter"));
    assert!(t.grants().covers_domain(42) && !t.grants().covers_domain(1));
    let l = Identity::load(&ks, "/robot1/listener").unwrap();
    assert!(l.grants().allows(Action::Call, "/robot1/planner/plan"));
    assert!(!l.grants().allows(Action::Call, "/robot1/planner/a/b"));
    // Same key, new certificate; the enclave the policy leaves out keeps
    // its own.
    assert_eq!(
        std::fs::read(d.0.join("enclaves/robot1/talker/key.pem")).unwrap(),
        key_before
    );
    assert_ne!(t.serial(), id.serial());
    assert_eq!(t.public_key(), id.public_key());
    assert_eq!(Summary::read(&ks, "/ops").unwrap().grants.rules.len(), 0);
    assert_eq!(
        std::fs::read_to_string(d.0.join("policy.yaml")).unwrap(),
        POLICY
    );
    // Signatures verify under the certificate's key.
    let sig = t.sign(b"beacon");
    let pk = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, t.public_key());
    assert!(pk.verify(b"beacon", &sig).is_ok());
    assert!(pk.verify(b"beacon!", &sig).is_err());
}

#[test]
fn a_robot_loads_its_identity_without_the_ca_key_but_cannot_make_one() {
    let d = Dir::new("noca");
    let ks = keystore(&d.0);
    create_identity(&ks, "/r", Validity::days(30)).unwrap();
    std::fs::remove_dir_all(d.0.join("private")).unwrap();
    assert!(Identity::load(&ks, "/r").is_ok());
    let e = create_identity(&ks, "/s", Validity::days(30)).unwrap_err();
    assert!(matches!(e, CreateError::NoCaKey(_)), "{e}");
}

#[test]
fn another_keystores_certificate_is_refused() {
    let (a, b) = (Dir::new("ca-a"), Dir::new("ca-b"));
    let (ka, kb) = (keystore(&a.0), keystore(&b.0));
    create_identity(&ka, "/r", Validity::days(30)).unwrap();
    create_identity(&kb, "/r", Validity::days(30)).unwrap();
    for f in ["cert.pem", "key.pem"] {
        std::fs::copy(
            b.0.join("enclaves/r").join(f),
            a.0.join("enclaves/r").join(f),
        )
        .unwrap();
    }
    let e = Identity::load(&ka, "/r").unwrap_err();
    assert!(matches!(e, IdentityError::ForeignCa { .. }), "{e}");
}

#[test]
fn grants_edited_into_a_certificate_break_its_signature() {
    let d = Dir::new("tamper");
    let ks = keystore(&d.0);
    create_identity(&ks, "/r", Validity::days(30)).unwrap();
    let policy = d.0.join("p.yaml");
    std::fs::write(
        &policy,
        "version: 1\nidentities:\n  /r:\n    allow: { publish: [/aaaa] }\n",
    )
    .unwrap();
    create_permissions(&ks, &policy, Validity::days(30)).unwrap();
    // Rewrite the pattern inside the DER (same length): /aaaa -> /****.
    let path = d.0.join("enclaves/r/cert.pem");
    let der = rustls_pki_types::CertificateDer::from_pem_file(&path)
        .unwrap()
        .to_vec();
    let at = der
        .windows(5)
        .position(|w| w == b"/aaaa")
        .expect("pattern in the certificate");
    let mut forged = der.clone();
    forged[at + 1..at + 5].copy_from_slice(b"****");
    std::fs::write(&path, pem("CERTIFICATE", &forged)).unwrap();
    let e = Identity::load(&ks, "/r").unwrap_err();
    assert!(matches!(e, IdentityError::ForeignCa { .. }), "{e}");
}

use rustls_pki_types::pem::PemObject as _;

fn pem(label: &str, der: &[u8]) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in der.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                s.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    let body: Vec<String> = s
        .as_bytes()
        .chunks(64)
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        body.join("\n")
    )
}

#[test]
fn a_key_readable_by_others_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let d = Dir::new("mode");
    let ks = keystore(&d.0);
    create_identity(&ks, "/r", Validity::days(30)).unwrap();
    let key = d.0.join("enclaves/r/key.pem");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Identity::load(&ks, "/r").unwrap_err();
    assert!(
        matches!(e, IdentityError::KeyTooOpen { mode: 0o644, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("chmod 600"), "{e}");
}

#[test]
fn an_expired_or_future_certificate_is_refused() {
    let d = Dir::new("expiry");
    let ks = keystore(&d.0);
    let now = SystemTime::now();
    let day = Duration::from_secs(86_400);
    create_identity(
        &ks,
        "/old",
        Validity {
            not_before: now - 10 * day,
            not_after: now - day,
        },
    )
    .unwrap();
    create_identity(
        &ks,
        "/new",
        Validity {
            not_before: now + day,
            not_after: now + 10 * day,
        },
    )
    .unwrap();
    for (e, state) in [("/old", "expired"), ("/new", "not yet valid")] {
        match Identity::load(&ks, e).unwrap_err() {
            IdentityError::Validity(v) => assert_eq!(v.state, state),
            other => panic!("{e}: {other}"),
        }
    }
}

#[test]
fn a_swapped_key_or_name_is_refused() {
    let d = Dir::new("swap");
    let ks = keystore(&d.0);
    create_identity(&ks, "/a", Validity::days(30)).unwrap();
    create_identity(&ks, "/b", Validity::days(30)).unwrap();
    let (a, b) = (d.0.join("enclaves/a"), d.0.join("enclaves/b"));
    // /b's key beside /a's certificate.
    std::fs::copy(a.join("key.pem"), d.0.join("a-key")).unwrap();
    std::fs::copy(b.join("key.pem"), a.join("key.pem")).unwrap();
    let e = Identity::load(&ks, "/a").unwrap_err();
    assert!(matches!(e, IdentityError::KeyMismatch { .. }), "{e}");
    // /a's certificate and key in /b's place.
    std::fs::copy(d.0.join("a-key"), b.join("key.pem")).unwrap();
    std::fs::copy(a.join("cert.pem"), b.join("cert.pem")).unwrap();
    let e = Identity::load(&ks, "/b").unwrap_err();
    assert!(matches!(e, IdentityError::WrongName { .. }), "{e}");
}

#[test]
fn mistakes_are_refused_before_anything_is_written() {
    let d = Dir::new("mistakes");
    let ks = keystore(&d.0);
    assert!(matches!(
        create_keystore(&d.0, Validity::days(1)),
        Err(CreateError::Exists(_))
    ));
    create_identity(&ks, "/a", Validity::days(30)).unwrap();
    assert!(matches!(
        create_identity(&ks, "/a", Validity::days(30)),
        Err(CreateError::Exists(_))
    ));
    assert!(matches!(
        create_identity(&ks, "a/b", Validity::days(30)),
        Err(CreateError::Enclave(_))
    ));
    let cert_before = std::fs::read(d.0.join("enclaves/a/cert.pem")).unwrap();
    let policy = d.0.join("p.yaml");
    std::fs::write(
        &policy,
        "version: 1\nidentities:\n  /a:\n    allow: { publish: [/x] }\n  /ghost:\n    allow: { publish: [/x] }\n",
    )
    .unwrap();
    let e = create_permissions(&ks, &policy, Validity::days(30)).unwrap_err();
    assert!(matches!(e, CreateError::UnknownEnclave { .. }), "{e}");
    assert!(e.to_string().contains("create-identity"), "{e}");
    assert_eq!(
        std::fs::read(d.0.join("enclaves/a/cert.pem")).unwrap(),
        cert_before
    );
    let e = Identity::load(&ks, "/ghost").unwrap_err();
    assert!(matches!(e, IdentityError::Missing { .. }), "{e}");
    assert!(Keystore::open(d.0.join("enclaves")).is_err());
}

/// Drives a client and a server connection against each other in memory
/// until neither has anything to say; the server's error, if any.
fn handshake(
    client: &mut rustls::ClientConnection,
    server: &mut rustls::ServerConnection,
) -> Result<(), String> {
    for _ in 0..20 {
        let mut buf = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut buf).unwrap();
        }
        if !buf.is_empty() {
            server.read_tls(&mut &buf[..]).unwrap();
            server.process_new_packets().map_err(|e| e.to_string())?;
        }
        let mut back = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut back).unwrap();
        }
        if !back.is_empty() {
            client.read_tls(&mut &back[..]).unwrap();
            client.process_new_packets().map_err(|e| e.to_string())?;
        }
        if !client.is_handshaking() && !server.is_handshaking() {
            return Ok(());
        }
    }
    Err("handshake did not finish".into())
}

#[test]
fn tls_is_mutual_and_only_between_identities_of_one_ca() {
    use ferry_security::tls::{peer_identity, server_name};
    let d = Dir::new("tls");
    let other = Dir::new("tls-other");
    let (ks, ks2) = (keystore(&d.0), keystore(&other.0));
    for (k, dir) in [(&ks, &d.0), (&ks2, &other.0)] {
        for e in ["/robot1/talker", "/robot1/listener"] {
            create_identity(k, e, Validity::days(30)).unwrap();
        }
        let policy = dir.join("policy-in.yaml");
        std::fs::write(&policy, POLICY).unwrap();
        create_permissions(k, &policy, Validity::days(30)).unwrap();
    }
    let talker = Identity::load(&ks, "/robot1/talker").unwrap();
    let listener = Identity::load(&ks, "/robot1/listener").unwrap();
    let stranger = Identity::load(&ks2, "/robot1/listener").unwrap();
    let (t, l, s) = (
        talker.tls_configs().unwrap(),
        listener.tls_configs().unwrap(),
        stranger.tls_configs().unwrap(),
    );
    let mut c = rustls::ClientConnection::new(t.client.clone(), server_name()).unwrap();
    let mut srv = rustls::ServerConnection::new(l.server.clone()).unwrap();
    handshake(&mut c, &mut srv).unwrap();
    assert_eq!(c.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
    // Each end knows the other's enclave and grants.
    let seen_by_server = peer_identity(&srv, &listener, 0).unwrap();
    assert_eq!(seen_by_server.enclave(), "/robot1/talker");
    assert!(seen_by_server.allows(Action::Publish, "/chatter"));
    let seen_by_client = peer_identity(&c, &talker, 0).unwrap();
    assert_eq!(seen_by_client.enclave(), "/robot1/listener");
    // Another keystore's identity fails on both sides.
    let mut c = rustls::ClientConnection::new(s.client.clone(), server_name()).unwrap();
    let mut srv = rustls::ServerConnection::new(l.server.clone()).unwrap();
    assert!(
        handshake(&mut c, &mut srv).is_err(),
        "a stranger's client was accepted"
    );
    let mut c = rustls::ClientConnection::new(t.client.clone(), server_name()).unwrap();
    let mut srv = rustls::ServerConnection::new(s.server.clone()).unwrap();
    assert!(
        handshake(&mut c, &mut srv).is_err(),
        "a stranger's server was accepted"
    );
}
