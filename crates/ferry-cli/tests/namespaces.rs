//! Two hosts: two network namespaces joined by a veth pair (needs root,
//! `ip` and `nft`; `scripts/setup.sh` installs them). Real processes,
//! real multicast, real nftables.

use std::process::{Command, Stdio};
use std::time::Duration;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

use ferry_testkit::shell::{ok, sh};

/// Two namespaces `a` and `b` with 10.77.N.1 and 10.77.N.2; deleted on drop.
struct Lab {
    a: String,
    b: String,
    net: u8,
}

impl Lab {
    fn new(net: u8) -> Option<Lab> {
        if unsafe { libc::geteuid() } != 0
            || !sh("command -v ip && command -v nft").status.success()
        {
            eprintln!(
                "SKIPPED: namespace tests need root, iproute2 and nftables (bash scripts/setup.sh)"
            );
            return None;
        }
        let tag = format!("{}{}", std::process::id() % 10000, net);
        let lab = Lab {
            a: format!("fa{tag}"),
            b: format!("fb{tag}"),
            net,
        };
        let (a, b) = (&lab.a, &lab.b);
        ok(&format!("ip netns add {a} && ip netns add {b}"));
        ok(&format!(
            "ip link add va{tag} netns {a} type veth peer name vb{tag} netns {b}"
        ));
        for (ns, dev, host) in [(a, format!("va{tag}"), 1), (b, format!("vb{tag}"), 2)] {
            ok(&format!(
                "ip -n {ns} link set lo up && ip -n {ns} addr add 10.77.{net}.{host}/24 dev {dev} && ip -n {ns} link set {dev} up"
            ));
        }
        Some(lab)
    }
    fn ip(&self, host: u8) -> String {
        format!("10.77.{}.{host}", self.net)
    }
    /// Drops all multicast in and out of both namespaces.
    fn block_multicast(&self) {
        for ns in [&self.a, &self.b] {
            ok(&format!(
                "ip netns exec {ns} nft -f - <<'EOF'\ntable inet lab {{\n chain out {{ type filter hook output priority 0; ip daddr 224.0.0.0/4 drop; }}\n chain in {{ type filter hook input priority 0; ip daddr 224.0.0.0/4 drop; }}\n}}\nEOF"
            ));
        }
    }
    /// Runs `ferry args…` in namespace `ns` with `env`.
    fn ferry(&self, ns: &str, env: &[(&str, String)], args: &[&str]) -> std::process::Child {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, FERRY]).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn")
    }
}

impl Lab {
    /// `ferry topic pub TOPIC std_msgs/msg/String 'data: TEXT' -r 20` in `ns`.
    fn publish(
        &self,
        ns: &str,
        env: &[(&str, String)],
        topic: &str,
        text: &str,
    ) -> std::process::Child {
        let data = format!("data: {text}");
        self.ferry(
            ns,
            env,
            &[
                "topic",
                "pub",
                topic,
                "std_msgs/msg/String",
                &data,
                "-r",
                "20",
            ],
        )
    }
    /// `ferry topic echo TOPIC --once --json --timeout SECS` in `ns`.
    fn echo_once(
        &self,
        ns: &str,
        env: &[(&str, String)],
        topic: &str,
        secs: u32,
    ) -> std::process::Child {
        let secs = secs.to_string();
        self.ferry(
            ns,
            env,
            &[
                "topic",
                "echo",
                topic,
                "--once",
                "--json",
                "--timeout",
                &secs,
            ],
        )
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Processes first, then the namespaces (the veth pair goes with them).
        for ns in [&self.a, &self.b] {
            let _ = sh(&format!(
                "ip netns pids {ns} | xargs -r kill -9; ip netns del {ns}"
            ));
        }
    }
}

/// Reads `r` to the end on a thread (a child's pipe that must not fill up).
fn drain<R: std::io::Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

fn wait_output(mut c: std::process::Child, limit: Duration) -> (bool, String, String) {
    // Drain both pipes while waiting: a child writing more than a pipe
    // buffer (64 KiB) would otherwise block and never exit.
    let (out, err) = (drain(c.stdout.take()), drain(c.stderr.take()));
    let end = std::time::Instant::now() + limit;
    let success = loop {
        if let Ok(Some(status)) = c.try_wait() {
            break status.success();
        }
        if std::time::Instant::now() > end {
            let _ = c.kill();
            let _ = c.wait();
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (success, out.join().unwrap(), err.join().unwrap())
}

/// Plain network namespaces share `/dev/shm` and IPC: ferry would
/// (rightly) pick shared memory and bypass the veth, so these "two hosts"
/// keep it off.
fn env(domain: u16, discovery: &str, peers: Option<String>) -> Vec<(&'static str, String)> {
    let mut e = vec![
        ("FERRY_DOMAIN_ID", domain.to_string()),
        ("FERRY_DISCOVERY", discovery.to_string()),
        ("FERRY_SHM", "off".to_string()),
    ];
    if let Some(p) = peers {
        e.push(("FERRY_PEERS", p));
    }
    e
}

#[test]
fn multicast_discovery_across_two_hosts() {
    let Some(lab) = Lab::new(1) else { return };
    let e = env(9, "subnet", None);
    let mut publ = lab.publish(&lab.a, &e, "/across", "over the veth");
    let echo = lab.echo_once(&lab.b, &e, "/across", 15);
    let (ok_, out, err) = wait_output(echo, Duration::from_secs(20));
    assert!(
        ok_ && out.contains("over the veth"),
        "echo in b saw nothing from a: {out} {err}"
    );
    // b sees a's publisher in its graph...
    let list = lab.ferry(&lab.b, &e, &["topic", "list", "-v"]);
    let (_, out, _) = wait_output(list, Duration::from_secs(10));
    assert!(
        out.contains("/across [std_msgs/msg/String] 1 publisher(s)"),
        "{out}"
    );
    // ...and a subscriber in b is reached over TCP at b's veth address (the
    // publisher's admin service, asked from b across the link, says so).
    let mut sub = lab.ferry(&lab.b, &e, &["topic", "echo", "/across", "--timeout", "15"]);
    std::thread::sleep(Duration::from_millis(1500));
    let info = lab.ferry(&lab.b, &e, &["topic", "info", "/across", "-v"]);
    let (_, out, err) = wait_output(info, Duration::from_secs(10));
    let _ = sub.kill();
    let _ = sub.wait();
    assert!(
        out.contains(&format!("path tcp  tcp/{}:", lab.ip(2))),
        "{out} {err}"
    );
    let _ = publ.kill();
    let _ = publ.wait();
}

#[test]
fn static_peers_work_with_multicast_blocked() {
    let Some(lab) = Lab::new(2) else { return };
    lab.block_multicast();
    // Negative control: with multicast blocked and no peers, nothing is found.
    let e = env(10, "subnet", None);
    let mut publ = lab.publish(&lab.a, &e, "/static", "unicast only");
    let echo = lab.echo_once(&lab.b, &e, "/static", 3);
    let (_, out, _) = wait_output(echo, Duration::from_secs(10));
    assert!(
        !out.contains("unicast only"),
        "multicast was not blocked: {out}"
    );
    let _ = publ.kill();
    let _ = publ.wait();
    // With static peers (only b names a; a learns b from b's unicast beacons).
    let ea = env(10, "subnet", None);
    let eb = env(10, "subnet", Some(lab.ip(1)));
    let mut publ = lab.publish(&lab.a, &ea, "/static", "unicast only");
    let echo = lab.echo_once(&lab.b, &eb, "/static", 15);
    let (ok_, out, err) = wait_output(echo, Duration::from_secs(20));
    if !(ok_ && out.contains("unicast only")) {
        let _ = publ.kill();
        let o = publ.wait_with_output().unwrap();
        panic!(
            "static peer discovery failed: echo ok={ok_} out={out} err={err}\npublisher stderr: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let _ = publ.kill();
    let _ = publ.wait();
}

#[test]
fn localhost_range_stays_inside_the_host() {
    let Some(lab) = Lab::new(3) else { return };
    // localhost discovery in a and b: they must not find each other.
    let e = env(11, "localhost", None);
    let mut publ = lab.publish(&lab.a, &e, "/local", "stays home");
    let echo = lab.ferry(
        &lab.b,
        &e,
        &["topic", "echo", "/local", "--once", "--timeout", "3"],
    );
    let (_, out, _) = wait_output(echo, Duration::from_secs(10));
    assert!(
        !out.contains("stays home"),
        "localhost discovery crossed hosts: {out}"
    );
    // While a process in the same namespace does find it.
    let echo = lab.ferry(
        &lab.a,
        &e,
        &["topic", "echo", "/local", "--once", "--timeout", "10"],
    );
    let (ok_, out, err) = wait_output(echo, Duration::from_secs(15));
    assert!(ok_ && out.contains("stays home"), "{out} {err}");
    let _ = publ.kill();
    let _ = publ.wait();
}

/// A link with a small MTU (1280, a VPN's): UDP datagrams follow the
/// interface's MTU, so 20 KB samples cross it without a single IP fragment
/// (counted by nftables on b's input) and arrive whole.
#[test]
fn udp_datagrams_fit_a_small_link_mtu_without_ip_fragments() {
    let Some(lab) = Lab::new(6) else { return };
    let tag = lab.a.trim_start_matches("fa").to_string();
    ok(&format!(
        "ip -n {} link set va{tag} mtu 1280 && ip -n {} link set vb{tag} mtu 1280",
        lab.a, lab.b
    ));
    ok(&format!(
        "ip netns exec {} nft -f - <<'EOF'\ntable inet mtucheck {{\n chain pre {{ type filter hook prerouting priority -500; ip frag-off & 0x3fff != 0 counter; }}\n}}\nEOF",
        lab.b
    ));
    let cfg = std::env::temp_dir().join(format!("ferry-mtu-{}.toml", std::process::id()));
    std::fs::write(
        &cfg,
        "[[topics]]\npattern = \"/big\"\ntransport = \"udp\"\n",
    )
    .unwrap();
    let mut e = env(14, "subnet", None);
    e.push(("FERRY_CONFIG", cfg.to_string_lossy().into_owned()));
    let text = "x".repeat(20_000);
    let mut publ = lab.publish(&lab.a, &e, "/big", &text);
    // `topic pub` echoes each 20 KB sample; keep its pipe flowing.
    let _log = drain(publ.stdout.take());
    let echo = lab.ferry(
        &lab.b,
        &e,
        &[
            "topic",
            "echo",
            "/big",
            "--json",
            "--count",
            "10",
            "--timeout",
            "20",
        ],
    );
    let (_, out, err) = wait_output(echo, Duration::from_secs(25));
    let _ = publ.kill();
    let _ = publ.wait();
    let got = out.lines().filter(|l| l.contains(&text)).count();
    assert_eq!(got, 10, "10 samples of 20 KB expected: {err}");
    let o = sh(&format!(
        "ip netns exec {} nft list table inet mtucheck",
        lab.b
    ));
    let counters = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        counters.contains("counter packets 0 "),
        "IP fragments crossed the link:\n{counters}"
    );
    std::fs::remove_file(cfg).ok();
}

/// A custom type echoed on another host that has no file for it: the echo
/// asks the publisher's node for the definition, checks it against the
/// announced ROS 2 hash, and decodes.
#[test]
fn echo_of_a_type_only_the_publisher_has_files_for() {
    let Some(lab) = Lab::new(7) else { return };
    let dir = std::env::temp_dir().join(format!("ferry-ns-ifc-{}", std::process::id()));
    let msg = dir.join("lab_msgs").join("msg");
    std::fs::create_dir_all(&msg).unwrap();
    std::fs::write(
        msg.join("Probe.msg"),
        "string<=16 label \"probe\"\ngeometry_msgs/Point at\nReading[] readings\n",
    )
    .unwrap();
    std::fs::write(msg.join("Reading.msg"), "int32 id 7\nfloat32[2] v\n").unwrap();
    let e = env(10, "subnet", None);
    let mut with_files = e.clone();
    with_files.push(("FERRY_INTERFACE_PATH", dir.display().to_string()));
    let mut publ = lab.ferry(
        &lab.a,
        &with_files,
        &[
            "topic",
            "pub",
            "/probe",
            "lab_msgs/msg/Probe",
            "{at: {x: 1.5}, readings: [{id: 1, v: [0.5, 2]}, {}]}",
            "-r",
            "20",
        ],
    );
    // The echo side: no FERRY_INTERFACE_PATH at all.
    let echo = lab.echo_once(&lab.b, &e, "/probe", 15);
    let (ok_, out, err) = wait_output(echo, Duration::from_secs(20));
    let _ = publ.kill();
    let _ = publ.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok_, "echo failed: {out} {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect(&out);
    assert_eq!(v["label"], "probe", "{out}");
    assert_eq!(v["at"]["x"], 1.5);
    assert_eq!(v["readings"][0]["v"][1], 2.0);
    assert_eq!(v["readings"][1]["id"], 7, "the default of Reading.id");
    assert!(err.contains("with the definition sent by"), "{err}");
}

/// `ferry forwarder` leads host B's election; two `ferry topic echo` there
/// (the CLI only follows, so it never leads) take a publisher on host A —
/// with its own `/dev/shm` and IPC, another host for shared memory too —
/// through the forwarder once both listen (forward_threshold 2), and
/// `topic info -v` names it: `forwarded via ferry_forwarder`.
#[test]
fn a_standalone_forwarder_serves_the_cli_on_its_host() {
    let Some(lab) = Lab::new(8) else { return };
    let e = vec![
        ("FERRY_DOMAIN_ID", "15".to_string()),
        ("FERRY_DISCOVERY", "subnet".to_string()),
        ("FERRY_HOST_LEADER", "on".to_string()),
        // Asked from host B by `topic info -v`.
        ("FERRY_ADMIN", "open".to_string()),
    ];
    let mut fwd = lab.ferry(&lab.b, &e, &["forwarder", "--duration", "40"]);
    let fwd_out = drain(fwd.stdout.take());
    std::thread::sleep(Duration::from_millis(500));
    let echo = |lab: &Lab| {
        lab.ferry(
            &lab.b,
            &e,
            &[
                "topic",
                "echo",
                "/fwd",
                "std_msgs/msg/String",
                "-i",
                "--json",
                "--timeout",
                "12",
            ],
        )
    };
    let (e1, e2) = (echo(&lab), echo(&lab));
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &lab.a])
        .args(ferry_testkit::shell::OWN_SHM_HOST)
        .arg(FERRY)
        .args([
            "topic",
            "pub",
            "/fwd",
            "std_msgs/msg/String",
            "data: relayed",
            "-r",
            "20",
        ])
        .envs(e.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut publ = c.spawn().expect("spawn the publisher");
    std::thread::sleep(Duration::from_secs(5));
    let info = lab.ferry(&lab.b, &e, &["topic", "info", "/fwd", "-v"]);
    let (_, info_out, info_err) = wait_output(info, Duration::from_secs(15));
    let (_, out1, _) = wait_output(e1, Duration::from_secs(20));
    let (_, out2, _) = wait_output(e2, Duration::from_secs(20));
    let _ = publ.kill();
    let _ = publ.wait();
    let _ = fwd.kill();
    let _ = fwd.wait();
    let fwd_said = fwd_out.join().unwrap();
    assert!(
        fwd_said.contains("ferry forwarder: leads this host's runtimes"),
        "{fwd_said}"
    );
    for out in [&out1, &out2] {
        let lines: Vec<&str> = out.lines().filter(|l| l.contains("relayed")).collect();
        assert!(lines.len() >= 60, "too few samples: {out}");
        assert!(
            lines.last().is_some_and(|l| l.contains("\"fwd\"")),
            "the last samples did not come through the forwarder: {:?}",
            lines.last()
        );
    }
    let via = info_out
        .lines()
        .filter(|l| l.contains("path forwarded via ferry_forwarder (pid "))
        .count();
    assert_eq!(via, 2, "one per echo: {info_out} {info_err}");
}
