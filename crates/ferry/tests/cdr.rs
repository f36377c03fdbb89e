//! CDR encoding: byte-exact against ROS 2 encodings written down by hand,
//! and round-trip properties.

use ferry::msgs::{geometry_msgs, sensor_msgs, std_msgs};
use ferry::{decode_cdr, encode_cdr, Codec};
use proptest::prelude::*;

#[test]
fn std_msgs_string_hello_is_byte_exact() {
    // ROS 2 (rmw_fastrtps / cyclonedds) sends std_msgs/String "hello" as:
    // encapsulation CDR_LE 00 01 00 00, u32 length 6 (incl. NUL), "hello\0".
    let expected = [
        0x00, 0x01, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, b'h', b'e', b'l', b'l', b'o', 0x00,
    ];
    let msg = std_msgs::String {
        data: "hello".into(),
    };
    assert_eq!(msg.encode().unwrap().as_ref(), &expected);
    let back: std_msgs::String = decode_cdr(&expected, "std_msgs/msg/String").unwrap();
    assert_eq!(back, msg);
}

#[test]
fn twist_is_byte_exact() {
    // Six float64 little endian, aligned at 8 from the start of the body.
    let t = geometry_msgs::Twist {
        linear: geometry_msgs::Vector3 {
            x: 1.0,
            y: 0.0,
            z: 0.0,
        },
        angular: geometry_msgs::Vector3 {
            x: 0.0,
            y: 0.0,
            z: -0.5,
        },
    };
    let mut expected = vec![0x00, 0x01, 0x00, 0x00];
    for v in [1.0f64, 0.0, 0.0, 0.0, 0.0, -0.5] {
        expected.extend_from_slice(&v.to_le_bytes());
    }
    assert_eq!(t.encode().unwrap().as_ref(), expected.as_slice());
}

#[test]
fn header_alignment_matches_ros2() {
    // Header{stamp{sec=1,nanosec=2}, frame_id="map"} then a uint32: the
    // string ends at body offset 8+4+4=16, so the u32 needs no padding;
    // Int32 after a 1-char string needs 3 bytes of padding.
    let h = std_msgs::Header {
        stamp: ferry::msgs::builtin_interfaces::Time { sec: 1, nanosec: 2 },
        frame_id: "map".into(),
    };
    let expected = [
        0x00, 0x01, 0x00, 0x00, // encapsulation
        1, 0, 0, 0, // sec
        2, 0, 0, 0, // nanosec
        4, 0, 0, 0, b'm', b'a', b'p', 0, // frame_id
    ];
    assert_eq!(h.encode().unwrap().as_ref(), &expected);
}

#[test]
fn image_data_is_a_byte_sequence() {
    let img = sensor_msgs::Image {
        height: 1,
        width: 2,
        encoding: "mono8".into(),
        step: 2,
        data: vec![7, 9],
        ..Default::default()
    };
    let b = img.encode().unwrap();
    // ... encoding "mono8\0" ends at body offset 8+4 (frame_id "") +1 +4+4 ...
    assert_eq!(&b[b.len() - 6..], &[2, 0, 0, 0, 7, 9]);
    let back = sensor_msgs::Image::decode(b).unwrap();
    assert_eq!(back, img);
}

#[test]
fn garbage_is_a_decode_error_not_a_panic() {
    assert!(decode_cdr::<std_msgs::String>(&[], "t").is_err());
    assert!(decode_cdr::<std_msgs::String>(&[9, 9, 9, 9], "t").is_err());
    assert!(decode_cdr::<std_msgs::String>(&[0, 1, 0, 0, 0xff, 0xff, 0xff, 0x7f], "t").is_err());
}

proptest! {
    #[test]
    fn strings_round_trip(s in ".{0,200}") {
        let m = std_msgs::String { data: s };
        let b = encode_cdr(&m, "std_msgs/msg/String").unwrap();
        prop_assert_eq!(decode_cdr::<std_msgs::String>(&b, "x").unwrap(), m);
    }

    #[test]
    fn joint_states_round_trip(names in proptest::collection::vec("[a-z_]{1,12}", 0..8), pos in proptest::collection::vec(-1e6f64..1e6, 0..8)) {
        let m = sensor_msgs::JointState { name: names, position: pos.clone(), velocity: pos, ..Default::default() };
        let b = encode_cdr(&m, "j").unwrap();
        prop_assert_eq!(decode_cdr::<sensor_msgs::JointState>(&b, "j").unwrap(), m);
    }

    #[test]
    fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = decode_cdr::<sensor_msgs::JointState>(&bytes, "j");
        let _ = decode_cdr::<sensor_msgs::Image>(&bytes, "i");
    }
}

/// Encoding straight into a buffer (a shared-memory slot) gives the same
/// bytes as `encode`, and `None`, never a partial or wrong length, for
/// every buffer too small to hold them.
fn encode_into_matches_encode<T: Codec>(msg: &T) {
    let want = msg.encode().unwrap();
    for cap in 0..want.len() {
        let mut buf = vec![0xAAu8; cap];
        assert_eq!(msg.encode_into(&mut buf).unwrap(), None, "capacity {cap}");
    }
    for extra in [0, 1, 7, 100] {
        let mut buf = vec![0xAAu8; want.len() + extra];
        assert_eq!(msg.encode_into(&mut buf).unwrap(), Some(want.len()));
        assert_eq!(&buf[..want.len()], want.as_ref());
    }
}

#[test]
fn encoding_in_place_is_byte_identical_and_never_overflows() {
    encode_into_matches_encode(&std_msgs::String {
        data: "hello".into(),
    });
    encode_into_matches_encode(&geometry_msgs::Twist::default());
    let img = sensor_msgs::Image {
        height: 3,
        width: 5,
        encoding: "rgb8".into(),
        step: 15,
        data: (0..45u8).collect(),
        ..Default::default()
    };
    encode_into_matches_encode(&img);
    encode_into_matches_encode(&ferry::RawBytes::new(vec![1u8, 2, 3, 4, 5]));
}
