//! Sample contents that a torn, stale or misplaced read cannot pass: the
//! sequence number in the first 8 bytes, a pattern that depends on it, and
//! a checksum of everything before it in the last 8 bytes (samples under
//! 16 bytes are the sequence number's low byte repeated).

/// Sizes from 1 byte to 64 MiB with how many of each to send (fewer of the
/// large ones: debug builds check every byte).
pub const SIZES_1B_TO_64MIB: [(usize, u64); 7] = [
    (1, 20),
    (64, 20),
    (4096, 20),
    (65_536, 20),
    (1 << 20, 10),
    (4 << 20, 5),
    (64 << 20, 2),
];

fn checksum(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
        (h ^ u64::from(*x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Fills `buf` as sample `seq`.
pub fn fill(seq: u64, buf: &mut [u8]) {
    let n = buf.len();
    if n < 16 {
        buf.iter_mut().for_each(|b| *b = seq as u8);
        return;
    }
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in buf[8..n - 8].iter_mut().enumerate() {
        *b = (i as u64).wrapping_mul(31).wrapping_add(seq) as u8;
    }
    let sum = checksum(&buf[..n - 8]);
    buf[n - 8..].copy_from_slice(&sum.to_le_bytes());
}

/// Sample `seq` of `len` bytes.
pub fn make(seq: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(seq, &mut v);
    v
}

/// Whether `b` is exactly sample `seq`.
pub fn valid(seq: u64, b: &[u8]) -> bool {
    let n = b.len();
    if n < 16 {
        return b.iter().all(|x| *x == seq as u8);
    }
    b[..8] == seq.to_le_bytes() && b[n - 8..] == checksum(&b[..n - 8]).to_le_bytes()
}

/// Whether `b` (≥ 16 bytes) is a whole sample, whatever its number.
pub fn intact(b: &[u8]) -> bool {
    b.len() >= 16 && valid(u64::from_le_bytes(b[..8].try_into().unwrap_or_default()), b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flipped_byte_or_another_number_fails() {
        for len in [0, 1, 15, 16, 17, 4096] {
            let mut s = make(7, len);
            assert!(valid(7, &s));
            if len > 0 {
                assert!(!valid(8, &s), "len {len}");
                let i = len / 2;
                s[i] ^= 1;
                assert!(!valid(7, &s), "len {len}");
            }
        }
        assert!(intact(&make(9, 100)));
    }
}
