//! Markdown to HTML: CommonMark with tables, footnotes, task lists and strikethrough,
//! plus what Obsidian adds, each in its own module:
//!
//! - `wikilinks`: `[[links]]` and `![[embeds]]`, resolved against the vault.
//! - `embed`: `![[Note]]`, `![[Note#Heading]]`, `![[Note#^block]]` transcluded;
//!   `part` finds the section or block an embed names; `splice` puts rendered
//!   embeds where their markers are; `record` keeps what a render read, which is
//!   the page's dependency set and version; `base`: `![[X.base]]` and
//!   ```` ```base ```` blocks run for the page's audience; `canvas` and
//!   `canvas_nodes`: `![[X.canvas]]` drawn, each node made for the audience.
//! - `pipeline`: markdown to HTML through every pass below, in order; `events`: the
//!   parser's options and event helpers; `url`: paths in links and attachments.
//! - `headings`: unique ids on headings, for the table of contents and links.
//! - `code`: highlighted fenced code.
//! - `diagram`: ` ```mermaid ` flowcharts and sequence diagrams drawn as SVG.
//! - `callout`: Obsidian's callouts, foldable ones as `<details>`.
//! - `comments`: `%%comments%%`, removed before anything else sees the text.
//! - `tags`: `#inline/tags` linked to their tag pages.
//! - `mark`: `==highlights==`.
//! - `blockref`: `^block-ids` on paragraphs and list items.
//! - `math`: `$inline$` and `$$display$$` math to MathML.
//! - `sanitize`: the allow-list that markup from other crates is rebuilt through.
//! - `prose`: which text inline constructs may be found in.
//! - `budget`: what one page's render may spend, and which bound it reached.
//!
//! Key decisions:
//! - **A link to a note the reader may not see renders as plain text**, exactly like a
//!   broken link: neither its page nor whether it exists leaks.
//! - Everything taken from the note that is not the author's markdown (names, labels,
//!   titles, formulas, diagram text) is HTML-escaped; the author's markdown, raw HTML
//!   included, is the author's.
//! - Wikilinks are replaced by inline HTML before parsing; every other construct is a
//!   pass over pulldown-cmark's events, in a fixed order (`pipeline`).
//! - **Imports point down**: this file is the face (`render*`); `embed` drives a
//!   page's render and calls `pipeline`, which calls the passes; no pass imports the
//!   pipeline, the driver or this file.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub use crate::html::escape;
use crate::note::Visibility;
use crate::vault::Vault;

mod base;
mod blockref;
pub mod budget;
mod callout;
mod canvas;
mod canvas_nodes;
mod code;
pub(crate) mod comments;
mod diagram;
mod embed;
mod events;
mod headings;
mod mark;
mod markdown;
mod math;
mod part;
mod pipeline;
mod prose;
mod record;
mod sanitize;
mod splice;
mod tags;
mod url;
mod wikilinks;

pub use base::{BaseMemo, BaseRef, Source as BaseSource};
pub use embed::{BASES_PER_PAGE_MAX, BASE_BYTES_MAX, EMBED_BYTES_MAX, EMBED_DEPTH_MAX};
pub use markdown::markdown;
#[cfg(test)]
use pipeline::to_html;
pub use pipeline::Rendered;
pub use record::{Embed, Outcome, Record};
pub(crate) use tags::inline_tags;
pub use tags::tag_url;
pub use url::attachment_url;

/// Renders note `i` of `vault` for a reader allowed up to `audience`, with the notes
/// it embeds transcluded (see `embed`).
pub fn render(vault: &Vault, i: usize, audience: Visibility) -> Rendered {
    render_recorded(vault, i, audience).0
}

/// [`render`], with the record of everything it read: the page's dependencies and
/// version (see `record`).
pub fn render_recorded(vault: &Vault, i: usize, audience: Visibility) -> (Rendered, Record) {
    embed::Page::new(vault, audience).render_top(i)
}

/// Note `i` of `vault` rendered for `audience` under the render budgets
/// ([`budget`]): what it reached is logged once per note and bound, and a raised
/// `cancel` (its client left) stops it early with a body nobody will see. A note
/// whose markdown alone is over the page budget is not rendered.
pub fn render_bounded(
    vault: &Vault,
    i: usize,
    audience: Visibility,
    cancel: Option<Arc<AtomicBool>>,
) -> (Rendered, budget::Spent) {
    let (r, spent) = render_metered(vault, i, audience, budget::limits(), cancel);
    budget::log_once(&vault.notes()[i].path, &spent);
    (r, spent)
}

/// [`render_bounded`] under `limits`, unlogged.
fn render_metered(
    vault: &Vault,
    i: usize,
    audience: Visibility,
    limits: budget::Limits,
    cancel: Option<Arc<AtomicBool>>,
) -> (Rendered, budget::Spent) {
    budget::metered(limits, cancel, || {
        if vault.notes()[i].body.len() > limits.page_bytes_max {
            budget::reach(budget::Bound::PageBytes);
            return Rendered {
                html: budget::page_notice(limits.page_bytes_max),
                headings: Vec::new(),
            };
        }
        render(vault, i, audience)
    })
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

    #[test]
    fn heading_links_resolve_case_insensitively_and_block_refs_reach_their_block() {
        // help.obsidian.md, "Internal links": `[[Note#Heading]]`, nested
        // `[[Note#Heading#Subheading]]`, and `[[Note#^block-id]]`.
        let (_d, v) = vault(&[
            ("Home.md", "[[Other#PART two]] [[Other#Part Two#sub SECTION]] [[Other#^quote-1]] [[#^here]]\n\nA paragraph. ^here\n"),
            ("Other.md", "## Part Two\n### Sub Section\nA quote. ^quote-1\n"),
        ]);
        let home = render(&v, v.resolve("home").unwrap(), Visibility::Draft).html;
        assert!(
            home.contains("href=\"/other#part-two\">Other › PART two</a>"),
            "{home}"
        );
        assert!(
            home.contains("href=\"/other#sub-section\">Other › Part Two › sub SECTION</a>"),
            "{home}"
        );
        assert!(
            home.contains("href=\"/other#%5Equote-1\">Other › ^quote-1</a>"),
            "{home}"
        );
        assert!(home.contains("href=\"#%5Ehere\""), "{home}");
        assert!(home.contains("<p id=\"^here\">A paragraph.</p>"), "{home}");
        let other = render(&v, v.resolve("other").unwrap(), Visibility::Draft);
        assert!(
            other.html.contains("<h2 id=\"part-two\">")
                && other.html.contains("<h3 id=\"sub-section\">")
        );
        assert!(
            other.html.contains("<p id=\"^quote-1\">A quote.</p>"),
            "{}",
            other.html
        );
    }

    #[test]
    fn comments_never_reach_the_html() {
        let (_d, v) = vault(&[
            ("Home.md", "---\nfree: true\n---\nShown %%inline secret%% text.\n\n%%\n# Secret heading\n[[Public]] and private plans\n%%\nEnd. %%unclosed secret\n"),
            ("Public.md", "---\nfree: true\n---\nx"),
        ]);
        let home = v.resolve("home").unwrap();
        let r = render(&v, home, Visibility::Draft);
        assert!(
            !r.html.contains("secret") && !r.html.contains("Secret"),
            "{}",
            r.html
        );
        assert!(
            !r.html.contains("/public") && !r.html.contains("plans"),
            "{}",
            r.html
        );
        assert!(
            r.html.contains("Shown") && r.html.contains("End."),
            "{}",
            r.html
        );
        assert!(r.headings.is_empty());
        assert!(v.backlinks(v.resolve("public").unwrap()).is_empty());
    }

    #[test]
    fn inline_tags_join_the_notes_tags() {
        let (_d, v) = vault(&[(
            "N.md",
            "---\ntags: [garden]\n---\n#Garden #garden/irrigation `#code`\n",
        )]);
        assert_eq!(v.notes()[0].front.tags, ["garden", "garden/irrigation"]);
        let html = render(&v, 0, Visibility::Draft).html;
        assert!(
            html.contains(
                "<a class=\"tag\" href=\"/tags/garden-irrigation\">#garden/irrigation</a>"
            ),
            "{html}"
        );
    }
}
