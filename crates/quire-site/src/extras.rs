//! Pages backed by the site's databases: search (`/search`, `/api/search`) and the
//! admins' view counts (`/_views`).
//!
//! PARTIAL: wired to the SQLite search index and view counter as they land; until
//! then these answer 503 with a message saying so.

use std::sync::Arc;

use http::StatusCode;

use crate::reply::Reply;
use crate::respond::{error, Req};
use crate::snapshot::Snapshot;

/// Answers `/search`, `/api/search` and `/_views`.
pub fn page(s: &Arc<Snapshot>, req: &Req<'_>) -> Reply {
    error(
        s,
        req.viewer,
        req.path,
        StatusCode::SERVICE_UNAVAILABLE,
        "Search and view counts are not available yet.",
    )
}
