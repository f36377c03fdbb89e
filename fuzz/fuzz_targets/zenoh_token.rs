//! What any Zenoh peer may declare or attach, read as rmw_zenoh's
//! conventions: a liveliness token under `@ros2_lv` and a sample's
//! attachment, and the graph that keeps tokens. Parsing never panics; what parses re-encodes to what parses
//! the same.
#![no_main]

use ferry_zenoh::{Attachment, Token};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(a) = Attachment::decode(data) {
        assert_eq!(Attachment::decode(&a.encode()), Ok(a));
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(t) = Token::parse(s) {
            assert_eq!(Token::parse(&t.key_expr()), Ok(t));
        }
        // The graph takes any key (rmw_zenoh's or ferry's own tokens),
        // and forgets it again.
        let mut g = ferry_zenoh::graph::Graph::new(0, "0123");
        if g.put(s).is_ok() {
            g.delete(s);
            assert!(g.tokens().is_empty());
        }
    }
});
