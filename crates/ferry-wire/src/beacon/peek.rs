//! A beacon's sender and kind, read without parsing its records: what a
//! host leader needs to keep the newest of each participant's datagrams.

use super::{
    KIND_ANNOUNCE, KIND_BYE, KIND_CREDENTIAL, KIND_HEARTBEAT, KIND_REQUEST, MAGIC, VERSION,
};
use crate::codec::Reader;
use crate::types::ParticipantId;

/// What a beacon is, read from its first bytes without parsing the rest
/// ([`peek`]): what a relay needs to keep the newest of each participant's
/// datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek {
    /// The sender.
    pub participant: ParticipantId,
    /// Its flags.
    pub flags: u16,
    /// What it says.
    pub kind: PeekKind,
}

/// The kind of a peeked beacon, with what tells its datagrams apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeekKind {
    /// A part of an announcement.
    Announce {
        /// Record revision.
        revision: u32,
        /// This part.
        part: u16,
        /// Parts of the revision.
        parts: u16,
    },
    /// A heartbeat.
    Heartbeat {
        /// Record revision.
        revision: u32,
        /// Its lease.
        lease_ms: u32,
    },
    /// Leaving.
    Bye,
    /// A request for `target`'s records ([`ParticipantId`] 0: "greet me").
    Request {
        /// Whose.
        target: ParticipantId,
    },
    /// A certificate chunk.
    Credential {
        /// Where the chunk starts.
        offset: u16,
    },
}

/// Reads a beacon's sender, flags and kind (and for an announcement its
/// revision and part) without parsing records; `None` when the bytes are
/// not a beacon this version reads. Cheap and never panics; a datagram
/// that peeks well may still fail [`super::Beacon::parse`].
pub fn peek(buf: &[u8]) -> Option<Peek> {
    let mut r = Reader::new(buf);
    r.header(MAGIC, VERSION).ok()?;
    let kind = r.u8().ok()?;
    let _domain = r.u16().ok()?;
    let flags = r.u16().ok()?;
    let participant = ParticipantId(r.u64().ok()?);
    let kind = match kind {
        KIND_ANNOUNCE => {
            // host_id, net_id, pid, lease, then the name and locators.
            r.bytes(24).ok()?;
            let n = r.u16().ok()? as usize;
            r.bytes(n).ok()?;
            for _ in 0..r.u8().ok()? {
                let n = r.u16().ok()? as usize;
                r.bytes(n).ok()?;
            }
            PeekKind::Announce {
                revision: r.u32().ok()?,
                part: r.u16().ok()?,
                parts: r.u16().ok()?,
            }
        }
        KIND_HEARTBEAT => PeekKind::Heartbeat {
            revision: r.u32().ok()?,
            lease_ms: r.u32().ok()?,
        },
        KIND_BYE => PeekKind::Bye,
        KIND_REQUEST => PeekKind::Request {
            target: ParticipantId(r.u64().ok()?),
        },
        KIND_CREDENTIAL => PeekKind::Credential {
            offset: r.u16().ok()?,
        },
        _ => return None,
    };
    Some(Peek {
        participant,
        flags,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    #[test]
    fn peek_agrees_with_parse_for_every_kind() {
        let info = ParticipantInfo {
            host_id: 1,
            net_id: 2,
            pid: 3,
            lease_ms: 3000,
            name: "talker".into(),
            locators: vec!["tcp/127.0.0.1:7400".parse().unwrap()],
        };
        let records = vec![Record::Node(NodeRecord {
            id: 1,
            name: "cam".into(),
            namespace: "/".into(),
        })];
        let p = ParticipantId(9);
        let parts = Beacon::pack_announce(3, p, &info, 7, &records, DEFAULT_MTU);
        let got = peek(&parts[0]).unwrap();
        assert_eq!(got.participant, p);
        assert_eq!(
            got.kind,
            PeekKind::Announce {
                revision: 7,
                part: 0,
                parts: 1
            }
        );
        let b = |body| Beacon {
            domain: 3,
            participant: p,
            body,
        };
        let hb = b(BeaconBody::Heartbeat {
            revision: 4,
            lease_ms: 3000,
            greeting: false,
        })
        .encode();
        assert_eq!(
            peek(&hb).unwrap().kind,
            PeekKind::Heartbeat {
                revision: 4,
                lease_ms: 3000
            }
        );
        assert_eq!(
            peek(&b(BeaconBody::Bye).encode()).unwrap().kind,
            PeekKind::Bye
        );
        let rq = b(BeaconBody::Request {
            target: ParticipantId(0),
        })
        .encode();
        assert_eq!(
            peek(&rq).unwrap().kind,
            PeekKind::Request {
                target: ParticipantId(0)
            }
        );
        let mut flagged = hb.clone();
        add_flags(&mut flagged, FLAG_FED);
        assert_eq!(peek(&flagged).unwrap().flags, FLAG_FED);
        assert_eq!(
            Beacon::parse(&flagged).unwrap(),
            Beacon::parse(&hb).unwrap()
        );
        // Every cut of an announcement peeks as nothing or as itself.
        for n in 0..parts[0].len() {
            if let Some(x) = peek(&parts[0][..n]) {
                assert_eq!(x, got);
            }
        }
        assert_eq!(peek(b"not a beacon at all"), None);
    }
}
