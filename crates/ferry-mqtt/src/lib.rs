//! MQTT as one more path of the same ports, not a bridge.
//!
//! One `Broker` connection per runtime (the `[mqtt]` section), run by one
//! `ferry-mqtt` thread over rumqttc (MQTT 5). What goes through it:
//!
//! | MQTT topic | payload | what |
//! |---|---|---|
//! | `<prefix>/<domain>/<name>` | CDR (or JSON) | samples of cloud-scope topics |
//! | `<prefix>/<domain>/@disc/<participant>` | discovery beacon | announcements; empty = gone (last will) |
//! | `<prefix>/<domain>/@req/<participant>/<entity>` | CDR request | service requests |
//! | `<prefix>/<domain>/@rep/<participant>/<entity>` | CDR reply | replies to one client |
//! | `<prefix>/<domain>/@hist/<participant>/<entity>` | CDR (or JSON) | a transient_local writer's history, replayed to one late-joining reader |
//!
//! Ferry names are `/a/b`; the topic is the name without its leading `/`
//! (`/robot1/odom` in domain 0 → `ferry/0/robot1/odom`). Metadata travels as
//! MQTT 5 properties, so plain clients see a clean payload: one user
//! property `ferry` = `<writer> <seq> <source time ns> <type>` and the
//! content type `application/cdr` or `application/json` (`meta`).
//!
//! **No duplicates:** a cloud-scope writer publishes each sample to the
//! broker once. A reader drops a broker sample from writer W that a
//! connection from W on another path (shared memory, UDP, …) covers — at or
//! after the first sample that path delivered — and any sample whose
//! sequence number it already delivered (QoS 1 redeliveries, resends after
//! a reconnect); the first samples of a new direct path that the broker
//! delivered already are dropped too (`Inbound::broker_sample` and
//! `direct_sample` decide under the reader's lock, so at the hand-over each
//! sample goes through once, whichever path is faster). A sample without
//! `ferry` comes from a plain MQTT client: delivered if it decodes, counted
//! as an error if not.

mod link;
mod meta;
pub(crate) mod outbox;
mod session;
mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_wire::frame::FrameKind;
use ferry_wire::{EndpointId, EndpointKind, Locator, ParticipantId, TransportKind};
use parking_lot::{Condvar, Mutex};
use rumqttc::v5::mqttbytes::v5::{Filter, Publish};
use rumqttc::v5::mqttbytes::QoS;

use self::meta::{parse_endpoint, user_prop, Meta, SampleMeta};
use self::outbox::OutMsg;
use self::session::Session;
use self::wire::Dial;
use ferry_transport::config::mqtt::{BrokerUrl, MqttConfig, OnUnreachable};
use ferry_transport::error::BuildError;
use ferry_transport::message::Payload;
use ferry_transport::stats::ConnStats;
use ferry_transport::transport::{
    Capabilities, ConnectError, ConnectRequest, InFrame, InboundConn, Link, PeerInfo, SendError,
    Transport,
};

pub use link::WriterLink;

/// Fuzzing entry point (feature `fuzzing`, used by `fuzz/`): the bytes a
/// broker sends, cut into reads of the sizes `data` starts with, through
/// the packet reader and the metadata parsers. Returns the packets read.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_stream(data: &[u8]) -> usize {
    let Some((&step, data)) = data.split_first() else {
        return 0;
    };
    let step = usize::from(step) * 7 + 1;
    let mut r = wire::PacketReader::new(64 * 1024);
    let mut packets = 0;
    for chunk in data.chunks(step) {
        let Ok(room) = r.room() else { return packets };
        let n = chunk.len().min(room.len());
        room[..n].copy_from_slice(&chunk[..n]);
        r.filled(n);
        loop {
            match r.next() {
                Ok(Some(rumqttc::v5::mqttbytes::v5::Packet::Publish(p))) => {
                    packets += 1;
                    let _ = SampleMeta::read(&p.properties);
                    let _ = user_prop(&p.properties, meta::ERROR_KEY);
                    if let Ok(t) = std::str::from_utf8(&p.topic) {
                        let _ = t.split_once('/').and_then(|(_, e)| parse_path(e));
                    }
                }
                Ok(Some(_)) => packets += 1,
                Ok(None) => break,
                Err(_) => return packets,
            }
        }
    }
    packets
}

/// The writer id of samples from plain MQTT clients (no `ferry` property).
pub const FOREIGN_WRITER: EndpointId = EndpointId {
    participant: ParticipantId(0),
    entity: 0,
};

/// State of the broker connection, for `ferry doctor` / node info.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BrokerState {
    /// The broker as configured.
    pub url: String,
    /// Connected now.
    pub connected: bool,
    /// Connections made (1 = never reconnected).
    pub connects: u64,
    /// Connection losses and failed attempts.
    pub failures: u64,
    /// The last error, if any.
    pub last_error: Option<String>,
    /// Messages waiting for the broker (queued or unacknowledged).
    pub queued: usize,
    /// Their bytes.
    pub queued_bytes: usize,
    /// Messages dropped because the offline queue was full.
    pub dropped: u64,
    /// Broker samples not delivered because the reader had the writer on
    /// another path or already had that sequence number.
    pub duplicates: u64,
    /// Messages on ferry topics that could not be used (bad metadata,
    /// unknown control topic).
    pub garbage: u64,
    /// Messages that carry this runtime's own `ferry` property but that it
    /// did not publish (the broker never echoes its own): another client
    /// copied ferry's metadata. Not delivered (docs/MQTT.md).
    pub echoes: u64,
}

/// Most (reader, writer) pairs with a broker connection, and whose last
/// sequence number is remembered after the writer left (a broker restart
/// can make it leave and return).
const MAX_SEEN: usize = 16_384;

#[derive(Default)]
struct Subs {
    /// MQTT topic → local readers.
    data: HashMap<String, Arc<[EndpointId]>>,
}

#[derive(Default)]
struct LinkState {
    connected: bool,
    connects: u64,
    failures: u64,
    last_error: Option<String>,
}

/// What the broker connection needs of its runtime (implemented by the
/// runtime; the transport does not know the runtime's type).
pub trait BrokerHost: Send + Sync {
    /// A discovery beacon that came through the broker: handled as if heard
    /// (the I/O thread is woken for what follows).
    fn broker_beacon(&self, bytes: &[u8]) -> Result<(), ferry_discovery::DatagramError>;
    /// Whether source timestamps of `p` are from our clock.
    fn same_clock(&self, p: ParticipantId) -> bool;
    /// The connection came up: announce this runtime at once.
    fn announce_soon(&self);
    /// The broker delivered `p`'s last will: its connection broke.
    fn broker_vanished(&self, p: ParticipantId);
}

/// A runtime's connection to its MQTT broker.
pub struct Broker {
    me: ParticipantId,
    /// `<prefix>/<domain>/`.
    base: String,
    /// `<base>@disc/<me>`: this runtime's announcements.
    disc_topic: Bytes,
    /// Announcements go through the broker (`[mqtt] discovery`): then it
    /// subscribes to `@disc/+` and leaves a last will.
    discovery: bool,
    url: String,
    /// The outgoing queue and the live connection, if any.
    session: Mutex<Session>,
    /// Signalled when the queue has room again.
    room: Condvar,
    /// Signalled when the connection comes or goes.
    linked: Condvar,
    /// Wakes the `ferry-mqtt` thread: a backlog to write, or shutdown.
    waker: mio::Waker,
    /// How to connect: address, TLS, the encoded CONNECT.
    dial: Dial,
    connect: Bytes,
    keep_alive: Duration,
    state: Mutex<LinkState>,
    connected: AtomicBool,
    subs: Mutex<Subs>,
    rx: Mutex<HashMap<(EndpointId, EndpointId), Arc<InboundConn>>>,
    /// The last sequence number delivered per (reader, writer): kept when
    /// the writer's connection ends, so resends after it returns are
    /// recognized.
    seen: Mutex<HashMap<(EndpointId, EndpointId), u64>>,
    /// Participants whose announcements came through the broker.
    heard: Mutex<HashSet<ParticipantId>>,
    /// Endpoints named in announcements that came through the broker: a
    /// reader announced there has its subscription live at the broker
    /// (its runtime subscribes before it announces, on one connection).
    heard_endpoints: Mutex<HashSet<EndpointId>>,
    writers: Mutex<HashMap<EndpointId, Weak<WriterLink>>>,
    clients: Mutex<HashMap<u32, Weak<dyn ferry_transport::transport::ReplySink>>>,
    duplicates: AtomicU64,
    garbage: AtomicU64,
    echoes: AtomicU64,
    rt: OnceLock<Weak<dyn BrokerHost>>,
    /// This connection itself (for the repliers it hands out).
    this: Weak<Broker>,
    /// `shutdown` was called (once).
    stop: AtomicBool,
    /// The DISCONNECT is written: the `ferry-mqtt` thread ends.
    closing: AtomicBool,
    done: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    keep_all_block: Duration,
    /// `mqtt.max_packet_bytes`: no larger message is queued.
    max_packet: usize,
    /// Scheduling asked for by subscribers (`thread_priority`): the
    /// `ferry-mqtt` thread runs their cloud-scope callbacks.
    pub(crate) policy: ferry_transport::priority::PolicyCell,
}

impl Broker {
    /// Raises the `ferry-mqtt` thread to at least `p` (applied on its next
    /// turn; woken for it).
    pub fn raise(&self, p: ferry_transport::priority::ThreadPolicy) {
        if self.policy.raise(p) {
            let _ = self.waker.wake();
        }
    }

    /// Starts the `ferry-mqtt` thread, which connects (after starting the
    /// embedded broker for `mqtt://embedded`) and reconnects with backoff.
    /// With `on_unreachable = "fail"`, waits for the first connection and
    /// fails if it does not come.
    pub fn start(
        cfg: &MqttConfig,
        domain: u16,
        me: ParticipantId,
        keep_all_block: Duration,
        discovery: bool,
        security: Option<&ferry_transport::transport::TransportSecurity>,
        keystore: Option<&std::path::Path>,
    ) -> Result<Arc<Broker>, BuildError> {
        if let Some(s) = security.filter(|s| s.enforce) {
            plain_refused(cfg, s)?;
        }
        let (host, port) = match &cfg.broker {
            BrokerUrl::Embedded { port } => embedded(cfg, *port, security, keystore)?,
            BrokerUrl::Tcp { host, port } | BrokerUrl::Tls { host, port } => (host.clone(), *port),
        };
        let base = format!("{}/{}/", cfg.prefix, domain);
        let tls = match &cfg.broker {
            BrokerUrl::Tls { .. } => Some(tls_config(
                cfg,
                &host,
                security.map(|s| s.identity.as_ref()),
            )?),
            _ => None,
        };
        let io = |source| BuildError::Io {
            what: "MQTT thread".into(),
            source,
        };
        let poll = mio::Poll::new().map_err(io)?;
        let waker = mio::Waker::new(poll.registry(), session::WAKE).map_err(io)?;
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let b = Arc::new_cyclic(|this| Broker {
            this: this.clone(),
            me,
            disc_topic: Bytes::from(format!("{base}@disc/{me}")),
            connect: session::connect_packet(cfg, &base, me, discovery),
            discovery,
            base,
            url: cfg.broker.to_string(),
            session: Mutex::new(Session::new(cfg.offline_queue_bytes)),
            room: Condvar::new(),
            linked: Condvar::new(),
            waker,
            dial: Dial {
                host,
                port,
                tls,
                timeout: Duration::from_millis(cfg.connect_timeout_ms),
                max_incoming: cfg.max_packet_bytes,
            },
            keep_alive: Duration::from_secs(u64::from(cfg.keep_alive_s)),
            state: Mutex::new(LinkState::default()),
            connected: AtomicBool::new(false),
            subs: Mutex::new(Subs::default()),
            rx: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashMap::new()),
            heard: Mutex::new(HashSet::new()),
            heard_endpoints: Mutex::new(HashSet::new()),
            writers: Mutex::new(HashMap::new()),
            clients: Mutex::new(HashMap::new()),
            duplicates: AtomicU64::new(0),
            garbage: AtomicU64::new(0),
            echoes: AtomicU64::new(0),
            rt: OnceLock::new(),
            stop: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            done: Mutex::new(Some(done_rx)),
            keep_all_block,
            max_packet: cfg.max_packet_bytes,
            policy: Default::default(),
        });
        let b2 = b.clone();
        std::thread::Builder::new()
            .name("ferry-mqtt".into())
            .spawn(move || {
                b2.run(poll);
                let _ = done_tx.send(());
            })
            .map_err(io)?;
        if cfg.on_unreachable == OnUnreachable::Fail {
            let until = Instant::now() + Duration::from_millis(cfg.connect_timeout_ms);
            let mut st = b.state.lock();
            while !st.connected && Instant::now() < until {
                b.linked.wait_until(&mut st, until);
            }
            if !st.connected {
                let why = st.last_error.clone().unwrap_or_else(|| "no answer".into());
                drop(st);
                b.shutdown();
                return Err(BuildError::Broker {
                    url: cfg.broker.to_string(),
                    why,
                });
            }
        }
        Ok(b)
    }

    /// Lets the connection reach its runtime (discovery, clocks).
    pub fn bind(&self, rt: Weak<dyn BrokerHost>) {
        let _ = self.rt.set(rt);
    }

    fn runtime(&self) -> Option<Arc<dyn BrokerHost>> {
        self.rt.get().and_then(Weak::upgrade)
    }

    /// The MQTT topic of ferry topic `name`.
    /// `<base>@hist/<participant>/<entity>`: where a late joiner's
    /// history goes (its runtime subscribes at every connect).
    pub fn hist_topic(&self, reader: EndpointId) -> Bytes {
        Bytes::from(format!(
            "{}@hist/{}/{}",
            self.base, reader.participant, reader.entity
        ))
    }

    pub fn data_topic(&self, name: &str) -> String {
        format!("{}{}", self.base, name.trim_start_matches('/'))
    }

    /// Connection state and counters.
    pub fn state(&self) -> BrokerState {
        // Lock order everywhere: `state`, then `session`.
        let st = self.state.lock();
        let s = self.session.lock();
        BrokerState {
            url: self.url.clone(),
            connected: st.connected,
            connects: st.connects,
            failures: st.failures,
            last_error: st.last_error.clone(),
            queued: s.out.len(),
            queued_bytes: s.out.bytes(),
            dropped: s.out.dropped,
            duplicates: self.duplicates.load(Ordering::Relaxed),
            garbage: self.garbage.load(Ordering::Relaxed),
            echoes: self.echoes.load(Ordering::Relaxed),
        }
    }

    /// Whether `p`'s announcements come through the broker.
    pub fn heard(&self, p: ParticipantId) -> bool {
        self.heard.lock().contains(&p)
    }

    /// A participant left: its broker connections end.
    pub fn forget(&self, p: ParticipantId) {
        self.heard.lock().remove(&p);
        self.heard_endpoints.lock().retain(|e| e.participant != p);
        let mut gone = Vec::new();
        self.rx.lock().retain(|&(r, w), c| {
            let keep = w.participant != p;
            if !keep {
                gone.push((r, c.clone()));
            }
            keep
        });
        for (r, c) in gone {
            if let Some(inbox) = ferry_transport::transport::lookup_reader(r) {
                inbox.detach(&c);
            }
        }
    }

    /// Sends one discovery datagram (announcement or goodbye) to the broker.
    pub fn announce(&self, beacon: &[u8]) {
        let m = OutMsg {
            topic: self.disc_topic.clone(),
            qos: QoS::AtMostOnce,
            retain: false,
            payload: Bytes::copy_from_slice(beacon),
            meta: Meta::None,
            droppable: true,
        };
        if !self.send_if_held(&m) {
            let _ = self.send(m, None);
        }
    }

    /// A local reader of cloud-scope `topic`.
    pub fn subscribe(&self, topic: &str, reader: EndpointId) {
        let t = self.data_topic(topic);
        let first = {
            let mut s = self.subs.lock();
            let v = s.data.entry(t.clone()).or_insert_with(|| Arc::new([]));
            *v = v.iter().copied().chain([reader]).collect();
            v.len() == 1
        };
        if first {
            self.write_subscribe(&mut self.session.lock(), vec![data_filter(t)]);
        }
    }

    /// The local reader is gone.
    pub fn unsubscribe(&self, reader: EndpointId) {
        let mut s = self.subs.lock();
        let mut empty = Vec::new();
        for (t, v) in s.data.iter_mut() {
            if v.contains(&reader) {
                *v = v.iter().copied().filter(|r| *r != reader).collect();
            }
            if v.is_empty() {
                empty.push(t.clone());
            }
        }
        for t in &empty {
            s.data.remove(t);
        }
        drop(s);
        if !empty.is_empty() {
            self.write_unsubscribe(&mut self.session.lock(), empty);
        }
        self.rx.lock().retain(|(r, _), _| *r != reader);
        self.seen.lock().retain(|(r, _), _| *r != reader);
    }

    /// Queues `m` for the broker and writes what the connection and the
    /// broker's window allow, from this thread. Blocks up to `block` while
    /// the queue is full of messages that may not be dropped.
    fn send(&self, m: OutMsg, block: Option<Duration>) -> Result<(), SendError> {
        let mut s = self.session.lock();
        // Larger than a packet may be (ours or the broker's limit): a clear
        // error now, not a message dropped later.
        let limit = s
            .max_out
            .map_or(self.max_packet, |b| (b as usize).min(self.max_packet));
        if m.cost() > limit {
            return Err(SendError::Encode(ferry_transport::error::EncodeError {
                type_name: "sample".into(),
                reason: format!(
                    "{} bytes do not fit an MQTT packet of at most {limit} bytes \
                     (mqtt.max_packet_bytes, or the broker's Maximum Packet Size)",
                    m.payload.len()
                ),
            }));
        }
        let mut m = m;
        let deadline = block.map(|d| Instant::now() + d);
        loop {
            match s.out.push(m) {
                Ok(()) => break,
                Err(back) => match deadline {
                    Some(t) if Instant::now() < t => {
                        m = *back;
                        self.room.wait_until(&mut s, t);
                    }
                    _ => return Err(SendError::Blocked(block.unwrap_or_default())),
                },
            }
        }
        self.pump(&mut s);
        Ok(())
    }

    /// Stops the thread after a last flush (≤ 300 ms) and a clean
    /// DISCONNECT (which does not fire the last will: the goodbye
    /// announcement said it already).
    pub fn shutdown(&self) {
        if self.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        let until = Instant::now() + Duration::from_millis(300);
        while self.connected.load(Ordering::Relaxed)
            && self.session.lock().out.len() > 0
            && Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.write_disconnect(&mut self.session.lock());
        self.closing.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(rx) = self.done.lock().take() {
            let _ = rx.recv_timeout(Duration::from_secs(3));
        }
    }

    fn dispatch(&self, p: Publish) {
        let Ok(topic) = std::str::from_utf8(&p.topic) else {
            self.garbage.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let Some(rest) = topic.strip_prefix(self.base.as_str()) else {
            return;
        };
        if let Some(who) = rest.strip_prefix("@disc/") {
            self.on_discovery(who, &p.payload);
        } else if let Some(to) = rest.strip_prefix("@req/") {
            self.on_request(to, &p);
        } else if let Some(to) = rest.strip_prefix("@rep/") {
            self.on_reply(to, &p);
        } else if let Some(to) = rest.strip_prefix("@hist/") {
            match parse_path(to).filter(|r| r.participant == self.me) {
                Some(reader) => self.on_samples(&[reader], &p),
                None => {
                    self.garbage.fetch_add(1, Ordering::Relaxed);
                }
            }
        } else if rest.starts_with('@') {
            self.garbage.fetch_add(1, Ordering::Relaxed);
        } else {
            self.on_sample(topic, &p);
        }
    }

    fn on_discovery(&self, who: &str, payload: &[u8]) {
        let Some(rt) = self.runtime() else { return };
        let Ok(pid) = u64::from_str_radix(who, 16).map(ParticipantId) else {
            self.garbage.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if pid == self.me {
            return;
        }
        if payload.is_empty() {
            // The last will of a runtime whose connection broke.
            rt.broker_vanished(pid);
            return;
        }
        match rt.broker_beacon(payload) {
            Ok(()) => {
                self.heard.lock().insert(pid);
                self.heard_again(pid);
                if let Ok(ferry_wire::beacon::Beacon {
                    body: ferry_wire::beacon::BeaconBody::Announce(a),
                    ..
                }) = ferry_wire::beacon::Beacon::parse(payload)
                {
                    let mut heard = self.heard_endpoints.lock();
                    for r in &a.records {
                        if let ferry_wire::beacon::Record::Endpoint(e) = r {
                            heard.insert(EndpointId {
                                participant: pid,
                                entity: e.entity,
                            });
                        }
                    }
                }
            }
            Err(e) => {
                self.garbage.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("broker announcement from {who} ignored: {e}");
            }
        }
    }

    /// The inbound connection of `reader` from `writer` over the broker.
    fn rx_conn(
        &self,
        reader: EndpointId,
        writer: EndpointId,
        replier: impl FnOnce() -> Option<Arc<dyn ferry_transport::transport::Replier>>,
    ) -> Option<(Arc<dyn ferry_transport::transport::Inbox>, Arc<InboundConn>)> {
        let inbox = ferry_transport::transport::lookup_reader(reader)?;
        let mut rx = self.rx.lock();
        if rx.len() >= MAX_SEEN && !rx.contains_key(&(reader, writer)) {
            // Bounded whatever a client claims to be: a flood of made-up
            // writer ids is counted, not stored.
            self.garbage.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let conn = rx.entry((reader, writer)).or_insert_with(|| {
            let same_clock = writer != FOREIGN_WRITER
                && self
                    .runtime()
                    .is_some_and(|rt| rt.same_clock(writer.participant));
            let conn = Arc::new(InboundConn {
                remote: writer,
                origin: ferry_transport::transport::Origin::Broker,
                transport: TransportKind::Mqtt,
                locator: self.url.clone(),
                stats: Arc::new(ConnStats::new()),
                replier: replier(),
                same_clock,
                seqs: Default::default(),
                // Anyone the broker let in: nothing proves who wrote.
                identity: None,
            });
            inbox.attach(conn.clone());
            conn
        });
        Some((inbox, conn.clone()))
    }

    fn on_sample(&self, topic: &str, p: &Publish) {
        let readers = match self.subs.lock().data.get(topic) {
            Some(v) => v.clone(),
            None => return,
        };
        self.on_samples(&readers, p);
    }

    /// A sample for `readers` (a topic's, or one late joiner's history).
    fn on_samples(&self, readers: &[EndpointId], p: &Publish) {
        let (writer, seq, stamp) = match SampleMeta::read(&p.properties) {
            Ok(Some(m)) => (m.writer, Some(m.seq), m.stamp_ns),
            Ok(None) => (FOREIGN_WRITER, None, 0),
            Err(()) => {
                self.garbage.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        if writer.participant == self.me {
            // Data subscriptions are No Local: the broker never sends our
            // own samples back. This one names us but came from another
            // client that copied ferry's metadata (a dashboard "replying").
            if self.echoes.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    "MQTT message on `{}` carries this runtime's own `{}` property but was \
                     published by another client; not delivered (plain clients must not copy \
                     ferry's metadata, docs/MQTT.md); counted in `ferry doctor` as echoes",
                    String::from_utf8_lossy(&p.topic),
                    meta::KEY
                );
            }
            return;
        }
        for &reader in readers.iter() {
            let Some((inbox, conn)) = self.rx_conn(reader, writer, || None) else {
                continue;
            };
            let seq = {
                let mut seen = self.seen.lock();
                if seen.len() >= MAX_SEEN {
                    let rx = self.rx.lock();
                    seen.retain(|k, _| rx.contains_key(k));
                }
                let last = seen.entry((reader, writer)).or_insert(0);
                let seq = seq.unwrap_or(*last + 1);
                if writer != FOREIGN_WRITER && (seq <= *last || !inbox.broker_sample(&conn, seq)) {
                    self.duplicates.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                *last = seq;
                seq
            };
            deliver(&*inbox, &conn, FrameKind::Data, seq, stamp, &p.payload);
        }
    }

    fn on_request(&self, to: &str, p: &Publish) {
        let props = &p.properties;
        let parsed = (|| {
            let service = parse_path(to)?;
            let client = parse_endpoint(user_prop(props, meta::KEY)?)?;
            let pr = props.as_ref()?;
            // Replies go only to the calling client's own reply topic, never
            // where a request's response topic points otherwise.
            let reply_to = pr.response_topic.as_deref()?;
            let own = reply_to
                .strip_prefix(self.base.as_str())
                .and_then(|t| t.strip_prefix("@rep/"))
                .and_then(parse_path);
            if own != Some(client) {
                return None;
            }
            let reply_to = Bytes::copy_from_slice(reply_to.as_bytes());
            let id: [u8; 8] = pr.correlation_data.as_ref()?.as_ref().try_into().ok()?;
            Some((service, client, reply_to, u64::from_le_bytes(id)))
        })();
        let Some((service, client, reply_to, request_id)) = parsed else {
            self.garbage.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let me = self.this.upgrade();
        let Some((inbox, conn)) = self.rx_conn(service, client, || {
            me.map(|b| {
                Arc::new(link::Replier {
                    broker: Arc::downgrade(&b),
                    topic: reply_to,
                }) as Arc<dyn ferry_transport::transport::Replier>
            })
        }) else {
            return;
        };
        deliver(
            &*inbox,
            &conn,
            FrameKind::Request,
            request_id,
            0,
            &p.payload,
        );
    }

    fn on_reply(&self, to: &str, p: &Publish) {
        let props = &p.properties;
        let parsed = (|| {
            let client = parse_path(to)?;
            if client.participant != self.me {
                return None;
            }
            let entity = client.entity;
            let id: [u8; 8] = props
                .as_ref()?
                .correlation_data
                .as_ref()?
                .as_ref()
                .try_into()
                .ok()?;
            Some((entity, u64::from_le_bytes(id)))
        })();
        let Some((entity, request_id)) = parsed else {
            self.garbage.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let Some(sink) = self.clients.lock().get(&entity).and_then(Weak::upgrade) else {
            return;
        };
        if let Some(err) = user_prop(props, meta::ERROR_KEY) {
            sink.on_reply(request_id, Err(err.to_string()));
            return;
        }
        let bytes = || Ok(p.payload.clone());
        sink.on_reply(
            request_id,
            Ok(Payload {
                typed: None,
                bytes: &bytes,
            }),
        );
    }
}

/// The broker link of a new cloud-scope writer of `T`: QoS from the
/// writer's (best_effort → 0, reliable → 1, or the rule's `mqtt_qos`).
pub fn writer_link<T: ferry_transport::message::Codec>(
    b: &Arc<Broker>,
    cfg: &ferry_transport::config::Config,
    id: EndpointId,
    topic: &str,
    qos: &ferry_wire::Qos,
    type_name: &str,
) -> Arc<WriterLink> {
    use ferry_wire::{History, Reliability};
    let (encoding, force) = cfg.topic_mqtt(topic);
    let reliable = qos.reliability == Reliability::Reliable;
    let mqtt_qos = match force {
        Some(0) => QoS::AtMostOnce,
        Some(2) => QoS::ExactlyOnce,
        Some(_) => QoS::AtLeastOnce,
        None if reliable => QoS::AtLeastOnce,
        None => QoS::AtMostOnce,
    };
    let keep_all = qos.history == History::KeepAll;
    WriterLink::new(
        b.clone(),
        id,
        link::WriterSettings {
            topic: Bytes::from(b.data_topic(topic)),
            qos: mqtt_qos,
            droppable: !(reliable && keep_all),
            block: (reliable && keep_all).then_some(b.keep_all_block),
            type_name: type_name.into(),
            encoding,
            json: Some(Box::new(|v| v.clone().downcast::<T>().ok()?.encode_json())),
        },
    )
}

/// `<participant hex>/<entity>` of a control topic.
fn parse_path(s: &str) -> Option<EndpointId> {
    let (p, e) = s.split_once('/')?;
    Some(EndpointId {
        participant: ParticipantId(u64::from_str_radix(p, 16).ok()?),
        entity: e.parse().ok()?,
    })
}

/// Hands one broker message to a local reader on `conn`.
fn deliver(
    inbox: &dyn ferry_transport::transport::Inbox,
    conn: &Arc<InboundConn>,
    kind: FrameKind,
    seq: u64,
    stamp_ns: u64,
    payload: &Bytes,
) {
    conn.stats.message(payload.len());
    let bytes = || Ok(payload.clone());
    inbox.deliver(
        conn,
        &InFrame {
            kind,
            seq,
            stamp_ns,
            arrival_ns: 0,
            payload: Payload {
                typed: None,
                bytes: &bytes,
            },
        },
    );
}

fn data_filter(topic: String) -> Filter {
    let mut f = Filter::new(topic, QoS::AtLeastOnce);
    f.nolocal = true;
    f
}

/// Under `enforce` nothing crosses the network in clear: a plain
/// `mqtt://` broker must be on this host (the embedded one listening on
/// loopback, or a local one), else the build fails and says how to fix it.
fn plain_refused(
    cfg: &MqttConfig,
    _sec: &ferry_transport::transport::TransportSecurity,
) -> Result<(), BuildError> {
    let off_host = match &cfg.broker {
        BrokerUrl::Tls { .. } => false,
        BrokerUrl::Embedded { .. } => cfg.listen.is_some_and(|l| !l.ip().is_loopback()),
        BrokerUrl::Tcp { host, .. } => {
            !(host == "localhost"
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback()))
        }
    };
    if off_host {
        return Err(BuildError::Broker {
            url: cfg.broker.to_string(),
            why: "under FERRY_SECURITY=enforce a broker off this host needs TLS: use \
                  mqtts://host:8883 (with a certificate from `ferry security \
                  create-broker-cert`), or keep the embedded broker on loopback"
                .into(),
        });
    }
    Ok(())
}

/// TLS to the broker: rustls (ring), trusting `ca_file` or the system's
/// roots (and, with security on, the keystore's CA), the certificate
/// checked against `host`. A client certificate from `cert_file`/`key_file`,
/// else (security on) the enclave's own.
#[cfg(feature = "tls")]
fn tls_config(
    cfg: &MqttConfig,
    host: &str,
    identity: Option<&ferry_security::Identity>,
) -> Result<wire::Tls, BuildError> {
    let fail = |why: String| BuildError::Broker {
        url: cfg.broker.to_string(),
        why,
    };
    let mut roots = rustls::RootCertStore::empty();
    match &cfg.ca_file {
        Some(p) => {
            let pem =
                std::fs::read(p).map_err(|e| fail(format!("ca_file {}: {e}", p.display())))?;
            for c in rustls_pemfile::certs(&mut &pem[..]) {
                let c = c.map_err(|e| fail(format!("ca_file {}: {e}", p.display())))?;
                roots
                    .add(c)
                    .map_err(|e| fail(format!("ca_file {}: {e}", p.display())))?;
            }
            if roots.is_empty() {
                return Err(fail(format!(
                    "ca_file {}: no PEM certificate in it",
                    p.display()
                )));
            }
        }
        None => {
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
        }
    }
    if let Some(id) = identity {
        roots
            .add(rustls::pki_types::CertificateDer::from(
                id.ca_der().to_vec(),
            ))
            .map_err(|e| fail(format!("the keystore's CA: {e}")))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| fail(e.to_string()))?
    .with_root_certificates(roots);
    let client_auth = match (&cfg.cert_file, &cfg.key_file) {
        (Some(c), Some(k)) => Some(client_pem(c, k).map_err(fail)?),
        _ => identity.map(|id| id.client_auth()),
    };
    let tls = match client_auth {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| fail(format!("client certificate: {e}")))?,
        None => builder.with_no_client_auth(),
    };
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| fail(format!("`{host}` is not a TLS server name: {e}")))?;
    Ok((Arc::new(tls), name))
}

/// A client certificate chain and its key from PEM files.
#[cfg(feature = "tls")]
fn client_pem(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<
    (
        Vec<rustls::pki_types::CertificateDer<'static>>,
        rustls::pki_types::PrivateKeyDer<'static>,
    ),
    String,
> {
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let pem = read(cert)?;
    let chain = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cert_file {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "cert_file {}: no PEM certificate in it",
            cert.display()
        ));
    }
    let pem = read(key)?;
    let key = rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|e| format!("key_file {}: {e}", key.display()))?
        .ok_or_else(|| format!("key_file {}: no PEM private key in it", key.display()))?;
    Ok((chain, key))
}

#[cfg(not(feature = "tls"))]
fn tls_config(
    cfg: &MqttConfig,
    _host: &str,
    _identity: Option<&ferry_security::Identity>,
) -> Result<wire::Tls, BuildError> {
    Err(BuildError::Broker {
        url: cfg.broker.to_string(),
        why: "ferry was built without the `mqtt-tls` feature".into(),
    })
}

/// The embedded broker's TLS listener from `[mqtt] listen_tls`: the
/// broker certificate (`broker_cert`, else the keystore's only one), and
/// client certificates of the keystore's CA required.
#[cfg(feature = "embedded-broker")]
fn broker_tls(
    cfg: &MqttConfig,
    security: Option<&ferry_transport::transport::TransportSecurity>,
    keystore: Option<&std::path::Path>,
) -> Result<Option<ferry_broker::BrokerTls>, BuildError> {
    let Some(listen) = cfg.listen_tls else {
        return Ok(None);
    };
    let fail = |why: String| BuildError::Broker {
        url: cfg.broker.to_string(),
        why,
    };
    let (Some(sec), Some(ks)) = (security, keystore) else {
        return Err(fail(
            "[mqtt] listen_tls needs security on (permissive or enforce) with a keystore: its \
             CA admits the clients"
                .into(),
        ));
    };
    let dir = match &cfg.broker_cert {
        Some(d) => d.clone(),
        None => ferry_security::Keystore::open(ks)
            .and_then(|k| k.broker_cert_dir(None))
            .map_err(|e| fail(e.to_string()))?,
    };
    let config = ferry_security::tls::broker_server_config(sec.identity.ca_der(), &dir)
        .map_err(|e| fail(e.to_string()))?;
    if sec.enforce {
        tracing::warn!(
            "the embedded MQTT broker's TLS listener on {listen} admits every identity of the \
             keystore, and the embedded broker has no ACLs: each may read and write every topic \
             through it (Mosquitto with `ferry security export-mqtt-acl` restricts that)"
        );
    }
    Ok(Some(ferry_broker::BrokerTls { listen, config }))
}

/// Starts (or reuses) this process's embedded broker on `port`: on
/// loopback unless `[mqtt] listen` says otherwise, requiring `[mqtt]`'s
/// user and password when they are set, and with a TLS listener when
/// `[mqtt] listen_tls` asks. A broker already listening there (another
/// process's) is used instead. Returns where to connect.
#[cfg(feature = "embedded-broker")]
fn embedded(
    cfg: &MqttConfig,
    port: u16,
    security: Option<&ferry_transport::transport::TransportSecurity>,
    keystore: Option<&std::path::Path>,
) -> Result<(String, u16), BuildError> {
    let tls = broker_tls(cfg, security, keystore)?;
    let listen = cfg
        .listen
        .unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let users = cfg.user.as_ref().map(|u| {
        std::collections::HashMap::from([(u.clone(), cfg.password.clone().unwrap_or_default())])
    });
    if users.is_none() && !listen.ip().is_loopback() {
        tracing::warn!(
            "the embedded MQTT broker on {listen} lets anyone on the network in: set [mqtt] \
             user and password"
        );
    }
    let started = ferry_broker::EmbeddedBroker::start(&ferry_broker::BrokerConfig {
        listen,
        listen_v311: None,
        max_payload: cfg.max_packet_bytes,
        users,
        tls,
    });
    match started {
        Ok(b) => Ok(("127.0.0.1".into(), b.local_addr().port())),
        Err(ferry_broker::BrokerError::Bind { in_use: true, .. }) if listen.port() != 0 => {
            tracing::info!(
                "{listen} is taken (another process's broker?): connecting to it as a client"
            );
            Ok(("127.0.0.1".into(), listen.port()))
        }
        Err(e) => Err(BuildError::Broker {
            url: format!("mqtt://embedded:{port}"),
            why: e.to_string(),
        }),
    }
}

#[cfg(not(feature = "embedded-broker"))]
fn embedded(
    _cfg: &MqttConfig,
    port: u16,
    _security: Option<&ferry_transport::transport::TransportSecurity>,
    _keystore: Option<&std::path::Path>,
) -> Result<(String, u16), BuildError> {
    Err(BuildError::Broker {
        url: format!("mqtt://embedded:{port}"),
        why: "ferry was built without the `embedded-broker` feature".into(),
    })
}

/// The MQTT transport: carries service calls to runtimes reachable only
/// through the broker; samples of cloud-scope topics travel on each
/// writer's one [`WriterLink`].
pub struct MqttTransport(pub Arc<Broker>);

/// Starts the broker connection when the config has an `[mqtt]` section.
pub fn start(
    ctx: &ferry_transport::transport::StartContext<'_>,
) -> Result<Option<Arc<dyn Transport>>, BuildError> {
    let Some(m) = &ctx.cfg.mqtt else {
        return Ok(None);
    };
    let b = Broker::start(
        m,
        ctx.cfg.domain_id,
        ctx.id,
        Duration::from_millis(ctx.cfg.keep_all_block_ms),
        ctx.cfg.announces_through_broker(),
        ctx.security.map(|s| s.as_ref()),
        ctx.cfg.security.keystore.as_deref(),
    )?;
    Ok(Some(Arc::new(MqttTransport(b))))
}

impl Transport for MqttTransport {
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
    fn raise_delivery(&self, p: ferry_transport::priority::ThreadPolicy) {
        self.0.raise(p);
    }
    fn shutdown(&self) {
        self.0.shutdown();
    }
    fn kind(&self) -> TransportKind {
        TransportKind::Mqtt
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            zero_copy: false,
            mtu: None,
            request_reply: true,
        }
    }
    fn locators(&self) -> Vec<Locator> {
        Vec::new()
    }
    fn reaches(&self, _local: &PeerInfo, remote: &PeerInfo) -> bool {
        self.0.heard(remote.participant)
    }
    fn connect(&self, req: ConnectRequest) -> Result<Arc<dyn Link>, ConnectError> {
        let unreachable = |why: &str| ConnectError::Unreachable {
            peer: req.remote.participant,
            tried: self.0.url.clone(),
            last: why.into(),
        };
        match req.writer_kind {
            EndpointKind::Client => {
                let sink = req
                    .reply_sink
                    .ok_or_else(|| unreachable("client without a reply sink"))?;
                self.0
                    .clients
                    .lock()
                    .insert(req.writer.entity, Arc::downgrade(&sink));
                Ok(Arc::new(link::ClientLink::new(
                    self.0.clone(),
                    req.writer,
                    req.reader,
                    self.0.keep_all_block,
                )))
            }
            _ => {
                // Matched through discovery on another path, the reader may
                // not be subscribed at the broker yet: samples now would be
                // lost. The connection waits for its broker announcement
                // (the table retries).
                if !self.0.heard_endpoints.lock().contains(&req.reader) {
                    return Err(unreachable(
                        "the reader is not announced through the broker yet",
                    ));
                }
                let w = self
                    .0
                    .writers
                    .lock()
                    .get(&req.writer)
                    .and_then(Weak::upgrade)
                    .ok_or_else(|| unreachable("the topic is not cloud-scope on this side"))?;
                Ok(Arc::new(link::ReaderView::new(w, req.reader)))
            }
        }
    }
}
