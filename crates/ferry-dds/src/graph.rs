//! ROS 2's node graph over DDS: the `ros_discovery_info` topic.
//!
//! DDS discovery knows participants, readers and writers, not ROS 2 nodes.
//! Every ROS 2 participant publishes one `rmw_dds_common/ParticipantEntitiesInfo`
//! (reliable, transient local, keep last 1) naming its nodes and, per node,
//! the GUIDs of its readers and writers; the whole list again on every
//! change. `ros2 node list` is built from it, so ferry publishes its own and
//! reads the others' (ferry's graph then shows ROS 2's node names).
//!
//! The layout (ROS 2 Iron and later; Humble's GIDs were 24 bytes):
//! `Gid { uint8[16] }`, `NodeEntitiesInfo { string<=256 node_namespace;
//! string<=256 node_name; Gid[] reader_gid_seq; Gid[] writer_gid_seq }`,
//! `ParticipantEntitiesInfo { Gid gid; NodeEntitiesInfo[] node_entities_info_seq }`.

use ferry_idl::cdr::{CdrError, Reader, Writer};

use crate::{DdsQos, Guid};

/// The DDS topic of ROS 2's graph (no `rt/`: it is not a ROS topic).
pub const TOPIC: &str = "ros_discovery_info";
/// Its DDS type name.
pub const TYPE_NAME: &str = "rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_";
/// Its ROS 2 type hash (endpoint user data `typehash=…;`).
pub const TYPE_HASH: &str =
    "RIHS01_91a0593bacdcc50ea9bdcf849a938b128412cc1ea821245c663bcd26f83c295e";
/// Longest node name or namespace ROS 2 puts here (`string<=256`).
pub const NAME_BOUND: usize = 256;

/// One node's entities.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeEntities {
    /// The node's namespace (`/` for none).
    pub namespace: String,
    /// The node's name.
    pub name: String,
    /// GUIDs of its readers (subscriptions; a service's request reader; a
    /// client's reply reader).
    pub readers: Vec<Guid>,
    /// GUIDs of its writers.
    pub writers: Vec<Guid>,
}

/// What one participant says about its nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParticipantEntities {
    /// The participant's GUID.
    pub gid: Guid,
    /// Its nodes.
    pub nodes: Vec<NodeEntities>,
}

impl ParticipantEntities {
    /// CDR with its encapsulation header (little endian).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.bytes(&self.gid);
        w.align(4);
        w.u32(self.nodes.len() as u32);
        for n in &self.nodes {
            w.string(&n.namespace);
            w.string(&n.name);
            for gids in [&n.readers, &n.writers] {
                w.align(4);
                w.u32(gids.len() as u32);
                for g in gids {
                    w.bytes(g);
                }
            }
        }
        w.finish()
    }

    /// Reads what a peer sent (either byte order); every count is bounded
    /// by the bytes there, names by ROS 2's bound.
    pub fn decode(cdr: &[u8]) -> Result<Self, CdrError> {
        let mut r = Reader::new(cdr)?;
        let gid = r.octets::<16>("gid")?;
        let n = r.count(16, "node_entities_info_seq")?;
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            let namespace = bounded(r.string("node_namespace")?, "node_namespace")?;
            let name = bounded(r.string("node_name")?, "node_name")?;
            let mut gids = [Vec::new(), Vec::new()];
            for (g, what) in gids.iter_mut().zip(["reader_gid_seq", "writer_gid_seq"]) {
                let count = r.count(16, what)?;
                g.reserve(count);
                for _ in 0..count {
                    g.push(r.octets::<16>(what)?);
                }
            }
            let [readers, writers] = gids;
            nodes.push(NodeEntities {
                namespace,
                name,
                readers,
                writers,
            });
        }
        Ok(ParticipantEntities { gid, nodes })
    }
}

fn bounded(s: String, what: &'static str) -> Result<String, CdrError> {
    if s.len() > NAME_BOUND {
        return Err(CdrError::BadString {
            at: 0,
            reason: if what == "node_name" {
                "a node name longer than ROS 2's bound (256)"
            } else {
                "a namespace longer than ROS 2's bound (256)"
            },
        });
    }
    Ok(s)
}

/// The writer's QoS ROS 2 uses for the graph: reliable, transient local,
/// keep last 1, with the type hash.
pub fn writer_qos() -> DdsQos {
    DdsQos {
        transient_local: true,
        keep_last: Some(1),
        user_data: format!("typehash={TYPE_HASH};").into_bytes(),
        ..DdsQos::default()
    }
}

/// The reader's QoS: as the writer's, but keep all (every participant's
/// latest).
pub fn reader_qos() -> DdsQos {
    DdsQos {
        keep_last: None,
        ..writer_qos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes rclpy of ROS 2 Jazzy serialized (`serialize_message`) for two
    /// nodes, one in a namespace with readers and a writer, one with two
    /// writers: the GIDs sit at offsets no alignment rule would pick.
    const FROM_RCLPY: &str = "00010000000102030405060708090a0b0c0d0e0f02000000070000002f726f626f\
        7400000400000061726d00020000000101010101010101010101010101010102020202020202020202020202\
        0202020100000003030303030303030303030303030303020000002f0000000e00000063616d6572615f6472\
        6976657200000000000000020000000404040404040404040404040404040405050505050505050505050505\
        050505";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn two_nodes() -> ParticipantEntities {
        ParticipantEntities {
            gid: core::array::from_fn(|i| i as u8),
            nodes: vec![
                NodeEntities {
                    namespace: "/robot".into(),
                    name: "arm".into(),
                    readers: vec![[1; 16], [2; 16]],
                    writers: vec![[3; 16]],
                },
                NodeEntities {
                    namespace: "/".into(),
                    name: "camera_driver".into(),
                    readers: vec![],
                    writers: vec![[4; 16], [5; 16]],
                },
            ],
        }
    }

    #[test]
    fn reads_what_ros2_writes_and_writes_the_same_bytes() {
        let bytes = hex(FROM_RCLPY);
        assert_eq!(ParticipantEntities::decode(&bytes).unwrap(), two_nodes());
        assert_eq!(two_nodes().encode(), bytes);
    }

    /// A big-endian sender's GIDs are the same bytes (an octet array has
    /// no byte order).
    #[test]
    fn gids_have_no_byte_order() {
        let mut w = vec![0u8, 0, 0, 0];
        w.extend_from_slice(&[9; 16]);
        w.extend_from_slice(&1u32.to_be_bytes());
        w.extend_from_slice(&2u32.to_be_bytes());
        w.extend_from_slice(b"/\0\0\0");
        w.extend_from_slice(&2u32.to_be_bytes());
        w.extend_from_slice(b"n\0\0\0");
        w.extend_from_slice(&0u32.to_be_bytes());
        w.extend_from_slice(&1u32.to_be_bytes());
        w.extend_from_slice(&core::array::from_fn::<u8, 16, _>(|i| i as u8));
        let p = ParticipantEntities::decode(&w).unwrap();
        assert_eq!(p.gid, [9; 16]);
        assert_eq!(p.nodes[0].writers, vec![core::array::from_fn(|i| i as u8)]);
    }

    /// Garbage and truncations are errors, never panics or huge
    /// allocations.
    #[test]
    fn malformed_input_is_an_error() {
        let good = two_nodes().encode();
        assert!(ParticipantEntities::decode(&good).is_ok());
        for cut in 0..good.len() {
            assert!(ParticipantEntities::decode(&good[..cut]).is_err(), "{cut}");
        }
        let mut huge = good.clone();
        huge[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(ParticipantEntities::decode(&huge).is_err());
        let long = ParticipantEntities {
            gid: [0; 16],
            nodes: vec![NodeEntities {
                namespace: "/".into(),
                name: "n".repeat(300),
                ..NodeEntities::default()
            }],
        };
        assert!(ParticipantEntities::decode(&long.encode()).is_err());
    }
}
