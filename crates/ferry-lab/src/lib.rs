//! The ferry lab: two "hosts" (network namespaces) joined by a userspace
//! link emulator.
//!
//! This kernel has no `netem`, and a link without delay flatters every ARQ
//! and TCP scheme. So each namespace gets a TUN device, and one process
//! forwards every IP packet between the two through [`SimLink`] — the same
//! impairment model the SimNet tests use, driven by the real clock: rate
//! (FIFO like a `tbf`), propagation delay and jitter, loss in **both**
//! directions, optional reordering, duplication and outage windows. It is
//! transparent to every protocol, so ferry and its peers run over the same
//! link.
//!
//! Pitfall (DESIGN.md): namespaces share `/dev/shm`; [`Lab::command`] runs
//! side B in its own IPC namespace with a private `/dev/shm` when
//! `separate_hosts` is set, so shared memory cannot bypass the link.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub mod forge;

use ferry_testkit::SimLink;
pub use ferry_testkit::{LinkConfig, LinkStats};

/// What can go wrong bringing the lab up.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Not root, or no /dev/net/tun.
    #[error("the lab needs root and /dev/net/tun: {0}")]
    Privilege(String),
    /// A setup command failed.
    #[error("`{cmd}` failed: {stderr}")]
    Command {
        /// The command.
        cmd: String,
        /// What it printed.
        stderr: String,
    },
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was attempted.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// A link like an 802.11ac Wi-Fi hop: 300 Mbit/s, 2 ms ± 1 ms one way, in
/// order, a 50 ms buffer.
pub fn wifi() -> LinkConfig {
    link(
        300_000_000,
        Duration::from_millis(1),
        Duration::from_millis(2),
    )
}

/// A 4G-like link: 50 Mbit/s, 25 ms ± 10 ms one way.
pub fn lte() -> LinkConfig {
    link(
        50_000_000,
        Duration::from_millis(15),
        Duration::from_millis(20),
    )
}

/// No impairment but the emulator's own cost (its ceiling).
pub fn ideal() -> LinkConfig {
    LinkConfig {
        rate: 0,
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        reorder: false,
        mtu: 1500,
        queue: 100_000,
        ..LinkConfig::default()
    }
}

/// A link of `mbps` Mbit/s (0: unlimited) and a mean one-way delay of
/// `delay_ms`, each packet's delay uniform within ±40 % of it, in order,
/// 50 ms of buffer (the issue-20 grid's links).
pub fn custom(mbps: f64, delay_ms: f64) -> LinkConfig {
    let mean = Duration::from_secs_f64(delay_ms.max(0.0) / 1e3);
    link(
        (mbps.max(0.0) * 1e6) as u64,
        mean.mul_f64(0.6),
        mean.mul_f64(0.8),
    )
}

fn link(bits: u64, delay: Duration, jitter: Duration) -> LinkConfig {
    let rate = bits / 8;
    LinkConfig {
        rate,
        delay,
        jitter,
        reorder: false,
        mtu: 1500,
        // 50 ms of buffering at the link rate, in 1500 B packets.
        queue: ((rate as f64 * 0.05) / 1500.0).max(16.0) as usize,
        ..LinkConfig::default()
    }
}

/// Lab settings.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// Namespace name prefix (unique per lab on the machine).
    pub name: String,
    /// Third octet of 10.99.N.1 (side A) / 10.99.N.2 (side B).
    pub subnet: u8,
    /// A → B.
    pub a_to_b: LinkConfig,
    /// B → A.
    pub b_to_a: LinkConfig,
    /// Give side B its own IPC namespace and /dev/shm (two hosts, not one).
    pub separate_hosts: bool,
    /// Join the hosts with the kernel instead of the emulator: a veth pair,
    /// a `tbf` at the link's rate on each side's egress (50 ms of buffer)
    /// and nftables `netdev` ingress rules for the loss. No delay, jitter or
    /// outages: a second, independent link model to check results against.
    pub kernel: bool,
}

impl LabConfig {
    /// The same link both ways.
    pub fn symmetric(name: &str, subnet: u8, link: LinkConfig) -> Self {
        LabConfig {
            name: name.to_string(),
            subnet,
            a_to_b: link.clone(),
            b_to_a: link,
            separate_hosts: true,
            kernel: false,
        }
    }
}

/// Which host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// 10.99.N.1
    A,
    /// 10.99.N.2
    B,
}

/// A running lab; torn down (processes, namespaces, devices) on drop.
pub struct Lab {
    cfg: LabConfig,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    stats: Arc<Mutex<[LinkStats; 2]>>,
    started: Instant,
}

fn run(cmd: &str) -> Result<(), LabError> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map_err(|source| LabError::Io { what: "sh", source })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LabError::Command {
            cmd: cmd.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Opens a TUN device (IP packets, no packet-info header).
fn open_tun(name: &str) -> Result<OwnedFd, LabError> {
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
    // SAFETY: plain open(2) of a device node; the fd is owned below.
    let fd = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(LabError::Privilege(io::Error::last_os_error().to_string()));
    }
    // SAFETY: fd is a fresh, valid descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq {
        name: [0; 16],
        flags: (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short,
        _pad: [0; 22],
    };
    req.name[..name.len().min(15)].copy_from_slice(&name.as_bytes()[..name.len().min(15)]);
    // SAFETY: TUNSETIFF reads an ifreq of the right layout from our stack.
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
        return Err(LabError::Privilege(format!(
            "TUNSETIFF {name}: {}",
            io::Error::last_os_error()
        )));
    }
    Ok(fd)
}

impl Lab {
    /// Namespace of a side.
    pub fn ns(&self, side: Side) -> String {
        match side {
            Side::A => format!("{}a", self.cfg.name),
            Side::B => format!("{}b", self.cfg.name),
        }
    }

    /// Address of a side.
    pub fn addr(&self, side: Side) -> String {
        match side {
            Side::A => format!("10.99.{}.1", self.cfg.subnet),
            Side::B => format!("10.99.{}.2", self.cfg.subnet),
        }
    }

    /// Creates the namespaces and devices and starts forwarding.
    pub fn up(cfg: LabConfig) -> Result<Lab, LabError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(LabError::Privilege("not root".into()));
        }
        let lab = Lab {
            cfg,
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            stats: Arc::default(),
            started: Instant::now(),
        };
        lab.clean_leftovers();
        if lab.cfg.kernel {
            lab.up_kernel()?;
            return Ok(lab);
        }
        let mut lab = lab;
        let (na, nb) = (lab.ns(Side::A), lab.ns(Side::B));
        let (ta, tb) = (format!("{}ta", lab.cfg.name), format!("{}tb", lab.cfg.name));
        let fa = open_tun(&ta)?;
        let fb = open_tun(&tb)?;
        let (aa, ab) = (lab.addr(Side::A), lab.addr(Side::B));
        run(&format!("ip netns add {na} && ip netns add {nb}"))?;
        for (ns, dev, me, peer) in [(&na, &ta, &aa, &ab), (&nb, &tb, &ab, &aa)] {
            run(&format!(
                "ip link set {dev} netns {ns} && ip -n {ns} link set lo up && ip -n {ns} addr add {me} peer {peer} dev {dev} && \
                 ip -n {ns} link set {dev} mtu 1500 multicast on up && ip -n {ns} route add 224.0.0.0/4 dev {dev}"
            ))?;
        }
        // SAFETY: prctl(PR_SET_TIMERSLACK) only affects this thread group's timers.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64) };
        let fa = Arc::new(fa);
        let fb = Arc::new(fb);
        let start = Instant::now();
        lab.started = start;
        for (dir, (from, to, link)) in [
            (fa.clone(), fb.clone(), lab.cfg.a_to_b.clone()),
            (fb, fa, lab.cfg.b_to_a.clone()),
        ]
        .into_iter()
        .enumerate()
        {
            let stop = lab.stop.clone();
            let stats = lab.stats.clone();
            let seed = 0x5eed + dir as u64;
            lab.threads.push(
                std::thread::Builder::new()
                    .name(format!("lab-link-{dir}"))
                    .spawn(move || {
                        forward(
                            &from,
                            &to,
                            SimLink::new(link, seed, start),
                            &stop,
                            &stats,
                            dir,
                        )
                    })
                    .map_err(|source| LabError::Io {
                        what: "spawn",
                        source,
                    })?,
            );
        }
        Ok(lab)
    }

    /// The kernel-side link: veth + `tbf` + nftables loss (see
    /// [`LabConfig::kernel`]).
    fn up_kernel(&self) -> Result<(), LabError> {
        let (na, nb) = (self.ns(Side::A), self.ns(Side::B));
        let (va, vb) = self.kernel_devs();
        run(&format!(
            "ip netns add {na} && ip netns add {nb} && \
             ip link add {va} netns {na} type veth peer name {vb} netns {nb}"
        ))?;
        for (ns, dev, me, link) in [
            (&na, &va, self.addr(Side::A), &self.cfg.a_to_b),
            (&nb, &vb, self.addr(Side::B), &self.cfg.b_to_a),
        ] {
            run(&format!(
                "ip -n {ns} link set lo up && ip -n {ns} addr add {me}/24 dev {dev} && \
                 ip -n {ns} link set {dev} mtu {mtu} multicast on up && ip -n {ns} route add 224.0.0.0/4 dev {dev} && \
                 (ip netns exec {ns} ethtool -K {dev} tso off gso off gro off >/dev/null 2>&1 || true)",
                mtu = link.mtu.clamp(576, 9000)
            ))?;
            if link.rate > 0 {
                // 50 ms of the rate as the queue (like the emulator's presets).
                let limit = (link.rate / 20).max(16 * 1500);
                run(&format!(
                    "tc -n {ns} qdisc add dev {dev} root tbf rate {bits}bit burst 16kb limit {limit}",
                    bits = link.rate * 8
                ))?;
            }
        }
        // Loss of the direction X → Y is dropped at Y's ingress.
        for (ns, dev, link) in [(&nb, &vb, &self.cfg.a_to_b), (&na, &va, &self.cfg.b_to_a)] {
            let per_million = (link.loss.clamp(0.0, 1.0) * 1e6).round() as u64;
            run(&format!(
                "ip netns exec {ns} nft -f - <<'EOF'\ntable netdev lab {{\n counter lost {{ }}\n chain ingress {{ type filter hook ingress device \"{dev}\" priority 0; numgen random mod 1000000 < {per_million} counter name lost drop; }}\n}}\nEOF"
            ))?;
        }
        Ok(())
    }

    /// The veth ends of the kernel-side link (A's, B's).
    fn kernel_devs(&self) -> (String, String) {
        (
            format!("{}va", self.cfg.name),
            format!("{}vb", self.cfg.name),
        )
    }

    /// Counters of the kernel-side link, from the devices, qdiscs and nft.
    fn kernel_stats(&self) -> [LinkStats; 2] {
        let (va, vb) = self.kernel_devs();
        let json = |cmd: &str| -> serde_json::Value {
            Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .output()
                .ok()
                .and_then(|o| serde_json::from_slice(&o.stdout).ok())
                .unwrap_or(serde_json::Value::Null)
        };
        let one = |from: &str, dev_from: &str, to: &str| -> LinkStats {
            let link = json(&format!("ip -n {from} -s -j link show dev {dev_from}"));
            let tx = &link[0]["stats64"]["tx"];
            let qdisc = json(&format!("tc -n {from} -s -j qdisc show dev {dev_from}"));
            let nft = json(&format!(
                "ip netns exec {to} nft -j list counter netdev lab lost"
            ));
            let counter = nft["nftables"]
                .as_array()
                .and_then(|a| a.iter().find_map(|x| x.get("counter")))
                .cloned()
                .unwrap_or_default();
            let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
            // IP bytes, as the emulator counts them (a veth counts the
            // 14 B Ethernet header too).
            let sent = n(&tx["packets"]);
            let sent_bytes = n(&tx["bytes"]).saturating_sub(14 * sent);
            let lost = n(&counter["packets"]);
            // (nft counts netdev bytes from the network header on.)
            let lost_bytes = n(&counter["bytes"]);
            LinkStats {
                sent,
                delivered: sent.saturating_sub(lost),
                lost,
                queue_drops: n(&qdisc[0]["drops"]),
                bytes: sent_bytes.saturating_sub(lost_bytes),
                sent_bytes,
                ..LinkStats::default()
            }
        };
        let (na, nb) = (self.ns(Side::A), self.ns(Side::B));
        [one(&na, &va, &nb), one(&nb, &vb, &na)]
    }

    fn clean_leftovers(&self) {
        for side in [Side::A, Side::B] {
            let ns = self.ns(side);
            let _ = run(&format!("ip netns pids {ns} 2>/dev/null | xargs -r kill -9; ip netns del {ns} 2>/dev/null; true"));
        }
    }

    /// A command running in one side's namespace (side B with a private IPC
    /// namespace and /dev/shm when `separate_hosts`).
    pub fn command(&self, side: Side, shell: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(side)]);
        if side == Side::B && self.cfg.separate_hosts {
            c.args([
                "unshare",
                "--ipc",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
            ]);
            c.arg(format!(
                "mount -t tmpfs -o size=512m tmpfs /dev/shm && exec sh -c '{}'",
                shell.replace('\'', r"'\''")
            ));
        } else {
            c.args(["sh", "-c", shell]);
        }
        c
    }

    /// Counters: [A → B, B → A].
    pub fn stats(&self) -> [LinkStats; 2] {
        if self.cfg.kernel {
            return self.kernel_stats();
        }
        *self.stats.lock().expect("stats lock")
    }

    /// Time since the link started (outage windows count from it).
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.clean_leftovers();
    }
}

/// Forwards packets from `from` to `to` through `link` until stopped.
fn forward(
    from: &OwnedFd,
    to: &OwnedFd,
    mut link: SimLink,
    stop: &AtomicBool,
    stats: &Mutex<[LinkStats; 2]>,
    dir: usize,
) {
    let mut buf = vec![0u8; 65536];
    let mut last_publish = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        while let Some(p) = link.recv(now) {
            // SAFETY: writing an initialised buffer to our own fd.
            unsafe { libc::write(to.as_raw_fd(), p.as_ptr().cast(), p.len()) };
        }
        let wait = link
            .next_arrival()
            .map_or(Duration::from_millis(10), |t| {
                t.saturating_duration_since(Instant::now())
            })
            .min(Duration::from_millis(10));
        let mut pfd = libc::pollfd {
            fd: from.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one valid pollfd and a valid timespec on our stack.
        unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        loop {
            // SAFETY: reading into our own buffer of the given length.
            let n = unsafe { libc::read(from.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            link.send(Instant::now(), buf[..n as usize].to_vec());
        }
        if last_publish.elapsed() >= Duration::from_millis(100) {
            last_publish = Instant::now();
            stats.lock().expect("stats lock")[dir] = link.stats();
        }
    }
    stats.lock().expect("stats lock")[dir] = link.stats();
}
