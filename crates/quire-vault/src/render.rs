//! Markdown to HTML: CommonMark with tables, footnotes, task lists and strikethrough;
//! wikilinks and embeds resolved against the vault; ids on headings.
//!
//! Key decisions:
//! - **A link to a note the reader may not see renders as plain text**, exactly like a
//!   broken link: neither its page nor whether it exists leaks (a private note never
//!   appears to an anonymous reader, not even as a link target).
//! - Wikilinks are replaced by inline HTML before parsing, with every name and label
//!   HTML-escaped; the note's own markdown (raw HTML included) is the author's.
//! - Heading ids are slugs of the heading text, made unique within the page, so
//!   `[[Note#Heading]]` can point at them.

use pulldown_cmark::{CodeBlockKind, CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

pub use crate::html::escape;
use crate::links::{self, WikiLink};
use crate::note::Visibility;
use crate::vault::Vault;

/// A rendered note body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The HTML fragment.
    pub html: String,
    /// `(level, id, text)` of each heading, for a table of contents.
    pub headings: Vec<(u8, String, String)>,
}

/// Extensions to a path that render as images when embedded.
const IMAGE_EXTS: [&str; 7] = ["png", "jpg", "jpeg", "gif", "svg", "webp", "avif"];

/// Renders note `i` of `vault` for a reader allowed up to `audience`.
pub fn render(vault: &Vault, i: usize, audience: Visibility) -> Rendered {
    let note = &vault.notes()[i];
    let md = substitute(vault, &note.body, &note.links, vault.targets(i), audience);
    to_html(&md)
}

/// The markdown with every wikilink replaced by inline HTML.
fn substitute(
    vault: &Vault,
    body: &str,
    links: &[WikiLink],
    targets: &[Option<usize>],
    audience: Visibility,
) -> String {
    let mut out = String::with_capacity(body.len() + links.len() * 48);
    let mut at = 0;
    for (l, t) in links.iter().zip(targets) {
        out.push_str(&body[at..l.range.start]);
        at = l.range.end;
        let text = escape(&l.text());
        if l.embed {
            if let (Some(rel), Some(v)) = (
                vault.attachment(&l.target),
                vault.attachment_version(&l.target),
            ) {
                // Addressed by file name (what embeds name) and versioned, so the
                // site can serve it as immutable.
                let name = rel.rsplit('/').next().unwrap_or(rel).to_lowercase();
                let src = format!("{}?v={v:016x}", attachment_url(&name));
                let ext = rel.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
                if IMAGE_EXTS.contains(&ext.as_str()) {
                    out.push_str(&format!(
                        "<img src=\"{}\" alt=\"{}\" loading=\"lazy\">",
                        escape(&src),
                        escape(l.label.as_deref().unwrap_or(&l.target))
                    ));
                } else {
                    out.push_str(&format!(
                        "<a class=\"attachment\" href=\"{}\">{text}</a>",
                        escape(&src)
                    ));
                }
                continue;
            }
        }
        let heading = l.heading.as_deref().map(links::slug);
        if l.target.is_empty() {
            if let Some(h) = heading {
                out.push_str(&format!(
                    "<a class=\"wikilink\" href=\"#{}\">{text}</a>",
                    escape(&h)
                ));
                continue;
            }
        }
        // Embeds of notes are shown as links (no transclusion yet).
        let t = t.or_else(|| l.embed.then(|| vault.resolve(&l.target)).flatten());
        match t.filter(|&t| vault.notes()[t].visibility() <= audience) {
            Some(t) => {
                let mut href = vault.notes()[t].url.clone();
                if let Some(h) = heading {
                    href.push('#');
                    href.push_str(&h);
                }
                out.push_str(&format!(
                    "<a class=\"wikilink\" href=\"{}\">{text}</a>",
                    escape(&url_path(&href))
                ));
            }
            None => out.push_str(&format!("<span class=\"wikilink broken\">{text}</span>")),
        }
    }
    out.push_str(&body[at..]);
    out
}

/// Markdown to HTML: fenced code in a language `highlight` knows is highlighted; every
/// heading gets a unique id and is listed in [`Rendered::headings`].
fn to_html(md: &str) -> Rendered {
    let opts = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_HEADING_ATTRIBUTES;
    let events: Vec<Event<'_>> = Parser::new_ext(md, opts).collect();
    let mut out_events = Vec::with_capacity(events.len());
    let mut headings = Vec::new();
    let mut used: Vec<String> = Vec::new();
    let mut i = 0;
    while i < events.len() {
        if let Some((html, end)) = highlighted_block(&events, i) {
            out_events.push(html);
            i = end + 1;
            continue;
        }
        if let Event::Start(Tag::Heading {
            level,
            id,
            classes,
            attrs,
        }) = &events[i]
        {
            let end = end_of(&events, i, |e| matches!(e, Event::End(TagEnd::Heading(_))));
            let text: String = events[i + 1..end]
                .iter()
                .filter_map(|e| match e {
                    Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
                    _ => None,
                })
                .collect();
            let id_s = heading_id(id.as_deref(), &text, &mut used);
            headings.push((level_num(*level), id_s.clone(), text));
            out_events.push(Event::Start(Tag::Heading {
                level: *level,
                id: Some(CowStr::from(id_s)),
                classes: classes.clone(),
                attrs: attrs.clone(),
            }));
            i += 1;
            continue;
        }
        out_events.push(events[i].clone());
        i += 1;
    }
    let mut html = String::with_capacity(md.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut html, out_events.into_iter());
    Rendered { html, headings }
}

/// The index of the first event at or after `i` that `is_end`, or the end.
fn end_of(events: &[Event<'_>], i: usize, is_end: impl Fn(&Event<'_>) -> bool) -> usize {
    events[i..]
        .iter()
        .position(is_end)
        .map_or(events.len(), |p| i + p)
}

/// When `events[i]` opens a fenced code block in a language `highlight` knows: the
/// block as one highlighted HTML event, and the index of its closing event.
fn highlighted_block<'a>(events: &[Event<'a>], i: usize) -> Option<(Event<'a>, usize)> {
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
    let h = crate::highlight::highlight(name, &code)?;
    let html = Event::Html(CowStr::from(format!(
        "<pre><code class=\"language-{}\">{h}</code></pre>\n",
        escape(name)
    )));
    Some((html, end))
}

/// A heading's id: its own (`{#id}`), else the slug of its `text`, else `section`;
/// `-2`, `-3`.. appended until it is not in `used`, where it is then recorded.
fn heading_id(id: Option<&str>, text: &str, used: &mut Vec<String>) -> String {
    let base = id.map_or_else(|| links::slug(text), str::to_owned);
    let base = if base.is_empty() {
        "section".to_owned()
    } else {
        base
    };
    let mut id_s = base.clone();
    let mut n = 1;
    while used.contains(&id_s) {
        n += 1;
        id_s = format!("{base}-{n}");
    }
    used.push(id_s.clone());
    id_s
}

fn level_num(l: HeadingLevel) -> u8 {
    match l {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// Percent-encodes what may not stand in a URL path (spaces, quotes, non-ASCII...),
/// keeping `/` and `#`.
/// The site path of the attachment whose lower-cased file name is `name`.
pub fn attachment_url(name: &str) -> String {
    format!("/attachments/{}", url_path(name))
}

fn url_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~#".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::vault;

    #[test]
    fn fenced_code_is_highlighted_and_escaped() {
        let r = to_html("```rust\nfn main() {}\n```\n\n```js\nlet s = \"<script>alert(1)</script>\";\n```\n\n```nope\n<b>\n```\n");
        assert!(
            r.html.contains(
                "<pre><code class=\"language-rust\"><span class=\"hl-keyword\">fn</span>"
            ),
            "{}",
            r.html
        );
        assert!(!r.html.contains("<script>"), "{}", r.html);
        assert!(r.html.contains("&lt;script&gt;"));
        assert!(
            r.html.contains("<code class=\"language-nope\">&lt;b&gt;"),
            "{}",
            r.html
        );
    }

    #[test]
    fn wikilinks_become_links_and_private_targets_plain_text() {
        let (_d, v) = vault(&[
            ("Home.md", "---\nfree: true\n---\n[[Open Note|open]] [[Secret]] [[Gone]] [[Open Note#Part Two]] ![[a b.svg]] [[#Top]]\n\n# Top\n"),
            ("Open Note.md", "---\nfree: true\n---\n## Part Two\n"),
            ("Secret.md", "---\ntitle: Secret plans\n---\nshh"),
            ("att/a b.svg", "<svg/>"),
        ]);
        let home = v.resolve("home").unwrap();
        let public = render(&v, home, Visibility::Public).html;
        assert!(
            public.contains("<a class=\"wikilink\" href=\"/open-note\">open</a>"),
            "{public}"
        );
        assert!(
            public.contains("<span class=\"wikilink broken\">Secret</span>"),
            "{public}"
        );
        assert!(
            !public.contains("/secret"),
            "no private url leaks: {public}"
        );
        assert!(public.contains("<span class=\"wikilink broken\">Gone</span>"));
        assert!(public.contains("href=\"/open-note#part-two\""));
        assert!(
            public.contains("<img src=\"/attachments/a%20b.svg?v=")
                && public.contains("\" alt=\"a b.svg\" loading=\"lazy\">"),
            "{public}"
        );
        assert!(public.contains("href=\"#top\""));
        assert!(public.contains("<h1 id=\"top\">Top</h1>"), "{public}");
        let private = render(&v, home, Visibility::Private).html;
        assert!(
            private.contains("<a class=\"wikilink\" href=\"/secret\">Secret</a>"),
            "{private}"
        );
    }

    #[test]
    fn markdown_extensions_render() {
        let (_d, v) = vault(&[(
            "N.md",
            "| a | b |\n|---|---|\n| 1 | 2 |\n\n- [x] done\n- [ ] todo\n\n~~old~~ text[^1]\n\n[^1]: a note\n\n## Same\n## Same\n\n```rust\nlet x = \"[[not a link]]\";\n```\n",
        )]);
        let r = render(&v, 0, Visibility::Draft);
        for want in [
            "<table>",
            "type=\"checkbox\"",
            "<del>old</del>",
            "footnote",
            "id=\"same\"",
            "id=\"same-2\"",
            "[[not a link]]",
            "language-rust",
        ] {
            assert!(r.html.contains(want), "missing {want} in {}", r.html);
        }
        assert_eq!(r.headings.len(), 2);
    }

    #[test]
    fn names_and_labels_are_escaped() {
        let (_d, v) = vault(&[("N.md", "[[<script>x</script>|<b>\"hi\"</b>]]")]);
        let html = render(&v, 0, Visibility::Draft).html;
        assert!(
            !html.contains("<script>") && !html.contains("<b>"),
            "{html}"
        );
        assert!(html.contains("&lt;b&gt;"), "{html}");
    }
}
