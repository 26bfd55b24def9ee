//! Whose fault an error is, for errors that end in an answer to a client: the
//! vocabulary every crate's error type uses to say where it came from, so a caller
//! picks the status (4xx for the client's side, 502/503/504 for the upstream's, 500
//! for ours) and decides on a retry without reading a message.
//!
//! Key decision: **the side is data, not a sentence.** An error type keeps its own
//! kind (what went wrong) and answers [`Side`] and whether a retry can help, as
//! `pingora-error` keeps `ErrorSource` and `RetryType` apart from `ErrorType`.

/// Where an error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Side {
    /// The client: a malformed, refused or abandoned request.
    Downstream,
    /// What quire asked on the client's behalf: the origin, the cluster, a peer.
    Upstream,
    /// quire itself: its own files, its state, a bug.
    Internal,
}

impl Side {
    /// A short lower-case name, for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Downstream => "downstream",
            Side::Upstream => "upstream",
            Side::Internal => "internal",
        }
    }
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error at a seam: its side, and whether the same operation tried again (later,
/// or against another origin) can succeed where this one failed. Every crate's error
/// that can end in an answer to a client implements it, so the code that decides what
/// to do next (answer 502, 503 or 504, try again, log) asks each the same way and
/// matches on a kind, never on a message.
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
    fn every_side_has_a_distinct_name() {
        let names = [Side::Downstream, Side::Upstream, Side::Internal].map(Side::as_str);
        assert_eq!(names, ["downstream", "upstream", "internal"]);
        assert_eq!(Side::Upstream.to_string(), "upstream");
    }
}
