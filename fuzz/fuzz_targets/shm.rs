//! The reader side of a shared-memory connection (crates/ferry-shm) facing a
//! hostile or broken writer: the fuzz input *is* the connection segment
//! (header, ring indices, entries) that the reader maps, over a real data
//! segment. Properties: opening either validates or refuses, `try_recv`
//! never panics or reads outside a mapping (slot and length are checked),
//! and the reader's pending returns stay bounded by what it was handed.
#![no_main]

use std::sync::OnceLock;

use ferry_shm::{ReaderConn, Segment, Writer};
use libfuzzer_sys::fuzz_target;

fn writer() -> &'static (Writer, String) {
    static W: OnceLock<(Writer, String)> = OnceLock::new();
    W.get_or_init(|| {
        let w = Writer::new("fuzz", 64 << 20);
        // One real data generation (4 KiB slots) for entries to point into.
        std::mem::forget(w.publish(16, |b| b.fill(7)).expect("pool"));
        let p = w.data_prefix();
        (w, p)
    })
}

fuzz_target!(|data: &[u8]| {
    let (_w, prefix) = writer();
    if data.is_empty() {
        return;
    }
    let name = ferry_shm::segment::name('c', &format!("fuzz{}", data.len()));
    let Ok(seg) = Segment::create(&name, data.len()) else {
        return;
    };
    // SAFETY: a segment we just created, written before anyone maps it.
    unsafe { seg.bytes_mut(0, data.len()) }.copy_from_slice(data);
    if let Ok(r) = ReaderConn::open(&name, prefix) {
        let mut held = Vec::new();
        for _ in 0..64 {
            match r.try_recv() {
                Ok(Some(x)) => {
                    let _ = x.sample.iter().fold(0u8, |a, b| a ^ b);
                    held.push(x);
                }
                Ok(None) => break,
                Err(_) => {}
            }
        }
        let _ = r.has_data();
        drop(held);
    }
    drop(seg);
});
