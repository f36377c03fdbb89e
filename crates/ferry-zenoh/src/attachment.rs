//! The attachment rmw_zenoh puts on every published sample, every query
//! and every reply (Jazzy ≥ 0.2.4): zenoh-ext's serialization of
//! `(i64 sequence number, i64 source timestamp, [u8; 16] source GID)`,
//!
//! ```text
//! 0..8    sequence number, little endian (per publisher or client, from 1)
//! 8..16   source timestamp, ns since the Unix epoch, little endian
//! 16      0x10: the GID's length (LEB128)
//! 17..33  GID
//! ```
//!
//! A reply carries the request's sequence number and the client's GID:
//! that is how a client matches replies to calls. rmw_zenoh drops a sample
//! without an attachment. Jazzy 0.2.0–0.2.3 wrote a keyed layout neither
//! side can read (each value after its name, `\x0fsequence_number` first);
//! [`Attachment::decode`] refuses it with [`AttachmentError::Keyed`].

/// Why an attachment was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AttachmentError {
    /// Shorter than the 33 bytes of rmw_zenoh's attachment.
    #[error("an rmw_zenoh attachment has 33 bytes; this one has {0}")]
    Short(usize),
    /// rmw_zenoh Jazzy 0.2.0–0.2.3's keyed layout (`sequence_number`,
    /// `source_timestamp`, `source_gid`, each before its value).
    #[error("an rmw_zenoh Jazzy 0.2.0–0.2.3 (keyed) attachment: the peer needs rmw_zenoh ≥ 0.2.4")]
    Keyed,
    /// The GID's length byte is not 16 (another writer's layout).
    #[error("the GID's length byte is {0}, not 16: not an rmw_zenoh ≥ 0.2.4 attachment")]
    GidLength(u8),
}

/// One sample's, query's or reply's attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attachment {
    /// The writer's (or the client's) sequence number.
    pub sequence: i64,
    /// Source timestamp, ns since the Unix epoch.
    pub timestamp_ns: i64,
    /// The writer's (or the client's) GID.
    pub gid: [u8; 16],
}

impl Attachment {
    /// Encoded length.
    pub const LEN: usize = 33;

    /// The attachment's bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[..8].copy_from_slice(&self.sequence.to_le_bytes());
        b[8..16].copy_from_slice(&self.timestamp_ns.to_le_bytes());
        b[16] = 16;
        b[17..].copy_from_slice(&self.gid);
        b
    }

    /// Reads an attachment; bytes after the 33rd are ignored, as rmw_zenoh
    /// ignores them.
    pub fn decode(bytes: &[u8]) -> Result<Self, AttachmentError> {
        // Checked first: its 17th byte is the sequence number's low byte,
        // which may well be 16.
        if bytes.starts_with(b"\x0fsequence_number") {
            return Err(AttachmentError::Keyed);
        }
        let (Some(seq), Some(ts), Some(&len), Some(gid)) = (
            bytes.get(..8),
            bytes.get(8..16),
            bytes.get(16),
            bytes.get(17..Self::LEN),
        ) else {
            return Err(AttachmentError::Short(bytes.len()));
        };
        if len != 16 {
            return Err(AttachmentError::GidLength(len));
        }
        let i64_le = |s: &[u8]| {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            i64::from_le_bytes(a)
        };
        let mut g = [0u8; 16];
        g.copy_from_slice(gid);
        Ok(Attachment {
            sequence: i64_le(seq),
            timestamp_ns: i64_le(ts),
            gid: g,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_zenoh_ext_writes() {
        // eclipse-zenoh 1.10.2 (Python):
        // z_serialize((Int64(1), Int64(1700000000000000000), bytes(range(16))))
        let golden = "0100000000000000\
                      00002a36fe9c9717\
                      10\
                      000102030405060708090a0b0c0d0e0f";
        let a = Attachment {
            sequence: 1,
            timestamp_ns: 1_700_000_000_000_000_000,
            gid: std::array::from_fn(|i| i as u8),
        };
        let hex: String = a.encode().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, golden);
        assert_eq!(Attachment::decode(&a.encode()), Ok(a));
    }

    #[test]
    fn short_or_foreign_attachments_are_refused() {
        let a = Attachment {
            sequence: 7,
            timestamp_ns: 9,
            gid: [3; 16],
        }
        .encode();
        for n in 0..Attachment::LEN {
            assert_eq!(Attachment::decode(&a[..n]), Err(AttachmentError::Short(n)));
        }
        // Jazzy 0.2.0–0.2.3: a LEB128 string "sequence_number" first, then
        // the number — refused even when its low byte is 16.
        for seq in [0i64, 16, 272] {
            let mut keyed = vec![15u8];
            keyed.extend_from_slice(b"sequence_number");
            keyed.extend_from_slice(&seq.to_le_bytes());
            keyed.push(16);
            keyed.extend_from_slice(b"source_timestamp");
            keyed.extend_from_slice(&[0; 40]);
            assert_eq!(Attachment::decode(&keyed), Err(AttachmentError::Keyed));
        }
        let mut other = a;
        other[16] = 8;
        assert_eq!(
            Attachment::decode(&other),
            Err(AttachmentError::GidLength(8))
        );
        let mut longer = a.to_vec();
        longer.push(0);
        assert!(Attachment::decode(&longer).is_ok());
    }
}
