//! ROS 2's DDS names, as rmw_cyclonedds and rmw_fastrtps make them: topics
//! under `rt/`, services as a request topic `rq/<name>Request` and a reply
//! topic `rr/<name>Reply`, and type names in the `dds_` namespace with a
//! trailing underscore (`std_msgs/msg/String` → `std_msgs::msg::dds_::String_`).

use ferry_wire::ros_names;

use crate::DdsError;

/// The DDS topic of ROS 2 topic `name` (fully qualified: `/arm/joints`).
pub fn topic(name: &str) -> Result<String, DdsError> {
    Ok(format!("rt{}", qualified(name)?))
}

/// The DDS topics of ROS 2 service `name`: (request, reply).
pub fn service(name: &str) -> Result<(String, String), DdsError> {
    let n = qualified(name)?;
    Ok((format!("rq{n}Request"), format!("rr{n}Reply")))
}

/// The ROS 2 name behind a DDS topic name, with what it is; None for a
/// topic outside ROS 2's conventions (plain DDS, `ros_discovery_info`).
pub fn ros_name(dds_topic: &str) -> Option<(RosKind, String)> {
    let (prefix, rest) = dds_topic.split_at_checked(2)?;
    if !rest.starts_with('/') {
        return None;
    }
    match prefix {
        "rt" => Some((RosKind::Topic, rest.to_string())),
        "rq" => Some((RosKind::Request, rest.strip_suffix("Request")?.to_string())),
        "rr" => Some((RosKind::Reply, rest.strip_suffix("Reply")?.to_string())),
        _ => None,
    }
}

/// What a DDS topic is in ROS 2's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RosKind {
    /// `rt/…`: a topic.
    Topic,
    /// `rq/…Request`: a service's requests.
    Request,
    /// `rr/…Reply`: a service's replies.
    Reply,
}

/// The DDS type name of ROS 2 type `pkg/msg/Name` (or `pkg/srv/Name_Request`
/// for a service's request).
pub fn dds_type(ros_type: &str) -> Result<String, DdsError> {
    ros_names::dds_type_name(ros_type).ok_or_else(|| DdsError::Name {
        name: ros_type.to_string(),
        why: "a ROS 2 type is `package/msg/Name` (or srv, action)",
    })
}

/// The DDS type names of ROS 2 service type `pkg/srv/Name`: (request, reply).
pub fn dds_service_types(ros_type: &str) -> Result<(String, String), DdsError> {
    Ok((
        dds_type(&format!("{ros_type}_Request"))?,
        dds_type(&format!("{ros_type}_Response"))?,
    ))
}

/// The ROS 2 type behind a DDS type name (`std_msgs::msg::dds_::String_` →
/// `std_msgs/msg/String`); None outside ROS 2's conventions.
pub fn ros_type(dds_type: &str) -> Option<String> {
    ros_names::ros_type_name(dds_type)
}

fn qualified(name: &str) -> Result<&str, DdsError> {
    if ros_names::is_fully_qualified(name) {
        Ok(name)
    } else {
        Err(DdsError::Name {
            name: name.to_string(),
            why: "a fully qualified ROS 2 name: `/` then tokens of letters, digits and `_`",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rmws() {
        assert_eq!(topic("/chatter").unwrap(), "rt/chatter");
        assert_eq!(topic("/arm/joint_states").unwrap(), "rt/arm/joint_states");
        assert_eq!(
            service("/add_two_ints").unwrap(),
            (
                "rq/add_two_intsRequest".to_string(),
                "rr/add_two_intsReply".to_string()
            )
        );
        assert_eq!(
            dds_type("std_msgs/msg/String").unwrap(),
            "std_msgs::msg::dds_::String_"
        );
        assert_eq!(
            dds_service_types("example_interfaces/srv/AddTwoInts").unwrap(),
            (
                "example_interfaces::srv::dds_::AddTwoInts_Request_".to_string(),
                "example_interfaces::srv::dds_::AddTwoInts_Response_".to_string()
            )
        );
        assert_eq!(
            ros_type("sensor_msgs::msg::dds_::PointCloud2_").as_deref(),
            Some("sensor_msgs/msg/PointCloud2")
        );
        assert_eq!(
            ros_name("rq/a/bRequest"),
            Some((RosKind::Request, "/a/b".to_string()))
        );
        assert_eq!(ros_name("ros_discovery_info"), None);
        assert_eq!(ros_type("DDS::String"), None);
    }

    #[test]
    fn bad_names_are_refused_with_the_rule() {
        for bad in ["chatter", "/", "/a//b", "/a/", "/1a", "/a b"] {
            assert!(topic(bad).is_err(), "{bad}");
        }
        for bad in ["String", "std_msgs/String", "a/b/c/d", "a/msg/"] {
            assert!(dds_type(bad).is_err(), "{bad}");
        }
    }
}
