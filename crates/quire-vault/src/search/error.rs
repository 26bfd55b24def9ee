//! Why the search index could not be opened, read or written: [`SearchError`], and
//! the one place a SQLite error becomes one (a damaged file recognised as such, so
//! the caller can rebuild it). A leaf: the index and its store both import it.

use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;

/// Why the index could not be opened or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// SQLite failed.
    #[error("search index {path}: {op}: {source}")]
    Sqlite {
        /// The index file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// The file is not an SQLite database, or is damaged.
    #[error(
        "search index {path} is corrupt ({source}); delete it and re-index (open_or_rebuild does)"
    )]
    Corrupt {
        /// The index file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// A database that holds tables other than the index's: not ours to rebuild.
    #[error("search index {path}: the file holds other tables ({tables}); not touching it")]
    Foreign {
        /// The file.
        path: PathBuf,
        /// Some of its tables.
        tables: String,
    },
    /// SQLite could not use WAL mode (a file system without shared memory?).
    #[error("search index {path}: journal mode is {mode}, not WAL")]
    NotWal {
        /// The index file.
        path: PathBuf,
        /// The journal mode SQLite kept.
        mode: String,
    },
    /// A file system operation failed.
    #[error("search index {path}: {op}: {source}")]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl quire_http::Fault for SearchError {
    /// The index is this server's own.
    fn side(&self) -> quire_http::Side {
        quire_http::Side::Internal
    }

    /// A busy or locked database, or an interrupted file operation; a damaged,
    /// foreign or non-WAL file fails the same way again.
    fn retry(&self) -> bool {
        match self {
            SearchError::Sqlite { source, .. } => crate::fault::sqlite_busy(source),
            SearchError::Io { source, .. } => crate::fault::transient(source),
            _ => false,
        }
    }
}

impl SearchError {
    /// Whether the file is damaged (and deleting and rebuilding it is the fix).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, SearchError::Corrupt { .. })
    }
}

fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

/// A closure turning a SQLite error met while doing `op` on `path` into a
/// [`SearchError`], corrupt files recognised.
pub(super) fn sql_err<'a>(
    path: &'a Path,
    op: &'static str,
) -> impl Fn(rusqlite::Error) -> SearchError + 'a {
    move |source| {
        if is_corrupt(&source) {
            SearchError::Corrupt {
                path: path.to_owned(),
                source,
            }
        } else {
            SearchError::Sqlite {
                path: path.to_owned(),
                op,
                source,
            }
        }
    }
}
