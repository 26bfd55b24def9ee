//! Callouts, as Obsidian writes them (help.obsidian.md, "Callouts"): a blockquote
//! whose first line is `[!type]`, optionally followed by `+` or `-` (foldable, open
//! or closed) and a title.
//!
//! ```markdown
//! > [!tip]- A custom *title*
//! > Markdown inside, and nested callouts:
//! > > [!warning]
//! > > Careful.
//! ```
//!
//! Key decisions:
//! - Recognised on pulldown-cmark's events (the first text of a blockquote's first
//!   paragraph), so code, nesting and lazy continuation lines follow CommonMark.
//! - Types are the ones Obsidian documents, with their aliases; the type is matched
//!   case-insensitively and an unknown type is shown as `note` (Obsidian does the
//!   same). The type as written stays in `data-callout` for custom styles.
//! - No title: the type, first letter upper-cased, as Obsidian shows it. A title is
//!   the rest of the first line, with its markdown.
//! - Foldable callouts are `<details>` (closed for `-`, open for `+`): folding needs
//!   no script. Icons are inline SVG drawn in `currentColor`.

use pulldown_cmark::{CowStr, Event, Tag, TagEnd};

use crate::html::escape;

/// Obsidian's callout types: `(type, its aliases)`.
const TYPES: [(&str, &[&str]); 13] = [
    ("note", &[]),
    ("abstract", &["summary", "tldr"]),
    ("info", &[]),
    ("todo", &[]),
    ("tip", &["hint", "important"]),
    ("success", &["check", "done"]),
    ("question", &["help", "faq"]),
    ("warning", &["caution", "attention"]),
    ("failure", &["fail", "missing"]),
    ("danger", &["error"]),
    ("bug", &[]),
    ("example", &[]),
    ("quote", &["cite"]),
];

/// Longest type name read (a callout's type is a word, not a sentence).
const TYPE_LEN_MAX: usize = 64;

/// The canonical type of `name` (lower-case): itself or the type it is an alias of,
/// `note` when Obsidian does not know it.
pub(super) fn canonical(name: &str) -> &'static str {
    TYPES
        .iter()
        .find(|(t, aliases)| *t == name || aliases.contains(&name))
        .map_or("note", |(t, _)| t)
}

/// A callout's first line, read.
#[derive(Debug, PartialEq, Eq)]
struct Head<'t> {
    /// The type as written, lower-cased.
    kind: String,
    /// `None`: not foldable; `Some(true)`: `+`, open; `Some(false)`: `-`, closed.
    fold: Option<bool>,
    /// What follows the marker on the first text run.
    rest: &'t str,
}

/// Reads `[!type]`, `[!type]+` or `[!type]-` at the start of `text`.
fn head(text: &str) -> Option<Head<'_>> {
    let inner = text.strip_prefix("[!")?;
    let close = inner.find(']')?;
    let kind = &inner[..close];
    let word = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    if kind.is_empty() || kind.len() > TYPE_LEN_MAX || !kind.chars().all(word) {
        return None;
    }
    let after = &inner[close + 1..];
    let (fold, rest) = match after.as_bytes().first() {
        Some(b'+') => (Some(true), &after[1..]),
        Some(b'-') => (Some(false), &after[1..]),
        _ => (None, after),
    };
    Some(Head {
        kind: kind.to_lowercase(),
        fold,
        rest: rest.trim_start(),
    })
}

/// What closes an open blockquote: a quote or a callout (and which tag).
enum Open {
    Quote,
    Callout { foldable: bool },
}

/// Turns every blockquote that starts with a callout marker into a callout.
pub(super) fn callouts(mut events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    if !events
        .iter()
        .any(|e| matches!(e, Event::Text(t) if t.starts_with("[!")))
    {
        return events;
    }
    let mut out = Vec::with_capacity(events.len() + 8);
    let mut open: Vec<Open> = Vec::new();
    let mut i = 0;
    while i < events.len() {
        match &events[i] {
            Event::Start(Tag::BlockQuote(_)) => match start(&events, i, &mut out) {
                Some((next, foldable)) => {
                    open.push(Open::Callout { foldable });
                    i = next;
                    continue;
                }
                None => open.push(Open::Quote),
            },
            Event::End(TagEnd::BlockQuote(_)) => {
                if let Some(Open::Callout { foldable }) = open.pop() {
                    let tag = if foldable { "details" } else { "div" };
                    out.push(Event::Html(CowStr::from(format!("</div></{tag}>\n"))));
                    i += 1;
                    continue;
                }
            }
            _ => {}
        }
        // Taken, not cloned: a merged text is an allocation.
        out.push(std::mem::replace(&mut events[i], Event::SoftBreak));
        i += 1;
    }
    out
}

/// When the blockquote opened at `events[i]` is a callout: writes its opening and
/// title to `out`, and returns the index to go on from and whether it folds.
fn start<'a>(events: &[Event<'a>], i: usize, out: &mut Vec<Event<'a>>) -> Option<(usize, bool)> {
    let (Some(Event::Start(Tag::Paragraph)), Some(Event::Text(first))) =
        (events.get(i + 1), events.get(i + 2))
    else {
        return None;
    };
    let h = head(first)?;
    let (title_end, depth_ok) = title_end(events, i + 3);
    let canon = canonical(&h.kind);
    let foldable = h.fold.is_some();
    let (open_tag, title_tag) = match h.fold {
        None => ("div".to_owned(), "div"),
        Some(true) => ("details open".to_owned(), "summary"),
        Some(false) => ("details".to_owned(), "summary"),
    };
    out.push(Event::Html(CowStr::from(format!(
        "<{open_tag} class=\"callout callout-{canon}\" data-callout=\"{}\">\n<{title_tag} class=\"callout-title\">{}<span class=\"callout-title-inner\">",
        escape(&h.kind),
        icon(canon),
    ))));
    let mut title: Vec<Event<'a>> = Vec::new();
    if !h.rest.is_empty() {
        title.push(Event::Text(CowStr::from(h.rest.to_owned())));
    }
    title.extend(events[i + 3..title_end].iter().cloned());
    if title.is_empty() || !depth_ok {
        title = vec![Event::Text(CowStr::from(default_title(&h.kind)))];
    }
    out.extend(title);
    out.push(Event::Html(CowStr::from(format!(
        "</span></{title_tag}>\n<div class=\"callout-content\">"
    ))));
    // The paragraph held only the title: drop it; else the body goes on in a new one.
    let next = match events.get(title_end) {
        Some(Event::End(TagEnd::Paragraph)) => title_end + 1,
        Some(_) => {
            out.push(Event::Start(Tag::Paragraph));
            title_end + 1
        }
        None => title_end,
    };
    Some((next, foldable))
}

/// The index of the event ending a callout's title line (a line break at the top
/// level of its inline content, or the end of the paragraph), and whether the
/// title's inline tags are balanced (else the default title is shown).
fn title_end(events: &[Event<'_>], from: usize) -> (usize, bool) {
    let mut depth = 0usize;
    for (j, e) in events.iter().enumerate().skip(from) {
        match e {
            Event::SoftBreak | Event::HardBreak if depth == 0 => return (j, true),
            Event::End(TagEnd::Paragraph) => return (j, depth == 0),
            Event::Start(_) => depth += 1,
            Event::End(_) => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    (events.len(), depth == 0)
}

/// The title shown when none is written: the type, first letter upper-cased.
fn default_title(kind: &str) -> String {
    let mut c = kind.chars();
    c.next().map_or_else(String::new, |f| {
        f.to_uppercase().chain(c).collect::<String>()
    })
}

/// The inline SVG icon of a canonical type, drawn in `currentColor`.
fn icon(canon: &str) -> String {
    let shape = match canon {
        "abstract" => "<rect x=\"5\" y=\"4\" width=\"14\" height=\"17\" rx=\"2\"/><path d=\"M9 9h6M9 13h6M9 17h4\"/>",
        "info" => "<circle cx=\"12\" cy=\"12\" r=\"9\"/><path d=\"M12 11v6M12 7.5v.5\"/>",
        "todo" => "<circle cx=\"12\" cy=\"12\" r=\"9\"/><path d=\"m8 12 3 3 5-6\"/>",
        "tip" => "<path d=\"M12 3c1 4 6 6 6 11a6 6 0 0 1-12 0c0-3 2-4 2-7 2 1 3 3 3 5 1-1 1-5 1-9z\"/>",
        "success" => "<path d=\"m5 12 5 5 9-10\"/>",
        "question" => "<circle cx=\"12\" cy=\"12\" r=\"9\"/><path d=\"M9.5 9a2.5 2.5 0 1 1 3.5 2.3c-.6.3-1 .9-1 1.6v.6M12 17v.5\"/>",
        "warning" => "<path d=\"M12 3 2 20h20z\"/><path d=\"M12 10v4M12 17v.5\"/>",
        "failure" => "<path d=\"M6 6l12 12M18 6 6 18\"/>",
        "danger" => "<path d=\"M13 2 4 14h7l-1 8 9-12h-7z\"/>",
        "bug" => "<rect x=\"7\" y=\"8\" width=\"10\" height=\"13\" rx=\"5\"/><path d=\"M12 8v13M9 5l1.5 3M15 5l-1.5 3M3 13h4M17 13h4M4 19l3-2M20 19l-3-2M4 7l3 2M20 7l-3 2\"/>",
        "example" => "<path d=\"M9 6h11M9 12h11M9 18h11M4 6h.5M4 12h.5M4 18h.5\"/>",
        "quote" => "<path d=\"M4 18c3 0 5-2 5-6V6H4v6h5M14 18c3 0 5-2 5-6V6h-5v6h5\"/>",
        _ => "<path d=\"M4 20h4L19 9l-4-4L4 16z\"/>",
    };
    format!(
        "<svg class=\"callout-icon\" viewBox=\"0 0 24 24\" width=\"18\" height=\"18\" fill=\"none\" stroke=\"currentColor\" stroke-width=\"2\" stroke-linecap=\"round\" stroke-linejoin=\"round\" aria-hidden=\"true\" focusable=\"false\">{shape}</svg>"
    )
}

#[cfg(test)]
mod tests {
    //! Golden tests against Obsidian's documented behaviour (help.obsidian.md,
    //! "Callouts": types and aliases, titles, foldable callouts, nesting, markdown).

    use super::*;
    use crate::render::to_html;

    fn html(md: &str) -> String {
        to_html(md).html
    }

    #[test]
    fn a_callout_with_its_default_title_golden() {
        assert_eq!(
            html("> [!info]\n> Here's a callout block.\n"),
            format!(
                "<div class=\"callout callout-info\" data-callout=\"info\">\n<div class=\"callout-title\">{}<span class=\"callout-title-inner\">Info</span></div>\n<div class=\"callout-content\">\n<p>Here's a callout block.</p>\n</div></div>\n",
                icon("info")
            )
        );
    }

    #[test]
    fn every_type_and_alias_obsidian_documents_is_known() {
        let cases = [
            ("note", "note"),
            ("abstract", "abstract"),
            ("summary", "abstract"),
            ("tldr", "abstract"),
            ("info", "info"),
            ("todo", "todo"),
            ("tip", "tip"),
            ("hint", "tip"),
            ("important", "tip"),
            ("success", "success"),
            ("check", "success"),
            ("done", "success"),
            ("question", "question"),
            ("help", "question"),
            ("faq", "question"),
            ("warning", "warning"),
            ("caution", "warning"),
            ("attention", "warning"),
            ("failure", "failure"),
            ("fail", "failure"),
            ("missing", "failure"),
            ("danger", "danger"),
            ("error", "danger"),
            ("bug", "bug"),
            ("example", "example"),
            ("quote", "quote"),
            ("cite", "quote"),
        ];
        for (kind, canon) in cases {
            let h = html(&format!("> [!{kind}]\n> x\n"));
            assert!(
                h.starts_with(&format!(
                    "<div class=\"callout callout-{canon}\" data-callout=\"{kind}\">"
                )),
                "{kind}: {h}"
            );
        }
    }

    #[test]
    fn unknown_types_show_as_note_and_types_ignore_case() {
        let h = html("> [!Recipe] Pancakes\n> Flour.\n");
        assert!(
            h.starts_with("<div class=\"callout callout-note\" data-callout=\"recipe\">"),
            "{h}"
        );
        assert!(h.contains("<span class=\"callout-title-inner\">Pancakes</span>"));
        let h = html("> [!WARNING]\n> x\n");
        assert!(
            h.contains("callout-warning") && h.contains(">Warning</span>"),
            "{h}"
        );
    }

    #[test]
    fn custom_titles_keep_their_markdown_and_a_title_only_callout_has_no_paragraph() {
        let h = html("> [!tip] Callouts can have *custom* titles\n");
        assert!(
            h.contains("<span class=\"callout-title-inner\">Callouts can have <em>custom</em> titles</span>"),
            "{h}"
        );
        assert!(
            h.contains("<div class=\"callout-content\"></div></div>"),
            "{h}"
        );
        assert!(!h.contains("<p>"), "{h}");
    }

    #[test]
    fn foldable_callouts_are_details_closed_or_open() {
        let closed = html("> [!faq]- Are callouts foldable?\n> Yes!\n");
        assert!(
            closed.starts_with("<details class=\"callout callout-question\" data-callout=\"faq\">\n<summary class=\"callout-title\">"),
            "{closed}"
        );
        assert!(closed.contains("Are callouts foldable?</span></summary>"));
        assert!(closed.trim_end().ends_with("</div></details>"), "{closed}");
        let open = html("> [!faq]+ Open\n> Yes!\n");
        assert!(
            open.starts_with("<details open class=\"callout callout-question\""),
            "{open}"
        );
    }

    #[test]
    fn callouts_nest_and_hold_markdown() {
        let h = html("> [!question] Can callouts be nested?\n> > [!todo] Yes!, they can.\n> > > [!example] You can even use multiple layers of nesting.\n>\n> - a **list**\n>\n> ```rust\n> fn x() {}\n> ```\n");
        let opens = h.matches("<div class=\"callout ").count();
        let closes = h.matches("</div></div>").count();
        assert_eq!((opens, closes), (3, 3), "{h}");
        assert!(h.find("callout-question") < h.find("callout-todo"));
        assert!(h.find("callout-todo") < h.find("callout-example"));
        assert!(h.contains("<li>a <strong>list</strong></li>"), "{h}");
        assert!(h.contains("language-rust"), "{h}");
        assert!(!h.contains("<blockquote>"), "{h}");
    }

    #[test]
    fn plain_blockquotes_and_near_misses_stay_blockquotes() {
        for md in [
            "> just a quote\n",
            "> [not a callout]\n",
            "> [!]\n",
            "> [!two words]\n",
            "> text first\n> [!note]\n",
        ] {
            let h = html(md);
            assert!(h.starts_with("<blockquote>"), "{md:?}: {h}");
            assert!(!h.contains("class=\"callout"), "{md:?}: {h}");
        }
        let h = html("```\n> [!note]\n```\n");
        assert!(h.contains("&gt; [!note]"), "{h}");
    }

    #[test]
    fn callout_title_cannot_inject_html() {
        let h = html("> [!note] <b>bold</b> &amp; \"quotes\"\n> body\n");
        // The author's inline HTML is the author's (as everywhere in a note), but the
        // type is only ever a word, so it cannot break out of the attribute.
        assert!(h.contains("data-callout=\"note\""), "{h}");
        let h = html("> [!no\"te onclick=alert(1)]\n> x\n");
        assert!(h.starts_with("<blockquote>"), "{h}");
        assert!(!h.contains("data-callout"), "{h}");
        // Markup in the type makes it no callout: the author's inline HTML stays
        // the author's, it never reaches an attribute.
        let h = html("> [!x<i>y</i>]\n");
        assert!(
            h.starts_with("<blockquote>") && !h.contains("data-callout"),
            "{h}"
        );
    }

    #[test]
    fn a_title_whose_markup_spans_lines_falls_back_to_the_default() {
        let h = html("> [!note] *starts here\n> ends here*\n");
        assert_eq!(h.matches("<em>").count(), h.matches("</em>").count(), "{h}");
    }
}
