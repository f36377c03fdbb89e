//! `ferry forwarder`: a process that serves its host's leader election
//! and nothing else, for hosts that want the forwarding to live in a
//! process of its own (started first, it leads; if it is killed, another
//! runtime of the host takes over, and it follows when it comes back).

use std::time::{Duration, Instant};

use ferry::leader::Role;

/// Arguments of `ferry forwarder`.
#[derive(clap::Args)]
pub struct ForwarderArgs {
    /// Its node's name (what `topic info -v` and `admin … connections`
    /// show as `forwarded via <name>`).
    #[arg(long, default_value = "ferry_forwarder")]
    name: String,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
}

/// Runs the forwarder until Ctrl-C (or `--duration`), saying each change
/// of its role.
pub fn run(a: ForwarderArgs) -> Result<(), String> {
    let mut cfg = ferry::Config::from_env().map_err(|e| e.to_string())?;
    if cfg.security.mode != ferry_security::Mode::Off {
        return Err(
            "forwarding through a host leader is not built with security on (FERRY_SECURITY)"
                .into(),
        );
    }
    cfg.host_leader = true;
    cfg.host_leader_may_lead = true;
    let node = ferry::Node::builder()
        .name(a.name)
        .config(cfg)
        .build()
        .map_err(|e| e.to_string())?;
    let (tx, rx) = std::sync::mpsc::channel();
    let _ = ctrlc::set_handler(move || {
        let _ = tx.send(());
    });
    let end = a
        .duration
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    let mut said = None;
    loop {
        let role = node.host_role();
        let line = match &role {
            Some(Role::Leader { followers }) => format!(
                "ferry forwarder: leads this host's runtimes ({} following)",
                followers.len()
            ),
            Some(Role::Follower { leader }) => format!(
                "ferry forwarder: runtime {} (pid {}) leads; standing by to take over",
                leader.participant, leader.pid
            ),
            Some(Role::Refused { uid, pid }) => format!(
                "ferry forwarder: the election is held by pid {pid} of user {uid}, not this \
                 user: not forwarding (retrying)"
            ),
            Some(Role::Electing) => "ferry forwarder: electing".into(),
            Some(Role::Closed) | None => "ferry forwarder: not in an election".into(),
        };
        if said.as_ref() != Some(&line) {
            out!("{line}");
            said = Some(line);
        }
        let left = end.map(|e| e.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Ok(());
        }
        let tick = left.map_or(Duration::from_millis(100), |l| {
            l.min(Duration::from_millis(100))
        });
        if rx.recv_timeout(tick).is_ok() {
            return Ok(());
        }
    }
}
