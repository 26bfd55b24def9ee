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
//! - **Public pages first, then the audiences' pages their readers asked for
//!   lately.** Every public page is rendered ahead: anyone may ask for any of them.
//!   An audience's page is worth a render only if a member is likely to ask, and the
//!   best sign of that here is that one did: the site remembers the pages each
//!   audience's fills were for ([`RECENT_MAX`] in all, the oldest forgotten first)
//!   and, after a change, queues those changed for their audience, behind the
//!   public ones, if asked for within [`RECENT_WINDOW`]. So a members-only site keeps
//!   its members' working set warm across edits, a site with no signed-in readers
//!   renders nothing for audiences, and no change costs more than `RECENT_MAX`
//!   audience renders. A page no member asked for yet renders on its first request,
//!   then is cached ([`crate::audience`]).
//! - A page changed again before its prefill ran is filled once, under its newest key:
//!   a prefill keys by the version it reads when it runs (and skips a page stored
//!   under its current key already).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use http::HeaderMap;
use quire_server::prefill::Prefill;
use quire_vault::Visibility;

use crate::snapshot::Snapshot;

/// Scheme and host pairs the site prefills for, at most.
pub const ORIGINS_MAX: usize = 4;

/// Audiences' pages remembered as asked for, at most (all audiences together).
pub const RECENT_MAX: usize = 4096;

/// How lately an audience's page must have been asked for to be rendered ahead.
pub const RECENT_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// The prefill queue, once attached, the origins pages are prefilled for, and the
/// audiences' pages asked for lately.
#[derive(Debug, Default)]
pub struct Ahead {
    prefill: OnceLock<Prefill>,
    origins: Mutex<Vec<String>>,
    recent: Mutex<HashMap<(Visibility, String), Instant>>,
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
        let n = queue(prefill, &origin, None, snap.versions.keys());
        tracing::info!(origin, pages = n, "prefilling the site for a new origin");
    }

    /// `paths` changed in a reload: queued for every origin seen.
    pub fn changed(&self, paths: &[String]) -> usize {
        let Some(prefill) = self.prefill.get() else {
            return 0;
        };
        let known = self.origins();
        known
            .iter()
            .map(|o| queue(prefill, o, None, paths.iter()))
            .sum()
    }

    /// A fill for audience `aud` was for `path`: remembered (the oldest forgotten
    /// past [`RECENT_MAX`]). Nothing is kept until a prefill queue is attached.
    pub fn asked(&self, aud: Visibility, path: &str) {
        if self.prefill.get().is_none() {
            return;
        }
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let key = (aud, path.to_owned());
        if !recent.contains_key(&key) && recent.len() >= RECENT_MAX {
            let oldest = recent
                .iter()
                .min_by_key(|(_, t)| **t)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                recent.remove(&k);
            }
        }
        recent.insert(key, now);
    }

    /// Audiences' `pages` changed in a reload: those asked for within
    /// [`RECENT_WINDOW`] are queued for their audience, for every origin seen.
    pub fn changed_signed_in(&self, pages: &[(Visibility, String)]) -> usize {
        let Some(prefill) = self.prefill.get() else {
            return 0;
        };
        let wanted: Vec<(Visibility, String)> = {
            let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            pages
                .iter()
                .filter(|(aud, path)| {
                    recent
                        .get(&(*aud, path.clone()))
                        .is_some_and(|t| t.elapsed() < RECENT_WINDOW)
                })
                .cloned()
                .collect()
        };
        let known = self.origins();
        let mut n = 0;
        for (aud, path) in &wanted {
            let audience = crate::audience::of_visibility(*aud);
            n += known
                .iter()
                .map(|o| queue(prefill, o, audience, std::iter::once(path)))
                .sum::<usize>();
        }
        n
    }

    /// The origins seen so far.
    fn origins(&self) -> Vec<String> {
        self.origins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Queues each of `paths` at `origin` for `audience` (`None`: anonymous); how many
/// were queued.
fn queue<'a>(
    prefill: &Prefill,
    origin: &str,
    audience: Option<quire_server::upstream::Audience>,
    paths: impl Iterator<Item = &'a String>,
) -> usize {
    paths
        .filter(|p| ahead_of_time(p))
        .filter(|p| prefill.queue_for(format!("{origin}{}", encode(p)), audience))
        .count()
}

/// Whether the page at `path` is rendered before anyone asks. Not a note's
/// markdown, nor `/llms-full.txt` (every note's): an agent asks for them now and
/// then, no reader waits for them, so they are not worth a render ahead of time.
pub fn ahead_of_time(path: &str) -> bool {
    !matches!(
        crate::routes::route(path),
        crate::routes::Page::NoteMarkdown(_) | crate::routes::Page::LlmsFullTxt
    )
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
