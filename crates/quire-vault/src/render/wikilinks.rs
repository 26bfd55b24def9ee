//! Wikilinks and embeds, replaced by inline HTML in the markdown before it is parsed.
//!
//! Key decisions:
//! - **A link to a note the reader may not see renders as plain text**, exactly like a
//!   broken link: neither its page nor whether it exists leaks (a private note never
//!   appears to an anonymous reader, not even as a link target).
//! - Every name and label is HTML-escaped; the note's own markdown (raw HTML
//!   included) is the author's.
//! - **What a link shows is read from the vault in one place** (`seen`), and
//!   [`observe`] hashes exactly that for a page's version (`record`): a hidden and a
//!   missing target are the same observation, so creating or deleting a note the
//!   reader may not see changes neither the page nor its version.

use xxhash_rust::xxh3::Xxh3;

use super::url::{attachment_url, url_path};
use crate::html::escape;
use crate::links::{self, WikiLink};
use crate::note::Visibility;
use crate::vault::Vault;

/// Extensions to a path that render as images when embedded.
const IMAGE_EXTS: [&str; 7] = ["png", "jpg", "jpeg", "gif", "svg", "webp", "avif"];

/// What an embed shows: a note the reader may see, or a `.base` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Embedded {
    Note(usize),
    Base,
    Canvas,
}

/// What an embed of a note the reader may see, or of a base, becomes: `(link,
/// target, text, href)` to the markdown put in its place (`embed` hands back a
/// marker). A base has no page: its `href` is empty.
pub(super) type EmbedHook<'h> = dyn FnMut(&WikiLink, Embedded, &str, &str) -> String + 'h;

/// The markdown with every wikilink replaced by inline HTML (an embedded note by
/// what `embed` makes of it) and every comment removed.
pub(super) fn substitute(
    vault: &Vault,
    body: &str,
    links: &[WikiLink],
    targets: &[Option<usize>],
    audience: Visibility,
    embed: &mut EmbedHook<'_>,
) -> String {
    super::comments::rewrite(body, links, |i, l| {
        link_html(vault, l, targets.get(i).copied().flatten(), audience, embed)
    })
}

/// What a link reads from the vault: an attached file, a fragment of the page
/// itself, a note the reader may see, or nothing (missing and hidden alike).
pub(super) enum Seen<'v> {
    File(&'v str, u64),
    /// A `.base` file, by its vault path.
    Base(&'v str),
    /// A `.canvas` file, by its vault path and stamp.
    Canvas(&'v str, u64),
    Here,
    Note(usize),
    Nothing,
}

/// What link `l` (resolved by the vault to `t`) shows to `audience`.
pub(super) fn seen<'v>(
    vault: &'v Vault,
    l: &WikiLink,
    t: Option<usize>,
    audience: Visibility,
) -> Seen<'v> {
    if l.embed {
        if let (Some(rel), Some(v)) = (
            vault.attachment(&l.target),
            vault.attachment_version(&l.target),
        ) {
            return Seen::File(rel, v);
        }
        if crate::canvas::is_canvas(&l.target) {
            return match vault.canvas_file(&l.target) {
                Some(c) => Seen::Canvas(&c.path, c.stamp),
                None => Seen::Nothing,
            };
        }
        if crate::base_files::is_base(&l.target) {
            return match vault.base_file(&l.target) {
                Some(b) => Seen::Base(&b.path),
                None => Seen::Nothing,
            };
        }
    }
    if l.target.is_empty() && l.heading.is_some() {
        return Seen::Here;
    }
    // Embeds are not resolved with the links (they are no backlinks): resolved here.
    let t = t.or_else(|| l.embed.then(|| vault.resolve(&l.target)).flatten());
    match t.filter(|&t| vault.notes()[t].visibility() <= audience) {
        Some(t) => Seen::Note(t),
        None => Seen::Nothing,
    }
}

/// Hashes into `h` what every link of note `i` shows to `audience` (see `seen`):
/// with the note's own bytes, everything its substituted markdown depends on.
pub(super) fn observe(vault: &Vault, i: usize, audience: Visibility, h: &mut Xxh3) {
    observe_links(
        vault,
        &vault.notes()[i].links,
        vault.targets(i),
        audience,
        h,
    );
}

/// Hashes into `h` what each of `links` (resolved to `targets`) shows to `audience`.
pub(super) fn observe_links(
    vault: &Vault,
    links: &[WikiLink],
    targets: &[Option<usize>],
    audience: Visibility,
    h: &mut Xxh3,
) {
    for (k, l) in links.iter().enumerate() {
        match seen(vault, l, targets.get(k).copied().flatten(), audience) {
            Seen::File(rel, v) => {
                h.update(b"f");
                h.update(rel.as_bytes());
                h.update(&v.to_le_bytes());
            }
            Seen::Base(rel) => {
                h.update(b"b");
                h.update(rel.as_bytes());
            }
            Seen::Canvas(rel, stamp) => {
                h.update(b"c");
                h.update(rel.as_bytes());
                h.update(&stamp.to_le_bytes());
            }
            Seen::Here => h.update(b"h"),
            Seen::Note(t) => {
                h.update(b"n");
                h.update(vault.notes()[t].url.as_bytes());
            }
            Seen::Nothing => h.update(b"-"),
        }
        h.update(&[0]);
    }
}

/// One link's HTML: an image or attachment for an embedded file, else a link to the
/// target (and fragment) when `audience` may see it (for an embedded note, what
/// `embed` makes of it), else plain text.
fn link_html(
    vault: &Vault,
    l: &WikiLink,
    t: Option<usize>,
    audience: Visibility,
    embed: &mut EmbedHook<'_>,
) -> String {
    let text = escape(&l.text());
    let fragment = l.heading.as_deref().map(links::fragment);
    match seen(vault, l, t, audience) {
        Seen::File(rel, v) => attachment_html(rel, v, l, &text),
        Seen::Base(_) => embed(l, Embedded::Base, &text, ""),
        Seen::Canvas(..) => embed(l, Embedded::Canvas, &text, ""),
        Seen::Here => {
            let href = url_path(&format!("#{}", fragment.unwrap_or_default()));
            format!(
                "<a class=\"wikilink\" href=\"{}\">{text}</a>",
                escape(&href)
            )
        }
        Seen::Note(t) => {
            let mut href = vault.notes()[t].url.clone();
            if let Some(f) = fragment {
                href.push('#');
                href.push_str(&f);
            }
            let href = escape(&url_path(&href));
            if l.embed {
                return embed(l, Embedded::Note(t), &text, &href);
            }
            format!("<a class=\"wikilink\" href=\"{href}\">{text}</a>")
        }
        // The same for a note that does not exist and one the reader may not see.
        Seen::Nothing => broken(&text),
    }
}

/// A link or embed whose target is missing or hidden: its text, marked broken.
pub(super) fn broken(text: &str) -> String {
    format!("<span class=\"wikilink broken\">{text}</span>")
}

/// Whether the file at `rel` is shown as an image when embedded.
pub(super) fn is_image(rel: &str) -> bool {
    let ext = rel.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    IMAGE_EXTS.contains(&ext.as_str())
}

/// An embedded attachment at vault path `rel`, version `v`: an image, else a link
/// to the file.
fn attachment_html(rel: &str, v: u64, l: &WikiLink, text: &str) -> String {
    // Addressed by file name (what embeds name) and versioned, so the site can serve
    // it as immutable.
    let name = rel.rsplit('/').next().unwrap_or(rel).to_lowercase();
    let src = format!("{}?v={v:016x}", attachment_url(&name));
    if is_image(rel) {
        format!(
            "<img src=\"{}\" alt=\"{}\" loading=\"lazy\">",
            escape(&src),
            escape(l.label.as_deref().unwrap_or(&l.target))
        )
    } else {
        format!(
            "<a class=\"attachment\" href=\"{}\">{text}</a>",
            escape(&src)
        )
    }
}
