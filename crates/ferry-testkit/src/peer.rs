//! The other process of a two-process test: the test binary runs itself in
//! a role (`FERRY_TEST_ROLE`), reports on stdout lines marked `@`, and is
//! killed when the handle drops, so no test leaves a process behind.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};

/// Environment variable naming the role of a re-run test binary.
pub const ROLE_VAR: &str = "FERRY_TEST_ROLE";
/// Environment variable with the role's argument.
pub const ARG_VAR: &str = "FERRY_TEST_ARG";

/// The role this process was started in (`None` in the parent).
pub fn role() -> Option<(String, String)> {
    Some((
        std::env::var(ROLE_VAR).ok()?,
        std::env::var(ARG_VAR).unwrap_or_default(),
    ))
}

/// Prints a report line the parent reads with [`Peer::line`].
pub fn report(text: &str) {
    println!("@{text}");
}

/// A re-run of this test binary in another process.
pub struct Peer {
    /// The process.
    pub child: Child,
    out: BufReader<ChildStdout>,
}

impl Peer {
    /// Runs test `test` of this binary in `role` with `arg`.
    pub fn spawn(test: &str, role: &str, arg: &str) -> Peer {
        Self::spawn_with(
            Command::new(std::env::current_exe().expect("test binary")),
            test,
            role,
            arg,
        )
    }

    /// As [`Peer::spawn`], through `cmd` (e.g. `unshare … <binary>`): the
    /// test binary and its arguments are appended to it.
    pub fn spawn_via(mut cmd: Command, test: &str, role: &str, arg: &str) -> Peer {
        cmd.arg(std::env::current_exe().expect("test binary"));
        Self::spawn_with(cmd, test, role, arg)
    }

    fn spawn_with(mut cmd: Command, test: &str, role: &str, arg: &str) -> Peer {
        let mut child = cmd
            .args([test, "--exact", "--nocapture", "--test-threads", "1"])
            .env(ROLE_VAR, role)
            .env(ARG_VAR, arg)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the test binary");
        let out = BufReader::new(child.stdout.take().expect("piped stdout"));
        Peer { child, out }
    }

    /// The next report (text after `@`); empty once the peer's stdout
    /// closes. libtest prints `test NAME ... ` before a test's own output,
    /// so the marker may sit mid-line.
    pub fn line(&mut self) -> String {
        let mut l = String::new();
        loop {
            l.clear();
            if self.out.read_line(&mut l).unwrap_or(0) == 0 {
                return String::new();
            }
            if let Some(i) = l.find('@') {
                return l[i + 1..].trim().to_string();
            }
        }
    }

    /// SIGKILL, as a crash.
    pub fn kill_9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.kill_9();
    }
}
