//! `ferry admin NODE connections | counters | set TOPIC --to PEER --priority CLASS --sched POLICY`:
//! the node's admin service, from the shell.

use std::time::Duration;

use clap::{Args, Subcommand};
use ferry::admin::{AdminReply, AdminRequest};

/// Arguments of `ferry admin`.
#[derive(Args)]
pub struct AdminArgs {
    /// The node (`/camera_node`).
    node: String,
    #[command(subcommand)]
    cmd: AdminCmd,
    /// How long to wait for the node's admin service (s).
    #[arg(long, default_value_t = 3.0, global = true)]
    timeout: f64,
    /// Print the node's JSON reply.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand)]
enum AdminCmd {
    /// The node's connections with their path, priority and statistics.
    Connections,
    /// What the node's runtime counted and refused: discovery datagrams
    /// (malformed, forged, other domains, over caps) and incoming
    /// connections (no or bad Hello, evicted, refused, out of descriptors).
    Counters,
    /// Change the priority of live connections of one of the node's publishers.
    Set {
        /// The publisher's topic.
        topic: String,
        /// The subscriber's node (`/planner`), endpoint id, or `*` for all.
        #[arg(long, default_value = "*")]
        to: String,
        /// Packet class: low, normal, high, critical or dscp:0..63.
        #[arg(long, default_value = "normal")]
        priority: String,
        /// Dedicated sender thread: fifo:1..99, rr:1..99, nice:-20..19, other;
        /// `none` removes it. Omitted: unchanged.
        #[arg(long)]
        sched: Option<String>,
    },
}

pub fn run(a: AdminArgs, spin: Duration) -> Result<(), String> {
    let node = crate::cli_node()?;
    let client = node
        .client::<AdminRequest, AdminReply>(&ferry::admin::service_name(&a.node))
        .build()
        .map_err(|e| e.to_string())?;
    let timeout = Duration::from_secs_f64(a.timeout);
    if !client.wait_for_service(timeout.max(spin)) {
        return Err(format!(
            "no admin service for node `{}` (is it running, in this domain, with admin not off?)",
            a.node
        ));
    }
    let req = match &a.cmd {
        AdminCmd::Connections => AdminRequest::connections(),
        AdminCmd::Counters => AdminRequest {
            command: "counters".into(),
            ..Default::default()
        },
        AdminCmd::Set {
            topic,
            to,
            priority,
            sched,
        } => {
            // Check locally first: a typo is reported without a round trip.
            priority
                .parse::<ferry::PacketClass>()
                .map_err(|e| e.to_string())?;
            if let Some(s) = sched.as_deref().filter(|s| *s != "none") {
                s.parse::<ferry::ThreadPolicy>()
                    .map_err(|e| e.to_string())?;
            }
            AdminRequest {
                command: "set".into(),
                topic: topic.clone(),
                to: to.clone(),
                priority: priority.clone(),
                sched: sched.clone().unwrap_or_default(),
            }
        }
    };
    let reply = client.call(req, timeout).map_err(|e| e.to_string())?;
    if a.json {
        out!("{}", reply.json);
        return Ok(());
    }
    match a.cmd {
        AdminCmd::Connections => {
            let conns = ferry::admin::parse_connections(&reply).map_err(|e| e.to_string())?;
            let rows = conns
                .into_iter()
                .map(|c| {
                    let peer = if c.remote_node.is_empty() {
                        c.remote.to_string()
                    } else {
                        c.remote_node.clone()
                    };
                    let path = crate::topic::path_of(&c);
                    vec![
                        c.topic,
                        format!("{:?}", c.side).to_lowercase(),
                        peer,
                        path,
                        c.locator,
                        c.priority.map_or("-".into(), |p| p.to_string()),
                        c.stats.messages.to_string(),
                        format!("{:.1}", c.stats.rate_hz),
                    ]
                })
                .collect();
            out!(
                "{}",
                crate::table::render(
                    &["topic", "side", "peer", "path", "locator", "priority", "msgs", "rate Hz"],
                    rows,
                    &[6, 7]
                )
            );
        }
        AdminCmd::Counters => {
            let c = ferry::admin::parse_counters(&reply).map_err(|e| e.to_string())?;
            let (d, k) = (c.discovery, c.connections);
            out!("discovery: {}", crate::discovery_counters(&d));
            out!(
                "incoming connections: accepted {}  no Hello in time {}  bad Hello {}  \
                 evicted {}  refused {}  out of file descriptors {}  TLS refused {}  \
                 denied by grants {}  admin requests denied {}",
                k.accepted,
                k.no_hello,
                k.bad_hello,
                k.evicted,
                k.refused,
                k.fd_exhausted,
                k.tls_refused,
                k.denied,
                k.admin_denied
            );
            let u = k.udp;
            if u != Default::default() {
                out!(
                    "protected UDP: sessions {}  handshakes started {}  refused {}  replayed {}  \
                     datagrams failing authentication {}  replayed {}  plain refused {}  \
                     for no session {}",
                    u.sessions,
                    u.shakes_started,
                    u.shake_refused,
                    u.shake_replayed,
                    u.aead_failed,
                    u.replayed,
                    u.plaintext_refused,
                    u.unknown_session
                );
            }
        }
        AdminCmd::Set { .. } => {
            let out = ferry::admin::parse_set(&reply).map_err(|e| e.to_string())?;
            let mut failed = 0;
            for o in &out {
                let peer = if o.remote_node.is_empty() {
                    &o.remote
                } else {
                    &o.remote_node
                };
                match &o.result {
                    Ok(note) => out!("{peer}: {} — {note}", o.priority),
                    Err(e) => {
                        failed += 1;
                        out!("{peer}: NOT changed — {e}");
                    }
                }
            }
            if failed > 0 {
                return Err(format!(
                    "{failed} of {} connection(s) not changed",
                    out.len()
                ));
            }
        }
    }
    Ok(())
}
