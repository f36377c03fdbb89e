//! iceoryx2 ping-pong round-trip benchmark (target: crates.io `iceoryx2` 0.10.x, Linux).
//!
//! Two processes, two publish-subscribe services of `[u8]`:
//!   ping --(ferry_bench/ping)--> pong --(ferry_bench/pong)--> ping
//!
//! Usage (start order does not matter, both wait up to the timeout for the peer):
//!   iceoryx2_bench pong SIZE ITERS [WARMUP]
//!   iceoryx2_bench ping SIZE ITERS [WARMUP]
//!
//! * SIZE   payload bytes per message, 8 ..= 256 MiB (the first 8 bytes carry a
//!          little-endian u64 sequence number, written in place in shared memory).
//! * ITERS  measured round trips.
//! * WARMUP unmeasured round trips before them (default: ITERS/10 clamped to 1..=10000).
//!          Give the same WARMUP to both roles (pong only uses it for a sanity message).
//!
//! Environment:
//! * FERRY_BENCH_TIMEOUT_S  peer/reply timeout in seconds (default 10). A missing peer ends
//!                          the process with exit code 1 instead of hanging.
//! * FERRY_BENCH_FILL=1     also write every payload byte (not just the first 8) per message.
//! * IOX2_LOG_LEVEL         iceoryx2 log level (default here: Warn).
//!
//! Output: ping prints exactly one line of JSON on stdout, `{"size":N,"rtt_ns":[...]}`
//! (post-warmup samples only); a human summary goes to stderr. pong prints nothing on stdout.
//! Exit code 0 = ok, 1 = runtime error/timeout, 2 = bad arguments.
//!
//! Each message is a fresh loan of exactly SIZE bytes (`loan_slice_uninit(SIZE)`), the
//! sequence number is written into the loaned shared memory, then `send()`. Receiving is a
//! busy poll on `receive()` with `std::hint::spin_loop()`. The timed region on the ping side
//! is: loan + write + send + spin until the matching echo arrives + drop of the echo sample.

use std::fmt::Write as _;
use std::hint::spin_loop;
use std::io::Write as _;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

// Brings in NodeBuilder, ipc, ServiceName, NodeName, SignalHandlingMode, LogLevel,
// set_log_level_from_env_or and the `PortFactory` trait (needed for `dynamic_config()`).
use iceoryx2::prelude::*;

const PING_SERVICE: &str = "ferry_bench/ping";
const PONG_SERVICE: &str = "ferry_bench/pong";

/// Handshake message (re-sent until echoed). Measured messages use 1..=WARMUP+ITERS.
const SEQ_HELLO: u64 = 0;
/// Shutdown message: pong echoes it and exits.
const SEQ_STOP: u64 = u64::MAX;

const MIN_SIZE: usize = 8;
const MAX_SIZE: usize = 256 << 20;

/// Read the clock only every N empty polls while spinning (must be a power of two).
const CLOCK_CHECK_EVERY: u32 = 1 << 12;
const HELLO_RESEND: Duration = Duration::from_millis(20);
const POLL_SLEEP: Duration = Duration::from_micros(500);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

type BoxError = Box<dyn std::error::Error>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Ping,
    Pong,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Ping => "ping",
            Role::Pong => "pong",
        }
    }
}

struct Args {
    role: Role,
    size: usize,
    iters: usize,
    warmup: usize,
    timeout: Duration,
    fill_all: bool,
}

/// Opens (or creates) one of the two services with identical QoS on both sides.
/// A macro instead of a function so the 0.10 `PortFactory<...>` type never has to be named.
/// All settings are verified on open: both processes pass the same values, so it matches.
macro_rules! open_pubsub {
    ($node:expr, $name:expr) => {
        $node
            .service_builder(&$name)
            .publish_subscribe::<[u8]>()
            // exactly one publisher and one subscriber per direction
            .max_publishers(1)
            .max_subscribers(1)
            // no history: a late subscriber must not get old samples
            .history_size(0)
            // one-message-in-flight protocol: queue depth 1 is enough ...
            .subscriber_max_buffer_size(1)
            .subscriber_max_borrowed_samples(1)
            // ... and a stale handshake echo is simply overwritten instead of blocking
            .enable_safe_overflow(true)
            .open_or_create()
    };
}

fn usage(prog: &str) -> String {
    format!(
        "usage: {prog} ping|pong SIZE ITERS [WARMUP]\n  SIZE: {MIN_SIZE}..={MAX_SIZE} bytes, ITERS >= 1"
    )
}

fn parse_args() -> Result<Args, String> {
    let argv: Vec<String> = std::env::args().collect();
    let prog = argv.first().map(String::as_str).unwrap_or("iceoryx2_bench");
    if argv.len() < 4 || argv.len() > 5 {
        return Err(usage(prog));
    }
    let role = match argv[1].as_str() {
        "ping" => Role::Ping,
        "pong" => Role::Pong,
        other => return Err(format!("unknown role '{other}'\n{}", usage(prog))),
    };
    let size: usize = argv[2]
        .parse()
        .map_err(|e| format!("bad SIZE '{}': {e}", argv[2]))?;
    let iters: usize = argv[3]
        .parse()
        .map_err(|e| format!("bad ITERS '{}': {e}", argv[3]))?;
    let warmup: usize = match argv.get(4) {
        Some(w) => w.parse().map_err(|e| format!("bad WARMUP '{w}': {e}"))?,
        None => (iters / 10).clamp(1, 10_000),
    };
    if !(MIN_SIZE..=MAX_SIZE).contains(&size) {
        return Err(format!(
            "SIZE must be in {MIN_SIZE}..={MAX_SIZE} (the first 8 bytes carry the sequence number)"
        ));
    }
    if iters == 0 {
        return Err("ITERS must be >= 1".into());
    }
    let timeout = std::env::var("FERRY_BENCH_TIMEOUT_S")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_TIMEOUT);
    let fill_all = std::env::var("FERRY_BENCH_FILL")
        .map(|v| v == "1")
        .unwrap_or(false);
    Ok(Args {
        role,
        size,
        iters,
        warmup,
        timeout,
        fill_all,
    })
}

/// Writes `seq` (little endian) into the first 8 bytes of the loaned, uninitialized payload.
/// `payload.len() >= 8` is guaranteed by the SIZE check.
#[inline(always)]
fn write_seq(payload: &mut [MaybeUninit<u8>], seq: u64, fill_all: bool) {
    let bytes = seq.to_le_bytes();
    for (dst, src) in payload[..8].iter_mut().zip(bytes) {
        dst.write(src);
    }
    if fill_all {
        for b in payload[8..].iter_mut() {
            b.write(0x5A);
        }
    }
}

/// Reads the sequence number; returns None for a payload that is too short to carry one.
#[inline(always)]
fn read_seq(payload: &[u8]) -> Option<u64> {
    let head: [u8; 8] = payload.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(head))
}

/// Polls `cond` with short sleeps (no busy spinning while the peer is still starting up:
/// on a 2-core machine a spinning waiter would steal the core the peer needs).
fn wait_until(
    what: &str,
    timeout: Duration,
    mut cond: impl FnMut() -> bool,
) -> Result<(), BoxError> {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > timeout {
            return Err(format!("timed out after {timeout:?} waiting for {what}").into());
        }
        std::thread::sleep(POLL_SLEEP);
    }
    Ok(())
}

fn make_node(role: Role) -> Result<Node<ipc::Service>, BoxError> {
    let name: NodeName = match role {
        Role::Ping => "ferry_bench_ping".try_into()?,
        Role::Pong => "ferry_bench_pong".try_into()?,
    };
    let node = NodeBuilder::new()
        .name(&name)
        // Do not install SIGINT/SIGTERM handlers: a busy-spinning benchmark that never calls
        // node.wait() would otherwise ignore Ctrl-C / `kill`. Stale files left by a killed
        // process are removed by the next node creation (cleanup-dead-nodes-on-creation).
        .signal_handling_mode(SignalHandlingMode::Disabled)
        // ipc::Service = inter-process, single-threaded ports (no mutex on the hot path).
        // ipc_threadsafe::Service would make ports Send+Sync at the cost of a lock per call.
        .create::<ipc::Service>()?;
    Ok(node)
}

fn run_ping(a: &Args) -> Result<(), BoxError> {
    let node = make_node(Role::Ping)?;
    let ping_name: ServiceName = PING_SERVICE.try_into()?;
    let pong_name: ServiceName = PONG_SERVICE.try_into()?;
    let ping_svc = open_pubsub!(node, ping_name)?;
    let pong_svc = open_pubsub!(node, pong_name)?;

    let publisher = ping_svc
        .publisher_builder()
        // Every loan is exactly `size` bytes = the initial max slice length, so the data
        // segment is sized for `size` up front and never has to grow, whatever the configured
        // default allocation strategy is (4 MiB works; only /dev/shm capacity limits it).
        // Note: to allow growing messages instead, add
        //   .allocation_strategy(AllocationStrategy::PowerOfTwo)
        // (`AllocationStrategy` is re-exported by the prelude up to at least 0.9.2 and used
        // that way in the upstream publish_subscribe_dynamic_data example; its defining crate
        // moved to iceoryx2-bb-elementary in 0.10, so check the prelude before relying on it).
        .initial_max_slice_len(a.size)
        .create()?;
    let subscriber = pong_svc.subscriber_builder().create()?;

    // Wait until pong's ports exist: its subscriber on ferry_bench/ping and its publisher on
    // ferry_bench/pong (we own the other two ports, and max 1 of each is allowed).
    // Note: `dynamic_config()` is a method of the `PortFactory` trait from the prelude
    // (present with this name since 0.4); fallback: skip this wait, the handshake below is
    // sufficient on its own (it just re-sends HELLO until the first echo arrives).
    wait_until(
        "pong to connect (start `pong` with the same SIZE)",
        a.timeout,
        || {
            ping_svc.dynamic_config().number_of_subscribers() >= 1
                && pong_svc.dynamic_config().number_of_publishers() >= 1
        },
    )?;

    let size = a.size;
    let fill_all = a.fill_all;
    // loan SIZE bytes -> write seq in place -> send. Zero-copy: nothing else is copied.
    let send = |seq: u64| -> Result<(), BoxError> {
        let mut sample = publisher.loan_slice_uninit(size)?;
        write_seq(sample.payload_mut(), seq, fill_all);
        // SAFETY: the bytes we did not write are shared-memory bytes that already exist
        // (mmap'ed, zero-filled at creation, later overwritten only with plain u8 data), and
        // this process never reads them. Same pattern as the upstream benchmark
        // (benchmarks/publish-subscribe/src/main.rs), which calls assume_init() without writing.
        let sample = unsafe { sample.assume_init() };
        sample.send()?; // Ok(number of subscribers reached)
        Ok(())
    };

    // Handshake: re-send HELLO until the first echo comes back. This covers the window in
    // which the ports exist but the connection is not established yet.
    let hs_start = Instant::now();
    let mut last_hello: Option<Instant> = None;
    'handshake: loop {
        if last_hello.map_or(true, |t| t.elapsed() >= HELLO_RESEND) {
            send(SEQ_HELLO)?;
            last_hello = Some(Instant::now());
        }
        while let Some(sample) = subscriber.receive()? {
            if read_seq(sample.payload()) == Some(SEQ_HELLO) {
                break 'handshake;
            }
        }
        if hs_start.elapsed() > a.timeout {
            return Err(format!("no handshake echo from pong within {:?}", a.timeout).into());
        }
        std::thread::sleep(POLL_SLEEP);
    }

    // Measurement: strictly one message in flight. Stale replies (duplicate HELLO echoes)
    // are dropped by the sequence-number check.
    let total = a.warmup + a.iters;
    let mut rtt_ns: Vec<u64> = Vec::with_capacity(a.iters);
    for i in 0..total {
        let seq = i as u64 + 1;
        let t0 = Instant::now();
        send(seq)?;
        let mut spins: u32 = 0;
        loop {
            if let Some(sample) = subscriber.receive()? {
                if read_seq(sample.payload()) == Some(seq) {
                    break; // `sample` is dropped here, i.e. returned to pong's publisher
                }
                continue;
            }
            spins = spins.wrapping_add(1);
            if spins & (CLOCK_CHECK_EVERY - 1) == 0 && t0.elapsed() > a.timeout {
                return Err(
                    format!("no echo for seq {seq} within {:?} (pong died?)", a.timeout).into(),
                );
            }
            spin_loop();
        }
        let dt = t0.elapsed();
        if i >= a.warmup {
            rtt_ns.push(dt.as_nanos() as u64);
        }
    }

    // Shutdown: STOP until echoed (best effort, max ~1 s); pong exits after echoing it.
    // Errors are ignored here: the measurement is complete and pong may already be gone.
    send(SEQ_STOP)?;
    let stop_start = Instant::now();
    let mut last_stop = Instant::now();
    'stop: while stop_start.elapsed() < Duration::from_secs(1) {
        if last_stop.elapsed() >= Duration::from_millis(100) {
            let _ = send(SEQ_STOP);
            last_stop = Instant::now();
        }
        while let Ok(Some(sample)) = subscriber.receive() {
            if read_seq(sample.payload()) == Some(SEQ_STOP) {
                break 'stop;
            }
        }
        std::thread::sleep(POLL_SLEEP);
    }

    // One JSON line on stdout.
    let mut out = String::with_capacity(32 + rtt_ns.len() * 8);
    write!(out, "{{\"size\":{},\"rtt_ns\":[", a.size)?;
    for (k, v) in rtt_ns.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        write!(out, "{v}")?;
    }
    out.push_str("]}");
    {
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        writeln!(lock, "{out}")?;
        lock.flush()?;
    }

    // Human summary on stderr.
    let mut sorted = rtt_ns.clone();
    sorted.sort_unstable();
    let pct = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
    let mean = sorted.iter().map(|&v| v as f64).sum::<f64>() / sorted.len() as f64;
    eprintln!(
        "iceoryx2 ping: size={} iters={} warmup={} rtt_ns min={} p50={} p99={} max={} mean={:.0}",
        a.size,
        a.iters,
        a.warmup,
        sorted[0],
        pct(0.50),
        pct(0.99),
        sorted[sorted.len() - 1],
        mean
    );
    Ok(())
}

fn run_pong(a: &Args) -> Result<(), BoxError> {
    let node = make_node(Role::Pong)?;
    let ping_name: ServiceName = PING_SERVICE.try_into()?;
    let pong_name: ServiceName = PONG_SERVICE.try_into()?;
    let ping_svc = open_pubsub!(node, ping_name)?;
    let pong_svc = open_pubsub!(node, pong_name)?;

    let publisher = pong_svc
        .publisher_builder()
        .initial_max_slice_len(a.size) // see the comment in run_ping
        .create()?;
    let subscriber = ping_svc.subscriber_builder().create()?;

    // Note: same `dynamic_config()` remark as in run_ping.
    wait_until(
        "ping to connect (start `ping` with the same SIZE)",
        a.timeout,
        || {
            pong_svc.dynamic_config().number_of_subscribers() >= 1
                && ping_svc.dynamic_config().number_of_publishers() >= 1
        },
    )?;

    let size = a.size;
    let fill_all = a.fill_all;
    let send = |seq: u64| -> Result<(), BoxError> {
        let mut sample = publisher.loan_slice_uninit(size)?;
        write_seq(sample.payload_mut(), seq, fill_all);
        // SAFETY: see run_ping.
        let sample = unsafe { sample.assume_init() };
        sample.send()?;
        Ok(())
    };

    let mut echoed: u64 = 0;
    let mut hellos: u64 = 0;
    let mut spins: u32 = 0;
    let mut idle_since: Option<Instant> = None;
    loop {
        if let Some(sample) = subscriber.receive()? {
            let (len, seq) = {
                let p = sample.payload();
                (p.len(), read_seq(p))
            };
            // release the received sample before answering (returns it to ping's publisher)
            drop(sample);
            let seq = match seq {
                Some(s) if len == size => s,
                _ => {
                    return Err(format!(
                        "received {len}-byte message but pong was started with SIZE={size}"
                    )
                    .into())
                }
            };
            send(seq)?; // echo with a fresh SIZE-byte loan carrying the same seq
            idle_since = None;
            match seq {
                SEQ_STOP => break,
                SEQ_HELLO => hellos += 1,
                _ => echoed += 1,
            }
            continue;
        }
        spins = spins.wrapping_add(1);
        if spins & (CLOCK_CHECK_EVERY - 1) == 0 {
            let now = Instant::now();
            match idle_since {
                None => idle_since = Some(now),
                Some(t) if now.duration_since(t) > a.timeout => {
                    return Err(format!(
                        "no message from ping for {:?} (ping died?); echoed {echoed} so far",
                        a.timeout
                    )
                    .into());
                }
                Some(_) => {}
            }
        }
        spin_loop();
    }

    // Give ping a moment to pick up the STOP echo before our publisher goes away.
    std::thread::sleep(Duration::from_millis(20));
    let expected = (a.warmup + a.iters) as u64;
    eprintln!(
        "iceoryx2 pong: size={} echoed={} (expected {}) handshake_hellos={}",
        a.size, echoed, expected, hellos
    );
    if echoed != expected {
        eprintln!(
            "iceoryx2 pong: warning: echoed count differs (different WARMUP/ITERS given to ping?)"
        );
    }
    Ok(())
}

fn main() {
    // Keep stdout clean for the JSON line; IOX2_LOG_LEVEL overrides.
    // Note: `set_log_level_from_env_or` is in the prelude with the default `std` feature
    // (0.8/0.9 prelude, used by the 0.10-era examples); fallback: `set_log_level(LogLevel::Warn)`.
    set_log_level_from_env_or(LogLevel::Warn);

    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(2);
        }
    };
    let result = match args.role {
        Role::Ping => run_ping(&args),
        Role::Pong => run_pong(&args),
    };
    if let Err(e) = result {
        eprintln!("iceoryx2 {}: error: {e}", args.role.as_str());
        std::process::exit(1);
    }
}
