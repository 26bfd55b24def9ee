//! A rendered answer and the cache policy it carries, turned into an HTTP response
//! for `quire-server`.
//!
//! Key decision: **the cache lifetime is stated to quire alone.** Anonymous pages
//! carry `CDN-Cache-Control: max-age=…` (RFC 9213), which quire honours and
//! browsers ignore, and `Cache-Control: no-cache` with an `ETag` for browsers: they
//! revalidate every time and get a 304 from quire's fast path, so a changed page is
//! seen at once. Pages rendered for a signed-in audience are `private, no-cache`
//! to browsers and kept by quire alone (`Surrogate-Control`, see
//! [`crate::audience`]); pages rendered for one reader are `private, no-store`
//! everywhere. Versioned assets (`?v=` matching the current version) are
//! `immutable` for a year.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};
use quire_server::upstream::{BoxError, UpBody};
use quire_vault::Visibility;

/// How long quire keeps an anonymous page fresh. Versioned keys make a change visible
/// at once whatever this is; it bounds how long a page could outlive a missed watch
/// event.
pub const PAGE_TTL_SECS: u64 = 3600;

/// Who may keep the answer, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// An anonymous page at `version`: quire keeps it, browsers revalidate.
    Shared(u64),
    /// A page at `version` rendered for a whole signed-in audience: quire keeps it
    /// under the audience's keys (its lifetime in `Surrogate-Control`, which quire
    /// never sends on), browsers keep it private and revalidate.
    Audience(u64, Visibility),
    /// A versioned asset requested with its current version.
    Immutable,
    /// For one reader only, or an answer to a form: never stored.
    NoStore,
}

/// A rendered answer.
#[derive(Debug)]
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Body.
    pub body: Bytes,
    /// Caching.
    pub policy: Policy,
    /// `Surrogate-Key` (the page's path), for purges.
    pub tag: Option<String>,
    /// Further fields (`Location`, `Set-Cookie`).
    pub extra: Vec<(header::HeaderName, String)>,
    /// Stream the body from this file (of this length) instead of `body`.
    pub file: Option<(std::path::PathBuf, u64)>,
    /// An HTML page that loads quire's page script (its CSP allows that script).
    pub scripted: bool,
}

/// HTML pages.
pub const HTML: &str = "text/html; charset=utf-8";

impl Reply {
    /// A reply with no extra fields.
    pub fn new(
        status: StatusCode,
        content_type: &'static str,
        body: impl Into<Bytes>,
        policy: Policy,
    ) -> Reply {
        Reply {
            status,
            content_type,
            body: body.into(),
            policy,
            tag: None,
            extra: Vec::new(),
            file: None,
            scripted: false,
        }
    }

    /// A reply whose body is streamed from `path` (`len` bytes) in chunks: a large
    /// attachment is never read into memory whole.
    pub fn file(
        content_type: &'static str,
        path: std::path::PathBuf,
        len: u64,
        policy: Policy,
    ) -> Reply {
        let mut r = Reply::new(StatusCode::OK, content_type, Bytes::new(), policy);
        r.file = Some((path, len));
        r
    }

    /// With a `Surrogate-Key` for the page at `path`.
    pub fn tagged(mut self, path: &str) -> Reply {
        self.tag = Some(path_tag(path));
        self
    }

    /// Loading quire's page script, if `on`.
    pub fn scripted(mut self, on: bool) -> Reply {
        self.scripted = on;
        self
    }

    /// With one more field.
    pub fn with(mut self, name: header::HeaderName, value: String) -> Reply {
        self.extra.push((name, value));
        self
    }

    /// A `303 See Other` to a local path, never stored.
    pub fn redirect(to: &str) -> Reply {
        Reply::new(
            StatusCode::SEE_OTHER,
            "text/plain; charset=utf-8",
            Bytes::new(),
            Policy::NoStore,
        )
        .with(header::LOCATION, to.to_owned())
    }

    /// The HTTP response.
    pub fn into_response(self) -> Response<UpBody> {
        let body = match &self.file {
            Some((path, _)) => FileBody::open(path.clone()).boxed_unsync(),
            None => Full::new(self.body)
                .map_err(|never| -> BoxError { match never {} })
                .boxed_unsync(),
        };
        let mut r = Response::new(body);
        *r.status_mut() = self.status;
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        match self.policy {
            Policy::Shared(version) => {
                h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                if let Ok(v) = HeaderValue::from_str(&format!("max-age={PAGE_TTL_SECS}")) {
                    h.insert("cdn-cache-control", v);
                }
                if let Ok(v) = HeaderValue::from_str(&format!("\"{version:016x}\"")) {
                    h.insert(header::ETAG, v);
                }
            }
            Policy::Audience(version, _) => {
                h.insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("private, no-cache"),
                );
                if let Ok(v) = HeaderValue::from_str(&format!("max-age={PAGE_TTL_SECS}")) {
                    h.insert("surrogate-control", v);
                }
                if let Ok(v) = HeaderValue::from_str(&format!("\"{version:016x}\"")) {
                    h.insert(header::ETAG, v);
                }
            }
            Policy::Immutable => {
                h.insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("public, max-age=31536000, immutable"),
                );
            }
            Policy::NoStore => {
                h.insert(
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("private, no-store"),
                );
            }
        }
        // A page kept for an audience also carries its audience's tag, so a reload
        // can purge what changed for that audience alone.
        let tag = match (self.tag, self.policy) {
            (Some(t), Policy::Audience(_, aud)) => Some(format!("{t} {}", audience_tag(&t, aud))),
            (t, _) => t,
        };
        if let Some(tag) = tag.and_then(|t| HeaderValue::from_str(&t).ok()) {
            h.insert("surrogate-key", tag);
        }
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
        if self.content_type == HTML {
            let csp = if self.scripted {
                crate::csp::scripted()
            } else {
                crate::csp::PAGE
            };
            h.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(csp),
            );
        }
        for (name, value) in self.extra {
            if let Ok(v) = HeaderValue::from_str(&value) {
                h.append(name, v);
            }
        }
        r
    }
}

/// The surrogate key of the page at `path`: `page:` and the path's xxh3 (a path may
/// hold characters a `Surrogate-Key` list cannot).
pub fn path_tag(path: &str) -> String {
    format!("page:{:016x}", xxhash_rust::xxh3::xxh3_64(path.as_bytes()))
}

/// The surrogate key of `aud`'s entry of the page whose tag is `page_tag`.
pub fn audience_tag(page_tag: &str, aud: Visibility) -> String {
    let who = match aud {
        Visibility::Public => "public",
        Visibility::Private => "reader",
        Visibility::Draft => "admin",
    };
    format!("{page_tag}:{who}")
}

/// Bytes read from a file per chunk.
const FILE_CHUNK: usize = 64 * 1024;

/// A file's bytes, read on the blocking pool a chunk at a time (at most a few chunks
/// ahead of the client).
struct FileBody {
    rx: tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>,
}

impl FileBody {
    fn open(path: std::path::PathBuf) -> FileBody {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let mut f = match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            };
            loop {
                let mut buf = vec![0u8; FILE_CHUNK];
                match f.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        buf.truncate(n);
                        if tx.blocking_send(Ok(Bytes::from(buf))).is_err() {
                            return; // the client went away
                        }
                    }
                    Err(e) => {
                        let _ = tx.blocking_send(Err(e));
                        return;
                    }
                }
            }
        });
        FileBody { rx }
    }
}

impl http_body::Body for FileBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        self.rx
            .poll_recv(cx)
            .map(|m| m.map(|r| r.map(http_body::Frame::data).map_err(BoxError::from)))
    }
}
