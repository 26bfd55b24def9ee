//! `/llms.txt` (and [`FULL_PATH`], every note in one file): the site as a language
//! model's agent reads it first, in the format
//! the llms.txt proposal gives (<https://llmstxt.org>): the site's title as an `#`
//! heading, its description as a `>` quote, then one `##` section per folder with a
//! `- [title](url): description` line for each note, linking the note's markdown
//! (`<note>.md`, see `quire_vault::render::markdown`). Public notes only, as the
//! sitemap: the file is the same for every reader and cached like any page.
//!
//! Titles and descriptions come from notes' front matter, so they are hostile: each
//! is made one line, and the characters that would end a link's text or start
//! markdown of their own are escaped, so a note can add no section, no link and no
//! line but its own. The list is bounded ([`BYTES_MAX`]): past it, it ends with a
//! line naming the sitemap, which lists every page.

use quire_vault::{pages, preview, Visibility};

use crate::routes::MARKDOWN_SUFFIX;
use crate::snapshot::Snapshot;

/// The most bytes of note lines; a vault whose list is longer ends it early.
pub const BYTES_MAX: usize = 1 << 20;

/// Where every public note's markdown is served in one file.
pub use crate::routes::LLMS_FULL_PATH as FULL_PATH;
/// The most bytes of `/llms-full.txt`'s notes; past it, the file ends with a line
/// pointing at `/llms.txt`, which links every note's own markdown.
pub const FULL_BYTES_MAX: usize = 8 << 20;

/// `/llms-full.txt`: the site's title and description, then every public note as
/// its `<note>.md` is (front matter and text, as the public audience sees it), in
/// the order `/llms.txt` lists them, within [`FULL_BYTES_MAX`].
pub fn llms_full_txt(s: &Snapshot, base: &str) -> String {
    let v = &s.vault;
    let mut out = heading(s);
    let notes = pages::folders(v, Visibility::Public)
        .into_values()
        .flatten()
        .filter(|e| v.by_url(&e.url) == Some(e.note))
        .map(|e| quire_vault::render::markdown(v, e.note, Visibility::Public, base));
    append_within(&mut out, notes, base, FULL_BYTES_MAX);
    out
}

/// Appends each of `notes` (made only as they are reached) to `out` while it stays
/// within `cap` bytes; past it, a line saying how many are in and where the rest is.
fn append_within(out: &mut String, notes: impl Iterator<Item = String>, base: &str, cap: usize) {
    for (listed, md) in notes.enumerate() {
        if out.len() + md.len() + 1 > cap {
            out.push_str(&format!(
                "\n(The other notes are not in this file: {listed} are. Each note's markdown is linked from {base}/llms.txt.)\n"
            ));
            return;
        }
        out.push('\n');
        out.push_str(&md);
    }
}

/// The title line and the description quote both files start with.
fn heading(s: &Snapshot) -> String {
    let mut out = format!("# {}\n", one_line(&s.config.title));
    let about = one_line(&s.config.description);
    if !about.is_empty() {
        out.push_str(&format!("\n> {about}\n"));
    }
    out
}

/// `/llms.txt` for the site, with absolute links from `base`.
pub fn llms_txt(s: &Snapshot, base: &str) -> String {
    let v = &s.vault;
    let mut out = heading(s);
    let folders = pages::folders(v, Visibility::Public);
    let sections = folders.iter().map(|(folder, notes)| {
        let name = if folder.is_empty() { "Notes" } else { folder };
        // A note reachable under another URL's name is listed once, at its own.
        let lines = notes
            .iter()
            .filter(|e| v.by_url(&e.url) == Some(e.note))
            .map(|e| note_line(v, e, base));
        (name, lines)
    });
    list(&mut out, sections, base, BYTES_MAX);
    out
}

/// Appends `sections` (each a `##` heading and its lines; the lines made only as
/// they are written) to `out` while it stays within `cap` bytes; past it, a
/// `## More` section pointing at the sitemap instead of the rest.
fn list<'a, L: Iterator<Item = String>>(
    out: &mut String,
    sections: impl Iterator<Item = (&'a str, L)>,
    base: &str,
    cap: usize,
) {
    let mut listed = 0;
    for (name, lines) in sections {
        let heading = format!("\n## {}\n\n", one_line(name));
        let mut headed = false;
        for line in lines {
            let more = if headed { 0 } else { heading.len() };
            if out.len() + more + line.len() > cap {
                out.push_str(&format!(
                    "\n## More\n\n- [Every page]({base}/sitemap.xml): this file lists the first {listed} notes; the sitemap lists them all.\n"
                ));
                return;
            }
            if !headed {
                out.push_str(&heading);
                headed = true;
            }
            out.push_str(&line);
            listed += 1;
        }
    }
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
    fn the_full_file_stops_before_its_cap_and_says_where_the_rest_is() {
        let notes = (0..10).map(|i| format!("---\ntitle: \"n{i}\"\n---\n{}\n", "x".repeat(100)));
        let mut out = String::from("# Site\n");
        append_within(&mut out, notes, "http://a.test", 400);
        assert!(out.len() <= 400 + 200, "{} bytes", out.len());
        assert!(
            out.contains("n0") && out.contains("n1") && !out.contains("n3"),
            "{out}"
        );
        assert!(
            out.ends_with("linked from http://a.test/llms.txt.)\n"),
            "{out}"
        );
        assert!(out.contains(": 3 are."), "{out}");
        let mut all = String::new();
        append_within(&mut all, (0..3).map(|i| format!("n{i}")), "b", 1 << 20);
        assert_eq!(all, "\nn0\nn1\nn2");
    }

    /// The cap: lines stop before the file would pass it, a section with no line
    /// that fits gets no heading, and the end points at the sitemap.
    #[test]
    fn the_list_stops_at_its_cap_and_points_at_the_sitemap() {
        let line = |i: usize| format!("- [n{i}](https://x.org/n{i}.md)\n");
        let sections = || {
            [("a", 0..3), ("b", 3..6)]
                .into_iter()
                .map(move |(name, r)| (name, r.map(line)))
        };
        let mut all = String::from("# T\n");
        list(&mut all, sections(), "https://x.org", usize::MAX);
        assert_eq!(all.matches("- [n").count(), 6);
        assert!(!all.contains("## More"));
        // Room for the title, section a and two lines: a is cut, b never starts.
        let cap = "# T\n\n## a\n\n".len() + 2 * line(0).len();
        let mut cut = String::from("# T\n");
        list(&mut cut, sections(), "https://x.org", cap);
        assert_eq!(cut.matches("- [n").count(), 2, "{cut}");
        assert!(!cut.contains("## b"), "{cut}");
        assert!(
            cut.ends_with("\n## More\n\n- [Every page](https://x.org/sitemap.xml): this file lists the first 2 notes; the sitemap lists them all.\n"),
            "{cut}"
        );
    }

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
