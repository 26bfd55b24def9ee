//! Fruchterman–Reingold force-directed layout (Fruchterman and Reingold, "Graph
//! Drawing by Force-directed Placement", 1991): nodes repel each other with `k²/d`,
//! linked nodes attract with `d²/k`, and every move is limited by a temperature that
//! cools linearly to nothing. A weak pull towards the middle keeps separate pieces
//! (and unlinked notes) near the rest instead of at the frame's edges.
//!
//! Key decisions:
//! - **Deterministic**: start positions come from a fixed-seed generator, the loops
//!   run in node order, so the same graph is always drawn the same way (a page's
//!   version can be a hash of the graph alone).
//! - **Bounded work**: up to [`EXACT_MAX`] nodes every pair repels every other (O(n²)
//!   per iteration); above that, the paper's grid variant: a node is only repelled by
//!   nodes in its own and the eight surrounding cells of side `2k`. The iteration
//!   count is what a budget of pair evaluations ([`PAIRS_BUDGET`]) allows, between
//!   [`ITERATIONS_MIN`] and [`ITERATIONS_MAX`]. The caller caps the node count.

/// Largest graph laid out with exact all-pairs repulsion.
pub(crate) const EXACT_MAX: usize = 600;
/// Pair evaluations (repulsions) one layout may spend: about 0.4 s for 2,000 notes
/// on a busy 2-core machine (the three audiences of a 10,000-note vault took 1.2 s in
/// all; a reload now lays out the public one only, see `site::Graphs`).
pub(crate) const PAIRS_BUDGET: usize = 10_000_000;
/// Fewest iterations, whatever the size.
pub(crate) const ITERATIONS_MIN: usize = 40;
/// Most iterations.
pub(crate) const ITERATIONS_MAX: usize = 300;

/// The ideal distance between two nodes, in SVG units.
pub(crate) const K: f32 = 42.0;
/// The pull towards the middle, per unit of distance.
const GRAVITY: f32 = 0.12;

/// A small fixed-seed generator (SplitMix64) for the start positions.
struct SplitMix(u64);

impl SplitMix {
    fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Positions of `n` nodes linked by `edges` (pairs of node indices), centred on 0.
pub(crate) fn layout(n: usize, edges: &[(u32, u32)], seed: u64) -> Vec<[f32; 2]> {
    if n <= 1 {
        return vec![[0.0, 0.0]; n];
    }
    let side = K * (n as f32).sqrt() * 1.5;
    let mut rng = SplitMix(seed);
    let mut pos: Vec<[f32; 2]> = (0..n)
        .map(|_| [(rng.next_f32() - 0.5) * side, (rng.next_f32() - 0.5) * side])
        .collect();
    let iterations = iterations(n);
    let mut disp = vec![[0.0f32; 2]; n];
    for it in 0..iterations {
        let t = side / 10.0 * (1.0 - it as f32 / iterations as f32) + K / 50.0;
        disp.iter_mut().for_each(|d| *d = [0.0, 0.0]);
        if n <= EXACT_MAX {
            repel_all(&pos, &mut disp);
        } else {
            repel_grid(&pos, &mut disp);
        }
        attract(&pos, edges, &mut disp);
        for (p, d) in pos.iter_mut().zip(&disp) {
            let d = [d[0] - p[0] * GRAVITY, d[1] - p[1] * GRAVITY];
            let len = (d[0] * d[0] + d[1] * d[1]).sqrt().max(1e-6);
            let step = len.min(t) / len;
            p[0] += d[0] * step;
            p[1] += d[1] * step;
        }
    }
    pos
}

/// Iterations for `n` nodes within the pair budget.
pub(crate) fn iterations(n: usize) -> usize {
    let per = if n <= EXACT_MAX {
        n * n / 2
    } else {
        // About nine cells of about four nodes each, per node.
        n * 36
    };
    (PAIRS_BUDGET / per.max(1)).clamp(ITERATIONS_MIN, ITERATIONS_MAX)
}

/// The repulsion between two nodes, added to both.
fn push_apart(pos: &[[f32; 2]], disp: &mut [[f32; 2]], u: usize, v: usize) {
    let dx = pos[u][0] - pos[v][0];
    let dy = pos[u][1] - pos[v][1];
    let d2 = (dx * dx + dy * dy).max(0.01);
    let f = K * K / d2;
    disp[u][0] += dx * f;
    disp[u][1] += dy * f;
    disp[v][0] -= dx * f;
    disp[v][1] -= dy * f;
}

fn repel_all(pos: &[[f32; 2]], disp: &mut [[f32; 2]]) {
    for u in 0..pos.len() {
        for v in u + 1..pos.len() {
            push_apart(pos, disp, u, v);
        }
    }
}

/// Repulsion between nodes closer than a cell (`2k`) apart, through a grid of cells.
fn repel_grid(pos: &[[f32; 2]], disp: &mut [[f32; 2]]) {
    let cell = 2.0 * K;
    let (mut lo, mut hi) = ([f32::MAX; 2], [f32::MIN; 2]);
    for p in pos {
        for a in 0..2 {
            lo[a] = lo[a].min(p[a]);
            hi[a] = hi[a].max(p[a]);
        }
    }
    // At most a few thousand cells a side: positions are bounded by the temperature.
    let cols = (((hi[0] - lo[0]) / cell) as usize + 1).min(4096);
    let rows = (((hi[1] - lo[1]) / cell) as usize + 1).min(4096);
    let at = |p: &[f32; 2]| {
        let c = (((p[0] - lo[0]) / cell) as usize).min(cols - 1);
        let r = (((p[1] - lo[1]) / cell) as usize).min(rows - 1);
        (c, r)
    };
    let mut cells: Vec<Vec<u32>> = vec![Vec::new(); cols * rows];
    for (i, p) in pos.iter().enumerate() {
        let (c, r) = at(p);
        cells[r * cols + c].push(i as u32);
    }
    for (u, p) in pos.iter().enumerate() {
        let (c, r) = at(p);
        for rr in r.saturating_sub(1)..=(r + 1).min(rows - 1) {
            for cc in c.saturating_sub(1)..=(c + 1).min(cols - 1) {
                for &v in &cells[rr * cols + cc] {
                    let v = v as usize;
                    if v > u {
                        let dx = pos[u][0] - pos[v][0];
                        let dy = pos[u][1] - pos[v][1];
                        if dx * dx + dy * dy < cell * cell {
                            push_apart(pos, disp, u, v);
                        }
                    }
                }
            }
        }
    }
}

fn attract(pos: &[[f32; 2]], edges: &[(u32, u32)], disp: &mut [[f32; 2]]) {
    for &(u, v) in edges {
        let (u, v) = (u as usize, v as usize);
        let dx = pos[u][0] - pos[v][0];
        let dy = pos[u][1] - pos[v][1];
        let d = (dx * dx + dy * dy).sqrt();
        let f = d / K;
        disp[u][0] -= dx * f;
        disp[u][1] -= dy * f;
        disp[v][0] += dx * f;
        disp[v][1] += dy * f;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(a: [f32; 2], b: [f32; 2]) -> f32 {
        ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
    }

    #[test]
    fn the_same_graph_is_laid_out_the_same_way() {
        let edges = [(0, 1), (1, 2), (2, 0), (3, 4)];
        assert_eq!(layout(6, &edges, 7), layout(6, &edges, 7));
        assert_eq!(layout(0, &edges, 7), Vec::<[f32; 2]>::new());
        assert_eq!(layout(1, &[], 7), vec![[0.0, 0.0]]);
    }

    #[test]
    fn linked_nodes_end_closer_than_unlinked_ones_and_none_coincide() {
        // Two triangles joined by nothing: each triangle's sides are shorter than
        // the distance between the triangles.
        let edges = [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)];
        let p = layout(6, &edges, 1);
        let inside = edges
            .iter()
            .map(|&(a, b)| dist(p[a as usize], p[b as usize]));
        let longest_side = inside.fold(0.0f32, f32::max);
        let apart = dist(p[0], p[3]).min(dist(p[1], p[4])).min(dist(p[2], p[5]));
        assert!(longest_side < apart, "{longest_side} vs {apart}");
        for a in 0..6 {
            for b in a + 1..6 {
                assert!(dist(p[a], p[b]) > K / 4.0, "{a} and {b} overlap: {p:?}");
            }
        }
    }

    #[test]
    fn large_graphs_use_the_grid_and_stay_finite_and_spread() {
        let n = EXACT_MAX + 200;
        let edges: Vec<(u32, u32)> = (0..n as u32 - 1).map(|i| (i, i + 1)).collect();
        let p = layout(n, &edges, 3);
        assert!(p.iter().all(|q| q[0].is_finite() && q[1].is_finite()));
        let close = (0..n - 1)
            .filter(|&i| dist(p[i], p[i + 1]) < K / 10.0)
            .count();
        assert!(close < n / 20, "{close} linked pairs nearly coincide");
        assert!(iterations(n) >= ITERATIONS_MIN && iterations(2000) <= ITERATIONS_MAX);
    }
}
