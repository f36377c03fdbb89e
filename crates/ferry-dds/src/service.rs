//! ROS 2 services over DDS as rmw_cyclonedds carries them, so that a ROS 2
//! client on rmw_cyclonedds calls a ferry service.
//!
//! A service is a reader of `rq/<name>Request` and a writer of
//! `rr/<name>Reply`, both with `serviceid=<id>;` in their user data (how a
//! client sees the service is there). Every request and reply sample is
//! the encapsulation header, then a 16-byte request header — the client's
//! id (u64: its request writer's local instance handle) and the call's
//! sequence number (i64), in the sample's byte order — then the message.
//! A reply echoes both; every client of the service receives every reply
//! and keeps those with its own id. (rmw_fastrtps correlates requests
//! with RTPS inline QoS instead, which Cyclone's API cannot set: Fast DDS
//! clients do not reach Cyclone services, in ROS 2 itself either —
//! ros2/rmw_cyclonedds#184.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ferry_transport::priority::{Applied, Packets, Priority, PriorityError};
use ferry_transport::stats::ConnStats;
use ferry_transport::transport::{Link, OutFrame, Replier, ReplyBody, SendError};
use ferry_wire::frame::FrameKind;
use ferry_wire::{EndpointId, TransportKind};
use parking_lot::Mutex;

use crate::Writer;

/// Bytes before the message: encapsulation (4) + request header (16).
pub(crate) const PREFIX: usize = 20;

/// Requests awaiting their reply, per service (more are dropped until
/// replies make room).
const MAX_PENDING: usize = 4096;

/// The request header of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestHeader {
    pub client: u64,
    pub seq: i64,
}

/// Splits a request sample into its header and the request as ferry's CDR
/// (the encapsulation header, then the message); None when it is too short
/// or not plain CDR.
pub(crate) fn split_request(sample: &[u8]) -> Option<(RequestHeader, Vec<u8>)> {
    let enc = sample.get(..4)?;
    let little = match enc[..2] {
        [0, 1] => true,
        [0, 0] => false,
        _ => return None,
    };
    let word = |at: usize| -> Option<[u8; 8]> { sample.get(at..at + 8)?.try_into().ok() };
    let (client, seq) = (word(4)?, word(12)?);
    let header = if little {
        RequestHeader {
            client: u64::from_le_bytes(client),
            seq: i64::from_le_bytes(seq),
        }
    } else {
        RequestHeader {
            client: u64::from_be_bytes(client),
            seq: i64::from_be_bytes(seq),
        }
    };
    let mut cdr = Vec::with_capacity(sample.len() - PREFIX + 4);
    cdr.extend_from_slice(enc);
    cdr.extend_from_slice(&sample[PREFIX..]);
    Some((header, cdr))
}

/// The request or reply sample for call `h` carrying `message` (ferry's
/// CDR, with its encapsulation header); None when it is not plain CDR.
pub(crate) fn with_header(h: RequestHeader, message: &[u8]) -> Option<Vec<u8>> {
    let response = message;
    let enc = response.get(..4)?;
    let (client, seq) = match enc[..2] {
        [0, 1] => (h.client.to_le_bytes(), h.seq.to_le_bytes()),
        [0, 0] => (h.client.to_be_bytes(), h.seq.to_be_bytes()),
        _ => return None,
    };
    let mut out = Vec::with_capacity(response.len() + 16);
    out.extend_from_slice(enc);
    out.extend_from_slice(&client);
    out.extend_from_slice(&seq);
    out.extend_from_slice(&response[4..]);
    Some(out)
}

/// rmw_cyclonedds's text of a client or service id (16 bytes: the
/// participant's GUID prefix and a counter): hex bytes joined by `.`, the
/// first padded to two characters with a space.
pub(crate) fn id_text(id: &[u8; 16]) -> String {
    let mut s = format!("{:>2x}", id[0]);
    for b in &id[1..] {
        s.push_str(&format!(".{b:x}"));
    }
    s
}

#[derive(Default)]
struct Pending {
    by_id: HashMap<u64, RequestHeader>,
}

/// Answers requests that came over DDS: the reply goes to the service's
/// reply writer with the request's header.
pub(crate) struct DdsReplier {
    writer: Writer,
    pending: Mutex<Pending>,
    next: AtomicU64,
    name: String,
}

impl DdsReplier {
    pub fn new(writer: Writer, name: &str) -> Self {
        DdsReplier {
            writer,
            pending: Mutex::new(Pending::default()),
            next: AtomicU64::new(1),
            name: name.to_string(),
        }
    }

    /// The request id the service gets for a call with header `h`; None
    /// while [`MAX_PENDING`] calls await their reply (the request is
    /// dropped: the service's queue stays bounded whatever a peer sends).
    pub fn register(&self, h: RequestHeader) -> Option<u64> {
        let mut p = self.pending.lock();
        if p.by_id.len() >= MAX_PENDING {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        p.by_id.insert(id, h);
        Some(id)
    }

    /// The service's reply writer.
    pub fn writer(&self) -> &Writer {
        &self.writer
    }
}

impl Replier for DdsReplier {
    fn reply(&self, request_id: u64, result: Result<ReplyBody, String>) {
        let Some(h) = self.pending.lock().by_id.remove(&request_id) else {
            tracing::debug!("`{}`: a reply for a forgotten DDS request", self.name);
            return;
        };
        let body = match result.map(|b| (b.encode)()) {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                tracing::warn!("`{}`: the reply could not be encoded: {e}", self.name);
                return;
            }
            // ROS 2 has no error replies: the client's call times out.
            Err(e) => {
                tracing::debug!("`{}`: no reply over DDS for a failed call: {e}", self.name);
                return;
            }
        };
        let Some(sample) = with_header(h, &body) else {
            return;
        };
        if let Err(e) = self.writer.write(&sample) {
            tracing::warn!("`{}`: a reply did not go out over DDS: {e}", self.name);
        }
    }
}

/// A ferry client's calls to ROS 2 services over DDS: its request writer
/// and reply reader (made by `DdsPath::client_link`).
pub struct DdsClientLink {
    /// This client's id in the request header.
    pub(crate) client: u64,
    // Field order: the reader (its handler holds the sink) goes first.
    pub(crate) reader: Mutex<Option<crate::Reader>>,
    pub(crate) writer: Mutex<Option<Writer>>,
    pub(crate) locator: String,
    pub(crate) stats: ConnStats,
    pub(crate) priority: Mutex<Priority>,
    pub(crate) closed: AtomicBool,
    pub(crate) on_close: Box<dyn Fn() + Send + Sync>,
}

impl DdsClientLink {
    /// This client's id, as its requests carry it.
    pub fn client_id(&self) -> u64 {
        self.client
    }
}

impl Link for DdsClientLink {
    fn transport(&self) -> TransportKind {
        TransportKind::Dds
    }
    fn remote(&self) -> EndpointId {
        crate::path::DDS_ENDPOINT
    }
    fn locator(&self) -> String {
        self.locator.clone()
    }
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        if frame.kind != FrameKind::Request {
            return Ok(());
        }
        let writer = self.writer.lock();
        let Some(writer) = writer.as_ref() else {
            return Err(SendError::Closed);
        };
        let body = (frame.payload.bytes)()?;
        let header = RequestHeader {
            client: self.client,
            seq: i64::try_from(frame.seq).unwrap_or(i64::MAX),
        };
        let Some(sample) = with_header(header, &body) else {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            return Err(SendError::Closed);
        };
        writer.write(&sample).map_err(|e| {
            tracing::warn!("{}: a request did not go out: {e}", self.locator);
            SendError::Closed
        })?;
        self.stats.message(sample.len());
        Ok(())
    }
    /// DDS is not a service: the ROS 2 services it reaches are not ferry's.
    fn reaches_reader(&self) -> bool {
        false
    }
    /// The ROS 2 services whose request readers are matched now.
    fn readers(&self) -> usize {
        self.writer.lock().as_ref().map_or(0, Writer::readers)
    }
    fn stats(&self) -> &ConnStats {
        &self.stats
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
    fn close(&self) {
        if !self.closed.swap(true, Ordering::Relaxed) {
            (self.on_close)();
            let reader = self.reader.lock().take();
            drop(reader);
            let writer = self.writer.lock().take();
            drop(writer);
        }
    }
    fn priority(&self) -> Priority {
        *self.priority.lock()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        *self.priority.lock() = p;
        Ok(Applied::packets(Packets::Shared))
    }
}

impl Drop for DdsClientLink {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_as_rmw_cyclonedds_lays_them_out() {
        // AddTwoInts request a=2, b=40 from client 0x1122…, call 7 (LE).
        let mut s = vec![0, 1, 0, 0];
        s.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        s.extend_from_slice(&7i64.to_le_bytes());
        s.extend_from_slice(&2i64.to_le_bytes());
        s.extend_from_slice(&40i64.to_le_bytes());
        let (h, cdr) = split_request(&s).unwrap();
        assert_eq!(
            h,
            RequestHeader {
                client: 0x1122_3344_5566_7788,
                seq: 7
            }
        );
        assert_eq!(&cdr[..4], &[0, 1, 0, 0]);
        assert_eq!(&cdr[4..], &s[20..]);
        let mut resp = vec![0, 1, 0, 0];
        resp.extend_from_slice(&42i64.to_le_bytes());
        let r = with_header(h, &resp).unwrap();
        assert_eq!(&r[..20], &s[..20], "the header is echoed");
        assert_eq!(&r[20..], &42i64.to_le_bytes());
        // Big endian: the header in the sample's order.
        let mut be = vec![0, 0, 0, 0];
        be.extend_from_slice(&5u64.to_be_bytes());
        be.extend_from_slice(&(-1i64).to_be_bytes());
        let (h, _) = split_request(&be).unwrap();
        assert_eq!((h.client, h.seq), (5, -1));
        // Too short, or not plain CDR.
        assert!(split_request(&s[..19]).is_none());
        assert!(split_request(&[0, 2, 0, 0, 0]).is_none());
        assert!(with_header(h, &[1, 1]).is_none());
    }

    #[test]
    fn ids_print_as_rmw_cyclonedds_prints_them() {
        let mut id = [0u8; 16];
        id[0] = 1;
        id[1] = 0x10;
        id[15] = 3;
        assert_eq!(id_text(&id), " 1.10.0.0.0.0.0.0.0.0.0.0.0.0.0.3");
        id[0] = 0xab;
        assert!(id_text(&id).starts_with("ab.10."));
    }
}
