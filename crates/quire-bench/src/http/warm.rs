//! The warm-up pass and its check (a cold cache, or a single URL, measures misses or
//! one page, not the cache). Every URL is requested once, then again until the server says it was a
//! cache hit: quire in `Cache-Status` (`quire; hit`), the peers in `X-Cache: HIT`.
//! A server that says neither is counted as unknown, not as warm.

use std::time::Duration;

use super::urls;

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Warmth {
    /// URLs whose second request was a hit.
    pub hits: usize,
    /// URLs whose answers say nothing about the cache.
    pub unknown: usize,
    /// URLs that failed (`path (status)`).
    pub failed: Vec<String>,
    /// URLs checked.
    pub urls: usize,
}

impl Warmth {
    /// Warnings for the report: URLs that were not hits, URLs that failed.
    pub(crate) fn warnings(&self, server: &str) -> Vec<String> {
        let mut w = Vec::new();
        if self.hits + self.unknown < self.urls {
            w.push(format!(
                "{server}: {} URLs were not cache hits after the warm-up: the run measures misses too",
                self.urls - self.hits - self.unknown
            ));
        }
        if !self.failed.is_empty() {
            w.push(format!(
                "{server}: {} URLs failed: {}",
                self.failed.len(),
                self.failed
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        w
    }
}

/// What a response head (lower-cased) says about the cache: `Some(true)` for a hit,
/// `Some(false)` for anything else it names, `None` when it names nothing.
pub(crate) fn hit_in(head: &str) -> Option<bool> {
    let field = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    if let Some(cs) = field("cache-status:") {
        // RFC 9211: the first member is the cache nearest the origin; ours is last.
        let last = cs.rsplit(',').next().unwrap_or(cs).trim();
        return Some(last.split(';').any(|p| p.trim() == "hit"));
    }
    field("x-cache:").map(|x| x.eq_ignore_ascii_case("hit"))
}

/// Requests every path on `host` (asking for `accept_encoding`, as the run will),
/// then checks each is a hit, retrying a while: stores land just after the answers
/// stream.
pub(crate) fn warm(host: &str, paths: &[String], accept_encoding: &str) -> anyhow::Result<Warmth> {
    let mut w = Warmth {
        urls: paths.len(),
        ..Warmth::default()
    };
    for p in paths {
        let _ = urls::get_encoded(host, p, accept_encoding)?;
    }
    std::thread::sleep(Duration::from_millis(300));
    for p in paths {
        let mut tries = 0;
        loop {
            let (status, head, _) = urls::get_encoded(host, p, accept_encoding)?;
            let hit = hit_in(&head);
            let ok = (200..400).contains(&status);
            if hit != Some(false) || tries == 10 || !ok {
                if !ok {
                    w.failed.push(format!("{p} ({status})"));
                }
                match hit {
                    Some(true) => w.hits += 1,
                    Some(false) => {}
                    None => w.unknown += 1,
                }
                break;
            }
            tries += 1;
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_are_read_from_cache_status_or_x_cache() {
        assert_eq!(hit_in("cache-status: quire; hit\r\n"), Some(true));
        assert_eq!(hit_in("cache-status: quire; fwd=miss; stored"), Some(false));
        assert_eq!(
            hit_in("cache-status: origin; hit, quire; fwd=miss"),
            Some(false),
            "the origin's hit is not ours"
        );
        assert_eq!(hit_in("x-cache: HIT"), Some(true));
        assert_eq!(hit_in("x-cache: MISS"), Some(false));
        assert_eq!(hit_in("content-type: text/html"), None);
        let w = Warmth {
            hits: 8,
            unknown: 0,
            failed: vec!["/a (500)".into()],
            urls: 10,
        };
        let warnings = w.warnings("nginx");
        assert!(warnings[0].contains("2 URLs were not cache hits"));
        assert!(warnings[1].contains("/a (500)"));
    }
}
