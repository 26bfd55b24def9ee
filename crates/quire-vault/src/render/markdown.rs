//! A note as markdown for a reader allowed up to an audience: what an agent reads
//! instead of the HTML page (`/<note>.md` on the site).
//!
//! Key decisions:
//! - **The same privacy as the page, from the same code.** Comments are dropped and
//!   each wikilink is replaced by what [`super::wikilinks`] says it shows to the
//!   audience (`seen`): a note the reader may see becomes a markdown link to its
//!   page, an attached file a link (an image for an image), and a missing or
//!   hidden note its text alone, as the page shows a broken link. So a hidden
//!   note's existence, title or URL never reaches the markdown, exactly as on the
//!   page, and the markdown's dependencies are the page's (`observe`).
//! - Embedded notes are links, not transcluded: an agent that wants one reads its
//!   own `.md`.
//! - The rest of the note's markdown is the author's, as written; the front matter
//!   is reduced to title, canonical URL, date, tags and description, each a JSON
//!   string (valid YAML), so none of it can end the block.
//! - Bounded like the page: a note over the page budget gives a short notice.

use super::budget;
use super::wikilinks::{seen, Seen};
use crate::links::{self, WikiLink};
use crate::note::Visibility;
use crate::vault::Vault;

/// Note `i` of `vault` as markdown for `audience`, its links absolute under `base`
/// (the site's origin, no trailing slash).
pub fn markdown(vault: &Vault, i: usize, audience: Visibility, base: &str) -> String {
    let n = &vault.notes()[i];
    let mut out = String::from("---\n");
    let mut field = |name: &str, value: &str| {
        out.push_str(&format!("{name}: {}\n", json_string(value)));
    };
    field("title", n.title());
    field("url", &format!("{base}{}", n.url));
    if let Some(d) = &n.front.date {
        field("date", d);
    }
    if let Some(d) = &n.front.description {
        field("description", d);
    }
    if !n.front.tags.is_empty() {
        let tags: Vec<String> = n.front.tags.iter().map(|t| json_string(t)).collect();
        out.push_str(&format!("tags: [{}]\n", tags.join(", ")));
    }
    out.push_str("---\n\n");
    let limit = budget::limits().page_bytes_max;
    if n.body.len() > limit {
        out.push_str(&format!(
            "*This note is longer than the site renders ({limit} bytes).*\n"
        ));
        return out;
    }
    let targets = vault.targets(i);
    let body = super::comments::rewrite(&n.body, &n.links, |k, l| {
        link_markdown(vault, l, targets.get(k).copied().flatten(), audience, base)
    });
    out.push_str(&body);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// One link as markdown: what it shows to `audience` (see `seen`).
fn link_markdown(
    vault: &Vault,
    l: &WikiLink,
    t: Option<usize>,
    audience: Visibility,
    base: &str,
) -> String {
    let text = escape_text(&l.text());
    let fragment = l.heading.as_deref().map(links::fragment);
    match seen(vault, l, t, audience) {
        Seen::File(rel, v) => {
            let name = rel.rsplit('/').next().unwrap_or(rel).to_lowercase();
            let url = format!("{base}{}?v={v:016x}", super::url::attachment_url(&name));
            let bang = if super::wikilinks::is_image(rel) {
                "!"
            } else {
                ""
            };
            format!("{bang}[{text}](<{}>)", escape_target(&url))
        }
        Seen::Here => {
            let here = super::url::url_path(&format!("#{}", fragment.unwrap_or_default()));
            format!("[{text}](<{}>)", escape_target(&here))
        }
        Seen::Note(t) => {
            let mut path = vault.notes()[t].url.clone();
            if let Some(f) = fragment {
                path.push('#');
                path.push_str(&f);
            }
            let url = format!("{base}{}", super::url::url_path(&path));
            format!("[{text}](<{}>)", escape_target(&url))
        }
        // A base or a canvas is drawn into pages only; here, its name. The same for a note that
        // does not exist and one the reader may not see.
        Seen::Base(_) | Seen::Canvas(..) | Seen::Nothing => text,
    }
}

/// Link text that cannot end the link or start another: `\ [ ] < >` and backticks
/// escaped, line breaks made spaces.
fn escape_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '[' | ']' | '<' | '>' | '`' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A link target inside `<…>`: `<`, `>` and whitespace percent-encoded.
fn escape_target(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            c if c.is_whitespace() || c.is_control() => {
                let mut b = [0u8; 4];
                for byte in c.encode_utf8(&mut b).bytes() {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// `s` as a JSON string (a valid YAML scalar on one line): quotes, backslashes
/// and control characters escaped.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_values_stay_one_quoted_line() {
        assert_eq!(json_string("a\"b\\c\nd\u{7}"), r#""a\"b\\c\nd\u0007""#);
        assert_eq!(escape_text("x](evil)\n["), r"x\](evil) \[");
        assert_eq!(escape_target("/a b<c>"), "/a%20b%3Cc%3E");
    }
}
