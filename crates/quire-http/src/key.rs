//! URL normalisation and cache keys, including `Vary` (RFC 9111 §2, §4.1).
//!
//! A request becomes a [`NormalizedUrl`] — scheme and host lower-cased, default port
//! and trailing dot dropped, host aliases folded, path percent-encoding and dot
//! segments normalised (RFC 3986 §6.2.2), tracking parameters dropped and the query
//! sorted, the fragment gone. Its `Display` form (`scheme://host[:port]/path?query`)
//! is what purge-by-URL and purge-by-prefix compare against.
//!
//! From that URL come two store keys, both in one versioned, length-prefixed byte
//! encoding (so no two different inputs share a key):
//! - [`primary_key`]: where the `Vary` field list of a URL is kept;
//! - [`variant_key`]: one stored response, keyed by the URL and the request's values
//!   of every field the response's `Vary` names — except `Accept-Encoding`, which
//!   quire answers by storing one variant per coding (see [`crate::encoding`]).
//!
//! Key decisions:
//! - **Only what is named is keyed.** A request header not named in `Vary` never
//!   changes a key; the Host header matters only through the URL.
//! - **Merge only what the RFCs call equivalent, otherwise fragment.** Two URLs or
//!   header values that might be answered differently by an origin must never share a
//!   key (that would serve one reader another's page); two equivalent ones sharing a
//!   key is only a hit-ratio win. So repeated query keys keep their order, malformed
//!   percent-escapes stay byte-exact, and `%2F` is not decoded.
//! - **The fill must forward what was keyed.** Because `/a/%2e%2e/b` keys as `/b`,
//!   the server should send the origin the normalised path (or refuse to store when it
//!   sends the original), or a crafted path could poison another URL's entry.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::syntax::{is_tchar, trim_ows};
use http::header::VARY;
use http::{HeaderMap, HeaderValue, Method, Uri};

/// Default bound on the request path and on the query, each, in bytes.
const URL_PART_BYTES_MAX_DEFAULT: usize = 8 * 1024;

/// A response naming more `Vary` fields than this is treated like `Vary: *` (never
/// stored or reused): keys stay bounded, and no real site varies on so many fields.
const VARY_FIELDS_MAX: usize = 32;

/// Version byte that opens every key; bump it when the encoding changes so old
/// entries read as misses.
const KEY_FORMAT_VERSION: u8 = 1;

/// Tracking parameters dropped from queries by default (exact names or `prefix*`).
const DEFAULT_DROP_PARAMS: &[&str] = &[
    "utm_*",
    "gclid",
    "gclsrc",
    "dclid",
    "gbraid",
    "wbraid",
    "fbclid",
    "msclkid",
    "yclid",
    "twclid",
    "ttclid",
    "li_fat_id",
    "mc_cid",
    "mc_eid",
    "_ga",
    "_gl",
    "igshid",
    "ref_src",
    "_hsenc",
    "_hsmi",
    "mkt_tok",
    "oly_anon_id",
    "oly_enc_id",
    "vero_id",
    "s_cid",
];

/// How URLs are normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyConfig {
    /// Query parameters dropped before keying: exact names, or `prefix*` (a trailing
    /// `*` matches any suffix, including none). Compared case-sensitively against the
    /// name after percent-encoding normalisation, as origins compare them.
    pub drop_params: Vec<String>,
    /// `(alias, canonical)` host pairs; a request for `alias` is keyed as `canonical`.
    /// Hosts only: the port is kept. Compared after host normalisation.
    pub host_aliases: Vec<(String, String)>,
    /// The host used when a request names none (HTTP/1.0 without `Host`, or an empty
    /// `Host`, RFC 9112 §3.2). May carry a port.
    pub default_host: String,
    /// Longest accepted path, in bytes (before normalisation).
    pub path_bytes_max: usize,
    /// Longest accepted query, in bytes (before normalisation).
    pub query_bytes_max: usize,
    /// When set, only these paths (as normalised; a trailing `*` matches any
    /// suffix) keep their query; every other URL is keyed, and fetched, without one. A publishing server whose pages do not
    /// read their query sets it, so `?u=1`, `?u=2`, … are one page and one fill,
    /// not a new key (and a new compression) each.
    pub query_paths: Option<Vec<String>>,
    /// Which query parameters are kept, by path prefix (as normalised; the longest
    /// matching prefix decides; no match keeps them all). A site whose pages read no
    /// query string says so here, and `?x=1`, `?x=2`, … stop making a key (and a
    /// fill, and a stored copy) each: a cache-busting flood costs the origin one
    /// fill per page, not one per request.
    pub query_rules: Vec<(String, QueryRule)>,
}

/// What a path keeps of a query (see [`KeyConfig::query_rules`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryRule {
    /// Every parameter (but `drop_params`).
    All,
    /// None: the URL is keyed, and fetched, without its query.
    None,
    /// Only these parameters (exact names, or `prefix*`).
    Only(Vec<String>),
}

impl KeyConfig {
    /// The rule of the longest prefix in [`KeyConfig::query_rules`] that `path`
    /// starts with.
    fn query_rule(&self, path: &str) -> &QueryRule {
        self.query_rules
            .iter()
            .filter(|(prefix, _)| path.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map_or(&QueryRule::All, |(_, r)| r)
    }
}

impl Default for KeyConfig {
    fn default() -> Self {
        KeyConfig {
            drop_params: DEFAULT_DROP_PARAMS.iter().map(|s| s.to_string()).collect(),
            host_aliases: Vec::new(),
            default_host: "localhost".to_string(),
            path_bytes_max: URL_PART_BYTES_MAX_DEFAULT,
            query_bytes_max: URL_PART_BYTES_MAX_DEFAULT,
            query_paths: None,
            query_rules: Vec::new(),
        }
    }
}

/// Why a URL cannot be keyed. The request is answered 400 (or, for purge, rejected);
/// the error never echoes the hostile input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Only `http` and `https` are keyed.
    #[error("unsupported URL scheme")]
    Scheme,
    /// The host is not a DNS name or IP literal (the reason says which rule).
    #[error("invalid host: {0}")]
    Host(&'static str),
    /// The port is not a number in 0..=65535.
    #[error("invalid port")]
    Port,
    /// The path is not in origin-form (`/...`), e.g. `*`.
    #[error("path is not absolute")]
    Path,
    /// The path is longer than `path_bytes_max`.
    #[error("path of {len} bytes exceeds the limit of {max}")]
    PathTooLong {
        /// Length of the path, in bytes.
        len: usize,
        /// The configured limit.
        max: usize,
    },
    /// The query is longer than `query_bytes_max`.
    #[error("query of {len} bytes exceeds the limit of {max}")]
    QueryTooLong {
        /// Length of the query, in bytes.
        len: usize,
        /// The configured limit.
        max: usize,
    },
    /// A purge or explain URL that is not an absolute `http(s)://host/...` URL.
    #[error("not an absolute http(s) URL")]
    NotAbsolute,
}

/// A URL in the one form quire keys, compares and purges by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NormalizedUrl {
    scheme: &'static str,
    /// Lower-case DNS name, dotted IPv4, or `[canonical IPv6]`.
    host: String,
    /// Present only when not the scheme's default.
    port: Option<u16>,
    /// Starts with `/`.
    path: String,
    /// Never empty when present.
    query: Option<String>,
    serialized: String,
}

impl NormalizedUrl {
    /// `http` or `https`.
    pub fn scheme(&self) -> &str {
        self.scheme
    }
    /// The host, lower-case, without trailing dot; IPv6 in brackets.
    pub fn host(&self) -> &str {
        &self.host
    }
    /// The port, when it is not the scheme's default.
    pub fn port(&self) -> Option<u16> {
        self.port
    }
    /// The normalised path; always starts with `/`.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// The normalised query, without `?`; `None` when there is none left.
    #[cfg(test)]
    fn query(&self) -> Option<&str> {
        self.query.as_deref()
    }
    /// The path and query as sent to the origin: `/path[?query]`.
    pub fn path_and_query(&self) -> &str {
        let start = self.serialized.len()
            - self.path.len()
            - self.query.as_ref().map_or(0, |q| q.len() + 1);
        &self.serialized[start..]
    }
    /// `scheme://host[:port]/path[?query]`, the form purges compare against.
    pub fn as_str(&self) -> &str {
        &self.serialized
    }

    /// This URL with `suffix` after its path (the query kept): where an upstream
    /// keeps another representation of the same resource (a note's `.md`). `suffix`
    /// is made of characters normalisation leaves as they are (ASCII letters,
    /// digits, `.`, `-`, `_`), so the result is normalised too.
    pub fn with_path_suffix(&self, suffix: &str) -> NormalizedUrl {
        debug_assert!(suffix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)));
        let mut u = self.clone();
        u.path.push_str(suffix);
        let authority_end = self.serialized.len() - self.path_and_query().len();
        let mut s = self.serialized[..authority_end].to_owned();
        s.push_str(&u.path);
        if let Some(q) = &u.query {
            s.push('?');
            s.push_str(q);
        }
        u.serialized = s;
        u
    }
}

impl fmt::Display for NormalizedUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.serialized)
    }
}

/// Normalises a request's URL.
///
/// `scheme` is the connection's (`http` or `https`, any case); it is authoritative,
/// so a client cannot pick a key space by writing an absolute-form target. The host
/// comes from the target's authority when it has one (absolute-form or HTTP/2
/// `:authority`; RFC 9112 §3.2.3 says `Host` is then ignored), else from `host_header`,
/// else from `cfg.default_host`.
pub fn normalize(
    scheme: &str,
    host_header: Option<&HeaderValue>,
    uri: &Uri,
    cfg: &KeyConfig,
) -> Result<NormalizedUrl, KeyError> {
    // RFC 3986 §6.2.2.1: the scheme is case-insensitive.
    let scheme = if scheme.eq_ignore_ascii_case("http") {
        "http"
    } else if scheme.eq_ignore_ascii_case("https") {
        "https"
    } else {
        return Err(KeyError::Scheme);
    };
    let authority = match (uri.authority(), host_header) {
        (Some(a), _) => a.as_str(),
        (None, Some(h)) => h.to_str().map_err(|_| KeyError::Host("not ASCII"))?,
        (None, None) => "",
    };
    let authority = if authority.is_empty() {
        // RFC 9112 §3.2: an empty Host means the target has no authority.
        cfg.default_host.as_str()
    } else {
        authority
    };
    let (mut host, port) = parse_authority(authority)?;
    // RFC 3986 §6.2.3 / RFC 9110 §4.2.1-2: the default port is the same as none.
    let port = match (scheme, port) {
        ("http", Some(80)) | ("https", Some(443)) => None,
        (_, p) => p,
    };
    if let Some((_, canonical)) = cfg
        .host_aliases
        .iter()
        .find(|(alias, _)| alias.trim_end_matches('.').eq_ignore_ascii_case(&host))
    {
        host = canonical.trim_end_matches('.').to_ascii_lowercase();
    }

    let raw_path = uri.path();
    if raw_path.len() > cfg.path_bytes_max {
        return Err(KeyError::PathTooLong {
            len: raw_path.len(),
            max: cfg.path_bytes_max,
        });
    }
    let path = normalize_path(raw_path)?;
    let query = match uri.query() {
        Some(q) if q.len() > cfg.query_bytes_max => {
            return Err(KeyError::QueryTooLong {
                len: q.len(),
                max: cfg.query_bytes_max,
            })
        }
        Some(_)
            if cfg
                .query_paths
                .as_ref()
                .is_some_and(|ps| !reads_query(ps, &path)) =>
        {
            None
        }
        Some(q) => match cfg.query_rule(&path) {
            QueryRule::All => normalize_query(q, &cfg.drop_params, None),
            QueryRule::None => None,
            QueryRule::Only(keep) => normalize_query(q, &cfg.drop_params, Some(keep.as_slice())),
        },
        None => None,
    };
    Ok(assemble(scheme, host, port, path, query))
}

/// Normalises an absolute URL given as text, as purge requests and
/// `/_quire/explain?url=` name them. The fragment, if any, is dropped (RFC 9110
/// §4.2.5: it is never sent to a server).
pub fn normalize_absolute(url: &str, cfg: &KeyConfig) -> Result<NormalizedUrl, KeyError> {
    let url = url.split('#').next().unwrap_or("");
    let uri: Uri = url.parse().map_err(|_| KeyError::NotAbsolute)?;
    let scheme = uri.scheme_str().ok_or(KeyError::NotAbsolute)?;
    if uri.authority().is_none() {
        return Err(KeyError::NotAbsolute);
    }
    normalize(scheme, None, &uri, cfg)
}

/// Whether `path` is one of `paths` (a trailing `*` matching any suffix).
fn reads_query(paths: &[String], path: &str) -> bool {
    paths.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => p == path,
    })
}

fn assemble(
    scheme: &'static str,
    host: String,
    port: Option<u16>,
    path: String,
    query: Option<String>,
) -> NormalizedUrl {
    let mut s = String::with_capacity(
        scheme.len() + 3 + host.len() + 6 + path.len() + query.as_ref().map_or(0, |q| q.len() + 1),
    );
    s.push_str(scheme);
    s.push_str("://");
    s.push_str(&host);
    if let Some(p) = port {
        use std::fmt::Write as _;
        // Writing to a String cannot fail.
        let _ = write!(s, ":{p}");
    }
    s.push_str(&path);
    if let Some(q) = &query {
        s.push('?');
        s.push_str(q);
    }
    NormalizedUrl {
        scheme,
        host,
        port,
        path,
        query,
        serialized: s,
    }
}

/// Splits `host[:port]` and normalises both. RFC 9110 §4.2.4: userinfo is an error.
fn parse_authority(authority: &str) -> Result<(String, Option<u16>), KeyError> {
    if authority.contains('@') {
        return Err(KeyError::Host("userinfo is not allowed"));
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let end = rest
            .find(']')
            .ok_or(KeyError::Host("unclosed IPv6 literal"))?;
        let after = &rest[end + 1..];
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(KeyError::Port)?),
        };
        let addr: Ipv6Addr = rest[..end]
            .parse()
            .map_err(|_| KeyError::Host("invalid IPv6 literal"))?;
        // RFC 5952 §4: one canonical text form per address (Ipv6Addr's Display).
        (format!("[{addr}]"), port)
    } else {
        let (h, p) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        (normalize_host_name(h)?, p)
    };
    let port = match port {
        // RFC 3986 §6.2.3: an empty port is the same as none.
        None | Some("") => None,
        Some(p) => Some(parse_port(p)?),
    };
    Ok((host, port))
}

fn parse_port(p: &str) -> Result<u16, KeyError> {
    if p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(KeyError::Port);
    }
    p.parse().map_err(|_| KeyError::Port)
}

/// A DNS name (RFC 1035 §2.3.4 lengths; letters, digits, `-`, and `_` which real
/// zones contain) or a dotted IPv4 address. Lower-cased (RFC 3986 §6.2.2.1), one
/// trailing dot dropped (the absolute form of the same name). Non-ASCII (raw IDN),
/// percent-encoded hosts and anything else are rejected: IDNs arrive as `xn--`.
fn normalize_host_name(h: &str) -> Result<String, KeyError> {
    let h = h.strip_suffix('.').unwrap_or(h);
    if h.is_empty() {
        return Err(KeyError::Host("empty"));
    }
    if h.len() > 253 {
        return Err(KeyError::Host("longer than 253 bytes"));
    }
    if h.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        // All-numeric: must be a dotted quad (std rejects leading zeros, which some
        // resolvers read as octal).
        let addr: Ipv4Addr = h
            .parse()
            .map_err(|_| KeyError::Host("invalid IPv4 address"))?;
        // What std accepts (four decimal octets, no leading zeros) is already the
        // address's canonical text, so it is kept as sent rather than re-formatted.
        debug_assert_eq!(addr.to_string(), h);
        return Ok(h.to_owned());
    }
    for label in h.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(KeyError::Host("label empty or longer than 63 bytes"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(KeyError::Host("character not allowed in a DNS name"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(KeyError::Host("label starts or ends with '-'"));
        }
    }
    Ok(h.to_ascii_lowercase())
}

/// RFC 3986 §6.2.2.2 percent-encoding then §6.2.2.3 dot segments; empty → `/`
/// (RFC 9110 §4.2.3). Anything else is kept byte-exact.
fn normalize_path(raw: &str) -> Result<String, KeyError> {
    if raw.is_empty() {
        return Ok("/".to_string());
    }
    if !raw.starts_with('/') {
        // asterisk-form (`OPTIONS *`) or anything else that names no resource.
        return Err(KeyError::Path);
    }
    // The common case costs one copy: without `%` there is nothing to decode, and
    // without a `.` or `..` segment nothing to remove.
    if !raw.contains('%') && !raw.split('/').any(|seg| seg == "." || seg == "..") {
        return Ok(raw.to_owned());
    }
    Ok(remove_dot_segments(&normalize_percent(raw)))
}

/// RFC 3986 §6.2.2.2: hex digits of a percent-encoding are upper-cased, and octets
/// that encode unreserved characters (§2.3: ALPHA DIGIT - . _ ~) are decoded.
/// Reserved characters stay encoded (`%2F` is not `/`), and a `%` not followed by two
/// hex digits is kept as it is: it has no defined meaning to normalise.
fn normalize_percent(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(hi), Some(lo)) = (hex_val(b[i + 1]), hex_val(b[i + 2])) {
                let v = hi << 4 | lo;
                if v.is_ascii_alphanumeric() || matches!(v, b'-' | b'.' | b'_' | b'~') {
                    out.push(char::from(v));
                } else {
                    out.push('%');
                    out.push(char::from(b[i + 1].to_ascii_uppercase()));
                    out.push(char::from(b[i + 2].to_ascii_uppercase()));
                }
                i += 3;
                continue;
            }
        }
        // Copy the next char whole (paths from `Uri` are ASCII, but stay UTF-8 safe).
        let ch_len = s[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&s[i..i + ch_len]);
        i += ch_len;
    }
    out
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// RFC 3986 §5.2.4 `remove_dot_segments`, step by step.
fn remove_dot_segments(path: &str) -> String {
    let mut input = path;
    let mut out = String::with_capacity(path.len());
    while !input.is_empty() {
        if let Some(rest) = input
            .strip_prefix("../")
            .or_else(|| input.strip_prefix("./"))
        {
            // A
            input = rest;
        } else if input.starts_with("/./") {
            // B: "/./" → "/"
            input = &input[2..];
        } else if input == "/." {
            input = "/";
        } else if input.starts_with("/../") || input == "/.." {
            // C: "/../" → "/" and drop the last output segment.
            input = if input == "/.." { "/" } else { &input[3..] };
            let cut = out.rfind('/').unwrap_or(0);
            out.truncate(cut);
        } else if input == "." || input == ".." {
            // D
            input = "";
        } else {
            // E: move the first segment (with its leading "/") to the output.
            let start = usize::from(input.starts_with('/'));
            let end = input[start..].find('/').map_or(input.len(), |i| i + start);
            out.push_str(&input[..end]);
            input = &input[end..];
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Drops tracking parameters, drops empty `&&` items, normalises percent-encoding in
/// each item, and sorts items by key only, stably: the relative order of repeated
/// keys is kept, because origins disagree on it (first wins, last wins, or a list in
/// order), so `a=2&a=1` and `a=1&a=2` may be different pages. `k` and `k=` stay
/// distinct for the same reason. An empty result (including a bare `?`) is no query:
/// RFC 3986 §6.2.3 keeps an empty query distinct in general, but a URL whose only
/// parameters were tracking ones must key as the bare URL, and no origin we know
/// answers `/a?` differently from `/a`.
fn normalize_query(raw: &str, drop: &[String], keep: Option<&[String]>) -> Option<String> {
    let mut items: Vec<(String, usize)> = raw
        .split('&')
        .filter(|item| !item.is_empty())
        .map(normalize_percent)
        .filter_map(|item| {
            let key_len = item.find('=').unwrap_or(item.len());
            let name = &item[..key_len];
            let kept = keep.is_none_or(|k| matches_any(name, k)) && !matches_any(name, drop);
            kept.then_some((item, key_len))
        })
        .collect();
    if items.is_empty() {
        return None;
    }
    // `sort_by` is stable.
    items.sort_by(|(a, al), (b, bl)| a[..*al].cmp(&b[..*bl]));
    let mut q = String::with_capacity(raw.len());
    for (i, (item, _)) in items.iter().enumerate() {
        if i > 0 {
            q.push('&');
        }
        q.push_str(item);
    }
    Some(q)
}

fn matches_any(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == p,
    })
}

/// The `Vary` field names of a response (RFC 9111 §4.1), parsed and normalised.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct VaryFields {
    /// Lower-case, de-duplicated, sorted; without `accept-encoding`.
    fields: Vec<String>,
    /// `Vary: *` (or too many fields): never reused.
    star: bool,
    /// `Accept-Encoding` was named: answered by stored per-coding variants.
    accept_encoding: bool,
}

impl VaryFields {
    /// Parses `Vary` field values (one per line). RFC 9110 §12.5.5: a list of field
    /// names or `*`; lines combine (§5.2), empty elements are ignored (§5.6.1), so
    /// `Vary: , *` and `*` on a second line are both `*`. Field names are
    /// case-insensitive (§5.1). A name that is not a valid token cannot appear in any
    /// request, so it would match "absent" for every request; it is ignored.
    pub fn parse<'a, I>(values: I) -> VaryFields
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut v = VaryFields::default();
        for line in values {
            for name in line.split(|&b| b == b',') {
                let name = trim_ows(name);
                if name.is_empty() {
                    continue;
                }
                if name == b"*" {
                    v.star = true;
                    continue;
                }
                if !name.iter().all(|&b| is_tchar(b)) {
                    continue;
                }
                if name.eq_ignore_ascii_case(b"accept-encoding") {
                    v.accept_encoding = true;
                    continue;
                }
                let name = String::from_utf8_lossy(name).to_ascii_lowercase();
                if !v.fields.contains(&name) {
                    if v.fields.len() == VARY_FIELDS_MAX {
                        v.star = true;
                        continue;
                    }
                    v.fields.push(name);
                }
            }
        }
        v.fields.sort_unstable();
        v
    }

    /// `Vary: *` (RFC 9111 §4.1: "always fails to match"), or more than
    /// [`VARY_FIELDS_MAX`] fields. Such a response is neither stored nor reused.
    #[cfg(test)]
    fn is_star(&self) -> bool {
        self.star
    }

    /// These fields without `name` (lower-case): for a field the upstream
    /// negotiates by URL (`quire serve`'s `Accept`, whose markdown lives at a URL of
    /// its own, so the URL already keys it).
    pub fn without(mut self, name: &str) -> VaryFields {
        self.fields.retain(|f| f != name);
        self
    }

    /// The keyed field names: lower-case, sorted, unique, without `accept-encoding`.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// True when the response named `Accept-Encoding`.
    pub fn accept_encoding(&self) -> bool {
        self.accept_encoding
    }

    /// True when no field beyond `Accept-Encoding` selects the variant (and not `*`):
    /// every request for the URL shares one set of stored encodings.
    pub fn is_empty(&self) -> bool {
        !self.star && self.fields.is_empty()
    }
}

impl fmt::Display for VaryFields {
    /// A canonical `Vary` value (`*`, or sorted lower-case names including
    /// `accept-encoding`) that [`VaryFields::parse`] reads back to an equal value; the
    /// form stored under [`primary_key`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.star {
            return f.write_str("*");
        }
        let mut names: Vec<&str> = self.fields.iter().map(String::as_str).collect();
        if self.accept_encoding {
            names.push("accept-encoding");
            names.sort_unstable();
        }
        f.write_str(&names.join(", "))
    }
}

/// The `Vary` of a response: every `Vary` line (RFC 9111 §4.1).
pub fn vary_fields(resp_headers: &HeaderMap) -> VaryFields {
    VaryFields::parse(resp_headers.get_all(VARY).iter().map(HeaderValue::as_bytes))
}

/// Which requests share stored responses. GET and HEAD do (RFC 9110 §9.3.2: HEAD is
/// GET without the content, so a cache answers it from the GET entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MethodClass {
    /// GET and HEAD.
    Get,
}

impl MethodClass {
    /// The class of a method whose responses quire stores, or `None`.
    pub fn of(method: &Method) -> Option<MethodClass> {
        (method == Method::GET || method == Method::HEAD).then_some(MethodClass::Get)
    }

    const fn tag(self) -> u8 {
        match self {
            MethodClass::Get => b'G',
        }
    }
}

const KIND_PRIMARY: u8 = b'P';
const KIND_VARIANT: u8 = b'V';

/// The key under which a URL's [`VaryFields`] are kept, so that a lookup knows which
/// request headers select the variant. Layout: version, kind `P`, method class,
/// length-prefixed URL.
pub fn primary_key(class: MethodClass, base: &NormalizedUrl) -> Vec<u8> {
    let mut k = Vec::with_capacity(base.as_str().len() + 8);
    k.extend_from_slice(&[KEY_FORMAT_VERSION, KIND_PRIMARY, class.tag()]);
    put_bytes(&mut k, base.as_str().as_bytes());
    k
}

/// The store key of one variant: version, kind `V`, method class, length-prefixed URL,
/// then for each field of `vary` (sorted) its length-prefixed name and either `0`
/// (header absent) or `1` and the length-prefixed normalised value. Absent and empty
/// differ (RFC 9111 §4.1 matches field presence, not just values), and lengths make
/// the encoding unambiguous. Headers not named in `vary` are never read.
///
/// A `*` Vary gets a key of its own that no request shares, but the caller must not
/// store or reuse such a response at all.
pub fn variant_key(
    class: MethodClass,
    base: &NormalizedUrl,
    vary: &VaryFields,
    req_headers: &HeaderMap,
) -> Vec<u8> {
    let mut k = Vec::with_capacity(base.as_str().len() + 16 + 32 * vary.fields.len());
    k.extend_from_slice(&[KEY_FORMAT_VERSION, KIND_VARIANT, class.tag()]);
    put_bytes(&mut k, base.as_str().as_bytes());
    k.push(u8::from(vary.star));
    put_len(&mut k, vary.fields.len());
    for name in &vary.fields {
        put_bytes(&mut k, name.as_bytes());
        match normalized_field_value(name, req_headers) {
            None => k.push(0),
            Some(v) => {
                k.push(1);
                put_bytes(&mut k, &v);
            }
        }
    }
    k
}

/// A 64-bit hash of a key for the store's index (xxh3). The store keeps the full key
/// beside each entry, so a collision reads as a miss, never as the wrong page.
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// List-valued request fields (RFC 9110 §5.6.1 `#rule`) commonly named in `Vary`,
/// whose whitespace around commas and empty elements carry no meaning.
const LIST_FIELDS: &[&str] = &[
    "accept",
    "accept-charset",
    "accept-language",
    "cache-control",
    "te",
];

/// RFC 9111 §4.1: values match after removing whitespace where the syntax allows it,
/// combining lines (RFC 9110 §5.3, joined with ", "), and normalising what the
/// field's spec defines as equivalent. Applied here: OWS trimmed from each line;
/// for [`LIST_FIELDS`], OWS around commas and empty elements removed; for
/// `accept-language`, case folded (language tags are case-insensitive, RFC 4647 §2,
/// and so is `q`). Nothing else: a value that might mean something different is
/// never merged.
fn normalized_field_value(name: &str, headers: &HeaderMap) -> Option<Vec<u8>> {
    let mut lines = headers.get_all(name).iter().peekable();
    lines.peek()?;
    let is_list = LIST_FIELDS.contains(&name);
    let mut out = Vec::new();
    for line in lines {
        if is_list {
            for elem in line.as_bytes().split(|&b| b == b',') {
                let elem = trim_ows(elem);
                if elem.is_empty() {
                    continue;
                }
                if !out.is_empty() {
                    out.extend_from_slice(b", ");
                }
                out.extend_from_slice(elem);
            }
        } else {
            if !out.is_empty() {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(trim_ows(line.as_bytes()));
        }
    }
    if name == "accept-language" {
        out.make_ascii_lowercase();
    }
    Some(out)
}

/// LEB128 length: unambiguous and compact for short parts.
fn put_len(k: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            k.push(byte);
            return;
        }
        k.push(byte | 0x80);
    }
}

fn put_bytes(k: &mut Vec<u8>, b: &[u8]) {
    put_len(k, b.len());
    k.extend_from_slice(b);
}

#[cfg(test)]
mod tests;
