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
//!   Every embed that reaches its target takes a slot, found or not: a note of
//!   embeds of missing sections costs 64 look-ups, not one per line.
//! - **A target note is parsed once per render**: its substituted markdown and its
//!   index of sections and blocks (`part::Index`) are kept for the render, however
//!   many embeds name it.
//! - Embeds are replaced by markers (a private-use character, this render's random
//!   tag and the embed's number) before the markdown is parsed; only the markers
//!   inside the part that is shown are rendered, and the events are spliced: a
//!   paragraph holding an embed is split around it (a block may not sit in a `<p>`);
//!   where no block may go (a heading, a table cell, a link) the embed is a link.
//!   **No note's text can hold a marker**: the tag is drawn per render (64 random
//!   bits), after the note was written, and a slot is spliced once at most, so a
//!   pasted copy of a marker is text and never repeats an embed.
//! - **The page depends on exactly what it read**: the render keeps a
//!   [`Record`](super::record::Record) of every note it read and every embed it met
//!   (see `record`); the site versions the page by it. There is no second walk.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::base::{self, BaseRef};
use super::canvas_nodes::{self, FileTarget};
use super::pipeline::{to_html_in, Nesting, Rendered};
use super::record::{Outcome, Record};
use super::splice::{marker, markers, Slot, Slots};
use super::wikilinks::Embedded;
use super::{diagram, part, wikilinks};
use crate::canvas::{Node, NodeKind};
use crate::html::escape;
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

/// HTML of the bases shown on one page, at most (a view draws at most 256 KiB).
pub const BASE_BYTES_MAX: usize = 1024 * 1024;

/// Bases run for one page, at most: each may read the whole vault.
pub const BASES_PER_PAGE_MAX: usize = 16;

/// What an embed shows.
#[derive(Debug)]
enum Target {
    /// A note the reader may see.
    Note(usize),
    /// A view of a base (`base`).
    Base(BaseRef),
    /// A canvas, by the name the embed gave (`canvas`).
    Canvas(String),
}

/// An embed of a note the reader may see, or of a base, found in a note's markdown.
#[derive(Debug)]
struct Pending {
    target: Target,
    heading: Option<String>,
    /// The link's text and URL, escaped.
    text: String,
    href: String,
}

/// A note's markdown with its links replaced and its embeds as markers, and its
/// sections and blocks once an embed asks for one.
#[derive(Debug)]
struct Source {
    md: String,
    pending: Vec<Pending>,
    index: OnceCell<part::Index>,
}

impl Source {
    fn select(&self, heading: Option<&str>) -> Option<std::borrow::Cow<'_, str>> {
        match heading {
            None => Some(std::borrow::Cow::Borrowed(&self.md)),
            Some(_) => self
                .index
                .get_or_init(|| part::Index::new(&self.md))
                .select(&self.md, heading),
        }
    }
}

/// One page's render: the notes being rendered (outermost first), what the page
/// has left to spend, the notes read so far, and the record of it all.
#[derive(Debug)]
pub(super) struct Page<'v> {
    vault: &'v Vault,
    audience: Visibility,
    chain: Vec<usize>,
    bytes_left: usize,
    base_bytes_left: usize,
    bases_left: usize,
    embeds_left: usize,
    diagrams: diagram::Budget,
    /// This render's marker tag: random, so no note's text can hold a marker.
    tag: String,
    /// Every note read, substituted once.
    read: HashMap<usize, Rc<Source>>,
    record: Record,
}

impl<'v> Page<'v> {
    /// A page rendered for `audience`.
    pub(super) fn new(vault: &'v Vault, audience: Visibility) -> Page<'v> {
        Page {
            vault,
            audience,
            chain: Vec::new(),
            bytes_left: EMBED_BYTES_MAX,
            base_bytes_left: BASE_BYTES_MAX,
            bases_left: BASES_PER_PAGE_MAX,
            embeds_left: EMBEDS_MAX,
            diagrams: diagram::Budget::default(),
            tag: format!("{:016x}:", rand::random::<u64>()),
            read: HashMap::new(),
            record: Record::new(audience),
        }
    }

    /// Note `i` as the page's own, and what its render read.
    pub(super) fn render_top(mut self, i: usize) -> (Rendered, Record) {
        let src = self.source(i);
        self.chain.push(i);
        let slots = self.expand(&src, &src.md);
        let r = to_html_in(&src.md, &slots, &mut self.diagrams, Nesting::Page);
        (r, self.record)
    }

    /// Note `i`'s markdown substituted, once per render; recorded as read.
    fn source(&mut self, i: usize) -> Rc<Source> {
        if let Some(s) = self.read.get(&i) {
            return Rc::clone(s);
        }
        let v = self.vault;
        self.record.read(v, i);
        let note = &v.notes()[i];
        let mut pending = Vec::new();
        let tag = &self.tag;
        let md = wikilinks::substitute(
            v,
            &note.body,
            &note.links,
            v.targets(i),
            self.audience,
            &mut |l, embedded, text, href| {
                let target = match embedded {
                    Embedded::Note(t) => Target::Note(t),
                    Embedded::Base => Target::Base(BaseRef {
                        source: base::Source::File(l.target.clone()),
                        view: l.heading.clone(),
                    }),
                    Embedded::Canvas => Target::Canvas(l.target.clone()),
                };
                pending.push(Pending {
                    target,
                    heading: l.heading.clone(),
                    text: text.to_owned(),
                    href: href.to_owned(),
                });
                marker(tag, pending.len() - 1)
            },
        );
        let md = base::replace_blocks(&md, &mut |yaml| {
            pending.push(Pending {
                target: Target::Base(BaseRef {
                    source: base::Source::Inline(yaml),
                    view: None,
                }),
                heading: None,
                text: "base".to_owned(),
                href: String::new(),
            });
            marker(tag, pending.len() - 1)
        });
        let src = Rc::new(Source {
            md,
            pending,
            index: OnceCell::new(),
        });
        self.read.insert(i, Rc::clone(&src));
        src
    }

    /// Renders every embed whose marker is in `part` (of `src`), in order.
    fn expand(&mut self, src: &Source, part: &str) -> Slots {
        let mut list: Vec<Option<Slot>> = src.pending.iter().map(|_| None).collect();
        let tag = self.tag.clone();
        for k in markers(part, &tag) {
            if let (Some(p), Some(None)) = (src.pending.get(k), list.get(k)) {
                list[k] = Some(self.embed(p));
            }
        }
        Slots::new(tag, list)
    }

    /// One embed: the part it names rendered, or a mark or a link when a bound or
    /// a cycle stops it; recorded either way.
    fn embed(&mut self, p: &Pending) -> Slot {
        let target = match &p.target {
            Target::Base(r) => return self.embed_base(r, &p.text),
            Target::Canvas(name) => return self.embed_canvas(name, &p.text),
            Target::Note(t) => *t,
        };
        let link = format!(
            "<a class=\"wikilink embed-link\" href=\"{}\">{}</a>",
            p.href, p.text
        );
        let (slot, outcome) = self.embed_part(target, p, link);
        let heading = p.heading.as_deref();
        self.record.embed(self.vault, target, heading, outcome);
        slot
    }

    /// A base's view, run for the page's audience (see `base`), counted as an embed
    /// and its HTML against the page's [`BASE_BYTES_MAX`]; where no block may go, or
    /// past a budget, its name.
    fn embed_base(&mut self, r: &BaseRef, text: &str) -> Slot {
        let name = format!("<span class=\"wikilink base-link\">{text}</span>");
        if self.embeds_left == 0 {
            return Slot::inline(name);
        }
        self.embeds_left -= 1;
        if self.bases_left == 0 {
            let what = format!("Not shown (more than {BASES_PER_PAGE_MAX} bases on the page):");
            return Slot::mark("base-cut", &what, &name);
        }
        self.bases_left -= 1;
        let drawn = base::drawn(self.vault, r, self.audience);
        // Recorded before the budget decides: its size decides too.
        self.record.base(r, drawn.digest);
        if drawn.html.len() > self.base_bytes_left {
            return Slot::mark(
                "base-cut",
                "Not shown (past the page's bases budget):",
                &name,
            );
        }
        self.base_bytes_left -= drawn.html.len();
        Slot::block(format!("{}\n", drawn.html), name)
    }

    /// A canvas (see `canvas`): each node made under this page's audience and
    /// budgets (a text node's markdown counted against the embedded bytes, a file
    /// node embedded as any note is), placed by `canvas::draw`; counted as an embed.
    /// Where no block may go, or past a budget, its name.
    fn embed_canvas(&mut self, name: &str, text: &str) -> Slot {
        let label = format!("<span class=\"wikilink canvas-link\">{text}</span>");
        let Some(file) = self.vault.canvas_file(name).cloned() else {
            return Slot::inline(label);
        };
        if self.chain.len() > EMBED_DEPTH_MAX || self.embeds_left == 0 {
            return Slot::inline(label);
        }
        self.embeds_left -= 1;
        let canvas = match &file.canvas {
            Ok(c) => c,
            Err(e) => {
                let why = escape(&e.to_string());
                let block =
                    format!("<p class=\"canvas-error\">This canvas cannot be shown: {why}.</p>\n");
                return Slot::block(block, label);
            }
        };
        let fp = canvas_nodes::fingerprint(self.vault, canvas, file.stamp, self.audience);
        self.record.canvas(&file.path, fp);
        let content: Vec<String> = canvas.nodes.iter().map(|n| self.canvas_node(n)).collect();
        let title = file.path.rsplit('/').next().unwrap_or(&file.path);
        let title = title.get(..title.len().saturating_sub(7)).unwrap_or(title);
        Slot::block(super::canvas::draw(title, canvas, &content), label)
    }

    /// What one canvas node shows (see `canvas_nodes`).
    fn canvas_node(&mut self, n: &Node) -> String {
        match &n.kind {
            NodeKind::Text(t) if t.len() > self.bytes_left => {
                "<p class=\"canvas-note\">(Past the page&#x27;s budget.)</p>".to_owned()
            }
            NodeKind::Text(t) => {
                self.bytes_left -= t.len();
                canvas_nodes::text_html(self.vault, t, self.audience, &mut self.diagrams)
            }
            NodeKind::Link(url) => canvas_nodes::link_html(url),
            NodeKind::Group { .. } => String::new(),
            NodeKind::File { file, subpath } => {
                match canvas_nodes::file_target(self.vault, file, self.audience) {
                    FileTarget::Note(i) => {
                        let note = &self.vault.notes()[i];
                        let mut href = note.url.clone();
                        if let Some(s) = subpath {
                            href.push('#');
                            href.push_str(&crate::links::fragment(s));
                        }
                        let p = Pending {
                            target: Target::Note(i),
                            heading: subpath.clone(),
                            text: escape(note.title()),
                            href: escape(&super::url::url_path(&href)),
                        };
                        self.embed(&p).into_block()
                    }
                    FileTarget::File(rel, v) => canvas_nodes::file_html(rel, v),
                    FileTarget::Nothing => wikilinks::broken(&escape(file)),
                }
            }
        }
    }

    fn embed_part(&mut self, target: usize, p: &Pending, link: String) -> (Slot, Outcome) {
        if self.chain.contains(&target) {
            return (
                Slot::mark("embed-cycle", "↻ embed cycle:", &link),
                Outcome::Cycle,
            );
        }
        if self.chain.len() > EMBED_DEPTH_MAX || self.embeds_left == 0 {
            return (Slot::inline(link), Outcome::Budget);
        }
        // Every embed that reaches its target takes a slot, found or not.
        self.embeds_left -= 1;
        let src = self.source(target);
        let Some(part) = src.select(p.heading.as_deref()) else {
            return (
                Slot::mark("embed-missing", "Section not found:", &link),
                Outcome::Missing,
            );
        };
        if part.len() > self.bytes_left {
            return (Slot::inline(link), Outcome::Budget);
        }
        self.chain.push(target);
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
            return (Slot::inline(link), Outcome::Budget);
        }
        self.bytes_left -= cost;
        (Slot::block(block, link), Outcome::Shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::record::Outcome;
    use crate::render::render;
    use crate::testing::vault;

    fn page(files: &[(&str, &str)], name: &str, audience: Visibility) -> String {
        let (_d, v) = vault(files);
        render(&v, v.resolve(name).unwrap(), audience).html
    }

    const FREE: &str = "---\nfree: true\n---\n";

    /// The vault paths the render of `name`'s page read.
    fn read(v: &Vault, name: &str, audience: Visibility) -> Vec<String> {
        let (_, rec) = crate::render::render_recorded(v, v.resolve(name).unwrap(), audience);
        rec.notes().map(str::to_owned).collect()
    }

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
        assert_eq!(
            read(&v, "n0", Visibility::Draft),
            ["N0.md", "N1.md", "N2.md", "N3.md"]
        );
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
    fn the_record_holds_only_the_part_shown() {
        let (_d, v) = vault(&[
            ("Home.md", "![[Other#One]]\n"),
            ("Other.md", "# One\n![[Shown]]\n# Two\n![[Hidden]]\n"),
            ("Shown.md", "s"),
            ("Hidden.md", "h"),
            ("Secret.md", "x"),
        ]);
        assert_eq!(
            read(&v, "home", Visibility::Public),
            ["Home.md"],
            "nothing public"
        );
        assert_eq!(
            read(&v, "home", Visibility::Private),
            ["Home.md", "Other.md", "Shown.md"]
        );
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

    #[test]
    fn a_pasted_marker_never_repeats_an_embed() {
        // 29.3: copies of an embed's marker pasted into the note repeated the embed
        // once per copy (16 KB of them: a 907 MB page).
        let pasted: String = (0..2000)
            .map(|k| match k % 3 {
                0 => "\u{E000}0\u{E001}".to_owned(),
                1 => "\u{E000}0000000000000000:0\u{E001}".to_owned(),
                _ => "&#xE000;0&#xE001;".to_owned(),
            })
            .collect();
        let html = page(
            &[
                (
                    "Home.md",
                    &format!("![[Other]]\n\n{pasted}\n\n![[Other]]\n"),
                ),
                ("Other.md", "the-embedded-text\n"),
            ],
            "home",
            Visibility::Draft,
        );
        assert_eq!(
            html.matches("the-embedded-text").count(),
            2,
            "the two real embeds only"
        );
        assert!(html.len() < 64 * 1024, "{}", html.len());
    }

    #[test]
    fn embeds_of_missing_sections_take_a_slot_and_parse_the_note_once() {
        // 29.5: each embed of a missing section re-parsed the whole target note and
        // took no slot (a 70 KB note of them: 35 s per reload).
        let big = "# Real\n".to_owned() + &"text ^b1\n\n".repeat(2000);
        let lines: String = (0..500)
            .map(|k| format!("![[Big#nowhere-{k}]] ![[Big#^none{k}]]\n"))
            .collect();
        let (_d, v) = vault(&[("Home.md", &lines), ("Big.md", &big)]);
        super::part::PARSES.with(|c| c.set(0));
        let (r, rec) =
            crate::render::render_recorded(&v, v.resolve("home").unwrap(), Visibility::Draft);
        assert_eq!(
            super::part::PARSES.with(std::cell::Cell::get),
            1,
            "parsed once"
        );
        let missing = rec
            .embeds()
            .iter()
            .filter(|e| e.outcome == Outcome::Missing)
            .count();
        assert_eq!(missing, EMBEDS_MAX, "each took a slot");
        assert_eq!(rec.embeds().len() + rec.embeds_unlisted(), 1000);
        assert_eq!(r.html.matches("Section not found").count(), EMBEDS_MAX);
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
                        let (r, rec) = crate::render::render_recorded(&v, i, audience);
                        let html = r.html;
                        let deps: Vec<&str> = rec.notes().collect();
                        for m in v.notes() {
                            let mark = format!("body{}mark", &m.name[1..]);
                            if m.visibility() > audience {
                                prop_assert!(!html.contains(&mark), "{} shows {}: {}", n.name, m.name, html);
                                prop_assert!(!deps.contains(&m.path.as_str()) || m.path == n.path);
                            } else if html.contains(&mark) {
                                prop_assert!(deps.contains(&m.path.as_str()), "{} shows {} unrecorded", n.name, m.name);
                            }
                        }
                    }
                }
            }
        }
    }
}
