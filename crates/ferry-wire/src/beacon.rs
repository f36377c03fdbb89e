//! Discovery beacons: what a runtime says about itself on the discovery
//! channel (multicast group or static peers).
//!
//! ```text
//! 0     2   3    4        6       8              16
//! | "FD" | v | kind | domain | flags | participant u64 | body…
//! ```
//! Four bodies:
//! - `Heartbeat` (periodic, 25 B): "I am alive, my records are at revision
//!   r, forget me after `lease_ms`". This is all a participant sends at rest.
//! - `Announce`: the participant's info plus one *part* of its node and
//!   endpoint records; a participant with many endpoints sends several parts,
//!   each small enough for one unfragmented datagram. Sent when the records
//!   change and in answer to a `Request`, not periodically.
//! - `Request`: "send me your announcement" (to the participant named in the
//!   body, at the address its heartbeats come from).
//! - `Bye` (empty): the participant is leaving.
//! - `Credential`: one chunk of the sender's certificate (security on).
//!
//! With security on, a beacon has [`FLAG_SIGNED`] set and ends with a
//! [`Trailer`] of [`TRAILER_LEN`] bytes: the signer's key id, a strictly
//! increasing stamp, a nonce (a request's challenge, or the echo of one) and
//! an Ed25519 signature over [`SIGNING_CONTEXT`] and everything before the
//! signature. Checking it is discovery's job; this module only frames it.

use crate::codec::{Reader, WireError, Writer};
use crate::types::{EndpointKind, Locator, ParticipantId, Qos, TypeHash};

mod peek;
pub use peek::{peek, Peek, PeekKind};

const MAGIC: [u8; 2] = *b"FD";
const VERSION: u8 = 3;
const KIND_ANNOUNCE: u8 = 1;
const KIND_BYE: u8 = 2;
const KIND_HEARTBEAT: u8 = 3;
const KIND_REQUEST: u8 = 4;
const KIND_CREDENTIAL: u8 = 5;
/// Flag: the beacon ends with a signed [`Trailer`].
pub const FLAG_SIGNED: u16 = 1;
/// Flag (with [`FLAG_SIGNED`]): the sender also talks to runtimes without
/// security (mode `permissive`): those may take the beacon unchecked.
pub const FLAG_PLAIN_OK: u16 = 2;
/// Flag: the sender is fed its host's discovery by its host leader
/// ([`crate::leader::Frame::Feed`]): it learns newcomers through the
/// leader, so nobody needs to greet it.
pub const FLAG_FED: u16 = 4;
/// Bytes of the signed trailer.
pub const TRAILER_LEN: usize = 89;
/// Bytes of the trailer's signature (the datagram's last bytes).
pub const SIGNATURE_LEN: usize = 64;
/// Prefix of every signed message: a beacon signature cannot be taken for
/// a signature of anything else.
pub const SIGNING_CONTEXT: &[u8] = b"ferry/beacon/1\0";
/// Trailer algorithm: Ed25519.
pub const ALG_ED25519: u8 = 1;
/// Largest certificate carried in `Credential` beacons.
pub const MAX_CREDENTIAL: usize = 10 * 1024;
/// Bytes of certificate per `Credential` beacon (the last may be shorter).
pub const CREDENTIAL_CHUNK: usize = 1024;
/// Bytes of the common beacon header.
pub const HEADER_LEN: usize = 16;
/// Longest name, namespace, topic or type name accepted on the wire.
pub const MAX_NAME: usize = 255;
/// Most locators one participant may announce.
pub const MAX_LOCATORS: usize = 16;
/// Most records one beacon may carry.
pub const MAX_RECORDS: usize = 256;
/// Default datagram budget: fits a 1500 B Ethernet MTU without IP fragmentation.
pub const DEFAULT_MTU: usize = 1472;

/// What a runtime tells others about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParticipantInfo {
    /// Identity of the machine for shared memory (machine id + IPC namespace).
    pub host_id: u64,
    /// Identity of the network namespace (loopback locators are only usable
    /// when equal).
    pub net_id: u64,
    /// Process id.
    pub pid: u32,
    /// Lease in milliseconds: forget the participant if silent this long.
    pub lease_ms: u32,
    /// Process name, for humans.
    pub name: String,
    /// Where its transports listen.
    pub locators: Vec<Locator>,
}

/// A node of a participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    /// Node number inside the participant.
    pub id: u32,
    /// Node name (`talker`).
    pub name: String,
    /// Namespace (`/robot1`), `/` for none.
    pub namespace: String,
}

/// A publisher, subscriber, service or client of a participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRecord {
    /// Endpoint number inside the participant.
    pub entity: u32,
    /// Node number it belongs to.
    pub node: u32,
    /// What it is.
    pub kind: EndpointKind,
    /// Fully qualified topic or service name.
    pub topic: String,
    /// Message type name, e.g. `std_msgs/msg/String`.
    pub type_name: String,
    /// Structural hash of the type.
    pub type_hash: TypeHash,
    /// Its QoS.
    pub qos: Qos,
}

/// One record of an announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A node.
    Node(NodeRecord),
    /// An endpoint.
    Endpoint(EndpointRecord),
}

/// One part of a participant's announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announce {
    /// The sender.
    pub info: ParticipantInfo,
    /// Increases whenever the record set changes.
    pub revision: u32,
    /// Index of this part.
    pub part: u16,
    /// Number of parts of this revision.
    pub parts: u16,
    /// Nodes and endpoints in this part.
    pub records: Vec<Record>,
}

/// Body of a beacon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeaconBody {
    /// "Here I am, with these endpoints."
    Announce(Announce),
    /// "I am leaving": withdraw me now, don't wait for my lease.
    Bye,
    /// "I am alive; my records are at `revision`."
    Heartbeat {
        /// Revision of the sender's records (and info).
        revision: u32,
        /// Forget the sender if silent this long.
        lease_ms: u32,
        /// Sent to greet a newcomer, not periodically: does not make the
        /// receiver send its own periodic heartbeats to the sender.
        greeting: bool,
    },
    /// "Participant `target`, send me your announcement."
    Request {
        /// Whose records are wanted.
        target: ParticipantId,
    },
    /// One chunk of the sender's certificate (DER), sent before its
    /// announcement when security is on. Self-authenticating: the
    /// certificate is the CA's signature, and its hash is the key id.
    Credential {
        /// Where this chunk starts (a multiple of [`CREDENTIAL_CHUNK`]).
        offset: u16,
        /// The certificate's length.
        total: u16,
        /// The chunk.
        bytes: Vec<u8>,
    },
}

/// The signed end of a beacon (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    /// Who signed: the first 8 bytes of the SHA-256 of its certificate.
    pub key_id: [u8; 8],
    /// Microseconds since the Unix epoch on the sender's clock, strictly
    /// increasing per sender.
    pub stamp: u64,
    /// A `Request`'s challenge, or the challenge an answer echoes; 0: none.
    pub nonce: u64,
    /// [`ALG_ED25519`].
    pub alg: u8,
    /// The signature.
    pub sig: [u8; SIGNATURE_LEN],
}

/// A parsed datagram with its trailer, if signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The beacon.
    pub beacon: Beacon,
    /// Its flags ([`FLAG_SIGNED`], [`FLAG_PLAIN_OK`]).
    pub flags: u16,
    /// Its trailer ([`FLAG_SIGNED`]).
    pub trailer: Option<Trailer>,
    /// What the signature covers (after [`SIGNING_CONTEXT`]): the datagram
    /// without its last [`SIGNATURE_LEN`] bytes.
    pub covered: &'a [u8],
}

/// The message a beacon signature is made over: [`SIGNING_CONTEXT`] then
/// `covered`.
pub fn signing_message(covered: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(SIGNING_CONTEXT.len() + covered.len());
    m.extend_from_slice(SIGNING_CONTEXT);
    m.extend_from_slice(covered);
    m
}

/// Signs an encoded beacon: sets [`FLAG_SIGNED`] (and `extra_flags`) and
/// appends the trailer; `sign` gets the [`signing_message`].
pub fn seal(
    mut datagram: Vec<u8>,
    extra_flags: u16,
    key_id: [u8; 8],
    stamp: u64,
    nonce: u64,
    sign: impl FnOnce(&[u8]) -> [u8; SIGNATURE_LEN],
) -> Vec<u8> {
    if datagram.len() >= HEADER_LEN {
        let flags = u16::from_le_bytes([datagram[6], datagram[7]]) | FLAG_SIGNED | extra_flags;
        datagram[6..8].copy_from_slice(&flags.to_le_bytes());
    }
    datagram.extend_from_slice(&key_id);
    datagram.extend_from_slice(&stamp.to_le_bytes());
    datagram.extend_from_slice(&nonce.to_le_bytes());
    datagram.push(ALG_ED25519);
    let sig = sign(&signing_message(&datagram));
    datagram.extend_from_slice(&sig);
    datagram
}

/// A whole discovery datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beacon {
    /// Discovery domain id: beacons of other domains are ignored.
    pub domain: u16,
    /// The sender.
    pub participant: ParticipantId,
    /// What it says.
    pub body: BeaconBody,
}

impl Beacon {
    /// Parses an untrusted datagram (a trailer, if any, is not looked at).
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        Self::parse_signed(buf).map(|p| p.beacon)
    }

    /// Parses an untrusted datagram and splits off its trailer when it is
    /// signed (the signature is not checked here).
    pub fn parse_signed(buf: &[u8]) -> Result<Parsed<'_>, WireError> {
        let mut r = Reader::new(buf);
        r.header(MAGIC, VERSION)?;
        let kind = r.u8()?;
        let domain = r.u16()?;
        let flags = r.u16()?;
        let participant = ParticipantId(r.u64()?);
        let (body_end, trailer) = if flags & FLAG_SIGNED != 0 {
            let Some(end) = buf
                .len()
                .checked_sub(TRAILER_LEN)
                .filter(|e| *e >= HEADER_LEN)
            else {
                return Err(WireError::Truncated {
                    offset: HEADER_LEN,
                    needed: (HEADER_LEN + TRAILER_LEN).saturating_sub(buf.len()).max(1),
                });
            };
            let t = &buf[end..];
            let mut tr = Reader::new(t);
            let key_id = tr.array()?;
            let stamp = tr.u64()?;
            let nonce = tr.u64()?;
            let alg = tr.u8()?;
            if alg != ALG_ED25519 {
                return Err(WireError::InvalidValue {
                    field: "trailer.alg",
                    value: alg as u64,
                });
            }
            let sig = tr.array()?;
            (
                end,
                Some(Trailer {
                    key_id,
                    stamp,
                    nonce,
                    alg,
                    sig,
                }),
            )
        } else {
            (buf.len(), None)
        };
        let mut r = Reader::new(&buf[HEADER_LEN..body_end]);
        let body = match kind {
            KIND_ANNOUNCE => BeaconBody::Announce(read_announce(&mut r)?),
            KIND_BYE => BeaconBody::Bye,
            KIND_HEARTBEAT => {
                let revision = r.u32()?;
                let lease_ms = r.u32()?;
                if lease_ms == 0 {
                    return Err(WireError::InvalidValue {
                        field: "heartbeat.lease_ms",
                        value: 0,
                    });
                }
                let greeting = match r.u8()? {
                    0 => false,
                    1 => true,
                    v => {
                        return Err(WireError::InvalidValue {
                            field: "heartbeat.greeting",
                            value: v as u64,
                        })
                    }
                };
                BeaconBody::Heartbeat {
                    revision,
                    lease_ms,
                    greeting,
                }
            }
            KIND_REQUEST => BeaconBody::Request {
                target: ParticipantId(r.u64()?),
            },
            KIND_CREDENTIAL => {
                let offset = r.u16()?;
                let total = r.u16()?;
                let len = r.u16()? as usize;
                let (o, t) = (offset as usize, total as usize);
                if t == 0 || t > MAX_CREDENTIAL {
                    return Err(WireError::TooLong {
                        field: "credential.total",
                        len: t,
                        limit: MAX_CREDENTIAL,
                    });
                }
                if o % CREDENTIAL_CHUNK != 0 || o >= t || len != CREDENTIAL_CHUNK.min(t - o) {
                    return Err(WireError::InvalidValue {
                        field: "credential.offset",
                        value: offset as u64,
                    });
                }
                BeaconBody::Credential {
                    offset,
                    total,
                    bytes: r.bytes(len)?.to_vec(),
                }
            }
            v => {
                return Err(WireError::InvalidValue {
                    field: "beacon.kind",
                    value: v as u64,
                })
            }
        };
        let covered_end = if trailer.is_some() {
            buf.len() - SIGNATURE_LEN
        } else {
            buf.len()
        };
        Ok(Parsed {
            beacon: Beacon {
                domain,
                participant,
                body,
            },
            flags,
            trailer,
            covered: &buf[..covered_end],
        })
    }

    /// Encodes the beacon.
    pub fn encode(&self) -> Vec<u8> {
        let kind = match self.body {
            BeaconBody::Announce(_) => KIND_ANNOUNCE,
            BeaconBody::Bye => KIND_BYE,
            BeaconBody::Heartbeat { .. } => KIND_HEARTBEAT,
            BeaconBody::Request { .. } => KIND_REQUEST,
            BeaconBody::Credential { .. } => KIND_CREDENTIAL,
        };
        let mut w = header(self.domain, self.participant, kind);
        match &self.body {
            BeaconBody::Announce(a) => {
                write_announce_head(&mut w, &a.info, a.revision, a.part, a.parts);
                w.u16(a.records.len() as u16);
                for rec in &a.records {
                    write_record(&mut w, rec);
                }
            }
            BeaconBody::Bye => {}
            BeaconBody::Heartbeat {
                revision,
                lease_ms,
                greeting,
            } => {
                w.u32(*revision);
                w.u32(*lease_ms);
                w.u8(u8::from(*greeting));
            }
            BeaconBody::Request { target } => w.u64(target.0),
            BeaconBody::Credential {
                offset,
                total,
                bytes,
            } => {
                w.u16(*offset);
                w.u16(*total);
                w.u16(bytes.len() as u16);
                w.bytes(bytes);
            }
        }
        w.into_vec()
    }

    /// A certificate as `Credential` beacons (unsigned; `None` when it is
    /// larger than [`MAX_CREDENTIAL`]).
    pub fn credential(
        domain: u16,
        participant: ParticipantId,
        cert: &[u8],
    ) -> Option<Vec<Vec<u8>>> {
        if cert.is_empty() || cert.len() > MAX_CREDENTIAL {
            return None;
        }
        Some(
            cert.chunks(CREDENTIAL_CHUNK)
                .enumerate()
                .map(|(i, c)| {
                    Beacon {
                        domain,
                        participant,
                        body: BeaconBody::Credential {
                            offset: (i * CREDENTIAL_CHUNK) as u16,
                            total: cert.len() as u16,
                            bytes: c.to_vec(),
                        },
                    }
                    .encode()
                })
                .collect(),
        )
    }

    /// Packs a participant's whole record set into as many announce
    /// datagrams as needed, each at most `mtu` bytes (a record larger than the
    /// budget on its own still gets a datagram to itself).
    pub fn pack_announce(
        domain: u16,
        participant: ParticipantId,
        info: &ParticipantInfo,
        revision: u32,
        records: &[Record],
        mtu: usize,
    ) -> Vec<Vec<u8>> {
        // First split records into groups by encoded size, then write the
        // groups with the final part count.
        let mut head = Writer::new();
        write_announce_head(&mut head, info, revision, 0, 0);
        let fixed = HEADER_LEN + head.len() + 2;
        let mut groups: Vec<Vec<Vec<u8>>> = vec![Vec::new()];
        let mut used = fixed;
        for rec in records {
            let mut w = Writer::new();
            write_record(&mut w, rec);
            let enc = w.into_vec();
            let group = groups.last_mut().expect("groups is never empty");
            if !group.is_empty() && (used + enc.len() > mtu || group.len() >= MAX_RECORDS) {
                groups.push(Vec::new());
                used = fixed;
            }
            used += enc.len();
            groups.last_mut().expect("just pushed").push(enc);
        }
        let parts = groups.len() as u16;
        groups
            .into_iter()
            .enumerate()
            .map(|(i, group)| {
                let mut w = header(domain, participant, KIND_ANNOUNCE);
                write_announce_head(&mut w, info, revision, i as u16, parts);
                w.u16(group.len() as u16);
                for enc in group {
                    w.bytes(&enc);
                }
                w.into_vec()
            })
            .collect()
    }
}

/// Sets `flags` in an encoded beacon's header (before it is signed: the
/// signature covers them).
pub fn add_flags(datagram: &mut [u8], flags: u16) {
    if datagram.len() >= HEADER_LEN {
        let f = u16::from_le_bytes([datagram[6], datagram[7]]) | flags;
        datagram[6..8].copy_from_slice(&f.to_le_bytes());
    }
}

fn header(domain: u16, participant: ParticipantId, kind: u8) -> Writer {
    let mut w = Writer::new();
    w.bytes(&MAGIC);
    w.u8(VERSION);
    w.u8(kind);
    w.u16(domain);
    w.u16(0);
    w.u64(participant.0);
    w
}

fn write_announce_head(
    w: &mut Writer,
    info: &ParticipantInfo,
    revision: u32,
    part: u16,
    parts: u16,
) {
    w.u64(info.host_id);
    w.u64(info.net_id);
    w.u32(info.pid);
    w.u32(info.lease_ms);
    w.str(&info.name, MAX_NAME);
    let n = info.locators.len().min(MAX_LOCATORS);
    w.u8(n as u8);
    for l in &info.locators[..n] {
        w.str(&l.to_string(), MAX_NAME);
    }
    w.u32(revision);
    w.u16(part);
    w.u16(parts);
}

fn write_record(w: &mut Writer, rec: &Record) {
    match rec {
        Record::Node(n) => {
            w.u8(1);
            w.u32(n.id);
            w.str(&n.name, MAX_NAME);
            w.str(&n.namespace, MAX_NAME);
        }
        Record::Endpoint(e) => {
            w.u8(2);
            w.u32(e.entity);
            w.u32(e.node);
            w.u8(e.kind as u8);
            w.str(&e.topic, MAX_NAME);
            w.str(&e.type_name, MAX_NAME);
            w.bytes(&e.type_hash.0);
            e.qos.write(w);
        }
    }
}

fn read_announce(r: &mut Reader<'_>) -> Result<Announce, WireError> {
    let host_id = r.u64()?;
    let net_id = r.u64()?;
    let pid = r.u32()?;
    let lease_ms = r.u32()?;
    if lease_ms == 0 {
        return Err(WireError::InvalidValue {
            field: "announce.lease_ms",
            value: 0,
        });
    }
    let name = r.str("announce.name", MAX_NAME)?.to_string();
    let n = r.u8()? as usize;
    if n > MAX_LOCATORS {
        return Err(WireError::TooLong {
            field: "announce.locators",
            len: n,
            limit: MAX_LOCATORS,
        });
    }
    let mut locators = Vec::with_capacity(n);
    for _ in 0..n {
        let s = r.str("announce.locator", MAX_NAME)?;
        // Unknown transports from newer peers are skipped, not fatal.
        if let Ok(l) = s.parse::<Locator>() {
            locators.push(l);
        }
    }
    let revision = r.u32()?;
    let part = r.u16()?;
    let parts = r.u16()?;
    if parts == 0 || part >= parts {
        return Err(WireError::InvalidValue {
            field: "announce.part",
            value: part as u64,
        });
    }
    let count = r.u16()? as usize;
    if count > MAX_RECORDS {
        return Err(WireError::TooLong {
            field: "announce.records",
            len: count,
            limit: MAX_RECORDS,
        });
    }
    let mut records = Vec::with_capacity(count.min(r.remaining()));
    for _ in 0..count {
        records.push(match r.u8()? {
            1 => Record::Node(NodeRecord {
                id: r.u32()?,
                name: r.str("node.name", MAX_NAME)?.to_string(),
                namespace: r.str("node.namespace", MAX_NAME)?.to_string(),
            }),
            2 => Record::Endpoint(EndpointRecord {
                entity: r.u32()?,
                node: r.u32()?,
                kind: EndpointKind::from_u8(r.u8()?)?,
                topic: r.str("endpoint.topic", MAX_NAME)?.to_string(),
                type_name: r.str("endpoint.type_name", MAX_NAME)?.to_string(),
                type_hash: TypeHash(r.array()?),
                qos: Qos::read(r)?,
            }),
            v => {
                return Err(WireError::InvalidValue {
                    field: "record.kind",
                    value: v as u64,
                })
            }
        });
    }
    Ok(Announce {
        info: ParticipantInfo {
            host_id,
            net_id,
            pid,
            lease_ms,
            name,
            locators,
        },
        revision,
        part,
        parts,
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn info() -> ParticipantInfo {
        ParticipantInfo {
            host_id: 1,
            net_id: 2,
            pid: 3,
            lease_ms: 3000,
            name: "talker".into(),
            locators: vec![
                "tcp/127.0.0.1:7400".parse().unwrap(),
                "udp/10.0.0.2:7411?mtu=1400".parse().unwrap(),
                "shm/ferry.s.4026531836.77.123.abcd".parse().unwrap(),
            ],
        }
    }

    fn endpoint(i: u32) -> Record {
        Record::Endpoint(EndpointRecord {
            entity: i,
            node: 1,
            kind: EndpointKind::Publisher,
            topic: format!("/robot/sensor_{i}/with/a/long/name"),
            type_name: "sensor_msgs/msg/Image".into(),
            type_hash: TypeHash([3; 32]),
            qos: Qos::sensor_data(),
        })
    }

    #[test]
    fn announce_packs_into_mtu_sized_parts_and_round_trips() {
        let mut records = vec![Record::Node(NodeRecord {
            id: 1,
            name: "cam".into(),
            namespace: "/".into(),
        })];
        records.extend((0..100).map(endpoint));
        let parts = Beacon::pack_announce(0, ParticipantId(5), &info(), 7, &records, DEFAULT_MTU);
        assert!(parts.len() > 1, "100 endpoints cannot fit one datagram");
        let mut got = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            assert!(p.len() <= DEFAULT_MTU, "part {i} is {} bytes", p.len());
            let b = Beacon::parse(p).unwrap();
            assert_eq!(b.participant, ParticipantId(5));
            let BeaconBody::Announce(a) = b.body else {
                panic!("not an announce")
            };
            assert_eq!((a.part as usize, a.parts as usize), (i, parts.len()));
            assert_eq!(a.info, info());
            got.extend(a.records);
        }
        assert_eq!(got, records);
    }

    #[test]
    fn empty_record_set_is_one_part() {
        let parts = Beacon::pack_announce(3, ParticipantId(5), &info(), 1, &[], DEFAULT_MTU);
        assert_eq!(parts.len(), 1);
        let b = Beacon::parse(&parts[0]).unwrap();
        assert_eq!(b.domain, 3);
    }

    #[test]
    fn bye_round_trips() {
        let b = Beacon {
            domain: 9,
            participant: ParticipantId(1),
            body: BeaconBody::Bye,
        };
        assert_eq!(Beacon::parse(&b.encode()).unwrap(), b);
    }

    #[test]
    fn heartbeat_and_request_round_trip_and_a_heartbeat_is_25_bytes() {
        let hb = Beacon {
            domain: 9,
            participant: ParticipantId(1),
            body: BeaconBody::Heartbeat {
                revision: 7,
                lease_ms: 3000,
                greeting: true,
            },
        };
        assert_eq!(hb.encode().len(), 25);
        assert_eq!(Beacon::parse(&hb.encode()).unwrap(), hb);
        let rq = Beacon {
            domain: 9,
            participant: ParticipantId(1),
            body: BeaconBody::Request {
                target: ParticipantId(2),
            },
        };
        assert_eq!(Beacon::parse(&rq.encode()).unwrap(), rq);
        for n in 0..hb.encode().len() {
            assert!(
                Beacon::parse(&hb.encode()[..n]).is_err(),
                "prefix {n} parsed"
            );
        }
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let parts = Beacon::pack_announce(0, ParticipantId(5), &info(), 7, &[endpoint(1)], 1472);
        for n in 0..parts[0].len() {
            assert!(Beacon::parse(&parts[0][..n]).is_err(), "prefix {n} parsed");
        }
    }

    #[test]
    fn a_sealed_beacon_parses_with_its_trailer_and_the_signature_covers_all_before_it() {
        let hb = Beacon {
            domain: 9,
            participant: ParticipantId(1),
            body: BeaconBody::Heartbeat {
                revision: 7,
                lease_ms: 3000,
                greeting: false,
            },
        };
        let mut seen = Vec::new();
        let d = seal(hb.encode(), FLAG_PLAIN_OK, [7; 8], 42, 99, |m| {
            seen = m.to_vec();
            [5; SIGNATURE_LEN]
        });
        assert_eq!(d.len(), 25 + TRAILER_LEN, "a signed heartbeat is 114 bytes");
        let p = Beacon::parse_signed(&d).unwrap();
        assert_eq!(p.beacon, hb);
        assert_eq!(p.flags, FLAG_SIGNED | FLAG_PLAIN_OK);
        let t = p.trailer.unwrap();
        assert_eq!(
            (t.key_id, t.stamp, t.nonce, t.sig),
            ([7; 8], 42, 99, [5; 64])
        );
        assert_eq!(signing_message(p.covered), seen);
        assert_eq!(p.covered.len(), d.len() - SIGNATURE_LEN);
        // A trailer cut short is an error, never a shorter body.
        for n in 0..d.len() {
            assert!(Beacon::parse_signed(&d[..n]).is_err(), "prefix {n} parsed");
        }
        // Unsigned: no trailer, everything covered.
        let plain = hb.encode();
        let p = Beacon::parse_signed(&plain).unwrap();
        assert!(p.trailer.is_none());
    }

    #[test]
    fn a_certificate_travels_in_chunks_that_round_trip_and_bad_chunks_are_refused() {
        let cert: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        let parts = Beacon::credential(0, ParticipantId(3), &cert).unwrap();
        assert_eq!(parts.len(), 3);
        let mut got = Vec::new();
        for p in &parts {
            let BeaconBody::Credential {
                offset,
                total,
                bytes,
            } = Beacon::parse(p).unwrap().body
            else {
                panic!("not a credential")
            };
            assert_eq!((offset as usize, total as usize), (got.len(), cert.len()));
            got.extend(bytes);
        }
        assert_eq!(got, cert);
        assert!(Beacon::credential(0, ParticipantId(3), &vec![0; MAX_CREDENTIAL + 1]).is_none());
        let bad = Beacon {
            domain: 0,
            participant: ParticipantId(3),
            body: BeaconBody::Credential {
                offset: 5,
                total: 100,
                bytes: vec![0; 95],
            },
        };
        assert!(
            Beacon::parse(&bad.encode()).is_err(),
            "offset off a chunk boundary"
        );
    }

    proptest! {
        #[test]
        fn signed_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut b = bytes;
            if b.len() > 8 {
                b[0] = b'F';
                b[1] = b'D';
                b[2] = VERSION;
                b[6] |= FLAG_SIGNED as u8;
            }
            let _ = Beacon::parse_signed(&b);
        }

        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = Beacon::parse(&bytes);
        }

        #[test]
        fn mutated_announces_never_panic(idx in 0usize..400, val in any::<u8>()) {
            let parts = Beacon::pack_announce(0, ParticipantId(5), &info(), 7, &[endpoint(1), endpoint(2)], 1472);
            let mut p = parts[0].clone();
            let i = idx % p.len();
            p[i] = val;
            let _ = Beacon::parse(&p);
        }
    }
}
