//! The fill floor: from a miss to a stored entry.
//!
//! [`coalesce`] joins concurrent misses for one key into one streamed fill;
//! [`miss`] fetches it from the upstream and answers its waiters as it streams;
//! [`commit`] stores it when the body ends (through [`crate::cache::put`], inside the
//! invalidation gate); [`compress`] computes the content codings once per response
//! on the bounded [`compress_pool`]; [`recompress`] adds the slower codings in the
//! background once the entry is read again ([`deferred`]), `dcz` too against a dictionary the origin named ([`dictionaries`]) or
//! one made from its host's pages ([`host_dictionaries`]).
//! [`uncached_work`] runs an upstream's own CPU work (a render) below
//! the request workers' priority.

pub(crate) mod coalesce;
pub(crate) mod commit;
pub mod compress;
pub(crate) mod compress_pool;
pub(crate) mod deferred;
pub(crate) mod dictionaries;
pub(crate) mod host_dictionaries;
pub(crate) mod miss;
pub(crate) mod recompress;
pub mod uncached_work;
