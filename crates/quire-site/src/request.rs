//! One request as the site sees it ([`Req`]), and the answers every page handler
//! shares: a template rendered under a cache policy, the error page and the 404.
//!
//! Below the handlers (`respond` for pages, `extras` for search and view counts,
//! `site` for methods no page takes), so each of them calls down here and none
//! reaches into another.

use http::{Method, StatusCode};
use quire_vault::Visibility;
use serde_json::{json, Value};

use crate::model::{Viewer, Who};
use crate::reply::{Policy, Reply, HTML};
use crate::snapshot::Snapshot;

/// What the site needs to know of a request.
#[derive(Debug)]
pub struct Req<'a> {
    /// Method.
    pub method: &'a Method,
    /// Percent-decoded path.
    pub path: &'a str,
    /// Raw query.
    pub query: Option<&'a str>,
    /// The signed-in reader, if any.
    pub viewer: Option<&'a Viewer>,
    /// Scheme and host for absolute links when `base_url` is not set.
    pub base: String,
}

/// Which of a snapshot's versions a page is kept under.
#[derive(Debug, Clone, Copy)]
pub enum At<'a> {
    /// The page at this path.
    Page(&'a str),
    /// A search answer.
    Search,
    /// Any other path (an error page, the sign-in form).
    Other,
}

/// The policy for a page `who` sees at `at`: an anonymous page is shared; one
/// rendered for a whole audience is kept under the audience's version (never
/// stored when that version is not made yet); one rendered for a person is never
/// stored.
pub fn policy(s: &Snapshot, who: Who<'_>, at: At<'_>) -> Policy {
    let aud = match who {
        None => Visibility::Public,
        Some(v) if v.shared => v.audience,
        Some(_) => return Policy::NoStore,
    };
    let version = match at {
        At::Page(path) => s.version_for(path, false, aud),
        At::Search => s.version_for("", true, aud),
        At::Other => s.other_for(aud),
    };
    match (who, version) {
        (None, Some(v)) => Policy::Shared(v),
        (Some(_), Some(v)) => Policy::Audience(v, aud),
        (_, None) => Policy::NoStore,
    }
}

/// Renders `template` or, if it fails, a plain 500 naming the template (logged).
pub fn html(
    s: &Snapshot,
    template: &str,
    ctx: &Value,
    status: StatusCode,
    policy: Policy,
) -> Reply {
    match s.templates.render(template, ctx) {
        Ok(body) => {
            let mut r = Reply::new(status, HTML, body, policy).scripted(s.config.hover_previews);
            if let Some(d) = s.dictionaries().current() {
                r = r.with(
                    http::header::LINK,
                    quire_http::dictionary::link(&crate::dictionary::path(d)),
                );
            }
            match crate::speculation::header_value(s.config.prefetch) {
                Some(v) => r.with(
                    http::header::HeaderName::from_static("speculation-rules"),
                    v,
                ),
                None => r,
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "template failed");
            Reply::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain; charset=utf-8",
                format!("template error: {e}\n"),
                Policy::NoStore,
            )
        }
    }
}

/// The error page.
pub fn error(s: &Snapshot, who: Who<'_>, path: &str, status: StatusCode, message: &str) -> Reply {
    let ctx = s.page_context(
        who,
        path,
        json!({"status": status.as_u16(), "message": message}),
    );
    html(s, "error.html", &ctx, status, policy(s, who, At::Other))
}

/// The 404 page for `req`; to an anonymous reader it also stands for "only for
/// signed-in readers", so it never tells whether a private note exists.
pub fn not_found(s: &Snapshot, req: &Req<'_>) -> Reply {
    let msg = if req.viewer.is_none() {
        "There is no page here — or it is only for signed-in readers."
    } else {
        "There is no page here."
    };
    error(s, req.viewer, req.path, StatusCode::NOT_FOUND, msg)
}
