//! Messages as data: ROS 2 defaults, partial values completed, bounds
//! checked, CDR byte-identical to what ROS 2's RMWs write (golden bytes
//! from rmw_cyclonedds / Fast-CDR's layout), and no panic on any input.

use ferry_idl::{Data, DataError, Interfaces, TypeName};

fn t(name: &str) -> TypeName {
    name.parse().unwrap()
}

fn s(fields: Vec<(&str, Data)>) -> Data {
    Data::Struct(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

#[test]
fn golden_bytes() {
    let i = Interfaces::common();
    let string = s(vec![("data", Data::String("hi".into()))]);
    assert_eq!(
        i.encode(&t("std_msgs/msg/String"), &string).unwrap(),
        [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0]
    );
    let header = i
        .complete(
            &t("std_msgs/msg/Header"),
            &s(vec![
                (
                    "stamp",
                    s(vec![("sec", Data::Int(1)), ("nanosec", Data::UInt(2))]),
                ),
                ("frame_id", Data::String("f".into())),
            ]),
        )
        .unwrap();
    assert_eq!(
        i.encode(&t("std_msgs/msg/Header"), &header).unwrap(),
        [0, 1, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, b'f', 0]
    );
    // A float64 sequence after a uint8: count at 4, elements at 8.
    let mut data = i
        .default_data(&t("std_msgs/msg/Float64MultiArray"))
        .unwrap();
    if let Data::Struct(f) = &mut data {
        f[1].1 = Data::List(vec![Data::Float(1.0)]);
    }
    let b = i
        .encode(&t("std_msgs/msg/Float64MultiArray"), &data)
        .unwrap();
    // layout: dim count 0 (4), data_offset 0 (4), data count 1 (4), pad 4, f64.
    assert_eq!(b.len(), 4 + 4 + 4 + 4 + 4 + 8, "{b:?}");
    assert_eq!(&b[b.len() - 8..], &1.0f64.to_le_bytes());
    // The empty message is one zero byte.
    let empty = i.default_data(&t("std_msgs/msg/Empty")).unwrap();
    assert_eq!(
        i.encode(&t("std_msgs/msg/Empty"), &empty).unwrap(),
        [0, 1, 0, 0, 0]
    );
}

#[test]
fn partial_values_get_ros_defaults() {
    let i = Interfaces::common();
    let twist = t("geometry_msgs/msg/Twist");
    let d = i
        .complete(&twist, &s(vec![("linear", s(vec![("x", Data::Int(1))]))]))
        .unwrap();
    assert_eq!(
        d.field("linear").unwrap().field("x"),
        Some(&Data::Float(1.0))
    );
    assert_eq!(
        d.field("angular").unwrap().field("z"),
        Some(&Data::Float(0.0))
    );
    let b = i.encode(&twist, &d).unwrap();
    assert_eq!(b.len(), 4 + 48);
    assert_eq!(i.decode(&twist, &b).unwrap(), d);
    // Defaults written in the file: Quaternion's w is 1.
    let q = i.default_data(&t("geometry_msgs/msg/Quaternion")).unwrap();
    assert_eq!(q.field("w"), Some(&Data::Float(1.0)));
}

#[test]
fn bad_values_name_the_field() {
    let i = Interfaces::common();
    let e = i
        .complete(
            &t("geometry_msgs/msg/Twist"),
            &s(vec![("linaer", s(vec![]))]),
        )
        .unwrap_err();
    assert!(e.to_string().contains("no field `linaer`"), "{e}");
    assert!(e.to_string().contains("linear, angular"), "{e}");
    let e = i
        .complete(&t("std_msgs/msg/Int8"), &s(vec![("data", Data::Int(300))]))
        .unwrap_err();
    assert!(
        e.to_string().contains("`data`") && e.to_string().contains("-128..=127"),
        "{e}"
    );
    let e = i
        .complete(
            &t("geometry_msgs/msg/Twist"),
            &s(vec![(
                "linear",
                s(vec![("x", Data::String("fast".into()))]),
            )]),
        )
        .unwrap_err();
    assert!(e.to_string().starts_with("`linear.x`"), "{e}");
}

#[test]
fn bounds_are_checked_never_cut() {
    let mut i = Interfaces::common();
    i.add_text(
        "t.msg",
        "my_pkg",
        ferry_idl::Kind::Msg,
        "Bounded",
        "string<=3 name\nint32[<=2] values\nfloat32[3] xyz\n",
    )
    .unwrap();
    let ty = t("my_pkg/msg/Bounded");
    let e = i
        .complete(&ty, &s(vec![("name", Data::String("four".into()))]))
        .unwrap_err();
    assert!(
        matches!(
            e,
            DataError::Bound {
                len: 4,
                bound: 3,
                ..
            }
        ),
        "{e}"
    );
    let e = i
        .complete(&ty, &s(vec![("values", Data::List(vec![Data::Int(1); 3]))]))
        .unwrap_err();
    assert!(e.to_string().contains("at most 2"), "{e}");
    let mut full = i.default_data(&ty).unwrap();
    if let Data::Struct(f) = &mut full {
        f[2].1 = Data::List(vec![Data::Float(0.0); 2]);
    }
    let e = i.encode(&ty, &full).unwrap_err();
    assert!(e.to_string().contains("exactly 3"), "{e}");
}

/// Every shipped type: its default encodes and decodes back to itself,
/// and every truncation of the bytes is an error, never a panic.
#[test]
fn every_shipped_type_round_trips() {
    let i = Interfaces::common();
    let names: Vec<TypeName> = i.messages().map(|m| m.name.clone()).collect();
    assert!(names.len() > 250, "{}", names.len());
    for n in &names {
        let d = i.default_data(n).unwrap();
        let b = i.encode(n, &d).unwrap();
        assert_eq!(i.decode(n, &b).unwrap(), d, "{n}");
        for cut in 0..b.len() {
            assert!(i.decode(n, &b[..cut]).is_err(), "{n} cut at {cut}");
        }
    }
}

#[test]
fn hostile_counts_are_errors() {
    let i = Interfaces::common();
    // A sensor_msgs/Image claiming 4 G of data in 44 bytes: the data
    // count is the last field's.
    let img = t("sensor_msgs/msg/Image");
    let mut b = i.encode(&img, &i.default_data(&img).unwrap()).unwrap();
    let n = b.len();
    b[n - 4..].copy_from_slice(&[0xff; 4]);
    let e = i.decode(&t("sensor_msgs/msg/Image"), &b).unwrap_err();
    assert!(e.to_string().contains("claims"), "{e}");
}
