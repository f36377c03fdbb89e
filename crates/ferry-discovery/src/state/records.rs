//! Records arriving: announcement parts assembled into a participant's
//! whole record set, which then replaces what was known of it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferry_wire::beacon::{Announce, EndpointRecord, NodeRecord, Record};
use ferry_wire::ParticipantId;

use super::auth::action_of;
use super::guard::Origin;
use super::{
    ahead, Assembly, DatagramError, Discovery, Event, RemoteParticipant, MAX_LEASE_MS, MAX_PARTS,
    MAX_RECORDS_PER_PARTICIPANT, MAX_RECORDS_PER_SOURCE,
};

impl Discovery {
    /// One part of an announcement from its owner: assembled; a whole
    /// record set replaces the participant's records.
    pub(super) fn on_part(
        &mut self,
        now: Instant,
        id: ParticipantId,
        a: Announce,
    ) -> Result<(), DatagramError> {
        if a.parts > MAX_PARTS {
            self.stats.malformed += 1;
            return Err(DatagramError::TooLarge("more than 256 parts"));
        }
        let Some(e) = self.table.get_mut(&id) else {
            return Ok(());
        };
        // Had it already (or older) — unless it came through the broker
        // and now comes from the owner directly, with its addresses.
        let upgrade = e.via_broker && e.origin != Origin::Broker;
        if e.known.is_some() && !ahead(a.revision, e.revision) && !upgrade {
            return Ok(());
        }
        let held = e.records();
        let ip = e.origin.ip();
        let asm = match &mut e.assembly {
            Some(asm) if asm.revision == a.revision && asm.got.len() == a.parts as usize => asm,
            _ => e.assembly.insert(Assembly {
                revision: a.revision,
                got: vec![false; a.parts as usize],
                info: None,
                records: Vec::new(),
            }),
        };
        if asm.got[a.part as usize] {
            return Ok(());
        }
        if asm.records.len() + a.records.len() > MAX_RECORDS_PER_PARTICIPANT {
            e.assembly = None;
            self.stats.refused += 1;
            return Err(DatagramError::TooLarge("more than 4096 records"));
        }
        if self.sources.records(ip) + asm.records.len() + a.records.len()
            > MAX_RECORDS_PER_SOURCE + held
        {
            e.assembly = None;
            self.stats.refused += 1;
            return Err(DatagramError::TooLarge(
                "source address holds too many records",
            ));
        }
        asm.got[a.part as usize] = true;
        asm.info = Some(a.info);
        asm.records.extend(a.records);
        if !asm.got.iter().all(|g| *g) {
            return Ok(());
        }
        let asm = e.assembly.take().expect("matched above");
        if e.key.is_some() && !e.proven {
            // Signed, but it has not echoed a challenge yet (a recorded
            // beacon replayed looks the same): visible once it does.
            e.ready = Some(asm);
            // Ask now: its answer's echo is all that is missing.
            e.next_request = Some(now);
            self.next_scan = now;
            return Ok(());
        }
        self.complete(now, id, asm);
        Ok(())
    }

    /// A participant's whole record set (of a proven owner): replaces its
    /// records, with events for what changed. Records its grants do not
    /// allow are dropped.
    pub(super) fn complete(&mut self, now: Instant, id: ParticipantId, asm: Assembly) {
        let peer = self
            .table
            .get(&id)
            .and_then(|e| e.key)
            .and_then(|k| self.keys.as_ref().and_then(|keys| keys.peer(&k).cloned()));
        let Some(e) = self.table.get_mut(&id) else {
            return;
        };
        let upgrade = e.via_broker && e.origin != Origin::Broker;
        let held = e.records();
        let ip = e.origin.ip();
        let info = asm.info.expect("a part arrived");
        let old = held;
        let lease = Duration::from_millis(u64::from(info.lease_ms.min(MAX_LEASE_MS)));
        e.revision = asm.revision;
        if !ahead(e.advertised, e.revision) {
            e.advertised = e.revision;
            e.next_request = None;
            if let (1, Some(t)) = (e.asks, e.asked_at.take()) {
                // Answered at the first ask: a sample of how long answers
                // take (Karn: never after a retry, which is ambiguous).
                let sample = now.saturating_duration_since(t);
                self.answer_time = Some(match self.answer_time {
                    Some(a) => (a * 7 + sample) / 8,
                    None => sample,
                });
            }
            e.asks = 0;
        }
        e.lease = lease;
        e.expires = now + lease;
        self.next_scan = self.next_scan.min(e.expires);
        // New locators (a transport started, a host leader changed) are
        // told as a join again: path selection takes them from there.
        let relocated = e
            .known
            .as_ref()
            .is_some_and(|k| k.info.locators != info.locators);
        let joined = e.known.is_none() || upgrade || relocated;
        let direct = e.origin != Origin::Broker;
        e.via_broker = !direct;
        let k = e.known.get_or_insert_with(|| RemoteParticipant {
            id,
            info: info.clone(),
            nodes: BTreeMap::new(),
            endpoints: BTreeMap::new(),
            unicast: e.unicast,
            direct,
            enclave: None,
            identity: None,
        });
        k.enclave = peer.as_ref().map(|p| p.enclave().to_string());
        k.identity = peer.clone();
        k.info = info;
        k.direct = direct;
        let mut nodes = BTreeMap::new();
        let mut endpoints = BTreeMap::new();
        let (node_recs, endpoint_recs): (Vec<_>, Vec<_>) = asm
            .records
            .into_iter()
            .partition(|r| matches!(r, Record::Node(_)));
        for rec in node_recs.into_iter().chain(endpoint_recs) {
            match rec {
                Record::Node(n) => {
                    nodes.insert(n.id, n);
                }
                Record::Endpoint(ep) => {
                    if peer.as_ref().is_some_and(|p| {
                        !p.allows(action_of(ep.kind), &ep.topic)
                            || !serves_only_its_own_admin(&ep, &nodes)
                    }) {
                        self.stats.security.denied += 1;
                        continue;
                    }
                    endpoints.insert(ep.entity, ep);
                }
            }
        }
        k.nodes = nodes;
        let old_eps = std::mem::replace(&mut k.endpoints, endpoints);
        let new = k.nodes.len() + k.endpoints.len();
        if joined {
            self.events.push_back(Event::ParticipantJoined(id));
        }
        let k = self.table[&id].known.as_ref().expect("just set");
        for (entity, ep) in &old_eps {
            if k.endpoints.get(entity) != Some(ep) {
                self.events.push_back(Event::EndpointLeft {
                    participant: id,
                    endpoint: ep.clone(),
                });
            }
        }
        let added: Vec<EndpointRecord> = k
            .endpoints
            .iter()
            .filter(|(entity, ep)| old_eps.get(entity) != Some(ep))
            .map(|(_, ep)| ep.clone())
            .collect();
        for endpoint in added {
            self.events.push_back(Event::EndpointJoined {
                participant: id,
                endpoint,
            });
        }
        self.sources.set_records(ip, old, new);
    }
}

/// A signed participant may serve only its own nodes' admin services: a
/// `/_ferry/admin/robot1/cam` service record from a runtime without a node
/// `/robot1/cam` is an identity with no grants posing as another's admin
/// plane (internal names need no grant, so this is their check).
fn serves_only_its_own_admin(ep: &EndpointRecord, nodes: &BTreeMap<u32, NodeRecord>) -> bool {
    let Some(node) = ferry_security::admin_service_node(&ep.topic) else {
        return true;
    };
    if ep.kind != ferry_wire::EndpointKind::Service {
        return true;
    }
    nodes.get(&ep.node).is_some_and(|n| {
        let full = if n.namespace == "/" {
            format!("/{}", n.name)
        } else {
            format!("{}/{}", n.namespace, n.name)
        };
        full == node
    })
}
