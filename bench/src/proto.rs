//! What the bench processes share: the payload layout, the child-process
//! handle (spawn, JSON lines on stdout, kill by PID) and the child's
//! life-line (exit on stdin EOF or after a hard limit).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Errors crossing module boundaries (zenoh's error type is this too).
pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Res<T> = Result<T, Error>;

/// Payload byte 0: what the sample is.
pub const KIND_WARMUP: u8 = 0;
pub const KIND_MEASURE: u8 = 1;
pub const KIND_END: u8 = 2;
/// Bytes 1..9: sequence number (ping) or run id (end marker); bytes 9..17:
/// for the end marker, the parent's CLOCK_MONOTONIC ns at the start of the
/// measured window (one clock for all processes of the machine). LE.
pub const HEADER: usize = 17;

/// A payload of `size` bytes (at least [`HEADER`]) with a kind and a number.
pub fn payload(size: usize, kind: u8, n: u64) -> Vec<u8> {
    let mut v: Vec<u8> = (0..size.max(HEADER)).map(|i| (i % 251) as u8).collect();
    v[0] = kind;
    v[1..9].copy_from_slice(&n.to_le_bytes());
    v
}

/// The end marker of throughput run `run` whose window started at `t1_ns`.
pub fn end_marker(size: usize, run: u64, t1_ns: u64) -> Vec<u8> {
    let mut v = payload(size, KIND_END, run);
    v[9..HEADER].copy_from_slice(&t1_ns.to_le_bytes());
    v
}

/// Bytes 9..17 of a payload head (0 if too short).
pub fn parse_aux(head: &[u8]) -> u64 {
    head.get(9..HEADER)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        .unwrap_or(0)
}

/// CLOCK_MONOTONIC in ns: comparable between the bench's processes.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass and nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The kind and number of a payload (None if it is too short).
pub fn parse(head: &[u8]) -> Option<(u8, u64)> {
    if head.len() < 9 {
        return None;
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(&head[1..9]);
    Some((head[0], u64::from_le_bytes(n)))
}

/// A child `ferry-bench serve` process. Dropping it kills it (by PID) and
/// reaps it.
pub struct ChildProc {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl ChildProc {
    /// Spawns this executable with `args` and extra environment.
    pub fn spawn(name: &str, args: &[String], env: &[(&str, String)]) -> Res<Self> {
        let exe = std::env::current_exe()?;
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn()?;
        let stdout = child.stdout.take().ok_or("child has no stdout")?;
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::channel();
        let tag = name.to_string();
        std::thread::Builder::new()
            .name(format!("out-{tag}"))
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })?;
        Ok(ChildProc {
            name: name.to_string(),
            child,
            stdin,
            lines: rx,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command line to the child's stdin.
    pub fn send_line(&mut self, line: &str) -> Res<()> {
        let stdin = self.stdin.as_mut().ok_or("child stdin closed")?;
        writeln!(stdin, "{line}")?;
        stdin.flush()?;
        Ok(())
    }

    /// The next JSON line the child prints that satisfies `want`, within
    /// `timeout` (other lines are echoed to stderr and skipped).
    pub fn expect(
        &mut self,
        timeout: Duration,
        want: impl Fn(&serde_json::Value) -> bool,
    ) -> Res<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => match serde_json::from_str::<serde_json::Value>(&line) {
                    Ok(v) if want(&v) => return Ok(v),
                    _ => eprintln!("[{}] {line}", self.name),
                },
                Err(RecvTimeoutError::Timeout) => {
                    return Err(
                        format!("{}: no expected line within {timeout:?}", self.name).into(),
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let st = self.child.try_wait().ok().flatten();
                    return Err(format!("{}: exited ({st:?})", self.name).into());
                }
            }
        }
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        drop(self.stdin.take()); // EOF: the child exits by itself
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Still there: kill this PID (SIGKILL) and reap it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// In a child: prints one JSON line on stdout and flushes.
pub fn emit(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

/// In a child: hands each stdin line (a command from the parent) to
/// `on_line`; returns when stdin closes (the parent is gone or done) or
/// `max` passes, whichever is first.
pub fn wait_for_parent(max: Duration, on_line: impl Fn(&str) + Send + 'static) {
    let (tx, rx) = mpsc::channel::<()>();
    let _ = std::thread::Builder::new()
        .name("lifeline".into())
        .spawn(move || {
            let stdin = std::io::stdin().lock();
            for line in stdin.lines() {
                match line {
                    Ok(l) => on_line(l.trim()),
                    Err(_) => break,
                }
            }
            let _ = tx.send(());
        });
    let _ = rx.recv_timeout(max);
}

/// A TCP port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> Res<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}
