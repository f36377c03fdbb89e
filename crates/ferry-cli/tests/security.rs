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
            && out.contains("holds the CA key"),
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
