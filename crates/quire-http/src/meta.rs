//! The stored-metadata codec: the response head and timing kept beside each body.
//!
//! The store keeps every object as opaque `meta` bytes and `body` bytes; this module
//! defines `meta`. [`StoredMeta`] holds everything a hit needs — status, headers in
//! order, the timing facts of RFC 9111 §4.2.3 and the directives that govern reuse
//! already reduced to numbers and flags, validators, coding, body length, variant
//! hash, Vary names and purge tags — so the hit path never parses `Cache-Control`,
//! `Date`, `Age` or `ETag` again. The timing fields mirror
//! [`crate::freshness::StoredTiming`] one for one, in integer milliseconds.
//!
//! Key decisions:
//! - **The codec is pure and strict.** [`encode`] refuses a value it could not decode
//!   (every length is bounded, [`MetaError::TooLarge`]); [`decode`] checks magic,
//!   version, length and an xxh3-64 checksum before it reads a field, then checks
//!   every field. Any damage is a typed [`MetaError`], which the store treats as a
//!   miss — never a panic (STYLE.md: "Every on-disk record has magic, version and
//!   checksum").
//! - **One canonical encoding per value.** Absent optional numbers are written as 0
//!   and a non-zero slot without its presence bit is rejected, so `decode` accepts
//!   exactly what `encode` produces (up to checksum collisions).
//! - **Rendering the HTTP/1 head is not here**: that belongs to the server, which adds
//!   `Age` and `Cache-Status` per response.
//!
//! Layout, format version 1, little-endian:
//!
//! ```text
//! 0   magic "QMTA"            4 bytes
//! 4   version                 u16 (= FORMAT_VERSION)
//! 6   reserved                u16 (= 0)
//! 8   payload length n        u32 (≤ META_BYTES_MAX)
//! 12  payload                 n bytes
//! 12+n checksum               u64 = xxh3_64(bytes[0 .. 12+n])
//!
//! payload: status u16, flags u16, request_time_ms i64, response_time_ms i64,
//!   date_ms i64, age_at_store_ms u64, freshness_lifetime_ms u64,
//!   stale_while_revalidate_ms u64, stale_if_error_ms u64, last_modified_secs i64,
//!   body_len u64, variant_key_hash u64,
//!   [etag: u16 len, bytes] [content_encoding: u16 len, bytes]   (when flagged)
//!   headers: u16 count × (u16 name len, name, u16 value len, value)
//!   vary: u16 count × (u16 len, name)
//!   tags: u16 count × (u16 len, utf-8)
//! ```

use http::{HeaderName, HeaderValue};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use xxhash_rust::xxh3::xxh3_64;

use crate::freshness::StoredTiming;

/// The first bytes of every encoded record.
const MAGIC: [u8; 4] = *b"QMTA";
/// The format this build writes and reads.
const FORMAT_VERSION: u16 = 1;
/// Upper bound of a whole encoded record.
const META_BYTES_MAX: usize = 256 * 1024;
/// At most this many header lines are stored.
const HEADERS_MAX: usize = 256;
/// Longest stored header name.
const HEADER_NAME_BYTES_MAX: usize = 256;
/// Longest stored header value.
const HEADER_VALUE_BYTES_MAX: usize = 16 * 1024;
/// Longest stored ETag.
pub const ETAG_BYTES_MAX: usize = 1024;
/// Longest stored content coding.
const CONTENT_ENCODING_BYTES_MAX: usize = 64;
/// At most this many `Vary` names.
const VARY_MAX: usize = 32;
/// At most this many purge tags.
const TAGS_MAX: usize = 256;
/// Longest purge tag.
const TAG_BYTES_MAX: usize = 1024;

const HEAD_LEN: usize = 12;
const CHECKSUM_LEN: usize = 8;
const FIXED_PAYLOAD_LEN: usize = 2 + 2 + 10 * 8;

/// Boolean facts of a stored response: the same flags the reuse decision reads.
pub use crate::freshness::TimingFlags as MetaFlags;

/// Everything stored about a response besides its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMeta {
    /// Status code, 100–999.
    pub status: u16,
    /// Header lines in the order received, duplicates kept (RFC 9110 §5.3: order
    /// matters for repeated fields). Hop-by-hop and `Connection`-named fields are
    /// already removed (RFC 9111 §3.1).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// When the request that produced the response was sent (unix ms).
    pub request_time_ms: i64,
    /// When the response was received (unix ms).
    pub response_time_ms: i64,
    /// The response's `Date` (or `response_time` without one), unix ms. Kept for
    /// serving: the stored `Date` is not rewritten on hits.
    pub date_ms: i64,
    /// `corrected_initial_age` (RFC 9111 §4.2.3) in ms.
    pub age_at_store_ms: u64,
    /// Freshness lifetime (RFC 9111 §4.2.1, or heuristic §4.2.2) in ms; `None` means
    /// stale from the start. Milliseconds because a heuristic lifetime (a fraction of
    /// the time since `Last-Modified`) is not a whole number of seconds.
    pub freshness_lifetime_ms: Option<u64>,
    /// `stale-while-revalidate` window (RFC 5861 §3) in ms.
    pub stale_while_revalidate_ms: Option<u64>,
    /// `stale-if-error` window (RFC 5861 §4) in ms.
    pub stale_if_error_ms: Option<u64>,
    /// Reuse flags.
    pub flags: MetaFlags,
    /// The `ETag` field value as received, e.g. `"abc"` or `W/"abc"`.
    pub etag: Option<String>,
    /// `Last-Modified` in unix seconds.
    pub last_modified_secs: Option<i64>,
    /// The content coding of this body (`gzip`, `br`, ...); `None` for identity.
    pub content_encoding: Option<String>,
    /// Length of the body stored beside this record.
    pub body_len: u64,
    /// Hash of the request header values selected by `Vary` (RFC 9111 §4.1).
    pub variant_key_hash: u64,
    /// Lower-case field names from `Vary`, in order (not `*`: never stored).
    pub vary: Vec<HeaderName>,
    /// Purge tags (`Surrogate-Key` / `Cache-Tag`).
    pub tags: Vec<String>,
}

/// Why a buffer is not a valid record, or a value cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetaError {
    /// The buffer ends before `field`.
    #[error("stored meta truncated at {field}: {needed} bytes needed, {available} left")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes it needs.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// The first four bytes are not `MAGIC`.
    #[error("stored meta has bad magic")]
    BadMagic,
    /// Written by another format version.
    #[error("stored meta format version {found} is not supported (expected {expected})")]
    UnsupportedVersion {
        /// The version in the buffer.
        found: u16,
        /// `FORMAT_VERSION`.
        expected: u16,
    },
    /// The checksum does not match the bytes.
    #[error("stored meta checksum mismatch")]
    ChecksumMismatch,
    /// A length or count exceeds its limit.
    #[error("stored meta {field} too large: {len} > {max}")]
    TooLarge {
        /// The field.
        field: &'static str,
        /// Its length or count.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A field holds a value its type does not allow.
    #[error("stored meta has an invalid {field}")]
    Invalid {
        /// The field.
        field: &'static str,
    },
    /// Bytes follow the last field or the checksum.
    #[error("stored meta has {0} trailing bytes")]
    TrailingBytes(usize),
}

/// The bits of the payload's `flags` field.
mod bit {
    pub(super) const NO_CACHE: u16 = 1 << 0;
    pub(super) const FORBIDS_STALE: u16 = 1 << 1;
    pub(super) const HAS_VALIDATOR: u16 = 1 << 2;
    pub(super) const HEURISTIC: u16 = 1 << 3;
    pub(super) const IMMUTABLE: u16 = 1 << 4;
    pub(super) const LIFETIME: u16 = 1 << 8;
    pub(super) const SWR: u16 = 1 << 9;
    pub(super) const SIE: u16 = 1 << 10;
    pub(super) const LAST_MODIFIED: u16 = 1 << 11;
    pub(super) const ETAG: u16 = 1 << 12;
    pub(super) const CONTENT_ENCODING: u16 = 1 << 13;
    /// Every bit version 1 defines; others are rejected.
    pub(super) const KNOWN: u16 = 0x1f | 0x3f00;
}

impl StoredMeta {
    /// The reuse facts [`freshness::reuse`](crate::freshness::reuse) needs, from this
    /// record.
    pub fn timing(&self) -> StoredTiming {
        StoredTiming {
            request_time: from_unix_ms(self.request_time_ms),
            response_time: from_unix_ms(self.response_time_ms),
            date: from_unix_ms(self.date_ms),
            age_at_store: Duration::from_millis(self.age_at_store_ms),
            freshness_lifetime: self.freshness_lifetime_ms.map(Duration::from_millis),
            stale_while_revalidate: self.stale_while_revalidate_ms.map(Duration::from_millis),
            stale_if_error: self.stale_if_error_ms.map(Duration::from_millis),
            flags: self.flags,
        }
    }

    /// Records `t` in this record's timing fields, to the millisecond (durations over
    /// `u64::MAX` ms saturate).
    pub fn set_timing(&mut self, t: &StoredTiming) {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.request_time_ms = to_unix_ms(t.request_time);
        self.response_time_ms = to_unix_ms(t.response_time);
        self.date_ms = to_unix_ms(t.date);
        self.age_at_store_ms = ms(t.age_at_store);
        self.freshness_lifetime_ms = t.freshness_lifetime.map(ms);
        self.stale_while_revalidate_ms = t.stale_while_revalidate.map(ms);
        self.stale_if_error_ms = t.stale_if_error.map(ms);
        self.flags = t.flags;
    }
}

/// Unix milliseconds (negative before 1970) to a time.
fn from_unix_ms(ms: i64) -> SystemTime {
    let d = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH + d
    } else {
        UNIX_EPOCH - d
    }
}

/// A time to unix milliseconds, saturating at the `i64` range.
fn to_unix_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |m| -m),
    }
}

/// Encodes `meta` (layout in the module doc). Fails only when a length or count
/// exceeds its limit or the status is outside 100–999 — values [`decode`] would
/// reject, so a record that is written can always be read.
pub fn encode(meta: &StoredMeta) -> Result<Vec<u8>, MetaError> {
    if !(100..=999).contains(&meta.status) {
        return Err(MetaError::Invalid { field: "status" });
    }
    let mut out = Vec::with_capacity(HEAD_LEN + FIXED_PAYLOAD_LEN + 256);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // payload length, patched in `seal`
    put_fixed(&mut out, meta);
    if let Some(etag) = &meta.etag {
        put_bytes(&mut out, "etag", etag.as_bytes(), ETAG_BYTES_MAX)?;
    }
    if let Some(ce) = &meta.content_encoding {
        put_bytes(
            &mut out,
            "content_encoding",
            ce.as_bytes(),
            CONTENT_ENCODING_BYTES_MAX,
        )?;
    }
    put_lists(&mut out, meta)?;
    seal(out)
}

/// The fixed-size part of the payload: status, flags, times, lengths and hash.
fn put_fixed(out: &mut Vec<u8>, meta: &StoredMeta) {
    out.extend_from_slice(&meta.status.to_le_bytes());
    out.extend_from_slice(&flags_of(meta).to_le_bytes());
    for v in [meta.request_time_ms, meta.response_time_ms, meta.date_ms] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [
        Some(meta.age_at_store_ms),
        meta.freshness_lifetime_ms,
        meta.stale_while_revalidate_ms,
        meta.stale_if_error_ms,
    ] {
        out.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
    }
    out.extend_from_slice(&meta.last_modified_secs.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&meta.body_len.to_le_bytes());
    out.extend_from_slice(&meta.variant_key_hash.to_le_bytes());
}

/// The three counted lists: header lines, `Vary` names, tags.
fn put_lists(out: &mut Vec<u8>, meta: &StoredMeta) -> Result<(), MetaError> {
    put_count(out, "headers", meta.headers.len(), HEADERS_MAX)?;
    for (name, value) in &meta.headers {
        put_bytes(
            out,
            "header name",
            name.as_str().as_bytes(),
            HEADER_NAME_BYTES_MAX,
        )?;
        put_bytes(
            out,
            "header value",
            value.as_bytes(),
            HEADER_VALUE_BYTES_MAX,
        )?;
    }
    put_count(out, "vary", meta.vary.len(), VARY_MAX)?;
    for name in &meta.vary {
        put_bytes(
            out,
            "vary name",
            name.as_str().as_bytes(),
            HEADER_NAME_BYTES_MAX,
        )?;
    }
    put_count(out, "tags", meta.tags.len(), TAGS_MAX)?;
    for tag in &meta.tags {
        put_bytes(out, "tag", tag.as_bytes(), TAG_BYTES_MAX)?;
    }
    Ok(())
}

/// Checks the record's size, writes the payload length into the head and appends
/// the checksum.
fn seal(mut out: Vec<u8>) -> Result<Vec<u8>, MetaError> {
    let total = out.len() + CHECKSUM_LEN;
    if total > META_BYTES_MAX {
        return Err(MetaError::TooLarge {
            field: "record",
            len: total,
            max: META_BYTES_MAX,
        });
    }
    // META_BYTES_MAX < u32::MAX, so the payload length fits.
    let payload_len = (out.len() - HEAD_LEN) as u32;
    out[8..HEAD_LEN].copy_from_slice(&payload_len.to_le_bytes());
    let checksum = xxh3_64(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    debug_assert_eq!(out.len(), total);
    Ok(out)
}

/// Decodes a record written by [`encode`]. Every failure is a [`MetaError`]; nothing
/// in `buf` can make it panic or allocate more than `buf.len()` allows.
pub fn decode(buf: &[u8]) -> Result<StoredMeta, MetaError> {
    let payload = check_envelope(buf)?;
    let mut r = Reader { buf: payload };
    let status = r.u16("status")?;
    if !(100..=999).contains(&status) {
        return Err(MetaError::Invalid { field: "status" });
    }
    let flags = r.u16("flags")?;
    if flags & !bit::KNOWN != 0 {
        return Err(MetaError::Invalid { field: "flags" });
    }
    let has = |b: u16| flags & b != 0;
    let request_time_ms = r.i64("request_time_ms")?;
    let response_time_ms = r.i64("response_time_ms")?;
    let date_ms = r.i64("date_ms")?;
    let age_at_store_ms = r.u64("age_at_store_ms")?;
    let freshness_lifetime_ms = optional(r.u64("freshness_lifetime_ms")?, has(bit::LIFETIME))?;
    let stale_while_revalidate_ms = optional(r.u64("stale_while_revalidate_ms")?, has(bit::SWR))?;
    let stale_if_error_ms = optional(r.u64("stale_if_error_ms")?, has(bit::SIE))?;
    let last_modified_secs = optional_i64(r.i64("last_modified_secs")?, has(bit::LAST_MODIFIED))?;
    let body_len = r.u64("body_len")?;
    let variant_key_hash = r.u64("variant_key_hash")?;
    let etag = r.string_if(has(bit::ETAG), "etag", ETAG_BYTES_MAX)?;
    let content_encoding = r.string_if(
        has(bit::CONTENT_ENCODING),
        "content_encoding",
        CONTENT_ENCODING_BYTES_MAX,
    )?;
    let headers = r.list("headers", HEADERS_MAX, Reader::header_line)?;
    let vary = r.list("vary", VARY_MAX, |r| r.header_name("vary name"))?;
    let tags = r.list("tags", TAGS_MAX, |r| r.string("tag", TAG_BYTES_MAX))?;
    if !r.buf.is_empty() {
        return Err(MetaError::TrailingBytes(r.buf.len()));
    }
    Ok(StoredMeta {
        status,
        headers,
        request_time_ms,
        response_time_ms,
        date_ms,
        age_at_store_ms,
        freshness_lifetime_ms,
        stale_while_revalidate_ms,
        stale_if_error_ms,
        flags: flags_from(flags),
        etag,
        last_modified_secs,
        content_encoding,
        body_len,
        variant_key_hash,
        vary,
        tags,
    })
}

/// Checks magic, version, length and checksum; returns the payload.
fn check_envelope(buf: &[u8]) -> Result<&[u8], MetaError> {
    if buf.len() > META_BYTES_MAX {
        return Err(MetaError::TooLarge {
            field: "record",
            len: buf.len(),
            max: META_BYTES_MAX,
        });
    }
    let mut r = Reader { buf };
    if r.take("magic", 4)? != MAGIC {
        return Err(MetaError::BadMagic);
    }
    let version = r.u16("version")?;
    if version != FORMAT_VERSION {
        return Err(MetaError::UnsupportedVersion {
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    if r.u16("reserved")? != 0 {
        return Err(MetaError::Invalid { field: "reserved" });
    }
    let payload_len = r.u32("payload length")? as usize;
    if payload_len > META_BYTES_MAX {
        return Err(MetaError::TooLarge {
            field: "payload",
            len: payload_len,
            max: META_BYTES_MAX,
        });
    }
    let payload = r.take("payload", payload_len)?;
    let checksum = r.u64("checksum")?;
    if !r.buf.is_empty() {
        return Err(MetaError::TrailingBytes(r.buf.len()));
    }
    if xxh3_64(&buf[..HEAD_LEN + payload_len]) != checksum {
        return Err(MetaError::ChecksumMismatch);
    }
    Ok(payload)
}

fn flags_of(meta: &StoredMeta) -> u16 {
    let f = &meta.flags;
    [
        (f.no_cache, bit::NO_CACHE),
        (f.forbids_stale, bit::FORBIDS_STALE),
        (f.has_validator, bit::HAS_VALIDATOR),
        (f.heuristic, bit::HEURISTIC),
        (f.immutable, bit::IMMUTABLE),
        (meta.freshness_lifetime_ms.is_some(), bit::LIFETIME),
        (meta.stale_while_revalidate_ms.is_some(), bit::SWR),
        (meta.stale_if_error_ms.is_some(), bit::SIE),
        (meta.last_modified_secs.is_some(), bit::LAST_MODIFIED),
        (meta.etag.is_some(), bit::ETAG),
        (meta.content_encoding.is_some(), bit::CONTENT_ENCODING),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .fold(0, |acc, (_, b)| acc | b)
}

/// The reuse flags from a record's flag bits (the presence bits are read with their
/// fields).
fn flags_from(flags: u16) -> MetaFlags {
    let has = |b: u16| flags & b != 0;
    MetaFlags {
        no_cache: has(bit::NO_CACHE),
        forbids_stale: has(bit::FORBIDS_STALE),
        has_validator: has(bit::HAS_VALIDATOR),
        heuristic: has(bit::HEURISTIC),
        immutable: has(bit::IMMUTABLE),
    }
}

/// An absent optional is written as 0; anything else there is not canonical.
fn optional(v: u64, present: bool) -> Result<Option<u64>, MetaError> {
    match (present, v) {
        (true, v) => Ok(Some(v)),
        (false, 0) => Ok(None),
        (false, _) => Err(MetaError::Invalid {
            field: "absent optional",
        }),
    }
}

fn optional_i64(v: i64, present: bool) -> Result<Option<i64>, MetaError> {
    match (present, v) {
        (true, v) => Ok(Some(v)),
        (false, 0) => Ok(None),
        (false, _) => Err(MetaError::Invalid {
            field: "absent optional",
        }),
    }
}

fn put_count(
    out: &mut Vec<u8>,
    field: &'static str,
    n: usize,
    max: usize,
) -> Result<(), MetaError> {
    if n > max {
        return Err(MetaError::TooLarge { field, len: n, max });
    }
    // Every max is below u16::MAX.
    out.extend_from_slice(&(n as u16).to_le_bytes());
    Ok(())
}

fn put_bytes(
    out: &mut Vec<u8>,
    field: &'static str,
    bytes: &[u8],
    max: usize,
) -> Result<(), MetaError> {
    put_count(out, field, bytes.len(), max)?;
    out.extend_from_slice(bytes);
    Ok(())
}

// Every per-field limit fits the u16 length prefix, and the record limit the u32.
const _: () = assert!(HEADER_VALUE_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(ETAG_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(TAG_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(HEADERS_MAX <= u16::MAX as usize && TAGS_MAX <= u16::MAX as usize);
const _: () = assert!(META_BYTES_MAX <= u32::MAX as usize);

/// A bounds-checked cursor: every read says which field it was for.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], MetaError> {
        if self.buf.len() < n {
            return Err(MetaError::Truncated {
                field,
                needed: n,
                available: self.buf.len(),
            });
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], MetaError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(field, N)?);
        Ok(a)
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, MetaError> {
        self.array(field).map(u16::from_le_bytes)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, MetaError> {
        self.array(field).map(u32::from_le_bytes)
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, MetaError> {
        self.array(field).map(u64::from_le_bytes)
    }

    fn i64(&mut self, field: &'static str) -> Result<i64, MetaError> {
        self.array(field).map(i64::from_le_bytes)
    }

    /// A u16-length-prefixed byte string of at most `max` bytes.
    fn bytes(&mut self, field: &'static str, max: usize) -> Result<&'a [u8], MetaError> {
        let len = usize::from(self.u16(field)?);
        if len > max {
            return Err(MetaError::TooLarge { field, len, max });
        }
        self.take(field, len)
    }

    fn string(&mut self, field: &'static str, max: usize) -> Result<String, MetaError> {
        let bytes = self.bytes(field, max)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| MetaError::Invalid { field })
    }

    /// A string when `present` says the record has one; nothing is read otherwise.
    fn string_if(
        &mut self,
        present: bool,
        field: &'static str,
        max: usize,
    ) -> Result<Option<String>, MetaError> {
        present.then(|| self.string(field, max)).transpose()
    }

    /// One stored header line: its name, then its value.
    fn header_line(&mut self) -> Result<(HeaderName, HeaderValue), MetaError> {
        let name = self.header_name("header name")?;
        let value = self.bytes("header value", HEADER_VALUE_BYTES_MAX)?;
        let value = HeaderValue::from_bytes(value).map_err(|_| MetaError::Invalid {
            field: "header value",
        })?;
        Ok((name, value))
    }

    fn header_name(&mut self, field: &'static str) -> Result<HeaderName, MetaError> {
        let bytes = self.bytes(field, HEADER_NAME_BYTES_MAX)?;
        // HeaderName::as_str is lower-case; anything else was not written by encode.
        if bytes.iter().any(u8::is_ascii_uppercase) {
            return Err(MetaError::Invalid { field });
        }
        HeaderName::from_bytes(bytes).map_err(|_| MetaError::Invalid { field })
    }

    /// A u16 count (at most `max`) of items read by `item`. Allocation is bounded by
    /// `max`, not by the count in the buffer.
    fn list<T>(
        &mut self,
        field: &'static str,
        max: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, MetaError>,
    ) -> Result<Vec<T>, MetaError> {
        let n = usize::from(self.u16(field)?);
        if n > max {
            return Err(MetaError::TooLarge { field, len: n, max });
        }
        let mut out = Vec::with_capacity(n.min(self.buf.len()));
        for _ in 0..n {
            out.push(item(self)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
