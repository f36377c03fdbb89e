//! A snapshot of the ferry graph as one runtime knows it (what `ferry topic
//! list`, `node list` and `service list` print).

use ferry_wire::beacon::EndpointRecord;
use ferry_wire::{EndpointId, EndpointKind, ParticipantId, Qos, TypeHash};

/// A node somewhere in the domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphNode {
    /// Fully qualified name (`/ns/name`).
    pub name: String,
    /// Its runtime.
    pub participant: ParticipantId,
    /// Its process id.
    pub pid: u32,
    /// Its host identity.
    pub host_id: u64,
    /// Its runtime's locators.
    pub locators: Vec<String>,
}

/// An endpoint somewhere in the domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphEndpoint {
    /// Global id.
    pub id: EndpointId,
    /// What it is.
    pub kind: EndpointKind,
    /// Topic or service name.
    pub topic: String,
    /// Type name.
    pub type_name: String,
    /// Type hash.
    pub type_hash: TypeHash,
    /// QoS.
    pub qos: Qos,
    /// Fully qualified name of its node.
    pub node: String,
}

impl GraphEndpoint {
    pub(crate) fn new(id: EndpointId, e: &EndpointRecord, node: String) -> Self {
        GraphEndpoint {
            id,
            kind: e.kind,
            topic: e.topic.clone(),
            type_name: e.type_name.clone(),
            type_hash: e.type_hash,
            qos: e.qos,
            node,
        }
    }
}

/// Everything one runtime knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    /// Nodes, sorted by name.
    pub nodes: Vec<GraphNode>,
    /// Endpoints, sorted by topic.
    pub endpoints: Vec<GraphEndpoint>,
    /// ROS 2 nodes on DDS (with `[ros2]`), as ROS 2's graph names them.
    pub ros2_nodes: Vec<crate::ros2::Ros2Node>,
    /// ROS 2 publishers, subscriptions, services and clients on DDS.
    pub ros2_endpoints: Vec<crate::ros2::Ros2Endpoint>,
}

/// Names starting with this are ferry's own (admin plane) and hidden by default.
pub const HIDDEN_PREFIX: &str = "/_ferry";

impl Graph {
    /// Topics with their type names (publishers and subscribers), sorted.
    pub fn topics(&self) -> Vec<(String, Vec<String>)> {
        self.names_of(&[EndpointKind::Publisher, EndpointKind::Subscriber])
    }

    /// Services with their type names, sorted.
    pub fn services(&self) -> Vec<(String, Vec<String>)> {
        self.names_of(&[EndpointKind::Service])
    }

    fn names_of(&self, kinds: &[EndpointKind]) -> Vec<(String, Vec<String>)> {
        let mut out: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
            Default::default();
        for e in self.endpoints.iter().filter(|e| kinds.contains(&e.kind)) {
            if e.topic.starts_with(HIDDEN_PREFIX) {
                continue;
            }
            let set = out.entry(e.topic.clone()).or_default();
            if e.type_name != "*" {
                set.insert(e.type_name.clone());
            }
        }
        for e in self
            .ros2_endpoints
            .iter()
            .filter(|e| kinds.contains(&e.kind))
        {
            out.entry(e.name.clone())
                .or_default()
                .insert(e.type_name.clone());
        }
        out.into_iter()
            .map(|(k, v)| (k, v.into_iter().collect()))
            .collect()
    }

    /// Endpoints of one topic or service.
    pub fn endpoints_of<'a>(
        &'a self,
        topic: &'a str,
    ) -> impl Iterator<Item = &'a GraphEndpoint> + 'a {
        self.endpoints.iter().filter(move |e| e.topic == topic)
    }

    /// Endpoints of one node.
    pub fn endpoints_of_node<'a>(
        &'a self,
        node: &'a str,
    ) -> impl Iterator<Item = &'a GraphEndpoint> + 'a {
        self.endpoints.iter().filter(move |e| e.node == node)
    }

    /// Names shared by more than one node (each with its count), without
    /// ferry's hidden ones.
    pub fn duplicate_names(&self) -> Vec<(String, usize)> {
        let mut count = std::collections::BTreeMap::<&str, usize>::new();
        for n in self
            .nodes
            .iter()
            .filter(|n| !n.name.starts_with(HIDDEN_PREFIX))
        {
            *count.entry(n.name.as_str()).or_default() += 1;
        }
        count
            .into_iter()
            .filter(|(_, c)| *c > 1)
            .map(|(n, c)| (n.to_string(), c))
            .collect()
    }

    /// Node names, without ferry's hidden ones, sorted, each once.
    pub fn node_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| !n.name.starts_with(HIDDEN_PREFIX))
            .map(|n| n.name.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}
