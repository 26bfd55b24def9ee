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

/// The cluster, as the site asks it. Called from the blocking pool (forms and
/// admin pages), never on a hit.
pub trait Shared: Send + Sync + fmt::Debug {
    /// Records that `name` signed out, for every node; returns the generation now
    /// in force (`name`'s cookies issued below it are refused).
    fn sign_out(&self, name: &str) -> Result<u64, String>;
    /// The cluster's view counts per note (vault-relative path), most viewed first.
    fn view_totals(&self) -> Result<Vec<(String, u64)>, String>;
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
