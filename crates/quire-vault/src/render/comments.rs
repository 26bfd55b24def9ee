//! Obsidian comments, `%%inline%%` and `%%` blocks spanning lines (help.obsidian.md,
//! "Basic formatting syntax" › "Comments"): they are for the author, so **none of
//! their text reaches the HTML, the search index or the links**.
//!
//! Key decisions:
//! - Found on the markdown before it is parsed (`crate::scan`), because a comment may hide markdown
//!   (a heading, a list) that must not be rendered at all.
//! - `%%` inside code (fenced blocks, inline spans) is code, as in Obsidian.
//! - An unclosed `%%` hides the rest of the note: what the author meant to hide
//!   stays hidden.

use std::ops::Range;

use crate::links::WikiLink;
use crate::scan::comment_ranges;

/// `body` with every comment removed and every link not inside one replaced by
/// `link(l)`.
pub(crate) fn rewrite(
    body: &str,
    links: &[WikiLink],
    mut link: impl FnMut(usize, &WikiLink) -> String,
) -> String {
    let comments = comment_ranges(body);
    let mut edits: Vec<(Range<usize>, Option<usize>)> = comments
        .into_iter()
        .map(|r| (r, None))
        .chain(
            links
                .iter()
                .enumerate()
                .map(|(i, l)| (l.range.clone(), Some(i))),
        )
        .collect();
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(body.len() + links.len() * 48);
    let mut at = 0;
    for (r, l) in edits {
        // A link inside a comment (or anything overlapping an earlier edit) is gone.
        if r.start < at || r.end > body.len() {
            continue;
        }
        out.push_str(&body[at..r.start]);
        if let Some(i) = l {
            out.push_str(&link(i, &links[i]));
        }
        at = r.end;
    }
    out.push_str(&body[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::links;

    fn stripped(body: &str) -> String {
        rewrite(body, &links::extract(body), |_, l| {
            format!("<{}>", l.target)
        })
    }

    #[test]
    fn inline_and_block_comments_are_removed() {
        assert_eq!(stripped("a %%secret%% b"), "a  b");
        assert_eq!(
            stripped("before\n%%\n# Hidden heading\n- hidden [[Link]]\n%%\nafter [[Shown]]\n"),
            "before\n\nafter <Shown>\n"
        );
        assert_eq!(stripped("x %%never closed\n\nmore"), "x ");
    }

    #[test]
    fn percent_signs_in_code_are_code() {
        let body = "`%%not a comment%%` and\n```\n%%\ncode\n```\n%%yes%% done";
        assert_eq!(
            stripped(body),
            "`%%not a comment%%` and\n```\n%%\ncode\n```\n done"
        );
    }

    #[test]
    fn links_in_comments_are_not_links() {
        let body = "[[A]] %%[[B]]%% [[C]]";
        let targets: Vec<String> = links::extract(body).into_iter().map(|l| l.target).collect();
        assert_eq!(targets, ["A", "C"]);
    }
}
