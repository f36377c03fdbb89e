//! Replies over shared memory: a service answers a client on a connection
//! of its own, from the service's pool to the client's runtime.
//!
//! A client's `Attach` names its runtime's control socket (`reply_to`).
//! At the first reply the service's runtime connects there like any writer
//! (writer = the service, reader = the client: clients register as readers
//! of their replies) and keeps the connection for the client's later
//! calls. Each reply is one sample: an `Envelope` (reply or error, the
//! request id) and the encoded response. The connection closes with the
//! request connection it answers.

use std::sync::{Arc, Weak};

use ferry_wire::{EndpointId, EndpointKind, Locator, Qos, TransportKind};
use parking_lot::Mutex;

use super::ShmTransport;
use crate::transport::{send_reply, ConnectRequest, Link, PeerInfo, Replier, ReplyBody, Transport};

/// Answers the requests of one client connection.
pub(super) struct ShmReplier {
    transport: Weak<ShmTransport>,
    service: EndpointId,
    client: EndpointId,
    /// The client runtime's control socket.
    socket: String,
    link: Mutex<Option<Arc<dyn Link>>>,
}

impl ShmReplier {
    pub(super) fn new(
        transport: Weak<ShmTransport>,
        service: EndpointId,
        client: EndpointId,
        socket: String,
    ) -> ShmReplier {
        ShmReplier {
            transport,
            service,
            client,
            socket,
            link: Mutex::new(None),
        }
    }

    /// The reply connection, opened on first use and again after it broke.
    fn link(&self) -> Option<Arc<dyn Link>> {
        let mut link = self.link.lock();
        if let Some(l) = link.as_ref().filter(|l| !l.is_closed()) {
            return Some(l.clone());
        }
        let transport = self.transport.upgrade()?;
        let req = ConnectRequest {
            writer: self.service,
            writer_kind: EndpointKind::Service,
            reader: self.client,
            topic: String::new(),
            // Replies are never dropped for newer ones; a client that stops
            // reading blocks its service's replies for `keep_all_block`.
            qos: Qos::default().keep_all(),
            remote: PeerInfo {
                participant: self.client.participant,
                host_id: crate::host::host_id(),
                net_id: crate::host::net_id(),
                pid: 0,
                locators: vec![Locator::named(TransportKind::SharedMemory, &self.socket)],
                direct: true,
                secured: false,
            },
            reply_sink: None,
        };
        match transport.connect(req) {
            Ok(l) => {
                *link = Some(l.clone());
                Some(l)
            }
            Err(e) => {
                tracing::warn!(
                    "{}: cannot open the reply connection to client {}: {e}",
                    self.service,
                    self.client
                );
                None
            }
        }
    }
}

impl Replier for ShmReplier {
    fn reply(&self, request_id: u64, result: Result<ReplyBody, String>) {
        let link = self.link();
        send_reply(
            link.as_deref().map(|l| l as &dyn Link),
            self.service,
            request_id,
            result,
        );
    }
}

impl Drop for ShmReplier {
    fn drop(&mut self) {
        if let Some(l) = self.link.lock().take() {
            l.close();
        }
    }
}
