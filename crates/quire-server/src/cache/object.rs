//! How a cached response lies in the store: which entries, under which keys, with
//! which tags.
//!
//! A response is stored as **one entry**: its record (status, head, timing, the codings
//! stored with their lengths) in the store's meta section, and the bodies of every
//! coding, concatenated in the record's order, in the body section.
//! - The entry lives under the URL's primary key (`quire_http::key::primary_key`) when
//!   the response has no `Vary` beyond `Accept-Encoding`. Otherwise the primary key
//!   holds a [`Record::Vary`] naming the selecting fields (no body), and the response
//!   lives under the variant key.
//!
//! Key decisions:
//! - **One lookup per hit, one write per fill.** A hit reads one index slot and one
//!   entry: record and body lie side by side, so the entry header the lookup checks
//!   and the bytes the socket gets share pages. A refill replaces the entry whole, so
//!   a reader sees all codings of one version or of the other, never a mix.
//! - **Only records carry tags** (`u:<url>`, `d:<directory>` for each enclosing
//!   directory, `t:<surrogate key>`): a purge removes or rewrites the entries it names.
//! - The record's **object id** (random per fill) names a version: with the head's
//!   checksum it is the record's [`identity`] for the decoded-record cache, and it
//!   seeds multipart boundaries.
//! - A record that does not decode (other version, damage the store's checksum missed,
//!   a foreign writer) is a miss, never an error on the hit path.

use quire_http::encoding::Coding;
use quire_http::key::VaryFields;
use quire_http::meta::{self, StoredMeta};

/// First bytes of every record.
const MAGIC: [u8; 4] = *b"QREC";
/// Record format version.
const VERSION: u8 = 1;
const KIND_OBJECT: u8 = b'O';
const KIND_VARY: u8 = b'V';

/// Directory levels tagged for prefix purges; deeper paths are tagged with their first
/// `DIR_TAGS_MAX` levels, so a prefix purge below that depth purges the whole level-16
/// directory (more than asked, never less).
pub const DIR_TAGS_MAX: usize = 16;

/// What the store holds under a record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// The response varies on these request fields: look up the variant key.
    Vary(VaryFields),
    /// A stored response (boxed: it is ten times the size of a `Vary`).
    Object(Box<ObjectRecord>),
}

/// A stored response: its head and timing, and where its bodies are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecord {
    /// Names the body entries; fresh for every fill.
    pub id: u64,
    /// The normalised URL, for tags and explain.
    pub url: String,
    /// Codings stored, with their body lengths, in preference-free order.
    pub codings: Vec<(Coding, u64)>,
    /// Status, headers, timing, validators, tags.
    pub meta: StoredMeta,
}

impl ObjectRecord {
    /// The codings stored.
    pub fn available(&self) -> Vec<Coding> {
        self.codings.iter().map(|&(c, _)| c).collect()
    }

    /// Where `coding`'s body lies in the entry's body section: `(start, end)`.
    pub fn coding_range(&self, coding: Coding) -> Option<(u64, u64)> {
        let mut at = 0u64;
        for &(c, len) in &self.codings {
            if c == coding {
                return Some((at, at + len));
            }
            at += len;
        }
        None
    }

    /// Bytes of all bodies together (the entry's body section).
    pub fn bodies_len(&self) -> u64 {
        self.codings.iter().map(|&(_, l)| l).sum()
    }
}

/// Why a record could not be encoded (a field beyond the meta codec's limits).
#[derive(Debug, thiserror::Error)]
#[error("response head cannot be stored: {0}")]
pub struct EncodeError(#[from] pub meta::MetaError);

/// Encodes a record as the store's meta bytes.
pub fn encode(record: &Record) -> Result<Vec<u8>, EncodeError> {
    match record {
        Record::Vary(v) => Ok(encode_vary(v)),
        Record::Object(o) => encode_object(o),
    }
}

fn header(kind: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind);
    out
}

/// Encodes a [`Record::Vary`].
pub fn encode_vary(v: &VaryFields) -> Vec<u8> {
    let mut out = header(KIND_VARY);
    let text = v.to_string();
    out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

/// Encodes a [`Record::Object`].
pub fn encode_object(o: &ObjectRecord) -> Result<Vec<u8>, EncodeError> {
    let mut out = header(KIND_OBJECT);
    out.extend_from_slice(&o.id.to_le_bytes());
    out.extend_from_slice(&(o.url.len() as u32).to_le_bytes());
    out.extend_from_slice(o.url.as_bytes());
    out.push(o.codings.len() as u8);
    for &(c, len) in &o.codings {
        out.push(coding_tag(c));
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(&meta::encode(&o.meta)?);
    Ok(out)
}

/// Decodes a record; `None` for anything that is not a whole, valid record.
pub fn decode(buf: &[u8]) -> Option<Record> {
    let mut r = buf.strip_prefix(&MAGIC)?;
    let (&version, rest) = r.split_first()?;
    if version != VERSION {
        return None;
    }
    let (&kind, rest) = rest.split_first()?;
    r = rest;
    match kind {
        KIND_VARY => {
            let text = take_str(&mut r)?;
            if !r.is_empty() {
                return None;
            }
            Some(Record::Vary(VaryFields::parse([text.as_bytes()])))
        }
        KIND_OBJECT => {
            let id = u64::from_le_bytes(take(&mut r, 8)?.try_into().ok()?);
            let url = take_str(&mut r)?.to_owned();
            let (&n, rest) = r.split_first()?;
            r = rest;
            let mut codings = Vec::with_capacity(usize::from(n));
            for _ in 0..n {
                let c = coding_from_tag(*take(&mut r, 1)?.first()?)?;
                let len = u64::from_le_bytes(take(&mut r, 8)?.try_into().ok()?);
                if codings.iter().any(|&(k, _)| k == c) {
                    return None;
                }
                codings.push((c, len));
            }
            let meta = meta::decode(r).ok()?;
            Some(Record::Object(Box::new(ObjectRecord {
                id,
                url,
                codings,
                meta,
            })))
        }
        _ => None,
    }
}

/// A 64-bit identity of a record's bytes, cheap to compute on every hit: for an
/// object record, a hash of its short prefix (object id, URL, the codings and their
/// lengths) combined with the checksum that ends the encoded head (which covers every
/// field a 304 or a soft purge changes); for anything else, a hash of the bytes. Two
/// records share it only on a 64-bit collision.
pub fn identity(buf: &[u8]) -> u64 {
    if buf.len() >= 6 + 8 + 4 + 8
        && buf.starts_with(&MAGIC)
        && buf[4] == VERSION
        && buf[5] == KIND_OBJECT
    {
        let url_len = u32::from_le_bytes([buf[14], buf[15], buf[16], buf[17]]) as usize;
        let n_at = 18 + url_len;
        if let Some(&n) = buf.get(n_at) {
            let prefix_end = n_at + 1 + 9 * usize::from(n);
            let tail = buf.len() - 8;
            if prefix_end <= tail {
                let sum = u64::from_le_bytes(buf[tail..].try_into().unwrap_or([0; 8]));
                return xxhash_rust::xxh3::xxh3_64(&buf[..prefix_end]) ^ sum.rotate_left(32);
            }
        }
    }
    xxhash_rust::xxh3::xxh3_64(buf)
}

fn take<'a>(r: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if r.len() < n {
        return None;
    }
    let (a, b) = r.split_at(n);
    *r = b;
    Some(a)
}

fn take_str<'a>(r: &mut &'a [u8]) -> Option<&'a str> {
    let len = u32::from_le_bytes(take(r, 4)?.try_into().ok()?) as usize;
    std::str::from_utf8(take(r, len)?).ok()
}

fn coding_tag(c: Coding) -> u8 {
    match c {
        Coding::Identity => b'i',
        Coding::Gzip => b'g',
        Coding::Br => b'b',
        Coding::Zstd => b'z',
        Coding::Dcz => b'd',
    }
}

fn coding_from_tag(t: u8) -> Option<Coding> {
    Some(match t {
        b'i' => Coding::Identity,
        b'g' => Coding::Gzip,
        b'b' => Coding::Br,
        b'z' => Coding::Zstd,
        b'd' => Coding::Dcz,
        _ => return None,
    })
}

/// The tag every record of `url` carries (exact-URL purge).
pub fn url_tag(url: &str) -> String {
    format!("u:{url}")
}

/// The tag of a directory (`scheme://host/dir/`, ending in `/`) for prefix purges.
pub fn dir_tag(dir: &str) -> String {
    format!("d:{dir}")
}

/// The tag of a surrogate key from the origin (`Surrogate-Key` / `Cache-Tag`).
pub fn key_tag(key: &str) -> String {
    format!("t:{key}")
}

/// Every tag a record of `url` with surrogate keys `keys` carries.
pub fn record_tags(url: &str, keys: &[String]) -> Vec<String> {
    let mut tags = vec![url_tag(url)];
    tags.extend(directories(url).into_iter().map(|d| dir_tag(&d)));
    tags.extend(keys.iter().map(|k| key_tag(k)));
    tags
}

/// The directories enclosing `url`'s path, outermost first, at most [`DIR_TAGS_MAX`]:
/// `http://h/a/b/c?q` → `http://h/`, `http://h/a/`, `http://h/a/b/`.
pub fn directories(url: &str) -> Vec<String> {
    let Some(path_start) = url
        .find("://")
        .and_then(|i| url[i + 3..].find('/').map(|j| i + 3 + j))
    else {
        return Vec::new();
    };
    let end = url.find('?').unwrap_or(url.len());
    let path = &url[path_start..end];
    let mut dirs = Vec::new();
    for (i, b) in path.bytes().enumerate() {
        if b == b'/' {
            dirs.push(url[..path_start + i + 1].to_owned());
            if dirs.len() == DIR_TAGS_MAX {
                break;
            }
        }
    }
    dirs
}

/// The directory tag a prefix purge uses: the prefix cut after its last `/` in the
/// path (a prefix ending mid-segment purges its whole directory: more than asked,
/// never less), capped at [`DIR_TAGS_MAX`] levels the same way.
pub fn prefix_directory(normalized_prefix: &str) -> Option<String> {
    directories(normalized_prefix).pop()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use http::{HeaderName, HeaderValue};
    use quire_http::meta::MetaFlags;

    /// A stored head of 5 body bytes, fresh for a minute (tests of the floors that
    /// store records).
    pub(crate) fn sample_meta() -> StoredMeta {
        StoredMeta {
            status: 200,
            headers: vec![(
                HeaderName::from_static("content-type"),
                HeaderValue::from_static("text/html"),
            )],
            request_time_ms: 1_000,
            response_time_ms: 1_010,
            date_ms: 1_000,
            age_at_store_ms: 10,
            freshness_lifetime_ms: Some(60_000),
            stale_while_revalidate_ms: None,
            stale_if_error_ms: Some(5_000),
            flags: MetaFlags::default(),
            etag: Some("\"v1\"".into()),
            last_modified_secs: None,
            content_encoding: None,
            body_len: 5,
            variant_key_hash: 7,
            vary: Vec::new(),
            tags: vec!["blog".into()],
        }
    }

    #[test]
    fn object_records_round_trip() {
        let r = Record::Object(Box::new(ObjectRecord {
            id: 0xdead_beef,
            url: "http://example.com/a?b=1".into(),
            codings: vec![(Coding::Identity, 5), (Coding::Gzip, 25)],
            meta: sample_meta(),
        }));
        let bytes = encode(&r).unwrap();
        assert_eq!(decode(&bytes), Some(r));
    }

    #[test]
    fn vary_records_round_trip() {
        let v = VaryFields::parse([b"Accept-Language, accept-encoding".as_slice()]);
        let r = Record::Vary(v.clone());
        assert_eq!(decode(&encode(&r).unwrap()), Some(Record::Vary(v)));
    }

    #[test]
    fn damaged_records_are_none() {
        let r = Record::Object(Box::new(ObjectRecord {
            id: 1,
            url: "http://h/".into(),
            codings: vec![(Coding::Identity, 5)],
            meta: sample_meta(),
        }));
        let bytes = encode(&r).unwrap();
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut]), None, "truncated at {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            // Either rejected or (for a flipped byte of the id/length/url) a different
            // but well-formed record: never a panic.
            let _ = decode(&b);
        }
        let mut b = bytes.clone();
        b[4] = 9;
        assert_eq!(decode(&b), None, "other version");
    }

    #[test]
    fn identity_follows_the_id_and_the_head() {
        let rec = |id: u64, age: u64| {
            let mut meta = sample_meta();
            meta.age_at_store_ms = age;
            encode(&Record::Object(Box::new(ObjectRecord {
                id,
                url: "http://h/".into(),
                codings: vec![(Coding::Identity, 5)],
                meta,
            })))
            .unwrap()
        };
        assert_eq!(identity(&rec(1, 10)), identity(&rec(1, 10)));
        assert_ne!(identity(&rec(1, 10)), identity(&rec(2, 10)), "another fill");
        assert_ne!(
            identity(&rec(1, 10)),
            identity(&rec(1, 11)),
            "a refreshed head"
        );
        let v = encode(&Record::Vary(VaryFields::parse([
            b"accept-language".as_slice()
        ])))
        .unwrap();
        assert_eq!(identity(&v), xxhash_rust::xxh3::xxh3_64(&v));
    }

    #[test]
    fn coding_ranges_follow_the_record_order() {
        let r = ObjectRecord {
            id: 1,
            url: "http://h/".into(),
            codings: vec![
                (Coding::Identity, 100),
                (Coding::Br, 30),
                (Coding::Gzip, 40),
            ],
            meta: sample_meta(),
        };
        assert_eq!(r.coding_range(Coding::Identity), Some((0, 100)));
        assert_eq!(r.coding_range(Coding::Br), Some((100, 130)));
        assert_eq!(r.coding_range(Coding::Gzip), Some((130, 170)));
        assert_eq!(r.coding_range(Coding::Zstd), None);
        assert_eq!(r.bodies_len(), 170);
    }

    #[test]
    fn directories_of_a_url() {
        assert_eq!(
            directories("http://h/a/b/c?x=/y"),
            vec!["http://h/", "http://h/a/", "http://h/a/b/"]
        );
        assert_eq!(directories("http://h/"), vec!["http://h/"]);
        assert_eq!(
            directories("http://h:8080/a/"),
            vec!["http://h:8080/", "http://h:8080/a/"]
        );
        let deep = format!("http://h{}", "/x".repeat(40));
        assert_eq!(directories(&deep).len(), DIR_TAGS_MAX);
        assert_eq!(
            prefix_directory("http://h/blog/2024").as_deref(),
            Some("http://h/blog/")
        );
        assert_eq!(
            prefix_directory("http://h/blog/").as_deref(),
            Some("http://h/blog/")
        );
    }

    #[test]
    fn record_tags_cover_url_dirs_and_keys() {
        let t = record_tags("http://h/a/b", &["k1".into()]);
        assert_eq!(
            t,
            vec!["u:http://h/a/b", "d:http://h/", "d:http://h/a/", "t:k1"]
        );
    }
}
