//! Striped counters for the read path: each thread adds to its own cache line, so
//! counting hits on two cores does not bounce one line between them. Reads sum the
//! stripes (stats are rare, increments are per request).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const STRIPES: usize = 16;

#[repr(align(128))]
#[derive(Debug, Default)]
struct Padded(AtomicU64);

#[derive(Debug, Default)]
pub(crate) struct Striped {
    stripes: [Padded; STRIPES],
}

fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    MINE.with(|m| *m)
}

impl Striped {
    pub(crate) fn add(&self, n: u64) {
        self.stripes[stripe()].0.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn sum(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_across_threads() {
        let c = std::sync::Arc::new(Striped::default());
        let ts: Vec<_> = (0..8)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || (0..1000).for_each(|_| c.add(1)))
            })
            .collect();
        ts.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(c.sum(), 8000);
    }
}
