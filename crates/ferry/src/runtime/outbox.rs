//! Discovery datagrams waiting for room in the socket's send buffer. A
//! crowd of newcomers makes a runtime send bursts (answers, greetings,
//! requests); a datagram the kernel cannot take now (`EAGAIN`/`ENOBUFS`) is
//! sent on a later turn instead of lost, up to a bound.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use mio::net::UdpSocket;
use socket2::SockRef;

/// Most datagrams kept waiting; beyond it the oldest are dropped.
const MAX_WAITING: usize = 8192;

#[derive(Default)]
pub(super) struct Outbox {
    /// (multicast interface to send on, destination, datagram).
    waiting: VecDeque<(Option<Ipv4Addr>, SocketAddr, Vec<u8>)>,
    /// Datagrams dropped because too many were waiting.
    pub dropped: u64,
}

fn full(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS)
}

impl Outbox {
    /// Sends (or queues behind those waiting) one datagram.
    pub fn send(
        &mut self,
        sock: &UdpSocket,
        iface: Option<Ipv4Addr>,
        to: SocketAddr,
        bytes: Vec<u8>,
    ) {
        if self.waiting.is_empty() {
            match Self::send_one(sock, iface, to, &bytes) {
                Err(e) if full(&e) => {}
                _ => return,
            }
        }
        if self.waiting.len() >= MAX_WAITING {
            self.waiting.pop_front();
            self.dropped += 1;
        }
        self.waiting.push_back((iface, to, bytes));
    }

    /// Sends what waits, in order, until the kernel is full again; true when
    /// nothing waits any more.
    pub fn flush(&mut self, sock: &UdpSocket) -> bool {
        while let Some((iface, to, bytes)) = self.waiting.front() {
            match Self::send_one(sock, *iface, *to, bytes) {
                Err(e) if full(&e) => return false,
                _ => {
                    self.waiting.pop_front();
                }
            }
        }
        true
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    fn send_one(
        sock: &UdpSocket,
        iface: Option<Ipv4Addr>,
        to: SocketAddr,
        bytes: &[u8],
    ) -> io::Result<usize> {
        if let Some(ip) = iface {
            SockRef::from(sock).set_multicast_if_v4(&ip)?;
        }
        sock.send_to(bytes, to)
    }
}
