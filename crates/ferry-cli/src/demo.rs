//! `ferry demo`: a small robot system in several processes, with a live
//! table of topics, the path each connection took, rates and latencies.
//!
//! Processes (all children of `ferry demo`, in their own domain):
//! - `sensor`:     node `/camera` publishes `/camera/image` (640×480 rgb8, 15 Hz)
//! - `controller`: node `/controller` subscribes to the image, publishes
//!   `/cmd_vel` (20 Hz) and calls `/arm/plan` once a second; node `/safety`
//!   in the same process subscribes to `/cmd_vel` (the in-process path)
//! - `arm`:        node `/arm` serves `/arm/plan`, publishes `/arm/joint_states` (50 Hz)
//! - `listener`:   node `/listener` subscribes to `/cmd_vel` and `/arm/joint_states`

use std::io::Write;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::msgs::{
    builtin_interfaces::Time, example_interfaces::srv::*, geometry_msgs, sensor_msgs, std_msgs,
};
use ferry::{Node, Qos};

/// Options of `ferry demo`.
#[derive(clap::Args)]
pub struct DemoArgs {
    /// Stop after this many seconds (0: run until Ctrl-C).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Discovery domain for the demo's processes.
    #[arg(long, default_value_t = 42)]
    domain: u16,
}

const ROLES: [&str; 4] = ["sensor", "controller", "arm", "listener"];

fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let _ = ctrlc::set_handler(move || s2.store(true, Ordering::SeqCst));
    stop
}

fn stamp() -> Time {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Time {
        sec: d.as_secs() as i32,
        nanosec: d.subsec_nanos(),
    }
}

fn kill_all(children: &mut [Child]) {
    for c in children.iter() {
        // SAFETY: plain kill(2) of a child we started and still own.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    }
    let end = Instant::now() + Duration::from_secs(3);
    for c in children.iter_mut() {
        while Instant::now() < end {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(None) = c.try_wait() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn run(args: DemoArgs) -> Result<(), String> {
    std::env::set_var("FERRY_DOMAIN_ID", args.domain.to_string());
    let exe = std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}"))?;
    let mut children = Vec::new();
    for r in ROLES {
        match Command::new(&exe)
            .args(["demo-role", r])
            .env("FERRY_DOMAIN_ID", args.domain.to_string())
            .spawn()
        {
            Ok(c) => children.push(c),
            Err(e) => {
                kill_all(&mut children);
                return Err(format!("cannot start demo process `{r}`: {e}"));
            }
        }
    }
    let stop = stop_flag();
    let node = Node::builder()
        .name("_ferry_demo_monitor")
        .build()
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let end = (args.duration > 0.0).then(|| start + Duration::from_secs_f64(args.duration));
    let tty = unsafe { libc::isatty(1) } == 1;
    let demo_nodes = ["/camera", "/controller", "/safety", "/arm", "/listener"];
    let mut failed = None;
    while !stop.load(Ordering::SeqCst) && end.is_none_or(|e| Instant::now() < e) {
        std::thread::sleep(Duration::from_millis(1000));
        for (i, c) in children.iter_mut().enumerate() {
            if let Ok(Some(st)) = c.try_wait() {
                failed = Some(format!("demo process `{}` exited early: {st}", ROLES[i]));
            }
        }
        if failed.is_some() {
            break;
        }
        let g = node.graph();
        let nodes: Vec<String> = demo_nodes
            .iter()
            .map(|s| s.to_string())
            .filter(|n| g.node_names().contains(n))
            .collect();
        let conns = crate::topic::connections_of(&node, &nodes);
        let name_of = |id: &ferry::EndpointId| {
            g.endpoints
                .iter()
                .find(|e| e.id == *id)
                .map(|e| e.node.clone())
                .unwrap_or_else(|| "?".into())
        };
        let mut rows: Vec<_> = conns
            .iter()
            .filter(|c| c.side == ferry::stats::Side::Reader && !c.topic.starts_with("/_ferry"))
            .collect();
        rows.sort_by(|a, b| a.topic.cmp(&b.topic).then(a.local.cmp(&b.local)));
        let mut out = String::new();
        if tty {
            out.push_str("\x1b[2J\x1b[H");
        }
        out.push_str(&format!(
            "ferry demo — domain {}, {} processes ({} robot parts and this view), t = {:.0} s (Ctrl-C to stop)\n",
            args.domain,
            children.len() + 1,
            children.len(),
            start.elapsed().as_secs_f64()
        ));
        let rows = rows
            .into_iter()
            .map(|c| {
                let lat = c
                    .stats
                    .latency_avg_us
                    .map(|l| format!("{l:.0}"))
                    .unwrap_or_else(|| "-".into());
                let bw = match c.stats.bytes_per_sec {
                    b if b >= 1e6 => format!("{:.1} MB/s", b / 1e6),
                    b if b > 0.0 => format!("{:.1} KB/s", b / 1e3),
                    _ => "-".into(),
                };
                vec![
                    c.topic.clone(),
                    name_of(&c.remote),
                    name_of(&c.local),
                    c.transport.to_string(),
                    format!("{:.1}", c.stats.rate_hz),
                    lat,
                    bw,
                    c.stats.messages.to_string(),
                ]
            })
            .collect();
        out.push_str(&crate::table::render(
            &[
                "TOPIC",
                "FROM",
                "TO",
                "PATH",
                "RATE Hz",
                "LATENCY µs",
                "THROUGHPUT",
                "MSGS",
            ],
            rows,
            &[4, 5, 6, 7],
        ));
        out.push('\n');
        print!("{out}");
        let _ = std::io::stdout().flush();
    }
    kill_all(&mut children);
    out!(
        "ferry demo: stopped; {} processes cleaned up",
        children.len()
    );
    match failed {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// Runs one demo process until SIGTERM/SIGINT, or until its parent dies.
pub fn role(role: &str) -> Result<(), String> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a signal for this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    let stop = stop_flag();
    let e = |e: ferry::BuildError| e.to_string();
    let every = |hz: f64, mut f: Box<dyn FnMut()>| {
        let period = Duration::from_secs_f64(1.0 / hz);
        let mut next = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            f();
            next += period;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now;
            }
        }
    };
    match role {
        "sensor" => {
            let n = Node::builder().name("camera").build().map_err(e)?;
            let p = n
                .publisher::<sensor_msgs::Image>("/camera/image")
                .qos(Qos::sensor_data())
                .build()
                .map_err(e)?;
            let mut img = sensor_msgs::Image {
                height: 480,
                width: 640,
                encoding: "rgb8".into(),
                step: 640 * 3,
                data: vec![0; 640 * 480 * 3],
                ..Default::default()
            };
            let mut i = 0u8;
            every(
                15.0,
                Box::new(move || {
                    i = i.wrapping_add(1);
                    img.data[0] = i;
                    img.header.stamp = stamp();
                    let _ = p.publish(img.clone());
                }),
            );
        }
        "controller" => {
            let n = Node::builder().name("controller").build().map_err(e)?;
            let safety = Node::builder().name("safety").build().map_err(e)?;
            let _img = n
                .subscriber::<sensor_msgs::Image>("/camera/image")
                .qos(Qos::sensor_data())
                .callback(|_| {})
                .build()
                .map_err(e)?;
            let p = n
                .publisher::<geometry_msgs::Twist>("/cmd_vel")
                .build()
                .map_err(e)?;
            let _watch = safety
                .subscriber::<geometry_msgs::Twist>("/cmd_vel")
                .callback(|_| {})
                .build()
                .map_err(e)?;
            let client = n
                .client::<AddTwoIntsRequest, AddTwoIntsResponse>("/arm/plan")
                .build()
                .map_err(e)?;
            let status = n
                .publisher::<std_msgs::String>("/status")
                .qos(Qos::latched())
                .build()
                .map_err(e)?;
            let _ = status.publish(std_msgs::String {
                data: "controller up".into(),
            });
            let mut k = 0i64;
            every(
                20.0,
                Box::new(move || {
                    k += 1;
                    let _ = p.publish(geometry_msgs::Twist {
                        linear: geometry_msgs::Vector3 {
                            x: 0.5,
                            y: 0.0,
                            z: 0.0,
                        },
                        ..Default::default()
                    });
                    if k % 20 == 0 && client.service_is_ready() {
                        let _ = client
                            .call(AddTwoIntsRequest { a: k, b: 1 }, Duration::from_millis(500));
                    }
                }),
            );
        }
        "arm" => {
            let n = Node::builder().name("arm").build().map_err(e)?;
            let _srv = n
                .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/arm/plan", |r| {
                    AddTwoIntsResponse { sum: r.a + r.b }
                })
                .build()
                .map_err(e)?;
            let p = n
                .publisher::<sensor_msgs::JointState>("/arm/joint_states")
                .build()
                .map_err(e)?;
            let names: Vec<String> = (1..=6).map(|j| format!("joint{j}")).collect();
            let mut t = 0.0f64;
            every(
                50.0,
                Box::new(move || {
                    t += 0.02;
                    let pos: Vec<f64> = (0..6).map(|j| (t + j as f64).sin()).collect();
                    let _ = p.publish(sensor_msgs::JointState {
                        name: names.clone(),
                        position: pos,
                        ..Default::default()
                    });
                }),
            );
        }
        "listener" => {
            let n = Node::builder().name("listener").build().map_err(e)?;
            let _a = n
                .subscriber::<geometry_msgs::Twist>("/cmd_vel")
                .callback(|_| {})
                .build()
                .map_err(e)?;
            let _b = n
                .subscriber::<sensor_msgs::JointState>("/arm/joint_states")
                .callback(|_| {})
                .build()
                .map_err(e)?;
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        "slow_service" => {
            // Used by the tests: a service that takes 10 s to answer.
            let n = Node::builder().name("slow").build().map_err(e)?;
            let _srv = n
                .service::<AddTwoIntsRequest, AddTwoIntsResponse, _>("/slow", |r| {
                    std::thread::sleep(Duration::from_secs(10));
                    AddTwoIntsResponse { sum: r.a + r.b }
                })
                .build()
                .map_err(e)?;
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        other => return Err(format!("unknown demo role `{other}`")),
    }
    Ok(())
}
