//! `ferry interface`: every shipped type shows and has a prototype, hashes
//! are ROS 2's, and a user's package on `FERRY_INTERFACE_PATH` joins them.

use std::process::Command;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

fn ferry(env: &[(&str, &str)], args: &[&str]) -> (bool, String, String) {
    let o = Command::new(FERRY)
        .args(args)
        .env_remove("FERRY_INTERFACE_PATH")
        .env_remove("AMENT_PREFIX_PATH")
        .envs(env.iter().copied())
        .output()
        .expect("ferry runs");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

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
    let _ = publisher.kill();
    let _ = publisher.wait();
    assert!(ok, "{err}");
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
