//! Host discovery through the leader: what the leader keeps of the
//! discovery datagrams it accepted (to give a new follower everything at
//! once) and the bounded queue of bytes toward each follower.
//!
//! Every runtime of the election keeps the cache, follower or leader, so a
//! follower that becomes leader has it already. Only the newest revision
//! of each participant is kept: its announcement parts, its latest
//! heartbeat and its certificate chunks, verbatim (a signature stays its
//! owner's; every follower checks it again).

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;

use ferry_wire::beacon::{peek, PeekKind};
use ferry_wire::leader::{Fed, FedVia, Frame};
use ferry_wire::ParticipantId;

/// Most participants the cache keeps (others are relayed, not kept).
pub const MAX_CACHED_PARTICIPANTS: usize = 4096;
/// Most bytes the cache keeps in all.
pub const MAX_CACHED_BYTES: usize = 32 << 20;
/// Most announcement parts kept per participant.
const MAX_CACHED_PARTS: u16 = 64;
/// Most certificate chunks kept per participant (a certificate is at most
/// 10 KiB in 1 KiB chunks).
const MAX_CREDENTIAL_CHUNKS: usize = 11;
/// Bytes queued toward one follower before it is dropped (it reconnects
/// and gets a fresh snapshot): a follower that stopped reading does not
/// grow its leader's memory.
pub const MAX_QUEUED: usize = 8 << 20;

/// What the cache keeps of one participant.
struct Kept {
    from: SocketAddr,
    via: FedVia,
    revision: u32,
    parts: Vec<Option<Vec<u8>>>,
    heartbeat: Option<Vec<u8>>,
    credentials: Vec<(u16, Vec<u8>)>,
}

impl Kept {
    fn bytes(&self) -> usize {
        self.parts.iter().flatten().map(Vec::len).sum::<usize>()
            + self.heartbeat.as_ref().map_or(0, Vec::len)
            + self.credentials.iter().map(|c| c.1.len()).sum::<usize>()
    }
}

/// The newest discovery datagrams of every participant this runtime knows.
#[derive(Default)]
pub(crate) struct FeedCache {
    by: HashMap<ParticipantId, Kept>,
    bytes: usize,
}

impl FeedCache {
    /// Takes an accepted datagram; its sender when it is to be relayed to
    /// followers (requests for one participant's records are not: they
    /// concern the runtime they were sent to). Everything else is relayed, duplicates
    /// included: leaving out what followers had seen made a 25-host fleet
    /// never complete (`docs/design/host-discovery.md`, "Stage 0").
    pub fn keep(&mut self, f: &Fed<'_>) -> Option<ParticipantId> {
        let p = peek(f.datagram)?;
        let id = p.participant;
        match p.kind {
            PeekKind::Request { target } => return (target == ParticipantId(0)).then_some(id),
            PeekKind::Bye => {
                self.forget(id);
                return Some(id);
            }
            _ => {}
        }
        if !self.by.contains_key(&id) && self.by.len() >= MAX_CACHED_PARTICIPANTS {
            return Some(id);
        }
        let k = self.by.entry(id).or_insert_with(|| Kept {
            from: f.from,
            via: f.via,
            revision: 0,
            parts: Vec::new(),
            heartbeat: None,
            credentials: Vec::new(),
        });
        let before = k.bytes();
        k.from = f.from;
        k.via = f.via;
        let datagram = f.datagram.to_vec();
        match p.kind {
            PeekKind::Announce {
                revision,
                part,
                parts,
            } if parts <= MAX_CACHED_PARTS && part < parts => {
                if revision != k.revision || k.parts.len() != parts as usize {
                    k.revision = revision;
                    k.parts = vec![None; parts as usize];
                }
                k.parts[part as usize] = Some(datagram);
            }
            PeekKind::Heartbeat { .. } => k.heartbeat = Some(datagram),
            PeekKind::Credential { offset } => {
                if let Some(c) = k.credentials.iter_mut().find(|c| c.0 == offset) {
                    c.1 = datagram;
                } else if k.credentials.len() < MAX_CREDENTIAL_CHUNKS {
                    k.credentials.push((offset, datagram));
                }
            }
            _ => {}
        }
        let after = k.bytes();
        self.bytes = self.bytes + after - before;
        if self.bytes > MAX_CACHED_BYTES {
            // Over budget: this participant is relayed, not kept.
            self.forget(id);
        }
        Some(id)
    }

    /// The participant left (its lease ran out, or it said bye).
    pub fn forget(&mut self, id: ParticipantId) {
        if let Some(k) = self.by.remove(&id) {
            self.bytes -= k.bytes();
        }
    }

    /// Participants kept.
    pub fn len(&self) -> usize {
        self.by.len()
    }

    /// Everything kept, as feed frames appended to `out`, but what
    /// `except` (the follower itself) sent: per participant its
    /// certificate, its announcement, then its heartbeat.
    pub fn snapshot(&self, except: ParticipantId, out: &mut Vec<u8>) {
        for (id, k) in &self.by {
            if *id == except {
                continue;
            }
            let datagrams = k
                .credentials
                .iter()
                .map(|c| &c.1)
                .chain(k.parts.iter().flatten())
                .chain(k.heartbeat.iter());
            for d in datagrams {
                Frame::Feed(Fed {
                    via: k.via,
                    from: k.from,
                    datagram: d,
                })
                .encode_into(out);
            }
        }
    }
}

/// Bytes on their way to one follower.
pub(crate) struct Outq {
    /// The follower (its hello).
    pub follower: ParticipantId,
    stream: UnixStream,
    buf: Vec<u8>,
    sent: usize,
    /// Dropped for not reading (over [`MAX_QUEUED`]) or a failed write.
    pub broken: bool,
}

impl Outq {
    pub fn new(follower: ParticipantId, stream: UnixStream) -> Self {
        Outq {
            follower,
            stream,
            buf: Vec::new(),
            sent: 0,
            broken: false,
        }
    }

    /// Queues frames built by `f` (nothing once broken; over the bound the
    /// follower is cut off).
    pub fn push(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        if self.broken {
            return;
        }
        f(&mut self.buf);
        if self.buf.len() - self.sent > MAX_QUEUED {
            tracing::warn!(
                "host leader: follower {} reads its discovery feed too slowly ({} MiB queued): \
                 dropped (it reconnects and gets a fresh copy)",
                self.follower,
                MAX_QUEUED >> 20
            );
            self.cut();
        }
    }

    /// Writes what the socket takes; true when bytes remain queued.
    pub fn flush(&mut self) -> bool {
        while !self.broken && self.sent < self.buf.len() {
            match self.stream.write(&self.buf[self.sent..]) {
                Ok(0) => self.cut(),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.cut(),
            }
        }
        if self.sent == self.buf.len() {
            self.buf.clear();
            self.sent = 0;
        } else if self.sent > (1 << 20) {
            self.buf.drain(..self.sent);
            self.sent = 0;
        }
        !self.broken && self.sent < self.buf.len()
    }

    fn cut(&mut self) {
        self.broken = true;
        self.buf = Vec::new();
        self.sent = 0;
        // The follower's end reads the end of the stream and elects again.
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_wire::beacon::{Beacon, BeaconBody, ParticipantInfo};

    fn hb(p: u64, revision: u32) -> Vec<u8> {
        Beacon {
            domain: 0,
            participant: ParticipantId(p),
            body: BeaconBody::Heartbeat {
                revision,
                lease_ms: 3000,
                greeting: false,
            },
        }
        .encode()
    }

    fn parts(p: u64, revision: u32, n: usize) -> Vec<Vec<u8>> {
        let info = ParticipantInfo {
            host_id: 1,
            net_id: 1,
            pid: 1,
            lease_ms: 3000,
            name: "x".repeat(300),
            locators: vec![],
        };
        let records: Vec<_> = (0..n as u32)
            .map(|i| {
                ferry_wire::beacon::Record::Node(ferry_wire::beacon::NodeRecord {
                    id: i,
                    name: "n".repeat(200),
                    namespace: "/".into(),
                })
            })
            .collect();
        Beacon::pack_announce(0, ParticipantId(p), &info, revision, &records, 1472)
    }

    fn keep(c: &mut FeedCache, d: &[u8]) -> bool {
        c.keep(&fed(d)).is_some()
    }

    fn fed(d: &[u8]) -> Fed<'_> {
        Fed {
            via: FedVia::Multicast,
            from: "10.0.0.1:7400".parse().unwrap(),
            datagram: d,
        }
    }

    fn frames(bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = 0;
        while let Some((Frame::Feed(f), n)) = Frame::decode(&bytes[at..]).unwrap() {
            out.push(f.datagram.to_vec());
            at += n;
        }
        assert_eq!(at, bytes.len());
        out
    }

    #[test]
    fn keeps_the_newest_revision_and_forgets_on_bye() {
        let mut c = FeedCache::default();
        let old = parts(7, 1, 12);
        assert!(old.len() > 1);
        for d in &old {
            assert!(keep(&mut c, d));
        }
        assert!(keep(&mut c, &hb(7, 1)));
        let new = parts(7, 2, 3);
        for d in &new {
            keep(&mut c, d);
        }
        let h2 = hb(7, 2);
        keep(&mut c, &h2);
        let mut snap = Vec::new();
        c.snapshot(ParticipantId(1), &mut snap);
        let mut want = new.clone();
        want.push(h2);
        assert_eq!(
            frames(&snap),
            want,
            "only the newest revision, heartbeat last"
        );
        // The follower itself is left out of its own snapshot.
        let mut own = Vec::new();
        c.snapshot(ParticipantId(7), &mut own);
        assert!(own.is_empty());
        // A request for one runtime is not relayed; "greet me" is.
        let ask = |target| {
            Beacon {
                domain: 0,
                participant: ParticipantId(9),
                body: BeaconBody::Request {
                    target: ParticipantId(target),
                },
            }
            .encode()
        };
        assert!(!keep(&mut c, &ask(7)));
        assert!(keep(&mut c, &ask(0)));
        let bye = Beacon {
            domain: 0,
            participant: ParticipantId(7),
            body: BeaconBody::Bye,
        }
        .encode();
        assert!(keep(&mut c, &bye));
        assert_eq!((c.len(), c.bytes), (0, 0));
        assert!(!keep(&mut c, b"garbage"));
    }

    #[test]
    fn memory_stays_bounded_whatever_is_fed() {
        let mut c = FeedCache::default();
        for p in 0..(MAX_CACHED_PARTICIPANTS as u64 + 100) {
            keep(&mut c, &hb(p + 1, 1));
        }
        assert_eq!(c.len(), MAX_CACHED_PARTICIPANTS);
        let mut c = FeedCache::default();
        let big = parts(1, 1, 60);
        let per: usize = big.iter().map(Vec::len).sum();
        let n = MAX_CACHED_BYTES / per + 100;
        assert!(n < MAX_CACHED_PARTICIPANTS);
        for p in 1..=n as u64 {
            for d in &big {
                let mut d = d.clone();
                d[8..16].copy_from_slice(&p.to_le_bytes());
                keep(&mut c, &d);
                assert!(c.bytes <= MAX_CACHED_BYTES);
            }
        }
        assert!(c.bytes > MAX_CACHED_BYTES / 2, "it keeps up to its budget");
    }

    #[test]
    fn a_follower_that_stops_reading_is_cut_off() {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut q = Outq::new(ParticipantId(3), a);
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..(MAX_QUEUED >> 20) + 2 {
            q.push(|out| out.extend_from_slice(&chunk));
            q.flush();
        }
        assert!(q.broken);
        assert!(!q.flush());
        drop(b);
    }
}
