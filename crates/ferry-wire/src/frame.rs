//! Data-plane frames for stream transports (TCP).
//!
//! ```text
//! 0      2   3    4      6      8         12        16        24         32
//! | "FR" | v | kind | flags | rsvd | body_len | rsvd | seq u64 | stamp u64 | body…
//! ```
//! All integers little endian. `seq` is the sample sequence number (data) or
//! the request id (request/reply); `stamp` is the source time in ns since the
//! Unix epoch (0 when unknown). A connection starts with one [`Hello`] frame
//! from the connecting side that names both endpoints.

use crate::codec::{Reader, WireError, Writer};
use crate::types::{EndpointId, EndpointKind};

/// Size of the fixed frame header.
pub const HEADER_LEN: usize = 32;
const MAGIC: [u8; 2] = *b"FR";
const VERSION: u8 = 1;

/// Reply flag: the body is a UTF-8 error message, not a response.
pub const FLAG_ERROR: u16 = 1;

/// Bytes of a service [`Envelope`].
pub const ENVELOPE_LEN: usize = 9;

/// What a service [`Envelope`] carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvelopeKind {
    /// A request.
    Request = 3,
    /// A response.
    Reply = 4,
    /// The service's error text instead of a response (UTF-8).
    ReplyError = 6,
    /// A sample of a host stream on a path that numbers its datagrams
    /// itself (UDP): `request_id` is the writer's own sequence number,
    /// which the host leader relays the sample with.
    Relayed = 7,
}

/// Service traffic on transports that carry samples rather than frames
/// (shared memory, UDP): each request or reply is one sample that starts
/// with this envelope, then the body.
///
/// ```text
/// 0      1                 9
/// | kind | request id u64 | body…
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// Request, reply or error.
    pub kind: EnvelopeKind,
    /// The client's request id (echoed by the reply).
    pub request_id: u64,
}

impl Envelope {
    /// Parses the envelope at the start of an untrusted sample; the body
    /// is `sample[ENVELOPE_LEN..]`.
    pub fn parse(sample: &[u8]) -> Result<Envelope, WireError> {
        let mut r = Reader::new(sample);
        let kind = match r.u8()? {
            3 => EnvelopeKind::Request,
            4 => EnvelopeKind::Reply,
            6 => EnvelopeKind::ReplyError,
            7 => EnvelopeKind::Relayed,
            k => {
                return Err(WireError::InvalidValue {
                    field: "envelope.kind",
                    value: u64::from(k),
                })
            }
        };
        Ok(Envelope {
            kind,
            request_id: r.u64()?,
        })
    }

    /// The envelope's bytes.
    pub fn encode(&self) -> [u8; ENVELOPE_LEN] {
        let mut out = [0u8; ENVELOPE_LEN];
        out[0] = self.kind as u8;
        out[1..].copy_from_slice(&self.request_id.to_le_bytes());
        out
    }
}

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// First frame of a connection: names the two endpoints.
    Hello = 1,
    /// One published sample.
    Data = 2,
    /// A service request; `seq` is the request id.
    Request = 3,
    /// A service reply; `seq` echoes the request id.
    Reply = 4,
    /// Orderly close of the connection.
    Close = 5,
}

impl FrameKind {
    fn from_u8(v: u8) -> Result<Self, WireError> {
        Ok(match v {
            1 => Self::Hello,
            2 => Self::Data,
            3 => Self::Request,
            4 => Self::Reply,
            5 => Self::Close,
            _ => {
                return Err(WireError::InvalidValue {
                    field: "frame.kind",
                    value: v as u64,
                })
            }
        })
    }
}

/// A parsed, validated frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// What the body is.
    pub kind: FrameKind,
    /// Kind-specific flags.
    pub flags: u16,
    /// Length of the body that follows.
    pub body_len: u32,
    /// Sequence number or request id.
    pub seq: u64,
    /// Source timestamp, ns since the Unix epoch (0 = unknown).
    pub stamp_ns: u64,
}

impl FrameHeader {
    /// Parses the first [`HEADER_LEN`] bytes of `buf`, rejecting bodies
    /// longer than `max_body` so a peer cannot make the reader allocate
    /// without bound.
    pub fn parse(buf: &[u8], max_body: usize) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        r.header(MAGIC, VERSION)?;
        let kind = FrameKind::from_u8(r.u8()?)?;
        let flags = r.u16()?;
        let _reserved = r.u16()?;
        let body_len = r.u32()?;
        let _reserved = r.u32()?;
        let seq = r.u64()?;
        let stamp_ns = r.u64()?;
        if body_len as usize > max_body {
            return Err(WireError::TooLong {
                field: "frame.body",
                len: body_len as usize,
                limit: max_body,
            });
        }
        Ok(Self {
            kind,
            flags,
            body_len,
            seq,
            stamp_ns,
        })
    }

    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..2].copy_from_slice(&MAGIC);
        out[2] = VERSION;
        out[3] = self.kind as u8;
        out[4..6].copy_from_slice(&self.flags.to_le_bytes());
        out[8..12].copy_from_slice(&self.body_len.to_le_bytes());
        out[16..24].copy_from_slice(&self.seq.to_le_bytes());
        out[24..32].copy_from_slice(&self.stamp_ns.to_le_bytes());
        out
    }
}

/// Body of the first frame on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The endpoint that opened the connection (publisher or client).
    pub from: EndpointId,
    /// Its kind.
    pub from_kind: EndpointKind,
    /// The endpoint it wants to reach (subscriber or service).
    pub to: EndpointId,
}

impl Hello {
    /// Encoded body size.
    pub const LEN: usize = 2 * EndpointId::LEN + 1;

    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.from.write(&mut w);
        w.u8(self.from_kind as u8);
        self.to.write(&mut w);
        w.into_vec()
    }

    /// Parses the body.
    pub fn parse(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let from = EndpointId::read(&mut r)?;
        let from_kind = EndpointKind::from_u8(r.u8()?)?;
        let to = EndpointId::read(&mut r)?;
        Ok(Self {
            from,
            from_kind,
            to,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ParticipantId;
    use proptest::prelude::*;

    #[test]
    fn header_round_trips() {
        let h = FrameHeader {
            kind: FrameKind::Data,
            flags: 0,
            body_len: 1234,
            seq: 42,
            stamp_ns: 1_700_000_000_000_000_000,
        };
        let b = h.encode();
        assert_eq!(FrameHeader::parse(&b, 1 << 20).unwrap(), h);
        assert!(matches!(
            FrameHeader::parse(&b, 100),
            Err(WireError::TooLong { .. })
        ));
        assert!(matches!(
            FrameHeader::parse(&b[..10], 1 << 20),
            Err(WireError::Truncated { .. })
        ));
    }

    #[test]
    fn hello_round_trips() {
        let h = Hello {
            from: EndpointId {
                participant: ParticipantId(7),
                entity: 3,
            },
            from_kind: EndpointKind::Client,
            to: EndpointId {
                participant: ParticipantId(9),
                entity: 1,
            },
        };
        assert_eq!(Hello::parse(&h.encode()).unwrap(), h);
    }

    proptest! {
        #[test]
        fn header_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = FrameHeader::parse(&bytes, 1 << 20);
            let _ = Hello::parse(&bytes);
        }
    }
}
