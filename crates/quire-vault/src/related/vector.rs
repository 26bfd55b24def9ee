//! The vectors related lists compare: the [`Embedder`] contract that makes them, the
//! text a note is embedded from ([`note_text`]), and how two vectors compare ([`dot`]).
//! A leaf: embedders, the index and the evaluation build on it, and it imports none of them.

use crate::note::Note;

/// Turns texts into vectors for similarity.
///
/// Contract: `embed` returns one vector per text, in order, each `dim()` floats and of
/// unit L2 length (the zero vector for a text with nothing to embed, such as an empty
/// note); the same text gives the same vector for the life of the embedder. Related
/// lists are cosine similarities between these vectors. The embedder runs when notes
/// change, never per request, so it may be slow, but it must not fetch anything.
pub trait Embedder: Send + Sync {
    /// A short name for logs and reports.
    fn name(&self) -> &str;
    /// Length of every vector.
    fn dim(&self) -> usize;
    /// One unit vector per text.
    fn embed(&self, docs: &[&str]) -> Vec<Vec<f32>>;
}

/// The text a note is embedded from: its title, its tags, and its body with
/// wikilinks written as the text a reader sees (plus the target when a label hides
/// it), embeds and `%%comments%%` dropped.
pub fn note_text(note: &Note) -> String {
    let body = &note.body;
    let mut out = String::with_capacity(body.len() + 128);
    out.push_str(note.title());
    out.push('\n');
    for t in &note.front.tags {
        out.push_str(t);
        out.push(' ');
    }
    out.push('\n');
    // Comments are the author's: they never make notes related either.
    out.push_str(&crate::render::comments::rewrite(
        body,
        &note.links,
        |_, l| {
            if l.embed {
                String::new()
            } else if l.label.is_some() && !l.target.is_empty() {
                format!("{} ({})", l.text(), l.target)
            } else {
                l.text()
            }
        },
    ));
    out
}

/// The dot product of two vectors (the cosine, for unit vectors), summed in a fixed
/// order: `dot(a, b)` and `dot(b, a)` are the same bits, so a pair scores the same
/// whichever note asks. 64 independent sums let the compiler keep several vector
/// registers busy (about twice as fast as 8 on a 1024-float vector, measured).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 64;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for j in 0..LANES {
            acc[j] += x[j] * y[j];
        }
    }
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for j in 0..w {
            acc[j] += acc[j + w];
        }
    }
    acc[0] + tail
}

/// Scales `v` to unit length; a zero or non-finite vector becomes all zeros.
pub(super) fn normalise(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 && n.is_finite() {
        v.iter_mut().for_each(|x| *x /= n);
    } else {
        v.iter_mut().for_each(|x| *x = 0.0);
    }
}
