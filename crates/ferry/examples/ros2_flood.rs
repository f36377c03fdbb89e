//! Throughput of a ferry node's `[ros2]` DDS path — the publisher API an
//! application uses — into ferry-dds's `dds_flood sub` (bench/dds.py runs
//! it beside ddsperf's pub/sub and ferry-dds's own).
//!
//! ```text
//! ros2_flood DOMAIN SIZE SECS
//! ```
//!
//! Publishes SIZE-byte `ferry_bench/msg/Blob` samples on `/ferry_flood`
//! flat out for SECS seconds once a subscriber matched: reliable, keep all
//! (a full DDS history holds the publisher back, as ddsperf's writer is).
//! Ferry's own discovery is off: only DDS.

#[path = "common/ros2_node.rs"]
mod ros2_node;

use std::time::{Duration, Instant};

use ferry::{Qos, RawBytes, TypeHash};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (domain, size, secs) = ros2_node::args("ros2_flood DOMAIN SIZE SECS");
    let node = ros2_node::node("ros2_flood", domain)?;
    let publisher = node
        .publisher::<RawBytes>("/ferry_flood")
        .qos(Qos::default().keep_all())
        .type_info("ferry_bench/msg/Blob", TypeHash([7; 32]))
        .build()?;
    let end = Instant::now() + Duration::from_secs_f64(secs);
    if !publisher.wait_for_subscribers(1, Duration::from_secs(20)) {
        eprintln!("ros2_flood: no subscriber matched within 20 s");
        std::process::exit(1);
    }
    let mut sample = vec![0u8; 8 + size.max(8)];
    sample[1] = 1;
    sample[4..8].copy_from_slice(&(size.max(8) as u32).to_le_bytes());
    let mut seq = 0u64;
    while Instant::now() < end {
        seq += 1;
        sample[8..16].copy_from_slice(&seq.to_le_bytes());
        if publisher.publish(RawBytes::new(sample.clone())).is_err() {
            seq -= 1; // held back past keep_all_block_ms: again
        }
    }
    Ok(())
}
