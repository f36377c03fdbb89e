//! CDR decoding of ROS 2 messages (crates/ferry/src/message.rs).
//!
//! Properties: `ferry::decode_cdr` never panics (nor aborts on a huge
//! allocation) for `sensor_msgs/JointState` and `sensor_msgs/Image`; a decoded
//! value re-encodes, and encode(decode(encode(v))) is byte-identical to
//! encode(v) (bytes are compared, not values, because f64 NaN != NaN).
#![no_main]

use ferry::msgs::sensor_msgs::{Image, JointState};
use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::Serialize;

fn check<T: Serialize + DeserializeOwned>(data: &[u8]) {
    let Ok(value) = ferry::decode_cdr::<T>(data, "x") else {
        return;
    };
    let enc = ferry::encode_cdr(&value, "x").expect("a decoded value must encode");
    let again: T = ferry::decode_cdr(&enc, "x").expect("re-encoded value must decode");
    let enc2 = ferry::encode_cdr(&again, "x").expect("a decoded value must encode");
    assert_eq!(enc, enc2, "CDR round trip is not stable");
}

fuzz_target!(|data: &[u8]| {
    check::<JointState>(data);
    check::<Image>(data);
});
