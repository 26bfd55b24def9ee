//! Judging an embedder on hand-labelled related pairs (the example vault's are in
//! `crates/quire-vault/tests/data/related_pairs.toml`): for each pair `(a, b)`, in
//! both directions, where `b` ranks among all of `a`'s neighbours (every note, as an
//! admin sees them) by exact cosine. Reported as recall@5 (is `b` in `a`'s related
//! list?) and mean reciprocal rank. Used by the tests, the `related_eval` example and
//! `tools/embed-eval`, so every embedder is judged by the same code.

use serde::Deserialize;

use super::slot::NEIGHBOURS;
use super::vector::{dot, normalise, note_text, Embedder};
use crate::vault::Vault;

/// Two notes a person judged related.
#[derive(Debug, Clone, Deserialize)]
pub struct Pair {
    /// Vault-relative path.
    pub a: String,
    /// Vault-relative path.
    pub b: String,
    /// Why they are related.
    pub why: String,
    /// `"hard"`: the notes share a theme more than words.
    #[serde(default)]
    pub(crate) kind: Option<String>,
}

#[derive(Deserialize)]
struct PairsFile {
    pair: Vec<Pair>,
}

/// Why a set of pairs cannot be scored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The pairs file is not `[[pair]]` tables.
    #[error("pairs file: {0}")]
    Pairs(#[from] toml::de::Error),
    /// A pair names a path that is not a note of the vault.
    #[error("{0}: not in the vault")]
    NotInVault(String),
}

/// Parses a pairs file (`[[pair]]` tables with `a`, `b`, `why`, optional `kind`).
pub fn parse_pairs(text: &str) -> Result<Vec<Pair>, EvalError> {
    Ok(toml::from_str::<PairsFile>(text)?.pair)
}

/// How an embedder did on a set of pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// Pairs judged.
    pub(crate) pairs: usize,
    /// Share of directions `a → b` with `b` in `a`'s top [`NEIGHBOURS`].
    pub recall: f64,
    /// Mean of `1 / rank of b` over directions.
    pub mrr: f64,
    /// [`Score::recall`] over the `kind = "hard"` pairs only.
    pub recall_hard: f64,
    /// Directions that missed the top [`NEIGHBOURS`]: `(a, b, rank of b)`.
    pub misses: Vec<(String, String, usize)>,
}

/// Every note's vector from `embedder`, in vault order.
pub fn vectors(vault: &Vault, embedder: &dyn Embedder) -> Vec<Vec<f32>> {
    let texts: Vec<String> = vault.notes().iter().map(note_text).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut out = Vec::with_capacity(refs.len());
    for batch in refs.chunks(32) {
        out.extend(embedder.embed(batch));
    }
    for v in &mut out {
        normalise(v);
    }
    out
}

/// Scores `vectors` (one per note of `vault`) on `pairs`. A pair naming a path
/// not in the vault is an error.
pub fn score(vault: &Vault, vectors: &[Vec<f32>], pairs: &[Pair]) -> Result<Score, EvalError> {
    let notes = vault.notes();
    let find = |p: &str| {
        notes
            .iter()
            .position(|n| n.path == p)
            .ok_or_else(|| EvalError::NotInVault(p.to_owned()))
    };
    let (mut hits, mut rr, mut hard, mut hard_hits) = (0usize, 0f64, 0usize, 0usize);
    let mut misses = Vec::new();
    for p in pairs {
        let (a, b) = (find(&p.a)?, find(&p.b)?);
        for (x, y) in [(a, b), (b, a)] {
            let rank = rank(vault, vectors, x, y);
            rr += 1.0 / rank as f64;
            let hit = rank <= NEIGHBOURS;
            hits += usize::from(hit);
            if p.kind.as_deref() == Some("hard") {
                hard += 1;
                hard_hits += usize::from(hit);
            }
            if !hit {
                misses.push((notes[x].path.clone(), notes[y].path.clone(), rank));
            }
        }
    }
    let n = (2 * pairs.len()).max(1) as f64;
    Ok(Score {
        pairs: pairs.len(),
        recall: hits as f64 / n,
        mrr: rr / n,
        recall_hard: hard_hits as f64 / hard.max(1) as f64,
        misses,
    })
}

/// 1 + the notes other than `x` ranked above `y` for `x` (score, then path: the
/// order of a related list).
fn rank(vault: &Vault, vectors: &[Vec<f32>], x: usize, y: usize) -> usize {
    let notes = vault.notes();
    let sy = dot(&vectors[x], &vectors[y]);
    1 + (0..notes.len())
        .filter(|&z| z != x && z != y)
        .filter(|&z| {
            let sz = dot(&vectors[x], &vectors[z]);
            sz > sy || (sz == sy && notes[z].path < notes[y].path)
        })
        .count()
}
