//! MQTT as one more path of the same ports, not a bridge.
//!
//! One [`Broker`] connection per runtime (the `[mqtt]` section), run by one
//! `ferry-mqtt` thread over rumqttc (MQTT 5). What goes through it:
//!
//! | MQTT topic | payload | what |
//! |---|---|---|
//! | `<prefix>/<domain>/<name>` | CDR (or JSON) | samples of cloud-scope topics |
//! | `<prefix>/<domain>/@disc/<participant>` | discovery beacon | announcements; empty = gone (last will) |
//! | `<prefix>/<domain>/@req/<participant>/<entity>` | CDR request | service requests |
//! | `<prefix>/<domain>/@rep/<participant>/<entity>` | CDR reply | replies to one client |
//!
//! Ferry names are `/a/b`; the topic is the name without its leading `/`
//! (`/robot1/odom` in domain 0 → `ferry/0/robot1/odom`). Metadata travels as
//! MQTT 5 properties, so plain clients see a clean payload: one user
//! property `ferry` = `<writer> <seq> <source time ns> <type>` and the
//! content type `application/cdr` or `application/json` ([`meta`]).
//!
//! **No duplicates:** a cloud-scope writer publishes each sample to the
//! broker once. A reader drops a broker sample from writer W while it has a
//! connection from W on another path (shared memory, UDP, …), and any
//! sample whose sequence number it already delivered (QoS 1 redeliveries,
//! resends after a reconnect). A sample without `ferry` comes from a
//! plain MQTT client: delivered if it decodes, counted as an error if not.

mod link;
mod meta;
pub(crate) mod outbox;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_wire::frame::FrameKind;
use ferry_wire::{EndpointId, EndpointKind, Locator, ParticipantId, TransportKind};
use parking_lot::{Condvar, Mutex};
use rumqttc::v5::mqttbytes::v5::{Filter, Packet, Publish};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, EventLoop, MqttOptions};
use rumqttc::Outgoing;
use tokio::sync::Notify;

use self::meta::{parse_endpoint, user_prop, Meta, SampleMeta};
use self::outbox::{OutMsg, Outbox};
use super::{
    Capabilities, ConnectError, ConnectRequest, InFrame, InboundConn, Link, PeerInfo, SendError,
    Transport,
};
use crate::config::mqtt::{BrokerUrl, MqttConfig, OnUnreachable};
use crate::error::BuildError;
use crate::message::Payload;
use crate::runtime::Shared;
use crate::stats::ConnStats;

pub(crate) use link::WriterLink;

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
}

/// Most (reader, writer) pairs with a broker connection, and whose last
/// sequence number is remembered after the writer left (a broker restart
/// can make it leave and return).
const MAX_SEEN: usize = 16_384;

#[derive(Default)]
struct Subs {
    /// MQTT topic → (ferry topic, local readers).
    data: HashMap<String, Vec<EndpointId>>,
}

#[derive(Default)]
struct LinkState {
    connected: bool,
    connects: u64,
    failures: u64,
    last_error: Option<String>,
}

/// A runtime's connection to its MQTT broker.
pub(crate) struct Broker {
    me: ParticipantId,
    /// `<prefix>/<domain>/`.
    base: String,
    /// `<base>@disc/<me>`: this runtime's announcements.
    disc_topic: Arc<str>,
    url: String,
    /// Requests to the client's event loop. Publications go through `out`
    /// and are handed to it by the `ferry-mqtt` thread only.
    client: AsyncClient,
    out: Mutex<Outbox>,
    room: Condvar,
    /// Nudges the `ferry-mqtt` thread: something was queued, or shutdown.
    wake: Notify,
    /// The `ferry-mqtt` thread (it drains `out` after every event itself).
    thread: OnceLock<std::thread::ThreadId>,
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
    writers: Mutex<HashMap<EndpointId, Weak<WriterLink>>>,
    clients: Mutex<HashMap<u32, Weak<dyn super::ReplySink>>>,
    duplicates: AtomicU64,
    garbage: AtomicU64,
    rt: OnceLock<Weak<Shared>>,
    /// `shutdown` was called (once).
    stop: AtomicBool,
    /// The DISCONNECT is requested: the thread ends once it is written.
    closing: AtomicBool,
    done: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    keep_all_block: Duration,
}

impl Broker {
    /// Connects (starting the embedded broker for `mqtt://embedded`) and
    /// starts the `ferry-mqtt` thread. With `on_unreachable = "fail"`, waits
    /// for the first connection and fails if it does not come.
    pub fn start(
        cfg: &MqttConfig,
        domain: u16,
        me: ParticipantId,
        keep_all_block: Duration,
    ) -> Result<Arc<Broker>, BuildError> {
        let (host, port) = match &cfg.broker {
            BrokerUrl::Embedded { port } => embedded(*port, cfg.max_packet_bytes)?,
            BrokerUrl::Tcp { host, port } | BrokerUrl::Tls { host, port } => (host.clone(), *port),
        };
        let base = format!("{}/{}/", cfg.prefix, domain);
        let mut opts = MqttOptions::new(format!("ferry-{me}"), host, port);
        opts.set_keep_alive(Duration::from_secs(u64::from(cfg.keep_alive_s)))
            .set_clean_start(false)
            .set_session_expiry_interval(Some(cfg.session_expiry_s))
            .set_max_packet_size(Some(cfg.max_packet_bytes as u32))
            .set_request_channel_capacity(64)
            .set_connection_timeout(cfg.connect_timeout_ms.div_ceil(1000).max(1));
        if let Some(u) = &cfg.user {
            opts.set_credentials(u.clone(), cfg.password.clone().unwrap_or_default());
        }
        // Liveliness: if this runtime vanishes without a goodbye, the broker
        // tells every other site with an empty announcement.
        opts.set_last_will(rumqttc::v5::mqttbytes::v5::LastWill::new(
            format!("{base}@disc/{me}"),
            Bytes::new(),
            QoS::AtLeastOnce,
            false,
            None,
        ));
        if let BrokerUrl::Tls { .. } = &cfg.broker {
            opts.set_transport(tls_transport(cfg)?);
        }
        let mut net = rumqttc::NetworkOptions::new();
        net.set_tcp_nodelay(true);
        net.set_connection_timeout(cfg.connect_timeout_ms.div_ceil(1000).max(1));
        opts.set_network_options(net);
        let (client, eventloop) = AsyncClient::new(opts, 64);
        let io = |source| BuildError::Io {
            what: "MQTT thread".into(),
            source,
        };
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io)?;
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let b = Arc::new(Broker {
            me,
            disc_topic: format!("{base}@disc/{me}").into(),
            base,
            url: cfg.broker.to_string(),
            client,
            out: Mutex::new(Outbox::new(cfg.offline_queue_bytes)),
            room: Condvar::new(),
            wake: Notify::new(),
            thread: OnceLock::new(),
            state: Mutex::new(LinkState::default()),
            connected: AtomicBool::new(false),
            subs: Mutex::new(Subs::default()),
            rx: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashMap::new()),
            heard: Mutex::new(HashSet::new()),
            writers: Mutex::new(HashMap::new()),
            clients: Mutex::new(HashMap::new()),
            duplicates: AtomicU64::new(0),
            garbage: AtomicU64::new(0),
            rt: OnceLock::new(),
            stop: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            done: Mutex::new(Some(done_rx)),
            keep_all_block,
        });
        let b2 = b.clone();
        std::thread::Builder::new()
            .name("ferry-mqtt".into())
            .spawn(move || {
                let _ = b2.thread.set(std::thread::current().id());
                tokio.block_on(b2.drive(eventloop));
                b2.set_connected(false);
                let _ = done_tx.send(());
            })
            .map_err(io)?;
        if cfg.on_unreachable == OnUnreachable::Fail {
            let until = Instant::now() + Duration::from_millis(cfg.connect_timeout_ms);
            let mut st = b.state.lock();
            while !st.connected && Instant::now() < until {
                b.room.wait_until(&mut st, until);
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

    /// Lets the connection reach its runtime (discovery, readers).
    pub fn bind(&self, rt: Weak<Shared>) {
        let _ = self.rt.set(rt);
    }

    fn runtime(&self) -> Option<Arc<Shared>> {
        self.rt.get().and_then(Weak::upgrade)
    }

    /// The MQTT topic of ferry topic `name`.
    pub fn data_topic(&self, name: &str) -> String {
        format!("{}{}", self.base, name.trim_start_matches('/'))
    }

    /// Connection state and counters.
    pub fn state(&self) -> BrokerState {
        let st = self.state.lock();
        let out = self.out.lock();
        BrokerState {
            url: self.url.clone(),
            connected: st.connected,
            connects: st.connects,
            failures: st.failures,
            last_error: st.last_error.clone(),
            queued: out.len(),
            queued_bytes: out.bytes(),
            dropped: out.dropped,
            duplicates: self.duplicates.load(Ordering::Relaxed),
            garbage: self.garbage.load(Ordering::Relaxed),
        }
    }

    /// Whether `p`'s announcements come through the broker.
    pub fn heard(&self, p: ParticipantId) -> bool {
        self.heard.lock().contains(&p)
    }

    /// A participant left: its broker connections end.
    pub fn forget(&self, p: ParticipantId) {
        self.heard.lock().remove(&p);
        let mut gone = Vec::new();
        self.rx.lock().retain(|&(r, w), _| {
            let keep = w.participant != p;
            if !keep {
                gone.push((r, w));
            }
            keep
        });
        for (r, w) in gone {
            if let Some(inbox) = super::intra::lookup_reader(r) {
                inbox.detach(w);
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
        let _ = self.send(m, None);
    }

    /// A local reader of cloud-scope `topic`.
    pub fn subscribe(&self, topic: &str, reader: EndpointId) {
        let t = self.data_topic(topic);
        let first = {
            let mut s = self.subs.lock();
            let v = s.data.entry(t.clone()).or_default();
            v.push(reader);
            v.len() == 1
        };
        if first && self.connected.load(Ordering::Relaxed) {
            let _ = self
                .client
                .try_subscribe_many(std::iter::once(data_filter(t)));
        }
    }

    /// The local reader is gone.
    pub fn unsubscribe(&self, reader: EndpointId) {
        let mut s = self.subs.lock();
        let mut empty = Vec::new();
        for (t, v) in s.data.iter_mut() {
            v.retain(|r| *r != reader);
            if v.is_empty() {
                empty.push(t.clone());
            }
        }
        for t in empty {
            s.data.remove(&t);
            let _ = self.client.try_unsubscribe(t);
        }
        drop(s);
        self.rx.lock().retain(|(r, _), _| *r != reader);
        self.seen.lock().retain(|(r, _), _| *r != reader);
    }

    /// Hands `m` to the MQTT client without waiting; false when its queue
    /// is full (or it is gone). Only the `ferry-mqtt` thread hands.
    fn hand(&self, m: &OutMsg) -> bool {
        let topic = String::from(&*m.topic);
        let payload = m.payload.clone();
        match m.meta.properties() {
            Some(p) => self
                .client
                .try_publish_with_properties(topic, m.qos, m.retain, payload, p),
            None => self.client.try_publish(topic, m.qos, m.retain, payload),
        }
        .is_ok()
    }

    /// Queues `m` for the broker and nudges the `ferry-mqtt` thread, which
    /// hands it to the client — after this thread let go of every lock, so
    /// the nudged thread never waits for the one that woke it. Blocks up to
    /// `block` while the queue is full of messages that may not be dropped.
    fn send(&self, m: OutMsg, block: Option<Duration>) -> Result<(), SendError> {
        let mut out = self.out.lock();
        let mut m = m;
        let deadline = block.map(|d| Instant::now() + d);
        loop {
            match out.push(m) {
                Ok(()) => break,
                Err(back) => match deadline {
                    Some(t) if Instant::now() < t => {
                        m = back;
                        self.room.wait_until(&mut out, t);
                    }
                    _ => return Err(SendError::Blocked(block.unwrap_or_default())),
                },
            }
        }
        drop(out);
        // The thread itself drains after the event it is handling.
        if self.thread.get() != Some(&std::thread::current().id()) {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Hands queued messages to the client while it takes them.
    fn drain(&self) {
        if !self.connected.load(Ordering::Relaxed) {
            return;
        }
        let mut out = self.out.lock();
        while let Some(m) = out.front() {
            if !self.hand(m) {
                break;
            }
            out.handed_front();
        }
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
            && self.out.lock().len() > 0
            && Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.client.try_disconnect();
        self.closing.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        if let Some(rx) = self.done.lock().take() {
            let _ = rx.recv_timeout(Duration::from_secs(3));
        }
    }

    /// The `ferry-mqtt` thread: drives the client's event loop inside one
    /// `block_on` for the thread's life (not one per event), hands queued
    /// messages to it after every event and nudge, and reconnects with
    /// backoff. Ends once the DISCONNECT of `shutdown` is written (or
    /// 500 ms after it was asked for, when there is no connection).
    async fn drive(&self, mut ev: EventLoop) {
        let mut backoff = Duration::from_millis(100);
        let mut rng = self.me.0 | 1;
        loop {
            if self.closing.load(Ordering::SeqCst) {
                return self.finish(&mut ev).await;
            }
            let r = tokio::select! {
                biased;
                () = self.wake.notified() => None,
                r = ev.poll() => Some(r),
            };
            match r {
                None => {}
                Some(Ok(e)) => {
                    if self.on_event(e) {
                        backoff = Duration::from_millis(100);
                    }
                }
                Some(Err(e)) => {
                    self.on_failure(&mut ev, e.to_string());
                    // Exponential backoff with ±20 % jitter; a shutdown
                    // cuts it short.
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let jitter = 0.8 + (rng % 400) as f64 / 1000.0;
                    let until = tokio::time::Instant::now() + backoff.mul_f64(jitter);
                    while !self.closing.load(Ordering::SeqCst) {
                        tokio::select! {
                            biased;
                            () = self.wake.notified() => {}
                            () = tokio::time::sleep_until(until) => break,
                        }
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
            self.drain();
        }
    }

    /// After `shutdown` asked for the DISCONNECT: drives the event loop
    /// until it is written (or the connection fails), 500 ms at most.
    async fn finish(&self, ev: &mut EventLoop) {
        let written = async {
            loop {
                match ev.poll().await {
                    Ok(Event::Outgoing(Outgoing::Disconnect)) | Err(_) => return,
                    Ok(e) => {
                        self.on_event(e);
                    }
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_millis(500), written).await;
    }

    fn set_connected(&self, c: bool) {
        self.connected.store(c, Ordering::Relaxed);
        self.state.lock().connected = c;
        self.room.notify_all();
    }

    fn on_failure(&self, ev: &mut EventLoop, why: String) {
        let was = self.connected.load(Ordering::Relaxed);
        {
            let mut st = self.state.lock();
            st.failures += 1;
            if was || st.last_error.as_deref() != Some(why.as_str()) {
                tracing::warn!("MQTT broker {}: {why}; reconnecting with backoff", self.url);
            }
            st.last_error = Some(why);
        }
        self.set_connected(false);
        // rumqttc moved what it had not finished into its own pending list
        // and would drop it on a new session: ferry's outbox resends it.
        ev.pending.clear();
        self.out.lock().requeue();
    }

    /// Returns true on a successful CONNACK.
    fn on_event(&self, ev: Event) -> bool {
        match ev {
            Event::Incoming(Packet::ConnAck(ack)) => {
                use rumqttc::v5::mqttbytes::v5::ConnectReturnCode;
                if ack.code != ConnectReturnCode::Success {
                    let mut st = self.state.lock();
                    st.failures += 1;
                    let why = format!("broker refused the connection: {:?}", ack.code);
                    tracing::error!("MQTT broker {}: {why}", self.url);
                    st.last_error = Some(why);
                    return false;
                }
                {
                    let mut st = self.state.lock();
                    st.connects += 1;
                    if st.connects > 1 {
                        tracing::info!(
                            "MQTT broker {}: reconnected (session {})",
                            self.url,
                            if ack.session_present {
                                "resumed"
                            } else {
                                "new"
                            }
                        );
                    }
                }
                self.set_connected(true);
                // Subscriptions are not restored by the client: always
                // subscribe again (harmless on a resumed session).
                let mut filters = vec![
                    Filter::new(format!("{}@disc/+", self.base), QoS::AtLeastOnce),
                    Filter::new(format!("{}@req/{}/+", self.base, self.me), QoS::AtLeastOnce),
                    Filter::new(format!("{}@rep/{}/+", self.base, self.me), QoS::AtLeastOnce),
                ];
                filters.extend(self.subs.lock().data.keys().cloned().map(data_filter));
                let _ = self.client.try_subscribe_many(filters);
                if let Some(rt) = self.runtime() {
                    rt.announce_soon();
                }
                true
            }
            Event::Incoming(Packet::Publish(p)) => {
                self.dispatch(p);
                false
            }
            Event::Incoming(Packet::PubAck(a)) => {
                self.out.lock().acked(a.pkid);
                self.room.notify_all();
                false
            }
            Event::Incoming(Packet::PubComp(c)) => {
                self.out.lock().acked(c.pkid);
                self.room.notify_all();
                false
            }
            Event::Outgoing(Outgoing::Publish(pkid)) => {
                self.out.lock().written(pkid);
                self.room.notify_all();
                false
            }
            _ => false,
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
        let bye;
        let bytes = if payload.is_empty() {
            // The last will of a runtime that vanished: a goodbye.
            bye = ferry_wire::beacon::Beacon {
                domain: rt.cfg.domain_id,
                participant: pid,
                body: ferry_wire::beacon::BeaconBody::Bye,
            }
            .encode();
            &bye[..]
        } else {
            payload
        };
        let from = SocketAddr::from(([0, 0, 0, 0], 0));
        let r = rt.core.lock().discovery.handle_datagram(
            Instant::now(),
            from,
            ferry_discovery::Via::Broker,
            bytes,
        );
        match r {
            Ok(()) if !payload.is_empty() => {
                self.heard.lock().insert(pid);
            }
            Ok(()) => {}
            Err(e) => {
                self.garbage.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("broker announcement from {who} ignored: {e}");
            }
        }
        rt.io.kick();
    }

    /// The inbound connection of `reader` from `writer` over the broker.
    fn rx_conn(
        &self,
        reader: EndpointId,
        writer: EndpointId,
        replier: impl FnOnce() -> Option<Arc<dyn super::Replier>>,
    ) -> Option<(Arc<dyn super::Inbox>, Arc<InboundConn>)> {
        let inbox = super::intra::lookup_reader(reader)?;
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
                transport: TransportKind::Mqtt,
                locator: self.url.clone(),
                stats: Arc::new(ConnStats::new()),
                replier: replier(),
                same_clock,
                first_seq: Default::default(),
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
        let (writer, seq, stamp) = match SampleMeta::read(&p.properties) {
            Ok(Some(m)) => (m.writer, Some(m.seq), m.stamp_ns),
            Ok(None) => (FOREIGN_WRITER, None, 0),
            Err(()) => {
                self.garbage.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        if writer.participant == self.me {
            return; // our own sample: local readers had it in-process
        }
        for reader in readers {
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
                let direct = inbox.direct_from(writer);
                if writer != FOREIGN_WRITER && (seq <= *last || direct.is_some_and(|f| seq >= f)) {
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
            let reply_to: Arc<str> = pr.response_topic.as_deref()?.into();
            let id: [u8; 8] = pr.correlation_data.as_ref()?.as_ref().try_into().ok()?;
            Some((service, client, reply_to, u64::from_le_bytes(id)))
        })();
        let Some((service, client, reply_to, request_id)) = parsed else {
            self.garbage.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let me = self.runtime().and_then(|rt| rt.mqtt.clone());
        let Some((inbox, conn)) = self.rx_conn(service, client, || {
            me.map(|b| {
                Arc::new(link::Replier {
                    broker: Arc::downgrade(&b),
                    topic: reply_to,
                }) as Arc<dyn super::Replier>
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
pub(crate) fn writer_link<T: crate::message::Codec>(
    b: &Arc<Broker>,
    cfg: &crate::config::Config,
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
            topic: b.data_topic(topic).into(),
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
    inbox: &dyn super::Inbox,
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

/// TLS to the broker: rustls (ring), trusting `ca_file` or the system's roots.
#[cfg(feature = "mqtt-tls")]
fn tls_transport(cfg: &MqttConfig) -> Result<rumqttc::Transport, BuildError> {
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
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| fail(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(rumqttc::Transport::tls_with_config(
        rumqttc::TlsConfiguration::Rustls(Arc::new(tls)),
    ))
}

#[cfg(not(feature = "mqtt-tls"))]
fn tls_transport(cfg: &MqttConfig) -> Result<rumqttc::Transport, BuildError> {
    Err(BuildError::Broker {
        url: cfg.broker.to_string(),
        why: "ferry was built without the `mqtt-tls` feature".into(),
    })
}

/// Starts (or reuses) this process's embedded broker on `port`.
#[cfg(feature = "embedded-broker")]
fn embedded(port: u16, max_packet: usize) -> Result<(String, u16), BuildError> {
    let b = ferry_broker::EmbeddedBroker::start(&ferry_broker::BrokerConfig {
        listen: SocketAddr::from(([0, 0, 0, 0], port)),
        listen_v311: None,
        max_payload: max_packet,
        users: None,
    })
    .map_err(|e| BuildError::Broker {
        url: format!("mqtt://embedded:{port}"),
        why: e.to_string(),
    })?;
    Ok(("127.0.0.1".into(), b.local_addr().port()))
}

#[cfg(not(feature = "embedded-broker"))]
fn embedded(port: u16, _max_packet: usize) -> Result<(String, u16), BuildError> {
    Err(BuildError::Broker {
        url: format!("mqtt://embedded:{port}"),
        why: "ferry was built without the `embedded-broker` feature".into(),
    })
}

/// The MQTT transport: carries service calls to runtimes reachable only
/// through the broker; samples of cloud-scope topics travel on each
/// writer's one [`WriterLink`].
pub(crate) struct MqttTransport(pub Arc<Broker>);

impl Transport for MqttTransport {
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
