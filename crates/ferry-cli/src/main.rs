//! `ferry`: inspect and drive a ferry system from the shell, shaped like `ros2`.

/// `println!` that ends the CLI quietly (exit 0) when its stdout is gone
/// (`ferry topic echo /t | head -3`), instead of panicking on the broken
/// pipe.
macro_rules! out {
    () => {
        out!("")
    };
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let mut o = std::io::stdout().lock();
        if let Err(e) = writeln!(o, $($t)*).and_then(|_| o.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
        }
    }};
}

mod admin;
mod demo;
mod forwarder;
mod interface;
mod security;
mod table;
mod topic;
mod tune;
mod types;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "ferry", version, about = "Ferry robotics middleware command line", long_about = None)]
struct Cli {
    /// `--spin-time` before the subcommand (shown in the help of the
    /// commands that use it).
    #[arg(long, hide = true)]
    spin_time: Option<u64>,
    /// `--node-name` before the subcommand (`ferry --node-name n topic pub …`).
    #[arg(long, hide = true)]
    node_name: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

/// Options of the commands that join the graph (topic, node, service,
/// admin, doctor): global within them, absent from the others.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct GraphOpts {
    /// How long to listen to discovery before answering (ms) [default: 400].
    #[arg(long, global = true, value_name = "MS")]
    spin_time: Option<u64>,
    /// Name of this command's own node (default `_ferry_cli_<pid>`), e.g.
    /// to reach a `topic pub` through `ferry admin`.
    #[arg(long, global = true, value_name = "NAME")]
    node_name: Option<String>,
}

impl GraphOpts {
    /// These options, with `outer` (given before the subcommand) where
    /// these are not given.
    fn or(self, outer: &GraphOpts) -> GraphOpts {
        GraphOpts {
            spin_time: self.spin_time.or(outer.spin_time),
            node_name: self.node_name.or(outer.node_name.clone()),
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Topics: list, info, echo, hz, bw, pub.
    Topic {
        #[command(flatten)]
        graph: GraphOpts,
        #[command(subcommand)]
        cmd: topic::TopicCmd,
    },
    /// Nodes: list, info.
    Node {
        #[command(flatten)]
        graph: GraphOpts,
        #[command(subcommand)]
        cmd: NodeCmd,
    },
    /// Services: list, call.
    Service {
        #[command(flatten)]
        graph: GraphOpts,
        #[command(subcommand)]
        cmd: ServiceCmd,
    },
    /// Interface types (messages, services, actions): list, packages, package, show, proto.
    #[command(subcommand)]
    Interface(interface::InterfaceCmd),
    /// A node's admin plane: list its connections, change a live connection's priority.
    Admin {
        #[command(flatten)]
        graph: GraphOpts,
        #[command(flatten)]
        args: admin::AdminArgs,
    },
    /// Keystores, enclave identities and their permissions (like `ros2 security`).
    #[command(subcommand)]
    Security(security::SecurityCmd),
    /// Start a small robot system (several processes) and show its paths live.
    Demo(demo::DemoArgs),
    /// The wireless large-payload profile for one stream: ferry config, Fast DDS and Cyclone DDS XML.
    Tune(tune::TuneArgs),
    /// Shared memory on this host: list ferry's segments, remove those of dead processes.
    #[command(subcommand)]
    Shm(ShmCmd),
    /// Run ferry's MQTT broker in the foreground (the one `mqtt://embedded` starts in a node).
    Broker(BrokerArgs),
    /// Lead this host's runtimes in the foreground: receive the streams forwarded to this host
    /// and hand them to its subscribers over shared memory (`docs/FORWARDER.md`).
    Forwarder(forwarder::ForwarderArgs),
    /// Check this host's ferry setup: configuration, broker connection, shared memory.
    Doctor {
        #[command(flatten)]
        graph: GraphOpts,
    },
    /// One process of the demo (used by `ferry demo`).
    #[command(hide = true)]
    DemoRole { role: String },
}

#[derive(clap::Args)]
struct BrokerArgs {
    /// MQTT 5 listener (ferry nodes connect here). Default: this host only;
    /// `0.0.0.0:1883` lets the network in (then give users).
    #[arg(long, default_value = "127.0.0.1:1883")]
    listen: std::net::SocketAddr,
    /// Also an MQTT 3.1.1 listener, for plain clients that only speak 3.1.1.
    #[arg(long)]
    listen_v311: Option<std::net::SocketAddr>,
    /// Largest payload a client may publish (bytes).
    #[arg(long, default_value_t = 16 << 20)]
    max_payload: usize,
    /// Require this user (repeatable): `--user robot:secret`. The
    /// `[mqtt]` user and password of `FERRY_CONFIG`, when set, are required
    /// too.
    #[arg(long, value_name = "NAME:PASSWORD")]
    user: Vec<String>,
    /// Also a TLS 1.3 listener here, requiring a client certificate of the
    /// keystore's CA (`--keystore`): how ferry runtimes on other hosts
    /// reach it under `enforce` (`mqtts://host:port`).
    #[arg(long, requires = "keystore")]
    listen_tls: Option<std::net::SocketAddr>,
    /// The keystore whose CA admits TLS clients.
    #[arg(long)]
    keystore: Option<std::path::PathBuf>,
    /// The TLS listener's certificate directory (`cert.pem`, `key.pem`);
    /// default: the keystore's only `brokers/<host>/`
    /// (`ferry security create-broker-cert`).
    #[arg(long)]
    broker_cert: Option<std::path::PathBuf>,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
}

/// The `--listen-tls` listener's configuration from the keystore.
fn broker_tls(a: &BrokerArgs) -> Result<Option<ferry_broker::BrokerTls>, String> {
    let (Some(listen), Some(ks)) = (a.listen_tls, &a.keystore) else {
        return Ok(None);
    };
    let ks = ferry_security::Keystore::open(ks).map_err(|e| e.to_string())?;
    let dir = match &a.broker_cert {
        Some(d) => d.clone(),
        None => ks.broker_cert_dir(None).map_err(|e| e.to_string())?,
    };
    let ca = ks.ca_der().map_err(|e| e.to_string())?;
    let config = ferry_security::tls::broker_server_config(&ca, &dir).map_err(|e| e.to_string())?;
    Ok(Some(ferry_broker::BrokerTls { listen, config }))
}

fn broker(a: BrokerArgs) -> Result<(), String> {
    let users = if a.user.is_empty() {
        None
    } else {
        let mut m = std::collections::HashMap::new();
        for u in &a.user {
            let (n, p) = u
                .split_once(':')
                .ok_or_else(|| format!("--user `{u}`: expected NAME:PASSWORD"))?;
            m.insert(n.to_string(), p.to_string());
        }
        Some(m)
    };
    // The configured credentials are the broker's too.
    let cfg = ferry::Config::from_env().map_err(|e| e.to_string())?;
    let users = match cfg
        .mqtt
        .as_ref()
        .and_then(|m| m.user.clone().map(|u| (u, m)))
    {
        Some((u, m)) => {
            let mut all = users.unwrap_or_default();
            all.insert(u, m.password.clone().unwrap_or_default());
            Some(all)
        }
        None => users,
    };
    if users.is_none() && !a.listen.ip().is_loopback() {
        eprintln!(
            "ferry broker: warning: anyone on the network may connect to {} (no --user, no \
             [mqtt] user)",
            a.listen
        );
    }
    let b = ferry_broker::EmbeddedBroker::start(&ferry_broker::BrokerConfig {
        listen: a.listen,
        listen_v311: a.listen_v311,
        max_payload: a.max_payload,
        users,
        tls: broker_tls(&a)?,
    })
    .map_err(|e| e.to_string())?;
    out!("ferry broker: MQTT 5 on {}", b.addr());
    if let Some(t) = b.addr_tls() {
        out!("ferry broker: MQTT 5 over TLS on {t} (client certificates of the keystore's CA)");
    }
    if let Some(v) = b.addr_v311() {
        out!("ferry broker: MQTT 3.1.1 on {v}");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let _ = ctrlc::set_handler(move || {
        let _ = tx.send(());
    });
    match a.duration {
        Some(s) => {
            let _ = rx.recv_timeout(Duration::from_secs_f64(s));
        }
        None => {
            let _ = rx.recv();
        }
    }
    Ok(())
}

/// A runtime's discovery counters, as `ferry doctor` and `ferry admin NODE
/// counters` print them.
pub(crate) fn discovery_counters(d: &ferry::DiscoveryStats) -> String {
    format!(
        "datagrams sent {}  accepted {}  malformed {}  other domains {}  forged (a known \
         participant's id from another address) {}  refused (caps, rate, revision jumps) {}  \
         off-host under localhost {}  participants evicted {}",
        d.sent,
        d.received,
        d.malformed,
        d.foreign_domain,
        d.not_owner,
        d.refused,
        d.not_loopback,
        d.evicted
    ) + &signed_counters(&d.security)
}

/// Signed discovery's counters (nothing when all are zero: security off
/// and no signed peer heard).
fn signed_counters(s: &ferry::DiscoverySecurityStats) -> String {
    let e = s.entries();
    if e.iter().all(|(_, v)| *v == 0) {
        return String::new();
    }
    let words: Vec<String> = e.iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!("\n  signed discovery: {}", words.join("  "))
}

/// `ferry doctor`'s host leader line: who leads this host's runtimes
/// (the CLI's own runtime follows only).
fn host_leader_doctor(node: &ferry::Node) {
    use ferry::leader::Role;
    let Some(role) = node.host_role() else {
        out!("host leader: not taking part (host_leader = false; FERRY_HOST_LEADER=on)");
        return;
    };
    match role {
        Role::Follower { leader } => out!(
            "host leader: runtime {} (pid {}) leads this host's runtimes",
            leader.participant,
            leader.pid
        ),
        Role::Leader { followers } => out!(
            "host leader: this runtime leads ({} followers)",
            followers.len()
        ),
        Role::Refused { uid, pid } => out!(
            "host leader: REFUSED: the election's socket is held by pid {pid} of user {uid}, \
             not this user: no host leader is used"
        ),
        Role::Electing => out!(
            "host leader: none yet (this CLI only follows; a node with host_leader = true, \
             or `ferry forwarder`, leads)"
        ),
        Role::Closed => out!("host leader: closed"),
    }
}

/// `ferry doctor`'s Zenoh lines: the session, its connections, and the
/// ROS 2 graph it sees.
fn zenoh_doctor(node: &ferry::Node) {
    let Some(z) = node.zenoh_session() else {
        out!("zenoh: not configured (set [zenoh] in FERRY_CONFIG, or FERRY_ZENOH=1)");
        return;
    };
    let g = node.graph();
    let via = |k| k == ferry::TransportKind::Zenoh;
    out!(
        "zenoh: {} {}  connect {:?}  routers {}  peers {}  ROS 2 graph: {} nodes, {} endpoints",
        z.mode,
        z.zid,
        z.connect,
        z.routers.len(),
        z.peers.len(),
        g.ros2_nodes.iter().filter(|n| via(n.via)).count(),
        g.ros2_endpoints.iter().filter(|e| via(e.via)).count()
    );
    if z.mode != "router" && z.routers.is_empty() && !z.connect.is_empty() {
        out!(
            "zenoh: no router connected: is one running at {:?}? (rmw_zenoh's: `ros2 run \
             rmw_zenoh_cpp rmw_zenohd`; or a ferry node with [zenoh] mode = \"router\")",
            z.connect
        );
    }
}

fn doctor(spin: Duration) -> Result<(), String> {
    let cfg = ferry::Config::from_env().map_err(|e| e.to_string())?;
    out!(
        "domain {} (from {})  discovery {:?}  shared memory {}",
        cfg.domain_id,
        ferry::config::domain_source(),
        cfg.discovery,
        if cfg.shared_memory { "on" } else { "off" }
    );
    out!("{}", security::doctor_line(&cfg.security));
    let node = cli_node()?;
    std::thread::sleep(spin);
    let d = node.discovery_stats();
    let mut peers: Vec<ferry::ParticipantId> = node
        .graph()
        .nodes
        .iter()
        .map(|n| n.participant)
        .filter(|p| *p != node.participant())
        .collect();
    peers.sort();
    peers.dedup();
    out!(
        "discovery: {} runtimes heard in {:.1} s; {}",
        peers.len(),
        spin.as_secs_f64(),
        discovery_counters(&d)
    );
    host_leader_doctor(&node);
    zenoh_doctor(&node);
    let Some(m) = &cfg.mqtt else {
        out!("mqtt: not configured (set [mqtt] broker in FERRY_CONFIG, or FERRY_MQTT=mqtt://host:1883)");
        return Ok(());
    };
    let until = std::time::Instant::now() + spin.max(Duration::from_millis(m.connect_timeout_ms));
    let mut st = node.broker_state();
    while st.as_ref().is_some_and(|s| !s.connected) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        st = node.broker_state();
    }
    let Some(s) = st else {
        return Err("mqtt configured but no broker connection in this runtime".into());
    };
    out!(
        "mqtt: {} {}  connects {}  failures {}  queued {} ({} B)  dropped {}  duplicates {}  garbage {}  \
         echoes (our metadata from another client) {}",
        s.url,
        if s.connected { "CONNECTED" } else { "NOT CONNECTED" },
        s.connects,
        s.failures,
        s.queued,
        s.queued_bytes,
        s.dropped,
        s.duplicates,
        s.garbage,
        s.echoes
    );
    if let Some(e) = &s.last_error {
        out!("mqtt: last error: {e}");
    }
    out!(
        "mqtt: announcements through the broker: {} ([mqtt] discovery = {:?}; network addresses {})",
        if cfg.announces_through_broker() { "on" } else { "off" },
        m.discovery,
        if m.announce_addresses { "included" } else { "left out" }
    );
    let cloud: Vec<&str> = cfg
        .topics
        .iter()
        .filter(|r| r.scope == Some(ferry::config::mqtt::Scope::Cloud))
        .map(|r| r.pattern.as_str())
        .collect();
    out!(
        "mqtt: cloud-scope topics: {}",
        if cloud.is_empty() {
            "none (add [[topics]] scope = \"cloud\")".to_string()
        } else {
            cloud.join(" ")
        }
    );
    if s.connected {
        Ok(())
    } else {
        Err(format!("broker {} not reachable", s.url))
    }
}

#[derive(Subcommand)]
enum ShmCmd {
    /// List ferry's shared-memory files in /dev/shm with their owner and size.
    List,
    /// Remove the files of processes that are gone (ferry also does this at every start).
    Gc,
}

#[derive(Subcommand)]
enum NodeCmd {
    /// List the nodes (hidden ones, such as the CLI's own `/_ferry_cli_<pid>`,
    /// only with --all; `topic info -v` shows every endpoint, as in ROS 2).
    List {
        /// Also the hidden nodes.
        #[arg(short, long)]
        all: bool,
    },
    /// Show a node's publishers, subscribers, services and clients.
    Info {
        /// The node's full name, e.g. `/arm`.
        node: String,
    },
}

#[derive(Subcommand)]
enum ServiceCmd {
    /// List the services.
    List {
        /// Show types.
        #[arg(short = 't', long)]
        show_types: bool,
    },
    /// Call a service: `ferry service call /add example_interfaces/srv/AddTwoInts '{a: 1, b: 2}'`.
    Call {
        /// The service's name, e.g. `/add`.
        service: String,
        /// Its type: any loaded `.srv` (`pkg/srv/Name` or `pkg/Name`).
        service_type: String,
        /// The request as YAML; fields left out take ROS 2's defaults.
        #[arg(default_value = "{}")]
        request: String,
        /// Timeout (s).
        #[arg(long, default_value_t = 5.0)]
        timeout: f64,
    },
}

/// Creates the CLI's own hidden node.
static NODE_NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();

pub fn cli_node() -> Result<ferry::Node, String> {
    let name = NODE_NAME
        .get()
        .cloned()
        .unwrap_or_else(|| format!("_ferry_cli_{}", std::process::id()));
    // In a host leader election (FERRY_HOST_LEADER=on), the CLI only
    // follows: a tool that comes and goes never moves the host's streams.
    let mut cfg = ferry::Config::from_env().map_err(|e| e.to_string())?;
    cfg.host_leader_may_lead = false;
    ferry::Node::builder()
        .name(name)
        .config(cfg)
        .build()
        .map_err(|e| e.to_string())
}

fn run(cli: Cli) -> Result<(), String> {
    // The graph options of the subcommand, else those before it.
    let outer = GraphOpts {
        spin_time: cli.spin_time,
        node_name: cli.node_name.clone(),
    };
    let graph = match &cli.cmd {
        Cmd::Topic { graph, .. }
        | Cmd::Node { graph, .. }
        | Cmd::Service { graph, .. }
        | Cmd::Admin { graph, .. }
        | Cmd::Doctor { graph } => graph.clone().or(&outer),
        _ => outer,
    };
    let spin = Duration::from_millis(graph.spin_time.unwrap_or(400));
    if let Some(n) = graph.node_name {
        let _ = NODE_NAME.set(n);
    }
    match cli.cmd {
        Cmd::Topic { cmd, .. } => topic::run(cmd, spin),
        Cmd::Node {
            cmd: NodeCmd::List { all },
            ..
        } => {
            let node = cli_node()?;
            std::thread::sleep(spin);
            let g = node.graph();
            let dups = g.duplicate_names();
            let names = if all {
                let me = node.participant();
                let mut v: Vec<String> = g
                    .nodes
                    .iter()
                    .filter(|n| n.participant != me)
                    .map(|n| n.name.clone())
                    .collect();
                v.sort();
                v.dedup();
                v
            } else {
                g.node_names()
            };
            // ROS 2 nodes on DDS (`FERRY_ROS2=1`), hidden ones (`_…`) with --all.
            let mut names = names;
            names.extend(
                g.ros2_nodes
                    .iter()
                    .filter(|n| all || !n.name.starts_with('_'))
                    .map(|n| n.fully_qualified_name()),
            );
            names.sort();
            for n in names {
                // Like `ros2 node list`: a shared name is listed once per node.
                let times = dups.iter().find(|(d, _)| *d == n).map_or(1, |(_, c)| *c);
                for _ in 0..times {
                    out!("{n}");
                }
            }
            if !dups.is_empty() {
                eprintln!(
                    "WARNING: nodes share a fully qualified name ({}): services and \
                     parameters addressed by name may reach either",
                    dups.iter()
                        .map(|(n, c)| format!("{n} ×{c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Ok(())
        }
        Cmd::Node {
            cmd: NodeCmd::Info { node: name },
            ..
        } => {
            let node = cli_node()?;
            std::thread::sleep(spin);
            let g = node.graph();
            if !g.node_names().contains(&name) {
                return Err(format!(
                    "node `{name}` not found (is it running, in domain {} — from {}?)",
                    node.domain_id(),
                    ferry::config::domain_source()
                ));
            }
            out!("{name}");
            for (title, kind) in [
                ("Subscribers", ferry::EndpointKind::Subscriber),
                ("Publishers", ferry::EndpointKind::Publisher),
                ("Service Servers", ferry::EndpointKind::Service),
                ("Service Clients", ferry::EndpointKind::Client),
            ] {
                out!("  {title}:");
                for e in g
                    .endpoints_of_node(&name)
                    .filter(|e| e.kind == kind && !e.topic.starts_with(ferry::graph::HIDDEN_PREFIX))
                {
                    out!("    {}: {}", e.topic, e.type_name);
                }
            }
            if let Some(n) = g.nodes.iter().find(|n| n.name == name) {
                out!(
                    "  Process: pid {} participant {} at {}",
                    n.pid,
                    n.participant,
                    n.locators.join(" ")
                );
            }
            Ok(())
        }
        Cmd::Service {
            cmd: ServiceCmd::List { show_types },
            ..
        } => {
            let node = cli_node()?;
            std::thread::sleep(spin);
            for (s, types) in node.graph().services() {
                if show_types {
                    out!("{s} [{}]", types.join(", "));
                } else {
                    out!("{s}");
                }
            }
            Ok(())
        }
        Cmd::Service {
            cmd:
                ServiceCmd::Call {
                    service,
                    service_type,
                    request,
                    timeout,
                },
            ..
        } => {
            let node = cli_node()?;
            out!("requester: making request: {request}");
            match types::call_service(
                &node,
                &service,
                &service_type,
                &request,
                Duration::from_secs_f64(timeout),
            )? {
                types::Answer::Data(d) => out!("response:\n{}", interface::yaml(&d, 0)),
                types::Answer::Json(v) => out!(
                    "response:\n{}",
                    serde_norway::to_string(&v).unwrap_or_default()
                ),
            }
            Ok(())
        }
        Cmd::Admin { args, .. } => admin::run(args, spin),
        Cmd::Demo(args) => demo::run(args),
        Cmd::Tune(args) => tune::run(args),
        Cmd::Interface(cmd) => interface::run(cmd),
        Cmd::Security(cmd) => security::run(cmd),
        Cmd::Shm(ShmCmd::Gc) => {
            let r = ferry_shm::sweep_stale();
            for name in &r.removed {
                out!("removed {name}");
            }
            out!(
                "{} removed, {} in use by running processes",
                r.removed.len(),
                r.kept
            );
            Ok(())
        }
        Cmd::Shm(ShmCmd::List) => {
            let dir = ferry_shm::segment::SHM_DIR;
            let mut rows: Vec<(String, u32, bool, u64)> = std::fs::read_dir(dir)
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| {
                            let name = e.file_name().to_string_lossy().into_owned();
                            let owner = ferry_shm::segment::owner_of(&name)?;
                            let len = e.metadata().map_or(0, |m| m.len());
                            Some((name, owner.pid, owner.alive(), len))
                        })
                        .collect()
                })
                .unwrap_or_default();
            rows.sort();
            let rows = rows
                .into_iter()
                .map(|(name, pid, alive, len)| {
                    vec![
                        name,
                        pid.to_string(),
                        if alive { "yes" } else { "no" }.to_string(),
                        len.to_string(),
                    ]
                })
                .collect();
            out!(
                "{}",
                table::render(&["NAME", "PID", "ALIVE", "BYTES"], rows, &[1, 3])
            );
            Ok(())
        }
        Cmd::DemoRole { role } => demo::role(&role),
        Cmd::Broker(a) => broker(a),
        Cmd::Forwarder(a) => forwarder::run(a),
        Cmd::Doctor { .. } => doctor(spin),
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FERRY_LOG")
                .unwrap_or_else(|_| "warn,rumqttd=off".into()),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal, and never with NO_COLOR set.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry: {e}");
            ExitCode::FAILURE
        }
    }
}
