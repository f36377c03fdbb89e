//! ROS 2 naming rules for nodes, namespaces, topics and services.

use crate::error::BuildError;

fn bad(name: &str, why: &'static str) -> BuildError {
    BuildError::InvalidName {
        name: name.to_string(),
        why,
    }
}

fn check_tokens(full: &str, body: &str) -> Result<(), BuildError> {
    for tok in body.split('/') {
        if tok.is_empty() {
            return Err(bad(full, "empty segment (`//` or trailing `/`)"));
        }
        if tok.as_bytes()[0].is_ascii_digit() {
            return Err(bad(full, "a segment may not start with a digit"));
        }
        if !tok.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(bad(full, "only letters, digits, `_` and `/` are allowed"));
        }
    }
    Ok(())
}

/// Validates a node name (one segment).
pub fn node_name(name: &str) -> Result<(), BuildError> {
    if name.is_empty() {
        return Err(bad(name, "node name is empty"));
    }
    if name.contains('/') {
        return Err(bad(
            name,
            "node name may not contain `/` (use the namespace)",
        ));
    }
    check_tokens(name, name)
}

/// Normalises a namespace to `/a/b` form (`/` for the root).
pub fn namespace(ns: &str) -> Result<String, BuildError> {
    let trimmed = ns.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok("/".into());
    }
    let abs = if trimmed.starts_with('/') {
        trimmed.to_string()
    } else {
        format!("/{trimmed}")
    };
    check_tokens(ns, &abs[1..])?;
    Ok(abs)
}

/// Expands a topic or service name against the node's namespace and name:
/// `/abs` stays, `rel` becomes `<ns>/rel`, `~/priv` becomes `<ns>/<node>/priv`.
pub fn expand(name: &str, ns: &str, node: &str) -> Result<String, BuildError> {
    if name.len() > 255 {
        return Err(bad(name, "longer than 255 bytes"));
    }
    let base = if ns == "/" { "" } else { ns };
    let full = if let Some(rest) = name.strip_prefix("~/") {
        format!("{base}/{node}/{rest}")
    } else if name.starts_with('/') {
        name.to_string()
    } else {
        format!("{base}/{name}")
    };
    if full == "/" {
        return Err(bad(name, "empty topic name"));
    }
    check_tokens(name, &full[1..])?;
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_like_ros() {
        assert_eq!(expand("chatter", "/", "n").unwrap(), "/chatter");
        assert_eq!(
            expand("chatter", "/robot1", "n").unwrap(),
            "/robot1/chatter"
        );
        assert_eq!(expand("/abs", "/robot1", "n").unwrap(), "/abs");
        assert_eq!(expand("~/state", "/r", "arm").unwrap(), "/r/arm/state");
        assert!(expand("a//b", "/", "n").is_err());
        assert!(expand("1abc", "/", "n").is_err());
        assert!(expand("a b", "/", "n").is_err());
        assert_eq!(namespace("robot1/").unwrap(), "/robot1");
        assert!(node_name("a/b").is_err());
    }
}
