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

#[cfg(test)]
mod tests {
    use super::*;

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
