//! The cache floor: how a response lies in the store and every write to it.
//!
//! [`object`] is the record codec (a response's head, its bodies per coding, its tags);
//! [`invalidate`] is the invalidation log and the gate every store write passes, so a
//! purge wins every race with a fill; [`put`] is the one place records are written,
//! inside that gate; [`key_epoch`] numbers the key schemes a volume has been served
//! under; [`refreshed`] remembers which records a refresh-ahead was started for.
//! Nothing here knows of requests, connections or the origin: the fill path,
//! the request path and the operator's purges all call down into it.

pub(crate) mod invalidate;
pub(crate) mod key_epoch;
pub mod object;
pub(crate) mod put;
pub(crate) mod refreshed;
