//! Cutting frames out of a TCP byte stream.

use std::io;
use std::os::fd::AsRawFd;

use bytes::Bytes;
use ferry_wire::frame::{FrameHeader, FrameKind, Hello, HEADER_LEN};

/// Largest buffer growth per read call.
const READ_CHUNK: usize = 4 << 20;

/// Reads frames off a connection (I/O thread only).
///
/// `buf` holds the bytes received and not yet handed on, from `head` to its
/// length; its spare capacity is where the next `read` lands. Growing the
/// buffer reserves capacity and never writes it (no memset of what the
/// socket is about to fill), and frames are parsed in place without
/// shifting the rest of the buffer.
pub(crate) struct FrameReader {
    buf: Vec<u8>,
    head: usize,
    max_body: usize,
    /// The kind and exact body length the first frame must have (an
    /// accepted connection's Hello): until it is in, a peer cannot make us
    /// buffer more than that, whatever length it announces.
    first: Option<(FrameKind, usize)>,
}

/// One complete frame.
pub(crate) struct RawFrame {
    pub header: FrameHeader,
    pub body: Bytes,
}

const INITIAL_BUF: usize = 64 * 1024;

impl FrameReader {
    pub fn new(max_body: usize) -> Self {
        FrameReader {
            buf: Vec::with_capacity(INITIAL_BUF),
            head: 0,
            max_body,
            first: None,
        }
    }

    /// A reader for an accepted connection: its first frame must be a
    /// [`Hello`] of exactly [`Hello::LEN`] bytes, or the stream is refused
    /// as soon as that frame's header is in.
    pub fn expecting_hello(max_body: usize) -> Self {
        FrameReader {
            first: Some((FrameKind::Hello, Hello::LEN)),
            ..FrameReader::new(max_body)
        }
    }

    /// Reads what is available (at most `budget` bytes) and returns the
    /// complete frames. Ok(true): the budget ran out and more may be waiting
    /// — a saturated connection must not starve the I/O thread's timers.
    /// Err: the peer closed, broke the connection or sent a bad frame.
    #[cfg(test)]
    pub fn read(
        &mut self,
        stream: &mio::net::TcpStream,
        frames: &mut Vec<RawFrame>,
        budget: usize,
    ) -> io::Result<bool> {
        let mut total = 0usize;
        loop {
            match self.read_once(stream, frames)? {
                0 => return Ok(false),
                n => total += n,
            }
            if total >= budget {
                return Ok(true);
            }
        }
    }

    /// One `read` call: appends the frames it completed and returns the
    /// bytes read (0: nothing available). The I/O thread dispatches after
    /// every call, so frames are handed on while still in cache.
    pub fn read_once(
        &mut self,
        stream: &mio::net::TcpStream,
        frames: &mut Vec<RawFrame>,
    ) -> io::Result<usize> {
        loop {
            self.make_room()?;
            let spare = self.buf.spare_capacity_mut();
            // SAFETY: `read` writes at most `spare.len()` bytes into the
            // spare capacity, which is valid for writes; the bytes it
            // reports written are initialized and become part of `buf`.
            let n =
                unsafe { libc::read(stream.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len()) };
            match n {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n if n > 0 => {
                    let n = n as usize;
                    // SAFETY: the kernel initialized these n bytes (above).
                    unsafe { self.buf.set_len(self.buf.len() + n) };
                    self.parse(frames)?;
                    return Ok(n);
                }
                _ => {
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => return Ok(0),
                        io::ErrorKind::Interrupted => continue,
                        _ => return Err(e),
                    }
                }
            }
        }
    }

    /// [`FrameReader::read_once`] through TLS: the records that arrived are
    /// decrypted into the buffer (one copy out of rustls), then parsed.
    pub fn read_once_tls(
        &mut self,
        tls: &parking_lot::Mutex<super::tls::TlsState>,
        stream: &mio::net::TcpStream,
        frames: &mut Vec<RawFrame>,
    ) -> io::Result<usize> {
        let mut got = false;
        let n = super::tls::read(tls, stream, &mut |n, src| {
            if self.head > 0 && self.buf.len() + n > self.buf.capacity() {
                self.buf.drain(..self.head);
                self.head = 0;
            }
            got = true;
            super::tls::take_plaintext(&mut self.buf, n, src)
        })?;
        if got {
            self.parse(frames)?;
        }
        Ok(n)
    }

    /// Ensures spare capacity after the data: compacts, or grows by at most
    /// READ_CHUNK so memory follows the bytes that actually arrived, not the
    /// length a peer announced.
    fn make_room(&mut self) -> io::Result<()> {
        if self.buf.len() < self.buf.capacity() {
            return Ok(());
        }
        if self.head > 0 {
            self.buf.drain(..self.head);
            self.head = 0;
            return Ok(());
        }
        let need = match self.pending_header()? {
            Some(h) => HEADER_LEN + h.body_len as usize - self.buf.len(),
            None => HEADER_LEN,
        };
        self.buf.reserve_exact(need.clamp(INITIAL_BUF, READ_CHUNK));
        Ok(())
    }

    fn parse(&mut self, frames: &mut Vec<RawFrame>) -> io::Result<()> {
        while let Some(h) = self.pending_header()? {
            let len = HEADER_LEN + h.body_len as usize;
            if self.buf.len() - self.head < len {
                break;
            }
            let body = if self.head == 0 && self.buf.len() == len && len > INITIAL_BUF {
                // A large sample fills the buffer exactly: hand it over
                // without copying.
                let v = std::mem::replace(&mut self.buf, Vec::with_capacity(INITIAL_BUF));
                Bytes::from(v).slice(HEADER_LEN..)
            } else {
                let b = Bytes::copy_from_slice(&self.buf[self.head + HEADER_LEN..self.head + len]);
                self.head += len;
                b
            };
            frames.push(RawFrame { header: h, body });
            self.first = None;
        }
        if self.head == self.buf.len() {
            self.head = 0;
            self.buf.clear();
        }
        Ok(())
    }

    fn pending_header(&self) -> io::Result<Option<FrameHeader>> {
        let avail = &self.buf[self.head..];
        if avail.len() < HEADER_LEN {
            // Reject a stranger as soon as its first two bytes are in.
            if avail.len() >= 2 && avail[..2] != *b"FR" {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "not a ferry stream (bad magic)",
                ));
            }
            return Ok(None);
        }
        let h = FrameHeader::parse(&avail[..HEADER_LEN], self.max_body)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if let Some((kind, len)) = self.first {
            if h.kind != kind || h.body_len as usize != len {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "expected a {kind:?} frame of {len} bytes first, got {:?} of {} bytes",
                        h.kind, h.body_len
                    ),
                ));
            }
        }
        Ok(Some(h))
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    fn pair() -> (std::net::TcpStream, mio::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        b.set_nonblocking(true).unwrap();
        (a, mio::net::TcpStream::from_std(b))
    }

    fn header(kind: FrameKind, len: u32) -> [u8; HEADER_LEN] {
        FrameHeader {
            kind,
            flags: 0,
            body_len: len,
            seq: 1,
            stamp_ns: 0,
        }
        .encode()
    }

    #[test]
    fn announced_length_does_not_allocate_memory() {
        let (mut a, b) = pair();
        a.write_all(&header(FrameKind::Data, 200 << 20)).unwrap();
        a.write_all(&[7; 10]).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut r = FrameReader::new(256 << 20);
        let mut frames = Vec::new();
        r.read(&b, &mut frames, usize::MAX).unwrap();
        assert!(frames.is_empty());
        assert!(
            r.buf.capacity() <= 2 * READ_CHUNK,
            "{} bytes held for 42 received",
            r.buf.capacity()
        );
    }

    #[test]
    fn frames_split_anywhere_are_reassembled() {
        let (mut a, b) = pair();
        let mut wire = Vec::new();
        for i in 0..50u32 {
            wire.extend_from_slice(&header(FrameKind::Data, i * 37));
            wire.extend((0..i * 37).map(|k| (k + i) as u8));
        }
        let mut r = FrameReader::new(1 << 20);
        let mut frames = Vec::new();
        for chunk in wire.chunks(13) {
            a.write_all(chunk).unwrap();
            std::thread::sleep(Duration::from_micros(200));
            r.read(&b, &mut frames, usize::MAX).unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        r.read(&b, &mut frames, usize::MAX).unwrap();
        assert_eq!(frames.len(), 50);
        for (i, f) in frames.iter().enumerate() {
            let i = i as u32;
            assert_eq!(f.body.len() as u32, i * 37);
            assert!(f
                .body
                .iter()
                .enumerate()
                .all(|(k, x)| *x == (k as u32 + i) as u8));
        }
    }

    #[test]
    fn a_saturated_connection_yields_after_its_budget() {
        let (a, b) = pair();
        let writer = std::thread::spawn(move || {
            let mut a = a;
            let mut wire = Vec::new();
            for _ in 0..100 {
                wire.extend_from_slice(&header(FrameKind::Data, 60_000));
                wire.extend(std::iter::repeat_n(1u8, 60_000));
            }
            a.write_all(&wire).unwrap();
            a // keep the connection open until the reader is done
        });
        let mut r = FrameReader::new(1 << 20);
        let mut frames = Vec::new();
        let mut turns = 0;
        while frames.len() < 100 {
            turns += 1;
            assert!(turns < 10_000, "never finished");
            match r.read(&b, &mut frames, 1 << 20) {
                Ok(true) => {}
                Ok(false) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => panic!("{e}"),
            }
        }
        drop(writer.join().unwrap());
        // 6 MB with a 1 MB budget cannot be read in one turn.
        assert!(turns > 3, "{turns} turns");
    }

    /// A fast writer batches: runs of small frames are coalesced into one
    /// write, large ones go by `writev`, and a tiny send buffer splits both
    /// anywhere. Every frame must arrive whole and in order.
    #[test]
    fn batched_mixed_frames_survive_partial_writes() {
        let (a, b) = pair();
        socket2::SockRef::from(&a)
            .set_send_buffer_size(4096)
            .unwrap();
        a.set_nonblocking(true).unwrap();
        let poll = mio::Poll::new().unwrap();
        let peer = a.peer_addr().unwrap();
        let id = EndpointId {
            participant: ferry_wire::ParticipantId(1),
            entity: 1,
        };
        let conn = TcpConn::new(
            mio::net::TcpStream::from_std(a),
            peer,
            id,
            Role::Outgoing {
                writer: id,
                reply_sink: None,
            },
            QueuePolicy {
                depth: usize::MAX,
                block: None,
            },
            crate::reactor::IoHandle::new(&poll).expect("waker"),
        );
        let size = |i: u64| {
            if i % 50 == 49 {
                100_000
            } else {
                (i % 300) as usize
            }
        };
        let n = 3000u64;
        let reader = std::thread::spawn(move || {
            let mut r = FrameReader::new(1 << 20);
            let mut frames = Vec::new();
            let end = std::time::Instant::now() + Duration::from_secs(20);
            while (frames.len() as u64) < n && std::time::Instant::now() < end {
                if r.read_once(&b, &mut frames).unwrap() == 0 {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            frames
        });
        for i in 0..n {
            let body = Bytes::from(vec![i as u8; size(i)]);
            let h = FrameHeader {
                kind: FrameKind::Data,
                flags: 0,
                body_len: body.len() as u32,
                seq: i,
                stamp_ns: 1_000_000 + i * 100, // 10 M frames/s: batch mode
            };
            conn.send_frame(h, body).unwrap();
            if i % 7 == 0 {
                conn.flush().unwrap();
            }
        }
        let end = std::time::Instant::now() + Duration::from_secs(20);
        while conn.has_backlog() && std::time::Instant::now() < end {
            conn.flush().unwrap();
            std::thread::sleep(Duration::from_micros(100));
        }
        let frames = reader.join().unwrap();
        assert_eq!(frames.len() as u64, n);
        for (i, f) in frames.iter().enumerate() {
            let i = i as u64;
            assert_eq!(f.header.seq, i);
            assert_eq!(f.body.len(), size(i));
            assert!(f.body.iter().all(|x| *x == i as u8), "frame {i} torn");
        }
        assert_eq!(conn.stats.drops.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn oversized_and_garbage_frames_are_errors() {
        let (mut a, b) = pair();
        a.write_all(&header(FrameKind::Data, 2 << 20)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut r = FrameReader::new(1 << 20);
        let e = r.read(&b, &mut Vec::new(), usize::MAX).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        let (mut a, b) = pair();
        a.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let e = FrameReader::new(1 << 20)
            .read(&b, &mut Vec::new(), usize::MAX)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn an_accepted_stream_must_start_with_a_hello_of_its_real_size() {
        // A Hello announcing 256 MiB is refused on its header: nothing of
        // the announced body is buffered.
        let (mut a, b) = pair();
        a.write_all(&header(FrameKind::Hello, 256 << 20)).unwrap();
        a.write_all(&[0; 4096]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut r = FrameReader::expecting_hello(256 << 20);
        let e = r.read(&b, &mut Vec::new(), usize::MAX).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("Hello frame of 25 bytes"), "{e}");
        assert!(r.buf.capacity() <= INITIAL_BUF, "{}", r.buf.capacity());
        // Data before the Hello is refused too.
        let (mut a, b) = pair();
        a.write_all(&header(FrameKind::Data, 8)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let e = FrameReader::expecting_hello(1 << 20)
            .read(&b, &mut Vec::new(), usize::MAX)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        // A real Hello, then a large frame: accepted.
        let (mut a, b) = pair();
        let hello = Hello {
            from: EndpointId {
                participant: ferry_wire::ParticipantId(1),
                entity: 1,
            },
            from_kind: ferry_wire::EndpointKind::Publisher,
            to: EndpointId {
                participant: ferry_wire::ParticipantId(2),
                entity: 1,
            },
        }
        .encode();
        assert_eq!(hello.len(), Hello::LEN);
        a.write_all(&header(FrameKind::Hello, Hello::LEN as u32))
            .unwrap();
        a.write_all(&hello).unwrap();
        a.write_all(&header(FrameKind::Data, 100_000)).unwrap();
        a.write_all(&[9; 100_000]).unwrap();
        let mut r = FrameReader::expecting_hello(1 << 20);
        let mut frames = Vec::new();
        for _ in 0..200 {
            r.read(&b, &mut frames, usize::MAX).unwrap();
            if frames.len() == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].header.kind, FrameKind::Hello);
        assert_eq!(frames[1].body.len(), 100_000);
    }
}
