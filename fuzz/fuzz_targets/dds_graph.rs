//! ROS 2's node graph as any DDS participant on the network may send it
//! (`ros_discovery_info`): decoding never panics, and what decodes
//! re-encodes to bytes that decode to the same graph.
#![no_main]

use ferry_dds::graph::ParticipantEntities;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = ParticipantEntities::decode(data) {
        let again = ParticipantEntities::decode(&p.encode()).expect("re-encoded graph decodes");
        assert_eq!(again, p);
    }
});
