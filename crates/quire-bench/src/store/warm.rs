//! Scenario 1, warm reads: fill an engine with objects of one size, then let T threads
//! do uniformly random gets for a fixed time and count aggregate gets per second.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use super::content::{self, XorShift};
use super::tally::Tally;
use quire_store::{Engine, Put};

/// How a fill went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Fill {
    pub stored: u64,
    pub rejected: u64,
}

/// One read phase's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Reads {
    pub threads: usize,
    pub ops: u64,
    pub hits: u64,
    pub elapsed: Duration,
}

impl Reads {
    pub(crate) fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    pub(crate) fn hit_ratio(&self) -> f64 {
        if self.ops == 0 {
            0.0
        } else {
            self.hits as f64 / self.ops as f64
        }
    }
}

/// Puts objects `0..objects` of `size` bytes (version 1).
pub(crate) fn fill<E: Engine>(engine: &E, objects: usize, size: usize, tally: &Tally) -> Fill {
    let mut out = Fill::default();
    let mut key = Vec::new();
    let mut body = Vec::new();
    for id in 0..objects as u64 {
        content::write_key(&mut key, id);
        content::fill_body(&mut body, id, 1, size);
        match engine.put(&key, &content::meta(id, 1), &body, &[]) {
            Ok(Put::Stored) => out.stored += 1,
            Ok(Put::Rejected) => out.rejected += 1,
            Err(e) => {
                out.rejected += 1;
                tally.error(engine.name(), "warm_reads fill", "put", &e);
            }
        }
    }
    out
}

/// `threads` threads do random gets over objects `0..objects` for `duration`. Every hit's
/// header is checked, and one hit in `check_every` byte for byte. The rate is over the
/// window from the first worker's start to the last one's end, each taken by the worker
/// itself (on an oversubscribed machine the coordinating thread may run late).
pub(crate) fn reads<E: Engine>(
    engine: &E,
    objects: usize,
    size: usize,
    threads: usize,
    duration: Duration,
    check_every: u64,
    tally: &Tally,
) -> Reads {
    assert!(objects > 0 && threads > 0, "nothing to read");
    let keys: Vec<Vec<u8>> = (0..objects as u64).map(content::key).collect();
    let stop = AtomicBool::new(false);
    let start = Barrier::new(threads + 1);
    let check_every = check_every.max(1);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (keys, stop, start) = (&keys, &stop, &start);
                s.spawn(move || {
                    let mut rng = XorShift::new(0x7761_726d ^ t as u64);
                    let (mut ops, mut hits) = (0u64, 0u64);
                    start.wait();
                    let began = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        let id = rng.below(keys.len() as u64);
                        if let Some(entry) = engine.get(&keys[id as usize]) {
                            hits += 1;
                            let full = hits % check_every == 0;
                            if let Err(what) = content::verify_entry(&entry, id, Some(size), full) {
                                tally.mismatch(engine.name(), "warm_reads", what);
                            }
                        }
                        ops += 1;
                    }
                    (ops, hits, began, Instant::now())
                })
            })
            .collect();
        start.wait();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        let (mut ops, mut hits) = (0, 0);
        let mut window: Option<(Instant, Instant)> = None;
        for w in workers {
            let (o, h, began, ended) = w.join().expect("reader thread panicked");
            ops += o;
            hits += h;
            window = Some(match window {
                None => (began, ended),
                Some((b, e)) => (b.min(began), e.max(ended)),
            });
        }
        Reads {
            threads,
            ops,
            hits,
            elapsed: window.map_or(Duration::ZERO, |(b, e)| e - b),
        }
    })
}
