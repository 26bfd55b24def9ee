//! The whole site's graph, per audience: every visible note and the links between
//! them, laid out by `layout` and drawn once, when a vault state is built ([`Graphs`]),
//! so serving `/graph` is a template fill.
//!
//! Key decisions:
//! - **Bounded**: at most [`SITE_NODES_MAX`] notes, the most linked first; the page
//!   says how many were left out. Labels are drawn for the most linked notes only
//!   ([`LABELS_MAX`]); every other node shows its title as a tooltip and, through the
//!   stylesheet, its label on hover or focus.
//! - **Links bounded too**: at most `graph_edges_max` links are drawn (`render`
//!   budget, `site.toml` `[render]`), spread over the notes — each keeps at most its
//!   share (twice the cap over the notes drawn), in the order of the notes — so a
//!   clique of 1,000 notes (499,500 links, a 12.9 MB page) draws 10,000 of them; the
//!   page says how many links there are in all.
//! - **Laid out only when the graph changes**: a layout is a pure function of the
//!   graph's structure (titles, pages, links), so a new vault state reuses the previous
//!   state's drawing when the [`SiteGraph::fingerprint`] is the same — editing a note's
//!   text costs nothing here.

use std::fmt::Write;
use std::sync::{Arc, OnceLock};

use xxhash_rust::xxh3::Xxh3;

use super::layout::{layout, K};
use super::svg::{self, NodeMark};
use super::Links;
use crate::note::Visibility;
use crate::vault::Vault;

/// Most notes drawn in the site graph.
pub const SITE_NODES_MAX: usize = 2_000;
/// Most labels drawn (on the most linked notes); the others show on hover.
pub const LABELS_MAX: usize = 60;
/// The layout's seed.
const SEED: u64 = 0x5155_4952_4547;
/// Characters of a label.
const LABEL_CHARS: usize = 28;

/// One note of the site graph.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SiteNode {
    title: String,
    url: String,
    degree: usize,
}

/// The site graph of one audience, laid out and drawn.
#[derive(Debug)]
pub struct SiteGraph {
    fingerprint: u64,
    nodes: Vec<SiteNode>,
    edges: Vec<(u32, u32)>,
    total: usize,
    links_total: usize,
    svg: String,
}

impl SiteGraph {
    /// The graph of `links`, reusing a drawing from `previous` when one has the same
    /// structure.
    pub fn build(v: &Vault, links: &Links, previous: &[Arc<SiteGraph>]) -> Arc<SiteGraph> {
        let edges_max = crate::render::budget::limits().graph_edges_max;
        let (nodes, edges, total, links_total) = structure(v, links, edges_max);
        let fingerprint = fingerprint(&nodes, &edges, total);
        if let Some(p) = previous.iter().find(|p| p.fingerprint == fingerprint) {
            return p.clone();
        }
        let pos = layout(nodes.len(), &edges, SEED);
        let svg = draw(&nodes, &edges, &pos);
        Arc::new(SiteGraph {
            fingerprint,
            nodes,
            edges,
            total,
            links_total,
            svg,
        })
    }

    /// A hash of what the drawing shows (the layout follows from it).
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The drawing: an `<svg>` whose nodes link to their notes.
    pub fn svg(&self) -> &str {
        &self.svg
    }

    /// Notes drawn.
    pub fn shown(&self) -> usize {
        self.nodes.len()
    }

    /// Links drawn.
    pub fn links(&self) -> usize {
        self.edges.len()
    }

    /// Links between the notes drawn, in all (more than [`SiteGraph::links`] past
    /// `graph_edges_max`).
    pub fn links_total(&self) -> usize {
        self.links_total
    }

    /// Notes the audience sees in all (more than [`SiteGraph::shown`] past the cap).
    pub fn total(&self) -> usize {
        self.total
    }
}

/// The graph's shape: the notes drawn, the links drawn between them, how many notes
/// the audience sees in all, and how many links the notes drawn have in all.
type Structure = (Vec<SiteNode>, Vec<(u32, u32)>, usize, usize);

/// The notes drawn (by page path), at most `edges_max` links between them, how many
/// notes the audience sees in all and how many links there were.
fn structure(v: &Vault, links: &Links, edges_max: usize) -> Structure {
    let total = links.nodes().count();
    let url = |i: usize| v.notes()[i].url.as_str();
    let chosen = links.pick(links.nodes().collect(), SITE_NODES_MAX, url);
    let all = links.edges_among(&chosen);
    let links_total = all.len();
    let edges = cap_edges(all, chosen.len(), edges_max);
    let mut degree = vec![0usize; chosen.len()];
    for &(a, b) in &edges {
        degree[a as usize] += 1;
        degree[b as usize] += 1;
    }
    let nodes = chosen
        .iter()
        .zip(degree)
        .map(|(&i, degree)| SiteNode {
            title: v.notes()[i].title().to_owned(),
            url: url(i).to_owned(),
            degree,
        })
        .collect();
    (nodes, edges, total, links_total)
}

/// At most `max` of `edges` between `nodes` notes, each note keeping at most twice
/// its share (`2·max / nodes`, one at least), first come first kept.
fn cap_edges(edges: Vec<(u32, u32)>, nodes: usize, max: usize) -> Vec<(u32, u32)> {
    if edges.len() <= max {
        return edges;
    }
    let share = (2 * max / nodes.max(1)).max(1);
    let mut kept_of = vec![0usize; nodes];
    let mut out = Vec::with_capacity(max);
    for (a, b) in edges {
        if out.len() >= max {
            break;
        }
        let (ka, kb) = (kept_of[a as usize], kept_of[b as usize]);
        if ka < share && kb < share {
            kept_of[a as usize] += 1;
            kept_of[b as usize] += 1;
            out.push((a, b));
        }
    }
    out
}

fn fingerprint(nodes: &[SiteNode], edges: &[(u32, u32)], total: usize) -> u64 {
    let mut h = Xxh3::new();
    for n in nodes {
        h.update(n.title.as_bytes());
        h.update(&[0]);
        h.update(n.url.as_bytes());
        h.update(&[0]);
    }
    for &(a, b) in edges {
        h.update(&a.to_le_bytes());
        h.update(&b.to_le_bytes());
    }
    h.update(&(total as u64).to_le_bytes());
    h.digest()
}

/// A node's radius: larger the more linked.
fn radius(degree: usize) -> f32 {
    3.5 + (degree as f32).sqrt().min(8.0) * 0.9
}

/// The drawing; its `width` and `height` are its size at one unit per CSS pixel (the
/// stylesheet scales it to its frame).
fn draw(nodes: &[SiteNode], edges: &[(u32, u32)], pos: &[[f32; 2]]) -> String {
    let (mut lo, mut hi) = ([0.0f32; 2], [0.0f32; 2]);
    for p in pos {
        for a in 0..2 {
            lo[a] = lo[a].min(p[a]);
            hi[a] = hi[a].max(p[a]);
        }
    }
    let (mx, my) = (K + 150.0, K);
    let (x0, y0) = (lo[0] - K, lo[1] - my);
    let (w, h) = (hi[0] - lo[0] + mx + K, hi[1] - lo[1] + 2.0 * my);
    let mut out = String::with_capacity(256 + nodes.len() * 160 + edges.len() * 24);
    let _ = write!(
        out,
        "<svg class=\"graph graph-site\" viewBox=\"{} {} {} {}\" width=\"{}\" height=\"{}\" role=\"group\" aria-label=\"Graph of {} notes\">",
        svg::num(x0),
        svg::num(y0),
        svg::num(w),
        svg::num(h),
        svg::num(w),
        svg::num(h),
        nodes.len()
    );
    let segments = edges
        .iter()
        .map(|&(a, b)| (pos[a as usize], pos[b as usize]));
    svg::edges(&mut out, "edges", segments);
    let mut by_degree: Vec<usize> = (0..nodes.len()).collect();
    by_degree.sort_by(|&a, &b| nodes[b].degree.cmp(&nodes[a].degree).then(a.cmp(&b)));
    let mut labelled = vec![false; nodes.len()];
    for &k in by_degree
        .iter()
        .take(LABELS_MAX.min(nodes.len().div_ceil(4).max(12)))
    {
        labelled[k] = true;
    }
    for (k, n) in nodes.iter().enumerate() {
        let r = radius(n.degree);
        let p = pos[k];
        svg::node(
            &mut out,
            &NodeMark {
                url: &n.url,
                title: &n.title,
                at: p,
                r,
                class: if labelled[k] { "node" } else { "node quiet" },
                text: Some((
                    svg::label(&n.title, LABEL_CHARS),
                    [p[0] + r + 3.0, p[1] + 4.0],
                    "start",
                )),
            },
        );
    }
    out.push_str("</svg>");
    out
}

/// The graph of every audience: who sees which links, and each site graph drawn.
///
/// The public site graph is laid out when the vault state is built (its `/graph`
/// page is cached, and its fingerprint is that page's version); signed-in readers'
/// and admins' graphs are laid out on their first `/graph` of this state (their page
/// is rendered per request anyway), so a reload of a large vault pays for one
/// layout, not three.
#[derive(Debug)]
pub struct Graphs {
    links: [Links; 3],
    site: [OnceLock<Arc<SiteGraph>>; 3],
    /// Drawings of the state before, reused by a layout when its graph is the same.
    previous: Vec<Arc<SiteGraph>>,
}

fn slot(audience: Visibility) -> usize {
    match audience {
        Visibility::Public => 0,
        Visibility::Private => 1,
        Visibility::Draft => 2,
    }
}

impl Graphs {
    /// Every audience's links in `v`, and the public site graph laid out, reusing
    /// `previous`'s drawings where the graph did not change.
    pub fn build(v: &Vault, previous: Option<&Graphs>) -> Graphs {
        let links =
            [Visibility::Public, Visibility::Private, Visibility::Draft].map(|a| Links::new(v, a));
        let previous: Vec<Arc<SiteGraph>> = previous.map_or_else(Vec::new, |p| p.drawn());
        let g = Graphs {
            links,
            site: Default::default(),
            previous,
        };
        g.site(v, Visibility::Public);
        g
    }

    /// Who sees which links, for `audience`.
    pub fn links(&self, audience: Visibility) -> &Links {
        &self.links[slot(audience)]
    }

    /// The site graph `audience` sees in `v` (the vault these graphs were built
    /// from), laid out now if it was not yet.
    pub fn site(&self, v: &Vault, audience: Visibility) -> &SiteGraph {
        self.site[slot(audience)].get_or_init(|| {
            let mut reuse = self.drawn();
            reuse.extend(self.previous.iter().cloned());
            SiteGraph::build(v, &self.links[slot(audience)], &reuse)
        })
    }

    /// The public site graph (always laid out).
    pub fn public(&self) -> &SiteGraph {
        self.site[0].get().expect("laid out by `build`")
    }

    /// The drawings made so far.
    fn drawn(&self) -> Vec<Arc<SiteGraph>> {
        self.site.iter().filter_map(|g| g.get().cloned()).collect()
    }
}
