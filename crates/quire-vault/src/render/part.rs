//! The part of a note an embed names (help.obsidian.md, "Embed files" › "Embed a
//! note in another note"): the whole note for `![[Note]]`; for `![[Note#Heading]]`
//! the heading and everything after it up to the next heading of the same or a
//! higher level; for `![[Note#^id]]` the paragraph or list item that ends in `^id`.
//!
//! Key decisions:
//! - Found on the note's markdown after its comments are gone and its links are
//!   replaced (what is rendered), as a byte range of it, so only the embeds inside
//!   that part are ever rendered or counted as the page's dependencies.
//! - Headings are matched as heading links are (`links::fragment`): by slug, so
//!   without case; `#A#B` is B within A's section. Only headings outside any
//!   container (list, quote, callout) open sections: cutting inside one would leave
//!   it unbalanced.
//! - **A note is parsed once per render** however many embeds name parts of it: an
//!   [`Index`] of its top headings and its blocks is built from one parse, and each
//!   embed's part is looked up in it.
//! - A block inside a quote or callout is taken out of it: the `>` markers of its
//!   continuation lines are dropped, so it renders as the paragraph it is.

use std::borrow::Cow;
use std::ops::Range;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use super::events::options;
use super::{blockref, headings};
use crate::links::slug;

/// The markdown of the part of `md` the embed's `#…` part (`heading`, without the
/// `#`) names, or `None` when the note has no such section or block.
#[cfg(test)]
pub(super) fn select<'m>(md: &'m str, heading: Option<&str>) -> Option<Cow<'m, str>> {
    Index::new(md).select(md, heading)
}

#[cfg(test)]
thread_local! {
    /// Indexes built on this thread (tests count parses per render).
    pub(super) static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A note's top headings and blocks, from one parse of its markdown.
#[derive(Debug)]
pub(super) struct Index {
    headings: Vec<Heading>,
    /// Each block's id, range and quote depth, in order (the first of an id wins).
    blocks: Vec<(String, Range<usize>, usize)>,
}

impl Index {
    /// Parses `md` once.
    pub(super) fn new(md: &str) -> Index {
        #[cfg(test)]
        PARSES.with(|c| c.set(c.get() + 1));
        let events: Vec<(Event<'_>, Range<usize>)> =
            Parser::new_ext(md, options()).into_offset_iter().collect();
        Index {
            headings: top_headings(&events),
            blocks: blocks(&events),
        }
    }

    /// The part of `md` (the markdown this index was built from) that `heading`
    /// names, as [`select`] says.
    pub(super) fn select<'m>(&self, md: &'m str, heading: Option<&str>) -> Option<Cow<'m, str>> {
        match heading {
            None => Some(Cow::Borrowed(md)),
            Some(h) => match h.strip_prefix('^') {
                Some(id) => {
                    let id = id.trim();
                    let (_, range, quotes) = self.blocks.iter().find(|(b, _, _)| b == id)?;
                    Some(unquote(md.get(range.clone())?, *quotes))
                }
                None => section(md.len(), &self.headings, h)
                    .and_then(|r| md.get(r))
                    .map(Cow::Borrowed),
            },
        }
    }
}

/// `text` with `quotes` levels of `>` markers dropped from each line after the
/// first (the first starts after them), and a callout's `[!type] title` line dropped
/// (the block is the callout's text, not its title).
fn unquote(text: &str, quotes: usize) -> Cow<'_, str> {
    if quotes == 0 {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let skip = usize::from(text.starts_with("[!") && text.trim_end().contains('\n'));
    for (n, line) in text.split_inclusive('\n').enumerate().skip(skip) {
        let mut rest = line;
        if n > 0 {
            for _ in 0..quotes {
                let trimmed = rest.trim_start_matches([' ', '\t']);
                match trimmed.strip_prefix('>') {
                    Some(r) => rest = r.strip_prefix(' ').unwrap_or(r),
                    None => break,
                }
            }
        }
        out.push_str(rest);
    }
    Cow::Owned(out)
}

/// A heading outside any container: its level, the slug of its text, where it
/// starts.
#[derive(Debug)]
struct Heading {
    level: u8,
    slug: String,
    start: usize,
}

fn top_headings(events: &[(Event<'_>, Range<usize>)]) -> Vec<Heading> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut open: Option<Heading> = None;
    let mut text = String::new();
    for (e, r) in events {
        match (e, open.is_some()) {
            (Event::Start(Tag::Heading { level, .. }), false) if depth == 0 => {
                text.clear();
                open = Some(Heading {
                    level: headings::level_num(*level),
                    slug: String::new(),
                    start: r.start,
                });
            }
            (Event::End(TagEnd::Heading(_)), true) => {
                if let Some(mut h) = open.take() {
                    h.slug = slug(&text);
                    out.push(h);
                }
            }
            (Event::Text(t) | Event::Code(t), true) => text.push_str(t),
            (Event::Start(_), false) => depth += 1,
            (Event::End(_), false) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    out
}

/// The section `path` (`Heading`, or `Heading#Subheading`…) names, in markdown of
/// `len` bytes whose top headings are `hs`.
fn section(len: usize, hs: &[Heading], path: &str) -> Option<Range<usize>> {
    let mut range = 0..len;
    let mut found = false;
    for seg in path.split('#').map(str::trim).filter(|s| !s.is_empty()) {
        let want = slug(seg);
        let within = |h: &Heading| {
            h.start < range.end && (h.start > range.start || (!found && h.start == 0))
        };
        let k = hs.iter().position(|h| within(h) && h.slug == want)?;
        let level = hs[k].level;
        let end = hs[k + 1..]
            .iter()
            .find(|h| h.level <= level)
            .map_or(len, |h| h.start);
        range = hs[k].start..end.min(range.end);
        found = true;
    }
    found.then_some(range)
}

/// Every paragraph or list item whose text ends in a block marker `^id` (as
/// `blockref` reads it): the id, the block, and how many quotes it sits in.
fn blocks(events: &[(Event<'_>, Range<usize>)]) -> Vec<(String, Range<usize>, usize)> {
    let mut out = Vec::new();
    let mut quotes = 0usize;
    for (j, (e, r)) in events.iter().enumerate() {
        match e {
            Event::Start(Tag::BlockQuote(_)) => quotes += 1,
            Event::End(TagEnd::BlockQuote(_)) => quotes = quotes.saturating_sub(1),
            _ => {}
        }
        if !matches!(e, Event::End(TagEnd::Paragraph | TagEnd::Item)) {
            continue;
        }
        // The text run that ends the block (the parser may split it).
        let mut k = j;
        while k > 0 && matches!(events[k - 1].0, Event::Text(_)) {
            k -= 1;
        }
        if k == j {
            continue;
        }
        let text: String = events[k..j]
            .iter()
            .filter_map(|(e, _)| match e {
                Event::Text(t) => Some(t.as_ref()),
                _ => None,
            })
            .collect();
        let own_line = k == 0 || matches!(events[k - 1].0, Event::Start(_) | Event::SoftBreak);
        if let Some((_, m)) = blockref::marker(&text, own_line) {
            out.push((m.to_owned(), r.clone(), quotes));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(md: &str, h: &str) -> Option<String> {
        select(md, Some(h)).map(Cow::into_owned)
    }

    #[test]
    fn a_section_runs_to_the_next_heading_of_its_level_or_higher() {
        // help.obsidian.md, "Embed files": `![[Note#Heading]]` embeds that section.
        let md = "intro\n# One\na\n## Sub\nb\n### Deeper\nc\n## Next\nd\n# Two\ne\n";
        assert_eq!(
            part(md, "sub").as_deref(),
            Some("## Sub\nb\n### Deeper\nc\n"),
            "case-insensitive, the deeper heading inside"
        );
        assert_eq!(
            part(md, "ONE").as_deref(),
            Some("# One\na\n## Sub\nb\n### Deeper\nc\n## Next\nd\n")
        );
        assert_eq!(part(md, "Two").as_deref(), Some("# Two\ne\n"));
        assert_eq!(part(md, "One#Next").as_deref(), Some("## Next\nd\n"));
        assert_eq!(
            part(md, "Two#Next").as_deref(),
            None,
            "Next is not under Two"
        );
        assert_eq!(part(md, "Nowhere").as_deref(), None);
    }

    #[test]
    fn headings_inside_quotes_lists_and_code_open_no_section() {
        let md = "# A\nx\n> # Quoted\n> y\n\n- # Listed\n\n```\n# Code\n```\n# B\n";
        assert_eq!(part(md, "Quoted").as_deref(), None);
        assert_eq!(part(md, "Listed").as_deref(), None);
        assert_eq!(part(md, "Code").as_deref(), None);
        assert_eq!(
            part(md, "A").as_deref(),
            Some("# A\nx\n> # Quoted\n> y\n\n- # Listed\n\n```\n# Code\n```\n")
        );
    }

    #[test]
    fn a_block_is_the_paragraph_or_item_ending_in_its_id() {
        // help.obsidian.md, "Internal links" › "Link to a block in a note".
        let md = "First paragraph. ^p1\n\nSecond\nparagraph.\n^p2\n\n- item one ^i1\n- item two\n  - nested ^i2\n";
        assert_eq!(
            part(md, "^p1").as_deref().map(str::trim_end),
            Some("First paragraph. ^p1")
        );
        assert_eq!(
            part(md, "^p2").as_deref().map(str::trim_end),
            Some("Second\nparagraph.\n^p2")
        );
        assert_eq!(
            part(md, "^i1").as_deref().map(str::trim_end),
            Some("- item one ^i1")
        );
        assert_eq!(
            part(md, "^i2").as_deref().map(str::trim_end),
            Some("- nested ^i2")
        );
        assert_eq!(part(md, "^nope").as_deref(), None);
        assert_eq!(part("a^p1\n", "^p1"), None, "not a marker");
    }

    #[test]
    fn a_block_in_a_quote_or_callout_is_taken_out_of_it() {
        let md = "> [!tip] Title\n> First line\n> second line ^in-callout\n\n> > deep\n> > deeper ^deep\n";
        assert_eq!(
            part(md, "^in-callout").as_deref().map(str::trim_end),
            Some("First line\nsecond line ^in-callout")
        );
        assert_eq!(
            part(md, "^deep").as_deref().map(str::trim_end),
            Some("deep\ndeeper ^deep")
        );
    }
}
