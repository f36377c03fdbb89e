//! What a reader's connection delivered, as far as a hand-over between a
//! relayed path (the MQTT broker, Zenoh: the writer's own sequence numbers
//! through an intermediary) and a direct path from the same writer needs.
//!
//! A relayed sample is the word of whoever the intermediary lets in: a
//! forged one may carry a real writer's id and any sequence number. So a
//! direct sample is dropped as a duplicate only when the relayed path
//! delivered *that* sequence number (among its last [`WINDOW`]), never
//! because a relayed number ran ahead: one forged sample with a huge number
//! cannot cut a direct path off.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// How many of its latest sequence numbers a relayed connection remembers
/// (512 bytes of bits, allocated on its first sample: a reader may hold
/// thousands of relayed connections, and a hand-over overlaps by the
/// samples in flight, not by thousands).
pub const WINDOW: u64 = 4096;

const WORDS: usize = (WINDOW / 64) as usize;

/// The sequence numbers in `(top - WINDOW, top]` that were delivered.
#[derive(Debug)]
struct Window {
    top: u64,
    bits: Box<[u64; WORDS]>,
}

impl Window {
    fn new() -> Self {
        Window {
            top: 0,
            bits: Box::new([0; WORDS]),
        }
    }

    fn slot(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// Clears the slots of `from..=to` (`from <= to`; at most one window's
    /// worth, word by word: a jump costs at most [`WORDS`] word writes).
    /// Counts what is left rather than stepping past `to`, which may be
    /// `u64::MAX`.
    fn clear(&mut self, from: u64, to: u64) {
        let mut left = to - from;
        if left >= WINDOW - 1 {
            self.bits.fill(0);
            return;
        }
        let mut s = from;
        loop {
            let (w, bit) = Self::slot(s);
            let step = if s.is_multiple_of(64) && left >= 63 {
                self.bits[w] = 0;
                64
            } else {
                self.bits[w] &= !bit;
                1
            };
            if left < step {
                return;
            }
            left -= step;
            s = s.wrapping_add(step);
        }
    }

    fn mark(&mut self, seq: u64) {
        if seq > self.top {
            self.clear(self.top + 1, seq);
            self.top = seq;
        } else if self.top - seq >= WINDOW {
            return;
        }
        let (w, bit) = Self::slot(seq);
        self.bits[w] |= bit;
    }

    fn contains(&self, seq: u64) -> bool {
        if seq > self.top || self.top - seq >= WINDOW {
            return false;
        }
        let (w, bit) = Self::slot(seq);
        self.bits[w] & bit != 0
    }
}

/// What one connection delivered, for the hand-over.
#[derive(Debug, Default)]
pub struct SeqMarks {
    /// Sequence number of the first sample delivered (0: none yet).
    pub first: AtomicU64,
    /// The highest sequence number a relayed path delivered.
    pub last: AtomicU64,
    /// Source time of the first sample this connection received (0: none
    /// yet), and of the newest: a path through a host leader and a direct
    /// one from the same writer are compared by these, since a UDP stream
    /// numbers its samples itself (from 1 when it opens, whatever the
    /// writer's numbers) while every path carries the writer's stamp. At a
    /// move between the two both carry a few samples: one that another path
    /// received within its range is a duplicate.
    pub first_stamp: AtomicU64,
    /// Source time of the newest sample received (see `first_stamp`).
    pub high_stamp: AtomicU64,
    /// A direct path needs no more checking against the relayed ones.
    pub settled: AtomicBool,
    /// Which of its latest sequence numbers a relayed path delivered.
    relayed: Mutex<Option<Window>>,
}

impl SeqMarks {
    /// This connection received a sample stamped `stamp_ns`.
    pub fn received(&self, stamp_ns: u64) {
        // A load first: once set (every sample but the first), no locked
        // instruction for it on the receive path.
        if self.first_stamp.load(Ordering::SeqCst) == 0 {
            let _ =
                self.first_stamp
                    .compare_exchange(0, stamp_ns, Ordering::SeqCst, Ordering::SeqCst);
        }
        self.high_stamp.fetch_max(stamp_ns, Ordering::SeqCst);
    }

    /// Whether this connection received the sample stamped `stamp_ns`, as
    /// far as a reliable, ordered path tells: it lies within the stamps of
    /// its first and newest samples.
    pub fn covers(&self, stamp_ns: u64) -> bool {
        let first = self.first_stamp.load(Ordering::SeqCst);
        first != 0 && first <= stamp_ns && stamp_ns <= self.high_stamp.load(Ordering::SeqCst)
    }

    /// A relayed path delivered `seq` on this connection.
    pub fn mark_relayed(&self, seq: u64) {
        self.last.fetch_max(seq, Ordering::Relaxed);
        self.relayed
            .lock()
            .get_or_insert_with(Window::new)
            .mark(seq);
    }

    /// Whether the relayed path delivered `seq` on this connection (among
    /// its latest [`WINDOW`] numbers).
    pub fn was_relayed(&self, seq: u64) -> bool {
        self.relayed
            .lock()
            .as_ref()
            .is_some_and(|w| w.contains(seq))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_exactly_what_was_delivered_in_the_window() {
        let m = SeqMarks::default();
        assert!(!m.was_relayed(1));
        for s in [1, 2, 3, 5, 100] {
            m.mark_relayed(s);
        }
        for s in [1, 2, 3, 5, 100] {
            assert!(m.was_relayed(s), "{s}");
        }
        for s in [0, 4, 6, 99, 101] {
            assert!(!m.was_relayed(s), "{s}");
        }
        assert_eq!(m.last.load(Ordering::Relaxed), 100);
        // A late one inside the window counts; the window slides.
        m.mark_relayed(50);
        assert!(m.was_relayed(50));
        m.mark_relayed(100 + WINDOW - 1);
        assert!(m.was_relayed(100), "still inside");
        assert!(!m.was_relayed(50), "slid out");
        m.mark_relayed(3 * WINDOW);
        assert!(!m.was_relayed(100 + WINDOW - 1));
        assert!(m.was_relayed(3 * WINDOW));
        // Slots reused after a slide start empty.
        assert!(!m.was_relayed(3 * WINDOW - 1));
        assert!(!m.was_relayed(2 * WINDOW + 100));
    }

    #[test]
    fn a_forged_huge_number_does_not_make_real_ones_look_delivered() {
        let m = SeqMarks::default();
        for s in 1..=10 {
            m.mark_relayed(s);
        }
        m.mark_relayed(1 << 62);
        for s in 1..=20 {
            assert!(!m.was_relayed(s), "{s}");
        }
        assert!(m.was_relayed(1 << 62));
    }

    #[test]
    fn the_largest_numbers_neither_hang_nor_panic() {
        let m = SeqMarks::default();
        m.mark_relayed(u64::MAX - 1);
        m.mark_relayed(u64::MAX);
        assert!(m.was_relayed(u64::MAX) && m.was_relayed(u64::MAX - 1));
        assert!(!m.was_relayed(u64::MAX - 2));
        let m = SeqMarks::default();
        m.mark_relayed(u64::MAX - 200);
        m.mark_relayed(u64::MAX);
        assert!(m.was_relayed(u64::MAX - 200));
    }

    #[test]
    fn word_by_word_clearing_matches_bit_by_bit() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let m = SeqMarks::default();
        let mut model = std::collections::BTreeSet::new();
        let mut top = 0u64;
        for _ in 0..20_000 {
            let step = match next() % 4 {
                0 => next() % 3,
                1 => next() % 200,
                2 => next() % (WINDOW + 10),
                _ => 0,
            };
            let back = next() % 300;
            let s = (top + step)
                .saturating_sub(if step == 0 { back } else { 0 })
                .max(1);
            m.mark_relayed(s);
            if s + WINDOW > top.max(s) {
                model.insert(s);
            }
            top = top.max(s);
            model.retain(|x| x + WINDOW > top);
            let probe = top.saturating_sub(next() % (WINDOW + 5));
            assert_eq!(
                m.was_relayed(probe),
                model.contains(&probe),
                "{probe} top {top}"
            );
        }
    }
}
