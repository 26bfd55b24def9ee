//! Content-coding negotiation among stored variants (RFC 9110 §12.5.3).
//!
//! quire stores every object once per coding — identity, gzip, br, zstd — compressed
//! once at fill time, so the hit path only has to *choose*: [`parse_accept_encoding`]
//! turns the request's `Accept-Encoding` lines into an [`AcceptEncoding`] summary of
//! effective q-values, and [`choose`] picks the best stored variant. `Vary:
//! Accept-Encoding` is answered by this choice, never by fragmenting cache keys.
//!
//! Key decisions, each argued where it is implemented:
//! - **No header → identity.** §12.5.3 lets a server send any coding when the request
//!   has no `Accept-Encoding`, but clients that omit it (curl without `--compressed`,
//!   HTTP/1.0 tools, monitors, some bots) are exactly the ones that cannot decode.
//!   Identity is always stored, so being safe costs nothing; only when no identity
//!   variant exists do we fall back to the RFC's "anything goes".
//! - **Server preference breaks ties: br > zstd > gzip > identity** ([`DEFAULT_PREFS`]).
//!   For HTML, brotli at high quality (compressed once, off the hit path) produces the
//!   smallest bodies — its built-in dictionary is trained on web text — and decoding
//!   cost on the client is negligible next to bytes on the wire. zstd decodes faster
//!   but is a few percent larger on text; gzip is the universal fallback.
//! - **Conflicting entries for one coding: the lowest q wins**, so quire never sends a
//!   coding the client refused anywhere in its header.
//! - **Malformed q-values drop their item** (§12.4.2 grammar), rather than the whole
//!   header.

use std::fmt;

use crate::syntax::{is_tchar, trim_ows};
use http::header::ACCEPT_ENCODING;
use http::HeaderMap;

/// At most this many list items are examined across all `Accept-Encoding` lines;
/// the rest are ignored. Real browsers send fewer than ten.
const ACCEPT_ENCODING_ITEMS_MAX: usize = 64;

/// The highest q-value, in thousandths (RFC 9110 §12.4.2: three decimal places).
const Q_MAX: u16 = 1000;

/// The weight quire gives identity when the header lists neither it nor `*`:
/// acceptable (RFC 9110 §12.5.3 rule 2) but below every coding the client listed.
const Q_LAST_RESORT: u16 = 1;

/// A content coding quire stores variants in (RFC 9110 §8.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Coding {
    /// No transformation (RFC 9110 §12.5.3 "identity").
    Identity,
    /// RFC 9110 §8.4.1.3.
    Gzip,
    /// Brotli, RFC 7932.
    Br,
    /// Zstandard, RFC 8878.
    Zstd,
    /// Zstandard against a dictionary the client holds (RFC 9842 §5.2): only ever
    /// chosen for a request that lists it and names, in `Available-Dictionary`, the
    /// dictionary the stored body was made with ([`crate::dictionary`]).
    Dcz,
}

/// Every coding, in the fixed order used for indexing and logging.
const ALL_CODINGS: [Coding; 5] = [
    Coding::Identity,
    Coding::Gzip,
    Coding::Br,
    Coding::Zstd,
    Coding::Dcz,
];

/// Server preference for equal q-values, best first: smallest HTML bodies first (see
/// the module doc), identity last.
/// `dcz` goes first: where it may be sent at all (the caller offers it only when the
/// client holds the body's dictionary) it is the smallest by far.
pub const DEFAULT_PREFS: [Coding; 5] = [
    Coding::Dcz,
    Coding::Br,
    Coding::Zstd,
    Coding::Gzip,
    Coding::Identity,
];

impl Coding {
    /// The token as written in `Accept-Encoding` and `Content-Encoding`.
    pub const fn token(self) -> &'static str {
        match self {
            Coding::Identity => "identity",
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
            Coding::Dcz => "dcz",
        }
    }

    /// Parses a coding token, case-insensitively (RFC 9110 §8.4.1: "All content codings
    /// are case-insensitive"). `x-gzip` is an alias of `gzip` (§8.4.1.3: "A recipient
    /// SHOULD consider "x-gzip" to be equivalent to "gzip"").
    pub fn from_token(token: &[u8]) -> Option<Coding> {
        let eq = |s: &str| token.eq_ignore_ascii_case(s.as_bytes());
        if eq("identity") {
            Some(Coding::Identity)
        } else if eq("gzip") || eq("x-gzip") {
            Some(Coding::Gzip)
        } else if eq("br") {
            Some(Coding::Br)
        } else if eq("zstd") {
            Some(Coding::Zstd)
        } else if eq("dcz") {
            Some(Coding::Dcz)
        } else {
            None
        }
    }

    const fn index(self) -> usize {
        match self {
            Coding::Identity => 0,
            Coding::Gzip => 1,
            Coding::Br => 2,
            Coding::Zstd => 3,
            Coding::Dcz => 4,
        }
    }
}

impl fmt::Display for Coding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

/// The normalised meaning of a request's `Accept-Encoding`: for each coding quire
/// knows, the q-value the client gave it (explicitly or through `*`), or none.
///
/// Two requests with equal summaries are served the same variant, so this is also
/// what tests and logs compare. `Display` renders it as a canonical header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AcceptEncoding {
    /// No `Accept-Encoding` line at all.
    absent: bool,
    /// Explicit q per coding (thousandths), indexed by [`Coding::index`].
    explicit: [Option<u16>; 5],
    /// The q of `*`, if present.
    wildcard: Option<u16>,
}

impl AcceptEncoding {
    /// The summary of a request without `Accept-Encoding`.
    const ABSENT: AcceptEncoding = AcceptEncoding {
        absent: true,
        explicit: [None; 5],
        wildcard: None,
    };

    /// True when the request had no `Accept-Encoding` line.
    const fn is_absent(&self) -> bool {
        self.absent
    }

    /// The effective q-value (thousandths, 0 = not acceptable) of `coding`, by the
    /// rules of RFC 9110 §12.5.3 for a request that carried the header. For an absent
    /// header this reports quire's policy (identity only); see [`choose`] for the
    /// fallback the RFC allows.
    pub(crate) fn q(&self, coding: Coding) -> u16 {
        if self.absent {
            // quire policy (module doc): no header is served identity.
            return if coding == Coding::Identity { Q_MAX } else { 0 };
        }
        if let Some(q) = self.explicit[coding.index()] {
            // RFC 9110 §12.5.3 rule 3: a listed coding is acceptable unless its q is 0.
            return q;
        }
        if coding == Coding::Identity {
            // §12.5.3 rule 2: identity is acceptable by default unless excluded by
            // "identity;q=0" or by "*;q=0" without a more specific identity entry.
            // A `*` weight applies to identity like any unlisted coding, so
            // `gzip, *;q=0.5` prefers gzip over identity. Without `*`, the RFC gives
            // unlisted identity no weight; quire ranks it last ([`Q_LAST_RESORT`]),
            // so `br;q=0.5, gzip;q=0.9` gets gzip, not an uncompressed body.
            return self.wildcard.unwrap_or(Q_LAST_RESORT);
        }
        // §12.4.2 / §12.5.3: "*" matches any coding not listed; an unlisted coding
        // without "*" is not acceptable (an empty header value lands here too:
        // "the user agent does not want any content coding").
        self.wildcard.unwrap_or(0)
    }

    /// True when the request lists `coding` by name with a q above 0 (`*` does not
    /// count): a dictionary coding is sent only to a client that asked for it.
    pub fn lists(&self, coding: Coding) -> bool {
        !self.absent && self.explicit[coding.index()].is_some_and(|q| q > 0)
    }

    /// True when the client refused identity (`identity;q=0`, or `*;q=0` without an
    /// identity entry). Only then may a cache answer 406 (RFC 9110 §15.5.7) when
    /// [`choose`] finds nothing; otherwise §12.5.3 says to send identity.
    #[cfg(test)]
    fn identity_refused(&self) -> bool {
        !self.absent && self.q(Coding::Identity) == 0
    }
}

impl fmt::Display for AcceptEncoding {
    /// Canonical form: acceptable codings in `ALL_CODINGS` order with their q
    /// (omitted when 1), e.g. `identity, gzip;q=0.5, br`; `-` for an absent header,
    /// `none` when nothing is acceptable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.absent {
            return f.write_str("-");
        }
        let mut first = true;
        for coding in ALL_CODINGS {
            let q = self.q(coding);
            if q == 0 {
                continue;
            }
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            f.write_str(coding.token())?;
            if q != Q_MAX {
                let mut frac = format!("{q:03}");
                while frac.ends_with('0') {
                    frac.pop();
                }
                write!(f, ";q=0.{frac}")?;
            }
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// Parses every `Accept-Encoding` line of a request (RFC 9110 §12.5.3) into its
/// normalised summary. Never fails: malformed items are ignored, unknown codings are
/// irrelevant to choosing among quire's variants, and at most
/// `ACCEPT_ENCODING_ITEMS_MAX` items are read.
pub fn parse_accept_encoding(headers: &HeaderMap) -> AcceptEncoding {
    let mut lines = headers.get_all(ACCEPT_ENCODING).iter().peekable();
    if lines.peek().is_none() {
        return AcceptEncoding::ABSENT;
    }
    let mut out = AcceptEncoding {
        absent: false,
        explicit: [None; 5],
        wildcard: None,
    };
    let mut items = 0usize;
    // RFC 9110 §5.2: several lines are one comma-separated list.
    for line in lines {
        for item in line.as_bytes().split(|&b| b == b',') {
            // §5.6.1: empty list elements are ignored and do not count.
            if trim_ows(item).is_empty() {
                continue;
            }
            items += 1;
            if items > ACCEPT_ENCODING_ITEMS_MAX {
                return out;
            }
            let Some((token, q)) = parse_item(item) else {
                continue;
            };
            let slot = if token == b"*" {
                &mut out.wildcard
            } else if let Some(coding) = Coding::from_token(token) {
                &mut out.explicit[coding.index()]
            } else {
                continue;
            };
            // Lowest q wins on conflict (module doc).
            *slot = Some(slot.map_or(q, |old| old.min(q)));
        }
    }
    out
}

/// Picks the stored variant to serve: the available coding with the highest
/// effective q, ties broken by `prefs` (earlier is better; codings missing from
/// `prefs` rank after all listed ones, then by their order in `available`).
///
/// `None` means nothing available is acceptable. The caller then follows RFC 9110
/// §12.5.3: send the identity variant anyway ("the origin server SHOULD send a
/// response without any content coding"), or answer 406 (§15.5.7) only when the
/// client refused identity (`identity;q=0`, or `*;q=0` without an identity entry).
/// Never send a coded variant the client did not accept.
///
/// With no `Accept-Encoding` at all, identity is served when stored; if it is not,
/// §12.5.3 rule 1 ("any content coding is considered acceptable") allows the best
/// coding by `prefs`.
///
/// `dcz` is chosen only for a request that lists it by name (never through `*` or
/// an absent header: its body is useless without the dictionary); whether the client
/// holds the right dictionary is the caller's to check before offering it.
pub fn choose(accept: &AcceptEncoding, available: &[Coding], prefs: &[Coding]) -> Option<Coding> {
    let rank = |c: Coding| prefs.iter().position(|&p| p == c).unwrap_or(prefs.len());
    let usable = |c: &Coding| *c != Coding::Dcz || accept.lists(Coding::Dcz);
    if accept.is_absent() {
        if available.contains(&Coding::Identity) {
            return Some(Coding::Identity);
        }
        // RFC 9110 §12.5.3 rule 1: without the header any coding is acceptable.
        return available
            .iter()
            .copied()
            .filter(usable)
            .min_by_key(|&c| rank(c));
    }
    let mut best: Option<(Coding, u16, usize)> = None;
    for &coding in available.iter().filter(|c| usable(c)) {
        let q = accept.q(coding);
        if q == 0 {
            // §12.4.2: "a value of 0 means not acceptable".
            continue;
        }
        let r = rank(coding);
        let better = match best {
            None => true,
            Some((_, bq, br)) => q > bq || (q == bq && r < br),
        };
        if better {
            best = Some((coding, q, r));
        }
    }
    best.map(|(c, _, _)| c)
}

/// Splits one list item into its coding token and q (thousandths). `None` for an
/// item whose weight is malformed or which has no token.
fn parse_item(item: &[u8]) -> Option<(&[u8], u16)> {
    let mut parts = item.split(|&b| b == b';');
    let token = trim_ows(parts.next()?);
    if token.is_empty() || !token.iter().all(|&b| is_tchar(b)) {
        return None;
    }
    let mut q = Q_MAX;
    for param in parts {
        let param = trim_ows(param);
        let Some(eq) = param.iter().position(|&b| b == b'=') else {
            // A bare parameter is not part of the grammar (§12.5.3 `codings [ weight
            // ]`); ignore it, as lenient recipients do.
            continue;
        };
        let (name, value) = (trim_ows(&param[..eq]), trim_ows(&param[eq + 1..]));
        // §5.6.6: parameter names are case-insensitive, so `Q=0.5` is a weight.
        if name.eq_ignore_ascii_case(b"q") {
            q = parse_qvalue(value)?;
        }
    }
    Some((token, q))
}

/// RFC 9110 §12.4.2: `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`,
/// in thousandths. Anything else is `None`.
pub(crate) fn parse_qvalue(v: &[u8]) -> Option<u16> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(dot) => (&v[..dot], &v[dot + 1..]),
        None => (v, &b""[..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths: u16 = 0;
    for i in 0..3 {
        let digit = frac.get(i).map_or(0, |d| u16::from(d - b'0'));
        thousandths = thousandths * 10 + digit;
    }
    match int {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(Q_MAX),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;
    use Coding::*;

    fn ae(lines: &[&str]) -> AcceptEncoding {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(ACCEPT_ENCODING, HeaderValue::from_str(l).unwrap());
        }
        parse_accept_encoding(&h)
    }

    /// The codings offered to every client (a dictionary coding is offered only to a
    /// client holding the dictionary: see [`dcz_needs_its_name_in_the_request`]).
    const ALL: [Coding; 4] = [Identity, Gzip, Br, Zstd];

    fn pick(lines: &[&str]) -> Option<Coding> {
        choose(&ae(lines), &ALL, &DEFAULT_PREFS)
    }

    /// RFC 9842: `dcz` only to a request that names it; `*` or no header never
    /// gets it, even when it is all that is stored.
    #[test]
    fn dcz_needs_its_name_in_the_request() {
        let with = [Identity, Gzip, Br, Zstd, Dcz];
        let pick = |lines: &[&str], avail: &[Coding]| choose(&ae(lines), avail, &DEFAULT_PREFS);
        assert_eq!(pick(&["gzip, br, zstd, dcz"], &with), Some(Dcz));
        assert_eq!(pick(&["gzip, br, zstd, dcb"], &with), Some(Br));
        assert_eq!(pick(&["*"], &with), Some(Br));
        assert_eq!(pick(&["*"], &[Dcz]), None);
        assert_eq!(pick(&[], &[Dcz]), None);
        assert_eq!(pick(&["dcz;q=0, br"], &with), Some(Br));
        assert!(ae(&["dcz"]).lists(Dcz));
        assert!(!ae(&["*"]).lists(Dcz));
    }

    /// RFC 9110 §8.4.1 tokens round-trip; `x-gzip` is gzip (§8.4.1.3).
    #[test]
    fn tokens_round_trip_and_x_gzip_is_gzip() {
        for c in ALL_CODINGS {
            assert_eq!(Coding::from_token(c.token().as_bytes()), Some(c));
        }
        assert_eq!(Coding::from_token(b"x-gzip"), Some(Gzip));
        assert_eq!(Coding::from_token(b"deflate"), None);
        assert_eq!(pick(&["x-gzip"]), Some(Gzip));
    }

    /// RFC 9110 §8.4.1: codings are case-insensitive.
    #[test]
    fn coding_tokens_are_case_insensitive() {
        assert_eq!(pick(&["GZIP"]), Some(Gzip));
        assert_eq!(pick(&["Br;Q=1, GZip;q=0.5"]), Some(Br));
    }

    /// RFC 9110 §12.5.3 rule 2: unlisted identity stays acceptable, but ranks below
    /// every coding the client listed, whatever its q.
    #[test]
    fn unlisted_identity_is_last_resort() {
        let a = ae(&["br;q=0.5, gzip;q=0.9"]);
        assert_eq!(a.q(Identity), Q_LAST_RESORT);
        assert_eq!(choose(&a, &ALL, &DEFAULT_PREFS), Some(Gzip));
        assert_eq!(
            choose(&a, &[Identity, Zstd], &DEFAULT_PREFS),
            Some(Identity)
        );
    }

    /// Browser header: all equal q, server preference decides (br first for HTML).
    #[test]
    fn browser_header_gets_brotli() {
        assert_eq!(pick(&["gzip, deflate, br, zstd"]), Some(Br));
        assert_eq!(pick(&["gzip, deflate"]), Some(Gzip));
    }

    /// RFC 9110 §12.4.2: a higher q beats server preference.
    #[test]
    fn higher_q_beats_server_preference() {
        assert_eq!(pick(&["br;q=0.5, gzip;q=0.9"]), Some(Gzip));
        assert_eq!(pick(&["br;q=0.001, identity;q=0.002"]), Some(Identity));
    }

    /// RFC 9110 §12.4.2: q=0 means "not acceptable".
    #[test]
    fn q_zero_is_not_acceptable() {
        assert_eq!(pick(&["br;q=0, gzip"]), Some(Gzip));
        assert_eq!(ae(&["br;q=0"]).q(Br), 0);
        assert_eq!(ae(&["br;q=0.000"]).q(Br), 0);
    }

    /// RFC 9110 §12.5.3 rule 2: identity is acceptable unless `identity;q=0`.
    #[test]
    fn identity_q_zero_refuses_identity() {
        let a = ae(&["identity;q=0"]);
        assert_eq!(a.q(Identity), 0);
        assert!(a.identity_refused());
        assert_eq!(choose(&a, &[Identity], &DEFAULT_PREFS), None);
        assert_eq!(choose(&a, &[Identity, Gzip], &DEFAULT_PREFS), None);
        assert_eq!(pick(&["identity;q=0, gzip"]), Some(Gzip));
    }

    /// RFC 9110 §12.5.3 rule 2: `*;q=0` refuses identity unless identity is listed.
    #[test]
    fn star_q_zero_refuses_everything_not_listed() {
        let a = ae(&["*;q=0"]);
        assert!(ALL.iter().all(|&c| a.q(c) == 0));
        assert!(a.identity_refused());
        assert_eq!(pick(&["*;q=0"]), None);
        assert_eq!(pick(&["gzip, *;q=0"]), Some(Gzip));
        let b = ae(&["identity, *;q=0"]);
        assert_eq!(b.q(Identity), Q_MAX);
        assert!(!b.identity_refused());
        assert_eq!(choose(&b, &ALL, &DEFAULT_PREFS), Some(Identity));
    }

    /// RFC 9110 §12.5.3: `*` matches any coding not explicitly listed.
    #[test]
    fn star_matches_unlisted_codings_only() {
        let a = ae(&["*, br;q=0"]);
        assert_eq!(a.q(Br), 0);
        assert_eq!(a.q(Zstd), Q_MAX);
        assert_eq!(choose(&a, &ALL, &DEFAULT_PREFS), Some(Zstd));
        let b = ae(&["gzip, *;q=0.5"]);
        assert_eq!(b.q(Identity), 500);
        assert_eq!(b.q(Br), 500);
        assert_eq!(choose(&b, &ALL, &DEFAULT_PREFS), Some(Gzip));
    }

    /// RFC 9110 §12.5.3: an empty field value means "no content coding" — identity only.
    #[test]
    fn empty_header_means_identity_only() {
        let a = ae(&[""]);
        assert!(!a.is_absent());
        assert_eq!(a.q(Identity), Q_LAST_RESORT);
        assert_eq!(a.q(Gzip), 0);
        assert_eq!(choose(&a, &ALL, &DEFAULT_PREFS), Some(Identity));
        assert_eq!(choose(&a, &[Gzip, Br], &DEFAULT_PREFS), None);
        assert!(!a.identity_refused());
    }

    /// RFC 9110 §12.5.3 rule 1 allows any coding without the header; quire sends
    /// identity when it has it (old clients), else falls back to the RFC.
    #[test]
    fn absent_header_prefers_identity_then_any() {
        let a = ae(&[]);
        assert!(a.is_absent());
        assert_eq!(choose(&a, &ALL, &DEFAULT_PREFS), Some(Identity));
        assert_eq!(choose(&a, &[Gzip, Br], &DEFAULT_PREFS), Some(Br));
        assert_eq!(choose(&a, &[], &DEFAULT_PREFS), None);
        assert!(!a.identity_refused());
    }

    /// RFC 9110 §12.4.2 grammar: malformed weights drop only their own item.
    #[test]
    fn malformed_q_ignores_the_item() {
        for bad in [
            "br;q=2",
            "br;q=1.5",
            "br;q=1.001",
            "br;q=0.1234",
            "br;q=abc",
            "br;q=",
            "br;q=-1",
            "br;q=.5",
            "br;q=0.5x",
        ] {
            let a = ae(&[&format!("{bad}, gzip;q=0.5")]);
            assert_eq!(a.q(Br), 0, "{bad}");
            assert_eq!(a.q(Gzip), 500, "{bad}");
            assert_eq!(choose(&a, &ALL, &DEFAULT_PREFS), Some(Gzip), "{bad}");
        }
    }

    /// RFC 9110 §12.4.2: up to three decimals; `1.000` and `0.` are valid.
    #[test]
    fn qvalue_grammar_accepts_valid_forms() {
        assert_eq!(parse_qvalue(b"1"), Some(1000));
        assert_eq!(parse_qvalue(b"1.000"), Some(1000));
        assert_eq!(parse_qvalue(b"0."), Some(0));
        assert_eq!(parse_qvalue(b"0.5"), Some(500));
        assert_eq!(parse_qvalue(b"0.05"), Some(50));
        assert_eq!(parse_qvalue(b"0.123"), Some(123));
        assert_eq!(parse_qvalue(b"01"), None);
    }

    /// RFC 9110 §5.2, §5.6.1: lines combine into one list; OWS and empty elements.
    #[test]
    fn multiple_lines_and_whitespace_combine() {
        let a = ae(&["identity;q=0.1", " ,, br ; q=0.3 ,\tgzip;q = 0.2 "]);
        assert_eq!(a.q(Identity), 100);
        assert_eq!(a.q(Br), 300);
        // `q = 0.2`: OWS around '=' is not in the grammar, but trimming it is
        // harmless and matches common parsers.
        assert_eq!(a.q(Gzip), 200);
        assert_eq!(choose(&a, &ALL, &DEFAULT_PREFS), Some(Br));
    }

    /// Conflicting entries for one coding: the lowest q wins (never send a refused
    /// coding).
    #[test]
    fn conflicting_entries_take_lowest_q() {
        assert_eq!(ae(&["gzip, gzip;q=0"]).q(Gzip), 0);
        assert_eq!(ae(&["gzip;q=0", "x-gzip"]).q(Gzip), 0);
        assert_eq!(ae(&["*;q=0.2, *"]).q(Br), 200);
    }

    /// Unknown codings and parameters are ignored without affecting the others.
    #[test]
    fn unknown_codings_and_params_are_ignored() {
        let a = ae(&["deflate, compress;q=0.9, gzip;level=9;q=0.4, br;foo"]);
        assert_eq!(a.q(Gzip), 400);
        assert_eq!(a.q(Br), Q_MAX);
        assert_eq!(a.q(Zstd), 0);
        assert_eq!(ae(&["g zip, \"br\""]).q(Br), 0);
    }

    /// Only stored variants can be chosen; nothing acceptable → None.
    #[test]
    fn choice_is_limited_to_available_variants() {
        let a = ae(&["br"]);
        assert_eq!(
            choose(&a, &[Gzip, Identity], &DEFAULT_PREFS),
            Some(Identity)
        );
        assert_eq!(choose(&a, &[Gzip], &DEFAULT_PREFS), None);
        assert_eq!(
            choose(&ae(&["zstd;q=1, br;q=1"]), &ALL, &[Zstd, Br]),
            Some(Zstd)
        );
        // Codings missing from prefs rank after listed ones.
        assert_eq!(choose(&ae(&["gzip, br"]), &ALL, &[Gzip]), Some(Gzip));
    }

    /// The summary is canonical: equivalent headers render identically.
    #[test]
    fn summary_is_canonical() {
        assert_eq!(
            ae(&["BR, gzip;q=0.50"]).to_string(),
            "identity;q=0.001, gzip;q=0.5, br"
        );
        assert_eq!(ae(&["br", "gzip;q=0.5"]), ae(&["gzip;q=0.500 , br"]));
        assert_eq!(ae(&[]).to_string(), "-");
        assert_eq!(ae(&["*;q=0"]).to_string(), "none");
        assert_eq!(
            ae(&["zstd;q=0.025, identity;q=0"]).to_string(),
            "zstd;q=0.025"
        );
    }

    /// Bounded: items past the limit are not read.
    #[test]
    fn item_count_is_bounded() {
        let mut line = "foo, ".repeat(ACCEPT_ENCODING_ITEMS_MAX);
        line.push_str("br");
        assert_eq!(ae(&[&line]).q(Br), 0);
    }

    proptest! {
        /// Arbitrary header bytes never panic, and the choice is always an
        /// available coding with q > 0 (or identity on the no-header policy).
        #[test]
        fn hostile_accept_encoding_never_panics(lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..4)) {
            let mut h = HeaderMap::new();
            for l in &lines {
                if let Ok(v) = HeaderValue::from_bytes(l) {
                    h.append(ACCEPT_ENCODING, v);
                }
            }
            let a = parse_accept_encoding(&h);
            let _ = a.to_string();
            if let Some(c) = choose(&a, &ALL, &DEFAULT_PREFS) {
                prop_assert!(a.q(c) > 0);
            }
        }
    }
}
