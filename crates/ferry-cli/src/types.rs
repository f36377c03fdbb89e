//! Message types the CLI knows by name: decode to JSON/YAML, encode from YAML.

use ferry::msgs::*;
use ferry::{Message, TypeHash};
use serde::Serialize;

/// Codec of one known type.
pub struct KnownType {
    pub name: &'static str,
    pub hash: TypeHash,
    pub decode: fn(&[u8]) -> Result<serde_json::Value, String>,
    pub encode: fn(&str) -> Result<Vec<u8>, String>,
}

fn entry<T: Message + Serialize>() -> KnownType {
    KnownType {
        name: T::TYPE_NAME,
        hash: <T as Message>::type_hash(),
        decode: |b| {
            let v: T = ferry::decode_cdr(b, T::TYPE_NAME).map_err(|e| e.to_string())?;
            serde_json::to_value(v).map_err(|e| e.to_string())
        },
        encode: |yaml| {
            let text = if yaml.trim().is_empty() { "{}" } else { yaml };
            let v: T = serde_yaml::from_str(text)
                .map_err(|e| format!("`{text}` is not a valid {}: {e}", T::TYPE_NAME))?;
            ferry::encode_cdr(&v, T::TYPE_NAME).map_err(|e| e.to_string())
        },
    }
}

/// Every type the CLI knows.
pub fn known() -> Vec<KnownType> {
    vec![
        entry::<std_msgs::String>(),
        entry::<std_msgs::Bool>(),
        entry::<std_msgs::Int32>(),
        entry::<std_msgs::Int64>(),
        entry::<std_msgs::Float64>(),
        entry::<std_msgs::Empty>(),
        entry::<std_msgs::Header>(),
        entry::<builtin_interfaces::Time>(),
        entry::<geometry_msgs::Vector3>(),
        entry::<geometry_msgs::Point>(),
        entry::<geometry_msgs::Quaternion>(),
        entry::<geometry_msgs::Pose>(),
        entry::<geometry_msgs::Twist>(),
        entry::<sensor_msgs::Image>(),
        entry::<sensor_msgs::JointState>(),
    ]
}

/// Looks a type up by its full (`std_msgs/msg/String`) or short
/// (`std_msgs/String`) name.
pub fn find(name: &str) -> Option<KnownType> {
    let full = match name.split('/').collect::<Vec<_>>()[..] {
        [pkg, ty] => format!("{pkg}/msg/{ty}"),
        _ => name.to_string(),
    };
    known().into_iter().find(|t| t.name == full)
}

/// A service the CLI can call: `example_interfaces/srv/AddTwoInts`.
pub struct KnownService {
    pub name: &'static str,
    pub call:
        fn(&ferry::Node, &str, &str, std::time::Duration) -> Result<serde_json::Value, String>,
}

fn service<Req: Message + Serialize, Resp: Message + Serialize>(
    name: &'static str,
) -> KnownService {
    KnownService {
        name,
        call: |node, srv, yaml, timeout| {
            let text = if yaml.trim().is_empty() { "{}" } else { yaml };
            let req: Req = serde_yaml::from_str(text)
                .map_err(|e| format!("`{text}` is not a valid request: {e}"))?;
            let client = node
                .client::<Req, Resp>(srv)
                .build()
                .map_err(|e| e.to_string())?;
            let resp = client.call(req, timeout).map_err(|e| e.to_string())?;
            serde_json::to_value(&*resp).map_err(|e| e.to_string())
        },
    }
}

/// Services the CLI knows.
pub fn services() -> Vec<KnownService> {
    vec![
        service::<example_interfaces::AddTwoIntsRequest, example_interfaces::AddTwoIntsResponse>(
            "example_interfaces/srv/AddTwoInts",
        ),
        service::<ferry::admin::AdminRequest, ferry::admin::AdminReply>("ferry_msgs/srv/Admin"),
    ]
}

/// Hex dump of raw bytes, 16 per line.
pub fn hex(b: &[u8]) -> String {
    let mut s = String::new();
    for (i, chunk) in b.chunks(16).enumerate() {
        if i == 64 {
            s.push_str(&format!("... ({} bytes in all)\n", b.len()));
            break;
        }
        let h: Vec<String> = chunk.iter().map(|x| format!("{x:02x}")).collect();
        s.push_str(&format!("{:08x}  {}\n", i * 16, h.join(" ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_round_trips_through_cdr() {
        let t = find("std_msgs/String").unwrap();
        let b = (t.encode)("data: hello").unwrap();
        assert_eq!(b, [0, 1, 0, 0, 6, 0, 0, 0, b'h', b'e', b'l', b'l', b'o', 0]);
        assert_eq!((t.decode)(&b).unwrap()["data"], "hello");
        let tw = find("geometry_msgs/msg/Twist").unwrap();
        assert!(
            (tw.encode)("{linear: {x: 1.0, y: 0, z: 0}, angular: {x: 0, y: 0, z: 0.5}}").is_ok()
        );
        assert!((tw.encode)("linear: nonsense").is_err());
        assert!(find("nope/Nope").is_none());
    }
}
