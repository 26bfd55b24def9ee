//! Drawing helpers the local and the site graph share. Every title and URL goes
//! through [`escape`](crate::html::escape) here, in text and in attributes alike, so
//! no note can write markup into a graph; numbers are written with one decimal at
//! most, which keeps a large graph's SVG small.

use std::fmt::Write;

use crate::html::escape;

/// A coordinate or length, rounded to a tenth.
pub(crate) fn num(x: f32) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// `title` cut to `chars` characters, with `…` when cut.
pub(crate) fn label(title: &str, chars: usize) -> String {
    if title.chars().count() <= chars {
        return title.to_owned();
    }
    let mut s: String = title.chars().take(chars.saturating_sub(1)).collect();
    s.truncate(s.trim_end().len());
    s.push('…');
    s
}

/// How a node is drawn.
pub(crate) struct NodeMark<'a> {
    /// The page it links to.
    pub(crate) url: &'a str,
    /// Its full title (the tooltip).
    pub(crate) title: &'a str,
    /// Centre.
    pub(crate) at: [f32; 2],
    /// Radius.
    pub(crate) r: f32,
    /// Classes of the `<a>` (`node`, and `here`, `quiet`...).
    pub(crate) class: &'a str,
    /// The label shown, where and anchored how (`start`, `middle`, `end`), if any.
    pub(crate) text: Option<(String, [f32; 2], &'a str)>,
}

/// One node: a link to its note holding a circle, a tooltip and its label.
pub(crate) fn node(out: &mut String, m: &NodeMark<'_>) {
    let _ = write!(
        out,
        "<a class=\"{}\" href=\"{}\"><title>{}</title><circle cx=\"{}\" cy=\"{}\" r=\"{}\"/>",
        m.class,
        escape(m.url),
        escape(m.title),
        num(m.at[0]),
        num(m.at[1]),
        num(m.r)
    );
    if let Some((text, at, anchor)) = &m.text {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
            num(at[0]),
            num(at[1]),
            escape(text)
        );
    }
    out.push_str("</a>");
}

/// Every edge as one path of `M x y L x y` segments (one element, however many
/// edges).
/// A path with no segment is left out.
pub(crate) fn edges(
    out: &mut String,
    class: &str,
    segments: impl Iterator<Item = ([f32; 2], [f32; 2])>,
) {
    let start = out.len();
    let _ = write!(out, "<path class=\"{class}\" d=\"");
    let mut first = true;
    for (a, b) in segments {
        if !first {
            out.push(' ');
        }
        first = false;
        let _ = write!(
            out,
            "M{} {}L{} {}",
            num(a[0]),
            num(a[1]),
            num(b[0]),
            num(b[1])
        );
    }
    if first {
        out.truncate(start);
    } else {
        out.push_str("\"/>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short_and_labels_are_cut_with_an_ellipsis() {
        assert_eq!(num(3.0), "3");
        assert_eq!(num(3.04), "3");
        assert_eq!(num(-2.26), "-2.3");
        assert_eq!(label("short", 10), "short");
        assert_eq!(label("a rather long title", 8), "a rathe…");
        assert_eq!(label("word word", 6), "word…");
        assert_eq!(label("ééééé", 4), "ééé…");
    }
}
