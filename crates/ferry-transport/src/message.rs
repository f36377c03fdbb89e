//! Messages: the [`Message`] trait, CDR encoding and raw bytes.
//!
//! Payloads are CDR (XCDR1) little endian behind the 4-byte encapsulation
//! header `00 01 00 00`, exactly as ROS 2 sends them, so ROS 2 message
//! definitions map one to one and other tools can decode what ferry sends.

use std::any::Any;
use std::ops::Deref;
use std::sync::Arc;

use bytes::Bytes;
use ferry_wire::{EndpointId, TransportKind, TypeHash};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{BoundsError, DecodeError, EncodeError};

/// CDR encapsulation header for little-endian plain CDR (ROS 2's default).
pub const CDR_LE_HEADER: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

/// A message type that ferry can carry.
///
/// Implement it with [`crate::message!`]: `ferry::message!(Pose, "geometry_msgs/msg/Pose");`
pub trait Message: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// ROS-style type name, e.g. `std_msgs/msg/String`.
    const TYPE_NAME: &'static str;
    /// Definition (ROS `.msg` text, or a definition bundle — the type's text
    /// and the texts of the types it uses, as generated code carries it);
    /// hashed into [`Message::type_hash`] unless that is given, and sent to
    /// peers that lack the files. May be empty for a type among the loaded
    /// interfaces.
    const DEFINITION: &'static str = "";

    /// ROS 2's type hash (RIHS01), sent in discovery: see
    /// [`crate::interfaces::type_hash_of`].
    fn type_hash() -> TypeHash {
        crate::interfaces::type_hash_of(Self::TYPE_NAME, Self::DEFINITION)
    }

    /// Checks bounded strings and sequences (`string<=10`, `T[<=3]`)
    /// against their bounds; generated types implement it, and ferry calls
    /// it before publishing and after decoding.
    fn check_bounds(&self) -> Result<(), BoundsError> {
        Ok(())
    }

    /// For the request of a service type: that service's hash (announced
    /// by services and clients of it). Generated requests implement it.
    fn service_hash() -> Option<TypeHash> {
        None
    }
}

/// A ROS 2 service type (`pkg/srv/Name`): which message asks and which
/// answers. Generated for every `.srv` file.
pub trait ServiceType: Send + Sync + 'static {
    /// `Name_Request`.
    type Request: Message;
    /// `Name_Response`.
    type Response: Message;
    /// `pkg/srv/Name`.
    const TYPE_NAME: &'static str;
    /// ROS 2's type hash (RIHS01) of the service type.
    fn type_hash() -> TypeHash;
}

/// Implements [`Message`] for a serde type: `message!(Type, "pkg/msg/Type")`
/// or with its definition text: `message!(Type, "pkg/msg/Type", "int32 x")`.
#[macro_export]
macro_rules! message {
    ($t:ty, $name:expr) => {
        impl $crate::Message for $t {
            const TYPE_NAME: &'static str = $name;
        }
    };
    ($t:ty, $name:expr, $def:expr) => {
        impl $crate::Message for $t {
            const TYPE_NAME: &'static str = $name;
            const DEFINITION: &'static str = $def;
        }
    };
}

/// Encodes `value` as CDR with the encapsulation header.
pub fn encode_cdr<T: Serialize>(value: &T, type_name: &str) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&CDR_LE_HEADER);
    cdr_encoding::to_writer::<T, byteorder::LittleEndian, _>(&mut out, value).map_err(|e| {
        EncodeError {
            type_name: type_name.to_string(),
            reason: e.to_string(),
        }
    })?;
    Ok(out)
}

/// Encodes `value` as CDR with the encapsulation header straight into `buf`
/// (a shared-memory slot): the encoded length, or `None` when it does not
/// fit.
pub fn encode_cdr_into<T: Serialize>(
    value: &T,
    type_name: &str,
    buf: &mut [u8],
) -> Result<Option<usize>, EncodeError> {
    /// A writer over a slice that remembers running out of room.
    struct Bounded<'a> {
        buf: &'a mut [u8],
        at: usize,
        overflow: bool,
    }
    impl std::io::Write for Bounded<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let end = self.at + b.len();
            if end > self.buf.len() {
                self.overflow = true;
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            self.buf[self.at..end].copy_from_slice(b);
            self.at = end;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    if buf.len() < CDR_LE_HEADER.len() {
        return Ok(None);
    }
    let (head, body) = buf.split_at_mut(CDR_LE_HEADER.len());
    head.copy_from_slice(&CDR_LE_HEADER);
    let mut w = Bounded {
        buf: body,
        at: 0,
        overflow: false,
    };
    match cdr_encoding::to_writer::<T, byteorder::LittleEndian, _>(&mut w, value) {
        Ok(()) => Ok(Some(CDR_LE_HEADER.len() + w.at)),
        Err(_) if w.overflow => Ok(None),
        Err(e) => Err(EncodeError {
            type_name: type_name.to_string(),
            reason: e.to_string(),
        }),
    }
}

/// Decodes CDR with an encapsulation header (little or big endian).
pub fn decode_cdr<T: DeserializeOwned>(bytes: &[u8], type_name: &str) -> Result<T, DecodeError> {
    if bytes.len() < 4 || bytes[0] != 0 || bytes[1] > 1 {
        return Err(DecodeError::Encapsulation(
            bytes[..bytes.len().min(4)].to_vec(),
        ));
    }
    let body = &bytes[4..];
    let r = if bytes[1] == 1 {
        cdr_encoding::from_bytes::<T, byteorder::LittleEndian>(body)
    } else {
        cdr_encoding::from_bytes::<T, byteorder::BigEndian>(body)
    };
    r.map(|(v, _)| v).map_err(|e| DecodeError::Body {
        type_name: type_name.to_string(),
        len: bytes.len(),
        reason: e.to_string(),
    })
}

/// Raw bytes: sent as they are, no encoding. A raw port matches any type
/// (it is how `ferry topic echo` listens to types it does not know).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawBytes(pub Bytes);

impl RawBytes {
    /// Wraps bytes.
    pub fn new(b: impl Into<Bytes>) -> Self {
        RawBytes(b.into())
    }
}

impl Deref for RawBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// How a port's payload type is encoded: implemented for every [`Message`]
/// and for [`RawBytes`].
pub trait Codec: Send + Sync + Sized + 'static {
    /// Type name announced in discovery.
    fn type_name() -> &'static str;
    /// Type hash announced in discovery (`TypeHash::ANY` for raw).
    fn type_hash() -> TypeHash;
    /// Bytes for a network path.
    fn encode(&self) -> Result<Bytes, EncodeError>;
    /// Value from a network path.
    fn decode(bytes: Bytes) -> Result<Self, DecodeError>;
    /// The type's definition (a `.msg` text or a definition bundle with
    /// the types it uses), for peers that lack the files; empty if unknown.
    fn definition() -> &'static str {
        ""
    }
    /// Checks the value before it is published (bounded strings and
    /// sequences within their bounds).
    fn validate(&self) -> Result<(), BoundsError> {
        Ok(())
    }
    /// For a service's request type: the service type's hash, when the
    /// type knows it (generated from a `.srv`).
    fn service_hash() -> Option<TypeHash> {
        None
    }
    /// JSON of the value (for dashboards on the MQTT path), when the type
    /// has fields; `None` for raw bytes.
    fn encode_json(&self) -> Option<Result<Bytes, EncodeError>> {
        None
    }
    /// Encodes straight into `buf` (a shared-memory slot): the length, or
    /// `None` when it does not fit. The default encodes and copies.
    fn encode_into(&self, buf: &mut [u8]) -> Result<Option<usize>, EncodeError> {
        let b = self.encode()?;
        Ok(buf.get_mut(..b.len()).map(|dst| {
            dst.copy_from_slice(&b);
            b.len()
        }))
    }
}

impl<T: Message> Codec for T {
    fn type_name() -> &'static str {
        T::TYPE_NAME
    }
    fn type_hash() -> TypeHash {
        <T as Message>::type_hash()
    }
    fn definition() -> &'static str {
        T::DEFINITION
    }
    fn validate(&self) -> Result<(), BoundsError> {
        self.check_bounds()
    }
    fn service_hash() -> Option<TypeHash> {
        <T as Message>::service_hash()
    }
    fn encode(&self) -> Result<Bytes, EncodeError> {
        self.check_bounds().map_err(|e| out_of_bounds::<T>(&e))?;
        encode_cdr(self, T::TYPE_NAME).map(Bytes::from)
    }
    fn decode(bytes: Bytes) -> Result<Self, DecodeError> {
        // CDR always starts with 0x00 (its encapsulation header); a JSON
        // object (the opt-in MQTT encoding) starts with `{`.
        let value: T = if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
            serde_json::from_slice(&bytes).map_err(|e| DecodeError::Body {
                type_name: T::TYPE_NAME.to_string(),
                len: bytes.len(),
                reason: format!("JSON: {e}"),
            })?
        } else {
            decode_cdr(&bytes, T::TYPE_NAME)?
        };
        // A peer's bytes are held to the definition's bounds too.
        value.check_bounds().map_err(|e| DecodeError::Body {
            type_name: T::TYPE_NAME.to_string(),
            len: bytes.len(),
            reason: e.to_string(),
        })?;
        Ok(value)
    }
    fn encode_into(&self, buf: &mut [u8]) -> Result<Option<usize>, EncodeError> {
        self.check_bounds().map_err(|e| out_of_bounds::<T>(&e))?;
        encode_cdr_into(self, T::TYPE_NAME, buf)
    }
    fn encode_json(&self) -> Option<Result<Bytes, EncodeError>> {
        Some(
            serde_json::to_vec(self)
                .map(Bytes::from)
                .map_err(|e| EncodeError {
                    type_name: T::TYPE_NAME.to_string(),
                    reason: format!("JSON: {e}"),
                }),
        )
    }
}

fn out_of_bounds<T: Message>(e: &BoundsError) -> EncodeError {
    EncodeError {
        type_name: T::TYPE_NAME.to_string(),
        reason: e.to_string(),
    }
}

impl Codec for RawBytes {
    fn type_name() -> &'static str {
        "*"
    }
    fn type_hash() -> TypeHash {
        TypeHash::ANY
    }
    fn encode(&self) -> Result<Bytes, EncodeError> {
        Ok(self.0.clone())
    }
    fn decode(bytes: Bytes) -> Result<Self, DecodeError> {
        Ok(RawBytes(bytes))
    }
}

/// Metadata of a received sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleInfo {
    /// Publisher's sequence number.
    pub seq: u64,
    /// Source time, ns since the Unix epoch.
    pub source_time_ns: u64,
    /// The publisher.
    pub publisher: EndpointId,
    /// The path it came over.
    pub transport: TransportKind,
}

/// A received sample: the message (shared, never copied on the in-process
/// path) plus its metadata. Dereferences to the message.
#[derive(Debug, Clone)]
pub struct Sample<T> {
    value: Arc<T>,
    /// Metadata.
    pub info: SampleInfo,
}

impl<T> Sample<T> {
    pub fn new(value: Arc<T>, info: SampleInfo) -> Self {
        Sample { value, info }
    }
    /// The shared message.
    pub fn into_arc(self) -> Arc<T> {
        self.value
    }
}

impl<T> Deref for Sample<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// A payload as it travels inside the process: the typed value when the
/// writer has one, and its encoded bytes, produced at most once on demand.
pub struct Payload<'a> {
    /// The writer's value, when it is in this process.
    pub typed: Option<&'a Arc<dyn Any + Send + Sync>>,
    /// The encoded bytes (encoded at most once, on first call).
    pub bytes: &'a dyn Fn() -> Result<Bytes, EncodeError>,
}

impl Payload<'_> {
    /// The value as `T`: shared when the writer had a `T`, decoded otherwise.
    pub fn to_typed<T: Codec>(&self) -> Result<Arc<T>, PayloadError> {
        if let Some(t) = self.typed {
            if let Ok(v) = t.clone().downcast::<T>() {
                return Ok(v);
            }
        }
        let b = (self.bytes)().map_err(PayloadError::Encode)?;
        T::decode(b).map(Arc::new).map_err(PayloadError::Decode)
    }
}

/// Why a payload could not become the reader's type.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// The writer's value could not be encoded.
    #[error(transparent)]
    Encode(EncodeError),
    /// The bytes are not the reader's type.
    #[error(transparent)]
    Decode(DecodeError),
}
