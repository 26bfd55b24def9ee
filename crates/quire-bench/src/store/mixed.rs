//! Scenarios 2 and 3, the realistic mix (with and without one-hit scans): threads replay
//! pre-generated op streams against an engine — get with cache-aside fill on a miss, put,
//! delete — recording each op's latency and the hit ratio. Also the per-op executor the
//! restart scenario reuses, and the per-key version counters that let a check tell a
//! legitimately newer value from a wrong one.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use super::content::{self, SizeModel};
use super::tally::Tally;
use super::workload::{Op, OpKind, Streams};
use crate::histogram::Histogram;
use quire_store::{Engine, Put, Stats};

/// The latest version handed out per key id (ids past the table, i.e. scan keys, are
/// written once, as version 1).
#[derive(Debug)]
pub(crate) struct Versions {
    v: Vec<AtomicU32>,
}

impl Versions {
    pub(crate) fn new(keys: usize) -> Self {
        Versions {
            v: (0..keys).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Claims a new version of `id` for a write about to happen.
    pub(crate) fn next(&self, id: u64) -> u32 {
        match self.v.get(id as usize) {
            Some(a) => a.fetch_add(1, Ordering::AcqRel) + 1,
            None => 1,
        }
    }

    /// The newest version of `id` any writer has claimed so far.
    pub(crate) fn latest(&self, id: u64) -> u32 {
        match self.v.get(id as usize) {
            Some(a) => a.load(Ordering::Acquire),
            None => 1,
        }
    }
}

/// Counts and latencies one worker (or a merge of workers) saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct OpStats {
    pub ops: u64,
    pub gets: u64,
    pub hits: u64,
    pub puts_stored: u64,
    pub puts_rejected: u64,
    /// Every op's latency in nanoseconds (a get that misses includes its fill).
    pub all: Histogram,
    pub get_hit: Histogram,
    pub get_miss: Histogram,
    pub put: Histogram,
    pub delete: Histogram,
}

impl OpStats {
    pub(crate) fn merge(&mut self, o: &OpStats) {
        self.ops += o.ops;
        self.gets += o.gets;
        self.hits += o.hits;
        self.puts_stored += o.puts_stored;
        self.puts_rejected += o.puts_rejected;
        self.all.merge(&o.all);
        self.get_hit.merge(&o.get_hit);
        self.get_miss.merge(&o.get_miss);
        self.put.merge(&o.put);
        self.delete.merge(&o.delete);
    }

    pub(crate) fn hit_ratio(&self) -> f64 {
        if self.gets == 0 {
            0.0
        } else {
            self.hits as f64 / self.gets as f64
        }
    }
}

/// Runs ops against one engine on one thread. Body generation and the byte-for-byte
/// checks are kept out of the recorded latencies.
#[derive(Debug)]
pub(crate) struct Worker<'a, E: Engine> {
    pub engine: &'a E,
    pub sizes: &'a SizeModel,
    pub versions: &'a Versions,
    pub tally: &'a Tally,
    pub scenario: &'a str,
    /// One hit in this many is checked byte for byte (the rest: headers only).
    pub check_every: u64,
    pub stats: OpStats,
    key: Vec<u8>,
    body: Vec<u8>,
}

impl<'a, E: Engine> Worker<'a, E> {
    pub(crate) fn new(
        engine: &'a E,
        sizes: &'a SizeModel,
        versions: &'a Versions,
        tally: &'a Tally,
        scenario: &'a str,
        check_every: u64,
    ) -> Self {
        Worker {
            engine,
            sizes,
            versions,
            tally,
            scenario,
            check_every: check_every.max(1),
            stats: OpStats::default(),
            key: Vec::with_capacity(content::KEY_LEN),
            body: Vec::new(),
        }
    }

    /// Writes a new version of `id`; returns the time the put took.
    fn write(&mut self, id: u64) -> Duration {
        let version = self.versions.next(id);
        content::fill_body(&mut self.body, id, version, self.sizes.body_len(id));
        let meta = content::meta(id, version);
        let t0 = Instant::now();
        let r = self.engine.put(&self.key, &meta, &self.body, &[]);
        let dt = t0.elapsed();
        match r {
            Ok(Put::Stored) => self.stats.puts_stored += 1,
            Ok(Put::Rejected) => self.stats.puts_rejected += 1,
            Err(e) => {
                self.stats.puts_rejected += 1;
                self.tally
                    .error(self.engine.name(), self.scenario, "put", &e);
            }
        }
        dt
    }

    /// Runs one op and records it.
    pub(crate) fn run(&mut self, op: Op) {
        content::write_key(&mut self.key, op.id);
        let latency = match op.kind {
            OpKind::Get => {
                self.stats.gets += 1;
                let t0 = Instant::now();
                let hit = self.engine.get(&self.key);
                match hit {
                    Some(entry) => {
                        self.stats.hits += 1;
                        let full = self.stats.hits.is_multiple_of(self.check_every);
                        let t1 = Instant::now();
                        let checked = content::verify_entry(
                            &entry,
                            op.id,
                            Some(self.sizes.body_len(op.id)),
                            full,
                        );
                        let t2 = Instant::now();
                        drop(entry);
                        let d = t0.elapsed() - (t2 - t1);
                        match checked {
                            Ok(v) if v == 0 || v > self.versions.latest(op.id) => {
                                self.tally.mismatch(
                                    self.engine.name(),
                                    self.scenario,
                                    format!(
                                        "object {}: version {v} was never written (latest {})",
                                        op.id,
                                        self.versions.latest(op.id)
                                    ),
                                );
                            }
                            Ok(_) => {}
                            Err(what) => {
                                self.tally.mismatch(self.engine.name(), self.scenario, what)
                            }
                        }
                        self.stats.get_hit.record_nanos(d);
                        d
                    }
                    None => {
                        let d = t0.elapsed() + self.write(op.id);
                        self.stats.get_miss.record_nanos(d);
                        d
                    }
                }
            }
            OpKind::Put => {
                let d = self.write(op.id);
                self.stats.put.record_nanos(d);
                d
            }
            OpKind::Delete => {
                let t0 = Instant::now();
                let r = self.engine.remove(&self.key);
                let d = t0.elapsed();
                if let Err(e) = r {
                    self.tally
                        .error(self.engine.name(), self.scenario, "remove", &e);
                }
                self.stats.delete.record_nanos(d);
                d
            }
        };
        self.stats.ops += 1;
        self.stats.all.record_nanos(latency);
    }
}

/// A mixed run's result for one engine.
#[derive(Debug, Clone)]
pub(crate) struct MixedOutcome {
    pub ops: OpStats,
    pub elapsed: Duration,
    pub stats: Stats,
}

impl MixedOutcome {
    pub(crate) fn ops_per_sec(&self) -> f64 {
        self.ops.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Every thread runs its warm-up ops, waits for the others, then runs its measured ops;
/// the clock runs from the first thread's start of its measured ops to the last one's
/// end (each taken by the worker itself).
pub(crate) fn run<E: Engine>(
    engine: &E,
    streams: &Streams,
    sizes: &SizeModel,
    versions: &Versions,
    check_every: u64,
    scenario: &str,
    tally: &Tally,
) -> MixedOutcome {
    let threads = streams.threads();
    let start = Barrier::new(threads + 1);
    let (ops, elapsed) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let start = &start;
                s.spawn(move || {
                    let mut w = Worker::new(engine, sizes, versions, tally, scenario, check_every);
                    for &op in &streams.warmup[t] {
                        w.run(op);
                    }
                    w.stats = OpStats::default();
                    start.wait();
                    let began = Instant::now();
                    for &op in &streams.measured[t] {
                        w.run(op);
                    }
                    (w.stats, began, Instant::now())
                })
            })
            .collect();
        start.wait();
        let mut total = OpStats::default();
        let mut window: Option<(Instant, Instant)> = None;
        for w in workers {
            let (stats, began, ended) = w.join().expect("mixed worker panicked");
            total.merge(&stats);
            window = Some(match window {
                None => (began, ended),
                Some((b, e)) => (b.min(began), e.max(ended)),
            });
        }
        (total, window.map_or(Duration::ZERO, |(b, e)| e - b))
    });
    MixedOutcome {
        ops,
        elapsed,
        stats: engine.stats(),
    }
}
