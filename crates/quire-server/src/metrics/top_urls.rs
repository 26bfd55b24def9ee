//! The URLs missing most and the hottest, lately: what `GET /_quire/top` answers and
//! `quire top` shows. Two bounded "space-saving" tables (Metwally et al.): at most
//! [`ENTRIES`] URLs each, a URL not in a full table taking the place of the least
//! counted one with that count plus its own, so every URL asked for more than
//! 1/[`ENTRIES`] of the time is in it, and a count is never under the truth by more
//! than the smallest count kept.
//!
//! Key decisions:
//! - **The hit path never waits**: a hit is counted in 1 of [`HIT_SAMPLE`] (per
//!   thread, with that weight), and only through `try_lock`: when the table is busy
//!   the sample is dropped. Misses (rare, and already costly) are all offered, also
//!   through `try_lock`. So the tables are estimates, and say so.
//! - **Lately**: every [`HALF_LIFE`] the counts halve (and those at zero leave), so
//!   the tables follow what is asked now, not since start.
//! - **Bounded**: a URL is kept up to [`URL_BYTES_MAX`] bytes (cut at a character
//!   boundary), so a table holds at most 64 × 256 bytes of URLs.

use std::cell::Cell;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// URLs a table keeps.
pub const ENTRIES: usize = 64;
/// Bytes of a URL kept.
pub const URL_BYTES_MAX: usize = 256;
/// How often counts halve.
pub const HALF_LIFE: Duration = Duration::from_secs(60);
/// One hit in this many (per thread) is offered to the hot table.
pub const HIT_SAMPLE: u32 = 16;

#[derive(Debug)]
struct Table {
    entries: Vec<(Box<str>, u64)>,
    halved: Instant,
}

impl Table {
    fn new() -> Table {
        Table {
            entries: Vec::with_capacity(ENTRIES),
            halved: Instant::now(),
        }
    }

    fn add(&mut self, url: &str, weight: u64) {
        if self.halved.elapsed() >= HALF_LIFE {
            self.halved = Instant::now();
            for e in &mut self.entries {
                e.1 /= 2;
            }
            self.entries.retain(|e| e.1 > 0);
        }
        let url = cut(url);
        if let Some(e) = self.entries.iter_mut().find(|e| &*e.0 == url) {
            e.1 += weight;
            return;
        }
        if self.entries.len() < ENTRIES {
            self.entries.push((url.into(), weight));
            return;
        }
        if let Some(least) = self.entries.iter_mut().min_by_key(|e| e.1) {
            *least = (url.into(), least.1 + weight);
        }
    }

    fn top(&self, n: usize) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .entries
            .iter()
            .map(|(u, c)| (u.to_string(), *c))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }
}

fn cut(url: &str) -> &str {
    if url.len() <= URL_BYTES_MAX {
        return url;
    }
    let mut end = URL_BYTES_MAX;
    while !url.is_char_boundary(end) {
        end -= 1;
    }
    &url[..end]
}

/// URLs with their estimated counts, most first.
pub type Counted = Vec<(String, u64)>;

/// The two tables (see the module doc).
#[derive(Debug)]
pub struct TopUrls {
    missing: Mutex<Table>,
    hot: Mutex<Table>,
}

impl Default for TopUrls {
    fn default() -> TopUrls {
        TopUrls {
            missing: Mutex::new(Table::new()),
            hot: Mutex::new(Table::new()),
        }
    }
}

thread_local! {
    static HITS: Cell<u32> = const { Cell::new(0) };
}

impl TopUrls {
    /// A hit on `url`: offered to the hot table once in [`HIT_SAMPLE`], never waiting.
    pub fn hit(&self, url: &str) {
        let sampled = HITS.with(|c| {
            let n = c.get().wrapping_add(1);
            c.set(n);
            n % HIT_SAMPLE == 0
        });
        if sampled {
            if let Ok(mut t) = self.hot.try_lock() {
                t.add(url, u64::from(HIT_SAMPLE));
            }
        }
    }

    /// A miss on `url` (the origin asked, or the page rendered), never waiting.
    pub fn miss(&self, url: &str) {
        if let Ok(mut t) = self.missing.try_lock() {
            t.add(url, 1);
        }
    }

    /// The `n` URLs missing most and the `n` hottest, each with its estimated count,
    /// most first.
    pub fn top(&self, n: usize) -> (Counted, Counted) {
        let lock = |m: &Mutex<Table>| {
            m.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .top(n)
        };
        (lock(&self.missing), lock(&self.hot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_asked_urls_are_kept_in_a_bounded_table() {
        let t = TopUrls::default();
        // A heavy URL among many one-off ones: it stays, the table stays bounded.
        for k in 0..10_000 {
            t.miss(&format!("/once/{k}"));
            if k % 4 == 0 {
                t.miss("/heavy");
            }
        }
        let (missing, _) = t.top(3);
        assert_eq!(missing[0].0, "/heavy");
        assert!(missing[0].1 >= 2_500, "{missing:?}");
        assert!(t.missing.lock().unwrap().entries.len() <= ENTRIES);
        // Hits are sampled: 1,600 hits on one URL from this thread count about 1,600.
        for _ in 0..1_600 {
            t.hit("/hot");
        }
        let (_, hot) = t.top(1);
        assert_eq!(hot, vec![("/hot".to_owned(), 1_600)]);
    }

    #[test]
    fn a_long_url_is_cut_and_counts_halve_with_time() {
        let mut table = Table::new();
        let long = "é".repeat(URL_BYTES_MAX);
        table.add(&long, 10);
        assert!(table.entries[0].0.len() <= URL_BYTES_MAX);
        table.halved = Instant::now() - HALF_LIFE;
        table.add("/other", 1);
        assert_eq!(table.entries[0].1, 5, "halved");
    }
}
