//! TLS 1.3 on a TCP connection (security on): the rustls connection that
//! the writing threads and the I/O thread both drive, behind one lock, and
//! what its handshake proved about the peer.
//!
//! Writers hand plaintext frames to rustls and push out the records the
//! socket takes; rustls keeps at most [`TLS_BUFFER`] of records the socket
//! did not take, and beyond that refuses plaintext, so frames wait in the
//! connection's queue where keep_last and keep_all act on them as without
//! TLS. The I/O thread reads records, decrypts them into the frame reader,
//! and sends what the handshake (or a key update) has to say.

use std::io::{self, IoSlice, Read as _, Write as _};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_security::{rustls, PeerIdentity};
use parking_lot::Mutex;

use crate::transport::TransportSecurity;

/// Most encrypted bytes rustls keeps that the socket has not taken.
pub(crate) const TLS_BUFFER: usize = 256 * 1024;
/// How long a client's handshake may take (1 RTT and a few signatures;
/// generous for a lossy link, bounded for a black hole).
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);
/// First byte of every TLS record carrying a handshake.
pub(crate) const TLS_HANDSHAKE_BYTE: u8 = 0x16;

/// Bytes read from the socket per `read` call: rustls itself reads at most
/// one record (16 KiB) per call, and a large sample would cost a system
/// call per record.
const READ_CHUNK: usize = 256 * 1024;

/// One connection's TLS.
pub(crate) struct TlsState {
    pub conn: rustls::Connection,
    /// The peer, once its certificate was checked (after the handshake).
    pub peer: Option<Arc<PeerIdentity>>,
    /// Keys are renewed this often while the connection sends.
    rekey: Duration,
    /// When this side last asked for new keys (or the connection began).
    keys_since: Instant,
    /// Key updates this side asked for.
    key_updates: u64,
}

impl TlsState {
    fn new(conn: rustls::Connection, peer: Option<PeerIdentity>, rekey: Duration) -> TlsState {
        TlsState {
            conn,
            peer: peer.map(Arc::new),
            rekey,
            keys_since: Instant::now(),
            key_updates: 0,
        }
    }

    /// The server side of an accepted connection.
    pub fn server(sec: &TransportSecurity) -> io::Result<TlsState> {
        let mut conn = rustls::ServerConnection::new(sec.tls.server.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        conn.set_buffer_limit(Some(TLS_BUFFER));
        Ok(TlsState::new(conn.into(), None, sec.tls_rekey))
    }

    /// Queues a TLS 1.3 key update (the peer answers with its own, so both
    /// directions get new keys) when `rekey` has passed since the last:
    /// a long-lived stream does not keep one key for its life.
    fn renew_keys_if_due(&mut self) {
        if self.conn.is_handshaking() || self.keys_since.elapsed() < self.rekey {
            return;
        }
        self.keys_since = Instant::now();
        match self.conn.refresh_traffic_keys() {
            Ok(()) => self.key_updates += 1,
            Err(e) => tracing::debug!("TLS key update not sent: {e}"),
        }
    }

    /// Err once the peer's certificate has ended: a live connection does
    /// not outlast the identity that opened it (a new one is refused at
    /// the handshake).
    fn check_peer_valid(&self) -> io::Result<()> {
        let Some(p) = &self.peer else {
            return Ok(());
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        if now > p.not_after() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the peer's certificate ({}) ended {} s ago",
                    p.enclave(),
                    now - p.not_after()
                ),
            ));
        }
        Ok(())
    }

    /// For the connection's stats: `tls (<suite>[, keys renewed N times])`.
    pub fn describe(&self) -> String {
        match self.conn.negotiated_cipher_suite() {
            Some(s) if self.key_updates > 0 => format!(
                "tls ({:?}, keys renewed {} times)",
                s.suite(),
                self.key_updates
            ),
            Some(s) => format!("tls ({:?})", s.suite()),
            None => "tls (handshaking)".into(),
        }
    }
}

/// Writes out the records rustls holds until the socket would block:
/// true when none are left.
pub(crate) fn push_records(
    conn: &mut rustls::Connection,
    stream: &mio::net::TcpStream,
) -> io::Result<bool> {
    let mut s = stream;
    while conn.wants_write() {
        match conn.write_tls(&mut s) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Encrypts as much of `bufs` as rustls takes and sends what the socket
/// takes; `WouldBlock` when rustls took nothing (its buffer is full).
pub(crate) fn write_vectored(
    tls: &Mutex<TlsState>,
    stream: &mio::net::TcpStream,
    bufs: &[IoSlice<'_>],
) -> io::Result<usize> {
    let mut t = tls.lock();
    t.check_peer_valid()?;
    t.renew_keys_if_due();
    push_records(&mut t.conn, stream)?;
    let n = t.conn.writer().write_vectored(bufs)?;
    push_records(&mut t.conn, stream)?;
    if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    Ok(n)
}

/// Reads the records that arrived and decrypts them: `fill(n, src)` gets
/// the plaintext (`n` bytes to take from `src`). Returns the bytes read
/// from the socket (0: nothing more now); `UnexpectedEof` when the peer
/// closed; `InvalidData` for a failed handshake or a tampered record.
pub(crate) fn read(
    tls: &Mutex<TlsState>,
    stream: &mio::net::TcpStream,
    fill: &mut dyn FnMut(usize, &mut dyn io::Read) -> io::Result<()>,
) -> io::Result<usize> {
    RX.with_borrow_mut(|rx| read_with(tls, stream, rx, fill))
}

thread_local! {
    /// The I/O thread's read buffer for TLS connections (one per thread,
    /// not per connection: a stranger's connection must not cost 256 KiB).
    static RX: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn read_with(
    tls: &Mutex<TlsState>,
    stream: &mio::net::TcpStream,
    rx: &mut Vec<u8>,
    fill: &mut dyn FnMut(usize, &mut dyn io::Read) -> io::Result<()>,
) -> io::Result<usize> {
    let mut guard = tls.lock();
    let t = &mut *guard;
    t.check_peer_valid()?;
    rx.resize(READ_CHUNK, 0);
    let (raw, eof) = loop {
        match (&mut &*stream).read(rx) {
            Ok(0) => break (0, true),
            Ok(n) => break (n, false),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break (0, false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    };
    // rustls takes about a record at a time: feed it, decrypt, hand the
    // plaintext on, until the chunk is used up.
    let mut records = &rx[..raw];
    let mut plain = 0;
    let closed = loop {
        // rustls takes nothing more once the peer closed (close_notify):
        // what follows is ignored, not fed again and again.
        if !records.is_empty() && t.conn.read_tls(&mut records)? == 0 {
            records = &[];
        }
        let state = match t.conn.process_new_packets() {
            Ok(s) => s,
            Err(e) => {
                // Tell the peer why (an alert), then give up the connection.
                let _ = push_records(&mut t.conn, stream);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        };
        let closed = state.peer_has_closed();
        let n = state.plaintext_bytes_to_read();
        if n > 0 {
            fill(n, &mut t.conn.reader())?;
            plain += n;
        }
        if records.is_empty() {
            break closed;
        }
    };
    // The handshake or a key update may have something to say.
    push_records(&mut t.conn, stream)?;
    if (eof || closed) && plain == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(raw.max(usize::from(plain > 0)))
}

/// The client side of a connection just made (blocking socket, on the
/// connecting thread): handshake, the server's identity, which must be
/// allowed `action` on `name`.
pub(crate) fn client_handshake(
    sec: &TransportSecurity,
    stream: &std::net::TcpStream,
    action: ferry_security::Action,
    name: &str,
    reader: ferry_wire::ParticipantId,
) -> Result<TlsState, String> {
    let mut conn =
        rustls::ClientConnection::new(sec.tls.client.clone(), ferry_security::tls::server_name())
            .map_err(|e| e.to_string())?;
    conn.set_buffer_limit(Some(TLS_BUFFER));
    // Step by step, each socket call bounded by what is left of the
    // deadline: a server trickling a byte at a time cannot hold this
    // thread past it.
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let mut s = stream;
    let step = |e: io::Error| format!("TLS handshake: {e}");
    while conn.is_handshaking() || conn.wants_write() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("TLS handshake took over {HANDSHAKE_TIMEOUT:?}"));
        }
        stream
            .set_read_timeout(Some(left))
            .and_then(|_| stream.set_write_timeout(Some(left)))
            .map_err(step)?;
        if conn.wants_write() {
            conn.write_tls(&mut s).map_err(step)?;
            continue;
        }
        if conn.read_tls(&mut s).map_err(step)? == 0 {
            return Err("TLS handshake: the peer closed the connection".into());
        }
        conn.process_new_packets()
            .map_err(|e| format!("TLS handshake: {e}"))?;
    }
    let peer = ferry_security::tls::peer_identity(&conn, &sec.identity, sec.domain)
        .map_err(|e| e.to_string())?;
    if !peer.allows(action, name) {
        return Err(format!(
            "the peer's identity {} may not {action} `{name}`",
            peer.enclave()
        ));
    }
    if !sec.speaks_for(reader, &peer) {
        return Err(format!(
            "the peer's certificate ({}) is not the one participant {reader} proved in discovery",
            peer.enclave()
        ));
    }
    Ok(TlsState::new(conn.into(), Some(peer), sec.tls_rekey))
}

/// Sends `bytes` inside TLS on a blocking socket (the Hello, before the
/// connection joins the I/O loop).
pub(crate) fn write_blocking(
    tls: &mut TlsState,
    stream: &std::net::TcpStream,
    bytes: &[&[u8]],
) -> io::Result<()> {
    for b in bytes {
        tls.conn.writer().write_all(b)?;
    }
    let mut s = stream;
    while tls.conn.wants_write() {
        tls.conn.write_tls(&mut s)?;
    }
    Ok(())
}

/// Whether an accepted connection's first byte starts a TLS handshake
/// (`permissive` takes both; `None`: nothing arrived yet).
pub(crate) fn starts_with_tls(stream: &mio::net::TcpStream) -> io::Result<Option<bool>> {
    let mut b = [0u8; 1];
    match stream.peek(&mut b) {
        Ok(0) => Err(io::ErrorKind::UnexpectedEof.into()),
        Ok(_) => Ok(Some(b[0] == TLS_HANDSHAKE_BYTE)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads exactly `n` bytes from `src` into the end of `buf`.
pub(crate) fn take_plaintext(
    buf: &mut Vec<u8>,
    n: usize,
    src: &mut dyn io::Read,
) -> io::Result<()> {
    let old = buf.len();
    buf.resize(old + n, 0);
    let r = src.read_exact(&mut buf[old..]);
    if r.is_err() {
        buf.truncate(old);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_security::create::{create_identity, create_keystore, Validity};
    use ferry_security::Identity;

    #[test]
    fn a_server_trickling_bytes_cannot_hold_the_handshake_past_its_bound() {
        let d = ferry_testkit::TempDir::new("tls-trickle");
        let ks = create_keystore(d.path(), Validity::days(1)).unwrap();
        create_identity(&ks, "/a", Validity::days(1)).unwrap();
        let identity = Arc::new(Identity::load(&ks, "/a").unwrap());
        let sec = TransportSecurity {
            tls: identity.tls_configs().unwrap(),
            identity,
            enforce: true,
            domain: 0,
            peers: Default::default(),
            tls_rekey: Duration::from_secs(120),
        };
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            // A handshake record announcing 16 KiB, then a byte a second.
            let _ = c.write_all(&[0x16, 0x03, 0x03, 0x40, 0x00]);
            for _ in 0..6 {
                std::thread::sleep(Duration::from_secs(1));
                if c.write_all(&[0]).is_err() {
                    break;
                }
            }
        });
        let s = std::net::TcpStream::connect(addr).unwrap();
        let t = Instant::now();
        let r = client_handshake(
            &sec,
            &s,
            ferry_security::Action::Subscribe,
            "/x",
            ferry_wire::ParticipantId(1),
        );
        assert!(r.is_err(), "a trickle completed a handshake");
        assert!(
            t.elapsed() < HANDSHAKE_TIMEOUT + Duration::from_millis(500),
            "held {:?}",
            t.elapsed()
        );
        drop(s);
        let _ = server.join();
    }
}
