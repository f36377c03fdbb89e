//! The host leader's socket (`ferry_wire::leader`): any bytes a process on
//! the host sends there, as a hello or as frames after it. Parsing never
//! panics; what parses re-encodes to the same bytes; a beacon peek of a
//! fed datagram never panics either.
#![no_main]

use ferry_wire::leader::{Frame, Hello};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Hello::decode(data) {
        assert_eq!(&h.encode()[..], data);
    }
    let mut at = 0;
    while let Ok(Some((frame, n))) = Frame::decode(&data[at..]) {
        let mut again = Vec::new();
        frame.encode_into(&mut again);
        assert_eq!(&again[..], &data[at..at + n]);
        if let Frame::Feed(f) = frame {
            let _ = ferry_wire::beacon::peek(f.datagram);
        }
        at += n;
    }
});
