//! The connection segment: one per writer→reader pair, created by the writer,
//! mapped read-write by both.
//!
//! - **Submission ring** (writer → reader): entries name a slot of the
//!   writer's pool plus the sample's sequence, length and source time, and
//!   carry a *mark* (the ring index + 1), written last: the reader polls the
//!   mark of the entry at `head`, not `tail`, so one cache line brings it
//!   both the news and the entry, and `tail` stays on the writer's side.
//!   The reader claims an entry by advancing `head` with a CAS; under keep_last
//!   a full ring lets the writer claim the *oldest* entry the same way (the
//!   reader's CAS then fails and it moves on), so a slow reader loses its
//!   oldest samples, counted in `dropped`, and the writer never blocks.
//!   Entries are read before the CAS; a successful CAS proves nobody
//!   overwrote them meanwhile (head only grows, and the writer reuses an
//!   index only after head has passed it).
//! - **Return ring** (reader → writer, single producer per side): slots the
//!   reader is done with. The writer only accepts returns of slots it has
//!   out on this connection, so a confused reader cannot free another's.
//! - Futex words: `space` (bumped by the reader after each claim; a keep_all
//!   writer waits on it when the ring is full) and `closed`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::segment::{Segment, ShmError};
use parking_lot::Mutex;

// "ferryco3": layout 3 (one marked entry per cache line); a peer of
// another layout fails the attach instead of misreading the rings.
const MAGIC: u64 = 0x6665_7272_7963_6f33;
const HEADER: usize = 384;
/// One submission entry per cache line (the reader polls the line of the
/// entry at its head; nothing else shares it).
const ENTRY: usize = 64;

// Header offsets (each hot counter on its own cache line).
const O_MAGIC: usize = 0;
const O_SUB_CAP: usize = 8;
const O_RET_CAP: usize = 16;
const O_DROPPED: usize = 24;
const O_CLOSED: usize = 40;
// The reader bumps `space` on every claim: kept off the line of `closed`,
// which the writer reads on every send.
const O_SPACE: usize = 320;
const O_WRITER_WAITING: usize = 324;
const O_SUB_HEAD: usize = 64;
const O_SUB_TAIL: usize = 128;
const O_RET_HEAD: usize = 192;
const O_RET_TAIL: usize = 256;

/// One submitted sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Sequence number of the sample.
    pub seq: u64,
    /// Slot id in the writer's pool (generation << 32 | index).
    pub slot: u64,
    /// Bytes used in the slot.
    pub len: u64,
    /// Source time, ns.
    pub stamp: u64,
}

/// What a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// Queued.
    Pushed,
    /// Queued after claiming the oldest entry (keep_last overflow), whose
    /// slot the writer gets back.
    Overflowed(Entry),
    /// Full and overflow not allowed (keep_all).
    Full,
}

/// A mapped connection segment.
pub struct Rings {
    seg: Segment,
    sub_cap: u64,
    ret_cap: u64,
    /// Writer: serializes pushes (publishers may send from several threads).
    push_lock: Mutex<()>,
    /// Writer: the submission head as last read. Head only grows, so a ring
    /// with room by this value has room: the shared line is read again only
    /// when it looks full.
    seen_head: AtomicU64,
    /// Reader: the same for the return ring's head.
    seen_ret_head: AtomicU64,
}

impl Rings {
    /// Bytes a segment with these capacities needs.
    fn size(sub_cap: usize, ret_cap: usize) -> usize {
        HEADER + sub_cap * ENTRY + ret_cap * 8
    }

    /// Creates connection segment `name` (writer side).
    pub fn create(name: &str, sub_cap: usize, ret_cap: usize) -> Result<Rings, ShmError> {
        let sub_cap = sub_cap.max(1);
        let ret_cap = ret_cap.max(1);
        let seg = Segment::create(name, Self::size(sub_cap, ret_cap))?;
        let r = Rings {
            push_lock: Mutex::new(()),
            seen_head: AtomicU64::new(0),
            seen_ret_head: AtomicU64::new(0),
            seg,
            sub_cap: sub_cap as u64,
            ret_cap: ret_cap as u64,
        };
        r.u64(O_SUB_CAP).store(sub_cap as u64, Ordering::Relaxed);
        r.u64(O_RET_CAP).store(ret_cap as u64, Ordering::Relaxed);
        r.u64(O_MAGIC).store(MAGIC, Ordering::Release);
        Ok(r)
    }

    /// Opens connection segment `name` (reader side), validating its layout.
    pub fn open(name: &str) -> Result<Rings, ShmError> {
        let seg = Segment::open(name, true)?;
        let bad = |why: &str| ShmError::Open {
            name: name.to_string(),
            why: why.to_string(),
        };
        if seg.len() < HEADER {
            return Err(bad("too short for a connection header"));
        }
        let magic = seg.at::<AtomicU64>(O_MAGIC).load(Ordering::Acquire);
        if magic != MAGIC {
            return Err(bad("not a ferry connection segment"));
        }
        let sub_cap = seg.at::<AtomicU64>(O_SUB_CAP).load(Ordering::Relaxed);
        let ret_cap = seg.at::<AtomicU64>(O_RET_CAP).load(Ordering::Relaxed);
        let need = (sub_cap as u128) * ENTRY as u128 + (ret_cap as u128) * 8 + HEADER as u128;
        if sub_cap == 0 || ret_cap == 0 || need > seg.len() as u128 {
            return Err(bad("ring capacities do not fit the segment"));
        }
        Ok(Rings {
            push_lock: Mutex::new(()),
            seen_head: AtomicU64::new(0),
            seen_ret_head: AtomicU64::new(0),
            seg,
            sub_cap,
            ret_cap,
        })
    }

    /// The segment's name.
    pub fn name(&self) -> &str {
        self.seg.name()
    }

    fn u64(&self, off: usize) -> &AtomicU64 {
        self.seg.at::<AtomicU64>(off)
    }

    fn u32(&self, off: usize) -> &AtomicU32 {
        self.seg.at::<AtomicU32>(off)
    }

    fn entry_field(&self, index: u64, field: usize) -> &AtomicU64 {
        self.u64(HEADER + (index % self.sub_cap) as usize * ENTRY + field * 8)
    }

    /// Entry fields: the mark, then the entry.
    const MARK: usize = 0;

    fn read_entry(&self, index: u64) -> Entry {
        Entry {
            seq: self.entry_field(index, 1).load(Ordering::Relaxed),
            slot: self.entry_field(index, 2).load(Ordering::Relaxed),
            len: self.entry_field(index, 3).load(Ordering::Relaxed),
            stamp: self.entry_field(index, 4).load(Ordering::Relaxed),
        }
    }

    /// Whether entry `index` is published (its mark is `index + 1`; before
    /// that it holds the mark of the entry a ring earlier, or 0).
    fn published(&self, index: u64) -> bool {
        self.entry_field(index, Self::MARK).load(Ordering::Acquire) == index.wrapping_add(1)
    }

    fn ret_cell(&self, index: u64) -> &AtomicU64 {
        self.u64(HEADER + self.sub_cap as usize * ENTRY + (index % self.ret_cap) as usize * 8)
    }

    /// Writer: queues `e`; with `overflow` a full ring gives up its oldest
    /// entry instead of refusing. `Err` when the reader corrupted the ring.
    pub fn push(&self, e: Entry, overflow: bool) -> Result<Push, Corrupt> {
        let _one_at_a_time = self.push_lock.lock();
        let tail = self.u64(O_SUB_TAIL).load(Ordering::Relaxed);
        let mut out = Push::Pushed;
        let seen = self.seen_head.load(Ordering::Relaxed);
        // Room by the head last seen (a lower bound): no shared read.
        let room = tail.wrapping_sub(seen) < self.sub_cap;
        loop {
            if room {
                break;
            }
            let head = self.u64(O_SUB_HEAD).load(Ordering::Acquire);
            self.seen_head.store(head, Ordering::Relaxed);
            let used = tail.wrapping_sub(head);
            if used > self.sub_cap {
                return Err(Corrupt);
            }
            if used < self.sub_cap {
                break;
            }
            if !overflow {
                return Ok(Push::Full);
            }
            let old = self.read_entry(head);
            if self
                .u64(O_SUB_HEAD)
                .compare_exchange(head, head + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.u64(O_DROPPED).fetch_add(1, Ordering::Relaxed);
                out = Push::Overflowed(old);
                break;
            }
        }
        self.entry_field(tail, 1).store(e.seq, Ordering::Relaxed);
        self.entry_field(tail, 2).store(e.slot, Ordering::Relaxed);
        self.entry_field(tail, 3).store(e.len, Ordering::Relaxed);
        self.entry_field(tail, 4).store(e.stamp, Ordering::Relaxed);
        self.entry_field(tail, Self::MARK)
            .store(tail + 1, Ordering::Release);
        self.u64(O_SUB_TAIL).store(tail + 1, Ordering::Release);
        Ok(out)
    }

    /// Reader: claims the oldest entry, if any.
    pub fn pop(&self) -> Option<Entry> {
        loop {
            let head = self.u64(O_SUB_HEAD).load(Ordering::Acquire);
            if !self.published(head) {
                // Empty — unless a keep_last writer claimed `head` meanwhile
                // (it moves head before it overwrites an entry): look again.
                if self.u64(O_SUB_HEAD).load(Ordering::Acquire) == head {
                    return None;
                }
                continue;
            }
            let e = self.read_entry(head);
            if self
                .u64(O_SUB_HEAD)
                .compare_exchange(head, head + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.u32(O_SPACE).fetch_add(1, Ordering::SeqCst);
                if self.u32(O_WRITER_WAITING).load(Ordering::SeqCst) != 0 {
                    crate::futex::wake_all(self.u32(O_SPACE));
                }
                return Some(e);
            }
        }
    }

    /// Reader: whether an entry is waiting.
    pub fn has_entries(&self) -> bool {
        self.published(self.u64(O_SUB_HEAD).load(Ordering::Acquire))
    }

    /// Entries the writer had to drop because this reader fell behind.
    pub fn dropped(&self) -> u64 {
        self.u64(O_DROPPED).load(Ordering::Relaxed)
    }

    /// Writer (keep_all): waits up to `timeout` for the reader to claim an
    /// entry. Returns whether there is room now.
    pub fn wait_for_space(&self, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let seen = self.u32(O_SPACE).load(Ordering::SeqCst);
            self.u32(O_WRITER_WAITING).store(1, Ordering::SeqCst);
            let tail = self.u64(O_SUB_TAIL).load(Ordering::Relaxed);
            let head = self.u64(O_SUB_HEAD).load(Ordering::Acquire);
            if tail.wrapping_sub(head) < self.sub_cap || self.is_closed() {
                self.u32(O_WRITER_WAITING).store(0, Ordering::SeqCst);
                return tail.wrapping_sub(head) < self.sub_cap;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                self.u32(O_WRITER_WAITING).store(0, Ordering::SeqCst);
                return false;
            }
            crate::futex::wait(
                self.u32(O_SPACE),
                seen,
                (deadline - now).min(std::time::Duration::from_millis(50)),
            );
        }
    }

    /// Reader: hands slot `slot` back. False when the return ring is full
    /// (keep it and retry).
    pub fn give_back(&self, slot: u64) -> bool {
        let tail = self.u64(O_RET_TAIL).load(Ordering::Relaxed);
        if tail.wrapping_sub(self.seen_ret_head.load(Ordering::Relaxed)) >= self.ret_cap {
            // Looks full by the head last seen: read the shared one.
            let head = self.u64(O_RET_HEAD).load(Ordering::Acquire);
            self.seen_ret_head.store(head, Ordering::Relaxed);
            if tail.wrapping_sub(head) >= self.ret_cap {
                return false;
            }
        }
        self.ret_cell(tail).store(slot, Ordering::Relaxed);
        self.u64(O_RET_TAIL).store(tail + 1, Ordering::Release);
        true
    }

    /// Writer: takes back at most one ring's worth of returned slots.
    pub fn take_returns(&self, out: &mut Vec<u64>) {
        let head = self.u64(O_RET_HEAD).load(Ordering::Relaxed);
        let tail = self.u64(O_RET_TAIL).load(Ordering::Acquire);
        let n = tail.wrapping_sub(head).min(self.ret_cap);
        for i in 0..n {
            out.push(self.ret_cell(head + i).load(Ordering::Relaxed));
        }
        self.u64(O_RET_HEAD).store(head + n, Ordering::Release);
    }

    /// Marks the connection closed (either side) and wakes a waiting writer.
    pub fn close(&self) {
        self.u32(O_CLOSED).store(1, Ordering::SeqCst);
        crate::futex::wake_all(self.u32(O_SPACE));
    }

    /// Whether either side closed it.
    pub fn is_closed(&self) -> bool {
        self.u32(O_CLOSED).load(Ordering::SeqCst) != 0
    }
}

/// The reader left the ring in an impossible state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the reader corrupted the connection ring")]
pub struct Corrupt;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::name;

    fn e(seq: u64) -> Entry {
        Entry {
            seq,
            slot: seq * 10,
            len: seq,
            stamp: 7,
        }
    }

    #[test]
    fn fifo_overflow_drops_oldest_and_keep_all_refuses() {
        let w = Rings::create(&name('t', &format!("ring{}", line!())), 4, 8).unwrap();
        let r = Rings::open(w.name()).unwrap();
        for s in 1..=4 {
            assert_eq!(w.push(e(s), false), Ok(Push::Pushed));
        }
        assert_eq!(w.push(e(5), false), Ok(Push::Full));
        assert_eq!(w.push(e(5), true), Ok(Push::Overflowed(e(1))));
        assert_eq!(r.dropped(), 1);
        let got: Vec<u64> = std::iter::from_fn(|| r.pop()).map(|x| x.seq).collect();
        assert_eq!(got, vec![2, 3, 4, 5]);
        assert!(!r.has_entries());
        assert!(r.give_back(20) && r.give_back(30));
        let mut back = Vec::new();
        w.take_returns(&mut back);
        assert_eq!(back, vec![20, 30]);
    }

    #[test]
    fn a_mark_from_a_ring_earlier_never_reads_as_a_new_entry() {
        let w = Rings::create(&name('t', &format!("ring{}", line!())), 4, 4).unwrap();
        let r = Rings::open(w.name()).unwrap();
        assert!(!r.has_entries() && r.pop().is_none(), "fresh ring is empty");
        for s in 1..=40 {
            assert_eq!(w.push(e(s), false), Ok(Push::Pushed));
            assert!(r.has_entries());
            assert_eq!(r.pop(), Some(e(s)));
            // The next index still holds the mark of the entry 4 earlier.
            assert!(!r.has_entries() && r.pop().is_none(), "after {s}");
        }
        // Overflow wraps the writer past the reader: only the last 4 remain.
        for s in 41..=50 {
            assert!(w.push(e(s), true).is_ok());
        }
        let got: Vec<u64> = std::iter::from_fn(|| r.pop()).map(|x| x.seq).collect();
        assert_eq!(got, vec![47, 48, 49, 50]);
        assert!(!r.has_entries());
    }

    #[test]
    fn concurrent_overflow_never_hands_out_an_entry_twice_or_torn() {
        let w = Rings::create(&name('t', &format!("ring{}", line!())), 8, 8).unwrap();
        let r = Rings::open(w.name()).unwrap();
        let n = 200_000u64;
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            let t = std::time::Instant::now();
            while got.last() != Some(&n) && t.elapsed() < std::time::Duration::from_secs(30) {
                if let Some(x) = r.pop() {
                    assert_eq!(x, e(x.seq), "torn entry");
                    got.push(x.seq);
                }
            }
            got
        });
        let mut dropped = Vec::new();
        for s in 1..=n {
            if let Push::Overflowed(old) = w.push(e(s), true).unwrap() {
                assert_eq!(old, e(old.seq), "torn entry");
                dropped.push(old.seq);
            }
        }
        let got = reader.join().unwrap();
        assert!(got.windows(2).all(|p| p[0] < p[1]), "out of order or twice");
        let mut all: Vec<u64> = got.iter().chain(dropped.iter()).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (1..=n).collect::<Vec<_>>(), "each entry exactly once");
    }

    #[test]
    fn two_publishing_threads_never_share_a_ring_index() {
        let w = std::sync::Arc::new(
            Rings::create(&name('t', &format!("ring{}", line!())), 64, 8).unwrap(),
        );
        let r = Rings::open(w.name()).unwrap();
        let per = 20_000u64;
        let writers: Vec<_> = (0..2u64)
            .map(|t| {
                let w = w.clone();
                std::thread::spawn(move || {
                    for i in 0..per {
                        let seq = t * per + i + 1;
                        while w.push(e(seq), false) == Ok(Push::Full) {
                            std::hint::spin_loop();
                        }
                    }
                })
            })
            .collect();
        let mut got = Vec::new();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while got.len() < (2 * per) as usize && std::time::Instant::now() < end {
            match r.pop() {
                Some(x) => {
                    assert_eq!(x, e(x.seq), "torn entry");
                    got.push(x.seq);
                }
                None => std::hint::spin_loop(),
            }
        }
        writers.into_iter().for_each(|t| t.join().unwrap());
        got.sort_unstable();
        assert_eq!(
            got,
            (1..=2 * per).collect::<Vec<_>>(),
            "each entry exactly once"
        );
    }

    #[test]
    fn a_reader_corrupting_head_is_detected() {
        let w = Rings::create(&name('t', &format!("ring{}", line!())), 4, 4).unwrap();
        let r = Rings::open(w.name()).unwrap();
        r.u64(O_SUB_HEAD).store(1_000, Ordering::SeqCst);
        // The writer reads the shared head only when its last view says the
        // ring is full: the corruption is found within one ring's worth of
        // pushes (which only the corrupting reader could misread).
        for i in 1..=4 {
            assert!(w.push(e(i), true).is_ok());
        }
        assert_eq!(w.push(e(5), true), Err(Corrupt));
        assert!(Rings::open("ferry.t.1.1.missing").is_err());
    }
}
