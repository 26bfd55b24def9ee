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
            // count every opening and closing `a` in it.
            Event::InlineHtml(h) | Event::Html(h) if h.contains('<') => {
                let h = h.to_ascii_lowercase();
                let opens = ["<a ", "<a>", "<a\n", "<a\t"]
                    .iter()
                    .map(|p| h.matches(p).count())
                    .sum::<usize>();
                let closes = h.matches("</a").count();
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
