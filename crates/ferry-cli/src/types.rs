//! Message types the CLI knows by name: decode to JSON/YAML, encode from YAML.

use ferry::interfaces::interfaces;
use ferry::msgs::*;
use ferry::{Message, TypeHash};
use ferry_idl::{Data, TypeName};
use serde::Serialize;

/// A message type the CLI can encode and decode: any loaded interface
/// (the shipped common interfaces, `FERRY_INTERFACE_PATH`, a ROS 2 install).
pub struct KnownType {
    /// Full name, `pkg/msg/Type`.
    pub name: String,
    /// What discovery announces for it (ROS 2's RIHS01).
    pub hash: TypeHash,
    ty: TypeName,
}

impl KnownType {
    /// Decodes CDR to data.
    pub fn decode(&self, b: &[u8]) -> Result<Data, String> {
        interfaces().decode(&self.ty, b).map_err(|e| e.to_string())
    }

    /// Encodes YAML (a mapping of some fields, nested as the type nests;
    /// the rest takes ROS 2's defaults, as `ros2 topic pub` does).
    pub fn encode(&self, yaml: &str) -> Result<Vec<u8>, String> {
        let text = if yaml.trim().is_empty() { "{}" } else { yaml };
        let v: serde_yaml::Value =
            serde_yaml::from_str(text).map_err(|e| format!("`{text}` is not YAML: {e}"))?;
        let partial = from_yaml(&v)?;
        let i = interfaces();
        let full = i
            .complete(&self.ty, &partial)
            .map_err(|e| format!("`{text}` is not a valid {}: {e}", self.name))?;
        i.encode(&self.ty, &full).map_err(|e| e.to_string())
    }
}

/// YAML as data (mappings become messages, sequences lists).
pub fn from_yaml(v: &serde_yaml::Value) -> Result<Data, String> {
    use serde_yaml::Value as Y;
    Ok(match v {
        Y::Null => Data::Struct(Vec::new()),
        Y::Bool(b) => Data::Bool(*b),
        Y::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Data::Int(i),
            (_, Some(u), _) => Data::UInt(u),
            (_, _, Some(f)) => Data::Float(f),
            _ => return Err(format!("`{n}` is not a number")),
        },
        Y::String(s) => Data::String(s.clone()),
        Y::Sequence(items) => Data::List(items.iter().map(from_yaml).collect::<Result<_, _>>()?),
        Y::Mapping(m) => Data::Struct(
            m.iter()
                .map(|(k, v)| {
                    let k = match k {
                        Y::String(s) => s.clone(),
                        other => serde_yaml::to_string(other)
                            .unwrap_or_default()
                            .trim()
                            .to_string(),
                    };
                    Ok((k, from_yaml(v)?))
                })
                .collect::<Result<_, String>>()?,
        ),
        Y::Tagged(t) => from_yaml(&t.value)?,
    })
}

/// Data as JSON (messages become objects).
pub fn to_json(d: &Data) -> serde_json::Value {
    use serde_json::Value as J;
    match d {
        Data::Bool(b) => J::Bool(*b),
        Data::Int(i) => J::from(*i),
        Data::UInt(u) => J::from(*u),
        Data::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Data::String(s) => J::String(s.clone()),
        Data::List(l) => J::Array(l.iter().map(to_json).collect()),
        Data::Bytes(b) => J::Array(b.iter().map(|x| J::from(*x)).collect()),
        Data::Struct(f) => J::Object(f.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
    }
}

/// Looks a type up by its full (`std_msgs/msg/String`) or short
/// (`std_msgs/String`) name among the loaded interfaces.
pub fn find(name: &str) -> Option<KnownType> {
    let ty = interfaces().resolve(name)?;
    let name = ty.to_string();
    Some(KnownType {
        hash: ferry::interfaces::type_hash_of(&name, ""),
        name,
        ty,
    })
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
        service::<
            example_interfaces::srv::AddTwoIntsRequest,
            example_interfaces::srv::AddTwoIntsResponse,
        >("example_interfaces/srv/AddTwoInts"),
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
        let b = t.encode("data: hello").unwrap();
        assert_eq!(b, [0, 1, 0, 0, 6, 0, 0, 0, b'h', b'e', b'l', b'l', b'o', 0]);
        assert_eq!(to_json(&t.decode(&b).unwrap())["data"], "hello");
        let tw = find("geometry_msgs/msg/Twist").unwrap();
        assert!(tw
            .encode("{linear: {x: 1.0, y: 0, z: 0}, angular: {x: 0, y: 0, z: 0.5}}")
            .is_ok());
        assert!(tw.encode("linear: nonsense").is_err());
        assert!(find("nope/Nope").is_none());
    }

    /// `ros2 topic pub`'s partial YAML: the rest takes ROS defaults.
    #[test]
    fn partial_yaml_gets_ros_defaults() {
        let tw = find("geometry_msgs/msg/Twist").unwrap();
        let b = tw.encode("{linear: {x: 1.0}}").unwrap();
        assert_eq!(b.len(), 4 + 48);
        assert_eq!(&b[4..12], &1.0f64.to_le_bytes());
        let e = tw.encode("{linear: {w: 1.0}}").unwrap_err();
        assert!(e.contains("no field `w`"), "{e}");
        let img = find("sensor_msgs/msg/Image").unwrap();
        assert!(img.encode("{encoding: rgb8, data: [1, 2, 3]}").is_ok());
    }
}
