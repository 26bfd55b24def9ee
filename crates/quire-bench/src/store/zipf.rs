//! The Zipf sampler (ranks `0..n` with P(rank k) ∝ 1/(k+1)^s, by inverse CDF over a
//! precomputed table) and the fixed random permutation that turns ranks into key ids, so
//! the popular keys are spread over the id space rather than being ids 0, 1, 2, ...

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Samples ranks `0..n` with probability proportional to `1 / (rank + 1)^s`.
#[derive(Debug, Clone)]
pub(crate) struct Zipf {
    /// `cdf[k]` = P(rank <= k); the last entry is 1.
    cdf: Vec<f64>,
}

impl Zipf {
    /// A sampler over `n` ranks (n >= 1) with exponent `s` (>= 0; 0 is uniform).
    pub(crate) fn new(n: usize, s: f64) -> Self {
        assert!(n >= 1, "Zipf over no ranks");
        assert!(s >= 0.0 && s.is_finite(), "Zipf exponent {s}");
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0f64;
        for k in 0..n {
            sum += ((k + 1) as f64).powf(-s);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        Zipf { cdf }
    }

    /// P(rank == k).
    #[cfg(test)]
    pub(crate) fn probability(&self, k: usize) -> f64 {
        match k {
            0 => self.cdf[0],
            _ => self.cdf[k] - self.cdf[k - 1],
        }
    }

    /// Draws one rank.
    pub(crate) fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let u: f64 = rng.random();
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

/// A fixed random permutation of `0..n` from `seed`: `perm[rank]` is the key id.
pub(crate) fn permutation(n: usize, seed: u64) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..n as u32).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    ids.shuffle(&mut rng);
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;

    #[test]
    fn probabilities_follow_the_power_law() {
        let z = Zipf::new(1000, 0.99);
        let h: f64 = (1..=1000).map(|k| (k as f64).powf(-0.99)).sum();
        assert!((z.probability(0) - 1.0 / h).abs() < 1e-12);
        let ratio = z.probability(0) / z.probability(9);
        assert!((ratio - 10f64.powf(0.99)).abs() < 1e-9, "{ratio}");
        let total: f64 = (0..1000).map(|k| z.probability(k)).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn samples_have_the_right_shape() {
        let n = 10_000;
        let z = Zipf::new(n, 0.99);
        let mut rng = StdRng::seed_from_u64(1);
        let draws = 200_000;
        let mut counts = vec![0u32; n];
        for _ in 0..draws {
            counts[z.sample(&mut rng)] += 1;
        }
        // Rank 0 gets about 1/H(n, 0.99) of the draws (about 10 % for n = 10,000).
        let p0 = counts[0] as f64 / draws as f64;
        assert!((p0 - z.probability(0)).abs() < 0.01, "p0 {p0}");
        assert!((0.08..0.13).contains(&p0), "p0 {p0}");
        // Rank 0 about twice rank 1 (2^0.99 = 1.99).
        let r01 = counts[0] as f64 / counts[1] as f64;
        assert!((1.8..2.2).contains(&r01), "rank0/rank1 {r01}");
        // The top 1 % of ranks take about half of the draws, the bottom half little.
        let top: u32 = counts[..n / 100].iter().sum();
        let top_share = top as f64 / draws as f64;
        let expected: f64 = (0..n / 100).map(|k| z.probability(k)).sum();
        assert!(
            (top_share - expected).abs() < 0.02,
            "{top_share} vs {expected}"
        );
        let bottom: u32 = counts[n / 2..].iter().sum();
        assert!((bottom as f64 / draws as f64) < 0.1);
        assert!(
            counts.iter().skip(n - 100).any(|&c| c > 0),
            "tail never drawn"
        );
    }

    #[test]
    fn exponent_zero_is_uniform_and_one_rank_works() {
        let z = Zipf::new(4, 0.0);
        for k in 0..4 {
            assert!((z.probability(k) - 0.25).abs() < 1e-12);
        }
        let one = Zipf::new(1, 0.99);
        let mut rng = StdRng::seed_from_u64(2);
        assert_eq!(one.sample(&mut rng), 0);
    }

    #[test]
    fn permutation_is_a_deterministic_bijection() {
        let p = permutation(1000, 7);
        assert_eq!(p, permutation(1000, 7));
        assert_ne!(p, permutation(1000, 8));
        let mut sorted = p.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<u32>>());
        assert_ne!(p[..10], sorted[..10]);
    }
}
