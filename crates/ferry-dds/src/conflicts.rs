//! QoS conflicts of ferry's DDS endpoints with ROS 2's, as reports that
//! name the policy and the ROS 2 nodes on the other side (`[ros2]`):
//! Cyclone's incompatible-QoS status is the trigger, DDS discovery and
//! ROS 2's graph say who is there.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::names;
use crate::path::{DdsPath, RosEndpoint};

/// A QoS conflict of a ferry endpoint's DDS side with ROS 2 endpoints on
/// its topic: DDS does not match them, so no sample crosses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ros2Conflict {
    /// The last policy in conflict (`reliability`, `durability`,
    /// `deadline`, `liveliness`, or DDS's name of another).
    pub policy: &'static str,
    /// Conflicts DDS has counted on this endpoint so far.
    pub total: u32,
    /// The ROS 2 nodes with endpoints of the other kind on the topic (one
    /// of them is in conflict; DDS does not say which): fully qualified
    /// names, or the endpoint's GUID when ROS 2's graph names no node.
    pub nodes: Vec<String>,
}

/// Most nodes a [`Ros2Conflict`] names (then `… and N more`).
pub const MAX_CONFLICT_NODES: usize = 16;

/// The ROS 2 nodes (or GUIDs) with endpoints on `topic` of the other kind
/// than local endpoint `entity` (a writer when `writer`) that are not
/// matched with it — one of them conflicts. None when there is no such
/// ROS 2 endpoint (within 1 s) or the path is gone. The peer is in DDS
/// discovery by now or within moments; its node in ROS 2's graph once the
/// peer's graph writer has delivered (Fast DDS repairs every 3 s): names
/// are waited for up to 5 s.
fn conflicting_nodes(
    path: &std::sync::Weak<DdsPath>,
    topic: Option<&str>,
    writer: bool,
    entity: crate::ffi::Entity,
) -> Option<Vec<String>> {
    let mut found: Option<Vec<RosEndpoint>> = None;
    for attempt in 0..50 {
        let others: Vec<RosEndpoint> = {
            let path = path.upgrade()?;
            let matched = crate::matched_guids(entity, writer);
            path.ros_endpoints()
                .into_iter()
                .filter(|e| {
                    e.kind == names::RosKind::Topic
                        && e.writer != writer
                        && Some(e.name.as_str()) == topic
                        && !matched.contains(&e.guid)
                })
                .collect()
        };
        let named = !others.is_empty() && others.iter().all(|e| e.node.is_some());
        if !others.is_empty() {
            found = Some(others);
        }
        if named || (found.is_none() && attempt >= 10) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut nodes: Vec<String> = found?
        .into_iter()
        .map(|e| match e.node {
            Some((ns, n)) if ns == "/" => format!("/{n}"),
            Some((ns, n)) => format!("{ns}/{n}"),
            None => e.guid.iter().map(|b| format!("{b:02x}")).collect(),
        })
        .collect();
    nodes.sort();
    nodes.dedup();
    if nodes.len() > MAX_CONFLICT_NODES {
        let more = nodes.len() - MAX_CONFLICT_NODES;
        nodes.truncate(MAX_CONFLICT_NODES);
        nodes.push(format!("… and {more} more"));
    }
    Some(nodes)
}

/// Told of each [`Ros2Conflict`] of one ferry endpoint.
pub type OnRos2Conflict = Arc<dyn Fn(Ros2Conflict) + Send + Sync>;

impl DdsPath {
    /// What a ferry endpoint on DDS topic `topic_name` (a writer when
    /// `writer`) does with a QoS conflict DDS reports: find the ROS 2
    /// endpoints of the other kind on the topic that are not matched with
    /// it, and their nodes (on the conflict thread,
    /// [`crate::listener::examine`]), and tell `report`. Conflicts that
    /// arrive while one is waiting or being examined are folded into it
    /// (the report carries the latest count): a peer that makes many
    /// conflicting endpoints costs one job per ferry endpoint at a time.
    /// A conflict with another ferry runtime's DDS endpoint only is not
    /// reported here: ferry's own discovery reports it, naming the peer.
    pub(crate) fn conflict_reporter(
        self: &Arc<Self>,
        topic_name: &str,
        writer: bool,
        report: OnRos2Conflict,
    ) -> crate::OnConflict {
        let path = Arc::downgrade(self);
        let topic = names::ros_name(topic_name).map(|(_, n)| n);
        // The latest conflict (policy, total) and whether a job is queued.
        let latest = Arc::new(Mutex::new((None::<crate::QosConflict>, false)));
        Box::new(move |c: crate::QosConflict| {
            {
                let mut l = latest.lock();
                l.0 = Some(c);
                if std::mem::replace(&mut l.1, true) {
                    return; // a queued job will report it
                }
            }
            let (path, topic, report, latest) =
                (path.clone(), topic.clone(), report.clone(), latest.clone());
            crate::listener::examine(move || {
                let Some(c) = std::mem::take(&mut *latest.lock()).0 else {
                    return;
                };
                match conflicting_nodes(&path, topic.as_deref(), writer, c.entity) {
                    Some(nodes) => report(Ros2Conflict {
                        policy: c.policy,
                        total: c.total,
                        nodes,
                    }),
                    None => tracing::debug!(
                        "DDS QoS conflict ({}) on {topic:?} with no ROS 2 endpoint: another \
                         ferry runtime's (its own discovery reports it)",
                        c.policy
                    ),
                }
            });
        })
    }
}
