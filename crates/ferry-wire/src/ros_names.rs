//! ROS 2's names as its RMWs put them on the wire, shared by every path
//! that speaks to ROS 2 (DDS and Zenoh): type names in the `dds_`
//! namespace with a trailing underscore (`std_msgs/msg/String` ↔
//! `std_msgs::msg::dds_::String_`) and the shape of a fully qualified name.

/// The RMWs' type name of ROS 2 type `pkg/msg/Name` (or `pkg/srv/Name_Request`
/// for a service's request): `pkg::msg::dds_::Name_`; None when `ros_type`
/// is not `package/kind/Name` made of identifiers.
pub fn dds_type_name(ros_type: &str) -> Option<String> {
    let mut parts = ros_type.split('/');
    let (Some(pkg), Some(kind), Some(name), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if [pkg, kind, name].iter().any(|p| !is_identifier(p)) {
        return None;
    }
    Some(format!("{pkg}::{kind}::dds_::{name}_"))
}

/// The ROS 2 type behind an RMW type name (`std_msgs::msg::dds_::String_` →
/// `std_msgs/msg/String`); None outside ROS 2's conventions.
pub fn ros_type_name(dds_type: &str) -> Option<String> {
    let mut parts = dds_type.split("::");
    let (Some(pkg), Some(kind), Some("dds_"), Some(name), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    Some(format!("{pkg}/{kind}/{}", name.strip_suffix('_')?))
}

/// Whether `name` is a fully qualified ROS 2 name: `/` then tokens of
/// letters, digits and `_`, none starting with a digit, no trailing `/`.
pub fn is_fully_qualified(name: &str) -> bool {
    name.starts_with('/')
        && name.len() > 1
        && name[1..].split('/').all(is_identifier)
        && !name.ends_with('/')
}

/// A ROS 2 name token: letters, digits and `_`, not starting with a digit.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_both_ways() {
        assert_eq!(
            dds_type_name("std_msgs/msg/String").as_deref(),
            Some("std_msgs::msg::dds_::String_")
        );
        assert_eq!(
            ros_type_name("std_msgs::msg::dds_::String_").as_deref(),
            Some("std_msgs/msg/String")
        );
        assert_eq!(dds_type_name("std_msgs/String"), None);
        assert_eq!(dds_type_name("std_msgs/msg/9x"), None);
        assert_eq!(ros_type_name("plain::Type"), None);
        assert!(is_fully_qualified("/arm/joints"));
        assert!(!is_fully_qualified("arm"));
        assert!(!is_fully_qualified("/arm/"));
        assert!(!is_fully_qualified("/"));
    }
}
