//! `/_quire/mcp`: a read-only Model Context Protocol server over the Streamable
//! HTTP transport (MCP 2025-06-18), stateless: each `POST` carries one JSON-RPC
//! message and gets one JSON answer, with no session and no event stream (a `GET`
//! is 405, as the transport allows).
//!
//! Tools: `search` (the full-text index), `get_note` (a note's markdown, as
//! `<note>.md` serves it), `related`, `list_notes` (by folder or tag) and
//! `backlinks`. Each reads the vault **as its caller's audience**: anonymous callers
//! read what the public site shows; a caller with a reader's API token
//! (`Authorization: Bearer quire_…`, made by `quire user token NAME`) reads what
//! that reader may. A session cookie is never honoured here, so no page can make a
//! signed-in browser call the endpoint for it; a post another site's page makes
//! (`Sec-Fetch-Site`, `Origin`) is refused as the sign-in form refuses it.
//!
//! Written by hand against the specification rather than with an SDK crate: five
//! methods of JSON-RPC are less code than the SDK's dependency tree, and the SDKs
//! changed their API with each protocol revision this year.
//!
//! Bounded like every request: the body is at most the site's form limit (16 KiB),
//! answers are capped (20 search hits, 200 notes a list, 256 KiB of markdown), and
//! each call is a pass through quire-server's rate limits and uncached-work budget;
//! it runs on the blocking pool, never on a hit's worker.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use http::{header, HeaderMap, Method, StatusCode};
use quire_vault::readers::{Tokens, Users};
use quire_vault::search::SearchIndex;
use quire_vault::{pages, Visibility};
use serde_json::{json, Value};

use crate::model::Viewer;
use crate::reply::{Policy, Reply};
use crate::snapshot::Snapshot;

/// Where the endpoint is.
pub const PATH: &str = "/_quire/mcp";
/// The protocol revisions this server speaks, newest first.
pub const VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];
/// Search hits a call returns at most.
const HITS_MAX: usize = 20;
/// Notes a list returns at most.
const LIST_MAX: usize = 200;
/// Bytes of markdown `get_note` returns at most.
const MARKDOWN_MAX: usize = 256 << 10;

/// The readers' API tokens, read again when the file changes (one `stat` a call),
/// so a token made or revoked by `quire user token` counts at once.
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    cached: Mutex<(Option<SystemTime>, Arc<Tokens>)>,
}

impl TokenFile {
    /// The tokens of `path` (`VAULT/.quire/tokens.toml`), read on first use.
    pub fn new(path: PathBuf) -> TokenFile {
        TokenFile {
            path,
            cached: Mutex::new((None, Arc::new(Tokens::default()))),
        }
    }

    /// The tokens as the file holds them now; a file that cannot be read leaves the
    /// last good ones (and says why in the log).
    fn current(&self) -> Arc<Tokens> {
        let mtime = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        let mut c = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        if c.0 != mtime || mtime.is_none() && !c.1.is_empty() {
            match Tokens::load(&self.path) {
                Ok(t) => *c = (mtime, Arc::new(t)),
                Err(e) => tracing::error!(error = %e, "tokens file not read; the last one stays"),
            }
        }
        c.1.clone()
    }
}

/// What the endpoint reads besides the snapshot.
#[derive(Debug)]
pub struct Call<'a> {
    /// The request's method.
    pub method: &'a Method,
    /// The request's fields.
    pub headers: &'a HeaderMap,
    /// The body, when it was a `POST`.
    pub body: Option<&'a [u8]>,
    /// Scheme and host, for absolute links.
    pub base: String,
    /// The users file, which says who a token's reader is now.
    pub users: &'a Users,
    /// The readers' API tokens.
    pub tokens: &'a TokenFile,
    /// The full-text index.
    pub search: &'a SearchIndex,
}

/// Answers one request to the endpoint.
pub fn answer(s: &Snapshot, c: &Call<'_>) -> Reply {
    if *c.method != Method::POST {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "use POST (JSON-RPC)\n")
            .with(header::ALLOW, "POST".into());
    }
    if !crate::auth::from_this_site(c.headers, s) {
        return plain(StatusCode::FORBIDDEN, "posted from another site\n");
    }
    if let Some(v) = c.headers.get("mcp-protocol-version") {
        if !VERSIONS.iter().any(|k| k.as_bytes() == v.as_bytes()) {
            return plain(
                StatusCode::BAD_REQUEST,
                "unsupported MCP-Protocol-Version\n",
            );
        }
    }
    let viewer = match caller(c) {
        Ok(v) => v,
        Err(()) => {
            return plain(StatusCode::UNAUTHORIZED, "unknown or revoked token\n").with(
                header::WWW_AUTHENTICATE,
                "Bearer error=\"invalid_token\"".into(),
            )
        }
    };
    let msg: Value = match serde_json::from_slice(c.body.unwrap_or_default()) {
        Ok(m) => m,
        Err(_) => {
            return rpc(
                StatusCode::BAD_REQUEST,
                error(Value::Null, -32700, "parse error"),
            )
        }
    };
    if !msg.is_object() {
        let e = error(
            Value::Null,
            -32600,
            "send one JSON-RPC message (batches are not supported)",
        );
        return rpc(StatusCode::BAD_REQUEST, e);
    }
    // A notification, or an answer to a request of ours (we send none): accepted.
    let (Some(id), Some(method)) = (msg.get("id"), msg.get("method").and_then(Value::as_str))
    else {
        return Reply::new(
            StatusCode::ACCEPTED,
            "text/plain",
            Vec::new(),
            Policy::NoStore,
        );
    };
    let id = id.clone();
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let who = viewer.as_ref().map_or(Visibility::Public, |v| v.audience);
    let out = match method {
        "initialize" => Ok(initialize(&params)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({ "tools": tool_list() })),
        "tools/call" => call_tool(s, c, who, &params),
        _ => Err((-32601, format!("no method `{}`", clip(method, 64)))),
    };
    let body = match out {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => error(id, code, &message),
    };
    rpc(StatusCode::OK, body)
}

/// The reader a bearer token names; `Ok(None)` for an anonymous call, `Err` for a
/// token that names nobody.
fn caller(c: &Call<'_>) -> Result<Option<Viewer>, ()> {
    let Some(auth) = c.headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    // The scheme's name is case-insensitive (RFC 9110 §11.1).
    let token = auth
        .to_str()
        .ok()
        .and_then(|a| a.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t)
        .ok_or(())?;
    let reader = c.tokens.current().verify(token.trim(), c.users).ok_or(())?;
    Ok(Some(Viewer {
        name: reader.name.clone(),
        role: reader.role.as_str(),
        audience: reader.audience(),
        shared: false,
    }))
}

fn initialize(params: &Value) -> Value {
    // The client's revision when we speak it, else our newest (the client then
    // decides whether to go on).
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = VERSIONS
        .iter()
        .find(|v| Some(**v) == asked)
        .unwrap_or(&VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": "quire", "version": env!("CARGO_PKG_VERSION") },
        "instructions": "Read-only access to this site's notes, as your token's reader \
                         (or the public) may see them. Notes are named by their URL path.",
    })
}

fn tool_list() -> Value {
    let url = json!({"type": "string", "description": "the note's URL path, e.g. /projects/plan (an absolute URL or a .md path works too)"});
    json!([
        {
            "name": "search",
            "description": "Full-text search of the notes you may read; best first.",
            "inputSchema": {"type": "object", "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": HITS_MAX}
            }, "required": ["query"]},
        },
        {
            "name": "get_note",
            "description": "A note as markdown: title, canonical URL, date, tags and description, then its text with links made absolute.",
            "inputSchema": {"type": "object", "properties": {"url": url}, "required": ["url"]},
        },
        {
            "name": "related",
            "description": "Notes related to a note (shared links, tags and words).",
            "inputSchema": {"type": "object", "properties": {"url": url}, "required": ["url"]},
        },
        {
            "name": "backlinks",
            "description": "Notes that link to a note.",
            "inputSchema": {"type": "object", "properties": {"url": url}, "required": ["url"]},
        },
        {
            "name": "list_notes",
            "description": "Notes in a folder, or with a tag, or all of them; newest first.",
            "inputSchema": {"type": "object", "properties": {
                "folder": {"type": "string", "description": "a folder's URL path, e.g. /projects/ (its subfolders' notes too)"},
                "tag": {"type": "string"},
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1, "maximum": LIST_MAX}
            }},
        },
    ])
}

/// A tool's result, or a JSON-RPC error for a call that names no tool or gives no
/// arguments object. A tool's own failure (no such note) is a result with
/// `isError`, as the specification asks.
fn call_tool(
    s: &Snapshot,
    c: &Call<'_>,
    who: Visibility,
    params: &Value,
) -> Result<Value, (i64, String)> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &Value::Null,
        Some(a @ Value::Object(_)) => a,
        Some(_) => return Err((-32602, "arguments must be an object".into())),
    };
    let out = match name {
        "search" => search(c, who, args),
        "get_note" => note(s, who, args).map(|i| {
            let md = quire_vault::render::markdown(
                &s.vault,
                i,
                who,
                &crate::respond::site_base(s, &c.base),
            );
            Text(cut(md, MARKDOWN_MAX))
        }),
        "related" => note(s, who, args).map(|i| listed(s, s.related.of(i, who).iter().copied())),
        "backlinks" => note(s, who, args).map(|i| {
            let entries = pages::backlinks(&s.vault, i, who);
            listed(s, entries.iter().map(|e| e.note))
        }),
        "list_notes" => list(s, who, args),
        _ => return Err((-32602, format!("no tool `{}`", clip(name, 64)))),
    };
    Ok(match out {
        Ok(Text(t)) => json!({"content": [{"type": "text", "text": t}], "isError": false}),
        Ok(Listed(v)) => json!({
            "content": [{"type": "text", "text": v.to_string()}],
            "structuredContent": v,
            "isError": false,
        }),
        Err(why) => json!({"content": [{"type": "text", "text": why}], "isError": true}),
    })
}

/// What a tool answers.
enum Out {
    Text(String),
    Listed(Value),
}
use Out::{Listed, Text};

fn search(c: &Call<'_>, who: Visibility, args: &Value) -> Result<Out, String> {
    let q = args.get("query").and_then(Value::as_str).unwrap_or("");
    if q.trim().is_empty() {
        return Err("give a query".into());
    }
    let limit = bounded(args.get("limit"), HITS_MAX, HITS_MAX);
    let found = c.search.search(clip(q, 512), who, limit);
    let hits: Vec<Value> = found
        .hits
        .iter()
        .map(|h| json!({"title": h.title, "url": h.url, "snippet": h.snippet}))
        .collect();
    Ok(Listed(json!({"hits": hits, "notice": found.notice})))
}

/// The note `args.url` names, if the audience may read it; one message for "no
/// such note" and "not yours", so a caller learns nothing of notes it cannot read.
fn note(s: &Snapshot, who: Visibility, args: &Value) -> Result<usize, String> {
    let raw = args.get("url").and_then(Value::as_str).unwrap_or("");
    let url = note_url(raw);
    let v = &s.vault;
    v.by_url(&url)
        .filter(|&i| v.notes()[i].visibility() <= who)
        .ok_or_else(|| format!("no note at `{}` that you may read", clip(raw, 200)))
}

/// A note's URL path from what a caller wrote: an absolute URL's path, a `.md`
/// path, a path without its leading `/`, percent-encoded or not.
fn note_url(raw: &str) -> String {
    let raw = raw.trim();
    let path = match raw.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => raw,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    let path = path
        .strip_suffix(crate::routes::MARKDOWN_SUFFIX)
        .unwrap_or(path);
    let decoded = crate::routes::percent_decode(path);
    match decoded.starts_with('/') {
        true => decoded,
        false => format!("/{decoded}"),
    }
}

fn list(s: &Snapshot, who: Visibility, args: &Value) -> Result<Out, String> {
    let v = &s.vault;
    let entries = if let Some(folder) = args.get("folder").and_then(Value::as_str) {
        let mut key = note_url(folder);
        if !key.ends_with('/') {
            key.push('/');
        }
        let mut under = pages::index(v, who);
        under.retain(|e| e.url.starts_with(&key));
        under
    } else if let Some(tag) = args.get("tag").and_then(Value::as_str) {
        let tag = tag.trim_start_matches('#').to_lowercase();
        pages::tags(v, who).remove(&tag).unwrap_or_default()
    } else {
        pages::index(v, who)
    };
    let offset = bounded(args.get("offset"), usize::MAX, 0);
    let limit = bounded(args.get("limit"), LIST_MAX, 50);
    let total = entries.len();
    let page = entries.iter().skip(offset).take(limit).map(|e| e.note);
    let Listed(mut out) = listed(s, page) else {
        unreachable!("listed lists");
    };
    out["total"] = total.into();
    Ok(Listed(out))
}

/// Notes as `{title, url, description, date, tags}` objects.
fn listed(s: &Snapshot, notes: impl Iterator<Item = usize>) -> Out {
    let v = &s.vault;
    let list: Vec<Value> = notes
        .take(LIST_MAX)
        .map(|i| {
            let n = &v.notes()[i];
            json!({
                "title": n.title(),
                "url": n.url,
                "description": n.front.description,
                "date": n.front.date,
                "tags": n.front.tags,
            })
        })
        .collect();
    Listed(json!({ "notes": list }))
}

/// A non-negative integer argument, at most `max`; `default` when absent or not one.
fn bounded(v: Option<&Value>, max: usize, default: usize) -> usize {
    v.and_then(Value::as_u64)
        .map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
        .min(max)
}

/// `s` cut to at most `max` bytes at a character boundary, saying so.
fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("\n\n[… cut: the note is longer than this tool returns]\n");
    }
    s
}

/// At most `max` bytes of `s`, at a character boundary (for echoes in messages).
fn clip(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn rpc(status: StatusCode, body: Value) -> Reply {
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    Reply::new(status, "application/json", bytes, Policy::NoStore)
}

fn plain(status: StatusCode, text: &str) -> Reply {
    Reply::new(
        status,
        "text/plain; charset=utf-8",
        text.as_bytes().to_vec(),
        Policy::NoStore,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn note_urls_are_read_however_they_are_written() {
        for (raw, want) in [
            ("/projects/plan", "/projects/plan"),
            ("projects/plan", "/projects/plan"),
            ("/projects/plan.md", "/projects/plan"),
            ("https://example.com/projects/plan?x=1#h", "/projects/plan"),
            ("/projects/pl%61n", "/projects/plan"),
            ("https://example.com", "/"),
        ] {
            assert_eq!(note_url(raw), want, "{raw}");
        }
    }

    #[test]
    fn bounds_hold_whatever_is_asked() {
        assert_eq!(bounded(Some(&json!(10_000)), 200, 50), 200);
        assert_eq!(bounded(Some(&json!(-1)), 200, 50), 50);
        assert_eq!(bounded(Some(&json!("7")), 200, 50), 50);
        assert_eq!(bounded(None, 200, 50), 50);
        assert_eq!(clip("héllo", 2), "h");
        let long = "é".repeat(10);
        assert!(cut(long, 5).starts_with("éé\n\n[… cut"));
    }
}
