//! `ferry interface`: every shipped type shows and has a prototype, hashes
//! are ROS 2's, and a user's package on `FERRY_INTERFACE_PATH` joins them.

use std::process::Command;

mod common;
use common::{ferry, FERRY};

#[test]
fn every_shipped_interface_shows() {
    let (ok, list, _) = ferry(&[], &["interface", "list"]);
    assert!(ok);
    let types: Vec<&str> = list
        .lines()
        .filter(|l| l.starts_with("    "))
        .map(str::trim)
        .collect();
    assert_eq!(types.len(), 193, "{list}");
    for t in &types {
        let (ok, out, err) = ferry(&[], &["interface", "show", t]);
        assert!(ok && !out.trim().is_empty(), "{t}: {err}");
        if t.contains("/msg/") {
            let (ok, out, err) = ferry(&[], &["interface", "proto", t]);
            assert!(ok && out.starts_with('"'), "{t}: {err}");
        }
    }
    let (ok, out, _) = ferry(&[], &["interface", "show", "std_msgs/msg/String", "--hash"]);
    assert!(ok);
    assert!(
        out.contains("RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"),
        "{out}"
    );
    // Nested types are expanded, indented by a tab.
    let (_, out, _) = ferry(
        &[],
        &[
            "interface",
            "show",
            "geometry_msgs/msg/Twist",
            "--no-comments",
        ],
    );
    assert_eq!(
        out,
        "Vector3  linear\n\tfloat64 x\n\tfloat64 y\n\tfloat64 z\nVector3  angular\n\tfloat64 x\n\tfloat64 y\n\tfloat64 z\n"
    );
}

#[test]
fn a_users_package_joins_and_bad_files_are_named() {
    let dir = std::env::temp_dir().join(format!("ferry-cli-ifaces-{}", std::process::id()));
    let msg = dir.join("my_robot_msgs/msg");
    std::fs::create_dir_all(&msg).unwrap();
    std::fs::write(
        msg.join("Arm.msg"),
        "# an arm\nstd_msgs/Header header\nfloat64[<=7] joints\n",
    )
    .unwrap();
    std::fs::write(msg.join("Broken.msg"), "int32 x\nfloat64 Y\n").unwrap();
    let path = dir.to_str().unwrap();
    let env = [("FERRY_INTERFACE_PATH", path)];
    let (ok, out, err) = ferry(&env, &["interface", "package", "my_robot_msgs"]);
    assert!(ok, "{err}");
    assert_eq!(out, "my_robot_msgs/msg/Arm\n");
    assert!(err.contains("Broken.msg:2:9"), "{err}");
    let (ok, out, _) = ferry(&env, &["interface", "proto", "my_robot_msgs/Arm"]);
    assert!(ok);
    assert!(out.contains("joints: []"), "{out}");
    let (ok, _, err) = ferry(&[], &["interface", "show", "my_robot_msgs/msg/Arm"]);
    assert!(!ok && err.contains("FERRY_INTERFACE_PATH"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `topic pub` of any loaded type with partial YAML (ROS defaults for the
/// rest, as `ros2 topic pub`), `topic echo` decoding it in another process.
#[test]
fn pub_and_echo_any_loaded_type() {
    let env = [("FERRY_DOMAIN_ID", "118")];
    let mut publisher = Command::new(FERRY)
        .args([
            "topic",
            "pub",
            "/imu",
            "sensor_msgs/msg/Imu",
            "{header: {frame_id: imu_link}, linear_acceleration: {z: 9.81}}",
            "-r",
            "20",
            "--times",
            "200",
        ])
        .env_remove("FERRY_INTERFACE_PATH")
        .envs(env)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ferry runs");
    let (ok, out, err) = ferry(
        &env,
        &[
            "topic",
            "echo",
            "/imu",
            "--once",
            "--json",
            "--timeout",
            "10",
        ],
    );
    let (tok, ty, _) = ferry(&env, &["topic", "type", "/imu"]);
    let (fok, found, _) = ferry(&env, &["topic", "find", "sensor_msgs/Imu"]);
    let _ = publisher.kill();
    let _ = publisher.wait();
    assert!(ok, "{err}");
    assert!(tok && ty.trim() == "sensor_msgs/msg/Imu", "{ty}");
    assert!(fok && found.lines().any(|l| l == "/imu"), "{found}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect(&out);
    assert_eq!(v["header"]["frame_id"], "imu_link");
    assert_eq!(v["linear_acceleration"]["z"], 9.81);
    assert_eq!(v["orientation"]["w"], 1.0, "ROS default of Quaternion.w");
    assert_eq!(
        v["orientation_covariance"].as_array().map(Vec::len),
        Some(9)
    );
    // A misspelt field names the fields there are, and nothing is sent.
    let (ok, _, err) = ferry(
        &env,
        &[
            "topic",
            "pub",
            "/tw",
            "geometry_msgs/msg/Twist",
            "{linaer: {x: 1}}",
            "--once",
        ],
    );
    assert!(!ok && err.contains("its fields: linear, angular"), "{err}");
}

/// `ferry service call` reaches any loaded service type: here a Rust
/// service of `std_srvs/srv/SetBool` (a generated type), called with
/// partial YAML (its default fills the rest), answered as YAML.
#[test]
fn service_call_any_loaded_service() {
    use ferry::msgs::std_srvs::srv::{SetBoolRequest, SetBoolResponse};
    let node = ferry::Node::builder()
        .name("switch")
        .config(ferry::Config {
            domain_id: 216,
            ..ferry::Config::default()
        })
        .build()
        .expect("node");
    let _svc = node
        .service::<SetBoolRequest, SetBoolResponse, _>("/switch", |r| SetBoolResponse {
            success: r.data,
            message: format!("switched {}", if r.data { "on" } else { "off" }),
        })
        .build()
        .expect("service");
    let env = [("FERRY_DOMAIN_ID", "216")];
    let (ok, out, err) = ferry(
        &env,
        &[
            "service",
            "call",
            "/switch",
            "std_srvs/srv/SetBool",
            "{data: true}",
            "--timeout",
            "10",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("response:\nsuccess: true\nmessage: switched on"),
        "{out}"
    );
    // Defaults: an empty request is `data: false`.
    let (ok, out, err) = ferry(&env, &["service", "call", "/switch", "std_srvs/SetBool"]);
    assert!(ok, "{err}");
    assert!(out.contains("success: false"), "{out}");
    // A field the request does not have is named, and nothing is sent.
    let (ok, _, err) = ferry(
        &env,
        &[
            "service",
            "call",
            "/switch",
            "std_srvs/srv/SetBool",
            "{dta: 1}",
        ],
    );
    assert!(!ok && err.contains("no field `dta`"), "{err}");
    let (ok, _, err) = ferry(&env, &["service", "call", "/switch", "nope_srvs/srv/Nope"]);
    assert!(!ok && err.contains("unknown service type"), "{err}");
}

/// A publisher whose definition does not hash to what it announced is not
/// believed: echo says so and prints the bytes undecoded.
#[test]
fn a_definition_that_does_not_match_its_hash_is_not_used() {
    let node = ferry::Node::builder()
        .name("liar")
        .config(ferry::Config {
            domain_id: 217,
            ..ferry::Config::default()
        })
        .build()
        .expect("node");
    // Announces the hash of one layout, sends the definition of another.
    let announced = ferry::interfaces::type_hash_of("liar_msgs/msg/Fake", "int32 a");
    ferry::interfaces::remember("liar_msgs/msg/Fake", "float64 a\nfloat64 b");
    let p = node
        .publisher::<ferry::RawBytes>("/fake")
        .type_info("liar_msgs/msg/Fake", announced)
        .build()
        .expect("publisher");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let pump = std::thread::spawn(move || {
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = p.publish(ferry::RawBytes::new(vec![0, 1, 0, 0, 5, 0, 0, 0]));
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    });
    let (ok, out, err) = ferry(
        &[("FERRY_DOMAIN_ID", "217")],
        &["topic", "echo", "/fake", "--once", "--timeout", "10"],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    pump.join().unwrap();
    assert!(ok, "{err}");
    assert!(
        err.contains("does not match the hash it announced"),
        "{err}"
    );
    assert!(out.contains("00 01 00 00 05"), "undecoded bytes: {out}");
}

/// ROS 2's `ROS_DOMAIN_ID` is honoured when `FERRY_DOMAIN_ID` is unset, and
/// the CLI says which one it used.
#[test]
fn ros_domain_id_is_honoured_and_named() {
    let (ok, out, err) = ferry(
        &[("ROS_DOMAIN_ID", "218")],
        &["doctor", "--spin-time", "50"],
    );
    assert!(ok, "{err}");
    assert!(out.contains("domain 218 (from ROS_DOMAIN_ID)"), "{out}");
    let (ok, out, _) = ferry(
        &[("ROS_DOMAIN_ID", "218"), ("FERRY_DOMAIN_ID", "219")],
        &["doctor", "--spin-time", "50"],
    );
    assert!(
        ok && out.contains("domain 219 (from FERRY_DOMAIN_ID)"),
        "{out}"
    );
    let (ok, _, err) = ferry(&[("ROS_DOMAIN_ID", "x")], &["doctor"]);
    assert!(!ok && err.contains("ROS_DOMAIN_ID"), "{err}");
}

/// The CLI's ports say what they are: `echo` announces the publishers'
/// type (not `*`), and `pub` of a type the subscribers do not take warns.
#[test]
fn cli_ports_say_their_type() {
    use ferry::msgs::std_msgs;
    let node = ferry::Node::builder()
        .name("typed")
        .config(ferry::Config {
            domain_id: 219,
            ..ferry::Config::default()
        })
        .build()
        .expect("node");
    let p = node
        .publisher::<std_msgs::String>("/said")
        .build()
        .expect("publisher");
    let _s = node
        .subscriber::<std_msgs::String>("/mix")
        .build()
        .expect("subscriber");
    let mut echo = Command::new(FERRY)
        .args(["topic", "echo", "/said", "--timeout", "8"])
        .env("FERRY_DOMAIN_ID", "219")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("ferry runs");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(8);
    let mut seen = None;
    while std::time::Instant::now() < end && seen.is_none() {
        let _ = p.publish(std_msgs::String { data: "x".into() });
        seen = node
            .graph()
            .endpoints_of("/said")
            .find(|e| e.kind == ferry::EndpointKind::Subscriber)
            .map(|e| e.type_name.clone());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = echo.kill();
    let _ = echo.wait();
    assert_eq!(seen.as_deref(), Some("std_msgs/msg/String"));
    let (ok, _, err) = ferry(
        &[("FERRY_DOMAIN_ID", "219")],
        &[
            "topic",
            "pub",
            "/mix",
            "std_msgs/msg/Int32",
            "{data: 1}",
            "--once",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("expect another type") && err.contains("/typed (std_msgs/msg/String"),
        "{err}"
    );
}

/// Off a terminal, log lines carry no colour codes; a config file's error
/// keeps TOML's caret diagram on its own lines.
#[test]
fn errors_read_well_off_a_terminal() {
    let dir = std::env::temp_dir().join(format!("ferry-cli-plain-{}", std::process::id()));
    let msg = dir.join("plain_msgs/msg");
    std::fs::create_dir_all(&msg).unwrap();
    std::fs::write(msg.join("Broken.msg"), "int32 x\nfloat64 Y\n").unwrap();
    let cfg = dir.join("bad.toml");
    std::fs::write(&cfg, "domain_id = 3\ndomain_idd = 4\n").unwrap();
    let path = dir.to_str().unwrap();
    let (_, _, err) = ferry(
        &[("FERRY_INTERFACE_PATH", path), ("FERRY_DOMAIN_ID", "219")],
        &["topic", "find", "std_msgs/String", "--spin-time", "50"],
    );
    assert!(err.contains("interface file skipped"), "{err}");
    assert!(!err.contains('\u{1b}'), "colour codes in a pipe: {err:?}");
    let (ok, _, err) = ferry(&[("FERRY_CONFIG", cfg.to_str().unwrap())], &["doctor"]);
    assert!(!ok, "{err}");
    assert!(
        err.lines()
            .any(|l| l.trim_start().starts_with("2 | domain_idd = 4"))
            && err.lines().any(|l| l.contains("^^^^")),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
