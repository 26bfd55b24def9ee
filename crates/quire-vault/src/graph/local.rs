//! A note's local graph: the note, the visible notes it links to or is linked from
//! (one hop), and the links among them, drawn as inline SVG.
//!
//! Key decisions:
//! - **Bounded**: at most [`LOCAL_NODES_MAX`] neighbours, the most linked first (ties
//!   by title); the rest are counted ("+N more"), never named.
//! - **Two columns, not a simulation**: the note in the middle, its neighbours by
//!   title down a left and a right arc with their labels outside. Every label gets a
//!   row of its own, so none overlaps another, and the drawing is a pure function of
//!   the model, cheap enough for every render.
//! - The model ([`Local`]) is what the page's version hashes ([`Local::fingerprint`]):
//!   a change that alters the drawing (a new link either way, a neighbour renamed, a
//!   link between two neighbours) changes the page's key, and nothing else does.

use xxhash_rust::xxh3::Xxh3;

use super::svg::{self, NodeMark};
use super::Links;
use crate::vault::Vault;

/// Most neighbours drawn in a local graph.
pub const LOCAL_NODES_MAX: usize = 40;

/// The drawing's width, in SVG units (about a CSS pixel at the page's measure).
const WIDTH: f32 = 720.0;
/// Vertical distance between two neighbours in a column.
const ROW: f32 = 22.0;
/// Characters of a neighbour's label (the tooltip has the whole title).
const LABEL_CHARS: usize = 24;

/// A node: the note's title and page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Title.
    pub title: String,
    /// Page path.
    pub url: String,
}

/// A note's local graph, for one audience.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    /// The note.
    pub center: Node,
    /// Its neighbours drawn, by title (then page).
    pub nodes: Vec<Node>,
    /// Links between two neighbours (indices into `nodes`, smaller first); the note
    /// is linked with every neighbour.
    pub edges: Vec<(u16, u16)>,
    /// Neighbours left out past [`LOCAL_NODES_MAX`].
    pub more: usize,
}

fn node(v: &Vault, i: usize) -> Node {
    let n = &v.notes()[i];
    Node {
        title: n.title().to_owned(),
        url: n.url.clone(),
    }
}

/// The local graph of note `i` in `links`' audience; `None` when the audience does
/// not see the note or the note has no visible neighbour.
pub fn local(v: &Vault, links: &Links, i: usize) -> Option<Local> {
    if !links.sees(i) {
        return None;
    }
    let all = links.neighbours(i);
    if all.is_empty() {
        return None;
    }
    let key = |j: usize| {
        let n = &v.notes()[j];
        (n.title(), n.url.as_str())
    };
    let chosen = links.pick(
        all.iter().map(|&j| j as usize).collect(),
        LOCAL_NODES_MAX,
        key,
    );
    // Positions fit: at most `LOCAL_NODES_MAX` nodes.
    let edges = links
        .edges_among(&chosen)
        .into_iter()
        .map(|(a, b)| (a as u16, b as u16))
        .collect();
    Some(Local {
        center: node(v, i),
        nodes: chosen.iter().map(|&j| node(v, j)).collect(),
        edges,
        more: all.len() - chosen.len(),
    })
}

impl Local {
    /// A hash of everything the drawing shows.
    pub fn fingerprint(&self) -> u64 {
        let mut h = Xxh3::new();
        for n in std::iter::once(&self.center).chain(&self.nodes) {
            h.update(n.title.as_bytes());
            h.update(&[0]);
            h.update(n.url.as_bytes());
            h.update(&[0]);
        }
        for &(a, b) in &self.edges {
            h.update(&a.to_le_bytes());
            h.update(&b.to_le_bytes());
        }
        h.update(&(self.more as u64).to_le_bytes());
        h.digest()
    }

    /// Where the note and each neighbour sit, and the drawing's height.
    fn places(&self) -> ([f32; 2], Vec<[f32; 2]>, f32) {
        let k = self.nodes.len();
        let left = k.div_ceil(2);
        let rows = left.max(1) as f32;
        let height = (rows * ROW + 70.0).max(180.0);
        let cy = (height - 16.0) / 2.0;
        let mid = WIDTH / 2.0;
        let column = |j: usize, count: usize, side: f32| {
            let y = cy + (j as f32 - (count as f32 - 1.0) / 2.0) * ROW;
            let t = ((y - cy) / (height / 2.0)).clamp(-1.0, 1.0);
            [mid + side * (110.0 + 70.0 * (1.0 - t * t).sqrt()), y]
        };
        let places = (0..k)
            .map(|j| {
                if j < left {
                    column(j, left, -1.0)
                } else {
                    column(j - left, k - left, 1.0)
                }
            })
            .collect();
        ([mid, cy], places, height)
    }

    /// The graph as an inline `<svg>`: every node a link to its note, the note itself
    /// marked `here`.
    pub fn svg(&self) -> String {
        let (c, places, height) = self.places();
        let mut out = String::with_capacity(256 + self.nodes.len() * 200);
        out.push_str(&format!(
            "<svg class=\"graph graph-local\" viewBox=\"0 0 {} {}\" role=\"group\" aria-label=\"Notes linked with {}\">",
            svg::num(WIDTH),
            svg::num(height),
            crate::html::escape(&self.center.title)
        ));
        svg::edges(&mut out, "edges", places.iter().map(|&p| (c, p)));
        let side = self
            .edges
            .iter()
            .map(|&(a, b)| (places[usize::from(a)], places[usize::from(b)]));
        svg::edges(&mut out, "edges edges-side", side);
        for (n, &p) in self.nodes.iter().zip(&places) {
            let (dx, anchor) = if p[0] < c[0] {
                (-9.0, "end")
            } else {
                (9.0, "start")
            };
            let text = svg::label(&n.title, LABEL_CHARS);
            svg::node(
                &mut out,
                &NodeMark {
                    url: &n.url,
                    title: &n.title,
                    at: p,
                    r: 5.5,
                    class: "node",
                    text: Some((text, [p[0] + dx, p[1] + 4.0], anchor)),
                },
            );
        }
        let text = svg::label(&self.center.title, LABEL_CHARS + 8);
        svg::node(
            &mut out,
            &NodeMark {
                url: &self.center.url,
                title: &self.center.title,
                at: c,
                r: 9.0,
                class: "node here",
                text: Some((text, [c[0], c[1] + 25.0], "middle")),
            },
        );
        if self.more > 0 {
            out.push_str(&format!(
                "<text class=\"more\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">+{} more</text>",
                svg::num(c[0]),
                svg::num(height - 8.0),
                self.more
            ));
        }
        out.push_str("</svg>");
        out
    }
}
