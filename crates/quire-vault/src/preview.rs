//! What a link preview of a note shows (Open Graph, Twitter cards, the page's
//! description): a line of text and an image, from the note alone.
//!
//! Key decisions:
//! - **Front matter first** (`description`, `image` or `cover`), else the note's first
//!   paragraph as plain text (trimmed to [`DESCRIPTION_CHARS_MAX`] at a word
//!   boundary) and its first embedded image.
//! - **An image is an attachment of this vault, named by its site path**: the site
//!   makes it absolute with its own origin. A URL written in front matter is not
//!   used (a preview never points at a host the site did not choose).
//! - The first paragraph is read as it renders for the reader: without comments,
//!   links as their text, embeds left out (so an embedded note, private or not,
//!   never becomes another page's description).

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use crate::note::Note;
use crate::render::{attachment_url, comments};
use crate::vault::Vault;

/// Characters of a description made from the first paragraph (about what previews
/// show).
pub const DESCRIPTION_CHARS_MAX: usize = 200;

/// Extensions an image in a preview may have.
const IMAGE_EXTS: [&str; 6] = ["png", "jpg", "jpeg", "gif", "webp", "avif"];

/// A note's link preview.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Preview {
    /// One line about the note (empty when it has no text).
    pub description: String,
    /// The site path (with its version) of the image to show.
    pub image: Option<String>,
}

/// The preview of note `i`.
pub fn preview(vault: &Vault, i: usize) -> Preview {
    let n = &vault.notes()[i];
    let description = match &n.front.description {
        Some(d) => trim_words(&collapse(d), DESCRIPTION_CHARS_MAX),
        // A note past the page budget is not rendered, nor parsed for its preview
        // (its first pass reads the whole body: 50 MB on every request).
        None if n.body.len() > crate::render::budget::limits().page_bytes_max => String::new(),
        None => trim_words(&first_paragraph(&n.body, &n.links), DESCRIPTION_CHARS_MAX),
    };
    let image = match front_image(n) {
        Some(name) => image_url(vault, name),
        None => n
            .links
            .iter()
            .filter(|l| l.embed)
            .find_map(|l| image_url(vault, &l.target)),
    };
    Preview { description, image }
}

/// The names of the files note `n` shows: those it embeds, its preview image, and
/// the file nodes of the canvases it embeds. The site serves an attachment to the
/// widest audience of a note that shows it.
pub fn shown_files<'v>(vault: &'v Vault, n: &'v Note) -> impl Iterator<Item = &'v str> {
    let embeds = n.links.iter().filter(|l| l.embed);
    let in_canvases = embeds
        .clone()
        .filter_map(|l| vault.canvas_file(&l.target))
        .filter_map(|c| c.canvas.as_ref().ok())
        .flat_map(|c| c.files())
        .map(|f| f.rsplit('/').next().unwrap_or(f));
    embeds
        .map(|l| l.target.as_str())
        .chain(front_image(n))
        .chain(in_canvases)
}

/// The attachment name front matter `image` or `cover` gives, as written there
/// (`name`, `[[name]]` or `![[name|alt]]`).
pub fn front_image(n: &Note) -> Option<&str> {
    let s = n.front.image.as_deref()?.trim();
    let s = s.strip_prefix('!').unwrap_or(s);
    let s = s.strip_prefix("[[").unwrap_or(s);
    let s = s.strip_suffix("]]").unwrap_or(s);
    Some(s.split('|').next().unwrap_or(s).trim())
}

/// The site path of the image attachment `name`, with its version.
fn image_url(vault: &Vault, name: &str) -> Option<String> {
    let rel = vault.attachment(name)?;
    let ext = rel.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    if !IMAGE_EXTS.contains(&ext.as_str()) {
        return None;
    }
    let v = vault.attachment_version(name)?;
    let file = rel.rsplit('/').next().unwrap_or(rel).to_lowercase();
    Some(format!("{}?v={v:016x}", attachment_url(&file)))
}

/// The text of the first paragraph outside any container (quote, callout, list),
/// links as their text, without comments, embeds or a trailing block id.
fn first_paragraph(body: &str, links: &[crate::links::WikiLink]) -> String {
    let md = comments::rewrite(
        body,
        links,
        |_, l| {
            if l.embed {
                String::new()
            } else {
                l.text()
            }
        },
    );
    let mut depth = 0usize;
    let mut text = String::new();
    let mut inside = false;
    for e in Parser::new(&md) {
        match e {
            Event::Start(Tag::Paragraph) if depth == 0 => inside = true,
            Event::End(TagEnd::Paragraph) if inside => {
                if !text.trim().is_empty() {
                    break;
                }
                inside = false;
            }
            Event::Start(_) => depth += usize::from(!inside),
            Event::End(_) => depth = depth.saturating_sub(usize::from(!inside)),
            Event::Text(t) | Event::Code(t) if inside => text.push_str(&t),
            Event::SoftBreak | Event::HardBreak if inside => text.push(' '),
            _ => {}
        }
    }
    let text = collapse(&text);
    // A block id (`^id`) is the author's anchor, not prose.
    match text.rsplit_once(" ^") {
        Some((before, id))
            if !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
        {
            before.to_owned()
        }
        _ => text,
    }
}

/// Runs of whitespace (line breaks included) as one space, trimmed; control
/// characters dropped.
fn collapse(s: &str) -> String {
    s.split_whitespace()
        .map(|w| w.chars().filter(|c| !c.is_control()).collect::<String>())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `s` cut to at most `max` characters at a word boundary, with `…` when cut.
fn trim_words(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let cut = s.char_indices().nth(max).map_or(s.len(), |(b, _)| b);
    let head = &s[..cut];
    let head = match head.rfind(' ') {
        Some(sp) if sp > 0 => &head[..sp],
        _ => head,
    };
    format!("{}…", head.trim_end_matches([',', ';', ':', '.', ' ']))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::vault;

    fn of(files: &[(&str, &str)]) -> Preview {
        let (_d, v) = vault(files);
        preview(&v, v.resolve("n").unwrap())
    }

    #[test]
    fn the_first_paragraph_is_the_description_when_front_matter_has_none() {
        let p = of(&[(
            "N.md",
            "# Title\n> [!note] a callout\n\n- a list\n\nThe *first* [[Other|paragraph]] %%hidden%% `code`\nsecond line. ^p1\n\nNot this.\n",
        )]);
        assert_eq!(p.description, "The first paragraph code second line.");
        assert_eq!(p.image, None);
    }

    #[test]
    fn embeds_never_reach_the_description() {
        let p = of(&[
            ("N.md", "![[Secret]]\n\nShown.\n"),
            ("Secret.md", "the secret text"),
        ]);
        assert_eq!(p.description, "Shown.");
    }

    #[test]
    fn long_paragraphs_are_cut_at_a_word() {
        let long = "word ".repeat(100);
        let p = of(&[("N.md", &long)]);
        assert!(p.description.ends_with("word…"), "{}", p.description);
        assert!(p.description.chars().count() <= DESCRIPTION_CHARS_MAX + 1);
    }

    #[test]
    fn front_matter_wins_and_images_are_attachments_only() {
        let files = [
            ("N.md", "---\ndescription: \"Said\\nhere.\"\ncover: '![[Cover.PNG]]'\n---\nText ![[inline.jpg]]\n"),
            ("att/cover.png", "png"),
            ("att/inline.jpg", "jpg"),
        ];
        let p = of(&files);
        assert_eq!(p.description, "Said here.");
        let img = p.image.unwrap();
        assert!(img.starts_with("/attachments/cover.png?v="), "{img}");
        let p = of(&[
            ("N.md", "Text ![[inline.jpg]] ![[doc.pdf]]\n"),
            ("att/inline.jpg", "jpg"),
            ("doc.pdf", "x"),
        ]);
        assert!(p.image.unwrap().starts_with("/attachments/inline.jpg?v="));
    }

    #[test]
    fn front_matter_image_url_is_never_used() {
        for img in [
            "https://evil.example/x.png",
            "//evil.example/x.png",
            "../x.png",
        ] {
            let p = of(&[("N.md", &format!("---\nimage: '{img}'\n---\nx\n"))]);
            assert_eq!(p.image, None, "{img}");
        }
    }
}
