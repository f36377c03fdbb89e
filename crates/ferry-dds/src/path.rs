//! The DDS path of one ferry runtime (`[ros2]`): one DDS participant, a DDS
//! writer beside every ferry publisher and a DDS reader beside every ferry
//! subscriber, with ROS 2's names, types and QoS, and the runtime's nodes
//! in ROS 2's graph (`ros_discovery_info`).
//!
//! **Only ROS 2's endpoints, never another ferry's.** Every DDS endpoint
//! of ferry carries `ferry=<runtime id>;` in its user data (after ROS 2's
//! `typehash=…;`, which ROS 2 reads as before). Ferry runtimes keep ferry's
//! own faster paths between them, chosen by ferry's discovery, so over DDS:
//! a ferry writer writes only while a reader that is *not* ferry's is
//! matched (its listener counts them), a ferry reader drops what a ferry
//! writer sends (checked once per writer), and ferry's graph lists only
//! the nodes of participants whose graph writer is not ferry's. (Partitions
//! cannot do this: a wildcard partition does not match Fast DDS's default
//! one.) When a ROS 2 reader and a ferry reader of one topic are both
//! matched, the ferry reader is sent the samples too and drops them.
//!
//! **What it costs a publisher**: a sample is encoded and handed to DDS
//! only while a ROS 2 reader is matched (one atomic load otherwise), or
//! always for a transient-local writer (DDS keeps the late joiners'
//! history). A reliable DDS writer never blocks a keep-last publisher: a
//! sample DDS has no room for is dropped and counted; keep-all blocks up to
//! `keep_all_block_ms`, as on ferry's own paths.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_transport::priority::{Applied, Packets, Priority, PriorityError};
use ferry_transport::stats::ConnStats;
use ferry_transport::transport::{
    deliver_sample, lookup_reader, InFrame, InboundConn, Link, OutFrame, Replier, SendError,
};
use ferry_wire::{
    Durability, EndpointId, History, ParticipantId, Qos, Reliability, TransportKind, TypeHash,
};
use parking_lot::Mutex;

pub use crate::conflicts::{OnRos2Conflict, Ros2Conflict, MAX_CONFLICT_NODES};

use crate::graph::{NodeEntities, ParticipantEntities};
use crate::service::{self, DdsReplier};
use crate::{names, DdsError, DdsQos, DomainSettings, Graph, Guid, Participant, Reader, Writer};

/// The user-data key that marks ferry's DDS endpoints (see the module docs).
pub const FERRY_KEY: &str = "ferry=";

/// The remote end of a writer's DDS link: DDS itself (the ROS 2 readers it
/// serves are DDS's business).
pub const DDS_ENDPOINT: EndpointId = EndpointId {
    participant: ParticipantId(0),
    entity: u32::MAX - 1,
};

/// Most DDS writers one ferry subscriber keeps a connection record for.
const MAX_WRITERS_PER_READER: usize = 1024;

/// How far DDS discovery looks (ROS 2's `ROS_AUTOMATIC_DISCOVERY_RANGE`).
pub use ferry_transport::config::ros2::DiscoveryRange;

/// Cyclone configuration for ROS 2's discovery settings, as rmw_cyclonedds
/// (Jazzy) builds it ahead of the user's `CYCLONEDDS_URI`: `subnet` keeps
/// multicast and adds the static peers; `localhost` turns multicast off and
/// asks `localhost` and the static peers; `off` discovers nothing (no
/// multicast, no peers, a tag no one else has); `system_default` leaves
/// everything to `CYCLONEDDS_URI`. Participant indices are automatic (up
/// to 32 per host), so unicast discovery knows which ports to ask.
pub fn discovery_xml(range: DiscoveryRange, static_peers: &[String]) -> String {
    const INDEX: &str =
        "<ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>";
    const NO_MULTICAST: &str = "<General><AllowMulticast>false</AllowMulticast></General>";
    let peers = |extra: &[&str]| -> String {
        let list: String = extra
            .iter()
            .copied()
            .chain(static_peers.iter().map(String::as_str))
            .map(|p| format!("<Peer address=\"{}\"/>", xml_escape(p)))
            .collect();
        if list.is_empty() {
            list
        } else {
            format!("<Peers>{list}</Peers>")
        }
    };
    match range {
        DiscoveryRange::SystemDefault => String::new(),
        DiscoveryRange::Subnet => format!("<Discovery>{INDEX}{}</Discovery>", peers(&[])),
        DiscoveryRange::Localhost => {
            format!(
                "{NO_MULTICAST}<Discovery>{INDEX}{}</Discovery>",
                peers(&["localhost"])
            )
        }
        DiscoveryRange::Off => format!(
            "{NO_MULTICAST}<Discovery><ParticipantIndex>none</ParticipantIndex>\
             <Tag>ros_discovery_off_{}</Tag></Discovery>",
            std::process::id()
        ),
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// ROS 2's DDS QoS for a ferry port's QoS (the same policies one to one),
/// the endpoint marked as runtime `runtime`'s.
pub fn dds_qos(qos: &Qos, type_hash: &TypeHash, runtime: ParticipantId) -> DdsQos {
    DdsQos {
        reliable: qos.reliability == Reliability::Reliable,
        transient_local: qos.durability == Durability::TransientLocal,
        keep_last: match qos.history {
            History::KeepLast(n) => Some(n),
            History::KeepAll => None,
        },
        max_blocking: Duration::ZERO,
        deadline: qos.deadline,
        lifespan: qos.lifespan,
        liveliness: crate::Liveliness::Automatic,
        lease: qos.liveliness_lease,
        user_data: user_data(type_hash, runtime),
    }
}

/// Endpoint user data as ROS 2 Jazzy writes it, `typehash=RIHS01_…;`
/// (none for raw ports, whose type is not known), then ferry's mark.
fn user_data(hash: &TypeHash, runtime: ParticipantId) -> Vec<u8> {
    let mut s = String::new();
    if !hash.is_any() {
        s = format!("typehash={hash};");
    }
    s.push_str(&mark(runtime));
    s.into_bytes()
}

/// `ferry=<runtime id>;`
fn mark(runtime: ParticipantId) -> String {
    format!("{FERRY_KEY}{:016x};", runtime.0)
}

fn is_ferry(user_data: &[u8]) -> bool {
    user_data
        .windows(FERRY_KEY.len())
        .any(|w| w == FERRY_KEY.as_bytes())
}

/// What the path needs of the runtime's configuration.
#[derive(Debug, Clone)]
pub struct PathConfig {
    /// The ferry runtime (named in the endpoints' user data).
    pub runtime: ParticipantId,
    /// The DDS domain.
    pub domain: u16,
    /// The enclave in the participant's user data.
    pub enclave: String,
    /// Discovery range and static peers.
    pub discovery: (DiscoveryRange, Vec<String>),
    /// Largest sample taken from a DDS writer.
    pub max_sample_bytes: u32,
    /// How long a keep-all writer may block on DDS.
    pub keep_all_block: Duration,
}

#[derive(Default)]
struct NodeGids {
    namespace: String,
    name: String,
    readers: BTreeMap<u32, Guid>,
    writers: BTreeMap<u32, Guid>,
}

/// The DDS path of one runtime.
pub struct DdsPath {
    // Field order: endpoints before the graph before the participant.
    readers: Mutex<HashMap<EndpointId, Reader>>,
    /// Ferry services as ROS 2 services: request reader, reply writer.
    services: Mutex<HashMap<EndpointId, (Reader, Arc<DdsReplier>)>>,
    /// Counter of this participant's service ids.
    service_ids: std::sync::atomic::AtomicU32,
    discovery: crate::Discovery,
    graph: Graph,
    nodes: Mutex<BTreeMap<u32, NodeGids>>,
    /// Held from a snapshot of `nodes` to its write, so the graph's last
    /// sample (what late joiners get) is the latest.
    announcing: Mutex<()>,
    /// endpoint entity → node id, for the graph.
    owner: Mutex<HashMap<u32, u32>>,
    cfg: PathConfig,
    pp: Participant,
}

impl DdsPath {
    /// Joins the DDS domain of `cfg` with ROS 2's participant user data.
    pub fn start(cfg: PathConfig) -> Result<Arc<DdsPath>, DdsError> {
        let settings = DomainSettings {
            max_sample_bytes: cfg.max_sample_bytes,
            config_xml: discovery_xml(cfg.discovery.0, &cfg.discovery.1),
        };
        let user_data = format!("enclave={};", cfg.enclave);
        let pp =
            Participant::with_settings(u32::from(cfg.domain), user_data.as_bytes(), &settings)?;
        let graph = Graph::marked(&pp, &mark(cfg.runtime))?;
        Ok(Arc::new(DdsPath {
            readers: Mutex::new(HashMap::new()),
            services: Mutex::new(HashMap::new()),
            service_ids: std::sync::atomic::AtomicU32::new(0),
            discovery: pp.discovery()?,
            graph,
            nodes: Mutex::new(BTreeMap::new()),
            announcing: Mutex::new(()),
            owner: Mutex::new(HashMap::new()),
            cfg,
            pp,
        }))
    }

    /// The DDS domain.
    pub fn domain(&self) -> u16 {
        self.cfg.domain
    }

    /// This runtime's DDS participant GUID.
    pub fn guid(&self) -> Result<Guid, DdsError> {
        self.pp.guid()
    }

    /// A ferry node joins ROS 2's graph.
    pub fn add_node(&self, node: u32, namespace: &str, name: &str) {
        self.nodes.lock().insert(
            node,
            NodeGids {
                namespace: namespace.to_string(),
                name: name.to_string(),
                ..NodeGids::default()
            },
        );
        self.announce();
    }

    /// A ferry node leaves ROS 2's graph.
    pub fn remove_node(&self, node: u32) {
        if self.nodes.lock().remove(&node).is_some() {
            self.announce();
        }
    }

    /// Every other DDS participant's ROS 2 nodes, as their graph says.
    pub fn ros_graph(&self) -> Vec<ParticipantEntities> {
        self.graph.participants()
    }

    /// The ROS 2 topics' and services' writers and readers DDS discovery
    /// knows now (not ferry's), with their nodes as ROS 2's graph says.
    pub fn ros_endpoints(&self) -> Vec<RosEndpoint> {
        let mut node_of: HashMap<Guid, (String, String)> = HashMap::new();
        for p in self.graph.participants() {
            for n in p.nodes {
                for g in n.readers.iter().chain(&n.writers) {
                    node_of.insert(*g, (n.namespace.clone(), n.name.clone()));
                }
            }
        }
        let mut out = Vec::new();
        for (writer, list) in [
            (true, self.discovery.writers()),
            (false, self.discovery.readers()),
        ] {
            let list = list.unwrap_or_else(|e| {
                tracing::debug!("DDS discovery could not be read: {e}");
                Vec::new()
            });
            for d in list {
                if is_ferry(&d.user_data) {
                    continue;
                }
                let (Some((kind, name)), Some(type_name)) =
                    (names::ros_name(&d.topic), names::ros_type(&d.type_name))
                else {
                    continue;
                };
                let type_name = match kind {
                    names::RosKind::Topic => type_name,
                    _ => type_name
                        .strip_suffix("_Request")
                        .or_else(|| type_name.strip_suffix("_Response"))
                        .unwrap_or(&type_name)
                        .to_string(),
                };
                out.push(RosEndpoint {
                    writer,
                    kind,
                    name,
                    type_name,
                    node: node_of.get(&d.guid).cloned(),
                    guid: d.guid,
                });
            }
        }
        out.sort_by(|a, b| (&a.name, a.writer, a.guid).cmp(&(&b.name, b.writer, b.guid)));
        out
    }

    fn announce(&self) {
        let _order = self.announcing.lock();
        let nodes: Vec<NodeEntities> = self
            .nodes
            .lock()
            .values()
            .map(|n| NodeEntities {
                namespace: n.namespace.clone(),
                name: n.name.clone(),
                readers: n.readers.values().copied().collect(),
                writers: n.writers.values().copied().collect(),
            })
            .collect();
        if let Err(e) = self.graph.announce(nodes) {
            tracing::warn!("ROS 2 graph: could not announce ferry's nodes: {e}");
        }
    }

    fn register(&self, node: u32, entity: u32, gid: Guid, writer: bool) {
        if let Some(n) = self.nodes.lock().get_mut(&node) {
            let set = if writer {
                &mut n.writers
            } else {
                &mut n.readers
            };
            set.insert(entity, gid);
        }
        self.owner.lock().insert(entity, node);
        self.announce();
    }

    fn unregister(&self, entity: u32) {
        let Some(node) = self.owner.lock().remove(&entity) else {
            return;
        };
        if let Some(n) = self.nodes.lock().get_mut(&node) {
            n.writers.remove(&entity);
            n.readers.remove(&entity);
        }
        self.announce();
    }

    /// The DDS writer beside ferry publisher `id` of node `node`: a link
    /// that carries each sample to the matched ROS 2 readers.
    pub fn writer_link(
        self: &Arc<Self>,
        node: u32,
        id: EndpointId,
        topic: &str,
        (type_name, type_hash): (&str, &TypeHash),
        qos: &Qos,
        on_conflict: OnRos2Conflict,
    ) -> Result<Arc<DdsLink>, DdsError> {
        let topic_name = names::topic(topic)?;
        let t = self.pp.topic(&topic_name, &names::dds_type(type_name)?)?;
        let mut q = dds_qos(qos, type_hash, self.cfg.runtime);
        let keep_all = qos.history == History::KeepAll && q.reliable;
        if keep_all {
            q.max_blocking = self.cfg.keep_all_block;
        }
        let reporter = self.conflict_reporter(&topic_name, true, on_conflict);
        let hooks = crate::WriterHooks {
            on_conflict: Some(reporter),
            on_readers: None,
        };
        let writer = self.pp.writer_with(&t, &q, FERRY_KEY, hooks)?;
        self.register(node, id.entity, writer.guid()?, true);
        Ok(Arc::new(DdsLink {
            path: self.clone(),
            id,
            locator: format!("dds/{}/{topic_name}", self.cfg.domain),
            durable: q.transient_local,
            keep_all: keep_all.then_some(self.cfg.keep_all_block),
            writer: Mutex::new(Some(writer)),
            stats: ConnStats::new(),
            priority: Mutex::new(Priority::default()),
            closed: AtomicBool::new(false),
            warned: AtomicBool::new(false),
        }))
    }

    /// The DDS reader beside ferry subscriber `id` of node `node`: samples
    /// of ROS 2 writers go to the subscriber (found in the process's reader
    /// registry), one connection per DDS writer.
    pub fn subscribe(
        self: &Arc<Self>,
        node: u32,
        id: EndpointId,
        topic: &str,
        (type_name, type_hash): (&str, &TypeHash),
        qos: &Qos,
        on_conflict: OnRos2Conflict,
    ) -> Result<(), DdsError> {
        let topic_name = names::topic(topic)?;
        let t = self.pp.topic(&topic_name, &names::dds_type(type_name)?)?;
        let locator = format!("dds/{}/{topic_name}", self.cfg.domain);
        let writers = Mutex::new(WriterConns::default());
        let q = dds_qos(qos, type_hash, self.cfg.runtime);
        let reporter = self.conflict_reporter(&topic_name, false, on_conflict);
        let reader = self.pp.reader_with(
            &t,
            &q,
            move |s| {
                let Some(inbox) = lookup_reader(id) else {
                    return;
                };
                let Some((conn, seq)) = writers.lock().conn_of(&s, &*inbox, &locator, None) else {
                    return;
                };
                let stamp = u64::try_from(s.source_timestamp_ns).unwrap_or(0);
                conn.stats.message(s.cdr.len());
                deliver_sample(&*inbox, &conn, seq, stamp, 0, Bytes::from(s.cdr));
            },
            Some(reporter),
        )?;
        self.register(node, id.entity, reader.guid()?, false);
        self.readers.lock().insert(id, reader);
        Ok(())
    }

    /// Ferry subscriber `id` is gone: its DDS reader goes too.
    pub fn unsubscribe(&self, id: EndpointId) {
        let reader = self.readers.lock().remove(&id);
        drop(reader);
        let service = self.services.lock().remove(&id);
        drop(service);
        self.unregister(id.entity);
    }

    /// A new client or service id: this participant's GUID prefix and a
    /// counter (rmw_cyclonedds's form), as `clientid=`/`serviceid=` text.
    fn csid(&self, key: &str) -> Result<Vec<u8>, DdsError> {
        let mut sid = [0u8; 16];
        sid[..12].copy_from_slice(&self.pp.guid()?[..12]);
        let n = self.service_ids.fetch_add(1, Ordering::Relaxed) + 1;
        sid[12..].copy_from_slice(&n.to_be_bytes());
        Ok(format!("{key}={};", service::id_text(&sid)).into_bytes())
    }

    /// The two topics of service `name` and the QoS of its request and
    /// reply endpoints, both with a new `key=<id>;` (`clientid`,
    /// `serviceid`) before the type hash.
    fn service_ends(
        &self,
        name: &str,
        (req, resp): ((&str, &TypeHash), (&str, &TypeHash)),
        qos: &Qos,
        key: &str,
    ) -> Result<ServiceEnds, DdsError> {
        let (rq, rr) = names::service(name)?;
        let tag = self.csid(key)?;
        let with_tag = |hash: &TypeHash| {
            let mut q = dds_qos(qos, hash, self.cfg.runtime);
            q.user_data = [tag.as_slice(), &q.user_data].concat();
            q
        };
        Ok(ServiceEnds {
            request: self.pp.topic(&rq, &names::dds_type(req.0)?)?,
            reply: self.pp.topic(&rr, &names::dds_type(resp.0)?)?,
            request_qos: with_tag(req.1),
            reply_qos: with_tag(resp.1),
            locator: format!("dds/{}/{rq}", self.cfg.domain),
        })
    }

    /// The DDS link of ferry client `id` of node `node`: calls to ROS 2
    /// services (rmw_cyclonedds's way); replies go to `sink` (held weakly:
    /// the client holds the link).
    #[allow(clippy::too_many_arguments)]
    pub fn client_link(
        self: &Arc<Self>,
        node: u32,
        id: EndpointId,
        name: &str,
        req: (&str, &TypeHash),
        resp: (&str, &TypeHash),
        qos: &Qos,
        sink: std::sync::Weak<dyn ferry_transport::transport::ReplySink>,
    ) -> Result<Arc<service::DdsClientLink>, DdsError> {
        let ends = self.service_ends(name, (req, resp), qos, "clientid")?;
        // The last ROS 2 service gone: calls that went to it over DDS will
        // never be answered — they fail now (as over ferry's own paths).
        let gone = sink.clone();
        let hooks = crate::WriterHooks {
            on_conflict: None,
            on_readers: Some(Box::new(move |n| {
                if n == 0 {
                    if let Some(sink) = gone.upgrade() {
                        sink.on_link_lost(DDS_ENDPOINT);
                    }
                }
            })),
        };
        let writer = self
            .pp
            .writer_with(&ends.request, &ends.request_qos, FERRY_KEY, hooks)?;
        let guid = writer.guid()?;
        let client = u64::from_le_bytes(guid[8..16].try_into().unwrap_or_default());
        let reader = self.pp.reader(&ends.reply, &ends.reply_qos, move |s| {
            let Some((header, cdr)) = service::split_request(&s.cdr) else {
                return;
            };
            // Every client of the service gets every reply.
            if header.client != client {
                return;
            }
            let Some(sink) = sink.upgrade() else {
                return;
            };
            let bytes = Bytes::from(cdr);
            let payload = move || Ok(bytes.clone());
            // Only a call that went over DDS: a forged reply cannot
            // complete one sent over ferry's own paths.
            sink.on_reply_from(
                DDS_ENDPOINT,
                u64::try_from(header.seq).unwrap_or(0),
                Ok(ferry_transport::message::Payload {
                    typed: None,
                    bytes: &payload,
                }),
            );
        })?;
        self.register(node, id.entity, guid, true);
        self.register(node, id.entity, reader.guid()?, false);
        let path = Arc::downgrade(self);
        Ok(Arc::new(service::DdsClientLink {
            client,
            reader: Mutex::new(Some(reader)),
            writer: Mutex::new(Some(writer)),
            locator: ends.locator,
            stats: ConnStats::new(),
            priority: Mutex::new(Priority::default()),
            closed: AtomicBool::new(false),
            on_close: Box::new(move || {
                if let Some(p) = path.upgrade() {
                    p.unregister(id.entity);
                }
            }),
        }))
    }

    /// Ferry service `id` of node `node` (types `req` and `resp`: name and
    /// hash) as a ROS 2 service on DDS that rmw_cyclonedds clients call
    /// (`crate::service`); its handler answers them as any other client.
    pub fn serve(
        &self,
        node: u32,
        id: EndpointId,
        name: &str,
        req: (&str, &TypeHash),
        resp: (&str, &TypeHash),
        qos: &Qos,
    ) -> Result<(), DdsError> {
        let ends = self.service_ends(name, (req, resp), qos, "serviceid")?;
        let writer = self.pp.writer(&ends.reply, &ends.reply_qos)?;
        let replier = Arc::new(DdsReplier::new(writer, name));
        let locator = ends.locator;
        let writers = Mutex::new(WriterConns::default());
        let calls = replier.clone();
        let answer: Arc<dyn Replier> = replier.clone();
        let reader = self.pp.reader(&ends.request, &ends.request_qos, move |s| {
            let Some(inbox) = lookup_reader(id) else {
                return;
            };
            let Some((header, cdr)) = service::split_request(&s.cdr) else {
                tracing::debug!("{locator}: a {} B request that is not one", s.cdr.len());
                return;
            };
            let Some((conn, _)) = writers.lock().conn_of(&s, &*inbox, &locator, Some(&answer))
            else {
                return;
            };
            conn.stats.message(s.cdr.len());
            // Bounded: with MAX_PENDING calls unanswered, more wait in
            // the peer's retries, not in ferry's memory.
            let Some(request_id) = calls.register(header) else {
                conn.stats.drops.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let bytes = Bytes::from(cdr);
            let payload = move || Ok(bytes.clone());
            inbox.deliver(
                &conn,
                &InFrame {
                    kind: ferry_wire::frame::FrameKind::Request,
                    seq: request_id,
                    stamp_ns: u64::try_from(s.source_timestamp_ns).unwrap_or(0),
                    arrival_ns: 0,
                    payload: ferry_transport::message::Payload {
                        typed: None,
                        bytes: &payload,
                    },
                },
            );
        })?;
        self.register(node, id.entity, reader.guid()?, false);
        self.register(node, id.entity, replier.writer().guid()?, true);
        self.services.lock().insert(id, (reader, replier));
        Ok(())
    }
}

/// A service's or client's two topics and endpoint QoS.
struct ServiceEnds {
    request: crate::Topic,
    reply: crate::Topic,
    request_qos: DdsQos,
    reply_qos: DdsQos,
    /// `dds/<domain>/rq…Request`
    locator: String,
}

/// A ROS 2 writer or reader on DDS (discovery's word: unproven).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RosEndpoint {
    /// A writer (publisher, a service's replies, a client's requests) or a
    /// reader.
    pub writer: bool,
    /// A topic's, or a service's request or reply.
    pub kind: names::RosKind,
    /// The ROS 2 name (`/chatter`, the service's name).
    pub name: String,
    /// The ROS 2 type (`std_msgs/msg/String`; a service's `pkg/srv/Name`).
    pub type_name: String,
    /// Its node (namespace, name), when ROS 2's graph names it.
    pub node: Option<(String, String)>,
    /// Its GUID.
    pub guid: Guid,
}

/// One ferry subscriber's DDS writers: a connection per writer that is not
/// ferry's (None for ferry's), at most [`MAX_WRITERS_PER_READER`].
#[derive(Default)]
struct WriterConns {
    map: HashMap<u64, Option<(Arc<InboundConn>, u64)>>,
    last_sweep: Option<Instant>,
}

impl WriterConns {
    /// The connection of the writer of `s` (made on its first sample) and
    /// the sample's number on it; None: a ferry writer's, or no room.
    fn conn_of(
        &mut self,
        s: &crate::Sample,
        inbox: &dyn ferry_transport::transport::Inbox,
        locator: &str,
        replier: Option<&Arc<dyn Replier>>,
    ) -> Option<(Arc<InboundConn>, u64)> {
        if self.map.len() >= MAX_WRITERS_PER_READER && !self.map.contains_key(&s.publication) {
            // Writers that went away make room, looked up at most once a
            // second; a reader matched to more live writers drops the rest.
            if self
                .last_sweep
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
            {
                self.last_sweep = Some(Instant::now());
                self.map.retain(|&h, c| {
                    let live = s.still_matched(h);
                    if let (false, Some((conn, _))) = (live, c) {
                        inbox.detach(conn);
                    }
                    live
                });
            }
            if self.map.len() >= MAX_WRITERS_PER_READER {
                return None;
            }
        }
        let entry = self.map.entry(s.publication).or_insert_with(|| {
            let writer = s.writer().ok();
            if writer.as_ref().is_some_and(|w| is_ferry(&w.user_data)) {
                // Another ferry runtime: ferry's own paths carry it.
                return None;
            }
            // The GUID as the writer's discovery data says (unproven: any
            // DDS participant may claim any GUID).
            let remote = writer.map_or(
                EndpointId {
                    participant: ParticipantId(s.publication),
                    entity: 0,
                },
                |p| endpoint_of(&p.guid),
            );
            let conn = Arc::new(InboundConn {
                remote,
                origin: ferry_transport::transport::Origin::Dds,
                transport: TransportKind::Dds,
                locator: locator.to_string(),
                stats: Arc::new(ConnStats::new()),
                replier: replier.cloned(),
                same_clock: false,
                seqs: Default::default(),
                identity: None,
            });
            conn.seqs.settled.store(true, Ordering::Relaxed);
            inbox.attach(conn.clone());
            Some((conn, 0))
        });
        let (conn, seq) = entry.as_mut()?;
        *seq += 1;
        Some((conn.clone(), *seq))
    }
}

/// A DDS writer's GUID as a ferry endpoint id (for connection listings):
/// the participant from the GUID prefix, the entity from its entity id.
pub fn endpoint_of(guid: &Guid) -> EndpointId {
    let mut p = [0u8; 8];
    // The prefix's last 8 bytes vary per participant (Cyclone: pid and a
    // counter; Fast DDS: host, pid, counter).
    p.copy_from_slice(&guid[4..12]);
    EndpointId {
        participant: ParticipantId(u64::from_be_bytes(p)),
        entity: u32::from_be_bytes([guid[12], guid[13], guid[14], guid[15]]),
    }
}

/// A ferry publisher's DDS writer as one of its links.
pub struct DdsLink {
    path: Arc<DdsPath>,
    id: EndpointId,
    locator: String,
    durable: bool,
    /// Reliable keep-all: how long a write may block.
    keep_all: Option<Duration>,
    /// Taken (the DDS writer deleted) when the link closes.
    writer: Mutex<Option<Writer>>,
    stats: ConnStats,
    priority: Mutex<Priority>,
    closed: AtomicBool,
    warned: AtomicBool,
}

impl DdsLink {
    /// ROS 2 readers matched now.
    pub fn matched(&self) -> usize {
        self.writer
            .lock()
            .as_ref()
            .map_or(0, |w| w.matched().unwrap_or(0))
    }
}

impl Link for DdsLink {
    fn transport(&self) -> TransportKind {
        TransportKind::Dds
    }
    fn remote(&self) -> EndpointId {
        DDS_ENDPOINT
    }
    fn locator(&self) -> String {
        self.locator.clone()
    }
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        let writer = self.writer.lock();
        let Some(writer) = writer.as_ref() else {
            return Err(SendError::Closed);
        };
        // Nobody on DDS to tell: nothing to encode (a transient-local
        // writer still writes: DDS keeps its late joiners' history).
        if !self.durable && !writer.has_readers() {
            return Ok(());
        }
        let bytes = (frame.payload.bytes)()?;
        match writer.write(&bytes) {
            Ok(()) => {
                self.stats.message(bytes.len());
                Ok(())
            }
            Err(e) => {
                self.stats.drops.fetch_add(1, Ordering::Relaxed);
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "{}: DDS did not take a sample ({e}); dropped (counted in drops; \
                         logged once per writer)",
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
    /// DDS is not a subscriber: the ROS 2 readers it serves are not ferry's.
    fn reaches_reader(&self) -> bool {
        false
    }
    /// The ROS 2 readers matched now (`subscriber_count` counts them).
    fn readers(&self) -> usize {
        self.writer.lock().as_ref().map_or(0, Writer::readers)
    }
    fn stats(&self) -> &ConnStats {
        &self.stats
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
    fn close(&self) {
        if !self.closed.swap(true, Ordering::Relaxed) {
            self.path.unregister(self.id.entity);
            // ROS 2 sees the writer go now, not when the link is pruned.
            let writer = self.writer.lock().take();
            drop(writer);
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

impl Drop for DdsLink {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_settings_as_ros2_names_them() {
        let subnet = discovery_xml(DiscoveryRange::Subnet, &[]);
        assert!(
            subnet.contains("<ParticipantIndex>auto</ParticipantIndex>"),
            "{subnet}"
        );
        assert!(
            !subnet.contains("Peer") && !subnet.contains("AllowMulticast"),
            "{subnet}"
        );
        assert_eq!(
            discovery_xml(DiscoveryRange::SystemDefault, &["a".into()]),
            ""
        );
        let local = discovery_xml(DiscoveryRange::Localhost, &["10.0.0.2".into()]);
        assert!(
            local.contains("<AllowMulticast>false</AllowMulticast>"),
            "{local}"
        );
        assert!(local.contains("<Peer address=\"localhost\"/><Peer address=\"10.0.0.2\"/>"));
        let off = discovery_xml(DiscoveryRange::Off, &["10.0.0.2".into()]);
        assert!(
            !off.contains("<Peer") && off.contains("<ParticipantIndex>none"),
            "{off}"
        );
        let subnet = discovery_xml(DiscoveryRange::Subnet, &["robot\"2".into()]);
        assert!(
            subnet.contains("<Peer address=\"robot&quot;2\"/>"),
            "{subnet}"
        );
    }

    #[test]
    fn qos_maps_one_to_one() {
        let q = dds_qos(&Qos::sensor_data(), &TypeHash([7; 32]), ParticipantId(0xab));
        assert!(!q.reliable && !q.transient_local);
        assert_eq!(q.keep_last, Some(5));
        let ud = String::from_utf8(q.user_data).unwrap();
        assert!(ud.starts_with("typehash=RIHS01_0707"), "{ud}");
        assert!(ud.ends_with(";ferry=00000000000000ab;"), "{ud}");
        assert!(is_ferry(ud.as_bytes()) && !is_ferry(b"typehash=RIHS01_07;"));
        let durable = Qos::default().transient_local().keep_all();
        let q = dds_qos(&durable, &TypeHash::ANY, ParticipantId(1));
        assert!(q.reliable && q.transient_local && q.keep_last.is_none());
        assert_eq!(q.user_data, b"ferry=0000000000000001;");
    }

    #[test]
    fn guid_to_endpoint_keeps_prefix_and_entity() {
        let mut g = [0u8; 16];
        g[4..12].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        g[12..].copy_from_slice(&[0, 0, 0x12, 0x03]);
        let e = endpoint_of(&g);
        assert_eq!(e.participant, ParticipantId(0x0102_0304_0506_0708));
        assert_eq!(e.entity, 0x1203);
    }
}
