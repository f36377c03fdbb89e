//! Round trips through a ferry node's `[ros2]` DDS path — the publisher
//! and subscriber API an application uses — against ferry-dds's
//! `dds_pingpong pong` (bench/dds.py runs it beside ddsperf and ferry-dds).
//!
//! ```text
//! ros2_ping DOMAIN SIZE SECS
//! ```
//!
//! As `dds_pingpong ping`: reliable, keep last 1, the next ping published
//! from the subscriber's inline callback, one line per second
//! `<t> size <SIZE> 50% <us>us 90% <us>us 99% <us>us cnt <n>` (one-way =
//! RTT/2) after a 1 s warm-up. Ferry's own discovery is off: only DDS.

#[path = "common/ros2_node.rs"]
mod ros2_node;
#[path = "../../ferry-dds/examples/common/seconds.rs"]
mod seconds;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::{Qos, RawBytes, TypeHash};
use parking_lot::Mutex;

const TYPE: &str = "ferry_bench/msg/Blob";

struct State {
    seq: u64,
    sent: Instant,
    rtts_ns: Vec<u64>,
    template: Vec<u8>,
}

fn blob(size: usize) -> Vec<u8> {
    let mut v = vec![0u8; 8 + size.max(8)];
    v[1] = 1;
    v[4..8].copy_from_slice(&(size.max(8) as u32).to_le_bytes());
    v
}

fn send(p: &ferry::Publisher<RawBytes>, st: &mut State) {
    st.seq += 1;
    st.template[8..16].copy_from_slice(&st.seq.to_le_bytes());
    st.sent = Instant::now();
    let _ = p.publish(RawBytes::new(st.template.clone()));
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (domain, size, secs) = ros2_node::args("ros2_ping DOMAIN SIZE SECS");
    let node = ros2_node::node("ros2_ping", domain)?;
    let qos = Qos::default().keep_last(1);
    let hash = TypeHash([7; 32]);
    let publisher = Arc::new(
        node.publisher::<RawBytes>("/ferry_ping")
            .qos(qos)
            .type_info(TYPE, hash)
            .build()?,
    );
    let st = Arc::new(Mutex::new(State {
        seq: 0,
        sent: Instant::now(),
        rtts_ns: Vec::new(),
        template: blob(size),
    }));
    let (p2, st2) = (publisher.clone(), st.clone());
    let _sub = node
        .subscriber::<RawBytes>("/ferry_pong")
        .qos(qos)
        .type_info(TYPE, hash)
        .inline_callback(move |s| {
            let now = Instant::now();
            let seq = s
                .get(8..16)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes);
            let mut g = st2.lock();
            if seq == Some(g.seq) {
                let rtt = now.duration_since(g.sent).as_nanos() as u64;
                g.rtts_ns.push(rtt);
                send(&p2, &mut g);
            }
        })
        .build()?;
    if !publisher.wait_for_subscribers(1, Duration::from_secs(20)) {
        eprintln!("ros2_ping: no pong matched within 20 s");
        std::process::exit(1);
    }
    std::thread::sleep(Duration::from_millis(300));
    seconds::measure(
        size,
        secs,
        |last| {
            let mut g = st.lock();
            // A ping lost to a match in progress is sent again.
            if g.seq == last || g.seq == 0 {
                send(&publisher, &mut g);
            }
            g.seq
        },
        || std::mem::take(&mut st.lock().rtts_ns),
    );
    Ok(())
}
