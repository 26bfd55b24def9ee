//! The link graph a reader sees: a note's local graph (its links and backlinks, one
//! hop) and the whole site's graph, both drawn as static SVG on the server, so a page
//! needs no script to show them.
//!
//! - [`Links`]: the notes one audience may see and the links between them,
//!   undirected, built once per vault state.
//! - [`local`]: a note's neighbours as a bounded model ([`Local`]), drawn in two
//!   columns around the note; its [`Local::fingerprint`] goes into the page's version.
//! - [`site`]: every visible note, laid out by `layout` (Fruchterman–Reingold, fixed
//!   seed, bounded work) when the vault is loaded, never per request.
//! - `svg`: the drawing helpers both share (escaping, labels, numbers).
//!
//! Key decisions:
//! - **A graph holds only notes its reader may see.** [`Links`] is built for one
//!   audience and leaves out every other note, with its links: a private note is no
//!   node, no edge, no count and no title in an anonymous page, and does not even pull
//!   two public notes together in the site layout (each audience is laid out apart).
//! - Links are the ones backlinks count: wikilinks that resolve to a published note,
//!   embeds and self-links aside, without direction (a link either way is one edge).

use crate::note::Visibility;
use crate::vault::Vault;

pub(crate) mod layout;
pub mod local;
pub mod site;
mod svg;

#[cfg(test)]
mod tests;

pub use local::{local, Local};
pub use site::{Graphs, SiteGraph};

/// The notes one audience may see and the links between them, without direction.
#[derive(Debug, Clone)]
pub struct Links {
    audience: Visibility,
    /// Per note (vault index): whether the audience sees it and it is published.
    shown: Vec<bool>,
    /// Per note: its visible neighbours, sorted, once each; empty for hidden notes.
    adjacent: Vec<Vec<u32>>,
}

impl Links {
    /// The visible graph of `v` for `audience`.
    pub fn new(v: &Vault, audience: Visibility) -> Links {
        let notes = v.notes();
        let shown: Vec<bool> = notes
            .iter()
            .enumerate()
            .map(|(i, n)| n.visibility() <= audience && v.by_url(&n.url) == Some(i))
            .collect();
        let mut adjacent: Vec<Vec<u32>> = vec![Vec::new(); notes.len()];
        for i in (0..notes.len()).filter(|&i| shown[i]) {
            for t in v.targets(i).iter().flatten().copied() {
                if t != i && shown[t] {
                    adjacent[i].push(t as u32);
                    adjacent[t].push(i as u32);
                }
            }
        }
        for a in &mut adjacent {
            a.sort_unstable();
            a.dedup();
        }
        Links {
            audience,
            shown,
            adjacent,
        }
    }

    /// Who this graph is for.
    pub fn audience(&self) -> Visibility {
        self.audience
    }

    /// Whether note `i` is in the graph.
    pub fn sees(&self, i: usize) -> bool {
        self.shown.get(i).copied().unwrap_or(false)
    }

    /// The visible notes linked with note `i` either way.
    pub fn neighbours(&self, i: usize) -> &[u32] {
        self.adjacent.get(i).map_or(&[], Vec::as_slice)
    }

    /// How many visible notes note `i` is linked with.
    pub fn degree(&self, i: usize) -> usize {
        self.neighbours(i).len()
    }

    /// Every visible note, in vault order.
    pub fn nodes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.shown.len()).filter(|&i| self.shown[i])
    }

    /// `notes` cut to the `max` most linked (ties in `key` order), then in `key`
    /// order: what a bounded drawing shows.
    pub(crate) fn pick<K: Ord>(
        &self,
        mut notes: Vec<usize>,
        max: usize,
        key: impl Fn(usize) -> K,
    ) -> Vec<usize> {
        if notes.len() > max {
            notes.sort_by(|&a, &b| {
                self.degree(b)
                    .cmp(&self.degree(a))
                    .then_with(|| key(a).cmp(&key(b)))
            });
            notes.truncate(max);
        }
        notes.sort_by_key(|&a| key(a));
        notes
    }

    /// The links among `chosen` (note indices) as pairs of positions in `chosen`,
    /// each once, the lower position first.
    pub(crate) fn edges_among(&self, chosen: &[usize]) -> Vec<(u32, u32)> {
        let at: std::collections::HashMap<usize, u32> = chosen
            .iter()
            .enumerate()
            .map(|(k, &i)| (i, k as u32))
            .collect();
        let mut edges = Vec::new();
        for (a, &i) in chosen.iter().enumerate() {
            for &m in self.neighbours(i) {
                if let Some(&b) = at.get(&(m as usize)) {
                    if b as usize > a {
                        edges.push((a as u32, b));
                    }
                }
            }
        }
        edges
    }
}
