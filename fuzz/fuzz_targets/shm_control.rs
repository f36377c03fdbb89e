//! The shared-memory control protocol (crates/ferry-wire/src/shm.rs): what a
//! peer on the control socket sends a reader's runtime, and what a writer
//! reads back.
//!
//! Properties: `Control::parse` and `read_message` never panic on any input;
//! whatever parses re-encodes to bytes that parse to the same value; no
//! segment name that parses can leave `/dev/shm`; `read_message` never asks
//! for more than `MAX_MESSAGE` bytes whatever length is announced.
#![no_main]

use ferry_wire::shm::{read_message, Control, MAX_MESSAGE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = Control::parse(data) {
        let enc = msg.encode();
        assert_eq!(Control::parse(&enc[2..]).expect("re-encoded message parses"), msg);
        if let Control::Attach(a) = &msg {
            for name in [&a.connection, &a.data_prefix] {
                assert!(!name.contains('/') && name != ".." && !name.is_empty());
            }
        }
    }
    // The same bytes as a stream: length prefix, then the body.
    let mut at = 0usize;
    let _ = read_message(|buf| {
        assert!(buf.len() <= MAX_MESSAGE.max(2), "asked for {} bytes", buf.len());
        let end = at + buf.len();
        if end > data.len() {
            return Err(ferry_wire::WireError::Truncated { offset: at, needed: end - data.len() });
        }
        buf.copy_from_slice(&data[at..end]);
        at = end;
        Ok(())
    });
});
