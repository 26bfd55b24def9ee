//! An origin's own dictionaries (RFC 9842 §2.1): the `Use-As-Dictionary` field a
//! response marks itself with, and the URL pattern its `match` names.
//!
//! A browser keeps such a response as a dictionary and, for a later request whose URL
//! matches the pattern (and whose destination `match-dest` lists), sends its hash in
//! `Available-Dictionary`. A cache that knows the pattern can then compress the
//! later response against it.
//!
//! Key decisions:
//! - **A subset of the field, strictly read**: an sf-dictionary of at most
//!   [`FIELD_MAX`] bytes with `match` (a string, required), `match-dest` (an inner
//!   list of strings), `id` (a string) and `type` (a token; only `raw` is a
//!   dictionary). Anything malformed is no dictionary at all; unknown keys are
//!   ignored, as RFC 8941 §4.2 asks.
//! - **A subset of URL patterns**: literal characters and `*` (any run of
//!   characters, `/` included) in the path and in the query, as Chromium reads a
//!   pattern relative to the dictionary's URL: scheme, host and port are the
//!   dictionary's, a path without a leading `/` is resolved against the
//!   dictionary's directory, and a pattern with no `?` matches any query (checked in
//!   Chromium 156: `/app.css` matches `/app.css?v=2`). A pattern with named groups,
//!   regular expressions, groups, modifiers, escapes or a fragment is not read
//!   ([`Pattern::parse`] gives `None`): the cache then never compresses against that
//!   dictionary, which costs bytes, never correctness, since a body is only sent to a
//!   client whose `Available-Dictionary` names the dictionary it was made with.

/// The longest `Use-As-Dictionary` value read.
pub const FIELD_MAX: usize = 1024;

/// A response's `Use-As-Dictionary`, as far as a cache needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UseAsDictionary {
    /// The `match` pattern, as sent.
    pub pattern: String,
    /// The request destinations it is for (`match-dest`); empty: all.
    pub dest: Vec<String>,
    /// The `id` the client echoes in `Dictionary-ID`.
    pub id: Option<String>,
}

impl UseAsDictionary {
    /// The field's value, if it is a raw dictionary this reads (see the module doc).
    pub fn parse(value: &[u8]) -> Option<UseAsDictionary> {
        if value.len() > FIELD_MAX {
            return None;
        }
        let mut p = Parser { s: value, at: 0 };
        let (mut pattern, mut dest, mut id, mut raw) = (None, Vec::new(), None, true);
        loop {
            p.ows();
            let key = p.key()?;
            let value = if p.eat(b'=') { p.item()? } else { Item::True };
            p.params()?;
            match (key.as_str(), value) {
                ("match", Item::Str(s)) => pattern = Some(s),
                ("match", _) => return None,
                ("match-dest", Item::List(l)) => dest = l,
                ("match-dest", _) => return None,
                ("id", Item::Str(s)) => id = Some(s),
                ("id", _) => return None,
                ("type", Item::Token(t)) => raw = t == "raw",
                ("type", _) => return None,
                _ => {}
            }
            p.ows();
            if p.done() {
                break;
            }
            if !p.eat(b',') {
                return None;
            }
        }
        let pattern = pattern.filter(|_| raw)?;
        Some(UseAsDictionary { pattern, dest, id })
    }

    /// Whether a response of `content_type` may be a request destination this
    /// dictionary is for: `document` (and frames) means HTML, `style` CSS,
    /// `script` JavaScript; no `match-dest`, or one this does not know, any.
    pub fn for_content_type(&self, content_type: &str) -> bool {
        let ct = content_type.trim_start().to_ascii_lowercase();
        let fits = |d: &str| match d {
            "document" | "frame" | "iframe" => ct.starts_with("text/html"),
            "style" => ct.starts_with("text/css"),
            "script" => ct.contains("javascript") || ct.starts_with("text/ecmascript"),
            _ => true,
        };
        self.dest.is_empty() || self.dest.iter().any(|d| fits(d))
    }
}

/// An item of the sf-dictionary subset read.
enum Item {
    Str(String),
    Token(String),
    List(Vec<String>),
    True,
    Other,
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }
    fn done(&self) -> bool {
        self.at >= self.s.len()
    }
    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        self.at += usize::from(hit);
        hit
    }
    fn ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.at += 1;
        }
    }
    fn sp(&mut self) {
        while self.peek() == Some(b' ') {
            self.at += 1;
        }
    }
    /// An sf-key: lcalpha or `*`, then lcalpha, digits, `_-.*`.
    fn key(&mut self) -> Option<String> {
        let start = self.at;
        if !matches!(self.peek(), Some(b'a'..=b'z' | b'*')) {
            return None;
        }
        while matches!(
            self.peek(),
            Some(b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*')
        ) {
            self.at += 1;
        }
        Some(String::from_utf8_lossy(&self.s[start..self.at]).into_owned())
    }
    fn string(&mut self) -> Option<String> {
        let mut out = String::new();
        loop {
            let c = self.peek()?;
            self.at += 1;
            match c {
                b'"' => return Some(out),
                b'\\' => {
                    let e = self.peek().filter(|e| matches!(e, b'"' | b'\\'))?;
                    self.at += 1;
                    out.push(char::from(e));
                }
                0x20..=0x7e => out.push(char::from(c)),
                _ => return None,
            }
        }
    }
    fn token(&mut self) -> Option<String> {
        let start = self.at;
        if !matches!(self.peek(), Some(b'a'..=b'z' | b'A'..=b'Z' | b'*')) {
            return None;
        }
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&c))
        {
            self.at += 1;
        }
        Some(String::from_utf8_lossy(&self.s[start..self.at]).into_owned())
    }
    /// A bare item or an inner list (of strings; another item in it is an error).
    fn item(&mut self) -> Option<Item> {
        match self.peek()? {
            b'"' => {
                self.at += 1;
                self.string().map(Item::Str)
            }
            b'(' => {
                self.at += 1;
                let mut list = Vec::new();
                loop {
                    self.sp();
                    if self.eat(b')') {
                        return Some(Item::List(list));
                    }
                    if !self.eat(b'"') {
                        return None;
                    }
                    list.push(self.string()?);
                    self.params()?;
                    if !matches!(self.peek(), Some(b' ' | b')')) {
                        return None;
                    }
                }
            }
            b'?' => {
                self.at += 1;
                matches!(self.peek(), Some(b'0' | b'1')).then(|| {
                    self.at += 1;
                    Item::Other
                })
            }
            b'-' | b'0'..=b'9' => {
                while matches!(self.peek(), Some(b'-' | b'.' | b'0'..=b'9')) {
                    self.at += 1;
                }
                Some(Item::Other)
            }
            _ => self.token().map(Item::Token),
        }
    }
    /// Parameters (`;key[=item]`), skipped.
    fn params(&mut self) -> Option<()> {
        while self.eat(b';') {
            self.sp();
            self.key()?;
            if self.eat(b'=') && matches!(self.item()?, Item::List(_)) {
                return None;
            }
        }
        Some(())
    }
}

/// The longest `match` pattern read: matching costs at most its length times the
/// URL's, and URLs are bounded by the request head's limit.
pub const PATTERN_MAX: usize = 256;

/// A `match` pattern made absolute against its dictionary's URL (see the module
/// doc for the subset read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// `scheme://authority` of the dictionary.
    origin: String,
    /// The path's glob.
    path: String,
    /// The query's glob; `*` when the pattern names none.
    query: String,
}

impl Pattern {
    /// `pattern` relative to `dictionary_url` (an absolute `scheme://host/path`
    /// URL); `None` for a pattern outside the subset.
    pub fn parse(pattern: &str, dictionary_url: &str) -> Option<Pattern> {
        let (scheme, rest) = dictionary_url.split_once("://")?;
        let slash = rest.find('/').unwrap_or(rest.len());
        let origin = format!("{scheme}://{}", &rest[..slash]);
        let dict_path = rest[slash..].split(['?', '#']).next().unwrap_or("/");
        let unsupported = |s: &str| s.bytes().any(|c| b":(){}+\\#".contains(&c));
        let (path, query) = match pattern.split_once('?') {
            Some((p, q)) => (p, q),
            None => (pattern, "*"),
        };
        if path.is_empty()
            || pattern.len() > PATTERN_MAX
            || unsupported(path)
            || unsupported(query)
            || query.contains('?')
        {
            return None;
        }
        let path = if path.starts_with('/') {
            path.to_owned()
        } else {
            let dir = &dict_path[..=dict_path.rfind('/').unwrap_or(0)];
            format!("{}{path}", if dir.is_empty() { "/" } else { dir })
        };
        Some(Pattern {
            origin,
            path,
            query: query.to_owned(),
        })
    }

    /// Whether the absolute URL `url` (`scheme://authority/path?query`) matches.
    pub fn matches(&self, url: &str) -> bool {
        let Some(rest) = url
            .strip_prefix(self.origin.as_str())
            .filter(|r| r.starts_with('/'))
        else {
            return false;
        };
        let rest = rest.split('#').next().unwrap_or("");
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        glob(&self.path, path) && glob(&self.query, query)
    }

    /// How specific the pattern is: a browser holding several dictionaries for a URL
    /// uses the one with the longest `match` (RFC 9842 §2.2.3).
    pub fn len(&self) -> usize {
        self.path.len() + self.query.len()
    }

    /// Never true (a pattern has a path); for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.path.is_empty()
    }
}

/// Whether `text` matches `pattern`, where `*` is any run of bytes: the usual
/// greedy match with one backtrack point, so at most `pattern × text` steps (no
/// exponential blow-up, whatever the pattern).
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if i < p.len() && p[i] == t[j] {
            i += 1;
            j += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Option<UseAsDictionary> {
        UseAsDictionary::parse(s.as_bytes())
    }

    #[test]
    fn use_as_dictionary_reads_match_dest_and_id() {
        let u = parse(r#"match="/app.*.css", match-dest=("style"), id="v1""#).unwrap();
        assert_eq!(u.pattern, "/app.*.css");
        assert_eq!(u.dest, ["style"]);
        assert_eq!(u.id.as_deref(), Some("v1"));
        let u = parse(r#"match="/*";x=1, type=raw, other=?1, n=5"#).unwrap();
        assert_eq!((u.pattern.as_str(), u.dest.len()), ("/*", 0));
        assert_eq!(parse(r#"match="/a\"b""#).unwrap().pattern, "/a\"b");
        assert_eq!(parse(r#"match-dest=(), match="/x""#).unwrap().pattern, "/x");
    }

    #[test]
    fn a_malformed_or_foreign_use_as_dictionary_is_no_dictionary() {
        for bad in [
            "",
            "match",
            "match=/x",
            r#"match="/x", type=other"#,
            r#"match="/x" id="a""#,
            r#"match="/x", match-dest="document""#,
            r#"match="/x", match-dest=(document)"#,
            r#"match="/x"#,
            r#"Match="/x""#,
            r#"match="/x", id=("a")"#,
            "match=\"/\u{7f}\"",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        let long = format!(r#"match="/{}""#, "a".repeat(FIELD_MAX));
        assert_eq!(parse(&long), None);
    }

    #[test]
    fn match_dest_maps_to_content_types() {
        let doc = parse(r#"match="/*", match-dest=("document")"#).unwrap();
        assert!(doc.for_content_type("text/html; charset=utf-8"));
        assert!(!doc.for_content_type("text/css"));
        let any = parse(r#"match="/*""#).unwrap();
        assert!(any.for_content_type("image/png"));
        let style = parse(r#"match="/*", match-dest=("style" "script")"#).unwrap();
        assert!(style.for_content_type("text/css"));
        assert!(style.for_content_type("application/javascript"));
        assert!(!style.for_content_type("text/html"));
    }

    #[test]
    fn patterns_resolve_against_the_dictionary_url_as_chromium_does() {
        let d = "https://a.test/x/d.css";
        let p = Pattern::parse("/app.css", d).unwrap();
        assert!(p.matches("https://a.test/app.css"));
        assert!(
            p.matches("https://a.test/app.css?v=2"),
            "no query: any query"
        );
        assert!(!p.matches("https://b.test/app.css"), "another host");
        assert!(!p.matches("http://a.test/app.css"), "another scheme");
        assert!(!p.matches("https://a.test:8443/app.css"), "another port");
        assert!(!p.matches("https://a.test/app.css/more"));
        let p = Pattern::parse("/app.*.css", d).unwrap();
        assert!(p.matches("https://a.test/app.v2.css"));
        assert!(p.matches("https://a.test/app.v2.css?x=1"));
        assert!(!p.matches("https://a.test/app.v2.js"));
        let p = Pattern::parse("app/*", d).unwrap();
        assert!(p.matches("https://a.test/x/app/y/z"));
        assert!(!p.matches("https://a.test/app/y"));
        let p = Pattern::parse("/s?v=*", d).unwrap();
        assert!(p.matches("https://a.test/s?v=3"));
        assert!(!p.matches("https://a.test/s?w=3"));
        assert!(!p.matches("https://a.test/s"));
        assert!(Pattern::parse("/*", d).unwrap().len() < Pattern::parse("/a/*", d).unwrap().len());
    }

    #[test]
    fn patterns_outside_the_subset_are_not_read() {
        let d = "https://a.test/d";
        for bad in [
            "/:id", "/(a|b)", "/{a}?", "/a+", "/a\\*", "/a#b", "", "/a?b?c",
        ] {
            assert_eq!(Pattern::parse(bad, d), None, "{bad:?}");
        }
        assert_eq!(Pattern::parse("/a", "not a url"), None);
    }

    #[test]
    fn glob_is_exact_and_bounded() {
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "a_b_b_c"));
        assert!(!glob("a*b*c", "a_b_b_"));
        assert!(glob("**", "x"));
        // The longest hostile pattern against a long text ends (in pattern × text
        // steps), and a longer one is not read at all.
        let text = "a".repeat(10_000);
        let hostile = format!("/{}b", "*a".repeat((PATTERN_MAX - 2) / 2));
        assert!(hostile.len() <= PATTERN_MAX);
        assert!(!glob(&hostile, &format!("/{text}")));
        assert_eq!(
            Pattern::parse(&format!("{hostile}a"), "https://a.test/d"),
            None
        );
    }
}
