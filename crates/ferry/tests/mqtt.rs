//! MQTT as a path of the same ports: two processes that meet only through a
//! broker (the embedded one, or Mosquitto started per test on a private
//! port), plain MQTT clients reading and writing ferry topics, a broker
//! restart, an unreachable broker, garbage from a foreign client.

#![cfg(feature = "embedded-broker")]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferry::config::mqtt::{BrokerDiscovery, BrokerUrl, MqttConfig, OnUnreachable, Scope};
use ferry::msgs::example_interfaces::srv::{AddTwoIntsRequest, AddTwoIntsResponse};
use ferry::msgs::std_msgs;
use ferry::{
    BuildError, Config, DiscoveryRange, Node, PortEvent, Qos, RawBytes, TopicRule, TransportKind,
    FOREIGN_WRITER,
};
use ferry_testkit::peer::{report, role, Peer};
use ferry_testkit::wait_listening;

const T: Duration = Duration::from_secs(10);

use ferry_testkit::free_port;

/// A config that can only meet other processes through the broker: no
/// multicast, no shared memory; `/cloud/*` and `/chatter` are cloud scope.
fn cloud_config(domain: u16, broker: BrokerUrl) -> Config {
    let rule = |p: &str| TopicRule {
        pattern: p.into(),
        scope: Some(Scope::Cloud),
        ..Default::default()
    };
    Config {
        domain_id: domain,
        discovery: DiscoveryRange::Off,
        shared_memory: false,
        topics: vec![rule("/cloud/*"), rule("/chatter")],
        // Discovery is off: announcing through the broker must be asked for.
        mqtt: Some(MqttConfig {
            discovery: BrokerDiscovery::On,
            ..MqttConfig::new(broker)
        }),
        // Long: a vanished peer must be reported by the last will, not the lease.
        lease_ms: 30_000,
        ..Config::default()
    }
}

fn tcp_broker(port: u16) -> BrokerUrl {
    BrokerUrl::Tcp {
        host: "127.0.0.1".into(),
        port,
    }
}

/// Mosquitto on a private port with persistence, killed on drop.
struct Mosquitto {
    child: Child,
    dir: std::path::PathBuf,
}

impl Mosquitto {
    fn start(port: u16, dir: &std::path::Path) -> Mosquitto {
        std::fs::create_dir_all(dir).unwrap();
        let conf = dir.join("m.conf");
        std::fs::write(
            &conf,
            format!(
                "listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n\
                 persistence_location {}/\nautosave_interval 1\nmax_packet_size 1048576\n\
                 max_queued_messages 100000\nset_tcp_nodelay true\nuser root\n",
                dir.display()
            ),
        )
        .unwrap();
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto is installed by scripts/setup.sh");
        assert!(
            wait_listening(port, T),
            "mosquitto did not come up on {port}"
        );
        Mosquitto {
            child,
            dir: dir.into(),
        }
    }
    /// SIGTERM (Mosquitto saves its sessions) and wait.
    fn stop(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A node with a reliable keep_all subscriber of `/cloud/status`.
fn status_subscriber(name: &str, cfg: Config) -> (Node, ferry::Subscriber<std_msgs::String>) {
    let n = Node::builder().name(name).config(cfg).build().unwrap();
    let s = n
        .subscriber::<std_msgs::String>("/cloud/status")
        .qos(Qos::default().keep_all())
        .build()
        .unwrap();
    (n, s)
}

/// The other process: `arg` = "domain url mode".
fn remote(arg: &str) {
    let mut a = arg.split(' ');
    let domain: u16 = a.next().unwrap().parse().unwrap();
    let port: u16 = a.next().unwrap().parse().unwrap();
    let mode = a.next().unwrap();
    let mut cfg = cloud_config(domain, tcp_broker(port));
    if mode == "direct" {
        cfg.discovery = DiscoveryRange::Localhost;
        cfg.shared_memory = true;
    }
    let n = Node::builder().name("robot").config(cfg).build().unwrap();
    let _svc = n
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/cloud/add", |r| AddTwoIntsResponse {
            sum: r.a + r.b,
        })
        .build()
        .unwrap();
    let p = n
        .publisher::<std_msgs::String>("/cloud/status")
        .qos(Qos::default().keep_all())
        .build()
        .unwrap();
    assert!(
        p.wait_for_subscribers(1, T),
        "no subscriber through the broker"
    );
    report("matched");
    let slow = mode != "fast";
    let count = if slow { 400 } else { 200 };
    for i in 1..=count {
        p.publish(std_msgs::String {
            data: format!("status {i}"),
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(if slow { 10 } else { 1 }));
    }
    report("done");
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn pub_sub_and_services_between_processes_that_meet_only_through_the_broker() {
    if let Some((r, arg)) = role() {
        if r == "remote" {
            remote(&arg);
        }
        return;
    }
    let port = free_port();
    let (n, s) = status_subscriber("cloud", cloud_config(171, BrokerUrl::Embedded { port }));
    let mut peer = Peer::spawn(
        "pub_sub_and_services_between_processes_that_meet_only_through_the_broker",
        "remote",
        &format!("171 {port} fast"),
    );
    assert_eq!(peer.line(), "matched");
    for i in 1..=200u64 {
        let got = s.recv_timeout(T).expect("sample through the broker");
        assert_eq!(got.data, format!("status {i}"), "in order, none twice");
        assert_eq!(got.info.seq, i);
        assert_eq!(got.info.transport, TransportKind::Mqtt);
    }
    assert_eq!(peer.line(), "done");
    let c = s.connections();
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].transport, TransportKind::Mqtt);
    assert_eq!(c[0].stats.messages, 200);
    // The service of the other process, through the broker.
    let client = n
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/cloud/add")
        .build()
        .unwrap();
    assert!(client.wait_for_service(T));
    let r = client
        .call(AddTwoIntsRequest { a: 2, b: 40 }, T)
        .expect("reply through the broker");
    assert_eq!(r.sum, 42);
    assert_eq!(client.connections()[0].transport, TransportKind::Mqtt);
    let st = n.broker_state().unwrap();
    assert!(st.connected, "{st:?}");
    // The robot vanishes (kill -9): the broker's last will tells us.
    while s.try_event().is_some() {}
    peer.kill_9();
    let until = Instant::now() + T;
    let mut gone = false;
    while Instant::now() < until && !gone {
        if let Some(PortEvent::Unmatched { .. }) = s.next_event(Duration::from_millis(200)) {
            gone = true;
        }
    }
    assert!(
        gone,
        "no Unmatched event after the remote process was killed"
    );
}

fn mosquitto_client(tool: &str, port: u16) -> Command {
    let mut c = Command::new(tool);
    c.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-V", "mqttv5"]);
    c
}

#[test]
fn plain_mqtt_clients_read_and_write_ferry_topics_and_garbage_is_counted() {
    let port = free_port();
    let n = Node::builder()
        .name("plain")
        .config(cloud_config(172, BrokerUrl::Embedded { port }))
        .build()
        .unwrap();
    // ferry → mosquitto_sub: the payload is the CDR of the message.
    let p = n.publisher::<std_msgs::String>("/chatter").build().unwrap();
    let sub = mosquitto_client("mosquitto_sub", port)
        .args(["-t", "ferry/172/chatter", "-C", "1", "-N", "-W", "10"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("mosquitto_sub is installed by scripts/setup.sh");
    let msg = std_msgs::String {
        data: "hello plain client".into(),
    };
    let out = {
        let until = Instant::now() + T;
        let mut child = sub;
        loop {
            p.publish(msg.clone()).unwrap();
            if let Some(_status) = child.try_wait().unwrap() {
                break child.wait_with_output().unwrap().stdout;
            }
            assert!(Instant::now() < until, "mosquitto_sub got nothing");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert_eq!(out, ferry::encode_cdr(&msg, "std_msgs/msg/String").unwrap());

    // mosquitto_pub → ferry: a foreign writer; garbage is counted, not fatal.
    let s = n
        .subscriber::<std_msgs::String>("/cloud/in")
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("ferry-mqtt-plain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.bin");
    let from_plain = std_msgs::String {
        data: "from a plain client".into(),
    };
    std::fs::write(
        &good,
        ferry::encode_cdr(&from_plain, "std_msgs/msg/String").unwrap(),
    )
    .unwrap();
    let pub_file = |f: &std::path::Path| {
        let st = mosquitto_client("mosquitto_pub", port)
            .args(["-t", "ferry/172/cloud/in", "-q", "1", "-f"])
            .arg(f)
            .status()
            .unwrap();
        assert!(st.success());
    };
    let garbage = dir.join("garbage.bin");
    std::fs::write(&garbage, b"\x07garbage, not CDR").unwrap();
    let until = Instant::now() + T;
    let got = loop {
        pub_file(&garbage);
        pub_file(&good);
        if let Ok(g) = s.recv_timeout(Duration::from_millis(200)) {
            break g;
        }
        assert!(Instant::now() < until, "nothing from mosquitto_pub");
    };
    assert_eq!(got.data, from_plain.data);
    assert_eq!(got.info.publisher, FOREIGN_WRITER);
    assert_eq!(got.info.transport, TransportKind::Mqtt);
    // One more garbage message, then a good one: still delivered.
    pub_file(&garbage);
    pub_file(&good);
    assert_eq!(s.recv_timeout(T).unwrap().data, from_plain.data);
    let c = s.connections();
    assert_eq!(c.len(), 1, "{c:?}");
    assert!(
        c[0].stats.errors >= 2,
        "garbage not counted: {:?}",
        c[0].stats
    );
    // A plain client that copied this runtime's own `ferry` property (a
    // dashboard "replying"): counted as an echo, not delivered.
    let me = format!("{:x}.1 1 0", n.participant().0);
    let before = n.broker_state().unwrap().echoes;
    let until = Instant::now() + T;
    while n.broker_state().unwrap().echoes == before {
        let st = mosquitto_client("mosquitto_pub", port)
            .args(["-t", "ferry/172/cloud/in", "-q", "1"])
            .args(["-D", "publish", "user-property", "ferry", &me, "-f"])
            .arg(&good)
            .status()
            .unwrap();
        assert!(st.success());
        assert!(Instant::now() < until, "an echo was never counted");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        s.recv_timeout(Duration::from_millis(300)).is_err(),
        "a message naming this runtime was delivered"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reliable_samples_survive_a_broker_restart() {
    if let Some((r, arg)) = role() {
        if r == "remote" {
            remote(&arg);
        }
        return;
    }
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("ferry-mosq-{}", std::process::id()));
    let mut mosq = Mosquitto::start(port, &dir);
    let (n, s) = status_subscriber("cloud", cloud_config(173, tcp_broker(port)));
    let mut peer = Peer::spawn(
        "reliable_samples_survive_a_broker_restart",
        "remote",
        &format!("173 {port} slow"),
    );
    assert_eq!(peer.line(), "matched");
    // The robot publishes 400 samples over 4 s; the broker is away for
    // one second in the middle.
    std::thread::sleep(Duration::from_millis(1000));
    mosq.stop();
    std::thread::sleep(Duration::from_millis(1000));
    let _again = Mosquitto::start(port, &dir);
    std::mem::forget(mosq); // already stopped; `_again` cleans the directory
    for i in 1..=400u64 {
        let got = s
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("sample {i} lost across the restart: {e}"));
        assert_eq!(got.data, format!("status {i}"), "in order, none twice");
    }
    let st = n.broker_state().unwrap();
    assert!(st.connects >= 2, "never reconnected: {st:?}");
    assert!(st.connected, "{st:?}");
    assert_eq!(peer.line(), "done");
}

#[test]
fn unreachable_broker_fails_on_request_or_retries_while_local_paths_work() {
    let port = free_port(); // nothing listens there
    let mut cfg = cloud_config(174, tcp_broker(port));
    if let Some(m) = &mut cfg.mqtt {
        m.on_unreachable = OnUnreachable::Fail;
        m.connect_timeout_ms = 1000;
    }
    let Err(e) = Node::builder().name("strict").config(cfg.clone()).build() else {
        panic!("an unreachable broker must fail with on_unreachable = fail");
    };
    assert!(matches!(e, BuildError::Broker { .. }), "{e}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");

    if let Some(m) = &mut cfg.mqtt {
        m.on_unreachable = OnUnreachable::Retry;
    }
    let n = Node::builder().name("patient").config(cfg).build().unwrap();
    let s = n.subscriber::<RawBytes>("/cloud/local").build().unwrap();
    let p = n.publisher::<RawBytes>("/cloud/local").build().unwrap();
    p.publish(RawBytes::new(&b"still here"[..])).unwrap();
    let got = s.recv_timeout(T).unwrap();
    assert_eq!(&got[..], b"still here");
    assert_eq!(got.info.transport, TransportKind::InProcess);
    std::thread::sleep(Duration::from_millis(500));
    let st = n.broker_state().unwrap();
    assert!(!st.connected && st.failures >= 1, "{st:?}");
    assert!(st.last_error.is_some(), "{st:?}");
}

#[test]
fn json_encoding_for_dashboards_both_ways() {
    let port = free_port();
    let mut cfg = cloud_config(175, BrokerUrl::Embedded { port });
    cfg.topics.insert(
        0,
        TopicRule {
            pattern: "/dash/*".into(),
            scope: Some(Scope::Cloud),
            encoding: Some(ferry::config::mqtt::Encoding::Json),
            ..Default::default()
        },
    );
    let n = Node::builder().name("dash").config(cfg).build().unwrap();
    let p = n
        .publisher::<std_msgs::String>("/dash/state")
        .build()
        .unwrap();
    let mut child = mosquitto_client("mosquitto_sub", port)
        .args(["-t", "ferry/175/dash/state", "-C", "1", "-N", "-W", "10"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + T;
    let out = loop {
        p.publish(std_msgs::String {
            data: "armed".into(),
        })
        .unwrap();
        if child.try_wait().unwrap().is_some() {
            break child.wait_with_output().unwrap().stdout;
        }
        assert!(Instant::now() < until, "mosquitto_sub got nothing");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(String::from_utf8(out).unwrap(), r#"{"data":"armed"}"#);
    // A dashboard writes JSON; a ferry subscriber decodes it.
    let s = n
        .subscriber::<std_msgs::String>("/dash/cmd")
        .build()
        .unwrap();
    let until = Instant::now() + T;
    let got = loop {
        let st = mosquitto_client("mosquitto_pub", port)
            .args(["-t", "ferry/175/dash/cmd", "-m", r#" {"data": "disarm"}"#])
            .status()
            .unwrap();
        assert!(st.success());
        if let Ok(g) = s.recv_timeout(Duration::from_millis(200)) {
            break g;
        }
        assert!(Instant::now() < until, "nothing from mosquitto_pub");
    };
    assert_eq!(got.data, "disarm");
}

#[test]
fn a_subscriber_with_a_direct_path_gets_each_sample_once() {
    if let Some((r, arg)) = role() {
        if r == "remote" {
            remote(&arg);
        }
        return;
    }
    let port = free_port();
    let mut cfg = cloud_config(176, BrokerUrl::Embedded { port });
    cfg.discovery = DiscoveryRange::Localhost;
    cfg.shared_memory = true;
    let (n, s) = status_subscriber("nearby", cfg);
    let mut peer = Peer::spawn(
        "a_subscriber_with_a_direct_path_gets_each_sample_once",
        "remote",
        &format!("176 {port} direct"),
    );
    assert_eq!(peer.line(), "matched");
    // Each sample once. The order holds on each path; only at the moment
    // the pair moves from the broker to shared memory may a sample still in
    // flight through the broker arrive after the first one over shm.
    let mut paths = std::collections::BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 1..=400u64 {
        let got = s.recv_timeout(T).expect("sample");
        assert_eq!(got.data, format!("status {}", got.info.seq));
        assert!(seen.insert(got.info.seq), "sample {} twice", got.info.seq);
        *paths.entry(got.info.transport).or_insert(0) += 1;
    }
    assert_eq!(
        seen.iter().copied().collect::<Vec<_>>(),
        (1..=400).collect::<Vec<_>>()
    );
    assert_eq!(peer.line(), "done");
    assert!(
        s.try_recv().is_none(),
        "a sample arrived twice (once per path)"
    );
    // Same host: shared memory carries the samples (after at most a few
    // through the broker while discovery catches up); the broker's copies
    // were dropped as duplicates.
    let shm = paths
        .get(&TransportKind::SharedMemory)
        .copied()
        .unwrap_or(0);
    assert!(shm >= 350, "{paths:?}");
    let st = n.broker_state().unwrap();
    assert!(st.duplicates >= 350, "{st:?}");
}

/// A CA and a certificate for localhost / 127.0.0.1 signed by it (openssl).
#[cfg(feature = "mqtt-tls")]
fn test_pki(dir: &std::path::Path) {
    let sh = |args: &[&str]| {
        let st = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl");
        assert!(st.success(), "openssl {args:?}");
    };
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    sh(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=ferry-test-ca",
    ]);
    sh(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    sh(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ]);
}

#[cfg(feature = "mqtt-tls")]
#[test]
fn tls_to_a_real_broker_with_a_private_ca() {
    let dir = std::env::temp_dir().join(format!("ferry-mqtt-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    test_pki(&dir);
    let port = free_port();
    std::fs::write(
        dir.join("m.conf"),
        format!(
            "listener {port} 127.0.0.1\ncafile {d}/ca.crt\ncertfile {d}/server.crt\n\
             keyfile {d}/server.key\nallow_anonymous true\nuser root\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let mut mosq = Command::new("mosquitto")
        .arg("-c")
        .arg(dir.join("m.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_listening(port, T), "mosquitto (TLS) did not come up");
    let tls = |ca: Option<std::path::PathBuf>| {
        let mut cfg = cloud_config(
            177,
            BrokerUrl::Tls {
                host: "localhost".into(),
                port,
            },
        );
        if let Some(m) = &mut cfg.mqtt {
            m.ca_file = ca;
            m.on_unreachable = OnUnreachable::Fail;
            m.connect_timeout_ms = 3000;
        }
        cfg
    };
    // The system's roots do not know this CA: refused, with the reason.
    let Err(e) = Node::builder().name("untrusting").config(tls(None)).build() else {
        panic!("a certificate from an unknown CA must be refused");
    };
    assert!(e.to_string().to_lowercase().contains("cert"), "{e}");
    // With the CA: connected, and a plain TLS client reads the samples.
    let n = Node::builder()
        .name("trusting")
        .config(tls(Some(dir.join("ca.crt"))))
        .build()
        .unwrap();
    assert!(n.broker_state().unwrap().connected);
    let p = n
        .publisher::<std_msgs::String>("/cloud/tls")
        .build()
        .unwrap();
    let mut child = Command::new("mosquitto_sub")
        .args([
            "-h",
            "localhost",
            "-p",
            &port.to_string(),
            "-V",
            "mqttv5",
            "--cafile",
        ])
        .arg(dir.join("ca.crt"))
        .args(["-t", "ferry/177/cloud/tls", "-C", "1", "-N", "-W", "10"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let msg = std_msgs::String {
        data: "over TLS".into(),
    };
    let until = Instant::now() + T;
    let out = loop {
        p.publish(msg.clone()).unwrap();
        if child.try_wait().unwrap().is_some() {
            break child.wait_with_output().unwrap().stdout;
        }
        assert!(Instant::now() < until, "mosquitto_sub (TLS) got nothing");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(out, ferry::encode_cdr(&msg, "std_msgs/msg/String").unwrap());
    let _ = mosq.kill();
    let _ = mosq.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn made_up_writer_ids_from_a_client_stay_bounded() {
    use rumqttc::v5::mqttbytes::v5::PublishProperties;
    use rumqttc::v5::mqttbytes::QoS;
    let port = free_port();
    let n = Node::builder()
        .name("bounded")
        .config(cloud_config(178, BrokerUrl::Embedded { port }))
        .build()
        .unwrap();
    let s = n.subscriber::<RawBytes>("/cloud/flood").build().unwrap();
    // A hostile client: every message claims another writer, more of them
    // than the bound of broker connections (16384 reader/writer pairs).
    let (client, mut conn) = rumqttc::v5::Client::new(
        rumqttc::v5::MqttOptions::new("flood", "127.0.0.1", port),
        64,
    );
    let total = 17_000u32;
    let sender = std::thread::spawn(move || {
        for i in 1..=total {
            let props = PublishProperties {
                user_properties: vec![("ferry".into(), format!("abcd.{i} 1 0"))],
                ..Default::default()
            };
            client
                .publish_with_properties(
                    "ferry/178/cloud/flood",
                    QoS::AtLeastOnce,
                    false,
                    "x",
                    props,
                )
                .unwrap();
        }
        client
    });
    let until = Instant::now() + Duration::from_secs(60);
    let mut acked = 0;
    while acked < total && Instant::now() < until {
        match conn.recv_timeout(Duration::from_secs(1)) {
            Ok(Ok(rumqttc::v5::Event::Incoming(rumqttc::v5::mqttbytes::v5::Packet::PubAck(_)))) => {
                acked += 1
            }
            Ok(Err(e)) => panic!("flood client: {e}"),
            _ => {}
        }
    }
    assert_eq!(acked, total);
    let _client = sender.join().unwrap();
    let until = Instant::now() + T;
    let mut got = 0;
    while Instant::now() < until {
        match s.recv_timeout(Duration::from_millis(500)) {
            Ok(_) => got += 1,
            Err(_) if got > 0 => break,
            Err(_) => {}
        }
    }
    let conns = s.connections();
    let st = n.broker_state().unwrap();
    assert_eq!(conns.len(), 16_384, "received {got}, {st:?}");
    let delivered: u64 = conns.iter().map(|c| c.stats.messages).sum();
    assert_eq!(delivered, 16_384, "{st:?}");
    assert!(st.garbage >= u64::from(total) - 16_384, "{st:?}");
    assert!(st.connected);
}

/// The first `@disc` message of `domain` on the broker at `port` within
/// `within`, if any (raw payload).
fn first_announcement(port: u16, domain: u16, within: u64) -> Option<Vec<u8>> {
    let out = mosquitto_client("mosquitto_sub", port)
        .args(["-t", &format!("ferry/{domain}/@disc/#"), "-C", "1", "-N"])
        .args(["-W", &within.to_string()])
        .output()
        .expect("mosquitto_sub is installed by scripts/setup.sh");
    (out.status.success() && !out.stdout.is_empty()).then_some(out.stdout)
}

#[test]
fn the_broker_hears_announcements_only_when_they_are_needed_and_never_addresses() {
    use ferry_wire::beacon::{Beacon, BeaconBody};
    let port = free_port();
    let cfg = |domain: u16, cloud: bool| Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        topics: if cloud {
            vec![TopicRule {
                pattern: "/cloud/*".into(),
                scope: Some(Scope::Cloud),
                ..Default::default()
            }]
        } else {
            Vec::new()
        },
        mqtt: Some(MqttConfig::new(BrokerUrl::Embedded { port })),
        ..Config::default()
    };
    // A node with a publisher of `topic`.
    let node = |name: &str, cfg: Config, topic: &str| {
        let n = Node::builder().name(name).config(cfg).build().unwrap();
        let p = n.publisher::<std_msgs::String>(topic).build().unwrap();
        (n, p)
    };
    // A broker but no cloud-scope rule: nothing to announce there.
    let (quiet, _p) = node("quiet", cfg(174, false), "/local/x");
    assert!(quiet.broker_state().is_some());
    assert_eq!(
        first_announcement(port, 174, 2),
        None,
        "announced without need"
    );
    // A cloud-scope rule: announced, without UDP or TCP addresses.
    let _loud = node("loud", cfg(175, true), "/cloud/x");
    let bytes = first_announcement(port, 175, 10).expect("no announcement through the broker");
    let Ok(Beacon {
        body: BeaconBody::Announce(a),
        ..
    }) = Beacon::parse(&bytes)
    else {
        panic!("not an announcement: {bytes:?}");
    };
    assert!(
        a.info
            .locators
            .iter()
            .all(|l| !matches!(l.transport, TransportKind::Udp | TransportKind::Tcp)),
        "network addresses went to the broker: {:?}",
        a.info.locators
    );
}

/// A process whose node starts ferry's embedded broker on `arg` (its port)
/// and keeps it up until killed.
fn broker_host(arg: &str) {
    let port: u16 = arg.parse().unwrap();
    let cfg = Config {
        domain_id: 176,
        discovery: DiscoveryRange::Localhost,
        mqtt: Some(MqttConfig::new(BrokerUrl::Embedded { port })),
        ..Config::default()
    };
    let _n = Node::builder()
        .name("broker_host")
        .config(cfg)
        .build()
        .unwrap();
    report("up");
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn reliable_samples_survive_a_restart_of_ferrys_own_broker() {
    if let Some((r, arg)) = role() {
        match r.as_str() {
            "remote" => remote(&arg),
            "broker" => broker_host(&arg),
            _ => {}
        }
        return;
    }
    const TEST: &str = "reliable_samples_survive_a_restart_of_ferrys_own_broker";
    let port = free_port();
    let mut broker = Peer::spawn(TEST, "broker", &port.to_string());
    assert_eq!(broker.line(), "up");
    let (n, s) = status_subscriber("cloud", cloud_config(177, tcp_broker(port)));
    let mut peer = Peer::spawn(TEST, "remote", &format!("177 {port} slow"));
    assert_eq!(peer.line(), "matched");
    // 400 samples over 4 s; the broker (sessions in memory only) is killed
    // in the middle and back a second later.
    std::thread::sleep(Duration::from_millis(1000));
    broker.kill_9();
    std::thread::sleep(Duration::from_millis(1000));
    let mut again = Peer::spawn(TEST, "broker", &port.to_string());
    assert_eq!(again.line(), "up");
    for i in 1..=400u64 {
        let got = s
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("sample {i} lost across the restart: {e}"));
        assert_eq!(got.data, format!("status {i}"), "in order, none twice");
    }
    let st = n.broker_state().unwrap();
    assert!(st.connects >= 2, "never reconnected: {st:?}");
    assert_eq!(peer.line(), "done");
    again.kill_9();
}
