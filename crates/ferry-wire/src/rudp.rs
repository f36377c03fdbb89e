//! Datagrams of ferry's reliable/best-effort UDP protocol (`ferry-rudp`).
//!
//! Every datagram fits one path MTU (default 1472 B of UDP payload), so IP
//! never fragments. A sample is split into fragments; losses are repaired per
//! fragment.
//!
//! ```text
//! common   0 "FU" | 2 version | 3 kind | 4 stream u32 |
//! DATA     8 seq u64 | 16 stamp_ns u64 | 24 sample_len u32 | 28 frag u16 | 30 frags u16 | 32 payload…
//! HEARTBEAT 8 first u64 | 16 last u64 | 24 count u32 | 28 sent_us u32
//! HELLO    8 from (participant u64, entity u32) | 20 to (participant u64, entity u32) | 32 flags u8 (1 = reliable)
//! FEC      8 seq u64 | 16 stamp_ns u64 | 24 sample_len u32 | 28 index u16 | 30 frags u16 |
//!          32 recovery u16 | 34 payload… (recovery shard `index` of `recovery`, Reed–Solomon over
//!          the sample's `frags` fragments, each zero-padded to the shard length = the fragment
//!          length rounded up to even)
//! ACKNACK  8 base u64 | 16 count u32 | 20 echo_us u32 | 24 hold_us u32 | 28 rate_kBps u32 |
//!          32 loss_permille u16 | 34 n u16 | n × { offset u32 (seq - base), nfrag-bitmap bytes u8 (0 = whole sample),
//!                          frag_base u16 if bytes > 0, bitmap… } |
//!          optional blocks, each tag u8 | len u16 | len bytes (unknown tags are skipped):
//!          ARRIVAL (tag 0xA1, 22 B): seq u64 | frag u16 | at_us u32 | bytes u32 | datagrams u32
//! ```
//! The ARRIVAL block marks the newest datagram (DATA or FEC) the reader
//! received: its id (`seq`, `frag`; a FEC shard is `frags + index`), when it
//! arrived on the reader's clock (µs, wrapping), and the bytes and datagrams
//! the reader had received on the stream by then (wrapping counters). Two
//! marks give the writer a delivery rate, a loss count and a one-way delay
//! change over the datagrams it sent between them (congestion control).
//! Parsers from before the block ignore bytes after the entries.
//! `first..=last` in a heartbeat is what the writer still holds (first > last:
//! nothing). An ACKNACK says: every sample below `base` is done (delivered or
//! given up); the listed samples (or fragments of them) are missing.

use crate::codec::{Reader, WireError, Writer};
use crate::types::EndpointId;

const MAGIC: [u8; 2] = *b"FU";
const VERSION: u8 = 1;
/// Bytes of a DATA header; the rest of the datagram is payload.
pub const DATA_HEADER: usize = 32;
/// Bytes of a heartbeat.
pub const HEARTBEAT_LEN: usize = 32;
/// Fixed part of an ACKNACK.
pub const ACKNACK_HEADER: usize = 36;
/// Tag of the ARRIVAL block of an ACKNACK.
pub const TAG_ARRIVAL: u8 = 0xA1;
/// Bytes of the ARRIVAL block's body.
pub const ARRIVAL_LEN: usize = 22;
/// Most fragments of one sample (≈ 93 MB at 1440 B per fragment).
pub const MAX_FRAGS: u16 = u16::MAX;
/// Longest fragment bitmap in one NACK entry (2048 fragments).
pub const MAX_BITMAP: usize = 255;

const KIND_DATA: u8 = 1;
const KIND_HEARTBEAT: u8 = 2;
const KIND_ACKNACK: u8 = 3;
const KIND_HELLO: u8 = 4;
const KIND_FEC: u8 = 5;
/// Bytes of a FEC header; the rest of the datagram is the shard.
pub const FEC_HEADER: usize = 34;
/// Bytes of a HELLO.
pub const HELLO_LEN: usize = 33;

/// Opens a stream: the writer names itself and the reader it wants. The
/// reader's runtime answers with an ACKNACK (base 1) once bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The writer.
    pub from: EndpointId,
    /// The reader.
    pub to: EndpointId,
    /// Reliable stream (NACK repair) or best effort.
    pub reliable: bool,
}

/// Encodes a HELLO.
pub fn encode_hello(stream: u32, h: &Hello) -> Vec<u8> {
    let mut out = Vec::with_capacity(HELLO_LEN);
    encode_hello_into(&mut out, stream, h);
    out
}

/// Encodes a HELLO into `out` (cleared first; its capacity is reused).
pub fn encode_hello_into(out: &mut Vec<u8>, stream: u32, h: &Hello) {
    let mut w = Writer::reuse(std::mem::take(out));
    header(&mut w, KIND_HELLO, stream);
    h.from.write(&mut w);
    h.to.write(&mut w);
    w.u8(h.reliable as u8);
    *out = w.into_vec();
}

/// One fragment of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data<'a> {
    /// Sample sequence number.
    pub seq: u64,
    /// Source time, ns since the epoch.
    pub stamp_ns: u64,
    /// Length of the whole sample.
    pub sample_len: u32,
    /// This fragment's index.
    pub frag: u16,
    /// Number of fragments of the sample (≥ 1).
    pub frags: u16,
    /// The fragment's bytes.
    pub payload: &'a [u8],
}

/// One recovery shard of a sample (forward error correction): with any
/// `frags` of the sample's `frags + recovery` fragments and shards the
/// reader rebuilds the sample without waiting for a repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fec<'a> {
    /// Sample sequence number.
    pub seq: u64,
    /// Source time, ns since the epoch.
    pub stamp_ns: u64,
    /// Length of the whole sample.
    pub sample_len: u32,
    /// This shard's index, below `recovery`.
    pub index: u16,
    /// Data fragments of the sample.
    pub frags: u16,
    /// Recovery shards sent for the sample (1 ≤ recovery ≤ frags).
    pub recovery: u16,
    /// The shard (even length).
    pub payload: &'a [u8],
}

/// "I hold samples `first..=last`."
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// Oldest sample still in the writer's history.
    pub first: u64,
    /// Newest sample written.
    pub last: u64,
    /// Increases with every heartbeat.
    pub count: u32,
    /// Writer's clock (µs, wrapping) when sent; echoed for RTT.
    pub sent_us: u32,
}

/// What a reader misses of one sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// The whole sample.
    Sample(u64),
    /// Some fragments: bit i of `bitmap` = fragment `frag_base + i` missing.
    Fragments {
        /// The sample.
        seq: u64,
        /// First fragment the bitmap covers.
        frag_base: u16,
        /// Bit per fragment, LSB first.
        bitmap: Vec<u8>,
    },
}

impl Missing {
    /// The sample concerned.
    pub fn seq(&self) -> u64 {
        match self {
            Missing::Sample(s) | Missing::Fragments { seq: s, .. } => *s,
        }
    }
}

/// Acknowledgement and negative acknowledgement from a reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckNack {
    /// Every sample below this is done.
    pub base: u64,
    /// Increases with every ACKNACK.
    pub count: u32,
    /// `sent_us` of the newest heartbeat seen (0: none).
    pub echo_us: u32,
    /// µs between receiving that heartbeat and sending this.
    pub hold_us: u32,
    /// Rate the reader received at, kB/s (0: unknown).
    pub rate_kbps: u32,
    /// Share of first transmissions (fragments and FEC shards) the reader
    /// has been losing, ‰ (sizes the writer's forward error correction).
    pub loss_permille: u16,
    /// What is missing, oldest first.
    pub missing: Vec<Missing>,
    /// The newest datagram received, with the reader's counters then.
    pub arrival: Option<Arrival>,
}

/// The reader's mark of the newest datagram it received (see the module
/// docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Arrival {
    /// The datagram's sample.
    pub seq: u64,
    /// Its fragment (`frags + index` for a FEC shard).
    pub frag: u16,
    /// When it arrived, µs on the reader's wrapping clock.
    pub at_us: u32,
    /// Bytes (datagram lengths) received on the stream so far, wrapping.
    pub bytes: u32,
    /// DATA and FEC datagrams received on the stream so far, wrapping.
    pub datagrams: u32,
}

/// Reads the optional blocks after an ACKNACK's entries.
fn read_blocks(r: &mut Reader<'_>) -> Result<Option<Arrival>, WireError> {
    let mut arrival = None;
    while r.remaining() > 0 {
        let tag = r.u8()?;
        let len = r.u16()? as usize;
        let body = r.bytes(len)?;
        if tag != TAG_ARRIVAL {
            continue; // a later version's block
        }
        if len != ARRIVAL_LEN {
            return Err(WireError::InvalidValue {
                field: "acknack.arrival",
                value: len as u64,
            });
        }
        let mut b = Reader::new(body);
        arrival = Some(Arrival {
            seq: b.u64()?,
            frag: b.u16()?,
            at_us: b.u32()?,
            bytes: b.u32()?,
            datagrams: b.u32()?,
        });
    }
    Ok(arrival)
}

/// A parsed datagram (DATA borrows its payload from the input).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Datagram<'a> {
    /// A fragment.
    Data(Data<'a>),
    /// A heartbeat.
    Heartbeat(Heartbeat),
    /// An ACKNACK.
    AckNack(AckNack),
    /// A stream opening.
    Hello(Hello),
    /// A recovery shard.
    Fec(Fec<'a>),
}

/// A datagram with the stream it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Stream (connection) id.
    pub stream: u32,
    /// The datagram.
    pub body: Datagram<'a>,
}

fn header(w: &mut Writer, kind: u8, stream: u32) {
    w.bytes(&MAGIC);
    w.u8(VERSION);
    w.u8(kind);
    w.u32(stream);
}

impl Packet<'_> {
    /// Parses an untrusted datagram.
    pub fn parse(buf: &[u8]) -> Result<Packet<'_>, WireError> {
        let mut r = Reader::new(buf);
        r.header(MAGIC, VERSION)?;
        let kind = r.u8()?;
        let stream = r.u32()?;
        let body = match kind {
            KIND_DATA => {
                let seq = r.u64()?;
                let stamp_ns = r.u64()?;
                let sample_len = r.u32()?;
                let frag = r.u16()?;
                let frags = r.u16()?;
                if frags == 0 || frag >= frags {
                    return Err(WireError::InvalidValue {
                        field: "data.frag",
                        value: frag as u64,
                    });
                }
                let payload = r.bytes(r.remaining())?;
                if payload.len() > sample_len as usize {
                    return Err(WireError::TooLong {
                        field: "data.payload",
                        len: payload.len(),
                        limit: sample_len as usize,
                    });
                }
                Datagram::Data(Data {
                    seq,
                    stamp_ns,
                    sample_len,
                    frag,
                    frags,
                    payload,
                })
            }
            KIND_HEARTBEAT => Datagram::Heartbeat(Heartbeat {
                first: r.u64()?,
                last: r.u64()?,
                count: r.u32()?,
                sent_us: r.u32()?,
            }),
            KIND_ACKNACK => {
                let base = r.u64()?;
                let count = r.u32()?;
                let echo_us = r.u32()?;
                let hold_us = r.u32()?;
                let rate_kbps = r.u32()?;
                let loss_permille = r.u16()?;
                if loss_permille > 1000 {
                    return Err(WireError::InvalidValue {
                        field: "acknack.loss_permille",
                        value: loss_permille as u64,
                    });
                }
                let n = r.u16()? as usize;
                // Each entry takes at least 5 bytes: bound the allocation by the input.
                let mut missing = Vec::with_capacity(n.min(r.remaining() / 5));
                for _ in 0..n {
                    let offset = r.u32()? as u64;
                    let seq = base.checked_add(offset).ok_or(WireError::InvalidValue {
                        field: "acknack.offset",
                        value: offset,
                    })?;
                    let bytes = r.u8()? as usize;
                    if bytes == 0 {
                        missing.push(Missing::Sample(seq));
                    } else {
                        let frag_base = r.u16()?;
                        missing.push(Missing::Fragments {
                            seq,
                            frag_base,
                            bitmap: r.bytes(bytes)?.to_vec(),
                        });
                    }
                }
                let arrival = read_blocks(&mut r)?;
                Datagram::AckNack(AckNack {
                    base,
                    count,
                    echo_us,
                    hold_us,
                    rate_kbps,
                    loss_permille,
                    missing,
                    arrival,
                })
            }
            KIND_HELLO => {
                let from = EndpointId::read(&mut r)?;
                let to = EndpointId::read(&mut r)?;
                let reliable = match r.u8()? {
                    0 => false,
                    1 => true,
                    v => {
                        return Err(WireError::InvalidValue {
                            field: "hello.flags",
                            value: v as u64,
                        })
                    }
                };
                Datagram::Hello(Hello { from, to, reliable })
            }
            KIND_FEC => {
                let seq = r.u64()?;
                let stamp_ns = r.u64()?;
                let sample_len = r.u32()?;
                let index = r.u16()?;
                let frags = r.u16()?;
                let recovery = r.u16()?;
                if frags == 0 || recovery == 0 || recovery > frags || index >= recovery {
                    return Err(WireError::InvalidValue {
                        field: "fec.index",
                        value: index as u64,
                    });
                }
                let payload = r.bytes(r.remaining())?;
                // The shard is one fragment, padded to even length.
                let piece = (sample_len as usize).div_ceil(frags as usize);
                if payload.is_empty() || payload.len() != piece + (piece & 1) {
                    return Err(WireError::InvalidValue {
                        field: "fec.payload",
                        value: payload.len() as u64,
                    });
                }
                Datagram::Fec(Fec {
                    seq,
                    stamp_ns,
                    sample_len,
                    index,
                    frags,
                    recovery,
                    payload,
                })
            }
            v => {
                return Err(WireError::InvalidValue {
                    field: "rudp.kind",
                    value: v as u64,
                })
            }
        };
        Ok(Packet { stream, body })
    }
}

/// Encodes a DATA fragment into `out` (cleared first; its capacity is reused).
pub fn encode_data(out: &mut Vec<u8>, stream: u32, d: &Data<'_>) {
    let mut w = Writer::reuse(std::mem::take(out));
    header(&mut w, KIND_DATA, stream);
    w.u64(d.seq);
    w.u64(d.stamp_ns);
    w.u32(d.sample_len);
    w.u16(d.frag);
    w.u16(d.frags);
    w.bytes(d.payload);
    *out = w.into_vec();
}

/// Encodes a FEC shard into `out` (cleared first; its capacity is reused).
pub fn encode_fec(out: &mut Vec<u8>, stream: u32, f: &Fec<'_>) {
    let mut w = Writer::reuse(std::mem::take(out));
    header(&mut w, KIND_FEC, stream);
    w.u64(f.seq);
    w.u64(f.stamp_ns);
    w.u32(f.sample_len);
    w.u16(f.index);
    w.u16(f.frags);
    w.u16(f.recovery);
    w.bytes(f.payload);
    *out = w.into_vec();
}

/// Encodes a heartbeat.
pub fn encode_heartbeat(stream: u32, h: &Heartbeat) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEARTBEAT_LEN);
    encode_heartbeat_into(&mut out, stream, h);
    out
}

/// Encodes a heartbeat into `out` (cleared first; its capacity is reused).
pub fn encode_heartbeat_into(out: &mut Vec<u8>, stream: u32, h: &Heartbeat) {
    let mut w = Writer::reuse(std::mem::take(out));
    header(&mut w, KIND_HEARTBEAT, stream);
    w.u64(h.first);
    w.u64(h.last);
    w.u32(h.count);
    w.u32(h.sent_us);
    *out = w.into_vec();
}

/// Encodes an ACKNACK, listing as many missing entries as fit in `mtu`.
/// Returns the bytes and how many entries were included.
pub fn encode_acknack(stream: u32, a: &AckNack, mtu: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let n = encode_acknack_into(&mut out, stream, a, mtu);
    (out, n)
}

/// Encodes an ACKNACK into `out` (cleared first; its capacity is reused);
/// returns how many missing entries fit in `mtu` (the ARRIVAL block is
/// reserved first).
pub fn encode_acknack_into(out: &mut Vec<u8>, stream: u32, a: &AckNack, mtu: usize) -> usize {
    let mtu = mtu.saturating_sub(if a.arrival.is_some() {
        3 + ARRIVAL_LEN
    } else {
        0
    });
    let mut w = Writer::reuse(std::mem::take(out));
    header(&mut w, KIND_ACKNACK, stream);
    w.u64(a.base);
    w.u32(a.count);
    w.u32(a.echo_us);
    w.u32(a.hold_us);
    w.u32(a.rate_kbps);
    w.u16(a.loss_permille);
    w.u16(0); // entry count, filled in below
    let mut n = 0usize;
    for m in &a.missing {
        let offset = m.seq().saturating_sub(a.base).min(u32::MAX as u64) as u32;
        let size = match m {
            Missing::Sample(_) => 5,
            Missing::Fragments { bitmap, .. } => 7 + bitmap.len().min(MAX_BITMAP),
        };
        if w.len() + size > mtu || n == u16::MAX as usize {
            break;
        }
        w.u32(offset);
        match m {
            Missing::Sample(_) => w.u8(0),
            Missing::Fragments {
                frag_base, bitmap, ..
            } => {
                let b = &bitmap[..bitmap.len().min(MAX_BITMAP)];
                w.u8(b.len() as u8);
                w.u16(*frag_base);
                w.bytes(b);
            }
        }
        n += 1;
    }
    if let Some(m) = &a.arrival {
        w.u8(TAG_ARRIVAL);
        w.u16(ARRIVAL_LEN as u16);
        w.u64(m.seq);
        w.u16(m.frag);
        w.u32(m.at_us);
        w.u32(m.bytes);
        w.u32(m.datagrams);
    }
    *out = w.into_vec();
    out[ACKNACK_HEADER - 2..ACKNACK_HEADER].copy_from_slice(&(n as u16).to_le_bytes());
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn data_round_trips() {
        let d = Data {
            seq: 7,
            stamp_ns: 9,
            sample_len: 5000,
            frag: 2,
            frags: 4,
            payload: &[1, 2, 3],
        };
        let mut out = Vec::new();
        encode_data(&mut out, 42, &d);
        assert_eq!(out.len(), DATA_HEADER + 3);
        assert_eq!(
            Packet::parse(&out).unwrap(),
            Packet {
                stream: 42,
                body: Datagram::Data(d)
            }
        );
    }

    #[test]
    fn fec_round_trips_and_inconsistent_shards_are_refused() {
        // 5000 B in 4 fragments: 1250 B each, shards of 1250 B.
        let shard = vec![7u8; 1250];
        let f = Fec {
            seq: 7,
            stamp_ns: 9,
            sample_len: 5000,
            index: 1,
            frags: 4,
            recovery: 2,
            payload: &shard,
        };
        let mut out = Vec::new();
        encode_fec(&mut out, 42, &f);
        assert_eq!(out.len(), FEC_HEADER + 1250);
        assert_eq!(Packet::parse(&out).unwrap().body, Datagram::Fec(f));
        // Odd fragment length (1667 B for 5000 B in 3): the shard is 1668 B.
        let odd = vec![0u8; 1668];
        let g = Fec {
            frags: 3,
            recovery: 3,
            index: 2,
            payload: &odd,
            ..f
        };
        encode_fec(&mut out, 42, &g);
        assert!(Packet::parse(&out).is_ok());
        for bad in [
            Fec { index: 2, ..f }, // index ≥ recovery
            Fec {
                recovery: 5,
                index: 0,
                ..f
            }, // more shards than fragments
            Fec {
                recovery: 0,
                index: 0,
                ..f
            },
            Fec {
                payload: &shard[..1000],
                ..f
            }, // not one fragment long
            Fec { frags: 0, ..f },
        ] {
            encode_fec(&mut out, 42, &bad);
            assert!(Packet::parse(&out).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn heartbeat_and_acknack_round_trip() {
        let h = Heartbeat {
            first: 3,
            last: 10,
            count: 5,
            sent_us: 77,
        };
        let b = encode_heartbeat(1, &h);
        assert_eq!(b.len(), HEARTBEAT_LEN);
        assert_eq!(Packet::parse(&b).unwrap().body, Datagram::Heartbeat(h));
        let a = AckNack {
            base: 100,
            count: 2,
            echo_us: 77,
            hold_us: 12,
            rate_kbps: 30_000,
            loss_permille: 125,
            missing: vec![
                Missing::Sample(101),
                Missing::Fragments {
                    seq: 105,
                    frag_base: 16,
                    bitmap: vec![0b101, 0xff],
                },
            ],
            arrival: None,
        };
        let (b, n) = encode_acknack(1, &a, 1472);
        assert_eq!(n, 2);
        assert_eq!(
            Packet::parse(&b).unwrap().body,
            Datagram::AckNack(a.clone())
        );
        let with = AckNack {
            arrival: Some(Arrival {
                seq: 104,
                frag: 30,
                at_us: u32::MAX - 3,
                bytes: 7,
                datagrams: 9,
            }),
            ..a
        };
        let (b2, n) = encode_acknack(1, &with, 1472);
        assert_eq!(n, 2);
        assert_eq!(b2.len(), b.len() + 3 + ARRIVAL_LEN);
        assert_eq!(Packet::parse(&b2).unwrap().body, Datagram::AckNack(with));
    }

    /// The parser of before the ARRIVAL block: the fixed part and the
    /// entries, nothing after (frozen here: old readers of new ACKNACKs).
    fn old_parse_missing(b: &[u8]) -> Option<usize> {
        let mut r = Reader::new(b);
        r.header(MAGIC, VERSION).ok()?;
        (r.u8().ok()? == KIND_ACKNACK).then_some(())?;
        r.bytes(4 + 8 + 4 * 4 + 2).ok()?;
        let n = r.u16().ok()? as usize;
        for _ in 0..n {
            r.u32().ok()?;
            let bytes = r.u8().ok()? as usize;
            if bytes > 0 {
                r.u16().ok()?;
                r.bytes(bytes).ok()?;
            }
        }
        Some(n)
    }

    #[test]
    fn the_arrival_block_is_compatible_and_checked() {
        let a = AckNack {
            base: 1,
            count: 1,
            echo_us: 0,
            hold_us: 0,
            rate_kbps: 0,
            loss_permille: 0,
            missing: (0..1000).map(|i| Missing::Sample(1 + i)).collect(),
            arrival: Some(Arrival::default()),
        };
        let (b, n) = encode_acknack(1, &a, 1472);
        assert!(b.len() <= 1472);
        assert_eq!(
            old_parse_missing(&b),
            Some(n),
            "an old reader reads the entries"
        );
        let Datagram::AckNack(back) = Packet::parse(&b).unwrap().body else {
            panic!()
        };
        assert_eq!((back.missing.len(), back.arrival), (n, a.arrival));
        // An unknown block is skipped; a truncated or mis-sized one is an error.
        let plain = encode_acknack(
            1,
            &AckNack {
                arrival: None,
                ..a.clone()
            },
            1472,
        )
        .0;
        let mut unknown = plain.clone();
        unknown.extend_from_slice(&[0x77, 2, 0, 9, 9]);
        assert!(Packet::parse(&unknown).is_ok());
        let mut cut = b.clone();
        cut.pop();
        assert!(Packet::parse(&cut).is_err());
        let mut short = plain;
        short.extend_from_slice(&[TAG_ARRIVAL, 1, 0, 3]);
        assert!(Packet::parse(&short).is_err());
    }

    #[test]
    fn hello_round_trips() {
        use crate::types::ParticipantId;
        let h = Hello {
            from: EndpointId {
                participant: ParticipantId(1),
                entity: 2,
            },
            to: EndpointId {
                participant: ParticipantId(3),
                entity: 4,
            },
            reliable: true,
        };
        let b = encode_hello(9, &h);
        assert_eq!(b.len(), HELLO_LEN);
        assert_eq!(
            Packet::parse(&b).unwrap(),
            Packet {
                stream: 9,
                body: Datagram::Hello(h)
            }
        );
        let mut bad = b.clone();
        bad[32] = 7;
        assert!(Packet::parse(&bad).is_err());
    }

    #[test]
    fn acknack_is_cut_to_the_mtu() {
        let a = AckNack {
            base: 0,
            count: 1,
            echo_us: 0,
            hold_us: 0,
            rate_kbps: 0,
            loss_permille: 0,
            missing: (0..1000).map(Missing::Sample).collect(),
            arrival: None,
        };
        let (b, n) = encode_acknack(1, &a, 1472);
        assert!(b.len() <= 1472);
        assert_eq!(n, (1472 - ACKNACK_HEADER) / 5);
        let Datagram::AckNack(back) = Packet::parse(&b).unwrap().body else {
            panic!()
        };
        assert_eq!(back.missing.len(), n);
    }

    #[test]
    fn bad_fragment_indices_are_rejected() {
        let mut out = Vec::new();
        encode_data(
            &mut out,
            1,
            &Data {
                seq: 1,
                stamp_ns: 0,
                sample_len: 10,
                frag: 0,
                frags: 1,
                payload: &[0; 4],
            },
        );
        out[28] = 3; // frag 3 of 1
        assert!(Packet::parse(&out).is_err());
        out[28] = 0;
        out[30] = 0; // zero fragments
        assert!(Packet::parse(&out).is_err());
    }

    proptest! {
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Packet::parse(&bytes);
        }
        #[test]
        fn prefixed_garbage_never_panics(kind in 1u8..4, tail in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut b = vec![b'F', b'U', 1, kind, 0, 0, 0, 0];
            b.extend(tail);
            let _ = Packet::parse(&b);
        }
    }
}
