//! ROS 2 type hashes (RIHS01, REP-2011), computed exactly as
//! `rosidl_generator_type_description` does: the type description (the
//! type's fields and, sorted by name, every type it refers to) as JSON with
//! Python's `json.dumps` separators (`", "`, `": "`), default values left
//! out, then SHA-256; written `RIHS01_` + 64 lower-case hex digits.

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};
use std::str::FromStr;

use sha2::{Digest, Sha256};

use crate::model::{BaseType, Collection, FieldType, MessageDef, Primitive, TypeName};
use crate::registry::Interfaces;

/// A RIHS01 type hash: SHA-256 of the type description.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rihs01(pub [u8; 32]);

impl fmt::Display for Rihs01 {
    /// `RIHS01_` + 64 lower-case hex digits, as ROS 2 prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RIHS01_")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Rihs01 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Error for text that is not `RIHS01_<64 hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a ROS 2 type hash: expected `RIHS01_` and 64 hex digits")]
pub struct BadHash(pub String);

impl FromStr for Rihs01 {
    type Err = BadHash;
    fn from_str(s: &str) -> Result<Self, BadHash> {
        let bad = || BadHash(s.to_string());
        let hex = s.strip_prefix("RIHS01_").ok_or_else(bad)?;
        if hex.len() != 64 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Rihs01(out))
    }
}

/// SHA-256 over `parts` in order (for stand-ins where no type description
/// exists; never a RIHS01 of a description).
pub fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// Error of hashing a type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// The type itself or one it refers to is not loaded.
    #[error("cannot hash `{of}`: it refers to `{missing}`, which no loaded interface declares (add its package to FERRY_INTERFACE_PATH)")]
    Unknown {
        /// The type being hashed.
        of: String,
        /// The type not found.
        missing: String,
    },
}

/// `type_id` of a field type in `type_description_interfaces/FieldType`.
pub fn type_id(ty: &FieldType) -> u8 {
    let base = match &ty.base {
        BaseType::Message(_) => 1,
        BaseType::Primitive(p) => match p {
            Primitive::Int8 => 2,
            // `char` is an IDL uint8 in ROS 2, and hashes as one.
            Primitive::Uint8 | Primitive::Char => 3,
            Primitive::Int16 => 4,
            Primitive::Uint16 => 5,
            Primitive::Int32 => 6,
            Primitive::Uint32 => 7,
            Primitive::Int64 => 8,
            Primitive::Uint64 => 9,
            Primitive::Float32 => 10,
            Primitive::Float64 => 11,
            Primitive::Bool => 15,
            Primitive::Byte => 16,
        },
        BaseType::String { bound: None } => 17,
        BaseType::WString { bound: None } => 18,
        BaseType::String { bound: Some(_) } => 21,
        BaseType::WString { bound: Some(_) } => 22,
    };
    base + match ty.collection {
        Collection::Single => 0,
        Collection::Array(_) => 48,
        Collection::Bounded(_) => 96,
        Collection::Unbounded => 144,
    }
}

/// A JSON string as Python's `json.dumps(ensure_ascii=True)` writes it.
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// One `IndividualTypeDescription` as JSON; `defaults` adds each field's
/// `default_value` (the `.json` files ROS 2 installs have it; the hash
/// input does not).
fn individual(out: &mut String, m: &MessageDef, defaults: bool) {
    out.push_str("{\"type_name\": ");
    json_str(out, &m.name.to_string());
    out.push_str(", \"fields\": [");
    for (i, f) in m.fields.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str("{\"name\": ");
        json_str(out, &f.name);
        let capacity = match f.ty.collection {
            Collection::Array(n) | Collection::Bounded(n) => n,
            Collection::Single | Collection::Unbounded => 0,
        };
        let string_capacity = match f.ty.base {
            BaseType::String { bound: Some(n) } | BaseType::WString { bound: Some(n) } => n,
            _ => 0,
        };
        let _ = write!(
            out,
            ", \"type\": {{\"type_id\": {}, \"capacity\": {capacity}, \"string_capacity\": {string_capacity}, \"nested_type_name\": ",
            type_id(&f.ty)
        );
        json_str(
            out,
            &f.ty.nested().map(TypeName::to_string).unwrap_or_default(),
        );
        out.push('}');
        if defaults {
            out.push_str(", \"default_value\": ");
            json_str(out, f.default_text.as_deref().unwrap_or(""));
        }
        out.push('}');
    }
    out.push_str("]}");
}

impl Interfaces {
    /// The type description of `name` as JSON: exactly the bytes ROS 2
    /// hashes (no `default_value`), or with `defaults` the form of the
    /// `.json` files a ROS 2 install carries.
    pub fn description_json(&self, name: &TypeName, defaults: bool) -> Result<String, HashError> {
        let me = self.get(name).ok_or_else(|| HashError::Unknown {
            of: name.to_string(),
            missing: name.to_string(),
        })?;
        self.describe(me, defaults)
    }

    /// The type description of `me` (which need not be loaded: a
    /// definition announced by a peer, say) as JSON; see
    /// [`Interfaces::description_json`].
    pub fn describe(&self, me: &MessageDef, defaults: bool) -> Result<String, HashError> {
        let name = &me.name;
        let unknown = |missing: &TypeName| HashError::Unknown {
            of: name.to_string(),
            missing: missing.to_string(),
        };
        let refs: BTreeSet<TypeName> = self.closure(me).map_err(|m| unknown(&m))?;
        // Sorted by the full name as a string (Python's `sorted`).
        let mut names: Vec<String> = refs.iter().map(TypeName::to_string).collect();
        names.sort();
        let mut out = String::with_capacity(256 * (names.len() + 1));
        out.push_str("{\"type_description\": ");
        individual(&mut out, me, defaults);
        out.push_str(", \"referenced_type_descriptions\": [");
        for (i, n) in names.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let t: TypeName = n.parse().map_err(|_| unknown(name))?;
            let m = self.get(&t).ok_or_else(|| unknown(&t))?;
            individual(&mut out, m, defaults);
        }
        out.push_str("]}");
        Ok(out)
    }

    /// The RIHS01 hash of `name` (a message, a generated part, or a
    /// service or action type).
    pub fn type_hash(&self, name: &TypeName) -> Result<Rihs01, HashError> {
        let json = self.description_json(name, false)?;
        Ok(Rihs01(Sha256::digest(json.as_bytes()).into()))
    }

    /// The RIHS01 hash of `me`, which need not be loaded (its references
    /// must be).
    pub fn type_hash_of(&self, me: &MessageDef) -> Result<Rihs01, HashError> {
        let json = self.describe(me, false)?;
        Ok(Rihs01(Sha256::digest(json.as_bytes()).into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_text_round_trips() {
        let h = Rihs01([0xab; 32]);
        let s = h.to_string();
        assert_eq!(s.len(), 71);
        assert_eq!(s.parse::<Rihs01>().unwrap(), h);
        assert!("RIHS01_00".parse::<Rihs01>().is_err());
        assert!(format!("RIHS02_{}", "0".repeat(64))
            .parse::<Rihs01>()
            .is_err());
    }

    #[test]
    fn json_strings_escape_like_python() {
        let mut s = String::new();
        json_str(&mut s, "é\u{7f}\"\\\n😀");
        assert_eq!(s, "\"\\u00e9\\u007f\\\"\\\\\\n\\ud83d\\ude00\"");
    }
}
