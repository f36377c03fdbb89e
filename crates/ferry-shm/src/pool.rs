//! A writer's slot pool: samples live in data segments that readers map
//! read-only.
//!
//! A pool is a list of *generations*, each one data segment of equal slots.
//! A sample larger than the current slot size opens a new generation with
//! slots of the next power of two (no preconfigured maximum: up to 1 GiB
//! per sample), and a generation whose slots are all taken by readers is
//! followed by one with twice the slots, within the pool's byte budget.
//! Old generations are unlinked once no reader holds any of their slots.
//! Free slots are reused last-in first-out, so the pages a steady stream
//! touches stay few and warm.
//!
//! Slot ids are `generation << 32 | index`; a slot's reference count is the
//! number of connections it is out on plus one while the writer holds it.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::segment::{self, Segment, ShmError};

const MAGIC: u64 = 0x6665_7272_7964_6174; // "ferrydat"
/// Data segment header; slots start here.
pub(crate) const DATA_HEADER: usize = 4096;
const MIN_SLOT: usize = 4096;
const MAX_SLOT: usize = 1 << 30;
/// Bytes a new generation aims for (at least 4 and at most 256 slots).
const GENERATION_BYTES: usize = 8 << 20;

/// Why a slot could not be had.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// Shared memory failed (full `/dev/shm`, no permission).
    #[error(transparent)]
    Shm(#[from] ShmError),
    /// The sample exceeds the largest slot.
    #[error("sample of {0} bytes exceeds the 1 GiB shared-memory slot limit")]
    TooLarge(usize),
    /// Readers hold every slot and the pool may not grow further.
    #[error("all {slots} shared-memory slots are held by readers and the pool is at its {budget}-byte budget (readers keep too many samples; raise shm_pool_bytes)")]
    Exhausted {
        /// Slots in use.
        slots: usize,
        /// The budget.
        budget: usize,
    },
}

/// Name of generation `gen` of the pool named `prefix`.
pub fn data_name(prefix: &str, gen: u32) -> String {
    format!("{prefix}.{gen}")
}

/// (generation id, index) of a slot id.
pub(crate) fn slot_parts(slot: u64) -> (u32, usize) {
    ((slot >> 32) as u32, (slot & 0xffff_ffff) as usize)
}

struct Generation {
    id: u32,
    seg: Segment,
    slot_size: usize,
    refs: Vec<u32>,
    free: Vec<u32>,
}

/// One writer's pool (not shared between threads by itself: the owner
/// wraps it in a lock).
pub struct Pool {
    prefix: String,
    gens: Vec<Generation>,
    next_gen: u32,
    budget: usize,
}

impl Pool {
    /// An empty pool; segments appear on first use. `budget` bounds the
    /// bytes of all its generations together.
    pub fn new(tag: &str, budget: usize) -> Pool {
        Pool {
            prefix: segment::name('d', tag),
            gens: Vec::new(),
            next_gen: 0,
            budget,
        }
    }

    /// Data segment names are `<prefix>.<generation>`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn bytes(&self) -> usize {
        self.gens.iter().map(|g| g.seg.len()).sum()
    }

    fn open_generation(&mut self, slot_size: usize, slots: usize) -> Result<(), PoolError> {
        let len = DATA_HEADER + slot_size * slots;
        if self.bytes() + len > self.budget && !self.gens.is_empty() {
            return Err(PoolError::Exhausted {
                slots: self.gens.iter().map(|g| g.refs.len()).sum(),
                budget: self.budget,
            });
        }
        let id = self.next_gen;
        let seg = Segment::create(&data_name(&self.prefix, id), len)?;
        seg.at::<AtomicU64>(8)
            .store(slot_size as u64, Ordering::Relaxed);
        seg.at::<AtomicU64>(16)
            .store(slots as u64, Ordering::Relaxed);
        seg.at::<AtomicU64>(0).store(MAGIC, Ordering::Release);
        self.next_gen += 1;
        self.gens.push(Generation {
            id,
            seg,
            slot_size,
            refs: vec![0; slots],
            free: (0..slots as u32).rev().collect(),
        });
        Ok(())
    }

    /// Takes a free slot of at least `len` bytes (reference count 1: the
    /// writer's). Call [`Pool::release`] for every reference.
    pub fn alloc(&mut self, len: usize) -> Result<u64, PoolError> {
        if len > MAX_SLOT {
            return Err(PoolError::TooLarge(len));
        }
        let fits = self.gens.last().is_some_and(|g| g.slot_size >= len);
        if !fits {
            let size = len.max(MIN_SLOT).next_power_of_two();
            let slots = (GENERATION_BYTES / size).clamp(4, 256);
            self.open_generation(size, slots)?;
        } else if self.gens.last().is_some_and(|g| g.free.is_empty()) {
            let (size, slots) = self
                .gens
                .last()
                .map_or((MIN_SLOT, 4), |g| (g.slot_size, g.refs.len()));
            self.open_generation(size, (slots * 2).min(1 << 20))?;
        }
        let g = self.gens.last_mut().ok_or(PoolError::TooLarge(len))?;
        let index = g.free.pop().ok_or(PoolError::Exhausted {
            slots: g.refs.len(),
            budget: self.budget,
        })?;
        g.refs[index as usize] = 1;
        Ok((u64::from(g.id) << 32) | u64::from(index))
    }

    fn generation(&mut self, slot: u64) -> Option<(&mut Generation, usize)> {
        let (id, index) = slot_parts(slot);
        let g = self.gens.iter_mut().find(|g| g.id == id)?;
        (index < g.refs.len()).then_some((g, index))
    }

    /// Adds a reference to `slot` (it goes out on one more connection).
    pub fn retain(&mut self, slot: u64) {
        if let Some((g, i)) = self.generation(slot) {
            g.refs[i] += 1;
        }
    }

    /// Drops a reference; the slot is free again at zero. Unknown slots and
    /// extra releases are ignored (callers only release what they hold).
    pub fn release(&mut self, slot: u64) {
        let Some((g, i)) = self.generation(slot) else {
            return;
        };
        if g.refs[i] == 0 {
            return;
        }
        g.refs[i] -= 1;
        if g.refs[i] == 0 {
            g.free.push(i as u32);
        }
        // Retire old generations nobody holds any more.
        let last = self.gens.last().map(|g| g.id);
        self.gens
            .retain(|g| Some(g.id) == last || g.free.len() < g.refs.len());
    }

    /// The bytes of the slot the next [`Pool::alloc`] of the current slot
    /// size hands out (free slots are reused last-in first-out), if any.
    pub fn next_free(&self) -> Option<*const u8> {
        let g = self.gens.last()?;
        let index = *g.free.last()? as usize;
        // In bounds: a free index is below the generation's slot count.
        Some(
            g.seg
                .as_ptr()
                .wrapping_add(DATA_HEADER + index * g.slot_size) as *const u8,
        )
    }

    /// Whether a sample of `len` bytes would open a new generation (no free
    /// slot of that size): the moment to take readers' returns back first.
    pub fn must_grow(&self, len: usize) -> bool {
        !self
            .gens
            .last()
            .is_some_and(|g| g.slot_size >= len && !g.free.is_empty())
    }

    /// Where `slot`'s bytes start in this process and the slot's full size.
    /// The mapping stays valid while the slot is held (a generation is only
    /// unmapped once none of its slots is held).
    pub fn slot_ptr(&self, slot: u64) -> Option<(*mut u8, usize)> {
        let (id, index) = slot_parts(slot);
        let g = self.gens.iter().find(|g| g.id == id)?;
        if index >= g.refs.len() || g.refs[index] == 0 {
            return None;
        }
        // In bounds: the segment holds DATA_HEADER + slots * slot_size bytes.
        let ptr = g
            .seg
            .as_ptr()
            .wrapping_add(DATA_HEADER + index * g.slot_size);
        Some((ptr, g.slot_size))
    }

    /// Live generations and slots in use (for statistics and tests).
    pub fn usage(&self) -> (usize, usize) {
        let used = self.gens.iter().map(|g| g.refs.len() - g.free.len()).sum();
        (self.gens.len(), used)
    }
}

/// A reader's view of one data segment.
pub struct DataView {
    seg: Segment,
    slot_size: usize,
    slots: usize,
}

impl DataView {
    /// Maps generation `name` read-only and checks its header.
    pub fn open(name: &str) -> Result<DataView, ShmError> {
        let seg = Segment::open(name, false)?;
        let bad = |why: &str| ShmError::Open {
            name: name.to_string(),
            why: why.to_string(),
        };
        if seg.len() < DATA_HEADER || seg.at::<AtomicU64>(0).load(Ordering::Acquire) != MAGIC {
            return Err(bad("not a ferry data segment"));
        }
        let slot_size = seg.at::<AtomicU64>(8).load(Ordering::Relaxed) as usize;
        let slots = seg.at::<AtomicU64>(16).load(Ordering::Relaxed) as usize;
        let need = (slot_size as u128) * (slots as u128) + DATA_HEADER as u128;
        if slot_size == 0 || need > seg.len() as u128 {
            return Err(bad("slot layout does not fit the segment"));
        }
        Ok(DataView {
            seg,
            slot_size,
            slots,
        })
    }

    /// The first `len` bytes of slot `index`, if that is inside the slot.
    pub fn slot(&self, index: usize, len: usize) -> Option<&[u8]> {
        if index >= self.slots || len > self.slot_size {
            return None;
        }
        self.seg.bytes(DATA_HEADER + index * self.slot_size, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_grow_by_size_and_count_and_old_generations_retire() {
        let mut p = Pool::new(&format!("pool{}", line!()), 64 << 20);
        let a = p.alloc(100).unwrap();
        let (at, size) = p.slot_ptr(a).unwrap();
        assert!(size >= 3);
        // SAFETY: slot `a` is held by this test alone and is `size` bytes.
        unsafe { std::ptr::copy_nonoverlapping(b"xyz".as_ptr(), at, 3) };
        let v = DataView::open(&data_name(p.prefix(), 0)).unwrap();
        assert_eq!(v.slot(0, 3).unwrap(), b"xyz");
        assert!(v.slot(0, MIN_SLOT + 1).is_none());
        p.release(a);
        assert_eq!(p.alloc(10).unwrap(), a, "LIFO reuse");
        // Bigger sample: a new generation; the old one retires when free.
        let big = p.alloc(3 << 20).unwrap();
        assert_eq!(big >> 32, 1);
        assert_eq!(p.usage(), (2, 2));
        p.release(a);
        assert_eq!(p.usage(), (1, 1));
        assert!(
            DataView::open(&data_name(p.prefix(), 0)).is_err(),
            "unlinked"
        );
        // All slots held: the next generation doubles them.
        let held: Vec<u64> = (0..4).map(|_| p.alloc(3 << 20).unwrap()).collect();
        assert_eq!(held.iter().map(|s| s >> 32).max(), Some(2));
        assert!(matches!(p.alloc(2 << 30), Err(PoolError::TooLarge(_))));
    }

    #[test]
    fn the_budget_bounds_growth() {
        let mut p = Pool::new(&format!("pool{}", line!()), 40 << 20);
        let held: Vec<u64> = (0..4).map(|_| p.alloc(8 << 20).unwrap()).collect();
        assert!(matches!(p.alloc(8 << 20), Err(PoolError::Exhausted { .. })));
        p.release(held[0]);
        assert!(p.alloc(8 << 20).is_ok());
    }
}
