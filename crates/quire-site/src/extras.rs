//! Pages backed by the site's databases: search (`/search`, `/api/search`) and the
//! admins' view counts (`/_views`).
//!
//! Both read SQLite (`quire_vault::search`, `quire_vault::views`) and so run only on
//! a miss or for a signed-in reader, never on a hit.

use std::collections::HashMap;
use std::sync::Arc;

use http::StatusCode;
use quire_vault::search::{Results, SearchIndex};
use quire_vault::views::Views;
use quire_vault::Visibility;
use serde_json::json;

use crate::model::audience;
use crate::reply::{Policy, Reply, HTML};
use crate::request::{not_found, Req};
use crate::routes::query_param;
use crate::snapshot::Snapshot;

/// Results on a search page.
const RESULTS: usize = 20;

/// `/search?q=` (HTML) or `/api/search?q=` (JSON): the notes the reader may see that
/// match. Anonymous answers are cached under the search version, which changes
/// whenever any public note does (the index is updated before that version is
/// published). A malformed query is sanitised by the index, never an error.
pub fn search(s: &Arc<Snapshot>, req: &Req<'_>, index: &SearchIndex, json_api: bool) -> Reply {
    let q = query_param(req.query, "q").unwrap_or_default();
    let to = (!json_api).then(|| canonical_target(req.path, req.query, &q));
    if let Some(to) = to.flatten() {
        // Every spelling of a query that searches the same redirects to one URL,
        // so its answer is searched, rendered and stored once per version, not once
        // per spelling. The redirect is stored too (it depends on the query alone).
        // Not the JSON API: its clients need not follow redirects.
        let policy = crate::request::policy(s, req.viewer, crate::request::At::Search);
        return Reply::new(
            StatusCode::MOVED_PERMANENTLY,
            "text/plain; charset=utf-8",
            Vec::new(),
            policy,
        )
        .with(http::header::LOCATION, to);
    }
    let results = if q.trim().is_empty() {
        None
    } else {
        Some(index.search(&q, audience(req.viewer), RESULTS))
    };
    let policy = crate::request::policy(s, req.viewer, crate::request::At::Search);
    let hits = |r: &Results| -> Vec<serde_json::Value> {
        r.hits
            .iter()
            .map(
                |h| json!({"title": h.title, "url": h.url, "snippet": h.snippet, "score": h.score}),
            )
            .collect()
    };
    if json_api {
        let body = json!({
            "q": q,
            "hits": results.as_ref().map(hits).unwrap_or_default(),
            "notice": results.as_ref().and_then(|r| r.notice.clone()),
        });
        return Reply::new(
            StatusCode::OK,
            "application/json",
            serde_json::to_vec(&body).unwrap_or_default(),
            policy,
        );
    }
    let ctx = s.page_context(
        req.viewer,
        req.path,
        json!({
            "q": q,
            "results": results.as_ref().map(hits).unwrap_or_default(),
            "notice": results.as_ref().and_then(|r| r.notice.clone()),
        }),
    );
    render(s, "search.html", &ctx, policy)
}

/// Where a search for `q` (from `query`, at `path`) should be asked instead: the
/// query's canonical spelling (`quire_vault::search::canonical_query`) as the one
/// parameter `q`; `None` when the request is that already, or the query has no
/// canonical spelling (it is answered as typed, with its notice).
fn canonical_target(path: &str, query: Option<&str>, q: &str) -> Option<String> {
    let canonical = quire_vault::search::canonical_query(q)?;
    let params = query.unwrap_or("").split('&').filter(|p| !p.is_empty());
    if params.count() == 1 && q == canonical {
        return None;
    }
    Some(format!("{path}?q={}", form_encode(&canonical)))
}

/// `s` as a form-encoded query value: unreserved ASCII kept, spaces as `+`, every
/// other byte percent-encoded.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b' ' => out.push('+'),
            b if b.is_ascii_alphanumeric() || b"-._~*".contains(&b) => out.push(b as char),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn render(s: &Snapshot, template: &str, ctx: &serde_json::Value, policy: Policy) -> Reply {
    match s.templates.render(template, ctx) {
        Ok(html) => Reply::new(StatusCode::OK, HTML, html, policy),
        Err(e) => {
            tracing::error!(error = %e, "template failed");
            Reply::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain; charset=utf-8",
                format!("{e}\n"),
                Policy::NoStore,
            )
        }
    }
}

/// The counts `/_views` shows, and a note on where they come from when it is not
/// the obvious place.
fn view_rows(
    views: &Views,
    shared: Option<&dyn crate::shared::Shared>,
) -> (Vec<(String, u64)>, Option<String>) {
    let note = match shared.map(|c| c.view_totals()) {
        Some(Ok(rows)) => {
            return (
                rows,
                Some("Totals over every node of the cluster, since each joined it.".into()),
            )
        }
        Some(Err(e)) => {
            tracing::warn!(error = %e, "the cluster's view counts are unreadable");
            Some(format!(
                "The cluster's totals cannot be read ({e}): these are this node's counts only."
            ))
        }
        None => None,
    };
    match views.counts() {
        Ok(rows) => (rows, note),
        Err(e) => {
            tracing::warn!(error = %e, "view counts unreadable");
            (Vec::new(), note)
        }
    }
}

/// `/_views`: views per note, for admins only (anyone else gets the 404 every
/// unknown page gets). Counts are those written so far: the writer batches every
/// 200 ms. On a cluster node, the cluster's totals (this node's own counts, and a
/// note saying so, when the cluster cannot be read).
pub fn views(
    s: &Arc<Snapshot>,
    req: &Req<'_>,
    views: &Views,
    shared: Option<&dyn crate::shared::Shared>,
) -> Reply {
    if req.viewer.is_none_or(|v| v.audience != Visibility::Draft) {
        return not_found(s, req);
    }
    let titles: HashMap<&str, (&str, &str)> = s
        .vault
        .notes()
        .iter()
        .map(|n| (n.path.as_str(), (n.title(), n.url.as_str())))
        .collect();
    let (rows, source_note) = view_rows(views, shared);
    let rows: Vec<_> = rows
        .iter()
        .map(|(path, count)| {
            let (title, url) = titles.get(path.as_str()).copied().unwrap_or((path, ""));
            json!({"title": title, "url": url, "count": count})
        })
        .collect();
    let ctx = s.page_context(
        req.viewer,
        req.path,
        json!({
            "rows": rows,
            "dropped": views.dropped(),
            "source_note": source_note,
            "pending_note": "Counts are written in batches; the last fraction of a second may not show yet.",
        }),
    );
    render(s, "views.html", &ctx, Policy::NoStore)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_search_is_asked_by_its_canonical_spelling() {
        let to = |q: &str, raw: &str| super::canonical_target("/search", Some(raw), q);
        assert_eq!(
            to("Write-Ahead  LOG", "q=Write-Ahead%20%20LOG").as_deref(),
            Some("/search?q=%22write+ahead%22+log")
        );
        assert_eq!(to("cache stale", "q=cache+stale"), None);
        assert_eq!(
            to("cache stale", "q=cache%20stale"),
            None,
            "spelt another way"
        );
        assert_eq!(
            to("cache stale", "q=cache+stale&utm_source=x").as_deref(),
            Some("/search?q=cache+stale"),
            "one parameter"
        );
        assert_eq!(to("", ""), None);
        assert_eq!(
            to("Größe", "q=Gr%C3%B6%C3%9Fe").as_deref(),
            Some("/search?q=gr%C3%B6%C3%9Fe")
        );
        // What the canonical target decodes to is canonical: no redirect loop.
        let q = crate::routes::query_param(Some("q=%22write+ahead%22+log"), "q").unwrap();
        assert_eq!(to(&q, "q=%22write+ahead%22+log"), None);
    }
}
