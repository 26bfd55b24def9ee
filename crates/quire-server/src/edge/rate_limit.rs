//! Per-client request rates (`[rate_limit]`): a token bucket per client for hits
//! and another for everything that goes to the origin (misses, revalidations,
//! bypasses, passes). Hits are cheap, so their budget is generous; the origin's
//! is protective. A request over its budget gets `429 Too Many Requests` with
//! `Retry-After` (the seconds until a token is back), and the connection stays.
//!
//! - **Who a client is**: the address the trusted-proxy rules name, an IPv6 /64
//!   counted as one client (as the connection cap counts them).
//! - **This host is not limited**: a loopback client is a TLS terminator or a
//!   health check on the same machine, or a load test, and carries others'
//!   requests; list a local proxy in `trusted_proxies` and the clients it names are
//!   limited instead.
//! - **Bounded memory**: at most `clients_max` clients are tracked. A bucket that
//!   has refilled is the same as no bucket, so when the table is full, refilled
//!   buckets are swept out first; a client that still finds no room is let through
//!   untracked and counted (`quire_rate_limit_untracked_total`): the limit fails
//!   open, never closed, so a flood of addresses cannot lock everyone out.
//! - **Exact arithmetic**: each bucket is kept as the generic cell rate
//!   algorithm keeps it (one "theoretical arrival time" in nanoseconds per budget),
//!   so a client admitted at the rate for a minute gets exactly rate × 60 requests
//!   plus its burst, with no floating-point drift.
//! - **Off the hit path's critical section**: one short lock of one of 16 shards
//!   per request, held for a few arithmetic operations.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) use crate::config::RateLimitSection;
use crate::edge::conns::ClientKey;

impl RateLimitSection {
    /// The budget of `class` as (nanoseconds per request, nanoseconds of burst
    /// tolerance); `None` when it is off.
    fn budget(&self, class: Class) -> Option<(u64, u64)> {
        let (rate, burst) = match class {
            Class::Hit => (self.hits_per_sec, self.hits_burst),
            Class::Miss => (self.misses_per_sec, self.misses_burst),
        };
        if rate <= 0.0 {
            return None;
        }
        let interval = (1e9 / rate).round().clamp(1.0, u64::MAX as f64) as u64;
        Some((
            interval,
            interval.saturating_mul(u64::from(burst.max(1)) - 1),
        ))
    }
}

/// Which budget a request draws on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Answered from the store.
    Hit,
    /// Goes to the origin.
    Miss,
}

impl Class {
    fn index(self) -> usize {
        match self {
            Class::Hit => 0,
            Class::Miss => 1,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Class::Hit => "hit",
            Class::Miss => "miss",
        }
    }
}

/// One client's buckets: per budget, the time (nanoseconds since the limiter's
/// epoch) at which its bucket is full again if nothing more is asked.
#[derive(Debug, Clone, Copy, Default)]
struct Buckets {
    tat: [u64; 2],
}

const SHARDS: usize = 16;

/// The buckets of every tracked client.
#[derive(Debug)]
pub struct Limiter {
    epoch: Instant,
    shards: [Mutex<HashMap<ClientKey, Buckets>>; SHARDS],
    admitted: [AtomicU64; 2],
    limited: [AtomicU64; 2],
    untracked: AtomicU64,
    unnamed: AtomicU64,
}

impl Default for Limiter {
    fn default() -> Self {
        Limiter {
            epoch: Instant::now(),
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            admitted: Default::default(),
            limited: Default::default(),
            untracked: AtomicU64::new(0),
            unnamed: AtomicU64::new(0),
        }
    }
}

impl Limiter {
    /// Takes a token of `class` for `client` at `now`; `Err(wait)` when it has none
    /// (a token is back after `wait`).
    pub fn admit(
        &self,
        client: IpAddr,
        class: Class,
        cfg: &RateLimitSection,
        now: Instant,
    ) -> Result<(), Duration> {
        let Some((interval, tolerance)) = cfg.budget(class) else {
            return Ok(());
        };
        if client.to_canonical().is_loopback() {
            return Ok(());
        }
        let t =
            u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        let key = ClientKey::of(client);
        let shard = &self.shards[shard_of(&key)];
        let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
        let per_shard = cfg.clients_max.div_ceil(SHARDS);
        if map.len() >= per_shard && !map.contains_key(&key) {
            sweep(&mut map, t);
            if map.len() >= per_shard {
                self.untracked.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
        }
        let b = map.entry(key).or_default();
        let i = class.index();
        let tat = b.tat[i].max(t);
        if tat - t > tolerance {
            self.limited[i].fetch_add(1, Ordering::Relaxed);
            return Err(Duration::from_nanos(tat - tolerance - t));
        }
        b.tat[i] = tat.saturating_add(interval);
        self.admitted[i].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A request was refused 400: a trusted proxy's `X-Forwarded-For` named no
    /// client (see [`crate::edge::client`]), so no budget could be charged to anyone.
    pub(crate) fn record_unnamed(&self) {
        self.unnamed.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters in Prometheus text format.
    pub fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "# HELP quire_rate_limit_requests_total Requests checked against the per-client rate limits, by budget and result.\n\
             # TYPE quire_rate_limit_requests_total counter"
        );
        for class in [Class::Hit, Class::Miss] {
            let i = class.index();
            for (result, v) in [
                ("admitted", &self.admitted[i]),
                ("limited", &self.limited[i]),
            ] {
                let _ = writeln!(
                    out,
                    "quire_rate_limit_requests_total{{class=\"{}\",result=\"{result}\"}} {}",
                    class.label(),
                    v.load(Ordering::Relaxed)
                );
            }
        }
        let clients: usize = self
            .shards
            .iter()
            .map(|s| s.lock().map_or(0, |m| m.len()))
            .sum();
        let _ = writeln!(
            out,
            "# HELP quire_rate_limit_clients Clients whose buckets are tracked.\n\
             # TYPE quire_rate_limit_clients gauge\n\
             quire_rate_limit_clients {clients}\n\
             # HELP quire_rate_limit_untracked_total Requests let through untracked: the client table was full of clients with spent buckets.\n\
             # TYPE quire_rate_limit_untracked_total counter\n\
             quire_rate_limit_untracked_total {}\n\
             # HELP quire_forwarded_for_refused_total Requests refused 400: a trusted proxy's X-Forwarded-For named no client.\n\
             # TYPE quire_forwarded_for_refused_total counter\n\
             quire_forwarded_for_refused_total {}",
            self.untracked.load(Ordering::Relaxed),
            self.unnamed.load(Ordering::Relaxed)
        );
    }
}

fn shard_of(key: &ClientKey) -> usize {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let h =
        BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(key);
    (h as usize) % SHARDS
}

/// Drops the clients whose buckets have refilled by `t` (the same as not tracking
/// them).
fn sweep(map: &mut HashMap<ClientKey, Buckets>, t: u64) {
    map.retain(|_, b| b.tat.iter().any(|&tat| tat > t));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rate: f64, burst: u32) -> RateLimitSection {
        RateLimitSection {
            hits_per_sec: rate,
            hits_burst: burst,
            misses_per_sec: rate,
            misses_burst: burst,
            clients_max: 1000,
        }
    }

    #[test]
    fn this_host_is_not_limited() {
        let l = Limiter::default();
        let c = cfg(1.0, 1);
        let t = Instant::now();
        for ip in ["127.0.0.1", "::1", "::ffff:127.0.0.1"] {
            for _ in 0..5 {
                assert!(
                    l.admit(ip.parse().unwrap(), Class::Miss, &c, t).is_ok(),
                    "{ip}"
                );
            }
        }
    }

    #[test]
    fn a_client_gets_its_burst_then_the_rate() {
        let l = Limiter::default();
        let c = cfg(10.0, 5);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..5 {
            assert!(l.admit(ip, Class::Miss, &c, t0).is_ok());
        }
        let wait = l.admit(ip, Class::Miss, &c, t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(100));
        // The other budget and other clients are untouched.
        assert!(l.admit(ip, Class::Hit, &c, t0).is_ok());
        assert!(l
            .admit("192.0.2.2".parse().unwrap(), Class::Miss, &c, t0)
            .is_ok());
        // 60 s at 10/s admit 600 more, and no more than that.
        let mut admitted = 0;
        for ms in (0..60_000).step_by(10) {
            if l.admit(ip, Class::Miss, &c, t0 + Duration::from_millis(ms + 10))
                .is_ok()
            {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 600);
    }

    #[test]
    fn an_ipv6_64_is_one_client() {
        let l = Limiter::default();
        let c = cfg(1.0, 2);
        let t = Instant::now();
        assert!(l
            .admit("2001:db8::1".parse().unwrap(), Class::Hit, &c, t)
            .is_ok());
        assert!(l
            .admit("2001:db8::2".parse().unwrap(), Class::Hit, &c, t)
            .is_ok());
        assert!(l
            .admit("2001:db8::3".parse().unwrap(), Class::Hit, &c, t)
            .is_err());
        assert!(l
            .admit("2001:db8:0:1::1".parse().unwrap(), Class::Hit, &c, t)
            .is_ok());
    }

    #[test]
    fn a_full_table_sweeps_refilled_buckets_then_fails_open() {
        let l = Limiter::default();
        let mut c = cfg(1.0, 1);
        c.clients_max = SHARDS; // one client per shard
        let t = Instant::now();
        // Fill every shard with a spent bucket.
        let mut spent = Vec::new();
        for i in 0..=255u8 {
            let ip: IpAddr = format!("198.51.100.{i}").parse().unwrap();
            if l.admit(ip, Class::Miss, &c, t).is_ok() && l.admit(ip, Class::Miss, &c, t).is_err() {
                spent.push(ip);
            }
        }
        assert!(
            spent.len() <= SHARDS,
            "at most one tracked client per shard"
        );
        // Untracked clients passed: the limit fails open.
        assert!(l.untracked.load(Ordering::Relaxed) > 0);
        // Two seconds later every bucket has refilled: swept, and tracked again.
        let later = t + Duration::from_secs(2);
        let other: IpAddr = "203.0.113.9".parse().unwrap();
        assert!(l.admit(other, Class::Miss, &c, later).is_ok());
        assert!(
            l.admit(other, Class::Miss, &c, later).is_err(),
            "tracked after the sweep"
        );
    }
}
