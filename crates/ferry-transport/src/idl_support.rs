//! What code generated from ROS 2 interfaces (`ferry_idl::codegen`) uses:
//! `wstring` ([`WString`]), fixed arrays of any length and byte sequences
//! in CDR, and the check of bounded strings and sequences
//! ([`BoundsError`]). Also re-exports `serde`, so that a crate with
//! generated types needs no serde dependency of its own.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, SerializeTuple};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use serde;

pub use crate::error::BoundsError;
use crate::message::{Codec, Message};

/// Most elements reserved ahead from a length a peer declared: a larger
/// sequence grows as its elements actually arrive.
const RESERVE_CAP: usize = 4096;

/// Checks `len` (of `field`, or of its element `index`) against `bound`.
pub fn check_len(
    field: &str,
    index: Option<usize>,
    len: usize,
    bound: u64,
    unit: &'static str,
) -> Result<(), BoundsError> {
    if len as u64 <= bound {
        return Ok(());
    }
    Err(BoundsError {
        path: match index {
            Some(i) => format!("{field}[{i}]"),
            None => field.to_string(),
        },
        len,
        bound,
        unit,
    })
}

/// A ROS 2 `wstring`: text carried as UTF-16 code units (CDR: a count of
/// units, then each as 2 bytes, as Fast DDS and ROS 2 Jazzy send it).
/// Dereferences to `str`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WString(pub String);

impl WString {
    /// Its length in UTF-16 code units (what a `wstring<=N` bound counts).
    pub fn units(&self) -> usize {
        self.0.encode_utf16().count()
    }
}

impl Deref for WString {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for WString {
    fn from(s: &str) -> Self {
        WString(s.to_string())
    }
}

impl From<String> for WString {
    fn from(s: String) -> Self {
        WString(s)
    }
}

impl fmt::Display for WString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for WString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            return s.serialize_str(&self.0);
        }
        let mut seq = s.serialize_seq(Some(self.units()))?;
        for u in self.0.encode_utf16() {
            seq.serialize_element(&u)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for WString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            return String::deserialize(d).map(WString);
        }
        struct Units;
        impl<'de> Visitor<'de> for Units {
            type Value = WString;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a wstring (UTF-16 code units)")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<WString, A::Error> {
                let mut units: Vec<u16> =
                    Vec::with_capacity(a.size_hint().unwrap_or(0).min(RESERVE_CAP));
                while let Some(u) = a.next_element()? {
                    units.push(u);
                }
                String::from_utf16(&units)
                    .map(WString)
                    .map_err(|_| A::Error::custom("wstring is not UTF-16"))
            }
        }
        d.deserialize_seq(Units)
    }
}

/// Serde for `[T; N]` of any `N` (serde's own stops at 32): the elements
/// one after the other, no length (CDR's fixed array).
pub mod fixed_array {
    use super::*;

    /// Writes the elements.
    pub fn serialize<S: Serializer, T: Serialize, const N: usize>(
        a: &[T; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(N)?;
        for x in a {
            t.serialize_element(x)?;
        }
        t.end()
    }

    /// Reads exactly `N` elements.
    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>, const N: usize>(
        d: D,
    ) -> Result<[T; N], D::Error> {
        struct Elements<T, const N: usize>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for Elements<T, N> {
            type Value = [T; N];
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an array of {N} elements")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<[T; N], A::Error> {
                let mut v = Vec::with_capacity(N.min(RESERVE_CAP));
                while v.len() < N {
                    match a.next_element()? {
                        Some(x) => v.push(x),
                        None => return Err(A::Error::invalid_length(v.len(), &self)),
                    }
                }
                v.try_into()
                    .map_err(|_| A::Error::custom("array length changed"))
            }
        }
        d.deserialize_tuple(N, Elements::<T, N>(PhantomData))
    }
}

/// Serde for a sequence of bytes (`uint8[]`, `byte[]`, `char[]`) as one
/// block: a length and the bytes, read and written in one piece.
pub mod bytes {
    use super::*;

    /// Writes the length and the bytes.
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        serde_bytes::serialize(v, s)
    }

    /// Reads the length and the bytes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        serde_bytes::deserialize(d)
    }
}

/// One generated message type, as `ferry_idl::codegen`'s catalog lists
/// it: enough for a test or a tool to go over every type.
#[derive(Debug, Clone, Copy)]
pub struct TypeEntry {
    /// `pkg/msg/Type`.
    pub type_name: &'static str,
    /// Its RIHS01.
    pub type_hash: fn() -> ferry_wire::TypeHash,
    /// CDR of `Default::default()` (ROS 2's defaults).
    pub default_cdr: fn() -> Result<::bytes::Bytes, crate::error::EncodeError>,
    /// Decodes CDR as the type and encodes the value again.
    pub recode: fn(::bytes::Bytes) -> Result<::bytes::Bytes, String>,
}

impl TypeEntry {
    /// The entry of `T`.
    pub const fn of<T: Message + Default>() -> Self {
        TypeEntry {
            type_name: T::TYPE_NAME,
            type_hash: T::type_hash,
            default_cdr: default_cdr::<T>,
            recode: recode::<T>,
        }
    }
}

fn default_cdr<T: Message + Default>() -> Result<::bytes::Bytes, crate::error::EncodeError> {
    Codec::encode(&T::default())
}

fn recode<T: Message>(b: ::bytes::Bytes) -> Result<::bytes::Bytes, String> {
    let v = <T as Codec>::decode(b).map_err(|e| e.to_string())?;
    Codec::encode(&v).map_err(|e| e.to_string())
}
