//! Which origins may answer a request: pools by host and path prefix, and the
//! weighted order a pool's members are tried in.
//!
//! Key decisions:
//! - **A pool is the entries with the same `hosts` and `path_prefix`.** A request
//!   goes to exactly one pool: the first, in this order, whose hosts take the
//!   request's host and whose prefix takes its path — pools naming the host exactly,
//!   then by `*.` pattern, then the catch-all pools (no `hosts`), each group longest
//!   prefix first. The host decides before the path, as a server block does before
//!   a location in nginx. Two pools that would tie (the same host, the same prefix)
//!   are a configuration error, so the choice never depends on file order.
//! - **Weights are a smooth weighted round-robin schedule** (nginx's: weights 5, 1,
//!   1 give `a a b a c a a`, not `a a a a a b c`), computed once; a request takes
//!   the next slot with one atomic add. The members after it follow in file order,
//!   for when the scheduled one is down or refuses the connection.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::config::{ConfigError, OriginEntry};

/// One pool: its members (indexes into the entry list) and their schedule.
#[derive(Debug)]
pub(crate) struct Pool {
    hosts: Vec<String>,
    prefix: String,
    members: Vec<usize>,
    schedule: Vec<usize>,
    next: AtomicUsize,
}

impl Pool {
    /// The members to try for one request: the next scheduled one first, then the
    /// others in file order after it.
    pub(crate) fn order(&self) -> Vec<usize> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let first = self.schedule[n % self.schedule.len()];
        let at = self.members.iter().position(|&m| m == first).unwrap_or(0);
        let mut out = Vec::with_capacity(self.members.len());
        out.extend_from_slice(&self.members[at..]);
        out.extend_from_slice(&self.members[..at]);
        out
    }

    /// The host an active check of this pool sends: its first exact host, if any.
    pub(crate) fn check_host(&self) -> Option<&str> {
        self.hosts
            .iter()
            .find(|h| !h.starts_with("*."))
            .map(String::as_str)
    }

    /// Its members.
    #[cfg(test)]
    pub(crate) fn members(&self) -> &[usize] {
        &self.members
    }

    fn takes_path(&self, path: &str) -> bool {
        prefix_takes(&self.prefix, path)
    }

    /// How well the pool's hosts take `host`, smaller is better: `(0, 0)` names it
    /// exactly, `(1, -len)` by the longest matching `*.` pattern, `(2, 0)` takes
    /// every host; `None`: not this host.
    fn host_rank(&self, host: &str) -> Option<(u8, isize)> {
        if self.hosts.is_empty() {
            return Some((2, 0));
        }
        let mut best = None;
        for h in &self.hosts {
            match h.strip_prefix("*.") {
                None if h == host => return Some((0, 0)),
                Some(suffix) if is_subdomain(host, suffix) => {
                    let r = (1, -(h.len() as isize));
                    best = Some(best.map_or(r, |b: (u8, isize)| b.min(r)));
                }
                _ => {}
            }
        }
        best
    }
}

/// Whether `host` is a subdomain of `suffix` (not `suffix` itself).
fn is_subdomain(host: &str, suffix: &str) -> bool {
    host.len() > suffix.len() + 1
        && host.ends_with(suffix)
        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
}

/// Whether `prefix` takes `path` on a segment boundary.
fn prefix_takes(prefix: &str, path: &str) -> bool {
    match path.strip_prefix(prefix) {
        None => false,
        Some(rest) => prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/'),
    }
}

/// Every pool, in file order.
#[derive(Debug)]
pub(crate) struct Routes {
    pools: Vec<Pool>,
}

impl Routes {
    /// The pools `entries` form, entry `i` being origin `member_of[i]`; an error
    /// names two pools that would tie, or an origin listed twice in one pool.
    pub(crate) fn build(
        entries: &[OriginEntry],
        member_of: &[usize],
    ) -> Result<Routes, ConfigError> {
        let mut pools: Vec<Pool> = Vec::new();
        let mut weights: Vec<Vec<u32>> = Vec::new();
        for (e, &m) in entries.iter().zip(member_of) {
            let mut hosts: Vec<String> = e.hosts.iter().map(|h| h.to_ascii_lowercase()).collect();
            hosts.sort();
            hosts.dedup();
            let at = pools
                .iter()
                .position(|p| p.hosts == hosts && p.prefix == e.path_prefix);
            let Some(at) = at else {
                pools.push(Pool {
                    hosts,
                    prefix: e.path_prefix.clone(),
                    members: vec![m],
                    schedule: Vec::new(),
                    next: AtomicUsize::new(0),
                });
                weights.push(vec![e.weight]);
                continue;
            };
            if pools[at].members.contains(&m) {
                return Err(ConfigError::new(format!(
                    "origin {} is listed twice with the same hosts and path_prefix",
                    e.url
                )));
            }
            pools[at].members.push(m);
            weights[at].push(e.weight);
        }
        check_ties(&pools)?;
        for (p, w) in pools.iter_mut().zip(&weights) {
            p.schedule = smooth_schedule(w)
                .into_iter()
                .map(|k| p.members[k])
                .collect();
        }
        Ok(Routes { pools })
    }

    /// The first pool origin `member` is in.
    pub(crate) fn pool_of(&self, member: usize) -> Option<&Pool> {
        self.pools.iter().find(|p| p.members.contains(&member))
    }

    /// The pool for a request to `host` (any case, with or without a port) and
    /// `path`; `None` when no pool takes it.
    pub(crate) fn pool_for(&self, host: &str, path: &str) -> Option<&Pool> {
        let host = bare_host(host);
        self.pools
            .iter()
            .filter(|p| p.takes_path(path))
            .filter_map(|p| {
                let (rank, pattern) = p.host_rank(&host)?;
                Some((p, (rank, std::cmp::Reverse(p.prefix.len()), pattern)))
            })
            .min_by_key(|(_, key)| *key)
            .map(|(p, _)| p)
    }
}

/// `host` lower-cased, without its port (`[::1]:80` → `[::1]`).
fn bare_host(host: &str) -> String {
    let h = if host.starts_with('[') {
        host.split_inclusive(']').next().unwrap_or(host)
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    h.to_ascii_lowercase()
}

/// Two pools tie when they share a host pattern and a prefix.
fn check_ties(pools: &[Pool]) -> Result<(), ConfigError> {
    for (i, a) in pools.iter().enumerate() {
        for b in &pools[i + 1..] {
            if a.prefix != b.prefix {
                continue;
            }
            if let Some(h) = a.hosts.iter().find(|h| b.hosts.contains(h)) {
                return Err(ConfigError::new(format!(
                    "origins: host `{h}` with path_prefix `{}` is in two pools with different \
                     hosts lists; give the origins that serve it the same `hosts`",
                    a.prefix
                )));
            }
        }
    }
    Ok(())
}

/// Smooth weighted round-robin over `weights` (indexes into it), one turn of
/// `sum(weights / gcd)` picks.
fn smooth_schedule(weights: &[u32]) -> Vec<usize> {
    let g = weights.iter().copied().fold(0, gcd).max(1);
    let w: Vec<i64> = weights.iter().map(|&x| i64::from(x / g)).collect();
    let total: i64 = w.iter().sum();
    let mut current = vec![0i64; w.len()];
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        for (c, wi) in current.iter_mut().zip(&w) {
            *c += wi;
        }
        let (best, _) = current
            .iter()
            .enumerate()
            .max_by_key(|&(i, c)| (*c, std::cmp::Reverse(i)))
            .expect("a pool has members");
        current[best] -= total;
        out.push(best);
    }
    out
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(entries: &[OriginEntry]) -> Result<Routes, ConfigError> {
        let ids: Vec<usize> = (0..entries.len()).collect();
        Routes::build(entries, &ids)
    }

    fn entry(url: &str, hosts: &[&str], prefix: &str, weight: u32) -> OriginEntry {
        let mut e = OriginEntry::new(url);
        e.hosts = hosts.iter().map(|h| (*h).to_owned()).collect();
        e.path_prefix = prefix.into();
        e.weight = weight;
        e
    }

    #[test]
    fn weights_interleave_smoothly() {
        assert_eq!(smooth_schedule(&[5, 1, 1]), vec![0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(smooth_schedule(&[2, 2]), vec![0, 1], "reduced by the gcd");
        assert_eq!(smooth_schedule(&[1]), vec![0]);
    }

    #[test]
    fn a_pool_shares_requests_by_weight_and_lists_the_rest_after() {
        let r = build(&[
            entry("http://a", &[], "/", 3),
            entry("http://b", &[], "/", 1),
        ])
        .unwrap();
        let p = r.pool_for("x", "/").unwrap();
        let firsts: Vec<usize> = (0..400).map(|_| p.order()[0]).collect();
        assert_eq!(firsts.iter().filter(|&&m| m == 0).count(), 300);
        assert_eq!(firsts.iter().filter(|&&m| m == 1).count(), 100);
        for _ in 0..4 {
            let o = p.order();
            assert_eq!(o.len(), 2);
            assert_ne!(o[0], o[1], "every member once");
        }
    }

    #[test]
    fn host_decides_before_path_and_longest_prefix_wins() {
        let r = build(&[
            entry("http://any", &[], "/", 1),
            entry("http://any-api", &[], "/api", 1),
            entry("http://blog", &["blog.example"], "/", 1),
            entry("http://blog-img", &["blog.example"], "/img/", 1),
            entry("http://wild", &["*.example"], "/", 1),
        ])
        .unwrap();
        let who = |host: &str, path: &str| r.pool_for(host, path).map(|p| p.members()[0]);
        assert_eq!(who("other.org", "/"), Some(0));
        assert_eq!(who("other.org", "/api/v1"), Some(1));
        assert_eq!(who("other.org", "/apiary"), Some(0), "segment boundary");
        assert_eq!(who("other.org", "/api"), Some(1));
        assert_eq!(who("Blog.Example:8080", "/api"), Some(2), "host first");
        assert_eq!(who("blog.example", "/img/a.png"), Some(3));
        assert_eq!(who("docs.example", "/x"), Some(4));
        assert_eq!(
            who("example", "/x"),
            Some(0),
            "a pattern takes subdomains only"
        );
        assert_eq!(who("[::1]:8080", "/api"), Some(1));
    }

    #[test]
    fn the_longest_pattern_and_then_the_longest_prefix_win() {
        let r = build(&[
            entry("http://wide", &["*.example"], "/", 1),
            entry("http://narrow", &["*.docs.example"], "/", 1),
            entry("http://mixed", &["site.org", "*.example"], "/api", 1),
        ])
        .unwrap();
        let who = |host: &str, path: &str| r.pool_for(host, path).map(|p| p.members()[0]);
        assert_eq!(who("a.docs.example", "/"), Some(1));
        assert_eq!(who("a.example", "/"), Some(0));
        assert_eq!(
            who("a.example", "/api"),
            Some(2),
            "same rank: the longer prefix"
        );
        assert_eq!(who("site.org", "/"), None);
    }

    #[test]
    fn a_request_no_pool_takes_has_no_origin() {
        let r = build(&[entry("http://a", &["a.example"], "/", 1)]).unwrap();
        assert!(r.pool_for("b.example", "/").is_none());
        let r = build(&[entry("http://a", &[], "/api", 1)]).unwrap();
        assert!(r.pool_for("a", "/").is_none());
    }

    #[test]
    fn pools_that_would_tie_are_an_error() {
        let why = build(&[
            entry("http://a", &["x.example", "y.example"], "/", 1),
            entry("http://b", &["y.example"], "/", 1),
        ])
        .unwrap_err();
        assert!(why.reason().contains("y.example"), "{why}");
        build(&[
            entry("http://a", &["x.example"], "/", 1),
            entry("http://b", &["x.example"], "/api", 1),
        ])
        .unwrap();
    }
}
