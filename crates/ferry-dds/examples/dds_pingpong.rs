//! Round trips over ferry-dds, as `ddsperf ping`/`pong` measure Cyclone's
//! own (bench/dds.py runs both side by side).
//!
//! ```text
//! dds_pingpong pong DOMAIN SECS          echo every ping for SECS seconds
//! dds_pingpong ping DOMAIN SIZE SECS     ping SIZE-byte samples for SECS
//! ```
//!
//! Like ddsperf's default ping: the next ping goes out from the listener
//! that received the pong (no thread hand-off), reliable, keep last 1. The
//! sample is a `sequence<octet>` of SIZE bytes (CDR: header + length +
//! bytes), its first 8 bytes the sequence number. `ping` prints one line
//! per second, `<t> size <SIZE> 50% <us>us 90% <us>us 99% <us>us cnt <n>`,
//! one-way = RTT/2, after a 1 s warm-up.

#[path = "common/seconds.rs"]
mod seconds;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_dds::{DdsQos, Participant, Writer};
use parking_lot::Mutex;

const TYPE: &str = "ferry_bench::msg::dds_::Blob_";

fn qos() -> DdsQos {
    DdsQos {
        keep_last: Some(1),
        max_blocking: Duration::from_secs(1),
        ..DdsQos::default()
    }
}

fn blob(size: usize, seq: u64) -> Vec<u8> {
    let mut v = vec![0u8; 8 + size.max(8)];
    v[1] = 1;
    v[4..8].copy_from_slice(&(size.max(8) as u32).to_le_bytes());
    v[8..16].copy_from_slice(&seq.to_le_bytes());
    v
}

fn seq_of(cdr: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(cdr.get(8..16)?.try_into().ok()?))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| -> &str { args.get(i).map(String::as_str).unwrap_or("") };
    let domain: u32 = arg(2).parse().expect("DOMAIN");
    let pp = Participant::new(domain, b"enclave=/;").expect("participant");
    let ping_t = pp.topic("rt/ferry_ping", TYPE).expect("topic");
    let pong_t = pp.topic("rt/ferry_pong", TYPE).expect("topic");
    match arg(1) {
        "pong" => {
            let secs: f64 = arg(3).parse().expect("SECS");
            let w = Arc::new(pp.writer(&pong_t, &qos()).expect("writer"));
            let echo = w.clone();
            let _r = pp
                .reader(&ping_t, &qos(), move |s| {
                    let _ = echo.write(&s.cdr);
                })
                .expect("reader");
            std::thread::sleep(Duration::from_secs_f64(secs));
        }
        "ping" => {
            let size: usize = arg(3).parse().expect("SIZE");
            let secs: f64 = arg(4).parse().expect("SECS");
            ping(&pp, &ping_t, &pong_t, size, secs);
        }
        _ => {
            eprintln!("usage: dds_pingpong pong DOMAIN SECS | ping DOMAIN SIZE SECS");
            std::process::exit(2);
        }
    }
}

struct State {
    seq: u64,
    sent: Instant,
    rtts_ns: Vec<u64>,
    template: Vec<u8>,
}

fn send(w: &Writer, st: &mut State) {
    st.seq += 1;
    st.template[8..16].copy_from_slice(&st.seq.to_le_bytes());
    st.sent = Instant::now();
    let _ = w.write(&st.template);
}

fn ping(
    pp: &Participant,
    ping_t: &ferry_dds::Topic,
    pong_t: &ferry_dds::Topic,
    size: usize,
    secs: f64,
) {
    let w = Arc::new(pp.writer(ping_t, &qos()).expect("writer"));
    let st = Arc::new(Mutex::new(State {
        seq: 0,
        sent: Instant::now(),
        rtts_ns: Vec::new(),
        template: blob(size, 0),
    }));
    let (w2, st2) = (w.clone(), st.clone());
    let r = pp
        .reader(pong_t, &qos(), move |s| {
            let now = Instant::now();
            let mut g = st2.lock();
            if seq_of(&s.cdr) == Some(g.seq) {
                let rtt = now.duration_since(g.sent).as_nanos() as u64;
                g.rtts_ns.push(rtt);
                send(&w2, &mut g);
            }
        })
        .expect("reader");
    let end = Instant::now() + Duration::from_secs(20);
    while (w.matched().unwrap_or(0) == 0 || r.matched().unwrap_or(0) == 0) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    if w.matched().unwrap_or(0) == 0 || r.matched().unwrap_or(0) == 0 {
        eprintln!("ping: no pong matched within 20 s");
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
                send(&w, &mut g);
            }
            g.seq
        },
        || std::mem::take(&mut st.lock().rtts_ns),
    );
}
