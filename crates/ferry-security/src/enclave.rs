//! Enclave names: absolute paths like `/robot1/talker`, one directory of a
//! keystore each.

use std::path::{Path, PathBuf};

use thiserror::Error;

/// Longest enclave name, bytes.
pub const MAX_ENCLAVE: usize = 255;

/// A name that is not an enclave path.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EnclaveError {
    /// Enclaves are absolute.
    #[error("enclave {0:?} is not absolute: start it with `/` (e.g. /robot1/talker)")]
    NotAbsolute(String),
    /// A segment that is empty or has characters other than letters,
    /// digits and `_`.
    #[error("enclave {0:?}: segments are letters, digits and `_`, none empty")]
    Segment(String),
    /// Longer than [`MAX_ENCLAVE`].
    #[error("enclave name of {0} bytes: at most 255")]
    TooLong(usize),
}

/// Checks an enclave name (`/` alone is one identity for a whole system).
pub fn check_enclave(name: &str) -> Result<(), EnclaveError> {
    if name.len() > MAX_ENCLAVE {
        return Err(EnclaveError::TooLong(name.len()));
    }
    let Some(rest) = name.strip_prefix('/') else {
        return Err(EnclaveError::NotAbsolute(name.into()));
    };
    if rest.is_empty() {
        return Ok(());
    }
    let ok = rest
        .split('/')
        .all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    if ok {
        Ok(())
    } else {
        Err(EnclaveError::Segment(name.into()))
    }
}

/// The directory of a checked enclave under a keystore's `enclaves/`.
pub(crate) fn enclave_dir(root: &Path, name: &str) -> PathBuf {
    let mut d = root.join("enclaves");
    for s in name.split('/').filter(|s| !s.is_empty()) {
        d.push(s);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enclave_names() {
        assert!(check_enclave("/").is_ok());
        assert!(check_enclave("/robot1/talker_2").is_ok());
        assert!(matches!(
            check_enclave("robot1"),
            Err(EnclaveError::NotAbsolute(_))
        ));
        assert!(matches!(
            check_enclave("/robot1/"),
            Err(EnclaveError::Segment(_))
        ));
        assert!(matches!(
            check_enclave("/../etc"),
            Err(EnclaveError::Segment(_))
        ));
        assert!(matches!(
            check_enclave("/a b"),
            Err(EnclaveError::Segment(_))
        ));
        assert_eq!(
            enclave_dir(Path::new("/ks"), "/r/t"),
            PathBuf::from("/ks/enclaves/r/t")
        );
        assert_eq!(
            enclave_dir(Path::new("/ks"), "/"),
            PathBuf::from("/ks/enclaves")
        );
    }
}
