//! One partition of the related-notes index: the vectors of every note of one
//! visibility, searched exactly (a scan) while the partition is small and through an
//! HNSW graph (`hnsw_rs`) past a size threshold.
//!
//! Key decisions:
//! - **Vectors live in one flat array**, a row per note, so an exact scan reads memory
//!   in order; removing a note moves the last row into its place.
//! - **HNSW has no delete**: a changed or removed note's old point stays in the graph
//!   as a tombstone, skipped by a search filter, and the graph is rebuilt from the
//!   live rows once tombstones outnumber live points. A point's data id is never
//!   reused, so a tombstone can never be mistaken for a live note.
//! - **HNSW answers are re-scored exactly** with [`super::dot`]: the graph only picks
//!   candidates; the order and the scores kept are the same arithmetic as the exact
//!   scan's.
//! - The graph switches on past `exact_max` notes and off again below three quarters
//!   of it, so a vault hovering at the threshold does not rebuild a graph per edit.

use std::cmp::Ordering;

use hnsw_rs::anndists::dist::distances::Distance;
use hnsw_rs::hnsw::Hnsw;

use super::slot::{Hit, Slot, NEIGHBOURS, SCORE_MIN};
use super::vector::dot;

/// Links per node and layer in the graph (HNSW's `M`).
const HNSW_LINKS: usize = 16;
/// Layers at most.
const HNSW_LAYERS: usize = 16;
/// Candidates explored per insertion.
const HNSW_EF_CONSTRUCTION: usize = 128;
/// Candidates explored per search.
const HNSW_EF_SEARCH: usize = 96;
/// Extra answers asked of a search, for the ones the filter drops (the querying note
/// itself, and any close tombstones).
const HNSW_SLACK: usize = 8;
/// A data id that no longer names a live row.
const DEAD: u32 = u32::MAX;

/// `1 - cos` for unit vectors, never negative (rounding can push a cosine past 1).
#[derive(Debug, Clone, Copy, Default)]
struct CosineDistance;

impl Distance<f32> for CosineDistance {
    fn eval(&self, a: &[f32], b: &[f32]) -> f32 {
        (1.0 - dot(a, b)).max(0.0)
    }
}

/// The HNSW graph over a partition's rows.
struct Ann {
    hnsw: Hnsw<'static, f32, CosineDistance>,
    /// Data id → slot, or [`DEAD`].
    owner: Vec<u32>,
    /// Live points in the graph.
    live: usize,
}

impl Ann {
    fn new(capacity: usize) -> Ann {
        Ann {
            hnsw: Hnsw::new(
                HNSW_LINKS,
                capacity.max(1),
                HNSW_LAYERS,
                HNSW_EF_CONSTRUCTION,
                CosineDistance,
            ),
            owner: Vec::with_capacity(capacity),
            live: 0,
        }
    }

    /// Inserts `v` for `slot`; returns its data id.
    fn insert(&mut self, slot: u32, v: &[f32]) -> usize {
        let id = self.owner.len();
        self.owner.push(slot);
        self.live += 1;
        // Serial insertion: `parallel_insert` races and makes the graph differ from
        // run to run, and related lists must be the same for the same vault.
        self.hnsw.insert_slice((v, id));
        id
    }

    fn kill(&mut self, id: usize) {
        if let Some(o) = self.owner.get_mut(id) {
            if *o != DEAD {
                *o = DEAD;
                self.live -= 1;
            }
        }
    }

    /// Slots of the (approximately) nearest live points to `q`, `exclude` left out.
    fn candidates(&self, q: &[f32], exclude: u32, k: usize) -> Vec<u32> {
        let want = k + HNSW_SLACK;
        let filter = |id: &usize| {
            self.owner
                .get(*id)
                .is_some_and(|&o| o != DEAD && o != exclude)
        };
        self.hnsw
            .search_filter(q, want, HNSW_EF_SEARCH.max(want), Some(&filter))
            .into_iter()
            .filter_map(|n| self.owner.get(n.d_id).copied())
            .filter(|&o| o != DEAD && o != exclude)
            .collect()
    }
}

/// The vectors of the notes of one visibility.
pub(super) struct Partition {
    dim: usize,
    /// Row → slot.
    rows: Vec<u32>,
    /// Row-major vectors, `dim` floats a row.
    data: Vec<f32>,
    /// Row → data id in `ann` (meaningful while `ann` is present).
    ids: Vec<usize>,
    ann: Option<Ann>,
}

impl Partition {
    pub(super) fn new(dim: usize) -> Partition {
        Partition {
            dim,
            rows: Vec::new(),
            data: Vec::new(),
            ids: Vec::new(),
            ann: None,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether searches go through the HNSW graph.
    pub(super) fn approximate(&self) -> bool {
        self.ann.is_some()
    }

    pub(super) fn vector(&self, row: u32) -> &[f32] {
        let at = row as usize * self.dim;
        &self.data[at..at + self.dim]
    }

    /// Rows with their slots, in row order.
    pub(super) fn rows(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.rows.iter().enumerate().map(|(r, &s)| (r as u32, s))
    }

    /// Appends `v` (unit length, `dim` floats) for `slot`; returns its row.
    pub(super) fn push(&mut self, slot: u32, v: &[f32]) -> u32 {
        debug_assert_eq!(v.len(), self.dim);
        let row = self.rows.len() as u32;
        self.rows.push(slot);
        self.data.extend_from_slice(v);
        let id = match &mut self.ann {
            Some(a) => a.insert(slot, v),
            None => usize::MAX,
        };
        self.ids.push(id);
        row
    }

    /// Removes `row`; returns the slot of the row moved into its place, if any.
    pub(super) fn remove(&mut self, row: u32) -> Option<u32> {
        let r = row as usize;
        let last = self.rows.len() - 1;
        if let Some(a) = &mut self.ann {
            a.kill(self.ids[r]);
        }
        self.rows.swap_remove(r);
        self.ids.swap_remove(r);
        if r != last {
            let (head, tail) = self.data.split_at_mut(last * self.dim);
            head[r * self.dim..(r + 1) * self.dim].copy_from_slice(&tail[..self.dim]);
        }
        self.data.truncate(last * self.dim);
        (r != last).then(|| self.rows[r])
    }

    /// Builds, drops or compacts the graph for the partition's size (see the module
    /// doc). Returns whether it changed.
    pub(super) fn sync(&mut self, exact_max: usize) -> bool {
        let n = self.rows.len();
        let rebuild = match &self.ann {
            None => n > exact_max,
            Some(_) if n < exact_max - exact_max / 4 => {
                self.ann = None;
                return true;
            }
            Some(a) => a.owner.len() - a.live > a.live,
        };
        if rebuild {
            let mut ann = Ann::new(n);
            for r in 0..n {
                let at = r * self.dim;
                self.ids[r] = ann.insert(self.rows[r], &self.data[at..at + self.dim]);
            }
            self.ann = Some(ann);
        }
        rebuild
    }

    /// The best [`NEIGHBOURS`] notes of this partition for the unit vector `q`, best
    /// first, `exclude` left out, none scoring under [`SCORE_MIN`].
    pub(super) fn top(&self, q: &[f32], exclude: u32, slots: &[Slot]) -> Vec<Hit> {
        let mut top = Vec::with_capacity(NEIGHBOURS + 1);
        match &self.ann {
            None => {
                for (row, &s) in self.rows.iter().enumerate() {
                    if s != exclude {
                        let at = row * self.dim;
                        offer(&mut top, q_hit(q, &self.data[at..at + self.dim], s), slots);
                    }
                }
            }
            Some(a) => {
                for s in a.candidates(q, exclude, NEIGHBOURS) {
                    if let Some(row) = slots[s as usize].row {
                        offer(&mut top, q_hit(q, self.vector(row), s), slots);
                    }
                }
            }
        }
        top
    }

    /// [`Partition::top`] for several `(query, exclude)` at once. An exact scan reads
    /// each row once for the whole block of queries (a block fits in cache), which
    /// makes a build several times faster than one scan per query.
    pub(super) fn top_block(&self, queries: &[(&[f32], u32)], slots: &[Slot]) -> Vec<Vec<Hit>> {
        if self.ann.is_some() {
            return queries
                .iter()
                .map(|&(q, ex)| self.top(q, ex, slots))
                .collect();
        }
        let mut tops = vec![Vec::with_capacity(NEIGHBOURS + 1); queries.len()];
        for (row, &s) in self.rows.iter().enumerate() {
            let at = row * self.dim;
            let v = &self.data[at..at + self.dim];
            for (top, &(q, ex)) in tops.iter_mut().zip(queries) {
                if s != ex {
                    offer(top, q_hit(q, v, s), slots);
                }
            }
        }
        tops
    }
}

fn q_hit(q: &[f32], v: &[f32], slot: u32) -> Hit {
    Hit {
        slot,
        score: dot(q, v),
    }
}

/// The order of a related list: higher score first, then path (so ties, and the
/// order of notes with equal vectors, do not depend on note indices or insertion).
pub(super) fn order(slots: &[Slot], a: &Hit, b: &Hit) -> Ordering {
    b.score.total_cmp(&a.score).then_with(|| {
        slots[a.slot as usize]
            .path
            .cmp(&slots[b.slot as usize].path)
    })
}

/// Adds `hit` to the sorted list `top` if it belongs in the best [`NEIGHBOURS`];
/// returns whether it went in.
pub(super) fn offer(top: &mut Vec<Hit>, hit: Hit, slots: &[Slot]) -> bool {
    // NaN (from a broken embedder) is turned away too.
    if hit.score.is_nan() || hit.score < SCORE_MIN {
        return false;
    }
    if top.len() == NEIGHBOURS {
        let last = &top[NEIGHBOURS - 1];
        if hit.score < last.score || order(slots, &hit, last) != Ordering::Less {
            return false;
        }
    }
    let at = top.partition_point(|h| order(slots, h, &hit) == Ordering::Less);
    top.insert(at, hit);
    top.truncate(NEIGHBOURS);
    true
}
