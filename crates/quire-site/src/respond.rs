//! One request to the site, answered from a snapshot: which page, for whom, rendered
//! with which template, under which cache policy. Runs only on a miss or a bypass,
//! on the blocking pool — never on a hit.
//!
//! Key decision: **an anonymous answer is the same for every anonymous request.** It
//! depends on the path, the query parameter `q` of search pages and the snapshot;
//! fills reach here without cookies or credentials (`quire-server` forwards only
//! keyed fields on a fill), so what is stored can never carry a reader's view.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};
use quire_vault::render::render;
use quire_vault::search::SearchIndex;
use quire_vault::views::Views;
use quire_vault::Visibility;
use serde_json::{json, Value};

use crate::model::{self, audience, Viewer, Who};
use crate::reply::{Policy, Reply, HTML};
use crate::routes::{self, query_param, Page};
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

/// The policy for a page the reader `who` sees at `version`.
fn policy(who: Who<'_>, version: u64) -> Policy {
    match who {
        None => Policy::Shared(version),
        Some(_) => Policy::NoStore,
    }
}

/// Renders `template` or, if it fails, a plain 500 naming the template (logged).
fn html(s: &Snapshot, template: &str, ctx: &Value, status: StatusCode, policy: Policy) -> Reply {
    match s.templates.render(template, ctx) {
        Ok(body) => Reply::new(status, HTML, body, policy),
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
    let ctx = model::page(
        s,
        who,
        path,
        json!({"status": status.as_u16(), "message": message}),
    );
    let version = s.other_version;
    html(s, "error.html", &ctx, status, policy(who, version))
}

pub fn not_found(s: &Snapshot, req: &Req<'_>) -> Reply {
    let msg = if req.viewer.is_none() {
        "There is no page here — or it is only for signed-in readers."
    } else {
        "There is no page here."
    };
    error(s, req.viewer, req.path, StatusCode::NOT_FOUND, msg)
}

/// The site's databases, for the pages that read them.
#[derive(Debug)]
pub struct Stores<'a> {
    /// View counts.
    pub views: &'a Views,
    /// Search.
    pub search: &'a SearchIndex,
}

/// Answers a GET or HEAD.
pub fn page(s: &Arc<Snapshot>, req: &Req<'_>, db: &Stores<'_>) -> Reply {
    let who = req.viewer;
    let aud = audience(who);
    let v = &s.vault;
    let version = s.version_of(req.path, false);
    let shared = policy(who, version);
    match routes::route(req.path) {
        Page::Index => {
            let ctx = model::page(s, who, req.path, model::index(v, aud));
            html(s, "index.html", &ctx, StatusCode::OK, shared).tagged(req.path)
        }
        Page::Tags => {
            let ctx = model::page(s, who, req.path, model::tags(v, aud));
            html(s, "tags.html", &ctx, StatusCode::OK, shared).tagged(req.path)
        }
        Page::Tag(slug) => match model::tag(v, aud, &slug) {
            Some(t) => {
                let ctx = model::page(s, who, req.path, t);
                html(s, "tag.html", &ctx, StatusCode::OK, shared).tagged(req.path)
            }
            None => not_found(s, req),
        },
        Page::Folder(url) => match model::folder(v, aud, &url) {
            Some(f) => {
                let ctx = model::page(s, who, req.path, f);
                html(s, "folder.html", &ctx, StatusCode::OK, shared).tagged(req.path)
            }
            None => not_found(s, req),
        },
        Page::Note(url) => {
            let Some(i) = v.by_url(&url).filter(|&i| v.notes()[i].visibility() <= aud) else {
                return not_found(s, req);
            };
            let mut extra = model::note(v, i, aud, s.related.of(i, aud));
            let r = render(v, i, aud);
            extra["note"]["html"] = r.html.into();
            if who.is_some_and(|w| w.audience == Visibility::Draft) {
                extra["note"]["views"] = db.views.count(&v.notes()[i].path).ok().into();
            }
            extra["note"]["headings"] = r
                .headings
                .iter()
                .map(|(level, id, text)| json!({"level": level, "id": id, "text": text}))
                .collect::<Vec<_>>()
                .into();
            let ctx = model::page(s, who, req.path, extra);
            html(s, "note.html", &ctx, StatusCode::OK, shared).tagged(req.path)
        }
        Page::Feed => {
            let base = base(s, req);
            Reply::new(
                StatusCode::OK,
                "application/atom+xml; charset=utf-8",
                crate::feed::atom(s, &base),
                shared,
            )
            .tagged(req.path)
        }
        Page::Sitemap => {
            let base = base(s, req);
            Reply::new(
                StatusCode::OK,
                "application/xml; charset=utf-8",
                crate::feed::sitemap(s, &base),
                shared,
            )
            .tagged(req.path)
        }
        Page::Robots => {
            let base = base(s, req);
            Reply::new(
                StatusCode::OK,
                "text/plain; charset=utf-8",
                format!("User-agent: *\nDisallow: /_views\nDisallow: /api/\nSitemap: {base}/sitemap.xml\n"),
                Policy::Shared(s.other_version),
            )
        }
        Page::Css => {
            let p = if query_param(req.query, "v").as_deref()
                == Some(&format!("{:016x}", s.css_version))
            {
                Policy::Immutable
            } else {
                Policy::Shared(s.css_version)
            };
            Reply::new(
                StatusCode::OK,
                "text/css; charset=utf-8",
                s.templates.css.clone(),
                p,
            )
        }
        Page::Attachment(name) => attachment(s, req, &name),
        Page::Login => {
            let next = query_param(req.query, "next").unwrap_or_else(|| "/".into());
            let ctx = model::page(
                s,
                who,
                req.path,
                json!({"error": null, "next": routes::local_target(&next)}),
            );
            html(
                s,
                "login.html",
                &ctx,
                StatusCode::OK,
                policy(who, s.other_version),
            )
        }
        Page::Logout => Reply::redirect("/"),
        Page::Views => crate::extras::views(s, req, db.views),
        Page::Search => crate::extras::search(s, req, db.search, false),
        Page::ApiSearch => crate::extras::search(s, req, db.search, true),
    }
}

fn base(s: &Snapshot, req: &Req<'_>) -> String {
    if s.config.base_url.is_empty() {
        req.base.clone()
    } else {
        s.config.base_url.clone()
    }
}

/// An attachment, if the reader may see it: the widest audience of the notes that
/// embed it (see [`Snapshot::attachment_audience`]).
fn attachment(s: &Snapshot, req: &Req<'_>, name: &str) -> Reply {
    let v = &s.vault;
    let allowed = s
        .attachment_audience
        .get(name)
        .is_some_and(|&a| a <= audience(req.viewer));
    let (Some(rel), Some(version), true) =
        (v.attachment(name), v.attachment_version(name), allowed)
    else {
        return not_found(s, req);
    };
    let file = v.root().join(rel);
    let len = match std::fs::metadata(&file) {
        Ok(m) if m.is_file() => m.len(),
        Ok(_) => return not_found(s, req),
        Err(e) => {
            tracing::warn!(file = rel, error = %e, "attachment unreadable");
            return not_found(s, req);
        }
    };
    let p = match req.viewer {
        Some(_) => Policy::NoStore,
        None if query_param(req.query, "v").as_deref() == Some(&format!("{version:016x}")) => {
            Policy::Immutable
        }
        None => Policy::Shared(version),
    };
    let r = if len > ATTACHMENT_READ_MAX {
        Reply::file(content_type(rel), file, len, p)
    } else {
        match std::fs::read(&file) {
            Ok(b) => Reply::new(StatusCode::OK, content_type(rel), Bytes::from(b), p),
            Err(e) => {
                tracing::warn!(file = rel, error = %e, "attachment unreadable");
                return not_found(s, req);
            }
        }
    }
    .tagged(req.path);
    if content_type(rel) == "image/svg+xml" {
        // An SVG opened directly is a document that could run script: sandbox it.
        r.with(
            http::header::CONTENT_SECURITY_POLICY,
            "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:".into(),
        )
    } else {
        r
    }
}

/// Attachments larger than this are streamed from the file, not read whole.
const ATTACHMENT_READ_MAX: u64 = 1 << 20;

/// The media type of an attachment, by extension; unknown types are
/// `application/octet-stream` (with `nosniff`, never rendered as HTML).
fn content_type(rel: &str) -> &'static str {
    let ext = rel.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "avif" => "image/avif",
        // SVG can carry script: in <img> it never runs; opened directly, the
        // answer carries a sandboxing CSP (see `attachment`).
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "txt" => "text/plain; charset=utf-8",
        "mp3" => "audio/mpeg",
        "mp4" => "video/mp4",
        _ => "application/octet-stream",
    }
}
