//! Zenoh's side, same shapes as ferry's: a `serve` child (echo bench/ping →
//! bench/pong from the subscriber callback, count bench/tp) and the parent's
//! ends. Peer mode, explicit TCP endpoints on 127.0.0.1 (or TLS with mutual
//! certificates, `--security`), no scouting; congestion control Block
//! everywhere; express for the ping-pong, batching (express off) for
//! throughput — as zenoh's own z_ping/z_pong and z_pub_thr/z_sub_thr do.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zenoh::bytes::ZBytes;
use zenoh::handlers::FifoChannelHandler;
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::qos::CongestionControl;
use zenoh::sample::Sample;
use zenoh::{Session, Wait};

use crate::measure::{Blaster, Pinger};
use crate::proto::{self, Res, HEADER};
use crate::sink::{on_command, SinkCounter};

/// Zenoh's TLS link with mutual certificates, all from the ferry keystore
/// of the security comparison: one CA for both systems.
#[derive(Clone, Debug)]
pub struct Tls {
    ca: PathBuf,
    /// The listener's certificate (names `localhost` and 127.0.0.1).
    listen: (PathBuf, PathBuf),
    /// The connecting side's client certificate: the enclave's.
    connect: (PathBuf, PathBuf),
}

impl Tls {
    /// Reads the paths from keystore `dir`: its CA, the server certificate
    /// made with `create_broker_certificate(["localhost", "127.0.0.1"])`
    /// and the identity of `enclave`.
    pub fn from_keystore(dir: &Path, enclave: &str) -> Res<Tls> {
        let ks = ferry_security::Keystore::open(dir)?;
        let server = dir.join("brokers").join("localhost");
        let client = ks.enclave_dir(enclave)?;
        Ok(Tls {
            ca: ks.ca_cert_path(),
            listen: (server.join("cert.pem"), server.join("key.pem")),
            connect: (client.join("cert.pem"), client.join("key.pem")),
        })
    }

    /// The `transport.link.tls` section: server name checked on connect,
    /// client certificates required.
    fn json5(&self) -> String {
        let q = |p: &Path| serde_json::Value::from(p.display().to_string()).to_string();
        format!(
            "transport: {{ link: {{ tls: {{ root_ca_certificate: {}, listen_certificate: {}, \
             listen_private_key: {}, connect_certificate: {}, connect_private_key: {}, \
             enable_mtls: true, verify_name_on_connect: true }} }} }},",
            q(&self.ca),
            q(&self.listen.0),
            q(&self.listen.1),
            q(&self.connect.0),
            q(&self.connect.1)
        )
    }
}

/// Peer-mode config listening on `listen` and connecting to `connect`, both
/// on 127.0.0.1 over TCP, or over TLS when `tls` (connecting to `localhost`,
/// the name in the listener's certificate); multicast scouting and gossip
/// off.
fn config(listen: u16, connect: Option<u16>, tls: Option<&Tls>) -> Res<zenoh::Config> {
    let (scheme, host) = if tls.is_some() {
        ("tls", "localhost")
    } else {
        ("tcp", "127.0.0.1")
    };
    let connect = connect
        .map(|p| format!("\"{scheme}/{host}:{p}\""))
        .unwrap_or_default();
    let link = tls.map(Tls::json5).unwrap_or_default();
    let json = format!(
        r#"{{
          mode: "peer",
          listen: {{ endpoints: ["{scheme}/127.0.0.1:{listen}"] }},
          connect: {{ endpoints: [{connect}] }},
          scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: false }} }},
          {link}
        }}"#
    );
    zenoh::Config::from_json5(&json)
}

/// The first bytes of a payload (enough for the bench header).
fn head(p: &ZBytes) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    let _ = p.reader().read_exact(&mut h);
    h
}

/// The child: listens on 127.0.0.1:`port` (TLS when `tls`), echoes pings
/// from the subscriber callback, counts throughput samples, until stdin
/// closes or `max` passes.
pub fn serve(port: u16, tls: Option<&Tls>, max: Duration) -> Res<()> {
    let session = zenoh::open(config(port, None, tls)?).wait()?;
    let pong = session
        .declare_publisher("bench/pong")
        .congestion_control(CongestionControl::Block)
        .express(true)
        .wait()?;
    let _ping = session
        .declare_subscriber("bench/ping")
        .callback(move |s: Sample| {
            if let Err(e) = pong.put(s.payload().clone()).wait() {
                eprintln!("zenoh pong put failed: {e}");
            }
        })
        .wait()?;
    let counter = Arc::new(Mutex::new(SinkCounter::default()));
    let c2 = counter.clone();
    let _tp = session
        .declare_subscriber("bench/tp")
        .callback(move |s: Sample| {
            let p = s.payload();
            let line = c2.lock().unwrap().feed(&head(p), p.len());
            if let Some(v) = line {
                proto::emit(&v);
            }
        })
        .wait()?;
    proto::emit(
        &serde_json::json!({"ready": true, "transport": "zenoh", "pid": std::process::id()}),
    );
    proto::wait_for_parent(max, on_command(counter));
    drop((_ping, _tp));
    let _ = session.close().wait();
    Ok(())
}

/// Parent's ping-pong end.
pub struct ZenohPinger {
    publ: Publisher<'static>,
    sub: Subscriber<FifoChannelHandler<Sample>>,
}

/// Parent's throughput end.
pub struct ZenohBlaster {
    publ: Publisher<'static>,
    msgs: Option<[ZBytes; 2]>,
}

/// Opens the parent's session (connecting to the child on `child_port`,
/// over TLS when `tls`), declares its ports and waits until the child's
/// subscribers match.
pub fn connect(
    child_port: u16,
    tls: Option<&Tls>,
    timeout: Duration,
) -> Res<(Session, ZenohPinger, ZenohBlaster)> {
    let session = zenoh::open(config(proto::free_port()?, Some(child_port), tls)?).wait()?;
    let publ = session
        .declare_publisher("bench/ping")
        .congestion_control(CongestionControl::Block)
        .express(true)
        .wait()?;
    let sub = session.declare_subscriber("bench/pong").wait()?;
    let tp = session
        .declare_publisher("bench/tp")
        .congestion_control(CongestionControl::Block)
        .express(false)
        .wait()?;
    let end = Instant::now() + timeout;
    loop {
        let ok =
            publ.matching_status().wait()?.matching() && tp.matching_status().wait()?.matching();
        if ok {
            break;
        }
        if Instant::now() >= end {
            return Err("zenoh: the serve child's subscribers never matched".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok((
        session,
        ZenohPinger { publ, sub },
        ZenohBlaster {
            publ: tp,
            msgs: None,
        },
    ))
}

impl Pinger for ZenohPinger {
    fn send(&mut self, payload: Vec<u8>) -> Res<()> {
        self.publ.put(payload).wait()
    }
    fn recv_seq(&mut self, timeout: Duration) -> Res<Option<u64>> {
        Ok(self
            .sub
            .recv_timeout(timeout)?
            .and_then(|s| proto::parse(&head(s.payload())).map(|(_, n)| n)))
    }
}

impl Blaster for ZenohBlaster {
    fn load(&mut self, warm: Vec<u8>, measure: Vec<u8>) -> Res<()> {
        self.msgs = Some([warm.into(), measure.into()]);
        Ok(())
    }
    fn send(&mut self, kind: u8) -> Res<bool> {
        let msgs = self.msgs.as_ref().ok_or("load() first")?;
        self.publ.put(msgs[kind as usize].clone()).wait()?;
        Ok(true)
    }
    fn send_payload(&mut self, payload: Vec<u8>) -> Res<bool> {
        self.publ.put(payload).wait()?;
        Ok(true)
    }
}
