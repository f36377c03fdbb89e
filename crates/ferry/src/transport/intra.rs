//! The in-process path: the writer calls the reader's inbox directly with a
//! shared `Arc` of the message: no serialization, no copy, no thread hop.
//!
//! Readers of every runtime of the process register here, so the path also
//! works between two runtimes (two domains' configs) of one process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use std::time::{Duration, Instant};

use ferry_wire::{EndpointId, History, Locator, Reliability, TransportKind};

use super::{
    Capabilities, ConnectError, ConnectRequest, InFrame, InboundConn, Inbox, Link, OutFrame,
    PeerInfo, SendError, Transport,
};
use crate::priority::{Applied, Packets, Priority, PriorityError};
use crate::stats::ConnStats;

pub use super::{lookup_reader, register_reader, unregister_reader};

/// The in-process transport.
#[derive(Debug, Default)]
pub struct IntraTransport {
    /// How long a reliable keep_all writer waits for room in a reader's
    /// queue (`keep_all_block_ms`).
    keep_all_block: Duration,
}

/// Starts it (always there).
pub(crate) fn start(
    ctx: &super::StartContext<'_>,
) -> Result<Option<Arc<dyn Transport>>, crate::error::BuildError> {
    Ok(Some(Arc::new(IntraTransport {
        keep_all_block: Duration::from_millis(ctx.cfg.keep_all_block_ms),
    })))
}

impl Transport for IntraTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::InProcess
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            reliable: true,
            ordered: true,
            zero_copy: true,
            mtu: None,
            request_reply: true,
        }
    }
    fn locators(&self) -> Vec<Locator> {
        Vec::new()
    }
    fn reaches(&self, local: &PeerInfo, remote: &PeerInfo) -> bool {
        local.same_process(remote)
    }
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
    fn connect(&self, req: ConnectRequest) -> Result<Arc<dyn Link>, ConnectError> {
        let reader = lookup_reader(req.reader).ok_or(ConnectError::NoReader(req.reader))?;
        let stats = Arc::new(ConnStats::new());
        let replier = req
            .reply_sink
            .map(|sink| Arc::new(IntraReplier { sink }) as Arc<dyn super::Replier>);
        let conn = Arc::new(InboundConn {
            remote: req.writer,
            origin: super::Origin::SameProcess,
            transport: TransportKind::InProcess,
            locator: String::new(),
            stats: stats.clone(),
            replier,
            same_clock: true,
            seqs: Default::default(),
            // One process is one trust boundary.
            identity: None,
        });
        reader.attach(conn.clone());
        let block = (req.qos.reliability == Reliability::Reliable
            && req.qos.history == History::KeepAll)
            .then_some(self.keep_all_block);
        Ok(Arc::new(IntraLink {
            block,
            reader: Arc::downgrade(&reader),
            reader_id: req.reader,
            conn,
            closed: AtomicBool::new(false),
            priority: Default::default(),
        }))
    }
}

struct IntraReplier {
    sink: Arc<dyn super::ReplySink>,
}

impl super::Replier for IntraReplier {
    fn reply(&self, request_id: u64, result: Result<super::ReplyBody, String>) {
        match result {
            Ok(body) => {
                let enc = &body.encode;
                let bytes = || enc();
                self.sink.on_reply(
                    request_id,
                    Ok(crate::message::Payload {
                        typed: Some(&body.typed),
                        bytes: &bytes,
                    }),
                )
            }
            Err(e) => self.sink.on_reply(request_id, Err(e)),
        }
    }
}

/// Writer end of an in-process connection; the stats are shared by both ends.
struct IntraLink {
    /// A reliable keep_all writer waits this long for room in the reader's
    /// queue; others deliver (the queue drops past twice its depth).
    block: Option<Duration>,
    reader: Weak<dyn Inbox>,
    reader_id: EndpointId,
    conn: Arc<InboundConn>,
    closed: AtomicBool,
    priority: parking_lot::Mutex<Priority>,
}

impl Link for IntraLink {
    fn transport(&self) -> TransportKind {
        TransportKind::InProcess
    }
    fn remote(&self) -> EndpointId {
        self.reader_id
    }
    fn locator(&self) -> String {
        String::new()
    }
    #[inline]
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        let Some(reader) = self.reader.upgrade() else {
            self.closed.store(true, Ordering::Relaxed);
            return Err(SendError::Closed);
        };
        if let (Some(room), Some(limit)) = (reader.room(), self.block) {
            if !room.has_room() {
                // Not on the I/O thread (a callback publishing): it would
                // hold up every connection of the runtime.
                let wait = if crate::reactor::on_io_thread() {
                    Duration::ZERO
                } else {
                    limit
                };
                if !room.wait_room(Instant::now() + wait) {
                    return Err(SendError::Blocked(wait));
                }
            }
        }
        reader.deliver(
            &self.conn,
            &InFrame {
                kind: frame.kind,
                seq: frame.seq,
                stamp_ns: frame.stamp_ns,
                arrival_ns: 0,
                payload: crate::message::Payload {
                    typed: frame.payload.typed,
                    bytes: frame.payload.bytes,
                },
            },
        );
        Ok(())
    }
    fn stats(&self) -> &ConnStats {
        &self.conn.stats
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
    fn close(&self) {
        if !self.closed.swap(true, Ordering::Relaxed) {
            if let Some(r) = self.reader.upgrade() {
                r.detach(&self.conn);
            }
        }
    }
    fn priority(&self) -> Priority {
        *self.priority.lock()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        *self.priority.lock() = p;
        Ok(Applied::packets(Packets::None {
            shared_memory: false,
        }))
    }
}
