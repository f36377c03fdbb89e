//! `ferry topic …`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Subcommand;
use ferry::graph::Graph;
use ferry::{EndpointKind, Node, Qos, RawBytes};

use crate::types;

/// QoS flags shaped like `ros2 topic pub/echo`'s: a profile, then
/// single policies over it.
#[derive(clap::Args, Clone, Debug)]
pub struct QosArgs {
    /// QoS profile to start from: default, sensor_data, services_default,
    /// latched.
    #[arg(long = "qos-profile", alias = "qos", value_name = "PROFILE")]
    profile: Option<String>,
    /// Reliability: reliable or best_effort.
    #[arg(long = "qos-reliability", value_name = "POLICY")]
    reliability: Option<String>,
    /// Durability: volatile or transient_local.
    #[arg(long = "qos-durability", value_name = "POLICY")]
    durability: Option<String>,
    /// History: keep_last or keep_all.
    #[arg(long = "qos-history", value_name = "POLICY")]
    history: Option<String>,
    /// Depth of a keep_last history.
    #[arg(long = "qos-depth", value_name = "N")]
    depth: Option<u32>,
}

impl QosArgs {
    /// The QoS: `base` (or the named profile) with the given policies over
    /// it; an unknown value names the ones there are.
    pub fn resolve(&self, base: Qos) -> Result<Qos, String> {
        let mut q = match &self.profile {
            None => base,
            Some(p) => Qos::profile(p).ok_or_else(|| {
                format!(
                    "unknown QoS profile `{p}` (profiles: default, sensor_data, services_default, latched)"
                )
            })?,
        };
        q = match self.reliability.as_deref() {
            None => q,
            Some("reliable") => q.reliable(),
            Some("best_effort") => q.best_effort(),
            Some(o) => {
                return Err(format!(
                    "unknown --qos-reliability `{o}` (reliable, best_effort)"
                ))
            }
        };
        q = match self.durability.as_deref() {
            None => q,
            Some("volatile") => q.volatile(),
            Some("transient_local") => q.transient_local(),
            Some(o) => {
                return Err(format!(
                    "unknown --qos-durability `{o}` (volatile, transient_local)"
                ))
            }
        };
        q = match (self.history.as_deref(), self.depth) {
            (None | Some("keep_last"), Some(n)) => q.keep_last(n),
            (Some("keep_last"), None) => match q.history {
                ferry::History::KeepLast(_) => q,
                ferry::History::KeepAll => q.keep_last(10),
            },
            (Some("keep_all"), None) => q.keep_all(),
            (Some("keep_all"), Some(_)) => {
                return Err("--qos-depth applies to --qos-history keep_last only".into())
            }
            (None, None) => q,
            (Some(o), _) => {
                return Err(format!("unknown --qos-history `{o}` (keep_last, keep_all)"))
            }
        };
        Ok(q)
    }
}

#[derive(Subcommand)]
pub enum TopicCmd {
    /// List the topics.
    List {
        /// Show types.
        #[arg(short = 't', long)]
        show_types: bool,
        /// Show publisher and subscriber counts.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Show a topic's type, endpoints and (with -v) connections and paths.
    Info {
        /// The topic, e.g. `/chatter`.
        topic: String,
        /// Endpoints with their nodes, types, hashes and QoS, and the
        /// connections with their paths.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Print a topic's type.
    Type {
        /// The topic, e.g. `/chatter`.
        topic: String,
    },
    /// List the topics of a type: `ferry topic find std_msgs/msg/String`.
    Find {
        /// The type, e.g. `std_msgs/msg/String` (or `std_msgs/String`).
        msg_type: String,
    },
    /// Print the samples of a topic.
    Echo {
        /// The topic, e.g. `/chatter`.
        topic: String,
        /// Its type, e.g. `std_msgs/msg/String` (default: its publishers'
        /// as discovery says; give it to subscribe before any publisher is
        /// seen, e.g. over Zenoh).
        msg_type: Option<String>,
        /// Print one sample and exit.
        #[arg(long)]
        once: bool,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// Also print each sample's info: the publisher's sequence number,
        /// source time, publisher and the path it came over (JSON: the
        /// object `{"info": …, "message": …}`).
        #[arg(short = 'i', long)]
        include_message_info: bool,
        /// Stop after this many samples.
        #[arg(long)]
        count: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long)]
        timeout: Option<f64>,
        #[command(flatten)]
        qos: QosArgs,
    },
    /// Print a topic's publish rate.
    Hz {
        /// The topic, e.g. `/chatter`.
        topic: String,
        /// Stop after this many seconds.
        #[arg(long)]
        timeout: Option<f64>,
        /// Statistics over the last N messages.
        #[arg(short, long, default_value_t = 10_000)]
        window: usize,
    },
    /// Print a topic's bandwidth.
    Bw {
        /// The topic, e.g. `/chatter`.
        topic: String,
        /// Stop after this many seconds.
        #[arg(long)]
        timeout: Option<f64>,
        /// Statistics over the last N messages.
        #[arg(short, long, default_value_t = 100)]
        window: usize,
    },
    /// Publish: `ferry topic pub /chatter std_msgs/msg/String 'data: hi'`.
    Pub {
        /// The topic, e.g. `/chatter`.
        topic: String,
        /// Its type: any loaded message (`pkg/msg/Type` or `pkg/Type`).
        msg_type: String,
        /// The message as YAML; fields left out take ROS 2's defaults.
        #[arg(default_value = "{}")]
        values: String,
        /// Rate (Hz).
        #[arg(short, long, default_value_t = 1.0)]
        rate: f64,
        /// Publish once and exit.
        #[arg(long)]
        once: bool,
        /// Publish this many times and exit.
        #[arg(short, long)]
        times: Option<u64>,
        #[command(flatten)]
        qos: QosArgs,
        /// Liveliness lease (ms): subscribers notice this publisher's death
        /// within it.
        #[arg(long)]
        liveliness_ms: Option<u64>,
        /// Packet class of its connections: low, normal, high, critical, dscp:N.
        #[arg(long)]
        priority: Option<String>,
        /// Dedicated sender thread per connection: fifo:N, rr:N, nice:N.
        #[arg(long)]
        sched: Option<String>,
    },
}

fn stop_flag(timeout: Option<f64>) -> (Arc<AtomicBool>, Option<Instant>) {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let _ = ctrlc::set_handler(move || s2.store(true, Ordering::SeqCst));
    (
        stop,
        timeout.map(|t| Instant::now() + Duration::from_secs_f64(t)),
    )
}

fn expired(stop: &AtomicBool, end: Option<Instant>) -> bool {
    stop.load(Ordering::SeqCst) || end.is_some_and(|e| Instant::now() >= e)
}

/// Type name of a topic, from its publishers (or subscribers).
fn topic_type(g: &Graph, topic: &str) -> Option<String> {
    let mut eps: Vec<_> = g
        .endpoints_of(topic)
        .filter(|e| e.type_name != "*")
        .collect();
    eps.sort_by_key(|e| e.kind != EndpointKind::Publisher);
    eps.first().map(|e| e.type_name.clone())
}

/// A raw subscriber of `topic` that announces the type of the topic's
/// publishers when discovery named it (so `node info` shows the type, not
/// `*`), else any type.
/// A sample's info as `topic echo -i` prints it.
fn info_json(i: &ferry::SampleInfo) -> serde_json::Value {
    serde_json::json!({
        "seq": i.seq,
        "source_time_ns": i.source_time_ns,
        "publisher": i.publisher.to_string(),
        "transport": i.transport.as_str(),
    })
}

/// The JSON line of `topic echo --json`: the message, or with `-i` the
/// message and its info.
fn with_info(include: bool, i: &ferry::SampleInfo, message: serde_json::Value) -> String {
    let v = if include {
        serde_json::json!({ "info": info_json(i), "message": message })
    } else {
        message
    };
    serde_json::to_string(&v).unwrap_or_default()
}

/// The info block `topic echo -i` prints before a message (YAML).
fn info_yaml(i: &ferry::SampleInfo) -> String {
    format!(
        "info:\n  seq: {}\n  source_time_ns: {}\n  publisher: {}\n  transport: {}",
        i.seq,
        i.source_time_ns,
        i.publisher,
        i.transport.as_str()
    )
}

fn raw_subscriber(
    node: &Node,
    topic: &str,
    qos: Qos,
) -> Result<ferry::Subscriber<RawBytes>, String> {
    let g = node.graph();
    let publisher = g
        .endpoints_of(topic)
        .find(|e| e.kind == EndpointKind::Publisher && e.type_name != "*");
    let mut b = node.subscriber::<RawBytes>(topic).qos(qos);
    if let Some(p) = publisher {
        b = b.type_info(&p.type_name, p.type_hash);
    }
    b.build().map_err(|e| e.to_string())
}

fn node_of(g: &Graph, id: &ferry::EndpointId) -> String {
    g.endpoints
        .iter()
        .find(|e| e.id == *id)
        .map(|e| e.node.clone())
        .unwrap_or_else(|| id.to_string())
}

/// A connection's path for people: its transport, or `forwarded via
/// <host leader>`.
pub fn path_of(c: &ferry::ConnectionInfo) -> String {
    if c.via.is_empty() {
        c.transport.to_string()
    } else {
        format!("forwarded via {}", c.via)
    }
}

/// Connections of `nodes`, asked through their admin services.
pub fn connections_of(node: &Node, nodes: &[String]) -> Vec<ferry::ConnectionInfo> {
    let mut out = Vec::new();
    for n in nodes {
        let Ok(c) = node
            .client::<ferry::admin::AdminRequest, ferry::admin::AdminReply>(
                &ferry::admin::service_name(n),
            )
            .build()
        else {
            continue;
        };
        // The connection may still be on its way (a lost SYN on a lossy link).
        c.wait_for_service(Duration::from_secs(3));
        if let Ok(r) = c.call(
            ferry::admin::AdminRequest::connections(),
            Duration::from_secs(2),
        ) {
            out.extend(ferry::admin::parse_connections(&r).unwrap_or_default());
        }
    }
    out
}

fn describe_qos(q: &Qos) -> String {
    format!(
        "{:?}, {:?}, {:?}{}",
        q.reliability,
        q.history,
        q.durability,
        q.transport
            .map(|t| format!(", pinned to {t}"))
            .unwrap_or_default()
    )
}

pub fn run(cmd: TopicCmd, spin: Duration) -> Result<(), String> {
    let node = crate::cli_node()?;
    // This process's own endpoints (echo's subscriber) are not shown.
    let me = node.participant();
    std::thread::sleep(spin);
    match cmd {
        TopicCmd::List {
            show_types,
            verbose,
        } => {
            let g = node.graph();
            for (t, ty) in g.topics() {
                // Ferry's endpoints (not this command's own) and ROS 2's on DDS.
                let count = |kind| {
                    g.endpoints_of(&t)
                        .filter(|e| e.kind == kind && e.id.participant != me)
                        .count()
                        + g.ros2_endpoints
                            .iter()
                            .filter(|e| e.kind == kind && e.name == t)
                            .count()
                };
                let (pubs, subs) = (
                    count(EndpointKind::Publisher),
                    count(EndpointKind::Subscriber),
                );
                if pubs + subs == 0 {
                    continue;
                }
                let mut line = t.clone();
                if show_types || verbose {
                    line.push_str(&format!(" [{}]", ty.join(", ")));
                }
                if verbose {
                    line.push_str(&format!(" {pubs} publisher(s), {subs} subscriber(s)"));
                }
                out!("{line}");
            }
            Ok(())
        }
        TopicCmd::Info { topic, verbose } => {
            let g = node.graph();
            let eps: Vec<_> = g
                .endpoints_of(&topic)
                .filter(|e| e.id.participant != me)
                .collect();
            // ROS 2's publishers and subscriptions on DDS (FERRY_ROS2=1);
            // its services and clients of the same name are not the topic.
            let ros2: Vec<_> = g
                .ros2_endpoints
                .iter()
                .filter(|e| {
                    e.name == topic
                        && matches!(e.kind, EndpointKind::Publisher | EndpointKind::Subscriber)
                })
                .collect();
            if eps.is_empty() && ros2.is_empty() {
                return Err(format!("unknown topic `{topic}`"));
            }
            out!(
                "Type: {}",
                topic_type(&g, &topic)
                    .or_else(|| ros2.first().map(|e| e.type_name.clone()))
                    .unwrap_or_else(|| "(raw bytes)".into())
            );
            for kind in [EndpointKind::Publisher, EndpointKind::Subscriber] {
                let list: Vec<_> = eps.iter().filter(|e| e.kind == kind).collect();
                let theirs: Vec<_> = ros2.iter().filter(|e| e.kind == kind).collect();
                out!("{:?} count: {}", kind, list.len() + theirs.len());
                if verbose {
                    for e in list {
                        out!(
                            "  node {}  id {}  type {} ({})  QoS: {}",
                            e.node,
                            e.id,
                            e.type_name,
                            e.type_hash,
                            describe_qos(&e.qos)
                        );
                    }
                    for e in theirs {
                        out!(
                            "  node {}  {}  type {}",
                            e.node,
                            if e.via == ferry::TransportKind::Zenoh {
                                "over Zenoh"
                            } else {
                                "ROS 2 node over DDS"
                            },
                            e.type_name
                        );
                    }
                }
            }
            if verbose {
                let mut nodes: Vec<String> = eps
                    .iter()
                    .filter(|e| e.kind == EndpointKind::Publisher)
                    .map(|e| e.node.clone())
                    .collect();
                nodes.sort();
                nodes.dedup();
                out!("Connections:");
                for c in connections_of(&node, &nodes)
                    .into_iter()
                    .filter(|c| c.topic == topic)
                {
                    out!(
                        "  {} -> {}  path {}{}  {}  protection {}  {} msgs, {:.1} Hz",
                        node_of(&g, &c.local),
                        node_of(&g, &c.remote),
                        path_of(&c),
                        if c.note.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", c.note)
                        },
                        if c.locator.is_empty() {
                            "(in process)".to_string()
                        } else {
                            c.locator.clone()
                        },
                        if c.protection.is_empty() {
                            "-"
                        } else {
                            &c.protection
                        },
                        c.stats.messages,
                        c.stats.rate_hz
                    );
                }
            }
            Ok(())
        }
        TopicCmd::Type { topic } => {
            let g = node.graph();
            let t = topic_type(&g, &topic).ok_or_else(|| {
                format!("unknown topic `{topic}` (or no endpoint has announced a type)")
            })?;
            out!("{t}");
            Ok(())
        }
        TopicCmd::Find { msg_type } => {
            let full = types::find(&msg_type).map_or(msg_type, |t| t.name);
            let g = node.graph();
            for (t, tys) in g.topics() {
                if tys.contains(&full) {
                    out!("{t}");
                }
            }
            Ok(())
        }
        TopicCmd::Echo {
            topic,
            msg_type,
            once,
            json,
            include_message_info,
            count,
            timeout,
            qos,
        } => {
            let q = qos.resolve(Qos::sensor_data().keep_last(100))?;
            let (stop, end) = stop_flag(timeout);
            let mut ty: Option<types::KnownType> = match msg_type {
                Some(name) => Some(
                    types::find(&name).ok_or_else(|| format!("unknown message type `{name}`"))?,
                ),
                None => None,
            };
            let sub = match &ty {
                Some(t) => node
                    .subscriber::<RawBytes>(&topic)
                    .qos(q)
                    .type_info(&t.name, t.hash)
                    .build()
                    .map_err(|e| e.to_string())?,
                None => raw_subscriber(&node, &topic, q)?,
            };
            let mut asked = false;
            let limit = if once { Some(1) } else { count };
            let mut n = 0u64;
            while !expired(&stop, end) && limit.is_none_or(|l| n < l) {
                let Ok(s) = sub.recv_timeout(Duration::from_millis(100)) else {
                    continue;
                };
                // Data can outrun discovery: on the first sample, give it a
                // moment to name the type; later, just look again.
                let wait = if n == 0 {
                    Duration::from_millis(300)
                } else {
                    Duration::ZERO
                };
                let t = Instant::now();
                while ty.is_none() {
                    let name = topic_type(&node.graph(), &topic);
                    ty = name.as_deref().and_then(types::find);
                    if ty.is_none() && name.is_some() && !asked {
                        // No files for it here: ask its publisher.
                        asked = true;
                        ty = types::learn(&node, &topic);
                    }
                    if ty.is_some() || t.elapsed() >= wait {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let decoded = ty.as_ref().map(|t| t.decode(&s));
                let i = &s.info;
                match decoded {
                    Some(Ok(v)) if json => {
                        let m = types::to_json(&v);
                        out!("{}", with_info(include_message_info, i, m))
                    }
                    Some(Ok(v)) => {
                        if include_message_info {
                            out!("{}", info_yaml(i));
                        }
                        out!("{}---", crate::interface::yaml(&v, 0))
                    }
                    _ if json => {
                        let m = serde_json::json!({ "hex": s.iter().map(|b| format!("{b:02x}")).collect::<String>() });
                        out!("{}", with_info(include_message_info, i, m))
                    }
                    _ => {
                        if include_message_info {
                            out!("{}", info_yaml(i));
                        }
                        out!("{}---", types::hex(&s))
                    }
                }
                n += 1;
            }
            Ok(())
        }
        TopicCmd::Hz {
            topic,
            timeout,
            window,
        } => rate(&node, &topic, timeout, window, false),
        TopicCmd::Bw {
            topic,
            timeout,
            window,
        } => rate(&node, &topic, timeout, window, true),
        TopicCmd::Pub {
            topic,
            msg_type,
            values,
            rate,
            once,
            times,
            qos,
            liveliness_ms,
            priority,
            sched,
        } => {
            let t = types::find(&msg_type).ok_or_else(|| {
                format!(
                    "unknown message type `{msg_type}` (see `ferry interface list`; add your packages to FERRY_INTERFACE_PATH)"
                )
            })?;
            let bytes = t.encode(&values)?;
            // Subscribers of another type never match: say so rather than
            // publish into the void.
            let g = node.graph();
            let others: Vec<String> = g
                .endpoints_of(&topic)
                .filter(|e| {
                    e.kind == EndpointKind::Subscriber
                        && e.id.participant != me
                        && e.type_name != "*"
                        && (e.type_name != t.name || e.type_hash != t.hash)
                })
                .map(|e| format!("{} ({} {})", e.node, e.type_name, e.type_hash))
                .collect();
            if !others.is_empty() {
                eprintln!(
                    "ferry: WARNING: subscribers of {topic} expect another type and will not receive {} ({}): {}",
                    t.name,
                    t.hash,
                    others.join(", ")
                );
            }
            let q = qos.resolve(Qos::default_profile())?;
            let q = match liveliness_ms {
                Some(ms) => q.liveliness_lease(Duration::from_millis(ms)),
                None => q,
            };
            let mut b = node
                .publisher::<RawBytes>(&topic)
                .qos(q)
                .type_info(&t.name, t.hash);
            if priority.is_some() || sched.is_some() {
                let class = match priority {
                    Some(c) => c.parse::<ferry::PacketClass>().map_err(|e| e.to_string())?,
                    None => ferry::PacketClass::Normal,
                };
                let thread = sched
                    .map(|s| s.parse::<ferry::ThreadPolicy>().map_err(|e| e.to_string()))
                    .transpose()?;
                b = b.priority(ferry::Priority { class, thread });
            }
            let p = b.build().map_err(|e| e.to_string())?;
            let (stop, _) = stop_flag(None);
            p.wait_for_subscribers(1, Duration::from_secs(1));
            let limit = if once { Some(1) } else { times };
            let period = Duration::from_secs_f64(1.0 / rate.max(0.001));
            let mut n = 0u64;
            let mut next = Instant::now();
            while !stop.load(Ordering::SeqCst) && limit.is_none_or(|l| n < l) {
                p.publish(RawBytes::new(bytes.clone()))
                    .map_err(|e| e.to_string())?;
                n += 1;
                out!("publishing #{n}: {values}");
                next += period;
                while Instant::now() < next && !stop.load(Ordering::SeqCst) {
                    std::thread::sleep((next - Instant::now()).min(Duration::from_millis(50)));
                }
            }
            // Let the last sample leave before the connection closes.
            std::thread::sleep(Duration::from_millis(200));
            Ok(())
        }
    }
}

/// `n` bytes with a unit that scales (B, KB, MB, GB; powers of 1000).
fn scaled(n: f64) -> String {
    let (v, unit) = match n {
        n if n >= 1e9 => (n / 1e9, "GB"),
        n if n >= 1e6 => (n / 1e6, "MB"),
        n if n >= 1e3 => (n / 1e3, "KB"),
        n => return format!("{n:.0} B"),
    };
    format!("{v:.2} {unit}")
}

fn rate(
    node: &Node,
    topic: &str,
    timeout: Option<f64>,
    window: usize,
    bw: bool,
) -> Result<(), String> {
    let window = window.max(2);
    let (stop, end) = stop_flag(timeout);
    let sub = raw_subscriber(node, topic, Qos::sensor_data().keep_last(1000))?;
    let mut stamps: std::collections::VecDeque<(Instant, usize)> = Default::default();
    let mut last_print = Instant::now();
    while !expired(&stop, end) {
        if let Ok(s) = sub.recv_timeout(Duration::from_millis(50)) {
            stamps.push_back((Instant::now(), s.len()));
            while stamps.len() > window {
                stamps.pop_front();
            }
        }
        if last_print.elapsed() >= Duration::from_secs(1) {
            last_print = Instant::now();
            if stamps.len() < 2 {
                out!("no new messages");
                continue;
            }
            let span = stamps
                .back()
                .unwrap()
                .0
                .duration_since(stamps.front().unwrap().0)
                .as_secs_f64();
            if bw {
                let bytes: usize = stamps.iter().map(|s| s.1).sum();
                let min = stamps.iter().map(|s| s.1).min().unwrap_or(0);
                let max = stamps.iter().map(|s| s.1).max().unwrap_or(0);
                out!(
                    "{}/s from {} messages\n\tMessage size mean: {} min: {} max: {}",
                    scaled(bytes as f64 / span),
                    stamps.len(),
                    scaled(bytes as f64 / stamps.len() as f64),
                    scaled(min as f64),
                    scaled(max as f64)
                );
            } else {
                let gaps: Vec<f64> = stamps
                    .iter()
                    .zip(stamps.iter().skip(1))
                    .map(|(a, b)| b.0.duration_since(a.0).as_secs_f64())
                    .collect();
                let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
                let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64)
                    .sqrt();
                let min = gaps.iter().cloned().fold(f64::MAX, f64::min);
                let max = gaps.iter().cloned().fold(0.0, f64::max);
                out!("average rate: {:.3}\n\tmin: {min:.3}s max: {max:.3}s std dev: {sd:.5}s window: {}", 1.0 / mean, stamps.len());
            }
        }
    }
    Ok(())
}
