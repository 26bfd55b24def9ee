//! Where a purge's refills go (see `crate::ops::purge_api`): a queue of URLs to
//! fetch again, held by the `Ctx` behind this trait so the context does not depend
//! on the request floor that fills them (`crate::request::prefill` implements it).

/// A queue of absolute URLs to be filled in the background.
pub(crate) trait Refill: Send + Sync + std::fmt::Debug {
    /// Queues `url`; false (and counted) when the queue is full.
    fn queue(&self, url: String) -> bool;
}
