//! Publishers, subscriptions, services, clients, pending calls and timers.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry::{CallFuture, Qos, RawBytes, SampleInfo, TypeHash};
use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::convert::{self, Kind};
use crate::exec::{EventFd, Queue, Wake};
use crate::node::{build_err, Entity, NodeCore};
use crate::{CallError, CallTimeout, DestroyedError, RemoteError, ServiceUnavailable};

/// A port object that `destroy()` (or the node's) empties.
struct Slot<T>(Arc<Mutex<Option<Arc<T>>>>);

impl<T: Send + Sync + 'static> Slot<T> {
    fn new(node: &NodeCore, v: T) -> Self {
        let s = Arc::new(Mutex::new(Some(Arc::new(v))));
        let s2 = s.clone();
        node.on_destroy(Box::new(move || drop(s2.lock().take())));
        Slot(s)
    }
    fn get(&self, what: &str) -> PyResult<Arc<T>> {
        self.0
            .lock()
            .clone()
            .ok_or_else(|| DestroyedError::new_err(format!("this {what} was destroyed")))
    }
    fn destroy(&self, py: Python<'_>) {
        let v = self.0.lock().take();
        py.allow_threads(move || drop(v));
    }
}

/// Calls `ready(slice)` — a wait of at most 50 ms, with the GIL released —
/// until it says true or `timeout_sec` (None: forever) passes, running
/// Python's signal handlers between slices (Ctrl-C).
fn wait_matched(
    py: Python<'_>,
    timeout_sec: Option<f64>,
    ready: impl Fn(Duration) -> bool + Send + Sync,
) -> PyResult<bool> {
    const SLICE: Duration = Duration::from_millis(50);
    let end = convert::timeout(timeout_sec)?.map(|t| Instant::now() + t);
    loop {
        let slice = end.map_or(SLICE, |e| {
            e.saturating_duration_since(Instant::now()).min(SLICE)
        });
        if py.allow_threads(|| ready(slice)) {
            return Ok(true);
        }
        py.check_signals()?;
        if end.is_some_and(|e| Instant::now() >= e) {
            return Ok(false);
        }
    }
}

/// Like [`wait_matched`], for a condition that `wake` announces: checks
/// `ready()`, sleeps on `wake` for the slice, checks again.
fn wait_woken(
    py: Python<'_>,
    wake: &Arc<Wake>,
    timeout_sec: Option<f64>,
    ready: impl Fn() -> bool + Send + Sync,
) -> PyResult<bool> {
    wait_matched(py, timeout_sec, |slice| {
        let seen = wake.epoch();
        ready() || {
            wake.wait(seen, Instant::now() + slice);
            ready()
        }
    })
}

fn publish_err(e: ferry::PublishError) -> PyErr {
    crate::PublishError::new_err(e.to_string())
}

/// A Rust call error as the matching Python exception.
fn call_err(e: &ferry::CallError) -> PyErr {
    let m = e.to_string();
    match e {
        ferry::CallError::Timeout { .. } => CallTimeout::new_err(m),
        ferry::CallError::NoService { .. } | ferry::CallError::ServiceGone { .. } => {
            ServiceUnavailable::new_err(m)
        }
        ferry::CallError::Remote { .. } => RemoteError::new_err(m),
        _ => CallError::new_err(m),
    }
}

/// Payloads from this size on are copied into a loan (a shared-memory slot
/// when a subscriber is on this host) instead of a heap buffer.
const LOAN_FROM: usize = 4096;

/// Publishes raw bytes of a Python message.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Publisher {
    port: Slot<ferry::Publisher<RawBytes>>,
    topic: String,
}

pub fn make_publisher(
    py: Python<'_>,
    node: &Arc<NodeCore>,
    topic: &str,
    (type_name, hash): (&str, [u8; 32]),
    qos: Qos,
) -> PyResult<Publisher> {
    let p = node.with(|n| {
        let b = n
            .publisher::<RawBytes>(topic)
            .qos(qos)
            .type_info(type_name, TypeHash(hash));
        py.allow_threads(move || b.build()).map_err(build_err)
    })?;
    let topic = p.topic().to_string();
    Ok(Publisher {
        port: Slot::new(node, p),
        topic,
    })
}

/// A Python `bytes` object as the owner of a [`Bytes`]: immutable, and its
/// data stay where they are while the reference lives. Dropped without the
/// GIL (on a ferry thread), pyo3 defers the decref to the next GIL holder.
struct PyBytesOwner {
    _obj: Py<PyBytes>,
    ptr: *const u8,
    len: usize,
}

// SAFETY: `ptr` points into the immutable payload of the `bytes` object
// that `_obj` keeps alive; reading it from any thread is sound (nothing
// writes it), and `Py<PyBytes>` itself is Send + Sync.
unsafe impl Send for PyBytesOwner {}
// SAFETY: as above; only shared reads.
unsafe impl Sync for PyBytesOwner {}

impl AsRef<[u8]> for PyBytesOwner {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr`/`len` are the object's payload (see `Send`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The payload of `b` as [`Bytes`] without a copy.
fn bytes_of(b: &Bound<'_, PyBytes>) -> Bytes {
    let data = b.as_bytes();
    Bytes::from_owner(PyBytesOwner {
        ptr: data.as_ptr(),
        len: data.len(),
        _obj: b.clone().unbind(),
    })
}

impl Publisher {
    /// Publishes bytes that already exist and nobody changes: as they are,
    /// unless a subscriber shares memory with us (then they are copied
    /// into a slot, which is what the subscriber reads).
    fn send_shared(&self, py: Python<'_>, data: Bytes) -> PyResult<()> {
        let p = self.port.get("publisher")?;
        if data.len() >= LOAN_FROM && !p.shares_memory() {
            return py
                .allow_threads(|| p.publish(RawBytes(data)))
                .map_err(publish_err);
        }
        self.send(py, &data)
    }

    fn send(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let p = self.port.get("publisher")?;
        let r = if data.len() >= LOAN_FROM {
            let mut s = p.loan(data.len());
            s.copy_from_slice(data);
            py.allow_threads(move || s.publish())
        } else {
            let raw = RawBytes(Bytes::copy_from_slice(data));
            py.allow_threads(|| p.publish(raw))
        };
        r.map_err(publish_err)
    }
}

#[pymethods]
impl Publisher {
    /// Publishes `bytes`, `bytearray` or `str` (UTF-8).
    fn publish(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Ok(b) = data.downcast::<PyBytes>() {
            if b.as_bytes().len() < LOAN_FROM {
                return self.send(py, b.as_bytes());
            }
            return self.send_shared(py, bytes_of(b));
        }
        if let Ok(b) = data.downcast::<convert::Buffer>() {
            return self.send_shared(py, b.get().bytes.clone());
        }
        let b = convert::payload_bytes(data)?;
        self.send(py, &b)
    }
    /// Publishes the `len` bytes at `address` inside a received `Buffer`
    /// (a read-only numpy view of it, echoed): shared, not copied, when no
    /// subscriber shares memory with us. A range outside the buffer is
    /// refused.
    fn publish_view(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, convert::Buffer>,
        address: usize,
        len: usize,
    ) -> PyResult<()> {
        let bytes = &buffer.get().bytes;
        let start = address.wrapping_sub(bytes.as_ptr() as usize);
        if start > bytes.len() || len > bytes.len() - start {
            return Err(PyValueError::new_err(format!(
                "{len} bytes at {address:#x} are not inside the buffer of {} bytes",
                bytes.len()
            )));
        }
        self.send_shared(py, bytes.slice(start..start + len))
    }
    /// Publishes `len` bytes at `address` (a C-contiguous numpy array the
    /// caller keeps alive for the duration of the call).
    fn publish_address(&self, py: Python<'_>, address: usize, len: usize) -> PyResult<()> {
        if address == 0 && len > 0 {
            return Err(PyValueError::new_err("null address"));
        }
        let data: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: the Python wrapper passes the data pointer and byte
            // size of a live, C-contiguous array it holds a reference to
            // while this call runs (with the GIL held during the copy).
            unsafe { std::slice::from_raw_parts(address as *const u8, len) }
        };
        self.send(py, data)
    }
    /// The fully qualified topic.
    #[getter]
    fn topic_name(&self) -> &str {
        &self.topic
    }
    /// Matched subscriptions.
    fn get_subscription_count(&self) -> PyResult<usize> {
        Ok(self.port.get("publisher")?.subscriber_count())
    }
    /// Waits (GIL released) until at least `n` subscriptions match.
    #[pyo3(signature = (n=1, timeout_sec=None))]
    fn wait_for_subscribers(
        &self,
        py: Python<'_>,
        n: usize,
        timeout_sec: Option<f64>,
    ) -> PyResult<bool> {
        let p = self.port.get("publisher")?;
        wait_matched(py, timeout_sec, |slice| p.wait_for_subscribers(n, slice))
    }
    /// One dict per connection: path, counters, rate.
    fn connections<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        convert::connections(py, self.port.get("publisher")?.connections())
    }
    /// Leaves the graph.
    fn destroy(&self, py: Python<'_>) {
        self.port.destroy(py);
    }
}

/// What a subscription shares with the executor.
pub struct SubCore {
    pub id: u64,
    topic: String,
    kind: Kind,
    callback: Option<PyObject>,
    pub queue: Arc<Queue<(Bytes, SampleInfo)>>,
    last_info: Mutex<Option<SampleInfo>>,
}

impl SubCore {
    pub fn close(&self) {
        self.queue.close();
    }
    /// Runs the callback on the oldest sample. False when there was none.
    pub fn run_one(&self, py: Python<'_>, node: &NodeCore) -> PyResult<bool> {
        let Some((bytes, info)) = self.queue.pop() else {
            return Ok(false);
        };
        *self.last_info.lock() = Some(info);
        let Some(cb) = &self.callback else {
            return Ok(false);
        };
        let r = self
            .kind
            .to_py(py, &bytes)
            .and_then(|m| cb.bind(py).call1((m,)).map(drop));
        if let Err(e) = r {
            node.report(
                py,
                &format!("subscription callback on `{}` raised", self.topic),
                e,
            )?;
        }
        Ok(true)
    }
}

/// Receives raw bytes and hands them to Python as its kind says.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Subscription {
    core: Arc<SubCore>,
    port: Slot<ferry::Subscriber<RawBytes>>,
    node: Arc<NodeCore>,
}

pub fn make_subscription(
    py: Python<'_>,
    node: &Arc<NodeCore>,
    topic: &str,
    (type_name, hash): (&str, [u8; 32]),
    qos: Qos,
    kind: Kind,
    callback: Option<PyObject>,
) -> PyResult<Subscription> {
    let event = if callback.is_none() {
        Some(EventFd::new().map_err(build_err)?)
    } else {
        None
    };
    // Reliable keep_all: the queue has a room, and ferry's paths hold back
    // while it is full (the publisher blocks) instead of it dropping.
    let room = (qos.reliability == ferry::Reliability::Reliable
        && qos.history == ferry::History::KeepAll)
        .then(|| ferry::Room::new(ferry::KEEP_ALL_DEPTH));
    let queue = Arc::new(match &room {
        Some(r) => Queue::with_room(r.clone(), node.wake.clone(), event),
        None => Queue::new(convert::queue_cap(&qos), node.wake.clone(), event),
    });
    let q = queue.clone();
    let s = node.with(|n| {
        let mut b = n
            .subscriber::<RawBytes>(topic)
            .qos(qos)
            .type_info(type_name, TypeHash(hash))
            .inline_callback(move |s| q.push((s.0.clone(), s.info)));
        if let Some(r) = room {
            b = b.room(r);
        }
        py.allow_threads(move || b.build()).map_err(build_err)
    })?;
    let core = Arc::new(SubCore {
        id: node.id(),
        topic: s.topic().to_string(),
        kind,
        callback,
        queue,
        last_info: Mutex::new(None),
    });
    if core.callback.is_some() {
        node.add(Entity::Sub(core.clone()));
    }
    Ok(Subscription {
        core,
        port: Slot::new(node, s),
        node: node.clone(),
    })
}

#[pymethods]
impl Subscription {
    /// The fully qualified topic.
    #[getter]
    fn topic_name(&self) -> &str {
        &self.core.topic
    }
    /// Matched publishers.
    fn get_publisher_count(&self) -> PyResult<usize> {
        Ok(self.port.get("subscription")?.publisher_count())
    }
    /// Waits (GIL released) until at least `n` publishers match.
    #[pyo3(signature = (n=1, timeout_sec=None))]
    fn wait_for_publishers(
        &self,
        py: Python<'_>,
        n: usize,
        timeout_sec: Option<f64>,
    ) -> PyResult<bool> {
        let s = self.port.get("subscription")?;
        wait_matched(py, timeout_sec, |slice| s.wait_for_publishers(n, slice))
    }
    /// The oldest waiting sample, converted, or None.
    fn take<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match self.core.queue.pop() {
            None => Ok(None),
            Some((bytes, info)) => {
                *self.core.last_info.lock() = Some(info);
                self.core.kind.to_py(py, &bytes).map(Some)
            }
        }
    }
    /// Waits up to `timeout_sec` (None: forever; GIL released) for a sample.
    #[pyo3(signature = (timeout_sec=None))]
    fn recv<'py>(
        &self,
        py: Python<'py>,
        timeout_sec: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let q = &self.core.queue;
        if wait_woken(py, &self.node.wake, timeout_sec, || q.len() > 0)? {
            self.take(py)
        } else {
            Ok(None)
        }
    }
    /// The eventfd that is readable while samples wait (subscriptions
    /// without a callback; for asyncio's `add_reader`).
    fn fileno(&self) -> PyResult<i32> {
        self.core
            .queue
            .event()
            .map(|e| e.raw())
            .ok_or_else(|| PyValueError::new_err("a subscription with a callback has no fileno"))
    }
    /// Metadata of the last sample taken or called back: seq,
    /// source_time_ns, publisher, transport.
    #[getter]
    fn last_info<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        match *self.core.last_info.lock() {
            Some(i) => convert::info_dict(py, &i).map(Some),
            None => Ok(None),
        }
    }
    /// Samples dropped because the queue was full (keep_last depth).
    #[getter]
    fn dropped(&self) -> u64 {
        self.core.queue.dropped()
    }
    /// One dict per connection: path, counters, rate.
    fn connections<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        convert::connections(py, self.port.get("subscription")?.connections())
    }
    /// Leaves the graph.
    fn destroy(&self, py: Python<'_>) {
        self.node.remove(self.core.id);
        self.core.close();
        self.port.destroy(py);
    }
}

type Reply = mpsc::SyncSender<Result<Bytes, String>>;

/// What a service shares with the executor.
pub struct SrvCore {
    pub id: u64,
    name: String,
    handler: PyObject,
    pub queue: Arc<Queue<(Bytes, Reply)>>,
}

impl SrvCore {
    pub fn close(&self) {
        self.queue.close();
    }
    /// Answers the oldest request. False when there was none.
    pub fn run_one(&self, py: Python<'_>, node: &NodeCore) -> PyResult<bool> {
        let Some((req, reply)) = self.queue.pop() else {
            return Ok(false);
        };
        let r = self
            .handler
            .bind(py)
            .call1((PyBytes::new(py, &req),))
            .and_then(|resp| convert::payload_bytes(&resp));
        match r {
            Ok(b) => {
                let _ = reply.send(Ok(b));
            }
            Err(e) => {
                let msg = e.to_string();
                let _ = reply.send(Err(msg));
                node.report(py, &format!("service handler of `{}` raised", self.name), e)?;
            }
        }
        Ok(true)
    }
}

/// A service whose handler runs in `spin_once`.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Service {
    core: Arc<SrvCore>,
    port: Slot<ferry::Service<RawBytes, RawBytes>>,
    node: Arc<NodeCore>,
}

pub fn make_service(
    py: Python<'_>,
    node: &Arc<NodeCore>,
    name: &str,
    request: (String, [u8; 32]),
    response: (String, [u8; 32]),
    handler: PyObject,
) -> PyResult<Service> {
    // One request at a time is handled by the service's thread: a queue of
    // one suffices.
    let queue = Arc::new(Queue::new(1, node.wake.clone(), None));
    let q = queue.clone();
    let s = node.with(|n| {
        let b = n
            .try_service::<RawBytes, RawBytes, _>(name, move |req| {
                let (tx, rx) = mpsc::sync_channel::<Result<Bytes, String>>(1);
                q.push((req.0.clone(), tx));
                match rx.recv() {
                    Ok(r) => r.map(RawBytes),
                    Err(_) => Err("the Python service was destroyed before answering".into()),
                }
            })
            .type_info(
                (&request.0, TypeHash(request.1)),
                (&response.0, TypeHash(response.1)),
            );
        py.allow_threads(move || b.build()).map_err(build_err)
    })?;
    let core = Arc::new(SrvCore {
        id: node.id(),
        name: s.name().to_string(),
        handler,
        queue,
    });
    node.add(Entity::Srv(core.clone()));
    let closer = core.clone();
    node.on_destroy(Box::new(move || closer.close()));
    Ok(Service {
        core,
        port: Slot::new(node, s),
        node: node.clone(),
    })
}

#[pymethods]
impl Service {
    /// The fully qualified service name.
    #[getter]
    fn service_name(&self) -> &str {
        &self.core.name
    }
    /// One dict per client connection.
    fn connections<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        convert::connections(py, self.port.get("service")?.connections())
    }
    /// Leaves the graph (a request being waited on is answered with an
    /// error).
    fn destroy(&self, py: Python<'_>) {
        self.node.remove(self.core.id);
        self.core.close();
        self.port.destroy(py);
    }
}

/// Calls a service.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Client {
    port: Slot<ferry::Client<RawBytes, RawBytes>>,
    node: Arc<NodeCore>,
    name: String,
}

pub fn make_client(
    py: Python<'_>,
    node: &Arc<NodeCore>,
    name: &str,
    request: (String, [u8; 32]),
    response: (String, [u8; 32]),
) -> PyResult<Client> {
    let c = node.with(|n| {
        let b = n.client::<RawBytes, RawBytes>(name).type_info(
            (&request.0, TypeHash(request.1)),
            (&response.0, TypeHash(response.1)),
        );
        py.allow_threads(move || b.build()).map_err(build_err)
    })?;
    let name = c.name().to_string();
    Ok(Client {
        port: Slot::new(node, c),
        node: node.clone(),
        name,
    })
}

#[pymethods]
impl Client {
    /// The fully qualified service name.
    #[getter]
    fn service_name(&self) -> &str {
        &self.name
    }
    /// True when a service is connected.
    fn service_is_ready(&self) -> PyResult<bool> {
        Ok(self.port.get("client")?.service_is_ready())
    }
    /// Waits (GIL released) up to `timeout_sec` (None: forever) for a
    /// service.
    #[pyo3(signature = (timeout_sec=None))]
    fn wait_for_service(&self, py: Python<'_>, timeout_sec: Option<f64>) -> PyResult<bool> {
        let c = self.port.get("client")?;
        wait_matched(py, timeout_sec, |slice| c.wait_for_service(slice))
    }
    /// Sends a request now; the answer arrives in the returned call.
    fn call_async(&self, data: &Bound<'_, PyAny>) -> PyResult<PendingCall> {
        let c = self.port.get("client")?;
        let req = RawBytes(convert::payload_bytes(data)?);
        Ok(PendingCall {
            fut: Mutex::new(Some(c.call_async(req))),
            result: Mutex::new(None),
            wake: self.node.wake.clone(),
            service: self.name.clone(),
        })
    }
    /// Waits for the service, sends the request and waits for the answer,
    /// all within `timeout_sec` (None: forever). Raises CallTimeout,
    /// ServiceUnavailable or RemoteError.
    #[pyo3(signature = (data, timeout_sec=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        timeout_sec: Option<f64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let t = convert::timeout(timeout_sec)?;
        let start = Instant::now();
        let end = t.map(|t| start + t);
        if !self.wait_for_service(py, timeout_sec)? {
            return Err(ServiceUnavailable::new_err(format!(
                "no service `{}` is available (waited {:?}); is the server running, in the same domain, with the same request/response types?",
                self.name,
                t.unwrap_or_default()
            )));
        }
        let call = self.call_async(data)?;
        let left = end.map(|e| e.saturating_duration_since(Instant::now()).as_secs_f64());
        call.result(py, left)
    }
    /// Leaves the graph.
    fn destroy(&self, py: Python<'_>) {
        self.port.destroy(py);
    }
}

/// A request in flight: `done()`, `result(timeout_sec)`; spinning the node
/// wakes when it completes.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct PendingCall {
    fut: Mutex<Option<CallFuture<RawBytes>>>,
    result: Mutex<Option<Result<Bytes, ferry::CallError>>>,
    wake: Arc<Wake>,
    service: String,
}

impl PendingCall {
    fn poll(&self) -> bool {
        if self.result.lock().is_some() {
            return true;
        }
        let mut g = self.fut.lock();
        let Some(f) = g.as_mut() else {
            return false;
        };
        let waker = Waker::from(self.wake.clone());
        match Pin::new(f).poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(r) => {
                *self.result.lock() = Some(r.map(|a| a.0.clone()));
                *g = None;
                true
            }
            Poll::Pending => false,
        }
    }
}

#[pymethods]
impl PendingCall {
    /// True once the answer (or the failure) is in.
    fn done(&self) -> bool {
        self.poll()
    }
    /// True when `cancel` was called before the answer.
    fn cancelled(&self) -> bool {
        self.fut.lock().is_none() && self.result.lock().is_none()
    }
    /// Stops waiting; a late answer is dropped.
    fn cancel(&self) {
        self.fut.lock().take();
    }
    /// The response bytes, waiting up to `timeout_sec` (None: forever; GIL
    /// released). Raises the call's error, or CallTimeout.
    #[pyo3(signature = (timeout_sec=None))]
    fn result<'py>(
        &self,
        py: Python<'py>,
        timeout_sec: Option<f64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let t = convert::timeout(timeout_sec)?;
        if !wait_woken(py, &self.wake, timeout_sec, || self.poll())? {
            if self.cancelled() {
                return Err(CallError::new_err(format!(
                    "the call to `{}` was cancelled",
                    self.service
                )));
            }
            return Err(CallTimeout::new_err(format!(
                "service `{}` did not answer within {:?}",
                self.service,
                t.unwrap_or_default()
            )));
        }
        match self.result.lock().as_ref() {
            Some(Ok(b)) => Ok(PyBytes::new(py, b)),
            Some(Err(e)) => Err(call_err(e)),
            None => Err(CallError::new_err(format!(
                "the call to `{}` was cancelled",
                self.service
            ))),
        }
    }
}

/// What a timer shares with the executor.
pub struct TimerCore {
    pub id: u64,
    period: Duration,
    next: Mutex<Instant>,
    cancelled: AtomicBool,
    callback: PyObject,
}

impl TimerCore {
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
    }
    /// Ok when due now; otherwise when it is due next (None: cancelled).
    pub fn due(&self, now: Instant) -> Result<(), Option<Instant>> {
        if self.cancelled.load(Ordering::Acquire) {
            return Err(None);
        }
        let next = *self.next.lock();
        if now >= next {
            Ok(())
        } else {
            Err(Some(next))
        }
    }
    /// Calls back if due; the next deadline skips missed periods.
    pub fn run(&self, py: Python<'_>, node: &NodeCore) -> PyResult<bool> {
        let now = Instant::now();
        if self.due(now).is_err() {
            return Ok(false);
        }
        {
            let mut next = self.next.lock();
            *next += self.period;
            if *next <= now {
                *next = now + self.period;
            }
        }
        if let Err(e) = self.callback.bind(py).call0() {
            node.report(py, "timer callback raised", e)?;
        }
        Ok(true)
    }
}

/// Calls back every period while the node spins.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Timer {
    core: Arc<TimerCore>,
    node: Arc<NodeCore>,
}

pub fn make_timer(node: &Arc<NodeCore>, period_sec: f64, callback: PyObject) -> PyResult<Timer> {
    if !(period_sec.is_finite() && period_sec > 0.0) {
        return Err(PyValueError::new_err(format!(
            "timer period must be a positive number of seconds, got {period_sec}"
        )));
    }
    let period = Duration::from_secs_f64(period_sec);
    let core = Arc::new(TimerCore {
        id: node.id(),
        period,
        next: Mutex::new(Instant::now() + period),
        cancelled: AtomicBool::new(false),
        callback,
    });
    node.add(Entity::Timer(core.clone()));
    Ok(Timer {
        core,
        node: node.clone(),
    })
}

#[pymethods]
impl Timer {
    /// The period in nanoseconds.
    #[getter]
    fn timer_period_ns(&self) -> u128 {
        self.core.period.as_nanos()
    }
    /// Stops calling back (until `reset`).
    fn cancel(&self) {
        self.core.cancel();
    }
    /// True after `cancel`.
    fn is_canceled(&self) -> bool {
        self.core.cancelled.load(Ordering::Acquire)
    }
    /// Restarts the period from now (and un-cancels).
    fn reset(&self) {
        *self.core.next.lock() = Instant::now() + self.core.period;
        self.core.cancelled.store(false, Ordering::Release);
        self.node.wake.bump();
    }
    /// Seconds until the next call (negative when overdue).
    fn time_until_next_call(&self) -> f64 {
        let next = *self.core.next.lock();
        let now = Instant::now();
        if next >= now {
            (next - now).as_secs_f64()
        } else {
            -(now - next).as_secs_f64()
        }
    }
    /// Removes the timer from its node.
    fn destroy(&self) {
        self.core.cancel();
        self.node.remove(self.core.id);
    }
}
