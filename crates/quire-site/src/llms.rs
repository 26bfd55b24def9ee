//! `/llms.txt`: the site as a language model's agent reads it first, in the format
//! the llms.txt proposal gives (<https://llmstxt.org>): the site's title as an `#`
//! heading, its description as a `>` quote, then one `##` section per folder with a
//! `- [title](url): description` line for each note, linking the note's markdown
//! (`<note>.md`, see `quire_vault::render::markdown`). Public notes only, as the
//! sitemap: the file is the same for every reader and cached like any page.
//!
//! Titles and descriptions come from notes' front matter, so they are hostile: each
//! is made one line, and the characters that would end a link's text or start
//! markdown of their own are escaped, so a note can add no section, no link and no
//! line but its own. The file is bounded ([`BYTES_MAX`]): past it the list ends
//! with a line naming the sitemap, which lists every page.

use quire_vault::{pages, preview, Visibility};

use crate::routes::MARKDOWN_SUFFIX;
use crate::snapshot::Snapshot;

/// The most bytes of note lines; a vault whose list is longer ends it early.
pub const BYTES_MAX: usize = 1 << 20;

/// `/llms.txt` for the site, with absolute links from `base`.
pub fn llms_txt(s: &Snapshot, base: &str) -> String {
    let v = &s.vault;
    let mut out = format!("# {}\n", one_line(&s.config.title));
    let about = one_line(&s.config.description);
    if !about.is_empty() {
        out.push_str(&format!("\n> {about}\n"));
    }
    let folders = pages::folders(v, Visibility::Public);
    let mut listed = 0;
    let total: usize = folders.values().map(Vec::len).sum();
    'folders: for (folder, notes) in &folders {
        let name = if folder.is_empty() { "Notes" } else { folder };
        out.push_str(&format!("\n## {}\n\n", one_line(name)));
        for e in notes {
            // A note reachable under another URL's name is listed once, at its own.
            if v.by_url(&e.url) != Some(e.note) {
                continue;
            }
            let line = note_line(v, e, base);
            if out.len() + line.len() > BYTES_MAX {
                break 'folders;
            }
            out.push_str(&line);
            listed += 1;
        }
    }
    if listed < total {
        out.push_str(&format!(
            "\n## More\n\n- [Every page]({base}/sitemap.xml): the sitemap lists all {total} notes; this file lists {listed}.\n"
        ));
    }
    out
}

/// The list line of note entry `e`.
fn note_line(v: &quire_vault::Vault, e: &pages::Entry, base: &str) -> String {
    let title = one_line(&e.title);
    // (The preview's line is already cut to a sentence or two, at a word.)
    let description = one_line(&preview::preview(v, e.note).description);
    // The note as markdown: what the proposal asks a page to offer agents.
    let url = link_target(&format!("{base}{}{MARKDOWN_SUFFIX}", e.url));
    if description.is_empty() {
        format!("- [{title}]({url})\n")
    } else {
        format!("- [{title}]({url}): {description}\n")
    }
}

/// `text` as one line of markdown text that ends no link and opens none: runs of
/// whitespace (newlines included) become one space, control characters go, and
/// `\ [ ] < >` and backticks are escaped with a backslash. (A line starts with the
/// file's own `#`, `>` or `- [`, so nothing a note writes can start a heading or
/// an item.)
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        for c in word.chars().filter(|c| !c.is_control()) {
            if matches!(c, '\\' | '[' | ']' | '<' | '>' | '`') {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}

/// `url` safe inside a markdown link's parentheses: spaces, parentheses, angle
/// brackets and control characters percent-encoded (note URLs are slugs; the base
/// is the operator's, or the request's `Host`).
fn link_target(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.chars() {
        if c.is_whitespace() || c.is_control() || matches!(c, '(' | ')' | '<' | '>' | '\\') {
            let mut b = [0u8; 4];
            for byte in c.encode_utf8(&mut b).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_stays_on_its_line_and_inside_its_link() {
        let t = one_line("a]\n\n## Injected\n- [x](https://evil.test) `code` <b>");
        assert!(!t.contains('\n'));
        assert_eq!(
            t,
            r"a\] ## Injected - \[x\](https://evil.test) \`code\` \<b\>"
        );
        assert_eq!(one_line("  two\twords\u{7}  "), "two words");
        assert_eq!(
            link_target("https://site.test/a b(c)"),
            "https://site.test/a%20b%28c%29"
        );
    }
}
