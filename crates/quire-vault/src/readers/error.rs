//! Why readers' files and sessions could not be used: [`ReadersError`]. A leaf: the
//! users file, sessions and sign-outs all return it.

use std::path::PathBuf;

/// Why the users file or the session secret could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadersError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The users file is malformed.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Users {
        /// The users file.
        path: PathBuf,
        /// The 1-based line of the problem, when known.
        line: Option<usize>,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The session secret is unusable.
    #[error("session secret {}: {message}", path.display())]
    Secret {
        /// The secret file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A cluster node's sessions were asked to record a sign-out themselves: the
    /// cluster records them (see `Sessions::shared`).
    #[error("sign-outs on a cluster node are recorded by the cluster")]
    SharedSignOut,
}

impl quire_http::Fault for ReadersError {
    /// The users file, the secret and the sign-out table are this server's own.
    fn side(&self) -> quire_http::Side {
        quire_http::Side::Internal
    }

    /// Only an interrupted or timed-out read or write; a malformed file, a bad
    /// secret or a cluster node's sign-out fail the same way again.
    fn retry(&self) -> bool {
        match self {
            ReadersError::Io { source, .. } => crate::fault::transient(source),
            _ => false,
        }
    }
}
