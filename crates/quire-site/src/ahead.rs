//! Pages rendered before anyone asks for them: after a reload, the public pages whose
//! version changed are queued to `quire-server`'s prefill task
//! (`quire_server::prefill`), which fills them in the background at a priority that
//! never delays a request. So the first reader after an edit gets a hit.
//!
//! Key decisions:
//! - **Which host.** A page's key carries the scheme and host it was asked for, and
//!   the site does not know them before a request: it learns them from fills (the
//!   `Host` and `X-Forwarded-Proto` quire-server sets on each), and keeps at most
//!   [`ORIGINS_MAX`]. The first fill for a new one queues every public page of the
//!   site for it, so a site is warm moments after its first reader. With `base_url`
//!   set, only its host is taken: a client sending made-up `Host` fields cannot make
//!   the site render itself for them, or take the slots.
//! - **Public pages first, and only them**: an audience's pages need the audience, which
//!   only a signed-in request names; they are rendered on their first request after a
//!   change, then cached ([`crate::audience`]).
//! - A page changed again before its prefill ran is filled once, under its newest key:
//!   a prefill keys by the version it reads when it runs (and skips a page stored
//!   under its current key already).

use std::sync::{Mutex, OnceLock};

use http::HeaderMap;
use quire_server::prefill::Prefill;

use crate::snapshot::Snapshot;

/// Scheme and host pairs the site prefills for, at most.
pub const ORIGINS_MAX: usize = 4;

/// The prefill queue, once attached, and the origins pages are prefilled for.
#[derive(Debug, Default)]
pub struct Ahead {
    prefill: OnceLock<Prefill>,
    origins: Mutex<Vec<String>>,
}

impl Ahead {
    /// Prefills go to `prefill`. False if one was attached already.
    pub fn attach(&self, prefill: Prefill) -> bool {
        self.prefill.set(prefill).is_ok()
    }

    /// A fill arrived with `headers`: a new origin gets every public page of `snap`
    /// queued.
    pub fn seen(&self, headers: &HeaderMap, snap: &Snapshot) {
        let Some(prefill) = self.prefill.get() else {
            return;
        };
        let Some(origin) = origin_of(headers, &snap.config.base_url) else {
            return;
        };
        {
            let mut known = self.origins.lock().unwrap_or_else(|p| p.into_inner());
            if known.contains(&origin) || known.len() >= ORIGINS_MAX {
                return;
            }
            known.push(origin.clone());
        }
        let n = queue(prefill, &origin, snap.versions.keys());
        tracing::info!(origin, pages = n, "prefilling the site for a new origin");
    }

    /// `paths` changed in a reload: queued for every origin seen.
    pub fn changed(&self, paths: &[String]) -> usize {
        let Some(prefill) = self.prefill.get() else {
            return 0;
        };
        let known = self
            .origins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        known.iter().map(|o| queue(prefill, o, paths.iter())).sum()
    }
}

/// Queues each of `paths` at `origin`; how many were queued.
fn queue<'a>(prefill: &Prefill, origin: &str, paths: impl Iterator<Item = &'a String>) -> usize {
    paths
        .filter(|p| prefill.queue(format!("{origin}{}", encode(p))))
        .count()
}

/// A page path as a request target: the characters a URL cannot carry raw are
/// percent-encoded (note URLs are slugs; attachment names may hold anything).
fn encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `scheme://host` of a fill, from the fields quire-server sets on it; with
/// `base_url` set, only its host counts.
fn origin_of(headers: &HeaderMap, base_url: &str) -> Option<String> {
    let host = headers.get(http::header::HOST)?.to_str().ok()?;
    if host.is_empty() || !host.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
    {
        Some("https") => "https",
        _ => "http",
    };
    if !base_url.is_empty() {
        let base_host = base_url.split_once("://").map_or(base_url, |(_, h)| h);
        let base_host = base_host.split('/').next().unwrap_or("");
        if !base_host.eq_ignore_ascii_case(host) {
            return None;
        }
    }
    Some(format!("{scheme}://{}", host.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_come_from_fills_and_base_url_narrows_them() {
        let mut h = HeaderMap::new();
        h.insert(http::header::HOST, "Garden.Example".parse().unwrap());
        assert_eq!(origin_of(&h, ""), Some("http://garden.example".into()));
        h.insert("x-forwarded-proto", "https".parse().unwrap());
        assert_eq!(origin_of(&h, ""), Some("https://garden.example".into()));
        assert_eq!(
            origin_of(&h, "https://garden.example"),
            Some("https://garden.example".into())
        );
        assert_eq!(origin_of(&h, "https://other.example/"), None);
        h.insert(http::header::HOST, "a b".parse().unwrap());
        assert_eq!(origin_of(&h, ""), None);
    }

    #[test]
    fn paths_are_encoded_as_targets() {
        assert_eq!(encode("/notes/a-b"), "/notes/a-b");
        assert_eq!(encode("/attachments/a b.png"), "/attachments/a%20b.png");
        assert_eq!(encode("/x?y#z"), "/x%3Fy%23z");
    }
}
