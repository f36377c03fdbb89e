//! Services and clients: request/response with timeouts that never hang.

use std::collections::HashMap;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use ferry_wire::frame::FrameKind;
use ferry_wire::{EndpointId, EndpointKind, Qos, TypeHash};
use parking_lot::{Condvar, Mutex};

use crate::error::{BuildError, CallError};
use crate::event::{EventQueue, PortEvent};
use crate::membership::NodeInner;
use crate::message::{Codec, Payload};
use crate::port::Inbound;
use crate::runtime::{ReaderPort, WriterPort};
use crate::stats::{now_ns, ConnectionInfo};
use crate::transport::Links;
use crate::transport::{
    Carries, InFrame, InboundConn, Inbox, Link, OutFrame, ReplyBody, ReplySink,
};

/// A request handler; the second argument is the calling client's
/// connection (who it says it is, and where it really comes from).
pub(crate) type Handler<Req, Resp> =
    Box<dyn Fn(&Req, &InboundConn) -> Result<Resp, String> + Send + Sync>;

/// Type name and hash of a service: both halves must match.
fn service_type<Req: Codec, Resp: Codec>() -> (String, TypeHash) {
    let (name, hash) = service_type_of(
        (Req::type_name(), Req::type_hash()),
        (Resp::type_name(), Resp::type_hash()),
    );
    // A generated request knows its service's hash even when the service
    // is not among the loaded interfaces.
    (name, Req::service_hash().unwrap_or(hash))
}

/// Type name and hash of a service from its request and response types
/// (name, hash): what discovery announces and matches.
fn service_type_of(req: (&str, TypeHash), resp: (&str, TypeHash)) -> (String, TypeHash) {
    let name = format!("{}|{}", req.0, resp.0);
    (name, crate::interfaces::service_hash_of(req, resp))
}

/// Builds a [`Service`].
pub struct ServiceBuilder<Req, Resp> {
    node: Arc<NodeInner>,
    name: String,
    qos: Qos,
    type_info: (String, TypeHash),
    handler: Handler<Req, Resp>,
}

impl<Req: Codec, Resp: Codec> ServiceBuilder<Req, Resp> {
    pub(crate) fn new(node: Arc<NodeInner>, name: &str, handler: Handler<Req, Resp>) -> Self {
        ServiceBuilder {
            node,
            name: name.to_string(),
            qos: Qos::services_default(),
            type_info: service_type::<Req, Resp>(),
            handler,
        }
    }
    /// Sets the QoS (default: ROS 2 `services_default`).
    pub fn qos(mut self, qos: Qos) -> Self {
        self.qos = qos;
        self
    }
    /// Announces the request and response types as `(name, hash)` pairs
    /// instead of `Req`'s and `Resp`'s own: for raw payloads whose schema
    /// lives elsewhere (the Python bindings). Both sides must agree.
    pub fn type_info(mut self, request: (&str, TypeHash), response: (&str, TypeHash)) -> Self {
        self.type_info = service_type_of(request, response);
        self
    }
    /// Creates the service and announces it. Requests are handled one at a
    /// time on the service's own thread, so a slow handler never stalls
    /// other traffic.
    pub fn build(self) -> Result<Service<Req, Resp>, BuildError> {
        crate::interfaces::remember(Req::type_name(), Req::definition());
        crate::interfaces::remember(Resp::type_name(), Resp::definition());
        let (id, record) =
            self.node
                .declare(&self.name, EndpointKind::Service, self.type_info, self.qos)?;
        let rt = self.node.rt.clone();
        let topic = record.topic.clone();
        let (tx, rx) = mpsc::channel::<Job<Req>>();
        let shared = Arc::new(SrvShared::<Req> {
            id,
            topic: topic.clone(),
            jobs: Mutex::new(Some(tx)),
            conns: Inbound::default(),
            events: EventQueue::default(),
        });
        let handler = self.handler;
        let t = topic.clone();
        let worker = std::thread::Builder::new()
            .name(format!("ferry-srv{}", id.entity))
            .spawn(move || {
                for job in rx {
                    let Some(replier) = job.conn.replier.clone() else {
                        continue;
                    };
                    let result =
                        match catch_unwind(AssertUnwindSafe(|| handler(&job.req, &job.conn))) {
                            Ok(Ok(resp)) if resp.validate().is_err() => {
                                let e = resp.validate().err().map(|e| e.to_string());
                                tracing::warn!("service `{t}`: response refused: {e:?}");
                                Err(format!(
                                    "the response broke a bound of its type: {}",
                                    e.unwrap_or_default()
                                ))
                            }
                            Ok(Ok(resp)) => {
                                let resp = Arc::new(resp);
                                let r2 = resp.clone();
                                Ok(ReplyBody {
                                    typed: resp,
                                    encode: Box::new(move || r2.encode()),
                                })
                            }
                            Ok(Err(msg)) => Err(msg),
                            Err(_) => {
                                tracing::error!("service `{t}`: handler panicked");
                                Err("the service handler panicked".to_string())
                            }
                        };
                    replier.reply(job.request_id, result);
                }
            })
            .map_err(|source| BuildError::Io {
                what: "service thread".into(),
                source,
            })?;
        let inbox: Arc<dyn Inbox> = shared.clone();
        crate::transport::intra::register_reader(&inbox);
        if let Some(r) = &rt.shared.ros2 {
            r.serve(
                &rt.shared.cfg,
                id,
                &record,
                (Req::type_name(), Req::type_hash()),
                (Resp::type_name(), Resp::type_hash()),
            );
        }
        if let Some(z) = &rt.shared.zenoh {
            z.serve(&rt.shared.cfg, id, &record);
        }
        let port: Arc<dyn ReaderPort> = shared.clone();
        rt.shared.add_reader(record, Arc::downgrade(&port));
        Ok(Service {
            shared,
            node: self.node,
            worker: Some(worker),
            _resp: Default::default(),
        })
    }
}

struct Job<Req> {
    conn: Arc<InboundConn>,
    request_id: u64,
    req: Arc<Req>,
}

struct SrvShared<Req> {
    id: EndpointId,
    topic: String,
    jobs: Mutex<Option<mpsc::Sender<Job<Req>>>>,
    conns: Inbound,
    events: EventQueue,
}

impl<Req: Codec> Inbox for SrvShared<Req> {
    fn id(&self) -> EndpointId {
        self.id
    }
    fn name(&self) -> &str {
        &self.topic
    }
    fn attach(&self, conn: Arc<InboundConn>) {
        self.conns.attach(conn);
    }
    fn detach(&self, conn: &Arc<InboundConn>) {
        self.conns.detach(conn);
    }
    fn carries(&self) -> Carries {
        Carries::Requests
    }
    fn deliver(&self, conn: &Arc<InboundConn>, frame: &InFrame<'_>) {
        if frame.kind != FrameKind::Request {
            return;
        }
        if conn.transport == ferry_wire::TransportKind::InProcess {
            conn.stats.message(0);
        }
        match frame.payload.to_typed::<Req>() {
            Ok(req) => {
                if let Some(tx) = self.jobs.lock().as_ref() {
                    let _ = tx.send(Job {
                        conn: conn.clone(),
                        request_id: frame.seq,
                        req,
                    });
                }
            }
            Err(e) => {
                conn.stats.errors.fetch_add(1, Ordering::Relaxed);
                if let Some(r) = &conn.replier {
                    r.reply(frame.seq, Err(format!("bad request: {e}")));
                }
            }
        }
    }
}

impl<Req: Codec> ReaderPort for SrvShared<Req> {
    fn connections(&self) -> Vec<ConnectionInfo> {
        self.conns.connections(&self.topic, self.id)
    }
    fn events(&self) -> &EventQueue {
        &self.events
    }
    fn set_matched(&self, _writer: EndpointId, _matched: bool) {}
}

/// Answers requests of type `Req` with `Resp`.
pub struct Service<Req: Codec, Resp: Codec> {
    shared: Arc<SrvShared<Req>>,
    node: Arc<NodeInner>,
    worker: Option<std::thread::JoinHandle<()>>,
    _resp: std::marker::PhantomData<fn() -> Resp>,
}

impl<Req: Codec, Resp: Codec> Service<Req, Resp> {
    /// The fully qualified service name.
    pub fn name(&self) -> &str {
        &self.shared.topic
    }
    /// The connections (one per client) with their paths and statistics.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.shared.connections()
    }
}

impl<Req: Codec, Resp: Codec> Drop for Service<Req, Resp> {
    fn drop(&mut self) {
        crate::transport::intra::unregister_reader(self.shared.id);
        self.node.rt.shared.remove_endpoint(self.shared.id.entity);
        self.shared.jobs.lock().take();
        if let Some(w) = self.worker.take() {
            if w.thread().id() != std::thread::current().id() {
                let _ = w.join();
            }
        }
    }
}

/// Builds a [`Client`].
pub struct ClientBuilder<Req, Resp> {
    node: Arc<NodeInner>,
    name: String,
    qos: Qos,
    type_info: (String, TypeHash),
    _t: std::marker::PhantomData<fn() -> (Req, Resp)>,
}

impl<Req: Codec, Resp: Codec> ClientBuilder<Req, Resp> {
    pub(crate) fn new(node: Arc<NodeInner>, name: &str) -> Self {
        ClientBuilder {
            node,
            name: name.to_string(),
            qos: Qos::services_default(),
            type_info: service_type::<Req, Resp>(),
            _t: Default::default(),
        }
    }
    /// Sets the QoS (default: ROS 2 `services_default`).
    pub fn qos(mut self, qos: Qos) -> Self {
        self.qos = qos;
        self
    }
    /// Announces the request and response types as `(name, hash)` pairs
    /// instead of `Req`'s and `Resp`'s own: for raw payloads whose schema
    /// lives elsewhere (the Python bindings). Both sides must agree.
    pub fn type_info(mut self, request: (&str, TypeHash), response: (&str, TypeHash)) -> Self {
        self.type_info = service_type_of(request, response);
        self
    }
    /// Creates the client and announces it.
    pub fn build(self) -> Result<Client<Req, Resp>, BuildError> {
        let (id, record) =
            self.node
                .declare(&self.name, EndpointKind::Client, self.type_info, self.qos)?;
        let rt = self.node.rt.clone();
        let topic = record.topic.clone();
        let shared = Arc::new(CliShared::<Resp> {
            id,
            topic,
            links: Links::default(),
            links_cv: (Mutex::new(()), Condvar::new()),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            events: EventQueue::default(),
            reply_conns: Inbound::default(),
        });
        // Services on shared memory and UDP answer on a connection of their
        // own back to the client: it is the reader of its replies.
        let inbox: Arc<dyn Inbox> = shared.clone();
        crate::transport::intra::register_reader(&inbox);
        if let Some(r) = &rt.shared.ros2 {
            let sink: std::sync::Weak<dyn ReplySink> = Arc::downgrade(&shared) as _;
            let types = (
                (Req::type_name(), Req::type_hash()),
                (Resp::type_name(), Resp::type_hash()),
            );
            if let Some(l) = r.client_link(&rt.shared.cfg, id, &record, types, sink) {
                shared.links.push(l);
            }
        }
        if let Some(z) = &rt.shared.zenoh {
            let sink: std::sync::Weak<dyn ReplySink> = Arc::downgrade(&shared) as _;
            let reached = crate::transport::reached_by(&shared, |s| &s.links);
            if let Some(l) = z.client_link(&rt.shared.cfg, id, &record, reached, sink) {
                shared.links.push(l);
            }
        }
        let port: Arc<dyn WriterPort> = shared.clone();
        rt.shared.add_writer(record, Arc::downgrade(&port));
        Ok(Client {
            shared,
            node: self.node,
            _req: Default::default(),
        })
    }
}

type CallResult<Resp> = Result<Arc<Resp>, CallError>;

struct Slot<Resp> {
    result: Mutex<Option<CallResult<Resp>>>,
    cv: Condvar,
    waker: Mutex<Option<Waker>>,
}

impl<Resp> Slot<Resp> {
    fn fill(&self, r: CallResult<Resp>) {
        *self.result.lock() = Some(r);
        self.cv.notify_all();
        if let Some(w) = self.waker.lock().take() {
            w.wake();
        }
    }
}

struct PendingCall<Resp> {
    service: EndpointId,
    slot: Arc<Slot<Resp>>,
}

struct CliShared<Resp> {
    id: EndpointId,
    topic: String,
    links: Links,
    links_cv: (Mutex<()>, Condvar),
    pending: Mutex<HashMap<u64, PendingCall<Resp>>>,
    next_id: AtomicU64,
    events: EventQueue,
    /// Connections services opened back to this client for their replies.
    reply_conns: Inbound,
}

impl<Resp: Codec> Inbox for CliShared<Resp> {
    fn id(&self) -> EndpointId {
        self.id
    }
    fn name(&self) -> &str {
        &self.topic
    }
    fn attach(&self, conn: Arc<InboundConn>) {
        self.reply_conns.attach(conn);
    }
    fn detach(&self, conn: &Arc<InboundConn>) {
        self.reply_conns.detach(conn);
    }
    fn deliver(&self, _conn: &Arc<InboundConn>, _frame: &InFrame<'_>) {
        // Replies come through `on_reply`; nothing else is for a client.
    }
    fn carries(&self) -> Carries {
        Carries::Replies
    }
    fn on_reply(
        &self,
        conn: &Arc<InboundConn>,
        request_id: u64,
        result: Result<Payload<'_>, String>,
    ) {
        // Only the service the call went to answers it (the id it declared).
        if self.answer_from(conn.remote, request_id, result) == Some(false) {
            conn.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<Resp: Codec> CliShared<Resp> {
    /// Takes the reply for `request_id` when the call went to `service`:
    /// Some(true) taken, Some(false) the call went elsewhere (refused),
    /// None no such call (timed out already, or not ours).
    fn answer_from(
        &self,
        service: EndpointId,
        request_id: u64,
        result: Result<Payload<'_>, String>,
    ) -> Option<bool> {
        let asked = self
            .pending
            .lock()
            .get(&request_id)
            .map(|p| p.service == service);
        if asked == Some(true) {
            ReplySink::on_reply(self, request_id, result);
        }
        asked
    }
}

impl<Resp: Codec> ReplySink for CliShared<Resp> {
    fn on_reply_from(
        &self,
        service: EndpointId,
        request_id: u64,
        result: Result<Payload<'_>, String>,
    ) {
        self.answer_from(service, request_id, result);
    }
    fn on_reply(&self, request_id: u64, result: Result<Payload<'_>, String>) {
        let Some(p) = self.pending.lock().remove(&request_id) else {
            return;
        };
        let r = match result {
            Ok(payload) => payload.to_typed::<Resp>().map_err(|e| match e {
                crate::message::PayloadError::Decode(d) => CallError::Decode(d),
                crate::message::PayloadError::Encode(e) => CallError::Encode(e),
            }),
            Err(message) => Err(CallError::Remote {
                service: self.topic.clone(),
                message,
            }),
        };
        p.slot.fill(r);
    }
    fn on_unanswered(&self, service: EndpointId, request_id: u64) {
        self.fail_gone(service, Some(request_id));
    }
    fn on_link_lost(&self, service: EndpointId) {
        self.fail_gone(service, None);
    }
}

impl<Resp: Codec> CliShared<Resp> {
    /// The calls in flight to `service` (only call `only`, if given) fail
    /// with `ServiceGone`.
    fn fail_gone(&self, service: EndpointId, only: Option<u64>) {
        let gone: Vec<PendingCall<Resp>> = {
            let mut pend = self.pending.lock();
            let ids: Vec<u64> = pend
                .iter()
                .filter(|(k, p)| p.service == service && only.is_none_or(|o| o == **k))
                .map(|(k, _)| *k)
                .collect();
            ids.into_iter().filter_map(|k| pend.remove(&k)).collect()
        };
        for p in gone {
            p.slot.fill(Err(CallError::ServiceGone {
                service: self.topic.clone(),
            }));
        }
    }
}

impl<Resp: Codec> WriterPort for CliShared<Resp> {
    fn connections(&self) -> Vec<ConnectionInfo> {
        self.links.connections(&self.topic, self.id)
    }
    fn links(&self) -> &Links {
        &self.links
    }
    fn add_link(&self, link: Arc<dyn Link>) {
        self.links.push(link);
        let _g = self.links_cv.0.lock();
        self.links_cv.1.notify_all();
    }
    fn remove_link(&self, reader: EndpointId) {
        // Calls fail only with a service's own link (not an intermediary's
        // id a peer may announce).
        if self.links.remove(reader) {
            self.on_link_lost(reader);
        }
    }
    fn events(&self) -> &EventQueue {
        &self.events
    }
    fn reply_sink(self: Arc<Self>) -> Option<Arc<dyn ReplySink>> {
        Some(self)
    }
    fn housekeeping(&self, _now: Instant) {
        self.links.prune_closed();
    }
}

/// Calls a service.
pub struct Client<Req: Codec, Resp: Codec> {
    shared: Arc<CliShared<Resp>>,
    node: Arc<NodeInner>,
    _req: std::marker::PhantomData<fn() -> Req>,
}

impl<Req: Codec, Resp: Codec> Client<Req, Resp> {
    /// Waits up to `timeout` for a matching service to be connected.
    pub fn wait_for_service(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let mut g = self.shared.links_cv.0.lock();
        while self.shared.links.live() == 0 {
            // Woken when a link comes; a ROS 2 service appearing on the DDS
            // link is seen by looking again (every 20 ms).
            let wake = end.min(Instant::now() + Duration::from_millis(20));
            let _ = self.shared.links_cv.1.wait_until(&mut g, wake);
            if Instant::now() >= end {
                return self.shared.links.live() > 0;
            }
        }
        true
    }

    /// True if a service is connected now.
    pub fn service_is_ready(&self) -> bool {
        self.shared.links.live() > 0
    }

    fn start(&self, req: Req) -> Result<(u64, Arc<Slot<Resp>>), CallError> {
        req.validate().map_err(|e| {
            CallError::Encode(crate::EncodeError {
                type_name: Req::type_name().to_string(),
                reason: e.to_string(),
            })
        })?;
        let link = self
            .shared
            .links
            .first_live()
            .ok_or_else(|| CallError::NoService {
                service: self.shared.topic.clone(),
                waited: Duration::ZERO,
            })?;
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            result: Mutex::new(None),
            cv: Condvar::new(),
            waker: Mutex::new(None),
        });
        self.shared.pending.lock().insert(
            id,
            PendingCall {
                service: link.remote(),
                slot: slot.clone(),
            },
        );
        let typed: Arc<dyn std::any::Any + Send + Sync> = Arc::new(req);
        let bytes = || {
            typed
                .downcast_ref::<Req>()
                .expect("typed is a Req")
                .encode()
        };
        let frame = OutFrame {
            kind: FrameKind::Request,
            seq: id,
            stamp_ns: now_ns(),
            payload: Payload {
                typed: Some(&typed),
                bytes: &bytes,
            },
        };
        if let Err(e) = link.send(&frame) {
            self.shared.pending.lock().remove(&id);
            return Err(match e {
                crate::transport::SendError::Encode(e) => CallError::Encode(e),
                _ => CallError::ServiceGone {
                    service: self.shared.topic.clone(),
                },
            });
        }
        Ok((id, slot))
    }

    /// Calls the service and waits for the response, at most `timeout` in
    /// all (waiting for the service to appear included).
    pub fn call(&self, req: Req, timeout: Duration) -> Result<Arc<Resp>, CallError> {
        let start = Instant::now();
        if !self.wait_for_service(timeout) {
            return Err(CallError::NoService {
                service: self.shared.topic.clone(),
                waited: timeout,
            });
        }
        let (id, slot) = self.start(req)?;
        let end = start + timeout;
        let mut g = slot.result.lock();
        while g.is_none() {
            if slot.cv.wait_until(&mut g, end).timed_out() && g.is_none() {
                drop(g);
                self.shared.pending.lock().remove(&id);
                return Err(CallError::Timeout {
                    service: self.shared.topic.clone(),
                    timeout,
                });
            }
        }
        g.take().expect("checked is_some")
    }

    /// Sends the request now and resolves with the response on any executor.
    /// Fails at once if no service is connected; wrap it in your executor's
    /// timeout to bound the wait.
    pub fn call_async(&self, req: Req) -> CallFuture<Resp> {
        match self.start(req) {
            Ok((_, slot)) => CallFuture { state: Ok(slot) },
            Err(e) => CallFuture {
                state: Err(Some(e)),
            },
        }
    }

    /// The connections with their paths and statistics.
    pub fn connections(&self) -> Vec<ConnectionInfo> {
        self.shared.connections()
    }

    /// The next event, if any.
    pub fn try_event(&self) -> Option<PortEvent> {
        self.shared.events.try_next()
    }

    /// The fully qualified service name.
    pub fn name(&self) -> &str {
        &self.shared.topic
    }
}

impl<Req: Codec, Resp: Codec> Drop for Client<Req, Resp> {
    fn drop(&mut self) {
        crate::transport::intra::unregister_reader(self.shared.id);
        self.node.rt.shared.remove_endpoint(self.shared.id.entity);
        self.shared.links.close_all();
    }
}

/// Future of [`Client::call_async`].
pub struct CallFuture<Resp> {
    state: Result<Arc<Slot<Resp>>, Option<CallError>>,
}

impl<Resp> Future for CallFuture<Resp> {
    type Output = Result<Arc<Resp>, CallError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.state {
            Err(e) => Poll::Ready(Err(e.take().expect("polled after completion"))),
            Ok(slot) => {
                *slot.waker.lock() = Some(cx.waker().clone());
                match slot.result.lock().take() {
                    Some(r) => Poll::Ready(r),
                    None => Poll::Pending,
                }
            }
        }
    }
}
