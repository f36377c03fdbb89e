//! Interface files and CDR as data (crates/ferry-idl).
//!
//! Properties: parsing any text as a `.msg`, `.srv` or `.action` file never
//! panics; a parsed message's default value encodes and decodes back to
//! itself and hashes; decoding any bytes as a shipped type (and as the
//! parsed one) never panics, and what decodes re-encodes to the same bytes
//! minus any trailing ones. A definition bundle (what a peer sends for a
//! type this side lacks) never panics either, and a type it adds hashes,
//! and its bundle reads back to the same hash.
#![no_main]

use std::sync::OnceLock;

use ferry_idl::{Interfaces, Kind, TypeName};
use libfuzzer_sys::fuzz_target;

fn common() -> &'static Interfaces {
    static C: OnceLock<Interfaces> = OnceLock::new();
    C.get_or_init(Interfaces::common)
}

fn round_trip(i: &Interfaces, t: &TypeName, bytes: &[u8]) {
    let Ok(d) = i.decode(t, bytes) else { return };
    let again = i.encode(t, &d).expect("decoded data must encode");
    let d2 = i.decode(t, &again).expect("re-encoded data must decode");
    let again2 = i.encode(t, &d2).expect("decoded data must encode");
    assert_eq!(again, again2, "{t}: CDR round trip is not stable");
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let kind = [Kind::Msg, Kind::Srv, Kind::Action][usize::from(sel % 3)];
    let mut i = common().clone();
    if i.add_text("fuzz", "fuzz_pkg", kind, "Fuzz", &text).is_ok() {
        let t = TypeName { package: "fuzz_pkg".into(), kind, name: "Fuzz".into() };
        if let Ok(d) = i.default_data(&t) {
            let b = i.encode(&t, &d).expect("a default must encode");
            i.decode(&t, &b).expect("an encoded default must decode");
            let _ = i.type_hash(&t);
        }
        round_trip(&i, &t, rest);
    }
    // The same text as a definition bundle sent by a peer.
    let t = TypeName { package: "peer_pkg".into(), kind: Kind::Msg, name: "Sent".into() };
    let mut b = common().clone();
    if b.add_bundle(&t, &text).is_ok() {
        if let Ok(h) = b.type_hash(&t) {
            let again = b.bundle(&t).expect("an added type has a bundle");
            let mut c = common().clone();
            c.add_bundle(&t, &again).expect("a bundle we wrote must read back");
            assert_eq!(c.type_hash(&t).ok(), Some(h), "bundle round trip changed the hash");
        }
    }
    for name in ["sensor_msgs/msg/Image", "rcl_interfaces/msg/ParameterEvent", "visualization_msgs/msg/MarkerArray"] {
        round_trip(common(), &name.parse().unwrap(), rest);
    }
});
