//! What a publishing site shares with the other nodes of a cluster: sessions that
//! sign in on every node, sign-outs that hold on every node, and view counts summed
//! over the cluster. The site does not know how: `quire-cluster` keeps them in
//! Redis, and the binary joins the two through [`Shared`].
//!
//! Key decisions:
//! - **A sign-out on a cluster node is the cluster's or it is refused.** It is
//!   recorded in the cluster first ([`Shared::sign_out`]), then applied here; when
//!   the cluster cannot record it, the reader is told so (a `503` that still clears
//!   the cookie in their browser) rather than signed out of one node while copies of
//!   the cookie keep working on the others.
//! - `/_views` shows the cluster's totals, and this node's own counts with a note
//!   when the cluster cannot be read.

use std::fmt;

use quire_http::{Fault, Side};

/// The cluster, as the site asks it. Called from the blocking pool (forms and
/// admin pages), never on a hit.
pub trait Shared: Send + Sync + fmt::Debug {
    /// Records that `name` signed out, for every node; returns the generation now
    /// in force (`name`'s cookies issued below it are refused).
    fn sign_out(&self, name: &str) -> Result<u64, SharedError>;
    /// The cluster's view counts per note (vault-relative path), most viewed first.
    fn view_totals(&self) -> Result<Vec<(String, u64)>, SharedError>;
}

/// What kind of failure kept the cluster from answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SharedErrorKind {
    /// This node has not joined the cluster yet (start-up, or its bus is not wired).
    NotJoined,
    /// The cluster's store refused or failed the request.
    Unavailable,
    /// The cluster gave no answer within the wait.
    Timeout,
}

/// Why the cluster could not do what the site asked: its [`kind`](Self::kind), the
/// detail for the log, and (for the answer to the reader) its [`side`](Self::side)
/// and whether asking again can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cluster {what}: {detail}", what = self.kind.what())]
pub struct SharedError {
    kind: SharedErrorKind,
    detail: String,
}

impl SharedErrorKind {
    fn what(self) -> &'static str {
        match self {
            SharedErrorKind::NotJoined => "not joined",
            SharedErrorKind::Unavailable => "unavailable",
            SharedErrorKind::Timeout => "timed out",
        }
    }
}

impl SharedError {
    /// An error of `kind`, with `detail` for the log.
    pub fn new(kind: SharedErrorKind, detail: impl Into<String>) -> Self {
        SharedError {
            kind,
            detail: detail.into(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> SharedErrorKind {
        self.kind
    }
}

impl Fault for SharedError {
    /// Whose fault it is: a node that has not joined is this node's state; a store
    /// that fails or stays silent is the cluster's.
    fn side(&self) -> Side {
        match self.kind {
            SharedErrorKind::NotJoined => Side::Internal,
            SharedErrorKind::Unavailable | SharedErrorKind::Timeout => Side::Upstream,
        }
    }

    /// Whether the same request a moment later can succeed: always, since each kind
    /// is a state that passes (joining, a reconnect), never a refusal of the request.
    fn retry(&self) -> bool {
        match self.kind {
            SharedErrorKind::NotJoined
            | SharedErrorKind::Unavailable
            | SharedErrorKind::Timeout => true,
        }
    }
}

/// How a site keeps its sessions.
#[derive(Debug, Clone, Default)]
pub enum SessionMode {
    /// One node: the vault's `.quire/secret` and `.quire/sessions`.
    #[default]
    Local,
    /// A cluster node: keyed by `secret` shared by every node (`None`: the vault's
    /// `.quire/secret`, which the operator then syncs), sign-outs kept by the
    /// cluster (see `quire_vault::readers::Sessions::shared`).
    Cluster {
        /// The cluster's session secret.
        secret: Option<Vec<u8>>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_not_joined_is_ours_and_a_silent_cluster_is_upstream_and_both_pass() {
        let not_joined = SharedError::new(SharedErrorKind::NotJoined, "starting");
        assert_eq!(not_joined.side(), Side::Internal);
        let timeout = SharedError::new(SharedErrorKind::Timeout, "no answer within 2s");
        assert_eq!(timeout.side(), Side::Upstream);
        assert_eq!(timeout.kind(), SharedErrorKind::Timeout);
        assert!(not_joined.retry() && timeout.retry());
        assert_eq!(
            SharedError::new(SharedErrorKind::Unavailable, "bus: connection refused").to_string(),
            "cluster unavailable: bus: connection refused"
        );
    }
}
