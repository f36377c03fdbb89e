//! Grants carried in certificates and policy files
//! (crates/ferry-security/src/grants.rs, policy.rs).
//!
//! Properties: `Grants::decode` and `Policy::parse` never panic on any
//! input; decoded grants re-encode to the same bytes; a pattern that parsed
//! matches any name without panicking.
#![no_main]

use ferry_security::{Action, Grants, Policy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = Grants::decode(data) {
        let again = g.encode().expect("decoded grants re-encode");
        assert_eq!(again, data, "decode/encode is not the identity");
        for name in ["/", "/a", "/a/b/c", "/robot1/cmd_vel"] {
            let _ = g.allows(Action::Publish, name);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(p) = Policy::parse(text) {
            for g in p.identities.values() {
                let b = g.encode().expect("parsed grants encode");
                assert_eq!(Grants::decode(&b).as_ref(), Ok(g));
            }
        }
    }
});
