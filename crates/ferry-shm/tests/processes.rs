//! Two real processes: the test binary re-runs itself as the other side
//! (`ferry_testkit::peer`), so the rings, pool and doorbell cross a process
//! boundary exactly as in ferry.

use std::time::{Duration, Instant};

use ferry_shm::{sweep_stale, Doorbell, ReaderConn, Writer};
use ferry_testkit::peer::{report, Peer};
use ferry_testkit::sample::{fill, valid, SIZES_1B_TO_64MIB as SIZES};

fn role() -> Option<(String, String)> {
    ferry_testkit::peer::role()
}

/// The reader process: checks every sample it gets, then reports.
fn reader(arg: &str) {
    let mut parts = arg.split(' ');
    let (conn, prefix, bell, count) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap().parse::<u64>().unwrap(),
    );
    let r = ReaderConn::open(conn, prefix).unwrap();
    let bell = Doorbell::open(bell).unwrap();
    report("ready");
    let (mut got, mut bad, mut last) = (0u64, 0u64, 0u64);
    let end = Instant::now() + Duration::from_secs(60);
    while got < count && Instant::now() < end {
        match r.try_recv().unwrap() {
            Some(x) => {
                if x.seq <= last || !valid(x.seq, &x.sample) {
                    bad += 1;
                }
                last = x.seq;
                got += 1;
                // Tell the writer a slot came back (it waits on the bell).
                drop(x);
                bell.ring();
            }
            None => std::thread::sleep(Duration::from_micros(50)),
        }
    }
    report(&format!("got {got} bad {bad} dropped {}", r.dropped()));
}

#[test]
fn samples_from_1_byte_to_64_mib_cross_processes_byte_exact() {
    if let Some((role, arg)) = role() {
        if role == "reader" {
            reader(&arg);
        }
        return;
    }
    let w = Writer::new("xproc", 1 << 30);
    let c = w.connect("xproc", 4).unwrap();
    let bell = Doorbell::create("xproc").unwrap();
    let total: u64 = SIZES.iter().map(|(_, n)| n).sum();
    let mut peer = Peer::spawn(
        "samples_from_1_byte_to_64_mib_cross_processes_byte_exact",
        "reader",
        &format!("{} {} {} {total}", c.name(), w.data_prefix(), bell.name()),
    );
    assert_eq!(peer.line(), "ready");
    let mut seq = 0;
    for (len, n) in SIZES {
        for _ in 0..n {
            seq += 1;
            let p = w.publish(len, |b| fill(seq, b)).unwrap();
            // keep_all: wait for room rather than drop.
            c.send(&p, seq, 0, Some(Duration::from_secs(20))).unwrap();
        }
    }
    assert_eq!(peer.line(), format!("got {total} bad 0 dropped 0"));
}

/// The writer process: publishes forever into a pool and a connection.
fn writer_forever() {
    let w = Writer::new("victim", 1 << 28);
    let c = w.connect("victim", 8).unwrap();
    let _bell = Doorbell::create("victim").unwrap();
    report(&format!("{} {}", c.name(), w.data_prefix()));
    let mut seq = 0;
    loop {
        seq += 1;
        if let Ok(p) = w.publish(70_000, |b| fill(seq, b)) {
            let _ = c.send(&p, seq, 0, None);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn ferry_segments_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| ferry_shm::segment::owner_of(n).is_some_and(|o| o.pid == pid))
        .collect()
}

#[test]
fn kill_9_of_a_writer_mid_stream_leaves_nothing_after_a_sweep() {
    if let Some((role, _)) = role() {
        if role == "writer" {
            writer_forever();
        }
        return;
    }
    for round in 0..20 {
        let mut peer = Peer::spawn(
            "kill_9_of_a_writer_mid_stream_leaves_nothing_after_a_sweep",
            "writer",
            "",
        );
        let line = peer.line();
        let mut names = line.split_whitespace();
        let (conn, prefix) = (names.next().unwrap(), names.next().unwrap());
        // Read a few samples in place, then kill the writer mid-stream.
        let r = ReaderConn::open(conn, prefix).unwrap();
        let mut held = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        while held.len() < 3 && Instant::now() < end {
            if let Some(x) = r.try_recv().unwrap() {
                assert!(valid(x.seq, &x.sample), "round {round}: torn sample");
                held.push(x);
            }
        }
        assert_eq!(held.len(), 3, "round {round}: nothing arrived");
        let pid = peer.child.id();
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        peer.child.wait().unwrap();
        assert!(
            !ferry_segments_of(pid).is_empty(),
            "the crash leaves segments"
        );
        let report = sweep_stale();
        assert!(
            ferry_segments_of(pid).is_empty(),
            "round {round}: {report:?}"
        );
        // What we still hold stays readable: the mapping outlives the unlink.
        for x in &held {
            assert!(valid(x.seq, &x.sample));
        }
    }
}
