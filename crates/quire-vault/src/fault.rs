//! When trying again can help, for this crate's errors at a seam (`quire_http::Fault`
//! on `ReadersError`, `SearchError`, `ViewsError`): a file operation that was
//! interrupted or timed out, a database another connection holds for now. Everything
//! else (a malformed file, a damaged database) fails the same way again.

/// An I/O failure that a second try may not meet.
pub(crate) fn transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::Interrupted | ErrorKind::WouldBlock | ErrorKind::TimedOut
    )
}

/// SQLite answered busy or locked: another connection holds the database for now.
pub(crate) fn sqlite_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use quire_http::{Fault, Side};

    #[test]
    fn the_seam_errors_say_their_side_and_whether_a_retry_helps() {
        let io = |kind| std::io::Error::new(kind, "x");
        let readers = |kind| crate::readers::ReadersError::Io {
            path: "users.toml".into(),
            source: io(kind),
        };
        assert_eq!(
            readers(std::io::ErrorKind::Interrupted).side(),
            Side::Internal
        );
        assert!(readers(std::io::ErrorKind::TimedOut).retry());
        assert!(!readers(std::io::ErrorKind::NotFound).retry());
        assert!(!crate::readers::ReadersError::SharedSignOut.retry());
        let busy = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        );
        assert!(sqlite_busy(&busy));
        let search = crate::search::SearchError::Sqlite {
            path: "search.db".into(),
            op: "query",
            source: busy,
        };
        assert!(search.retry());
        assert_eq!(search.side(), Side::Internal);
        let corrupt = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
            None,
        );
        assert!(!sqlite_busy(&corrupt));
    }
}
