//! The run-time codec of `ferry-idl` (types from `.msg` files) writes the
//! same bytes as the compiled types of `ferry::msgs` (serde + CDR, checked
//! against Cyclone DDS in seed 001's Table II runs): every built-in type,
//! with values that exercise alignment, strings, sequences and nesting.

use ferry::msgs::builtin_interfaces::Time;
use ferry::msgs::example_interfaces::srv::{AddTwoIntsRequest, AddTwoIntsResponse};
use ferry::msgs::geometry_msgs::{Point, Pose, Quaternion, Twist, Vector3};
use ferry::msgs::sensor_msgs::{Image, JointState, PointCloud2, PointField};
use ferry::msgs::std_msgs::{Bool, Empty, Float64, Header, Int32, Int64, String as Str};
use ferry::Message;
use ferry_idl::{Interfaces, TypeName};

fn same<T: Message>(ifaces: &Interfaces, v: &T) {
    let compiled = ferry::encode_cdr(v, T::TYPE_NAME).unwrap();
    let t: TypeName = T::TYPE_NAME.parse().unwrap();
    let data = ifaces
        .decode(&t, &compiled)
        .unwrap_or_else(|e| panic!("{}: {e}", T::TYPE_NAME));
    let dynamic = ifaces.encode(&t, &data).unwrap();
    assert_eq!(dynamic, compiled, "{}", T::TYPE_NAME);
}

#[test]
fn the_runtime_codec_writes_the_compiled_types_bytes() {
    let i = Interfaces::common();
    let header = Header {
        stamp: Time {
            sec: -3,
            nanosec: 7,
        },
        frame_id: "base_link".into(),
    };
    same(&i, &Time { sec: 1, nanosec: 2 });
    same(
        &i,
        &Str {
            data: "héllo".into(),
        },
    );
    same(&i, &Bool { data: true });
    same(&i, &Int32 { data: -5 });
    same(&i, &Int64 { data: i64::MIN });
    same(&i, &Float64 { data: 0.25 });
    same(&i, &Empty::default());
    same(&i, &header);
    same(
        &i,
        &Vector3 {
            x: 1.0,
            y: -2.0,
            z: 3.5,
        },
    );
    same(
        &i,
        &Point {
            x: 1.0,
            y: 2.0,
            z: 3.0,
        },
    );
    same(
        &i,
        &Pose {
            position: Point {
                x: 1.0,
                y: 2.0,
                z: 3.0,
            },
            orientation: Quaternion {
                x: 0.0,
                y: 0.0,
                z: 0.6,
                w: 0.8,
            },
        },
    );
    same(
        &i,
        &Twist {
            linear: Vector3 {
                x: 0.5,
                y: 0.0,
                z: 0.0,
            },
            angular: Vector3 {
                x: 0.0,
                y: 0.0,
                z: 1.0,
            },
        },
    );
    same(
        &i,
        &Image {
            header: header.clone(),
            height: 2,
            width: 3,
            encoding: "rgb8".into(),
            is_bigendian: 0,
            step: 9,
            data: (0..18).collect(),
        },
    );
    same(
        &i,
        &JointState {
            header: header.clone(),
            name: vec!["a".into(), "elbow".into()],
            position: vec![0.1, 0.2],
            velocity: vec![],
            effort: vec![1.0],
        },
    );
    same(
        &i,
        &PointCloud2 {
            header,
            height: 1,
            width: 2,
            fields: vec![PointField {
                name: "x".into(),
                offset: 0,
                datatype: 7,
                count: 1,
            }],
            is_bigendian: false,
            point_step: 4,
            row_step: 8,
            data: vec![1, 2, 3, 4, 5, 6, 7, 8],
            is_dense: true,
        },
    );
    same(&i, &AddTwoIntsRequest { a: 2, b: -3 });
    same(&i, &AddTwoIntsResponse { sum: -1 });
}
