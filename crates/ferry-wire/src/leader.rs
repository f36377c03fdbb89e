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
//! A hello is all either side says for now; the participant is the
//! sender's word, the process behind it is what the kernel says
//! (`SO_PEERCRED`). Parsing never panics; an accepted hello re-encodes to
//! the same bytes.

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

#[cfg(test)]
mod tests {
    use super::*;

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
