//! Highlights, `==text==` → `<mark>` (help.obsidian.md, "Basic formatting syntax" ›
//! "Bold, italics, highlights").
//!
//! Key decisions:
//! - An opening `==` is followed by a non-space, a closing one preceded by one
//!   (the flanking rule CommonMark uses for `**`), so `a == b` stays text.
//! - The two ends must sit in the same block at the same inline depth, so a
//!   highlight may hold emphasis, links and code (`==a *b* c==`) but can never
//!   produce misnested tags; an unmatched `==` stays text.
//! - Never inside code, links or rendered wikilinks.

use pulldown_cmark::{CowStr, Event};

use super::prose::{is_inline, Context};

/// One `==` found: the text event it is in, its byte offset there, its inline
/// depth, and whether it may open and close.
#[derive(Debug, Clone, Copy)]
struct Delim {
    event: usize,
    at: usize,
    depth: usize,
    opens: bool,
    closes: bool,
}

/// Turns every matched pair of `==` in prose into `<mark>` and `</mark>`.
pub(super) fn highlights(events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    let pairs = matched(&events);
    if pairs.is_empty() {
        return events;
    }
    // (event, offset, is_open), in event and offset order.
    let mut cuts: Vec<(usize, usize, bool)> = pairs
        .iter()
        .flat_map(|(o, c)| [(o.event, o.at, true), (c.event, c.at, false)])
        .collect();
    cuts.sort_unstable();
    let mut out = Vec::with_capacity(events.len() + cuts.len() * 2);
    let mut next = cuts.iter().peekable();
    for (i, e) in events.into_iter().enumerate() {
        if next.peek().is_none_or(|c| c.0 != i) {
            out.push(e);
            continue;
        }
        let Event::Text(t) = &e else {
            out.push(e);
            continue;
        };
        let mut at = 0;
        while let Some(&&(_, off, open)) = next.peek().filter(|c| c.0 == i) {
            next.next();
            if off > at {
                out.push(Event::Text(CowStr::from(t[at..off].to_owned())));
            }
            let tag = if open { "<mark>" } else { "</mark>" };
            out.push(Event::InlineHtml(CowStr::from(tag)));
            at = off + 2;
        }
        if at < t.len() {
            out.push(Event::Text(CowStr::from(t[at..].to_owned())));
        }
    }
    out
}

/// The `==` pairs that match, opening and closing.
fn matched(events: &[Event<'_>]) -> Vec<(Delim, Delim)> {
    let mut pairs = Vec::new();
    let mut open: Vec<Delim> = Vec::new();
    let mut ctx = Context::default();
    let mut depth = 0usize;
    for (i, e) in events.iter().enumerate() {
        ctx.step(e);
        match e {
            Event::Start(_) if is_inline(e) => depth += 1,
            Event::End(_) if is_inline(e) => depth = depth.saturating_sub(1),
            // A block boundary: nothing matches across it.
            Event::Start(_) | Event::End(_) => {
                open.clear();
                depth = 0;
            }
            Event::Text(t) if ctx.prose() && t.contains("==") => {
                for d in delims(events, i, t, depth) {
                    let top = open.last().filter(|o| o.depth == d.depth).copied();
                    match top {
                        Some(o) if d.closes => {
                            open.pop();
                            pairs.push((o, d));
                        }
                        _ if d.opens => open.push(d),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    pairs
}

/// The `==` runs in text event `i` (`t`), with whether each may open or close.
fn delims(events: &[Event<'_>], i: usize, t: &str, depth: usize) -> Vec<Delim> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(p) = t[from..].find("==") {
        let at = from + p;
        let before = t[..at]
            .chars()
            .next_back()
            .or_else(|| neighbour(events, i, false));
        let after = t[at + 2..]
            .chars()
            .next()
            .or_else(|| neighbour(events, i, true));
        out.push(Delim {
            event: i,
            at,
            depth,
            opens: after.is_some_and(|c| !c.is_whitespace() && c != '='),
            closes: before.is_some_and(|c| !c.is_whitespace() && c != '='),
        });
        from = at + 2;
    }
    out
}

/// What stands just outside text event `i`, after it (`forward`) or before: a
/// stand-in letter for inline content, `None` for a block's edge or a line break.
fn neighbour(events: &[Event<'_>], i: usize, forward: bool) -> Option<char> {
    let e = if forward {
        events.get(i + 1)
    } else {
        i.checked_sub(1).and_then(|p| events.get(p))
    }?;
    match e {
        Event::Text(t) if forward => t.chars().next(),
        Event::Text(t) => t.chars().next_back(),
        Event::SoftBreak | Event::HardBreak => None,
        Event::Start(_) | Event::End(_) if !is_inline(e) => None,
        _ => Some('x'),
    }
}

#[cfg(test)]
mod tests {
    use crate::render::to_html;

    fn html(md: &str) -> String {
        to_html(md).html
    }

    #[test]
    fn highlights_golden() {
        assert_eq!(
            html("Some ==highlighted== text.\n"),
            "<p>Some <mark>highlighted</mark> text.</p>\n"
        );
        assert_eq!(
            html("==a *b* `c` [[d]]==\n"),
            "<p><mark>a <em>b</em> <code>c</code> [[d]]</mark></p>\n"
        );
        assert_eq!(html("# A ==marked== title\n").matches("<mark>").count(), 1);
        // Regression: a tag link (one inline HTML event holding `<a>` and `</a>`)
        // left everything after it out of prose.
        assert_eq!(
            html("#tag\n\n==after a tag==\n"),
            "<p><a class=\"tag\" href=\"/tags/tag\">#tag</a></p>\n<p><mark>after a tag</mark></p>\n"
        );
    }

    #[test]
    fn unmatched_spaced_and_code_equals_stay_text() {
        for md in [
            "a == b\n",
            "==open only\n",
            "x ==a\n\nb== y\n",
            "`==code==`\n",
            "```\n==fenced==\n```\n",
            "a ==b *c== d*\n",
            "[==link==](http://example.com)\n",
        ] {
            let h = html(md);
            assert!(!h.contains("<mark>"), "{md:?}: {h}");
        }
    }
}
