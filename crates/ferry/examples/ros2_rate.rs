//! Seed 001's Table II sender on a ferry node's `[ros2]` DDS path:
//! `bench/cyclone_table2.py run --system ferry-dds` runs it on the lab's
//! host A against Cyclone DDS's reader (`cyclone_table2.py sub --ros2`) on
//! host B, with Cyclone's default configuration or `ferry tune`'s profile
//! in `CYCLONEDDS_URI`.
//!
//! ```text
//! ros2_rate DOMAIN SIZE COUNT DEPTH
//! ```
//!
//! Publishes COUNT `ferry_bench/msg/Blob` samples of SIZE bytes at 30 Hz
//! on `/table2` (DDS topic `rt/table2`) once a subscriber matched:
//! reliable, keep all when DEPTH is 0, else keep last DEPTH (the
//! profile's N_HC). Data bytes 0..8 carry the sequence number and 8..16
//! the send time (ns since the Unix epoch, little endian), as Cyclone's
//! own sender in cyclone_table2.py does. Prints one JSON line when the
//! last sample is written, then stays until it is killed or 60 s have
//! passed, so reliable repair can finish (ferry-lab's `--until-b` ends it
//! 8 s after the reader). Ferry's own discovery is off: only DDS.

#[allow(dead_code)] // its `args` reads another shape of command line
#[path = "common/ros2_node.rs"]
mod ros2_node;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferry::{Qos, RawBytes, TypeHash};

const HZ: f64 = 30.0;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: ros2_rate DOMAIN SIZE COUNT DEPTH";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nums: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let [domain, size, count, depth] = nums[..] else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (size, depth) = (size.max(16) as usize, u32::try_from(depth)?);
    let node = ros2_node::node("ros2_rate", u16::try_from(domain)?)?;
    let qos = if depth == 0 {
        Qos::default().keep_all()
    } else {
        Qos::default().keep_last(depth)
    };
    let publisher = node
        .publisher::<RawBytes>("/table2")
        .qos(qos)
        .type_info("ferry_bench/msg/Blob", TypeHash([7; 32]))
        .build()?;
    let started = Instant::now();
    if !publisher.wait_for_subscribers(1, Duration::from_secs(20)) {
        println!(r#"{{"role": "pub", "error": "no subscriber in 20 s"}}"#);
        std::process::exit(2);
    }
    let match_s = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    // CDR: encapsulation (little endian), then the sequence's length.
    let mut sample = vec![0u8; 8 + size];
    sample[1] = 1;
    sample[4..8].copy_from_slice(&(size as u32).to_le_bytes());
    let period = Duration::from_secs_f64(1.0 / HZ);
    let mut next = Instant::now();
    let (mut written, mut failed) = (0u64, 0u64);
    let first = Instant::now();
    for seq in 0..count {
        let now_ns = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos() as u64;
        sample[8..16].copy_from_slice(&seq.to_le_bytes());
        sample[16..24].copy_from_slice(&now_ns.to_le_bytes());
        match publisher.publish(RawBytes::new(sample.clone())) {
            Ok(_) => written += 1,
            Err(_) => failed += 1,
        }
        next += period;
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    println!(
        r#"{{"role": "pub", "size": {size}, "attempted": {count}, "written": {written}, "write_errors": {{"failed": {failed}}}, "match_s": {match_s:.2}, "send_s": {:.2}}}"#,
        first.elapsed().as_secs_f64()
    );
    std::thread::sleep(Duration::from_secs(60));
    Ok(())
}
