//! The MQTT session: the `ferry-mqtt` thread that connects, reads and
//! acknowledges, keeps the connection alive and reconnects, and `pump`,
//! which writes queued messages from whichever thread has the session.
//!
//! A publish writes its packet on the publishing thread (`Broker::send` →
//! `pump` → `Wire::write`); nothing wakes the `ferry-mqtt` thread unless the
//! socket could not take the packet at once. The thread reads a batch of
//! packets, hands samples to readers (callbacks run here), then writes the
//! acknowledgements — together with whatever the callbacks published — in
//! one system call.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ferry_wire::ParticipantId;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use rumqttc::v5::mqttbytes::v5::{
    ConnAck, Connect, ConnectProperties, ConnectReturnCode, Disconnect, DisconnectReasonCode,
    Filter, LastWill, Login, Packet, PubAck, PubAckReason, PubComp, PubRec, PubRecReason, PubRel,
    Publish, Subscribe, SubscribeReasonCode, Unsubscribe,
};
use rumqttc::v5::mqttbytes::QoS;

use super::outbox::{Outbox, Resend};
use super::wire::{packet_kind, PacketReader, Wire};
use super::Broker;
use ferry_transport::config::mqtt::MqttConfig;

const SOCK: Token = Token(0);
/// The waker's token (`Broker::waker`).
pub(super) const WAKE: Token = Token(1);
/// Writers stop adding samples while this much waits for the socket.
const HIGH_WATER: usize = 1 << 20;
/// Reads per wake-up before timers and writes get a turn.
const READ_BUDGET: usize = 16;
/// Longest a reconnected runtime holds its messages for a broker that lost
/// its session: its peers reconnect within their backoff (at most 5 s,
/// +20 % jitter) and subscribe again.
const RESUBSCRIBE_GRACE: Duration = Duration::from_secs(7);

/// A broker that lost this runtime's session (it restarted, and brokers
/// like ferry's own keep sessions in memory) lost everyone's subscriptions
/// too: what is published before the subscribers are back is acknowledged
/// and dropped. So when ferry peers had been heard through the broker, what
/// was queued or in flight waits until each has announced itself again (it
/// subscribes before it announces, on the same connection) or the grace
/// period ends. (Without such peers nothing waits: plain MQTT subscribers
/// cannot be told apart from none.)
pub(crate) struct Hold {
    until: Instant,
    /// Peers heard through the broker before, not yet heard again.
    awaiting: HashSet<ParticipantId>,
}

impl Hold {
    fn over(&self, now: Instant) -> bool {
        now >= self.until || self.awaiting.is_empty()
    }
}

/// The outgoing queue and the live connection (under `Broker::session`).
pub(crate) struct Session {
    pub out: Outbox,
    wire: Option<Arc<Wire>>,
    /// Encoding buffer.
    buf: BytesMut,
    /// The broker's Maximum Packet Size.
    pub(super) max_out: Option<u32>,
    /// Messages wait for the subscribers of a restarted broker.
    pub(super) hold: Option<Hold>,
}

impl Session {
    pub fn new(queue_bytes: usize) -> Self {
        Session {
            out: Outbox::new(queue_bytes),
            wire: None,
            buf: BytesMut::with_capacity(4096),
            max_out: None,
            hold: None,
        }
    }

    /// Encodes `p` and writes it to the connection, if there is one.
    fn send(&mut self, p: &Packet) -> Sent {
        let Some(wire) = &self.wire else {
            return Sent::Out(0);
        };
        self.buf.clear();
        if let Err(e) = p.write(&mut self.buf, self.max_out) {
            return Sent::TooLarge(e.to_string());
        }
        match wire.write(&self.buf) {
            Ok(backlog) => Sent::Out(backlog),
            Err(_) => Sent::Broken,
        }
    }
}

/// What became of a packet written to the connection.
enum Sent {
    /// Written; the backlog now waiting for the socket, bytes.
    Out(usize),
    /// Larger than the broker accepts (or otherwise unencodable).
    TooLarge(String),
    /// The connection broke: the `ferry-mqtt` thread reconnects.
    Broken,
}

/// The CONNECT of runtime `me`: persistent session, keep-alive, packet size
/// limit, credentials, and — with broker discovery — the last will (an
/// empty announcement: gone).
pub(super) fn connect_packet(
    cfg: &MqttConfig,
    base: &str,
    me: ParticipantId,
    discovery: bool,
) -> Bytes {
    let mut props = ConnectProperties::new();
    props.session_expiry_interval = Some(cfg.session_expiry_s);
    props.max_packet_size = Some(cfg.max_packet_bytes as u32);
    let connect = Connect {
        keep_alive: cfg.keep_alive_s,
        client_id: format!("ferry-{me}"),
        clean_start: false,
        properties: Some(props),
    };
    let will = discovery.then(|| {
        LastWill::new(
            format!("{base}@disc/{me}"),
            Vec::new(),
            QoS::AtLeastOnce,
            false,
            None,
        )
    });
    let login = cfg
        .user
        .as_ref()
        .map(|u| Login::new(u.clone(), cfg.password.clone().unwrap_or_default()));
    let mut buf = BytesMut::new();
    // Sizes are bounded by the config (client id, topic, credentials).
    let _ = Packet::Connect(connect, will, login).write(&mut buf, None);
    buf.freeze()
}

impl Broker {
    /// Writes queued messages while the connection, the broker's window and
    /// the socket's backlog allow.
    pub(super) fn pump(&self, s: &mut Session) {
        if s.wire.is_none() {
            return;
        }
        if let Some(h) = &s.hold {
            if !h.over(Instant::now()) {
                return;
            }
            s.hold = None;
            tracing::info!("MQTT broker {}: sending what was held", self.url);
            self.resend(s);
        }
        let Some(wire) = &s.wire else {
            return;
        };
        let mut sent = Sent::Out(wire.backlog());
        while let Sent::Out(backlog) = sent {
            if backlog >= HIGH_WATER {
                break;
            }
            let Some((pkid, m)) = s.out.take() else {
                break;
            };
            sent = s.send(&publish_packet(pkid, m, false));
            if let Sent::TooLarge(e) = &sent {
                s.out.refused(pkid);
                tracing::warn!("MQTT broker {}: message dropped: {e}", self.url);
                sent = Sent::Out(backlog);
            }
        }
        self.hand_over(s, &sent);
    }

    /// Writes again what was in flight when the last connection ended, in
    /// the order first sent and under the same packet ids.
    fn resend(&self, s: &mut Session) {
        for r in s.out.resend() {
            let p = match r {
                Resend::Publish(pkid, m) => publish_packet(pkid, m, true),
                Resend::Release(pkid) => Packet::PubRel(PubRel::new(pkid, None)),
            };
            s.send(&p);
        }
    }

    /// While a hold lasts, announcements go out at once (the peers' holds
    /// end on them): true when `m` was written so.
    pub(super) fn send_if_held(&self, m: &super::outbox::OutMsg) -> bool {
        let mut s = self.session.lock();
        if s.hold.is_none() || s.wire.is_none() {
            return false;
        }
        let sent = s.send(&publish_packet(0, m.clone(), false));
        self.hand_over(&s, &sent);
        true
    }

    /// A peer announced itself through the broker: a hold may end.
    pub(super) fn heard_again(&self, p: ParticipantId) {
        let mut s = self.session.lock();
        let Some(h) = &mut s.hold else {
            return;
        };
        h.awaiting.remove(&p);
        self.pump(&mut s);
    }

    /// After a write from another thread left a backlog or found the
    /// connection broken, the `ferry-mqtt` thread takes over.
    fn hand_over(&self, s: &Session, sent: &Sent) {
        let foreign = s.wire.as_ref().is_some_and(|w| !w.mine());
        if foreign && matches!(sent, Sent::Out(1..) | Sent::Broken) {
            let _ = self.waker.wake();
        }
    }

    /// One SUBSCRIBE for `filters` (when connected; every connection
    /// subscribes to everything anew).
    pub(super) fn write_subscribe(&self, s: &mut Session, filters: Vec<Filter>) {
        if s.wire.is_none() || filters.is_empty() {
            return;
        }
        let Some(pkid) = s.out.control_pkid() else {
            tracing::warn!("MQTT broker {}: no packet id free to subscribe", self.url);
            return;
        };
        let mut p = Subscribe::new_many(filters, None);
        p.pkid = pkid;
        let sent = s.send(&Packet::Subscribe(p));
        if let Sent::TooLarge(e) = &sent {
            tracing::warn!("MQTT broker {}: SUBSCRIBE not sent: {e}", self.url);
        }
        self.hand_over(s, &sent);
    }

    /// One UNSUBSCRIBE for `topics` (when connected).
    pub(super) fn write_unsubscribe(&self, s: &mut Session, topics: Vec<String>) {
        if s.wire.is_none() {
            return;
        }
        let Some(pkid) = s.out.control_pkid() else {
            return;
        };
        let p = Unsubscribe {
            pkid,
            filters: topics,
            properties: None,
        };
        let sent = s.send(&Packet::Unsubscribe(p));
        self.hand_over(s, &sent);
    }

    /// A clean DISCONNECT (the broker then does not send the last will).
    pub(super) fn write_disconnect(&self, s: &mut Session) {
        let sent = s.send(&Packet::Disconnect(Disconnect::new(
            DisconnectReasonCode::NormalDisconnection,
        )));
        self.hand_over(s, &sent);
    }

    /// The `ferry-mqtt` thread: connect, serve, reconnect with backoff
    /// (100 ms doubling to 5 s, ±20 % jitter; at once after a connection
    /// that lasted a second or more) until `shutdown`.
    pub(super) fn run(&self, mut poll: Poll) {
        let owner = super::wire::serve_here(self);
        let mut events = Events::with_capacity(64);
        let mut backoff = Duration::from_millis(100);
        let mut rng = self.me.0 | 1;
        while !self.closing.load(Ordering::SeqCst) {
            let why = match Wire::dial(&self.dial, &self.connect, owner) {
                Ok((wire, ack, reader)) => match refused(&ack) {
                    None => {
                        let since = Instant::now();
                        match self.serve(&mut poll, &mut events, wire, &ack, reader) {
                            Ok(()) => break,
                            // A broker that drops every connection at once
                            // gets the backoff, not a reconnect loop.
                            Err(why) if since.elapsed() < Duration::from_secs(1) => why,
                            Err(why) => {
                                backoff = Duration::from_millis(100);
                                self.on_failure(why);
                                continue;
                            }
                        }
                    }
                    Some(why) => {
                        tracing::error!("MQTT broker {}: {why}", self.url);
                        why
                    }
                },
                Err(why) => why,
            };
            self.on_failure(why);
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let jitter = 0.8 + (rng % 400) as f64 / 1000.0;
            let until = Instant::now() + backoff.mul_f64(jitter);
            while !self.closing.load(Ordering::SeqCst) {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                let _ = poll.poll(&mut events, Some(left));
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        self.set_connected(false);
    }

    /// One connection's life: resend what was in flight, subscribe, then
    /// read and keep alive until it breaks (`Err`) or shutdown (`Ok`).
    fn serve(
        &self,
        poll: &mut Poll,
        events: &mut Events,
        wire: Wire,
        ack: &ConnAck,
        mut reader: PacketReader,
    ) -> Result<(), String> {
        let fd = wire.fd();
        poll.registry()
            .register(&mut SourceFd(&fd), SOCK, Interest::READABLE)
            .map_err(|e| format!("poll: {e}"))?;
        let wire = Arc::new(wire);
        let props = ack.properties.as_ref();
        let keep_alive = props
            .and_then(|p| p.server_keep_alive)
            .map_or(self.keep_alive, |s| {
                Duration::from_secs(u64::from(s).max(1))
            });
        // Read before the session lock: `Broker::state` takes `state` then
        // `session`, so nothing may take them the other way round (it did
        // here, and a test hung in CI).
        let reconnect = self.state.lock().connects > 0;
        let awaiting = self.heard.lock().clone();
        {
            let mut s = self.session.lock();
            s.out
                .set_window(props.and_then(|p| p.receive_max).unwrap_or(u16::MAX));
            s.max_out = props.and_then(|p| p.max_packet_size);
            s.wire = Some(wire.clone());
            // A broker that lost our session (a restart) lost the others'
            // subscriptions too: hold what we have until they are back.
            if reconnect && !ack.session_present && !awaiting.is_empty() {
                tracing::info!(
                    "MQTT broker {}: it lost this runtime's session (restarted?); queued \
                     messages wait until {} peer(s) announce themselves again, at most {:?}",
                    self.url,
                    awaiting.len(),
                    RESUBSCRIBE_GRACE
                );
                s.hold = Some(Hold {
                    until: Instant::now() + RESUBSCRIBE_GRACE,
                    awaiting,
                });
            } else {
                s.hold = None;
                self.resend(&mut s);
            }
            let mut filters = vec![
                Filter::new(format!("{}@req/{}/+", self.base, self.me), QoS::AtLeastOnce),
                Filter::new(format!("{}@rep/{}/+", self.base, self.me), QoS::AtLeastOnce),
                Filter::new(
                    format!("{}@hist/{}/+", self.base, self.me),
                    QoS::AtLeastOnce,
                ),
            ];
            if self.discovery {
                filters.push(Filter::new(
                    format!("{}@disc/+", self.base),
                    QoS::AtLeastOnce,
                ));
            }
            filters.extend(
                self.subs
                    .lock()
                    .data
                    .keys()
                    .cloned()
                    .map(super::data_filter),
            );
            self.write_subscribe(&mut s, filters);
            self.pump(&mut s);
        }
        self.on_linked(ack.session_present);
        if let Some(rt) = self.runtime() {
            rt.announce_soon();
        }
        let r = self.serve_loop(poll, events, &wire, &mut reader, keep_alive);
        let _ = poll.registry().deregister(&mut SourceFd(&fd));
        self.session.lock().wire = None;
        r
    }

    fn serve_loop(
        &self,
        poll: &mut Poll,
        events: &mut Events,
        wire: &Wire,
        reader: &mut PacketReader,
        keep_alive: Duration,
    ) -> Result<(), String> {
        let fd = wire.fd();
        let mut watching_writes = false;
        // A PINGREQ every keep-alive, whatever else flows: a broker that
        // went silent is noticed even while this side keeps sending.
        let mut next_ping = Instant::now() + keep_alive;
        let mut ping: Option<Instant> = None;
        let mut more = true; // bytes may wait (the CONNACK's batch)
        let mut acks = BytesMut::with_capacity(256);
        loop {
            self.policy.apply_if_raised("ferry-mqtt");
            let timeout = if more {
                Duration::ZERO
            } else {
                let t = match ping {
                    Some(t) => keep_alive.saturating_sub(t.elapsed()),
                    None => next_ping.saturating_duration_since(Instant::now()),
                };
                // A hold ends by time too.
                match &self.session.lock().hold {
                    Some(h) => t.min(h.until.saturating_duration_since(Instant::now())),
                    None => t,
                }
            };
            if let Err(e) = poll.poll(events, Some(timeout)) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(format!("poll: {e}"));
                }
            }
            if self.closing.load(Ordering::SeqCst) {
                let _ = wire.flush();
                return Ok(());
            }
            let readable = more
                || events
                    .iter()
                    .any(|e| e.token() == SOCK && (e.is_readable() || e.is_read_closed()));
            more = false;
            if readable {
                let mut budget = READ_BUDGET;
                loop {
                    let got = wire.read(reader).map_err(|e| lost(&e))?;
                    self.handle_batch(wire, reader, &mut ping, &mut acks)?;
                    if !got {
                        break;
                    }
                    budget -= 1;
                    if budget == 0 {
                        more = true;
                        break;
                    }
                }
            }
            let all_out = wire.flush().map_err(|e| lost(&e))?;
            if all_out {
                self.pump(&mut self.session.lock());
            }
            let want = wire.backlog() > 0;
            if want != watching_writes {
                let interest = if want {
                    Interest::READABLE | Interest::WRITABLE
                } else {
                    Interest::READABLE
                };
                poll.registry()
                    .reregister(&mut SourceFd(&fd), SOCK, interest)
                    .map_err(|e| format!("poll: {e}"))?;
                watching_writes = want;
            }
            match ping {
                Some(t) if t.elapsed() >= keep_alive => {
                    return Err("no PINGRESP within the keep-alive".into());
                }
                None if Instant::now() >= next_ping => {
                    acks.clear();
                    let _ =
                        Packet::PingReq(rumqttc::v5::mqttbytes::v5::PingReq).write(&mut acks, None);
                    wire.write(&acks).map_err(|e| lost(&e))?;
                    let now = Instant::now();
                    ping = Some(now);
                    next_ping = now + keep_alive;
                }
                _ => {}
            }
        }
    }

    /// Handles every complete packet the reader holds, then writes the
    /// acknowledgements (and what callbacks published meanwhile) at once.
    fn handle_batch(
        &self,
        wire: &Wire,
        reader: &mut PacketReader,
        ping: &mut Option<Instant>,
        acks: &mut BytesMut,
    ) -> Result<(), String> {
        wire.cork();
        acks.clear();
        let r = (|| {
            while let Some(p) = reader.next().map_err(|e| e.to_string())? {
                self.on_packet(p, ping, acks)?;
            }
            Ok(())
        })();
        if !acks.is_empty() {
            let _ = wire.write(acks);
        }
        wire.uncork().map_err(|e| lost(&e))?;
        r
    }

    fn on_packet(
        &self,
        p: Packet,
        ping: &mut Option<Instant>,
        acks: &mut BytesMut,
    ) -> Result<(), String> {
        let ack = |p: Packet, acks: &mut BytesMut| {
            let _ = p.write(acks, None);
        };
        match p {
            Packet::Publish(p) => {
                let (qos, pkid) = (p.qos, p.pkid);
                self.dispatch(p);
                match qos {
                    QoS::AtLeastOnce => ack(Packet::PubAck(PubAck::new(pkid, None)), acks),
                    QoS::ExactlyOnce => ack(Packet::PubRec(PubRec::new(pkid, None)), acks),
                    QoS::AtMostOnce => {}
                }
            }
            Packet::PubAck(a) => {
                if a.reason != PubAckReason::Success
                    && a.reason != PubAckReason::NoMatchingSubscribers
                {
                    tracing::warn!("MQTT broker {}: publish refused: {:?}", self.url, a.reason);
                }
                self.acked(a.pkid);
            }
            Packet::PubRec(r) => {
                if matches!(
                    r.reason,
                    PubRecReason::Success | PubRecReason::NoMatchingSubscribers
                ) {
                    self.session.lock().out.received(r.pkid);
                    ack(Packet::PubRel(PubRel::new(r.pkid, None)), acks);
                } else {
                    tracing::warn!("MQTT broker {}: publish refused: {:?}", self.url, r.reason);
                    self.acked(r.pkid);
                }
            }
            Packet::PubRel(r) => ack(Packet::PubComp(PubComp::new(r.pkid, None)), acks),
            Packet::PubComp(c) => self.acked(c.pkid),
            Packet::SubAck(a) => {
                self.session.lock().out.control_done(a.pkid);
                let refused: Vec<_> = a
                    .return_codes
                    .iter()
                    .filter(|c| !matches!(c, SubscribeReasonCode::Success(_)))
                    .collect();
                if !refused.is_empty() {
                    tracing::warn!(
                        "MQTT broker {}: subscriptions refused: {refused:?}",
                        self.url
                    );
                }
            }
            Packet::UnsubAck(a) => self.session.lock().out.control_done(a.pkid),
            Packet::PingResp(_) => *ping = None,
            Packet::Disconnect(d) => {
                return Err(format!("the broker disconnected: {:?}", d.reason_code));
            }
            other => {
                return Err(format!(
                    "protocol error: the broker sent a {:?} packet",
                    packet_kind(&other)
                ));
            }
        }
        Ok(())
    }

    /// The broker has `pkid`: room for more.
    fn acked(&self, pkid: u16) {
        let mut s = self.session.lock();
        s.out.acked(pkid);
        self.pump(&mut s);
        drop(s);
        self.room.notify_all();
    }

    fn on_linked(&self, session_present: bool) {
        {
            let mut st = self.state.lock();
            st.connects += 1;
            if st.connects > 1 {
                tracing::info!(
                    "MQTT broker {}: reconnected (session {})",
                    self.url,
                    if session_present { "resumed" } else { "new" }
                );
            }
        }
        self.set_connected(true);
    }

    pub(super) fn set_connected(&self, c: bool) {
        self.connected.store(c, Ordering::Relaxed);
        self.state.lock().connected = c;
        self.linked.notify_all();
    }

    fn on_failure(&self, why: String) {
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
    }
}

/// The PUBLISH of queued message `m` under `pkid` (0 for QoS 0).
fn publish_packet(pkid: u16, m: super::outbox::OutMsg, dup: bool) -> Packet {
    Packet::Publish(Publish {
        dup,
        qos: m.qos,
        retain: m.retain,
        topic: m.topic,
        pkid,
        payload: m.payload,
        properties: m.meta.properties(),
    })
}

/// Why the broker refused the connection, if it did.
fn refused(ack: &ConnAck) -> Option<String> {
    (ack.code != ConnectReturnCode::Success)
        .then(|| format!("broker refused the connection: {:?}", ack.code))
}

fn lost(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "the broker closed the connection".into(),
        _ => format!("connection lost: {e}"),
    }
}
