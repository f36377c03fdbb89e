//! Nodes: named members of the graph that own ports.

use std::sync::Arc;

use ferry_wire::beacon::NodeRecord;

use crate::admin::{AdminReply, AdminRequest};
use crate::config::{AdminAccess, Config};
use crate::error::BuildError;
use crate::graph::Graph;
use crate::membership::NodeInner;
use crate::message::Codec;
use crate::publisher::PublisherBuilder;
use crate::runtime::{full_name, Runtime};
use crate::service::{ClientBuilder, ServiceBuilder};
use crate::subscriber::SubscriberBuilder;

/// Builds a [`Node`]: `Node::builder().name("arm").namespace("/robot1").build()?`.
#[derive(Debug, Default)]
pub struct NodeBuilder {
    name: Option<String>,
    namespace: Option<String>,
    domain_id: Option<u16>,
    config: Option<Config>,
}

impl NodeBuilder {
    /// The node's name (one segment: letters, digits, `_`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// The node's namespace (`/robot1`); relative topic names live under it.
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.namespace = Some(ns.into());
        self
    }
    /// Overrides the domain id of the configuration.
    pub fn domain_id(mut self, id: u16) -> Self {
        self.domain_id = Some(id);
        self
    }
    /// Uses this configuration instead of [`Config::from_env`].
    pub fn config(mut self, cfg: Config) -> Self {
        self.config = Some(cfg);
        self
    }
    /// Creates the node, starting the process's runtime for its config if
    /// needed. Nodes with the same config share one runtime.
    pub fn build(self) -> Result<Node, BuildError> {
        let name = self.name.unwrap_or_else(|| "node".into());
        crate::names::node_name(&name)?;
        let namespace = crate::names::namespace(self.namespace.as_deref().unwrap_or("/"))?;
        let mut cfg = match self.config {
            Some(c) => c,
            None => Config::from_env()?,
        };
        if let Some(d) = self.domain_id {
            cfg.domain_id = d;
        }
        let rt = Runtime::get(cfg)?;
        let id = rt.shared.new_entity();
        rt.shared.add_node(NodeRecord {
            id,
            name: name.clone(),
            namespace: namespace.clone(),
        });
        let inner = Arc::new(NodeInner {
            rt,
            id,
            name,
            namespace,
        });
        let node_id = inner.id;
        let access = inner.rt.shared.cfg.admin;
        let admin = match access {
            AdminAccess::Off => None,
            _ => {
                let shared = Arc::downgrade(&inner.rt.shared);
                let node_name = full_name(&inner.namespace, &inner.name);
                let admin_name = crate::admin::service_name(&node_name);
                let handler = move |req: &AdminRequest, caller: &crate::transport::InboundConn| {
                    let Some(shared) = shared.upgrade() else {
                        return Err("runtime is shutting down".into());
                    };
                    crate::admin::handle(&shared, (node_id, &node_name), access, req, caller)
                };
                Some(Arc::new(
                    ServiceBuilder::<AdminRequest, AdminReply>::new(
                        inner.clone(),
                        &admin_name,
                        Box::new(handler),
                    )
                    .build()?,
                ))
            }
        };
        Ok(Node {
            inner,
            _admin: admin,
        })
    }
}

/// A node. Cheap to clone; the node leaves the graph when the last clone
/// and all of its ports are dropped.
#[derive(Clone)]
pub struct Node {
    pub(crate) inner: Arc<NodeInner>,
    _admin: Option<Arc<crate::service::Service<AdminRequest, AdminReply>>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Node({})", self.fully_qualified_name())
    }
}

impl Node {
    /// Starts building a node.
    pub fn builder() -> NodeBuilder {
        NodeBuilder::default()
    }
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }
    /// The node's namespace.
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }
    /// `/namespace/name`.
    pub fn fully_qualified_name(&self) -> String {
        full_name(&self.inner.namespace, &self.inner.name)
    }
    /// The domain the node is in.
    pub fn domain_id(&self) -> u16 {
        self.inner.rt.shared.cfg.domain_id
    }
    /// The MQTT broker connection of this node's runtime (`[mqtt]`), if any.
    #[cfg(feature = "mqtt")]
    pub fn broker_state(&self) -> Option<ferry_mqtt::BrokerState> {
        self.inner.rt.shared.mqtt.as_ref().map(|b| b.state())
    }
    /// Expands a topic name against this node's namespace.
    pub fn resolve(&self, topic: &str) -> Result<String, BuildError> {
        crate::names::expand(topic, &self.inner.namespace, &self.inner.name)
    }
    /// Starts building a publisher of `T` (a [`crate::Message`] or [`crate::RawBytes`]).
    pub fn publisher<T: Codec>(&self, topic: &str) -> PublisherBuilder<T> {
        PublisherBuilder::new(self.inner.clone(), topic)
    }
    /// Starts building a subscriber of `T`.
    pub fn subscriber<T: Codec>(&self, topic: &str) -> SubscriberBuilder<T> {
        SubscriberBuilder::new(self.inner.clone(), topic)
    }
    /// Starts building a service answering `Req` with `Resp` via `handler`.
    pub fn service<Req: Codec, Resp: Codec, F>(
        &self,
        name: &str,
        handler: F,
    ) -> ServiceBuilder<Req, Resp>
    where
        F: Fn(&Req) -> Resp + Send + Sync + 'static,
    {
        ServiceBuilder::new(
            self.inner.clone(),
            name,
            Box::new(move |r: &Req, _| Ok(handler(r))),
        )
    }
    /// Like [`Node::service`], but the handler may fail with a message the
    /// client receives as [`crate::CallError::Remote`].
    pub fn try_service<Req: Codec, Resp: Codec, F>(
        &self,
        name: &str,
        handler: F,
    ) -> ServiceBuilder<Req, Resp>
    where
        F: Fn(&Req) -> Result<Resp, String> + Send + Sync + 'static,
    {
        ServiceBuilder::new(
            self.inner.clone(),
            name,
            Box::new(move |r: &Req, _| handler(r)),
        )
    }
    /// Starts building a client of a service.
    pub fn client<Req: Codec, Resp: Codec>(&self, name: &str) -> ClientBuilder<Req, Resp> {
        ClientBuilder::new(self.inner.clone(), name)
    }
    /// What this node's runtime knows of the graph.
    pub fn graph(&self) -> Graph {
        self.inner.rt.shared.graph()
    }
    /// Its runtime's Zenoh session (`[zenoh]`): id, mode, routers and
    /// peers connected now; None when the path is off.
    pub fn zenoh_session(&self) -> Option<crate::ZenohSession> {
        let rt = &self.inner.rt.shared;
        rt.zenoh.as_ref().map(|z| z.session(&rt.cfg))
    }
    /// Where this node's runtime stands in its host's leader election
    /// (`host_leader = true`); None when it does not take part.
    pub fn host_role(&self) -> Option<crate::leader::Role> {
        self.inner.rt.shared.host_leader.as_ref().map(|h| h.role())
    }
    /// Host discovery through the host leader (`host_leader` and
    /// `host_discovery` on): whether this runtime's leader feeds it its
    /// discovery (it left the discovery group), and how many datagrams
    /// it was fed so far. `None` without a host leader.
    pub fn host_feed(&self) -> Option<(bool, u64)> {
        let h = self.inner.rt.shared.host_leader.as_ref()?;
        Some((h.fed(), h.feed_stats().0))
    }
    /// This node's runtime id.
    pub fn participant(&self) -> ferry_wire::ParticipantId {
        self.inner.rt.shared.id
    }
    /// What this node's runtime's discovery sent, accepted and refused:
    /// malformed datagrams, other domains, forged ones (`not_owner`: naming
    /// a known participant from another address), refused by caps or rate,
    /// from off this host under `discovery = localhost`, evictions.
    pub fn discovery_stats(&self) -> crate::DiscoveryStats {
        self.inner.rt.shared.core.lock().discovery.stats()
    }
    /// What this node's runtime's listeners accepted and turned away:
    /// connections without a Hello in time or with a bad one, evicted to
    /// make room, refused at the caps, and `accept` failures for want of
    /// file descriptors.
    pub fn connection_stats(&self) -> crate::ConnectionStats {
        self.inner.rt.shared.listener_counters.snapshot()
    }
}
