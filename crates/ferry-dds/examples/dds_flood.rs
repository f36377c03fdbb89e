//! Throughput over ferry-dds, as `ddsperf pub`/`sub` measure Cyclone's own
//! (bench/dds.py runs them side by side).
//!
//! ```text
//! dds_flood sub DOMAIN SIZE SECS     count what arrives for SECS seconds
//! dds_flood pub DOMAIN SIZE SECS     publish SIZE-byte samples, flat out
//! dds_flood batch DOMAIN SIZE SECS   the same, with Cyclone's write
//!                                    batching on as ddsperf's pub has it
//!                                    (flushed every 100 samples)
//! ```
//!
//! Like ddsperf's default pub/sub: reliable, keep all, as fast as the
//! writer takes them. The sample is a `sequence<octet>` of SIZE bytes on
//! `rt/ferry_flood` (the type `ros2_ping`'s and `ros2_flood`'s nodes use),
//! its first 8 bytes the sequence number. `sub` prints one line per second
//! after the first sample, `<t> size <SIZE> rate <kS/s> kS/s <Mb/s> Mb/s
//! cnt <n> lost <n>` (Mb/s of payload; lost: gaps in the sequence).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_dds::{DdsQos, Participant};

/// The DDS type of the nodes' `ferry_bench/msg/Blob`.
pub const TYPE: &str = "ferry_bench::msg::dds_::Blob_";

fn qos() -> DdsQos {
    DdsQos {
        keep_last: None,
        max_blocking: Duration::from_secs(1),
        ..DdsQos::default()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| -> &str { args.get(i).map(String::as_str).unwrap_or("") };
    let (Ok(domain), Ok(size), Ok(secs)) = (
        arg(2).parse::<u32>(),
        arg(3).parse::<usize>(),
        arg(4).parse::<f64>(),
    ) else {
        eprintln!("usage: dds_flood sub|pub|batch DOMAIN SIZE SECS");
        std::process::exit(2);
    };
    let pp = Participant::new(domain, b"enclave=/;").expect("participant");
    let topic = pp.topic("rt/ferry_flood", TYPE).expect("topic");
    let end = Instant::now() + Duration::from_secs_f64(secs);
    match arg(1) {
        mode @ ("pub" | "batch") => {
            let batch = mode == "batch";
            ferry_dds::write_batching(batch);
            let w = pp.writer(&topic, &qos()).expect("writer");
            let mut sample = vec![0u8; 8 + size.max(8)];
            sample[1] = 1;
            sample[4..8].copy_from_slice(&(size.max(8) as u32).to_le_bytes());
            let mut seq = 0u64;
            while Instant::now() < end {
                if w.matched().unwrap_or(0) == 0 {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                seq += 1;
                sample[8..16].copy_from_slice(&seq.to_le_bytes());
                if w.write(&sample).is_err() {
                    seq -= 1; // not taken (history full for 1 s): again
                }
                if batch && seq.is_multiple_of(100) {
                    w.flush();
                }
            }
            w.flush();
        }
        "sub" => {
            let count = Arc::new(AtomicU64::new(0));
            let lost = Arc::new(AtomicU64::new(0));
            let (c, l) = (count.clone(), lost.clone());
            let last = AtomicU64::new(0);
            let _r = pp
                .reader(&topic, &qos(), move |s| {
                    let seq = s
                        .cdr
                        .get(8..16)
                        .and_then(|b| b.try_into().ok())
                        .map_or(0, u64::from_le_bytes);
                    let before = last.fetch_max(seq, Ordering::Relaxed);
                    if before != 0 && seq > before + 1 {
                        l.fetch_add(seq - before - 1, Ordering::Relaxed);
                    }
                    c.fetch_add(1, Ordering::Relaxed);
                })
                .expect("reader");
            report(size, end, &count, &lost);
        }
        _ => {
            eprintln!("usage: dds_flood sub|pub|batch DOMAIN SIZE SECS");
            std::process::exit(2);
        }
    }
}

/// One line per second from the first sample on, until `end`.
fn report(size: usize, end: Instant, count: &AtomicU64, lost: &AtomicU64) {
    while count.load(Ordering::Relaxed) == 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
    let t0 = Instant::now();
    let (mut n0, mut l0, mut t) = (count.load(Ordering::Relaxed), 0, t0);
    while Instant::now() + Duration::from_secs(1) <= end {
        std::thread::sleep(Duration::from_secs(1));
        let (n, l, now) = (
            count.load(Ordering::Relaxed),
            lost.load(Ordering::Relaxed),
            Instant::now(),
        );
        let dt = now.duration_since(t).as_secs_f64();
        let rate = (n - n0) as f64 / dt;
        println!(
            "{:.3} size {size} rate {:.3} kS/s {:.3} Mb/s cnt {} lost {}",
            now.duration_since(t0).as_secs_f64(),
            rate / 1e3,
            rate * size as f64 * 8.0 / 1e6,
            n - n0,
            l - l0
        );
        (n0, l0, t) = (n, l, now);
    }
}
