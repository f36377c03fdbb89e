//! The writer's ends over the broker: one [`WriterLink`] per cloud-scope
//! publisher, a [`ReaderView`] per remote reader it serves that way, a
//! [`ClientLink`] per service client, and the service's [`Replier`].

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use ferry_wire::{EndpointId, ParticipantId, TransportKind};
use parking_lot::Mutex;
use rumqttc::v5::mqttbytes::QoS;

use super::meta::Meta;
use super::outbox::OutMsg;
use super::Broker;
use ferry_transport::config::mqtt::Encoding;
use ferry_transport::error::EncodeError;
use ferry_transport::priority::{Applied, Packets, Priority, PriorityError};
use ferry_transport::stats::ConnStats;
use ferry_transport::transport::{Link, OutFrame, ReplyBody, SendError};

/// The remote end of a writer's broker link: the broker itself.
pub const BROKER_ENDPOINT: EndpointId = EndpointId {
    participant: ParticipantId(0),
    entity: u32::MAX,
};

/// Encodes the writer's typed value as JSON (built where the type is known).
pub(crate) type JsonEncoder =
    Box<dyn Fn(&Arc<dyn Any + Send + Sync>) -> Option<Result<Bytes, EncodeError>> + Send + Sync>;

/// How a writer's samples go to the broker.
pub(crate) struct WriterSettings {
    pub topic: Bytes,
    pub qos: QoS,
    /// Best effort or keep_last: may be dropped when the queue is full.
    pub droppable: bool,
    /// keep_all + reliable: block up to this, then fail.
    pub block: Option<Duration>,
    pub type_name: Arc<str>,
    pub encoding: Encoding,
    pub json: Option<JsonEncoder>,
}

/// A cloud-scope writer's one link to the broker: every sample once.
pub struct WriterLink {
    broker: Arc<Broker>,
    writer: EndpointId,
    /// `writer` as its metadata names it (formatted once, not per sample).
    writer_text: Arc<str>,
    set: WriterSettings,
    stats: Arc<ConnStats>,
    priority: Mutex<Priority>,
    closed: AtomicBool,
}

impl WriterLink {
    /// Creates the link and registers it, so pairs with readers reachable
    /// only through the broker can be served by it.
    pub(crate) fn new(
        broker: Arc<Broker>,
        writer: EndpointId,
        set: WriterSettings,
    ) -> Arc<WriterLink> {
        let l = Arc::new(WriterLink {
            broker: broker.clone(),
            writer,
            writer_text: writer.to_string().into(),
            set,
            stats: Arc::new(ConnStats::new()),
            priority: Mutex::new(Priority::default()),
            closed: AtomicBool::new(false),
        });
        broker.writers.lock().insert(writer, Arc::downgrade(&l));
        l
    }
}

/// What protects the hop to the broker (the broker itself sees the bytes).
fn protection_of(url: &str) -> String {
    if url.starts_with("mqtts://") {
        "tls (to the broker)".into()
    } else {
        "none".into()
    }
}

impl Link for WriterLink {
    fn transport(&self) -> TransportKind {
        TransportKind::Mqtt
    }
    fn remote(&self) -> EndpointId {
        BROKER_ENDPOINT
    }
    fn locator(&self) -> String {
        self.broker.url.clone()
    }
    fn protection(&self) -> String {
        protection_of(&self.broker.url)
    }
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        self.publish(frame, None)
    }
    /// The broker is not a subscriber: readers it serves have their own
    /// `ReaderView`s.
    fn reaches_reader(&self) -> bool {
        false
    }
    fn stats(&self) -> &ConnStats {
        &self.stats
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.broker.writers.lock().remove(&self.writer);
    }
    fn priority(&self) -> Priority {
        *self.priority.lock()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        *self.priority.lock() = p;
        Ok(Applied::packets(Packets::Shared))
    }
}

impl WriterLink {
    /// Publishes one sample to the topic, or to `to` (a late joiner's
    /// history topic: never dropped for room, it is what the reader joined
    /// for).
    fn publish(&self, frame: &OutFrame<'_>, to: Option<Bytes>) -> Result<(), SendError> {
        let json = match (&self.set.json, frame.payload.typed) {
            (Some(enc), Some(typed)) if self.set.encoding == Encoding::Json => enc(typed),
            _ => None,
        };
        let (payload, content_type) = match json {
            Some(r) => (r?, "application/json"),
            None => ((frame.payload.bytes)()?, "application/cdr"),
        };
        let len = payload.len();
        let replay = to.is_some();
        let m = OutMsg {
            topic: to.unwrap_or_else(|| self.set.topic.clone()),
            qos: if replay {
                QoS::AtLeastOnce
            } else {
                self.set.qos
            },
            retain: false,
            payload,
            meta: Meta::Sample {
                writer: self.writer_text.clone(),
                seq: frame.seq,
                stamp_ns: frame.stamp_ns,
                type_name: self.set.type_name.clone(),
                content_type,
            },
            droppable: self.set.droppable && !replay,
        };
        self.broker.send(m, self.set.block)?;
        self.stats.message(len);
        Ok(())
    }
}

/// A reader reachable only through the broker, served by the writer's
/// [`WriterLink`] (which publishes each sample once for all of them):
/// sending here sends nothing more; the counters are the broker link's.
pub(crate) struct ReaderView {
    link: Arc<WriterLink>,
    reader: EndpointId,
    closed: AtomicBool,
}

impl ReaderView {
    pub fn new(link: Arc<WriterLink>, reader: EndpointId) -> Self {
        ReaderView {
            link,
            reader,
            closed: AtomicBool::new(false),
        }
    }
}

impl Link for ReaderView {
    fn transport(&self) -> TransportKind {
        TransportKind::Mqtt
    }
    fn remote(&self) -> EndpointId {
        self.reader
    }
    fn locator(&self) -> String {
        self.link.locator()
    }
    fn protection(&self) -> String {
        self.link.protection()
    }
    fn send(&self, _frame: &OutFrame<'_>) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        Ok(()) // the writer's broker link carried it
    }
    /// A late joiner's history goes to its runtime's history topic, which
    /// that runtime subscribed to before announcing the reader.
    fn replay(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        self.link
            .publish(frame, Some(self.link.broker.hist_topic(self.reader)))
    }
    fn stats(&self) -> &ConnStats {
        &self.link.stats
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed) || self.link.is_closed()
    }
    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }
    fn priority(&self) -> Priority {
        self.link.priority()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        self.link.set_priority(p)
    }
}

/// A service client's link to a service reachable only through the broker.
pub(crate) struct ClientLink {
    broker: Arc<Broker>,
    service: EndpointId,
    /// The client as the request's metadata names it.
    client_text: Arc<str>,
    request_topic: Bytes,
    reply_topic: Arc<str>,
    block: Duration,
    stats: ConnStats,
    priority: Mutex<Priority>,
    closed: AtomicBool,
}

impl ClientLink {
    pub fn new(
        broker: Arc<Broker>,
        client: EndpointId,
        service: EndpointId,
        block: Duration,
    ) -> Self {
        ClientLink {
            client_text: client.to_string().into(),
            request_topic: Bytes::from(format!(
                "{}@req/{}/{}",
                broker.base, service.participant, service.entity
            )),
            reply_topic: format!(
                "{}@rep/{}/{}",
                broker.base, client.participant, client.entity
            )
            .into(),
            broker,
            service,
            block,
            stats: ConnStats::new(),
            priority: Mutex::new(Priority::default()),
            closed: AtomicBool::new(false),
        }
    }
}

impl Link for ClientLink {
    fn transport(&self) -> TransportKind {
        TransportKind::Mqtt
    }
    fn remote(&self) -> EndpointId {
        self.service
    }
    fn locator(&self) -> String {
        self.broker.url.clone()
    }
    fn protection(&self) -> String {
        protection_of(&self.broker.url)
    }
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        let payload = (frame.payload.bytes)()?;
        let len = payload.len();
        let m = OutMsg {
            topic: self.request_topic.clone(),
            qos: QoS::AtLeastOnce,
            retain: false,
            payload,
            meta: Meta::Request {
                client: self.client_text.clone(),
                id: frame.seq,
                reply_to: self.reply_topic.clone(),
            },
            droppable: false,
        };
        self.broker.send(m, Some(self.block))?;
        self.stats.message(len);
        Ok(())
    }
    fn stats(&self) -> &ConnStats {
        &self.stats
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }
    fn priority(&self) -> Priority {
        *self.priority.lock()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        *self.priority.lock() = p;
        Ok(Applied::packets(Packets::Shared))
    }
}

/// Sends a service's replies to the calling client's reply topic.
pub(crate) struct Replier {
    pub broker: Weak<Broker>,
    pub topic: Bytes,
}

impl ferry_transport::transport::Replier for Replier {
    fn reply(&self, request_id: u64, result: Result<ReplyBody, String>) {
        let Some(b) = self.broker.upgrade() else {
            return;
        };
        let (payload, error) = match result.and_then(|r| (r.encode)().map_err(|e| e.to_string())) {
            Ok(b) => (b, None),
            Err(e) => (Bytes::new(), Some(e)),
        };
        let m = OutMsg {
            topic: self.topic.clone(),
            qos: QoS::AtLeastOnce,
            retain: false,
            payload,
            meta: Meta::Reply {
                id: request_id,
                error,
            },
            droppable: false,
        };
        let _ = b.send(m, Some(b.keep_all_block));
    }
}
