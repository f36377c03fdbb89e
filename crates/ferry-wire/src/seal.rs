//! Protected UDP datagrams (security on): a Noise IK handshake in two
//! datagrams, then every ferry-rudp datagram sealed with AEAD under the
//! session's keys. Checked views: the length is validated once by
//! [`SealView::parse`], after which the accessors cannot fail.
//!
//! ```text
//! all     0 "FX" | 2 version 1 | 3 kind (low 7 bits) · bit 7 reserved (a key phase; must be 0)
//! SHAKE1  4 sender index u32 | 8 initiator participant u64 | 16 responder participant u64 | 24 Noise message 1
//! SHAKE2  4 sender index u32 | 8 receiver index u32 | 12 Noise message 2
//! SEALED  4 receiver index u32 | 8 counter u64 | 16 AEAD(inner datagram) ‖ tag (16)
//! ```
//!
//! Integers are little-endian, as everywhere in ferry's formats. The first
//! two bytes tell a protected datagram (`FX`) from a plain ferry-rudp one
//! (`FU`).

use crate::codec::{Reader, Writer};
use crate::{ParticipantId, WireError};

/// First bytes of every protected datagram.
pub const MAGIC: [u8; 2] = *b"FX";
/// Version of this format.
pub const VERSION: u8 = 1;
/// Bytes of a SEALED datagram's header (also its AEAD's associated data).
pub const SEALED_HEADER: usize = 16;
/// AEAD tag bytes.
pub const TAG: usize = 16;
/// What sealing adds to a datagram: header and tag.
pub const SEAL_OVERHEAD: usize = SEALED_HEADER + TAG;
/// Largest Noise message a handshake datagram may carry (IK's are 96 and
/// 48 bytes with their payloads).
pub const MAX_NOISE: usize = 256;
/// Key phase bit of the kind byte.
const PHASE: u8 = 0x80;

const KIND_SHAKE1: u8 = 1;
const KIND_SHAKE2: u8 = 2;
const KIND_SEALED: u8 = 3;

/// Whether `bytes` is a protected datagram (by its first two bytes).
pub fn is_protected(bytes: &[u8]) -> bool {
    bytes.len() >= 2 && bytes[..2] == MAGIC
}

/// A parsed protected datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealView<'a> {
    /// The initiator's first handshake message.
    Shake1 {
        /// The index the initiator will receive SEALED datagrams under.
        sender_index: u32,
        /// Who starts.
        initiator: ParticipantId,
        /// Who it wants to reach.
        responder: ParticipantId,
        /// Noise IK message 1.
        noise: &'a [u8],
    },
    /// The responder's answer.
    Shake2 {
        /// The index the responder will receive SEALED datagrams under.
        sender_index: u32,
        /// The initiator's index (from its SHAKE1).
        receiver_index: u32,
        /// Noise IK message 2.
        noise: &'a [u8],
    },
    /// A datagram sealed under a session.
    Sealed {
        /// The receiver's index of the session.
        receiver_index: u32,
        /// Key phase: reserved, always false (keys are renewed by new
        /// handshakes; a datagram with it set does not parse).
        phase: bool,
        /// Per-direction counter: the nonce, and the replay check.
        counter: u64,
        /// The header: the AEAD's associated data.
        header: &'a [u8],
        /// Ciphertext and tag.
        sealed: &'a [u8],
    },
}

impl<'a> SealView<'a> {
    /// Parses a protected datagram; an error names what is wrong.
    pub fn parse(bytes: &'a [u8]) -> Result<SealView<'a>, WireError> {
        let mut r = Reader::new(bytes);
        r.header(MAGIC, VERSION)?;
        let kind = r.u8()?;
        let noise = |r: &mut Reader<'a>| -> Result<&'a [u8], WireError> {
            let n = r.remaining();
            if n > MAX_NOISE {
                return Err(WireError::TooLong {
                    field: "seal.noise",
                    len: n,
                    limit: MAX_NOISE,
                });
            }
            r.bytes(n)
        };
        match kind & !PHASE {
            KIND_SHAKE1 if kind & PHASE == 0 => Ok(SealView::Shake1 {
                sender_index: r.u32()?,
                initiator: ParticipantId(r.u64()?),
                responder: ParticipantId(r.u64()?),
                noise: noise(&mut r)?,
            }),
            KIND_SHAKE2 if kind & PHASE == 0 => Ok(SealView::Shake2 {
                sender_index: r.u32()?,
                receiver_index: r.u32()?,
                noise: noise(&mut r)?,
            }),
            KIND_SEALED if kind & PHASE == 0 => {
                let receiver_index = r.u32()?;
                let counter = r.u64()?;
                let sealed = r.bytes(r.remaining())?;
                if sealed.len() < TAG {
                    return Err(WireError::Truncated {
                        offset: SEALED_HEADER,
                        needed: TAG,
                    });
                }
                Ok(SealView::Sealed {
                    receiver_index,
                    phase: kind & PHASE != 0,
                    counter,
                    header: &bytes[..SEALED_HEADER],
                    sealed,
                })
            }
            _ => Err(WireError::InvalidValue {
                field: "seal.kind",
                value: u64::from(kind),
            }),
        }
    }
}

/// Writes a SHAKE1 datagram.
pub fn shake1(
    sender_index: u32,
    initiator: ParticipantId,
    responder: ParticipantId,
    noise: &[u8],
) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(&MAGIC);
    w.u8(VERSION);
    w.u8(KIND_SHAKE1);
    w.u32(sender_index);
    w.u64(initiator.0);
    w.u64(responder.0);
    w.bytes(noise);
    w.into_vec()
}

/// Writes a SHAKE2 datagram.
pub fn shake2(sender_index: u32, receiver_index: u32, noise: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(&MAGIC);
    w.u8(VERSION);
    w.u8(KIND_SHAKE2);
    w.u32(sender_index);
    w.u32(receiver_index);
    w.bytes(noise);
    w.into_vec()
}

/// The header of a SEALED datagram (its AEAD's associated data).
pub fn sealed_header(receiver_index: u32, phase: bool, counter: u64) -> [u8; SEALED_HEADER] {
    let mut h = [0u8; SEALED_HEADER];
    h[..2].copy_from_slice(&MAGIC);
    h[2] = VERSION;
    h[3] = KIND_SEALED | if phase { PHASE } else { 0 };
    h[4..8].copy_from_slice(&receiver_index.to_le_bytes());
    h[8..16].copy_from_slice(&counter.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_round_trips() {
        let s1 = shake1(7, ParticipantId(1), ParticipantId(2), &[9; 96]);
        assert_eq!(
            SealView::parse(&s1).unwrap(),
            SealView::Shake1 {
                sender_index: 7,
                initiator: ParticipantId(1),
                responder: ParticipantId(2),
                noise: &[9; 96],
            }
        );
        let s2 = shake2(8, 7, &[3; 48]);
        assert_eq!(
            SealView::parse(&s2).unwrap(),
            SealView::Shake2 {
                sender_index: 8,
                receiver_index: 7,
                noise: &[3; 48],
            }
        );
        let mut d = sealed_header(8, false, 1 << 40).to_vec();
        d.extend_from_slice(&[5; 40]);
        match SealView::parse(&d).unwrap() {
            SealView::Sealed {
                receiver_index,
                phase,
                counter,
                header,
                sealed,
            } => {
                assert_eq!((receiver_index, phase, counter), (8, false, 1 << 40));
                assert_eq!(header, &d[..SEALED_HEADER]);
                assert_eq!(sealed.len(), 40);
            }
            other => panic!("{other:?}"),
        }
        assert!(is_protected(&d) && !is_protected(b"FU\x01"));
        // The key-phase bit is reserved (keys are renewed by handshakes):
        // a datagram with it set is refused, not opened.
        let mut p = sealed_header(8, true, 1).to_vec();
        p.extend_from_slice(&[5; 40]);
        assert!(SealView::parse(&p).is_err());
    }

    #[test]
    fn bad_datagrams_are_errors_not_panics() {
        let mut d = sealed_header(1, false, 1).to_vec();
        d.extend_from_slice(&[0; 15]);
        assert!(SealView::parse(&d).is_err(), "shorter than a tag");
        assert!(SealView::parse(b"FX").is_err());
        assert!(SealView::parse(b"FX\x02\x03").is_err(), "version");
        assert!(SealView::parse(b"FX\x01\x09").is_err(), "kind");
        assert!(
            SealView::parse(b"FX\x01\x81\0\0\0\0").is_err(),
            "phase on a shake"
        );
        let long = shake2(1, 2, &[0; MAX_NOISE + 1]);
        assert!(SealView::parse(&long).is_err(), "oversized noise");
        for n in 0..64 {
            let s1 = shake1(7, ParticipantId(1), ParticipantId(2), &[9; 32]);
            let _ = SealView::parse(&s1[..n.min(s1.len())]);
        }
    }
}
