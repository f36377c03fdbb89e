//! The shared-memory control protocol: what a writer's runtime and a
//! reader's runtime say on the reader's control socket (a Unix stream
//! socket) to set up one connection.
//!
//! ```text
//! message  = len u16 | body (len bytes, at most MAX_MESSAGE)
//! body     = "FS" | version 1 | kind u8 | …
//! kind 1 Attach:  writer (participant u64, entity u32), reader (participant u64, entity u32),
//!                 connection segment (str u16), data prefix (str u16),
//!                 reply socket (str u16; empty unless the writer is a client)
//! kind 2 Accepted
//! kind 3 Refused: reason u8 (1 no such reader, 2 reader not in this runtime,
//!                 3 segment unusable, 4 malformed request), detail (str u16)
//! kind 4 Forward: as Attach; sent by the host leader for a writer of
//!                 another host whose samples it relays (the reader's
//!                 runtime accepts it only from the leader it follows)
//! ```
//!
//! Segment names travel as they are opened under `/dev/shm`: 1–200 bytes of
//! ASCII letters, digits, `.`, `_` and `-` (no `/`, no `..` alone), so a
//! peer cannot name a path outside it. Parsers never panic; every accepted
//! message re-encodes to the same bytes.

use crate::codec::{Reader, WireError, Writer};
use crate::types::{EndpointId, ParticipantId};

const MAGIC: [u8; 2] = *b"FS";
const VERSION: u8 = 1;

/// Longest message body.
pub const MAX_MESSAGE: usize = 1024;
/// Longest segment name.
pub const MAX_SEGMENT_NAME: usize = 200;
/// Longest refusal detail.
pub const MAX_DETAIL: usize = 255;

/// A writer asks the reader's runtime to attach a connection segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attach {
    /// The writer endpoint.
    pub writer: EndpointId,
    /// The reader endpoint, in the runtime that owns the socket.
    pub reader: EndpointId,
    /// The connection segment (rings) the writer created.
    pub connection: String,
    /// The prefix of the writer's data segments.
    pub data_prefix: String,
    /// For a client: the control socket of its runtime, where the
    /// service's runtime attaches the connection that carries the replies.
    pub reply_to: Option<String>,
}

/// Why a reader's runtime refused an attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefuseReason {
    /// No such reader (it was dropped meanwhile).
    NoReader = 1,
    /// The reader is not in the runtime that owns this socket.
    WrongRuntime = 2,
    /// The segments could not be opened or are not ferry's.
    Segment = 3,
    /// The request could not be parsed.
    Malformed = 4,
    /// The writer's segments belong to another user (permission denied):
    /// shared memory will never work between these two processes.
    Denied = 5,
    /// Security on: the attaching process is not the participant signed
    /// discovery proved (or not yet), or its grants do not allow writing
    /// the reader's name.
    NotPermitted = 6,
}

impl RefuseReason {
    fn from_u8(v: u8) -> Result<Self, WireError> {
        Ok(match v {
            1 => Self::NoReader,
            2 => Self::WrongRuntime,
            3 => Self::Segment,
            4 => Self::Malformed,
            5 => Self::Denied,
            6 => Self::NotPermitted,
            _ => {
                return Err(WireError::InvalidValue {
                    field: "shm.refuse_reason",
                    value: u64::from(v),
                })
            }
        })
    }
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Writer → reader runtime.
    Attach(Attach),
    /// Host leader → reader runtime: a connection carrying the samples of
    /// `writer`, a writer on another host, relayed by the leader.
    Forward(Attach),
    /// Reader runtime → writer: the connection is live.
    Accepted,
    /// Reader runtime → writer: it is not, and why.
    Refused {
        /// The reason, as a type.
        reason: RefuseReason,
        /// Words for the log.
        detail: String,
    },
}

fn segment_name(r: &mut Reader<'_>, field: &'static str) -> Result<String, WireError> {
    let s = r.str(field, MAX_SEGMENT_NAME)?;
    checked_name(s, field)
}

fn checked_name(s: &str, field: &'static str) -> Result<String, WireError> {
    let ok = !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !ok {
        return Err(WireError::InvalidValue {
            field,
            value: s.len() as u64,
        });
    }
    Ok(s.to_string())
}

fn endpoint(r: &mut Reader<'_>) -> Result<EndpointId, WireError> {
    Ok(EndpointId {
        participant: ParticipantId(r.u64()?),
        entity: r.u32()?,
    })
}

fn attach(r: &mut Reader<'_>) -> Result<Attach, WireError> {
    Ok(Attach {
        writer: endpoint(r)?,
        reader: endpoint(r)?,
        connection: segment_name(r, "shm.connection")?,
        data_prefix: segment_name(r, "shm.data_prefix")?,
        reply_to: match r.str("shm.reply_to", MAX_SEGMENT_NAME)? {
            "" => None,
            s => Some(checked_name(s, "shm.reply_to")?),
        },
    })
}

impl Control {
    /// Parses one message body (without its length prefix).
    pub fn parse(body: &[u8]) -> Result<Control, WireError> {
        if body.len() > MAX_MESSAGE {
            return Err(WireError::TooLong {
                field: "shm.message",
                len: body.len(),
                limit: MAX_MESSAGE,
            });
        }
        let mut r = Reader::new(body);
        r.header(MAGIC, VERSION)?;
        let msg = match r.u8()? {
            1 => Control::Attach(attach(&mut r)?),
            4 => Control::Forward(attach(&mut r)?),
            2 => Control::Accepted,
            3 => Control::Refused {
                reason: RefuseReason::from_u8(r.u8()?)?,
                detail: r.str("shm.detail", MAX_DETAIL)?.to_string(),
            },
            k => {
                return Err(WireError::InvalidValue {
                    field: "shm.kind",
                    value: u64::from(k),
                })
            }
        };
        if r.remaining() != 0 {
            return Err(WireError::InvalidValue {
                field: "shm.trailing_bytes",
                value: r.remaining() as u64,
            });
        }
        Ok(msg)
    }

    /// Encodes the message with its length prefix, ready to write. Strings
    /// over their limits are cut (at a character boundary) so that what is
    /// written always parses.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.bytes(&MAGIC);
        w.u8(VERSION);
        match self {
            Control::Attach(a) | Control::Forward(a) => {
                w.u8(if matches!(self, Control::Forward(_)) {
                    4
                } else {
                    1
                });
                for e in [a.writer, a.reader] {
                    w.u64(e.participant.0);
                    w.u32(e.entity);
                }
                w.str(&a.connection, MAX_SEGMENT_NAME);
                w.str(&a.data_prefix, MAX_SEGMENT_NAME);
                w.str(a.reply_to.as_deref().unwrap_or(""), MAX_SEGMENT_NAME);
            }
            Control::Accepted => w.u8(2),
            Control::Refused { reason, detail } => {
                w.u8(3);
                w.u8(*reason as u8);
                w.str(detail, MAX_DETAIL);
            }
        }
        let body = w.into_vec();
        let mut out = Vec::with_capacity(2 + body.len());
        out.extend_from_slice(&(body.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }
}

/// Reads one length-prefixed message from `read` (a blocking stream with a
/// timeout): the prefix, then exactly that many bytes — never more than
/// [`MAX_MESSAGE`], whatever the peer announces.
pub fn read_message(
    mut read: impl FnMut(&mut [u8]) -> Result<(), WireError>,
) -> Result<Control, WireError> {
    let mut len = [0u8; 2];
    read(&mut len)?;
    let len = usize::from(u16::from_le_bytes(len));
    if len > MAX_MESSAGE {
        return Err(WireError::TooLong {
            field: "shm.message",
            len,
            limit: MAX_MESSAGE,
        });
    }
    let mut body = [0u8; MAX_MESSAGE];
    read(&mut body[..len])?;
    Control::parse(&body[..len])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attach() -> Control {
        Control::Attach(Attach {
            writer: EndpointId {
                participant: ParticipantId(0xabcd),
                entity: 3,
            },
            reader: EndpointId {
                participant: ParticipantId(0x1234),
                entity: 9,
            },
            connection: "ferry.c.4026531836.77.123.abcd.3.1234.9.0".into(),
            data_prefix: "ferry.d.4026531836.77.123.abcd.3".into(),
            reply_to: None,
        })
    }

    fn round_trip(m: &Control) {
        let bytes = m.encode();
        let len = usize::from(u16::from_le_bytes([bytes[0], bytes[1]]));
        assert_eq!(len, bytes.len() - 2);
        assert_eq!(&Control::parse(&bytes[2..]).unwrap(), m);
        let mut at = 0;
        let got = read_message(|buf| {
            buf.copy_from_slice(&bytes[at..at + buf.len()]);
            at += buf.len();
            Ok(())
        })
        .unwrap();
        assert_eq!(&got, m);
    }

    #[test]
    fn every_message_round_trips() {
        round_trip(&attach());
        let Control::Attach(mut a) = attach() else {
            unreachable!()
        };
        a.reply_to = Some("ferry.s.4026531836.77.123.abcd".into());
        round_trip(&Control::Attach(a.clone()));
        round_trip(&Control::Forward(a));
        round_trip(&Control::Accepted);
        round_trip(&Control::Refused {
            reason: RefuseReason::NoReader,
            detail: "no reader 1234.9".into(),
        });
    }

    #[test]
    fn segment_names_cannot_leave_dev_shm() {
        for bad in ["../etc/passwd", "a/b", "..", "", "a b", "ä"] {
            let Control::Attach(mut a) = attach() else {
                unreachable!()
            };
            a.connection = bad.into();
            let bytes = Control::Attach(a.clone()).encode();
            assert!(Control::parse(&bytes[2..]).is_err(), "{bad:?} accepted");
            if !bad.is_empty() {
                a.connection = "ferry.c.1".into();
                a.reply_to = Some(bad.into());
                let bytes = Control::Attach(a).encode();
                assert!(
                    Control::parse(&bytes[2..]).is_err(),
                    "reply_to {bad:?} accepted"
                );
            }
        }
    }

    #[test]
    fn garbage_and_giants_are_errors_not_panics() {
        let mut seed = 7u64;
        for n in 0..5000usize {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = n % 300;
            let mut v: Vec<u8> = (0..len).map(|i| (seed >> (i % 8 * 8)) as u8).collect();
            if n % 3 == 0 && v.len() > 3 {
                v[..3].copy_from_slice(b"FS\x01");
            }
            let _ = Control::parse(&v);
        }
        let announced = 60_000u16.to_le_bytes();
        let e = read_message(|buf| {
            if buf.len() == 2 {
                buf.copy_from_slice(&announced);
            }
            Ok(())
        });
        assert!(matches!(e, Err(WireError::TooLong { .. })));
        // Trailing bytes are refused: one message is exactly its length.
        let mut bytes = Control::Accepted.encode();
        bytes.push(0);
        assert!(Control::parse(&bytes[2..]).is_err());
    }
}
