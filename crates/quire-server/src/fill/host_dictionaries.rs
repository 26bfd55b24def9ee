//! Compression dictionaries quire makes from an origin's own pages (RFC 9842), for
//! the hosts `[dictionaries]` names, as `quire serve` does for its site.
//!
//! A content site's pages share most of their bytes (head, navigation, footer).
//! For each host named, the HTML pages quire stores are sampled (their decoded
//! bodies, one per URL) until `sample_pages` are in, or `sample_wait` has passed with
//! at least two; a raw dictionary is then assembled from them
//! (`quire_http::dictionary::assemble`: the first page whole, then what each other
//! adds) and served at `/_quire/dictionary/<sha256>.dict` on that host, immutable,
//! with `Use-As-Dictionary: match="/*", match-dest=("document")`. Pages of the host
//! stored from then on carry `Link: <…>; rel="compression-dictionary"`, which
//! Chromium fetches when idle, and are stored `dcz` against it too, in the
//! background like brotli; a browser that names the dictionary in
//! `Available-Dictionary` gets that body (`crate::request::hit` checks the hash the
//! body begins with, so no other client ever does).
//!
//! Key decisions:
//! - **Per host, sampled as pages are stored**: no crawl, no extra origin request.
//!   A page stored before its host's dictionary was made gets neither `Link` nor
//!   `dcz` until it is fetched again (its expiry, a purge, a refill).
//! - **Renewed, never swapped under a reader**: after `rebuild_after`, a new sample
//!   makes a new dictionary; the previous one is still served, so browsers that hold
//!   it, and pages stored against it, keep working until they move on.
//! - **Bounded**: samples of at most [`SAMPLE_PAGE_MAX`] bytes each,
//!   `sample_pages` pages and [`SAMPLE_BYTES_PER_MAX`] × `max_bytes` bytes per host
//!   (a full sample is made into a dictionary), at most 64 hosts (the config's limit), a
//!   dictionary of `max_bytes` (1 MiB at most); it is made on the blocking pool (the
//!   brotli copy served to browsers too), one host at a time.
//!   `quire_host_dictionaries_built_total` and `quire_host_dictionaries_bytes`.
//! - **Public pages only**: the dictionary is served to anyone, so a page that is
//!   not the same for every reader (`private`, `no-store`, `Set-Cookie`, `Vary:
//!   Cookie`/`Authorization`) is never sampled, whatever quire was told to store.
//! - **Each cluster node makes its own** from what it stores: a browser moving
//!   between nodes may hold another node's dictionary, and then gets brotli.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderMap};
use quire_http::dictionary::{self, Dictionary};

use crate::config::DictionariesSection;

/// Where the dictionaries are served: this, the hash in hex, then `.dict`.
pub(crate) const PATH_PREFIX: &str = "/_quire/dictionary/";

/// The largest page sampled (larger pages are mostly their own text).
pub(crate) const SAMPLE_PAGE_MAX: usize = 512 << 10;

/// A host's sample holds at most this many times `max_bytes` (more is never used:
/// a dictionary keeps the first page and what the others add, up to `max_bytes`).
pub(crate) const SAMPLE_BYTES_PER_MAX: usize = 4;

/// A dictionary made, with the brotli copy it is served as.
pub(crate) struct Made {
    pub(crate) dictionary: Arc<Dictionary>,
    pub(crate) br: Option<Bytes>,
    made: Instant,
}

impl Made {
    /// Where it is served.
    pub(crate) fn path(&self) -> String {
        format!("{PATH_PREFIX}{}.dict", self.dictionary.hex())
    }
}

#[derive(Default)]
struct Host {
    /// Pages sampled since the last dictionary (URL, body).
    sample: Vec<(String, Vec<u8>)>,
    /// When the first of them was.
    first: Option<Instant>,
    current: Option<Arc<Made>>,
    previous: Option<Arc<Made>>,
}

/// Every host's dictionaries, shared by the server's fills and the admin path.
#[derive(Default)]
pub(crate) struct HostDictionaries {
    hosts: Mutex<HashMap<String, Host>>,
    /// One dictionary is made at a time.
    making: AtomicBool,
    built: AtomicU64,
}

impl std::fmt::Debug for HostDictionaries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostDictionaries")
            .field("built", &self.built.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The host of an absolute URL (`scheme://host[:port]/…`), lower-case, no port.
pub(crate) fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    Some(strip_port(authority).to_ascii_lowercase())
}

/// `authority` without its port (an IPv6 literal keeps its brackets).
pub(crate) fn strip_port(authority: &str) -> &str {
    match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => &authority[..i],
        _ => authority,
    }
}

/// Whether a stored response is the same for every reader, so that its bytes may go
/// into a dictionary anyone can fetch: not `private` or `no-store` (a signed-in
/// reader's page in `quire serve`, a private cache's entries), no `Set-Cookie`, and
/// not varying on the reader's credentials.
fn for_everyone(headers: &HeaderMap) -> bool {
    let tokens = |name| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().to_ascii_lowercase())
            .collect::<Vec<_>>()
    };
    let cc = tokens(header::CACHE_CONTROL);
    let personal = cc
        .iter()
        .any(|t| t.starts_with("private") || t.starts_with("no-store"));
    let vary = tokens(header::VARY);
    let per_reader = vary
        .iter()
        .any(|t| t == "*" || t == "cookie" || t == "authorization");
    !personal && !per_reader && !headers.contains_key(header::SET_COOKIE)
}

fn is_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/html"))
}

impl HostDictionaries {
    /// Samples the stored page at `url` (a `200` with `headers` and decoded `body`)
    /// for its host's next dictionary; returns the sample to make one from when it
    /// is due (the caller makes it with [`make`] and hands it to [`Self::install`]).
    pub(crate) fn observe(
        &self,
        cfg: &DictionariesSection,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Option<(String, Vec<Vec<u8>>)> {
        let host = host_of(url).filter(|h| cfg.covers(h))?;
        if !is_html(headers)
            || !for_everyone(headers)
            || body.is_empty()
            || body.len() > SAMPLE_PAGE_MAX
        {
            return None;
        }
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let h = hosts.entry(host.clone()).or_default();
        let renew = h
            .current
            .as_ref()
            .is_none_or(|m| m.made.elapsed() >= cfg.rebuild_after.0);
        if !renew {
            return None;
        }
        let max = usize::try_from(cfg.max_bytes.0).unwrap_or(usize::MAX);
        let held: usize = h.sample.iter().map(|(_, b)| b.len()).sum();
        let room = held + body.len() <= max.saturating_mul(SAMPLE_BYTES_PER_MAX);
        let full = h.sample.len() >= cfg.sample_pages || !room;
        if !full && !h.sample.iter().any(|(u, _)| u == url) {
            h.sample.push((url.to_owned(), body.to_vec()));
            h.first.get_or_insert_with(Instant::now);
        }
        let waited = h.first.is_some_and(|t| t.elapsed() >= cfg.sample_wait.0);
        let full = full || h.sample.len() >= cfg.sample_pages;
        let due = (full || waited) && h.sample.len() >= 2;
        if !due || self.making.swap(true, Ordering::AcqRel) {
            return None;
        }
        h.first = None;
        let pages = std::mem::take(&mut h.sample)
            .into_iter()
            .map(|(_, b)| b)
            .collect();
        Some((host, pages))
    }

    /// Makes `made` the dictionary of `host`'s pages stored from now on (the one
    /// before is still served); ends the making [`Self::observe`] started.
    pub(crate) fn install(&self, host: String, made: Option<Made>) {
        if let Some(made) = made {
            let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
            let h = hosts.entry(host).or_default();
            h.previous = h.current.replace(Arc::new(made));
            self.built.fetch_add(1, Ordering::Relaxed);
        }
        self.making.store(false, Ordering::Release);
    }

    /// The dictionary a page at `url` with `headers` is stored against, with the
    /// `Link` value that points at it; `None` for another host, not HTML, or before
    /// the host has one.
    pub(crate) fn for_page(
        &self,
        cfg: &DictionariesSection,
        url: &str,
        headers: &HeaderMap,
    ) -> Option<Arc<Made>> {
        let host = host_of(url).filter(|h| cfg.covers(h))?;
        if !is_html(headers) {
            return None;
        }
        let hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        hosts.get(&host)?.current.clone()
    }

    /// The dictionary served at `path` (under [`PATH_PREFIX`]) on `host` (a `Host`
    /// field's value), if it is that host's current or previous one.
    pub(crate) fn served(
        &self,
        cfg: &DictionariesSection,
        host: &str,
        path: &str,
    ) -> Option<Arc<Made>> {
        let host = strip_port(host).to_ascii_lowercase();
        if !cfg.covers(&host) {
            return None;
        }
        let hex = path.strip_prefix(PATH_PREFIX)?.strip_suffix(".dict")?;
        let hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        let h = hosts.get(&host)?;
        for m in [&h.current, &h.previous].into_iter().flatten() {
            if m.dictionary.hex() == hex {
                return Some(m.clone());
            }
        }
        None
    }

    /// `quire_host_dictionaries_built_total` and `quire_host_dictionaries_bytes`.
    pub(crate) fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let bytes: usize = {
            let hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
            hosts
                .values()
                .flat_map(|h| [&h.current, &h.previous])
                .flatten()
                .map(|m| m.dictionary.bytes().len() + m.br.as_ref().map_or(0, Bytes::len))
                .sum::<usize>()
                + hosts
                    .values()
                    .flat_map(|h| &h.sample)
                    .map(|(_, b)| b.len())
                    .sum::<usize>()
        };
        let _ = writeln!(
            out,
            "# HELP quire_host_dictionaries_built_total Compression dictionaries made from the pages of a [dictionaries] host.\n\
             # TYPE quire_host_dictionaries_built_total counter\n\
             quire_host_dictionaries_built_total {}\n\
             # HELP quire_host_dictionaries_bytes Bytes held for [dictionaries] hosts: dictionaries served (and their brotli copies) and pages sampled for the next.\n\
             # TYPE quire_host_dictionaries_bytes gauge\n\
             quire_host_dictionaries_bytes {bytes}",
            self.built.load(Ordering::Relaxed),
        );
    }
}

/// Makes a dictionary of at most `max` bytes from `pages` (blocking: brotli of the
/// served copy); `None` when they share nothing worth a dictionary (empty).
pub(crate) fn make(pages: &[Vec<u8>], max: usize) -> Option<Made> {
    let bytes = dictionary::assemble(pages, max);
    if bytes.is_empty() {
        return None;
    }
    let br = crate::fill::compress::encode(
        quire_http::encoding::Coding::Br,
        &bytes,
        &crate::config::Levels {
            brotli: 11,
            ..crate::config::Levels::default()
        },
    )
    .ok()
    .map(Bytes::from);
    Some(Made {
        dictionary: Arc::new(Dictionary::new(bytes)),
        br,
        made: Instant::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use std::time::Duration;

    fn html() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        h
    }

    fn cfg(pages: usize) -> DictionariesSection {
        DictionariesSection {
            hosts: vec!["a.test".into()],
            sample_pages: pages,
            ..DictionariesSection::default()
        }
    }

    fn page(i: usize) -> Vec<u8> {
        format!("<html><nav>the same navigation</nav><p>page {i}</p><footer>f</footer></html>")
            .into_bytes()
    }

    #[test]
    fn a_hosts_pages_are_sampled_once_each_and_then_made_into_a_dictionary() {
        let d = HostDictionaries::default();
        let c = cfg(3);
        assert!(
            d.observe(&c, "http://b.test/1", &html(), &page(1))
                .is_none(),
            "another host"
        );
        let mut css = HeaderMap::new();
        css.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/css"));
        assert!(
            d.observe(&c, "http://a.test/s.css", &css, b"x").is_none(),
            "not HTML"
        );
        assert!(d
            .observe(&c, "http://a.test/1", &html(), &page(1))
            .is_none());
        assert!(
            d.observe(&c, "http://a.test/1", &html(), &page(1))
                .is_none(),
            "sampled once"
        );
        assert!(d
            .observe(&c, "http://a.test:8080/2", &html(), &page(2))
            .is_none());
        let (host, pages) = d.observe(&c, "http://a.test/3", &html(), &page(3)).unwrap();
        assert_eq!((host.as_str(), pages.len()), ("a.test", 3));
        assert!(
            d.for_page(&c, "http://a.test/4", &html()).is_none(),
            "not made yet"
        );
        let made = make(&pages, 4096).unwrap();
        let text = String::from_utf8(made.dictionary.bytes().to_vec()).unwrap();
        assert_eq!(text.matches("the same navigation").count(), 1, "{text}");
        d.install(host, Some(made));
        let m = d.for_page(&c, "http://a.test/4", &html()).unwrap();
        assert!(d.for_page(&c, "http://a.test/s.css", &css).is_none());
        // Served on its host at its hash, and nowhere else.
        let path = m.path();
        assert!(d.served(&c, "a.test:8080", &path).is_some());
        assert!(d.served(&c, "b.test", &path).is_none());
        assert!(d
            .served(&c, "a.test", "/_quire/dictionary/00.dict")
            .is_none());
        // Not renewed before rebuild_after.
        assert!(d
            .observe(&c, "http://a.test/5", &html(), &page(5))
            .is_none());
        assert!(d.hosts.lock().unwrap()["a.test"].sample.is_empty());
    }

    /// A page over [`SAMPLE_PAGE_MAX`] is not sampled.
    #[test]
    fn a_page_past_the_sample_limit_is_not_sampled() {
        let d = HostDictionaries::default();
        let mut c = cfg(2);
        c.max_bytes = crate::config::ByteSize(1 << 20);
        let huge = vec![b'x'; SAMPLE_PAGE_MAX + 1];
        assert!(d.observe(&c, "http://a.test/big", &html(), &huge).is_none());
        assert!(d.hosts.lock().unwrap().get("a.test").is_none());
        assert!(d
            .observe(&c, "http://a.test/1", &html(), &page(1))
            .is_none());
        assert!(d
            .observe(&c, "http://a.test/2", &html(), &page(2))
            .is_some());
    }

    /// A sample stops at four times the dictionary's size, whatever the pages.
    #[test]
    fn a_hosts_sample_is_bounded_by_bytes() {
        let d = HostDictionaries::default();
        let mut c = cfg(256);
        c.max_bytes = crate::config::ByteSize(4096);
        let big = |i: usize| {
            let mut p = page(i);
            p.resize(5000, b' ');
            p
        };
        // Three pages of 5,000 bytes fit in 16 KiB; the fourth makes the sample due.
        for i in 0..3 {
            assert!(d
                .observe(&c, &format!("http://a.test/{i}"), &html(), &big(i))
                .is_none());
        }
        let (_, pages) = d.observe(&c, "http://a.test/3", &html(), &big(3)).unwrap();
        assert_eq!(pages.len(), 3);
    }

    /// A reader's own page never goes into a dictionary anyone can fetch.
    #[test]
    fn private_pages_are_never_sampled() {
        let d = HostDictionaries::default();
        let c = cfg(2);
        let with = |name: &str, value: &str| {
            let mut h = html();
            h.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
            h
        };
        for (i, h) in [
            with("cache-control", "private, no-cache"),
            with("cache-control", "max-age=60, No-Store"),
            with("set-cookie", "sid=1"),
            with("vary", "Accept-Encoding, Cookie"),
            with("vary", "authorization"),
        ]
        .iter()
        .enumerate()
        {
            let secret = format!("secret {i}").into_bytes();
            assert!(d
                .observe(&c, &format!("http://a.test/{i}"), h, &secret)
                .is_none());
        }
        assert!(d
            .hosts
            .lock()
            .unwrap()
            .get("a.test")
            .is_none_or(|h| h.sample.is_empty()));
        // Public pages are.
        assert!(d
            .observe(
                &c,
                "http://a.test/p",
                &with("cache-control", "public, max-age=60"),
                &page(1)
            )
            .is_none());
        assert!(d
            .observe(&c, "http://a.test/q", &html(), &page(2))
            .is_some());
    }

    #[test]
    fn a_small_site_gets_a_dictionary_after_the_wait_and_an_old_one_stays_served() {
        let d = HostDictionaries::default();
        let mut c = cfg(64);
        c.sample_wait = crate::config::Secs(Duration::from_millis(1));
        assert!(d
            .observe(&c, "http://a.test/1", &html(), &page(1))
            .is_none());
        std::thread::sleep(Duration::from_millis(5));
        let (host, pages) = d.observe(&c, "http://a.test/2", &html(), &page(2)).unwrap();
        // One making at a time.
        assert!(d
            .observe(&c, "http://a.test/3", &html(), &page(3))
            .is_none());
        d.install(host, make(&pages, 4096));
        let first = d.for_page(&c, "http://a.test/x", &html()).unwrap().path();
        // A renewal keeps the previous one served.
        // (Page 3, sampled while the first was being made, starts the next sample.)
        c.rebuild_after = crate::config::Secs(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(5));
        let (host, pages) = d.observe(&c, "http://a.test/6", &html(), &page(6)).unwrap();
        assert_eq!(pages.len(), 2);
        d.install(host, make(&pages, 4096));
        let second = d.for_page(&c, "http://a.test/x", &html()).unwrap().path();
        assert_ne!(first, second);
        assert!(
            d.served(&c, "a.test", &first).is_some(),
            "the previous one is served"
        );
        let mut out = String::new();
        d.write_metrics(&mut out);
        assert!(
            out.contains("quire_host_dictionaries_built_total 2"),
            "{out}"
        );
    }
}
