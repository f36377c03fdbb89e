//! The CLI on cloud-scope topics: `ferry broker` as a process, `ferry
//! doctor` showing the broker connection, `ferry topic echo` / `hz`
//! receiving through the broker from a node they share no other path with.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::config::mqtt::{BrokerUrl, MqttConfig, Scope};
use ferry::msgs::std_msgs;
use ferry::{Config, DiscoveryRange, Node, TopicRule};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

use ferry_testkit::free_port;

fn config_file(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let p = dir.join("ferry.toml");
    std::fs::write(
        &p,
        format!(
            "domain_id = 181\ndiscovery = \"off\"\nshared_memory = false\n\
             [mqtt]\nbroker = \"mqtt://127.0.0.1:{port}\"\nconnect_timeout_ms = 1000\n\
             discovery = \"on\"\n\
             [[topics]]\npattern = \"/cloud/*\"\nscope = \"cloud\"\n"
        ),
    )
    .unwrap();
    p
}

/// `ferry broker` on 127.0.0.1:`port` (60 s at most), once it listens.
fn ferry_broker(port: u16, extra: &[&str]) -> std::process::Child {
    let child = Command::new(FERRY)
        .args([
            "broker",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--duration",
            "60",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        ferry_testkit::wait_listening(port, Duration::from_secs(10)),
        "ferry broker did not listen"
    );
    child
}

fn ferry(cfg: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(FERRY)
        .args(args)
        .env("FERRY_CONFIG", cfg)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn broker_doctor_echo_and_hz_on_a_cloud_topic() {
    let dir = std::env::temp_dir().join(format!("ferry-cli-mqtt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let cfg = config_file(&dir, port);
    // Before the broker runs: doctor says so and fails.
    let (ok, out) = ferry(&cfg, &["doctor"]);
    assert!(!ok && out.contains("NOT CONNECTED"), "{out}");

    let mut broker = ferry_broker(port, &[]);
    let (ok, out) = ferry(&cfg, &["doctor"]);
    assert!(
        ok && out.contains("CONNECTED") && out.contains("/cloud/*"),
        "{out}"
    );

    // A robot node that shares no path with the CLI but the broker.
    let node_cfg = Config {
        domain_id: 181,
        discovery: DiscoveryRange::Off,
        shared_memory: false,
        // Discovery is off: announcing through the broker must be asked for.
        mqtt: Some(MqttConfig {
            discovery: ferry::config::mqtt::BrokerDiscovery::On,
            ..MqttConfig::new(BrokerUrl::Tcp {
                host: "127.0.0.1".into(),
                port,
            })
        }),
        topics: vec![TopicRule {
            pattern: "/cloud/*".into(),
            scope: Some(Scope::Cloud),
            ..Default::default()
        }],
        ..Config::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let talker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let n = Node::builder()
                .name("robot")
                .config(node_cfg)
                .build()
                .unwrap();
            let p = n
                .publisher::<std_msgs::String>("/cloud/hello")
                .build()
                .unwrap();
            let until = Instant::now() + Duration::from_secs(30);
            while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                p.publish(std_msgs::String {
                    data: "cloud hello".into(),
                })
                .unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let (ok, out) = ferry(
        &cfg,
        &["topic", "echo", "/cloud/hello", "--once", "--timeout", "10"],
    );
    assert!(ok && out.contains("data: cloud hello"), "{out}");
    let (ok, out) = ferry(&cfg, &["topic", "hz", "/cloud/hello", "--timeout", "3"]);
    assert!(ok && out.contains("average rate"), "{out}");
    stop.store(true, Ordering::Relaxed);
    talker.join().unwrap();
    let _ = broker.kill();
    let _ = broker.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node config for `broker` as `user`/`password` that fails at once
/// (within 2 s) when the broker refuses it.
fn strict_client(domain: u16, broker: BrokerUrl, user: Option<&str>, password: &str) -> Config {
    let mut m = MqttConfig::new(broker);
    m.user = user.map(String::from);
    m.password = user.map(|_| password.to_string());
    m.on_unreachable = ferry::config::mqtt::OnUnreachable::Fail;
    m.connect_timeout_ms = 2000;
    Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        mqtt: Some(m),
        ..Config::default()
    }
}

#[test]
fn broker_with_users_accepts_the_right_password_only() {
    let port = free_port();
    let mut broker = ferry_broker(port, &["--user", "robot:s3cret"]);
    let cfg = |user: Option<&str>, password: &str| {
        let broker = BrokerUrl::Tcp {
            host: "127.0.0.1".into(),
            port,
        };
        strict_client(182, broker, user, password)
    };
    for (user, pw) in [(Some("robot"), "wrong"), (None, "")] {
        let Err(e) = Node::builder()
            .name("intruder")
            .config(cfg(user, pw))
            .build()
        else {
            panic!("{user:?}/{pw}: the broker must refuse");
        };
        assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    }
    let n = Node::builder()
        .name("robot")
        .config(cfg(Some("robot"), "s3cret"))
        .build()
        .expect("the right password connects");
    assert!(n.broker_state().unwrap().connected);
    let _ = broker.kill();
    let _ = broker.wait();
}

/// Whether a TCP connect to `addr` succeeds within a second.
fn reachable(addr: std::net::SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
}

#[test]
fn the_embedded_broker_stays_on_this_host_requires_the_configured_user_and_is_shared() {
    let port = free_port();
    let cfg = |user: Option<&str>, password: &str| {
        strict_client(183, BrokerUrl::Embedded { port }, user, password)
    };
    // The node that starts it: with [mqtt] credentials.
    let owner = Node::builder()
        .name("owner")
        .config(cfg(Some("robot"), "s3cret"))
        .build()
        .expect("the embedded broker starts");
    assert!(owner.broker_state().unwrap().connected);
    // Loopback only: not reachable at this host's other addresses.
    assert!(reachable(([127, 0, 0, 1], port).into()));
    for i in ferry::host::interfaces().iter().filter(|i| !i.loopback) {
        assert!(
            !reachable((i.addr, port).into()),
            "the embedded broker listens on {}",
            i.addr
        );
    }
    // Anonymous and wrong-password clients are refused: a plain client …
    let anon = Command::new("mosquitto_pub")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-V", "mqttv5"])
        .args(["-t", "ferry/183/x", "-m", "hi"])
        .output()
        .expect("mosquitto_pub is installed by scripts/setup.sh");
    assert!(!anon.status.success(), "an anonymous client got in");
    // … and a ferry node in another process, which finds the port taken
    // and uses the broker already there as a client.
    for (user, pw, ok) in [
        (None, "", false),
        (Some("robot"), "wrong", false),
        (Some("robot"), "s3cret", true),
    ] {
        let mut c = Command::new(FERRY);
        c.args(["doctor", "--spin-time", "200"])
            .env("FERRY_DOMAIN_ID", "183")
            .env("FERRY_DISCOVERY", "localhost")
            .env("FERRY_MQTT", format!("mqtt://embedded:{port}"));
        let dir = std::env::temp_dir().join(format!("ferry-emb-{}-{pw}", std::process::id()));
        if let Some(u) = user {
            std::fs::create_dir_all(&dir).unwrap();
            let f = dir.join("f.toml");
            std::fs::write(
                &f,
                format!(
                    "[mqtt]\nbroker = \"mqtt://embedded:{port}\"\nuser = \"{u}\"\npassword = \"{pw}\"\n\
                     connect_timeout_ms = 2000\n"
                ),
            )
            .unwrap();
            c.env("FERRY_CONFIG", &f);
        }
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            !text.contains("Address already in use"),
            "{user:?}: a second node could not share the broker: {text}"
        );
        let connected = text.contains(" CONNECTED") && !text.contains("NOT CONNECTED");
        assert_eq!(connected, ok, "{user:?}/{pw}: {text}");
    }
}
