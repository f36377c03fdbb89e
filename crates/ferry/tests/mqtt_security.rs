//! MQTT with security on, against a real Mosquitto that requires client
//! certificates: the keystore issues the broker's certificate
//! (`create_broker_certificate`, what `ferry security create-broker-cert`
//! runs), enforcing runtimes connect with their enclaves' certificates,
//! trust the broker through the keystore's CA and exchange samples through
//! it; a runtime without a client
//! certificate, or with one from another keystore, is refused by the broker;
//! under enforce a plain broker off this host is a build error.
#![cfg(feature = "mqtt-tls")]

use std::process::{Command, Stdio};
use std::time::Duration;

use ferry::config::mqtt::{BrokerDiscovery, BrokerUrl, MqttConfig, OnUnreachable, Scope};
use ferry::msgs::std_msgs;
use ferry::{Config, DiscoveryRange, Node, TopicRule};
use ferry_security::create::{
    create_broker_certificate, create_identity, create_keystore, create_permissions, Validity,
};
use ferry_security::Mode;
use ferry_testkit::{wait_listening, TempDir};

const T: Duration = Duration::from_secs(10);
const DOMAIN: u16 = 226;

use ferry_testkit::free_port;

/// A keystore with `/robot1/talker` (publish `/cloud/**`) and
/// `/robot1/listener` (subscribe), and the broker's certificate for
/// localhost.
fn keystore(d: &TempDir, name: &str) -> std::path::PathBuf {
    keystore_with(d, name, &[])
}

/// [`keystore`] with more enclaves: name and grants (policy YAML flow).
fn keystore_with(d: &TempDir, name: &str, more: &[(&str, &str)]) -> std::path::PathBuf {
    let root = d.path().join(name);
    let ks = create_keystore(&root, Validity::days(1)).unwrap();
    let mut policy = format!(
        "version: 1\ndomains: [{DOMAIN}]\nidentities:\n  /robot1/talker: {{ allow: {{ publish: [\"/cloud/**\"] }} }}\n  /robot1/listener: {{ allow: {{ subscribe: [\"/cloud/**\"] }} }}\n"
    );
    for (e, grants) in [("/robot1/talker", ""), ("/robot1/listener", "")]
        .into_iter()
        .chain(more.iter().copied())
    {
        create_identity(&ks, e, Validity::days(1)).unwrap();
        if !grants.is_empty() {
            policy.push_str(&format!("  {e}: {grants}\n"));
        }
    }
    let path = d.path().join(format!("{name}-policy.yaml"));
    std::fs::write(&path, policy).unwrap();
    create_permissions(&ks, &path, Validity::days(1)).unwrap();
    create_broker_certificate(
        &ks,
        &["localhost".to_string(), "127.0.0.1".to_string()],
        Validity::days(1),
    )
    .unwrap();
    root
}

fn config(broker: BrokerUrl, mode: Mode, ks: Option<&std::path::Path>) -> Config {
    let mut c = config_as(broker, ks, "/robot1/talker");
    c.security.mode = mode;
    c
}

/// Enforcing as `enclave` (security off without a keystore), meeting
/// others only through the broker.
fn config_as(broker: BrokerUrl, ks: Option<&std::path::Path>, enclave: &str) -> Config {
    let mut c = Config {
        domain_id: DOMAIN,
        discovery: DiscoveryRange::Off,
        shared_memory: false,
        topics: vec![TopicRule {
            pattern: "/cloud/**".into(),
            scope: Some(Scope::Cloud),
            ..Default::default()
        }],
        mqtt: Some(MqttConfig {
            on_unreachable: OnUnreachable::Fail,
            connect_timeout_ms: 3000,
            discovery: BrokerDiscovery::On,
            ..MqttConfig::new(broker)
        }),
        ..Config::default()
    };
    if ks.is_some() {
        c.security.mode = Mode::Enforce;
    }
    c.security.keystore = ks.map(|p| p.to_path_buf());
    c.security.enclave = ks.map(|_| enclave.to_string());
    c
}

/// Pinned to the broker: two runtimes of one process would otherwise meet
/// in process once the broker introduced them.
fn through_the_broker() -> ferry::Qos {
    ferry::Qos::default()
        .reliable()
        .keep_all()
        .transport(ferry::TransportKind::Mqtt)
}

#[test]
fn an_enforcing_runtime_meets_a_broker_that_requires_client_certificates() {
    let d = TempDir::new("mqtt-mtls");
    let ks = keystore(&d, "ks");
    let other = keystore(&d, "other");
    let (_mosq, port) = mosquitto_mtls(&d, &ks, None);
    let tls = BrokerUrl::Tls {
        host: "localhost".into(),
        port,
    };

    // Enforce: the enclave's certificate for the broker, the keystore's CA
    // for the broker's certificate; no file named in [mqtt].
    let n = Node::builder()
        .name("talker")
        .config(config(tls.clone(), Mode::Enforce, Some(&ks)))
        .build()
        .expect("an enforcing runtime connects with its enclave certificate");
    assert!(n.broker_state().unwrap().connected);
    let p = n
        .publisher::<std_msgs::String>("/cloud/mtls")
        .qos(through_the_broker())
        .build()
        .unwrap();
    // A reader in another enforcing runtime, through the broker only
    // (discovery through the broker, signed).
    let listener = Node::builder()
        .name("listener")
        .config(config_as(tls.clone(), Some(&ks), "/robot1/listener"))
        .build()
        .expect("the listener connects with its enclave certificate");
    let s = listener
        .subscriber::<std_msgs::String>("/cloud/mtls")
        .qos(through_the_broker())
        .build()
        .unwrap();
    assert!(
        p.wait_for_subscribers(1, T),
        "the two runtimes never met through the broker"
    );
    let msg = std_msgs::String {
        data: "client certificate".into(),
    };
    p.publish(msg.clone()).unwrap();
    let got = s.recv_timeout(T).expect("delivered through the broker");
    assert_eq!(got.data, msg.data);
    // Samples larger than rustls' default 64 KiB buffer go through whole
    // (they once failed: the write into TLS was refused).
    for size in [70_000usize, 3 << 20] {
        let big = std_msgs::String {
            data: "x".repeat(size),
        };
        p.publish(big).unwrap();
        let got = s.recv_timeout(T).expect("a large sample through TLS");
        assert_eq!(got.data.len(), size);
    }
    for c in p.connections() {
        assert_eq!(c.transport, ferry::TransportKind::Mqtt);
        assert_eq!(c.protection, "tls (to the broker)");
    }

    // No client certificate, or one of another CA: the broker refuses the
    // handshake.
    let e = strangers_are_refused(tls, &ks, &other);
    assert!(e.contains("mqtts://localhost"), "{e}");
}

/// Mosquitto with TLS, client certificates required, and `acl` as its
/// `acl_file` (none: no ACL), on a free port.
fn mosquitto_mtls(d: &TempDir, ks: &std::path::Path, acl: Option<&str>) -> (Killed, u16) {
    let port = free_port();
    let acl_line = match acl {
        Some(text) => {
            let path = d.path().join("acl");
            std::fs::write(&path, text).unwrap();
            format!("acl_file {}\n", path.display())
        }
        None => String::new(),
    };
    let conf = d.path().join(format!("m-{port}.conf"));
    std::fs::write(
        &conf,
        format!(
            "listener {port} 127.0.0.1\ncafile {ca}\ncertfile {b}/cert.pem\nkeyfile {b}/key.pem\n\
             require_certificate true\nuse_identity_as_username true\ntls_version tlsv1.3\n\
             allow_anonymous false\nuser root\n{acl_line}",
            ca = ks.join("public/ca.cert.pem").display(),
            b = ks.join("brokers/localhost").display()
        ),
    )
    .unwrap();
    let m = Killed(
        Command::new("mosquitto")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto is installed by scripts/setup.sh"),
    );
    assert!(wait_listening(port, T), "mosquitto (mTLS) did not come up");
    (m, port)
}

/// What the broker lets an enclave do is what the keystore's grants say,
/// through the ACL `ferry security export-mqtt-acl` prints: on the MQTT
/// path a reader cannot tell who published, so the broker must refuse.
/// The intruder holds a valid certificate of the CA and runs with security
/// off (no local checks of its own ports): it reads only what its grants
/// allow and cannot publish into the listener's topic.
#[test]
fn the_broker_enforces_the_policy_through_the_exported_acl() {
    let d = TempDir::new("mqtt-acl");
    let root = keystore_with(
        &d,
        "ks",
        &[(
            "/intruder",
            "{ allow: { subscribe: [/cloud/public], publish: [/cloud/public] } }",
        )],
    );
    let ks = ferry_security::Keystore::open(&root).unwrap();
    let enclaves: Vec<_> = ks
        .enclaves()
        .unwrap()
        .into_iter()
        .map(|e| {
            let g = ferry_security::Summary::read(&ks, &e).unwrap().grants;
            (e, g)
        })
        .collect();
    let acl = ferry_security::mqtt_acl::mosquitto_acl(&enclaves, "ferry").unwrap();
    let (_mosq, port) = mosquitto_mtls(&d, &root, Some(&acl));
    let tls = BrokerUrl::Tls {
        host: "localhost".into(),
        port,
    };
    let node = |name: &str, c: Config| Node::builder().name(name).config(c).build().unwrap();
    let talker = node(
        "talker",
        config_as(tls.clone(), Some(&root), "/robot1/talker"),
    );
    let listener = node(
        "listener",
        config_as(tls.clone(), Some(&root), "/robot1/listener"),
    );
    // The intruder: security off, the CA's certificate of /intruder.
    let intruder_cfg = || {
        let mut c = config(tls.clone(), Mode::Off, None);
        if let Some(m) = &mut c.mqtt {
            m.ca_file = Some(root.join("public/ca.cert.pem"));
            m.cert_file = Some(root.join("enclaves/intruder/cert.pem"));
            m.key_file = Some(root.join("enclaves/intruder/key.pem"));
        }
        c
    };
    let intruder = node("intruder", intruder_cfg());
    let accomplice = node("accomplice", {
        let mut c = intruder_cfg();
        c.lease_ms = 3001; // its own runtime, not the intruder's
        c
    });
    let publ = |n: &Node, t: &str| {
        n.publisher::<std_msgs::String>(t)
            .qos(through_the_broker())
            .build()
            .unwrap()
    };
    let sub = |n: &Node, t: &str| {
        n.subscriber::<std_msgs::String>(t)
            .qos(through_the_broker())
            .build()
            .unwrap()
    };
    let (chat, public) = (publ(&talker, "/cloud/chat"), publ(&talker, "/cloud/public"));
    let (l_chat, l_public) = (
        sub(&listener, "/cloud/chat"),
        sub(&listener, "/cloud/public"),
    );
    let (i_chat, i_public) = (
        sub(&intruder, "/cloud/chat"),
        sub(&intruder, "/cloud/public"),
    );
    assert!(chat.wait_for_subscribers(1, T) && public.wait_for_subscribers(1, T));
    let say = |p: &ferry::Publisher<std_msgs::String>, s: &str| {
        p.publish(std_msgs::String { data: s.into() }).unwrap()
    };
    say(&chat, "private");
    say(&public, "public");
    assert_eq!(l_chat.recv_timeout(T).unwrap().data, "private");
    assert_eq!(l_public.recv_timeout(T).unwrap().data, "public");
    assert_eq!(
        i_public
            .recv_timeout(T)
            .expect("its grant lets it read /cloud/public")
            .data,
        "public"
    );
    assert!(
        i_chat.recv_timeout(Duration::from_secs(2)).is_err(),
        "the intruder read /cloud/chat through the broker"
    );
    // The intruder publishes into /cloud/chat (matched with its accomplice
    // through the broker, so it does publish): the broker drops it.
    let forged = publ(&intruder, "/cloud/chat");
    let _a = sub(&accomplice, "/cloud/chat");
    assert!(
        forged.wait_for_subscribers(1, T),
        "the intruder's writer never matched"
    );
    say(&forged, "forged");
    say(&chat, "after");
    assert_eq!(
        l_chat.recv_timeout(T).unwrap().data,
        "after",
        "a sample the intruder's grants do not allow reached the listener"
    );
}

/// The embedded broker with a TLS listener: an enforcing runtime on
/// "another host" (`mqtts://`) meets the broker's own runtime (plain on
/// loopback) through one router; clients without a certificate of the
/// keystore's CA are refused at the handshake.
#[test]
fn the_embedded_broker_takes_tls_clients_of_the_keystore() {
    let d = TempDir::new("mqtt-embedded-tls");
    let ks = keystore(&d, "ks");
    let other = keystore(&d, "other");
    let (plain_port, tls_port) = (free_port(), free_port());
    let mut host = config_as(
        BrokerUrl::Embedded { port: plain_port },
        Some(&ks),
        "/robot1/talker",
    );
    if let Some(m) = &mut host.mqtt {
        m.listen_tls = Some(([127, 0, 0, 1], tls_port).into());
    }
    // Without a keystore there is no CA to admit clients with.
    let mut no_ks = host.clone();
    no_ks.security = Default::default();
    let Err(e) = Node::builder().name("nokeys").config(no_ks).build() else {
        panic!("listen_tls without a keystore must be refused");
    };
    assert!(
        e.to_string().contains("listen_tls needs security on"),
        "{e}"
    );

    let talker = Node::builder()
        .name("talker")
        .config(host)
        .build()
        .expect("the broker's runtime starts it with its TLS listener");
    assert!(wait_listening(tls_port, T), "no TLS listener");
    let tls = BrokerUrl::Tls {
        host: "localhost".into(),
        port: tls_port,
    };
    let listener = Node::builder()
        .name("listener")
        .config(config_as(tls.clone(), Some(&ks), "/robot1/listener"))
        .build()
        .expect("a client of the keystore connects over TLS");
    let p = talker
        .publisher::<std_msgs::String>("/cloud/embedded")
        .qos(through_the_broker())
        .build()
        .unwrap();
    let s = listener
        .subscriber::<std_msgs::String>("/cloud/embedded")
        .qos(through_the_broker())
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, T), "never met through the broker");
    for data in ["through the TLS listener".to_string(), "y".repeat(3 << 20)] {
        p.publish(std_msgs::String { data: data.clone() }).unwrap();
        let got = s
            .recv_timeout(T)
            .expect("delivered through the TLS listener");
        assert_eq!(got.data.len(), data.len());
    }
    for c in s.connections() {
        assert_eq!(c.protection, "tls (to the broker)");
    }
    // No client certificate, or one of another CA: refused.
    strangers_are_refused(tls, &ks, &other);
}

/// A client of the broker `tls` that trusts its certificate (keystore
/// `ks`'s CA) but has no client certificate is refused, and so is one with
/// a certificate of keystore `other` (which does not trust this broker's
/// certificate either). Returns why the first was refused.
fn strangers_are_refused(tls: BrokerUrl, ks: &std::path::Path, other: &std::path::Path) -> String {
    let mut anonymous = config(tls.clone(), Mode::Off, None);
    if let Some(m) = &mut anonymous.mqtt {
        m.ca_file = Some(ks.join("public/ca.cert.pem"));
    }
    let Err(e) = Node::builder().name("anonymous").config(anonymous).build() else {
        panic!("a client without a certificate must be refused");
    };
    let mut foreign = config(tls, Mode::Off, None);
    if let Some(m) = &mut foreign.mqtt {
        m.ca_file = Some(ks.join("public/ca.cert.pem"));
        m.cert_file = Some(other.join("enclaves/robot1/talker/cert.pem"));
        m.key_file = Some(other.join("enclaves/robot1/talker/key.pem"));
    }
    assert!(
        Node::builder()
            .name("foreign")
            .config(foreign)
            .build()
            .is_err(),
        "a certificate of another CA must be refused"
    );
    e.to_string()
}

/// A child process killed when the test ends, failed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn under_enforce_a_plain_broker_off_this_host_is_a_build_error() {
    let d = TempDir::new("mqtt-plain-enforce");
    let ks = keystore(&d, "ks");
    let remote = BrokerUrl::Tcp {
        host: "192.0.2.7".into(),
        port: 1883,
    };
    let Err(e) = Node::builder()
        .name("talker")
        .config(config(remote, Mode::Enforce, Some(&ks)))
        .build()
    else {
        panic!("a plain remote broker under enforce must be refused");
    };
    assert!(
        e.to_string().contains("needs TLS") && e.to_string().contains("mqtts://"),
        "{e}"
    );
}
