//! `Accept` (RFC 9110 §12.5.1), for one question: does this request prefer a note
//! as markdown (`text/markdown`) to its HTML page? Asked on every request `quire
//! serve` answers, so an `Accept` that does not mention markdown is answered by one
//! scan of its bytes, and a long or hostile one reads at most
//! [`ACCEPT_ITEMS_MAX`] ranges.
//!
//! Each type's weight is the `q` of the most specific range that matches it
//! (`text/markdown` over `text/*` over `*/*`), 0 when none does. Markdown is chosen
//! only when its weight is above HTML's: `*/*`, `text/*`, an absent `Accept` and a
//! tie all get the page, the site's default representation.

use http::header::{HeaderMap, ACCEPT};

use crate::encoding::parse_qvalue;
use crate::syntax::trim_ows;

/// Ranges of an `Accept` read at most; the rest are ignored.
pub const ACCEPT_ITEMS_MAX: usize = 64;

/// Whether `headers` ask for markdown over HTML (module doc).
pub fn prefers_markdown(headers: &HeaderMap) -> bool {
    let mut lines = headers.get_all(ACCEPT).iter();
    if !lines.any(|l| names_markdown(l.as_bytes())) {
        return false;
    }
    let mut md = Weight::default();
    let mut html = Weight::default();
    let mut items = 0;
    for line in headers.get_all(ACCEPT) {
        for item in line.as_bytes().split(|&b| b == b',') {
            if trim_ows(item).is_empty() {
                continue;
            }
            items += 1;
            if items > ACCEPT_ITEMS_MAX {
                break;
            }
            let Some((ty, sub, q)) = parse_range(item) else {
                continue;
            };
            md.offer(ty, sub, b"text", b"markdown", q);
            html.offer(ty, sub, b"text", b"html", q);
        }
    }
    md.q() > html.q()
}

/// The weight of one media type: the `q` of its most specific matching range.
#[derive(Default)]
struct Weight {
    /// (specificity: 3 exact, 2 `type/*`, 1 `*/*`; q in thousandths)
    best: Option<(u8, u16)>,
}

impl Weight {
    fn offer(&mut self, ty: &[u8], sub: &[u8], want_ty: &[u8], want_sub: &[u8], q: u16) {
        let specificity = if ty == b"*" && sub == b"*" {
            1
        } else if ty.eq_ignore_ascii_case(want_ty) && sub == b"*" {
            2
        } else if ty.eq_ignore_ascii_case(want_ty) && sub.eq_ignore_ascii_case(want_sub) {
            3
        } else {
            return;
        };
        match self.best {
            // Equally specific ranges: the lower q (a conflicting list is read
            // cautiously, as `Accept-Encoding` is).
            Some((s, old)) if s == specificity => self.best = Some((s, old.min(q))),
            Some((s, _)) if s > specificity => {}
            _ => self.best = Some((specificity, q)),
        }
    }

    fn q(&self) -> u16 {
        self.best.map_or(0, |(_, q)| q)
    }
}

/// `type/subtype` and its `q` (1000 without one); `None` for what is not a range.
fn parse_range(item: &[u8]) -> Option<(&[u8], &[u8], u16)> {
    let mut parts = item.split(|&b| b == b';');
    let range = trim_ows(parts.next()?);
    let slash = range.iter().position(|&b| b == b'/')?;
    let (ty, sub) = (&range[..slash], &range[slash + 1..]);
    if ty.is_empty() || sub.is_empty() || (ty == b"*" && sub != b"*") {
        return None;
    }
    let mut q = 1000;
    for param in parts {
        let param = trim_ows(param);
        if let Some(v) = param
            .strip_prefix(b"q=")
            .or_else(|| param.strip_prefix(b"Q="))
        {
            q = parse_qvalue(trim_ows(v))?;
        }
    }
    Some((ty, sub, q))
}

/// Whether a `/markdown` subtype is named: only the few `/` are looked at, so a
/// browser's `Accept` costs one pass over its bytes.
fn names_markdown(hay: &[u8]) -> bool {
    hay.iter().enumerate().any(|(i, &b)| {
        b == b'/'
            && hay
                .get(i + 1..i + 9)
                .is_some_and(|s| s.eq_ignore_ascii_case(b"markdown"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn asks(lines: &[&str]) -> bool {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(ACCEPT, HeaderValue::from_str(l).unwrap());
        }
        prefers_markdown(&h)
    }

    #[test]
    fn markdown_only_when_it_weighs_more_than_html() {
        assert!(asks(&["text/markdown"]));
        assert!(asks(&["text/markdown, text/html;q=0.9"]));
        assert!(asks(&["text/markdown, */*;q=0.1"]));
        assert!(asks(&["TEXT/Markdown; charset=utf-8"]));
        assert!(asks(&["text/html;q=0.5", "text/markdown"]));
        assert!(!asks(&[]));
        assert!(!asks(&["*/*"]));
        assert!(!asks(&["text/*"]));
        assert!(!asks(&["text/html, text/markdown"]), "a tie is the page");
        assert!(!asks(&["text/html, text/markdown;q=0.5"]));
        assert!(!asks(&["text/markdown;q=0"]));
        // The most specific range decides: text/html;q=0 refuses HTML though */* is 1.
        assert!(asks(&["text/markdown;q=0.1, text/html;q=0, */*"]));
        // A malformed q drops its range.
        assert!(!asks(&["text/markdown;q=2"]));
        assert!(asks(&["text/markdown;q=0.5, text/html;q=0.4"]));
        // Two weights for one range: the lower counts.
        assert!(!asks(&[
            "text/markdown, text/markdown;q=0.3, text/html;q=0.4"
        ]));
    }

    #[test]
    fn a_long_accept_is_read_only_so_far() {
        let mut many = vec!["a/b"; ACCEPT_ITEMS_MAX].join(", ");
        many.push_str(", text/markdown");
        assert!(!asks(&[&many]));
    }
}
