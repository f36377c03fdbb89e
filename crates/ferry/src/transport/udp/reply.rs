//! Replies over UDP: a service answers a client on a stream of its own,
//! opened back to the address the client's requests came from.
//!
//! At the first reply the service's runtime opens a writer stream (writer =
//! the service, reader = the client: clients register as readers of their
//! replies), HELLOs it like any other and keeps it for the client's later
//! calls; the first reply therefore waits one extra round trip. Each reply
//! is one sample: an `Envelope` (reply or error, the request id) and the
//! encoded response. The stream closes with the request stream it answers.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use ferry_wire::{EndpointId, Qos};
use parking_lot::Mutex;

use super::{UdpLink, UdpShared};
use crate::transport::{send_reply, Link, Replier, ReplyBody};

/// Answers the requests of one client stream.
pub(super) struct UdpReplier {
    shared: Weak<UdpShared>,
    service: EndpointId,
    client: EndpointId,
    /// Where the client's requests come from.
    peer: SocketAddr,
    link: Mutex<Option<Arc<UdpLink>>>,
}

impl UdpReplier {
    pub(super) fn new(
        shared: Weak<UdpShared>,
        service: EndpointId,
        client: EndpointId,
        peer: SocketAddr,
    ) -> UdpReplier {
        UdpReplier {
            shared,
            service,
            client,
            peer,
            link: Mutex::new(None),
        }
    }

    /// The reply stream, opened on first use and again after it closed.
    fn link(&self) -> Option<Arc<UdpLink>> {
        let mut link = self.link.lock();
        if let Some(l) = link.as_ref().filter(|l| !l.is_closed()) {
            return Some(l.clone());
        }
        let shared = self.shared.upgrade()?;
        // Replies are never dropped for newer ones.
        let l = Arc::new(shared.open_link(
            self.peer,
            None,
            self.service,
            self.client,
            &Qos::default().keep_all(),
        ));
        *link = Some(l.clone());
        Some(l)
    }
}

impl Replier for UdpReplier {
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

impl Drop for UdpReplier {
    fn drop(&mut self) {
        if let Some(l) = self.link.lock().take() {
            l.close();
        }
    }
}
