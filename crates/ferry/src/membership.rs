//! What every port holds of the node it belongs to: the node's identity
//! and runtime, and how a new endpoint of it is declared.

use std::sync::Arc;

use ferry_wire::beacon::EndpointRecord;
use ferry_wire::{EndpointId, EndpointKind, Qos, TypeHash};

use crate::error::BuildError;
use crate::runtime::Runtime;

/// A node's identity and runtime, shared by the node and its ports (the
/// node leaves the graph when the last of them drops).
pub(crate) struct NodeInner {
    pub rt: Arc<Runtime>,
    pub id: u32,
    pub name: String,
    pub namespace: String,
}

impl NodeInner {
    /// Expands the name and allocates the id and discovery record of a new
    /// endpoint of `node` (the caller registers it with the runtime).
    pub(crate) fn declare(
        &self,
        name: &str,
        kind: EndpointKind,
        (type_name, type_hash): (String, TypeHash),
        qos: Qos,
    ) -> Result<(EndpointId, EndpointRecord), BuildError> {
        let topic = crate::names::expand(name, &self.namespace, &self.name)?;
        if let Some(s) = &self.rt.shared.security {
            s.check_port(kind, &topic)?;
        }
        let entity = self.rt.shared.new_entity();
        let id = EndpointId {
            participant: self.rt.shared.id,
            entity,
        };
        Ok((
            id,
            EndpointRecord {
                entity,
                node: self.id,
                kind,
                topic,
                type_name,
                type_hash,
                qos,
            },
        ))
    }
}

impl Drop for NodeInner {
    fn drop(&mut self) {
        self.rt.shared.remove_node(self.id);
    }
}
