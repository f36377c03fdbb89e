//! The runtime's side of forwarding through host leaders
//! (`transport::fwd`): starting it, telling it who leads, and answering
//! its relay which readers of this host a writer goes to.

use std::sync::Arc;

use ferry_discovery::matching::{match_endpoints, MatchOutcome};
use ferry_transport::leader::Role;
use ferry_wire::{EndpointId, TransportKind};

use super::Shared;
use crate::transport::fwd::{ForwardTransport, Target};
use crate::transport::shm::ShmTransport;
use crate::transport::Transport;

/// Forwarding, when this runtime has TCP to carry host streams (its
/// relay works only while it leads its host: `host_leader = true`). Not
/// with security on: a relayed writer's identity is proven to the leader,
/// not to the readers behind it (not built).
pub(super) fn start(
    id: ferry_wire::ParticipantId,
    transports: &[Arc<dyn Transport>],
    shm: Option<Arc<ShmTransport>>,
    secured: bool,
    udp: bool,
) -> Option<Arc<ForwardTransport>> {
    if secured {
        tracing::info!("forwarding through the host leader is off: not built with security on");
        return None;
    }
    let of = |k| transports.iter().find(|t| t.kind() == k).cloned();
    let tcp = of(TransportKind::Tcp)?;
    Some(ForwardTransport::new(
        crate::host::host_id(),
        id,
        tcp,
        of(TransportKind::Udp).filter(|_| udp),
        shm,
    ))
}

/// Lets the relay ask the runtime for a writer's readers here.
pub(super) fn bind(shared: &Arc<Shared>) {
    if let Some(f) = &shared.fwd {
        let me = Arc::downgrade(shared);
        f.relay().bind(Box::new(move |w| {
            me.upgrade()
                .map(|s| s.forward_targets(w))
                .unwrap_or_default()
        }));
    }
}

impl Shared {
    /// The election's outcome for forwarding: the relay works while this
    /// runtime leads, and shared memory accepts forwarded connections from
    /// the leader's process only.
    pub(super) fn forward_role(&self, role: &Role) {
        let (leading, pid, followers) = match role {
            Role::Leader { followers } => (
                true,
                std::process::id(),
                followers.iter().map(|m| m.participant).collect(),
            ),
            Role::Follower { leader } => (false, leader.pid, Vec::new()),
            _ => (false, 0, Vec::new()),
        };
        if let Some(shm) = &self.shm {
            shm.set_host_leader_pid(pid);
        }
        if let Some(f) = &self.fwd {
            f.relay().set_leading(leading, &followers);
        }
    }

    /// Names the host leader of each forwarded connection in `conns`
    /// (`ConnectionInfo::via`).
    pub(crate) fn name_forwarded(&self, conns: &mut [crate::stats::ConnectionInfo]) {
        if !conns
            .iter()
            .any(|c| c.transport == TransportKind::Forwarded)
        {
            return;
        }
        let core = self.core.lock();
        for c in conns
            .iter_mut()
            .filter(|c| c.transport == TransportKind::Forwarded)
        {
            c.via = self.forwarded_via(&core, c);
        }
    }

    /// Who a forwarded connection goes through, for people: the leader's
    /// runtime name and process (a writer's connection names its leader in
    /// its locator; a reader's is its own host's leader).
    fn forwarded_via(&self, core: &super::Core, c: &crate::stats::ConnectionInfo) -> String {
        let leader = match c.side {
            crate::stats::Side::Writer => c
                .locator
                .split(' ')
                .next()
                .and_then(|l| l.strip_prefix("fwd/"))
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                .map(ferry_wire::ParticipantId),
            crate::stats::Side::Reader => match self.host_leader.as_ref().map(|h| h.role()) {
                Some(Role::Follower { leader }) => Some(leader.participant),
                Some(Role::Leader { .. }) => Some(self.id),
                _ => None,
            },
        };
        match leader {
            Some(l) if l == self.id => "this runtime".into(),
            // Its first node's name, else its runtime's (the process).
            Some(l) => match core.discovery.participant_info(l) {
                Some(p) => {
                    let name = p
                        .nodes
                        .values()
                        .next()
                        .map(|n| n.name.as_str())
                        .filter(|n| !n.is_empty())
                        .unwrap_or(p.info.name.as_str());
                    format!("{} (pid {})", name, p.info.pid)
                }
                None => l.to_string(),
            },
            None => "its host leader".into(),
        }
    }

    /// The readers on this host that `writer` (of another host) goes to
    /// through this runtime, its leader: this runtime's own, and those of
    /// the runtimes of this host in the election (their consent to be
    /// served by its leader; each accepts only the one it elected), that
    /// match the writer.
    fn forward_targets(&self, writer: EndpointId) -> Vec<Target> {
        let core = self.core.lock();
        let Some(wrec) = core
            .discovery
            .participant_info(writer.participant)
            .and_then(|p| p.endpoints.get(&writer.entity))
        else {
            return Vec::new();
        };
        // A reader pinned to another path is not the leader's to serve.
        let matches = |r: &ferry_wire::beacon::EndpointRecord| {
            match_endpoints(wrec, r) == MatchOutcome::Matched
                && r.qos
                    .transport
                    .is_none_or(|k| k == TransportKind::Forwarded)
        };
        let target = |reader: EndpointId, peer: crate::transport::PeerInfo| Target {
            reader,
            peer,
            topic: wrec.topic.clone(),
            qos: wrec.qos,
        };
        let mut out: Vec<Target> = core
            .readers
            .keys()
            .map(|e| EndpointId {
                participant: self.id,
                entity: *e,
            })
            .filter(|r| core.table.endpoint(*r).is_some_and(matches))
            .map(|r| target(r, self.local.clone()))
            .collect();
        let Some(relay) = self.fwd.as_ref().map(|f| f.relay()) else {
            return out;
        };
        for rp in core.discovery.participants() {
            // In the election (following this runtime, or still naming the
            // leader before it: a follower reaches the new leader's
            // socket a little after the writer may): its runtime accepts
            // the relay once it follows this one.
            let elects = relay.follows_me(rp.id)
                || rp.info.locators.iter().any(|l| l.host_leader().is_some());
            if rp.id == self.id || rp.info.host_id != self.local.host_id || !elects {
                continue;
            }
            for r in rp.endpoints.values().filter(|r| matches(r)) {
                let id = EndpointId {
                    participant: rp.id,
                    entity: r.entity,
                };
                out.push(target(id, super::peer_info(rp)));
            }
        }
        out
    }
}
