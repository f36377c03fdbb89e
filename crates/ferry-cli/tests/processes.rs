//! Multi-process tests on one host: real processes, real sockets.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferry::msgs::{example_interfaces::srv::*, std_msgs};
use ferry::{CallError, Config, DiscoveryRange, Node, PortEvent, UnmatchReason};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
const T: Duration = Duration::from_secs(10);

fn cfg(domain: u16) -> Config {
    Config {
        domain_id: domain,
        discovery: DiscoveryRange::Localhost,
        ..Config::default()
    }
}

fn node(name: &str, domain: u16) -> Node {
    Node::builder()
        .name(name)
        .config(cfg(domain))
        .build()
        .unwrap()
}

/// A child `ferry` process in `domain`, killed when dropped.
struct Proc(Child);

impl Proc {
    fn spawn(domain: u16, args: &[&str]) -> Proc {
        let c = Command::new(FERRY)
            .args(args)
            .env("FERRY_DOMAIN_ID", domain.to_string())
            .env("FERRY_DISCOVERY", "localhost")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ferry");
        Proc(c)
    }
    fn kill9(&mut self) {
        unsafe { libc::kill(self.0.id() as i32, libc::SIGKILL) };
        let _ = self.0.wait();
    }
    /// Waits for exit (bounded) and returns (success, stdout, stderr).
    fn finish(mut self, limit: Duration) -> (bool, String, String) {
        let end = Instant::now() + limit;
        loop {
            if let Ok(Some(st)) = self.0.try_wait() {
                let mut out = String::new();
                let mut err = String::new();
                self.0
                    .stdout
                    .take()
                    .unwrap()
                    .read_to_string(&mut out)
                    .unwrap();
                self.0
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                return (st.success(), out, err);
            }
            assert!(
                Instant::now() < end,
                "process did not finish within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `ferry topic pub` in another process on this host: shared memory,
/// chosen automatically; with shared memory off on our side, TCP.
#[test]
fn pub_in_another_process_reaches_us_over_shared_memory_or_tcp() {
    for (shm, domain, kind, path) in [
        (true, 201, ferry::TransportKind::SharedMemory, "shm"),
        (false, 229, ferry::TransportKind::Tcp, "tcp"),
    ] {
        let n = Node::builder()
            .name("sub")
            .config(ferry::Config {
                shared_memory: shm,
                ..cfg(domain)
            })
            .build()
            .unwrap();
        let s = n
            .subscriber::<std_msgs::String>("/chatter")
            .build()
            .unwrap();
        let _p = Proc::spawn(
            domain,
            &[
                "topic",
                "pub",
                "/chatter",
                "std_msgs/msg/String",
                "data: from afar",
                "-r",
                "50",
            ],
        );
        let got = s.recv_timeout(T).expect("no sample from the other process");
        assert_eq!(got.data, "from afar");
        assert_eq!(got.info.transport, kind);
        let c = s.connections();
        assert_eq!(c[0].transport.as_str(), path);
    }
}

#[test]
fn kill_9_of_a_publisher_is_seen_within_the_lease() {
    let n = node("watcher", 202);
    let s = n.subscriber::<std_msgs::String>("/beat").build().unwrap();
    let mut p = Proc::spawn(
        202,
        &[
            "topic",
            "pub",
            "/beat",
            "std_msgs/msg/String",
            "data: x",
            "-r",
            "20",
        ],
    );
    s.recv_timeout(T).expect("publisher never arrived");
    // Data can outrun discovery (the publisher found us first): make sure
    // our side has matched the publisher before killing it.
    let t = Instant::now();
    while s.publisher_count() == 0 {
        assert!(t.elapsed() < T, "publisher never matched by discovery");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut seen = Vec::new();
    while let Some(e) = s.try_event() {
        seen.push(format!("before kill: {e:?}"));
    }
    let t0 = Instant::now();
    p.kill9();
    let lease = Duration::from_millis(Config::default().lease_ms as u64);
    // Expiry is bounded by the lease since the last beacon (≤ the kill);
    // the slack only absorbs scheduling delay on a loaded 2-core machine.
    let slack = Duration::from_millis(1000);
    loop {
        let left = (lease + slack).saturating_sub(t0.elapsed());
        match s.next_event(left) {
            Some(PortEvent::Unmatched { reason, .. }) => {
                // The TCP connection drop is seen at once; discovery confirms
                // the death by lease expiry. Either way, within the lease.
                assert!(matches!(
                    reason,
                    UnmatchReason::LeaseExpired
                        | UnmatchReason::Withdrawn
                        | UnmatchReason::ConnectionLost
                ));
                break;
            }
                        Some(e) => seen.push(format!("after kill: {e:?}")),
            None => panic!(
                                "publisher not gone {:?} after kill -9; events {seen:?}; nodes {:?}; graph still lists: {:?}",
                t0.elapsed(),
                n.graph().nodes.iter().map(|x| (x.name.clone(), x.pid)).collect::<Vec<_>>(),
                n.graph().endpoints_of("/beat").map(|e| (e.id, e.kind)).collect::<Vec<_>>()
            ),
        }
    }
    // And discovery forgets the process within the lease.
    let end = t0 + lease + slack;
    while n
        .graph()
        .endpoints_of("/beat")
        .any(|e| e.kind == ferry::EndpointKind::Publisher)
    {
        assert!(
            Instant::now() < end,
            "killed publisher still in the graph after {:?}",
            t0.elapsed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "kill -9 detected after {:?} (lease {lease:?})",
        t0.elapsed()
    );
    assert!(t0.elapsed() <= lease + slack);
}

#[test]
fn clean_exit_withdraws_at_once() {
    let n = node("watcher", 203);
    let s = n.subscriber::<std_msgs::String>("/bye").build().unwrap();
    let p = Proc::spawn(
        203,
        &[
            "topic",
            "pub",
            "/bye",
            "std_msgs/msg/String",
            "data: x",
            "--times",
            "3",
            "-r",
            "20",
        ],
    );
    s.recv_timeout(T).unwrap();
    let (ok, _, err) = p.finish(T);
    assert!(ok, "{err}");
    let t0 = Instant::now();
    while n
        .graph()
        .endpoints_of("/bye")
        .any(|e| e.kind == ferry::EndpointKind::Publisher)
    {
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "clean exit not withdrawn within 1 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn service_dying_mid_call_is_a_clear_error() {
    let n = node("caller", 204);
    let mut srv = Proc::spawn(204, &["demo-role", "slow_service"]);
    let c = n
        .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/slow")
        .build()
        .unwrap();
    assert!(c.wait_for_service(T));
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        srv.kill9();
    });
    let t0 = Instant::now();
    let e = c
        .call(AddTwoIntsRequest { a: 1, b: 2 }, Duration::from_secs(30))
        .unwrap_err();
    killer.join().unwrap();
    assert!(matches!(e, CallError::ServiceGone { .. }), "{e}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t0.elapsed()
    );
}

#[test]
fn cli_echo_and_service_call_across_processes() {
    let n = node("talker", 205);
    let p = n.publisher::<std_msgs::String>("/chatter").build().unwrap();
    let _srv = n
        .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/add", |r| AddTwoIntsResponse {
            sum: r.a + r.b,
        })
        .build()
        .unwrap();
    let echo = Proc::spawn(
        205,
        &[
            "topic",
            "echo",
            "/chatter",
            "--once",
            "--json",
            "--timeout",
            "10",
        ],
    );
    assert!(p.wait_for_subscribers(1, T), "echo never subscribed");
    p.publish(std_msgs::String {
        data: "hello echo".into(),
    })
    .unwrap();
    let (ok, out, err) = echo.finish(T);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), r#"{"data":"hello echo"}"#);
    let call = Proc::spawn(
        205,
        &[
            "service",
            "call",
            "/add",
            "example_interfaces/srv/AddTwoInts",
            "{a: 2, b: 40}",
        ],
    );
    let (ok, out, err) = call.finish(T);
    assert!(ok, "{err}");
    assert!(out.contains("sum: 42"), "{out}");
    let list = Proc::spawn(205, &["topic", "list", "-t"]);
    let (ok, out, _) = list.finish(T);
    assert!(ok);
    assert!(out.contains("/chatter [std_msgs/msg/String]"), "{out}");
    let info = Proc::spawn(205, &["topic", "info", "/chatter", "-v"]);
    drop(info);
}

#[test]
fn topic_info_shows_the_path_of_each_connection() {
    let n = node("talker", 206);
    let p = n.publisher::<std_msgs::String>("/path").build().unwrap();
    let _local = n.subscriber::<std_msgs::String>("/path").build().unwrap();
    let _remote = Proc::spawn(206, &["topic", "echo", "/path", "--timeout", "20"]);
    assert!(p.wait_for_subscribers(2, T));
    let info = Proc::spawn(206, &["topic", "info", "/path", "-v"]);
    let (ok, out, err) = info.finish(T);
    assert!(ok, "{err}");
    assert!(out.contains("path intra"), "{out}");
    assert!(out.contains("path shm  shm/ferry.s."), "{out}");
}

#[test]
fn bad_config_is_a_clear_error() {
    let out = Command::new(FERRY)
        .args(["topic", "list"])
        .env("FERRY_DISCOVERY", "everywhere")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("FERRY_DISCOVERY"), "{err}");
    for (value, want) in [("999", "domain_id"), ("robot", "FERRY_DOMAIN_ID")] {
        let out = Command::new(FERRY)
            .args(["topic", "list"])
            .env("FERRY_DOMAIN_ID", value)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "FERRY_DOMAIN_ID={value}: {err}");
    }
    let path = std::env::temp_dir().join(format!("ferry-bad-{}.toml", std::process::id()));
    std::fs::write(&path, "domian_id = 3\n").unwrap();
    let out = Command::new(FERRY)
        .args(["topic", "list"])
        .env("FERRY_CONFIG", &path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("domian_id"), "{err}");
}

#[test]
fn garbage_on_discovery_and_tcp_ports_harms_nothing() {
    let domain = 207;
    let n = node("victim", domain);
    let p = n.publisher::<std_msgs::Int32>("/n").build().unwrap();
    let s = n
        .subscriber::<std_msgs::Int32>("/n")
        .qos(ferry::Qos::default().transport(ferry::TransportKind::Tcp))
        .build()
        .unwrap();
    assert!(p.wait_for_subscribers(1, T));
    // Garbage and truncated beacons to the discovery group and unicast ports.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let base = cfg(domain).discovery_port();
    let mut junk: Vec<Vec<u8>> = vec![
        vec![],
        b"FD".to_vec(),
        b"FD\x01\x01".to_vec(),
        vec![0xff; 1400],
    ];
    for i in 0..200u32 {
        let mut v = b"FD\x01\x01".to_vec();
        v.extend_from_slice(&(domain).to_le_bytes());
        v.extend((0..(i % 90)).map(|k| (k * 31 + i) as u8));
        junk.push(v);
    }
    for j in &junk {
        let _ = udp.send_to(j, ("239.255.70.1", base));
        for port in cfg(domain).unicast_discovery_ports() {
            let _ = udp.send_to(j, ("127.0.0.1", port));
        }
    }
    // Garbage, a huge length and a truncated frame to the TCP listener.
    let loc = n
        .graph()
        .nodes
        .iter()
        .find(|x| x.name == "/victim")
        .unwrap()
        .locators
        .clone();
    let addr = loc
        .iter()
        .find_map(|l| l.strip_prefix("tcp/"))
        .unwrap()
        .to_string();
    // Garbage, truncated and hostile datagrams to the UDP data socket:
    // unknown streams, a HELLO for a reader that does not exist, a DATA
    // fragment announcing a 4 GB sample.
    let udp_addr = loc
        .iter()
        .find_map(|l| l.strip_prefix("udp/"))
        .unwrap()
        .to_string();
    let mut hostile: Vec<Vec<u8>> = vec![b"FU".to_vec(), vec![0xee; 1400], b"FU\x01\x04".to_vec()];
    let mut hello = b"FU\x01\x04\x01\x00\x00\x00".to_vec();
    hello.extend_from_slice(&[7u8; 25]);
    hostile.push(hello);
    let mut data = b"FU\x01\x01\x01\x00\x00\x00".to_vec();
    data.extend_from_slice(&1u64.to_le_bytes());
    data.extend_from_slice(&0u64.to_le_bytes());
    data.extend_from_slice(&u32::MAX.to_le_bytes());
    data.extend_from_slice(&[0, 0, 0xff, 0xff]);
    data.extend_from_slice(&[1; 100]);
    hostile.push(data);
    for h in &hostile {
        let _ = udp.send_to(h, &udp_addr);
    }
    for bad in [
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        {
            let mut h = b"FR\x01\x02".to_vec();
            h.extend_from_slice(&[0; 4]);
            h.extend_from_slice(&u32::MAX.to_le_bytes());
            h.extend_from_slice(&[0; 20]);
            h
        },
        b"FR\x01".to_vec(),
    ] {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        let _ = c.write_all(&bad);
        let mut buf = [0u8; 16];
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // The runtime closes a connection that sends garbage.
        if bad.len() > 3 {
            assert_eq!(
                c.read(&mut buf).unwrap_or(0),
                0,
                "connection with garbage not closed"
            );
        }
    }
    // Traffic is unaffected.
    for i in 0..50 {
        p.publish(std_msgs::Int32 { data: i }).unwrap();
    }
    let mut last = -1;
    while let Ok(x) = s.recv_timeout(Duration::from_secs(2)) {
        last = x.data;
        if last == 49 {
            break;
        }
    }
    assert_eq!(last, 49);
}

#[test]
fn cli_hz_and_bw_measure_a_live_topic() {
    let n = node("talker", 208);
    let p = n.publisher::<std_msgs::String>("/rate").build().unwrap();
    let hz = Proc::spawn(208, &["topic", "hz", "/rate", "--timeout", "3"]);
    let bw = Proc::spawn(208, &["topic", "bw", "/rate", "--timeout", "3"]);
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        p.publish(std_msgs::String {
            data: "x".repeat(100),
        })
        .unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let (ok, out, err) = hz.finish(T);
    assert!(ok, "{err}");
    let rate: f64 = out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("average rate: "))
        .unwrap_or_else(|| panic!("no rate in {out}"))
        .parse()
        .unwrap();
    assert!((30.0..60.0).contains(&rate), "50 Hz measured as {rate}");
    let (ok, out, err) = bw.finish(T);
    assert!(ok, "{err}");
    assert!(
        out.contains("Message size mean: 109 B min: 109 B max: 109 B"),
        "{out}"
    );
    // 50 messages/s of 109 B: the rate line scales its unit (KB/s).
    assert!(out.contains(" KB/s from "), "{out}");
}

#[test]
fn demo_runs_shows_paths_and_cleans_up() {
    let demo = Command::new(FERRY)
        .args(["demo", "--duration", "5", "--domain", "209"])
        .env("FERRY_DISCOVERY", "localhost")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&demo.stdout);
    assert!(
        demo.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&demo.stderr)
    );
    let last = out.rsplit("ferry demo — ").next().unwrap();
    for want in [
        "/camera/image",
        "/cmd_vel",
        "/arm/joint_states",
        "/arm/plan",
        "intra",
        "shm",
    ] {
        assert!(
            last.contains(want),
            "`{want}` missing from the demo's last table:\n{last}"
        );
    }
    // The service call between two processes takes shared memory too.
    assert!(
        last.lines()
            .any(|l| l.starts_with("/arm/plan") && l.contains(" shm ")),
        "/arm/plan not over shared memory:\n{last}"
    );
    assert!(out.contains("4 processes cleaned up"));
    // No demo process survives.
    let ps = Command::new("pgrep")
        .args(["-f", "ferry demo-role"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&ps.stdout).trim().is_empty(),
        "leftover demo processes"
    );
}

#[test]
fn liveliness_lease_shortens_death_detection() {
    let n = node("watcher", 210);
    let s = n.subscriber::<std_msgs::String>("/alive").build().unwrap();
    let mut p = Proc::spawn(
        210,
        &[
            "topic",
            "pub",
            "/alive",
            "std_msgs/msg/String",
            "data: x",
            "-r",
            "20",
            "--liveliness-ms",
            "600",
        ],
    );
    s.recv_timeout(T).expect("publisher never arrived");
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    p.kill9();
    while n
        .graph()
        .endpoints_of("/alive")
        .any(|e| e.kind == ferry::EndpointKind::Publisher)
    {
        assert!(
            t0.elapsed() < Duration::from_millis(1500),
            "600 ms liveliness lease not honoured"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "kill -9 with a 600 ms liveliness lease detected after {:?}",
        t0.elapsed()
    );
}

#[test]
fn tune_prints_the_papers_profile_and_cyclone_accepts_its_xml() {
    let out = Command::new(FERRY)
        .args([
            "tune",
            "--rate",
            "30",
            "--payload",
            "256KiB",
            "--link",
            "433Mbit",
            "--utilization",
            "0.6",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("keep_last(124)"), "{text}");
    assert!(text.contains("<maxMessageSize>1472</maxMessageSize>"));
    assert!(text.contains("<nanosec>16666667</nanosec>"));
    assert!(text.contains("<depth>124</depth>"));
    let xml: String = text
        .lines()
        .skip_while(|l| !l.starts_with("<CycloneDDS"))
        .take_while(|l| !l.starts_with("<!-- and in"))
        .map(|l| format!("{l}\n"))
        .collect();
    if Command::new("ddsperf").arg("-h").output().is_err() {
        eprintln!("SKIPPED Cyclone check: ddsperf not installed (bash scripts/setup.sh)");
        return;
    }
    let path = std::env::temp_dir().join(format!("ferry-tune-{}.xml", std::process::id()));
    std::fs::write(&path, &xml).unwrap();
    let run = Command::new("timeout")
        .args(["2", "ddsperf", "-D", "1", "pub", "size", "1k"])
        .env("CYCLONEDDS_URI", format!("file://{}", path.display()))
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    let all =
        String::from_utf8_lossy(&run.stdout).to_string() + &String::from_utf8_lossy(&run.stderr);
    assert!(
        !all.contains("unknown element") && !all.contains("failed"),
        "Cyclone rejected the XML:\n{xml}\n{all}"
    );
    assert!(all.contains("participant"), "ddsperf did not start: {all}");
}

/// `ferry shm gc` removes the files of a dead process and nothing else;
/// `ferry shm list` shows them with their owner.
#[test]
fn shm_gc_removes_what_dead_processes_left() {
    let live =
        ferry_shm::Segment::create(&ferry_shm::segment::name('t', "cli_live"), 4096).unwrap();
    let me = ferry_shm::Owner::this();
    // Other tests of this binary run ferry runtimes, which sweep stale files
    // too when a connection of theirs closes: a dead file may vanish before
    // `ferry shm gc` sees it. Try again then (bounded).
    let mut removed_by_gc = false;
    for attempt in 0..5u64 {
        // A name whose owner never ran (same pid, a start time that never was).
        let dead = format!(
            "ferry.t.{}.{}.{}.cli_dead{attempt}",
            me.pidns,
            me.pid,
            me.start + 777
        );
        let mut d = ferry_shm::Segment::create(&dead, 4096).unwrap();
        d.disown();
        drop(d);
        let list = Command::new(FERRY).args(["shm", "list"]).output().unwrap();
        let out = String::from_utf8_lossy(&list.stdout).to_string();
        assert!(out.contains(live.name()), "{out}");
        if !out.contains(&dead) {
            continue; // swept by another runtime already
        }
        let gc = Command::new(FERRY).args(["shm", "gc"]).output().unwrap();
        let out = String::from_utf8_lossy(&gc.stdout).to_string();
        assert!(gc.status.success());
        assert!(!std::path::Path::new(&format!("/dev/shm/{dead}")).exists());
        if out.contains(&format!("removed {dead}")) {
            removed_by_gc = true;
            break;
        }
    }
    assert!(
        removed_by_gc,
        "ferry shm gc never removed a dead process's file"
    );
    assert!(std::path::Path::new(&format!("/dev/shm/{}", live.name())).exists());
}

#[test]
fn echo_into_a_closed_pipe_ends_quietly() {
    // `ferry topic echo /t | head -1`: the reader goes away after one line.
    let n = node("talker", 211);
    let p = n.publisher::<std_msgs::String>("/pipe").build().unwrap();
    let mut echo = Command::new(FERRY)
        .args(["topic", "echo", "/pipe"])
        .env("FERRY_DOMAIN_ID", "211")
        .env("FERRY_DISCOVERY", "localhost")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = echo.stdout.take().unwrap();
    let end = Instant::now() + T;
    let mut first = [0u8; 1];
    // Publish until the first byte arrives, then close our end of the pipe.
    let reader = std::thread::spawn(move || {
        let _ = stdout.read_exact(&mut first);
        drop(stdout);
    });
    while !reader.is_finished() && Instant::now() < end {
        p.publish(std_msgs::String { data: "x".into() }).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    // Keep publishing: the next line hits the closed pipe.
    for _ in 0..50 {
        p.publish(std_msgs::String { data: "y".into() }).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        if let Ok(Some(_)) = echo.try_wait() {
            break;
        }
    }
    let end = Instant::now() + T;
    let status = loop {
        if let Ok(Some(st)) = echo.try_wait() {
            break Some(st);
        }
        if Instant::now() > end {
            let _ = echo.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    echo.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        status.is_some_and(|s| s.success()),
        "echo did not end cleanly on a broken pipe ({status:?}): {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn two_nodes_with_one_name_are_listed_twice_with_a_warning() {
    // Two runtimes (different configs) in this process, each with a node
    // named /twin: `node list` shows both, and says so.
    let a = node("twin", 212);
    let b = Node::builder()
        .name("twin")
        .config(Config {
            keep_all_block_ms: 1234,
            ..cfg(212)
        })
        .build()
        .unwrap();
    assert_ne!(a.participant(), b.participant());
    let list = Proc::spawn(212, &["node", "list"]);
    let (ok, out, err) = list.finish(T);
    assert!(ok, "{err}");
    assert_eq!(out.lines().filter(|l| *l == "/twin").count(), 2, "{out}");
    assert!(err.contains("WARNING") && err.contains("/twin ×2"), "{err}");
}
