//! Compression dictionaries (RFC 9842): what a response compressed against a
//! dictionary the client already holds looks like, and the fields that name it.
//!
//! - A [`Dictionary`] is raw bytes and their SHA-256, which is its only name on the
//!   wire: a client that holds it sends `Available-Dictionary: :<base64 of the
//!   hash>:` ([`available`]), and a `dcz` body starts with a 40-byte zstd skippable
//!   frame carrying the same hash ([`DCZ_HEADER`], [`dcz_hash`]). The server offers
//!   `dcz` only when the two agree, so a body is never sent to a client that could
//!   not decode it, whatever dictionary the site uses now.
//! - The dictionary's own response carries `Use-As-Dictionary`
//!   ([`use_as_dictionary`]), and pages point at it with `Link: <…>;
//!   rel="compression-dictionary"` ([`link`]).
//!
//! Hostile input: `Available-Dictionary` is read only when it is one line of at
//! most [`FIELD_MAX`] bytes that decodes to exactly 32 bytes; anything else is as if
//! it were absent (the client then gets a coding without a dictionary).

use base64::Engine;
use http::header::HeaderName;
use http::HeaderMap;
use sha2::{Digest, Sha256};

/// `Available-Dictionary` (RFC 9842 §2.2).
pub const AVAILABLE_DICTIONARY: HeaderName = HeaderName::from_static("available-dictionary");
/// `Use-As-Dictionary` (RFC 9842 §2.1).
pub const USE_AS_DICTIONARY: HeaderName = HeaderName::from_static("use-as-dictionary");
/// The longest `Available-Dictionary` value read (a SHA-256 is 46 bytes as an
/// sf-binary; some room for whitespace).
pub const FIELD_MAX: usize = 64;
/// The first 8 bytes of a `dcz` body (RFC 9842 §5.2): a zstd skippable frame
/// (magic `0x184D2A5E`, little-endian) of 32 bytes, which are the dictionary's
/// SHA-256.
pub const DCZ_HEADER: [u8; 8] = [0x5e, 0x2a, 0x4d, 0x18, 0x20, 0x00, 0x00, 0x00];
/// A `dcz` body's header with the hash.
pub const DCZ_HEADER_LEN: usize = 40;

/// A SHA-256.
pub type Hash = [u8; 32];

/// A raw dictionary and its hash.
#[derive(Clone, PartialEq, Eq)]
pub struct Dictionary {
    bytes: Vec<u8>,
    hash: Hash,
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary")
            .field("len", &self.bytes.len())
            .field("hash", &self.hex())
            .finish()
    }
}

impl Dictionary {
    /// `bytes` as a dictionary.
    pub fn new(bytes: Vec<u8>) -> Dictionary {
        let hash = Sha256::digest(&bytes).into();
        Dictionary { bytes, hash }
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its SHA-256.
    pub fn hash(&self) -> &Hash {
        &self.hash
    }

    /// The hash in lower-case hex (for a content-addressed URL).
    pub fn hex(&self) -> String {
        use std::fmt::Write;
        self.hash
            .iter()
            .fold(String::with_capacity(64), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            })
    }

    /// Its hash as a client names it in `Available-Dictionary` (`:base64:`).
    pub fn available_value(&self) -> String {
        format!(
            ":{}:",
            base64::engine::general_purpose::STANDARD.encode(self.hash)
        )
    }

    /// The 40 bytes a `dcz` body against this dictionary starts with.
    pub fn dcz_header(&self) -> [u8; DCZ_HEADER_LEN] {
        let mut h = [0u8; DCZ_HEADER_LEN];
        h[..8].copy_from_slice(&DCZ_HEADER);
        h[8..].copy_from_slice(&self.hash);
        h
    }
}

/// The dictionary hash a request's `Available-Dictionary` names (an sf-binary,
/// `:base64:`), if it has exactly one well-formed line.
pub fn available(headers: &HeaderMap) -> Option<Hash> {
    let mut lines = headers.get_all(AVAILABLE_DICTIONARY).iter();
    let v = lines.next()?;
    if lines.next().is_some() || v.len() > FIELD_MAX {
        return None;
    }
    let v = crate::syntax::trim_ows(v.as_bytes());
    let inner = v.strip_prefix(b":")?.strip_suffix(b":")?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(inner)
        .ok()?;
    bytes.try_into().ok()
}

/// The hash a `dcz` body names, if `body` starts with a `dcz` header.
pub fn dcz_hash(body: &[u8]) -> Option<Hash> {
    let h = body.get(..DCZ_HEADER_LEN)?;
    if h[..8] != DCZ_HEADER {
        return None;
    }
    h[8..].try_into().ok()
}

/// The `Use-As-Dictionary` value for a dictionary meant for documents whose path
/// matches `pattern` (a URL pattern, e.g. `/*`), named `id`.
pub fn use_as_dictionary(pattern: &str, id: &str) -> String {
    format!("match=\"{pattern}\", match-dest=(\"document\"), id=\"{id}\"")
}

/// The `Link` value that points a page at the dictionary at `path`.
pub fn link(path: &str) -> String {
    format!("<{path}>; rel=\"compression-dictionary\"")
}

/// A raw dictionary of at most `max` bytes from pages that share their chrome: the
/// first page whole, then of each other what lies between the prefix and the suffix
/// it shares with the first (its own text and markup, not the header, navigation and
/// footer again), until `max`. It never starts with zstd's dictionary magic, which a
/// decoder that detects formatted dictionaries would read as one (RFC 9842 specifies
/// raw dictionaries for `dcz`).
pub fn assemble(pages: &[Vec<u8>], max: usize) -> Vec<u8> {
    let Some(first) = pages.first() else {
        return Vec::new();
    };
    let mut out: Vec<u8> = first.iter().copied().take(max).collect();
    for p in &pages[1..] {
        let pre = first.iter().zip(p).take_while(|(a, b)| a == b).count();
        let rest = &p[pre..];
        let suf = first[pre..]
            .iter()
            .rev()
            .zip(rest.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let middle = &rest[..rest.len() - suf];
        let room = max - out.len();
        if room == 0 {
            break;
        }
        out.extend_from_slice(&middle[..middle.len().min(room)]);
    }
    if out.starts_with(&[0x37, 0xa4, 0x30, 0xec]) {
        out.insert(0, b' ');
        out.truncate(max);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with(lines: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(AVAILABLE_DICTIONARY, HeaderValue::from_bytes(l).unwrap());
        }
        h
    }

    #[test]
    fn available_dictionary_reads_one_sha256_and_nothing_else() {
        let d = Dictionary::new(b"<html><head>".to_vec());
        let sf = format!(
            ":{}:",
            base64::engine::general_purpose::STANDARD.encode(d.hash())
        );
        assert_eq!(available(&with(&[sf.as_bytes()])), Some(*d.hash()));
        assert_eq!(d.available_value(), sf);
        assert_eq!(
            available(&with(&[format!(" {sf} ").as_bytes()])),
            Some(*d.hash())
        );
        // Two lines, a short hash, no colons, not base64, too long: none.
        assert_eq!(available(&with(&[sf.as_bytes(), sf.as_bytes()])), None);
        assert_eq!(available(&with(&[b":AAAA:"])), None);
        assert_eq!(available(&with(&[&sf.as_bytes()[1..sf.len() - 1]])), None);
        assert_eq!(available(&with(&[b":!!!!:"])), None);
        let long = format!("{sf}{}", " ".repeat(FIELD_MAX));
        assert_eq!(available(&with(&[long.as_bytes()])), None);
        assert_eq!(available(&HeaderMap::new()), None);
    }

    #[test]
    fn a_dcz_header_names_its_dictionary() {
        let d = Dictionary::new(vec![7; 100]);
        let mut body = d.dcz_header().to_vec();
        body.extend_from_slice(b"frame");
        assert_eq!(dcz_hash(&body), Some(*d.hash()));
        assert_eq!(dcz_hash(&body[..39]), None);
        body[0] ^= 1;
        assert_eq!(dcz_hash(&body), None);
        assert_eq!(d.hex().len(), 64);
    }
}
