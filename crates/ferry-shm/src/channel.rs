//! Writer and reader ends built from a pool, connection rings and doorbells.
//!
//! A [`Writer`] owns one pool and any number of [`WriterConn`]s (one per
//! reader). Publishing allocates a slot, fills it once, and pushes its id to
//! every connection; each connection holds one reference until the reader
//! gives the slot back (or the writer claims it back on overflow, or the
//! connection closes). A [`ReaderConn`] claims entries and hands out
//! [`ShmSample`]s: read-only views of the writer's memory that give their
//! slot back when the last clone drops.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::pool::{data_name, slot_parts, DataView, Pool, PoolError};
use crate::ring::{Corrupt, Entry, Push, Rings};
use crate::segment::{self, Segment, ShmError};

/// Why a send on one connection failed.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// keep_all: the reader did not make room within the blocking bound.
    #[error("reader made no room for {0:?} (keep_all)")]
    Blocked(Duration),
    /// The connection is closed (by either side).
    #[error("shared-memory connection closed")]
    Closed,
    /// The reader broke the ring; the connection is closed.
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
}

/// A published sample in the writer's pool (holds the writer's reference).
pub struct Published {
    writer: Writer,
    slot: u64,
    ptr: *const u8,
    len: usize,
}

// SAFETY: `ptr` points into a shared mapping that lives as long as the slot
// is held (by this value), and nobody writes a published slot.
unsafe impl Send for Published {}
unsafe impl Sync for Published {}

impl Published {
    /// The slot id.
    pub fn slot(&self) -> u64 {
        self.slot
    }

    /// Bytes used.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty sample.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl AsRef<[u8]> for Published {
    /// The sample's bytes in the writer's own mapping.
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the slot is held by `self` (so mapped), `len` fits in it,
        // and a published slot is never written again while held.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        self.writer.pool.lock().release(self.slot);
    }
}

/// A slot lent to the writer's user: filled in place, then committed as a
/// [`Published`] sample (no copy), or given back by dropping it.
pub struct Loan {
    writer: Writer,
    slot: u64,
    ptr: *mut u8,
    capacity: usize,
    committed: bool,
}

// SAFETY: the loan is the slot's only holder; the mapping lives while it is
// held.
unsafe impl Send for Loan {}

impl Loan {
    /// Bytes that can be written (the slot's full size: at least what was
    /// asked for).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The slot's bytes as written so far.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: as for `as_mut_slice`; shared access through `&self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.capacity) }
    }

    /// The slot's bytes, writable in place (contents are whatever the slot
    /// held before: write every byte you publish).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the loan holds the slot's only reference, so nobody else
        // reads or writes these bytes; they are mapped while it is held.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.capacity) }
    }

    /// Turns the first `len` bytes into a sample ready to send.
    pub fn commit(mut self, len: usize) -> Result<Published, PoolError> {
        if len > self.capacity {
            return Err(PoolError::TooLarge(len));
        }
        self.committed = true;
        Ok(Published {
            writer: self.writer.clone(),
            slot: self.slot,
            ptr: self.ptr,
            len,
        })
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        if !self.committed {
            self.writer.pool.lock().release(self.slot);
        }
    }
}

/// The writing side: a pool shared by all of this writer's connections.
#[derive(Clone)]
pub struct Writer {
    pool: Arc<Mutex<Pool>>,
    /// Its connections, to take returned slots back before the pool grows.
    conns: Arc<Mutex<Vec<Weak<ConnCore>>>>,
}

impl Writer {
    /// A writer whose pool may grow to `budget` bytes.
    pub fn new(tag: &str, budget: usize) -> Writer {
        Writer {
            pool: Arc::new(Mutex::new(Pool::new(tag, budget))),
            conns: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Prefix of the pool's data segment names (readers need it).
    pub fn data_prefix(&self) -> String {
        self.pool.lock().prefix().to_string()
    }

    /// Lends a fresh slot of at least `len` bytes to fill in place.
    pub fn loan(&self, len: usize) -> Result<Loan, PoolError> {
        // Readers' returns are taken back only when the pool would otherwise
        // grow: reading a return ring costs a cache line its reader wrote.
        let mut pool = self.pool.lock();
        if pool.must_grow(len) {
            drop(pool);
            self.reclaim_all();
            pool = self.pool.lock();
        }
        let slot = pool.alloc(len)?;
        let Some((ptr, capacity)) = pool.slot_ptr(slot) else {
            pool.release(slot);
            return Err(PoolError::TooLarge(len));
        };
        // The loan after this one gets the next free slot (LIFO; a reader
        // read it last): its first line comes over while this one is
        // filled and sent, not when that one is written.
        if let Some(p) = pool.next_free() {
            crate::hint::prefetch_for_write(p);
        }
        drop(pool);
        Ok(Loan {
            writer: self.clone(),
            slot,
            ptr,
            capacity,
            committed: false,
        })
    }

    /// Writes a sample of `len` bytes into a fresh slot through `fill`.
    pub fn publish(
        &self,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<Published, PoolError> {
        let mut loan = self.loan(len)?;
        fill(&mut loan.as_mut_slice()[..len]);
        loan.commit(len)
    }

    /// Takes back what the readers of every connection returned.
    fn reclaim_all(&self) {
        let live: Vec<Arc<ConnCore>> = {
            let mut conns = self.conns.lock();
            conns.retain(|c| c.strong_count() > 0);
            conns.iter().filter_map(Weak::upgrade).collect()
        };
        for c in live {
            c.reclaim(&self.pool);
        }
    }

    /// Opens a connection to one reader: `depth` queued samples at most.
    pub fn connect(&self, tag: &str, depth: usize) -> Result<WriterConn, ShmError> {
        let name = segment::name('c', tag);
        // Returns may pile up while the reader's user holds samples.
        let rings = Rings::create(&name, depth, depth * 2 + 64)?;
        let core = Arc::new(ConnCore {
            rings,
            outstanding: Mutex::new(SlotMap::default()),
        });
        self.conns.lock().push(Arc::downgrade(&core));
        Ok(WriterConn {
            writer: self.clone(),
            core,
        })
    }

    /// (generations, slots in use) of the pool.
    pub fn usage(&self) -> (usize, usize) {
        self.pool.lock().usage()
    }
}

/// Slots out on one connection before a send reads the return ring anyway
/// (otherwise returns are read only when the pool runs out of free slots).
/// 4: a stream cycles through a few warm slots; with 32, 64 KiB samples
/// spread over 2 MiB and event-driven round trips were measurably slower.
const RECLAIM_AT: usize = 4;

/// The rings of one connection and the slots out on it.
struct ConnCore {
    rings: Rings,
    /// Slots out on this connection (pushed, not yet given back), with how
    /// many times each.
    outstanding: Mutex<SlotMap<u32>>,
}

impl ConnCore {
    /// Takes back the slots the reader returned.
    fn reclaim(&self, pool: &Mutex<Pool>) {
        let mut back = Vec::new();
        self.rings.take_returns(&mut back);
        if back.is_empty() {
            return;
        }
        let mut out = self.outstanding.lock();
        let mut pool = pool.lock();
        for s in back {
            // Only slots we lent on this connection.
            if take(&mut out, s) {
                pool.release(s);
            }
        }
        // The next loan gets the slot freed last: fetch its line for
        // writing now (see `Writer::loan`).
        if let Some(p) = pool.next_free() {
            crate::hint::prefetch_for_write(p);
        }
    }
}

/// One writer → reader connection (writer side).
pub struct WriterConn {
    writer: Writer,
    core: Arc<ConnCore>,
}

impl WriterConn {
    /// The connection segment's name (the reader opens it).
    pub fn name(&self) -> &str {
        self.core.rings.name()
    }

    /// Takes back the slots the reader returned.
    pub fn reclaim(&self) {
        self.core.reclaim(&self.writer.pool);
    }

    /// Queues `p` for the reader. keep_last (`block` None) never waits: a
    /// full queue gives up its oldest sample. keep_all waits up to `block`
    /// for room, then fails.
    pub fn send(
        &self,
        p: &Published,
        seq: u64,
        stamp: u64,
        block: Option<Duration>,
    ) -> Result<(), SendError> {
        self.send_slot(p.slot, p.len, seq, stamp, block)
    }

    /// [`WriterConn::send`] by slot id and length; the caller holds the
    /// slot (a [`Published`], kept alive in whatever owns it) until this
    /// returns.
    pub fn send_slot(
        &self,
        slot: u64,
        len: usize,
        seq: u64,
        stamp: u64,
        block: Option<Duration>,
    ) -> Result<(), SendError> {
        if self.core.rings.is_closed() {
            return Err(SendError::Closed);
        }
        let e = Entry {
            seq,
            slot,
            len: len as u64,
            stamp,
        };
        // The reference must exist before the reader can see the entry.
        self.writer.pool.lock().retain(slot);
        *self.core.outstanding.lock().entry(slot).or_default() += 1;
        let undo = || {
            take(&mut self.core.outstanding.lock(), slot);
            self.writer.pool.lock().release(slot);
        };
        loop {
            match self.core.rings.push(e, block.is_none()) {
                Ok(Push::Pushed) => {
                    self.reclaim_if_due();
                    return Ok(());
                }
                Ok(Push::Overflowed(old)) => {
                    if take(&mut self.core.outstanding.lock(), old.slot) {
                        self.writer.pool.lock().release(old.slot);
                    }
                    self.reclaim_if_due();
                    return Ok(());
                }
                Ok(Push::Full) => {
                    let bound = block.unwrap_or_default();
                    if !self.core.rings.wait_for_space(bound) {
                        undo();
                        return Err(if self.core.rings.is_closed() {
                            SendError::Closed
                        } else {
                            SendError::Blocked(bound)
                        });
                    }
                }
                Err(c) => {
                    undo();
                    self.close();
                    return Err(c.into());
                }
            }
        }
    }

    /// Reads the return ring once more than [`RECLAIM_AT`] slots are out.
    /// After the push, not before: reading it costs cache lines the reader
    /// wrote, which then no longer delay the sample.
    fn reclaim_if_due(&self) {
        if self.core.outstanding.lock().len() > RECLAIM_AT {
            self.reclaim();
        }
    }

    /// Samples the reader lost by falling behind (keep_last).
    pub fn dropped(&self) -> u64 {
        self.core.rings.dropped()
    }

    /// Whether either side closed the connection.
    pub fn is_closed(&self) -> bool {
        self.core.rings.is_closed()
    }

    /// Closes it and takes back every slot still lent on it (the reader may
    /// be gone: its references die with it).
    pub fn close(&self) {
        self.core.rings.close();
        let out: Vec<(u64, u32)> = self.core.outstanding.lock().drain().collect();
        let mut pool = self.writer.pool.lock();
        for (s, n) in out {
            for _ in 0..n {
                pool.release(s);
            }
        }
    }
}

/// Hashes a slot id or generation by one multiplication (Fibonacci
/// hashing): ids are small integers this process chose, so a keyed hash
/// (SipHash, the default) buys nothing on this per-sample path.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Per-slot counts keyed by slot id.
type SlotMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Removes one count of `slot`; false if it was not out.
fn take(out: &mut SlotMap<u32>, slot: u64) -> bool {
    match out.get_mut(&slot) {
        Some(n) if *n > 1 => {
            *n -= 1;
            true
        }
        Some(_) => {
            out.remove(&slot);
            true
        }
        None => false,
    }
}

impl Drop for WriterConn {
    fn drop(&mut self) {
        self.close();
    }
}

/// Gives slots back to the writer, from whichever thread drops a sample.
struct Returner {
    rings: Rings,
    /// Slots whose return found the ring full: retried on the next return.
    pending: Mutex<Vec<u64>>,
}

impl Returner {
    fn give_back(&self, slot: u64) {
        let mut pending = self.pending.lock();
        if pending.is_empty() && self.rings.give_back(slot) {
            return;
        }
        pending.push(slot);
        let mut n = 0;
        while n < pending.len() && self.rings.give_back(pending[n]) {
            n += 1;
        }
        pending.drain(..n);
    }
}

/// A sample in the writer's shared memory, mapped read-only; the slot goes
/// back to the writer when it drops. To share it, wrap it once (e.g.
/// `bytes::Bytes::from_owner`): no allocation of its own per sample.
pub struct ShmSample {
    view: Arc<DataView>,
    index: usize,
    len: usize,
    slot: u64,
    returner: Arc<Returner>,
}

impl Drop for ShmSample {
    fn drop(&mut self) {
        self.returner.give_back(self.slot);
    }
}

impl AsRef<[u8]> for ShmSample {
    fn as_ref(&self) -> &[u8] {
        // Checked when the sample was made.
        self.view.slot(self.index, self.len).unwrap_or_default()
    }
}

impl std::ops::Deref for ShmSample {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_ref()
    }
}

/// One claimed sample.
pub struct Received {
    /// Sequence number.
    pub seq: u64,
    /// Source time, ns.
    pub stamp: u64,
    /// The bytes, in place.
    pub sample: ShmSample,
}

/// Why a reader could not take an entry.
#[derive(Debug, thiserror::Error)]
pub enum RecvError {
    /// The entry names a data segment that cannot be mapped.
    #[error(transparent)]
    Shm(#[from] ShmError),
    /// The entry's slot or length is outside its data segment.
    #[error("entry names slot {slot:#x} of {len} bytes, outside the writer's segment")]
    BadEntry {
        /// Slot id.
        slot: u64,
        /// Length.
        len: u64,
    },
}

/// One writer → reader connection (reader side).
pub struct ReaderConn {
    returner: Arc<Returner>,
    prefix: String,
    views: Mutex<HashMap<u32, Arc<DataView>, BuildHasherDefault<IdHasher>>>,
}

impl ReaderConn {
    /// Opens connection segment `name` of a writer whose data segments are
    /// named `data_prefix.<generation>`.
    pub fn open(name: &str, data_prefix: &str) -> Result<ReaderConn, ShmError> {
        if !data_prefix.starts_with(segment::PREFIX) || data_prefix.contains('/') {
            return Err(ShmError::Open {
                name: data_prefix.to_string(),
                why: "not a ferry data segment prefix".into(),
            });
        }
        Ok(ReaderConn {
            returner: Arc::new(Returner {
                rings: Rings::open(name)?,
                pending: Mutex::new(Vec::new()),
            }),
            prefix: data_prefix.to_string(),
            views: Mutex::new(HashMap::default()),
        })
    }

    /// Whether a sample is waiting.
    pub fn has_data(&self) -> bool {
        self.returner.rings.has_entries()
    }

    /// Claims the next sample, if any. A bad entry is given back and
    /// reported; the connection stays usable.
    pub fn try_recv(&self) -> Result<Option<Received>, RecvError> {
        let Some(e) = self.returner.rings.pop() else {
            return Ok(None);
        };
        let (gen, index) = slot_parts(e.slot);
        let view = {
            let mut views = self.views.lock();
            match views.get(&gen) {
                Some(v) => v.clone(),
                None => {
                    let v = match DataView::open(&data_name(&self.prefix, gen)) {
                        Ok(v) => Arc::new(v),
                        Err(err) => {
                            self.returner.give_back(e.slot);
                            return Err(err.into());
                        }
                    };
                    // Older generations are retired by the writer once
                    // free: drop our maps of them (held samples keep theirs).
                    views.retain(|g, _| *g > gen);
                    views.insert(gen, v.clone());
                    v
                }
            }
        };
        let len = usize::try_from(e.len).unwrap_or(usize::MAX);
        if view.slot(index, len).is_none() {
            self.returner.give_back(e.slot);
            return Err(RecvError::BadEntry {
                slot: e.slot,
                len: e.len,
            });
        }
        Ok(Some(Received {
            seq: e.seq,
            stamp: e.stamp,
            sample: ShmSample {
                view,
                index,
                len,
                slot: e.slot,
                returner: self.returner.clone(),
            },
        }))
    }

    /// Samples lost because this reader fell behind (keep_last).
    pub fn dropped(&self) -> u64 {
        self.returner.rings.dropped()
    }

    /// Whether either side closed the connection.
    pub fn is_closed(&self) -> bool {
        self.returner.rings.is_closed()
    }

    /// Closes the connection from the reader's side.
    pub fn close(&self) {
        self.returner.rings.close();
    }
}

/// A reader runtime's doorbell: writers ring it after queueing a sample; the
/// reader's delivery thread sleeps on it (futex) when every ring is empty.
pub struct Doorbell {
    seg: Segment,
}

const BELL_MAGIC: u64 = 0x6665_7272_7962_656c; // "ferrybel"

impl Doorbell {
    /// Creates this runtime's doorbell.
    pub fn create(tag: &str) -> Result<Doorbell, ShmError> {
        let seg = Segment::create(&segment::name('b', tag), 64)?;
        seg.at::<AtomicU64>(0).store(BELL_MAGIC, Ordering::Release);
        Ok(Doorbell { seg })
    }

    /// Opens a reader's doorbell (writer side).
    pub fn open(name: &str) -> Result<Doorbell, ShmError> {
        let seg = Segment::open(name, true)?;
        if seg.len() < 64 || seg.at::<AtomicU64>(0).load(Ordering::Acquire) != BELL_MAGIC {
            return Err(ShmError::Open {
                name: name.to_string(),
                why: "not a ferry doorbell".into(),
            });
        }
        Ok(Doorbell { seg })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.seg.name()
    }

    fn counter(&self) -> &AtomicU32 {
        self.seg.at::<AtomicU32>(8)
    }

    fn sleeping(&self) -> &AtomicU32 {
        self.seg.at::<AtomicU32>(12)
    }

    fn attach_pending(&self) -> &AtomicU32 {
        self.seg.at::<AtomicU32>(16)
    }

    /// Writer: a connection request waits on the reader's control socket;
    /// wakes the reader, which then accepts it at once.
    pub fn ring_attach(&self) {
        self.attach_pending().store(1, Ordering::SeqCst);
        self.ring();
    }

    /// Reader: whether a connection request was announced since the last
    /// call (then accept; otherwise the socket is only polled periodically,
    /// keeping a syscall off every wake-up).
    pub fn take_attach(&self) -> bool {
        self.attach_pending().load(Ordering::Relaxed) != 0
            && self.attach_pending().swap(0, Ordering::SeqCst) != 0
    }

    /// Writer: a sample was queued; wakes the reader if it sleeps.
    pub fn ring(&self) {
        self.counter().fetch_add(1, Ordering::SeqCst);
        if self.sleeping().load(Ordering::SeqCst) != 0 {
            crate::futex::wake_all(self.counter());
        }
    }

    /// Reader: sleeps up to `timeout` unless `ready()` (checked after
    /// announcing the sleep, so a ring in between is never lost).
    pub fn sleep(&self, timeout: Duration, ready: impl Fn() -> bool) {
        let seen = self.counter().load(Ordering::SeqCst);
        self.sleeping().store(1, Ordering::SeqCst);
        if !ready() {
            crate::futex::wait(self.counter(), seen, timeout);
        }
        self.sleeping().store(0, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(l: u32) -> String {
        format!("chan{l}")
    }

    #[test]
    fn samples_arrive_byte_exact_and_slots_come_back() {
        let w = Writer::new(&tag(line!()), 64 << 20);
        let c = w.connect(&tag(line!()), 8).unwrap();
        let r = ReaderConn::open(c.name(), &w.data_prefix()).unwrap();
        for (i, len) in [0usize, 1, 100, 4096, 5000, 3 << 20]
            .into_iter()
            .enumerate()
        {
            let p = w
                .publish(len, |b| {
                    b.iter_mut()
                        .enumerate()
                        .for_each(|(j, x)| *x = (j + i) as u8)
                })
                .unwrap();
            c.send(&p, i as u64, 42, None).unwrap();
            drop(p);
            let got = r.try_recv().unwrap().unwrap();
            assert_eq!(got.seq, i as u64);
            assert_eq!(got.sample.len(), len);
            assert!(got
                .sample
                .iter()
                .enumerate()
                .all(|(j, x)| *x == (j + i) as u8));
            let held = got.sample;
            assert_eq!(w.usage().1, 1, "held while the reader holds the sample");
            drop(held);
            c.reclaim();
            assert_eq!(w.usage().1, 0, "given back");
        }
    }

    #[test]
    fn a_loan_is_filled_in_place_and_a_dropped_loan_gives_its_slot_back() {
        let w = Writer::new(&tag(line!()), 64 << 20);
        let c = w.connect(&tag(line!()), 8).unwrap();
        let r = ReaderConn::open(c.name(), &w.data_prefix()).unwrap();
        let unused = w.loan(100).unwrap();
        assert!(unused.capacity() >= 100);
        drop(unused);
        assert_eq!(w.usage().1, 0, "a dropped loan frees its slot");
        let mut loan = w.loan(5000).unwrap();
        let at = loan.as_mut_slice().as_ptr();
        loan.as_mut_slice()[..5000].fill(7);
        assert!(loan.capacity() >= 5000);
        let too_long = loan.capacity() + 1;
        let mut loan2 = w.loan(10).unwrap();
        loan2.as_mut_slice()[..3].copy_from_slice(b"abc");
        assert!(matches!(
            loan2.commit(too_long),
            Err(PoolError::TooLarge(_))
        ));
        let p = loan.commit(4000).unwrap();
        assert_eq!(p.as_ref().as_ptr(), at, "published where it was written");
        assert_eq!(p.as_ref(), &[7u8; 4000][..]);
        c.send(&p, 1, 0, None).unwrap();
        drop(p);
        let got = r.try_recv().unwrap().unwrap();
        assert_eq!(&got.sample[..], &[7u8; 4000][..]);
        drop(got);
        c.reclaim();
        assert_eq!(w.usage().1, 0, "every slot came back");
    }

    #[test]
    fn keep_last_drops_the_oldest_and_keep_all_blocks_then_fails() {
        let w = Writer::new(&tag(line!()), 64 << 20);
        let c = w.connect(&tag(line!()), 2).unwrap();
        let r = ReaderConn::open(c.name(), &w.data_prefix()).unwrap();
        for s in 1..=5u64 {
            let p = w.publish(8, |b| b.fill(s as u8)).unwrap();
            c.send(&p, s, 0, None).unwrap();
        }
        assert_eq!(c.dropped(), 3);
        assert_eq!(w.usage().1, 2, "the dropped samples' slots are free");
        let seqs: Vec<u64> = std::iter::from_fn(|| r.try_recv().unwrap())
            .map(|x| x.seq)
            .collect();
        assert_eq!(seqs, vec![4, 5]);
        let p = w.publish(8, |_| {}).unwrap();
        c.send(&p, 6, 0, Some(Duration::from_millis(10))).unwrap();
        c.send(&p, 7, 0, Some(Duration::from_millis(10))).unwrap();
        let t = std::time::Instant::now();
        assert!(matches!(
            c.send(&p, 8, 0, Some(Duration::from_millis(100))),
            Err(SendError::Blocked(_))
        ));
        assert!(t.elapsed() >= Duration::from_millis(90));
        r.close();
        assert!(matches!(c.send(&p, 9, 0, None), Err(SendError::Closed)));
        drop(p);
        c.close();
        assert_eq!(w.usage().1, 0, "closing takes back what the reader held");
    }

    #[test]
    fn doorbell_wakes_a_sleeping_reader() {
        let bell = Doorbell::create(&tag(line!())).unwrap();
        let other = Doorbell::open(bell.name()).unwrap();
        let t = std::time::Instant::now();
        bell.sleep(Duration::from_millis(20), || false);
        assert!(t.elapsed() >= Duration::from_millis(15));
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.ring();
        });
        let t = std::time::Instant::now();
        bell.sleep(Duration::from_secs(5), || false);
        assert!(t.elapsed() < Duration::from_secs(2));
        h.join().unwrap();
        assert!(Doorbell::open("ferry.b.1.1.none").is_err());
    }
}
