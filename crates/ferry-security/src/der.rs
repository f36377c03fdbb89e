//! The one DER shape ferry writes itself: an OCTET STRING around the
//! grants (an extension's value is DER).

/// `content` as a DER OCTET STRING (writing certificates is `keygen`'s).
#[cfg_attr(not(feature = "keygen"), allow(dead_code))]
pub(crate) fn wrap_octet_string(content: &[u8]) -> Vec<u8> {
    let n = content.len();
    let mut out = vec![0x04];
    if n < 0x80 {
        out.push(n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0x81, n as u8]);
    } else {
        // Grants are at most 8 KiB: two length bytes always suffice.
        out.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]);
    }
    out.extend_from_slice(content);
    out
}

/// The content of a DER OCTET STRING that is all of `b` (`None`: not one).
pub(crate) fn octet_string(b: &[u8]) -> Option<&[u8]> {
    let (&tag, rest) = b.split_first()?;
    if tag != 0x04 {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        n if n < 0x80 => (n as usize, rest),
        0x81 => (*rest.first()? as usize, rest.get(1..)?),
        0x82 => (
            u16::from_be_bytes([*rest.first()?, *rest.get(1)?]) as usize,
            rest.get(2..)?,
        ),
        _ => return None,
    };
    (rest.len() == len).then_some(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octet_strings_round_trip_and_garbage_is_refused() {
        for n in [0, 1, 127, 128, 255, 256, 8192] {
            let c = vec![7u8; n];
            assert_eq!(octet_string(&wrap_octet_string(&c)), Some(&c[..]));
        }
        assert_eq!(octet_string(&[]), None);
        assert_eq!(octet_string(&[0x04]), None);
        assert_eq!(octet_string(&[0x04, 0x82, 0x01]), None);
        assert_eq!(octet_string(&[0x04, 2, 1]), None);
        assert_eq!(octet_string(&[0x30, 0]), None);
    }
}
