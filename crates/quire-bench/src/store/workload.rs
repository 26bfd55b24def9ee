//! Op streams: each thread's sequence of gets, puts and deletes, generated up front from
//! a seed (Zipf ranks mapped to key ids through a fixed permutation, plus optional
//! one-hit scan keys), so the engines and the LRU model replay exactly the same ops.
//! A [`Shift`] makes the popular set move over time, as on a news site: every so many
//! ops the rank → key mapping rotates, so keys that were cold become the most asked
//! for and every other key slides down the ranks.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::zipf::{permutation, Zipf};

/// Scan keys (one-hit wonders) live above this id, far from the key space.
pub(crate) const SCAN_BASE: u64 = 1 << 40;

/// What an op does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    /// Look up; on a miss, put the object (cache-aside).
    Get,
    /// Write or update the object.
    Put,
    /// Remove the object.
    Delete,
}

/// One op on one key id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Op {
    pub kind: OpKind,
    pub id: u64,
}

/// Each thread's ops: a warm-up part (run, not counted) and a measured part.
#[derive(Debug, Clone, Default)]
pub(crate) struct Streams {
    pub warmup: Vec<Vec<Op>>,
    pub measured: Vec<Vec<Op>>,
}

impl Streams {
    pub(crate) fn threads(&self) -> usize {
        self.measured.len()
    }
    pub(crate) fn measured_ops(&self) -> usize {
        self.measured.iter().map(Vec::len).sum()
    }
}

/// Shares of the op kinds. `get + put + delete` is the mix of key-space ops; `scan` is
/// the share of all ops replaced by gets of one-hit scan keys.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Mix {
    pub get: f64,
    pub put: f64,
    pub delete: f64,
    pub scan: f64,
}

impl Mix {
    /// 80 % get (cache-aside), 15 % put, 5 % delete.
    pub(crate) const REALISTIC: Mix = Mix {
        get: 0.80,
        put: 0.15,
        delete: 0.05,
        scan: 0.0,
    };
    /// 95 % get, 5 % put.
    pub(crate) const READ_MOSTLY: Mix = Mix {
        get: 0.95,
        put: 0.05,
        delete: 0.0,
        scan: 0.0,
    };

    /// The same mix with `share` of all ops replaced by scan gets.
    pub(crate) fn with_scan(self, share: f64) -> Mix {
        Mix {
            scan: share,
            ..self
        }
    }
}

/// A popularity that moves: after every `every` ops of a thread (warm-up included),
/// rank `r` maps to the key rank `r - step` mapped to before (modulo the key space), so
/// `step` keys from the cold end become the top ranks and every other key moves
/// `step` ranks down. Threads shift in step with each other (the engines and the
/// models interleave them op by op).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shift {
    pub every: usize,
    pub step: usize,
}

/// What to generate.
#[derive(Debug, Clone)]
pub(crate) struct StreamSpec {
    pub threads: usize,
    pub warmup_ops: usize,
    pub measured_ops: usize,
    /// Key ids are `0..keys`.
    pub keys: usize,
    pub zipf_s: f64,
    pub mix: Mix,
    pub seed: u64,
    /// `None`: a fixed popularity.
    pub shift: Option<Shift>,
}

impl StreamSpec {
    /// The restart scenario's stream: one thread, Zipf 0.99, read-mostly, a warm-up of
    /// four passes' worth of ops over `keys` and a measured segment of two.
    pub(crate) fn restart(keys: usize, seed: u64) -> StreamSpec {
        StreamSpec {
            threads: 1,
            warmup_ops: 4 * keys,
            measured_ops: 2 * keys,
            keys,
            zipf_s: 0.99,
            mix: Mix::READ_MOSTLY,
            seed,
            shift: None,
        }
    }
}

/// Generates every thread's stream. Thread `t` draws from its own RNG seeded by
/// `(seed, t)`; the rank → key-id permutation is fixed by `seed` alone, so the same key
/// space and popularity order hold for a spec with or without scans.
pub(crate) fn generate(spec: &StreamSpec) -> Streams {
    let zipf = Zipf::new(spec.keys, spec.zipf_s);
    let perm = permutation(spec.keys, spec.seed ^ 0x7065_726d);
    let total_share = spec.mix.get + spec.mix.put + spec.mix.delete;
    assert!(total_share > 0.0, "empty op mix");
    let get_cut = spec.mix.get / total_share;
    let put_cut = (spec.mix.get + spec.mix.put) / total_share;
    let mut out = Streams::default();
    for t in 0..spec.threads {
        let mut rng = StdRng::seed_from_u64(spec.seed.wrapping_mul(0x9E37_79B9) ^ t as u64);
        let mut scans = 0u64;
        let mut done = 0usize;
        let mut next = |rng: &mut StdRng| -> Op {
            let rotation = spec
                .shift
                .map_or(0, |s| (done / s.every.max(1)) * s.step % spec.keys);
            done += 1;
            if spec.mix.scan > 0.0 && rng.random::<f64>() < spec.mix.scan {
                scans += 1;
                return Op {
                    kind: OpKind::Get,
                    id: SCAN_BASE + ((t as u64) << 32) + scans,
                };
            }
            let u: f64 = rng.random();
            let kind = if u < get_cut {
                OpKind::Get
            } else if u < put_cut {
                OpKind::Put
            } else {
                OpKind::Delete
            };
            let rank = zipf.sample(rng);
            let id = u64::from(perm[(rank + spec.keys - rotation) % spec.keys]);
            Op { kind, id }
        };
        let warm: Vec<Op> = (0..spec.warmup_ops).map(|_| next(&mut rng)).collect();
        let measured: Vec<Op> = (0..spec.measured_ops).map(|_| next(&mut rng)).collect();
        out.warmup.push(warm);
        out.measured.push(measured);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn spec(mix: Mix) -> StreamSpec {
        StreamSpec {
            threads: 3,
            warmup_ops: 1000,
            measured_ops: 20_000,
            keys: 5000,
            zipf_s: 0.99,
            mix,
            seed: 11,
            shift: None,
        }
    }

    #[test]
    fn streams_are_deterministic_and_per_thread() {
        let a = generate(&spec(Mix::REALISTIC));
        let b = generate(&spec(Mix::REALISTIC));
        assert_eq!(a.measured, b.measured);
        assert_eq!(a.warmup, b.warmup);
        assert_ne!(a.measured[0], a.measured[1]);
        assert_eq!(a.threads(), 3);
        assert_eq!(a.measured_ops(), 60_000);
    }

    #[test]
    fn mix_shares_hold() {
        let s = generate(&spec(Mix::REALISTIC));
        let ops: Vec<&Op> = s.measured.iter().flatten().collect();
        let share =
            |k: OpKind| ops.iter().filter(|o| o.kind == k).count() as f64 / ops.len() as f64;
        assert!((share(OpKind::Get) - 0.80).abs() < 0.01);
        assert!((share(OpKind::Put) - 0.15).abs() < 0.01);
        assert!((share(OpKind::Delete) - 0.05).abs() < 0.01);
        assert!(ops.iter().all(|o| o.id < 5000));
    }

    #[test]
    fn scan_keys_are_unique_gets_outside_the_key_space() {
        let s = generate(&spec(Mix::REALISTIC.with_scan(0.10)));
        let ops: Vec<&Op> = s.warmup.iter().chain(&s.measured).flatten().collect();
        let scans: Vec<&&Op> = ops.iter().filter(|o| o.id >= SCAN_BASE).collect();
        let share = scans.len() as f64 / ops.len() as f64;
        assert!((share - 0.10).abs() < 0.01, "{share}");
        assert!(scans.iter().all(|o| o.kind == OpKind::Get));
        let distinct: HashSet<u64> = scans.iter().map(|o| o.id).collect();
        assert_eq!(distinct.len(), scans.len());
    }

    #[test]
    fn a_shift_moves_the_popular_set() {
        let n = 5000;
        let mut sp = spec(Mix::REALISTIC);
        sp.threads = 1;
        sp.warmup_ops = 0;
        sp.measured_ops = 40_000;
        sp.shift = Some(Shift {
            every: 10_000,
            step: 50,
        });
        let s = generate(&sp);
        let perm = permutation(n, 11 ^ 0x7065_726d);
        let top = |part: &[Op]| {
            let mut counts = vec![0u32; n];
            for op in part {
                counts[op.id as usize] += 1;
            }
            (0..n).max_by_key(|&i| counts[i]).unwrap_or(0) as u32
        };
        let ops = &s.measured[0];
        assert_eq!(top(&ops[..10_000]), perm[0]);
        // After one shift the top rank is the key that was rank n - 50, a cold one.
        assert_eq!(top(&ops[10_000..20_000]), perm[n - 50]);
        assert_eq!(top(&ops[30_000..]), perm[n - 150]);
    }

    #[test]
    fn popular_keys_are_permuted() {
        let s = generate(&spec(Mix::REALISTIC));
        let mut counts = vec![0u32; 5000];
        for op in s.measured.iter().flatten() {
            counts[op.id as usize] += 1;
        }
        let top = (0..5000).max_by_key(|&i| counts[i]).unwrap_or(0);
        // The most popular id is rank 0's image under the permutation, not id 0.
        assert_eq!(top as u32, permutation(5000, 11 ^ 0x7065_726d)[0]);
    }
}
