//! Shared pieces of the HTTP field grammar (RFC 9110 §5.6) that several parsers use.

/// Strips optional whitespace (`OWS`: spaces and horizontal tabs) from both ends.
pub(crate) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// RFC 9110 §5.6.2 `tchar`: the bytes a token may hold.
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Appends `n` in decimal to `out`, without allocating or formatting machinery (the
/// hit path writes a few numbers per response).
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_format_like_to_string() {
        for n in [0u64, 7, 10, 99, 12345, u64::MAX] {
            let mut out = b"x".to_vec();
            push_decimal(&mut out, n);
            assert_eq!(&out[1..], n.to_string().as_bytes());
        }
    }

    #[test]
    fn ows_is_spaces_and_tabs_only() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"\r\nx"), b"\r\nx");
        assert_eq!(trim_ows(b"   "), b"");
    }

    #[test]
    fn tchar_matches_the_rfc_set() {
        let all: Vec<u8> = (0u8..=255).filter(|&b| is_tchar(b)).collect();
        assert_eq!(all.len(), 26 * 2 + 10 + 15);
        assert!(!is_tchar(b'"') && !is_tchar(b',') && !is_tchar(b' ') && !is_tchar(0x80));
    }
}
