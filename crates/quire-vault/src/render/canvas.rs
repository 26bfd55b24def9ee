//! A JSON Canvas drawn into a page: nodes as positioned boxes on a plane the reader
//! scrolls, groups behind them, edges as SVG curves with their arrows and labels.
//! No script: the page is readable as served, in light and dark (colours are the
//! stylesheet's, by class, or the canvas's own `#rrggbb`).
//!
//! What each node shows is the caller's ([`draw`] takes it as HTML, made by the page's
//! render under its audience and budgets); this file places it. Every text the canvas
//! itself holds (labels, the name) is escaped here, and every number is an integer
//! the reader clamped (`crate::canvas`), so no canvas can write markup or styles.
//!
//! Reading order is the plane's: groups first, then nodes top to bottom and left to
//! right, so a screen reader or a narrow screen without the plane reads it in order.

use std::fmt::Write;

use crate::canvas::{Canvas, Color, Edge, Node, NodeKind, Side};
use crate::html::escape;

/// Space around the nodes, in pixels.
const PAD: i64 = 40;

/// `canvas`, called `name`, with `content[i]` the HTML of node `i` (ignored for
/// groups).
pub(super) fn draw(name: &str, canvas: &Canvas, content: &[String]) -> String {
    let (min_x, min_y, w, h) = extent(canvas);
    let at = |n: &Node| (n.x - min_x + PAD, n.y - min_y + PAD);
    let mut html = String::new();
    let _ = write!(
        html,
        "<figure class=\"canvas\" aria-label=\"Canvas: {name}\"><div class=\"canvas-scroll\"><div class=\"canvas-plane\" style=\"width:{w}px;height:{h}px\">",
        name = escape(name)
    );
    let _ = write!(
        html,
        "<svg class=\"canvas-edges\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" aria-hidden=\"true\">"
    );
    for e in &canvas.edges {
        edge_svg(&mut html, canvas, e, &at);
    }
    html.push_str("</svg>");
    for i in reading_order(canvas) {
        let n = &canvas.nodes[i];
        let (x, y) = at(n);
        let (kind, body) = match &n.kind {
            NodeKind::Group { label } => (
                "group",
                label
                    .as_deref()
                    .map(|l| format!("<p class=\"canvas-group-label\">{}</p>", escape(l)))
                    .unwrap_or_default(),
            ),
            NodeKind::Text(_) => ("text", content.get(i).cloned().unwrap_or_default()),
            NodeKind::File { .. } => ("file", content.get(i).cloned().unwrap_or_default()),
            NodeKind::Link(_) => ("link", content.get(i).cloned().unwrap_or_default()),
        };
        let (class, style) = color(n.color.as_ref());
        let _ = write!(
            html,
            "<div class=\"canvas-node canvas-{kind}{class}\" style=\"left:{x}px;top:{y}px;width:{}px;height:{}px{style}\">{body}</div>",
            n.width, n.height
        );
    }
    for e in canvas.edges.iter().filter(|e| e.label.is_some()) {
        let (x, y) = label_at(canvas, e, &at);
        let _ = write!(
            html,
            "<span class=\"canvas-edge-label\" style=\"left:{x}px;top:{y}px\">{}</span>",
            escape(e.label.as_deref().unwrap_or(""))
        );
    }
    html.push_str("</div></div>");
    if canvas.skipped > 0 {
        let _ = write!(
            html,
            "<figcaption class=\"canvas-note\">{} nodes or edges of this canvas are not shown (unknown types or missing ends).</figcaption>",
            canvas.skipped
        );
    }
    html.push_str("</figure>\n");
    html
}

/// The nodes' bounding box: its top-left corner, and the plane's size with padding.
fn extent(canvas: &Canvas) -> (i64, i64, i64, i64) {
    if canvas.nodes.is_empty() {
        return (0, 0, 2 * PAD, 2 * PAD);
    }
    let min_x = canvas.nodes.iter().map(|n| n.x).min().unwrap_or(0);
    let min_y = canvas.nodes.iter().map(|n| n.y).min().unwrap_or(0);
    let max_x = canvas
        .nodes
        .iter()
        .map(|n| n.x + n.width)
        .max()
        .unwrap_or(0);
    let max_y = canvas
        .nodes
        .iter()
        .map(|n| n.y + n.height)
        .max()
        .unwrap_or(0);
    (
        min_x,
        min_y,
        max_x - min_x + 2 * PAD,
        max_y - min_y + 2 * PAD,
    )
}

/// Groups (largest first, so a nested group sits above its parent), then the other
/// nodes by row and column.
fn reading_order(canvas: &Canvas) -> Vec<usize> {
    let mut order: Vec<usize> = (0..canvas.nodes.len()).collect();
    order.sort_by_key(|&i| {
        let n = &canvas.nodes[i];
        match n.kind {
            NodeKind::Group { .. } => (0, -(n.width * n.height), n.y, n.x),
            _ => (1, 0, n.y, n.x),
        }
    });
    order
}

/// A class for a preset colour, or a style for `#rrggbb` (validated by the reader).
fn color(c: Option<&Color>) -> (String, String) {
    match c {
        Some(Color::Preset(p)) => (format!(" canvas-c{p}"), String::new()),
        Some(Color::Hex(hex)) => (" canvas-cx".to_owned(), format!(";--cc:{hex}")),
        None => (String::new(), String::new()),
    }
}

/// The side an edge leaves `a` by toward `b`, when the canvas does not say: the one
/// facing `b`'s centre along the longer axis.
fn facing(a: &Node, b: &Node) -> Side {
    let dx = (b.x + b.width / 2) - (a.x + a.width / 2);
    let dy = (b.y + b.height / 2) - (a.y + a.height / 2);
    if dx.abs() >= dy.abs() {
        if dx >= 0 {
            Side::Right
        } else {
            Side::Left
        }
    } else if dy >= 0 {
        Side::Bottom
    } else {
        Side::Top
    }
}

/// The middle of `side` of `n` placed at `(x, y)`, and the side's outward normal.
fn anchor(n: &Node, (x, y): (i64, i64), side: Side) -> ((i64, i64), (i64, i64)) {
    match side {
        Side::Top => ((x + n.width / 2, y), (0, -1)),
        Side::Bottom => ((x + n.width / 2, y + n.height), (0, 1)),
        Side::Left => ((x, y + n.height / 2), (-1, 0)),
        Side::Right => ((x + n.width, y + n.height / 2), (1, 0)),
    }
}

type Ends = ((i64, i64), (i64, i64), (i64, i64), (i64, i64));

/// An edge's two anchors and their normals.
fn ends(canvas: &Canvas, e: &Edge, at: &dyn Fn(&Node) -> (i64, i64)) -> Ends {
    let (a, b) = (&canvas.nodes[e.from], &canvas.nodes[e.to]);
    let (p, pn) = anchor(a, at(a), e.from_side.unwrap_or_else(|| facing(a, b)));
    let (q, qn) = anchor(b, at(b), e.to_side.unwrap_or_else(|| facing(b, a)));
    (p, pn, q, qn)
}

/// How far a curve's control points stand out from its ends.
fn reach(p: (i64, i64), q: (i64, i64)) -> i64 {
    (((q.0 - p.0).abs() + (q.1 - p.1).abs()) / 3).clamp(30, 200)
}

fn edge_svg(html: &mut String, canvas: &Canvas, e: &Edge, at: &dyn Fn(&Node) -> (i64, i64)) {
    let (p, pn, q, qn) = ends(canvas, e, at);
    let r = reach(p, q);
    let (class, style) = color(e.color.as_ref());
    let style = if style.is_empty() {
        String::new()
    } else {
        format!(" style=\"{}\"", style.trim_start_matches(';'))
    };
    let _ = write!(
        html,
        "<path class=\"canvas-edge{class}\"{style} d=\"M{} {} C{} {} {} {} {} {}\"/>",
        p.0,
        p.1,
        p.0 + pn.0 * r,
        p.1 + pn.1 * r,
        q.0 + qn.0 * r,
        q.1 + qn.1 * r,
        q.0,
        q.1
    );
    for (arrow, tip, normal) in [(e.from_arrow, p, pn), (e.to_arrow, q, qn)] {
        if arrow {
            let _ = write!(
                html,
                "<path class=\"canvas-arrow{class}\"{style} d=\"{}\"/>",
                arrowhead(tip, normal)
            );
        }
    }
}

/// A triangle with its tip at `tip`, pointing against `normal` (into the node).
fn arrowhead(tip: (i64, i64), normal: (i64, i64)) -> String {
    let (len, half) = (12, 6);
    let base = (tip.0 + normal.0 * len, tip.1 + normal.1 * len);
    // Perpendicular to the normal.
    let (px, py) = (-normal.1 * half, normal.0 * half);
    format!(
        "M{} {} L{} {} L{} {} Z",
        tip.0,
        tip.1,
        base.0 + px,
        base.1 + py,
        base.0 - px,
        base.1 - py
    )
}

/// Where an edge's label goes: the curve's midpoint (of its cubic Bézier).
fn label_at(canvas: &Canvas, e: &Edge, at: &dyn Fn(&Node) -> (i64, i64)) -> (i64, i64) {
    let (p, pn, q, qn) = ends(canvas, e, at);
    let r = reach(p, q);
    let c1 = (p.0 + pn.0 * r, p.1 + pn.1 * r);
    let c2 = (q.0 + qn.0 * r, q.1 + qn.1 * r);
    // B(1/2) = (p + 3 c1 + 3 c2 + q) / 8
    (
        (p.0 + 3 * c1.0 + 3 * c2.0 + q.0) / 8,
        (p.1 + 3 * c1.1 + 3 * c2.1 + q.1) / 8,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canvas::parse;

    #[test]
    fn nodes_are_placed_on_the_plane_and_every_text_is_escaped() {
        let c = parse(r##"{"nodes":[
            {"id":"g","type":"group","label":"<b>G</b>","x":-100,"y":-50,"width":500,"height":300,"color":"2"},
            {"id":"a","type":"text","text":"a","x":0,"y":0,"width":100,"height":50},
            {"id":"b","type":"link","url":"https://e.com","x":300,"y":0,"width":100,"height":50,"color":"#00ff00"}
        ],"edges":[{"id":"e","fromNode":"a","toNode":"b","label":"<i>x</i>"}]}"##)
        .unwrap();
        let html = draw(
            "Plan <1>",
            &c,
            &["<p>A</p>".into(), "<p>A</p>".into(), "<a>B</a>".into()],
        );
        // The plane starts PAD before the leftmost node (the group at x = -100).
        assert!(
            html.contains("style=\"width:580px;height:380px\""),
            "{html}"
        );
        assert!(
            html.contains(
                "canvas-group canvas-c2\" style=\"left:40px;top:40px;width:500px;height:300px\""
            ),
            "{html}"
        );
        assert!(
            html.contains("canvas-text\" style=\"left:140px;top:90px;"),
            "{html}"
        );
        assert!(html.contains("canvas-link canvas-cx\" style=\"left:440px;top:90px;width:100px;height:50px;--cc:#00ff00\""), "{html}");
        // a's right side (240, 115) to b's left side (440, 115), an arrow at b.
        assert!(
            html.contains("d=\"M240 115 C306 115 374 115 440 115\""),
            "{html}"
        );
        assert!(
            html.contains("<path class=\"canvas-arrow\" d=\"M440 115 L428 109 L428 121 Z\"/>"),
            "{html}"
        );
        for raw in ["<b>G</b>", "<i>x</i>", "Plan <1>"] {
            assert!(!html.contains(raw), "{raw} unescaped: {html}");
        }
        // Groups first in reading order.
        assert!(html.find("canvas-group").unwrap() < html.find("canvas-text").unwrap());
    }
}
