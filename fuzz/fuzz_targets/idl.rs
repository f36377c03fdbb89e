//! Interface files and CDR as data (crates/ferry-idl).
//!
//! Properties: parsing any text as a `.msg`, `.srv` or `.action` file never
//! panics; a parsed message's default value encodes and decodes back to
//! itself and hashes; decoding any bytes as a shipped type (and as the
//! parsed one) never panics, and what decodes re-encodes to the same bytes
//! minus any trailing ones.
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
    for name in ["sensor_msgs/msg/Image", "rcl_interfaces/msg/ParameterEvent", "visualization_msgs/msg/MarkerArray"] {
        round_trip(common(), &name.parse().unwrap(), rest);
    }
});
