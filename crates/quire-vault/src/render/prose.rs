//! Where inline constructs may be found: which text events are prose (not code, not
//! inside a link or an image, not inside an `<a>` written as inline HTML such as a
//! rendered wikilink), and what stands before a text event.

use pulldown_cmark::{Event, Tag, TagEnd};

/// Tracks, event by event, whether the text being read is prose.
#[derive(Debug, Default)]
pub(super) struct Context {
    code: usize,
    link: usize,
    anchor: usize,
}

impl Context {
    /// Takes `e` into account; call for every event, in order, before reading it.
    pub(super) fn step(&mut self, e: &Event<'_>) {
        match e {
            Event::Start(Tag::CodeBlock(_)) => self.code += 1,
            Event::End(TagEnd::CodeBlock) => self.code = self.code.saturating_sub(1),
            Event::Start(Tag::Link { .. } | Tag::Image { .. }) => self.link += 1,
            Event::End(TagEnd::Link | TagEnd::Image) => self.link = self.link.saturating_sub(1),
            // One event may hold a whole element (a tag link is `<a ..>#x</a>`):
            // count every opening and closing `a` in it. Block HTML (a highlighted
            // code block, say) cannot leave an anchor open around prose.
            Event::InlineHtml(h) => {
                let (opens, closes) = anchors(h);
                self.anchor = (self.anchor + opens).saturating_sub(closes);
            }
            _ => {}
        }
    }

    /// Whether a text event read now is prose.
    pub(super) fn prose(&self) -> bool {
        self.code == 0 && self.link == 0 && self.anchor == 0
    }
}

/// How many `<a` start tags and `</a` end tags `html` holds (any case).
fn anchors(html: &str) -> (usize, usize) {
    let b = html.as_bytes();
    let ends = |j: usize| {
        b.get(j)
            .is_none_or(|c| matches!(c, b' ' | b'>' | b'\n' | b'\t' | b'\r'))
    };
    let (mut opens, mut closes) = (0, 0);
    for (i, _) in html.match_indices('<') {
        let is_a = |j: usize| b.get(j).is_some_and(|c| c.eq_ignore_ascii_case(&b'a'));
        if is_a(i + 1) && ends(i + 2) {
            opens += 1;
        } else if b.get(i + 1) == Some(&b'/') && is_a(i + 2) && ends(i + 3) {
            closes += 1;
        }
    }
    (opens, closes)
}

/// Whether `e` is an inline tag's start or end (emphasis, links...), as opposed to a
/// block's.
pub(super) fn is_inline(e: &Event<'_>) -> bool {
    match e {
        Event::Start(t) => matches!(
            t,
            Tag::Emphasis
                | Tag::Strong
                | Tag::Strikethrough
                | Tag::Link { .. }
                | Tag::Image { .. }
                | Tag::Superscript
                | Tag::Subscript
        ),
        Event::End(t) => matches!(
            t,
            TagEnd::Emphasis
                | TagEnd::Strong
                | TagEnd::Strikethrough
                | TagEnd::Link
                | TagEnd::Image
                | TagEnd::Superscript
                | TagEnd::Subscript
        ),
        _ => false,
    }
}

/// Whether the event before a text event (`None`: the first) leaves a word boundary
/// at the text's start: a block's start, a line break, an inline tag's opening.
pub(super) fn boundary_before(prev: Option<&Event<'_>>) -> bool {
    match prev {
        None | Some(Event::SoftBreak | Event::HardBreak | Event::Start(_)) => true,
        Some(_) => false,
    }
}
