//! `ferry security`: a keystore, identities and permissions made by the
//! real commands, then a real `ferry topic pub` process that an enforcing
//! identity lets publish on its granted topic and refuses elsewhere.

mod common;
use common::ferry;

#[test]
fn keystore_identities_and_permissions_from_the_command_line() {
    let d = ferry_testkit::TempDir::new("cli-security");
    let ks = d.0.join("ks");
    let ks = ks.to_str().unwrap();
    let (ok, out, err) = ferry(&[], &["security", "create-keystore", ks]);
    assert!(ok && out.contains("created keystore"), "{out}{err}");
    let (ok, _, err) = ferry(&[], &["security", "create-keystore", ks]);
    assert!(!ok && err.contains("already exists"), "{err}");
    for e in ["/robot1/talker", "/robot1/listener"] {
        let (ok, out, err) = ferry(&[], &["security", "create-identity", ks, e]);
        assert!(ok && out.contains(e), "{out}{err}");
    }
    let (ok, out, _) = ferry(&[], &["security", "check", ks, "/robot1/talker"]);
    assert!(ok && out.contains("nothing allowed"), "{out}");

    let bad = d.0.join("bad.yaml");
    std::fs::write(
        &bad,
        "version: 1\nidentities:\n  /robot1/talker:\n    allow: { publsh: [/x] }\n",
    )
    .unwrap();
    let (ok, _, err) = ferry(
        &[],
        &["security", "create-permissions", ks, bad.to_str().unwrap()],
    );
    assert!(!ok && err.contains("publsh"), "{err}");
    let policy = d.0.join("policy.yaml");
    std::fs::write(
        &policy,
        "version: 1\nidentities:\n  /robot1/talker:\n    allow: { publish: [/chatter] }\n    deny: { publish: [/chatter/secret] }\n  /robot1/listener:\n    allow: { subscribe: [\"/**\"] }\n",
    )
    .unwrap();
    let (ok, out, err) = ferry(
        &[],
        &[
            "security",
            "create-permissions",
            ks,
            policy.to_str().unwrap(),
        ],
    );
    assert!(
        ok && out.contains("/robot1/talker: 1 allow, 1 deny"),
        "{out}{err}"
    );
    let (ok, out, _) = ferry(&[], &["security", "list", ks]);
    assert!(ok, "{out}");
    let talker = out
        .lines()
        .find(|l| l.contains("/robot1/talker"))
        .expect(&out);
    // 365 days from now, whole seconds on both sides.
    let days_left = talker.contains("(364 d)") || talker.contains("(365 d)");
    assert!(talker.contains("1 allow, 1 deny") && days_left, "{out}");
    let (ok, out, _) = ferry(&[], &["security", "check", ks, "/robot1/talker"]);
    assert!(
        ok && out.contains("allow publish /chatter")
            && out.contains("deny  publish /chatter/secret"),
        "{out}"
    );
    let (ok, _, err) = ferry(&[], &["security", "check", ks, "/robot1/ghost"]);
    assert!(!ok && err.contains("create-identity"), "{err}");
    // A broker's certificate from the same CA (Mosquitto with client
    // certificates: crates/ferry/tests/mqtt_security.rs).
    let (ok, out, err) = ferry(
        &[],
        &[
            "security",
            "create-broker-cert",
            ks,
            "localhost",
            "127.0.0.1",
        ],
    );
    assert!(ok && out.contains("require_certificate true"), "{out}{err}");
    let key = std::path::Path::new(ks).join("brokers/localhost/key.pem");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let (ok, _, err) = ferry(&[], &["security", "create-broker-cert", ks, "../x"]);
    assert!(!ok && err.contains("not a host name"), "{err}");
    // ferry's broker with a TLS listener from this keystore (clients over
    // it: crates/ferry/tests/mqtt_security.rs).
    let (ok, out, err) = ferry(
        &[],
        &[
            "broker",
            "--listen",
            "127.0.0.1:0",
            "--listen-tls",
            "127.0.0.1:0",
            "--keystore",
            ks,
            "--duration",
            "0.3",
        ],
    );
    assert!(
        ok && out.contains("MQTT 5 over TLS on 127.0.0.1:"),
        "{out}{err}"
    );
    // The broker's ACL from the grants (applied to a real Mosquitto in
    // crates/ferry/tests/mqtt_security.rs).
    let (ok, out, err) = ferry(&[], &["security", "export-mqtt-acl", ks]);
    for line in [
        "user /robot1/talker",
        "topic write ferry/+/chatter",
        "topic deny ferry/+/chatter/secret",
        "user /robot1/listener",
        "topic read ferry/+/#",
    ] {
        assert!(ok && out.lines().any(|l| l == line), "{line}: {out}{err}");
    }

    // A real node process under enforce: its granted topic publishes, the
    // others are refused with the enclave and the remedy named.
    let env = [
        ("FERRY_DOMAIN_ID", "164"),
        ("FERRY_SECURITY", "enforce"),
        ("FERRY_KEYSTORE", ks),
        ("FERRY_ENCLAVE", "/robot1/talker"),
    ];
    let args = |topic: &'static str| {
        [
            "topic",
            "pub",
            topic,
            "std_msgs/msg/String",
            "{data: hi}",
            "--times",
            "1",
        ]
    };
    let (ok, _, err) = ferry(&env, &args("/chatter"));
    assert!(ok, "{err}");
    let (ok, _, err) = ferry(&env, &args("/chatter/secret"));
    assert!(
        !ok && err.contains("enclave /robot1/talker may not publish `/chatter/secret`"),
        "{err}"
    );
    let (ok, out, err) = ferry(&env, &["doctor", "--spin-time", "100"]);
    assert!(
        ok && out.contains("security: enforce · enclave /robot1/talker")
            && out.contains("1 allow / 1 deny")
            && out.contains("holds the CA key")
            && !out.contains("expires in"),
        "{out}{err}"
    );
    // Certificates re-issued for 10 days: doctor warns before peers refuse.
    let (ok, _, err) = ferry(
        &[],
        &[
            "security",
            "create-permissions",
            ks,
            policy.to_str().unwrap(),
            "--days",
            "10",
        ],
    );
    assert!(ok, "{err}");
    let (ok, out, err) = ferry(&env, &["doctor", "--spin-time", "100"]);
    assert!(
        ok && (out.contains("expires in 9 d") || out.contains("expires in 10 d")),
        "{out}{err}"
    );
    let (ok, _, err) = ferry(
        &[("FERRY_SECURITY", "enforce"), ("FERRY_DOMAIN_ID", "164")],
        &args("/chatter"),
    );
    assert!(!ok && err.contains("FERRY_KEYSTORE"), "{err}");
    let (ok, _, err) = ferry(&[("FERRY_SECURITY", "strict")], &args("/chatter"));
    assert!(!ok && err.contains("FERRY_SECURITY"), "{err}");
}

/// Runs `ferry admin /talker ARGS` as `enclave` under enforce (shared
/// memory off with `network`: the request then crosses TCP with TLS).
fn admin_as(ks: &str, enclave: &str, network: bool, args: &[&str]) -> (bool, String) {
    let mut env = vec![
        ("FERRY_DOMAIN_ID", "169"),
        ("FERRY_DISCOVERY", "localhost"),
        ("FERRY_SECURITY", "enforce"),
        ("FERRY_KEYSTORE", ks),
        ("FERRY_ENCLAVE", enclave),
    ];
    if network {
        env.push(("FERRY_SHM", "off"));
    }
    let mut a = vec!["admin", "/talker", "--timeout", "10"];
    a.extend_from_slice(args);
    let (ok, out, err) = ferry(&env, &a);
    (ok, format!("{out}{err}"))
}

#[test]
fn the_admin_plane_answers_only_identities_with_the_admin_or_monitor_grant() {
    let d = ferry_testkit::TempDir::new("cli-security-admin");
    let ks_path = d.0.join("ks");
    let ks = ks_path.to_str().unwrap();
    assert!(ferry(&[], &["security", "create-keystore", ks]).0);
    for e in ["/robot1/talker", "/ops", "/viewer", "/nobody"] {
        let (ok, out, err) = ferry(&[], &["security", "create-identity", ks, e]);
        assert!(ok, "{out}{err}");
    }
    let policy = d.0.join("policy.yaml");
    std::fs::write(
        &policy,
        "version: 1\nidentities:\n  /robot1/talker:\n    allow: { publish: [/chatter] }\n  \
         /ops:\n    allow: { admin: [\"/**\"] }\n  /viewer:\n    allow: { monitor: [/talker] }\n  \
         /nobody:\n    allow: { subscribe: [/elsewhere] }\n",
    )
    .unwrap();
    let (ok, out, err) = ferry(
        &[],
        &[
            "security",
            "create-permissions",
            ks,
            policy.to_str().unwrap(),
        ],
    );
    assert!(ok, "{out}{err}");
    let mut talker = std::process::Command::new(common::FERRY)
        .args([
            "topic",
            "pub",
            "/chatter",
            "std_msgs/msg/String",
            "{data: hi}",
            "--rate",
            "5",
            "--times",
            "600",
            "--node-name",
            "talker",
        ])
        .env("FERRY_DOMAIN_ID", "169")
        .env("FERRY_DISCOVERY", "localhost")
        .env("FERRY_SECURITY", "enforce")
        .env("FERRY_KEYSTORE", ks)
        .env("FERRY_ENCLAVE", "/robot1/talker")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ferry topic pub");
    let mut failures = Vec::new();
    // Shared memory (the attaching process is checked against the signed
    // pid of its participant), then TCP with TLS (its certificate).
    for network in [false, true] {
        let path = if network { "tcp" } else { "shm" };
        let mut expect = |enclave: &str, args: &[&str], allowed: bool| {
            let (ok, out) = admin_as(ks, enclave, network, args);
            let denied = out.contains("permission denied") && out.contains(enclave);
            // An allowed `set` gets past the check and then finds no
            // subscriber to change: an answer, not a refusal.
            let answered = ok || (args[0] == "set" && out.contains("no connection of `/chatter`"));
            if answered != allowed || denied == allowed {
                failures.push(format!(
                    "{path}: {enclave} {args:?}: expected {}, got:\n{out}",
                    if allowed {
                        "an answer"
                    } else {
                        "permission denied"
                    }
                ));
            }
        };
        expect("/viewer", &["connections"], true);
        expect("/viewer", &["counters"], true);
        expect("/ops", &["counters"], true);
        expect("/nobody", &["connections"], false);
        expect("/viewer", &["set", "/chatter", "--priority", "high"], false);
        expect("/ops", &["set", "/chatter", "--priority", "high"], true);
        // The request itself arrived on the path under test (the talker's
        // admin service reads only `ferry admin` clients; the peer column
        // shows the client's node name once its records arrived, its
        // endpoint id before).
        let (_, listing) = admin_as(ks, "/viewer", network, &["connections"]);
        let on_path = listing.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[0] == "/_ferry/admin/talker" && f[1] == "reader" && f[3] == path
        });
        if !on_path {
            failures.push(format!("the request did not cross {path}:\n{listing}"));
        }
    }
    // The refusals were counted by the talker.
    let (_, counters) = admin_as(ks, "/ops", false, &["counters"]);
    let _ = talker.kill();
    let _ = talker.wait();
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut talker.stderr.take().unwrap(), &mut err);
    assert!(
        failures.is_empty(),
        "{}\ntalker:\n{err}",
        failures.join("\n")
    );
    assert!(
        counters.contains("admin requests denied 4"),
        "{counters}\ntalker:\n{err}"
    );
}

/// Sends a shared-memory attach request to the runtime `victim`'s control
/// socket, claiming to be `writer`, and returns its answer.
fn forged_attach(
    victim: ferry::ParticipantId,
    writer: ferry::EndpointId,
    reader: ferry::EndpointId,
) -> ferry_wire::shm::Control {
    use ferry_wire::shm::{read_message, Attach, Control};
    use std::io::{Read, Write};
    let socket = format!(
        "{}/{}",
        ferry_shm::segment::SHM_DIR,
        ferry_shm::segment::name('s', &victim.to_string())
    );
    let mut s = std::os::unix::net::UnixStream::connect(&socket).expect(&socket);
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let attach = Control::Attach(Attach {
        writer,
        reader,
        connection: "ferry.c.forged".into(),
        data_prefix: "ferry.d.forged".into(),
        reply_to: None,
    });
    s.write_all(&attach.encode()).unwrap();
    read_message(|buf| {
        s.read_exact(buf)
            .map_err(|_| ferry_wire::WireError::Truncated {
                offset: 0,
                needed: buf.len(),
            })
    })
    .expect("an answer")
}

#[test]
fn a_process_cannot_attach_by_shared_memory_as_another_proven_participant() {
    use ferry::msgs::std_msgs;
    use std::time::{Duration, Instant};
    let d = ferry_testkit::TempDir::new("cli-security-shm");
    let ks = ferry_security::create::create_keystore(
        &d.0.join("ks"),
        ferry_security::create::Validity::days(1),
    )
    .unwrap();
    for e in ["/robot1/talker", "/robot1/listener"] {
        ferry_security::create::create_identity(&ks, e, ferry_security::create::Validity::days(1))
            .unwrap();
    }
    let policy = d.0.join("policy.yaml");
    std::fs::write(
        &policy,
        "version: 1\nidentities:\n  /robot1/talker:\n    allow: { publish: [/chatter] }\n  \
         /robot1/listener:\n    allow: { subscribe: [/chatter], publish: [/elsewhere] }\n",
    )
    .unwrap();
    ferry_security::create::create_permissions(
        &ks,
        &policy,
        ferry_security::create::Validity::days(1),
    )
    .unwrap();
    let ks_dir = d.0.join("ks");
    let ks_str = ks_dir.to_str().unwrap();
    // The real talker: another process, proven by its signed beacons.
    let mut talker = std::process::Command::new(common::FERRY)
        .args([
            "topic",
            "pub",
            "/chatter",
            "std_msgs/msg/String",
            "{data: real}",
            "--rate",
            "10",
            "--times",
            "600",
        ])
        .env("FERRY_DOMAIN_ID", "170")
        .env("FERRY_DISCOVERY", "localhost")
        .env("FERRY_SECURITY", "enforce")
        .env("FERRY_KEYSTORE", ks_str)
        .env("FERRY_ENCLAVE", "/robot1/talker")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("ferry topic pub");
    // This process: the listener, enforcing.
    let mut c = ferry::Config {
        domain_id: 170,
        discovery: ferry::DiscoveryRange::Localhost,
        ..Default::default()
    };
    c.security.mode = ferry_security::Mode::Enforce;
    c.security.keystore = Some(ks_dir.clone());
    c.security.enclave = Some("/robot1/listener".into());
    let listener = ferry::Node::builder()
        .name("listener")
        .config(c)
        .build()
        .unwrap();
    let s = listener
        .subscriber::<std_msgs::String>("/chatter")
        .build()
        .unwrap();
    let got = s.recv_timeout(Duration::from_secs(10));
    let t0 = Instant::now();
    let writer = loop {
        let w = listener
            .graph()
            .endpoints_of("/chatter")
            .find(|e| e.kind == ferry::EndpointKind::Publisher)
            .map(|e| e.id);
        if w.is_some() || t0.elapsed() > Duration::from_secs(10) {
            break w;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // This process (another pid) claims to be the talker's publisher.
    let answer = writer.map(|w| forged_attach(listener.participant(), w, s.id()));
    let _ = talker.kill();
    let _ = talker.wait();
    assert!(
        got.is_ok_and(|m| m.data == "real"),
        "the real talker was not delivered"
    );
    let answer = answer.expect("the talker's publisher was discovered");
    match answer {
        ferry_wire::shm::Control::Refused { reason, detail } => {
            assert_eq!(
                reason,
                ferry_wire::shm::RefuseReason::NotPermitted,
                "{detail}"
            );
            assert!(detail.contains("signed pid"), "{detail}");
        }
        other => panic!("a forged attach was answered {other:?}"),
    }
    assert!(listener.connection_stats().denied >= 1);
}
