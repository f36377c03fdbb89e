//! What the CLI test files share: running `ferry` with a clean
//! environment.
#![allow(dead_code)] // each test file uses part of it

use std::process::Command;

/// The `ferry` binary under test.
pub const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// Runs `ferry args` to completion with the variables that would change
/// its behaviour removed and `env` set: (success, stdout, stderr).
pub fn ferry(env: &[(&str, &str)], args: &[&str]) -> (bool, String, String) {
    let o = Command::new(FERRY)
        .args(args)
        .env_remove("FERRY_INTERFACE_PATH")
        .env_remove("AMENT_PREFIX_PATH")
        .env_remove("FERRY_DOMAIN_ID")
        .env_remove("ROS_DOMAIN_ID")
        .env_remove("FERRY_SECURITY")
        .env_remove("FERRY_KEYSTORE")
        .env_remove("FERRY_ENCLAVE")
        .envs(env.iter().copied())
        .output()
        .expect("ferry runs");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
