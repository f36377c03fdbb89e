//! The `[zenoh]` path of a runtime: its nodes in rmw_zenoh's graph, and
//! every port (but those a `[[topics]] zenoh = false` rule keeps off, and
//! ferry's own `/_ferry` ones) also a Zenoh publisher or subscriber with
//! rmw_zenoh's conventions — through `ferry-zenoh` when ferry is built
//! with the `zenoh` feature. A publisher puts a sample only for the
//! subscriptions its own paths do not reach (`ferry_zenoh::path`).

use std::sync::Arc;

use ferry_wire::beacon::EndpointRecord;
use ferry_wire::EndpointId;

use crate::config::Config;
use crate::error::BuildError;
use crate::ros2::{Ros2Endpoint, Ros2Node};
use crate::transport::Link;

/// The runtime's Zenoh path.
pub(crate) struct Zenoh {
    #[cfg(feature = "zenoh")]
    path: Arc<ferry_zenoh::path::ZenohPath>,
}

/// The Zenoh session as `ferry doctor` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZenohSession {
    /// Its Zenoh id.
    pub zid: String,
    /// Peer, client or router.
    pub mode: String,
    /// The endpoints it connects to (configured).
    pub connect: Vec<String>,
    /// The routers it is connected to now (their Zenoh ids).
    pub routers: Vec<String>,
    /// The peers it is connected to now.
    pub peers: Vec<String>,
}

impl Zenoh {
    /// Starts the path of runtime `runtime` when `[zenoh]` is on.
    pub fn start(
        cfg: &Config,
        runtime: ferry_wire::ParticipantId,
    ) -> Result<Option<Zenoh>, BuildError> {
        let (Some(z), Some(domain)) = (&cfg.zenoh, cfg.zenoh_domain()) else {
            return Ok(None);
        };
        let fail = |why: String| BuildError::Zenoh { domain, why };
        if cfg.security.mode == ferry_security::Mode::Enforce {
            return Err(fail(
                "security is `enforce`, and the Zenoh path carries samples that ferry does not \
                 authenticate (Zenoh's TLS protects the links, not who publishes): leave \
                 `[zenoh]` off, or use `permissive`"
                    .into(),
            ));
        }
        #[cfg(feature = "zenoh")]
        {
            if cfg.security.mode != ferry_security::Mode::Off {
                tracing::warn!(
                    "security is `{:?}`: ferry does not authenticate the Zenoh path's samples",
                    cfg.security.mode
                );
            }
            let path = ferry_zenoh::path::ZenohPath::start(ferry_zenoh::path::PathConfig {
                runtime,
                domain: u32::from(domain),
                zenoh: z.clone(),
                keep_all_block: std::time::Duration::from_millis(cfg.keep_all_block_ms),
            })
            .map_err(|e| fail(e.to_string()))?;
            tracing::info!(
                "Zenoh path on: domain {domain}, {} connecting to {:?}",
                z.mode.as_str(),
                z.connect
            );
            Ok(Some(Zenoh { path }))
        }
        #[cfg(not(feature = "zenoh"))]
        {
            let _ = (z, runtime);
            Err(fail(
                "ferry was built without its `zenoh` feature (cargo feature `ferry/zenoh`)".into(),
            ))
        }
    }

    /// Whether `topic` goes on Zenoh (`[[topics]] zenoh`, not ferry's own).
    pub(crate) fn carries(cfg: &Config, topic: &str) -> bool {
        !topic.starts_with(crate::graph::HIDDEN_PREFIX) && cfg.topic_zenoh(topic)
    }

    /// The locator this runtime announces in ferry's discovery:
    /// `zenoh/<its session's id>`, which makes others believe its
    /// `@ferry_lv` claim.
    pub fn locator(&self) -> Option<ferry_wire::Locator> {
        #[cfg(feature = "zenoh")]
        return Some(ferry_wire::Locator::named(
            ferry_wire::TransportKind::Zenoh,
            self.path.zid(),
        ));
        #[cfg(not(feature = "zenoh"))]
        None
    }

    /// Ferry's discovery found participant `p` with `locators`: only the
    /// Zenoh session a locator names may claim to be `p` (none, when no
    /// locator does).
    pub fn discovered(&self, p: ferry_wire::ParticipantId, locators: &[ferry_wire::Locator]) {
        #[cfg(feature = "zenoh")]
        {
            let zid = locators
                .iter()
                .find(|l| l.transport == ferry_wire::TransportKind::Zenoh)
                .and_then(|l| l.name());
            self.path.discovered(p, zid);
        }
        #[cfg(not(feature = "zenoh"))]
        let _ = (p, locators);
    }

    /// Participant `p` left ferry's discovery.
    pub fn left(&self, p: ferry_wire::ParticipantId) {
        #[cfg(feature = "zenoh")]
        self.path.left(p);
        #[cfg(not(feature = "zenoh"))]
        let _ = p;
    }

    /// A node joins rmw_zenoh's graph.
    pub fn add_node(&self, node: u32, namespace: &str, name: &str) {
        #[cfg(feature = "zenoh")]
        self.path.add_node(node, namespace, name);
        #[cfg(not(feature = "zenoh"))]
        let _ = (node, namespace, name);
    }

    /// A node leaves it.
    pub fn remove_node(&self, node: u32) {
        #[cfg(feature = "zenoh")]
        self.path.remove_node(node);
        #[cfg(not(feature = "zenoh"))]
        let _ = node;
    }

    /// The Zenoh link of publisher `id`, when its topic goes to Zenoh;
    /// `reached` says which ferry readers the publisher reaches on its own
    /// paths (they get nothing over Zenoh).
    pub fn writer_link(
        &self,
        cfg: &Config,
        id: EndpointId,
        record: &EndpointRecord,
        reached: crate::transport::Reached,
    ) -> Option<Arc<dyn Link>> {
        if !Self::carries(cfg, &record.topic) {
            return None;
        }
        #[cfg(feature = "zenoh")]
        match self.path.writer_link(
            record.node,
            id,
            &record.topic,
            (&record.type_name, &record.type_hash),
            &record.qos,
            reached,
        ) {
            Ok(l) => return Some(l),
            Err(e) => tracing::warn!("`{}` stays off Zenoh: {e}", record.topic),
        }
        #[cfg(not(feature = "zenoh"))]
        let _ = (id, reached);
        None
    }

    /// Subscriber `id` also reads its topic's publishers on Zenoh.
    pub fn subscribe(&self, cfg: &Config, id: EndpointId, record: &EndpointRecord) {
        if !Self::carries(cfg, &record.topic) {
            return;
        }
        #[cfg(feature = "zenoh")]
        if let Err(e) = self.path.subscribe(
            record.node,
            id,
            &record.topic,
            (&record.type_name, &record.type_hash),
            &record.qos,
        ) {
            tracing::warn!("`{}` stays off Zenoh: {e}", record.topic);
        }
        #[cfg(not(feature = "zenoh"))]
        let _ = id;
    }

    /// The service type (`pkg/srv/Name`) of a service's or client's
    /// record (its type is `<request>|<response>`).
    fn service_type(record: &EndpointRecord) -> Option<String> {
        let req = record.type_name.split('|').next()?;
        #[cfg(feature = "zenoh")]
        return ferry_zenoh::service_type(req).map(str::to_string);
        // (Without the feature there is no Zenoh path to serve on.)
        #[cfg(not(feature = "zenoh"))]
        Some(req.to_string())
    }

    /// Service `id` also answers calls over Zenoh (rmw_zenoh's queryable).
    pub fn serve(&self, cfg: &Config, id: EndpointId, record: &EndpointRecord) {
        if !Self::carries(cfg, &record.topic) {
            return;
        }
        let Some(srv) = Self::service_type(record) else {
            tracing::warn!(
                "service `{}` stays off Zenoh: `{}` is not a ROS 2 service type",
                record.topic,
                record.type_name
            );
            return;
        };
        #[cfg(feature = "zenoh")]
        if let Err(e) = self.path.serve(
            record.node,
            id,
            &record.topic,
            (&srv, &record.type_hash),
            &record.qos,
        ) {
            tracing::warn!("service `{}` stays off Zenoh: {e}", record.topic);
        }
        #[cfg(not(feature = "zenoh"))]
        let _ = (id, srv);
    }

    /// The Zenoh link of client `id`: calls to the services its own paths
    /// do not reach (`reached`), replies to `sink`.
    pub fn client_link(
        &self,
        cfg: &Config,
        id: EndpointId,
        record: &EndpointRecord,
        reached: crate::transport::Reached,
        sink: std::sync::Weak<dyn crate::transport::ReplySink>,
    ) -> Option<Arc<dyn Link>> {
        if !Self::carries(cfg, &record.topic) {
            return None;
        }
        let Some(srv) = Self::service_type(record) else {
            tracing::warn!(
                "client `{}` stays off Zenoh: `{}` is not a ROS 2 service type",
                record.topic,
                record.type_name
            );
            return None;
        };
        #[cfg(feature = "zenoh")]
        match self.path.client_link(
            record.node,
            id,
            &record.topic,
            (&srv, &record.type_hash),
            &record.qos,
            reached,
            sink,
        ) {
            Ok(l) => return Some(l),
            Err(e) => tracing::warn!("client `{}` stays off Zenoh: {e}", record.topic),
        }
        #[cfg(not(feature = "zenoh"))]
        let _ = (id, srv, reached, sink);
        None
    }

    /// Subscriber or service `id` is gone.
    pub fn unsubscribe(&self, id: EndpointId) {
        #[cfg(feature = "zenoh")]
        self.path.unsubscribe(id);
        #[cfg(not(feature = "zenoh"))]
        let _ = id;
    }

    /// The session now.
    pub fn session(&self, cfg: &Config) -> ZenohSession {
        let connect = cfg
            .zenoh
            .as_ref()
            .map(|z| z.connect.clone())
            .unwrap_or_default();
        #[cfg(feature = "zenoh")]
        {
            let i = self.path.info();
            ZenohSession {
                zid: i.zid,
                mode: i.mode.to_string(),
                connect,
                routers: i.routers,
                peers: i.peers,
            }
        }
        #[cfg(not(feature = "zenoh"))]
        ZenohSession {
            zid: String::new(),
            mode: String::new(),
            connect,
            routers: Vec::new(),
            peers: Vec::new(),
        }
    }

    /// The nodes and endpoints of rmw_zenoh's graph, but those of ferry
    /// runtimes `known` accepts (ferry's own graph lists them), sorted.
    pub fn graph(
        &self,
        known: impl Fn(ferry_wire::ParticipantId) -> bool,
    ) -> (Vec<Ros2Node>, Vec<Ros2Endpoint>) {
        #[cfg(feature = "zenoh")]
        {
            use ferry_wire::{EndpointKind, TransportKind};
            use ferry_zenoh::EntityKind as K;
            let (mut nodes, mut eps) = (Vec::new(), Vec::new());
            for (t, ferry) in self.path.tokens_with_runtime() {
                if ferry.is_some_and(&known) {
                    continue;
                }
                let node = crate::runtime::full_name(&t.namespace, &t.node);
                let kind = match t.kind {
                    K::Node => {
                        nodes.push(Ros2Node {
                            namespace: t.namespace,
                            name: t.node,
                            via: TransportKind::Zenoh,
                        });
                        continue;
                    }
                    K::Publisher => EndpointKind::Publisher,
                    K::Subscription => EndpointKind::Subscriber,
                    K::Service => EndpointKind::Service,
                    K::Client => EndpointKind::Client,
                };
                let Some(i) = t.topic else { continue };
                eps.push(Ros2Endpoint {
                    name: i.name,
                    kind,
                    type_name: ferry_wire::ros_names::ros_type_name(&i.type_name)
                        .unwrap_or(i.type_name),
                    node,
                    via: TransportKind::Zenoh,
                });
            }
            nodes.sort();
            nodes.dedup();
            eps.sort_by(|a, b| {
                (&a.name, a.kind as u8, &a.node).cmp(&(&b.name, b.kind as u8, &b.node))
            });
            (nodes, eps)
        }
        #[cfg(not(feature = "zenoh"))]
        {
            let _ = known;
            (Vec::new(), Vec::new())
        }
    }
}
