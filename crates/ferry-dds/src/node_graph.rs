//! [`Graph`]: this participant's part of ROS 2's node graph
//! (`ros_discovery_info`) on a [`Participant`]'s writer and reader; the
//! sample's encoding is in [`crate::graph`].

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::{graph, DdsError, Guid, Participant, Reader, Writer};

/// This participant's part of ROS 2's node graph (`ros_discovery_info`):
/// announces ferry's nodes, and keeps every other participant's latest.
///
/// Entries are kept per DDS writer of the graph topic (not per GID a
/// sample claims: a peer cannot grow the table by inventing GIDs), at most
/// [`Graph::MAX_PARTICIPANTS`], and forgotten once their writer is gone.
pub struct Graph {
    writer: Writer,
    gid: Guid,
    reader: Reader,
    known: std::sync::Arc<Mutex<HashMap<u64, graph::ParticipantEntities>>>,
}

impl Graph {
    /// Most participants' graphs kept at once.
    pub const MAX_PARTICIPANTS: usize = 4096;
    /// Largest graph sample decoded (64 KiB: about 200 nodes of 10
    /// endpoints each).
    pub const MAX_SAMPLE: usize = 64 << 10;

    /// Joins the graph of `pp`'s domain.
    pub fn new(pp: &Participant) -> Result<Self, DdsError> {
        Self::marked(pp, "")
    }

    /// Joins the graph with `mark` (`key=value;`) added to its writer's
    /// user data, leaving out the graphs of writers whose user data has the
    /// same key: ferry's runtimes know each other from ferry's own
    /// discovery, and list only ROS 2's nodes from here.
    pub fn marked(pp: &Participant, mark: &str) -> Result<Self, DdsError> {
        let topic = pp.topic(graph::TOPIC, graph::TYPE_NAME)?;
        let rq = graph::reader_qos();
        let mut wq = graph::writer_qos();
        wq.user_data.extend_from_slice(mark.as_bytes());
        let key: Vec<u8> = mark
            .split_once('=')
            .map(|(k, _)| format!("{k}=").into_bytes())
            .unwrap_or_default();
        let known: std::sync::Arc<Mutex<HashMap<u64, graph::ParticipantEntities>>> =
            Default::default();
        let sink = known.clone();
        let reader = pp.reader(&topic, &rq, move |s| {
            // A node graph is a few hundred bytes per node: a larger sample
            // is not decoded (what is kept stays bounded by count × this).
            if s.cdr.len() > Self::MAX_SAMPLE {
                tracing::debug!("a {} B ros_discovery_info sample ignored", s.cdr.len());
                return;
            }
            if !key.is_empty()
                && s.writer().is_ok_and(|w| {
                    w.user_data
                        .windows(key.len())
                        .any(|win| win == key.as_slice())
                })
            {
                return;
            }
            match graph::ParticipantEntities::decode(&s.cdr) {
                Ok(p) => {
                    let mut known = sink.lock();
                    if known.len() < Self::MAX_PARTICIPANTS || known.contains_key(&s.publication) {
                        known.insert(s.publication, p);
                    } else {
                        tracing::warn!(
                            "ROS 2 graph: more than {} participants; one more is not listed",
                            Self::MAX_PARTICIPANTS
                        );
                    }
                }
                Err(e) => tracing::debug!("a malformed ros_discovery_info sample: {e}"),
            }
        })?;
        Ok(Graph {
            writer: pp.writer(&topic, &wq)?,
            gid: pp.guid()?,
            reader,
            known,
        })
    }

    /// Announces this participant's nodes (all of them, every time).
    pub fn announce(&self, nodes: Vec<graph::NodeEntities>) -> Result<(), DdsError> {
        let p = graph::ParticipantEntities {
            gid: self.gid,
            nodes,
        };
        self.writer.write(&p.encode())
    }

    /// Every other participant's nodes as last announced, by participants
    /// whose graph writer is still there.
    pub fn participants(&self) -> Vec<graph::ParticipantEntities> {
        let handles: Vec<u64> = self.known.lock().keys().copied().collect();
        let gone: Vec<u64> = handles
            .into_iter()
            .filter(|&h| self.reader.publication(h).is_err())
            .collect();
        let mut known = self.known.lock();
        for h in gone {
            known.remove(&h);
        }
        let mut v: Vec<_> = known
            .values()
            .filter(|p| p.gid != self.gid)
            .cloned()
            .collect();
        v.sort_by_key(|p| p.gid);
        v
    }
}
