//! Markdown to HTML: the parser's events through each construct's pass, in a fixed
//! order. The embed driver (`embed`) calls it for a page and for every part it
//! embeds; it calls the passes and none of them calls it back.

use pulldown_cmark::{Event, Parser, TextMergeStream};

use super::events::options;
use super::splice::{splice, strip_ids, Slots};
use super::{blockref, budget, callout, code, diagram, headings, mark, math, tags};

/// A rendered note body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The HTML fragment.
    pub html: String,
    /// `(level, id, text)` of each heading, for a table of contents.
    pub headings: Vec<(u8, String, String)>,
}

/// Markdown without embeds to HTML, as a page of its own (tests of single passes).
#[cfg(test)]
pub(super) fn to_html(md: &str) -> Rendered {
    to_html_in(
        md,
        &Slots::default(),
        &mut diagram::Budget::default(),
        Nesting::Page,
    )
}

/// Whether markdown is a page's own or a part of another note embedded in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Nesting {
    /// The page's note: headings get ids and make the table of contents.
    Page,
    /// An embedded part: no ids (they would repeat the embedded note's own page's,
    /// or the page's), no table of contents.
    Embedded,
}

/// Markdown to HTML: the parser's events through each construct's pass, in order.
/// `slots` are the embeds whose markers `md` holds (`splice`); `diagrams` is
/// the page's diagram budget, shared with everything it embeds.
pub(super) fn to_html_in(
    md: &str,
    slots: &Slots,
    diagrams: &mut diagram::Budget,
    nesting: Nesting,
) -> Rendered {
    // Adjacent text merged: a callout's marker or a `==highlight==` is one run.
    let events: Vec<Event<'_>> = TextMergeStream::new(Parser::new_ext(md, options())).collect();
    let events = splice(events, slots);
    let events = code::code_blocks(events, diagrams);
    let events = math::math(events);
    let events = tags::link_tags(events);
    let events = mark::highlights(events);
    let events = blockref::block_ids(events);
    let mut events = callout::callouts(events);
    let headings = match nesting {
        Nesting::Page => headings::assign_ids(&mut events),
        Nesting::Embedded => {
            strip_ids(&mut events);
            Vec::new()
        }
    };
    let mut html = String::with_capacity(md.len() * 3 / 2);
    budget::push_html(&mut html, events.into_iter());
    Rendered { html, headings }
}
