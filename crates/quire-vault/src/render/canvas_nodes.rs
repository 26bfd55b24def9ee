//! What a canvas's nodes show to a page's audience, and what of the vault that
//! depends on: a text node is markdown, its wikilinks resolved as a note's are (a
//! note the reader may not see is plain text; an embed inside a text node is a
//! link, not transcluded); a file node is a note (embedded by the page's render,
//! under its budgets: `embed`) or an attachment; a link node is a link, and only an
//! `http(s)` URL is one.
//!
//! [`fingerprint`] hashes everything of the vault a canvas's drawing reads besides
//! the notes it embeds (which the page's record keeps as any embed): the file's stamp
//! and what each link of each text node and each file node shows to the audience.
//! A page's record keeps it, so a note a text node links to made private re-renders
//! the page (see `record`).

use xxhash_rust::xxh3::Xxh3;

use super::diagram;
use super::pipeline::{to_html_in, Nesting};
use super::splice::Slots;
use super::url::attachment_url;
use super::wikilinks::{self, Embedded};
use crate::canvas::{Canvas, NodeKind};
use crate::html::escape;
use crate::links::{self, WikiLink};
use crate::note::Visibility;
use crate::vault::Vault;

/// What a file node names, as the audience sees it.
pub(super) enum FileTarget<'v> {
    /// A note the audience may read.
    Note(usize),
    /// An attachment: its vault path and version.
    File(&'v str, u64),
    /// Nothing (missing or hidden alike).
    Nothing,
}

/// The file node's target: a note by its vault path (`.md`), else an attachment by
/// file name.
pub(super) fn file_target<'v>(
    vault: &'v Vault,
    file: &str,
    audience: Visibility,
) -> FileTarget<'v> {
    if file.to_ascii_lowercase().ends_with(".md") {
        let found = vault
            .notes()
            .binary_search_by(|n| n.path.as_str().cmp(file))
            .ok()
            .filter(|&i| vault.notes()[i].visibility() <= audience);
        return found.map_or(FileTarget::Nothing, FileTarget::Note);
    }
    let name = file.rsplit('/').next().unwrap_or(file);
    match (vault.attachment(name), vault.attachment_version(name)) {
        (Some(rel), Some(v)) => FileTarget::File(rel, v),
        _ => FileTarget::Nothing,
    }
}

/// A text node's wikilinks and their targets, resolved as the vault resolves a
/// note's (embeds are resolved when seen).
fn text_links(vault: &Vault, text: &str) -> (Vec<WikiLink>, Vec<Option<usize>>) {
    let links = links::extract(text);
    let targets = links
        .iter()
        .map(|l| {
            if l.embed || l.target.is_empty() {
                None
            } else {
                vault.resolve(&l.target)
            }
        })
        .collect();
    (links, targets)
}

/// A text node's markdown as HTML for `audience`.
pub(super) fn text_html(
    vault: &Vault,
    text: &str,
    audience: Visibility,
    diagrams: &mut diagram::Budget,
) -> String {
    let (links, targets) = text_links(vault, text);
    let md = wikilinks::substitute(
        vault,
        text,
        &links,
        &targets,
        audience,
        &mut |_, e, t, href| match e {
            Embedded::Note(_) => {
                format!("<a class=\"wikilink embed-link\" href=\"{href}\">{t}</a>")
            }
            Embedded::Base | Embedded::Canvas => format!("<span class=\"wikilink\">{t}</span>"),
        },
    );
    to_html_in(&md, &Slots::default(), diagrams, Nesting::Embedded).html
}

/// A link node: an `http(s)` URL as a link, anything else as text.
pub(super) fn link_html(url: &str) -> String {
    let lower = url.trim().to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        format!(
            "<a class=\"canvas-url\" href=\"{0}\" rel=\"nofollow noopener\">{0}</a>",
            escape(url.trim())
        )
    } else {
        format!("<p>{}</p>", escape(url))
    }
}

/// An attachment as a file node shows it: an image, else a link.
pub(super) fn file_html(rel: &str, v: u64) -> String {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let src = format!("{}?v={v:016x}", attachment_url(&name.to_lowercase()));
    if wikilinks::is_image(rel) {
        format!(
            "<img src=\"{}\" alt=\"{}\" loading=\"lazy\">",
            escape(&src),
            escape(name)
        )
    } else {
        format!(
            "<a class=\"attachment\" href=\"{}\">{}</a>",
            escape(&src),
            escape(name)
        )
    }
}

/// Everything of `vault` the drawing of `canvas` (the file stamped `stamp`) reads for
/// `audience`, besides the notes it embeds (see the module doc).
pub(super) fn fingerprint(vault: &Vault, canvas: &Canvas, stamp: u64, audience: Visibility) -> u64 {
    let mut h = Xxh3::new();
    h.update(&stamp.to_le_bytes());
    for n in &canvas.nodes {
        match &n.kind {
            NodeKind::Text(text) => {
                let (links, targets) = text_links(vault, text);
                wikilinks::observe_links(vault, &links, &targets, audience, &mut h);
            }
            NodeKind::File { file, .. } => match file_target(vault, file, audience) {
                FileTarget::Note(i) => {
                    h.update(b"n");
                    h.update(vault.notes()[i].url.as_bytes());
                }
                FileTarget::File(rel, v) => {
                    h.update(b"f");
                    h.update(rel.as_bytes());
                    h.update(&v.to_le_bytes());
                }
                FileTarget::Nothing => h.update(b"-"),
            },
            NodeKind::Link(_) | NodeKind::Group { .. } => {}
        }
        h.update(&[0]);
    }
    h.digest()
}

#[cfg(test)]
mod tests {
    use crate::render::{render, render_recorded};
    use crate::testing::vault;
    use crate::vault::Vault;
    use crate::Visibility;

    const PLAN: &str = r##"{"nodes":[
        {"id":"t","type":"text","text":"See [[Secret]] and [[Open]].\n\n**bold**","x":0,"y":0,"width":300,"height":120,"color":"3"},
        {"id":"o","type":"file","file":"Notes/Open.md","x":400,"y":0,"width":300,"height":200},
        {"id":"s","type":"file","file":"Secret.md","x":0,"y":300,"width":300,"height":200},
        {"id":"i","type":"file","file":"att/pic.svg","x":400,"y":300,"width":100,"height":100},
        {"id":"j","type":"link","url":"javascript:alert(1)","x":800,"y":0,"width":100,"height":50},
        {"id":"w","type":"link","url":"https://jsoncanvas.org/","x":800,"y":100,"width":100,"height":50}
    ],"edges":[{"id":"e","fromNode":"t","toNode":"o","label":"leads to"}]}"##;

    fn files(secret_free: bool) -> Vec<(&'static str, String)> {
        let free = "---\nfree: true\n---\n";
        vec![
            ("Home.md", format!("{free}# Plan\n\n![[Plan.canvas]]\n")),
            ("Plan.canvas", PLAN.to_owned()),
            ("Notes/Open.md", format!("{free}open-text\n")),
            (
                "Secret.md",
                format!("{}secret-text\n", if secret_free { free } else { "" }),
            ),
            ("att/pic.svg", "<svg/>".to_owned()),
        ]
    }

    fn load(files: &[(&'static str, String)]) -> (tempfile::TempDir, Vault) {
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
        vault(&refs)
    }

    #[test]
    fn a_canvas_shows_its_reader_only_what_they_may_read() {
        let (_d, v) = load(&files(false));
        let home = v.resolve("home").unwrap();
        let public = render(&v, home, Visibility::Public).html;
        assert!(
            public.contains("<figure class=\"canvas\" aria-label=\"Canvas: Plan\">"),
            "{public}"
        );
        assert!(public.contains("<strong>bold</strong>"), "{public}");
        assert!(public.contains("open-text"), "{public}");
        assert!(
            public.contains("<a class=\"wikilink\" href=\"/notes/open\">Open</a>"),
            "{public}"
        );
        assert!(!public.contains("secret-text"), "{public}");
        assert!(!public.contains("/secret"), "{public}");
        assert!(
            public.contains("<span class=\"wikilink broken\">Secret</span>"),
            "{public}"
        );
        assert!(
            public.contains("<img src=\"/attachments/pic.svg?v="),
            "{public}"
        );
        assert!(!public.contains("href=\"javascript"), "{public}");
        assert!(
            public.contains("href=\"https://jsoncanvas.org/\" rel=\"nofollow noopener\""),
            "{public}"
        );
        assert!(public.contains(">leads to</span>"), "{public}");
        let private = render(&v, home, Visibility::Private).html;
        assert!(private.contains("secret-text"), "{private}");
    }

    #[test]
    fn a_note_a_canvas_links_to_made_public_re_renders_the_page() {
        let (d, v) = load(&files(false));
        let home = v.resolve("home").unwrap();
        let (_, rec) = render_recorded(&v, home, Visibility::Public);
        assert!(rec.holds(&v));
        std::fs::write(
            d.path().join("Secret.md"),
            "---\nfree: true\n---\nsecret-text\n",
        )
        .unwrap();
        let v2 = Vault::reload(d.path(), &v).unwrap();
        assert!(
            !rec.holds(&v2),
            "the text node's link and the file node now show it"
        );
        // The canvas edited: its stamp is in the embedding note's fingerprint.
        let (_, rec2) = render_recorded(&v2, home, Visibility::Public);
        std::thread::sleep(std::time::Duration::from_millis(5));
        std::fs::write(
            d.path().join("Plan.canvas"),
            PLAN.replace("leads to", "goes to"),
        )
        .unwrap();
        let v3 = Vault::reload(d.path(), &v2).unwrap();
        assert!(!rec2.holds(&v3));
    }

    #[test]
    fn a_canvas_is_never_an_attachment_and_a_bad_one_says_why() {
        let mut f = files(false);
        f[1].1 = "{not json".to_owned();
        let (_d, v) = load(&f);
        assert!(v.attachment("Plan.canvas").is_none());
        let html = render(&v, v.resolve("home").unwrap(), Visibility::Public).html;
        assert!(
            html.contains("This canvas cannot be shown: not a JSON Canvas file"),
            "{html}"
        );
    }
}

#[cfg(test)]
mod bound_tests {
    use crate::vault::{Vault, DATA_FILES_BYTES_MAX};

    /// A vault of many large canvases: past the vault's bound for such files, the
    /// rest are not read, and say why.
    #[test]
    fn a_vault_reads_a_bounded_sum_of_canvas_and_base_files() {
        let dir = tempfile::tempdir().unwrap();
        let size = crate::canvas::CANVAS_FILE_BYTES_MAX as usize - 64;
        let padded = format!("{{\"nodes\":[]{}}}", " ".repeat(size - 13));
        let files = DATA_FILES_BYTES_MAX as usize / size + 2;
        for k in 0..files {
            std::fs::write(dir.path().join(format!("C{k:03}.canvas")), &padded).unwrap();
        }
        let v = Vault::load(dir.path()).unwrap();
        let refused = (0..files)
            .filter(|k| {
                let c = v.canvas_file(&format!("C{k:03}.canvas")).unwrap();
                matches!(&c.canvas, Err(e) if e.to_string().contains(".canvas files in the vault"))
            })
            .count();
        assert!(
            refused >= 1 && refused < files,
            "{refused} of {files} refused"
        );
    }
}
