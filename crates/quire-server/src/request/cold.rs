//! Hits whose entry is not in memory: read in on the blocking pool, never on a
//! request worker.
//!
//! When the cache volume is bigger than the memory the process may use, some
//! entries' pages have been evicted, and reading one through the mapping is a major
//! fault that blocks the thread until the disk answers: on a worker, every other
//! connection on it waits too, hot hits included. Under memory pressure the store
//! checks an entry's residency before touching it (`quire_store::Store::get_resident`,
//! see its `residency` module) and a lookup that finds a cold entry reads nothing
//! (`Lookup::cold`); the fast path hands such a request to the service, which warms
//! the entry here, on the blocking pool, while its worker serves others, then looks
//! it up again.
//!
//! Bounded: at most [`crate::state::COLD_READS_MAX`] warms run at once; more wait
//! for a slot (asynchronously: no worker blocks). Counted in `quire_cold_reads_total`.

use std::sync::Arc;

use quire_store::Cold;

use crate::state::Ctx;

/// Reads a cold entry into memory off the worker. The slot goes with the read, not
/// the request: a client that leaves while it runs does not free a slot early.
pub(crate) async fn warm(ctx: &Arc<Ctx>, cold: Cold) {
    let Ok(slot) = ctx.cold_reads.clone().acquire_owned().await else {
        return;
    };
    ctx.metrics.record_cold_read();
    let c = ctx.clone();
    let _ = tokio::task::spawn_blocking(move || {
        c.store.warm(&cold);
        drop(slot);
    })
    .await;
}
