//! What every error at a seam of the server says besides its message: which side of
//! the proxy the failure came from, and whether trying again can help (pingora's
//! `ErrorSource` and `RetryType` ask the same two questions).
//!
//! Each seam keeps its own error type with its own kinds, next to its port: the
//! `Upstream` port's `OriginError` (`crate::upstream`), the `Bus` port's `BusError`
//! (`crate::ops::bus`), ACME's `AcmeError` (`crate::edge::tls::acme`), the
//! configuration's `ConfigError` (`crate::config`). Each implements [`Fault`], so the
//! code that decides what to do next (answer 502, 503 or 504, try again, log) asks
//! every one of them the same way, and matches on a kind, never on a message: the
//! message is for people (the log, the admin API's JSON).
//!
//! The vocabulary itself ([`Side`], [`Fault`]) is `quire-http`'s, shared with the
//! publishing site's errors; this file imports nothing of the crate: it is the
//! lowest floor.

pub(crate) use quire_http::{Fault, Side};
