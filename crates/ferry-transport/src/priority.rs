//! Channel priority of one connection (seed 002, YARP): a packet class —
//! DSCP in the IP TOS byte plus the socket priority that picks the Linux
//! `pfifo_fast` band — and, optionally, the scheduling policy of a thread
//! that serves the connection.
//!
//! | class    | DSCP      | TOS byte | socket priority | pfifo_fast band |
//! |----------|-----------|----------|-----------------|-----------------|
//! | Low      | AF11 (10) | 0x28     | 2 (bulk)        | 2               |
//! | Normal   | 0         | 0x00     | 0 (best effort) | 1               |
//! | High     | AF42 (36) | 0x90     | 6 (interactive) | 0               |
//! | Critical | VA (44)   | 0xb0     | 6 (interactive) | 0               |
//!
//! A raw DSCP value gets its band from its class selector (the top three
//! bits), consistent with the table: CS1 (8–15, e.g. AF11) → band 2, CS0
//! and CS2–CS3 → band 1, CS4–CS7 (32–63: AF4x, VA, EF, network control) →
//! band 0. (The kernel's own TOS→priority map, `rt_tos2priority`, reads
//! the legacy TOS bits and would put EF (46) in band 1; ferry always sets
//! the socket priority explicitly, per socket for TCP and per datagram for
//! UDP, so its mapping is the one in effect.)

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use serde::{Deserialize, Serialize};

/// The packet part of a priority: what goes into the TOS byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum PacketClass {
    /// AF11, band 2: yields to everything else.
    Low,
    /// DSCP 0, band 1: the default.
    #[default]
    Normal,
    /// AF42, band 0.
    High,
    /// VA (voice admit, DSCP 44), band 0.
    Critical,
    /// Any DSCP value, 0–63.
    Dscp(u8),
}

impl PacketClass {
    /// The 6-bit DSCP value.
    pub fn dscp(self) -> u8 {
        match self {
            PacketClass::Low => 10,
            PacketClass::Normal => 0,
            PacketClass::High => 36,
            PacketClass::Critical => 44,
            PacketClass::Dscp(d) => d & 0x3f,
        }
    }
    /// The IP TOS byte (DSCP in the upper six bits, ECN bits zero).
    pub fn tos(self) -> u8 {
        self.dscp() << 2
    }
    /// The Linux socket priority (`SO_PRIORITY`, a `TC_PRIO_*` value) that
    /// the default priomap sends to the class's `pfifo_fast` band.
    pub fn socket_priority(self) -> u32 {
        match self {
            PacketClass::Low => 2,
            PacketClass::Normal => 0,
            PacketClass::High | PacketClass::Critical => 6,
            PacketClass::Dscp(d) => match (d & 0x3f) >> 3 {
                1 => 2,
                0 | 2 | 3 => 0,
                _ => 6,
            },
        }
    }
    /// The `pfifo_fast` band (0 is served first) under the default priomap.
    pub fn band(self) -> u8 {
        const PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
        PRIOMAP[(self.socket_priority() & 15) as usize]
    }
}

/// The kernel's TOS → socket priority map (`ip_tos2prio`).
#[cfg(test)]
fn rt_tos2priority(tos: u8) -> u32 {
    const MAP: [u32; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];
    MAP[((tos & 0x1e) >> 1) as usize]
}

impl fmt::Display for PacketClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketClass::Low => f.write_str("low"),
            PacketClass::Normal => f.write_str("normal"),
            PacketClass::High => f.write_str("high"),
            PacketClass::Critical => f.write_str("critical"),
            PacketClass::Dscp(d) => write!(f, "dscp:{d}"),
        }
    }
}

/// A priority text that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriorityParseError {
    /// Not a packet class.
    #[error("unknown priority class `{0}`: use low, normal, high, critical or dscp:0..63")]
    Class(String),
    /// Not a thread policy.
    #[error("unknown thread policy `{0}`: use fifo:1..99, rr:1..99, other or nice:-20..19")]
    Thread(String),
}

impl FromStr for PacketClass {
    type Err = PriorityParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || PriorityParseError::Class(s.to_string());
        Ok(match s.to_ascii_lowercase().as_str() {
            "low" | "af11" => PacketClass::Low,
            "normal" | "default" => PacketClass::Normal,
            "high" | "af42" => PacketClass::High,
            "critical" | "va" => PacketClass::Critical,
            other => {
                let n = other.strip_prefix("dscp:").unwrap_or(other);
                match n.parse::<u8>() {
                    Ok(d) if d < 64 => PacketClass::Dscp(d),
                    _ => return Err(bad()),
                }
            }
        })
    }
}

impl From<PacketClass> for String {
    fn from(c: PacketClass) -> String {
        c.to_string()
    }
}
impl TryFrom<String> for PacketClass {
    type Error = PriorityParseError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// The thread part of a priority: the scheduling of the thread that
/// serves the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum ThreadPolicy {
    /// `SCHED_FIFO` with a static priority 1–99 (needs CAP_SYS_NICE).
    Fifo(u8),
    /// `SCHED_RR` with a static priority 1–99 (needs CAP_SYS_NICE).
    RoundRobin(u8),
    /// `SCHED_OTHER` with a nice value (-20–19; below 0 needs CAP_SYS_NICE).
    Other {
        /// The nice value.
        nice: i8,
    },
}

impl fmt::Display for ThreadPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadPolicy::Fifo(p) => write!(f, "fifo:{p}"),
            ThreadPolicy::RoundRobin(p) => write!(f, "rr:{p}"),
            ThreadPolicy::Other { nice: 0 } => f.write_str("other"),
            ThreadPolicy::Other { nice } => write!(f, "nice:{nice}"),
        }
    }
}

impl FromStr for ThreadPolicy {
    type Err = PriorityParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || PriorityParseError::Thread(s.to_string());
        let l = s.to_ascii_lowercase();
        let (name, arg) = l.split_once(':').unwrap_or((l.as_str(), ""));
        let rt = |a: &str| match a.parse::<u8>() {
            Ok(p) if (1..=99).contains(&p) => Ok(p),
            _ => Err(bad()),
        };
        Ok(match name {
            "fifo" | "sched_fifo" => ThreadPolicy::Fifo(rt(arg)?),
            "rr" | "sched_rr" => ThreadPolicy::RoundRobin(rt(arg)?),
            "other" | "sched_other" if arg.is_empty() => ThreadPolicy::Other { nice: 0 },
            "nice" => match arg.parse::<i8>() {
                Ok(n) if (-20..=19).contains(&n) => ThreadPolicy::Other { nice: n },
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        })
    }
}

impl From<ThreadPolicy> for String {
    fn from(c: ThreadPolicy) -> String {
        c.to_string()
    }
}
impl TryFrom<String> for ThreadPolicy {
    type Error = PriorityParseError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// The priority of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Priority {
    /// DSCP/TOS and socket priority of its packets.
    pub class: PacketClass,
    /// A dedicated sender thread with this scheduling (None: the shared
    /// threads send, as for every other connection).
    pub thread: Option<ThreadPolicy>,
}

impl Priority {
    /// Class only.
    pub fn class(class: PacketClass) -> Self {
        Priority {
            class,
            thread: None,
        }
    }
    /// Adds a thread policy.
    pub fn with_thread(mut self, t: ThreadPolicy) -> Self {
        self.thread = Some(t);
        self
    }
    /// Ordering key: higher first (Critical, High, raw DSCP by value, Normal, Low).
    pub fn rank(&self) -> u16 {
        let class = match self.class {
            PacketClass::Critical => 300,
            PacketClass::High => 200,
            PacketClass::Dscp(d) => 100 + u16::from(d),
            PacketClass::Normal => 100,
            PacketClass::Low => 0,
        };
        class
            + match self.thread {
                Some(ThreadPolicy::Fifo(p) | ThreadPolicy::RoundRobin(p)) => 400 + u16::from(p),
                _ => 0,
            }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.thread {
            Some(t) => write!(f, "{} + {t}", self.class),
            None => write!(f, "{}", self.class),
        }
    }
}

/// Why a priority could not be applied to a connection.
#[derive(Debug, thiserror::Error)]
pub enum PriorityError {
    /// The socket refused the TOS byte or socket priority.
    #[error("cannot set TOS/priority on the {transport} socket: {source}")]
    Socket {
        /// The path.
        transport: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// Every dedicated sender thread is taken.
    #[error("all {limit} priority sender threads are in use: raise `priority_threads` in the config, or drop the thread policy of another connection")]
    NoThreadLeft {
        /// The configured bound.
        limit: usize,
    },
    /// The sender thread could not be started.
    #[error("cannot start a priority sender thread: {source}")]
    Thread {
        /// The OS error.
        source: std::io::Error,
    },
    /// No connection matched the request.
    #[error(
        "no connection of `{topic}` to `{to}` on this node (see `ferry admin <node> connections`)"
    )]
    NoConnection {
        /// Topic asked for.
        topic: String,
        /// Peer asked for.
        to: String,
    },
}

/// Dedicated sender threads in this process.
static LANES: AtomicUsize = AtomicUsize::new(0);

/// What a lane's work function asks for next.
pub enum LaneTurn {
    /// Nothing to do until woken.
    Idle,
    /// Run again after this long (pacing, a full socket) or when woken.
    After(std::time::Duration),
    /// The connection is gone: the thread ends.
    Done,
}

/// A dedicated sender thread of one connection, with its own scheduling
/// policy — the paper's "thread that handles the connection". Only
/// connections given a thread policy get one, at most `priority_threads`
/// per process. The data path only queues and calls [`Lane::wake`].
pub struct Lane {
    policy: Mutex<ThreadPolicy>,
    stop: AtomicBool,
    pending: Mutex<bool>,
    cv: Condvar,
}

impl Lane {
    /// Starts a lane running `turn` whenever woken or due; fails when
    /// `limit` lanes already run.
    pub fn start(
        policy: ThreadPolicy,
        limit: usize,
        what: String,
        mut turn: impl FnMut() -> LaneTurn + Send + 'static,
    ) -> Result<Arc<Lane>, PriorityError> {
        if LANES.fetch_add(1, Ordering::AcqRel) >= limit {
            LANES.fetch_sub(1, Ordering::AcqRel);
            return Err(PriorityError::NoThreadLeft { limit });
        }
        let lane = Arc::new(Lane {
            policy: Mutex::new(policy),
            stop: AtomicBool::new(false),
            pending: Mutex::new(false),
            cv: Condvar::new(),
        });
        let l = lane.clone();
        let spawned = std::thread::Builder::new()
            .name("ferry-lane".into())
            .spawn(move || {
                l.run(&what, &mut turn);
                LANES.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(source) = spawned {
            LANES.fetch_sub(1, Ordering::AcqRel);
            return Err(PriorityError::Thread { source });
        }
        Ok(lane)
    }

    /// Work is queued.
    pub fn wake(&self) {
        *self.pending.lock() = true;
        self.cv.notify_one();
    }

    /// A new policy, applied on the thread's next turn.
    pub fn set_policy(&self, p: ThreadPolicy) {
        *self.policy.lock() = p;
        self.wake();
    }

    /// Ends the thread after its current turn.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake();
    }

    fn run(&self, what: &str, turn: &mut dyn FnMut() -> LaneTurn) {
        let mut applied: Option<ThreadPolicy> = None;
        let mut wait = std::time::Duration::from_millis(100);
        loop {
            let want = *self.policy.lock();
            if applied != Some(want) {
                if let Err(e) = apply_to_current_thread(want) {
                    tracing::warn!(
                        "{what}: thread policy {want} refused ({e}); needs CAP_SYS_NICE or root — the packet class still applies"
                    );
                }
                applied = Some(want);
            }
            {
                let mut p = self.pending.lock();
                if !*p && !self.stop.load(Ordering::Acquire) {
                    self.cv.wait_for(&mut p, wait);
                }
                *p = false;
            }
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            wait = match turn() {
                LaneTurn::Idle => std::time::Duration::from_millis(100),
                LaneTurn::After(d) => d,
                LaneTurn::Done => return,
            };
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// The outcome of `set` on one connection.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SetOutcome {
    /// The subscriber.
    pub remote: String,
    /// Its node, when known.
    pub remote_node: String,
    /// The priority now in effect.
    pub priority: Priority,
    /// What took effect, or why not.
    pub result: Result<Applied, String>,
}

/// What a priority change did on one connection ([`Applied`]'s `Display`
/// says it in words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// What marks the connection's packets.
    pub packets: Packets,
    /// What became of its dedicated sender thread.
    pub thread: ThreadChange,
}

/// How a connection's packets carry its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Packets {
    /// Its own socket is marked (TCP): TOS/DSCP and socket priority.
    Socket(PacketClass),
    /// Each datagram is marked on the shared socket (UDP).
    PerDatagram(PacketClass),
    /// No packets: the sample is handed over (in-process) or queued
    /// (shared memory) on the publishing thread, before those of the
    /// publisher's lower-priority connections.
    None {
        /// Shared memory (else in-process).
        shared_memory: bool,
    },
    /// The connection is the broker connection every cloud-scope topic
    /// shares (MQTT): the priority orders this publisher's connections but
    /// marks nothing.
    Shared,
}

/// What became of a connection's dedicated sender thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ThreadChange {
    /// None asked, none running.
    Unchanged,
    /// Started at this policy.
    Started(ThreadPolicy),
    /// Re-prioritized to this policy.
    Changed(ThreadPolicy),
    /// Stopped: the shared I/O thread sends again.
    Stopped,
}

impl Applied {
    /// Packets carry `packets`; no thread change.
    pub fn packets(packets: Packets) -> Applied {
        Applied {
            packets,
            thread: ThreadChange::Unchanged,
        }
    }
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let marks = |f: &mut fmt::Formatter<'_>, what: &str, c: &PacketClass, how: &str| {
            write!(
                f,
                "{what}: TOS 0x{:02x} (DSCP {}), socket priority {} (pfifo_fast band {}){how}",
                c.tos(),
                c.dscp(),
                c.socket_priority(),
                c.band()
            )
        };
        match &self.packets {
            Packets::Socket(c) => marks(f, "tcp", c, "")?,
            Packets::PerDatagram(c) => marks(f, "udp", c, " per datagram")?,
            Packets::None { shared_memory } => write!(
                f,
                "{}: no packets; the sample is {} on the publishing thread, before \
                 those of lower-priority connections of the same publisher",
                if *shared_memory {
                    "shared memory"
                } else {
                    "in-process"
                },
                if *shared_memory {
                    "queued"
                } else {
                    "handed over"
                }
            )?,
            Packets::Shared => f.write_str(
                "MQTT: the broker connection is shared by every cloud-scope topic; priority \
                 is kept for this publisher's ordering but sets no DSCP on the shared socket",
            )?,
        }
        match self.thread {
            ThreadChange::Unchanged => Ok(()),
            ThreadChange::Started(t) => write!(f, "; dedicated sender thread {t}"),
            ThreadChange::Changed(t) => write!(f, "; sender thread now {t}"),
            ThreadChange::Stopped => f.write_str("; dedicated sender thread stopped"),
        }
    }
}

/// The scheduling a shared delivery thread (I/O, shared memory, MQTT)
/// should run at: raised by subscribers from any thread, applied by the
/// thread itself on its next turn. Only ever raised (it serves every
/// subscriber of its path).
#[derive(Debug, Default)]
pub struct PolicyCell {
    policy: parking_lot::Mutex<Option<ThreadPolicy>>,
    dirty: std::sync::atomic::AtomicBool,
}

impl PolicyCell {
    /// Asks for at least `p`; true if that raised it (wake the thread).
    pub fn raise(&self, p: ThreadPolicy) -> bool {
        let mut cur = self.policy.lock();
        if cur.is_some_and(|c| policy_rank(p) <= policy_rank(c)) {
            return false;
        }
        *cur = Some(p);
        self.dirty.store(true, std::sync::atomic::Ordering::Release);
        true
    }

    /// The policy asked for, if any.
    pub fn get(&self) -> Option<ThreadPolicy> {
        *self.policy.lock()
    }

    /// On the thread `name` itself: applies a raise that came since the
    /// last call (one atomic load when nothing changed).
    pub fn apply_if_raised(&self, name: &str) {
        use std::sync::atomic::Ordering;
        if !self.dirty.load(Ordering::Relaxed) || !self.dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        if let Some(p) = self.get() {
            match apply_to_current_thread(p) {
                Ok(()) => tracing::debug!("{name} now runs at {p}"),
                Err(e) => tracing::warn!(
                    "{name}: thread policy {p} refused ({e}); needs CAP_SYS_NICE or root"
                ),
            }
        }
    }
}

/// Orders thread policies: real-time above SCHED_OTHER, then by priority;
/// among SCHED_OTHER a lower nice is higher.
pub fn policy_rank(p: ThreadPolicy) -> i32 {
    match p {
        ThreadPolicy::Fifo(x) | ThreadPolicy::RoundRobin(x) => 100 + i32::from(x),
        ThreadPolicy::Other { nice } => -i32::from(nice),
    }
}

/// Applies `policy` to the calling thread. Err: the OS refused (usually
/// EPERM: real-time policies and negative nice need CAP_SYS_NICE or root).
pub fn apply_to_current_thread(policy: ThreadPolicy) -> std::io::Result<()> {
    // SAFETY: plain syscalls on the calling thread with valid arguments.
    unsafe {
        let tid = libc::gettid();
        let (pol, prio) = match policy {
            ThreadPolicy::Fifo(p) => (libc::SCHED_FIFO, i32::from(p)),
            ThreadPolicy::RoundRobin(p) => (libc::SCHED_RR, i32::from(p)),
            ThreadPolicy::Other { .. } => (libc::SCHED_OTHER, 0),
        };
        let param = libc::sched_param {
            sched_priority: prio,
        };
        if libc::sched_setscheduler(tid, pol, &param) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if let ThreadPolicy::Other { nice } = policy {
            if libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, i32::from(nice)) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Sets the TOS byte and socket priority of a socket (IPv4 and IPv6).
pub fn apply_to_socket(sock: socket2::SockRef<'_>, class: PacketClass) -> std::io::Result<()> {
    let v6 = sock
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .is_some_and(|a| a.is_ipv6());
    if v6 {
        sock.set_tclass_v6(u32::from(class.tos()))?;
    } else {
        sock.set_tos(u32::from(class.tos()))?;
    }
    // After IP_TOS (which resets it from the TOS bits): the band of the class.
    let prio = class.socket_priority() as libc::c_int;
    // SAFETY: setsockopt with a valid fd and a pointer to a live c_int.
    let r = unsafe {
        use std::os::fd::AsRawFd;
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PRIORITY,
            &prio as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_match_the_papers_table() {
        let t = |c: PacketClass| (c.dscp(), c.tos(), c.band());
        assert_eq!(t(PacketClass::Low), (10, 0x28, 2));
        assert_eq!(t(PacketClass::Normal), (0, 0, 1));
        assert_eq!(t(PacketClass::High), (36, 0x90, 0));
        assert_eq!(t(PacketClass::Critical), (44, 0xb0, 0));
        // The kernel's own mapping of the named classes agrees.
        for c in [PacketClass::Low, PacketClass::High, PacketClass::Critical] {
            assert_eq!(rt_tos2priority(c.tos()), c.socket_priority(), "{c}");
        }
        assert_eq!(PacketClass::Dscp(46).band(), 0); // EF
        assert_eq!(PacketClass::Dscp(36).band(), 0); // = High
        assert_eq!(PacketClass::Dscp(10).band(), 2); // = Low
        assert_eq!(PacketClass::Dscp(0).band(), 1);
        assert_eq!(PacketClass::Dscp(24).band(), 1); // CS3
    }

    #[test]
    fn texts_round_trip_and_bad_ones_are_named() {
        for s in ["low", "normal", "high", "critical", "dscp:46"] {
            assert_eq!(s.parse::<PacketClass>().unwrap().to_string(), s);
        }
        for s in ["fifo:30", "rr:5", "other", "nice:-5"] {
            assert_eq!(s.parse::<ThreadPolicy>().unwrap().to_string(), s);
        }
        assert!(matches!(
            "urgent".parse::<PacketClass>(),
            Err(PriorityParseError::Class(_))
        ));
        assert!("dscp:64".parse::<PacketClass>().is_err());
        assert!("fifo:0".parse::<ThreadPolicy>().is_err());
        assert!("fifo:100".parse::<ThreadPolicy>().is_err());
        assert!("nice:30".parse::<ThreadPolicy>().is_err());
        let e = "deadline:3"
            .parse::<ThreadPolicy>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("deadline:3") && e.contains("fifo"), "{e}");
    }
}
