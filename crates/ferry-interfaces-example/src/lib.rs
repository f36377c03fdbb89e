//! An application crate with its own ROS 2 package (`interfaces/`), as a
//! ferry user has one: its build script runs `ferry_idl::codegen::build`
//! and [`ferry::include_interfaces!`] brings the types in. Its tests check
//! the generated code against ROS 2's CDR bytes and type hashes.

/// The generated packages (`ferry_test_msgs`).
pub mod interfaces {
    ferry::include_interfaces!();
}

/// Every shipped type and ours, generated again with a catalog (for the
/// tests that go over every type).
#[doc(hidden)]
pub mod catalog {
    include!(concat!(env!("OUT_DIR"), "/catalog.rs"));
}
