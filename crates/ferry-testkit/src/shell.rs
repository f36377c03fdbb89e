//! Shell helpers for tests that build network namespaces and run
//! processes in them (root, `ip`, `unshare`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// A child process the test talks to by lines (stdin and stdout piped);
/// killed when dropped.
pub struct ChildProc {
    /// The process.
    pub child: Child,
    out: BufReader<ChildStdout>,
}

impl ChildProc {
    /// Spawns `cmd` with stdin and stdout piped (stderr as `cmd` says).
    pub fn spawn(mut cmd: Command) -> ChildProc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn a child");
        let out = BufReader::new(child.stdout.take().expect("piped stdout"));
        ChildProc { child, out }
    }

    /// The next line that contains `word`, from `word` on (a child test
    /// harness prints its own words before the child's first line);
    /// panics when the child ends first or after 60 s of other lines.
    pub fn expect(&mut self, word: &str) -> String {
        let end = Instant::now() + Duration::from_secs(60);
        let mut line = String::new();
        while Instant::now() < end {
            line.clear();
            if self.out.read_line(&mut line).unwrap_or(0) == 0 {
                panic!("child ended before `{word}`");
            }
            if let Some(at) = line.find(word) {
                return line[at..].trim().to_string();
            }
        }
        panic!("no `{word}` within 60 s");
    }

    /// Writes `line` to the child's stdin (ignored once it is gone).
    pub fn send(&mut self, line: &str) {
        if let Some(i) = self.child.stdin.as_mut() {
            let _ = writeln!(i, "{line}");
        }
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two network namespaces ("hosts") joined by a veth pair, each end with
/// an address of `net`.0/24 (`.1` in `a`, `.2` in `b`); every process in
/// them is killed and both are deleted on drop.
pub struct HostPair {
    /// The first namespace.
    pub a: String,
    /// The second namespace.
    pub b: String,
    /// The veth ends, in `a` and in `b`.
    pub dev: [String; 2],
}

impl HostPair {
    /// Namespaces `names`, veth ends `devs`, addresses in `net` (e.g.
    /// `"10.79.52"`); `None`, with a SKIPPED line naming `what`, without
    /// root, iproute2 and unshare.
    pub fn new(names: [String; 2], devs: [String; 2], net: &str, what: &str) -> Option<HostPair> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0
            || !sh("command -v ip && command -v unshare").status.success()
        {
            eprintln!("SKIPPED: {what} needs root, iproute2 and unshare");
            return None;
        }
        let [a, b] = names;
        let pair = HostPair { a, b, dev: devs };
        let (a, b, [da, db]) = (&pair.a, &pair.b, &pair.dev);
        ok(&format!("ip netns add {a} && ip netns add {b}"));
        ok(&format!(
            "ip link add {da} netns {a} type veth peer name {db} netns {b}"
        ));
        for (ns, dev, host) in [(a, da, 1), (b, db, 2)] {
            ok(&format!(
                "ip -n {ns} link set lo up && ip -n {ns} addr add {net}.{host}/24 dev {dev} \
                 && ip -n {ns} link set {dev} up"
            ));
        }
        Some(pair)
    }
}

impl Drop for HostPair {
    fn drop(&mut self) {
        let _ = sh(&format!(
            "ip netns pids {a} | xargs -r kill -9; ip netns pids {b} | xargs -r kill -9; \
             ip netns del {a}; ip netns del {b}",
            a = self.a,
            b = self.b
        ));
    }
}
