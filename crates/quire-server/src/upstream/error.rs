//! The error of the [`Upstream`](crate::upstream::Upstream) port: why an upstream (an
//! HTTP origin, a pool of them, a peer node or an in-process renderer) gave no usable
//! response. A timeout, or a [`Failure`] of a [`FailureKind`]; each says its side and
//! whether trying again can help ([`Fault`]), so a decision matches on a kind, never
//! on the message (which stays as it was for logs and error pages).

use std::fmt;

use crate::error::{Fault, Side};

/// Why the upstream gave no usable response.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    /// No response head within the read timeout (504).
    #[error("origin timed out")]
    Timeout,
    /// Anything else: the connection, the answer, the renderer (502).
    #[error("origin failed: {0}")]
    Failed(Failure),
}

/// A failure other than a timeout: its kind, and what happened (for people).
#[derive(Debug)]
pub struct Failure {
    kind: FailureKind,
    context: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.context)
    }
}

impl Failure {
    /// What kind of failure it is.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }
}

/// What kind of failure an [`OriginError::Failed`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailureKind {
    /// The connection could not be made (refused, reset, TLS refused): nothing
    /// reached the origin.
    Connect,
    /// Every connection slot to the origin stayed in use: nothing was sent.
    Busy,
    /// Every origin that could answer is marked down: nothing was sent.
    Down,
    /// No origin is configured for the request's host and path.
    Unrouted,
    /// The origin answered something unusable: a malformed response, a body that
    /// failed before its first bytes.
    Protocol,
    /// An in-process upstream (the publishing renderer) failed.
    Render,
    /// The fill ended without an answer: aborted, or every client left.
    Abandoned,
    /// The request cannot be sent as it is (a target that does not parse).
    Request,
    /// The budget of uncached work had no slot for it in time (see
    /// `crate::edge::budget`): nothing was sent; answered `503` with `Retry-After`.
    Overloaded,
}

impl OriginError {
    /// A failure of `kind`; `context` says what happened.
    pub fn failed(kind: FailureKind, context: impl Into<String>) -> OriginError {
        OriginError::Failed(Failure {
            kind,
            context: context.into(),
        })
    }

    /// The budget of uncached work refused the request (`why`).
    pub fn overloaded(why: crate::edge::budget::Refused) -> OriginError {
        OriginError::failed(
            FailureKind::Overloaded,
            format!("no slot for uncached work ({})", why.label()),
        )
    }

    /// The kind of a failure; `None` for a timeout.
    pub fn kind(&self) -> Option<FailureKind> {
        match self {
            OriginError::Timeout => None,
            OriginError::Failed(f) => Some(f.kind),
        }
    }

    /// The status quire answers with when nothing stale can cover the failure.
    pub fn status(&self) -> http::StatusCode {
        match self {
            OriginError::Timeout => http::StatusCode::GATEWAY_TIMEOUT,
            OriginError::Failed(f) if f.kind == FailureKind::Overloaded => {
                http::StatusCode::SERVICE_UNAVAILABLE
            }
            OriginError::Failed(_) => http::StatusCode::BAD_GATEWAY,
        }
    }
}

impl Fault for OriginError {
    fn side(&self) -> Side {
        match self.kind() {
            Some(FailureKind::Abandoned | FailureKind::Request | FailureKind::Overloaded) => {
                Side::Downstream
            }
            Some(FailureKind::Unrouted) => Side::Internal,
            _ => Side::Upstream,
        }
    }

    /// Only when nothing reached the origin: a timeout or a bad answer may come
    /// after the origin acted on the request, and sending it again could act twice.
    fn retry(&self) -> bool {
        matches!(
            self.kind(),
            Some(FailureKind::Connect | FailureKind::Busy | FailureKind::Down)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_request_that_reached_no_origin_may_be_sent_again() {
        let retry = |kind| OriginError::failed(kind, "x").retry();
        assert!(retry(FailureKind::Connect));
        assert!(retry(FailureKind::Busy));
        assert!(retry(FailureKind::Down));
        assert!(!retry(FailureKind::Protocol));
        assert!(!retry(FailureKind::Render));
        assert!(!OriginError::Timeout.retry());
    }

    #[test]
    fn the_message_and_status_read_as_before() {
        let e = OriginError::failed(FailureKind::Connect, "connection refused");
        assert_eq!(e.to_string(), "origin failed: connection refused");
        assert_eq!(e.status(), http::StatusCode::BAD_GATEWAY);
        assert_eq!(e.side(), Side::Upstream);
        let gone = OriginError::failed(FailureKind::Abandoned, "every client left");
        assert_eq!(gone.side(), Side::Downstream);
        assert_eq!(
            OriginError::Timeout.status(),
            http::StatusCode::GATEWAY_TIMEOUT
        );
    }
}
