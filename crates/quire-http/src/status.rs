//! The `Cache-Status` response header (RFC 9211): what quire did with a request.
//!
//! Every response quire sends carries one list member named `CACHE_NAME`, e.g.
//! `quire; hit; ttl=3540`, `quire; fwd=miss; stored`, `quire; fwd=bypass;
//! detail=cookie`. [`CacheStatus`] holds the parameters; `CacheStatus::render`
//! writes the member as an RFC 8941 structured field;
//! [`CacheStatus::append_to_lines`] adds it after the members of caches closer to
//! the origin.
//!
//! Key decisions:
//! - **Rendering cannot produce an invalid field.** `key` and `detail` come from
//!   requests and configuration; they are written as sf-strings with `"` and `\`
//!   escaped, characters outside %x20-7E replaced by `?`, and lengths capped
//!   (`KEY_BYTES_MAX`, `DETAIL_BYTES_MAX`). `detail` is a bare sf-token when it
//!   is one (`detail=cookie`), as RFC 9211 §2.8 allows either.
//! - **`hit` and `fwd` are exclusive** (RFC 9211 §2.1): a hit renders no `fwd`,
//!   `fwd-status`, `stored` or `collapsed` (§2.3, §2.5, §2.6: only meaningful with
//!   `fwd`).
//! - **Booleans are written only when true** (RFC 8941 §4.1.1.2: a true boolean
//!   parameter is the bare key; a false one is omitted).

use std::fmt;

use crate::syntax::{is_tchar, push_decimal};
use http::HeaderValue;

/// The cache name quire uses as its list member (RFC 9211 §2: "the identity of the
/// cache ... a String or Token").
const CACHE_NAME: &str = "quire";

/// `key` keeps at most this many characters (each written as one ASCII byte, plus
/// escapes).
const KEY_BYTES_MAX: usize = 512;

/// `detail` keeps at most this many characters (each written as one ASCII byte,
/// plus escapes).
const DETAIL_BYTES_MAX: usize = 128;

/// An upstream `Cache-Status` longer than this is dropped rather than copied, so a
/// hostile origin cannot make every response carry kilobytes of it.
const UPSTREAM_BYTES_MAX: usize = 4096;

/// The largest magnitude of an sf-integer (RFC 8941 §3.3.1: at most 15 digits).
const SF_INTEGER_MAX: i64 = 999_999_999_999_999;

/// Why the request went forward to the origin (RFC 9211 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fwd {
    /// "The cache was configured to not handle this request."
    Bypass,
    /// "The request method's semantics require the request to be forwarded."
    Method,
    /// "The cache did not contain any responses that matched the request URI."
    UriMiss,
    /// "The cache contained a response that matched the request URI, but it could
    /// not select a response based upon this request's header fields and stored
    /// Vary header fields."
    VaryMiss,
    /// "The cache did not contain any responses that could be used to satisfy this
    /// request" (to be used when the cache cannot tell which of the above applies).
    Miss,
    /// "The cache was able to select a fresh response for the request, but the
    /// request's semantics (e.g., Cache-Control request directives) did not allow
    /// its use."
    Request,
    /// "The cache was able to select a response for the request, but it was stale."
    Stale,
    /// "The cache was able to select a partial response for the request, but it did
    /// not contain all of the requested ranges."
    Partial,
}

impl Fwd {
    /// The sf-token written after `fwd=`.
    pub(crate) const fn token(self) -> &'static str {
        match self {
            Fwd::Bypass => "bypass",
            Fwd::Method => "method",
            Fwd::UriMiss => "uri-miss",
            Fwd::VaryMiss => "vary-miss",
            Fwd::Miss => "miss",
            Fwd::Request => "request",
            Fwd::Stale => "stale",
            Fwd::Partial => "partial",
        }
    }
}

/// quire's member of the `Cache-Status` list (RFC 9211 §2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheStatus {
    /// §2.1: served from the cache without going forward.
    pub hit: bool,
    /// §2.2: why the request went forward. Ignored when `hit`.
    pub(crate) fwd: Option<Fwd>,
    /// §2.3: the status the next hop answered (e.g. 304 to a revalidation) when it
    /// differs from the one sent.
    fwd_status: Option<u16>,
    /// §2.5: the response was stored.
    pub(crate) stored: bool,
    /// §2.6: the request was collapsed with another one's fill.
    collapsed: bool,
    /// §2.4: remaining freshness in seconds, negative when stale.
    ttl: Option<i64>,
    /// §2.7: the cache key, for debugging. Exposes the key: only when configured.
    pub(crate) key: Option<String>,
    /// §2.8: implementation-specific detail, e.g. why a response was not stored.
    pub(crate) detail: Option<String>,
    /// The audience whose entry answered a signed-in reader's request: written into
    /// `detail` as `audience-<label>`, after any other detail.
    audience: Option<&'static str>,
}

impl CacheStatus {
    /// A hit (§2.1).
    pub fn hit() -> Self {
        CacheStatus {
            hit: true,
            ..CacheStatus::default()
        }
    }

    /// A request that went forward for `why` (§2.2).
    pub fn forward(why: Fwd) -> Self {
        CacheStatus {
            fwd: Some(why),
            ..CacheStatus::default()
        }
    }

    /// Sets `ttl` (§2.4).
    pub fn with_ttl(mut self, ttl_secs: i64) -> Self {
        self.ttl = Some(ttl_secs);
        self
    }

    /// Sets `fwd-status` (§2.3).
    pub fn with_fwd_status(mut self, status: u16) -> Self {
        self.fwd_status = Some(status);
        self
    }

    /// Marks the response as stored (§2.5).
    pub fn with_stored(mut self) -> Self {
        self.stored = true;
        self
    }

    /// Marks the request as collapsed (§2.6).
    pub fn with_collapsed(mut self) -> Self {
        self.collapsed = true;
        self
    }

    /// Sets `key` (§2.7).
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets `detail` (§2.8).
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Names the audience whose cache entry answered (`detail=audience-reader`,
    /// or `detail="stale-while-revalidate audience-reader"` beside another detail).
    pub fn with_audience(mut self, label: &'static str) -> Self {
        self.audience = Some(label);
        self
    }

    /// The list member as text, e.g. `quire; fwd=stale; fwd-status=304`.
    pub(crate) fn render(&self) -> String {
        let mut out = Vec::with_capacity(32);
        self.write_to(&mut out);
        ascii_string(out)
    }

    /// Appends the list member's text to `out`. The one renderer: [`CacheStatus::render`],
    /// `Display` and the header values are built on it, and quire's fast path calls it
    /// to write a hit's field straight into the response head, without allocating.
    /// Writes visible ASCII and spaces only.
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(CACHE_NAME.as_bytes());
        if self.hit {
            out.extend_from_slice(b"; hit");
        } else if let Some(fwd) = self.fwd {
            out.extend_from_slice(b"; fwd=");
            out.extend_from_slice(fwd.token().as_bytes());
            if let Some(status) = self.fwd_status {
                out.extend_from_slice(b"; fwd-status=");
                push_decimal(out, u64::from(status));
            }
            if self.stored {
                out.extend_from_slice(b"; stored");
            }
            if self.collapsed {
                out.extend_from_slice(b"; collapsed");
            }
        }
        if let Some(ttl) = self.ttl {
            // RFC 8941 §3.3.1: sf-integers have at most 15 digits.
            let ttl = ttl.clamp(-SF_INTEGER_MAX, SF_INTEGER_MAX);
            out.extend_from_slice(b"; ttl=");
            if ttl < 0 {
                out.push(b'-');
            }
            push_decimal(out, ttl.unsigned_abs());
        }
        if let Some(key) = &self.key {
            // §2.7: key is an sf-string.
            out.extend_from_slice(b"; key=");
            write_sf_string(out, key, KEY_BYTES_MAX);
        }
        let joined;
        let detail = match (&self.detail, self.audience) {
            (d, None) => d.as_deref(),
            // A hit's usual case, written without allocating (labels are tokens).
            (None, Some(a)) if is_sf_token(a) && a.len() < DETAIL_BYTES_MAX - 9 => {
                out.extend_from_slice(b"; detail=audience-");
                out.extend_from_slice(a.as_bytes());
                None
            }
            (None, Some(a)) => {
                joined = format!("audience-{a}");
                Some(joined.as_str())
            }
            (Some(d), Some(a)) => {
                joined = format!("{d} audience-{a}");
                Some(joined.as_str())
            }
        };
        if let Some(detail) = detail {
            out.extend_from_slice(b"; detail=");
            // §2.8: "String or Token".
            if detail.len() <= DETAIL_BYTES_MAX && is_sf_token(detail) {
                out.extend_from_slice(detail.as_bytes());
            } else {
                write_sf_string(out, detail, DETAIL_BYTES_MAX);
            }
        }
    }

    /// Appends the whole `Cache-Status` value to `out` when the upstream response
    /// carried the field lines `existing`: their members, then quire's (see
    /// [`CacheStatus::append_to_lines`]).
    pub fn write_after<'a>(
        &self,
        existing: impl IntoIterator<Item = &'a HeaderValue>,
        out: &mut Vec<u8>,
    ) {
        let mark = out.len();
        for line in existing {
            let Ok(text) = line.to_str() else {
                continue;
            };
            // §5.6.1: drop empty list elements at the edges.
            let text = text.trim_matches(|c| c == ' ' || c == '\t' || c == ',');
            if text.is_empty() {
                continue;
            }
            if out.len() > mark {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(text.as_bytes());
        }
        if out.len() - mark > UPSTREAM_BYTES_MAX {
            out.truncate(mark);
        }
        if out.len() > mark {
            out.extend_from_slice(b", ");
        }
        self.write_to(out);
    }

    /// The list member as a header value (always valid: rendering emits visible
    /// ASCII and spaces only).
    pub fn to_header_value(&self) -> HeaderValue {
        header_value(self.render())
    }

    /// [`CacheStatus::append_to_lines`] for at most one upstream line (the tests'
    /// shorthand).
    #[cfg(test)]
    fn append_to(&self, existing: Option<&HeaderValue>) -> HeaderValue {
        self.append_to_lines(existing)
    }

    /// The `Cache-Status` value to send when the upstream response already carried
    /// the field lines `existing` (they combine in order, separated by commas: RFC
    /// 9110 §5.3): quire's member goes last (RFC 9211 §2: "the first member of the
    /// list represents the cache closest to the origin server, and the last member
    /// represents the cache closest to the user"; "caches SHOULD preserve the
    /// existing field value"). An empty, non-ASCII or oversized
    /// (`UPSTREAM_BYTES_MAX`) upstream value is dropped.
    pub fn append_to_lines<'a>(
        &self,
        existing: impl IntoIterator<Item = &'a HeaderValue>,
    ) -> HeaderValue {
        let mut out = Vec::with_capacity(64);
        self.write_after(existing, &mut out);
        header_value(ascii_string(out))
    }
}

impl fmt::Display for CacheStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// RFC 8941 §3.3.4: `sf-token = ( ALPHA / "*" ) *( tchar / ":" / "/" )`.
fn is_sf_token(s: &str) -> bool {
    let mut bytes = s.bytes();
    let Some(first) = bytes.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == b'*')
        && bytes.all(|b| is_tchar(b) || b == b':' || b == b'/')
}

/// Writes `s` as an RFC 8941 §4.1.6 sf-string: `"` and `\` escaped, characters
/// outside %x20-7E (which an sf-string cannot hold) replaced by `?`, at most `max`
/// characters of content before escaping.
fn write_sf_string(out: &mut Vec<u8>, s: &str, max: usize) {
    out.push(b'"');
    for c in s.chars().take(max) {
        match c {
            '"' | '\\' => {
                out.push(b'\\');
                out.push(c as u8);
            }
            ' '..='~' => out.push(c as u8),
            _ => out.push(b'?'),
        }
    }
    out.push(b'"');
}

/// Text [`CacheStatus::write_to`] wrote (ASCII by construction).
fn ascii_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|_| CACHE_NAME.to_string())
}

fn header_value(s: String) -> HeaderValue {
    // Everything written is visible ASCII or SP, so this cannot fail; fall back to the
    // bare cache name rather than panic if that invariant is ever broken.
    HeaderValue::try_from(s).unwrap_or_else(|_| HeaderValue::from_static(CACHE_NAME))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A minimal RFC 8941 list parser for checking what `render` emits: returns each
    /// member's name and parameters (value as written, strings unescaped).
    /// A parsed list member: its bare item and its parameters.
    type Member = (String, Vec<(String, String)>);

    fn parse_sf_list(s: &str) -> Option<Vec<Member>> {
        let b = s.as_bytes();
        let mut i = 0;
        let mut out = Vec::new();
        loop {
            let name = sf_bare_item(b, &mut i)?;
            let mut params = Vec::new();
            while b.get(i) == Some(&b';') {
                i += 1;
                while b.get(i) == Some(&b' ') {
                    i += 1;
                }
                let start = i;
                while b.get(i).is_some_and(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || b"_-.*".contains(c)
                }) {
                    i += 1;
                }
                if start == i {
                    return None;
                }
                let key = s[start..i].to_string();
                let value = if b.get(i) == Some(&b'=') {
                    i += 1;
                    sf_bare_item(b, &mut i)?
                } else {
                    "?1".to_string()
                };
                params.push((key, value));
            }
            out.push((name, params));
            while b.get(i) == Some(&b' ') {
                i += 1;
            }
            match b.get(i) {
                None => return Some(out),
                Some(b',') => {
                    i += 1;
                    while b.get(i) == Some(&b' ') {
                        i += 1;
                    }
                }
                Some(_) => return None,
            }
        }
    }

    fn sf_bare_item(b: &[u8], i: &mut usize) -> Option<String> {
        match b.get(*i)? {
            b'"' => {
                *i += 1;
                let mut v = String::new();
                loop {
                    match *b.get(*i)? {
                        b'\\' => {
                            let c = *b.get(*i + 1)?;
                            if c != b'"' && c != b'\\' {
                                return None;
                            }
                            v.push(c as char);
                            *i += 2;
                        }
                        b'"' => {
                            *i += 1;
                            return Some(v);
                        }
                        c @ 0x20..=0x7e => {
                            v.push(c as char);
                            *i += 1;
                        }
                        _ => return None,
                    }
                }
            }
            c if c.is_ascii_digit() || *c == b'-' => {
                let start = *i;
                *i += 1;
                while b.get(*i).is_some_and(u8::is_ascii_digit) {
                    *i += 1;
                }
                let digits = *i - start - usize::from(b[start] == b'-');
                (1..=15)
                    .contains(&digits)
                    .then(|| String::from_utf8_lossy(&b[start..*i]).into())
            }
            _ => {
                let start = *i;
                while b
                    .get(*i)
                    .is_some_and(|&c| is_tchar(c) || c == b':' || c == b'/')
                {
                    *i += 1;
                }
                let t = std::str::from_utf8(&b[start..*i]).ok()?;
                is_sf_token(t).then(|| t.to_string())
            }
        }
    }

    fn param<'a>(member: &'a Member, key: &str) -> Option<&'a str> {
        member
            .1
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn written_after_what_the_buffer_holds() {
        // The fast path appends the value to a response head in the making.
        let up = [
            HeaderValue::from_static(" A; fwd=miss ,"),
            HeaderValue::from_static(""),
        ];
        let mut out = b"cache-status: ".to_vec();
        CacheStatus::hit().with_ttl(-3).write_after(&up, &mut out);
        assert_eq!(out, b"cache-status: A; fwd=miss, quire; hit; ttl=-3");
        let mut out = b"x".to_vec();
        CacheStatus::hit().write_after([], &mut out);
        assert_eq!(out, b"xquire; hit");
    }

    /// The forms DESIGN.md's user-facing contract names.
    #[test]
    fn renders_contract_examples() {
        assert_eq!(CacheStatus::hit().render(), "quire; hit");
        assert_eq!(
            CacheStatus::hit().with_ttl(3540).render(),
            "quire; hit; ttl=3540"
        );
        assert_eq!(
            CacheStatus::forward(Fwd::Miss).with_stored().render(),
            "quire; fwd=miss; stored"
        );
        assert_eq!(
            CacheStatus::forward(Fwd::Bypass)
                .with_detail("cookie")
                .render(),
            "quire; fwd=bypass; detail=cookie"
        );
        assert_eq!(
            CacheStatus::forward(Fwd::Stale)
                .with_fwd_status(304)
                .render(),
            "quire; fwd=stale; fwd-status=304"
        );
    }

    /// RFC 9211 §2.2: every fwd token.
    #[test]
    fn fwd_tokens() {
        let all = [
            (Fwd::Bypass, "bypass"),
            (Fwd::Method, "method"),
            (Fwd::UriMiss, "uri-miss"),
            (Fwd::VaryMiss, "vary-miss"),
            (Fwd::Miss, "miss"),
            (Fwd::Request, "request"),
            (Fwd::Stale, "stale"),
            (Fwd::Partial, "partial"),
        ];
        for (fwd, token) in all {
            assert_eq!(fwd.token(), token);
            assert!(is_sf_token(token));
            assert_eq!(
                CacheStatus::forward(fwd).render(),
                format!("quire; fwd={token}")
            );
        }
    }

    /// RFC 9211 §2.1, §2.3, §2.5, §2.6: hit excludes fwd and its parameters.
    #[test]
    fn hit_excludes_forward_parameters() {
        let s = CacheStatus {
            hit: true,
            fwd: Some(Fwd::Miss),
            fwd_status: Some(200),
            stored: true,
            collapsed: true,
            ttl: Some(5),
            ..CacheStatus::default()
        };
        assert_eq!(s.render(), "quire; hit; ttl=5");
    }

    /// RFC 9211 §2.4: ttl is negative when stale; RFC 8941 §3.3.1 bounds integers.
    #[test]
    fn ttl_negative_and_clamped() {
        assert_eq!(
            CacheStatus::hit().with_ttl(-30).render(),
            "quire; hit; ttl=-30"
        );
        assert_eq!(
            CacheStatus::hit().with_ttl(i64::MAX).render(),
            "quire; hit; ttl=999999999999999"
        );
        assert_eq!(
            CacheStatus::hit().with_ttl(i64::MIN).render(),
            "quire; hit; ttl=-999999999999999"
        );
    }

    /// RFC 9211 §2.5, §2.6: booleans rendered bare, in a fixed order.
    #[test]
    fn forward_with_all_parameters() {
        let s = CacheStatus::forward(Fwd::UriMiss)
            .with_fwd_status(200)
            .with_stored()
            .with_collapsed()
            .with_ttl(60)
            .with_key("GET https://a.example/x")
            .with_detail("admission");
        assert_eq!(
            s.render(),
            "quire; fwd=uri-miss; fwd-status=200; stored; collapsed; ttl=60; \
             key=\"GET https://a.example/x\"; detail=admission"
        );
    }

    /// RFC 8941 §4.1.6: `"` and `\` are escaped in sf-strings.
    #[test]
    fn key_and_detail_are_escaped() {
        let s = CacheStatus::forward(Fwd::Bypass)
            .with_key(r#"a"b\c"#)
            .with_detail("has space");
        assert_eq!(
            s.render(),
            r#"quire; fwd=bypass; key="a\"b\\c"; detail="has space""#
        );
        let parsed = parse_sf_list(&s.render()).unwrap();
        assert_eq!(param(&parsed[0], "key"), Some(r#"a"b\c"#));
        assert_eq!(param(&parsed[0], "detail"), Some("has space"));
    }

    /// RFC 8941 §3.3.3: sf-strings hold only %x20-7E; others become `?`.
    #[test]
    fn non_ascii_and_controls_are_replaced() {
        let s = CacheStatus::hit()
            .with_key("/caf\u{e9}\r\nSet-Cookie: x=1")
            .with_detail("\u{1F600}");
        assert_eq!(
            s.render(),
            "quire; hit; key=\"/caf???Set-Cookie: x=1\"; detail=\"?\""
        );
        // The header value is valid (no CR/LF injection).
        assert_eq!(s.to_header_value().to_str().unwrap(), s.render());
    }

    /// The audience joins any other detail; alone it is a token.
    #[test]
    fn audience_is_named_in_detail() {
        let hit = CacheStatus::hit().with_audience("reader").render();
        assert_eq!(hit, "quire; hit; detail=audience-reader");
        let swr = CacheStatus::hit()
            .with_detail("stale-while-revalidate")
            .with_audience("admin")
            .render();
        assert_eq!(
            swr,
            "quire; hit; detail=\"stale-while-revalidate audience-admin\""
        );
    }

    /// detail is a token only when it is one (RFC 8941 §3.3.4).
    #[test]
    fn detail_token_or_string() {
        let d = |x: &str| CacheStatus::forward(Fwd::Bypass).with_detail(x).render();
        assert!(d("set-cookie").ends_with("detail=set-cookie"));
        assert!(d("too/big:1").ends_with("detail=too/big:1"));
        assert!(
            d("1abc").ends_with("detail=\"1abc\""),
            "tokens start with ALPHA"
        );
        assert!(d("").ends_with("detail=\"\""));
        assert!(d("a,b").ends_with("detail=\"a,b\""));
    }

    /// Lengths are capped.
    #[test]
    fn key_and_detail_are_truncated() {
        let s = CacheStatus::hit()
            .with_key("k".repeat(10_000))
            .with_detail("d".repeat(10_000));
        let parsed = parse_sf_list(&s.render()).unwrap();
        assert_eq!(param(&parsed[0], "key").unwrap().len(), KEY_BYTES_MAX);
        assert_eq!(param(&parsed[0], "detail").unwrap().len(), DETAIL_BYTES_MAX);
    }

    /// RFC 9211 §2: quire's member goes after those of caches nearer the origin.
    #[test]
    fn append_after_upstream_members() {
        let up = HeaderValue::from_static("OriginCache; hit; ttl=10");
        assert_eq!(
            CacheStatus::forward(Fwd::Miss)
                .with_stored()
                .append_to(Some(&up)),
            "OriginCache; hit; ttl=10, quire; fwd=miss; stored"
        );
        assert_eq!(CacheStatus::hit().append_to(None), "quire; hit");
        let empty = HeaderValue::from_static(" , ");
        assert_eq!(CacheStatus::hit().append_to(Some(&empty)), "quire; hit");
    }

    /// RFC 9110 §5.3: several upstream lines join in order.
    #[test]
    fn append_joins_upstream_lines() {
        let a = HeaderValue::from_static("A; fwd=miss,");
        let b = HeaderValue::from_static("B; hit");
        let v = CacheStatus::hit().append_to_lines([&a, &b]);
        assert_eq!(v, "A; fwd=miss, B; hit, quire; hit");
        let parsed = parse_sf_list(v.to_str().unwrap()).unwrap();
        assert_eq!(
            parsed.iter().map(|m| m.0.as_str()).collect::<Vec<_>>(),
            ["A", "B", "quire"]
        );
    }

    /// An oversized or non-ASCII upstream value is dropped, not copied.
    #[test]
    fn append_drops_oversized_or_opaque_upstream() {
        let big = HeaderValue::try_from("x; hit, ".repeat(UPSTREAM_BYTES_MAX)).unwrap();
        assert_eq!(CacheStatus::hit().append_to(Some(&big)), "quire; hit");
        let opaque = HeaderValue::from_bytes(b"caf\xe9; hit").unwrap();
        assert_eq!(CacheStatus::hit().append_to(Some(&opaque)), "quire; hit");
    }

    proptest! {
        /// Hostile key/detail always render as one parseable sf-list member whose
        /// string parameters round-trip (modulo replacement and truncation).
        #[test]
        fn hostile_key_and_detail_render_valid_sf(
            key in proptest::option::of(any::<String>()),
            detail in proptest::option::of(any::<String>()),
            ttl in proptest::option::of(any::<i64>()),
            status in proptest::option::of(any::<u16>()),
            hit in any::<bool>(),
        ) {
            let s = CacheStatus {
                hit,
                fwd: Some(Fwd::Miss),
                fwd_status: status,
                ttl,
                key: key.clone(),
                detail: detail.clone(),
                ..CacheStatus::default()
            };
            let text = s.render();
            let hv = s.to_header_value();
            prop_assert_eq!(hv.to_str().unwrap(), text.as_str());
            let parsed = parse_sf_list(&text);
            prop_assert!(parsed.is_some(), "{}", text);
            let parsed = parsed.unwrap();
            prop_assert_eq!(parsed.len(), 1);
            prop_assert_eq!(parsed[0].0.as_str(), CACHE_NAME);
            let clean = |x: &str, max: usize| -> String {
                x.chars().take(max).map(|c| if (' '..='~').contains(&c) { c } else { '?' }).collect()
            };
            if let Some(k) = &key {
                prop_assert_eq!(param(&parsed[0], "key").unwrap(), clean(k, KEY_BYTES_MAX));
            }
            if let Some(d) = &detail {
                prop_assert_eq!(param(&parsed[0], "detail").unwrap(), clean(d, DETAIL_BYTES_MAX));
            }
        }

        /// Appending to any upstream header value yields a valid header value ending in
        /// quire's member.
        #[test]
        fn append_to_hostile_upstream_is_valid(up in proptest::collection::vec(any::<u8>(), 0..200)) {
            let ours = CacheStatus::hit().with_ttl(1);
            let existing = HeaderValue::from_bytes(&up).ok();
            let v = ours.append_to(existing.as_ref());
            prop_assert!(v.to_str().unwrap().ends_with("quire; hit; ttl=1"));
        }
    }
}
