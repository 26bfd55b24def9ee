//! Obsidian-style wikilinks and embeds in a note's markdown: `[[Note]]`,
//! `[[Note|label]]`, `[[Note#Heading]]`, `![[image.png]]`; and the slugs pages and
//! headings are addressed by.
//!
//! Key decisions:
//! - Links inside fenced code blocks and inline code spans are text, not links.
//! - A link never spans lines, and `[[` without a closing `]]` on its line is text.
//! - Slugs are lower-case, with runs of anything but letters and digits turned into
//!   one `-`; letters outside ASCII are kept (URLs carry them percent-encoded).

use std::ops::Range;

use crate::scan::{code_span_len, fence_line};

/// One wikilink or embed, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WikiLink {
    /// The note (or attachment) name, trimmed.
    pub target: String,
    /// `#Heading`, without the `#`.
    pub(crate) heading: Option<String>,
    /// `|label`.
    pub(crate) label: Option<String>,
    /// `![[...]]`.
    pub embed: bool,
    /// Byte range of the whole link in the body, `!` included for embeds.
    pub(crate) range: Range<usize>,
}

impl WikiLink {
    /// The text a reader sees: the label, else the target (and heading).
    pub(crate) fn text(&self) -> String {
        match (&self.label, &self.heading) {
            (Some(l), _) => l.clone(),
            (None, Some(h)) if self.target.is_empty() => h.replace('#', " › "),
            (None, Some(h)) => format!("{} › {}", self.target, h.replace('#', " › ")),
            (None, None) => self.target.clone(),
        }
    }
}

/// Every wikilink in `body` outside code and comments, in order.
pub(crate) fn extract(body: &str) -> Vec<WikiLink> {
    let mut out = Vec::new();
    let mut fence: Option<(u8, usize)> = None;
    let mut line_start = 0;
    for line in body.split_inclusive('\n') {
        if !fence_line(line, &mut fence) && fence.is_none() {
            scan_line(line, line_start, &mut out);
        }
        line_start += line.len();
    }
    let comments = crate::scan::comment_ranges(body);
    if !comments.is_empty() {
        out.retain(|l| !comments.iter().any(|c| c.contains(&l.range.start)));
    }
    out
}

fn scan_line(line: &str, base: usize, out: &mut Vec<WikiLink>) {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'`' {
            i += code_span_len(line, i);
            continue;
        }
        if b[i] == b'[' && b.get(i + 1) == Some(&b'[') {
            if let Some(end) = line[i + 2..].find("]]") {
                let inner = &line[i + 2..i + 2 + end];
                let embed = i > 0 && b[i - 1] == b'!';
                let start = if embed { i - 1 } else { i };
                if let Some(link) = parse_inner(inner, embed, base + start..base + i + 2 + end + 2)
                {
                    out.push(link);
                }
                i += 2 + end + 2;
                continue;
            }
        }
        i += 1;
    }
}

fn parse_inner(inner: &str, embed: bool, range: Range<usize>) -> Option<WikiLink> {
    if inner.contains('[') || inner.contains('\n') {
        return None;
    }
    let (target_part, label) = match inner.split_once('|') {
        Some((t, l)) => (t, Some(l.trim().to_owned()).filter(|l| !l.is_empty())),
        None => (inner, None),
    };
    let (target, heading) = match target_part.split_once('#') {
        Some((t, h)) => (
            t.trim(),
            Some(h.trim().to_owned()).filter(|h| !h.is_empty()),
        ),
        None => (target_part.trim(), None),
    };
    if target.is_empty() && heading.is_none() {
        return None;
    }
    Some(WikiLink {
        target: target.to_owned(),
        heading,
        label,
        embed,
        range,
    })
}

/// The fragment a link's `#...` part points at in the target page: `^id` for a block
/// reference (its characters limited to what block ids hold), else the slug of the
/// last heading of a `#Heading#Subheading` path (help.obsidian.md, "Internal links":
/// headings are matched case-insensitively, and slugs are lower-case).
pub(crate) fn fragment(heading: &str) -> String {
    if let Some(id) = heading.strip_prefix('^') {
        let id: String = id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        return format!("^{id}");
    }
    let last = heading
        .rsplit('#')
        .map(str::trim)
        .find(|h| !h.is_empty())
        .unwrap_or(heading);
    slug(last)
}

/// The slug of a name or heading: lower-case letters and digits, other runs → `-`.
pub fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut dash = false;
    for c in s.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
            dash = false;
        } else if !dash && !out.is_empty() {
            out.push('-');
            dash = true;
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(body: &str) -> Vec<(String, Option<String>, Option<String>, bool)> {
        extract(body)
            .into_iter()
            .map(|l| (l.target, l.heading, l.label, l.embed))
            .collect()
    }

    #[test]
    fn every_form_is_read() {
        let body = "See [[Note A]], [[Note B|the label]], [[Note C#Some Heading]] and ![[diagram.svg]].\n[[#Local]]";
        assert_eq!(
            targets(body),
            vec![
                ("Note A".into(), None, None, false),
                ("Note B".into(), None, Some("the label".into()), false),
                ("Note C".into(), Some("Some Heading".into()), None, false),
                ("diagram.svg".into(), None, None, true),
                ("".into(), Some("Local".into()), None, false),
            ]
        );
        let l = &extract(body)[3];
        assert_eq!(&body[l.range.clone()], "![[diagram.svg]]");
    }

    #[test]
    fn code_is_not_linked() {
        let body = "a [[Real]]\n```rust\nlet x = \"[[Fake]]\";\n```\n`[[Also fake]]` and ``[[fake `too`]]`` then [[Real Two]]\n~~~~\n[[Fake]]\n~~~\nstill fenced [[Fake]]\n~~~~\n";
        let t: Vec<String> = extract(body).into_iter().map(|l| l.target).collect();
        assert_eq!(t, vec!["Real", "Real Two"]);
    }

    #[test]
    fn unclosed_and_empty_links_are_text() {
        assert!(extract("[[never closed\n]]").is_empty());
        assert!(extract("[[]] [[ | x]]").is_empty());
        assert!(extract("[[a [[b]]").iter().all(|l| l.target == "b"));
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("Stale While Revalidate"), "stale-while-revalidate");
        assert_eq!(slug("  C++ & Rust: notes!  "), "c-rust-notes");
        assert_eq!(slug("Crème Brûlée"), "crème-brûlée");
        assert_eq!(slug("---"), "");
    }
}
