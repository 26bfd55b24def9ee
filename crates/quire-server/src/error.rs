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
//! This file imports nothing of the crate: it is the lowest floor.

/// Which side of the proxy a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client: a request quire refuses, a client that left.
    Downstream,
    /// What quire talks to behind it: the origin or the renderer, a peer node, the
    /// cluster's log, the ACME certificate authority.
    Upstream,
    /// quire itself: its configuration, its store, its own bookkeeping.
    Internal,
}

impl Side {
    /// The side's name, as logs and the admin API write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Downstream => "downstream",
            Side::Upstream => "upstream",
            Side::Internal => "internal",
        }
    }
}

/// An error at a seam: its side, and whether the same operation tried again (later,
/// or against another origin) can succeed where this one failed.
pub trait Fault: std::error::Error + Send + Sync + 'static {
    /// Which side of the proxy the failure came from.
    fn side(&self) -> Side;

    /// Whether trying again can help: false when the other side has already acted
    /// on the request (so trying again could act twice) or will refuse it the same
    /// way again.
    fn retry(&self) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_are_named_for_logs() {
        let names: Vec<_> = [Side::Downstream, Side::Upstream, Side::Internal]
            .into_iter()
            .map(Side::as_str)
            .collect();
        assert_eq!(names, ["downstream", "upstream", "internal"]);
    }
}
