//! Lowercase hex, as the readers' files and cookies write bytes: one encoding per
//! byte string, so a changed character always changes the bytes or fails. A leaf.

/// Lowercase hex of `bytes`.
pub(super) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// Decodes lowercase hex only, so every byte string has exactly one encoding (a changed
/// character always changes the bytes or fails), into `buf`, without allocating: the
/// decoded bytes, or `None` when `s` is not lowercase hex or does not fit.
pub(super) fn unhex_into<'b>(s: &str, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) || s.len() / 2 > buf.len() {
        return None;
    }
    for (out, p) in buf.iter_mut().zip(s.chunks_exact(2)) {
        *out = digit(p[0])? << 4 | digit(p[1])?;
    }
    Some(&buf[..s.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_is_canonical() {
        let bytes: Vec<u8> = (0..=255).collect();
        let mut buf = [0u8; 256];
        assert_eq!(unhex_into(&hex(&bytes), &mut buf), Some(&bytes[..]));
        assert_eq!(unhex_into(&hex(&bytes), &mut buf[..255]), None, "too long");
        assert_eq!(unhex_into("0A", &mut buf), None, "upper case");
        assert_eq!(unhex_into("0aff", &mut buf), Some(&[0x0a, 0xff][..]));
        assert_eq!(unhex_into("0af", &mut buf), None);
        assert_eq!(unhex_into("zz", &mut buf), None);
    }
}
