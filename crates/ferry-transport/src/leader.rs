//! The host leader: the ferry runtimes of one host elect one of them, with
//! no daemon, and another takes over when it exits or is killed.
//!
//! The ballot is an abstract Unix socket name, `ferry-leader/<domain>/<host
//! id>` ([`socket_name`]; the host id covers the machine and its IPC
//! namespace, and abstract names are per network namespace): the runtime
//! that binds it leads and listens there; every other connects to it and
//! holds the connection. The kernel arbitrates: a name has one owner, and
//! it frees the name the moment the owner's process dies, however it dies.
//! The followers then read the end of their connection and bind again at
//! once — one wins, the others connect to it. Each side greets the other
//! with its participant id ([`ferry_wire::leader::Hello`]); which process
//! is behind a connection is what the kernel says (`SO_PEERCRED`), not
//! what it declares.
//!
//! Any process in the network namespace can bind the name first. A leader
//! will receive the host's forwarded samples, so a follower accepts only a
//! leader of its own user (or root), and a leader only followers of its own
//! user (or root); a name held by another user's process leaves the
//! runtime [`Role::Refused`] (it retries every few seconds and uses no
//! leader meanwhile). The I/O runs on the runtime's I/O thread (a source
//! per socket); only an election attempt runs on a short-lived thread of
//! its own, as binding and connecting may briefly wait.
//!
//! **Host discovery** ([`HostLeader::start_feeding`]): the leader alone
//! listens to the discovery group for its host. Every discovery datagram
//! a runtime accepts goes through [`HostLeader::relay`]: it is kept in a
//! cache (the newest of each participant), and the leader queues it to
//! every follower ([`ferry_wire::leader::Frame::Feed`]); a follower that
//! greets the leader first gets the whole cache. A follower told
//! `Feeding` leaves the group (the kernel stops copying every discovery
//! datagram into it) and takes the fed datagrams from [`HostLeader::take_fed`]
//! instead — checked by its own discovery as if it had received them.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferry_wire::leader::{Fed, Frame, Hello, Side, MAX_FRAME};
use ferry_wire::ParticipantId;
use parking_lot::Mutex;

mod feed;
use feed::{FeedCache, Outq};

use crate::reactor::{IoHandle, LoopContext, Readiness, Served, Source};

/// Most connections one leader holds, greeted or not (further ones are
/// closed).
pub const MAX_FOLLOWERS: usize = 1024;
/// How long a connecting follower waits for the leader's hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a runtime that found the name held by another user waits
/// before it tries again.
const REFUSED_RETRY: Duration = Duration::from_secs(5);

/// The ballot's name for `domain` on host `host_id`.
pub fn socket_name(domain: u16, host_id: u64) -> String {
    format!("ferry-leader/{domain}/{host_id:016x}")
}

/// A runtime of the election, as the kernel and its hello say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Member {
    /// Its runtime (its hello).
    pub participant: ParticipantId,
    /// Its process (the kernel's word).
    pub pid: u32,
}

/// Where this runtime stands in its host's election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Binding or connecting (at start, and after the leader left).
    Electing,
    /// This runtime leads; the followers that greeted it, by connection
    /// order.
    Leader {
        /// The followers now.
        followers: Vec<Member>,
    },
    /// Another runtime leads.
    Follower {
        /// The leader.
        leader: Member,
    },
    /// The name is held by a process of another user: no leader is used
    /// (retried every few seconds).
    Refused {
        /// The holder's user id.
        uid: u32,
        /// The holder's process.
        pid: u32,
    },
    /// The runtime left the election.
    Closed,
}

struct Ctx {
    name: String,
    me: ParticipantId,
    uid: u32,
    io: IoHandle,
    role: Mutex<Role>,
    /// Bumped on every change of the role.
    changes: AtomicU64,
    /// The leader's follower connections open now.
    open: AtomicUsize,
    /// Called after every change of the role.
    on_change: Box<dyn Fn() + Send + Sync>,
    closed: AtomicBool,
    /// False: only follows (waits for a leader instead of binding).
    may_lead: bool,
    /// Host discovery through the leader is on.
    feeding: bool,
    feed: Mutex<FeedState>,
    /// This runtime's leader feeds it (it said `Feeding`).
    fed: AtomicBool,
}

/// Host discovery's state (see the module docs).
#[derive(Default)]
struct FeedState {
    cache: FeedCache,
    /// Leading: the queue toward each follower.
    out: Vec<Outq>,
    /// Following: `Feed` frames read from the leader, not yet taken.
    inbox: Vec<u8>,
    /// Datagrams fed to this runtime since it started.
    fed_total: u64,
}

impl Ctx {
    fn set(&self, role: Role) {
        let mut r = self.role.lock();
        if *r != role {
            tracing::debug!("host leader election {}: {role:?}", self.name);
            *r = role;
            self.changes.fetch_add(1, Ordering::AcqRel);
            drop(r);
            (self.on_change)();
        }
    }
    fn update(&self, f: impl FnOnce(&mut Role)) {
        let mut r = self.role.lock();
        let before = r.clone();
        f(&mut r);
        if *r != before {
            self.changes.fetch_add(1, Ordering::AcqRel);
            drop(r);
            (self.on_change)();
        }
    }
    /// Whether a peer of user `uid` may lead us or follow us.
    fn trusted(&self, uid: u32) -> bool {
        uid == self.uid || uid == 0
    }
}

/// This runtime's place in its host's election; leaving it (drop) frees
/// the leadership for another runtime.
pub struct HostLeader(Arc<Ctx>);

impl HostLeader {
    /// Joins the election named `name` ([`socket_name`]) as runtime `me`;
    /// the sockets are served by the I/O loop of `io`; `on_change` runs
    /// after every change of the role (on the thread that made it).
    pub fn start(
        io: IoHandle,
        name: String,
        me: ParticipantId,
        on_change: Box<dyn Fn() + Send + Sync>,
    ) -> HostLeader {
        Self::start_as(io, name, me, true, on_change)
    }

    /// Like [`HostLeader::start`]; `may_lead` false: only ever follows
    /// (stays `Electing` while no other runtime leads).
    pub fn start_as(
        io: IoHandle,
        name: String,
        me: ParticipantId,
        may_lead: bool,
        on_change: Box<dyn Fn() + Send + Sync>,
    ) -> HostLeader {
        Self::start_with(io, name, me, may_lead, false, on_change)
    }

    /// Like [`HostLeader::start_as`], with host discovery through the
    /// leader on (see the module docs).
    pub fn start_feeding(
        io: IoHandle,
        name: String,
        me: ParticipantId,
        may_lead: bool,
        on_change: Box<dyn Fn() + Send + Sync>,
    ) -> HostLeader {
        Self::start_with(io, name, me, may_lead, true, on_change)
    }

    fn start_with(
        io: IoHandle,
        name: String,
        me: ParticipantId,
        may_lead: bool,
        feeding: bool,
        on_change: Box<dyn Fn() + Send + Sync>,
    ) -> HostLeader {
        // SAFETY: getuid cannot fail and has no preconditions.
        let uid = unsafe { libc::getuid() };
        let ctx = Arc::new(Ctx {
            name,
            me,
            uid,
            io,
            role: Mutex::new(Role::Electing),
            changes: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            on_change,
            closed: AtomicBool::new(false),
            may_lead,
            feeding,
            feed: Mutex::new(FeedState::default()),
            fed: AtomicBool::new(false),
        });
        spawn_election(ctx.clone(), Duration::ZERO);
        HostLeader(ctx)
    }

    /// Whether this runtime's leader feeds it its host's discovery: it
    /// need not (and should not) listen to the discovery group itself.
    pub fn fed(&self) -> bool {
        self.0.fed.load(Ordering::Acquire)
    }

    /// A discovery datagram this runtime accepted (on its own sockets or
    /// fed): kept for future followers, and queued to every follower but
    /// its sender while this runtime leads. Call [`HostLeader::flush`]
    /// after a batch.
    pub fn relay(&self, fed: Fed<'_>) {
        if !self.0.feeding {
            return;
        }
        let mut st = self.0.feed.lock();
        let Some(sender) = st.cache.keep(&fed) else {
            return;
        };
        if st.out.is_empty() {
            return;
        }
        // Framed once, copied into each follower's queue.
        let mut frame = Vec::with_capacity(fed.datagram.len() + 32);
        Frame::Feed(fed).encode_into(&mut frame);
        for q in st.out.iter_mut() {
            if q.follower != sender {
                q.push(|out| out.extend_from_slice(&frame));
            }
        }
    }

    /// A participant left: no longer given to new followers.
    pub fn forget(&self, id: ParticipantId) {
        if self.0.feeding {
            self.0.feed.lock().cache.forget(id);
        }
    }

    /// Writes what the followers' sockets take; true when bytes remain
    /// queued (call again soon).
    pub fn flush(&self) -> bool {
        if !self.0.feeding {
            return false;
        }
        let mut st = self.0.feed.lock();
        let mut more = false;
        for q in st.out.iter_mut() {
            more |= q.flush();
        }
        st.out.retain(|q| !q.broken);
        more
    }

    /// Hands each datagram the leader fed to `on` (following).
    pub fn take_fed(&self, mut on: impl FnMut(Fed<'_>)) {
        if !self.0.feeding {
            return;
        }
        let inbox = {
            let mut st = self.0.feed.lock();
            if st.inbox.is_empty() {
                return;
            }
            std::mem::take(&mut st.inbox)
        };
        let mut at = 0;
        let mut n = 0;
        // The frames were checked when they were read.
        while let Ok(Some((frame, len))) = Frame::decode(&inbox[at..]) {
            if let Frame::Feed(f) = frame {
                on(f);
                n += 1;
            }
            at += len;
        }
        let mut st = self.0.feed.lock();
        st.fed_total += n;
        if st.inbox.is_empty() {
            // Keep the allocation.
            let mut v = inbox;
            v.clear();
            st.inbox = v;
        }
    }

    /// Datagrams fed to this runtime by its leaders, and participants in
    /// its cache.
    pub fn feed_stats(&self) -> (u64, usize) {
        let st = self.0.feed.lock();
        (st.fed_total, st.cache.len())
    }

    /// Where this runtime stands now.
    pub fn role(&self) -> Role {
        self.0.role.lock().clone()
    }

    /// A number that changes whenever the role does.
    pub fn changes(&self) -> u64 {
        self.0.changes.load(Ordering::Acquire)
    }
}

impl Drop for HostLeader {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
        self.0.set(Role::Closed);
        // The loop drops closed sources on its next turn.
        self.0.io.kick();
    }
}

/// Runs one election attempt on a thread of its own (binding and
/// connecting may wait a little), after `delay`.
fn spawn_election(ctx: Arc<Ctx>, delay: Duration) {
    let spawned = std::thread::Builder::new()
        .name("ferry-elect".into())
        .spawn(move || {
            std::thread::sleep(delay);
            elect(&ctx);
        });
    if let Err(e) = spawned {
        tracing::warn!("host leader election: cannot start a thread ({e}); no leader is used");
    }
}

fn elect(ctx: &Arc<Ctx>) {
    let addr = match SocketAddr::from_abstract_name(ctx.name.as_bytes()) {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!("host leader election: bad name {}: {e}", ctx.name);
            return;
        }
    };
    let mut wait = Duration::from_millis(1);
    // Bounded: a name that is bound but never listens (or a stream of
    // refusals) ends in a retry from the start a little later.
    for _ in 0..200 {
        if ctx.closed.load(Ordering::Acquire) {
            return;
        }
        ctx.set(Role::Electing);
        let bound = if ctx.may_lead {
            UnixListener::bind_addr(&addr)
        } else {
            Err(io::ErrorKind::AddrInUse.into())
        };
        match bound {
            Ok(l) => {
                if let Err(e) = l.set_nonblocking(true) {
                    tracing::warn!("host leader election: {e}");
                    return;
                }
                ctx.set(Role::Leader {
                    followers: Vec::new(),
                });
                ctx.io.add(Box::new(Listening {
                    listener: l,
                    ctx: ctx.clone(),
                }));
                return;
            }
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {}
            Err(e) => {
                tracing::warn!(
                    "host leader election {}: cannot bind ({e}); no leader is used",
                    ctx.name
                );
                return;
            }
        }
        match follow(ctx, &addr) {
            Ok(Some(source)) => {
                ctx.io.add(Box::new(source));
                return;
            }
            Ok(None) => {
                // Held by another user: not ours to follow.
                spawn_election(ctx.clone(), REFUSED_RETRY);
                return;
            }
            // The leader bound but does not listen yet, or left between
            // our bind and connect: again, a little later.
            Err(_) => {
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_millis(100));
            }
        }
    }
    spawn_election(ctx.clone(), Duration::from_secs(1));
}

/// Connects to the leader and exchanges hellos: the follower's source, or
/// None when the leader is another user's process.
fn follow(ctx: &Arc<Ctx>, addr: &SocketAddr) -> io::Result<Option<Conn>> {
    let mut s = UnixStream::connect_addr(addr)?;
    let cred = peer_cred(s.as_raw_fd())?;
    if !ctx.trusted(cred.uid) {
        tracing::warn!(
            "host leader election {}: the name is held by pid {} of user {} (not ours): \
             no host leader is used",
            ctx.name,
            cred.pid,
            cred.uid
        );
        ctx.set(Role::Refused {
            uid: cred.uid,
            pid: cred.pid,
        });
        return Ok(None);
    }
    s.set_read_timeout(Some(HELLO_TIMEOUT))?;
    let mut buf = [0u8; Hello::LEN];
    s.read_exact(&mut buf)?;
    let hello = Hello::decode(&buf).map_err(io::Error::other)?;
    if hello.side != Side::Leader {
        return Err(io::Error::other("the leader's hello is a follower's"));
    }
    s.write_all(
        &Hello {
            side: Side::Follower,
            participant: ctx.me,
        }
        .encode(),
    )?;
    s.set_nonblocking(true)?;
    ctx.set(Role::Follower {
        leader: Member {
            participant: hello.participant,
            pid: cred.pid,
        },
    });
    Ok(Some(Conn {
        stream: s,
        ctx: ctx.clone(),
        end: End::ToLeader {
            pending: Vec::new(),
        },
    }))
}

struct Cred {
    pid: u32,
    uid: u32,
}

/// The process at the other end of a Unix socket, as the kernel says.
fn peer_cred(fd: RawFd) -> io::Result<Cred> {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` and `len` are valid for writes of the sizes given; the
    // kernel fills at most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Cred {
        pid: u32::try_from(c.pid).unwrap_or(0),
        uid: c.uid,
    })
}

/// Reads what is there; false when the peer closed (or the socket failed).
fn drain(s: &mut UnixStream, mut on: impl FnMut(&[u8])) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => on(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// One end of a connection between a follower and its leader.
struct Conn {
    stream: UnixStream,
    ctx: Arc<Ctx>,
    end: End,
}

enum End {
    /// A follower's: the end of the stream is the end of the leader's term.
    ToLeader {
        /// Bytes of a frame not yet whole.
        pending: Vec<u8>,
    },
    /// The leader's: the follower's hello, then its membership.
    FromFollower {
        /// The follower's process (the kernel's word).
        pid: u32,
        /// Its hello so far.
        got: Vec<u8>,
        member: Option<Member>,
    },
}

impl Conn {
    /// Takes a complete follower hello; false when it is not one.
    fn greeted(&mut self) -> bool {
        let End::FromFollower { pid, got, member } = &mut self.end else {
            return true;
        };
        if member.is_some() || got.len() < Hello::LEN {
            return true;
        }
        match Hello::decode(got) {
            Ok(h) if h.side == Side::Follower => {
                let m = Member {
                    participant: h.participant,
                    pid: *pid,
                };
                *member = Some(m);
                self.ctx.update(|r| {
                    if let Role::Leader { followers } = r {
                        followers.push(m);
                    }
                });
                if self.ctx.feeding {
                    self.start_feed(m.participant);
                }
                true
            }
            _ => false,
        }
    }
}

/// Most fed bytes waiting for the runtime to take them: past this the
/// leader is sending faster than the runtime reads, and the connection
/// is dropped (the runtime elects again and gets a fresh copy).
const MAX_INBOX: usize = 16 << 20;

impl Conn {
    /// Leader: the follower greeted; it gets `Feeding` and the cache.
    fn start_feed(&self, follower: ParticipantId) {
        let Ok(w) = self.stream.try_clone() else {
            return;
        };
        // Room for a burst (a snapshot of a large fleet) in the kernel.
        let _ = socket2::SockRef::from(&w).set_send_buffer_size(4 << 20);
        let mut q = Outq::new(follower, w);
        let mut st = self.ctx.feed.lock();
        q.push(|out| {
            Frame::Feeding.encode_into(out);
            st.cache.snapshot(follower, out);
        });
        q.flush();
        st.out.retain(|o| o.follower != follower);
        st.out.push(q);
    }

    /// Follower: reads the leader's frames; false when the stream ended or
    /// carried something that is not a frame.
    fn read_frames(&mut self) -> FeedRead {
        let End::ToLeader { pending } = &mut self.end else {
            return FeedRead::Open;
        };
        let mut more = false;
        let ctx = &self.ctx;
        let mut buf = [0u8; 65536];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return FeedRead::Closed,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return FeedRead::Closed,
            }
            if pending.len() >= 4 * MAX_FRAME {
                // Read on next turn (the socket may hold more: no new
                // edge will say so).
                more = true;
                break;
            }
        }
        let mut at = 0;
        let mut feeding = false;
        {
            let mut st = ctx.feed.lock();
            loop {
                match Frame::decode(&pending[at..]) {
                    Ok(Some((frame, n))) => {
                        match frame {
                            Frame::Feeding => feeding = true,
                            Frame::Feed(_) if ctx.feeding => {
                                st.inbox.extend_from_slice(&pending[at..at + n]);
                            }
                            Frame::Feed(_) => {}
                        }
                        at += n;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!("host leader {}: bad frame from the leader: {e}", ctx.name);
                        return FeedRead::Closed;
                    }
                }
            }
            if st.inbox.len() > MAX_INBOX {
                tracing::warn!(
                    "host leader {}: discovery feed not taken: dropped",
                    ctx.name
                );
                return FeedRead::Closed;
            }
        }
        pending.drain(..at);
        if feeding && ctx.feeding && !ctx.fed.swap(true, Ordering::AcqRel) {
            ctx.changes.fetch_add(1, Ordering::AcqRel);
            (ctx.on_change)();
        }
        if more {
            FeedRead::More
        } else {
            FeedRead::Open
        }
    }
}

/// What a follower's read of its leader's frames found.
#[derive(PartialEq, Eq)]
enum FeedRead {
    Open,
    /// Stopped at its budget: read again next turn.
    More,
    Closed,
}

impl Source for Conn {
    fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }
    fn writable_interest(&self) -> bool {
        false
    }
    fn ready(&mut self, _: Readiness, _: &mut dyn LoopContext) -> Served {
        // The leader says nothing after its hello (yet), a follower nothing
        // after its own: anything more is read and dropped.
        let open = match &mut self.end {
            End::ToLeader { .. } => match self.read_frames() {
                FeedRead::Closed => false,
                FeedRead::More => return Served::More,
                FeedRead::Open => true,
            },
            End::FromFollower { got, .. } => drain(&mut self.stream, |b| {
                let take = (Hello::LEN - got.len()).min(b.len());
                got.extend_from_slice(&b[..take]);
            }),
        };
        if open && self.greeted() {
            Served::Idle
        } else {
            Served::Done
        }
    }
    fn is_closed(&self) -> bool {
        self.ctx.closed.load(Ordering::Acquire)
    }
    fn removed(&mut self, _: &mut dyn LoopContext) {
        match &mut self.end {
            End::ToLeader { .. } => {
                self.ctx.fed.store(false, Ordering::Release);
                self.ctx.feed.lock().inbox.clear();
                if !self.ctx.closed.load(Ordering::Acquire) {
                    tracing::debug!("host leader election {}: the leader left", self.ctx.name);
                    self.ctx.set(Role::Electing);
                    spawn_election(self.ctx.clone(), Duration::ZERO);
                }
            }
            End::FromFollower { member, .. } => {
                self.ctx.open.fetch_sub(1, Ordering::AcqRel);
                if let Some(m) = member.take() {
                    if self.ctx.feeding {
                        self.ctx
                            .feed
                            .lock()
                            .out
                            .retain(|q| q.follower != m.participant);
                    }
                    self.ctx.update(|r| {
                        if let Role::Leader { followers } = r {
                            if let Some(i) = followers.iter().position(|f| *f == m) {
                                followers.remove(i);
                            }
                        }
                    });
                }
            }
        }
    }
    fn shutdown(&mut self) {}
}

/// The leader's ballot: it accepts followers.
struct Listening {
    listener: UnixListener,
    ctx: Arc<Ctx>,
}

impl Source for Listening {
    fn fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }
    fn writable_interest(&self) -> bool {
        false
    }
    fn ready(&mut self, _: Readiness, lc: &mut dyn LoopContext) -> Served {
        loop {
            let mut s = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Served::Idle,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::debug!("host leader {}: accept: {e}", self.ctx.name);
                    return Served::Idle;
                }
            };
            let Ok(cred) = peer_cred(s.as_raw_fd()) else {
                continue;
            };
            let full = self.ctx.open.load(Ordering::Acquire) >= MAX_FOLLOWERS;
            if !self.ctx.trusted(cred.uid) || full {
                tracing::debug!(
                    "host leader {}: connection of pid {} (user {}) closed{}",
                    self.ctx.name,
                    cred.pid,
                    cred.uid,
                    if full {
                        ": followers full"
                    } else {
                        ": another user"
                    }
                );
                continue;
            }
            let hello = Hello {
                side: Side::Leader,
                participant: self.ctx.me,
            };
            // A fresh socket's buffer takes 12 bytes at once.
            if s.set_nonblocking(true).is_err() || s.write_all(&hello.encode()).is_err() {
                continue;
            }
            self.ctx.open.fetch_add(1, Ordering::AcqRel);
            lc.add_source(Box::new(Conn {
                stream: s,
                ctx: self.ctx.clone(),
                end: End::FromFollower {
                    pid: cred.pid,
                    got: Vec::with_capacity(Hello::LEN),
                    member: None,
                },
            }));
        }
    }
    fn is_closed(&self) -> bool {
        self.ctx.closed.load(Ordering::Acquire)
    }
    fn removed(&mut self, _: &mut dyn LoopContext) {}
    fn shutdown(&mut self) {}
}
