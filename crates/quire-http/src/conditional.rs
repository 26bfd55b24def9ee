//! Conditional and range requests answered from a stored response (RFC 9110 §13, §14).
//!
//! The hit path calls [`evaluate_preconditions`] first (304 or not), then
//! [`evaluate_range`] (206, 416 or the full body). Both are pure functions of the
//! request head and the stored validators; the server renders the answer with
//! [`not_modified_headers`], [`content_range`], [`content_range_unsatisfied`] and
//! [`multipart_plan`].
//!
//! Key decisions, each argued where it is implemented:
//! - **A cache evaluates only the validation preconditions.** `If-None-Match` and
//!   `If-Modified-Since` ask "is my copy still good?", which the stored response can
//!   answer. `If-Match` and `If-Unmodified-Since` guard against lost updates at the
//!   origin; a stored validator may lag the origin's current one, so quire returns
//!   [`Precondition::Forward`] for them (RFC 9111 §4.3.2: a cache MUST NOT evaluate
//!   conditionals that only apply to an origin server).
//! - **When in doubt, send the full response.** A malformed `If-None-Match` matches
//!   nothing (a 200 is always a correct answer to a conditional GET), and a Range the
//!   parser does not accept is ignored (§14.2: "A server MAY ignore the Range header
//!   field").
//! - **Range sets are bounded, sorted and coalesced.** More than [`RANGES_MAX`]
//!   range-specs → the full body; overlapping, unsorted or nearly adjacent ranges are
//!   merged (§15.3.7.2, §14.2, §17.15), so a hostile header never multiplies the bytes sent.
//! - **Every parser is bounded** by [`ETAG_LIST_ITEMS_MAX`] and [`RANGES_MAX`] and is
//!   total over arbitrary bytes.

use std::time::{Duration, SystemTime};

use http::header::{
    CACHE_CONTROL, CONTENT_LOCATION, DATE, ETAG, EXPIRES, IF_MATCH, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, LAST_MODIFIED, RANGE, VARY,
};
use http::{HeaderMap, HeaderName, Method};

/// At most this many entity-tags are examined across all `If-None-Match` lines; the
/// rest never match. Real clients send one.
pub const ETAG_LIST_ITEMS_MAX: usize = 64;

/// At most this many range-specs are accepted in one `Range` header; a longer set is
/// ignored and the full body is sent (see [`evaluate_range`]).
pub const RANGES_MAX: usize = 32;

/// Ranges separated by fewer bytes than this are merged into one part: the gap is
/// cheaper than the part headers of a multipart response (§15.3.7.2 allows coalescing
/// "ranges that are separated by a gap that is smaller than the overhead of sending
/// multiple parts").
pub const RANGE_GAP_COALESCE_BYTES: u64 = 80;

/// The outcome of the validation preconditions (RFC 9110 §13.2.2) for a stored
/// response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Answer 304 Not Modified with [`not_modified_headers`] (RFC 9110 §15.4.5).
    NotModified,
    /// Serve the stored response (then look at `Range`).
    Proceed,
    /// Do not answer from the cache: the request carries preconditions meant for the
    /// origin (`If-Match`, `If-Unmodified-Since`) or its method is not GET/HEAD.
    Forward,
}

/// The outcome of `Range` evaluation (RFC 9110 §14.2, §13.1.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeAnswer {
    /// 200 with the whole body: no `Range`, or a `Range` that is ignored.
    Full,
    /// 206 with these inclusive byte ranges: sorted, disjoint, non-empty, each within
    /// the body, at most [`RANGES_MAX`]. One range → `Content-Range` ([`content_range`]);
    /// several → `multipart/byteranges` ([`multipart_plan`]).
    Partial(Vec<(u64, u64)>),
    /// 416 with `Content-Range: bytes */len` ([`content_range_unsatisfied`]).
    Unsatisfiable,
}

/// An entity-tag (RFC 9110 §8.8.3): `W/"opaque"` or `"opaque"`. `opaque` excludes the
/// quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityTag<'a> {
    /// True for a weak tag (`W/` prefix).
    pub weak: bool,
    /// The characters between the quotes.
    pub opaque: &'a str,
}

impl EntityTag<'_> {
    /// RFC 9110 §8.8.3.2 strong comparison: both strong and opaque tags equal.
    pub fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }

    /// RFC 9110 §8.8.3.2 weak comparison: opaque tags equal, weakness ignored.
    pub fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque == other.opaque
    }
}

/// Parses one entity-tag (RFC 9110 §8.8.3): `[ W/ ] DQUOTE *etagc DQUOTE`, with OWS
/// trimmed. `None` for anything else, including an unquoted tag.
pub fn parse_entity_tag(s: &str) -> Option<EntityTag<'_>> {
    let s = s.trim_matches([' ', '\t']);
    match scan_entity_tag(s.as_bytes()) {
        Some((tag, [])) => Some(tag_from(s, tag)),
        _ => None,
    }
}

/// Evaluates the validation preconditions of a request against a stored response, in
/// the order of RFC 9110 §13.2.2.
///
/// `stored_last_modified` is the stored `Last-Modified`; when the stored response has
/// none, RFC 9111 §4.3.2 lets the cache use its `Date` (or the time it was received)
/// instead, and the caller passes that.
pub fn evaluate_preconditions(
    method: &Method,
    req_headers: &HeaderMap,
    stored_etag: Option<&str>,
    stored_last_modified: Option<SystemTime>,
) -> Precondition {
    // A cache answers only GET and HEAD from storage (RFC 9111 §4); for any other
    // method the conditionals are the origin's to evaluate (RFC 9111 §4.3.2).
    if method != Method::GET && method != Method::HEAD {
        return Precondition::Forward;
    }
    // RFC 9110 §13.2.2 steps 1–2: If-Match / If-Unmodified-Since protect the origin's
    // current state (§13.1.1, §13.1.4). The stored validator may be older than the
    // origin's, so a 412 or a 200 decided here could be wrong: forward (RFC 9111
    // §4.3.2, "conditional header fields that only apply to an origin server").
    if req_headers.contains_key(IF_MATCH) || req_headers.contains_key(IF_UNMODIFIED_SINCE) {
        return Precondition::Forward;
    }
    // §13.2.2 step 3: If-None-Match, when present, decides alone; If-Modified-Since is
    // then ignored (§13.1.3: "A recipient MUST ignore If-Modified-Since if the request
    // contains an If-None-Match header field").
    if req_headers.contains_key(IF_NONE_MATCH) {
        return if if_none_match_matches(req_headers, stored_etag) {
            // §13.1.2: a match on GET/HEAD → 304.
            Precondition::NotModified
        } else {
            Precondition::Proceed
        };
    }
    // §13.2.2 step 4.
    if let Some(since) = if_modified_since(req_headers) {
        if let Some(last_modified) = stored_last_modified {
            // §13.1.3: not modified if the last modification is "earlier or equal
            // to" the date given. HTTP-dates have one-second resolution.
            if unix_secs(last_modified) <= unix_secs(since) {
                return Precondition::NotModified;
            }
        }
    }
    Precondition::Proceed
}

/// True when `If-None-Match` (all lines, as one list, RFC 9110 §5.2) matches the
/// stored ETag by weak comparison (§13.1.2: "A recipient MUST use the weak comparison
/// function when comparing entity tags for If-None-Match").
fn if_none_match_matches(req_headers: &HeaderMap, stored_etag: Option<&str>) -> bool {
    let lines = req_headers.get_all(IF_NONE_MATCH);
    // §13.1.2: "*" is true if a current representation exists; the cache holds one.
    // The grammar is `"*" / #entity-tag`, so "*" must be the whole field value.
    if lines
        .iter()
        .any(|v| v.as_bytes().trim_ascii() == b"*".as_slice())
    {
        return true;
    }
    let Some(stored) = stored_etag.and_then(parse_entity_tag) else {
        return false;
    };
    let mut seen = 0usize;
    for line in lines {
        let Ok(line) = line.to_str() else {
            // A line with obs-text (allowed in etagc) is skipped: quire keeps ETags as
            // visible-ASCII strings, so no tag in such a line can equal a stored one
            // that came from an origin header through the same `to_str`.
            continue;
        };
        for tag in EntityTagList::new(line) {
            seen += 1;
            if seen > ETAG_LIST_ITEMS_MAX {
                return false;
            }
            if tag.weak_eq(&stored) {
                return true;
            }
        }
    }
    false
}

/// The `If-Modified-Since` date, or `None` when it must be ignored: absent, more than
/// one line, or not a valid HTTP-date (RFC 9110 §13.1.3: "A recipient MUST ignore the
/// If-Modified-Since header field if the received field value is not a valid
/// HTTP-date, the field value has more than one member").
fn if_modified_since(req_headers: &HeaderMap) -> Option<SystemTime> {
    single_line(req_headers, &IF_MODIFIED_SINCE).and_then(http_date)
}

/// Evaluates `Range` (and `If-Range`) against a stored body of `body_len` bytes
/// (RFC 9110 §14.2, §13.1.5, §13.2.2 step 5).
///
/// `stored_date` is the stored `Date`, needed to decide whether `Last-Modified` is a
/// strong validator for an `If-Range` date (§8.8.2.2).
///
/// Decisions:
/// - Range on any method but GET is ignored (§14.2: "GET is the only method for which
///   range handling is defined").
/// - An unknown range unit, a syntactically invalid set, several `Range` lines or a
///   failed `If-Range` → [`RangeAnswer::Full`] (§14.2, §13.1.5).
/// - More than [`RANGES_MAX`] range-specs → [`RangeAnswer::Full`], not 416: the set
///   may well be satisfiable, ignoring Range is always allowed (§14.2), and §17.15
///   tells servers to "ignore, coalesce, or reject egregious range requests".
/// - A zero-length body is always sent whole: no byte range can describe any part of
///   it, and a 200 with an empty body answers `bytes=-N` better than a 416.
pub fn evaluate_range(
    req_headers: &HeaderMap,
    method: &Method,
    body_len: u64,
    stored_etag: Option<&str>,
    stored_last_modified: Option<SystemTime>,
    stored_date: Option<SystemTime>,
) -> RangeAnswer {
    if method != Method::GET {
        return RangeAnswer::Full;
    }
    let mut ranges = req_headers.get_all(RANGE).iter();
    let (Some(range), None) = (ranges.next(), ranges.next()) else {
        // Absent, or several lines: Range is a singleton field (§14.2), so two lines
        // are an invalid field value, which a server may ignore.
        return RangeAnswer::Full;
    };
    // §13.1.5: "A server MUST ignore an If-Range header field received in a request
    // that does not contain a Range header field" — handled by returning above.
    if req_headers.contains_key(IF_RANGE)
        && !if_range_holds(req_headers, stored_etag, stored_last_modified, stored_date)
    {
        // §13.2.2 step 5: If-Range false → "ignore the Range header field and respond
        // 200 (OK)".
        return RangeAnswer::Full;
    }
    let Some(specs) = parse_byte_ranges(range.as_bytes()) else {
        return RangeAnswer::Full;
    };
    if body_len == 0 {
        return RangeAnswer::Full;
    }
    resolve(&specs, body_len)
}

/// RFC 9110 §13.1.5: the If-Range condition.
fn if_range_holds(
    req_headers: &HeaderMap,
    stored_etag: Option<&str>,
    stored_last_modified: Option<SystemTime>,
    stored_date: Option<SystemTime>,
) -> bool {
    let Some(value) = single_line(req_headers, &IF_RANGE) else {
        return false;
    };
    let value = value.trim_matches([' ', '\t']);
    if value.starts_with('"') || value.starts_with("W/") {
        // §13.1.5 rule 1: "the condition is true if the entity-tag matches ... using
        // the strong comparison function (a weak entity-tag can never match)".
        return match (
            parse_entity_tag(value),
            stored_etag.and_then(parse_entity_tag),
        ) {
            (Some(asked), Some(stored)) => asked.strong_eq(&stored),
            _ => false,
        };
    }
    // §13.1.5 rule 2: a valid HTTP-date that exactly equals a strong Last-Modified.
    let (Some(asked), Some(last_modified)) = (http_date(value), stored_last_modified) else {
        return false;
    };
    // §8.8.2.2: for a cache, Last-Modified is strong only if the stored Date is at
    // least one second after it (the representation cannot have changed unseen
    // within the second Last-Modified names).
    let strong = stored_date.is_some_and(|date| unix_secs(date) > unix_secs(last_modified));
    strong && unix_secs(asked) == unix_secs(last_modified)
}

/// One range-spec of a byte range set (RFC 9110 §14.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ByteRangeSpec {
    /// `first-last` or `first-` (`last` = None).
    Int { first: u64, last: Option<u64> },
    /// `-suffix`.
    Suffix(u64),
}

/// Parses `bytes=...` into its range-specs, or `None` when Range must be ignored:
/// another unit (§14.1: units are case-insensitive; §14.2: "MUST ignore a Range
/// header field that contains a range unit it does not understand"), a syntax error,
/// `last-pos < first-pos` (§14.1.2: such a range-spec is invalid), no range-spec at
/// all, or more than [`RANGES_MAX`] of them.
fn parse_byte_ranges(value: &[u8]) -> Option<Vec<ByteRangeSpec>> {
    let value = value.trim_ascii();
    let eq = value.iter().position(|&b| b == b'=')?;
    if !value[..eq].eq_ignore_ascii_case(b"bytes") {
        return None;
    }
    let mut specs = Vec::new();
    for item in value[eq + 1..].split(|&b| b == b',') {
        let item = item.trim_ascii();
        // §5.6.1: empty list elements are ignored.
        if item.is_empty() {
            continue;
        }
        if specs.len() == RANGES_MAX {
            return None;
        }
        specs.push(parse_range_spec(item)?);
    }
    (!specs.is_empty()).then_some(specs)
}

fn parse_range_spec(item: &[u8]) -> Option<ByteRangeSpec> {
    let dash = item.iter().position(|&b| b == b'-')?;
    let (first, last) = (&item[..dash], &item[dash + 1..]);
    if first.is_empty() {
        return Some(ByteRangeSpec::Suffix(parse_pos(last)?));
    }
    let first = parse_pos(first)?;
    let last = if last.is_empty() {
        None
    } else {
        Some(parse_pos(last)?)
    };
    if last.is_some_and(|l| l < first) {
        return None;
    }
    Some(ByteRangeSpec::Int { first, last })
}

/// `1*DIGIT`, saturating at `u64::MAX`: a position beyond any body is still valid
/// syntax (it is merely unsatisfiable or clamped), so it must not become an error.
fn parse_pos(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u64, |acc, &d| {
        acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// Maps range-specs onto a body of `len > 0` bytes (RFC 9110 §14.1.2), drops the
/// unsatisfiable ones, and sorts and coalesces the rest (§15.3.7.2).
fn resolve(specs: &[ByteRangeSpec], len: u64) -> RangeAnswer {
    debug_assert!(len > 0);
    let mut ranges: Vec<(u64, u64)> = specs
        .iter()
        .filter_map(|spec| match *spec {
            // §14.1.2: satisfiable iff first-pos < length; a last-pos at or past the
            // end is clamped to length - 1.
            ByteRangeSpec::Int { first, last } if first < len => {
                Some((first, last.map_or(len - 1, |l| l.min(len - 1))))
            }
            ByteRangeSpec::Int { .. } => None,
            // §14.1.2: a suffix-length of 0 is unsatisfiable; one longer than the
            // representation selects all of it.
            ByteRangeSpec::Suffix(0) => None,
            ByteRangeSpec::Suffix(n) => Some((len - n.min(len), len - 1)),
        })
        .collect();
    if ranges.is_empty() {
        // §14.1.2 / §15.5.17: no range-spec is satisfiable → 416.
        return RangeAnswer::Unsatisfiable;
    }
    RangeAnswer::Partial(coalesce(&mut ranges))
}

/// Sorts inclusive ranges and merges those that overlap or are separated by fewer
/// than [`RANGE_GAP_COALESCE_BYTES`] (§15.3.7.2: a server "MAY coalesce any of the ranges
/// that overlap, or that are separated by a gap that is smaller than the overhead of
/// sending multiple parts, regardless of the order"; §17.15 on overlapping and
/// out-of-order sets as a denial-of-service vector).
fn coalesce(ranges: &mut [(u64, u64)]) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for &(start, end) in ranges.iter() {
        match out.last_mut() {
            Some(prev) if start <= prev.1.saturating_add(RANGE_GAP_COALESCE_BYTES) => {
                prev.1 = prev.1.max(end);
            }
            _ => out.push((start, end)),
        }
    }
    out
}

/// `Content-Range` of a single-part 206 (RFC 9110 §14.4): `bytes first-last/len`.
pub fn content_range(start: u64, end_inclusive: u64, body_len: u64) -> String {
    debug_assert!(start <= end_inclusive && end_inclusive < body_len);
    format!("bytes {start}-{end_inclusive}/{body_len}")
}

/// `Content-Range` of a 416 (RFC 9110 §14.4, §15.5.17): `bytes */len`.
pub fn content_range_unsatisfied(body_len: u64) -> String {
    format!("bytes */{body_len}")
}

/// One part of a `multipart/byteranges` body: write `head`, then the body bytes
/// `range.0..=range.1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartPart {
    /// Delimiter and part header section, ending with the empty line.
    pub head: Vec<u8>,
    /// Inclusive byte range of the stored body.
    pub range: (u64, u64),
}

/// How to write a multi-range 206 (RFC 9110 §15.3.7.2, §14.6): the `Content-Type` and
/// `Content-Length` of the response, the parts in order, then `trailer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartPlan {
    /// `multipart/byteranges; boundary=...`.
    pub content_type: String,
    /// The parts, in the order of [`RangeAnswer::Partial`].
    pub parts: Vec<MultipartPart>,
    /// The close delimiter.
    pub trailer: Vec<u8>,
    /// Total body bytes: every head, every range and the trailer.
    pub content_length: u64,
}

/// A boundary derived from `seed` (e.g. a hash of the key and the ETag): pure and
/// reproducible, 70 characters at most as RFC 2046 §5.1.1 requires, and made of
/// characters that are also sf-token and `token` safe so it needs no quoting.
pub fn boundary_for(seed: u64) -> String {
    format!(
        "quire-{:016x}{:016x}",
        seed,
        seed.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15
    )
}

/// Plans a `multipart/byteranges` body (RFC 9110 §14.6) for `ranges` of a body of
/// `body_len` bytes whose own `Content-Type` is `content_type`. Each part carries that
/// `Content-Type` and its `Content-Range` (§15.3.7.2: the server MUST generate a
/// `Content-Range` in each part's header section).
///
/// A single range should not be sent as multipart (§15.3.7.2: "a server ... MUST NOT
/// generate a multipart response to a request for a single range"); use
/// [`content_range`] for it.
pub fn multipart_plan(
    ranges: &[(u64, u64)],
    body_len: u64,
    content_type: Option<&str>,
    boundary: &str,
) -> MultipartPlan {
    let mut parts = Vec::with_capacity(ranges.len());
    let mut content_length = 0u64;
    for &(start, end) in ranges {
        let mut head = format!("\r\n--{boundary}\r\n");
        if let Some(ct) = content_type {
            head.push_str("Content-Type: ");
            head.push_str(ct);
            head.push_str("\r\n");
        }
        head.push_str("Content-Range: ");
        head.push_str(&content_range(start, end, body_len));
        head.push_str("\r\n\r\n");
        content_length += head.len() as u64 + (end - start + 1);
        parts.push(MultipartPart {
            head: head.into_bytes(),
            range: (start, end),
        });
    }
    let trailer = format!("\r\n--{boundary}--\r\n").into_bytes();
    content_length += trailer.len() as u64;
    MultipartPlan {
        content_type: format!("multipart/byteranges; boundary={boundary}"),
        parts,
        trailer,
        content_length,
    }
}

/// True when a stored header belongs in a 304 (RFC 9110 §15.4.5): the server "MUST
/// generate any of the following header fields that would have been sent in a 200
/// (OK) response to the same request: Content-Location, Date, ETag, and Vary;
/// Cache-Control and Expires". Other representation metadata SHOULD NOT be sent,
/// except to guide cache updates: `Last-Modified` when there is no `ETag`.
pub fn is_not_modified_header(name: &HeaderName, stored_has_etag: bool) -> bool {
    name == CACHE_CONTROL
        || name == CONTENT_LOCATION
        || name == DATE
        || name == ETAG
        || name == EXPIRES
        || name == VARY
        || (name == LAST_MODIFIED && !stored_has_etag)
}

/// The stored headers a 304 carries ([`is_not_modified_header`]), every line kept.
/// `Age` and `Cache-Status` are the server's to add.
pub fn not_modified_headers(stored: &HeaderMap) -> HeaderMap {
    let has_etag = stored.contains_key(ETAG);
    let mut out = HeaderMap::new();
    for (name, value) in stored {
        if is_not_modified_header(name, has_etag) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// An iterator over the entity-tags of a list (RFC 9110 §5.6.1 `#entity-tag`). Commas
/// inside quotes belong to the tag. An element that is not an entity-tag is skipped up
/// to the next comma; an unbalanced quote ends the list.
#[derive(Debug)]
struct EntityTagList<'a> {
    rest: &'a str,
}

impl<'a> EntityTagList<'a> {
    fn new(s: &'a str) -> Self {
        EntityTagList { rest: s }
    }
}

impl<'a> Iterator for EntityTagList<'a> {
    type Item = EntityTag<'a>;

    fn next(&mut self) -> Option<EntityTag<'a>> {
        loop {
            let s = self.rest.trim_start_matches([' ', '\t', ',']);
            if s.is_empty() {
                self.rest = s;
                return None;
            }
            if let Some((tag, rest)) = scan_entity_tag(s.as_bytes()) {
                let after = &s[s.len() - rest.len()..];
                let trimmed = after.trim_start_matches([' ', '\t']);
                if trimmed.is_empty() || trimmed.starts_with(',') {
                    self.rest = trimmed;
                    return Some(tag_from(s, tag));
                }
            }
            // Not an entity-tag: skip this element. A quote opened in it must close
            // before the comma counts; if it never closes, the list ends here.
            self.rest = skip_element(s)?;
        }
    }
}

/// Byte offsets of the opaque tag inside the scanned string, and the weak flag.
#[derive(Debug, Clone, Copy)]
struct Scanned {
    weak: bool,
    opaque_start: usize,
    opaque_end: usize,
}

/// Scans one entity-tag at the start of `s`; returns it and the bytes after it.
fn scan_entity_tag(s: &[u8]) -> Option<(Scanned, &[u8])> {
    // §8.8.3: `weak = %s"W/"` — case-sensitive.
    let (weak, start) = if s.starts_with(b"W/") {
        (true, 2)
    } else {
        (false, 0)
    };
    if s.get(start) != Some(&b'"') {
        return None;
    }
    let opaque_start = start + 1;
    let len = s[opaque_start..].iter().position(|&b| b == b'"')?;
    let opaque = &s[opaque_start..opaque_start + len];
    // §8.8.3: etagc = %x21 / %x23-7E / obs-text.
    if !opaque.iter().all(|&b| b == 0x21 || b >= 0x23 && b != 0x7f) {
        return None;
    }
    let opaque_end = opaque_start + len;
    Some((
        Scanned {
            weak,
            opaque_start,
            opaque_end,
        },
        &s[opaque_end + 1..],
    ))
}

fn tag_from<'a>(s: &'a str, scanned: Scanned) -> EntityTag<'a> {
    EntityTag {
        weak: scanned.weak,
        // Boundaries sit next to ASCII quotes, so they are char boundaries.
        opaque: &s[scanned.opaque_start..scanned.opaque_end],
    }
}

/// Skips one list element (up to and including the next comma outside quotes).
/// `None` when a quote never closes.
fn skip_element(s: &str) -> Option<&str> {
    let mut in_quotes = false;
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'"' => in_quotes = !in_quotes,
            b',' if !in_quotes => return Some(&s[i + 1..]),
            _ => {}
        }
    }
    if in_quotes {
        None
    } else {
        Some("")
    }
}

/// The value of a field that must occur once, as visible ASCII.
fn single_line<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    let mut lines = headers.get_all(name).iter();
    match (lines.next(), lines.next()) {
        (Some(v), None) => v.to_str().ok(),
        _ => None,
    }
}

/// An HTTP-date (RFC 9110 §5.6.7: IMF-fixdate and the two obsolete forms).
fn http_date(s: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(s.trim_matches([' ', '\t'])).ok()
}

/// Whole seconds since the epoch (negative before it), so a stored time with
/// sub-second precision compares like the HTTP-date it was sent as.
fn unix_secs(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => {
            let d: Duration = e.duration();
            -i64::try_from(d.as_secs()).unwrap_or(i64::MAX) - i64::from(d.subsec_nanos() > 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;

    const STORED_ETAG: &str = "\"v1\"";

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn date(secs: u64) -> String {
        httpdate::fmt_http_date(t(secs))
    }

    fn req(pairs: &[(HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(n.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn pre(pairs: &[(HeaderName, &str)]) -> Precondition {
        evaluate_preconditions(
            &Method::GET,
            &req(pairs),
            Some(STORED_ETAG),
            Some(t(1_000_000)),
        )
    }

    fn range(pairs: &[(HeaderName, &str)], len: u64) -> RangeAnswer {
        evaluate_range(
            &req(pairs),
            &Method::GET,
            len,
            Some(STORED_ETAG),
            Some(t(1_000_000)),
            Some(t(1_000_100)),
        )
    }

    fn partial(v: &[(u64, u64)]) -> RangeAnswer {
        RangeAnswer::Partial(v.to_vec())
    }

    /// RFC 9110 §8.8.3: grammar of an entity-tag.
    #[test]
    fn entity_tag_grammar() {
        assert_eq!(
            parse_entity_tag("W/\"a,b\""),
            Some(EntityTag {
                weak: true,
                opaque: "a,b"
            })
        );
        assert_eq!(
            parse_entity_tag(" \"\" "),
            Some(EntityTag {
                weak: false,
                opaque: ""
            })
        );
        assert_eq!(parse_entity_tag("abc"), None);
        assert_eq!(parse_entity_tag("w/\"abc\""), None, "W/ is case-sensitive");
        assert_eq!(parse_entity_tag("\"abc"), None);
        assert_eq!(parse_entity_tag("\"a\"b"), None);
        assert_eq!(parse_entity_tag("\"a b\""), None, "space is not etagc");
    }

    /// RFC 9110 §8.8.3.2: the comparison table.
    #[test]
    fn strong_and_weak_comparison_table() {
        let w1 = parse_entity_tag("W/\"1\"").unwrap();
        let w2 = parse_entity_tag("W/\"2\"").unwrap();
        let s1 = parse_entity_tag("\"1\"").unwrap();
        assert!(!w1.strong_eq(&w1) && w1.weak_eq(&w1));
        assert!(!w1.strong_eq(&w2) && !w1.weak_eq(&w2));
        assert!(!w1.strong_eq(&s1) && w1.weak_eq(&s1));
        assert!(s1.strong_eq(&s1) && s1.weak_eq(&s1));
    }

    /// RFC 9110 §13.1.2: matching If-None-Match on GET → 304.
    #[test]
    fn if_none_match_exact_is_not_modified() {
        assert_eq!(pre(&[(IF_NONE_MATCH, "\"v1\"")]), Precondition::NotModified);
        assert_eq!(pre(&[(IF_NONE_MATCH, "\"v2\"")]), Precondition::Proceed);
    }

    /// RFC 9110 §13.1.2: If-None-Match uses weak comparison, in both directions.
    #[test]
    fn if_none_match_uses_weak_comparison() {
        assert_eq!(
            pre(&[(IF_NONE_MATCH, "W/\"v1\"")]),
            Precondition::NotModified
        );
        let weak_stored = evaluate_preconditions(
            &Method::GET,
            &req(&[(IF_NONE_MATCH, "\"v1\"")]),
            Some("W/\"v1\""),
            None,
        );
        assert_eq!(weak_stored, Precondition::NotModified);
    }

    /// RFC 9110 §5.6.1, §5.2: lists across elements and lines; commas in tags.
    #[test]
    fn if_none_match_list_and_lines() {
        assert_eq!(
            pre(&[(IF_NONE_MATCH, "\"a\", W/\"b\",  \"v1\"")]),
            Precondition::NotModified
        );
        assert_eq!(
            pre(&[(IF_NONE_MATCH, "\"a\""), (IF_NONE_MATCH, "\"v1\"")]),
            Precondition::NotModified
        );
        // "v1, x" is one tag containing a comma, not "v1".
        assert_eq!(pre(&[(IF_NONE_MATCH, "\"v1,x\"")]), Precondition::Proceed);
        // A malformed element is skipped, the next one still counts.
        assert_eq!(
            pre(&[(IF_NONE_MATCH, "bogus, \"v1\"")]),
            Precondition::NotModified
        );
    }

    /// RFC 9110 §13.1.2: `*` matches any current representation — the stored one.
    #[test]
    fn if_none_match_star_matches_any() {
        assert_eq!(pre(&[(IF_NONE_MATCH, " * ")]), Precondition::NotModified);
        let no_etag =
            evaluate_preconditions(&Method::HEAD, &req(&[(IF_NONE_MATCH, "*")]), None, None);
        assert_eq!(no_etag, Precondition::NotModified);
        // `*` inside a list is not the `*` form.
        assert_eq!(pre(&[(IF_NONE_MATCH, "\"x\", *")]), Precondition::Proceed);
    }

    /// RFC 9110 §13.1.3, §13.2.2: If-None-Match takes precedence over IMS.
    #[test]
    fn if_none_match_takes_precedence_over_if_modified_since() {
        // IMS alone would say 304; a non-matching INM says 200.
        let p = pre(&[
            (IF_NONE_MATCH, "\"other\""),
            (IF_MODIFIED_SINCE, &date(2_000_000)),
        ]);
        assert_eq!(p, Precondition::Proceed);
        // IMS alone would say 200; a matching INM says 304.
        let p = pre(&[(IF_NONE_MATCH, "\"v1\""), (IF_MODIFIED_SINCE, &date(1))]);
        assert_eq!(p, Precondition::NotModified);
        // Even a malformed INM suppresses IMS.
        let p = pre(&[
            (IF_NONE_MATCH, "garbage"),
            (IF_MODIFIED_SINCE, &date(2_000_000)),
        ]);
        assert_eq!(p, Precondition::Proceed);
    }

    /// RFC 9110 §13.1.3: not modified iff Last-Modified <= the date, to the second.
    #[test]
    fn if_modified_since_compares_dates() {
        assert_eq!(
            pre(&[(IF_MODIFIED_SINCE, &date(1_000_000))]),
            Precondition::NotModified
        );
        assert_eq!(
            pre(&[(IF_MODIFIED_SINCE, &date(1_000_001))]),
            Precondition::NotModified
        );
        assert_eq!(
            pre(&[(IF_MODIFIED_SINCE, &date(999_999))]),
            Precondition::Proceed
        );
        // Sub-second stored time compares as its whole second.
        let h = req(&[(IF_MODIFIED_SINCE, &date(1_000_000))]);
        let lm = t(1_000_000) + Duration::from_millis(700);
        assert_eq!(
            evaluate_preconditions(&Method::GET, &h, None, Some(lm)),
            Precondition::NotModified
        );
        // Without any stored time there is nothing to compare: full response.
        assert_eq!(
            evaluate_preconditions(&Method::GET, &h, None, None),
            Precondition::Proceed
        );
    }

    /// RFC 9110 §5.6.7: the obsolete date formats are accepted too.
    #[test]
    fn if_modified_since_accepts_obsolete_date_forms() {
        // 1994-11-06T08:49:37Z = 784111777.
        let h = |v: &str| {
            evaluate_preconditions(
                &Method::GET,
                &req(&[(IF_MODIFIED_SINCE, v)]),
                None,
                Some(t(784_111_777)),
            )
        };
        assert_eq!(
            h("Sunday, 06-Nov-94 08:49:37 GMT"),
            Precondition::NotModified
        );
        assert_eq!(h("Sun Nov  6 08:49:37 1994"), Precondition::NotModified);
        assert_eq!(h("Sun, 06 Nov 1994 08:49:36 GMT"), Precondition::Proceed);
    }

    /// RFC 9110 §13.1.3: invalid dates and several members are ignored.
    #[test]
    fn if_modified_since_invalid_or_repeated_is_ignored() {
        assert_eq!(
            pre(&[(IF_MODIFIED_SINCE, "yesterday")]),
            Precondition::Proceed
        );
        assert_eq!(pre(&[(IF_MODIFIED_SINCE, "")]), Precondition::Proceed);
        let d = date(2_000_000);
        assert_eq!(
            pre(&[(IF_MODIFIED_SINCE, &d), (IF_MODIFIED_SINCE, &d)]),
            Precondition::Proceed
        );
    }

    /// RFC 9111 §4.3.2: origin-only preconditions and non-GET/HEAD go to the origin.
    #[test]
    fn origin_preconditions_and_other_methods_forward() {
        assert_eq!(pre(&[(IF_MATCH, "\"v1\"")]), Precondition::Forward);
        assert_eq!(
            pre(&[(IF_UNMODIFIED_SINCE, &date(1)), (IF_NONE_MATCH, "\"v1\"")]),
            Precondition::Forward
        );
        for m in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
            let h = req(&[(IF_MODIFIED_SINCE, &date(2_000_000))]);
            assert_eq!(
                evaluate_preconditions(&m, &h, Some(STORED_ETAG), Some(t(1))),
                Precondition::Forward,
                "{m}"
            );
        }
        assert_eq!(pre(&[]), Precondition::Proceed);
    }

    /// Hostile lists are bounded: a match past the item limit is not seen.
    #[test]
    fn if_none_match_list_is_bounded() {
        let mut v = "\"x\", ".repeat(ETAG_LIST_ITEMS_MAX);
        v.push_str("\"v1\"");
        assert_eq!(pre(&[(IF_NONE_MATCH, &v)]), Precondition::Proceed);
        let mut v = "\"x\", ".repeat(ETAG_LIST_ITEMS_MAX - 1);
        v.push_str("\"v1\"");
        assert_eq!(pre(&[(IF_NONE_MATCH, &v)]), Precondition::NotModified);
    }

    /// An unbalanced quote ends the list instead of swallowing or panicking.
    #[test]
    fn if_none_match_unbalanced_quote_ends_list() {
        assert_eq!(pre(&[(IF_NONE_MATCH, "\"v1")]), Precondition::Proceed);
        assert_eq!(
            pre(&[(IF_NONE_MATCH, "x\"y, \"v1\"")]),
            Precondition::Proceed,
            "the quote opened in `x\"y` swallows the rest"
        );
        assert_eq!(
            pre(&[(IF_NONE_MATCH, "\"v1\" junk, \"v2\"")]),
            Precondition::Proceed
        );
    }

    /// RFC 9110 §14.1.2: the three range forms, clamped to the body.
    #[test]
    fn range_forms_single() {
        assert_eq!(range(&[(RANGE, "bytes=0-99")], 1000), partial(&[(0, 99)]));
        assert_eq!(
            range(&[(RANGE, "bytes=900-")], 1000),
            partial(&[(900, 999)])
        );
        assert_eq!(
            range(&[(RANGE, "bytes=-100")], 1000),
            partial(&[(900, 999)])
        );
        // last-pos past the end is clamped; a suffix longer than the body is all of it.
        assert_eq!(
            range(&[(RANGE, "bytes=990-5000")], 1000),
            partial(&[(990, 999)])
        );
        assert_eq!(range(&[(RANGE, "bytes=-5000")], 1000), partial(&[(0, 999)]));
        assert_eq!(
            range(&[(RANGE, "bytes=999-999")], 1000),
            partial(&[(999, 999)])
        );
    }

    /// RFC 9110 §14.1: range units are case-insensitive; OWS in the list.
    #[test]
    fn range_unit_case_and_whitespace() {
        assert_eq!(
            range(&[(RANGE, "Bytes=0-0 , 500-509")], 1000),
            partial(&[(0, 0), (500, 509)])
        );
    }

    /// RFC 9110 §14.1.2, §15.5.17: no satisfiable range → 416; unsatisfiable members of
    /// a satisfiable set are dropped.
    #[test]
    fn range_unsatisfiable() {
        assert_eq!(
            range(&[(RANGE, "bytes=1000-")], 1000),
            RangeAnswer::Unsatisfiable
        );
        assert_eq!(
            range(&[(RANGE, "bytes=-0")], 1000),
            RangeAnswer::Unsatisfiable
        );
        assert_eq!(
            range(&[(RANGE, "bytes=5000-6000, -0")], 1000),
            RangeAnswer::Unsatisfiable
        );
        assert_eq!(
            range(&[(RANGE, "bytes=5000-6000, 0-9")], 1000),
            partial(&[(0, 9)])
        );
        assert_eq!(
            range(&[(RANGE, "bytes=99999999999999999999999-")], 1000),
            RangeAnswer::Unsatisfiable,
            "saturated first-pos"
        );
        assert_eq!(content_range_unsatisfied(1000), "bytes */1000");
    }

    /// RFC 9110 §14.2: invalid syntax and unknown units are ignored (200).
    #[test]
    fn range_invalid_or_unknown_unit_is_full() {
        for v in [
            "items=0-5",
            "bytes",
            "bytes=",
            "bytes=,",
            "bytes=a-b",
            "bytes=5-1",
            "bytes=--5",
            "bytes=0-5-",
            "bytes=-",
            "bytes=1 -2",
            "bytes=0x10-",
        ] {
            assert_eq!(range(&[(RANGE, v)], 1000), RangeAnswer::Full, "{v}");
        }
        assert_eq!(
            range(&[(RANGE, "bytes=0-1"), (RANGE, "bytes=2-3")], 1000),
            RangeAnswer::Full,
            "Range is a singleton field"
        );
    }

    /// RFC 9110 §14.2: Range only applies to GET (HEAD and others get the full answer).
    #[test]
    fn range_ignored_for_non_get() {
        let h = req(&[(RANGE, "bytes=0-1")]);
        for m in [Method::HEAD, Method::POST] {
            assert_eq!(
                evaluate_range(&h, &m, 10, None, None, None),
                RangeAnswer::Full
            );
        }
        assert_eq!(range(&[], 10), RangeAnswer::Full);
    }

    /// RFC 9110 §15.3.7.2, §17.15: ranges are sorted, overlaps and small gaps coalesced.
    #[test]
    fn ranges_sorted_and_coalesced() {
        assert_eq!(
            range(&[(RANGE, "bytes=500-600, 0-100")], 10_000),
            partial(&[(0, 100), (500, 600)])
        );
        assert_eq!(
            range(&[(RANGE, "bytes=0-100, 50-200, 150-160")], 10_000),
            partial(&[(0, 200)])
        );
        // A 79-byte gap (101..=179) merges; an 80-byte gap (101..=180) does not.
        assert_eq!(
            range(&[(RANGE, "bytes=0-100, 180-200")], 10_000),
            partial(&[(0, 200)])
        );
        assert_eq!(
            range(&[(RANGE, "bytes=0-100, 181-200")], 10_000),
            partial(&[(0, 100), (181, 200)])
        );
        // Many identical ranges collapse to one.
        let v = format!("bytes={}", vec!["0-0"; RANGES_MAX].join(","));
        assert_eq!(range(&[(RANGE, &v)], 10), partial(&[(0, 0)]));
    }

    /// RFC 9110 §17.15: more than RANGES_MAX range-specs → the full body.
    #[test]
    fn too_many_ranges_is_full() {
        let specs: Vec<String> = (0..=RANGES_MAX)
            .map(|i| format!("{}-{}", i * 1000, i * 1000))
            .collect();
        let v = format!("bytes={}", specs.join(","));
        assert_eq!(range(&[(RANGE, &v)], 1_000_000), RangeAnswer::Full);
        let v = format!("bytes={}", specs[..RANGES_MAX].join(","));
        match range(&[(RANGE, &v)], 1_000_000) {
            RangeAnswer::Partial(r) => assert_eq!(r.len(), RANGES_MAX),
            other => panic!("{other:?}"),
        }
    }

    /// A zero-length body is sent whole.
    #[test]
    fn empty_body_is_full() {
        assert_eq!(range(&[(RANGE, "bytes=-5")], 0), RangeAnswer::Full);
        assert_eq!(range(&[(RANGE, "bytes=0-")], 0), RangeAnswer::Full);
    }

    /// RFC 9110 §13.1.5: If-Range with an entity-tag uses strong comparison.
    #[test]
    fn if_range_etag_strong_comparison() {
        let r = |v: &str, stored: &str| {
            evaluate_range(
                &req(&[(RANGE, "bytes=0-9"), (IF_RANGE, v)]),
                &Method::GET,
                100,
                Some(stored),
                None,
                None,
            )
        };
        assert_eq!(r("\"v1\"", "\"v1\""), partial(&[(0, 9)]));
        assert_eq!(r("\"v2\"", "\"v1\""), RangeAnswer::Full);
        assert_eq!(
            r("W/\"v1\"", "\"v1\""),
            RangeAnswer::Full,
            "weak never matches"
        );
        assert_eq!(
            r("\"v1\"", "W/\"v1\""),
            RangeAnswer::Full,
            "weak never matches"
        );
        assert_eq!(r("v1", "\"v1\""), RangeAnswer::Full, "unquoted is invalid");
    }

    /// RFC 9110 §13.1.5, §8.8.2.2: If-Range with a date needs an exact match with a
    /// strong Last-Modified (Date at least one second later).
    #[test]
    fn if_range_date_exact_and_strong() {
        let r = |v: &str, lm: u64, date_secs: Option<u64>| {
            evaluate_range(
                &req(&[(RANGE, "bytes=0-9"), (IF_RANGE, v)]),
                &Method::GET,
                100,
                Some(STORED_ETAG),
                Some(t(lm)),
                date_secs.map(t),
            )
        };
        let d = date(1_000_000);
        assert_eq!(r(&d, 1_000_000, Some(1_000_001)), partial(&[(0, 9)]));
        assert_eq!(
            r(&d, 1_000_000, Some(1_000_000)),
            RangeAnswer::Full,
            "weak LM"
        );
        assert_eq!(r(&d, 1_000_000, None), RangeAnswer::Full, "no Date");
        assert_eq!(
            r(&d, 999_999, Some(1_000_001)),
            RangeAnswer::Full,
            "not exact"
        );
        assert_eq!(
            r("not a date", 1_000_000, Some(1_000_001)),
            RangeAnswer::Full
        );
    }

    /// If-Range without Range is ignored; Range without If-Range is evaluated.
    #[test]
    fn if_range_only_with_range() {
        assert_eq!(range(&[(IF_RANGE, "\"nope\"")], 100), RangeAnswer::Full);
        assert_eq!(range(&[(RANGE, "bytes=0-0")], 100), partial(&[(0, 0)]));
    }

    /// RFC 9110 §14.4: Content-Range formatting.
    #[test]
    fn content_range_format() {
        assert_eq!(content_range(0, 99, 1000), "bytes 0-99/1000");
        assert_eq!(content_range(999, 999, 1000), "bytes 999-999/1000");
    }

    /// RFC 9110 §14.6, §15.3.7.2: multipart/byteranges layout and length.
    #[test]
    fn multipart_plan_layout() {
        let b = boundary_for(42);
        assert!(b.len() <= 70);
        let plan = multipart_plan(&[(0, 1), (8, 9)], 10, Some("text/html"), &b);
        assert_eq!(
            plan.content_type,
            format!("multipart/byteranges; boundary={b}")
        );
        assert_eq!(
            plan.parts[0].head,
            format!("\r\n--{b}\r\nContent-Type: text/html\r\nContent-Range: bytes 0-1/10\r\n\r\n")
                .into_bytes()
        );
        assert_eq!(plan.parts[1].range, (8, 9));
        assert_eq!(plan.trailer, format!("\r\n--{b}--\r\n").into_bytes());
        // Render it and check the declared length is the real one.
        let body = b"0123456789";
        let mut out = Vec::new();
        for p in &plan.parts {
            out.extend_from_slice(&p.head);
            out.extend_from_slice(&body[p.range.0 as usize..=p.range.1 as usize]);
        }
        out.extend_from_slice(&plan.trailer);
        assert_eq!(out.len() as u64, plan.content_length);
        assert!(String::from_utf8(out).unwrap().contains("\r\n\r\n89\r\n--"));
        assert_ne!(boundary_for(1), boundary_for(2));
    }

    /// RFC 9110 §15.4.5: which headers a 304 carries.
    #[test]
    fn not_modified_header_selection() {
        let stored = req(&[
            (CACHE_CONTROL, "max-age=60"),
            (CACHE_CONTROL, "public"),
            (CONTENT_LOCATION, "/a"),
            (DATE, &date(1)),
            (ETAG, STORED_ETAG),
            (EXPIRES, &date(61)),
            (VARY, "Accept-Encoding"),
            (LAST_MODIFIED, &date(0)),
            (http::header::CONTENT_TYPE, "text/html"),
            (http::header::CONTENT_LENGTH, "10"),
            (http::header::SET_COOKIE, "a=b"),
        ]);
        let out = not_modified_headers(&stored);
        assert_eq!(out.get_all(CACHE_CONTROL).iter().count(), 2);
        for n in [CONTENT_LOCATION, DATE, ETAG, EXPIRES, VARY] {
            assert_eq!(out.get(&n), stored.get(&n), "{n}");
        }
        assert!(!out.contains_key(LAST_MODIFIED), "ETag present");
        assert!(!out.contains_key(http::header::CONTENT_TYPE));
        assert!(!out.contains_key(http::header::CONTENT_LENGTH));
        assert!(!out.contains_key(http::header::SET_COOKIE));
        assert_eq!(out.len(), 7);
    }

    /// RFC 9110 §15.4.5: Last-Modified guides cache updates when there is no ETag.
    #[test]
    fn not_modified_keeps_last_modified_without_etag() {
        let stored = req(&[(LAST_MODIFIED, &date(0)), (DATE, &date(1))]);
        let out = not_modified_headers(&stored);
        assert_eq!(out.get(LAST_MODIFIED), stored.get(LAST_MODIFIED));
        assert_eq!(out.len(), 2);
    }

    fn hostile_headers(
        name: HeaderName,
        lines: &[Vec<u8>],
        extra: &[(HeaderName, &str)],
    ) -> HeaderMap {
        let mut h = req(extra);
        for l in lines {
            if let Ok(v) = HeaderValue::from_bytes(l) {
                h.append(name.clone(), v);
            }
        }
        h
    }

    proptest! {
        /// Arbitrary If-None-Match / If-Modified-Since bytes never panic.
        #[test]
        fn hostile_preconditions_never_panic(
            inm in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..3),
            ims in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..2),
            stored in proptest::option::of(".{0,20}"),
        ) {
            let mut h = hostile_headers(IF_NONE_MATCH, &inm, &[]);
            for l in &ims {
                if let Ok(v) = HeaderValue::from_bytes(l) {
                    h.append(IF_MODIFIED_SINCE, v);
                }
            }
            let p = evaluate_preconditions(&Method::GET, &h, stored.as_deref(), Some(t(5)));
            prop_assert_ne!(p, Precondition::Forward);
        }

        /// Arbitrary Range / If-Range bytes never panic, and any Partial answer is
        /// sorted, disjoint, within the body and bounded.
        #[test]
        fn hostile_range_never_panics(
            rng in proptest::collection::vec(any::<u8>(), 0..300),
            len in 0u64..5000,
        ) {
            let h = hostile_headers(RANGE, &[rng], &[]);
            if let RangeAnswer::Partial(r) = evaluate_range(&h, &Method::GET, len, Some(STORED_ETAG), None, None) {
                prop_assert!(!r.is_empty() && r.len() <= RANGES_MAX);
                for w in r.windows(2) {
                    prop_assert!(w[0].1 < w[1].0);
                }
                for &(s, e) in &r {
                    prop_assert!(s <= e && e < len);
                }
            }
        }

        /// Structured range sets always resolve to valid ranges covering what was asked.
        #[test]
        fn generated_ranges_are_valid(
            specs in proptest::collection::vec((0u64..2000, 0u64..2000), 1..RANGES_MAX),
            len in 1u64..1500,
        ) {
            let v: Vec<String> = specs.iter().map(|&(a, b)| format!("{}-{}", a.min(b), a.max(b))).collect();
            let h = req(&[(RANGE, &format!("bytes={}", v.join(",")))]);
            let any_ok = specs.iter().any(|&(a, b)| a.min(b) < len);
            match evaluate_range(&h, &Method::GET, len, None, None, None) {
                RangeAnswer::Partial(r) => {
                    prop_assert!(any_ok);
                    for &(a, b) in &specs {
                        let (a, b) = (a.min(b), a.max(b).min(len - 1));
                        if a < len {
                            prop_assert!(r.iter().any(|&(s, e)| s <= a && b <= e));
                        }
                    }
                }
                RangeAnswer::Unsatisfiable => prop_assert!(!any_ok),
                RangeAnswer::Full => prop_assert!(false, "valid set answered Full"),
            }
        }
    }
}
