//! Generated Rust types against ROS 2: golden CDR bytes written out by
//! hand, every shipped type and ours byte-identical with ferry-idl's
//! run-time codec (itself checked against ROS 2's bytes) on random values,
//! ROS 2's defaults and constants, bounds refused on publish and on
//! receipt, and the types carried between real nodes on every path with
//! ROS 2's type hashes in discovery.

use std::path::Path;
use std::time::{Duration, Instant};

use ferry::msgs::geometry_msgs;
use ferry::{Codec, Config, DiscoveryRange, Message, Node, PublishError, Qos, TransportKind};
use ferry_idl::{BaseType, Collection, Data, Interfaces, MessageDef, Primitive, TypeName};
use ferry_interfaces_example::catalog;
use ferry_interfaces_example::interfaces::ferry_test_msgs::{action, msg, srv};
use ferry_testkit::Rng;

fn ifaces() -> Interfaces {
    let mut i = Interfaces::common();
    let problems = i.add_dir(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("interfaces")
            .as_path(),
    );
    assert!(problems.is_empty(), "{problems:?}");
    i
}

#[test]
fn golden_bytes_written_by_hand() {
    let n = msg::Nested {
        label: "ab".into(),
        values: vec![1, 2],
        weight: 0.5,
    };
    let mut want = vec![0, 1, 0, 0]; // CDR little endian
    want.extend([3, 0, 0, 0, b'a', b'b', 0]); // "ab" + NUL, counted
    want.push(0); // pad to 4
    want.extend([2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0]); // two int32
    want.extend([0; 4]); // pad to 8
    want.extend(0.5f64.to_le_bytes()); // at offset 24 of the body
    assert_eq!(&n.encode().unwrap()[..], &want[..]);
    assert_eq!(msg::Nested::decode(want.into()).unwrap(), n);

    // A wstring: a count of UTF-16 units, 2 bytes each, no terminator.
    let t = geometry_msgs::msg::Point {
        x: 1.0,
        y: 0.0,
        z: -1.0,
    };
    let mut want = vec![0, 1, 0, 0];
    for v in [1.0f64, 0.0, -1.0] {
        want.extend(v.to_le_bytes());
    }
    assert_eq!(&t.encode().unwrap()[..], &want[..]);
}

#[test]
fn defaults_and_constants_are_ros2s() {
    let e = msg::Everything::default();
    assert!(e.b);
    assert_eq!((e.by, e.ch, e.u8, e.i8), (7, 65, 200, -8));
    assert_eq!((e.f32, e.f64), (1.5, -2.25));
    assert_eq!(e.u64, 18_000_000_000_000_000_000);
    assert_eq!(e.s, "default text");
    assert_eq!(&*e.ws, "wide");
    assert_eq!(e.fixed_ints, [1, 2, 3]);
    assert_eq!(e.big_fixed, [0.0; 40]);
    assert_eq!(e.fixed_strings, ["a".to_string(), "b".to_string()]);
    assert_eq!(e.bounded_bytes, vec![1, 2]);
    assert_eq!(e.ints, vec![-1, 0, 1]);
    assert_eq!(e.nested.label, "x");
    assert_eq!(e.nested.weight, 1.0);
    assert_eq!(e.nested_fixed[1].label, "x");
    assert_eq!(e.r#type, 3);
    assert_eq!(msg::Everything::ANSWER, -42);
    assert_eq!(msg::Everything::HALF, 0.5f32);
    assert_eq!(msg::Everything::SCALE, 1.25);
    const { assert!(msg::Everything::FLAG) };
    assert_eq!(msg::Everything::GREETING, "hello, world");
    assert_eq!(msg::Everything::WIDE, "grüße");
    assert_eq!(msg::Everything::MODE_RUN, 1u8);
    assert_eq!(srv::Compute_Request::default().op, "add");
    assert_eq!(action::Count_Goal::default().target, 10);
    // The same defaults, encoded, as the run-time codec builds them.
    let i = ifaces();
    let t: TypeName = "ferry_test_msgs/msg/Everything".parse().unwrap();
    let dynamic = i.encode(&t, &i.default_data(&t).unwrap()).unwrap();
    assert_eq!(&e.encode().unwrap()[..], &dynamic[..]);
}

#[test]
fn type_hashes_are_computed_as_ros2_does() {
    let i = ifaces();
    let hash = |n: &str| i.type_hash(&n.parse().unwrap()).unwrap().0;
    assert_eq!(
        <msg::Everything as Message>::type_hash().0,
        hash("ferry_test_msgs/msg/Everything")
    );
    assert_eq!(
        <srv::Compute as ferry::ServiceType>::type_hash().0,
        hash("ferry_test_msgs/srv/Compute")
    );
    assert_eq!(
        <srv::Compute_Request as Codec>::service_hash().map(|h| h.0),
        Some(hash("ferry_test_msgs/srv/Compute"))
    );
    // The shipped types generated into ferry::msgs carry ROS 2's value
    // (std_msgs/msg/String, as `ros2 interface` prints it on Jazzy).
    assert_eq!(
        <ferry::msgs::std_msgs::String as Message>::type_hash().to_string(),
        "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
    );
}

/// A random value of `t`, within every bound and fixed length.
fn random(i: &Interfaces, t: &MessageDef, rng: &mut Rng, depth: usize) -> Data {
    let fields = t
        .fields
        .iter()
        .map(|f| {
            let one = |rng: &mut Rng| random_elem(i, &f.ty.base, rng, depth);
            let v = match f.ty.collection {
                Collection::Single => one(rng),
                c => {
                    let n = match c {
                        Collection::Array(n) => n as usize,
                        Collection::Bounded(b) => (rng.next_u64() % (b + 1)) as usize,
                        _ if depth > 2 => 0,
                        _ => (rng.next_u64() % 5) as usize,
                    };
                    match f.ty.base {
                        BaseType::Primitive(
                            Primitive::Uint8 | Primitive::Byte | Primitive::Char,
                        ) => Data::Bytes((0..n).map(|_| rng.next_u64() as u8).collect()),
                        _ => Data::List((0..n).map(|_| one(rng)).collect()),
                    }
                }
            };
            (f.name.clone(), v)
        })
        .collect();
    Data::Struct(fields)
}

fn random_elem(i: &Interfaces, base: &BaseType, rng: &mut Rng, depth: usize) -> Data {
    const TEXT: [&str; 6] = ["", "a", "héllo", "日本語", "🤖 robot", "tab\tand\nline"];
    let r = rng.next_u64();
    match base {
        BaseType::Primitive(p) => match p {
            Primitive::Bool => Data::Bool(r & 1 == 1),
            Primitive::Float32 => Data::Float(f64::from(f32::from_bits(r as u32 & 0x7f7f_ffff))),
            Primitive::Float64 => Data::Float(f64::from_bits(r & 0x7fef_ffff_ffff_ffff)),
            p => {
                let (lo, hi) = p.int_range().expect("integer");
                let v = lo + (i128::from(r) % (hi - lo + 1));
                if lo < 0 {
                    Data::Int(v as i64)
                } else {
                    Data::UInt(v as u64)
                }
            }
        },
        BaseType::String { bound } | BaseType::WString { bound } => {
            let s = TEXT[(r % TEXT.len() as u64) as usize];
            let fits = match (base, bound) {
                (_, None) => true,
                (BaseType::String { .. }, Some(b)) => s.len() as u64 <= *b,
                (_, Some(b)) => s.encode_utf16().count() as u64 <= *b,
            };
            Data::String(if fits { s } else { "ok" }.chars().take(3).collect())
        }
        BaseType::Message(n) => random(i, i.get(n).expect("known"), rng, depth + 1),
    }
}

#[test]
fn every_type_is_byte_identical_with_the_run_time_codec() {
    let i = ifaces();
    let mut rng = Rng::new(21);
    let mut types = 0;
    for entry in catalog::TYPES.iter().flat_map(|m| m.iter()) {
        types += 1;
        let t: TypeName = entry.type_name.parse().unwrap();
        let def = i.get(&t).unwrap_or_else(|| panic!("{t} not loaded"));
        assert_eq!(
            (entry.type_hash)().0,
            i.type_hash(&t).unwrap().0,
            "{t}: hash"
        );
        // ROS 2's defaults.
        let dynamic = i.encode(&t, &i.default_data(&t).unwrap()).unwrap();
        let typed = (entry.default_cdr)().unwrap();
        assert_eq!(&typed[..], &dynamic[..], "{t}: defaults");
        // Random values: the run-time codec's bytes decode as the
        // generated type and encode back to the same bytes; and the
        // generated type's bytes decode back to the same data.
        for round in 0..8 {
            let data = random(&i, def, &mut rng, 0);
            let bytes = i.encode(&t, &data).unwrap_or_else(|e| panic!("{t}: {e}"));
            let again = (entry.recode)(bytes.clone().into())
                .unwrap_or_else(|e| panic!("{t} round {round}: {e}"));
            assert_eq!(&again[..], &bytes[..], "{t} round {round}");
            assert_eq!(i.decode(&t, &again).unwrap(), data, "{t} round {round}");
        }
    }
    // Every shipped message, service part and action part, and ours.
    assert!(types > 250, "{types} types in the catalog");
}

#[test]
fn bounds_are_refused_on_publish_and_on_receipt() {
    let node = node(230);
    let publisher = node
        .publisher::<msg::Everything>("/codegen/bounds")
        .build()
        .unwrap();
    let mut e = msg::Everything {
        nested_list: vec![msg::Nested::default(), msg::Nested::default()],
        ..Default::default()
    };
    e.nested_list[1].label = "too long".into();
    match publisher.publish(e.clone()) {
        Err(PublishError::OutOfBounds { type_name, error }) => {
            assert_eq!(type_name, "ferry_test_msgs/msg/Everything");
            assert_eq!(error.path, "nested_list[1].label");
            assert_eq!((error.len, error.bound), (8, 5));
            assert!(error.to_string().contains("over its bound of 5"), "{error}");
        }
        other => panic!("published over a bound: {other:?}"),
    }
    e.nested_list[1].label = "fine".into();
    e.bounded_bytes = vec![0; 5];
    let err = publisher.publish(e.clone()).unwrap_err();
    assert!(
        err.to_string().contains("`bounded_bytes` holds 5 elements"),
        "{err}"
    );
    e.bounded_bytes.clear();
    e.bounded_ws = "wider".into();
    let err = publisher.publish(e.clone()).unwrap_err();
    assert!(err.to_string().contains("UTF-16 units"), "{err}");
    e.bounded_ws = "ok".into();
    publisher.publish(e.clone()).unwrap();

    // Bytes from a peer that ignores the bound (serde without the check)
    // are refused when decoded, with the field named.
    e.short_strings = vec!["abcd".into()];
    let raw = ferry::encode_cdr(&e, "x").unwrap();
    let err = msg::Everything::decode(raw.into()).unwrap_err();
    assert!(err.to_string().contains("short_strings[0]"), "{err}");
}

fn node(domain: u16) -> Node {
    Node::builder()
        .name("codegen")
        .config(Config {
            domain_id: domain,
            discovery: DiscoveryRange::Localhost,
            ..Config::default()
        })
        .build()
        .expect("node")
}

#[test]
fn generated_types_travel_every_path_with_ros2_hashes() {
    let node = node(231);
    let i = ifaces();
    let mut rng = Rng::new(7);
    let t: TypeName = "ferry_test_msgs/msg/Everything".parse().unwrap();
    for (k, path) in [
        TransportKind::InProcess,
        TransportKind::SharedMemory,
        TransportKind::Udp,
        TransportKind::Tcp,
    ]
    .into_iter()
    .enumerate()
    {
        let topic = format!("/codegen/every/p{k}");
        let qos = Qos::default().reliable().transport(path);
        let sub = node
            .subscriber::<msg::Everything>(&topic)
            .qos(qos)
            .build()
            .unwrap();
        let publisher = node
            .publisher::<msg::Everything>(&topic)
            .qos(qos)
            .build()
            .unwrap();
        // A random value (through the run-time codec: it holds every bound).
        let data = random(&i, i.get(&t).unwrap(), &mut rng, 0);
        let bytes = i.encode(&t, &data).unwrap();
        let value = msg::Everything::decode(bytes.into()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let got = loop {
            publisher.publish(value.clone()).unwrap();
            if let Ok(s) = sub.recv_timeout(Duration::from_millis(100)) {
                break s;
            }
            assert!(Instant::now() < deadline, "{path}: nothing arrived");
        };
        assert_eq!(got.info.transport, path);
        assert_eq!(*got, value, "{path}");
        // Discovery announced ROS 2's hash of the type.
        let graph = node.graph();
        let announced = graph.endpoints_of(&topic).next().expect("in the graph");
        assert_eq!(announced.type_hash.0, i.type_hash(&t).unwrap().0);
    }
}

#[test]
fn a_generated_service_answers_with_its_ros2_hash() {
    let node = node(232);
    let _svc = node
        .service::<srv::ComputeRequest, srv::ComputeResponse, _>("/codegen/compute", |r| {
            srv::ComputeResponse {
                result: if r.op == "add" { r.a + r.b } else { r.a * r.b },
                message: r.op.clone(),
            }
        })
        .build()
        .unwrap();
    let client = node
        .client::<srv::ComputeRequest, srv::ComputeResponse>("/codegen/compute")
        .build()
        .unwrap();
    let r = client
        .call(
            srv::ComputeRequest {
                a: 6,
                b: 7,
                ..Default::default()
            },
            Duration::from_secs(10),
        )
        .unwrap();
    assert_eq!((r.result, r.message.as_str()), (13, "add"));
    let graph = node.graph();
    let announced = graph
        .endpoints_of("/codegen/compute")
        .next()
        .expect("service in the graph");
    let i = ifaces();
    assert_eq!(
        announced.type_hash.0,
        i.type_hash(&"ferry_test_msgs/srv/Compute".parse().unwrap())
            .unwrap()
            .0
    );
    let too_long = srv::ComputeRequest {
        op: "x".repeat(17),
        ..Default::default()
    };
    let err = client.call(too_long, Duration::from_secs(2)).unwrap_err();
    assert!(err.to_string().contains("`op` holds 17 bytes"), "{err}");
}
