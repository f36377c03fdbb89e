//! Shell helpers for tests that build network namespaces and run
//! processes in them (root, `ip`, `unshare`).

use std::process::{Command, Output};

/// Runs `cmd` with `sh -c`.
pub fn sh(cmd: &str) -> Output {
    Command::new("sh").arg("-c").arg(cmd).output().expect("sh")
}

/// Runs `cmd` with `sh -c`; panics with its stderr when it fails.
pub fn ok(cmd: &str) {
    let o = sh(cmd);
    assert!(
        o.status.success(),
        "`{cmd}` failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The arguments that run the program after them as another host for
/// shared memory: an IPC namespace and a `/dev/shm` of its own
/// (`unshare … sh -c 'mount … && exec "$0" "$@"' <program> <args…>`).
pub const OWN_SHM_HOST: [&str; 8] = [
    "unshare",
    "--ipc",
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    "mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec \"$0\" \"$@\"",
];
