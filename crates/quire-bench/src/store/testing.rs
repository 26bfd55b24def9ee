//! Test-only engines for the generic scenarios — an exact-LRU map behind a mutex, and a
//! wrapper that hands out damaged bytes — and the tests that drive every scenario with
//! them (that the checks catch damage, that an LRU engine matches the LRU reference,
//! that the restart scenario tells a warm restart from a cold one).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::content::SizeModel;
use super::lru::{self, Lru};
use super::mixed::{self, Versions};
use super::tally::Tally;
use super::workload::{self, Mix, StreamSpec};
use super::{eviction, restart, warm};
use quire_store::{Engine, EntryRef, FileExtent, Put, Result, Stats};

#[derive(Debug)]
struct Obj {
    meta: Vec<u8>,
    body: Vec<u8>,
}

/// A hit of the test engines: owned bytes.
#[derive(Debug, Clone)]
pub(crate) struct MapEntry(Arc<Obj>);

impl EntryRef for MapEntry {
    fn meta(&self) -> &[u8] {
        &self.0.meta
    }
    fn body(&self) -> &[u8] {
        &self.0.body
    }
    fn body_extent(&self) -> Option<FileExtent<'_>> {
        None
    }
}

#[derive(Debug)]
struct Inner {
    map: HashMap<u64, Arc<Obj>>,
    lru: Lru,
}

/// An exact LRU over key + meta + body bytes, capped at `cap` bytes.
#[derive(Debug)]
pub(crate) struct MapEngine {
    inner: Mutex<Inner>,
    cap: u64,
    hits: AtomicU64,
    misses: AtomicU64,
}

fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

impl MapEngine {
    pub(crate) fn new(cap: u64) -> Self {
        MapEngine {
            inner: Mutex::new(Inner {
                map: HashMap::new(),
                lru: Lru::new(cap),
            }),
            cap,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Engine for MapEngine {
    type Entry = MapEntry;

    fn put(&self, key: &[u8], meta: &[u8], body: &[u8], _tags: &[&[u8]]) -> Result<Put> {
        let h = key_hash(key);
        let bytes = (key.len() + meta.len() + body.len()) as u64;
        let mut g = self.lock();
        let evicted = g.lru.insert(h, bytes);
        for k in evicted {
            g.map.remove(&k);
        }
        if !g.lru.contains(h) {
            g.map.remove(&h);
            return Ok(Put::Rejected);
        }
        g.map.insert(
            h,
            Arc::new(Obj {
                meta: meta.to_vec(),
                body: body.to_vec(),
            }),
        );
        Ok(Put::Stored)
    }

    fn get(&self, key: &[u8]) -> Option<MapEntry> {
        let h = key_hash(key);
        let mut g = self.lock();
        if g.lru.get(h) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            g.map.get(&h).cloned().map(MapEntry)
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            None
        }
    }

    fn remove(&self, key: &[u8]) -> Result<bool> {
        let h = key_hash(key);
        let mut g = self.lock();
        g.map.remove(&h);
        Ok(g.lru.remove(h))
    }

    fn remove_tagged(&self, _tag: &[u8]) -> Result<usize> {
        Ok(0)
    }

    fn stats(&self) -> Stats {
        let g = self.lock();
        Stats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes_used: g.lru.used(),
            cap_bytes: self.cap,
            entries: g.lru.len() as u64,
            index_bytes: 32 * g.lru.len() as u64,
            ..Stats::default()
        }
    }

    fn name(&self) -> &'static str {
        "map"
    }
}

/// Wraps an engine (shared, so a "reopen" can see the same contents) and damages one
/// byte past the body header of every `every`-th hit.
#[derive(Debug)]
pub(crate) struct Damaging {
    inner: Arc<MapEngine>,
    every: u64,
    gets: AtomicU64,
}

impl Damaging {
    pub(crate) fn new(inner: Arc<MapEngine>, every: u64) -> Self {
        Damaging {
            inner,
            every,
            gets: AtomicU64::new(0),
        }
    }
}

impl Engine for Damaging {
    type Entry = MapEntry;
    fn put(&self, key: &[u8], meta: &[u8], body: &[u8], tags: &[&[u8]]) -> Result<Put> {
        self.inner.put(key, meta, body, tags)
    }
    fn get(&self, key: &[u8]) -> Option<MapEntry> {
        let hit = self.inner.get(key)?;
        let n = self.gets.fetch_add(1, Ordering::Relaxed) + 1;
        if self.every == 0 || !n.is_multiple_of(self.every) || hit.body().len() <= 16 {
            return Some(hit);
        }
        let mut body = hit.body().to_vec();
        let at = 16 + (n as usize % (body.len() - 16));
        body[at] ^= 0x20;
        Some(MapEntry(Arc::new(Obj {
            meta: hit.meta().to_vec(),
            body,
        })))
    }
    fn remove(&self, key: &[u8]) -> Result<bool> {
        self.inner.remove(key)
    }
    fn remove_tagged(&self, tag: &[u8]) -> Result<usize> {
        self.inner.remove_tagged(tag)
    }
    fn stats(&self) -> Stats {
        self.inner.stats()
    }
    fn name(&self) -> &'static str {
        "damaging"
    }
}

const SIZES: SizeModel = SizeModel::LogNormal {
    median: 2048.0,
    sigma: 1.0,
    min: 256,
    max: 64 << 10,
};

fn small_spec(threads: usize, mix: Mix, keys: usize) -> StreamSpec {
    StreamSpec {
        threads,
        warmup_ops: 2_000,
        measured_ops: 6_000,
        keys,
        zipf_s: 0.99,
        mix,
        seed: 5,
        shift: None,
    }
}

#[test]
fn warm_reads_hit_everything_and_check_cleanly() {
    let e = MapEngine::new(64 << 20);
    let tally = Tally::new();
    let fill = warm::fill(&e, 500, 1000, &tally);
    assert_eq!(fill.stored, 500);
    let r = warm::reads(&e, 500, 1000, 3, Duration::from_millis(50), 64, &tally);
    assert!(r.ops > 100, "{r:?}");
    assert_eq!(r.hits, r.ops);
    assert!((r.hit_ratio() - 1.0).abs() < 1e-12);
    assert!(r.ops_per_sec() > 0.0);
    assert_eq!(tally.mismatches(), 0, "{:?}", tally.notes());
}

#[test]
fn warm_reads_catch_damaged_bytes() {
    let e = Damaging::new(Arc::new(MapEngine::new(64 << 20)), 1);
    let tally = Tally::new();
    warm::fill(&e, 200, 1000, &tally);
    let r = warm::reads(&e, 200, 1000, 2, Duration::from_millis(50), 64, &tally);
    assert!(r.hits >= 64);
    // Every hit is damaged past the header; the full checks (1 in 64) catch them.
    assert!(
        tally.mismatches() >= r.hits / 64 / 2,
        "{}",
        tally.mismatches()
    );
    assert!(tally.notes()[0].contains("damaging"));
}

#[test]
fn an_lru_engine_on_one_thread_matches_the_lru_reference_exactly() {
    for scan in [0.0, 0.1] {
        let cap = 2 << 20;
        let keys = SIZES.keys_for_bytes(2 * cap);
        let streams = workload::generate(&small_spec(1, Mix::REALISTIC.with_scan(scan), keys));
        let reference = lru::simulate(cap, &streams, &SIZES);
        let e = MapEngine::new(cap);
        let tally = Tally::new();
        let versions = Versions::new(keys);
        let out = mixed::run(&e, &streams, &SIZES, &versions, 64, "t", &tally);
        assert_eq!(out.ops.gets, reference.gets);
        assert_eq!(out.ops.hits, reference.hits, "scan share {scan}");
        assert!(reference.hit_ratio() > 0.2 && reference.hit_ratio() < 0.95);
        assert_eq!(tally.mismatches(), 0, "{:?}", tally.notes());
        assert_eq!(out.ops.ops, 6_000);
        assert_eq!(out.ops.all.count(), 6_000);
        assert!(out.ops.get_hit.count() + out.ops.get_miss.count() == out.ops.gets);
        assert!(out.ops_per_sec() > 0.0);
        assert!(out.ops.all.percentile(50.0) <= out.ops.all.percentile(99.9));
    }
}

#[test]
fn mixed_on_many_threads_checks_cleanly_and_catches_damage() {
    let cap = 4 << 20;
    let keys = SIZES.keys_for_bytes(2 * cap);
    let streams = workload::generate(&small_spec(4, Mix::REALISTIC, keys));
    let tally = Tally::new();
    let out = mixed::run(
        &MapEngine::new(cap),
        &streams,
        &SIZES,
        &Versions::new(keys),
        1,
        "t",
        &tally,
    );
    assert_eq!(tally.mismatches(), 0, "{:?}", tally.notes());
    assert_eq!(out.ops.ops, 24_000);
    assert!(out.ops.hit_ratio() > 0.2);

    let bad = Damaging::new(Arc::new(MapEngine::new(cap)), 10);
    let tally = Tally::new();
    mixed::run(&bad, &streams, &SIZES, &Versions::new(keys), 1, "t", &tally);
    assert!(tally.mismatches() > 100, "{}", tally.mismatches());
}

#[test]
fn a_version_never_written_is_a_mismatch() {
    let e = MapEngine::new(1 << 20);
    let tally = Tally::new();
    let versions = Versions::new(10);
    // Someone stored version 5 of object 3, but no writer ever claimed it.
    let key = super::content::key(3);
    let body = super::content::body(3, 5, SIZES.body_len(3));
    e.put(&key, &super::content::meta(3, 5), &body, &[])
        .expect("put");
    let mut w = mixed::Worker::new(&e, &SIZES, &versions, &tally, "t", 1);
    w.run(workload::Op {
        kind: workload::OpKind::Get,
        id: 3,
    });
    assert_eq!(tally.mismatches(), 1);
    assert!(tally.notes()[0].contains("never written"));
}

#[test]
fn sweep_and_overflow_count_and_sample() {
    let sizes = SizeModel::Uniform { lo: 4096, hi: 8192 };
    let e = MapEngine::new(1 << 20);
    let tally = Tally::new();
    let mut batches_seen = 0;
    let spec = eviction::SweepSpec {
        objects: 1000,
        batch: 100,
        sizes: &sizes,
        readback: 50,
        check_every: 1,
        scenario: "t",
        tally: &tally,
    };
    let s = spec.run(&e, |_| batches_seen += 1);
    assert_eq!(batches_seen, 10);
    assert_eq!(s.batches.len(), 10);
    assert_eq!(s.puts, 1000);
    assert_eq!(s.stored, 1000);
    assert_eq!(s.readback_gets, 50);
    assert_eq!(s.readback_hits, 50);
    assert!(s.max_put <= s.put_time);
    assert_eq!(tally.mismatches(), 0);

    let e = MapEngine::new(1 << 20);
    let o = eviction::overflow(&e, 10 << 20, 64, &sizes, 1, &tally, |e| {
        e.stats().bytes_used
    });
    assert!(o.bytes_written >= 10 << 20);
    assert!(o.peak_disk_bytes <= 1 << 20);
    assert!(o.peak_disk_bytes > (1 << 20) * 9 / 10);
    assert_eq!(o.samples[0], 0);
    assert_eq!(o.samples.len() as u64, 1 + o.sweep.puts.div_ceil(64));
    assert_eq!(o.peak_bytes_used, o.peak_disk_bytes);
}

#[test]
fn restart_tells_warm_from_cold() {
    let cap = 4 << 20;
    let keys = SIZES.keys_for_bytes(cap * 3 / 4);
    let spec = StreamSpec::restart(keys, 9);
    let streams = workload::generate(&spec);
    let shared = Arc::new(MapEngine::new(cap));
    let tally = Tally::new();
    let versions = Versions::new(keys);
    // Warm: reopening finds the same contents.
    let warm = restart::run(
        || Ok(Damaging::new(shared.clone(), 0)),
        |_| Ok(()),
        &streams.warmup[0],
        &streams.measured[0],
        &SIZES,
        &versions,
        64,
        &tally,
    )
    .expect("warm restart");
    assert!(warm.hit_ratio_before() > 0.6, "{}", warm.hit_ratio_before());
    assert!(warm.hit_ratio_after() >= 0.95 * warm.hit_ratio_before());
    // Cold: reopening finds nothing.
    let opened = AtomicU64::new(0);
    let first = Arc::new(MapEngine::new(cap));
    let cold = restart::run(
        || {
            let n = opened.fetch_add(1, Ordering::Relaxed);
            let inner = if n == 0 {
                first.clone()
            } else {
                Arc::new(MapEngine::new(cap))
            };
            Ok(Damaging::new(inner, 0))
        },
        |_| Ok(()),
        &streams.warmup[0],
        &streams.measured[0],
        &SIZES,
        &Versions::new(keys),
        64,
        &tally,
    )
    .expect("cold restart");
    assert!(
        cold.hit_ratio_after() < 0.9 * cold.hit_ratio_before(),
        "cold {} vs {}",
        cold.hit_ratio_after(),
        cold.hit_ratio_before()
    );
    assert_eq!(tally.mismatches(), 0, "{:?}", tally.notes());
}
