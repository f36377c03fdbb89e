//! The `[ros2]` path of a runtime: its nodes in ROS 2's graph, and every
//! port (but those a `[[topics]] ros2 = false` rule keeps off, and ferry's
//! own `/_ferry` ones) also a DDS endpoint ROS 2 nodes match — through
//! `ferry-dds` (Cyclone DDS) when ferry is built with the `ros2` feature.
//! Ferry runtimes never match each other over DDS (`ferry_dds::path`).

use std::sync::Arc;

use ferry_wire::beacon::EndpointRecord;
use ferry_wire::EndpointId;

use crate::config::Config;
use crate::error::BuildError;
use crate::transport::Link;

/// A ROS 2 node as DDS's graph (`ros_discovery_info`) names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ros2Node {
    /// Its namespace (`/` for none).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The path ferry sees it on: DDS or Zenoh.
    pub via: ferry_wire::TransportKind,
}

impl Ros2Node {
    /// `/namespace/name`.
    pub fn fully_qualified_name(&self) -> String {
        crate::runtime::full_name(&self.namespace, &self.name)
    }
}

/// A ROS 2 publisher, subscription, service or client on DDS, as DDS
/// discovery and ROS 2's graph describe it (what the peer declared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ros2Endpoint {
    /// Topic or service name.
    pub name: String,
    /// Publisher, subscriber, service or client.
    pub kind: ferry_wire::EndpointKind,
    /// ROS 2 type (`std_msgs/msg/String`; a service's `pkg/srv/Name`).
    pub type_name: String,
    /// Fully qualified name of its node (empty when ROS 2's graph does not
    /// name it).
    pub node: String,
    /// The path ferry sees it on: DDS or Zenoh.
    pub via: ferry_wire::TransportKind,
}

/// Where a port's events go (held weakly: the port may be gone).
pub(crate) type Events = std::sync::Weak<crate::event::EventQueue>;

/// Logs a QoS conflict of the DDS side of ferry's `what` with ROS 2
/// `theirs` on `record`'s topic and hands it to the port as
/// [`crate::PortEvent::Ros2IncompatibleQos`].
#[cfg(feature = "ros2")]
fn conflict_reporter(
    record: &EndpointRecord,
    what: &'static str,
    theirs: &'static str,
    events: Events,
) -> ferry_dds::path::OnRos2Conflict {
    let topic = record.topic.clone();
    Arc::new(move |c: ferry_dds::path::Ros2Conflict| {
        tracing::warn!(
            "`{topic}`: this {what} and a ROS 2 {theirs} (of {}) are not connected over DDS: \
             incompatible QoS ({})",
            c.nodes.join(", "),
            c.policy
        );
        if let Some(q) = events.upgrade() {
            q.push(crate::PortEvent::Ros2IncompatibleQos {
                policy: c.policy.to_string(),
                nodes: c.nodes,
                total: c.total,
            });
        }
    })
}

/// The runtime's DDS path.
pub(crate) struct Ros2 {
    #[cfg(feature = "ros2")]
    path: Arc<ferry_dds::path::DdsPath>,
    /// ROS 2's nodes and endpoints as last listed, and when: listing asks
    /// Cyclone for every endpoint of the domain, so graph queries in a
    /// loop (`topic echo`, `demo`) share one listing per [`Self::FRESH`].
    listed: parking_lot::Mutex<Option<(std::time::Instant, Listing)>>,
}

type Listing = (Vec<Ros2Node>, Vec<Ros2Endpoint>);

impl Ros2 {
    /// Starts the path of runtime `runtime` when `[ros2]` is on.
    pub fn start(
        cfg: &Config,
        runtime: ferry_wire::ParticipantId,
    ) -> Result<Option<Ros2>, BuildError> {
        let Some(r) = &cfg.ros2 else {
            return Ok(None);
        };
        let domain = r.domain.unwrap_or(cfg.domain_id);
        let fail = |why: String| BuildError::Ros2 { domain, why };
        if cfg.security.mode == ferry_security::Mode::Enforce {
            return Err(fail(
                "security is `enforce`, and the DDS path carries samples unauthenticated and in \
                 clear (DDS Security is not built in): leave `[ros2]` off, or use `permissive`"
                    .into(),
            ));
        }
        #[cfg(feature = "ros2")]
        {
            if cfg.security.mode != ferry_security::Mode::Off {
                tracing::warn!(
                    "security is `{:?}`: the ROS 2 (DDS) path is neither authenticated nor \
                     encrypted",
                    cfg.security.mode
                );
            }
            let path = ferry_dds::path::DdsPath::start(ferry_dds::path::PathConfig {
                runtime,
                domain,
                enclave: r.enclave.clone(),
                discovery: (r.discovery_range, r.static_peers.clone()),
                max_sample_bytes: u32::try_from(cfg.max_frame_bytes).unwrap_or(u32::MAX),
                keep_all_block: std::time::Duration::from_millis(cfg.keep_all_block_ms),
            })
            .map_err(|e| fail(e.to_string()))?;
            tracing::info!(
                "ROS 2 path on: DDS domain {domain}, discovery {:?}",
                r.discovery_range
            );
            Ok(Some(Ros2 {
                path,
                listed: parking_lot::Mutex::new(None),
            }))
        }
        #[cfg(not(feature = "ros2"))]
        let _ = runtime;
        #[cfg(not(feature = "ros2"))]
        Err(fail(
            "ferry was built without its `ros2` feature (cargo feature `ferry/ros2`)".into(),
        ))
    }

    fn carries(cfg: &Config, topic: &str) -> bool {
        !topic.starts_with(crate::graph::HIDDEN_PREFIX) && cfg.topic_ros2(topic)
    }

    /// A node joins ROS 2's graph.
    pub fn add_node(&self, node: u32, namespace: &str, name: &str) {
        #[cfg(feature = "ros2")]
        self.path.add_node(node, namespace, name);
        #[cfg(not(feature = "ros2"))]
        let _ = (node, namespace, name);
    }

    /// A node leaves it.
    pub fn remove_node(&self, node: u32) {
        #[cfg(feature = "ros2")]
        self.path.remove_node(node);
        #[cfg(not(feature = "ros2"))]
        let _ = node;
    }

    /// The DDS link of publisher `id`, when its topic goes to DDS (a topic
    /// DDS cannot carry is logged and stays off it); its QoS conflicts with
    /// ROS 2 subscriptions go to `events` (and the log).
    pub fn writer_link(
        &self,
        cfg: &Config,
        id: EndpointId,
        record: &EndpointRecord,
        events: Events,
    ) -> Option<Arc<dyn Link>> {
        if !Self::carries(cfg, &record.topic) {
            return None;
        }
        #[cfg(feature = "ros2")]
        match self.path.writer_link(
            record.node,
            id,
            &record.topic,
            (&record.type_name, &record.type_hash),
            &record.qos,
            conflict_reporter(record, "publisher", "subscription", events),
        ) {
            Ok(l) => return Some(l),
            Err(e) => tracing::warn!("`{}` stays off DDS: {e}", record.topic),
        }
        #[cfg(not(feature = "ros2"))]
        let _ = (id, events);
        None
    }

    /// Subscriber `id` also reads its topic's ROS 2 writers; its QoS
    /// conflicts with ROS 2 publishers go to `events` (and the log).
    pub fn subscribe(&self, cfg: &Config, id: EndpointId, record: &EndpointRecord, events: Events) {
        if !Self::carries(cfg, &record.topic) {
            return;
        }
        #[cfg(feature = "ros2")]
        if let Err(e) = self.path.subscribe(
            record.node,
            id,
            &record.topic,
            (&record.type_name, &record.type_hash),
            &record.qos,
            conflict_reporter(record, "subscriber", "publisher", events),
        ) {
            tracing::warn!("`{}` stays off DDS: {e}", record.topic);
        }
        #[cfg(not(feature = "ros2"))]
        let _ = (id, events);
    }

    /// Service `id` (request and response types: name, hash) also answers
    /// ROS 2 clients on DDS (rmw_cyclonedds's request header).
    pub fn serve(
        &self,
        cfg: &Config,
        id: EndpointId,
        record: &EndpointRecord,
        req: (&str, ferry_wire::TypeHash),
        resp: (&str, ferry_wire::TypeHash),
    ) {
        if !Self::carries(cfg, &record.topic) {
            return;
        }
        #[cfg(feature = "ros2")]
        if let Err(e) = self.path.serve(
            record.node,
            id,
            &record.topic,
            (req.0, &req.1),
            (resp.0, &resp.1),
            &record.qos,
        ) {
            tracing::warn!("service `{}` stays off DDS: {e}", record.topic);
        }
        #[cfg(not(feature = "ros2"))]
        let _ = (id, req, resp);
    }

    /// The DDS link of client `id`: calls to ROS 2 services (rmw_cyclonedds's
    /// request header), replies to `sink`.
    pub fn client_link(
        &self,
        cfg: &Config,
        id: EndpointId,
        record: &EndpointRecord,
        (req, resp): ((&str, ferry_wire::TypeHash), (&str, ferry_wire::TypeHash)),
        sink: std::sync::Weak<dyn crate::transport::ReplySink>,
    ) -> Option<Arc<dyn Link>> {
        if !Self::carries(cfg, &record.topic) {
            return None;
        }
        #[cfg(feature = "ros2")]
        match self.path.client_link(
            record.node,
            id,
            &record.topic,
            (req.0, &req.1),
            (resp.0, &resp.1),
            &record.qos,
            sink,
        ) {
            Ok(l) => return Some(l),
            Err(e) => tracing::warn!("client `{}` stays off DDS: {e}", record.topic),
        }
        #[cfg(not(feature = "ros2"))]
        let _ = (id, req, resp, sink);
        None
    }

    /// Subscriber or service `id` is gone.
    pub fn unsubscribe(&self, id: EndpointId) {
        #[cfg(feature = "ros2")]
        self.path.unsubscribe(id);
        #[cfg(not(feature = "ros2"))]
        let _ = id;
    }

    /// How long a listing of ROS 2's graph is reused.
    pub const FRESH: std::time::Duration = std::time::Duration::from_millis(250);

    /// ROS 2's nodes and endpoints (see [`Self::nodes`], [`Self::endpoints`]),
    /// listed at most once per [`Self::FRESH`].
    pub fn graph(&self) -> Listing {
        let mut listed = self.listed.lock();
        if let Some((at, l)) = listed.as_ref() {
            if at.elapsed() < Self::FRESH {
                return l.clone();
            }
        }
        let l = (self.nodes(), self.endpoints());
        *listed = Some((std::time::Instant::now(), l.clone()));
        l
    }

    /// The ROS 2 endpoints DDS discovery knows (not ferry's), sorted.
    fn endpoints(&self) -> Vec<Ros2Endpoint> {
        #[cfg(feature = "ros2")]
        {
            use ferry_dds::names::RosKind;
            use ferry_wire::EndpointKind;
            let mut v: Vec<Ros2Endpoint> = self
                .path
                .ros_endpoints()
                .into_iter()
                .filter_map(|e| {
                    let kind = match (e.kind, e.writer) {
                        (RosKind::Topic, true) => EndpointKind::Publisher,
                        (RosKind::Topic, false) => EndpointKind::Subscriber,
                        (RosKind::Request, false) => EndpointKind::Service,
                        (RosKind::Request, true) => EndpointKind::Client,
                        // The other half of a service or client.
                        (RosKind::Reply, _) => return None,
                    };
                    Some(Ros2Endpoint {
                        name: e.name,
                        kind,
                        type_name: e.type_name,
                        node: e
                            .node
                            .map(|(ns, n)| crate::runtime::full_name(&ns, &n))
                            .unwrap_or_default(),
                        via: ferry_wire::TransportKind::Dds,
                    })
                })
                .collect();
            v.sort_by(|a, b| {
                (&a.name, a.kind as u8, &a.node).cmp(&(&b.name, b.kind as u8, &b.node))
            });
            v
        }
        #[cfg(not(feature = "ros2"))]
        Vec::new()
    }

    /// The ROS 2 nodes DDS's graph knows (not ferry's own), sorted.
    fn nodes(&self) -> Vec<Ros2Node> {
        #[cfg(feature = "ros2")]
        {
            let mut v: Vec<Ros2Node> = self
                .path
                .ros_graph()
                .into_iter()
                .flat_map(|p| p.nodes)
                .map(|n| Ros2Node {
                    namespace: n.namespace,
                    name: n.name,
                    via: ferry_wire::TransportKind::Dds,
                })
                .collect();
            v.sort();
            v.dedup();
            v
        }
        #[cfg(not(feature = "ros2"))]
        Vec::new()
    }
}
