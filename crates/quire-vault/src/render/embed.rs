//! Transclusion: `![[Note]]`, `![[Note#Heading]]` and `![[Note#^block-id]]` show the
//! embedded note (or that section, or that block; see `part`) rendered in the page,
//! with a link to its source (help.obsidian.md, "Embed files").
//!
//! Key decisions:
//! - **A note the reader may not see is never rendered into their page**: its embed
//!   is the very same broken embed as that of a note that does not exist
//!   (`wikilinks::broken`), so neither its text nor its existence leaks. Every
//!   embedded note is rendered for the page's audience, so this holds at any depth.
//! - **Bounded**: embeds nest [`EMBED_DEPTH_MAX`] deep (deeper, an embed is a link); a
//!   note embedding a note it is already inside (itself, or a note up the chain)
//!   shows an "embed cycle" mark; a page renders at most `EMBEDS_MAX` embeds and
//!   [`EMBED_BYTES_MAX`] bytes of them (beyond, links). The diagram budget is the
//!   page's, shared with everything it embeds.
//! - Embeds are replaced by markers (a private-use character around the embed's
//!   number) before the markdown is parsed; only the markers inside the part that is
//!   shown are rendered, and the events are spliced: a paragraph holding an embed is
//!   split around it (a block may not sit in a `<p>`); where no block may go (a
//!   heading, a table cell, a link) the embed is a link.
//! - **The page depends on every note it transcludes**: [`embedded_notes`] walks
//!   exactly what rendering walks, so the site folds those notes into the page's
//!   version and an edit to one re-renders exactly the pages that show it.

use pulldown_cmark::{CowStr, Event, Tag, TagEnd};

use super::{diagram, part, to_html_in, wikilinks, Nesting, Rendered};
use crate::note::Visibility;
use crate::vault::Vault;

/// How deep embeds nest: a page, a note it embeds, a note that one embeds, and one
/// more. Deeper embeds are links.
pub const EMBED_DEPTH_MAX: usize = 3;

/// Embedded bytes per page (each embed counts the larger of its markdown and its
/// HTML; nested embeds count again in the embed holding them).
pub const EMBED_BYTES_MAX: usize = 256 * 1024;

/// Embeds rendered per page, at any depth.
const EMBEDS_MAX: usize = 64;

/// Opens and closes an embed's marker in the markdown.
const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';

/// An embed, rendered: as a block, and as the inline HTML used where no block may go.
#[derive(Debug)]
pub(super) struct Slot {
    block: String,
    inline: String,
}

/// An embed of a note the reader may see, found in a note's markdown.
#[derive(Debug)]
struct Pending {
    target: usize,
    heading: Option<String>,
    /// The link's text and URL, escaped.
    text: String,
    href: String,
}

/// A note's markdown with its links replaced and its embeds as markers.
#[derive(Debug)]
struct Source {
    md: String,
    pending: Vec<Pending>,
}

/// One page's render: the notes being rendered (outermost first) and what the page
/// has left to spend.
#[derive(Debug)]
pub(super) struct Page<'v> {
    vault: &'v Vault,
    audience: Visibility,
    chain: Vec<usize>,
    bytes_left: usize,
    embeds_left: usize,
    diagrams: diagram::Budget,
}

impl<'v> Page<'v> {
    /// A page rendered for `audience`.
    pub(super) fn new(vault: &'v Vault, audience: Visibility) -> Page<'v> {
        Page {
            vault,
            audience,
            chain: Vec::new(),
            bytes_left: EMBED_BYTES_MAX,
            embeds_left: EMBEDS_MAX,
            diagrams: diagram::Budget::default(),
        }
    }

    /// Note `i` as the page's own.
    pub(super) fn render_top(mut self, i: usize) -> Rendered {
        let src = self.source(i);
        self.chain.push(i);
        let slots = self.expand(&src, &src.md);
        to_html_in(&src.md, &slots, &mut self.diagrams, Nesting::Page)
    }

    fn source(&self, i: usize) -> Source {
        let v = self.vault;
        let note = &v.notes()[i];
        let mut pending = Vec::new();
        let md = wikilinks::substitute(
            v,
            &note.body,
            &note.links,
            v.targets(i),
            self.audience,
            &mut |l, target, text, href| {
                pending.push(Pending {
                    target,
                    heading: l.heading.clone(),
                    text: text.to_owned(),
                    href: href.to_owned(),
                });
                format!("{OPEN}{}{CLOSE}", pending.len() - 1)
            },
        );
        Source { md, pending }
    }

    /// Renders every embed whose marker is in `part` (of `src`), in order.
    fn expand(&mut self, src: &Source, part: &str) -> Vec<Option<Slot>> {
        let mut slots: Vec<Option<Slot>> = src.pending.iter().map(|_| None).collect();
        for k in markers(part) {
            if let (Some(p), Some(None)) = (src.pending.get(k), slots.get(k)) {
                slots[k] = Some(self.embed(p));
            }
        }
        slots
    }

    /// One embed: the part it names rendered, or a mark or a link when a bound or
    /// a cycle stops it.
    fn embed(&mut self, p: &Pending) -> Slot {
        let link = format!(
            "<a class=\"wikilink embed-link\" href=\"{}\">{}</a>",
            p.href, p.text
        );
        if self.chain.contains(&p.target) {
            return Slot::mark("embed-cycle", "↻ embed cycle:", &link);
        }
        if self.chain.len() > EMBED_DEPTH_MAX || self.embeds_left == 0 {
            return Slot::inline(link);
        }
        let src = self.source(p.target);
        let Some(part) = part::select(&src.md, p.heading.as_deref()) else {
            return Slot::mark("embed-missing", "Section not found:", &link);
        };
        if part.len() > self.bytes_left {
            return Slot::inline(link);
        }
        self.embeds_left -= 1;
        self.chain.push(p.target);
        let slots = self.expand(&src, &part);
        let r = to_html_in(&part, &slots, &mut self.diagrams, Nesting::Embedded);
        self.chain.pop();
        let block = format!(
            "<div class=\"embed\"><a class=\"embed-source\" href=\"{}\">{}</a><div class=\"embed-body\">\n{}</div></div>\n",
            p.href, p.text, r.html
        );
        let cost = block.len().max(part.len());
        if cost > self.bytes_left {
            self.bytes_left = 0;
            return Slot::inline(link);
        }
        self.bytes_left -= cost;
        Slot {
            block,
            inline: link,
        }
    }

    /// The notes the embeds in `part` (of `src`) transclude, as `embed` would render
    /// them; `left` counts embeds as `embeds_left` does.
    fn walk(
        &self,
        src: &Source,
        part: &str,
        chain: &mut Vec<usize>,
        left: &mut usize,
        out: &mut Vec<usize>,
    ) {
        for k in markers(part) {
            let Some(p) = src.pending.get(k) else {
                continue;
            };
            if chain.contains(&p.target) || chain.len() > EMBED_DEPTH_MAX || *left == 0 {
                continue;
            }
            out.push(p.target);
            let s = self.source(p.target);
            let Some(part) = part::select(&s.md, p.heading.as_deref()) else {
                continue;
            };
            *left -= 1;
            chain.push(p.target);
            self.walk(&s, &part, chain, left, out);
            chain.pop();
        }
    }
}

impl Slot {
    fn inline(link: String) -> Slot {
        Slot {
            block: format!("<p>{link}</p>\n"),
            inline: link,
        }
    }

    /// A visible mark (a cycle, a missing section) before the link.
    fn mark(class: &str, what: &str, link: &str) -> Slot {
        Slot {
            block: format!("<p class=\"embed-error {class}\">{what} {link}</p>\n"),
            inline: format!("<span class=\"embed-error {class}\">{what} {link}</span>"),
        }
    }
}

/// The notes whose content note `i`'s page shows for `audience` through its embeds,
/// at any depth, sorted: the page must change when any of them does.
pub fn embedded_notes(vault: &Vault, i: usize, audience: Visibility) -> Vec<usize> {
    if !vault.notes()[i].links.iter().any(|l| l.embed) {
        return Vec::new();
    }
    let page = Page::new(vault, audience);
    let src = page.source(i);
    let mut out = Vec::new();
    let mut left = EMBEDS_MAX;
    page.walk(&src, &src.md, &mut vec![i], &mut left, &mut out);
    out.sort_unstable();
    out.dedup();
    out
}

/// The embed numbers of the markers in `md`, in order.
fn markers(md: &str) -> impl Iterator<Item = usize> + '_ {
    md.split(OPEN).skip(1).filter_map(|s| {
        let (n, _) = s.split_once(CLOSE)?;
        n.parse().ok()
    })
}

/// Where text sits: what an embed found in it may become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A paragraph: split around the embed's block.
    Paragraph,
    /// A tight list item: the block goes in.
    Item,
    /// Anywhere else (a heading, a cell, a link, emphasis): the inline form.
    Inline,
}

/// Puts each rendered embed where its marker is (see [`Place`]).
pub(super) fn splice<'a>(events: Vec<Event<'a>>, slots: &[Option<Slot>]) -> Vec<Event<'a>> {
    if slots.iter().all(Option::is_none) {
        return events;
    }
    let mut out = Vec::with_capacity(events.len() + 4 * slots.len());
    let mut open: Vec<Place> = Vec::new();
    for e in events {
        match &e {
            Event::Start(Tag::Paragraph) => open.push(Place::Paragraph),
            Event::Start(Tag::Item) => open.push(Place::Item),
            Event::Start(_) => open.push(Place::Inline),
            Event::End(_) => {
                open.pop();
            }
            _ => {}
        }
        let at = open.last().copied().unwrap_or(Place::Inline);
        match e {
            Event::Text(t) if t.contains(OPEN) => put_text(&t, at, slots, &mut out),
            Event::Html(h) if h.contains(OPEN) => out.push(Event::Html(inline_all(&h, slots))),
            Event::InlineHtml(h) if h.contains(OPEN) => {
                out.push(Event::InlineHtml(inline_all(&h, slots)));
            }
            e => out.push(e),
        }
    }
    tidy(out)
}

/// Splits the pieces of a text holding markers into events.
fn put_text<'a>(t: &str, at: Place, slots: &[Option<Slot>], out: &mut Vec<Event<'a>>) {
    let mut rest = t;
    while let Some(o) = rest.find(OPEN) {
        let after = &rest[o + OPEN.len_utf8()..];
        let slot = after.split_once(CLOSE).and_then(|(n, tail)| {
            let s = slots.get(n.parse::<usize>().ok()?)?.as_ref()?;
            Some((s, tail))
        });
        let Some((slot, tail)) = slot else {
            // Not one of ours: text as written.
            out.push(Event::Text(CowStr::from(
                rest[..o + OPEN.len_utf8()].to_owned(),
            )));
            rest = after;
            continue;
        };
        if o > 0 {
            out.push(Event::Text(CowStr::from(rest[..o].to_owned())));
        }
        match at {
            Place::Paragraph => {
                out.push(Event::End(TagEnd::Paragraph));
                out.push(Event::Html(CowStr::from(slot.block.clone())));
                out.push(Event::Start(Tag::Paragraph));
            }
            Place::Item => out.push(Event::Html(CowStr::from(slot.block.clone()))),
            Place::Inline => out.push(Event::InlineHtml(CowStr::from(slot.inline.clone()))),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        out.push(Event::Text(CowStr::from(rest.to_owned())));
    }
}

/// `html` with every marker replaced by its embed's inline form.
fn inline_all<'a>(html: &str, slots: &[Option<Slot>]) -> CowStr<'a> {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(o) = rest.find(OPEN) {
        out.push_str(&rest[..o]);
        let after = &rest[o + OPEN.len_utf8()..];
        let found = after.split_once(CLOSE).and_then(|(n, tail)| {
            let s = slots.get(n.parse::<usize>().ok()?)?.as_ref()?;
            Some((s, tail))
        });
        match found {
            Some((s, tail)) => {
                out.push_str(&s.inline);
                rest = tail;
            }
            None => {
                out.push(OPEN);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    CowStr::from(out)
}

/// Drops what splitting paragraphs left: empty paragraphs, and line breaks at a
/// paragraph's edges.
fn tidy(events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    let mut out: Vec<Event<'_>> = Vec::with_capacity(events.len());
    let blank = |e: Option<&Event<'_>>| match e {
        Some(Event::SoftBreak | Event::HardBreak) => true,
        Some(Event::Text(t)) => t.trim().is_empty(),
        _ => false,
    };
    for e in events {
        let after_start = matches!(out.last(), Some(Event::Start(Tag::Paragraph)));
        match e {
            Event::End(TagEnd::Paragraph) => {
                while blank(out.last()) {
                    out.pop();
                }
                if matches!(out.last(), Some(Event::Start(Tag::Paragraph))) {
                    out.pop();
                } else {
                    out.push(e);
                }
            }
            e if after_start && blank(Some(&e)) => {}
            e => out.push(e),
        }
    }
    out
}

/// Removes ids from embedded headings and blocks: they belong to the embedded
/// note's own page, and would repeat ids of the page's.
pub(super) fn strip_ids(events: &mut [Event<'_>]) {
    for e in events {
        match e {
            Event::Start(Tag::Heading { id, .. }) => *id = None,
            Event::Html(h) if h.starts_with("<p id=\"^") => *h = CowStr::Borrowed("<p>"),
            Event::Html(h) if h.starts_with("<li id=\"^") => *h = CowStr::Borrowed("<li>"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::render;
    use crate::testing::vault;

    fn page(files: &[(&str, &str)], name: &str, audience: Visibility) -> String {
        let (_d, v) = vault(files);
        render(&v, v.resolve(name).unwrap(), audience).html
    }

    const FREE: &str = "---\nfree: true\n---\n";

    #[test]
    fn a_whole_note_is_embedded_with_a_link_to_its_source() {
        // help.obsidian.md, "Embed files" › "Embed a note in another note":
        // `![[Internal links]]` shows the note's content in place.
        let html = page(
            &[
                (
                    "Home.md",
                    &format!("{FREE}Before.\n\n![[Other]]\n\nAfter.\n"),
                ),
                ("Other.md", &format!("{FREE}# Title\n\nHello **world**.\n")),
            ],
            "home",
            Visibility::Public,
        );
        assert_eq!(
            html,
            "<p>Before.</p>\n<div class=\"embed\"><a class=\"embed-source\" href=\"/other\">Other</a><div class=\"embed-body\">\n<h1>Title</h1>\n<p>Hello <strong>world</strong>.</p>\n</div></div>\n<p>After.</p>\n"
        );
    }

    #[test]
    fn an_embed_inside_a_paragraph_splits_it() {
        let html = page(
            &[
                ("Home.md", "One\n![[Other]]\ntwo ![[Other]] three\n"),
                ("Other.md", "x\n"),
            ],
            "home",
            Visibility::Draft,
        );
        let block = "<div class=\"embed\"><a class=\"embed-source\" href=\"/other\">Other</a><div class=\"embed-body\">\n<p>x</p>\n</div></div>\n";
        assert_eq!(
            html,
            format!("<p>One</p>\n{block}<p>two </p>\n{block}<p> three</p>\n")
        );
    }

    #[test]
    fn a_section_and_a_block_are_embedded_alone() {
        // help.obsidian.md, "Embed files": `![[Note#Heading]]` and `![[Note#^id]]`.
        let other = "# Top\nintro\n## Part Two\ntwo\n### Deeper\nthree\n## Part Three\nfour ^quote-1\n\n- a\n- b ^item-2\n";
        let html = page(
            &[
                ("Home.md", "![[Other#part two]]\n\n![[Other#^quote-1]]\n\n![[Other#^item-2]]\n\n![[Other#Nowhere]]\n"),
                ("Other.md", other),
            ],
            "home",
            Visibility::Draft,
        );
        assert!(
            html.contains("href=\"/other#part-two\">Other › part two</a><div class=\"embed-body\">\n<h2>Part Two</h2>\n<p>two</p>\n<h3>Deeper</h3>\n<p>three</p>\n</div>"),
            "{html}"
        );
        assert!(
            !html.contains("four") || html.contains("<p>four</p>"),
            "{html}"
        );
        assert!(
            html.contains("href=\"/other#%5Equote-1\">Other › ^quote-1</a><div class=\"embed-body\">\n<p>four</p>\n</div>"),
            "{html}"
        );
        assert!(
            html.contains("<div class=\"embed-body\">\n<ul>\n<li>b</li>\n</ul>\n</div>"),
            "{html}"
        );
        assert!(!html.contains("intro"), "{html}");
        assert!(
            html.contains("<p class=\"embed-error embed-missing\">Section not found: <a class=\"wikilink embed-link\" href=\"/other#nowhere\">Other › Nowhere</a></p>"),
            "{html}"
        );
        assert!(!html.contains(" id="), "embedded ids dropped: {html}");
    }

    #[test]
    fn a_block_inside_a_callout_is_embedded_as_its_text() {
        let html = page(
            &[
                ("Home.md", "![[Other#^rule]]\n"),
                (
                    "Other.md",
                    "> [!tip] Watering\n> Deep and\n> infrequent. ^rule\n",
                ),
            ],
            "home",
            Visibility::Draft,
        );
        assert!(
            html.contains("<div class=\"embed-body\">\n<p>Deep and\ninfrequent.</p>\n</div>"),
            "{html}"
        );
    }

    #[test]
    fn embedded_headings_stay_out_of_the_table_of_contents() {
        let (_d, v) = vault(&[
            ("Home.md", "# Mine\n![[Other]]\n"),
            ("Other.md", "# Theirs\n"),
        ]);
        let r = render(&v, v.resolve("home").unwrap(), Visibility::Draft);
        assert_eq!(r.headings.len(), 1, "{:?}", r.headings);
        assert!(r.html.contains("<h1 id=\"mine\">Mine</h1>"), "{}", r.html);
        assert!(r.html.contains("<h1>Theirs</h1>"), "{}", r.html);
    }

    #[test]
    fn private_note_embed_is_exactly_a_missing_note_embed() {
        let home = format!("{FREE}See:\n\n![[Secret]]\n\n![[Secret#Plans]]\n\n![[Secret#^b1]]\n");
        let with = page(
            &[
                ("Home.md", &home),
                ("Secret.md", "# Plans\nthe secret text ^b1\n"),
            ],
            "home",
            Visibility::Public,
        );
        let without = page(&[("Home.md", &home)], "home", Visibility::Public);
        assert_eq!(with, without);
        assert!(!with.contains("secret text"), "{with}");
        assert!(
            with.contains("<span class=\"wikilink broken\">Secret</span>"),
            "{with}"
        );
        // A reader who may see it gets it.
        let signed_in = page(
            &[
                ("Home.md", &home),
                ("Secret.md", "# Plans\nthe secret text ^b1\n"),
            ],
            "home",
            Visibility::Private,
        );
        assert!(signed_in.contains("the secret text"), "{signed_in}");
    }

    #[test]
    fn private_note_embedded_through_a_public_one_never_reaches_a_public_page() {
        let html = page(
            &[
                ("Home.md", &format!("{FREE}![[Middle]]\n")),
                ("Middle.md", &format!("{FREE}middle text\n\n![[Secret]]\n")),
                ("Secret.md", "the secret text\n"),
            ],
            "home",
            Visibility::Public,
        );
        assert!(html.contains("middle text"), "{html}");
        assert!(!html.contains("secret text"), "{html}");
        assert!(
            html.contains("<span class=\"wikilink broken\">Secret</span>"),
            "{html}"
        );
    }

    #[test]
    fn embed_cycle_is_marked_never_followed() {
        let html = page(&[("A.md", "a text\n\n![[A]]\n")], "a", Visibility::Draft);
        assert_eq!(
            html,
            "<p>a text</p>\n<p class=\"embed-error embed-cycle\">↻ embed cycle: <a class=\"wikilink embed-link\" href=\"/a\">A</a></p>\n"
        );
        let html = page(
            &[
                ("A.md", "a text\n\n![[B]]\n"),
                ("B.md", "b text\n\n![[A]]\n"),
            ],
            "a",
            Visibility::Draft,
        );
        assert_eq!(html.matches("a text").count(), 1, "{html}");
        assert_eq!(html.matches("b text").count(), 1, "{html}");
        assert!(html.contains("embed cycle"), "{html}");
    }

    #[test]
    fn embed_depth_is_bounded() {
        let files: Vec<(String, String)> = (0..6)
            .map(|k| (format!("N{k}.md"), format!("text {k}\n\n![[N{}]]\n", k + 1)))
            .collect();
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let html = page(&files, "n0", Visibility::Draft);
        for k in 0..=EMBED_DEPTH_MAX {
            assert!(html.contains(&format!("text {k}")), "{k}: {html}");
        }
        let past = EMBED_DEPTH_MAX + 1;
        assert!(!html.contains(&format!("text {past}")), "{html}");
        assert!(
            html.contains(&format!(
                "<p><a class=\"wikilink embed-link\" href=\"/n{past}\">N{past}</a></p>"
            )),
            "{html}"
        );
        let (_d, v) = vault(&files);
        let deps = embedded_notes(&v, v.resolve("n0").unwrap(), Visibility::Draft);
        let names: Vec<&str> = deps.iter().map(|&i| v.notes()[i].name.as_str()).collect();
        assert_eq!(names, ["N1", "N2", "N3"]);
    }

    #[test]
    fn embed_fan_out_is_bounded_in_bytes_and_count() {
        // Ten embeds of a note holding ten embeds of a 40 KiB note: 100 x 40 KiB
        // unbounded.
        let big = format!("{}\n", "word ".repeat(8 * 1024));
        let ten = |t: &str| (0..10).map(|_| format!("![[{t}]]\n\n")).collect::<String>();
        let html = page(
            &[
                ("Top.md", &ten("Mid")),
                ("Mid.md", &ten("Big")),
                ("Big.md", &big),
            ],
            "top",
            Visibility::Draft,
        );
        assert!(html.len() < EMBED_BYTES_MAX + 64 * 1024, "{}", html.len());
        assert!(html.contains("embed-link"), "the rest are links");
    }

    #[test]
    fn embedded_notes_follow_only_the_part_shown() {
        let (_d, v) = vault(&[
            ("Home.md", "![[Other#One]]\n"),
            ("Other.md", "# One\n![[Shown]]\n# Two\n![[Hidden]]\n"),
            ("Shown.md", "s"),
            ("Hidden.md", "h"),
            ("Secret.md", "x"),
        ]);
        let deps = embedded_notes(&v, v.resolve("home").unwrap(), Visibility::Public);
        assert!(deps.is_empty(), "nothing public: {deps:?}");
        let deps = embedded_notes(&v, v.resolve("home").unwrap(), Visibility::Private);
        let names: Vec<&str> = deps.iter().map(|&i| v.notes()[i].name.as_str()).collect();
        assert_eq!(names, ["Other", "Shown"]);
    }

    #[test]
    fn embeds_in_headings_cells_and_html_stay_links() {
        let html = page(
            &[
                ("Home.md", "# Title ![[Other]]\n\n| a |\n|---|\n| ![[Other]] |\n\n<div>\n![[Other]]\n</div>\n"),
                ("Other.md", "x\n"),
            ],
            "home",
            Visibility::Draft,
        );
        assert!(!html.contains('\u{E000}'), "{html}");
        assert!(!html.contains("embed-body"), "{html}");
        assert_eq!(html.matches("embed-link").count(), 3, "{html}");
    }

    #[test]
    fn a_forged_marker_is_text() {
        let html = page(
            &[("Home.md", "a \u{E000}0\u{E001} b\n")],
            "home",
            Visibility::Draft,
        );
        assert_eq!(html, "<p>a \u{E000}0\u{E001} b</p>\n");
    }

    mod graph {
        use super::*;
        use proptest::prelude::*;

        /// One note: its visibility (0 public, 1 private, 2 draft) and its lines.
        fn note() -> impl Strategy<Value = (u8, Vec<(u8, u8, u8)>)> {
            (
                0u8..3,
                proptest::collection::vec((0u8..4, 0u8..6, 0u8..3), 0..6),
            )
        }

        fn text(k: usize, vis: u8, lines: &[(u8, u8, u8)]) -> String {
            let mut s = match vis {
                0 => "---\nfree: true\n---\n".to_owned(),
                1 => String::new(),
                _ => "---\ndraft: true\n---\n".to_owned(),
            };
            for (j, &(kind, t, sec)) in lines.iter().enumerate() {
                let line = match kind {
                    0 => format!("![[N{t}]]"),
                    1 => format!("![[N{t}#S{sec}]]"),
                    2 => format!("![[N{t}#^b{sec}]]"),
                    _ => format!("## S{sec}"),
                };
                s.push_str(&format!("{line}\n\nbody{k}mark line{j} ^b{}\n\n", j % 3));
            }
            s.push_str(&format!("body{k}mark end\n"));
            s
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Whatever the embed graph, a page shows no text of a note its reader
            /// may not see.
            #[test]
            fn no_hidden_note_text_reaches_a_page_through_embeds(
                notes in proptest::collection::vec(note(), 2..6)
            ) {
                let files: Vec<(String, String)> = notes
                    .iter()
                    .enumerate()
                    .map(|(k, (vis, lines))| (format!("N{k}.md"), text(k, *vis, lines)))
                    .collect();
                let refs: Vec<(&str, &str)> =
                    files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
                let (_d, v) = vault(&refs);
                for audience in [Visibility::Public, Visibility::Private] {
                    for (i, n) in v.notes().iter().enumerate() {
                        if n.visibility() > audience {
                            continue;
                        }
                        let html = render(&v, i, audience).html;
                        let deps = embedded_notes(&v, i, audience);
                        for (j, m) in v.notes().iter().enumerate() {
                            let mark = format!("body{}mark", &m.name[1..]);
                            if m.visibility() > audience {
                                prop_assert!(!html.contains(&mark), "{} shows {}: {}", n.name, m.name, html);
                                prop_assert!(!deps.contains(&j));
                            } else if j != i && html.contains(&mark) {
                                prop_assert!(deps.contains(&j), "{} shows {} undeclared", n.name, m.name);
                            }
                        }
                    }
                }
            }
        }
    }
}
