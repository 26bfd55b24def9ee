//! Pages backed by the site's databases: search (`/search`, `/api/search`) and the
//! admins' view counts (`/_views`).
//!
//! PARTIAL: wired to the SQLite search index and view counter as they land; until
//! then these answer 503 with a message saying so.

use std::collections::HashMap;
use std::sync::Arc;

use http::StatusCode;
use quire_vault::views::Views;
use quire_vault::Visibility;
use serde_json::json;

use crate::model;
use crate::reply::{Policy, Reply, HTML};
use crate::respond::{error, not_found, Req};
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

/// `/_views`: views per note, for admins only (anyone else gets the 404 every
/// unknown page gets). Counts are those written so far: the writer batches every
/// 200 ms.
pub fn views(s: &Arc<Snapshot>, req: &Req<'_>, views: &Views) -> Reply {
    if req.viewer.is_none_or(|v| v.audience != Visibility::Draft) {
        return not_found(s, req);
    }
    let titles: HashMap<&str, (&str, &str)> = s
        .vault
        .notes()
        .iter()
        .map(|n| (n.path.as_str(), (n.title(), n.url.as_str())))
        .collect();
    let rows = match views.counts() {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(error = %e, "view counts unreadable");
            Vec::new()
        }
    };
    let rows: Vec<_> = rows
        .iter()
        .map(|(path, count)| {
            let (title, url) = titles.get(path.as_str()).copied().unwrap_or((path, ""));
            json!({"title": title, "url": url, "count": count})
        })
        .collect();
    let ctx = model::page(
        s,
        req.viewer,
        req.path,
        json!({
            "rows": rows,
            "dropped": views.dropped(),
            "pending_note": "Counts are written in batches; the last fraction of a second may not show yet.",
        }),
    );
    match s.templates.render("views.html", &ctx) {
        Ok(html) => Reply::new(StatusCode::OK, HTML, html, Policy::NoStore),
        Err(e) => Reply::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            format!("{e}\n"),
            Policy::NoStore,
        ),
    }
}
