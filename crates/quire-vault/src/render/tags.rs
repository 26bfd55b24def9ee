//! Inline tags, `#tag` and `#nested/tag` in prose, linked to the site's tag pages
//! (help.obsidian.md, "Tags": letters, digits, `_`, `-` and `/` for nesting; at
//! least one character that is not a digit, so `#1984` is not a tag).
//!
//! Key decisions:
//! - A tag starts after white space or at the start of a line or block; so URL
//!   fragments (`/#part`), `C#` and headings' `#` are not tags.
//! - Never inside code, links, images or a rendered wikilink.
//! - The note's inline tags are its tags too (as in Obsidian), read with the same
//!   rules by [`inline_tags`], so every tag link reaches a page that lists the note.
//! - **At most `tags_per_note_max` inline tags per note** (`budget`), the first
//!   ones, in both readers: every tag is a page whose listing shows each of its
//!   notes' tags, so 20,000 tags in one note cost every reload 31 s (20,000 pages of
//!   20,000 tags). A tag past the cap is shown as its text, with the bound in a
//!   tooltip, and links nowhere. De-duplication is a hash set (it was a scan).

use std::collections::HashSet;
use std::ops::Range;

use pulldown_cmark::{CowStr, Event, Options, Parser};

use super::budget::{self, Bound};
use super::prose::{boundary_before, Context};
use super::url::url_path;
use crate::html::escape;
use crate::links::{self, WikiLink};

/// Longest tag read, in bytes.
const TAG_LEN_MAX: usize = 128;

/// The site page of tag `name`: `/tags/` and its slug (what the site serves).
pub fn tag_url(name: &str) -> String {
    format!("/tags/{}", links::slug(name))
}

/// The byte ranges of the tags in `text`, each without its `#`; `start_ok` says
/// whether the text starts on a word boundary.
fn find(text: &str, start_ok: bool) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // `#` is ASCII: `i` is on a character boundary when it is found.
        let at_boundary = b[i] == b'#'
            && if i == 0 {
                start_ok
            } else {
                text[..i]
                    .chars()
                    .next_back()
                    .is_some_and(char::is_whitespace)
            };
        if !at_boundary {
            i += 1;
            continue;
        }
        let len: usize = text[i + 1..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '/'))
            .map(char::len_utf8)
            .sum();
        let name = &text[i + 1..i + 1 + len];
        if !name.is_empty() && len <= TAG_LEN_MAX && !name.chars().all(|c| c.is_ascii_digit()) {
            out.push(i + 1..i + 1 + len);
        }
        i += 1 + len;
    }
    out
}

/// Links every inline tag in prose to its tag page.
pub(super) fn link_tags(events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    // Most notes have no tag: leave their events where they are.
    if !events
        .iter()
        .any(|e| matches!(e, Event::Text(t) if t.contains('#')))
    {
        return events;
    }
    let mut out = Vec::with_capacity(events.len());
    let mut ctx = Context::default();
    let mut start_ok = true;
    let mut seen = Seen::new(budget::current().tags_per_note_max);
    for e in events {
        ctx.step(&e);
        let after = boundary_before(Some(&e));
        let found = match &e {
            Event::Text(t) if ctx.prose() => find(t, start_ok),
            _ => Vec::new(),
        };
        start_ok = after;
        match e {
            Event::Text(t) if !found.is_empty() => push_linked(&mut out, &t, found, &mut seen),
            e => out.push(e),
        }
    }
    out
}

/// The distinct tags (ASCII case folded) read so far, up to a cap.
#[derive(Debug)]
struct Seen {
    names: HashSet<String>,
    max: usize,
}

impl Seen {
    fn new(max: usize) -> Seen {
        Seen {
            names: HashSet::new(),
            max,
        }
    }

    /// Whether `name` is within the cap (seen before, or new with room left).
    fn admit(&mut self, name: &str) -> bool {
        let key = name.to_ascii_lowercase();
        if self.names.contains(&key) {
            return true;
        }
        if self.names.len() >= self.max {
            return false;
        }
        self.names.insert(key);
        true
    }
}

/// Text `t` with each tag in `found` (ranges without the `#`) made a link, those
/// past the note's tag cap shown as text with the bound in a tooltip.
fn push_linked<'a>(out: &mut Vec<Event<'a>>, t: &str, found: Vec<Range<usize>>, seen: &mut Seen) {
    let mut at = 0;
    for r in found {
        if r.start - 1 > at {
            out.push(Event::Text(CowStr::from(t[at..r.start - 1].to_owned())));
        }
        let name = &t[r.clone()];
        let html = if seen.admit(name) {
            format!(
                "<a class=\"tag\" href=\"{}\">#{}</a>",
                escape(&url_path(&tag_url(name))),
                escape(name)
            )
        } else {
            budget::reach(Bound::TagsPerNote);
            format!(
                "<span class=\"tag-over\" title=\"past the render budget ({} = {})\">#{}</span>",
                Bound::TagsPerNote.key(),
                seen.max,
                escape(name)
            )
        };
        out.push(Event::InlineHtml(CowStr::from(html)));
        at = r.end;
    }
    if at < t.len() {
        out.push(Event::Text(CowStr::from(t[at..].to_owned())));
    }
}

/// The first `max` inline tags of a note's `body` (its `links` and comments left
/// out), in order, each once (compared without case), and whether there were more.
pub(crate) fn inline_tags(body: &str, links: &[WikiLink], max: usize) -> (Vec<String>, bool) {
    if !body.contains('#') {
        return (Vec::new(), false);
    }
    let md = super::comments::rewrite(body, links, |_, _| " ".to_owned());
    let events: Vec<Event<'_>> =
        pulldown_cmark::TextMergeStream::new(Parser::new_ext(&md, Options::ENABLE_TABLES))
            .collect();
    let mut out: Vec<String> = Vec::new();
    let mut seen = Seen::new(max);
    let mut ctx = Context::default();
    for (i, e) in events.iter().enumerate() {
        ctx.step(e);
        let Event::Text(t) = e else { continue };
        if !ctx.prose() {
            continue;
        }
        for r in find(t, boundary_before(i.checked_sub(1).map(|p| &events[p]))) {
            let name = &t[r];
            let new = !seen.names.contains(&name.to_ascii_lowercase());
            if !seen.admit(name) {
                return (out, true);
            }
            if new {
                out.push(name.to_owned());
            }
        }
    }
    (out, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::to_html;

    fn html(md: &str) -> String {
        to_html(md).html
    }

    #[test]
    fn inline_tags_link_to_their_tag_pages_golden() {
        assert_eq!(
            html("Filed under #garden and #garden/irrigation.\n"),
            "<p>Filed under <a class=\"tag\" href=\"/tags/garden\">#garden</a> and <a class=\"tag\" href=\"/tags/garden-irrigation\">#garden/irrigation</a>.</p>\n"
        );
        assert_eq!(
            html("#Rust_lang at the start, *#in-emphasis*\n"),
            "<p><a class=\"tag\" href=\"/tags/rust-lang\">#Rust_lang</a> at the start, <em><a class=\"tag\" href=\"/tags/in-emphasis\">#in-emphasis</a></em></p>\n"
        );
    }

    #[test]
    fn digits_urls_code_links_and_headings_are_not_tags() {
        for md in [
            "Issue #1984 and #42\n",
            "See https://example.com/page#part and C#.\n",
            "`#code` span\n",
            "```\n#not-a-tag\n```\n",
            "[#label](http://example.com) and <http://example.com/#frag>\n",
            "# A heading\n",
            "word#inside\n",
            "<a href=\"/x\">#in-an-anchor</a>\n",
        ] {
            let h = html(md);
            assert!(!h.contains("class=\"tag\""), "{md:?}: {h}");
        }
    }

    #[test]
    fn tag_names_cannot_inject_html() {
        let h = html("#a<script>alert(1)</script> #b\"onmouseover=x\n");
        assert!(h.contains("href=\"/tags/a\">#a</a>"), "{h}");
        assert!(h.contains("href=\"/tags/b\">#b</a>"), "{h}");
        // The name stops at the quote: what follows is text after the link.
        assert!(h.contains("#b</a>\"onmouseover=x"), "{h}");
    }

    #[test]
    fn inline_tags_are_read_outside_code_comments_and_links() {
        let body = "Intro #one and #Two.\n\n`#code` %%#hidden%% [[Note#Heading]] #two again\n\n```\n#fenced\n```\n- item #nested/tag\n";
        let links = crate::links::extract(body);
        assert_eq!(
            inline_tags(body, &links, 256),
            (vec!["one".into(), "Two".into(), "nested/tag".into()], false)
        );
    }

    #[test]
    fn twenty_thousand_inline_tags_are_capped_per_note() {
        // Issue 29.6: 20,000 tags in one note made 20,000 tag pages each listing the
        // note's 20,000 tags (every reload 31 s). The first `tags_per_note_max` are
        // the note's tags and links; the rest are text with the bound in a tooltip.
        let max = crate::render::budget::limits().tags_per_note_max;
        // 20,000 in the reader of the note's tags; 5,000 rendered (20,000 links
        // would pass the 1 MiB page budget, which has its own test).
        let body: String = (0..20_000).map(|i| format!("#t{i} ")).collect();
        let (tags, more) = inline_tags(&body, &[], max);
        assert_eq!(tags.len(), max);
        assert!(more);
        assert_eq!(tags[0], "t0");
        let body: String = (0..5_000).map(|i| format!("#t{i} ")).collect();
        let h = html(&body);
        assert_eq!(h.matches("class=\"tag\"").count(), max, "linked: the cap");
        assert_eq!(h.matches("class=\"tag-over\"").count(), 5_000 - max);
        assert!(h.contains("title=\"past the render budget (tags_per_note_max = "));
        // The same tag again, in another case, is no new tag.
        let again = format!("{body} #T0 #t1");
        assert_eq!(html(&again).matches("class=\"tag\"").count(), max + 2);
    }
}
