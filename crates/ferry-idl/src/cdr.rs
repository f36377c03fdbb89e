//! CDR (XCDR1, "plain CDR") as ROS 2's DDS RMWs write it: a 4-byte
//! encapsulation header (`00 01 00 00` little endian, `00 00 00 00` big
//! endian), then every primitive aligned to its size (at most 8) counted
//! from after the header; strings as `uint32` length (with the NUL) +
//! bytes + NUL; sequences as `uint32` count + elements; fixed arrays
//! without a count. A reader checks every length against what is left, so
//! no input makes it panic or allocate more than the input's size.

/// Encapsulation header of little-endian plain CDR.
pub const HEADER_LE: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

/// Error of reading CDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CdrError {
    /// Fewer than 4 bytes, or an encapsulation other than plain CDR.
    #[error(
        "not plain CDR: the encapsulation header is {0:02x?} (expected 00 01 00 00 or 00 00 00 00)"
    )]
    Header(Vec<u8>),
    /// The data ends inside a value.
    #[error("the data ends at byte {at} inside `{what}` ({need} more bytes needed)")]
    Short {
        /// Offset from the start of the body.
        at: usize,
        /// What was being read.
        what: String,
        /// Bytes missing.
        need: usize,
    },
    /// A string without its NUL or not UTF-8.
    #[error("bad string at byte {at}: {reason}")]
    BadString {
        /// Offset from the start of the body.
        at: usize,
        /// Why.
        reason: &'static str,
    },
    /// A count larger than the data could hold.
    #[error(
        "`{what}` claims {count} elements at byte {at}, more than the {left} bytes left can hold"
    )]
    Count {
        /// What was being read.
        what: String,
        /// The claimed count.
        count: u64,
        /// Offset from the start of the body.
        at: usize,
        /// Bytes left.
        left: usize,
    },
    /// A `bool` other than 0 or 1.
    #[error("bad bool {value} at byte {at}")]
    Bool {
        /// The byte.
        value: u8,
        /// Offset from the start of the body.
        at: usize,
    },
    /// Nesting deeper than a message can sensibly be (a self-referring
    /// type fed crafted data).
    #[error("messages nested deeper than {0} levels")]
    TooDeep(usize),
}

/// Writes CDR little endian, header included.
#[derive(Debug, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

impl Writer {
    /// A writer holding the encapsulation header.
    pub fn new() -> Self {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&HEADER_LE);
        Writer { buf }
    }

    /// Pads with zeros to a multiple of `n` counted after the header.
    pub fn align(&mut self, n: usize) {
        let pos = self.buf.len() - HEADER_LE.len();
        let pad = (n - pos % n) % n;
        self.buf.resize(self.buf.len() + pad, 0);
    }

    /// Writes raw bytes (no alignment).
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// `u8`/`byte`/`char`/`bool`.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// `u16`, aligned.
    pub fn u16(&mut self, v: u16) {
        self.align(2);
        self.bytes(&v.to_le_bytes());
    }

    /// `u32`, aligned.
    pub fn u32(&mut self, v: u32) {
        self.align(4);
        self.bytes(&v.to_le_bytes());
    }

    /// `u64`, aligned.
    pub fn u64(&mut self, v: u64) {
        self.align(8);
        self.bytes(&v.to_le_bytes());
    }

    /// `string`: length with the NUL, bytes, NUL.
    pub fn string(&mut self, s: &str) {
        self.u32(s.len() as u32 + 1);
        self.bytes(s.as_bytes());
        self.u8(0);
    }

    /// `wstring`: count of UTF-16 code units, then each as `u16` (Fast DDS
    /// 2.x, ROS 2 Jazzy; Cyclone DDS on Linux writes 4 bytes per unit).
    pub fn wstring(&mut self, s: &str) {
        let units: Vec<u16> = s.encode_utf16().collect();
        self.u32(units.len() as u32);
        for u in units {
            self.u16(u);
        }
    }

    /// The bytes written, header included.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    /// Bytes written so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether only the header is written.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == HEADER_LE.len()
    }
}

/// Reads CDR of either byte order, bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    body: &'a [u8],
    at: usize,
    little: bool,
}

impl<'a> Reader<'a> {
    /// A reader over `data` (header included).
    pub fn new(data: &'a [u8]) -> Result<Self, CdrError> {
        match data {
            [0, e @ (0 | 1), _, _, body @ ..] => Ok(Reader {
                body,
                at: 0,
                little: *e == 1,
            }),
            _ => Err(CdrError::Header(data[..data.len().min(4)].to_vec())),
        }
    }

    /// Offset in the body.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.body.len().saturating_sub(self.at)
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], CdrError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.body.len());
        let Some(end) = end else {
            return Err(CdrError::Short {
                at: self.at,
                what: what.to_string(),
                need: n - self.remaining(),
            });
        };
        let s = &self.body[self.at..end];
        self.at = end;
        Ok(s)
    }

    /// Skips padding to a multiple of `n` (padding past the end is an
    /// error only once a value is read there).
    pub fn align(&mut self, n: usize) {
        self.at = self.at.div_ceil(n) * n;
    }

    /// One byte.
    pub fn u8(&mut self, what: &str) -> Result<u8, CdrError> {
        Ok(self.take(1, what)?[0])
    }

    /// A `bool` (0 or 1).
    pub fn bool(&mut self, what: &str) -> Result<bool, CdrError> {
        let at = self.at;
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(CdrError::Bool { value, at }),
        }
    }

    /// An `octet[N]` (`char[N]`, a GID): N bytes as they are, no
    /// alignment, no byte order.
    pub fn octets<const N: usize>(&mut self, what: &str) -> Result<[u8; N], CdrError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    /// `N` bytes, aligned to `N`, in the stream's byte order.
    pub fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], CdrError> {
        self.align(N);
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        if !self.little {
            out.reverse();
        }
        Ok(out)
    }

    /// `u16`.
    pub fn u16(&mut self, what: &str) -> Result<u16, CdrError> {
        self.array::<2>(what).map(u16::from_le_bytes)
    }

    /// `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, CdrError> {
        self.array::<4>(what).map(u32::from_le_bytes)
    }

    /// `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64, CdrError> {
        self.array::<8>(what).map(u64::from_le_bytes)
    }

    /// A count of elements of at least `min_size` bytes each: no larger
    /// than what is left could hold.
    pub fn count(&mut self, min_size: usize, what: &str) -> Result<usize, CdrError> {
        let n = self.u32(what)?;
        let left = self.remaining();
        if (n as usize).saturating_mul(min_size.max(1)) > left && min_size > 0 {
            return Err(CdrError::Count {
                what: what.to_string(),
                count: n.into(),
                at: self.at,
                left,
            });
        }
        Ok(n as usize)
    }

    /// A `string`.
    pub fn string(&mut self, what: &str) -> Result<String, CdrError> {
        let n = self.count(1, what)?;
        let at = self.at;
        if n == 0 {
            // Some writers send an empty string as length 0.
            return Ok(String::new());
        }
        let b = self.take(n, what)?;
        let (nul, text) = b.split_last().unwrap_or((&0, &[]));
        if *nul != 0 {
            return Err(CdrError::BadString {
                at,
                reason: "no NUL at its end",
            });
        }
        String::from_utf8(text.to_vec()).map_err(|_| CdrError::BadString {
            at,
            reason: "not UTF-8",
        })
    }

    /// A `wstring` (UTF-16 code units of 2 bytes).
    pub fn wstring(&mut self, what: &str) -> Result<String, CdrError> {
        let n = self.count(2, what)?;
        let at = self.at;
        let mut units = Vec::with_capacity(n);
        for _ in 0..n {
            units.push(self.u16(what)?);
        }
        String::from_utf16(&units).map_err(|_| CdrError::BadString {
            at,
            reason: "not UTF-16",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_alignment_as_ros2() {
        let mut w = Writer::new();
        w.string("hi");
        assert_eq!(w.clone().finish(), [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0]);
        w.u8(7);
        w.u64(1);
        let b = w.finish();
        // 4 + 3 + 1 = 8 bytes of body before the u64: already aligned.
        assert_eq!(b.len(), 4 + 8 + 8);
        let mut r = Reader::new(&b).unwrap();
        assert_eq!(r.string("s").unwrap(), "hi");
        assert_eq!(r.u8("b").unwrap(), 7);
        assert_eq!(r.u64("u").unwrap(), 1);
    }

    #[test]
    fn big_endian_reads() {
        let b = [0, 0, 0, 0, 0, 0, 0, 5];
        assert_eq!(Reader::new(&b).unwrap().u32("x").unwrap(), 5);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(Reader::new(&[0, 2, 0, 0]).is_err());
        assert!(Reader::new(&[1]).is_err());
        let huge = [0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            Reader::new(&huge).unwrap().string("s"),
            Err(CdrError::Count { .. })
        ));
        let no_nul = [0, 1, 0, 0, 2, 0, 0, 0, b'a', b'b'];
        assert!(Reader::new(&no_nul).unwrap().string("s").is_err());
        let short = [0, 1, 0, 0, 1, 0];
        assert!(matches!(
            Reader::new(&short).unwrap().u32("n"),
            Err(CdrError::Short { .. })
        ));
    }
}
