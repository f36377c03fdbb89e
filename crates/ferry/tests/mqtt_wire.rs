//! Ferry's own MQTT connection against a scripted broker on a real socket:
//! garbage and giant packets from the broker, a broker that stops reading,
//! its Receive Maximum, keep-alive against a silent broker, in-flight
//! messages resent under their packet ids after a reconnect, a refused
//! connection. The broker side is a test double here because these are the
//! misbehaviours real brokers do not show on request; the well-behaved
//! paths run against Mosquitto and the embedded broker in `mqtt.rs`.

#![cfg(feature = "mqtt")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ferry::config::mqtt::{BrokerUrl, MqttConfig, OnUnreachable, Scope};
use ferry::{BuildError, Config, DiscoveryRange, Node, Qos, RawBytes, TopicRule};
use rumqttc::v5::mqttbytes::v5::{
    ConnAck, ConnAckProperties, ConnectReturnCode, Packet, PubAck, Publish,
};
use rumqttc::v5::mqttbytes::QoS;

const DOMAIN: u16 = 47;
const DATA: &str = "ferry/47/cloud/x";

/// A broker that does what the test says.
struct Fake {
    listener: TcpListener,
    port: u16,
}

/// One client connection to the fake broker.
struct Conn {
    s: TcpStream,
    buf: BytesMut,
}

impl Fake {
    fn new() -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        Fake { listener, port }
    }

    /// The next client connection and its CONNECT, within `within`.
    fn accept(&self, within: Duration) -> Option<Conn> {
        let until = Instant::now() + within;
        while Instant::now() < until {
            match self.listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_nodelay(true).unwrap();
                    let mut c = Conn {
                        s,
                        buf: BytesMut::new(),
                    };
                    match c.next(Duration::from_secs(3)) {
                        Some(Packet::Connect(..)) => return Some(c),
                        other => panic!("expected CONNECT, got {other:?}"),
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        None
    }

    /// Accepts `n`'s connection, answers CONNACK (with this Receive
    /// Maximum, if any) and waits until `n` reports itself connected.
    fn connected(&self, n: &Node, receive_max: Option<u16>) -> Conn {
        let mut c = self.accept(Duration::from_secs(5)).expect("connects");
        c.connack(receive_max, false);
        eventually("connected", || n.broker_state().unwrap().connected);
        c
    }
}

impl Conn {
    /// The next packet within `within` (None: none, or the client closed).
    fn next(&mut self, within: Duration) -> Option<Packet> {
        let until = Instant::now() + within;
        loop {
            match Packet::read(&mut self.buf, None) {
                Ok(p) => return Some(p),
                Err(rumqttc::v5::mqttbytes::Error::InsufficientBytes(_)) => {}
                Err(e) => panic!("client sent a bad packet: {e}"),
            }
            let left = until.checked_duration_since(Instant::now())?;
            self.s
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            let mut b = [0u8; 65536];
            match self.s.read(&mut b) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&b[..n]),
                Err(_) => return None,
            }
        }
    }

    /// The next PUBLISH on the data topic (others are skipped).
    fn next_sample(&mut self, within: Duration) -> Option<Publish> {
        let until = Instant::now() + within;
        loop {
            let left = until.checked_duration_since(Instant::now())?;
            match self.next(left)? {
                Packet::Publish(p) if p.topic == DATA.as_bytes() => return Some(p),
                _ => {}
            }
        }
    }

    fn send(&mut self, p: Packet) {
        let mut b = BytesMut::new();
        p.write(&mut b, None).unwrap();
        self.s.write_all(&b).unwrap();
    }

    fn connack(&mut self, receive_max: Option<u16>, session_present: bool) {
        let props = ConnAckProperties {
            session_expiry_interval: None,
            receive_max,
            max_qos: None,
            retain_available: None,
            max_packet_size: None,
            assigned_client_identifier: None,
            topic_alias_max: None,
            reason_string: None,
            user_properties: Vec::new(),
            wildcard_subscription_available: None,
            subscription_identifiers_available: None,
            shared_subscription_available: None,
            server_keep_alive: None,
            response_information: None,
            server_reference: None,
            authentication_method: None,
            authentication_data: None,
        };
        self.send(Packet::ConnAck(ConnAck {
            session_present,
            code: ConnectReturnCode::Success,
            properties: Some(props),
        }));
    }
}

fn config(port: u16, keep_alive_s: u16) -> Config {
    let mut m = MqttConfig::new(BrokerUrl::Tcp {
        host: "127.0.0.1".into(),
        port,
    });
    m.keep_alive_s = keep_alive_s;
    m.connect_timeout_ms = 1000;
    Config {
        domain_id: DOMAIN,
        discovery: DiscoveryRange::Off,
        shared_memory: false,
        topics: vec![TopicRule {
            pattern: "/cloud/*".into(),
            scope: Some(Scope::Cloud),
            ..Default::default()
        }],
        mqtt: Some(m),
        ..Config::default()
    }
}

fn node(name: &str, cfg: Config) -> Node {
    Node::builder().name(name).config(cfg).build().unwrap()
}

/// Waits until `f` holds, 10 s at most.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("not within 10 s: {what}");
}

#[test]
fn garbage_and_giant_packets_from_the_broker_break_only_that_connection() {
    let fake = Fake::new();
    let n = node("garbage", config(fake.port, 30));
    let rss = || -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        let l = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        l.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    // 1. A packet of a reserved type.
    let mut c = fake.accept(Duration::from_secs(5)).expect("connects");
    c.connack(None, false);
    c.s.write_all(&[0x00, 0x02, 0xde, 0xad]).unwrap();
    let mut c = fake
        .accept(Duration::from_secs(5))
        .expect("reconnects after garbage");
    let st = n.broker_state().unwrap();
    assert!(st.failures >= 1, "{st:?}");
    assert!(
        st.last_error.as_deref().unwrap_or("").contains("MQTT"),
        "{st:?}"
    );
    // 2. A PUBLISH announcing 200 MB (the limit is 16 MiB): refused from its
    // header, nothing allocated for it.
    c.connack(None, false);
    let before = rss();
    c.s.write_all(&[0x30, 0x80, 0x84, 0xaf, 0x5f]).unwrap();
    c.s.write_all(&vec![0u8; 1 << 20]).ok();
    let mut c = fake
        .accept(Duration::from_secs(5))
        .expect("reconnects after a giant");
    assert!(
        rss() < before + 32 * 1024,
        "RSS grew from {before} to {} KiB",
        rss()
    );
    let st = n.broker_state().unwrap();
    assert!(
        st.last_error
            .as_deref()
            .unwrap_or("")
            .contains("max_packet_bytes"),
        "{st:?}"
    );
    // 3. The node works on: a sample reaches the (now well-behaved) broker.
    c.connack(None, false);
    let p = n.publisher::<RawBytes>("/cloud/x").build().unwrap();
    eventually("connected", || n.broker_state().unwrap().connected);
    p.publish(RawBytes(vec![7u8; 10].into())).unwrap();
    let got = c.next_sample(Duration::from_secs(5)).expect("sample");
    assert_eq!(&got.payload[..], &[7u8; 10]);
}

#[test]
fn a_broker_that_stops_reading_never_blocks_a_publisher() {
    let fake = Fake::new();
    let mut cfg = config(fake.port, 30);
    cfg.mqtt.as_mut().unwrap().offline_queue_bytes = 4 << 20;
    cfg.keep_all_block_ms = 200;
    let n = node("stuck", cfg);
    let mut c = fake.connected(&n, None);
    // The broker reads nothing from now on: its socket buffers fill up.
    let best = n
        .publisher::<RawBytes>("/cloud/x")
        .qos(Qos::sensor_data())
        .build()
        .unwrap();
    let sample = RawBytes(vec![1u8; 64 * 1024].into());
    let t0 = Instant::now();
    let mut slowest = Duration::ZERO;
    for _ in 0..2000 {
        let t = Instant::now();
        best.publish(sample.clone()).unwrap();
        slowest = slowest.max(t.elapsed());
    }
    let st = n.broker_state().unwrap();
    assert!(
        slowest < Duration::from_millis(100),
        "a publish took {slowest:?}"
    );
    assert!(st.dropped > 0, "128 MB into a 4 MiB queue: {st:?}");
    assert!(st.queued_bytes <= 4 << 20, "{st:?}");
    // A reliable keep_all writer waits at most keep_all_block_ms, then fails.
    let reliable = n
        .publisher::<RawBytes>("/cloud/y")
        .qos(Qos::default().keep_all())
        .build()
        .unwrap();
    let t = Instant::now();
    let mut blocked = false;
    for _ in 0..200 {
        if reliable.publish(sample.clone()).is_err() {
            blocked = true;
            break;
        }
    }
    assert!(
        blocked,
        "a full queue must refuse reliable keep_all samples"
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    // The broker reads again: what was kept arrives.
    let mut got = 0;
    while c.next_sample(Duration::from_secs(2)).is_some() {
        got += 1;
        if got == 20 {
            break;
        }
    }
    assert_eq!(got, 20, "after {:?}", t0.elapsed());
}

#[test]
fn the_brokers_receive_maximum_bounds_what_is_in_flight() {
    let fake = Fake::new();
    let n = node("window", config(fake.port, 30));
    let mut c = fake.connected(&n, Some(3));
    let p = n.publisher::<RawBytes>("/cloud/x").build().unwrap();
    for i in 0..20u8 {
        p.publish(RawBytes(vec![i].into())).unwrap();
    }
    let mut inflight = Vec::new();
    for _ in 0..3 {
        inflight.push(c.next_sample(Duration::from_secs(5)).expect("first 3"));
    }
    assert!(
        c.next_sample(Duration::from_millis(300)).is_none(),
        "a 4th before any ack"
    );
    let mut seen = 3;
    while seen < 20 {
        let done = inflight.remove(0);
        c.send(Packet::PubAck(PubAck::new(done.pkid, None)));
        let next = c.next_sample(Duration::from_secs(5)).expect("one per ack");
        assert_eq!(next.payload[0], seen as u8, "in order");
        assert!(
            inflight.iter().all(|f| f.pkid != next.pkid),
            "packet id {} reused while in flight",
            next.pkid
        );
        inflight.push(next);
        seen += 1;
        if seen < 20 {
            assert!(c.next_sample(Duration::from_millis(100)).is_none());
        }
    }
}

#[test]
fn a_silent_broker_is_noticed_by_keep_alive() {
    let fake = Fake::new();
    let n = node("silent", config(fake.port, 1));
    let mut c = fake.accept(Duration::from_secs(5)).expect("connects");
    c.connack(None, false);
    // Read everything, answer nothing.
    let t0 = Instant::now();
    let mut ping = None;
    while t0.elapsed() < Duration::from_secs(5) {
        match c.next(Duration::from_millis(200)) {
            Some(Packet::PingReq(_)) if ping.is_none() => ping = Some(t0.elapsed()),
            _ => {}
        }
        if ping.is_some() {
            break;
        }
    }
    let ping = ping.expect("a PINGREQ after 1 s of silence");
    assert!(ping < Duration::from_millis(2500), "{ping:?}");
    let again = fake
        .accept(Duration::from_secs(5))
        .expect("reconnects after an unanswered ping");
    drop(again);
    let st = n.broker_state().unwrap();
    assert!(
        st.last_error.as_deref().unwrap_or("").contains("PINGRESP")
            || st.last_error.as_deref().unwrap_or("").contains("closed"),
        "{st:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
}

#[test]
fn what_was_in_flight_is_resent_under_its_packet_ids_after_a_reconnect() {
    let fake = Fake::new();
    let n = node("resend", config(fake.port, 30));
    let mut c = fake.connected(&n, None);
    let p = n.publisher::<RawBytes>("/cloud/x").build().unwrap();
    for i in 0..5u8 {
        p.publish(RawBytes(vec![i].into())).unwrap();
    }
    let first: Vec<Publish> = (0..5)
        .map(|_| c.next_sample(Duration::from_secs(5)).expect("sample"))
        .collect();
    // Ack the first two, then the connection breaks.
    c.send(Packet::PubAck(PubAck::new(first[0].pkid, None)));
    c.send(Packet::PubAck(PubAck::new(first[1].pkid, None)));
    std::thread::sleep(Duration::from_millis(200));
    drop(c);
    let mut c = fake.accept(Duration::from_secs(5)).expect("reconnects");
    c.connack(None, true);
    let again: Vec<Publish> = (0..3)
        .map(|_| c.next_sample(Duration::from_secs(5)).expect("resent"))
        .collect();
    for (a, f) in again.iter().zip(&first[2..]) {
        assert_eq!((a.pkid, &a.payload[..]), (f.pkid, &f.payload[..]));
        assert!(a.dup, "a resend is marked DUP");
        assert_eq!(a.qos, QoS::AtLeastOnce);
    }
    assert!(c.next_sample(Duration::from_millis(300)).is_none());
    for a in &again {
        c.send(Packet::PubAck(PubAck::new(a.pkid, None)));
    }
    eventually("queue empty", || n.broker_state().unwrap().queued == 0);
}

#[test]
fn a_refused_connection_says_why() {
    let fake = Fake::new();
    let port = fake.port;
    // Refuses every attempt, as a broker with other credentials would.
    let t = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(3);
        while let Some(mut c) = fake.accept(until.saturating_duration_since(Instant::now())) {
            c.send(Packet::ConnAck(ConnAck {
                session_present: false,
                code: ConnectReturnCode::NotAuthorized,
                properties: None,
            }));
        }
    });
    let mut cfg = config(port, 30);
    cfg.mqtt.as_mut().unwrap().on_unreachable = OnUnreachable::Fail;
    let err = Node::builder().name("refused").config(cfg).build().err();
    match err {
        Some(BuildError::Broker { why, .. }) => assert!(why.contains("NotAuthorized"), "{why}"),
        other => panic!("expected BuildError::Broker, got {other:?}"),
    }
    t.join().unwrap();
}

#[test]
fn a_request_cannot_point_replies_at_another_topic() {
    let fake = Fake::new();
    let n = node("service_side", config(fake.port, 30));
    let mut c = fake.connected(&n, None);
    let me = n.broker_state().unwrap();
    let garbage = me.garbage;
    let request = |reply_to: &str| {
        use rumqttc::v5::mqttbytes::v5::PublishProperties;
        Packet::Publish(Publish {
            dup: false,
            qos: QoS::AtMostOnce,
            retain: false,
            topic: format!("ferry/{DOMAIN}/@req/ab/9").into(),
            pkid: 0,
            payload: bytes::Bytes::from_static(b"\0\x01\0\0"),
            properties: Some(PublishProperties {
                response_topic: Some(reply_to.into()),
                correlation_data: Some(bytes::Bytes::from_static(&[1, 0, 0, 0, 0, 0, 0, 0])),
                user_properties: vec![("ferry".into(), "cd.4".into())],
                ..Default::default()
            }),
        })
    };
    // A response topic other than the client's own reply topic: refused,
    // counted as garbage.
    c.send(request(DATA));
    eventually("counted as garbage", || {
        n.broker_state().unwrap().garbage == garbage + 1
    });
    // The client's own reply topic is accepted (no such service here: no
    // reply, and nothing counted).
    c.send(request(&format!("ferry/{DOMAIN}/@rep/cd/4")));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(n.broker_state().unwrap().garbage, garbage + 1);
    assert!(c.next_sample(Duration::from_millis(300)).is_none());
}
