//! Crawler classes of the budget for uncached work (`[[budget.crawlers]]`): a
//! crawler the operator names takes its renders and fills from slots of its own, so
//! a search engine re-crawling the site neither waits behind a crowd nor takes the
//! readers' turns, while a bot that only claims its name gets what anyone gets.
//!
//! Key decisions:
//! - **A name is a claim; an address is checked.** A request belongs to a class
//!   when its `User-Agent` contains the class's `user_agent` (any case) and, if the
//!   class lists `domains`, the client's address has a reverse DNS name under one of
//!   them that resolves back to the address (forward-confirmed reverse DNS, as
//!   Google and Bing document for verifying their crawlers). A claim that fails the
//!   check is counted and served from everyone's slots, in its network's turn.
//! - **Only misses ask.** The check runs where a request is about to wait for a
//!   slot, never on a hit, and its answer is kept per address ([`Verifier`]).
//! - **Bounded.** At most [`LOOKUPS_MAX`] lookups at once, each given up after
//!   [`LOOKUP_TIMEOUT`] (the request goes on as anyone's); a request that finds
//!   every lookup busy is anyone's, uncached. At most [`CACHED_MAX`] addresses are
//!   remembered (verified for an hour, refused for ten minutes); past that, expired
//!   answers and then refusals make room before any confirmed name ([`make_room`]),
//!   so a flood of claimed names from new addresses costs lookups at the bounded
//!   rate, memory never, and the real crawlers keep their confirmed names.
//! - **Reloads keep the queues.** A class keeps its budget (resized) across a
//!   reload when its name stays; a class removed stops taking requests, and its
//!   slots in use are given back as their work ends.

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use http::HeaderMap;

use crate::config::CrawlerClass;
use crate::edge::budget::Budget;

/// Reverse lookups in flight at most.
pub(crate) const LOOKUPS_MAX: usize = 4;
/// Longest a lookup is waited for.
pub(crate) const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);
/// Addresses whose answer is remembered, at most.
pub(crate) const CACHED_MAX: usize = 4096;
/// How long a confirmed name is trusted.
const VERIFIED_TTL: Duration = Duration::from_secs(3600);
/// How long an address without a confirmed name is not asked about again.
const REFUSED_TTL: Duration = Duration::from_secs(600);

/// One class, with its own budget.
#[derive(Debug)]
pub(crate) struct Class {
    cfg: CrawlerClass,
    /// `cfg.user_agent`, lowercase.
    ua: String,
    /// The class's slots.
    pub(crate) budget: Budget,
    admitted: AtomicU64,
}

/// How a claimed crawler's address fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Its reverse name is under a class domain and resolves back to it.
    Verified,
    /// It is not.
    Refused,
    /// Every lookup was busy, or the resolver did not answer in time.
    Busy,
}

impl Check {
    const ALL: [Check; 3] = [Check::Verified, Check::Refused, Check::Busy];

    fn label(self) -> &'static str {
        match self {
            Check::Verified => "verified",
            Check::Refused => "refused",
            Check::Busy => "busy",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The classes in force, and what has been learnt of addresses.
#[derive(Debug)]
pub(crate) struct Crawlers {
    classes: ArcSwap<Vec<Arc<Class>>>,
    verifier: Verifier,
    checks: [AtomicU64; 3],
}

impl Crawlers {
    /// The classes of `cfg`.
    pub(crate) fn new(cfg: &[CrawlerClass]) -> Crawlers {
        let c = Crawlers {
            classes: ArcSwap::from_pointee(Vec::new()),
            verifier: Verifier::default(),
            checks: Default::default(),
        };
        c.configure(cfg);
        c
    }

    /// Puts `cfg` in force: a class whose name stays keeps its budget, resized.
    pub(crate) fn configure(&self, cfg: &[CrawlerClass]) {
        let old = self.classes.load();
        let classes = cfg
            .iter()
            .map(|c| {
                let budget = match old.iter().find(|o| o.cfg.name == c.name) {
                    Some(o) => {
                        o.budget.resize(c.slots);
                        o.budget.clone()
                    }
                    None => Budget::new(c.slots),
                };
                Arc::new(Class {
                    cfg: c.clone(),
                    ua: c.user_agent.trim().to_ascii_lowercase(),
                    budget,
                    admitted: AtomicU64::new(0),
                })
            })
            .collect();
        self.classes.store(Arc::new(classes));
    }

    /// The class a request from `ip` with `headers` belongs to, if any (checking
    /// its address when the class asks for that).
    async fn class_of(&self, ip: IpAddr, headers: &HeaderMap) -> Option<Arc<Class>> {
        let classes = self.classes.load();
        if classes.is_empty() {
            return None;
        }
        let ua = headers
            .get(http::header::USER_AGENT)?
            .to_str()
            .ok()?
            .to_ascii_lowercase();
        let class = classes.iter().find(|c| ua.contains(&c.ua))?.clone();
        if class.cfg.domains.is_empty() {
            class.admitted.fetch_add(1, Ordering::Relaxed);
            return Some(class);
        }
        let check = match self.verifier.name_of(ip).await {
            Lookup::Name(name) if under_any(&name, &class.cfg.domains) => Check::Verified,
            Lookup::Name(_) | Lookup::None => Check::Refused,
            Lookup::Busy => Check::Busy,
        };
        self.checks[check.index()].fetch_add(1, Ordering::Relaxed);
        if check != Check::Verified {
            return None;
        }
        class.admitted.fetch_add(1, Ordering::Relaxed);
        Some(class)
    }

    /// A slot for uncached work of a request from `ip` with `headers`: from its
    /// crawler class's own budget when it belongs to one, else from `everyone`
    /// (see [`Budget::acquire`] for `carries_others` and `cfg`). Every slot a
    /// request takes is taken here.
    pub(crate) async fn acquire(
        &self,
        everyone: &Budget,
        ip: IpAddr,
        headers: &HeaderMap,
        carries_others: bool,
        cfg: &crate::config::BudgetSection,
    ) -> Result<crate::edge::budget::Slot, crate::edge::budget::Refused> {
        let class = self.class_of(ip, headers).await;
        let budget = class.as_ref().map_or(everyone, |c| &c.budget);
        budget.acquire(ip, carries_others, cfg).await
    }

    /// Checks of claimed crawlers so far, by result.
    pub(crate) fn checks(&self, c: Check) -> u64 {
        self.checks[c.index()].load(Ordering::Relaxed)
    }

    /// The classes' names and their budgets' metrics now, for
    /// `crate::edge::budget::write_metrics`.
    pub(crate) fn budgets(&self) -> Vec<(String, crate::edge::budget::Snapshot)> {
        self.classes
            .load()
            .iter()
            .map(|c| (c.cfg.name.clone(), c.budget.snapshot()))
            .collect()
    }

    /// Requests taken into each class and the checks of claimed crawlers, in
    /// Prometheus text format.
    pub(crate) fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "# HELP quire_crawler_requests_total Uncached requests taken into a crawler class ([[budget.crawlers]]).\n\
             # TYPE quire_crawler_requests_total counter"
        );
        for c in self.classes.load().iter() {
            let _ = writeln!(
                out,
                "quire_crawler_requests_total{{class=\"{}\"}} {}",
                c.cfg.name,
                c.admitted.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP quire_crawler_checks_total Uncached requests that claimed a crawler class with domains, by the check of their address (forward-confirmed reverse DNS, remembered per address): verified, refused (served as anyone), or busy (no lookup free, or none answered in time: served as anyone).\n\
             # TYPE quire_crawler_checks_total counter"
        );
        for c in Check::ALL {
            let _ = writeln!(
                out,
                "quire_crawler_checks_total{{result=\"{}\"}} {}",
                c.label(),
                self.checks(c)
            );
        }
    }
}

/// Whether `name` is one of `domains` or under one.
fn under_any(name: &str, domains: &[String]) -> bool {
    domains.iter().any(|d| {
        let d = d.trim_end_matches('.');
        name.eq_ignore_ascii_case(d)
            || (name.len() > d.len()
                && name[name.len() - d.len()..].eq_ignore_ascii_case(d)
                && name.as_bytes()[name.len() - d.len() - 1] == b'.')
    })
}

/// What is known of an address's name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lookup {
    /// Its forward-confirmed reverse name (lowercase, no final dot).
    Name(String),
    /// It has none.
    None,
    /// Not known, and no lookup could be made now.
    Busy,
}

/// Forward-confirmed reverse DNS, remembered per address, bounded.
#[derive(Debug)]
struct Verifier {
    known: Mutex<HashMap<IpAddr, (Option<String>, Instant)>>,
    lookups: Arc<tokio::sync::Semaphore>,
}

impl Default for Verifier {
    fn default() -> Self {
        Verifier {
            known: Mutex::new(HashMap::new()),
            lookups: Arc::new(tokio::sync::Semaphore::new(LOOKUPS_MAX)),
        }
    }
}

impl Verifier {
    async fn name_of(&self, ip: IpAddr) -> Lookup {
        let now = Instant::now();
        if let Some((name, until)) = self.lock().get(&ip) {
            if *until > now {
                return name.clone().map_or(Lookup::None, Lookup::Name);
            }
        }
        let Ok(permit) = self.lookups.clone().try_acquire_owned() else {
            return Lookup::Busy;
        };
        // The permit goes with the blocking call: a lookup past its timeout still
        // holds it until the resolver returns, so stuck lookups stay bounded.
        let work = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            confirmed_name(ip)
        });
        let name = match tokio::time::timeout(LOOKUP_TIMEOUT, work).await {
            Ok(Ok(name)) => name,
            _ => return Lookup::Busy,
        };
        let ttl = if name.is_some() {
            VERIFIED_TTL
        } else {
            REFUSED_TTL
        };
        let mut known = self.lock();
        make_room(&mut known, now);
        known.insert(ip, (name.clone(), now + ttl));
        name.map_or(Lookup::None, Lookup::Name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, (Option<String>, Instant)>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Room for one more address in `known` when it is full: the expired answers go
/// first, then the refusals, and only then the confirmed names. A flood of claims
/// from new addresses fills the memory with refusals, and must not push out the
/// real crawlers' confirmed names (they would then wait for a lookup the flood
/// keeps busy, and be served as anyone).
fn make_room(known: &mut HashMap<IpAddr, (Option<String>, Instant)>, now: Instant) {
    if known.len() < CACHED_MAX {
        return;
    }
    known.retain(|_, (_, until)| *until > now);
    if known.len() >= CACHED_MAX {
        known.retain(|_, (name, _)| name.is_some());
    }
    if known.len() >= CACHED_MAX {
        known.clear();
    }
}

/// `ip`'s reverse DNS name if it resolves back to `ip` (blocking).
fn confirmed_name(ip: IpAddr) -> Option<String> {
    let name = crate::edge::sys::reverse_name(ip)?;
    let back = (name.as_str(), 0).to_socket_addrs().ok()?;
    back.map(|a| a.ip())
        .any(|a| a == ip)
        .then(|| name.trim_end_matches('.').to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, ua: &str, domains: &[&str]) -> CrawlerClass {
        CrawlerClass {
            name: name.into(),
            user_agent: ua.into(),
            domains: domains.iter().map(|d| d.to_string()).collect(),
            slots: 1,
        }
    }

    fn ua(s: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::USER_AGENT, s.parse().unwrap());
        h
    }

    #[test]
    fn a_name_is_under_a_domain_only_at_a_label_boundary() {
        let d = vec!["googlebot.com".to_string()];
        assert!(under_any("crawl-1-2-3-4.googlebot.com", &d));
        assert!(under_any("GOOGLEBOT.com", &d));
        assert!(!under_any("evilgooglebot.com", &d));
        assert!(!under_any("googlebot.com.evil.net", &d));
        assert!(!under_any("com", &d));
    }

    #[tokio::test]
    async fn a_user_agent_alone_decides_only_where_no_domains_are_given() {
        let c = Crawlers::new(&[class("feeds", "FeedFetcher", &[])]);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let got = c.class_of(ip, &ua("Mozilla/5.0 (feedfetcher; +x)")).await;
        assert_eq!(got.map(|k| k.cfg.name.clone()).as_deref(), Some("feeds"));
        assert!(c.class_of(ip, &ua("Mozilla/5.0")).await.is_none());
        assert!(c.class_of(ip, &HeaderMap::new()).await.is_none());
    }

    #[tokio::test]
    async fn loopback_is_verified_by_its_hosts_file_name_and_other_addresses_are_not() {
        // 127.0.0.1 is `localhost` in every hosts file, forward and back; an
        // address of 127/8 with no name in it is refused.
        let c = Crawlers::new(&[class("local", "TestBot", &["localhost"])]);
        let me: IpAddr = "127.0.0.1".parse().unwrap();
        let got = c.class_of(me, &ua("TestBot/1.0")).await;
        assert_eq!(got.map(|k| k.cfg.name.clone()).as_deref(), Some("local"));
        assert_eq!(c.checks(Check::Verified), 1);
        let stranger: IpAddr = "127.77.66.55".parse().unwrap();
        assert!(c.class_of(stranger, &ua("TestBot/1.0")).await.is_none());
        // Refused, unless a resolver without a network did not answer in time.
        let busy = c.checks(Check::Busy);
        assert_eq!(c.checks(Check::Refused) + busy, 1);
        assert!(c.class_of(stranger, &ua("TestBot/1.0")).await.is_none());
        if busy == 0 {
            // Remembered: no second lookup was made.
            assert_eq!(c.checks(Check::Refused), 2);
            assert_eq!(c.verifier.lock().len(), 2);
        }
    }

    #[test]
    fn a_flood_of_refusals_never_pushes_out_a_confirmed_name() {
        let now = Instant::now();
        let later = now + Duration::from_secs(600);
        let mut known = HashMap::new();
        let crawler: IpAddr = "192.0.2.1".parse().unwrap();
        known.insert(crawler, (Some("crawl.example.com".to_owned()), later));
        for i in 0..CACHED_MAX as u32 {
            let ip = IpAddr::from(std::net::Ipv6Addr::from(0x2001_0db8_u128 << 96 | i as u128));
            make_room(&mut known, now);
            known.insert(ip, (None, later));
        }
        assert!(known.len() <= CACHED_MAX, "{}", known.len());
        assert!(known[&crawler].0.is_some(), "the confirmed name stayed");
        // Expired answers go before anything live.
        let mut full: HashMap<_, _> = (0..CACHED_MAX as u32)
            .map(|i| (IpAddr::from(std::net::Ipv4Addr::from(i)), (None, now)))
            .collect();
        make_room(&mut full, now + Duration::from_secs(1));
        assert!(full.is_empty());
    }

    #[tokio::test]
    async fn a_reload_keeps_a_class_budget_by_name_and_resizes_it() {
        let c = Crawlers::new(&[class("a", "A", &[]), class("b", "B", &[])]);
        let a0 = c.classes.load()[0].budget.clone();
        let mut a = class("a", "A", &[]);
        a.slots = 5;
        c.configure(&[a]);
        let now = c.classes.load();
        assert_eq!(now.len(), 1);
        assert_eq!(now[0].budget.slots(), 5);
        assert_eq!(a0.slots(), 5, "the same budget, resized");
    }

    #[test]
    fn metrics_name_each_class_and_each_check_result() {
        let c = Crawlers::new(&[class("googlebot", "Googlebot", &["googlebot.com"])]);
        let mut out = String::new();
        c.write_metrics(&mut out);
        let budgets = c.budgets();
        assert_eq!(budgets.len(), 1);
        assert_eq!(budgets[0].0, "googlebot");
        assert!(out.contains("quire_crawler_requests_total{class=\"googlebot\"} 0"));
        assert!(out.contains("quire_crawler_checks_total{result=\"busy\"} 0"));
    }
}
