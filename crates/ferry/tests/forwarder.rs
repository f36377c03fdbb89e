//! Forwarding through the host leader, with real processes on two hosts:
//! two network namespaces joined by a veth pair, the publisher's host with
//! an IPC namespace and `/dev/shm` of its own (so it is another host for
//! shared memory too). Three subscribers in three processes on host B
//! elect a leader; a publisher on host A pinned to `fwd` sends each sample
//! once to that leader, which redistributes it over shared memory.
//!
//! Checked: every subscriber gets every sample in order over a forwarded
//! connection; the publisher holds one connection per subscriber, all
//! through the same leader; and the bytes host A puts on the link are
//! about one copy of the payload (three unicast streams would be three).
//!
//! Each process is this test binary re-run (`fwd_child`, idle unless
//! `FERRY_FWD_CHILD` is set). Needs root, `ip` and `unshare`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry::leader::Role;
use ferry::{Config, DiscoveryRange, Node, Qos, RawBytes, TransportKind};

const TOPIC: &str = "/fwd/frames";
const DOMAIN: u16 = 52;

use ferry_testkit::shell::{sh, ChildProc, HostPair, OWN_SHM_HOST};

/// A child process: `lead` (a runtime of the election without ports),
/// `sub <count> [be]` (best effort) or `pub <count> <size> <subscribers>
/// <interval ms> [auto] [udp]` (pinned to `fwd` unless `auto`; host
/// streams over UDP with `udp`).
#[test]
fn fwd_child() {
    let Ok(args) = std::env::var("FERRY_FWD_CHILD") else {
        return;
    };
    let a: Vec<&str> = args.split(' ').collect();
    // FERRY_FWD_LOG=debug (given to the test) logs each child to stderr.
    if let Some(level) = std::env::var("FERRY_FWD_LOG")
        .ok()
        .and_then(|l| l.parse::<tracing::Level>().ok())
    {
        let _ = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init();
    }
    let n = |i: usize| -> usize { a[i].parse().unwrap() };
    let node = Node::builder()
        .name(format!("{}{}", a[0], std::process::id()))
        .config(Config {
            domain_id: DOMAIN,
            discovery: DiscoveryRange::Subnet,
            host_leader: a[0] != "pub",
            forward_udp: a[0] == "pub" && a[5..].contains(&"udp"),
            ..Config::default()
        })
        .build()
        .unwrap();
    let qos = Qos::default().reliable().keep_all();
    let mut out = std::io::stdout();
    let say = |out: &mut std::io::Stdout, line: String| {
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    if a[0] == "lead" {
        let t0 = Instant::now();
        while !matches!(node.host_role(), Some(Role::Leader { .. }))
            && t0.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        say(&mut out, "READY leader".into());
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
    } else if a[0] == "sub" {
        let count = n(1);
        let qos = if a.get(2) == Some(&"be") {
            Qos::default().best_effort()
        } else {
            qos
        };
        let sub = node.subscriber::<RawBytes>(TOPIC).qos(qos).build().unwrap();
        let mut first = None;
        let t0 = Instant::now();
        let role = loop {
            match node.host_role().unwrap() {
                Role::Leader { .. } => break "leader",
                Role::Follower { .. } => break "follower",
                _ if t0.elapsed() > Duration::from_secs(10) => break "none",
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        say(&mut out, format!("READY {role}"));
        let (mut got, mut in_order, mut next) = (0usize, true, 0u64);
        let mut first_slip = String::from("-");
        let end = Instant::now() + Duration::from_secs(40);
        while got < count && Instant::now() < end {
            if let Ok(s) = sub.recv_timeout(Duration::from_millis(200)) {
                let i = u64::from_le_bytes(s.0[..8].try_into().unwrap());
                first.get_or_insert(i);
                if got == 0 {
                    next = i;
                }
                if i != next && in_order {
                    first_slip = format!("{next}->{i}");
                }
                in_order &= i == next;
                next = i + 1;
                got += 1;
            }
        }
        let conns = sub.connections();
        let kinds: Vec<String> = conns.iter().map(|c| c.transport.to_string()).collect();
        let via: Vec<String> = conns
            .iter()
            .filter(|c| !c.via.is_empty())
            .map(|c| c.via.replace(' ', "_"))
            .collect();
        say(
            &mut out,
            format!(
                "GOT {got} {in_order} {} {first_slip} {} {}",
                kinds.join(","),
                first.unwrap_or(u64::MAX),
                via.join(",")
            ),
        );
        // Stay (as a leader, relaying for the others) until told to go.
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
    } else {
        let (count, size, subs, gap) = (n(1), n(2), n(3), n(4) as u64);
        let qos = if a[5..].contains(&"auto") {
            qos
        } else {
            qos.transport(TransportKind::Forwarded)
        };
        let publ = node.publisher::<RawBytes>(TOPIC).qos(qos).build().unwrap();
        let matched = publ.wait_for_subscribers(subs, Duration::from_secs(30));
        let conns = || -> String {
            let c: Vec<String> = publ
                .connections()
                .iter()
                .map(|c| {
                    let via = if c.via.is_empty() {
                        String::new()
                    } else {
                        format!("@{}", c.via)
                    };
                    format!("{}={}{via}", c.transport, c.locator).replace(' ', "_")
                })
                .collect();
            c.join(" ")
        };
        say(&mut out, format!("MATCHED {matched} {}", conns()));
        // The parent reads the link's counters now.
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
        for i in 0..count as u64 {
            let mut v = vec![0u8; size];
            v[..8].copy_from_slice(&i.to_le_bytes());
            publ.publish(RawBytes::new(v)).unwrap();
            std::thread::sleep(Duration::from_millis(gap));
        }
        say(&mut out, format!("SENT {}", conns()));
        let _ = std::io::stdin().read_line(&mut s);
    }
}

/// Two namespaces joined by a veth pair; deleted (with their processes'
/// links) on drop.
struct Lab(HostPair);

impl std::ops::Deref for Lab {
    type Target = HostPair;
    fn deref(&self) -> &HostPair {
        &self.0
    }
}

impl Lab {
    /// Lab `n` of this test process (tests run at once).
    fn new(n: u32) -> Option<Lab> {
        let tag = std::process::id() % 100_000 * 10 + n;
        HostPair::new(
            [format!("fwa{tag}"), format!("fwb{tag}")],
            [format!("fva{tag}"), format!("fvb{tag}")],
            "10.79.52",
            "the forwarder test",
        )
        .map(Lab)
    }

    /// Bytes host A sent on its end of the link so far.
    fn tx_bytes_a(&self) -> u64 {
        let o = sh(&format!(
            "ip netns exec {} cat /sys/class/net/{}/statistics/tx_bytes",
            self.a, self.dev[0]
        ));
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    }

    /// This test binary as a child in `ns`; `own_shm`: with an IPC
    /// namespace and `/dev/shm` of its own (another host for shared memory).
    fn child(&self, ns: &str, own_shm: bool, args: &str) -> Proc {
        let exe = std::env::current_exe().unwrap();
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]);
        if own_shm {
            c.args(OWN_SHM_HOST);
        }
        c.arg(exe)
            .args(["fwd_child", "--exact", "--nocapture", "--test-threads=1"])
            .env("FERRY_FWD_CHILD", args)
            .stderr(if std::env::var_os("FERRY_FWD_LOG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        ChildProc::spawn(c)
    }
}

/// A child: this test binary in a role, talked to by lines.
type Proc = ChildProc;

#[test]
fn a_remote_host_gets_each_sample_once_and_its_leader_shares_it_over_shared_memory() {
    let Some(lab) = Lab::new(1) else { return };
    const COUNT: usize = 200;
    const SIZE: usize = 64 * 1024;
    let mut subs: Vec<Proc> = (0..3)
        .map(|_| lab.child(&lab.b, false, &format!("sub {COUNT}")))
        .collect();
    let roles: Vec<String> = subs.iter_mut().map(|s| s.expect("READY")).collect();
    assert_eq!(
        roles.iter().filter(|r| r.ends_with("leader")).count(),
        1,
        "{roles:?}"
    );
    assert_eq!(
        roles.iter().filter(|r| r.ends_with("follower")).count(),
        2,
        "{roles:?}"
    );
    let mut publ = lab.child(&lab.a, true, &format!("pub {COUNT} {SIZE} 3 2"));
    let matched = publ.expect("MATCHED");
    let words: Vec<&str> = matched.split(' ').collect();
    assert_eq!(words[1], "true", "not all three matched: {matched}");
    let conns = &words[2..];
    assert_eq!(conns.len(), 3, "{matched}");
    let leaders: std::collections::HashSet<&str> = conns
        .iter()
        .map(|c| {
            assert!(c.starts_with("fwd=fwd/"), "not forwarded: {c}");
            c.split("_via_").next().unwrap()
        })
        .collect();
    assert_eq!(leaders.len(), 1, "not through one leader: {matched}");
    // Named for people: the leading subscriber's runtime and process.
    let leader_pid = roles_pid(&roles, &subs);
    for c in conns {
        assert!(
            c.ends_with(&format!("_(pid_{leader_pid})")),
            "the leader is not named: {c}"
        );
    }

    let before = lab.tx_bytes_a();
    publ.send("go");
    publ.expect("SENT");
    let mut got = Vec::new();
    for s in subs.iter_mut() {
        got.push(s.expect("GOT"));
    }
    let sent = lab.tx_bytes_a() - before;
    let payload = (COUNT * SIZE) as f64;
    eprintln!(
        "host A sent {sent} B for {payload} B of payload to 3 subscribers: {:.3}×; subscribers: {got:?}",
        sent as f64 / payload
    );
    for (g, role) in got.iter().zip(&roles) {
        let w: Vec<&str> = g.split(' ').collect();
        assert_eq!(w[1], COUNT.to_string(), "a subscriber missed samples: {g}");
        assert_eq!(w[2], "true", "out of order: {g}");
        assert_eq!(w[3], "fwd", "not (only) a forwarded connection: {g}");
        let via = if role.ends_with("leader") {
            "this_runtime".to_string()
        } else {
            format!("(pid_{leader_pid})")
        };
        assert!(w[6].ends_with(&via), "{g}: not via {via}");
    }
    assert!(
        (sent as f64) < 1.3 * payload,
        "host A sent {sent} B for {payload} B of payload: not once per host"
    );
    for s in subs.iter_mut() {
        s.send("go");
    }
    publ.send("go");
}

/// The pid of the subscriber that said it leads.
fn roles_pid(roles: &[String], subs: &[Proc]) -> u32 {
    let i = roles.iter().position(|r| r.ends_with("leader")).unwrap();
    subs[i].child.id()
}

/// Sends a forwarded-connection request to `runtime`'s shared-memory
/// control socket for `reader`, and returns its answer.
fn forward_attach(
    runtime: ferry::ParticipantId,
    reader: ferry::EndpointId,
) -> ferry_wire::shm::Control {
    use ferry_wire::shm::{read_message, Attach, Control};
    use std::io::Read;
    let socket = format!(
        "{}/{}",
        ferry_shm::segment::SHM_DIR,
        ferry_shm::segment::name('s', &runtime.to_string())
    );
    let mut s = std::os::unix::net::UnixStream::connect(&socket).expect(&socket);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let writer = ferry::EndpointId {
        participant: ferry::ParticipantId(0x5eed),
        entity: 1,
    };
    let msg = Control::Forward(Attach {
        writer,
        reader,
        connection: "ferry.c.no-such-segment".into(),
        data_prefix: "ferry.d.no-such-segment".into(),
        reply_to: None,
    });
    s.write_all(&msg.encode()).unwrap();
    read_message(|buf| {
        s.read_exact(buf)
            .map_err(|_| ferry_wire::WireError::Truncated {
                offset: 0,
                needed: buf.len(),
            })
    })
    .expect("an answer")
}

/// A forwarded connection is the reader's consent to its own leader only:
/// a runtime outside any election refuses one from any process, and a
/// leader takes one from its own process (then fails on the segment this
/// request names, which does not exist: past the consent check).
#[test]
fn only_the_elected_leader_may_relay_to_a_reader() {
    use ferry_wire::shm::{Control, RefuseReason};
    for (domain, leader) in [(50u16, false), (49, true)] {
        let node = Node::builder()
            .name("fwd_consent")
            .config(Config {
                domain_id: domain,
                host_leader: leader,
                ..Config::default()
            })
            .build()
            .unwrap();
        let sub = node.subscriber::<RawBytes>(TOPIC).build().unwrap();
        let t0 = Instant::now();
        while leader
            && !matches!(node.host_role(), Some(Role::Leader { .. }))
            && t0.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        // The role reaches shared memory on the I/O thread's next turn.
        std::thread::sleep(Duration::from_millis(200));
        let answer = forward_attach(node.participant(), sub.id());
        let expected = if leader {
            RefuseReason::Segment
        } else {
            RefuseReason::NotPermitted
        };
        assert!(
            matches!(answer, Control::Refused { reason, .. } if reason == expected),
            "host_leader {leader}: {answer:?}"
        );
        assert!(sub.connections().is_empty());
    }
}

/// kill -9 of the host leader mid-stream: the followers elect another, the
/// publisher's stream moves to it and sends again what it kept; every
/// subscriber still gets every sample once, in order.
#[test]
fn kill_9_of_the_leader_mid_stream_loses_nothing_and_repeats_nothing() {
    kill_9_of_the_leader(2, "");
}

/// The same with the host stream over UDP, which sees no break when the
/// leader dies: the followers' announcements of the next leader move it.
#[test]
fn kill_9_of_the_leader_of_a_udp_host_stream_loses_nothing_and_repeats_nothing() {
    kill_9_of_the_leader(5, " udp");
}

fn kill_9_of_the_leader(lab_no: u32, pub_flags: &str) {
    let Some(lab) = Lab::new(lab_no) else { return };
    const COUNT: usize = 600;
    let mut leader = lab.child(&lab.b, false, "lead");
    assert_eq!(leader.expect("READY"), "READY leader");
    let mut subs: Vec<Proc> = (0..3)
        .map(|_| lab.child(&lab.b, false, &format!("sub {COUNT}")))
        .collect();
    for s in subs.iter_mut() {
        assert_eq!(s.expect("READY"), "READY follower");
    }
    // 600 samples of 4 KiB, one per 5 ms: 3 s, the leader killed after 1 s.
    let mut publ = lab.child(&lab.a, true, &format!("pub {COUNT} 4096 3 5{pub_flags}"));
    let matched = publ.expect("MATCHED");
    assert!(matched.starts_with("MATCHED true"), "{matched}");
    let via = if pub_flags.contains("udp") {
        "_via_udp/"
    } else {
        "_via_tcp/"
    };
    assert!(matched.contains(via), "not {via}: {matched}");
    publ.send("go");
    std::thread::sleep(Duration::from_secs(1));
    let _ = leader.child.kill();
    let killed = Instant::now();
    publ.expect("SENT");
    let got: Vec<String> = subs.iter_mut().map(|s| s.expect("GOT")).collect();
    eprintln!(
        "after kill -9 of the leader ({:?} ago): {got:?}",
        killed.elapsed()
    );
    for g in &got {
        let w: Vec<&str> = g.split(' ').collect();
        assert_eq!(w[1], COUNT.to_string(), "a subscriber missed samples: {g}");
        assert_eq!(w[2], "true", "out of order or repeated: {g}");
    }
    for s in subs.iter_mut() {
        s.send("go");
    }
    publ.send("go");
}

/// A subscriber joining a forwarded stream mid-way gets it from about when
/// it joined (not the stream's past) and leaves without disturbing the
/// others; a best-effort subscriber beside a reliable one gets the stream
/// in order too.
#[test]
fn subscribers_join_and_leave_a_forwarded_stream_and_best_effort_sits_beside_reliable() {
    let Some(lab) = Lab::new(3) else { return };
    const COUNT: usize = 600;
    let mut leader = lab.child(&lab.b, false, "lead");
    assert_eq!(leader.expect("READY"), "READY leader");
    let mut reliable = lab.child(&lab.b, false, &format!("sub {COUNT}"));
    let mut best_effort = lab.child(&lab.b, false, &format!("sub {COUNT} be"));
    reliable.expect("READY");
    best_effort.expect("READY");
    let mut publ = lab.child(&lab.a, true, &format!("pub {COUNT} 4096 2 5"));
    assert!(publ.expect("MATCHED").starts_with("MATCHED true"));
    publ.send("go");
    // One second (about 200 samples) in, a third subscriber joins; it
    // leaves after 100 samples.
    std::thread::sleep(Duration::from_secs(1));
    let mut late = lab.child(&lab.b, false, "sub 100");
    late.expect("READY");
    let late_got = late.expect("GOT");
    late.send("go");
    publ.expect("SENT");
    let (r, b) = (reliable.expect("GOT"), best_effort.expect("GOT"));
    eprintln!("reliable: {r}; best effort: {b}; joined late: {late_got}");
    let w: Vec<&str> = late_got.split(' ').collect();
    assert_eq!(&w[1..4], ["100", "true", "fwd"], "{late_got}");
    let first: u64 = w[5].parse().unwrap();
    assert!(
        (100..COUNT as u64 - 100).contains(&first),
        "the late subscriber started at sample {first}: {late_got}"
    );
    let w: Vec<&str> = r.split(' ').collect();
    assert_eq!(&w[1..4], [COUNT.to_string().as_str(), "true", "fwd"], "{r}");
    let w: Vec<&str> = b.split(' ').collect();
    assert_eq!(&w[2..4], ["true", "fwd"], "{b}");
    assert!(w[1].parse::<usize>().unwrap() >= COUNT * 9 / 10, "{b}");
    for p in [&mut reliable, &mut best_effort, &mut publ, &mut leader] {
        p.send("go");
    }
}

/// Without a pin: one subscriber on host B has its own stream; a second
/// one there moves both to the host's leader (make before break), and when
/// it leaves the first moves back — which gets every sample once, in order,
/// across both moves.
#[test]
fn a_second_subscriber_on_a_host_moves_the_stream_to_its_leader_and_back() {
    let Some(lab) = Lab::new(4) else { return };
    const COUNT: usize = 1000;
    let mut leader = lab.child(&lab.b, false, "lead");
    assert_eq!(leader.expect("READY"), "READY leader");
    let mut first = lab.child(&lab.b, false, &format!("sub {COUNT}"));
    assert_eq!(first.expect("READY"), "READY follower");
    // 1000 samples of 4 KiB, one per 5 ms: 5 s.
    let mut publ = lab.child(&lab.a, true, &format!("pub {COUNT} 4096 1 5 auto"));
    let matched = publ.expect("MATCHED");
    assert!(
        matched.starts_with("MATCHED true udp="),
        "one subscriber: {matched}"
    );
    publ.send("go");
    std::thread::sleep(Duration::from_secs(1));
    let mut second = lab.child(&lab.b, false, "sub 200");
    assert_eq!(second.expect("READY"), "READY follower");
    let second_got = second.expect("GOT");
    second.send("go"); // it leaves (says Bye)
    let _ = second.child.wait();
    let sent = publ.expect("SENT");
    let first_got = first.expect("GOT");
    eprintln!("second: {second_got}; first: {first_got}; publisher at the end: {sent}");
    let w: Vec<&str> = second_got.split(' ').collect();
    assert_eq!(&w[1..4], ["200", "true", "fwd"], "{second_got}");
    let w: Vec<&str> = first_got.split(' ').collect();
    assert_eq!(w[1], COUNT.to_string(), "missed samples: {first_got}");
    assert_eq!(w[2], "true", "out of order or repeated: {first_got}");
    assert_eq!(w[5], "0", "{first_got}");
    assert!(
        sent.starts_with("SENT udp=") && !sent.contains("fwd="),
        "not back on its own stream: {sent}"
    );
    for p in [&mut first, &mut publ, &mut leader] {
        p.send("go");
    }
}
