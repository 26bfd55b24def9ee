//! Scenarios 4 and 5, writing past the cap: the eviction sweep (stream many new objects
//! into a small cache on one thread; throughput per batch and the longest single put)
//! and overflow (write about ten times the cap and sample the bytes on disk after every
//! batch; the peak says whether the cap holds).

use std::time::{Duration, Instant};

use super::content::{self, SizeModel};
use super::tally::Tally;
use quire_store::{Engine, Put};

/// Puts of new objects `0..objects`, one thread, timed one by one.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sweep {
    pub puts: u64,
    pub stored: u64,
    pub rejected: u64,
    /// Time spent inside `put` (body generation excluded).
    pub put_time: Duration,
    /// Puts per second of each batch.
    pub batches: Vec<f64>,
    /// The longest single put.
    pub max_put: Duration,
    /// Gets of the last objects written, after the sweep.
    pub readback_gets: u64,
    pub readback_hits: u64,
}

impl Sweep {
    pub(crate) fn ops_per_sec(&self) -> f64 {
        self.puts as f64 / self.put_time.as_secs_f64().max(1e-9)
    }
}

/// The knobs of an eviction sweep, set once and run against each engine alike.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SweepSpec<'a> {
    /// New objects streamed in.
    pub(crate) objects: u64,
    /// Objects per batch (`after_batch` runs after each).
    pub(crate) batch: u64,
    /// Their sizes.
    pub(crate) sizes: &'a SizeModel,
    /// The last objects read back at the end.
    pub(crate) readback: u64,
    /// One hit in this many is checked byte for byte.
    pub(crate) check_every: u64,
    /// The scenario's name in the tally.
    pub(crate) scenario: &'a str,
    /// Where errors and mismatches are counted.
    pub(crate) tally: &'a Tally,
}

impl SweepSpec<'_> {
    /// Streams `objects` new objects with sizes from `sizes` into `engine` in batches
    /// of `batch`, calling `after_batch` after each (for sampling disk use). Then reads
    /// back the last `readback` objects, checking one hit in `check_every` byte for
    /// byte.
    pub(crate) fn run<E: Engine>(&self, engine: &E, mut after_batch: impl FnMut(&E)) -> Sweep {
        let SweepSpec {
            objects,
            batch,
            sizes,
            readback,
            check_every,
            scenario,
            tally,
        } = *self;
        let mut out = Sweep::default();
        let mut key = Vec::with_capacity(content::KEY_LEN);
        let mut body = Vec::new();
        let batch = batch.max(1);
        let mut batch_time = Duration::ZERO;
        let mut in_batch = 0u64;
        for id in 0..objects {
            content::write_key(&mut key, id);
            content::fill_body(&mut body, id, 1, sizes.body_len(id));
            let meta = content::meta(id, 1);
            let t0 = Instant::now();
            let r = engine.put(&key, &meta, &body, &[]);
            let dt = t0.elapsed();
            match r {
                Ok(Put::Stored) => out.stored += 1,
                Ok(Put::Rejected) => out.rejected += 1,
                Err(e) => {
                    out.rejected += 1;
                    tally.error(engine.name(), scenario, "put", &e);
                }
            }
            out.puts += 1;
            out.put_time += dt;
            out.max_put = out.max_put.max(dt);
            batch_time += dt;
            in_batch += 1;
            if in_batch == batch || id + 1 == objects {
                out.batches
                    .push(in_batch as f64 / batch_time.as_secs_f64().max(1e-9));
                after_batch(engine);
                batch_time = Duration::ZERO;
                in_batch = 0;
            }
        }
        let check_every = check_every.max(1);
        for id in objects.saturating_sub(readback)..objects {
            content::write_key(&mut key, id);
            out.readback_gets += 1;
            if let Some(entry) = engine.get(&key) {
                out.readback_hits += 1;
                let full = out.readback_hits % check_every == 0;
                if let Err(what) = content::verify_entry(&entry, id, Some(sizes.body_len(id)), full)
                {
                    tally.mismatch(engine.name(), scenario, what);
                }
            }
        }
        out
    }
}

/// Disk use sampled during an overflow run.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Overflow {
    pub sweep: Sweep,
    /// The largest sample of bytes on disk.
    pub peak_disk_bytes: u64,
    /// The largest `stats().bytes_used`.
    pub peak_bytes_used: u64,
    /// Bytes on disk after each batch.
    pub samples: Vec<u64>,
    pub bytes_written: u64,
}

/// Writes objects until `total_bytes` of bodies have been put, sampling `disk_bytes` and
/// `stats().bytes_used` before the first put and after every batch of `batch` puts.
pub(crate) fn overflow<E: Engine>(
    engine: &E,
    total_bytes: u64,
    batch: u64,
    sizes: &SizeModel,
    check_every: u64,
    tally: &Tally,
    disk_bytes: impl Fn(&E) -> u64,
) -> Overflow {
    let mut objects = 0u64;
    let mut written = 0u64;
    while written < total_bytes {
        written += sizes.body_len(objects) as u64;
        objects += 1;
    }
    let mut samples = vec![disk_bytes(engine)];
    let mut peak_used = engine.stats().bytes_used;
    let spec = SweepSpec {
        objects,
        batch,
        sizes,
        readback: batch,
        check_every,
        scenario: "overflow",
        tally,
    };
    let sweep = spec.run(engine, |e| {
        samples.push(disk_bytes(e));
        peak_used = peak_used.max(e.stats().bytes_used);
    });
    Overflow {
        sweep,
        peak_disk_bytes: samples.iter().copied().max().unwrap_or(0),
        peak_bytes_used: peak_used,
        samples,
        bytes_written: written,
    }
}
