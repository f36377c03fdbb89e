//! The host leader's hello (`ferry_wire::leader`): any bytes a process on
//! the host sends on the election's socket. Parsing never panics; what
//! parses re-encodes to the same bytes.
#![no_main]

use ferry_wire::leader::Hello;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = Hello::decode(data) {
        assert_eq!(&h.encode()[..], data);
    }
});
