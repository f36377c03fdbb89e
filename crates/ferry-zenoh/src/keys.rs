//! The key expression of a topic's or a service's data, as rmw_zenoh
//! builds it: `<domain>/<fully qualified name without its leading
//! slash>/<RMW type name>/<type hash>` — e.g.
//! `0/robot1/chatter/std_msgs::msg::dds_::String_/RIHS01_df66…1a18`.
//! A service's type name is the service type's (`…::srv::dds_::AddTwoInts_`)
//! and its hash the service type's hash.

use ferry_wire::ros_names;
use ferry_wire::types::TypeHash;

/// Why a name or type cannot have a key expression.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// The name is not fully qualified.
    #[error(
        "`{0}` is not a fully qualified ROS 2 name (`/` then tokens of letters, digits and `_`)"
    )]
    Name(String),
    /// The type is not `package/kind/Name`.
    #[error("`{0}` is not a ROS 2 type (`package/msg/Name`, or `package/srv/Name` for a service)")]
    Type(String),
}

/// The key expression of topic `name` (fully qualified) of type
/// `ros_type` (`std_msgs/msg/String`) in `domain`.
pub fn data_key(
    domain: u32,
    name: &str,
    ros_type: &str,
    hash: &TypeHash,
) -> Result<String, KeyError> {
    if !ros_names::is_fully_qualified(name) {
        return Err(KeyError::Name(name.to_string()));
    }
    let type_name =
        ros_names::dds_type_name(ros_type).ok_or_else(|| KeyError::Type(ros_type.to_string()))?;
    Ok(format!("{domain}/{}/{type_name}/{hash}", &name[1..]))
}

/// The key expression of service `name` of type `srv_type`
/// (`example_interfaces/srv/AddTwoInts`) in `domain`; `hash` is the
/// service type's. rmw_zenoh takes the response type's name less its
/// `Response_`, which is the service type's own RMW name.
pub fn service_key(
    domain: u32,
    name: &str,
    srv_type: &str,
    hash: &TypeHash,
) -> Result<String, KeyError> {
    data_key(domain, name, srv_type, hash)
}

/// The service type of request type `request` (`pkg/srv/Name_Request` →
/// `pkg/srv/Name`): what a service's key and tokens name. None when it is
/// not a service's request.
pub fn service_type(request: &str) -> Option<&str> {
    request
        .strip_suffix("_Request")
        .filter(|t| t.contains("/srv/") || t.contains("/action/"))
}

#[cfg(test)]
pub(crate) fn hash(hex: &str) -> TypeHash {
    let mut h = [0u8; 32];
    for (i, b) in h.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    TypeHash(h)
}

#[cfg(test)]
pub(crate) const STRING_HASH: &str =
    "df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_design_documents_keys() {
        let h = hash(STRING_HASH);
        assert_eq!(
            data_key(0, "/chatter", "std_msgs/msg/String", &h).unwrap(),
            format!("0/chatter/std_msgs::msg::dds_::String_/RIHS01_{STRING_HASH}")
        );
        assert_eq!(
            data_key(0, "/robot1/chatter", "std_msgs/msg/String", &h).unwrap(),
            format!("0/robot1/chatter/std_msgs::msg::dds_::String_/RIHS01_{STRING_HASH}")
        );
        let add = "e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a";
        assert_eq!(
            service_key(
                2,
                "/add_two_ints",
                "example_interfaces/srv/AddTwoInts",
                &hash(add)
            )
            .unwrap(),
            format!("2/add_two_ints/example_interfaces::srv::dds_::AddTwoInts_/RIHS01_{add}")
        );
    }

    #[test]
    fn a_service_is_named_by_its_service_type() {
        assert_eq!(
            service_type("example_interfaces/srv/AddTwoInts_Request"),
            Some("example_interfaces/srv/AddTwoInts")
        );
        assert_eq!(
            service_type("example_interfaces/srv/AddTwoInts_Response"),
            None
        );
        assert_eq!(service_type("std_msgs/msg/String_Request"), None);
    }

    #[test]
    fn names_and_types_outside_ros2_are_refused() {
        let h = hash(STRING_HASH);
        assert!(matches!(
            data_key(0, "chatter", "std_msgs/msg/String", &h),
            Err(KeyError::Name(_))
        ));
        // `*` and `**` are Zenoh wildcards: never in a name.
        assert!(data_key(0, "/a/**", "std_msgs/msg/String", &h).is_err());
        assert!(matches!(
            data_key(0, "/chatter", "String", &h),
            Err(KeyError::Type(_))
        ));
    }
}
