//! The text a note is searched by, and snippets made safe for HTML.
//!
//! Key decisions:
//! - **Index what a reader sees, not markdown syntax**: wikilinks become their label
//!   (`[[A|b]]` → `b`), embeds vanish, emphasis, heading and list markers and link
//!   URLs go; code (fenced or inline) and raw HTML stay, as text; `%%comments%%`
//!   are never indexed (they are the author's, not the reader's). Front matter is not
//!   in the body at all. Obsidian's own markers go too: a callout's `[!type]` (its
//!   title stays) and `==highlight==`'s `==` (outside code).
//! - **Control characters never reach the index**, so the two we use as snippet
//!   sentinels ([`MARK_OPEN`], [`MARK_CLOSE`]) can only come from the snippet maker (`search/snippet.rs`);
//!   [`snippet_html`] escapes everything else, so the only live markup in a snippet
//!   is our `<mark>`.

use pulldown_cmark::{Event, Options, Parser, TagEnd};

use crate::note::Note;

/// Sentinel a snippet puts before a match.
pub(crate) const MARK_OPEN: char = '\u{1}';
/// Sentinel a snippet puts after a match.
pub(crate) const MARK_CLOSE: char = '\u{2}';
/// Most text indexed per note, in bytes; past it a note is searched by its beginning.
const BODY_BYTES_MAX: usize = 512 * 1024;

/// The searchable text of `note`'s body.
pub fn plain_body(note: &Note) -> String {
    let md = without_wikilinks(note);
    let opts = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_STRIKETHROUGH;
    let mut out = String::with_capacity(md.len());
    for event in Parser::new_ext(&md, opts) {
        match event {
            Event::Text(t) => out.push_str(&t.replace("==", "")),
            Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => out.push_str(&t),
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::CodeBlock
                | TagEnd::BlockQuote(_)
                | TagEnd::TableRow
                | TagEnd::TableHead
                | TagEnd::HtmlBlock,
            ) => out.push('\n'),
            Event::End(TagEnd::TableCell) => out.push(' '),
            _ => {}
        }
        if out.len() > BODY_BYTES_MAX {
            break;
        }
    }
    clean(&without_callout_markers(&out), BODY_BYTES_MAX)
}

/// `text` with the `[!type]` (and its fold sign) a callout's first line starts with
/// removed from each line that starts with one: pulldown-cmark reads it as text.
fn without_callout_markers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        out.push_str(strip_callout_marker(line));
    }
    out
}

fn strip_callout_marker(line: &str) -> &str {
    let Some(rest) = line.strip_prefix("[!") else {
        return line;
    };
    let Some(end) = rest.find(']').filter(|&e| e > 0 && e <= 32) else {
        return line;
    };
    if !rest[..end]
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return line;
    }
    let after = &rest[end + 1..];
    after
        .strip_prefix(['+', '-'])
        .unwrap_or(after)
        .trim_start_matches(' ')
}

/// `text` without control characters (but tabs and line ends), at most `max` bytes.
pub(crate) fn clean(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(if c.is_control() && c != '\n' && c != '\t' {
            ' '
        } else {
            c
        });
    }
    out
}

/// The body with every wikilink replaced by the text a reader sees, embeds and
/// comments removed.
fn without_wikilinks(note: &Note) -> String {
    crate::render::comments::rewrite(&note.body, &note.links, |_, link| {
        if link.embed {
            String::new()
        } else {
            link.text()
        }
    })
}

/// A snippet as HTML: text escaped, white space runs collapsed, sentinels
/// turned into balanced `<mark>` tags, stray sentinels dropped.
pub fn snippet_html(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 32);
    let mut open = false;
    let mut space = false;
    for c in raw.chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space && !out.is_empty() {
            out.push(' ');
        }
        space = false;
        match c {
            MARK_OPEN if !open => {
                out.push_str("<mark>");
                open = true;
            }
            MARK_CLOSE if open => {
                out.push_str("</mark>");
                open = false;
            }
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    if open {
        out.push_str("</mark>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_syntax_is_stripped_and_code_kept() {
        let n = Note::parse(
            "a.md",
            b"---\ntitle: T\nsecret: fm\n---\n# Head\n\nSee [[Other Note|the label]] and [[Plain]] ![[pic.png]].\n\n- **bold** item\n- [x] done\n\n```rust\nlet x = [[not_a_link]];\n```\n\n[text](http://example.com/url) `code` <b>raw</b>\n",
        );
        let t = plain_body(&n);
        assert!(!t.contains("secret"), "{t}");
        assert!(t.contains("Head\n"), "{t}");
        assert!(t.contains("See the label and Plain ."), "{t}");
        assert!(t.contains("bold item"), "{t}");
        assert!(t.contains("let x = [[not_a_link]];"), "{t}");
        assert!(t.contains("text code <b>raw</b>"), "{t}");
        assert!(!t.contains("example.com") && !t.contains("pic.png") && !t.contains('#'));
    }

    #[test]
    fn obsidian_markers_are_not_indexed_but_code_keeps_them() {
        let n = Note::parse(
            "a.md",
            b"> [!tip]- Water early\n> The ==soil== stays moist.\n\n[!not a callout] text\n\n`a == b`\n",
        );
        let text = plain_body(&n);
        assert!(
            text.starts_with("Water early The soil stays moist."),
            "{text:?}"
        );
        assert!(
            !text.contains("[!tip]") && !text.contains("==soil"),
            "{text:?}"
        );
        assert!(
            text.contains("[!not a callout] text"),
            "not a marker: {text:?}"
        );
        assert!(text.contains("a == b"), "code keeps its text: {text:?}");
    }

    #[test]
    fn comments_are_never_indexed() {
        let n = Note::parse(
            "a.md",
            b"shown %%hidden inline%% text\n\n%%\nhidden block [[Hidden Link]]\n%%\nend %%unclosed hidden",
        );
        let t = plain_body(&n);
        assert!(!t.contains("hidden") && !t.contains("Hidden"), "{t}");
        assert!(
            t.contains("shown") && t.contains("text") && t.contains("end"),
            "{t}"
        );
    }

    #[test]
    fn control_characters_never_reach_the_index() {
        assert_eq!(clean("a\u{1}b\u{2}c\td\n", 100), "a b c\td\n");
        assert_eq!(clean("ééé", 5), "éé");
    }

    #[test]
    fn snippets_escape_everything_but_marks() {
        assert_eq!(
            snippet_html("x <script>alert(\"\u{1}hi\u{2}\")</script> &\n\n y"),
            "x &lt;script&gt;alert(&quot;<mark>hi</mark>&quot;)&lt;/script&gt; &amp; y"
        );
        assert_eq!(snippet_html("\u{2}a\u{1}\u{1}b"), "a<mark>b</mark>");
    }
}
