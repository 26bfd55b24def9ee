//! Fenced code blocks: ` ```mermaid ` becomes a diagram (`diagram`), those in a
//! language `highlight` knows become one highlighted HTML event; the others are left
//! to pulldown-cmark (escaped `<pre><code>`).

use pulldown_cmark::{CodeBlockKind, CowStr, Event, Tag, TagEnd};

use super::diagram;
use super::events::end_of;
use crate::html::escape;

/// Replaces every mermaid block by its diagram and every fenced block in a known
/// language by its highlighted HTML.
/// `budget` is the page's, shared with the notes it embeds.
pub(super) fn code_blocks<'a>(
    mut events: Vec<Event<'a>>,
    budget: &mut diagram::Budget,
) -> Vec<Event<'a>> {
    if !events
        .iter()
        .any(|e| matches!(e, Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_)))))
    {
        return events;
    }
    let mut out = Vec::with_capacity(events.len());
    let mut i = 0;
    while i < events.len() {
        let mermaid = matches!(&events[i], Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(l)))
            if l.split_whitespace().next() == Some("mermaid"));
        if let Some((_, code, end)) = mermaid.then(|| fenced(&events, i)).flatten() {
            out.push(Event::Html(CowStr::from(diagram::block(&code, budget))));
            i = end + 1;
        } else if let Some((html, end)) = highlighted_block(&events, i) {
            out.push(html);
            i = end + 1;
        } else {
            // Taken, not cloned: a merged text is an allocation.
            out.push(std::mem::replace(&mut events[i], Event::SoftBreak));
            i += 1;
        }
    }
    out
}

/// The language named on a fence (its first word) and the block's text, when
/// `events[i]` opens a fenced block; with the index of its closing event.
pub(super) fn fenced<'e>(events: &'e [Event<'_>], i: usize) -> Option<(&'e str, String, usize)> {
    let Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(lang))) = &events[i] else {
        return None;
    };
    let end = end_of(events, i, |e| matches!(e, Event::End(TagEnd::CodeBlock)));
    let name = lang.split_whitespace().next().unwrap_or("");
    let code: String = events[i + 1..end]
        .iter()
        .filter_map(|e| match e {
            Event::Text(t) => Some(t.as_ref()),
            _ => None,
        })
        .collect();
    Some((name, code, end))
}

/// When `events[i]` opens a fenced code block in a language `highlight` knows: the
/// block as one highlighted HTML event, and the index of its closing event.
fn highlighted_block<'a>(events: &[Event<'a>], i: usize) -> Option<(Event<'a>, usize)> {
    let (name, code, end) = fenced(events, i)?;
    let h = crate::highlight::highlight(name, &code)?;
    let html = Event::Html(CowStr::from(format!(
        "<pre><code class=\"language-{}\">{h}</code></pre>\n",
        escape(name)
    )));
    Some((html, end))
}
