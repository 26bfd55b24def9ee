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
//! - **Range sets are bounded, sorted and coalesced.** More than `RANGES_MAX`
//!   range-specs → the full body; overlapping, unsorted or nearly adjacent ranges are
//!   merged (§15.3.7.2, §14.2, §17.15), so a hostile header never multiplies the bytes sent.
//! - **Every parser is bounded** by `ETAG_LIST_ITEMS_MAX` and `RANGES_MAX` and is
//!   total over arbitrary bytes.

use std::time::{Duration, SystemTime};

use http::header::{
    CACHE_CONTROL, CONTENT_LOCATION, DATE, ETAG, EXPIRES, IF_MATCH, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, LAST_MODIFIED, RANGE, VARY,
};
use http::{HeaderMap, HeaderName, Method};

/// At most this many entity-tags are examined across all `If-None-Match` lines; the
/// rest never match. Real clients send one.
const ETAG_LIST_ITEMS_MAX: usize = 64;

/// At most this many range-specs are accepted in one `Range` header; a longer set is
/// ignored and the full body is sent (see [`evaluate_range`]).
const RANGES_MAX: usize = 32;

/// Ranges separated by fewer bytes than this are merged into one part: the gap is
/// cheaper than the part headers of a multipart response (§15.3.7.2 allows coalescing
/// "ranges that are separated by a gap that is smaller than the overhead of sending
/// multiple parts").
const RANGE_GAP_COALESCE_BYTES: u64 = 80;

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
    /// the body, at most `RANGES_MAX`. One range → `Content-Range` ([`content_range`]);
    /// several → `multipart/byteranges` ([`multipart_plan`]).
    Partial(Vec<(u64, u64)>),
    /// 416 with `Content-Range: bytes */len` ([`content_range_unsatisfied`]).
    Unsatisfiable,
}

/// An entity-tag (RFC 9110 §8.8.3): `W/"opaque"` or `"opaque"`. `opaque` excludes the
/// quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EntityTag<'a> {
    /// True for a weak tag (`W/` prefix).
    weak: bool,
    /// The characters between the quotes.
    pub(crate) opaque: &'a str,
}

impl EntityTag<'_> {
    /// RFC 9110 §8.8.3.2 strong comparison: both strong and opaque tags equal.
    fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }

    /// RFC 9110 §8.8.3.2 weak comparison: opaque tags equal, weakness ignored.
    fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque == other.opaque
    }
}

/// Parses one entity-tag (RFC 9110 §8.8.3): `[ W/ ] DQUOTE *etagc DQUOTE`, with OWS
/// trimmed. `None` for anything else, including an unquoted tag.
fn parse_entity_tag(s: &str) -> Option<EntityTag<'_>> {
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
/// - More than `RANGES_MAX` range-specs → [`RangeAnswer::Full`], not 416: the set
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
mod tests;
