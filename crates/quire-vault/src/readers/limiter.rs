//! Throttling failed sign-ins, per client address and per name, in fixed memory.
//!
//! Counters live in a fixed table of slots indexed by a keyed hash (a random seed per
//! process, so no one can aim collisions): memory never grows with the number of
//! addresses or names tried. A collision can only make two keys share a counter, that
//! is throttle a little early, never late. Windows are fixed (`unix_secs / window`).
//! IPv6 clients are counted per /64, since one host commonly holds a whole /64.
//!
//! Only failures are counted ([`LoginLimiter::failed`]), so readers who type their
//! password right are never throttled by their own sign-ins. A per-name limit lets a
//! stranger lock a name out for one window by failing on purpose; it is set higher than
//! the per-address limit for that reason.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// Slots per table (addresses, names).
const SLOTS: usize = 4096;

/// How many failed sign-ins are allowed per window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginLimits {
    /// Failures allowed from one address (IPv6: one /64) per window.
    pub per_ip: u32,
    /// Failures allowed for one name per window, from anywhere.
    pub per_name: u32,
    /// The window.
    pub window: Duration,
}

impl Default for LoginLimits {
    /// 10 failures per address and 30 per name every 10 minutes.
    fn default() -> LoginLimits {
        LoginLimits {
            per_ip: 10,
            per_name: 30,
            window: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    window: u64,
    failures: u32,
}

/// Counts failed sign-ins; check [`LoginLimiter::allow`] before verifying a password
/// and call [`LoginLimiter::failed`] when it was wrong.
#[derive(Debug)]
pub struct LoginLimiter {
    limits: LoginLimits,
    seed: RandomState,
    /// `SLOTS` address slots, then `SLOTS` name slots. Held only to bump counters.
    slots: Mutex<Vec<Slot>>,
}

impl LoginLimiter {
    /// A limiter with `limits`, about 100 KiB.
    pub fn new(limits: LoginLimits) -> LoginLimiter {
        LoginLimiter {
            limits,
            seed: RandomState::new(),
            slots: Mutex::new(vec![Slot::default(); 2 * SLOTS]),
        }
    }

    /// Whether a sign-in as `name` from `ip` may be tried now.
    pub fn allow(&self, name: &str, ip: IpAddr, now: SystemTime) -> bool {
        let (i, n, w) = self.index(name, ip, now);
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let count = |s: Slot| if s.window == w { s.failures } else { 0 };
        count(slots[i]) < self.limits.per_ip && count(slots[n]) < self.limits.per_name
    }

    /// Records a failed sign-in as `name` from `ip`.
    pub fn failed(&self, name: &str, ip: IpAddr, now: SystemTime) {
        let (i, n, w) = self.index(name, ip, now);
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        for k in [i, n] {
            let s = &mut slots[k];
            if s.window != w {
                *s = Slot {
                    window: w,
                    failures: 0,
                };
            }
            s.failures = s.failures.saturating_add(1);
        }
    }

    /// The address slot, the name slot and the window number.
    fn index(&self, name: &str, ip: IpAddr, now: SystemTime) -> (usize, usize, u64) {
        let secs = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let window = secs / self.limits.window.as_secs().max(1);
        let ip = match ip.to_canonical() {
            IpAddr::V4(v4) => u128::from(v4.to_bits()),
            // The /64, tagged so it cannot equal an IPv4 address.
            IpAddr::V6(v6) => v6.to_bits() >> 64 | 1 << 127,
        };
        // Names are compared as the users file does: ignoring case, bounded.
        let name: String = name
            .chars()
            .take(super::NAME_LEN_MAX)
            .flat_map(char::to_lowercase)
            .collect();
        let slot = |h: u64| (h % SLOTS as u64) as usize;
        (
            slot(self.seed.hash_one(ip)),
            SLOTS + slot(self.seed.hash_one(name)),
            window,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn failures_throttle_per_address_and_per_name_for_one_window() {
        let l = LoginLimiter::new(LoginLimits {
            per_ip: 3,
            per_name: 5,
            window: Duration::from_secs(60),
        });
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..3 {
            assert!(l.allow("ada", a, t(600)));
            l.failed("ada", a, t(600));
        }
        assert!(!l.allow("ada", a, t(600)), "address limit");
        assert!(!l.allow("bob", a, t(601)), "the address, whatever the name");
        assert!(l.allow("ada", b, t(601)), "another address");
        l.failed("ADA", b, t(601));
        l.failed("ada", b, t(602));
        assert!(
            !l.allow("ada", "192.0.2.3".parse().unwrap(), t(603)),
            "name limit"
        );
        assert!(l.allow("ada", a, t(660)), "a new window");
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let l = LoginLimiter::new(LoginLimits {
            per_ip: 1,
            per_name: 100,
            window: Duration::from_secs(60),
        });
        l.failed("x", "2001:db8::1".parse().unwrap(), t(0));
        assert!(!l.allow("y", "2001:db8::ffff:1".parse().unwrap(), t(0)));
        assert!(l.allow("y", "2001:db8:0:1::1".parse().unwrap(), t(0)));
        l.failed("x", "::ffff:192.0.2.9".parse().unwrap(), t(0));
        assert!(!l.allow("y", "192.0.2.9".parse().unwrap(), t(0)));
    }
}
