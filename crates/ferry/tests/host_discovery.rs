//! Host discovery through the host leader (`host_leader` + `host_discovery`,
//! real processes on two hosts = network namespaces; shared memory off, as
//! both share the test machine's IPC namespace): every runtime learns every other;
//! on each host one runtime (the leader) is a member of the discovery
//! group (with two sockets: see `runtime/io.rs`) and the others are fed by it; kill -9 of a leader: its host
//! elects another, and a runtime started after that is learned by all and
//! learns all.
//!
//! Each runtime is this test binary re-run as a child (`hd_child`, which
//! does nothing unless `FERRY_HD_CHILD` is set).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry::leader::Role;
use ferry::{Config, DiscoveryRange, Node};
use ferry_testkit::shell::{sh, ChildProc, HostPair};

const DOMAIN: u16 = 39;

/// A child: one runtime in the election with host discovery on. On each
/// stdin line `count`, it prints `STATE <nodes> <fed 0|1> <fed datagrams>
/// <role>`; it exits when stdin closes.
#[test]
fn hd_child() {
    let Ok(name) = std::env::var("FERRY_HD_CHILD") else {
        return;
    };
    // FERRY_HD_LOG=debug (given to the test) logs each child to stderr.
    if let Some(level) = std::env::var("FERRY_HD_LOG")
        .ok()
        .and_then(|l| l.parse::<tracing::Level>().ok())
    {
        let _ = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init();
    }
    let node = Node::builder()
        .name(name)
        .config(Config {
            domain_id: DOMAIN,
            discovery: DiscoveryRange::Subnet,
            shared_memory: false,
            host_leader: true,
            host_discovery: std::env::var_os("FERRY_HD_PLAIN").is_none(),
            ..Config::default()
        })
        .build()
        .unwrap();
    let mut out = std::io::stdout();
    // (Marked: the test harness prints its own words before the first line.)
    let _ = writeln!(out, "READY");
    let _ = out.flush();
    let mut line = String::new();
    while std::io::stdin().read_line(&mut line).unwrap_or(0) > 0 {
        let graph = node.graph();
        let nodes = graph.nodes.len();
        let mut names: Vec<&str> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
        names.sort();
        let (fed, n) = node.host_feed().unwrap();
        let role = match node.host_role().unwrap() {
            Role::Leader { .. } => "leader",
            Role::Follower { .. } => "follower",
            _ => "other",
        };
        let _ = writeln!(
            out,
            "STATE {nodes} {} {n} {role} {} {:?}",
            u8::from(fed),
            names.join(","),
            node.discovery_stats()
        );
        let _ = out.flush();
        line.clear();
    }
}

struct Lab(HostPair);

impl std::ops::Deref for Lab {
    type Target = HostPair;
    fn deref(&self) -> &HostPair {
        &self.0
    }
}

impl Lab {
    fn new() -> Option<Lab> {
        let tag = std::process::id() % 100_000;
        HostPair::new(
            [format!("hda{tag}"), format!("hdb{tag}")],
            [format!("hva{tag}"), format!("hvb{tag}")],
            "10.79.39",
            "the host discovery test",
        )
        .map(Lab)
    }

    fn child(&self, host: usize, name: &str) -> Proc {
        let exe = std::env::current_exe().unwrap();
        let mut c = Command::new("ip");
        c.args(["netns", "exec", if host == 0 { &self.a } else { &self.b }]);
        c.arg(exe)
            .args(["hd_child", "--exact", "--nocapture", "--test-threads=1"])
            .env("FERRY_HD_CHILD", name)
            .stderr(if std::env::var_os("FERRY_HD_LOG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        let mut p = ChildProc::spawn(c);
        p.expect("READY");
        p
    }

    /// How many sockets of host `host` are members of the discovery group
    /// on its link to the other host (`/proc/net/igmp`'s users).
    fn group_members(&self, host: usize) -> u32 {
        let ns = if host == 0 { &self.a } else { &self.b };
        let o = sh(&format!("ip netns exec {ns} cat /proc/net/igmp"));
        let text = String::from_utf8_lossy(&o.stdout);
        // The group 239.255.70.1 as the kernel prints it (host order hex).
        let group = format!("{:08X}", u32::from_le_bytes([239, 255, 70, 1]));
        let mut on_dev = false;
        for l in text.lines() {
            if !l.starts_with('\t') {
                on_dev = l.contains(&self.dev[host]);
                continue;
            }
            let f: Vec<&str> = l.split_whitespace().collect();
            if on_dev && f.first() == Some(&group.as_str()) {
                return f[1].parse().unwrap_or(0);
            }
        }
        0
    }
}

type Proc = ChildProc;

struct State {
    nodes: usize,
    fed: bool,
    fed_datagrams: u64,
    role: String,
    names: String,
}

/// A child's state, as it prints it.
trait Ask {
    fn state(&mut self) -> State;
}

impl Ask for Proc {
    fn state(&mut self) -> State {
        self.send("count");
        let l = self.expect("STATE");
        let f: Vec<&str> = l.split_whitespace().collect();
        State {
            nodes: f[1].parse().unwrap(),
            fed: f[2] == "1",
            fed_datagrams: f[3].parse().unwrap(),
            role: f[4].to_string(),
            names: f[5..].join(" "),
        }
    }
}

/// Polls every process until each knows `nodes` nodes (at most `limit`).
fn await_nodes(procs: &mut [&mut Proc], nodes: usize, limit: Duration) -> Vec<State> {
    let end = Instant::now() + limit;
    loop {
        let states: Vec<State> = procs.iter_mut().map(|p| p.state()).collect();
        if states.iter().all(|s| s.nodes == nodes) {
            return states;
        }
        assert!(
            Instant::now() < end,
            "not every runtime knows {nodes} nodes within {limit:?}: {:?}",
            states
                .iter()
                .map(|s| format!("{} {} {}", s.role, s.fed, s.names))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn one_leader_per_host_listens_and_feeds_the_others_through_a_leader_kill() {
    let Some(lab) = Lab::new() else { return };
    let mut a: Vec<Proc> = (0..4).map(|i| lab.child(0, &format!("hd_a{i}"))).collect();
    let mut b: Vec<Proc> = (0..3).map(|i| lab.child(1, &format!("hd_b{i}"))).collect();
    let mut all: Vec<&mut Proc> = a.iter_mut().chain(b.iter_mut()).collect();
    let states = await_nodes(&mut all, 7, Duration::from_secs(15));
    // Per host: one leader, the others fed by it.
    for (host, range) in [(0, 0..4), (1, 4..7)] {
        let s = &states[range];
        assert_eq!(
            s.iter().filter(|s| s.role == "leader").count(),
            1,
            "host {host}: one leader"
        );
        for f in s.iter().filter(|s| s.role == "follower") {
            assert!(f.fed, "host {host}: a follower is fed by its leader");
            assert!(
                f.fed_datagrams > 0,
                "host {host}: a follower learned through the feed"
            );
        }
        for l in s.iter().filter(|s| s.role == "leader") {
            assert!(!l.fed);
        }
        // Only the leader's sockets (its own and its twin) are members of
        // the group on the link; each follower left.
        assert_eq!(lab.group_members(host), 2, "host {host}: group members");
    }
    // kill -9 of host A's leader: the others elect again; a runtime
    // started afterwards is learned by everyone and learns everyone.
    let leader = states[..4].iter().position(|s| s.role == "leader").unwrap();
    let mut dead = a.remove(leader);
    let _ = dead.child.kill();
    let _ = dead.child.wait();
    drop(dead);
    a.push(lab.child(0, "hd_late"));
    let mut all: Vec<&mut Proc> = a.iter_mut().chain(b.iter_mut()).collect();
    // 6 survivors + the latecomer (the dead leader's lease runs out).
    let states = await_nodes(&mut all, 7, Duration::from_secs(20));
    assert_eq!(
        states[..4].iter().filter(|s| s.role == "leader").count(),
        1,
        "host A elected a new leader"
    );
    let late = &states[3];
    assert!(
        late.role == "leader" || (late.fed && late.fed_datagrams > 0),
        "the latecomer learned the fleet through its leader (or leads)"
    );
    assert_eq!(
        lab.group_members(0),
        2,
        "host A: group members after the kill"
    );
}
