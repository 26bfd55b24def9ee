//! The default embedder: TF-IDF vectors in a hashed feature space. Pure Rust, no
//! model, nothing fetched or loaded at run time.
//!
//! Key decisions:
//! - **Hashed, signed features** (the "hashing trick"): a term's weight goes to bucket
//!   `xxh3(term) % dim` with a sign from another bit of the hash, so the space is
//!   fixed (`dim` never changes as words come and go) and a term first seen after the
//!   fit still has a place. What is approximate: two terms sharing a bucket add up
//!   (or, with opposite signs, cancel), so a cosine here differs from the cosine of
//!   the unhashed TF-IDF vectors by a small error that shrinks as `dim` grows;
//!   everything else (tokens, weights, normalisation) is exact and deterministic.
//! - **IDF is fitted once and then frozen.** IDF depends on the corpus, so an
//!   embedder whose IDF moved with every edit would change every note's vector on
//!   every edit, and no incremental update could stay exact. A [`Lexical`] keeps the
//!   IDF of the documents it was fitted on; terms it never saw get the IDF of a term
//!   in no document (the largest). An incremental [`super::Related::update`] with the
//!   same `Lexical` therefore equals a full [`super::Related::build`] with it. The IDF
//!   drifts from the vault's true statistics as notes change; the caller refits (a
//!   new `Lexical`, then a full build) on reload, or when [`Lexical::drift`] passes a
//!   bound of its choosing.
//! - **Weights**: sublinear term frequency `1 + ln(tf)`, smoothed IDF
//!   `ln((1 + n) / (1 + df)) + 1`, English stop words dropped, a light plural
//!   stemmer (Harman's "S" stemmer), then L2 normalisation.

use std::collections::{HashMap, HashSet};

use super::vector::{normalise, note_text, Embedder};
use crate::note::Visibility;
use crate::vault::Vault;

/// English function words that carry no topic.
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between",
    "both", "but", "by", "can", "could", "did", "didn", "do", "does", "doesn", "doing", "don",
    "down", "during", "each", "even", "every", "few", "for", "from", "further", "get", "gets",
    "got", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i",
    "if", "in", "into", "is", "isn", "it", "its", "itself", "just", "ll", "me", "might", "more",
    "most", "much", "must", "my", "no", "nor", "not", "now", "of", "off", "on", "once", "one",
    "only", "or", "other", "our", "ours", "out", "over", "own", "re", "same", "she", "should",
    "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "then", "there",
    "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "us", "ve",
    "very", "was", "wasn", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
    "why", "will", "with", "won", "would", "you", "your", "yours",
];

/// TF-IDF vectors hashed into `dim` signed buckets (see the module doc).
#[derive(Debug, Clone)]
pub struct Lexical {
    dim: usize,
    name: String,
    /// Term → IDF, as fitted.
    idf: HashMap<String, f32>,
    /// The IDF of a term in no fitted document.
    idf_unseen: f32,
    /// How many documents the IDF was fitted on.
    docs: usize,
}

impl Lexical {
    /// Buckets of the default feature space. Chosen on the example vault's labelled
    /// pairs (docs/related-notes.md): quality stops improving well before this, and
    /// an exact scan's cost grows with it.
    const DIM: usize = 1024;

    /// Fits IDF on `docs`, with [`Lexical::DIM`] buckets.
    #[cfg(test)]
    fn fit(docs: &[&str]) -> Lexical {
        Lexical::fit_with_dim(docs, Lexical::DIM)
    }

    /// Fits IDF on `docs`, with `dim` buckets (at least 1).
    pub fn fit_with_dim(docs: &[&str], dim: usize) -> Lexical {
        let mut df: HashMap<String, u32> = HashMap::new();
        for d in docs {
            let terms: HashSet<String> = terms(d).collect();
            for t in terms {
                *df.entry(t).or_default() += 1;
            }
        }
        let n = docs.len() as f32;
        let idf_of = |df: u32| ((1.0 + n) / (1.0 + df as f32)).ln() + 1.0;
        let idf = df.into_iter().map(|(t, c)| (t, idf_of(c))).collect();
        let dim = dim.max(1);
        Lexical {
            dim,
            name: format!("lexical-tfidf-{dim}"),
            idf,
            idf_unseen: idf_of(0),
            docs: docs.len(),
        }
    }

    /// Fits IDF on the text ([`super::note_text`]) of the notes `audience` may see.
    ///
    /// With `Visibility::Public`, nothing in a public note's vector depends on a
    /// hidden note's words, so a public page's related list is a function of public
    /// notes only (the anonymous cache never holds anything a private note shaped).
    /// On a vault with few public notes that IDF is weak for signed-in readers'
    /// lists: pass a wider audience there if that matters more.
    pub fn for_vault(vault: &Vault, audience: Visibility) -> Lexical {
        Lexical::for_vault_with_dim(vault, audience, Lexical::DIM)
    }

    /// [`Lexical::for_vault`] with `dim` buckets.
    pub fn for_vault_with_dim(vault: &Vault, audience: Visibility, dim: usize) -> Lexical {
        let texts: Vec<String> = vault
            .notes()
            .iter()
            .filter(|n| n.visibility() <= audience)
            .map(note_text)
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        Lexical::fit_with_dim(&refs, dim)
    }

    /// How many documents the IDF was fitted on.
    pub fn fitted_docs(&self) -> usize {
        self.docs
    }

    /// How far `docs`' IDF has moved from the fitted one: the mean absolute
    /// difference of IDF over the terms of `docs`, relative to the fitted IDF
    /// (0: none). A caller refits when it passes a bound it chooses (0.05 is a
    /// reasonable one); this costs a pass over every document, so run it off the
    /// request path, like a rebuild.
    pub fn drift(&self, docs: &[&str]) -> f32 {
        let mut df: HashMap<String, u32> = HashMap::new();
        for d in docs {
            let terms: HashSet<String> = terms(d).collect();
            for t in terms {
                *df.entry(t).or_default() += 1;
            }
        }
        if df.is_empty() {
            return 0.0;
        }
        let n = docs.len() as f32;
        let mut sum = 0.0f32;
        for (t, &c) in &df {
            let now = ((1.0 + n) / (1.0 + c as f32)).ln() + 1.0;
            let fitted = self.idf.get(t).copied().unwrap_or(self.idf_unseen);
            sum += (now - fitted).abs() / fitted;
        }
        sum / df.len() as f32
    }

    fn vector(&self, text: &str) -> Vec<f32> {
        let mut tf: HashMap<String, u32> = HashMap::new();
        for t in terms(text) {
            *tf.entry(t).or_default() += 1;
        }
        // Sorted so the float sums into shared buckets happen in one order on every
        // run (HashMap iteration order is random per process).
        let mut tf: Vec<(String, u32)> = tf.into_iter().collect();
        tf.sort_unstable();
        let mut v = vec![0.0f32; self.dim];
        for (t, c) in tf {
            let idf = self.idf.get(&t).copied().unwrap_or(self.idf_unseen);
            let w = (1.0 + (c as f32).ln()) * idf;
            let h = xxhash_rust::xxh3::xxh3_64(t.as_bytes());
            let bucket = (h % self.dim as u64) as usize;
            let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
            v[bucket] += sign * w;
        }
        normalise(&mut v);
        v
    }
}

impl Embedder for Lexical {
    fn name(&self) -> &str {
        &self.name
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, docs: &[&str]) -> Vec<Vec<f32>> {
        docs.iter().map(|d| self.vector(d)).collect()
    }
}

/// The terms of `text`: lower-cased alphanumeric runs (an apostrophe ends a word's
/// useful part: `don't` → `don`), at least two characters, not all digits, not a
/// stop word, plural-stemmed.
pub(crate) fn terms(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter_map(|w| {
            let w = w.split(['\'', '’']).next().unwrap_or("");
            if w.chars().count() < 2 || w.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let w = w.to_lowercase();
            if STOP_WORDS.binary_search(&w.as_str()).is_ok() {
                return None;
            }
            Some(stem(w))
        })
}

/// Harman's "S" stemmer: `-ies` → `-y`, `-es` → `-e`, `-s` → `` with its exceptions.
fn stem(w: String) -> String {
    let n = w.len();
    if n > 4 && w.ends_with("ies") && !w.ends_with("eies") && !w.ends_with("aies") {
        return format!("{}y", &w[..n - 3]);
    }
    if n > 3
        && w.ends_with("es")
        && !(w.ends_with("aes") || w.ends_with("ees") || w.ends_with("oes"))
    {
        return w[..n - 1].to_owned();
    }
    if n > 3 && w.ends_with('s') && !(w.ends_with("us") || w.ends_with("ss")) {
        return w[..n - 1].to_owned();
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn terms_drop_stop_words_digits_and_plurals() {
        let t: Vec<String> =
            terms("The caches don't evict 2024 entries; Queries & B-Trees, it's x").collect();
        assert_eq!(t, ["cache", "evict", "entry", "query", "tree"]);
        assert_eq!(stem("class".into()), "class");
        assert_eq!(stem("status".into()), "status");
        assert_eq!(stem("indexes".into()), "indexe");
    }

    #[test]
    fn vectors_are_unit_length_or_zero_and_deterministic() {
        let docs = ["cache eviction policy", "sourdough starter flour", ""];
        let l = Lexical::fit(&docs);
        let v = l.embed(&docs);
        for x in &v[..2] {
            let n: f32 = x.iter().map(|a| a * a).sum();
            assert!((n - 1.0).abs() < 1e-5);
        }
        assert!(
            v[2].iter().all(|&a| a == 0.0),
            "an empty text is the zero vector"
        );
        assert_eq!(l.embed(&docs), v);
        assert_eq!(l.dim(), Lexical::DIM);
    }

    #[test]
    fn rare_shared_terms_weigh_more_than_common_ones() {
        let docs = [
            "cache cache tinylfu",
            "cache tinylfu",
            "cache bread",
            "cache flour",
            "cache oven",
        ];
        let l = Lexical::fit(&docs);
        let v = l.embed(&docs);
        let d01 = super::super::dot(&v[0], &v[1]);
        let d02 = super::super::dot(&v[0], &v[2]);
        assert!(d01 > d02, "{d01} vs {d02}");
        assert!(l.idf["tinylfu"] > l.idf["cache"]);
    }

    #[test]
    fn unseen_terms_get_the_largest_idf_and_drift_is_measured() {
        let docs = ["alpha beta", "alpha gamma"];
        let l = Lexical::fit(&docs);
        assert!(l.idf_unseen > l.idf["beta"]);
        assert_eq!(l.drift(&docs), 0.0);
        assert!(l.drift(&["delta", "delta", "alpha"]) > 0.0);
    }
}
