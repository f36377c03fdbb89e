//! Discovery beacons (crates/ferry-wire/src/beacon.rs).
//!
//! Properties: `Beacon::parse` never panics; a beacon that parses re-encodes
//! (`Beacon::encode`) to bytes that parse back to an equal beacon.
#![no_main]

use ferry_wire::beacon::Beacon;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(beacon) = Beacon::parse(data) else {
        return;
    };
    let encoded = beacon.encode();
    let reparsed = match Beacon::parse(&encoded) {
        Ok(b) => b,
        Err(e) => panic!("re-encoded beacon does not parse: {e}\nbeacon: {beacon:?}"),
    };
    assert_eq!(reparsed, beacon, "beacon round trip changed the value");
    // Encoding is canonical: a second round produces identical bytes.
    assert_eq!(reparsed.encode(), encoded, "beacon encoding is not stable");
});
