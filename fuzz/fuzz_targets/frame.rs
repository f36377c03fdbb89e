//! Data-plane frame header and Hello body (crates/ferry-wire/src/frame.rs).
//!
//! Properties: `FrameHeader::parse` and `Hello::parse` never panic on any
//! input; whatever parses re-encodes to bytes that parse to the same value;
//! `max_body` is enforced. The same for the service `Envelope`.
#![no_main]

use ferry_wire::frame::{Envelope, FrameHeader, FrameKind, Hello, ENVELOPE_LEN, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first two bytes pick a body limit so both sides of the
    // `body_len > max_body` check are reachable; the parsers see all of `data`.
    let max_body = match data {
        [a, b, ..] => usize::from(u16::from_le_bytes([*a, *b])) << 4,
        _ => 0,
    };
    for limit in [max_body, 1 << 20] {
        if let Ok(h) = FrameHeader::parse(data, limit) {
            assert!(h.body_len as usize <= limit, "max_body not enforced");
            let again =
                FrameHeader::parse(&h.encode(), limit).expect("re-encoded header must parse");
            assert_eq!(again, h, "frame header round trip");

            // A Hello frame's body follows the header.
            if h.kind == FrameKind::Hello {
                let body = &data[HEADER_LEN..];
                let body = &body[..body.len().min(h.body_len as usize)];
                check_hello(body);
            }
        }
    }
    // Hello bodies are also parsed on their own (the reader hands the body
    // over separately), so feed the raw input too.
    check_hello(data);
    // The service envelope of shared-memory and UDP samples.
    if let Ok(e) = Envelope::parse(data) {
        assert_eq!(Envelope::parse(&e.encode()), Ok(e), "envelope round trip");
        assert!(data.len() >= ENVELOPE_LEN);
    }
});

fn check_hello(body: &[u8]) {
    if let Ok(hello) = Hello::parse(body) {
        let enc = hello.encode();
        assert_eq!(enc.len(), Hello::LEN);
        assert_eq!(
            Hello::parse(&enc).expect("re-encoded hello must parse"),
            hello
        );
    }
}
