//! One connection to the broker: a TCP (or TLS) socket that any thread
//! writes whole MQTT packets to without waiting, and the `ferry-mqtt` thread
//! reads. MQTT 5 packets are encoded and parsed by rumqttc's codec
//! (`mqttbytes`); the connection, its threads and its queues are ferry's.
//!
//! Why not rumqttc's client: it moves every packet through a channel to its
//! event-loop thread, so a publish always wakes another thread before
//! anything reaches the socket, and each packet passes through a tokio
//! future the size of the whole event loop. Here the publishing thread
//! writes the packet itself (`write`); what the socket does not take at once
//! waits in the connection's backlog for the `ferry-mqtt` thread, which
//! writes it when the socket is writable.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::net::{TcpStream as StdStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use rumqttc::v5::mqttbytes::v5::{ConnAck, Packet};

/// The most bytes one `read` call asks for.
const READ_CHUNK: usize = 256 * 1024;
/// The read buffer's size while packets are small.
const INITIAL_BUF: usize = 64 * 1024;

thread_local! {
    /// Whose `ferry-mqtt` thread this is (0: none).
    static SERVING: Cell<usize> = const { Cell::new(0) };
}

/// Marks the calling thread as `owner`'s `ferry-mqtt` thread; returns the
/// token its connections carry.
pub(crate) fn serve_here<T>(owner: &T) -> usize {
    let token = owner as *const T as usize;
    SERVING.with(|c| c.set(token));
    token
}

/// TLS settings of an `mqtts://` broker.
#[cfg(feature = "tls")]
pub(crate) type Tls = (
    Arc<rustls::ClientConfig>,
    rustls::pki_types::ServerName<'static>,
);
/// TLS settings (ferry was built without `mqtt-tls`: never set).
#[cfg(not(feature = "tls"))]
pub(crate) type Tls = std::convert::Infallible;

/// Where and how to connect.
pub(crate) struct Dial {
    pub host: String,
    pub port: u16,
    pub tls: Option<Tls>,
    /// Connect, TLS handshake and CONNACK together, at most.
    pub timeout: Duration,
    /// Largest packet accepted from the broker.
    pub max_incoming: usize,
}

/// The socket's encryption, if any.
enum Crypto {
    Plain,
    #[cfg(feature = "tls")]
    Tls(Box<rustls::ClientConnection>),
}

/// The write side, shared by every thread that writes.
struct Tx {
    crypto: Crypto,
    /// Bytes the socket has not taken yet (plain TCP; rustls keeps its own).
    backlog: Vec<u8>,
    /// TLS: plaintext bytes handed to rustls since its records last all
    /// went out (what `backlog` measures there).
    #[cfg(feature = "tls")]
    tls_pending: usize,
    /// Set by the `ferry-mqtt` thread while it handles a batch of packets:
    /// its own writes (acks, a callback's publish) wait for `uncork`, which
    /// sends them in one system call.
    corked: bool,
}

/// One live connection to the broker.
pub(crate) struct Wire {
    sock: mio::net::TcpStream,
    #[cfg(feature = "tls")]
    tls: bool,
    tx: Mutex<Tx>,
    /// Its `ferry-mqtt` thread's token (the only reader, and the one that
    /// corks).
    owner: usize,
}

impl Wire {
    /// Connects, sends `connect` (an encoded CONNECT) and waits for the
    /// CONNACK, all within `d.timeout`; then the socket turns non-blocking.
    /// Returns the connection, the CONNACK and the reader holding whatever
    /// arrived after it. Errors say what failed, for the broker state.
    pub fn dial(
        d: &Dial,
        connect: &[u8],
        owner: usize,
    ) -> Result<(Wire, ConnAck, PacketReader), String> {
        let deadline = Instant::now() + d.timeout;
        let left = || {
            deadline
                .checked_duration_since(Instant::now())
                .filter(|t| !t.is_zero())
                .ok_or_else(|| "timed out".to_string())
        };
        let addrs: Vec<_> = (d.host.as_str(), d.port)
            .to_socket_addrs()
            .map_err(|e| format!("resolving {}: {e}", d.host))?
            .collect();
        let mut last = format!("{} resolves to no address", d.host);
        let mut sock = None;
        for a in addrs {
            match StdStream::connect_timeout(&a, left()?) {
                Ok(s) => {
                    sock = Some(s);
                    break;
                }
                Err(e) => last = format!("connecting to {a}: {e}"),
            }
        }
        let mut sock = sock.ok_or(last)?;
        let io = |what: &str, e: io::Error| format!("{what}: {e}");
        sock.set_nodelay(true).map_err(|e| io("TCP_NODELAY", e))?;
        let mut crypto = match &d.tls {
            None => Crypto::Plain,
            #[cfg(feature = "tls")]
            Some((cfg, name)) => {
                let mut c = rustls::ClientConnection::new(cfg.clone(), name.clone())
                    .map_err(|e| format!("TLS: {e}"))?;
                // rustls' own 64 KiB cap would refuse a larger packet
                // (`write_all` fails with WriteZero): what waits is bounded
                // by the writers' high-water mark on `backlog` instead.
                c.set_buffer_limit(None);
                while c.is_handshaking() {
                    set_timeouts(&sock, left()?)?;
                    c.complete_io(&mut sock)
                        .map_err(|e| format!("TLS handshake: {e}"))?;
                }
                Crypto::Tls(Box::new(c))
            }
            #[cfg(not(feature = "tls"))]
            Some(never) => match *never {},
        };
        set_timeouts(&sock, left()?)?;
        crypto
            .write_blocking(&mut sock, connect)
            .map_err(|e| io("sending CONNECT", e))?;
        let mut reader = PacketReader::new(d.max_incoming);
        let ack = loop {
            set_timeouts(&sock, left()?)?;
            if let Some(p) = reader.next().map_err(|e| io("reading CONNACK", e))? {
                break match p {
                    Packet::ConnAck(a) => a,
                    other => return Err(format!("expected CONNACK, got {}", packet_kind(&other))),
                };
            }
            let n = crypto
                .read_blocking(&mut sock, reader.room().map_err(|e| io("CONNACK", e))?)
                .map_err(|e| match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                        "no CONNACK within the connect timeout".to_string()
                    }
                    _ => io("reading CONNACK", e),
                })?;
            reader.filled(n);
        };
        sock.set_nonblocking(true)
            .map_err(|e| io("non-blocking", e))?;
        let wire = Wire {
            sock: mio::net::TcpStream::from_std(sock),
            #[cfg(feature = "tls")]
            tls: matches!(crypto, Crypto::Tls(_)),
            tx: Mutex::new(Tx {
                crypto,
                backlog: Vec::new(),
                #[cfg(feature = "tls")]
                tls_pending: 0,
                corked: false,
            }),
            owner,
        };
        Ok((wire, ack, reader))
    }

    /// The socket, to register with the `ferry-mqtt` thread's poll.
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Whether the calling thread is this connection's `ferry-mqtt` thread.
    pub fn mine(&self) -> bool {
        SERVING.with(|c| c.get()) == self.owner
    }

    /// Writes `packets` (whole MQTT packets) without blocking. What the
    /// socket does not take now waits in the backlog, for the `ferry-mqtt`
    /// thread to write when the socket is writable; returns its size (see
    /// `backlog`). While the `ferry-mqtt` thread has corked the connection,
    /// its own writes only queue.
    pub fn write(&self, packets: &[u8]) -> io::Result<usize> {
        let mut tx = self.tx.lock();
        let defer = tx.corked && self.mine();
        let Tx {
            crypto,
            backlog,
            #[cfg(feature = "tls")]
            tls_pending,
            ..
        } = &mut *tx;
        match crypto {
            Crypto::Plain => {
                let mut rest = packets;
                if backlog.is_empty() && !defer {
                    rest = write_some(&self.sock, rest)?;
                }
                backlog.extend_from_slice(rest);
                Ok(backlog.len())
            }
            #[cfg(feature = "tls")]
            Crypto::Tls(c) => {
                c.writer().write_all(packets)?;
                if !defer {
                    tls_flush(c, &self.sock)?;
                }
                *tls_pending = match c.wants_write() {
                    true => *tls_pending + packets.len(),
                    false => 0,
                };
                Ok(*tls_pending)
            }
        }
    }

    /// Writes what waits. `Ok(true)`: all of it is out.
    pub fn flush(&self) -> io::Result<bool> {
        let mut tx = self.tx.lock();
        match &mut tx.crypto {
            Crypto::Plain => {
                let left = write_some(&self.sock, &tx.backlog)?.len();
                let done = tx.backlog.len() - left;
                tx.backlog.drain(..done);
                Ok(left == 0)
            }
            #[cfg(feature = "tls")]
            Crypto::Tls(c) => {
                tls_flush(c, &self.sock)?;
                let done = !c.wants_write();
                if done {
                    tx.tls_pending = 0;
                }
                Ok(done)
            }
        }
    }

    /// Bytes waiting for the socket (with TLS: the plaintext behind the
    /// records rustls holds): writers stop adding samples above a
    /// high-water mark.
    pub fn backlog(&self) -> usize {
        let tx = self.tx.lock();
        match &tx.crypto {
            Crypto::Plain => tx.backlog.len(),
            #[cfg(feature = "tls")]
            Crypto::Tls(_) => tx.tls_pending,
        }
    }

    /// The `ferry-mqtt` thread's own writes queue until `uncork`.
    pub fn cork(&self) {
        self.tx.lock().corked = true;
    }

    /// Writes what the cork held (and anything else waiting) in one go.
    /// `Ok(true)`: all of it is out.
    pub fn uncork(&self) -> io::Result<bool> {
        self.tx.lock().corked = false;
        self.flush()
    }

    /// Reads what is available into `r` (the `ferry-mqtt` thread only).
    /// `Ok(false)`: nothing more now. Errors when the broker closed or broke
    /// the connection.
    pub fn read(&self, r: &mut PacketReader) -> io::Result<bool> {
        #[cfg(feature = "tls")]
        if self.tls {
            return self.read_tls(r);
        }
        loop {
            match (&self.sock).read(r.room()?) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    r.filled(n);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    #[cfg(feature = "tls")]
    fn read_tls(&self, r: &mut PacketReader) -> io::Result<bool> {
        let mut tx = self.tx.lock();
        let Crypto::Tls(c) = &mut tx.crypto else {
            unreachable!("read_tls on a plain connection")
        };
        match c.read_tls(&mut &self.sock) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(true),
            Err(e) => return Err(e),
        }
        c.process_new_packets()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}")))?;
        loop {
            match c.reader().read(r.room()?) {
                Ok(0) => break,
                Ok(n) => r.filled(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if c.wants_write() {
            tls_flush(c, &self.sock)?;
        }
        Ok(true)
    }
}

/// Writes as much of `buf` as the socket takes now; returns the rest.
fn write_some<'a>(mut sock: &mio::net::TcpStream, mut buf: &'a [u8]) -> io::Result<&'a [u8]> {
    while !buf.is_empty() {
        match sock.write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(buf)
}

#[cfg(feature = "tls")]
fn tls_flush(c: &mut rustls::ClientConnection, mut sock: &mio::net::TcpStream) -> io::Result<()> {
    while c.wants_write() {
        match c.write_tls(&mut sock) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn set_timeouts(s: &StdStream, t: Duration) -> Result<(), String> {
    s.set_read_timeout(Some(t))
        .and_then(|()| s.set_write_timeout(Some(t)))
        .map_err(|e| format!("socket timeouts: {e}"))
}

impl Crypto {
    /// Writes all of `buf` on a blocking socket (while connecting).
    fn write_blocking(&mut self, sock: &mut StdStream, buf: &[u8]) -> io::Result<()> {
        match self {
            Crypto::Plain => sock.write_all(buf),
            #[cfg(feature = "tls")]
            Crypto::Tls(c) => {
                c.writer().write_all(buf)?;
                while c.wants_write() {
                    c.write_tls(sock)?;
                }
                Ok(())
            }
        }
    }

    /// Reads some bytes on a blocking socket (while connecting); 0 = closed.
    fn read_blocking(&mut self, sock: &mut StdStream, buf: &mut [u8]) -> io::Result<usize> {
        let n = match self {
            Crypto::Plain => sock.read(buf)?,
            #[cfg(feature = "tls")]
            Crypto::Tls(c) => loop {
                match c.reader().read(buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if c.read_tls(sock)? == 0 {
                            break 0;
                        }
                        c.process_new_packets()
                            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    }
                    Err(e) => return Err(e),
                }
            },
        };
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the broker closed the connection",
            ));
        }
        Ok(n)
    }
}

/// A packet's type, for errors (not its contents).
pub(crate) fn packet_kind(p: &Packet) -> &'static str {
    match p {
        Packet::Auth(_) => "AUTH",
        Packet::Connect(..) => "CONNECT",
        Packet::ConnAck(_) => "CONNACK",
        Packet::Publish(_) => "PUBLISH",
        Packet::PubAck(_) => "PUBACK",
        Packet::PingReq(_) => "PINGREQ",
        Packet::PingResp(_) => "PINGRESP",
        Packet::Subscribe(_) => "SUBSCRIBE",
        Packet::SubAck(_) => "SUBACK",
        Packet::PubRec(_) => "PUBREC",
        Packet::PubRel(_) => "PUBREL",
        Packet::PubComp(_) => "PUBCOMP",
        Packet::Unsubscribe(_) => "UNSUBSCRIBE",
        Packet::UnsubAck(_) => "UNSUBACK",
        Packet::Disconnect(_) => "DISCONNECT",
    }
}

/// Cuts MQTT packets out of the byte stream. Memory follows the bytes that
/// arrived, never a length a peer announced; a packet larger than the limit
/// fails the connection as soon as its fixed header is in.
pub(crate) struct PacketReader {
    buf: Vec<u8>,
    head: usize,
    tail: usize,
    max: usize,
}

/// `Some(total length)` of the packet whose fixed header starts `b`, `None`
/// while the header is incomplete; an error for a malformed length.
pub(crate) fn packet_len(b: &[u8]) -> io::Result<Option<usize>> {
    let mut len = 0usize;
    for i in 0..4 {
        let Some(&byte) = b.get(1 + i) else {
            return Ok(None);
        };
        len |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some(1 + i + 1 + len));
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "malformed MQTT remaining length",
    ))
}

impl PacketReader {
    pub fn new(max: usize) -> Self {
        PacketReader {
            buf: vec![0; INITIAL_BUF],
            head: 0,
            tail: 0,
            max,
        }
    }

    /// Free space to read into (compacts or grows by at most READ_CHUNK).
    pub fn room(&mut self) -> io::Result<&mut [u8]> {
        if self.tail == self.buf.len() {
            if self.head > 0 {
                self.buf.copy_within(self.head..self.tail, 0);
                self.tail -= self.head;
                self.head = 0;
            } else {
                let need = self.pending_len()?.unwrap_or(5).saturating_sub(self.tail);
                let grow = need.clamp(INITIAL_BUF, READ_CHUNK);
                self.buf.resize(self.buf.len() + grow, 0);
            }
        }
        Ok(&mut self.buf[self.tail..])
    }

    /// `n` bytes were read into `room()`.
    pub fn filled(&mut self, n: usize) {
        self.tail += n;
    }

    fn pending_len(&self) -> io::Result<Option<usize>> {
        let avail = &self.buf[self.head..self.tail];
        match packet_len(avail)? {
            Some(len) if len > self.max => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the broker sent a {len}-byte packet, above max_packet_bytes {}",
                    self.max
                ),
            )),
            l => Ok(l),
        }
    }

    /// The next complete packet, if one is in.
    pub fn next(&mut self) -> io::Result<Option<Packet>> {
        let Some(len) = self.pending_len()? else {
            return Ok(None);
        };
        if self.tail - self.head < len {
            return Ok(None);
        }
        let mut bytes = if self.head == 0 && self.tail == len && len > INITIAL_BUF {
            // A large packet fills the buffer exactly: hand it over
            // without copying.
            let mut v = std::mem::replace(&mut self.buf, vec![0; INITIAL_BUF]);
            v.truncate(len);
            self.tail = 0;
            BytesMut::from(Bytes::from(v))
        } else {
            let b = BytesMut::from(&self.buf[self.head..self.head + len]);
            self.head += len;
            b
        };
        if self.head == self.tail {
            self.head = 0;
            self.tail = 0;
        }
        Packet::read(&mut bytes, None).map(Some).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("bad MQTT packet: {e}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rumqttc::v5::mqttbytes::v5::{PubAck, Publish};
    use rumqttc::v5::mqttbytes::QoS;

    fn encoded(p: Packet) -> Vec<u8> {
        let mut b = BytesMut::new();
        p.write(&mut b, None).unwrap();
        b.to_vec()
    }

    fn feed(r: &mut PacketReader, mut bytes: &[u8], step: usize) -> Vec<Packet> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let room = r.room().unwrap();
            let n = step.min(room.len()).min(bytes.len());
            room[..n].copy_from_slice(&bytes[..n]);
            r.filled(n);
            bytes = &bytes[n..];
            while let Some(p) = r.next().unwrap() {
                out.push(p);
            }
        }
        out
    }

    #[test]
    fn packets_split_anywhere_are_reassembled() {
        let mut stream = Vec::new();
        let mut want = Vec::new();
        for (i, size) in [0usize, 10, 127, 128, 16_383, 16_384, 70_000, 300_000]
            .into_iter()
            .enumerate()
        {
            let p = Packet::Publish(Publish {
                dup: false,
                qos: QoS::AtLeastOnce,
                retain: false,
                topic: Bytes::from(format!("t/{i}")),
                pkid: i as u16 + 1,
                payload: Bytes::from(vec![i as u8; size]),
                properties: None,
            });
            stream.extend(encoded(p.clone()));
            want.push(p);
            let a = Packet::PubAck(PubAck::new(i as u16 + 1, None));
            stream.extend(encoded(a.clone()));
            want.push(a);
        }
        for step in [1, 7, 1000, 65_536, 1 << 20] {
            let mut r = PacketReader::new(1 << 20);
            assert_eq!(feed(&mut r, &stream, step), want, "step {step}");
        }
    }

    #[test]
    fn an_announced_giant_fails_before_its_bytes_arrive() {
        let mut r = PacketReader::new(1 << 20);
        // PUBLISH with remaining length 200 MB: four length bytes.
        let header = [0x30, 0x80, 0x84, 0xaf, 0x5f];
        let room = r.room().unwrap();
        room[..5].copy_from_slice(&header);
        r.filled(5);
        let e = r.next().unwrap_err();
        assert!(e.to_string().contains("above max_packet_bytes"), "{e}");
        assert_eq!(r.buf.len(), INITIAL_BUF);
        // A fifth length byte is malformed.
        let mut r = PacketReader::new(1 << 20);
        let room = r.room().unwrap();
        room[..6].copy_from_slice(&[0x30, 0xff, 0xff, 0xff, 0xff, 0x01]);
        r.filled(6);
        assert!(r.next().is_err());
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            let mut r = PacketReader::new(4096);
            let len = (seed % 64) as usize;
            let mut bytes = Vec::with_capacity(len);
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                bytes.push(seed as u8);
            }
            let room = r.room().unwrap();
            room[..len].copy_from_slice(&bytes);
            r.filled(len);
            for _ in 0..len + 1 {
                match r.next() {
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
}
