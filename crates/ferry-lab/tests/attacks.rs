//! An attacker on the same LAN, with real sockets in network namespaces
//! (issue 19; needs root): forged goodbyes, heartbeats and announcements
//! naming every participant it hears, and a host outside a `localhost`
//! discovery range trying to subscribe.

use std::process::{Child, Stdio};

use ferry_lab::{ideal, Lab, LabConfig, Side};

const BIN: &str = env!("CARGO_BIN_EXE_ferry-disco");

fn root() -> bool {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: network namespaces need root");
        return false;
    }
    true
}

fn spawn(lab: &Lab, side: Side, args: &str) -> Child {
    spawn_with(lab, side, "", args)
}

/// `env`: `NAME=value …` set for the process.
fn spawn_with(lab: &Lab, side: Side, env: &str, args: &str) -> Child {
    lab.command(side, &format!("{env} exec {BIN} {args}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn")
}

fn output(c: Child) -> String {
    String::from_utf8_lossy(&c.wait_with_output().expect("wait").stdout).into_owned()
}

/// The number after `key` (`received 300`, `not_owner=12`).
fn value(out: &str, key: &str) -> u64 {
    out.split(key)
        .nth(1)
        .and_then(|r| {
            r.trim_start_matches([' ', '='])
                .split(|c: char| !c.is_ascii_digit())
                .next()
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no `{key}` in {out:?}"))
}

#[test]
fn forged_goodbyes_announcements_and_locators_do_not_cut_a_subscriber_off() {
    if !root() {
        return;
    }
    let lab = Lab::up(LabConfig::symmetric("fatk", 41, ideal())).expect("lab up");
    let sub = spawn(&lab, Side::A, "sub 77 /victim 20");
    // 600 samples at 50 Hz; the attack starts once both are established
    // (known to each other for longer than discovery's first-contact
    // window) and runs while half of them are published.
    let publisher = spawn(&lab, Side::B, "pub 77 /victim 600 50");
    std::thread::sleep(std::time::Duration::from_secs(7));
    let attacker = spawn(&lab, Side::B, "attack 77 6000");
    let (p, a, s) = (output(publisher), output(attacker), output(sub));
    assert_eq!(value(&p, "published"), 600, "{p}");
    assert!(value(&a, "forged") > 1000, "the attack did not run: {a}");
    assert!(value(&a, " for ") >= 2, "the attacker heard nobody: {a}");
    // Every forged datagram naming the subscriber or the publisher came
    // from the attacker's address: counted, and nothing was lost.
    assert!(
        value(&s, "not_owner") > 0,
        "no forgery reached the subscriber: {s}"
    );
    assert_eq!(
        value(&s, "received"),
        600,
        "reliable samples lost under attack: {s}"
    );
}

#[test]
fn with_signed_discovery_the_forgeries_are_refused_before_they_touch_any_state() {
    if !root() {
        return;
    }
    use ferry_security::create::{create_identity, create_keystore, create_permissions, Validity};
    let ks_dir = ferry_testkit::TempDir::new("attack-signed");
    let ks = create_keystore(ks_dir.path(), Validity::days(1)).expect("keystore");
    for e in ["/victim_pub", "/victim_sub"] {
        create_identity(&ks, e, Validity::days(1)).expect("identity");
    }
    let policy = ks_dir.path().join("policy-in.yaml");
    std::fs::write(
        &policy,
        "version: 1\nidentities:\n  /victim_pub: { allow: { publish: [/victim] } }\n  /victim_sub: { allow: { subscribe: [/victim] } }\n",
    )
    .expect("policy");
    create_permissions(&ks, &policy, Validity::days(1)).expect("permissions");
    let env = |enclave: &str| {
        format!(
            "FERRY_SECURITY=enforce FERRY_KEYSTORE={} FERRY_ENCLAVE={enclave}",
            ks_dir.path().display()
        )
    };
    let lab = Lab::up(LabConfig::symmetric("fsig", 44, ideal())).expect("lab up");
    let sub = spawn_with(&lab, Side::A, &env("/victim_sub"), "sub 76 /victim 20");
    let publisher = spawn_with(&lab, Side::B, &env("/victim_pub"), "pub 76 /victim 600 50");
    std::thread::sleep(std::time::Duration::from_secs(7));
    let attacker = spawn(&lab, Side::B, "attack 76 6000");
    let (p, a, s) = (output(publisher), output(attacker), output(sub));
    assert_eq!(value(&p, "published"), 600, "{p}");
    assert!(value(&a, "forged") > 1000, "the attack did not run: {a}");
    assert!(value(&a, " for ") >= 2, "the attacker heard nobody: {a}");
    // Unsigned: dropped before the owner check, counted as such.
    assert!(
        value(&s, "unsigned=") > 0,
        "no forgery reached the subscriber: {s}"
    );
    assert_eq!(value(&s, "not_owner="), 0, "{s}");
    assert_eq!(value(&s, "bad_signature="), 0, "{s}");
    assert_eq!(value(&s, "received"), 600, "samples lost under attack: {s}");
}

#[test]
fn localhost_discovery_keeps_another_host_out() {
    if !root() {
        return;
    }
    let lab = Lab::up(LabConfig::symmetric("floc", 42, ideal())).expect("lab up");
    let a = lab.addr(Side::A);
    for (domain, localhost) in [(78u16, true), (79, false)] {
        // The other host names A as a static peer, on its unicast ports
        // and on the multicast port itself.
        let port = 7400 + 16 * domain;
        let sub = spawn(
            &lab,
            Side::B,
            &format!("sub {domain} /local 7 --peer {a} --peer {a}:{port}"),
        );
        let publisher = spawn(
            &lab,
            Side::A,
            &format!(
                "pub {domain} /local 100 50{}",
                if localhost { " --localhost" } else { "" }
            ),
        );
        let (p, s) = (output(publisher), output(sub));
        let got = value(&s, "received");
        if localhost {
            assert!(p.contains("matched false"), "matched off-host: {p}");
            assert_eq!(got, 0, "another host subscribed to a localhost publisher");
        } else {
            // The control: the same peer is reached when the range allows it.
            assert!(
                got > 50,
                "subnet range not reached from the peer: {s} / {p}"
            );
        }
    }
}

#[test]
fn admin_changes_are_refused_to_a_hello_that_claims_the_victims_own_runtime() {
    if !root() {
        return;
    }
    let lab = Lab::up(LabConfig::symmetric("fadm", 43, ideal())).expect("lab up");
    // The victim publishes for 12 s with the default admin = local.
    let publisher = spawn(&lab, Side::A, "pub 80 /victim 240 20");
    let sub = spawn(&lab, Side::B, "sub 80 /victim 12");
    // From another host, a Hello claiming the victim's participant id.
    let remote = output(spawn(&lab, Side::B, "forge-admin 80 /victim_pub /victim"));
    // The control: the same forged Hello from the victim's own host, over
    // loopback, is a local caller.
    let local = output(spawn(
        &lab,
        Side::A,
        "forge-admin 80 /victim_pub /victim --loopback",
    ));
    let _ = (output(publisher), output(sub));
    assert!(
        remote.contains("denied: permission denied"),
        "a remote caller claiming the victim's id changed its priority: {remote}"
    );
    assert!(
        local.contains("accepted"),
        "the control from the victim's own host was not accepted: {local}"
    );
}
