//! The Zenoh path of one ferry runtime (`[zenoh]`): one Zenoh session, a
//! liveliness token per node and per endpoint as rmw_zenoh declares them,
//! a Zenoh publisher beside every ferry publisher (zenoh-ext's advanced one,
//! with a cache, for transient local; a plain one, which puts the same
//! bytes more cheaply, for volatile) and an advanced subscriber beside
//! every ferry subscriber, on rmw_zenoh's key expressions, with rmw_zenoh's
//! attachment on every sample.
//!
//! **Who gets samples over Zenoh.** A publisher puts a sample only while a
//! subscription on its topic needs it ([`Graph::endpoints`]): a ROS 2
//! node's, or a ferry runtime's that this publisher has no direct link to
//! (another site behind a router). A ferry runtime says which participant
//! its session runs with a `@ferry_lv` token. Transient-local publishers
//! always put (their cache serves late joiners, as rmw_zenoh's does).
//!
//! **No duplicates.** A sample from a ferry publisher arrives as from that
//! publisher's endpoint, numbered with its own sequence number (the
//! attachment carries it), and goes through the same check as the MQTT
//! broker's (`Inbox::broker_sample`): a direct path that covers it wins, so
//! at a hand-over between Zenoh and a direct path each sample goes through
//! once. Samples from this runtime itself are never taken (Zenoh's
//! `allowed_origin = remote`, and the GIDs of its own publishers, whose
//! caches also answer its own history queries): its subscribers have them
//! already.
//!
//! **Reliable means reliable.** rmw_zenoh lets Zenoh drop a reliable
//! keep-last sample when its queue is full (congestion control `Drop`);
//! ferry blocks instead (`Block`, for every reliable publisher): in the
//! fleet bench, 50 robots starting together on two cores lost 26–65 of
//! 50,000 telemetry samples with `Drop` (not recovered by Zenoh's miss
//! detection) and none with `Block`. The choice is the sender's alone:
//! nothing on the wire changes.
//!
//! **Trust.** Everything is the peer's word — its tokens, its attachment,
//! the ferry participant it claims: anyone the Zenoh network lets in.
//! Security `enforce` keeps the path off (the runtime refuses it); put
//! TLS (and mTLS) on the Zenoh links for confidentiality.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_transport::config::zenoh::ZenohConfig;
use ferry_transport::priority::{Applied, Packets, Priority, PriorityError};
use ferry_transport::stats::{now_ns, ConnStats};
use ferry_transport::transport::{
    deliver_sample, lookup_reader, InboundConn, Inbox, Link, OutFrame, SendError,
};
use ferry_wire::{
    Durability, EndpointId, History, ParticipantId, Qos, Reliability, TransportKind, TypeHash,
};
use parking_lot::Mutex;
use zenoh::bytes::ZBytes;
use zenoh::liveliness::LivelinessToken;
use zenoh::qos::CongestionControl;
use zenoh::sample::{Locality, Sample, SampleKind};
use zenoh::Wait;
use zenoh_ext::{
    AdvancedPublisher, AdvancedPublisherBuilderExt, AdvancedSubscriberBuilderExt, CacheConfig,
    HistoryConfig, MissDetectionConfig, RecoveryConfig,
};

use crate::graph::{ferry_token, Graph, Publisher, FERRY_SPACE};
use crate::token::{EntityKind, Token, TopicInfo, ADMIN_SPACE};
use crate::{data_key, Attachment, KeyError, RmwQos, TokenError};

/// Most publishers one ferry subscriber keeps a connection record for.
const MAX_WRITERS_PER_READER: usize = 1024;

/// How long a publisher trusts its last look at who needs its samples.
const NEED_FRESH: Duration = Duration::from_millis(200);

/// What a ferry endpoint's Zenoh link stands for in its port: Zenoh itself
/// (the subscriptions or services it reaches are its business).
pub const ZENOH_ENDPOINT: EndpointId = EndpointId {
    participant: ParticipantId(0),
    entity: u32::MAX - 2,
};

/// Batches (64 KiB each, allocated when first needed) in a link's queue of
/// data-priority messages; Zenoh's default is 2. A transient-local
/// publisher's cache answers a subscriber's history query from the link's
/// receive task, blocking while the queue is full; after a router restart
/// every subscriber asks again at once, and with two batches a robot's
/// receive task was seen blocked for seconds (`docs/ZENOH.md`).
pub const TX_QUEUE_BATCHES: usize = 16;

/// rmw_zenoh's heartbeat period of reliable transient-local publishers.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// Why the Zenoh path or one of its endpoints could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ZenohError {
    /// The session's configuration (a value Zenoh refused).
    #[error("Zenoh configuration `{key}`: {why}")]
    Config {
        /// Zenoh's key.
        key: &'static str,
        /// Zenoh's reason.
        why: String,
    },
    /// The session did not open (a client whose router is unreachable, a
    /// port in use, a TLS file missing).
    #[error(
        "cannot open the Zenoh session ({mode}, connect {connect:?}, listen {listen:?}): {why}"
    )]
    Open {
        /// Peer, client or router.
        mode: &'static str,
        /// Where it connects.
        connect: Vec<String>,
        /// Where it listens.
        listen: Vec<String>,
        /// Zenoh's reason.
        why: String,
    },
    /// A name or type with no rmw_zenoh key expression.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A token rmw_zenoh could not read back.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// Zenoh refused a declaration.
    #[error("Zenoh refused the {what}: {why}")]
    Declare {
        /// What was declared.
        what: &'static str,
        /// Zenoh's reason.
        why: String,
    },
}

impl ZenohError {
    /// Zenoh refused to declare `what`: the error, from Zenoh's.
    pub(crate) fn declare<E: std::fmt::Display>(
        what: &'static str,
    ) -> impl FnOnce(E) -> ZenohError {
        move |e| ZenohError::Declare {
            what,
            why: e.to_string(),
        }
    }
}

/// What the path needs of the runtime.
#[derive(Debug, Clone)]
pub struct PathConfig {
    /// The ferry runtime (its `@ferry_lv` token).
    pub runtime: ParticipantId,
    /// The ROS domain of keys and tokens.
    pub domain: u32,
    /// The session's settings.
    pub zenoh: ZenohConfig,
    /// How long a keep-all publisher may block on Zenoh.
    pub keep_all_block: Duration,
}

/// Whether a ferry publisher reaches ferry reader `r` over a path of its
/// own.
pub type Reached = Arc<dyn Fn(EndpointId) -> bool + Send + Sync>;

/// Most samples a transient-local endpoint keeps (keep all) or asks for.
const MAX_HISTORY: usize = 10_000;

/// How long an advanced subscriber waits for a publisher's cache.
const HISTORY_TIMEOUT: Duration = Duration::from_secs(60);

/// The depth Zenoh's cache and history use for `history` (rmw_zenoh's
/// default depth, 42, for keep last 0).
fn depth(history: History) -> usize {
    match history {
        History::KeepLast(0) => 42,
        History::KeepLast(n) => (n as usize).min(MAX_HISTORY),
        History::KeepAll => MAX_HISTORY,
    }
}

/// The Zenoh session as `ferry doctor` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// Its Zenoh id.
    pub zid: String,
    /// Peer, client or router.
    pub mode: &'static str,
    /// The routers it is connected to (their ids).
    pub routers: Vec<String>,
    /// The peers it is connected to.
    pub peers: Vec<String>,
}

struct NodeEntry {
    namespace: String,
    name: String,
    _token: LivelinessToken,
}

/// A ferry subscriber's or service's Zenoh side: its subscriber or
/// queryable, and its token.
pub(crate) struct ReaderEntry {
    pub(crate) _endpoint: Box<dyn std::any::Any + Send + Sync>,
    pub(crate) _token: LivelinessToken,
}

/// The Zenoh path of one runtime.
pub struct ZenohPath {
    // Field order: endpoints, then the graph's subscribers, then the session.
    pub(crate) readers: Mutex<HashMap<EndpointId, ReaderEntry>>,
    nodes: Mutex<HashMap<u32, NodeEntry>>,
    _graph_subs: Vec<zenoh::pubsub::Subscriber<()>>,
    /// Asks again for every token when a transport opens.
    _resync: zenoh::session::TransportEventsListener<()>,
    _ferry: LivelinessToken,
    pub(crate) graph: Arc<Mutex<Graph>>,
    /// The graph's generation, read without its lock ([`Graph::changes`]).
    pub(crate) changes: Arc<AtomicU64>,
    /// The GIDs of this runtime's own publishers: their samples (a
    /// transient-local cache answers this session too) are never taken.
    own: Arc<Mutex<std::collections::HashSet<[u8; 16]>>>,
    zid: String,
    cfg: PathConfig,
    pub(crate) session: zenoh::Session,
}

/// Feeds a token that appeared (`Put`) or went (`Delete`) to the graph.
fn on_token(graph: &Mutex<Graph>, s: &Sample) {
    let key = s.key_expr().as_str();
    match s.kind() {
        SampleKind::Put => {
            if let Err(e) = graph.lock().put(key) {
                tracing::debug!("Zenoh graph: token `{key}` refused: {e}");
            }
        }
        SampleKind::Delete => graph.lock().delete(key),
    }
}

/// A liveliness subscriber's history covers only the sessions connected
/// when it is declared: the tokens of a router or peer that connects later
/// (ours came up after the session opened, or came back after an outage)
/// are asked for again, by a thread of the path's (a Zenoh callback must
/// not wait on Zenoh). The thread ends with the listener.
fn resync_on_connect(
    session: &zenoh::Session,
    graph: &Arc<Mutex<Graph>>,
    domain: u32,
) -> Result<zenoh::session::TransportEventsListener<()>, ZenohError> {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let tx = Mutex::new(tx);
    let listener = session
        .info()
        .transport_events_listener()
        .history(true)
        .callback(move |ev: zenoh::session::TransportEvent| {
            if ev.kind() == SampleKind::Put {
                let _ = tx.lock().send(());
            }
        })
        .wait()
        .map_err(ZenohError::declare("transport listener"))?;
    let (session, graph) = (session.clone(), graph.clone());
    std::thread::Builder::new()
        .name("ferry-zenoh-graph".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                while rx.try_recv().is_ok() {}
                for space in [ADMIN_SPACE, FERRY_SPACE] {
                    let g = graph.clone();
                    let asked = session
                        .liveliness()
                        .get(format!("{space}/{domain}/**"))
                        .callback(move |r: zenoh::query::Reply| {
                            if let Ok(s) = r.result() {
                                on_token(&g, s);
                            }
                        })
                        .wait();
                    if let Err(e) = asked {
                        tracing::debug!("Zenoh graph: cannot ask for tokens: {e}");
                    }
                }
            }
        })
        .map_err(ZenohError::declare("graph thread"))?;
    Ok(listener)
}

/// The Zenoh configuration of `z` (as JSON5 values Zenoh parses).
fn zenoh_config(z: &ZenohConfig) -> Result<zenoh::Config, ZenohError> {
    let mut c = zenoh::Config::default();
    let json = |v: &[String]| format!("{v:?}");
    let mut set = |key: &'static str, value: String| {
        c.insert_json5(key, &value).map_err(|e| ZenohError::Config {
            key,
            why: e.to_string(),
        })
    };
    set("mode", format!("{:?}", z.mode.as_str()))?;
    set("connect/endpoints", json(&z.connect))?;
    set("listen/endpoints", json(&z.listen_endpoints()))?;
    set(
        "scouting/multicast/enabled",
        z.multicast_scouting.to_string(),
    )?;
    // rmw_zenoh's: service calls wait up to 10 minutes.
    set("queries_default_timeout", "600000".into())?;
    // Room for a history reply burst: see TX_QUEUE_BATCHES.
    set(
        "transport/link/tx/queue/size/data",
        TX_QUEUE_BATCHES.to_string(),
    )?;
    if let Some(t) = &z.tls {
        let path = |p: &std::path::Path| format!("{:?}", p.display().to_string());
        set("transport/link/tls/root_ca_certificate", path(&t.root_ca))?;
        if let (Some(cert), Some(key)) = (&t.cert, &t.key) {
            set("transport/link/tls/listen_certificate", path(cert))?;
            set("transport/link/tls/listen_private_key", path(key))?;
            set("transport/link/tls/connect_certificate", path(cert))?;
            set("transport/link/tls/connect_private_key", path(key))?;
        }
        set("transport/link/tls/enable_mtls", t.mtls.to_string())?;
    }
    if let Some(a) = &z.auth {
        if let Some(user) = &a.user {
            // (The error names the key already: its reason, not itself again.)
            let password = a.password().map_err(|e| ZenohError::Config {
                key: "zenoh.auth.password_file",
                why: match e {
                    ferry_transport::config::ConfigError::Invalid { why, .. } => why,
                    other => other.to_string(),
                },
            })?;
            set("transport/auth/usrpwd/user", format!("{user:?}"))?;
            set(
                "transport/auth/usrpwd/password",
                format!("{:?}", password.unwrap_or_default()),
            )?;
        }
        if let Some(d) = &a.dictionary_file {
            set(
                "transport/auth/usrpwd/dictionary_file",
                format!("{:?}", d.display().to_string()),
            )?;
        }
    }
    Ok(c)
}

impl ZenohPath {
    /// Opens the session of `cfg`, declares the runtime's `@ferry_lv` token
    /// and starts following the domain's graph.
    pub fn start(cfg: PathConfig) -> Result<Arc<ZenohPath>, ZenohError> {
        let z = &cfg.zenoh;
        let session = zenoh::open(zenoh_config(z)?)
            .wait()
            .map_err(|e| ZenohError::Open {
                mode: z.mode.as_str(),
                connect: z.connect.clone(),
                listen: z.listen_endpoints(),
                why: e.to_string(),
            })?;
        let zid = session.zid().to_string();
        let graph = Arc::new(Mutex::new(Graph::new(cfg.domain, &zid)));
        let changes = graph.lock().changes();
        let mut subs = Vec::new();
        for space in [ADMIN_SPACE, FERRY_SPACE] {
            let g = graph.clone();
            let sub = session
                .liveliness()
                .declare_subscriber(format!("{space}/{}/**", cfg.domain))
                .history(true)
                .callback(move |s: Sample| on_token(&g, &s))
                .wait()
                .map_err(ZenohError::declare("graph's liveliness subscriber"))?;
            subs.push(sub);
        }
        let resync = resync_on_connect(&session, &graph, cfg.domain)?;
        let ferry = session
            .liveliness()
            .declare_token(ferry_token(cfg.domain, &zid, cfg.runtime))
            .wait()
            .map_err(ZenohError::declare("runtime's token"))?;
        Ok(Arc::new(ZenohPath {
            readers: Mutex::new(HashMap::new()),
            nodes: Mutex::new(HashMap::new()),
            _graph_subs: subs,
            _resync: resync,
            _ferry: ferry,
            changes,
            graph,
            own: Arc::default(),
            zid,
            cfg,
            session,
        }))
    }

    /// The ROS domain of keys and tokens.
    pub fn domain(&self) -> u32 {
        self.cfg.domain
    }

    /// This session's Zenoh id (what the runtime announces in ferry's
    /// discovery as `zenoh/<zid>`, so that others believe its claim).
    pub fn zid(&self) -> &str {
        &self.zid
    }

    /// Ferry's discovery knows participant `p`, which runs the Zenoh
    /// session `zid` (None: none): see [`Graph::discovered`].
    pub fn discovered(&self, p: ParticipantId, zid: Option<&str>) {
        self.graph.lock().discovered(p, zid);
    }

    /// Participant `p` left ferry's discovery ([`Graph::left`]).
    pub fn left(&self, p: ParticipantId) {
        self.graph.lock().left(p);
    }

    /// The session's id, mode and connections now.
    pub fn info(&self) -> SessionInfo {
        let info = self.session.info();
        SessionInfo {
            zid: self.zid.clone(),
            mode: self.cfg.zenoh.mode.as_str(),
            routers: info.routers_zid().wait().map(|z| z.to_string()).collect(),
            peers: info.peers_zid().wait().map(|z| z.to_string()).collect(),
        }
    }

    /// Every other session's nodes and endpoints in the domain, as their
    /// tokens say (sorted by token), each with the ferry runtime its
    /// session declared, if any.
    pub fn tokens_with_runtime(&self) -> Vec<(Token, Option<ParticipantId>)> {
        let g = self.graph.lock();
        g.tokens()
            .into_iter()
            .map(|t| {
                let p = g.ferry_runtime(&t.zid);
                (t, p)
            })
            .collect()
    }

    pub(crate) fn declare(&self, token: &Token) -> Result<LivelinessToken, ZenohError> {
        token.check()?;
        self.session
            .liveliness()
            .declare_token(token.key_expr())
            .wait()
            .map_err(ZenohError::declare("liveliness token"))
    }

    fn node_token(&self, node: u32, kind: EntityKind, id: u32) -> Token {
        let nodes = self.nodes.lock();
        let (namespace, name) = nodes
            .get(&node)
            .map(|n| (n.namespace.clone(), n.name.clone()))
            .unwrap_or_else(|| ("/".into(), format!("ferry_node_{node}")));
        Token {
            domain: self.cfg.domain,
            zid: self.zid.clone(),
            nid: node.to_string(),
            id: id.to_string(),
            kind,
            enclave: self.cfg.zenoh.enclave.clone(),
            namespace,
            node: name,
            topic: None,
        }
    }

    /// A ferry node joins rmw_zenoh's graph (its `NN` token). A node whose
    /// names no token can carry is logged and stays out.
    pub fn add_node(&self, node: u32, namespace: &str, name: &str) {
        let mut t = self.node_token(node, EntityKind::Node, node);
        t.namespace = namespace.to_string();
        t.node = name.to_string();
        match self.declare(&t) {
            Ok(token) => {
                self.nodes.lock().insert(
                    node,
                    NodeEntry {
                        namespace: namespace.to_string(),
                        name: name.to_string(),
                        _token: token,
                    },
                );
            }
            Err(e) => tracing::warn!("node `{name}` stays out of rmw_zenoh's graph: {e}"),
        }
    }

    /// A ferry node leaves it.
    pub fn remove_node(&self, node: u32) {
        let gone = self.nodes.lock().remove(&node);
        drop(gone);
    }

    /// The key, token and RMW type name of endpoint `id` of `node`.
    pub(crate) fn endpoint(
        &self,
        node: u32,
        id: EndpointId,
        kind: EntityKind,
        topic: &str,
        (type_name, type_hash): (&str, &TypeHash),
        qos: &Qos,
    ) -> Result<(String, Token, String), ZenohError> {
        let key = data_key(self.cfg.domain, topic, type_name, type_hash)?;
        let rmw_type = ferry_wire::ros_names::dds_type_name(type_name)
            .ok_or_else(|| KeyError::Type(type_name.to_string()))?;
        let mut t = self.node_token(node, kind, id.entity);
        t.topic = Some(TopicInfo {
            name: topic.to_string(),
            type_name: rmw_type.clone(),
            type_hash: type_hash.to_string(),
            qos: RmwQos::from_ferry(qos),
        });
        Ok((key, t, rmw_type))
    }

    /// The Zenoh publisher beside ferry publisher `id` of node `node`: a
    /// link that puts each sample while a subscription needs it (see the
    /// module docs); `reached` says which ferry runtimes the publisher
    /// reaches on its own paths.
    pub fn writer_link(
        self: &Arc<Self>,
        node: u32,
        id: EndpointId,
        topic: &str,
        ty: (&str, &TypeHash),
        qos: &Qos,
        reached: Reached,
    ) -> Result<Arc<ZenohLink>, ZenohError> {
        let (key, token, rmw_type) =
            self.endpoint(node, id, EntityKind::Publisher, topic, ty, qos)?;
        let reliable = qos.reliability == Reliability::Reliable;
        let keep_all = reliable && qos.history == History::KeepAll;
        let durable = qos.durability == Durability::TransientLocal;
        let b = self
            .session
            .declare_publisher(key.clone())
            .congestion_control(if reliable {
                CongestionControl::Block
            } else {
                CongestionControl::Drop
            })
            .reliability(if reliable {
                zenoh::qos::Reliability::Reliable
            } else {
                zenoh::qos::Reliability::BestEffort
            })
            .allowed_destination(Locality::Remote);
        let publisher = if durable {
            // A cache for late subscribers (and, reliable, heartbeats that
            // let a subscriber ask for what it missed): zenoh-ext's advanced
            // publisher, as rmw_zenoh declares one.
            let mut b = b
                .advanced()
                .publisher_detection()
                .cache(CacheConfig::default().max_samples(depth(qos.history)));
            if reliable {
                b = b.sample_miss_detection(
                    MissDetectionConfig::default().sporadic_heartbeat(HEARTBEAT),
                );
            }
            ZenohPublisher::Advanced(b.wait().map_err(ZenohError::declare("publisher"))?)
        } else {
            // Volatile: an advanced publisher without cache or detection
            // puts exactly what a plain one does, at a higher cost per put.
            ZenohPublisher::Plain(b.wait().map_err(ZenohError::declare("publisher"))?)
        };
        let rmw_token = self.declare(&token)?;
        let gid = token.gid();
        self.own.lock().insert(gid);
        Ok(Arc::new(ZenohLink {
            path: self.clone(),
            locator: format!("zenoh/{key}"),
            topic: topic.to_string(),
            type_name: rmw_type,
            gid,
            durable,
            keep_all: keep_all.then_some(self.cfg.keep_all_block),
            publisher: Mutex::new(Some((publisher, rmw_token))),
            reached,
            need: Need::default(),
            stats: ConnStats::new(),
            priority: Mutex::new(Priority::default()),
            closed: AtomicBool::new(false),
            warned: AtomicBool::new(false),
        }))
    }

    /// The Zenoh subscriber beside ferry subscriber `id` of node `node`:
    /// samples of other sessions' publishers go to the subscriber (found in
    /// the process's reader registry), one connection per publisher.
    pub fn subscribe(
        self: &Arc<Self>,
        node: u32,
        id: EndpointId,
        topic: &str,
        ty: (&str, &TypeHash),
        qos: &Qos,
    ) -> Result<(), ZenohError> {
        let (key, token, _) = self.endpoint(node, id, EntityKind::Subscription, topic, ty, qos)?;
        let locator = format!("zenoh/{key}");
        let (graph, own) = (self.graph.clone(), self.own.clone());
        let changes = self.changes.clone();
        let writers = Mutex::new(Writers::default());
        // (The subscriber's inbox, found once: not a registry lookup per
        // sample.)
        let found: std::sync::OnceLock<Weak<dyn Inbox>> = std::sync::OnceLock::new();
        let on_sample = move |s: Sample| {
            let inbox = match found.get() {
                Some(w) => w.upgrade(),
                None => lookup_reader(id).inspect(|i| {
                    let _ = found.set(Arc::downgrade(i));
                }),
            };
            let Some(inbox) = inbox else {
                return;
            };
            let generation = changes.load(Ordering::Acquire);
            writers
                .lock()
                .take(&s, &*inbox, (&graph, generation), &own, &locator);
        };
        let b = self
            .session
            .declare_subscriber(key)
            .allowed_origin(Locality::Remote);
        let subscriber: Box<dyn std::any::Any + Send + Sync> =
            if qos.durability == Durability::TransientLocal {
                // (rmw_zenoh waits for caches for ever: one peer that never
                // answers would hold this subscriber's first samples for good.)
                let mut b = b
                    .advanced()
                    .subscriber_detection()
                    .query_timeout(HISTORY_TIMEOUT)
                    .history(
                        HistoryConfig::default()
                            .detect_late_publishers()
                            .max_samples(depth(qos.history)),
                    );
                if qos.reliability == Reliability::Reliable {
                    b = b.recovery(RecoveryConfig::default().heartbeat());
                }
                Box::new(
                    b.callback(on_sample)
                        .wait()
                        .map_err(ZenohError::declare("subscriber"))?,
                )
            } else {
                // Volatile: no history to ask for and nothing to recover, so a
                // plain subscriber (an advanced one costs more per sample).
                Box::new(
                    b.callback(on_sample)
                        .wait()
                        .map_err(ZenohError::declare("subscriber"))?,
                )
            };
        let rmw_token = self.declare(&token)?;
        self.readers.lock().insert(
            id,
            ReaderEntry {
                _endpoint: subscriber,
                _token: rmw_token,
            },
        );
        Ok(())
    }

    /// Ferry subscriber or service `id` is gone: its Zenoh subscriber or
    /// queryable and token go too.
    pub fn unsubscribe(&self, id: EndpointId) {
        let gone = self.readers.lock().remove(&id);
        drop(gone);
    }
}

/// The connection of the publisher with `gid`: from the ferry endpoint it
/// is (numbered by its own sequence, checked against direct paths from
/// it), else from an id made of its GID.
pub(crate) fn new_conn(
    gid: &[u8; 16],
    found: Option<&Publisher>,
    locator: &str,
    replier: Option<Arc<dyn ferry_transport::transport::Replier>>,
) -> Arc<InboundConn> {
    let ferry = found.and_then(|p| p.ferry);
    let remote = ferry.unwrap_or_else(|| {
        let mut p = [0u8; 8];
        p.copy_from_slice(&gid[..8]);
        EndpointId {
            participant: ParticipantId(u64::from_le_bytes(p)),
            entity: 0,
        }
    });
    let conn = Arc::new(InboundConn {
        remote,
        origin: ferry_transport::transport::Origin::Zenoh,
        transport: TransportKind::Zenoh,
        locator: locator.to_string(),
        stats: Arc::new(ConnStats::new()),
        replier,
        same_clock: false,
        seqs: Default::default(),
        identity: None,
    });
    if ferry.is_none() {
        conn.seqs.settled.store(true, Ordering::Relaxed);
    }
    conn
}

/// One ferry subscriber's Zenoh publishers, by GID: a connection each, at
/// most [`MAX_WRITERS_PER_READER`].
#[derive(Default)]
struct Writers {
    map: foldhash::HashMap<[u8; 16], Writer>,
    last_sweep: Option<Instant>,
}

struct Writer {
    conn: Arc<InboundConn>,
    /// Whether the graph knew the publisher's token when the connection
    /// was made (if not, it is looked up again on the next sample).
    known: bool,
    /// The graph's generation then: the publisher is looked up again when
    /// the graph changes (its runtime's token may come after its own, and
    /// ferry's discovery may later show a claim to be false).
    generation: u64,
    /// The ferry publisher it is (numbered by its own sequence), if its
    /// runtime's claim is believed.
    ferry: Option<EndpointId>,
    /// Samples delivered (the number of a ROS 2 publisher's next one).
    count: u64,
}

impl Writers {
    /// Hands sample `s` to `inbox`: errors are counted on the connection
    /// (or logged when there is none yet).
    fn take(
        &mut self,
        s: &Sample,
        inbox: &dyn ferry_transport::transport::Inbox,
        (graph, generation): (&Mutex<Graph>, u64),
        own: &Mutex<std::collections::HashSet<[u8; 16]>>,
        locator: &str,
    ) {
        let att = match s.attachment().map(|a| Attachment::decode(&a.to_bytes())) {
            Some(Ok(a)) => a,
            Some(Err(e)) => {
                tracing::debug!("{locator}: sample with a bad attachment dropped: {e}");
                return;
            }
            None => {
                // rmw_zenoh drops these too ("Unable to obtain attachment").
                tracing::debug!("{locator}: sample without an attachment dropped");
                return;
            }
        };
        // rmw_zenoh numbers a publisher's samples from 1 and stamps them
        // with the wall clock.
        if att.sequence < 1 || att.timestamp_ns < 0 {
            tracing::debug!(
                "{locator}: sample with sequence {} and time {} dropped",
                att.sequence,
                att.timestamp_ns
            );
            return;
        }
        let known = self.map.contains_key(&att.gid);
        if !known && own.lock().contains(&att.gid) {
            // This runtime's own publisher (its cache answered us too;
            // never in the map, so only looked up for unknown GIDs).
            return;
        }
        if !known && self.map.len() >= MAX_WRITERS_PER_READER {
            // Publishers whose token went make room, at most once a second.
            if self
                .last_sweep
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
            {
                self.last_sweep = Some(Instant::now());
                let g = graph.lock();
                self.map.retain(|gid, w| {
                    let live = g.by_gid(gid).is_some();
                    if !live {
                        inbox.detach(&w.conn);
                    }
                    live
                });
            }
            if self.map.len() >= MAX_WRITERS_PER_READER {
                return;
            }
        }
        let lookup = self
            .map
            .get(&att.gid)
            .is_none_or(|w| !w.known || w.generation != generation);
        if lookup {
            let found = graph.lock().by_gid(&att.gid);
            let ferry = found.as_ref().and_then(|p| p.ferry);
            match self.map.get_mut(&att.gid) {
                // Still unknown: it keeps the connection it has.
                Some(_) if found.is_none() => {}
                // Still the same ROS 2 or ferry publisher.
                Some(w) if w.known && w.ferry == ferry => w.generation = generation,
                _ => {
                    if let Some(old) = self.map.remove(&att.gid) {
                        inbox.detach(&old.conn);
                    }
                    let conn = new_conn(&att.gid, found.as_ref(), locator, None);
                    inbox.attach(conn.clone());
                    self.map.insert(
                        att.gid,
                        Writer {
                            conn,
                            known: found.is_some(),
                            generation,
                            ferry,
                            count: 0,
                        },
                    );
                }
            }
        }
        let Some(w) = self.map.get_mut(&att.gid) else {
            return;
        };
        // A ferry publisher's own numbering (what a direct path from it
        // carries too); a ROS 2 publisher's samples as they come.
        let seq = if w.ferry.is_some() {
            att.sequence.unsigned_abs()
        } else {
            w.count + 1
        };
        if w.ferry.is_some() && !inbox.broker_sample(&w.conn, seq) {
            // A direct path from the same publisher has it.
            return;
        }
        w.count += 1;
        let payload = Bytes::from(s.payload().to_bytes().into_owned());
        w.conn.stats.message(payload.len());
        let stamp = u64::try_from(att.timestamp_ns).unwrap_or(0);
        deliver_sample(inbox, &w.conn, seq, stamp, 0, payload);
    }
}

/// Who needs an endpoint over Zenoh — the subscriptions of a publisher's
/// topic, the services a client calls — but those its own paths reach:
/// counted at most every 200 ms while the graph stays. Reading a fresh
/// count takes no lock and no clock (the caller passes the time it has),
/// as a publisher does on every sample.
pub(crate) struct Need {
    /// The graph generation of the last count; `u64::MAX`: never counted.
    seen: AtomicU64,
    /// When it was counted (Unix ns, as the caller's clock says).
    at_ns: AtomicU64,
    /// The count.
    n: AtomicUsize,
    /// Held while counting (one counts, the others wait for its result).
    counting: Mutex<()>,
}

impl Default for Need {
    fn default() -> Self {
        Need {
            seen: AtomicU64::new(u64::MAX),
            at_ns: AtomicU64::new(0),
            n: AtomicUsize::new(0),
            counting: Mutex::new(()),
        }
    }
}

impl Need {
    /// The count of `seen` at `now_ns` if it is fresh: same generation and
    /// counted less than [`NEED_FRESH`] ago (a clock that went back is not
    /// fresh).
    fn fresh(&self, generation: u64, now_ns: u64) -> Option<usize> {
        if self.seen.load(Ordering::Acquire) != generation {
            return None;
        }
        let age = now_ns.wrapping_sub(self.at_ns.load(Ordering::Relaxed));
        (age < NEED_FRESH.as_nanos() as u64).then(|| self.n.load(Ordering::Relaxed))
    }

    /// The endpoints of `kind` on (topic, RMW type) in `path`'s graph that
    /// `reached` does not cover; none until `routed` says Zenoh routes to
    /// one (a token can arrive before Zenoh's route: the two travel apart
    /// through a router, and a put or query before it would be lost).
    /// `now_ns`: the time now (Unix ns).
    pub(crate) fn count(
        &self,
        path: &ZenohPath,
        now_ns: u64,
        (kind, topic, type_name): (EntityKind, &str, &str),
        reached: &Reached,
        routed: impl FnOnce() -> bool,
    ) -> usize {
        let generation = path.changes.load(Ordering::Acquire);
        if let Some(n) = self.fresh(generation, now_ns) {
            return n;
        }
        let _counting = self.counting.lock();
        if let Some(n) = self.fresh(generation, now_ns) {
            return n;
        }
        let (generation, ends) = {
            let g = path.graph.lock();
            (g.generation(), g.endpoints(kind, topic, type_name))
        };
        // (`reached` looks at the port's links: not under the graph's
        // lock, which Zenoh's callbacks take.)
        let mut n = ends
            .into_iter()
            .filter(|e| !e.is_some_and(|r| reached(r)))
            .count();
        if n > 0 && !routed() {
            n = 0;
        }
        self.n.store(n, Ordering::Relaxed);
        self.at_ns.store(now_ns, Ordering::Relaxed);
        self.seen.store(generation, Ordering::Release);
        n
    }
}

/// A ferry publisher's Zenoh publisher: zenoh-ext's advanced one where a
/// cache is needed (transient local), else a plain one.
enum ZenohPublisher {
    Plain(zenoh::pubsub::Publisher<'static>),
    Advanced(AdvancedPublisher<'static>),
}

impl ZenohPublisher {
    /// Puts `payload` with `attachment`.
    fn put(&self, payload: ZBytes, attachment: ZBytes) -> zenoh::Result<()> {
        match self {
            ZenohPublisher::Plain(p) => p.put(payload).attachment(attachment).wait(),
            ZenohPublisher::Advanced(p) => p.put(payload).attachment(attachment).wait(),
        }
    }

    /// Whether Zenoh routes this publisher's puts to some subscriber now.
    fn matching(&self) -> bool {
        let status = match self {
            ZenohPublisher::Plain(p) => p.matching_status().wait(),
            ZenohPublisher::Advanced(p) => p.matching_status().wait(),
        };
        status.map(|m| m.matching()).unwrap_or(true)
    }
}

/// A ferry publisher's Zenoh publisher as one of its links.
pub struct ZenohLink {
    path: Arc<ZenohPath>,
    locator: String,
    topic: String,
    type_name: String,
    gid: [u8; 16],
    durable: bool,
    /// Reliable keep-all: how long a put may block.
    keep_all: Option<Duration>,
    /// The publisher and its token, taken when the link closes.
    publisher: Mutex<Option<(ZenohPublisher, LivelinessToken)>>,
    reached: Reached,
    need: Need,
    stats: ConnStats,
    priority: Mutex<Priority>,
    closed: AtomicBool,
    warned: AtomicBool,
}

impl ZenohLink {
    /// The subscriptions that need this publisher's samples over Zenoh now
    /// (looked up at most every 200 ms while the graph stays).
    pub fn needed_by(&self) -> usize {
        self.needed_at(now_ns())
    }

    /// [`ZenohLink::needed_by`] at `now_ns` (Unix ns).
    fn needed_at(&self, now_ns: u64) -> usize {
        self.need.count(
            &self.path,
            now_ns,
            (EntityKind::Subscription, &self.topic, &self.type_name),
            &self.reached,
            || self.zenoh_matches(),
        )
    }

    /// Whether Zenoh routes this publisher's puts to some subscriber now.
    fn zenoh_matches(&self) -> bool {
        self.publisher
            .lock()
            .as_ref()
            .is_some_and(|(p, _)| p.matching())
    }
}

impl Link for ZenohLink {
    fn transport(&self) -> TransportKind {
        TransportKind::Zenoh
    }
    fn remote(&self) -> EndpointId {
        ZENOH_ENDPOINT
    }
    fn locator(&self) -> String {
        self.locator.clone()
    }
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(SendError::Closed);
        }
        // (A frame is stamped with the wall clock when it is sent.)
        if !self.durable && self.needed_at(frame.stamp_ns) == 0 {
            return Ok(());
        }
        let bytes = (frame.payload.bytes)()?;
        let att = Attachment {
            sequence: i64::try_from(frame.seq).unwrap_or(i64::MAX),
            timestamp_ns: i64::try_from(frame.stamp_ns).unwrap_or(i64::MAX),
            gid: self.gid,
        };
        let len = bytes.len();
        let publisher = self.publisher.lock();
        let Some((p, _)) = publisher.as_ref() else {
            return Err(SendError::Closed);
        };
        match p.put(ZBytes::from(bytes), ZBytes::from(att.encode())) {
            Ok(()) => {
                self.stats.message(len);
                Ok(())
            }
            Err(e) => {
                self.stats.drops.fetch_add(1, Ordering::Relaxed);
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "{}: Zenoh did not take a sample ({e}); dropped (counted in drops; \
                         logged once per publisher)",
                        self.locator
                    );
                }
                match self.keep_all {
                    Some(d) => Err(SendError::Blocked(d)),
                    None => Ok(()),
                }
            }
        }
    }
    /// Zenoh is not a subscriber: the subscriptions it serves are not ferry's.
    fn reaches_reader(&self) -> bool {
        false
    }
    /// The subscriptions that need this publisher over Zenoh now.
    fn readers(&self) -> usize {
        self.needed_by()
    }
    fn stats(&self) -> &ConnStats {
        &self.stats
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
    fn close(&self) {
        if !self.closed.swap(true, Ordering::Relaxed) {
            // ROS 2 sees the publisher go now, not when the link is pruned.
            let gone = self.publisher.lock().take();
            drop(gone);
            self.path.own.lock().remove(&self.gid);
        }
    }
    fn priority(&self) -> Priority {
        *self.priority.lock()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        *self.priority.lock() = p;
        Ok(Applied::packets(Packets::Shared))
    }
}

impl Drop for ZenohLink {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_transport::config::zenoh::Mode;

    #[test]
    fn a_count_is_fresh_for_its_generation_and_200_ms() {
        let need = Need::default();
        let t0 = 1_700_000_000_000_000_000u64;
        assert_eq!(need.fresh(0, t0), None, "never counted");
        need.n.store(3, Ordering::Relaxed);
        need.at_ns.store(t0, Ordering::Relaxed);
        need.seen.store(7, Ordering::Release);
        assert_eq!(need.fresh(7, t0), Some(3));
        assert_eq!(need.fresh(7, t0 + 199_000_000), Some(3));
        assert_eq!(need.fresh(7, t0 + 200_000_000), None, "too old");
        assert_eq!(need.fresh(8, t0 + 1), None, "the graph changed");
        assert_eq!(need.fresh(7, t0 - 1), None, "the clock went back");
    }

    #[test]
    fn config_is_what_zenoh_takes() {
        let z = ZenohConfig {
            mode: Mode::Router,
            connect: vec![],
            ..ZenohConfig::default()
        };
        let c = zenoh_config(&z).unwrap();
        let j = format!("{c}");
        assert!(j.contains("router"), "{j}");
        assert!(j.contains("tcp/localhost:7447"), "{j}");
    }
}
