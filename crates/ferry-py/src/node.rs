//! The node: owns its ports, and runs their callbacks when Python spins it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{self, Kind};
use crate::exec::Wake;
use crate::ports::{self, Client, Publisher, Service, Subscription, Timer};
use crate::{BuildError, DestroyedError};

/// A port whose work the node's executor runs.
#[derive(Clone)]
pub enum Entity {
    /// A subscription with a callback.
    Sub(Arc<ports::SubCore>),
    /// A service.
    Srv(Arc<ports::SrvCore>),
    /// A timer.
    Timer(Arc<ports::TimerCore>),
}

impl Entity {
    fn id(&self) -> u64 {
        match self {
            Entity::Sub(s) => s.id,
            Entity::Srv(s) => s.id,
            Entity::Timer(t) => t.id,
        }
    }
    fn close(&self) {
        match self {
            Entity::Sub(s) => s.close(),
            Entity::Srv(s) => s.close(),
            Entity::Timer(t) => t.cancel(),
        }
    }
}

/// What the node shares with its ports.
pub struct NodeCore {
    /// The Rust node (`None` once destroyed).
    pub node: Mutex<Option<ferry::Node>>,
    /// Bumped by every queue push and call completion.
    pub wake: Arc<Wake>,
    entities: Mutex<Vec<Entity>>,
    /// Every port made, to close them all on destroy.
    closers: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    next_id: AtomicU64,
    /// Round robin over the ports.
    rr: AtomicUsize,
    /// Round robin of `Node::spin_once` over its one node.
    spin_rr: AtomicUsize,
    /// Exceptions raised by callbacks (reported, not propagated).
    pub callback_errors: AtomicU64,
}

impl NodeCore {
    /// The Rust node, or the error a destroyed node raises.
    pub fn with<R>(&self, f: impl FnOnce(&ferry::Node) -> PyResult<R>) -> PyResult<R> {
        match self.node.lock().as_ref() {
            Some(n) => f(n),
            None => Err(DestroyedError::new_err("this node was destroyed")),
        }
    }
    /// A fresh id for a port.
    pub fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
    /// Registers a port for spinning.
    pub fn add(&self, e: Entity) {
        self.entities.lock().push(e);
        self.wake.bump();
    }
    /// Registers how to close a port when the node is destroyed.
    pub fn on_destroy(&self, f: Box<dyn Fn() + Send + Sync>) {
        self.closers.lock().push(f);
    }
    /// Forgets a port (destroyed by the user).
    pub fn remove(&self, id: u64) {
        self.entities.lock().retain(|e| e.id() != id);
    }

    /// The next piece of work, round robin over the ports; or when the
    /// nearest timer is due.
    fn next_work(&self, now: Instant) -> Result<Entity, Option<Instant>> {
        let list = self.entities.lock().clone();
        let n = list.len();
        let start = self.rr.fetch_add(1, Ordering::Relaxed);
        let mut nearest: Option<Instant> = None;
        for k in 0..n {
            let e = &list[(start + k) % n];
            let ready = match e {
                Entity::Sub(s) => s.queue.len() > 0,
                Entity::Srv(s) => s.queue.len() > 0,
                Entity::Timer(t) => match t.due(now) {
                    Ok(()) => true,
                    Err(next) => {
                        nearest = match (nearest, next) {
                            (Some(a), Some(b)) => Some(a.min(b)),
                            (a, b) => a.or(b),
                        };
                        false
                    }
                },
            };
            if ready {
                return Ok(e.clone());
            }
        }
        Err(nearest)
    }

    /// Reports a callback's exception through Python's `logging` (logger
    /// `ferry`); exceptions that are not `Exception`s (KeyboardInterrupt,
    /// SystemExit) are handed back to propagate.
    pub fn report(&self, py: Python<'_>, what: &str, err: PyErr) -> PyResult<()> {
        if !err.is_instance_of::<PyException>(py) {
            return Err(err);
        }
        self.callback_errors.fetch_add(1, Ordering::Relaxed);
        let logged = (|| -> PyResult<()> {
            let logger = py
                .import("logging")?
                .call_method1("getLogger", ("ferry",))?;
            let kw = PyDict::new(py);
            kw.set_item("exc_info", err.value(py))?;
            logger.call_method("error", ("%s", what), Some(&kw))?;
            Ok(())
        })();
        if logged.is_err() {
            eprintln!("ferry: {what}");
            err.print(py);
        }
        Ok(())
    }

    fn run(&self, py: Python<'_>, e: &Entity) -> PyResult<bool> {
        match e {
            Entity::Sub(s) => s.run_one(py, self),
            Entity::Srv(s) => s.run_one(py, self),
            Entity::Timer(t) => t.run(py, self),
        }
    }

    /// True until destroyed.
    pub fn alive(&self) -> bool {
        self.node.lock().is_some()
    }
}

/// Runs at most one ready callback of `nodes` (round robin over nodes, then
/// ports), waiting on `wake` up to `timeout` (`None`: forever) for one. True
/// when one ran.
pub fn spin_nodes(
    py: Python<'_>,
    nodes: &[Arc<NodeCore>],
    wake: &Arc<Wake>,
    rr: &AtomicUsize,
    timeout: Option<Duration>,
) -> PyResult<bool> {
    let start = Instant::now();
    let end = timeout.map(|t| start + t);
    loop {
        let seen = wake.epoch();
        let now = Instant::now();
        let first = rr.fetch_add(1, Ordering::Relaxed);
        let mut nearest: Option<Instant> = None;
        let mut ran = None;
        for k in 0..nodes.len() {
            let node = &nodes[(first + k) % nodes.len()];
            match node.next_work(now) {
                Ok(e) => {
                    ran = Some(node.run(py, &e)?);
                    break;
                }
                Err(Some(t)) => nearest = Some(nearest.map_or(t, |n| n.min(t))),
                Err(None) => {}
            }
        }
        match ran {
            Some(true) => return Ok(true),
            Some(false) => continue,
            None => {}
        }
        if end.is_some_and(|e| now >= e) {
            return Ok(false);
        }
        // Wake at least every 50 ms to let Python run signal handlers
        // (Ctrl-C) while we sleep without the GIL.
        let mut until = now + Duration::from_millis(50);
        for t in [end, nearest].into_iter().flatten() {
            until = until.min(t);
        }
        let w = wake.clone();
        py.allow_threads(move || w.wait(seen, until));
        py.check_signals()?;
    }
}

/// A ferry node (use `ferry.Node`, which wraps this).
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Node {
    pub(crate) core: Arc<NodeCore>,
}

/// A Rust error as a Python `BuildError` with its message.
pub fn build_err(e: impl std::fmt::Display) -> PyErr {
    BuildError::new_err(e.to_string())
}

#[pymethods]
impl Node {
    /// Creates a node: `name`, `namespace` ("/" by default), a domain id
    /// (default: config or 0), and a TOML config file (default:
    /// `FERRY_CONFIG`/environment).
    #[new]
    #[pyo3(signature = (name, namespace=None, domain_id=None, config_file=None))]
    fn new(
        py: Python<'_>,
        name: &str,
        namespace: Option<&str>,
        domain_id: Option<u16>,
        config_file: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let mut b = ferry::Node::builder().name(name);
        if let Some(ns) = namespace {
            b = b.namespace(ns);
        }
        if let Some(d) = domain_id {
            b = b.domain_id(d);
        }
        if let Some(path) = config_file {
            b = b.config(ferry::Config::from_file(path).map_err(build_err)?);
        }
        let node = py.allow_threads(move || b.build()).map_err(build_err)?;
        Ok(Node {
            core: Arc::new(NodeCore {
                node: Mutex::new(Some(node)),
                wake: Arc::new(Wake::default()),
                entities: Mutex::new(Vec::new()),
                closers: Mutex::new(Vec::new()),
                next_id: AtomicU64::new(1),
                rr: AtomicUsize::new(0),
                spin_rr: AtomicUsize::new(0),
                callback_errors: AtomicU64::new(0),
            }),
        })
    }

    /// The node's name.
    #[getter]
    fn name(&self) -> PyResult<String> {
        self.core.with(|n| Ok(n.name().to_string()))
    }
    /// The node's namespace.
    #[getter]
    fn namespace(&self) -> PyResult<String> {
        self.core.with(|n| Ok(n.namespace().to_string()))
    }
    /// `/namespace/name`.
    #[getter]
    fn fully_qualified_name(&self) -> PyResult<String> {
        self.core.with(|n| Ok(n.fully_qualified_name()))
    }
    /// The discovery domain.
    #[getter]
    fn domain_id(&self) -> PyResult<u16> {
        self.core.with(|n| Ok(n.domain_id()))
    }
    /// Counters of this node's runtime's discovery, as a dict.
    fn discovery_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.core.with(|n| Ok(n.discovery_stats()))?;
        let d = PyDict::new(py);
        for (k, v) in [
            ("sent", s.sent),
            ("received", s.received),
            ("malformed", s.malformed),
            ("foreign_domain", s.foreign_domain),
            ("not_owner", s.not_owner),
            ("refused", s.refused),
            ("not_loopback", s.not_loopback),
            ("evicted", s.evicted),
        ] {
            d.set_item(k, v)?;
        }
        // Signed discovery's refusals, flat: `security_unsigned`, ….
        for (k, v) in s.security.entries() {
            d.set_item(format!("security_{k}"), v)?;
        }
        Ok(d)
    }
    /// Counters of this node's runtime's incoming connections, as a dict.
    fn connection_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.core.with(|n| Ok(n.connection_stats()))?;
        let d = PyDict::new(py);
        for (k, v) in [
            ("accepted", s.accepted),
            ("no_hello", s.no_hello),
            ("bad_hello", s.bad_hello),
            ("evicted", s.evicted),
            ("refused", s.refused),
            ("fd_exhausted", s.fd_exhausted),
            ("tls_refused", s.tls_refused),
            ("denied", s.denied),
            ("admin_denied", s.admin_denied),
            ("udp_sessions", s.udp.sessions),
            ("udp_shake_refused", s.udp.shake_refused),
            ("udp_aead_failed", s.udp.aead_failed),
            ("udp_replayed", s.udp.replayed),
            ("udp_plaintext_refused", s.udp.plaintext_refused),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }
    /// Exceptions raised by this node's callbacks so far (each was logged).
    #[getter]
    fn callback_errors(&self) -> u64 {
        self.core.callback_errors.load(Ordering::Relaxed)
    }
    /// The fully qualified name a topic resolves to from this node.
    fn resolve(&self, topic: &str) -> PyResult<String> {
        self.core.with(|n| n.resolve(topic).map_err(build_err))
    }

    /// A raw publisher announcing `type_name`/`type_hash` (16 bytes; all
    /// zero = any type).
    fn publisher(
        &self,
        py: Python<'_>,
        topic: &str,
        type_name: &str,
        type_hash: [u8; 32],
        qos: &Bound<'_, PyDict>,
    ) -> PyResult<Publisher> {
        let qos = convert::qos_from(qos)?;
        ports::make_publisher(py, &self.core, topic, (type_name, type_hash), qos)
    }

    /// A raw subscription; with a callback its samples run in `spin_once`,
    /// without one they wait in its queue (`take`, `recv`, asyncio).
    #[pyo3(signature = (topic, type_name, type_hash, qos, kind, callback=None))]
    #[allow(clippy::too_many_arguments)]
    fn subscription(
        &self,
        py: Python<'_>,
        topic: &str,
        type_name: &str,
        type_hash: [u8; 32],
        qos: &Bound<'_, PyDict>,
        kind: &Bound<'_, PyAny>,
        callback: Option<PyObject>,
    ) -> PyResult<Subscription> {
        let qos = convert::qos_from(qos)?;
        let kind = Kind::from_py(kind)?;
        ports::make_subscription(
            py,
            &self.core,
            topic,
            (type_name, type_hash),
            qos,
            kind,
            callback,
        )
    }

    /// A service: `handler(request_bytes) -> response_bytes` runs in
    /// `spin_once`. Types are `(name, hash)` of request and response.
    fn service(
        &self,
        py: Python<'_>,
        name: &str,
        request: (String, [u8; 32]),
        response: (String, [u8; 32]),
        handler: PyObject,
    ) -> PyResult<Service> {
        ports::make_service(py, &self.core, name, request, response, handler)
    }

    /// A client of a service with request/response types `(name, hash)`.
    fn client(
        &self,
        py: Python<'_>,
        name: &str,
        request: (String, [u8; 32]),
        response: (String, [u8; 32]),
    ) -> PyResult<Client> {
        ports::make_client(py, &self.core, name, request, response)
    }

    /// A timer calling `callback()` every `period_sec` seconds in
    /// `spin_once`.
    fn timer(&self, period_sec: f64, callback: PyObject) -> PyResult<Timer> {
        ports::make_timer(&self.core, period_sec, callback)
    }

    /// Runs at most one ready callback, waiting up to `timeout_sec` (None:
    /// until one is ready). True when a callback ran. The GIL is released
    /// while waiting; Ctrl-C raises KeyboardInterrupt.
    #[pyo3(signature = (timeout_sec=None))]
    fn spin_once(&self, py: Python<'_>, timeout_sec: Option<f64>) -> PyResult<bool> {
        if !self.core.alive() {
            return Err(DestroyedError::new_err("this node was destroyed"));
        }
        let t = convert::timeout(timeout_sec)?;
        spin_nodes(
            py,
            std::slice::from_ref(&self.core),
            &self.core.wake,
            &self.core.spin_rr,
            t,
        )
    }

    /// Topics this node knows of, with their types.
    fn topic_names_and_types(&self) -> PyResult<Vec<(String, Vec<String>)>> {
        self.core.with(|n| Ok(n.graph().topics()))
    }
    /// Services this node knows of, with their types.
    fn service_names_and_types(&self) -> PyResult<Vec<(String, Vec<String>)>> {
        self.core.with(|n| Ok(n.graph().services()))
    }
    /// Nodes this node knows of (fully qualified names).
    fn node_names(&self) -> PyResult<Vec<String>> {
        self.core.with(|n| Ok(n.graph().node_names()))
    }

    /// Closes every port and leaves the graph. Idempotent.
    fn destroy(&self, py: Python<'_>) {
        let entities = std::mem::take(&mut *self.core.entities.lock());
        for e in &entities {
            e.close();
        }
        let closers = std::mem::take(&mut *self.core.closers.lock());
        let node = self.core.node.lock().take();
        py.allow_threads(move || {
            for c in &closers {
                c();
            }
            drop(node);
        });
        self.core.wake.bump();
    }

    /// True until `destroy`.
    #[getter]
    fn alive(&self) -> bool {
        self.core.node.lock().is_some()
    }
}

/// Spins several nodes on one thread (`ferry.executors.SingleThreadedExecutor`
/// wraps this): callbacks of all of them, one at a time, round robin.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Executor {
    wake: Arc<Wake>,
    nodes: Mutex<Vec<Arc<NodeCore>>>,
    rr: AtomicUsize,
}

#[pymethods]
impl Executor {
    #[new]
    fn new() -> Self {
        Executor {
            wake: Arc::new(Wake::default()),
            nodes: Mutex::new(Vec::new()),
            rr: AtomicUsize::new(0),
        }
    }
    /// Adds a node (no-op when already there). False when it is destroyed.
    fn add_node(&self, node: &Node) -> bool {
        if !node.core.alive() {
            return false;
        }
        let mut nodes = self.nodes.lock();
        if !nodes.iter().any(|n| Arc::ptr_eq(n, &node.core)) {
            node.core.wake.listen(&self.wake);
            nodes.push(node.core.clone());
        }
        self.wake.bump();
        true
    }
    /// Removes a node.
    fn remove_node(&self, node: &Node) {
        node.core.wake.unlisten(&self.wake);
        self.nodes.lock().retain(|n| !Arc::ptr_eq(n, &node.core));
    }
    /// Nodes still alive in this executor.
    fn node_count(&self) -> usize {
        let mut nodes = self.nodes.lock();
        nodes.retain(|n| n.alive());
        nodes.len()
    }
    /// Runs at most one ready callback of any of its nodes, waiting up to
    /// `timeout_sec` (None: until one is ready). True when one ran.
    #[pyo3(signature = (timeout_sec=None))]
    fn spin_once(&self, py: Python<'_>, timeout_sec: Option<f64>) -> PyResult<bool> {
        let t = convert::timeout(timeout_sec)?;
        let nodes: Vec<Arc<NodeCore>> = {
            let mut n = self.nodes.lock();
            n.retain(|c| c.alive());
            n.clone()
        };
        if nodes.is_empty() {
            if let Some(t) = t {
                let w = self.wake.clone();
                let (seen, until) = (w.epoch(), Instant::now() + t);
                py.allow_threads(move || w.wait(seen, until));
            }
            return Ok(false);
        }
        spin_nodes(py, &nodes, &self.wake, &self.rr, t)
    }
}
