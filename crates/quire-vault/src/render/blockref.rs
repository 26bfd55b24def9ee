//! Block identifiers: a paragraph or list item ending in ` ^id` gets `id="^id"`,
//! and the marker is not shown (help.obsidian.md, "Internal links" › "Link to a
//! block in a note"), so `[[Note#^id]]` (see `links::fragment`) lands on it.
//!
//! Key decision: ids hold only ASCII letters, digits and `-` (what Obsidian
//! generates and accepts), so they need no escaping and cannot reach beyond the
//! attribute.

use pulldown_cmark::{CowStr, Event, Tag, TagEnd};

/// Longest block id read.
const ID_LEN_MAX: usize = 64;

/// Where `^id` ends `text`: the byte offset the text should be cut at, and the id.
pub(super) fn marker(text: &str, own_line: bool) -> Option<(usize, &str)> {
    let trimmed = text.trim_end();
    let caret = trimmed.rfind('^')?;
    let id = &trimmed[caret + 1..];
    let valid = !id.is_empty()
        && id.len() <= ID_LEN_MAX
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let before = &trimmed[..caret];
    let separated = if before.is_empty() {
        own_line
    } else {
        before.ends_with(char::is_whitespace)
    };
    (valid && separated).then(|| (before.trim_end().len(), id))
}

/// Moves every trailing `^id` of a paragraph or list item onto the block as its id.
pub(super) fn block_ids(events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    if !events
        .iter()
        .any(|e| matches!(e, Event::Text(t) if t.contains('^')))
    {
        return events;
    }
    let mut out: Vec<Event<'_>> = Vec::with_capacity(events.len());
    // Indices in `out` of the open paragraphs and items.
    let mut open: Vec<usize> = Vec::new();
    for e in events {
        match &e {
            Event::Start(Tag::Paragraph | Tag::Item) => open.push(out.len()),
            Event::End(end @ (TagEnd::Paragraph | TagEnd::Item)) => {
                if let Some(start) = open.pop() {
                    let tag = if matches!(end, TagEnd::Paragraph) {
                        "p"
                    } else {
                        "li"
                    };
                    take_marker(&mut out, start, tag);
                }
            }
            _ => {}
        }
        out.push(e);
    }
    out
}

/// When the block opened at `out[start]` ends (now) with a `^id` text: cuts the
/// marker and gives the block the id.
fn take_marker(out: &mut Vec<Event<'_>>, start: usize, tag: &str) {
    let last = out.len() - 1;
    if last <= start {
        return;
    }
    let Event::Text(t) = &out[last] else {
        return;
    };
    let own_line = last == start + 1 || matches!(out[last - 1], Event::SoftBreak);
    let Some((cut, id)) = marker(t, own_line) else {
        return;
    };
    let open = Event::Html(CowStr::from(format!("<{tag} id=\"^{id}\">")));
    let kept = t[..cut].to_owned();
    if kept.is_empty() {
        out.pop();
        if matches!(out.last(), Some(Event::SoftBreak)) {
            out.pop();
        }
    } else {
        out[last] = Event::Text(CowStr::from(kept));
    }
    out[start] = open;
}

#[cfg(test)]
mod tests {
    use crate::render::to_html;

    fn html(md: &str) -> String {
        to_html(md).html
    }

    #[test]
    fn block_ids_golden() {
        assert_eq!(
            html("A paragraph worth linking to. ^quote-of-the-day\n"),
            "<p id=\"^quote-of-the-day\">A paragraph worth linking to.</p>\n"
        );
        assert_eq!(
            html("- one\n- two ^b2\n"),
            "<ul>\n<li>one</li>\n<li id=\"^b2\">two</li>\n</ul>\n"
        );
        assert_eq!(
            html("Line one\nline two\n^own-line\n"),
            "<p id=\"^own-line\">Line one\nline two</p>\n"
        );
    }

    #[test]
    fn carets_that_are_not_markers_stay() {
        for md in ["2^10\n", "x ^bad_id\n", "x ^\n", "`code ^id`\n", "a^b\n"] {
            let h = html(md);
            assert!(!h.contains(" id="), "{md:?}: {h}");
        }
    }

    #[test]
    fn block_ids_cannot_inject_html() {
        let h = html("text ^a\"onclick=x\n");
        assert!(!h.contains("id=\"^a\""), "{h}");
        assert!(!h.contains(" onclick"), "{h}");
    }
}
