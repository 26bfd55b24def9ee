//! `Cache-Control` (RFC 9111 §5.2) and targeted fields such as `CDN-Cache-Control`
//! (RFC 9213), parsed into one [`CacheControl`] value.
//!
//! Key design decisions:
//! - **One pass, bounded.** The parser is a single linear scan over at most
//!   `FIELD_BYTES_MAX` bytes of all field lines together; it allocates only for
//!   field-name lists (capped at `FIELD_NAMES_MAX`) and never panics on any bytes.
//! - **Malformed means conservative.** A directive that does not follow the grammar
//!   (`max-age =60`, `max-age=60s`, an unterminated quote) is not dropped silently:
//!   restrictive directives (`no-store`, `no-cache`, `private`, `must-revalidate`, ...)
//!   still apply, permissive ones (`public`, `immutable`, `max-stale`, ...) do not, and a
//!   malformed delta-seconds directive becomes [`Delta::Invalid`], which freshness code
//!   treats as "already stale" (RFC 9111 §4.2.1: a cache SHOULD consider a response
//!   with invalid freshness information stale).
//! - **Conflicting duplicates are invalid.** RFC 9111 §4.2.1: "When there is more than
//!   one value present for a given directive (e.g., ... multiple Cache-Control: max-age
//!   directives), either the first occurrence should be used or the response should be
//!   considered stale." quire picks the second option for every delta-seconds directive:
//!   two different values become [`Delta::Invalid`] (stale for `max-age`/`s-maxage`, no
//!   stale serving for `stale-while-revalidate`/`stale-if-error`). Equal duplicates are
//!   harmless and kept.
//! - **Targeted fields use the same grammar.** RFC 9213 §2.2 defines targeted fields as
//!   Structured Field Dictionaries; quire parses them with the `Cache-Control` grammar,
//!   which accepts every dictionary a real origin sends (`max-age=60, no-store`) and is
//!   lenient about the rest. A targeted field that is empty or malformed is ignored and
//!   `Cache-Control` applies (RFC 9213 §2.1).

use crate::syntax::{is_tchar, trim_ows};
use http::header::{HeaderMap, HeaderName, CACHE_CONTROL};

/// The `CDN-Cache-Control` response header field (RFC 9213 §3).
pub(crate) const CDN_CACHE_CONTROL: HeaderName = HeaderName::from_static("cdn-cache-control");

/// The `Surrogate-Control` response header field (W3C Edge Architecture 1.0), which
/// origins set for Varnish, Fastly and Akamai; quire reads it as a targeted field
/// after `CDN-Cache-Control` (its `max-age` and `no-store` mean what they mean in
/// `Cache-Control`).
pub(crate) const SURROGATE_CONTROL: HeaderName = HeaderName::from_static("surrogate-control");

/// Bytes of all field lines of one field that the parser looks at. Anything beyond is
/// not parsed and [`CacheControl::truncated`] is set, so callers can refuse to store.
const FIELD_BYTES_MAX: usize = 8 * 1024;

/// Field names kept per qualified `no-cache` / `private` directive.
const FIELD_NAMES_MAX: usize = 64;

/// Delta-seconds larger than this are treated as this (RFC 9111 §1.2.2: "a recipient
/// ... MUST ... use the value 2147483648 (2^31)" when it cannot represent more; quire
/// saturates every larger value there).
pub(crate) const DELTA_SECONDS_MAX: u64 = 1 << 31;

/// A delta-seconds argument (RFC 9111 §1.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta {
    /// A valid value, saturated at `DELTA_SECONDS_MAX`.
    Secs(u64),
    /// Present but unusable: missing, negative, non-numeric, malformed, or duplicated
    /// with conflicting values.
    Invalid,
}

impl Delta {
    /// The value in seconds when valid.
    pub(crate) fn secs(self) -> Option<u64> {
        match self {
            Delta::Secs(s) => Some(s),
            Delta::Invalid => None,
        }
    }

    /// The value as a duration when valid.
    pub(crate) fn duration(self) -> Option<std::time::Duration> {
        self.secs().map(std::time::Duration::from_secs)
    }

    fn merge(self, other: Delta) -> Delta {
        // RFC 9111 §4.2.1: conflicting duplicates → treat as invalid (stale).
        if self == other {
            self
        } else {
            Delta::Invalid
        }
    }
}

/// `no-cache` and `private` come unqualified (whole response) or with a list of field
/// names (RFC 9111 §5.2.2.4, §5.2.2.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Qualified {
    /// The directive applies to the whole response.
    All,
    /// The directive applies to these fields only (lower-cased, at most
    /// `FIELD_NAMES_MAX`).
    Fields(Vec<String>),
}

impl Qualified {
    fn merge(self, other: Qualified) -> Qualified {
        match (self, other) {
            (Qualified::Fields(mut a), Qualified::Fields(b)) => {
                for name in b {
                    if a.len() >= FIELD_NAMES_MAX {
                        // Past the cap the only safe reading is the whole response.
                        return Qualified::All;
                    }
                    if !a.contains(&name) {
                        a.push(name);
                    }
                }
                Qualified::Fields(a)
            }
            // The unqualified form is the stricter one and wins.
            _ => Qualified::All,
        }
    }
}

/// The request `max-stale` directive (RFC 9111 §5.2.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxStale {
    /// No value: the client accepts a stale response of any staleness.
    Any,
    /// Accepts a response stale by at most this many seconds.
    Secs(u64),
    /// Present but unusable; grants nothing.
    Invalid,
}

/// Which field the directives came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Source {
    /// `Cache-Control`, or nothing at all.
    #[default]
    CacheControl,
    /// A targeted field such as `CDN-Cache-Control` (RFC 9213); `Cache-Control` and
    /// `Expires` are then ignored (RFC 9213 §2.1).
    Targeted,
}

/// The directives of one `Cache-Control` (or targeted) field. Response and request
/// directives share the struct; each side reads the ones defined for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CacheControl {
    /// `max-age` (request §5.2.1.1, response §5.2.2.1).
    pub max_age: Option<Delta>,
    /// `s-maxage` (§5.2.2.10).
    pub(crate) s_maxage: Option<Delta>,
    /// `no-store` (§5.2.1.5, §5.2.2.5).
    pub(crate) no_store: bool,
    /// `no-cache` (§5.2.1.4, §5.2.2.4).
    pub no_cache: Option<Qualified>,
    /// `private` (§5.2.2.7).
    pub(crate) private: Option<Qualified>,
    /// `public` (§5.2.2.9).
    pub(crate) public: bool,
    /// `must-revalidate` (§5.2.2.2).
    pub(crate) must_revalidate: bool,
    /// `proxy-revalidate` (§5.2.2.8).
    proxy_revalidate: bool,
    /// `must-understand` (§5.2.2.3).
    pub(crate) must_understand: bool,
    /// `no-transform` (§5.2.1.6, §5.2.2.6).
    pub no_transform: bool,
    /// `immutable` (RFC 8246).
    pub(crate) immutable: bool,
    /// `stale-while-revalidate` (RFC 5861 §3).
    pub(crate) stale_while_revalidate: Option<Delta>,
    /// `stale-if-error` (RFC 5861 §4; request and response).
    pub(crate) stale_if_error: Option<Delta>,
    /// Request `max-stale` (§5.2.1.2).
    pub(crate) max_stale: Option<MaxStale>,
    /// Request `min-fresh` (§5.2.1.3).
    pub min_fresh: Option<Delta>,
    /// Request `only-if-cached` (§5.2.1.7).
    pub only_if_cached: bool,
    /// Some directive did not follow the grammar (it was applied conservatively).
    pub(crate) malformed: bool,
    /// The field was longer than [`FIELD_BYTES_MAX`]; directives past it were not read.
    pub(crate) truncated: bool,
    /// Number of directives seen, known or not (RFC 9213 §2.1 "non-empty").
    pub(crate) directives: usize,
    /// Where the directives came from.
    pub(crate) source: Source,
}

/// A directive's argument as written.
enum Arg<'a> {
    /// `name`
    Absent,
    /// `name=token`
    Token(&'a [u8]),
    /// `name="..."`, unescaped.
    Quoted(Vec<u8>),
    /// Anything that does not follow the grammar.
    Malformed,
}

impl CacheControl {
    /// About what this holds on the heap: the field names of a qualified
    /// `no-cache` or `private` (at most `FIELD_NAMES_MAX` each).
    pub fn heap_bytes(&self) -> usize {
        let names = |q: &Option<Qualified>| match q {
            Some(Qualified::Fields(f)) => f.iter().map(|n| size_of::<String>() + n.len()).sum(),
            _ => 0,
        };
        names(&self.no_cache) + names(&self.private)
    }

    /// Parses every `Cache-Control` line of `headers`.
    pub fn from_headers(headers: &HeaderMap) -> CacheControl {
        Self::from_field(headers, &CACHE_CONTROL)
    }

    /// Parses every line of the field `name` of `headers`.
    fn from_field(headers: &HeaderMap, name: &HeaderName) -> CacheControl {
        Self::parse_lines(headers.get_all(name).iter().map(|v| v.as_bytes()))
    }

    /// The directives a shared cache targeted by `targeted` (highest priority first, e.g.
    /// `[CDN_CACHE_CONTROL]`) obeys for a response: the first targeted field that is
    /// present, non-empty and well-formed, else `Cache-Control` (RFC 9213 §2.1).
    pub fn for_response(headers: &HeaderMap, targeted: &[HeaderName]) -> CacheControl {
        for name in targeted {
            if !headers.contains_key(name) {
                continue;
            }
            let mut cc = Self::from_field(headers, name);
            // RFC 9213 §2.1: only a valid, non-empty targeted field replaces
            // Cache-Control; otherwise fall back.
            if cc.directives > 0 && !cc.malformed && !cc.truncated {
                cc.source = Source::Targeted;
                return cc;
            }
        }
        Self::from_headers(headers)
    }

    /// Parses field lines given as raw bytes; the lines combine as one comma list
    /// (RFC 9110 §5.3). Never panics; looks at no more than `FIELD_BYTES_MAX` bytes.
    pub fn parse_lines<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> CacheControl {
        let mut cc = CacheControl::default();
        let mut budget = FIELD_BYTES_MAX;
        for line in lines {
            if budget == 0 {
                cc.truncated = true;
                break;
            }
            let line = if line.len() > budget {
                cc.truncated = true;
                // Cut at the last comma inside the budget so no directive is read
                // half-way (`max-age=6000` must not become `max-age=60`).
                let head = &line[..budget];
                match head.iter().rposition(|&b| b == b',') {
                    Some(comma) => &head[..comma],
                    None => &[][..],
                }
            } else {
                line
            };
            budget -= line.len().min(budget);
            cc.parse_line(line);
            if cc.truncated {
                break;
            }
        }
        cc
    }

    /// Parses one field line: `#cache-directive`, where
    /// `cache-directive = token [ "=" ( token / quoted-string ) ]` (RFC 9111 §5.2).
    fn parse_line(&mut self, line: &[u8]) {
        let n = line.len();
        let mut i = 0;
        while i < n {
            while i < n && matches!(line[i], b' ' | b'\t' | b',') {
                i += 1;
            }
            if i >= n {
                break;
            }
            let name_start = i;
            while i < n && is_tchar(line[i]) {
                i += 1;
            }
            let name = &line[name_start..i];
            let mut arg = Arg::Absent;
            if i < n && line[i] == b'=' {
                i += 1;
                if i < n && line[i] == b'"' {
                    let (value, end, closed) = quoted_string(line, i);
                    i = end;
                    arg = if closed {
                        Arg::Quoted(value)
                    } else {
                        Arg::Malformed
                    };
                } else {
                    let start = i;
                    while i < n && is_tchar(line[i]) {
                        i += 1;
                    }
                    arg = if i > start {
                        Arg::Token(&line[start..i])
                    } else {
                        Arg::Malformed
                    };
                }
            }
            while i < n && matches!(line[i], b' ' | b'\t') {
                i += 1;
            }
            if i < n && line[i] != b',' {
                // Junk after the directive (`max-age =60`, `max-age=60s x`): skip to the
                // next list element, respecting quoted strings.
                arg = Arg::Malformed;
                i = skip_element(line, i);
            }
            if name.is_empty() {
                self.malformed = true;
                continue;
            }
            self.apply(name, arg);
        }
    }

    fn apply(&mut self, name: &[u8], arg: Arg<'_>) {
        self.directives += 1;
        let malformed = matches!(arg, Arg::Malformed);
        self.malformed |= malformed;
        let lower = |s: &str| name.eq_ignore_ascii_case(s.as_bytes());
        // Restrictive directives apply even when their syntax is off; permissive ones
        // only when well-formed.
        if lower("max-age") {
            merge_delta(&mut self.max_age, delta(&arg));
        } else if lower("s-maxage") {
            merge_delta(&mut self.s_maxage, delta(&arg));
        } else if lower("no-store") {
            self.no_store = true;
        } else if lower("no-cache") {
            merge_qualified(&mut self.no_cache, qualified(&arg));
        } else if lower("private") {
            merge_qualified(&mut self.private, qualified(&arg));
        } else if lower("must-revalidate") {
            self.must_revalidate = true;
        } else if lower("proxy-revalidate") {
            self.proxy_revalidate = true;
        } else if lower("no-transform") {
            self.no_transform = true;
        } else if lower("only-if-cached") {
            self.only_if_cached = true;
        } else if lower("stale-while-revalidate") {
            merge_delta(&mut self.stale_while_revalidate, delta(&arg));
        } else if lower("stale-if-error") {
            merge_delta(&mut self.stale_if_error, delta(&arg));
        } else if lower("min-fresh") {
            merge_delta(&mut self.min_fresh, delta(&arg));
        } else if lower("max-stale") {
            let value = match &arg {
                Arg::Absent => MaxStale::Any,
                _ => match delta(&arg) {
                    Delta::Secs(s) => MaxStale::Secs(s),
                    Delta::Invalid => MaxStale::Invalid,
                },
            };
            self.max_stale = Some(match self.max_stale {
                None => value,
                Some(prev) if prev == value => prev,
                Some(_) => MaxStale::Invalid,
            });
        } else if malformed {
            // `public`, `immutable`, `must-understand` and extensions grant something:
            // not when malformed (RFC 9111 §5.2.3: unrecognised directives are ignored).
        } else if lower("public") {
            self.public = true;
        } else if lower("immutable") {
            self.immutable = true;
        } else if lower("must-understand") {
            self.must_understand = true;
        }
    }

    /// True when the response must be revalidated before any reuse once stale, for a
    /// shared cache: `must-revalidate`, `proxy-revalidate`, or `s-maxage`, which
    /// "incorporates the semantics of the proxy-revalidate response directive"
    /// (RFC 9111 §5.2.2.10).
    pub(crate) fn forbids_stale(&self) -> bool {
        self.must_revalidate || self.proxy_revalidate || self.s_maxage.is_some()
    }
}

fn merge_delta(slot: &mut Option<Delta>, value: Delta) {
    *slot = Some(match *slot {
        None => value,
        Some(prev) => prev.merge(value),
    });
}

fn merge_qualified(slot: &mut Option<Qualified>, value: Qualified) {
    *slot = Some(match slot.take() {
        None => value,
        Some(prev) => prev.merge(value),
    });
}

/// delta-seconds = 1*DIGIT, as a token or (tolerated, RFC 9111 §5.2 "SHOULD accept")
/// as a quoted string. Negative or non-numeric values are invalid.
fn delta(arg: &Arg<'_>) -> Delta {
    match arg {
        Arg::Token(t) => digits(t),
        Arg::Quoted(q) => digits(q),
        Arg::Absent | Arg::Malformed => Delta::Invalid,
    }
}

fn digits(bytes: &[u8]) -> Delta {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return Delta::Invalid;
    }
    // RFC 9111 §1.2.2: saturate at 2^31. Saturating at every step keeps the loop free
    // of overflow for any length.
    let value = bytes.iter().fold(0u64, |acc, &b| {
        (acc * 10 + u64::from(b - b'0')).min(DELTA_SECONDS_MAX)
    });
    Delta::Secs(value)
}

/// The argument of `no-cache` / `private`: absent → whole response; a list of field
/// names → those. An empty or malformed list is read as the whole response, the
/// stricter reading.
fn qualified(arg: &Arg<'_>) -> Qualified {
    let list: &[u8] = match arg {
        Arg::Absent | Arg::Malformed => return Qualified::All,
        Arg::Token(t) => t,
        Arg::Quoted(q) => q,
    };
    let mut names = Vec::new();
    for raw in list.split(|&b| b == b',') {
        let name = trim_ows(raw);
        if name.is_empty() {
            continue;
        }
        if !name.iter().all(|&b| is_tchar(b)) || names.len() >= FIELD_NAMES_MAX {
            return Qualified::All;
        }
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.is_empty() {
        Qualified::All
    } else {
        Qualified::Fields(names)
    }
}

/// Reads the quoted string starting at `line[start] == b'"'`. Returns the unescaped
/// bytes, the index after it, and whether the closing quote was found.
fn quoted_string(line: &[u8], start: usize) -> (Vec<u8>, usize, bool) {
    let mut out = Vec::new();
    let mut i = start + 1;
    while i < line.len() {
        match line[i] {
            b'"' => return (out, i + 1, true),
            b'\\' if i + 1 < line.len() => {
                out.push(line[i + 1]);
                i += 2;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    (out, line.len(), false)
}

/// Index of the next top-level comma at or after `i` (or the end).
fn skip_element(line: &[u8], mut i: usize) -> usize {
    while i < line.len() {
        match line[i] {
            b',' => return i,
            b'"' => i = quoted_string(line, i).1,
            _ => i += 1,
        }
    }
    i
}

#[cfg(test)]
mod tests {

    #[test]
    fn heap_bytes_counts_the_field_names_a_directive_names() {
        let cc = CacheControl::parse_lines([&b"no-cache=\"a, bb\", private"[..]]);
        assert_eq!(cc.heap_bytes(), 2 * size_of::<String>() + 3);
        assert_eq!(
            CacheControl::parse_lines([&b"max-age=5"[..]]).heap_bytes(),
            0
        );
    }

    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;

    fn cc(lines: &[&str]) -> CacheControl {
        CacheControl::parse_lines(lines.iter().map(|l| l.as_bytes()))
    }

    /// RFC 9111 §5.2.2.1: `max-age=N` gives N seconds.
    #[test]
    fn max_age_parses_delta_seconds() {
        assert_eq!(cc(&["max-age=60"]).max_age, Some(Delta::Secs(60)));
    }

    /// RFC 9111 §5.2: directive names are case-insensitive.
    #[test]
    fn directive_names_are_case_insensitive() {
        let c = cc(&["MaX-AgE=10, No-Store, PUBLIC"]);
        assert_eq!(c.max_age, Some(Delta::Secs(10)));
        assert!(c.no_store);
        assert!(c.public);
    }

    /// RFC 9111 §5.2 + RFC 9110 §5.3: several field lines combine into one list.
    #[test]
    fn multiple_lines_combine() {
        let c = cc(&["public", "s-maxage=30", "must-revalidate , no-transform"]);
        assert!(c.public && c.must_revalidate && c.no_transform);
        assert_eq!(c.s_maxage, Some(Delta::Secs(30)));
    }

    /// RFC 9111 §5.2: "max-age=\"60\"" SHOULD be accepted.
    #[test]
    fn quoted_max_age_is_tolerated() {
        assert_eq!(cc(&["max-age=\"60\""]).max_age, Some(Delta::Secs(60)));
    }

    /// RFC 9111 §1.2.2: negative delta-seconds are invalid; §4.2.1 then treats the
    /// response as stale.
    #[test]
    fn negative_max_age_is_invalid() {
        assert_eq!(cc(&["max-age=-100"]).max_age, Some(Delta::Invalid));
    }

    /// RFC 9111 §1.2.2: delta-seconds is only digits (`a100`, `100a`, `'3600'`).
    #[test]
    fn non_numeric_max_age_is_invalid() {
        for v in [
            "max-age=a100",
            "max-age=100a",
            "max-age='3600'",
            "max-age=",
            "max-age",
        ] {
            assert_eq!(cc(&[v]).max_age, Some(Delta::Invalid), "{v}");
        }
    }

    /// RFC 9111 §5.2: no whitespace around `=`; such a max-age is not a valid one.
    #[test]
    fn whitespace_around_equals_is_invalid() {
        for v in ["max-age =100", "max-age= 100"] {
            let c = cc(&[v]);
            assert_eq!(c.max_age, Some(Delta::Invalid), "{v}");
            assert!(c.malformed);
        }
    }

    /// RFC 9111 §1.2.2: values above 2^31 saturate at 2^31.
    #[test]
    fn huge_delta_saturates_at_2_pow_31() {
        assert_eq!(
            cc(&["max-age=99999999999999999999999999"]).max_age,
            Some(Delta::Secs(DELTA_SECONDS_MAX))
        );
        assert_eq!(
            cc(&["max-age=2147483648"]).max_age,
            Some(Delta::Secs(2_147_483_648))
        );
        assert_eq!(
            cc(&["max-age=2147483647"]).max_age,
            Some(Delta::Secs(2_147_483_647))
        );
    }

    /// RFC 9111 §4.2.1: conflicting duplicate max-age → considered stale (Invalid);
    /// equal duplicates are harmless.
    #[test]
    fn conflicting_duplicate_max_age_is_invalid() {
        assert_eq!(
            cc(&["max-age=60, max-age=3600"]).max_age,
            Some(Delta::Invalid)
        );
        assert_eq!(
            cc(&["max-age=60", "max-age=0"]).max_age,
            Some(Delta::Invalid)
        );
        assert_eq!(
            cc(&["max-age=60", "max-age=60"]).max_age,
            Some(Delta::Secs(60))
        );
    }

    /// RFC 9111 §5.2: a directive name inside a quoted string is not a directive.
    #[test]
    fn max_age_inside_quoted_string_is_ignored() {
        let c = cc(&["extension=\"max-age=100, no-store\", max-age=1"]);
        assert_eq!(c.max_age, Some(Delta::Secs(1)));
        assert!(!c.no_store);
        let c = cc(&["max-age=\"1\", extension=\"max-age=100\""]);
        assert_eq!(c.max_age, Some(Delta::Secs(1)));
    }

    /// RFC 9111 §5.2.2.4: `no-cache` with and without field names; unqualified wins.
    #[test]
    fn no_cache_qualified_and_unqualified() {
        assert_eq!(cc(&["no-cache"]).no_cache, Some(Qualified::All));
        assert_eq!(
            cc(&["no-cache=\"Set-Cookie, X-Foo\""]).no_cache,
            Some(Qualified::Fields(vec!["set-cookie".into(), "x-foo".into()]))
        );
        assert_eq!(
            cc(&["no-cache=\"set-cookie\", no-cache"]).no_cache,
            Some(Qualified::All)
        );
    }

    /// RFC 9111 §5.2.2.7: `private` with field names (token form accepted too) and the
    /// lists of several directives union.
    #[test]
    fn private_qualified_lists_union() {
        assert_eq!(cc(&["private"]).private, Some(Qualified::All));
        assert_eq!(
            cc(&["private=x-user", "private=\"x-session, X-User\""]).private,
            Some(Qualified::Fields(vec!["x-user".into(), "x-session".into()]))
        );
        // An empty list reads as the whole response.
        assert_eq!(cc(&["private=\"\""]).private, Some(Qualified::All));
    }

    /// RFC 9111 §5.2.1: request directives, `max-stale` with and without a value.
    #[test]
    fn request_directives_parse() {
        let c = cc(&["max-stale, min-fresh=5, only-if-cached, no-cache, max-age=0"]);
        assert_eq!(c.max_stale, Some(MaxStale::Any));
        assert_eq!(c.min_fresh, Some(Delta::Secs(5)));
        assert!(c.only_if_cached);
        assert_eq!(c.no_cache, Some(Qualified::All));
        assert_eq!(c.max_age, Some(Delta::Secs(0)));
        assert_eq!(cc(&["max-stale=30"]).max_stale, Some(MaxStale::Secs(30)));
        assert_eq!(cc(&["max-stale=x"]).max_stale, Some(MaxStale::Invalid));
    }

    /// RFC 5861 §3, §4, RFC 8246, RFC 9111 §5.2.2.3: extension response directives.
    #[test]
    fn extension_response_directives_parse() {
        let c = cc(&["stale-while-revalidate=30, stale-if-error=600, immutable, must-understand, proxy-revalidate"]);
        assert_eq!(c.stale_while_revalidate, Some(Delta::Secs(30)));
        assert_eq!(c.stale_if_error, Some(Delta::Secs(600)));
        assert!(c.immutable && c.must_understand && c.proxy_revalidate);
    }

    /// RFC 9111 §5.2.3: unknown directives are ignored, without hiding known ones.
    #[test]
    fn unknown_directives_are_ignored() {
        let c = cc(&["foobar, x-ext=\"a,b\", max-age=3600"]);
        assert_eq!(c.max_age, Some(Delta::Secs(3600)));
        assert_eq!(c.directives, 3);
        assert!(!c.malformed);
    }

    /// Malformed restrictive directives still restrict; permissive ones grant nothing.
    #[test]
    fn malformed_directives_apply_conservatively() {
        let c = cc(&["no-store junk, public junk"]);
        assert!(c.no_store);
        assert!(!c.public);
        let c = cc(&["private=\"unterminated"]);
        assert_eq!(c.private, Some(Qualified::All));
    }

    /// Bounded work: a field over the cap is cut on a directive boundary and flagged.
    #[test]
    fn oversized_field_is_truncated_on_directive_boundary() {
        let mut long = String::from("public, ");
        while long.len() < FIELD_BYTES_MAX - 4 {
            long.push_str("x, ");
        }
        long.push_str("max-age=600000");
        let c = cc(&[&long]);
        assert!(c.truncated);
        assert!(c.public);
        // max-age was past the cap: not read at all, never read as a prefix.
        assert_eq!(c.max_age, None);
    }

    /// RFC 9213 §2.1: a valid targeted field replaces Cache-Control.
    #[test]
    fn cdn_cache_control_overrides_cache_control() {
        let mut h = HeaderMap::new();
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(CDN_CACHE_CONTROL, HeaderValue::from_static("max-age=600"));
        let c = CacheControl::for_response(&h, &[CDN_CACHE_CONTROL]);
        assert_eq!(c.source, Source::Targeted);
        assert!(!c.no_store);
        assert_eq!(c.max_age, Some(Delta::Secs(600)));
        // Not targeted at this cache: Cache-Control applies.
        let c = CacheControl::for_response(&h, &[]);
        assert!(c.no_store);
        assert_eq!(c.source, Source::CacheControl);
    }

    /// RFC 9213 §2.1: an empty or invalid targeted field is ignored (fallback).
    #[test]
    fn invalid_cdn_cache_control_falls_back() {
        let mut h = HeaderMap::new();
        h.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=5"));
        h.insert(CDN_CACHE_CONTROL, HeaderValue::from_static("max-age =600"));
        let c = CacheControl::for_response(&h, &[CDN_CACHE_CONTROL]);
        assert_eq!(c.max_age, Some(Delta::Secs(5)));
        h.insert(CDN_CACHE_CONTROL, HeaderValue::from_static(" , "));
        let c = CacheControl::for_response(&h, &[CDN_CACHE_CONTROL]);
        assert_eq!(c.source, Source::CacheControl);
    }

    /// RFC 9111 §5.2.2.10: s-maxage implies proxy-revalidate for a shared cache.
    #[test]
    fn s_maxage_forbids_stale() {
        assert!(cc(&["s-maxage=10"]).forbids_stale());
        assert!(cc(&["must-revalidate"]).forbids_stale());
        assert!(!cc(&["max-age=10"]).forbids_stale());
    }

    proptest! {
        /// Hostile input: any bytes, any number of lines, never panic, stay bounded.
        #[test]
        fn parse_never_panics(lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..600), 0..20)) {
            let c = CacheControl::parse_lines(lines.iter().map(|l| l.as_slice()));
            prop_assert!(c.directives <= FIELD_BYTES_MAX);
            if let Some(Delta::Secs(s)) = c.max_age {
                prop_assert!(s <= DELTA_SECONDS_MAX);
            }
            if let Some(Qualified::Fields(f)) = &c.private {
                prop_assert!(!f.is_empty() && f.len() <= FIELD_NAMES_MAX);
            }
        }

        /// Structured-ish input built from directive fragments also never panics, and a
        /// well-formed max-age always round-trips.
        #[test]
        fn max_age_round_trips_among_noise(n in 0u64..5_000_000_000, noise in "[a-z=\", ]{0,40}") {
            let line = format!("max-age={n}");
            let c = CacheControl::parse_lines([line.as_bytes(), noise.as_bytes()]);
            let expected = n.min(DELTA_SECONDS_MAX);
            match c.max_age {
                Some(Delta::Secs(s)) => prop_assert_eq!(s, expected),
                // Noise may itself hold a conflicting max-age.
                Some(Delta::Invalid) => prop_assert!(noise.contains("max-age")),
                None => prop_assert!(false, "max-age lost"),
            }
        }
    }
}
