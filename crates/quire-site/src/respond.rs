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
use http::StatusCode;
use quire_vault::render::render_bounded;
use quire_vault::search::SearchIndex;
use quire_vault::views::Views;
use quire_vault::Visibility;
use serde_json::{json, Value};

use crate::model::{self, audience};
use crate::reply::{Policy, Reply};
use crate::request::{html, not_found, policy, At, Req};
use crate::routes::{self, query_param, Page};
use crate::snapshot::Snapshot;

/// The site's databases, for the pages that read them.
#[derive(Debug)]
pub struct Stores<'a> {
    /// View counts.
    pub views: &'a Views,
    /// Search.
    pub search: &'a SearchIndex,
    /// The cluster, on a cluster node that joined it.
    pub shared: Option<&'a dyn crate::shared::Shared>,
    /// Raised when nobody waits for this answer any more (its client left, or the
    /// fill timed out): a note's render stops at its next formula or block.
    pub cancel: Option<&'a Arc<std::sync::atomic::AtomicBool>>,
}

/// Answers a GET or HEAD.
pub fn page(s: &Arc<Snapshot>, req: &Req<'_>, db: &Stores<'_>) -> Reply {
    let aud = audience(req.viewer);
    let v = &s.vault;
    let shared = policy(s, req.viewer, At::Page(req.path));
    match routes::route(req.path) {
        Page::Index => listing(s, req, "index.html", Some(model::index(v, aud)), shared),
        Page::Tags => listing(s, req, "tags.html", Some(model::tags(v, aud)), shared),
        Page::Tag(slug) => listing(s, req, "tag.html", model::tag(v, aud, &slug), shared),
        Page::Folder(url) => listing(s, req, "folder.html", model::folder(v, aud, &url), shared),
        Page::Note(url) => note(s, req, db, &url, shared),
        Page::NoteMarkdown(url) => note_markdown(s, req, &url, shared),
        Page::Feed => xml(s, req, ATOM, crate::feed::atom, shared),
        Page::Sitemap => xml(s, req, XML, crate::feed::sitemap, shared),
        Page::LlmsTxt => xml(s, req, TEXT, crate::llms::llms_txt, shared),
        Page::LlmsFullTxt => xml(s, req, TEXT, crate::llms::llms_full_txt, shared),
        Page::Robots => robots(s, req),
        Page::Css => css(s, req),
        Page::Graph => site_graph(s, req, shared),
        Page::Script => script(s, req),
        Page::SpeculationRules => speculation_rules(s, req),
        Page::Dictionary(hex) => dictionary(s, req, &hex),
        Page::Attachment(name) => attachment(s, req, &name),
        Page::Login => login_form(s, req),
        Page::Logout => Reply::redirect("/"),
        Page::Account => account(s, req),
        Page::Views => crate::extras::views(s, req, db.views, db.shared),
        Page::Search => crate::extras::search(s, req, db.search, false),
        Page::ApiSearch => crate::extras::search(s, req, db.search, true),
    }
}

const ATOM: &str = "application/atom+xml; charset=utf-8";
const XML: &str = "application/xml; charset=utf-8";
/// `/llms.txt` is markdown, served as text so that a browser shows it.
const TEXT: &str = "text/plain; charset=utf-8";

/// A listing page (index, tags, a tag, a folder) rendered with `template` from its
/// variables, or the 404 if the reader sees no such listing.
fn listing(
    s: &Snapshot,
    req: &Req<'_>,
    template: &str,
    vars: Option<Value>,
    shared: Policy,
) -> Reply {
    let Some(vars) = vars else {
        return not_found(s, req);
    };
    let ctx = s.page_context(req.viewer, req.path, vars);
    html(s, template, &ctx, StatusCode::OK, shared).tagged(req.path)
}

/// A note's page, if the reader may see the note at `url`.
fn note(s: &Snapshot, req: &Req<'_>, db: &Stores<'_>, url: &str, shared: Policy) -> Reply {
    let who = req.viewer;
    let aud = audience(who);
    let v = &s.vault;
    let Some(i) = v.by_url(url).filter(|&i| v.notes()[i].visibility() <= aud) else {
        return alias(s, req, url, shared).unwrap_or_else(|| not_found(s, req));
    };
    let mut extra = model::note(v, i, aud, s.related.of(i, aud));
    // Bounded (`quire_vault::render::budget`): a body past the page budget is a
    // short notice, so the page is stored like any other and not rendered again.
    let (r, _) = render_bounded(v, i, aud, db.cancel.cloned());
    extra["note"]["html"] = r.html.into();
    // Live counts only on a page rendered for one admin: a page kept for the
    // audience would show a stale count (the counts are on `/_views`).
    if who.is_some_and(|w| w.audience == Visibility::Draft && !w.shared) {
        extra["note"]["views"] = db.views.count(&v.notes()[i].path).ok().into();
    }
    extra["note"]["headings"] = r
        .headings
        .iter()
        .map(|(level, id, text)| json!({"level": level, "id": id, "text": text}))
        .collect::<Vec<_>>()
        .into();
    extra["note"]["graph"] = quire_vault::graph::local(v, s.graphs.links(aud), i)
        .map(|g| g.svg())
        .into();
    let n = &v.notes()[i];
    extra["note"]["preview"] = preview_vars(s, req, i);
    if let Some(lang) = &n.front.lang {
        extra["note"]["lang"] = lang.as_str().into();
        extra["lang"] = lang.as_str().into();
    }
    let ctx = s.page_context(who, req.path, extra);
    // The same URL answers markdown to an `Accept` that prefers it
    // (`Site::negotiate`): caches after quire must know.
    html(s, "note.html", &ctx, StatusCode::OK, shared)
        .with(http::header::VARY, "Accept".into())
        .tagged(req.path)
}

/// A note as markdown (`quire_vault::render::markdown`), for a reader who may see it;
/// else the 404 (an alias's `.md` is not followed).
fn note_markdown(s: &Snapshot, req: &Req<'_>, url: &str, shared: Policy) -> Reply {
    let aud = audience(req.viewer);
    let v = &s.vault;
    let Some(i) = v.by_url(url).filter(|&i| v.notes()[i].visibility() <= aud) else {
        return not_found(s, req);
    };
    let base = base(s, req);
    let body = quire_vault::render::markdown(v, i, aud, &base);
    let canonical = format!("<{base}{}>; rel=\"canonical\"", v.notes()[i].url);
    // Also the answer to the page's own URL for an `Accept` that prefers markdown
    // (`Site::negotiate`): `Vary` says so, `Content-Location` names this URL.
    let location = format!("{}{}", v.notes()[i].url, crate::routes::MARKDOWN_SUFFIX);
    Reply::new(StatusCode::OK, MARKDOWN, body, shared)
        .with(http::header::LINK, canonical)
        .with(http::header::VARY, "Accept".into())
        .with(http::header::CONTENT_LOCATION, location)
        .tagged(url)
}

/// `text/markdown` (RFC 7763).
const MARKDOWN: &str = "text/markdown; charset=utf-8";

/// A note's link preview (`og:`, `twitter:`, canonical): absolute URLs made with this
/// site's own origin only (`base_url`, else the scheme and host the page is cached
/// under), never with anything the note wrote.
fn preview_vars(s: &Snapshot, req: &Req<'_>, i: usize) -> Value {
    let v = &s.vault;
    let p = quire_vault::preview::preview(v, i);
    let origin = base(s, req);
    // An image only a signed-in reader could load is no preview for the world.
    let image = p.image.filter(|img| {
        let name = img.split('?').next().unwrap_or(img);
        let name = name.rsplit('/').next().unwrap_or(name);
        s.attachment_audience.get(&routes::percent_decode(name)) == Some(&Visibility::Public)
    });
    json!({
        "url": format!("{origin}{}", routes::local_target(&v.notes()[i].url)),
        "description": p.description,
        "image": image.map(|img| format!("{origin}{img}")),
    })
}

/// A `301` from an alias's page (`aliases:` in front matter) to its note, if the
/// reader may see the note; to anyone else the alias is the same 404 as any missing
/// page. The target is the note's own path on this site, never anything the front
/// matter wrote.
fn alias(s: &Snapshot, req: &Req<'_>, url: &str, shared: Policy) -> Option<Reply> {
    let v = &s.vault;
    let i = v
        .alias_target(url)
        .filter(|&i| v.notes()[i].visibility() <= audience(req.viewer))?;
    let to = routes::local_target(&v.notes()[i].url);
    Some(
        Reply::new(
            StatusCode::MOVED_PERMANENTLY,
            "text/plain; charset=utf-8",
            format!("Moved to {to}\n"),
            shared,
        )
        .with(http::header::LOCATION, to)
        .tagged(req.path),
    )
}

/// The feed, the sitemap or `/llms.txt`: `body` of the snapshot and the site's base
/// URL.
fn xml(
    s: &Snapshot,
    req: &Req<'_>,
    content_type: &'static str,
    body: fn(&Snapshot, &str) -> String,
    shared: Policy,
) -> Reply {
    let base = base(s, req);
    Reply::new(StatusCode::OK, content_type, body(s, &base), shared).tagged(req.path)
}

/// `/robots.txt`.
fn robots(s: &Snapshot, req: &Req<'_>) -> Reply {
    let base = base(s, req);
    Reply::new(
        StatusCode::OK,
        "text/plain; charset=utf-8",
        crate::robots::robots_txt(&s.config.robots, &base),
        Policy::Shared(s.other_version),
    )
}

/// The stylesheet: immutable when asked for with its current version, and then the
/// dictionary its next version is sent against ([`delta_base`]).
fn css(s: &Snapshot, req: &Req<'_>) -> Reply {
    let p = if query_param(req.query, "v").as_deref() == Some(&format!("{:016x}", s.css_version)) {
        Policy::Immutable
    } else {
        Policy::Shared(s.css_version)
    };
    let r = Reply::new(
        StatusCode::OK,
        "text/css; charset=utf-8",
        s.templates.css.clone(),
        p,
    );
    delta_base(s, r, crate::routes::CSS_PATH, "style")
}

/// `r`, a versioned asset at `path` (`?v=`), marked as the compression dictionary
/// (RFC 9842) for the asset's later versions, when `compression_dictionary` is on: a
/// browser keeps it, names it when it asks for the next version (the pattern has no
/// query, so it matches any `?v=`), and the cache, which learned it when it stored
/// this reply (`quire_server` `fill::dictionaries`), sends that version `dcz`
/// against it: only what changed travels.
fn delta_base(s: &Snapshot, r: Reply, path: &str, dest: &str) -> Reply {
    if !s.config.compression_dictionary || !matches!(r.policy, Policy::Immutable) {
        return r;
    }
    let field = format!("match=\"{path}\", match-dest=(\"{dest}\")");
    r.with(quire_http::dictionary::USE_AS_DICTIONARY, field)
}

/// `/graph`: the site graph the reader's audience sees (the public one laid out when
/// the snapshot was built, the others on their first request of it).
fn site_graph(s: &Snapshot, req: &Req<'_>, shared: Policy) -> Reply {
    let g = s.graphs.site(&s.vault, audience(req.viewer));
    let vars = json!({"graph": {
        "svg": g.svg(),
        "notes": g.shown(),
        "links": g.links(),
        "links_total": g.links_total(),
        "links_more": g.links_total() - g.links(),
        "total": g.total(),
        "more": g.total() - g.shown(),
    }});
    let ctx = s.page_context(req.viewer, req.path, vars);
    html(s, "graph.html", &ctx, StatusCode::OK, shared).tagged(req.path)
}

/// The page script, when `hover_previews` is on (else the 404 any unknown path
/// gets): immutable when asked for with its current version.
fn script(s: &Snapshot, req: &Req<'_>) -> Reply {
    if !s.config.hover_previews {
        return not_found(s, req);
    }
    let version = crate::script::version();
    let p = if query_param(req.query, "v").as_deref() == Some(&format!("{version:016x}")) {
        Policy::Immutable
    } else {
        Policy::Shared(version)
    };
    let r = Reply::new(
        StatusCode::OK,
        "text/javascript; charset=utf-8",
        crate::script::SCRIPT,
        p,
    );
    delta_base(s, r, crate::script::SCRIPT_PATH, "script")
}

/// `/_static/speculation-rules.json`: the links browsers may prefetch (a 404 when
/// `prefetch = "off"`); immutable when asked for by its version, as pages name it.
fn speculation_rules(s: &Snapshot, req: &Req<'_>) -> Reply {
    let p = s.config.prefetch;
    let (Some(rules), Some(version)) =
        (crate::speculation::rules(p), crate::speculation::version(p))
    else {
        return not_found(s, req);
    };
    let policy = if query_param(req.query, "v").as_deref() == Some(&format!("{version:016x}")) {
        Policy::Immutable
    } else {
        Policy::Shared(version)
    };
    Reply::new(
        StatusCode::OK,
        crate::speculation::MEDIA_TYPE,
        rules,
        policy,
    )
}

/// `/_static/dictionary-<hex>.dict`: a dictionary this snapshot or the one before
/// made, immutable (its path is its hash), marked for use on every page of the
/// site (RFC 9842 §2.1); a 404 for any other hash.
fn dictionary(s: &Snapshot, req: &Req<'_>, hex: &str) -> Reply {
    let Some(d) = s.dictionaries().by_hex(hex) else {
        return not_found(s, req);
    };
    // Text, so that it is stored and sent compressed like any page.
    Reply::new(
        StatusCode::OK,
        "text/plain; charset=utf-8",
        bytes::Bytes::copy_from_slice(d.bytes()),
        Policy::Immutable,
    )
    .with(
        quire_http::dictionary::USE_AS_DICTIONARY,
        quire_http::dictionary::use_as_dictionary("/*", &d.hex()[..16]),
    )
}

/// `/account`: who is signed in, and the sign-out form. Personal, so never stored
/// (and never answered from an audience's entries: `crate::audience`). Anonymous
/// readers are sent to sign in.
fn account(s: &Snapshot, req: &Req<'_>) -> Reply {
    let Some(who) = req.viewer.filter(|v| !v.shared) else {
        return Reply::redirect("/login?next=/account");
    };
    let ctx = s.page_context(Some(who), req.path, json!({}));
    let mut ctx = ctx;
    ctx["account"] = json!({"name": who.name, "role": who.role});
    html(s, "account.html", &ctx, StatusCode::OK, Policy::NoStore)
}

/// The sign-in form, returning to `next` (a local target only).
fn login_form(s: &Snapshot, req: &Req<'_>) -> Reply {
    let who = req.viewer;
    let next = query_param(req.query, "next").unwrap_or_else(|| "/".into());
    let ctx = s.page_context(
        who,
        req.path,
        json!({"error": null, "next": routes::local_target(&next)}),
    );
    html(
        s,
        "login.html",
        &ctx,
        StatusCode::OK,
        policy(s, who, At::Other),
    )
}

fn base(s: &Snapshot, req: &Req<'_>) -> String {
    site_base(s, &req.base)
}

/// The site's own origin for absolute links: `base_url` when set, else `asked` (the
/// scheme and host the request came to).
pub(crate) fn site_base(s: &Snapshot, asked: &str) -> String {
    if s.config.base_url.is_empty() {
        asked.to_owned()
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
