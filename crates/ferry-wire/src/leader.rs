//! The host leader's greeting: what the ferry runtimes of one host say on
//! the leader's socket (an abstract Unix stream socket of that host, see
//! `ferry_transport::leader`) when a follower connects.
//!
//! ```text
//! hello = "FH" | version 1 | kind u8 | participant u64   (12 bytes)
//! kind 1: the leader greets a follower that connected
//! kind 2: the follower answers with its own participant
//! ```
//!
//! The participant is the sender's word, the process behind it is what
//! the kernel says (`SO_PEERCRED`). After the hellos, a leader that speaks
//! for its host's discovery sends frames:
//!
//! ```text
//! frame = len u32 (bytes after this field) | kind u8 | body
//! kind 1 Feeding: reserved u8 (0)    "I feed you discovery: leave the group"
//! kind 2 Feed:    via u8 (1 multicast, 2 unicast) | family u8 (4, 6) |
//!                 ip (4 or 16 B) | port u16 | datagram (the rest, verbatim)
//! ```
//!
//! A `Feed` is one discovery datagram the leader received and accepted,
//! with the address it came from; the follower checks it as if it had
//! received it itself (ownership, signatures). A follower of an older
//! leader never sees a `Feeding` and keeps its own sockets. Parsing never
//! panics; an accepted hello or frame re-encodes to the same bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::codec::{Reader, WireError, Writer};
use crate::types::ParticipantId;

const MAGIC: [u8; 2] = *b"FH";
const VERSION: u8 = 1;

/// Who sends a [`Hello`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The host's leader, to a follower that connected.
    Leader = 1,
    /// A follower, answering the leader.
    Follower = 2,
}

/// One side's greeting on the leader's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hello {
    /// Who sends it.
    pub side: Side,
    /// The sender's runtime (its word).
    pub participant: ParticipantId,
}

impl Hello {
    /// Bytes of an encoded hello.
    pub const LEN: usize = 12;

    /// The hello's bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut w = Writer::new();
        w.bytes(&MAGIC);
        w.u8(VERSION);
        w.u8(self.side as u8);
        w.u64(self.participant.0);
        let mut out = [0u8; Self::LEN];
        out.copy_from_slice(&w.into_vec());
        out
    }

    /// Parses exactly one hello (`buf` must be [`Hello::LEN`] bytes).
    pub fn decode(buf: &[u8]) -> Result<Hello, WireError> {
        if buf.len() > Self::LEN {
            return Err(WireError::TooLong {
                field: "hello",
                len: buf.len(),
                limit: Self::LEN,
            });
        }
        let mut r = Reader::new(buf);
        let magic = r.bytes(2)?;
        if magic != MAGIC {
            return Err(WireError::BadMagic {
                found: [magic[0], magic[1]],
            });
        }
        let v = r.u8()?;
        if v != VERSION {
            return Err(WireError::Version(v));
        }
        let side = match r.u8()? {
            1 => Side::Leader,
            2 => Side::Follower,
            k => {
                return Err(WireError::InvalidValue {
                    field: "hello.kind",
                    value: u64::from(k),
                })
            }
        };
        let participant = ParticipantId(r.u64()?);
        Ok(Hello { side, participant })
    }
}

/// Largest datagram a `Feed` frame carries (a UDP datagram's payload).
pub const MAX_FED_DATAGRAM: usize = 65_535;
/// Largest frame, its length field included.
pub const MAX_FRAME: usize = 4 + 1 + 2 + 16 + 2 + MAX_FED_DATAGRAM;

const FRAME_FEEDING: u8 = 1;
const FRAME_FEED: u8 = 2;

/// How the leader received a fed datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FedVia {
    /// On the discovery group.
    Multicast = 1,
    /// On its unicast discovery socket.
    Unicast = 2,
}

/// One discovery datagram, as the leader received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed<'a> {
    /// How it arrived.
    pub via: FedVia,
    /// Where it came from.
    pub from: SocketAddr,
    /// The datagram, verbatim.
    pub datagram: &'a [u8],
}

/// A frame on the leader's socket after the hellos.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// The leader feeds this follower its host's discovery.
    Feeding,
    /// A discovery datagram.
    Feed(Fed<'a>),
}

impl Frame<'_> {
    /// Appends the frame's bytes to `out` (a datagram longer than
    /// [`MAX_FED_DATAGRAM`] is not framed: nothing is appended).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        match self {
            Frame::Feeding => out.extend_from_slice(&[FRAME_FEEDING, 0]),
            Frame::Feed(f) => {
                if f.datagram.len() > MAX_FED_DATAGRAM {
                    out.truncate(start);
                    return;
                }
                out.extend_from_slice(&[FRAME_FEED, f.via as u8]);
                match f.from.ip() {
                    IpAddr::V4(ip) => {
                        out.push(4);
                        out.extend_from_slice(&ip.octets());
                    }
                    IpAddr::V6(ip) => {
                        out.push(6);
                        out.extend_from_slice(&ip.octets());
                    }
                }
                out.extend_from_slice(&f.from.port().to_le_bytes());
                out.extend_from_slice(f.datagram);
            }
        }
        let len = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Parses the frame at the start of `buf`: the frame and its length in
    /// bytes, or `None` while `buf` holds only part of it.
    pub fn decode(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, WireError> {
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len + 4 > MAX_FRAME {
            return Err(WireError::TooLong {
                field: "leader.frame",
                len,
                limit: MAX_FRAME - 4,
            });
        }
        let Some(body) = buf.get(4..4 + len) else {
            return Ok(None);
        };
        let mut r = Reader::new(body);
        let frame = match r.u8()? {
            FRAME_FEEDING => {
                let reserved = r.u8()?;
                if reserved != 0 {
                    return Err(WireError::InvalidValue {
                        field: "leader.feeding",
                        value: u64::from(reserved),
                    });
                }
                Frame::Feeding
            }
            FRAME_FEED => {
                let via = match r.u8()? {
                    1 => FedVia::Multicast,
                    2 => FedVia::Unicast,
                    v => {
                        return Err(WireError::InvalidValue {
                            field: "leader.feed.via",
                            value: u64::from(v),
                        })
                    }
                };
                let ip = match r.u8()? {
                    4 => IpAddr::V4(Ipv4Addr::from(r.array::<4>()?)),
                    6 => IpAddr::V6(Ipv6Addr::from(r.array::<16>()?)),
                    v => {
                        return Err(WireError::InvalidValue {
                            field: "leader.feed.family",
                            value: u64::from(v),
                        })
                    }
                };
                let port = r.u16()?;
                let datagram = r.bytes(r.remaining())?;
                Frame::Feed(Fed {
                    via,
                    from: SocketAddr::new(ip, port),
                    datagram,
                })
            }
            k => {
                return Err(WireError::InvalidValue {
                    field: "leader.frame.kind",
                    value: u64::from(k),
                })
            }
        };
        if r.remaining() != 0 {
            return Err(WireError::InvalidValue {
                field: "leader.frame.len",
                value: len as u64,
            });
        }
        Ok(Some((frame, 4 + len)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_cut_frame_waits_for_the_rest() {
        let frames = [
            Frame::Feeding,
            Frame::Feed(Fed {
                via: FedVia::Multicast,
                from: "10.1.2.3:7400".parse().unwrap(),
                datagram: b"FD\x03\x03 a heartbeat",
            }),
            Frame::Feed(Fed {
                via: FedVia::Unicast,
                from: "[fe80::1]:9".parse().unwrap(),
                datagram: b"",
            }),
        ];
        let mut stream = Vec::new();
        for f in &frames {
            f.encode_into(&mut stream);
        }
        let mut at = 0;
        for f in &frames {
            // Every prefix of the frame is "not yet", never an error.
            let (got, n) = Frame::decode(&stream[at..])
                .unwrap()
                .expect("a whole frame is there");
            assert_eq!(got, *f);
            for cut in 0..n {
                assert_eq!(Frame::decode(&stream[at..at + cut]), Ok(None));
            }
            at += n;
        }
        assert_eq!(at, stream.len());
    }

    #[test]
    fn a_bad_frame_is_an_error_not_a_panic() {
        let mut one = Vec::new();
        Frame::Feeding.encode_into(&mut one);
        let mut bad = one.clone();
        bad[4] = 9;
        assert!(Frame::decode(&bad).is_err());
        bad = one.clone();
        bad[5] = 1;
        assert!(Frame::decode(&bad).is_err());
        // A length past the largest frame is refused before it is read.
        let huge = (MAX_FRAME as u32).to_le_bytes();
        assert!(matches!(
            Frame::decode(&huge),
            Err(WireError::TooLong { .. })
        ));
        // A length shorter than its fields.
        let mut short = one.clone();
        short[0] = 1;
        short.truncate(5);
        assert!(Frame::decode(&short).is_err());
        // A too long datagram is not framed.
        let big = vec![0u8; MAX_FED_DATAGRAM + 1];
        let mut out = vec![7u8];
        Frame::Feed(Fed {
            via: FedVia::Unicast,
            from: "1.2.3.4:5".parse().unwrap(),
            datagram: &big,
        })
        .encode_into(&mut out);
        assert_eq!(out, vec![7u8]);
    }

    #[test]
    fn round_trips_and_refuses_what_is_not_a_hello() {
        for side in [Side::Leader, Side::Follower] {
            let h = Hello {
                side,
                participant: ParticipantId(0x0123_4567_89ab_cdef),
            };
            let b = h.encode();
            assert_eq!(&b[..4], &[b'F', b'H', 1, side as u8]);
            assert_eq!(Hello::decode(&b), Ok(h));
            // Every shorter prefix is truncated, not misread.
            for n in 0..Hello::LEN {
                assert!(matches!(
                    Hello::decode(&b[..n]),
                    Err(WireError::Truncated { .. })
                ));
            }
        }
        let good = Hello {
            side: Side::Leader,
            participant: ParticipantId(7),
        }
        .encode();
        let mut bad = good;
        bad[0] = b'X';
        assert!(matches!(
            Hello::decode(&bad),
            Err(WireError::BadMagic { .. })
        ));
        bad = good;
        bad[2] = 2;
        assert_eq!(Hello::decode(&bad), Err(WireError::Version(2)));
        bad = good;
        bad[3] = 3;
        assert!(matches!(
            Hello::decode(&bad),
            Err(WireError::InvalidValue { .. })
        ));
        let mut long = good.to_vec();
        long.push(0);
        assert!(matches!(
            Hello::decode(&long),
            Err(WireError::TooLong { .. })
        ));
    }
}
