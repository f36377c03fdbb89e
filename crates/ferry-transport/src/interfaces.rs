//! The ROS 2 interfaces this process knows — ferry's shipped common
//! interfaces, `FERRY_INTERFACE_PATH` and a ROS 2 install on
//! `AMENT_PREFIX_PATH` — loaded once, and the type hashes discovery
//! announces: ROS 2's own RIHS01 for every type whose definition is known.

use std::collections::HashMap;
use std::sync::OnceLock;

use ferry_idl::{Interfaces, Kind, MessageDef, TypeName};
use ferry_wire::TypeHash;
use parking_lot::Mutex;

/// The interfaces of this process (loaded on first use; files that fail
/// to parse are skipped with a warning naming file, line and column).
pub fn interfaces() -> &'static Interfaces {
    static I: OnceLock<Interfaces> = OnceLock::new();
    I.get_or_init(|| {
        let (i, problems) = Interfaces::from_env();
        for p in problems {
            tracing::warn!("interface file skipped: {p}");
        }
        i
    })
}

/// The hash discovery announces for type `name` with definition text
/// `definition` (`.msg` syntax; may be empty):
///
/// - the RIHS01 of the loaded interface `name` when the definition is
///   empty or declares the same fields;
/// - else the RIHS01 of `definition` read as `name` (its references must be
///   loaded interfaces);
/// - else a stand-in that is not RIHS01 (SHA-256 of the name and text), so
///   that types without a known description still match only themselves.
pub fn type_hash_of(name: &str, definition: &str) -> TypeHash {
    static CACHE: OnceLock<Mutex<HashMap<(String, String), TypeHash>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let key = (name.to_string(), definition.to_string());
    if let Some(h) = cache.lock().get(&key) {
        return *h;
    }
    let h = compute(name, definition);
    cache.lock().insert(key, h);
    h
}

fn compute(name: &str, definition: &str) -> TypeHash {
    let ifaces = interfaces();
    let stand_in = || {
        TypeHash(ferry_idl::digest(&[
            b"ferry-untyped\n",
            name.as_bytes(),
            b"\n",
            definition.as_bytes(),
        ]))
    };
    let Ok(t) = name.parse::<TypeName>() else {
        return stand_in();
    };
    if definition.contains(ferry_idl::registry::BUNDLE_SEPARATOR) {
        // A definition bundle: the type with the types it uses.
        let mut with = ifaces.clone();
        if with.add_bundle(&t, definition).is_ok() {
            if let Ok(h) = with.type_hash(&t) {
                return TypeHash(h.0);
            }
        }
        return stand_in();
    }
    let parsed = parse_definition(&t, definition);
    if let Some(known) = ifaces.get(&t) {
        let same = match &parsed {
            None => definition.trim().is_empty(),
            Some(def) => def.fields == known.fields,
        };
        if same {
            if let Ok(h) = ifaces.type_hash(&t) {
                return TypeHash(h.0);
            }
        }
    }
    match parsed.map(|d| ifaces.type_hash_of(&d)) {
        Some(Ok(h)) => TypeHash(h.0),
        _ => stand_in(),
    }
}

/// `definition` read as a message named `t` (a generated part's name such
/// as `AddTwoInts_Request` is allowed).
fn parse_definition(t: &TypeName, definition: &str) -> Option<MessageDef> {
    if definition.trim().is_empty() {
        return None;
    }
    let mut m = ferry_idl::parse::parse_message(
        definition,
        &format!("definition of {t}"),
        &t.package,
        "Definition",
    )
    .ok()?;
    m.name = t.clone();
    Some(m)
}

/// The hash discovery announces for a service with these request and
/// response types: RIHS01 of the service type `pkg/srv/Name` when the two
/// are its `_Request` and `_Response` and it is loaded; else a stand-in
/// from both hashes.
pub fn service_hash_of(request: (&str, TypeHash), response: (&str, TypeHash)) -> TypeHash {
    let service = request
        .0
        .strip_suffix("_Request")
        .filter(|base| response.0.strip_suffix("_Response") == Some(base))
        .and_then(|base| base.parse::<TypeName>().ok())
        .filter(|t| t.kind == Kind::Srv);
    if let Some(t) = service {
        let ifaces = interfaces();
        let parts_match = [request, response].iter().all(|(n, h)| {
            n.parse::<TypeName>()
                .ok()
                .and_then(|p| ifaces.type_hash(&p).ok())
                .is_some_and(|r| r.0 == h.0)
        });
        if parts_match {
            if let Ok(h) = ifaces.type_hash(&t) {
                return TypeHash(h.0);
            }
        }
    }
    TypeHash(ferry_idl::digest(&[
        b"ferry-service\n",
        &request.1 .0,
        &response.1 .0,
    ]))
}

/// Definitions this process's ports carry themselves (generated types):
/// type name → definition bundle.
fn remembered() -> &'static Mutex<HashMap<String, &'static str>> {
    static R: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// Keeps the definition a port's type carries (`Message::DEFINITION`: a
/// generated type's bundle, or a hand-written `.msg` text), so that the
/// process can tell a peer that lacks the files ([`definition_of`]).
pub fn remember(name: &str, definition: &'static str) {
    if !definition.trim().is_empty() {
        remembered().lock().insert(name.to_string(), definition);
    }
}

/// The definition bundle of type `name` (`ferry_idl::Interfaces::bundle`
/// format) as this process knows it: the one a port remembered, else the
/// loaded interfaces' (shipped, `FERRY_INTERFACE_PATH`, a ROS 2 install).
pub fn definition_of(name: &str) -> Option<String> {
    if let Some(d) = remembered().lock().get(name) {
        return Some(d.to_string());
    }
    let t: TypeName = name.parse().ok()?;
    interfaces().bundle(&t).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values ROS 2 printed (see ferry-idl's `tests/hashes.rs`).
    #[test]
    fn compiled_types_announce_ros2_hashes() {
        let string = type_hash_of("std_msgs/msg/String", "string data");
        assert_eq!(
            string.to_string(),
            "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
        );
        assert_eq!(type_hash_of("std_msgs/msg/String", ""), string);
        // Same name, another layout: not ROS's hash, and not equal.
        let other = type_hash_of("std_msgs/msg/String", "int32 data");
        assert_ne!(other, string);
        // A user's type over common types: a RIHS01 of its definition.
        let a = type_hash_of("my_pkg/msg/Arm", "std_msgs/Header header\nfloat64[] joints");
        let b = type_hash_of("my_pkg/msg/Arm", "std_msgs/Header header\nfloat32[] joints");
        assert_ne!(a, b);
        let req = type_hash_of(
            "example_interfaces/srv/AddTwoInts_Request",
            "int64 a\nint64 b",
        );
        let resp = type_hash_of("example_interfaces/srv/AddTwoInts_Response", "int64 sum");
        assert_eq!(
            service_hash_of(
                ("example_interfaces/srv/AddTwoInts_Request", req),
                ("example_interfaces/srv/AddTwoInts_Response", resp)
            )
            .to_string(),
            "RIHS01_e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a"
        );
    }
}
