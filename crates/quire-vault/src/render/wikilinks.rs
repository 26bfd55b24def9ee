//! Wikilinks and embeds, replaced by inline HTML in the markdown before it is parsed.
//!
//! Key decisions:
//! - **A link to a note the reader may not see renders as plain text**, exactly like a
//!   broken link: neither its page nor whether it exists leaks (a private note never
//!   appears to an anonymous reader, not even as a link target).
//! - Every name and label is HTML-escaped; the note's own markdown (raw HTML
//!   included) is the author's.

use super::{attachment_url, escape, url_path};
use crate::links::{self, WikiLink};
use crate::note::Visibility;
use crate::vault::Vault;

/// Extensions to a path that render as images when embedded.
const IMAGE_EXTS: [&str; 7] = ["png", "jpg", "jpeg", "gif", "svg", "webp", "avif"];

/// What an embed of a note the reader may see becomes: `(link, target, text, href)`
/// to the markdown put in its place (`embed` hands back a marker).
pub(super) type EmbedHook<'h> = dyn FnMut(&WikiLink, usize, &str, &str) -> String + 'h;

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
    if l.embed {
        if let Some(html) = attachment_html(vault, l, &text) {
            return html;
        }
    }
    let fragment = l.heading.as_deref().map(links::fragment);
    if l.target.is_empty() {
        if let Some(f) = fragment {
            let href = url_path(&format!("#{f}"));
            return format!(
                "<a class=\"wikilink\" href=\"{}\">{text}</a>",
                escape(&href)
            );
        }
    }
    // Embeds are not resolved with the links (they are no backlinks): resolved here.
    let t = t.or_else(|| l.embed.then(|| vault.resolve(&l.target)).flatten());
    match t.filter(|&t| vault.notes()[t].visibility() <= audience) {
        Some(t) => {
            let mut href = vault.notes()[t].url.clone();
            if let Some(f) = fragment {
                href.push('#');
                href.push_str(&f);
            }
            let href = escape(&url_path(&href));
            if l.embed {
                return embed(l, t, &text, &href);
            }
            format!("<a class=\"wikilink\" href=\"{href}\">{text}</a>")
        }
        // The same for a note that does not exist and one the reader may not see.
        None => broken(&text),
    }
}

/// A link or embed whose target is missing or hidden: its text, marked broken.
pub(super) fn broken(text: &str) -> String {
    format!("<span class=\"wikilink broken\">{text}</span>")
}

/// An embedded attachment: an image, else a link to the file. `None` when the vault
/// has no such attachment.
fn attachment_html(vault: &Vault, l: &WikiLink, text: &str) -> Option<String> {
    let rel = vault.attachment(&l.target)?;
    let v = vault.attachment_version(&l.target)?;
    // Addressed by file name (what embeds name) and versioned, so the site can serve
    // it as immutable.
    let name = rel.rsplit('/').next().unwrap_or(rel).to_lowercase();
    let src = format!("{}?v={v:016x}", attachment_url(&name));
    let ext = rel.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    Some(if IMAGE_EXTS.contains(&ext.as_str()) {
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
    })
}
