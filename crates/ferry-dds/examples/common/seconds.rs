//! The measuring loop the ping examples share (`dds_pingpong`, ferry's
//! `ros2_ping`): once a second, a ping lost to a match in progress is sent
//! again and the round trips of that second are printed as ddsperf prints
//! them (one-way = RTT/2), after a 1 s warm-up.

use std::time::{Duration, Instant};

/// Runs `secs` + 1 seconds. `kick(last)` sends a ping again when the
/// sequence number has not moved since `last` (or none went yet) and
/// returns the number now; `take()` hands over the round trips (ns)
/// measured since its last call.
pub fn measure(
    size: usize,
    secs: f64,
    mut kick: impl FnMut(u64) -> u64,
    mut take: impl FnMut() -> Vec<u64>,
) {
    let t0 = Instant::now();
    let mut last_seq = u64::MAX;
    let mut second = 0u32;
    while t0.elapsed().as_secs_f64() < secs + 1.0 {
        last_seq = kick(last_seq);
        std::thread::sleep(Duration::from_secs(1));
        second += 1;
        let rtts = take();
        if second == 1 {
            continue; // warm-up
        }
        report(second, size, rtts);
    }
}

/// `<t> size <SIZE> 50% <us>us 90% <us>us 99% <us>us cnt <n>`.
fn report(second: u32, size: usize, mut rtts: Vec<u64>) {
    if rtts.is_empty() {
        println!("{second}.000 size {size} cnt 0");
        return;
    }
    rtts.sort_unstable();
    let q = |p: f64| rtts[((rtts.len() - 1) as f64 * p).round() as usize] as f64 / 2000.0;
    println!(
        "{second}.000 size {size} 50% {:.3}us 90% {:.3}us 99% {:.3}us cnt {}",
        q(0.5),
        q(0.9),
        q(0.99),
        rtts.len()
    );
}
