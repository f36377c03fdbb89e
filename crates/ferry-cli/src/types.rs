//! Message types the CLI knows by name: decode to JSON/YAML, encode from YAML.

use ferry::interfaces::interfaces;
use ferry::{RawBytes, TypeHash};
use ferry_idl::{Data, Interfaces, TypeName};

/// A message type the CLI can encode and decode: any loaded interface
/// (the shipped common interfaces, `FERRY_INTERFACE_PATH`, a ROS 2 install).
pub struct KnownType {
    /// Full name, `pkg/msg/Type`.
    pub name: String,
    /// What discovery announces for it (ROS 2's RIHS01).
    pub hash: TypeHash,
    ty: TypeName,
    /// The interfaces with a definition a peer sent (else the process's).
    learnt: Option<Box<Interfaces>>,
}

impl KnownType {
    fn ifaces(&self) -> &Interfaces {
        self.learnt.as_deref().unwrap_or_else(|| interfaces())
    }

    /// Decodes CDR to data.
    pub fn decode(&self, b: &[u8]) -> Result<Data, String> {
        self.ifaces().decode(&self.ty, b).map_err(|e| e.to_string())
    }

    /// Encodes YAML (a mapping of some fields, nested as the type nests;
    /// the rest takes ROS 2's defaults, as `ros2 topic pub` does).
    pub fn encode(&self, yaml: &str) -> Result<Vec<u8>, String> {
        let text = if yaml.trim().is_empty() { "{}" } else { yaml };
        let v: serde_norway::Value =
            serde_norway::from_str(text).map_err(|e| format!("`{text}` is not YAML: {e}"))?;
        let partial = from_yaml(&v)?;
        let i = self.ifaces();
        let full = i
            .complete(&self.ty, &partial)
            .map_err(|e| format!("`{text}` is not a valid {}: {e}", self.name))?;
        i.encode(&self.ty, &full).map_err(|e| e.to_string())
    }
}

/// YAML as data (mappings become messages, sequences lists).
pub fn from_yaml(v: &serde_norway::Value) -> Result<Data, String> {
    use serde_norway::Value as Y;
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
                        other => serde_norway::to_string(other)
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
    interfaces().resolve(name).map(KnownType::of)
}

impl KnownType {
    fn of(ty: TypeName) -> Self {
        let name = ty.to_string();
        KnownType {
            hash: ferry::interfaces::type_hash_of(&name, ""),
            name,
            ty,
            learnt: None,
        }
    }
}

/// The type of `topic`'s publishers learnt from them: a type this process
/// has no files for, whose definition a publisher's node sends through its
/// admin service. Used only when the definition's ROS 2 hash is the one
/// the publisher announced (a peer's word is checked, never trusted).
/// Says on stderr where the definition came from, or why none was used.
pub fn learn(node: &ferry::Node, topic: &str) -> Option<KnownType> {
    use ferry::admin::{AdminReply, AdminRequest};
    let g = node.graph();
    let me = node.participant();
    let pubs: Vec<_> = g
        .endpoints_of(topic)
        .filter(|e| {
            e.kind == ferry::EndpointKind::Publisher && e.type_name != "*" && e.id.participant != me
        })
        .cloned()
        .collect();
    for e in pubs {
        let Ok(ty) = e.type_name.parse::<TypeName>() else {
            continue;
        };
        let client = node
            .client::<AdminRequest, AdminReply>(&ferry::admin::service_name(&e.node))
            .build()
            .ok()?;
        let req = AdminRequest {
            command: "definition".into(),
            topic: e.type_name.clone(),
            ..Default::default()
        };
        let bundle = match client
            .call(req, std::time::Duration::from_secs(3))
            .map_err(|e| e.to_string())
            .and_then(|r| ferry::admin::parse_definition(&r).map_err(|e| e.to_string()))
        {
            Ok(b) => b,
            Err(err) => {
                eprintln!(
                    "ferry: {} did not send the definition of {}: {err}",
                    e.node, e.type_name
                );
                continue;
            }
        };
        let mut with = interfaces().clone();
        if let Err(err) = with.add_bundle(&ty, &bundle) {
            eprintln!(
                "ferry: the definition of {} sent by {} is not valid: {err}",
                e.type_name, e.node
            );
            continue;
        }
        match with.type_hash(&ty) {
            Ok(h) if h.0 == e.type_hash.0 => {
                eprintln!(
                    "ferry: decoding {} with the definition sent by {} (its hash matches the announced {})",
                    e.type_name, e.node, e.type_hash
                );
                return Some(KnownType {
                    name: ty.to_string(),
                    hash: e.type_hash,
                    ty,
                    learnt: Some(Box::new(with)),
                });
            }
            _ => eprintln!(
                "ferry: the definition of {} sent by {} does not match the hash it announced ({}): not used",
                e.type_name, e.node, e.type_hash
            ),
        }
    }
    None
}

/// What a service call answered: the response as data, or (ferry's own
/// admin service, which has no `.srv`) as JSON.
pub enum Answer {
    /// A loaded interface's response.
    Data(Data),
    /// The admin service's reply.
    Json(serde_json::Value),
}

/// Calls service `srv` of type `service_type` (any loaded `.srv`, by full
/// or short name, or ferry's `ferry_msgs/srv/Admin`) with a request given
/// as partial YAML (the rest takes ROS 2's defaults).
pub fn call_service(
    node: &ferry::Node,
    srv: &str,
    service_type: &str,
    yaml: &str,
    timeout: std::time::Duration,
) -> Result<Answer, String> {
    let text = if yaml.trim().is_empty() { "{}" } else { yaml };
    if service_type == "ferry_msgs/srv/Admin" {
        let req: ferry::admin::AdminRequest = serde_norway::from_str(text)
            .map_err(|e| format!("`{text}` is not a valid request: {e}"))?;
        let client = node
            .client::<ferry::admin::AdminRequest, ferry::admin::AdminReply>(srv)
            .build()
            .map_err(|e| e.to_string())?;
        let resp = client.call(req, timeout).map_err(|e| e.to_string())?;
        return serde_json::to_value(&*resp)
            .map(Answer::Json)
            .map_err(|e| e.to_string());
    }
    let i = interfaces();
    let svc = i.service(service_type).ok_or_else(|| {
        format!(
            "unknown service type `{service_type}` (see `ferry interface list`; add your packages to FERRY_INTERFACE_PATH)"
        )
    })?;
    let request = KnownType::of(svc.request.name.clone());
    let response = KnownType::of(svc.response.name.clone());
    let bytes = request.encode(text)?;
    let client = node
        .client::<RawBytes, RawBytes>(srv)
        .type_info(
            (&request.name, request.hash),
            (&response.name, response.hash),
        )
        .build()
        .map_err(|e| e.to_string())?;
    let resp = client
        .call(RawBytes::new(bytes), timeout)
        .map_err(|e| e.to_string())?;
    response.decode(&resp).map(Answer::Data)
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
