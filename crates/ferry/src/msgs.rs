//! ROS 2's common interfaces as Rust types, generated at build time from
//! the definitions ferry ships (`ferry_idl::Interfaces::common`) by the
//! generator users run on their own packages ([`crate::include_interfaces`]):
//! builtin_interfaces, std_msgs, std_srvs, geometry_msgs, sensor_msgs,
//! nav_msgs, tf2_msgs, diagnostic_msgs, visualization_msgs, action_msgs,
//! unique_identifier_msgs, rcl_interfaces, example_interfaces,
//! service_msgs and type_description_interfaces.
//!
//! Each package is a module with `msg`, `srv` and `action` inside, as in
//! ROS 2 (`std_msgs::msg::String`, `example_interfaces::srv::AddTwoInts`);
//! messages are also reachable without `msg` (`std_msgs::String`).
//! `Default` gives ROS 2's defaults, constants are associated constants
//! (`sensor_msgs::PointField::FLOAT32`), and the type hash is ROS 2's,
//! computed when ferry was built.

include!(concat!(env!("OUT_DIR"), "/msgs.rs"));
