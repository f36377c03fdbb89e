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
use rumqttc::v5::mqttbytes::v5::PublishProperties;
use rumqttc::v5::mqttbytes::QoS;

use super::outbox::OutMsg;
use super::Broker;
use crate::config::mqtt::Encoding;
use crate::error::EncodeError;
use crate::priority::{Priority, PriorityError};
use crate::stats::ConnStats;
use crate::transport::{Link, OutFrame, ReplyBody, SendError};

/// The remote end of a writer's broker link: the broker itself.
pub const BROKER_ENDPOINT: EndpointId = EndpointId {
    participant: ParticipantId(0),
    entity: u32::MAX,
};

/// Encodes the writer's typed value as JSON (built where the type is known).
pub(crate) type JsonEncoder =
    Box<dyn Fn(&Arc<dyn Any + Send + Sync>) -> Option<Result<Bytes, EncodeError>> + Send + Sync>;

const PRIORITY_NOTE: &str =
    "MQTT: the broker connection is shared by every cloud-scope topic; priority is kept \
     for this publisher's ordering but sets no DSCP on the shared socket";

/// How a writer's samples go to the broker.
pub(crate) struct WriterSettings {
    pub topic: String,
    pub qos: QoS,
    /// Best effort or keep_last: may be dropped when the queue is full.
    pub droppable: bool,
    /// keep_all + reliable: block up to this, then fail.
    pub block: Option<Duration>,
    pub type_name: String,
    pub encoding: Encoding,
    pub json: Option<JsonEncoder>,
}

/// A cloud-scope writer's one link to the broker: every sample once.
pub(crate) struct WriterLink {
    broker: Arc<Broker>,
    writer: EndpointId,
    /// `writer` as its `ferry.w` property (formatted once, not per sample).
    writer_text: String,
    set: WriterSettings,
    stats: Arc<ConnStats>,
    priority: Mutex<Priority>,
    closed: AtomicBool,
}

impl WriterLink {
    /// Creates the link and registers it, so pairs with readers reachable
    /// only through the broker can be served by it.
    pub fn new(broker: Arc<Broker>, writer: EndpointId, set: WriterSettings) -> Arc<WriterLink> {
        let l = Arc::new(WriterLink {
            broker: broker.clone(),
            writer,
            writer_text: writer.to_string(),
            set,
            stats: Arc::new(ConnStats::new()),
            priority: Mutex::new(Priority::default()),
            closed: AtomicBool::new(false),
        });
        broker.writers.lock().insert(writer, Arc::downgrade(&l));
        l
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
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        let json = match (&self.set.json, frame.payload.typed) {
            (Some(enc), Some(typed)) if self.set.encoding == Encoding::Json => enc(typed),
            _ => None,
        };
        let (payload, content_type) = match json {
            Some(r) => (r?, "application/json"),
            None => ((frame.payload.bytes)()?, "application/cdr"),
        };
        let len = payload.len();
        let m = OutMsg {
            topic: self.set.topic.clone(),
            qos: self.set.qos,
            retain: false,
            payload,
            props: PublishProperties {
                content_type: Some(content_type.into()),
                user_properties: vec![
                    ("ferry.w".into(), self.writer_text.clone()),
                    ("ferry.seq".into(), frame.seq.to_string()),
                    ("ferry.t".into(), frame.stamp_ns.to_string()),
                    ("ferry.type".into(), self.set.type_name.clone()),
                ],
                ..Default::default()
            },
            droppable: self.set.droppable,
        };
        self.broker.send(m, self.set.block)?;
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
        self.broker.writers.lock().remove(&self.writer);
    }
    fn priority(&self) -> Priority {
        *self.priority.lock()
    }
    fn set_priority(&self, p: Priority) -> Result<String, PriorityError> {
        *self.priority.lock() = p;
        Ok(PRIORITY_NOTE.into())
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
    fn send(&self, _frame: &OutFrame<'_>) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        Ok(()) // the writer's broker link carried it
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
    fn set_priority(&self, p: Priority) -> Result<String, PriorityError> {
        self.link.set_priority(p)
    }
}

/// A service client's link to a service reachable only through the broker.
pub(crate) struct ClientLink {
    broker: Arc<Broker>,
    client: EndpointId,
    service: EndpointId,
    request_topic: String,
    reply_topic: String,
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
            request_topic: format!(
                "{}@req/{}/{}",
                broker.base, service.participant, service.entity
            ),
            reply_topic: format!(
                "{}@rep/{}/{}",
                broker.base, client.participant, client.entity
            ),
            broker,
            client,
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
            props: PublishProperties {
                response_topic: Some(self.reply_topic.clone()),
                correlation_data: Some(Bytes::copy_from_slice(&frame.seq.to_le_bytes())),
                content_type: Some("application/cdr".into()),
                user_properties: vec![("ferry.w".into(), self.client.to_string())],
                ..Default::default()
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
    fn set_priority(&self, p: Priority) -> Result<String, PriorityError> {
        *self.priority.lock() = p;
        Ok(PRIORITY_NOTE.into())
    }
}

/// Sends a service's replies to the calling client's reply topic.
pub(crate) struct Replier {
    pub broker: Weak<Broker>,
    pub topic: String,
}

impl crate::transport::Replier for Replier {
    fn reply(&self, request_id: u64, result: Result<ReplyBody, String>) {
        let Some(b) = self.broker.upgrade() else {
            return;
        };
        let mut props = PublishProperties {
            correlation_data: Some(Bytes::copy_from_slice(&request_id.to_le_bytes())),
            content_type: Some("application/cdr".into()),
            ..Default::default()
        };
        let payload = match result.and_then(|r| (r.encode)().map_err(|e| e.to_string())) {
            Ok(b) => b,
            Err(e) => {
                props.user_properties.push(("ferry.error".into(), e));
                Bytes::new()
            }
        };
        let m = OutMsg {
            topic: self.topic.clone(),
            qos: QoS::AtLeastOnce,
            retain: false,
            payload,
            props,
            droppable: false,
        };
        let _ = b.send(m, Some(b.keep_all_block));
    }
}
