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

use std::ops::Range;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use super::{blockref, headings, options};
use crate::links::slug;

/// The byte range of `md` the embed's `#…` part (`heading`, without the `#`) names,
/// or `None` when the note has no such section or block.
pub(super) fn select(md: &str, heading: Option<&str>) -> Option<Range<usize>> {
    match heading {
        None => Some(0..md.len()),
        Some(h) => match h.strip_prefix('^') {
            Some(id) => block(md, id.trim()),
            None => section(md, h),
        },
    }
}

/// A heading outside any container: its level, the slug of its text, where it
/// starts.
struct Heading {
    level: u8,
    slug: String,
    start: usize,
}

fn top_headings(md: &str) -> Vec<Heading> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut open: Option<Heading> = None;
    let mut text = String::new();
    for (e, r) in Parser::new_ext(md, options()).into_offset_iter() {
        match (&e, open.is_some()) {
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

/// The section `path` (`Heading`, or `Heading#Subheading`…) names.
fn section(md: &str, path: &str) -> Option<Range<usize>> {
    let hs = top_headings(md);
    let mut range = 0..md.len();
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
            .map_or(md.len(), |h| h.start);
        range = hs[k].start..end.min(range.end);
        found = true;
    }
    found.then_some(range)
}

/// The paragraph or list item whose text ends in the block marker `^id` (as
/// `blockref` reads it).
fn block(md: &str, id: &str) -> Option<Range<usize>> {
    let events: Vec<(Event<'_>, Range<usize>)> =
        Parser::new_ext(md, options()).into_offset_iter().collect();
    for (j, (e, r)) in events.iter().enumerate() {
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
        if blockref::marker(&text, own_line).is_some_and(|(_, m)| m == id) {
            return Some(r.clone());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part<'m>(md: &'m str, h: &str) -> Option<&'m str> {
        select(md, Some(h)).map(|r| &md[r])
    }

    #[test]
    fn a_section_runs_to_the_next_heading_of_its_level_or_higher() {
        // help.obsidian.md, "Embed files": `![[Note#Heading]]` embeds that section.
        let md = "intro\n# One\na\n## Sub\nb\n### Deeper\nc\n## Next\nd\n# Two\ne\n";
        assert_eq!(
            part(md, "sub"),
            Some("## Sub\nb\n### Deeper\nc\n"),
            "case-insensitive, the deeper heading inside"
        );
        assert_eq!(
            part(md, "ONE"),
            Some("# One\na\n## Sub\nb\n### Deeper\nc\n## Next\nd\n")
        );
        assert_eq!(part(md, "Two"), Some("# Two\ne\n"));
        assert_eq!(part(md, "One#Next"), Some("## Next\nd\n"));
        assert_eq!(part(md, "Two#Next"), None, "Next is not under Two");
        assert_eq!(part(md, "Nowhere"), None);
    }

    #[test]
    fn headings_inside_quotes_lists_and_code_open_no_section() {
        let md = "# A\nx\n> # Quoted\n> y\n\n- # Listed\n\n```\n# Code\n```\n# B\n";
        assert_eq!(part(md, "Quoted"), None);
        assert_eq!(part(md, "Listed"), None);
        assert_eq!(part(md, "Code"), None);
        assert_eq!(
            part(md, "A"),
            Some("# A\nx\n> # Quoted\n> y\n\n- # Listed\n\n```\n# Code\n```\n")
        );
    }

    #[test]
    fn a_block_is_the_paragraph_or_item_ending_in_its_id() {
        // help.obsidian.md, "Internal links" › "Link to a block in a note".
        let md = "First paragraph. ^p1\n\nSecond\nparagraph.\n^p2\n\n- item one ^i1\n- item two\n  - nested ^i2\n";
        assert_eq!(
            part(md, "^p1").map(str::trim_end),
            Some("First paragraph. ^p1")
        );
        assert_eq!(
            part(md, "^p2").map(str::trim_end),
            Some("Second\nparagraph.\n^p2")
        );
        assert_eq!(part(md, "^i1").map(str::trim_end), Some("- item one ^i1"));
        assert_eq!(part(md, "^i2").map(str::trim_end), Some("- nested ^i2"));
        assert_eq!(part(md, "^nope"), None);
        assert_eq!(part("a^p1\n", "^p1"), None, "not a marker");
    }
}
