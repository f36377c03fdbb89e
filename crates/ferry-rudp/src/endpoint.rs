//! The datagram side of one socket: which stream a datagram belongs to,
//! stream opening (HELLO) and its retries, and bounded stream tables.
//!
//! quinn-proto's `Endpoint` is the model: the [`Endpoint`] parses every
//! datagram once and routes it; the per-stream state machines ([`Sender`],
//! [`Receiver`]) stay with the driver, so a driver can lock each stream on
//! its own and publishers on different streams never wait for each other.
//!
//! # Call order
//!
//! A driver owns one socket, one `Endpoint` and a `Sender`/`Receiver` per
//! [`StreamHandle`]:
//!
//! 1. **A datagram arrives** → [`Endpoint::handle`]. Act on the [`Routed`]:
//!    feed `Writer(h, p)` to the `Sender` of `h` ([`Sender::handle_packet`])
//!    and `Reader(h, p)` to the `Receiver` of `h`
//!    ([`Receiver::handle_packet_at`]); on `HelloAgain(h)` call
//!    [`Receiver::acknowledge`]; on `Incoming(i)` decide whether the local
//!    reader named in the HELLO exists and, if so, call [`Endpoint::accept`]
//!    and create a `Receiver` for the handle it returns (then
//!    `acknowledge` it); `Dropped` needs nothing (count it).
//! 2. **A local writer connects** → [`Endpoint::open`] and create a `Sender`.
//!    When the `Sender` reports [`crate::SenderEvent::PeerSilent`] (the
//!    reader may have restarted and lost the stream) → [`Endpoint::reopen`].
//!    A stream that ends on either side → [`Endpoint::close`].
//! 3. **After any of the above and on every timeout** → drain
//!    [`Endpoint::poll_event`] (streams closed by the endpoint: drop their
//!    `Receiver`) and [`Endpoint::poll_transmit`] (HELLOs), then the
//!    streams' own `poll_transmit`s.
//! 4. **Sleep** until the earliest of [`Endpoint::poll_timeout`] and the
//!    streams' `poll_timeout`s; then [`Endpoint::handle_timeout`].
//!
//! # Bounds
//!
//! Writer streams are created locally and not bounded here. Reader streams
//! are created by datagrams from the network, so their number is bounded
//! per source address ([`EndpointConfig::max_incoming_per_peer`]) and in
//! total ([`EndpointConfig::max_incoming`]). A stream is *half-open* from
//! its HELLO until the first data, heartbeat or FEC datagram; when a bound
//! is reached the oldest half-open stream in that scope makes room, and if
//! every stream in scope carries data the HELLO is refused. A flood of
//! forged HELLOs therefore churns half-open slots but cannot displace a
//! stream that carries data, and memory stays flat whatever a peer sends.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use ferry_wire::rudp::{encode_hello_into, Datagram, Hello, Packet};
use ferry_wire::{ParticipantId, WireError};

#[cfg(doc)]
use crate::{Receiver, Sender};

/// Settings of an [`Endpoint`].
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// This runtime: HELLOs naming another participant's reader are dropped.
    pub local: ParticipantId,
    /// A HELLO is repeated this often until the reader's runtime answers.
    pub hello_interval: Duration,
    /// Reader streams in total.
    pub max_incoming: usize,
    /// Reader streams from one source address.
    pub max_incoming_per_peer: usize,
    /// A reader stream that receives nothing for this long is closed (its
    /// writer is gone; a writer in an outage keeps probing well within it).
    pub idle_timeout: Duration,
}

impl EndpointConfig {
    /// Defaults for runtime `local`: HELLO every 100 ms, 4096 reader
    /// streams in total and 256 per source address, 120 s idle timeout.
    pub fn new(local: ParticipantId) -> Self {
        EndpointConfig {
            local,
            hello_interval: Duration::from_millis(100),
            max_incoming: 4096,
            max_incoming_per_peer: 256,
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// One stream of an [`Endpoint`]; never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamHandle(u64);

impl std::fmt::Display for StreamHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stream#{}", self.0)
    }
}

/// A HELLO for a stream the endpoint does not know yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incoming {
    /// Where it came from (where acknowledgements go).
    pub peer: SocketAddr,
    /// The stream id the writer chose.
    pub stream: u32,
    /// What the writer declared: itself, the reader it wants, reliability.
    /// Unverified: the driver checks that the reader exists.
    pub hello: Hello,
}

/// Where [`Endpoint::handle`] sent a datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Routed<'a> {
    /// An ACKNACK for a local writer stream: feed it to its `Sender`.
    Writer(StreamHandle, Packet<'a>),
    /// Data, heartbeat or FEC for an accepted reader stream: feed it to
    /// its `Receiver`.
    Reader(StreamHandle, Packet<'a>),
    /// A repeated HELLO of an accepted reader stream (the answer was
    /// lost): acknowledge it again.
    HelloAgain(StreamHandle),
    /// A HELLO for a new stream: [`Endpoint::accept`] it if the reader
    /// exists.
    Incoming(Incoming),
    /// Nothing to do.
    Dropped(Dropped),
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Dropped {
    /// Not a ferry-rudp datagram, or a corrupt one.
    #[error("malformed datagram: {0}")]
    Malformed(WireError),
    /// A HELLO for a reader of another runtime.
    #[error("HELLO for another runtime's reader")]
    NotForUs,
    /// No stream with this source address and id on the side the
    /// datagram is for (closed, evicted, or never opened).
    #[error("datagram for an unknown stream")]
    UnknownStream,
}

/// Why [`Endpoint::accept`] refused a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    /// The source address has its share of streams, all carrying data.
    #[error("{peer} already has {limit} streams carrying data (max_incoming_per_peer)")]
    PeerFull {
        /// The source address.
        peer: IpAddr,
        /// The bound.
        limit: usize,
    },
    /// The endpoint has its total of streams, all carrying data.
    #[error("{limit} streams carrying data already (max_incoming)")]
    Full {
        /// The bound.
        limit: usize,
    },
    /// The stream is already open.
    #[error("stream already open as {0}")]
    Exists(StreamHandle),
}

/// Why the endpoint closed a reader stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Nothing arrived for [`EndpointConfig::idle_timeout`].
    Idle,
    /// A half-open stream made room for a newer HELLO.
    Evicted,
}

/// Something the driver must act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointEvent {
    /// The endpoint closed a reader stream: drop its `Receiver`.
    Closed(StreamHandle, CloseReason),
}

/// A HELLO to send: the bytes are in the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Destination.
    pub to: SocketAddr,
    /// The writer stream it opens (for its traffic class).
    pub stream: StreamHandle,
}

/// Counters of an [`Endpoint`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Writer streams open.
    pub writers: usize,
    /// Reader streams open (half-open included).
    pub readers: usize,
    /// Reader streams that have not carried data yet.
    pub half_open: usize,
    /// HELLOs refused by a bound.
    pub refused: u64,
    /// Half-open streams evicted to make room.
    pub evicted: u64,
    /// Datagrams that did not parse.
    pub malformed: u64,
    /// Datagrams for no known stream.
    pub unknown: u64,
}

#[derive(Debug)]
enum Side {
    Writer {
        hello: Hello,
        /// Next HELLO while unanswered.
        next_hello: Option<Instant>,
    },
    Reader {
        established: bool,
        last_rx: Instant,
    },
}

#[derive(Debug)]
struct Entry {
    key: Key,
    side: Side,
}

/// A stream as the network names it: the peer's address, the stream id,
/// and which side of it is local (a runtime can write to itself through
/// its own socket: both sides then share address and id).
type Key = (SocketAddr, u32, bool);

fn writer_key(peer: SocketAddr, stream: u32) -> Key {
    (peer, stream, true)
}

fn reader_key(peer: SocketAddr, stream: u32) -> Key {
    (peer, stream, false)
}

/// Routes the datagrams of one socket to its streams. See the module docs.
#[derive(Debug)]
pub struct Endpoint {
    cfg: EndpointConfig,
    next_handle: u64,
    routes: HashMap<Key, StreamHandle>,
    streams: HashMap<StreamHandle, Entry>,
    /// Reader streams per source address.
    per_peer: HashMap<IpAddr, usize>,
    readers: usize,
    /// Half-open reader streams, oldest first (handles only grow), in
    /// total and per source address.
    half_open: BTreeSet<StreamHandle>,
    half_open_of: HashMap<IpAddr, BTreeSet<StreamHandle>>,
    /// Writer streams whose HELLO is due, by time.
    hellos: BTreeSet<(Instant, StreamHandle)>,
    next_idle_scan: Option<Instant>,
    events: VecDeque<EndpointEvent>,
    stats: EndpointStats,
}

/// Idle reader streams are looked for at most this often.
const IDLE_SCAN: Duration = Duration::from_secs(1);

impl Endpoint {
    /// An endpoint with no streams.
    pub fn new(cfg: EndpointConfig) -> Self {
        Endpoint {
            cfg,
            next_handle: 1,
            routes: HashMap::new(),
            streams: HashMap::new(),
            per_peer: HashMap::new(),
            readers: 0,
            half_open: BTreeSet::new(),
            half_open_of: HashMap::new(),
            hellos: BTreeSet::new(),
            next_idle_scan: None,
            events: VecDeque::new(),
            stats: EndpointStats::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &EndpointConfig {
        &self.cfg
    }

    fn handle_for(&mut self, key: Key, side: Side) -> StreamHandle {
        let h = StreamHandle(self.next_handle);
        self.next_handle += 1;
        self.routes.insert(key, h);
        self.streams.insert(h, Entry { key, side });
        h
    }

    /// Parses and routes one datagram from `from`, received at `now`.
    pub fn handle<'a>(&mut self, now: Instant, from: SocketAddr, bytes: &'a [u8]) -> Routed<'a> {
        let p = match Packet::parse(bytes) {
            Ok(p) => p,
            Err(e) => {
                self.stats.malformed += 1;
                return Routed::Dropped(Dropped::Malformed(e));
            }
        };
        // ACKNACKs go to writer streams, everything else to reader streams.
        let key = match p.body {
            Datagram::AckNack(_) => writer_key(from, p.stream),
            _ => reader_key(from, p.stream),
        };
        let Some(&h) = self.routes.get(&key) else {
            return match p.body {
                Datagram::Hello(hello) if hello.to.participant != self.cfg.local => {
                    Routed::Dropped(Dropped::NotForUs)
                }
                Datagram::Hello(hello) => Routed::Incoming(Incoming {
                    peer: from,
                    stream: p.stream,
                    hello,
                }),
                _ => {
                    self.stats.unknown += 1;
                    Routed::Dropped(Dropped::UnknownStream)
                }
            };
        };
        let Some(entry) = self.streams.get_mut(&h) else {
            return Routed::Dropped(Dropped::UnknownStream);
        };
        match (&mut entry.side, &p.body) {
            (Side::Writer { next_hello, .. }, Datagram::AckNack(_)) => {
                if let Some(t) = next_hello.take() {
                    self.hellos.remove(&(t, h));
                }
                Routed::Writer(h, p)
            }
            (Side::Reader { last_rx, .. }, Datagram::Hello(_)) => {
                *last_rx = now;
                Routed::HelloAgain(h)
            }
            (
                Side::Reader {
                    established,
                    last_rx,
                },
                Datagram::Data(_) | Datagram::Heartbeat(_) | Datagram::Fec(_),
            ) => {
                *last_rx = now;
                if !*established {
                    *established = true;
                    self.half_open.remove(&h);
                    if let Some(set) = self.half_open_of.get_mut(&from.ip()) {
                        set.remove(&h);
                        if set.is_empty() {
                            self.half_open_of.remove(&from.ip());
                        }
                    }
                }
                Routed::Reader(h, p)
            }
            _ => Routed::Dropped(Dropped::UnknownStream),
        }
    }

    /// Accepts a new reader stream (after [`Routed::Incoming`]); the driver
    /// creates its `Receiver` under the returned handle. When a bound is
    /// reached, the oldest half-open stream in its scope is closed
    /// ([`EndpointEvent::Closed`]) to make room, or the stream is refused.
    pub fn accept(&mut self, now: Instant, inc: &Incoming) -> Result<StreamHandle, AcceptError> {
        let key = reader_key(inc.peer, inc.stream);
        if let Some(&h) = self.routes.get(&key) {
            return Err(AcceptError::Exists(h));
        }
        let ip = inc.peer.ip();
        if self.per_peer.get(&ip).copied().unwrap_or(0) >= self.cfg.max_incoming_per_peer {
            let oldest = self.half_open_of.get(&ip).and_then(|s| s.first().copied());
            match oldest {
                Some(old) => self.evict(old),
                None => {
                    self.stats.refused += 1;
                    return Err(AcceptError::PeerFull {
                        peer: ip,
                        limit: self.cfg.max_incoming_per_peer,
                    });
                }
            }
        }
        if self.readers >= self.cfg.max_incoming {
            match self.half_open.first().copied() {
                Some(old) => self.evict(old),
                None => {
                    self.stats.refused += 1;
                    return Err(AcceptError::Full {
                        limit: self.cfg.max_incoming,
                    });
                }
            }
        }
        let h = self.handle_for(
            key,
            Side::Reader {
                established: false,
                last_rx: now,
            },
        );
        self.readers += 1;
        *self.per_peer.entry(ip).or_default() += 1;
        self.half_open.insert(h);
        self.half_open_of.entry(ip).or_default().insert(h);
        if self.next_idle_scan.is_none() {
            self.next_idle_scan = Some(now + IDLE_SCAN);
        }
        Ok(h)
    }

    fn evict(&mut self, h: StreamHandle) {
        self.remove(h);
        self.stats.evicted += 1;
        self.events
            .push_back(EndpointEvent::Closed(h, CloseReason::Evicted));
    }

    /// Opens a local writer stream to `peer` with the id `stream` (random:
    /// the driver owns the randomness); its HELLO is due now and repeated
    /// every [`EndpointConfig::hello_interval`] until answered.
    pub fn open(
        &mut self,
        now: Instant,
        peer: SocketAddr,
        stream: u32,
        hello: Hello,
    ) -> StreamHandle {
        if let Some(old) = self.routes.get(&writer_key(peer, stream)).copied() {
            self.close(old); // a stream id reused: the new stream wins
        }
        let h = self.handle_for(
            writer_key(peer, stream),
            Side::Writer {
                hello,
                next_hello: Some(now),
            },
        );
        self.hellos.insert((now, h));
        h
    }

    /// HELLOs a writer stream again until answered (its reader went
    /// silent: it may have restarted and lost the stream).
    pub fn reopen(&mut self, now: Instant, h: StreamHandle) {
        if let Some(Entry {
            side: Side::Writer { next_hello, .. },
            ..
        }) = self.streams.get_mut(&h)
        {
            if next_hello.is_none() {
                *next_hello = Some(now);
                self.hellos.insert((now, h));
            }
        }
    }

    /// A writer stream's unanswered HELLO goes now rather than at its next
    /// repeat (the driver knows its path just became usable: a protected
    /// session with the peer was established).
    pub fn hello_now(&mut self, now: Instant, h: StreamHandle) {
        if let Some(Entry {
            side:
                Side::Writer {
                    next_hello: Some(t),
                    ..
                },
            ..
        }) = self.streams.get_mut(&h)
        {
            if *t > now {
                self.hellos.remove(&(*t, h));
                *t = now;
                self.hellos.insert((now, h));
            }
        }
    }

    /// True while a writer stream's HELLO is unanswered.
    pub fn is_opening(&self, h: StreamHandle) -> bool {
        matches!(
            self.streams.get(&h),
            Some(Entry {
                side: Side::Writer {
                    next_hello: Some(_),
                    ..
                },
                ..
            })
        )
    }

    /// Forgets a stream of either side.
    pub fn close(&mut self, h: StreamHandle) {
        self.remove(h);
    }

    fn remove(&mut self, h: StreamHandle) {
        let Some(e) = self.streams.remove(&h) else {
            return;
        };
        self.routes.remove(&e.key);
        match e.side {
            Side::Writer { next_hello, .. } => {
                if let Some(t) = next_hello {
                    self.hellos.remove(&(t, h));
                }
            }
            Side::Reader { .. } => {
                let ip = e.key.0.ip();
                self.readers -= 1;
                if let Some(n) = self.per_peer.get_mut(&ip) {
                    *n -= 1;
                    if *n == 0 {
                        self.per_peer.remove(&ip);
                    }
                }
                self.half_open.remove(&h);
                if let Some(set) = self.half_open_of.get_mut(&ip) {
                    set.remove(&h);
                    if set.is_empty() {
                        self.half_open_of.remove(&ip);
                    }
                }
            }
        }
    }

    /// Advances time: closes reader streams idle for
    /// [`EndpointConfig::idle_timeout`].
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(scan) = self.next_idle_scan else {
            return;
        };
        if now < scan {
            return;
        }
        let limit = self.cfg.idle_timeout;
        let idle: Vec<StreamHandle> = self
            .streams
            .iter()
            .filter_map(|(h, e)| match e.side {
                Side::Reader { last_rx, .. } if now.saturating_duration_since(last_rx) >= limit => {
                    Some(*h)
                }
                _ => None,
            })
            .collect();
        for h in idle {
            self.remove(h);
            self.events
                .push_back(EndpointEvent::Closed(h, CloseReason::Idle));
        }
        self.next_idle_scan = (self.readers > 0).then(|| now + IDLE_SCAN);
    }

    /// Writes the next HELLO due at `now` into `out` (cleared first; its
    /// capacity is reused) and says where it goes.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<Transmit> {
        let &(t, h) = self.hellos.first()?;
        if t > now {
            return None;
        }
        self.hellos.pop_first();
        let Some(Entry {
            key,
            side: Side::Writer { hello, next_hello },
        }) = self.streams.get_mut(&h)
        else {
            return None;
        };
        let next = now + self.cfg.hello_interval;
        *next_hello = Some(next);
        self.hellos.insert((next, h));
        encode_hello_into(out, key.1, hello);
        Some(Transmit {
            to: key.0,
            stream: h,
        })
    }

    /// When to call [`Endpoint::handle_timeout`] or
    /// [`Endpoint::poll_transmit`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let hello = self.hellos.first().map(|&(t, _)| t);
        match (hello, self.next_idle_scan) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<EndpointEvent> {
        self.events.pop_front()
    }

    /// Counters.
    pub fn stats(&self) -> EndpointStats {
        EndpointStats {
            writers: self.streams.len() - self.readers,
            readers: self.readers,
            half_open: self.half_open.len(),
            ..self.stats
        }
    }
}
