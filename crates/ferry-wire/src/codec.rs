//! Bounded little-endian reader and writer used by every ferry format.
//!
//! The reader never panics: every read checks the remaining length and
//! returns [`WireError`] instead. Strings and lists carry explicit length
//! limits so a hostile peer cannot make a parser allocate without bound.

use thiserror::Error;

/// Why bytes could not be parsed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The input ended before a field was complete.
    #[error("truncated: needed {needed} more bytes at offset {offset}")]
    Truncated {
        /// Offset at which the read started.
        offset: usize,
        /// Bytes that were missing.
        needed: usize,
    },
    /// The leading magic bytes are not ferry's: not a ferry packet.
    #[error("bad magic {found:02x?}: not a ferry packet")]
    BadMagic {
        /// What was found instead of the magic.
        found: [u8; 2],
    },
    /// The packet is from an incompatible protocol version.
    #[error("unsupported protocol version {0} (this build speaks version 1)")]
    Version(u8),
    /// A field holds a value outside its domain.
    #[error("invalid value {value} for field `{field}`")]
    InvalidValue {
        /// The field's name.
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// A length exceeds the limit for that field.
    #[error("field `{field}` is {len} long, limit is {limit}")]
    TooLong {
        /// The field's name.
        field: &'static str,
        /// The announced length.
        len: usize,
        /// The allowed maximum.
        limit: usize,
    },
    /// A string field is not valid UTF-8.
    #[error("field `{0}` is not valid UTF-8")]
    Utf8(&'static str),
}

/// Cursor over untrusted bytes; all reads are bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Current offset from the start.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Takes the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.remaining() < n {
            return Err(WireError::Truncated {
                offset: self.pos,
                needed: n - self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Takes a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }
    /// Reads and checks the 2-byte magic and the version byte that start
    /// every ferry packet.
    pub fn header(&mut self, magic: [u8; 2], version: u8) -> Result<(), WireError> {
        let found = self.array::<2>()?;
        if found != magic {
            return Err(WireError::BadMagic { found });
        }
        match self.u8()? {
            v if v == version => Ok(()),
            v => Err(WireError::Version(v)),
        }
    }

    /// Reads a little-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Reads a u16-length-prefixed UTF-8 string of at most `limit` bytes.
    pub fn str(&mut self, field: &'static str, limit: usize) -> Result<&'a str, WireError> {
        let len = self.u16()? as usize;
        if len > limit {
            return Err(WireError::TooLong { field, len, limit });
        }
        std::str::from_utf8(self.bytes(len)?).map_err(|_| WireError::Utf8(field))
    }
}

/// Appends little-endian fields to a byte vector.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }
    /// A writer that appends to `buf` after clearing it: its capacity is
    /// reused, so encoding into a caller's buffer allocates nothing once
    /// the buffer has grown. Take it back with [`Writer::into_vec`].
    pub fn reuse(mut buf: Vec<u8>) -> Self {
        buf.clear();
        Writer { buf }
    }
    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// True if nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// Appends one byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// Appends a little-endian u16.
    pub fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }
    /// Appends a little-endian u32.
    pub fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    /// Appends a little-endian u64.
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    /// Appends a u16-length-prefixed string, truncated at a char boundary to
    /// `limit` bytes (callers validate names long before they reach the wire).
    pub fn str(&mut self, s: &str, limit: usize) {
        let mut end = s.len().min(limit).min(u16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u16(end as u16);
        self.bytes(&s.as_bytes()[..end]);
    }
    /// The written bytes.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_reports_truncation_instead_of_panicking() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16().unwrap(), 0x0201);
        assert_eq!(
            r.u32(),
            Err(WireError::Truncated {
                offset: 2,
                needed: 3
            })
        );
    }

    #[test]
    fn strings_round_trip_and_respect_limits() {
        let mut w = Writer::new();
        w.str("héllo", 64);
        let v = w.into_vec();
        assert_eq!(Reader::new(&v).str("name", 64).unwrap(), "héllo");
        assert!(matches!(
            Reader::new(&v).str("name", 3),
            Err(WireError::TooLong { .. })
        ));
        let mut w = Writer::new();
        w.str("héllo", 2); // 'é' is two bytes: must cut at a boundary
        let v = w.into_vec();
        assert_eq!(Reader::new(&v).str("name", 64).unwrap(), "h");
    }
}
