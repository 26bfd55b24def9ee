//! Throttling failed sign-ins so that guessing stays slow while no client can lock
//! another one out, in fixed memory.
//!
//! The attack this answers: failures used to be counted per name and per address in
//! fixed windows, so ten wrong passwords from one address (behind a TLS terminator,
//! *the* address of every reader) locked every account, the admin's included, out for
//! everyone for up to ten minutes. Now three counts are kept, and only the third is
//! shared between clients (a client is an address; an IPv6 client is its /64):
//!
//! | count | free failures (default) | past them |
//! |---|---|---|
//! | (account, client) | 5 | this client waits before trying this account again: 30 s, doubling with every further failure, at most 15 min |
//! | client, any account | 20 | this client waits before trying any account, with the same back-off |
//! | account, any client | 50, draining one per 5 min | *slow mode*: only clients with no failure on this account may try it |
//!
//! Why this shape:
//! - **One address guesses slowly.** Past its free failures a client gets one guess
//!   per back-off; at the 15-minute ceiling that is under 100 a day, per account and
//!   in all. The back-off is exponential, so a burst costs more than a steady trickle,
//!   and failures are forgotten only after a day without one.
//! - **One address cannot stop another.** The first two counts stop only the client
//!   that failed. The account count is the only one a stranger's failures reach, and
//!   one client alone can never fill it: past its burst (10 failures in the first 16
//!   minutes) it fails at most once per 15 minutes while the count drains once per 5
//!   (a test drives one client as fast as it is let through for three days and checks
//!   that another, with a typo already made, is never held back).
//! - **A distributed guess is bounded without locking the owner out.** Filling the
//!   account count takes several addresses at once. In slow mode an address may try the
//!   account only while it has no failure on it, and those tries keep the account in
//!   slow mode; so N addresses get about one guess each per day, plus the drain (one
//!   per 5 minutes), instead of N times a client's budget. The owner, from any address
//!   where they have not failed, is still let in; after a typo in slow mode they wait
//!   until it ends, at most [`LoginLimits::slow_max`] (1 h) after the last failure.
//!   Locking an account out for good would hand every botnet a switch to turn its
//!   owner off; slowing it is the trade.
//! - **An attempt is booked before its password is checked** ([`LoginLimiter::reserve`]
//!   checks and books under one lock, and is the only way in): a booked attempt
//!   counts against the (account, client) and client budgets as a failure would
//!   until it is decided, so 100 concurrent guesses from one address get exactly the
//!   5 checks the budget allows, where checking first and recording after let all 100
//!   through (and let one address fill the account count alone, which is what put an
//!   account into slow mode for its owner). In slow mode a client may have one attempt
//!   under way at a time. An attempt dropped undecided (refused a check slot) is
//!   released and costs nothing.
//! - **The owner's known address is not held by slow mode.** An (account, client)
//!   pair that signed in within [`LoginLimits::known_for`] (90 days) gets its own
//!   budget in slow mode, not the hour's wait: a typo there costs the ordinary back-off
//!   after 5. Only the right password makes a pair known, so guessers cannot trigger
//!   the hour for the owner's usual address, and making a pair known gives a guesser
//!   nothing they did not already have. The owner on a new address in slow mode still
//!   waits after a typo (at most [`LoginLimits::slow_max`]): that is the remaining
//!   trade.
//! - **A success forgets the (account, client) failures** (an owner's typos), never
//!   the client's: an attacker with an account of their own could otherwise reset
//!   their budget by signing in to it.
//! - Every refusal says when to come back ([`LoginLimiter::reserve`] returns the wait,
//!   for `Retry-After`).
//!
//! Memory is fixed: each count is a count-min sketch of 4 rows × 4096 cells indexed by
//! keyed hashes (a random seed per process, so no one can aim collisions). A key's
//! value is the least of its four cells; a collision can only overstate a count
//! (throttle early, never late), and only when all four cells of a key are shared.
//! One client's failures are bounded by its own back-off, so they cannot fill the
//! tables either. Three sketches of 16384 16-byte cells and one of 16384 8-byte
//! sign-in times (known pairs; a collision there could only make a guesser's pair
//! look known when all its cells are shared with pairs that signed in): 896 KiB,
//! whatever is tried.
//!
//! Time is the caller's (`SystemTime`, injected by tests), in whole seconds. A clock
//! stepping back never makes a wait longer than the longest back-off or slow mode.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Rows per sketch: a key is overcounted only when all its cells are shared. With
/// two, 200 guessing addresses left an account's owner looking like a guesser in
/// about one run in 400 of `distributed_guessing_is_bounded_and_the_owner_still_gets_in`
/// ((200/4096)²; CI hit it); with four, about one in 175,000.
const ROWS: usize = 4;
/// Cells per row.
const COLS: usize = 4096;
/// Doublings of the back-off counted; the ceiling comes long before.
const DOUBLINGS_MAX: u32 = 20;

/// How many failed sign-ins are free, and what happens past them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginLimits {
    /// Failures one client may make on one account before it backs off.
    pub per_pair: u32,
    /// Failures one client may make over all accounts before it backs off.
    pub per_client: u32,
    /// The first back-off; each further failure doubles it.
    pub backoff_first: Duration,
    /// The longest back-off.
    pub backoff_max: Duration,
    /// A client's failures are forgotten after this long without one.
    pub forget_after: Duration,
    /// Failures on one account from all clients, net of draining, before the account
    /// goes into slow mode.
    pub per_account: u32,
    /// The account count drains by one every this long. Keep it shorter than
    /// `backoff_max`, so that one client's failures drain faster than they come.
    pub account_drain: Duration,
    /// Slow mode ends at most this long after the account's last failure.
    pub slow_max: Duration,
    /// An (account, client) pair that signed in is known this long after: slow mode
    /// does not hold it back.
    pub known_for: Duration,
}

impl Default for LoginLimits {
    /// 5 failures per (account, client) and 20 per client, then back-off from 30 s to
    /// 15 min; 50 per account draining one per 5 min; forgotten after a day; a pair
    /// that signed in is known for 90 days.
    fn default() -> LoginLimits {
        LoginLimits {
            per_pair: 5,
            per_client: 20,
            backoff_first: Duration::from_secs(30),
            backoff_max: Duration::from_secs(15 * 60),
            forget_after: Duration::from_secs(24 * 3600),
            per_account: 50,
            account_drain: Duration::from_secs(5 * 60),
            slow_max: Duration::from_secs(3600),
            known_for: Duration::from_secs(90 * 24 * 3600),
        }
    }
}
/// Failures of one key and when the last one was; forgotten after `forget_after`.
/// `pending` counts attempts reserved and not yet decided: they count against the
/// budget as failures would, so concurrent attempts cannot outrun it.
#[derive(Debug, Clone, Copy, Default)]
struct Backoff {
    failures: u32,
    pending: u32,
    last: u64,
}

impl Backoff {
    /// The failures still remembered at `now`.
    fn failures(self, now: u64, l: &LoginLimits) -> u32 {
        if now >= self.last.saturating_add(secs(l.forget_after)) {
            0
        } else {
            self.failures
        }
    }

    /// When the key may try again: past `limit` failures, the last one plus the
    /// back-off (0: now). Attempts still pending count as failures; when only they
    /// fill the budget, the wait is the first back-off (their outcome decides).
    fn free_at(self, limit: u32, now: u64, l: &LoginLimits) -> u64 {
        let n = self.failures(now, l);
        if n.saturating_add(self.pending) < limit {
            return 0;
        }
        if n < limit {
            return now.saturating_add(secs(l.backoff_first));
        }
        let doublings = (n - limit).min(DOUBLINGS_MAX);
        let wait = secs(l.backoff_first)
            .saturating_mul(1 << doublings)
            .min(secs(l.backoff_max));
        self.last.min(now).saturating_add(wait)
    }

    fn fail(&mut self, now: u64, l: &LoginLimits) {
        self.failures = self.failures(now, l).saturating_add(1);
        self.last = now;
    }
}

/// The account count as a leaky bucket in one number (GCRA): the time at which it
/// will have drained to zero. Each failure adds one drain period.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    empty_at: u64,
}

impl Bucket {
    /// When slow mode ends (≤ now: it is not on): when the count drops below the
    /// limit, that is `per_account - 1` drain periods before it is empty.
    fn slow_until(self, l: &LoginLimits) -> u64 {
        let below = u64::from(l.per_account.saturating_sub(1)) * secs(l.account_drain);
        self.empty_at.saturating_sub(below)
    }

    fn fail(&mut self, now: u64, l: &LoginLimits) {
        let drain = secs(l.account_drain);
        let ceiling = now
            .saturating_add(u64::from(l.per_account.saturating_sub(1)) * drain)
            .saturating_add(secs(l.slow_max));
        self.empty_at = self.empty_at.max(now).saturating_add(drain).min(ceiling);
    }
}

/// The cells one sign-in attempt touches, one per row of each sketch.
#[derive(Debug, Clone, Copy)]
struct Cells {
    pair: [usize; ROWS],
    client: [usize; ROWS],
    account: [usize; ROWS],
}

struct Tables {
    pairs: Vec<Backoff>,
    clients: Vec<Backoff>,
    accounts: Vec<Bucket>,
    /// When each (account, client) pair last signed in (unix seconds; 0: never).
    known: Vec<u64>,
}

/// Counts failed sign-ins. The only way to try a password is
/// [`LoginLimiter::reserve`] first: it checks and books the attempt in one step, and
/// the [`Attempt`] it returns is then [`Attempt::failed`] or [`Attempt::succeeded`].
pub struct LoginLimiter {
    limits: LoginLimits,
    seed: RandomState,
    /// Held only to read or bump a few cells.
    tables: Mutex<Tables>,
}

impl std::fmt::Debug for LoginLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginLimiter")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// One sign-in attempt booked by [`LoginLimiter::reserve`]: it counts against every
/// budget until it is decided. Dropped undecided (the password was never checked, say
/// the sign-in queue refused it), it is released and counts as nothing.
#[derive(Debug)]
#[must_use = "an attempt counts against the budget until it is decided or dropped"]
pub struct Attempt {
    limiter: Arc<LoginLimiter>,
    cells: Cells,
    now: u64,
    known: bool,
    decided: bool,
}

impl Attempt {
    /// Whether this (account, client) pair signed in successfully within
    /// [`LoginLimits::known_for`]: a pair no guesser can make known.
    pub fn known(&self) -> bool {
        self.known
    }

    /// The password was wrong: the attempt becomes a failure.
    pub fn failed(mut self) {
        self.decided = true;
        let (c, now, l) = (self.cells, self.now, &self.limiter.limits);
        let mut t = self.limiter.lock();
        for r in 0..ROWS {
            release(&mut t, &c, r);
            t.pairs[c.pair[r]].fail(now, l);
            t.clients[c.client[r]].fail(now, l);
            t.accounts[c.account[r]].fail(now, l);
        }
    }

    /// The password was right: this client's failures on this account are forgotten
    /// (not its failures elsewhere), and the pair is known from now on.
    pub fn succeeded(mut self) {
        self.decided = true;
        let (c, now) = (self.cells, self.now);
        let mut t = self.limiter.lock();
        for r in 0..ROWS {
            release(&mut t, &c, r);
            let pair = &mut t.pairs[c.pair[r]];
            (pair.failures, pair.last) = (0, 0);
            t.known[c.pair[r]] = now;
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.decided {
            let c = self.cells;
            let mut t = self.limiter.lock();
            for r in 0..ROWS {
                release(&mut t, &c, r);
            }
        }
    }
}

/// Ends one pending attempt in row `r`'s cells.
fn release(t: &mut Tables, c: &Cells, r: usize) {
    for b in [&mut t.pairs[c.pair[r]], &mut t.clients[c.client[r]]] {
        b.pending = b.pending.saturating_sub(1);
    }
}

impl LoginLimiter {
    /// A limiter with `limits`, 896 KiB.
    pub fn new(limits: LoginLimits) -> LoginLimiter {
        LoginLimiter {
            limits,
            seed: RandomState::new(),
            tables: Mutex::new(Tables {
                pairs: vec![Backoff::default(); ROWS * COLS],
                clients: vec![Backoff::default(); ROWS * COLS],
                accounts: vec![Bucket::default(); ROWS * COLS],
                known: vec![0; ROWS * COLS],
            }),
        }
    }

    /// Books a sign-in attempt as `name` from `ip` if one may be tried now, checking
    /// and booking under one lock (so N concurrent attempts are N bookings in turn);
    /// if not, how long until this client may try this account again (at least a
    /// second), for `Retry-After`.
    pub fn reserve(
        self: &Arc<Self>,
        name: &str,
        ip: IpAddr,
        now: SystemTime,
    ) -> Result<Attempt, Duration> {
        let c = self.cells(name, ip);
        let now = unix_secs(now);
        let mut t = self.lock();
        let known = self.free_at(&t, &c, now)?;
        for r in 0..ROWS {
            t.pairs[c.pair[r]].pending += 1;
            t.clients[c.client[r]].pending += 1;
        }
        Ok(Attempt {
            limiter: self.clone(),
            cells: c,
            now,
            known,
            decided: false,
        })
    }

    /// `Ok(known)` if an attempt with cells `c` may be tried at `now`, else the wait.
    fn free_at(&self, t: &Tables, c: &Cells, now: u64) -> Result<bool, Duration> {
        let l = &self.limits;
        let least = |cells: &[usize; ROWS], f: &dyn Fn(usize) -> u64| {
            cells.iter().map(|&i| f(i)).min().unwrap_or(0)
        };
        let pair_free = least(&c.pair, &|i| t.pairs[i].free_at(l.per_pair, now, l));
        let client_free = least(&c.client, &|i| t.clients[i].free_at(l.per_client, now, l));
        let pair_failures = least(&c.pair, &|i| u64::from(t.pairs[i].failures(now, l)));
        let pair_pending = least(&c.pair, &|i| u64::from(t.pairs[i].pending));
        let signed_in = least(&c.pair, &|i| t.known[i]);
        let known = signed_in > 0 && now < signed_in.saturating_add(secs(l.known_for));
        // Capped for a clock that stepped back since the account's last failure.
        let slow_until = least(&c.account, &|i| t.accounts[i].slow_until(l))
            .min(now.saturating_add(secs(l.slow_max)));
        let mut free = pair_free.max(client_free);
        // Slow mode holds back clients that failed on the account, or have an attempt
        // on it under way, unless the pair is known (see the module doc).
        if slow_until > now && !known {
            if pair_failures > 0 {
                free = free.max(slow_until);
            } else if pair_pending > 0 {
                free = free.max(now.saturating_add(secs(l.backoff_first)));
            }
        }
        if free > now {
            Err(Duration::from_secs(free - now))
        } else {
            Ok(known)
        }
    }

    /// Whether a sign-in as `name` from `ip` may be tried now, without booking it.
    #[cfg(test)]
    fn check(&self, name: &str, ip: IpAddr, now: SystemTime) -> Result<(), Duration> {
        let c = self.cells(name, ip);
        let t = self.lock();
        self.free_at(&t, &c, unix_secs(now)).map(|_| ())
    }

    /// Records a failed sign-in as `name` from `ip`, booked and decided at once.
    #[cfg(test)]
    fn failed(self: &Arc<Self>, name: &str, ip: IpAddr, now: SystemTime) {
        let c = self.cells(name, ip);
        {
            let mut t = self.lock();
            for r in 0..ROWS {
                t.pairs[c.pair[r]].pending += 1;
                t.clients[c.client[r]].pending += 1;
            }
        }
        Attempt {
            limiter: self.clone(),
            cells: c,
            now: unix_secs(now),
            known: false,
            decided: false,
        }
        .failed();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tables> {
        // Counters stay consistent cell by cell: a panic elsewhere loses nothing here.
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cells(&self, name: &str, ip: IpAddr) -> Cells {
        let (client, account) = (client_key(ip), account_key(name));
        // Rows and sketches hash differently: a key's cells are independent.
        let at = |row: usize, h: u64| row * COLS + (h % COLS as u64) as usize;
        Cells {
            pair: std::array::from_fn(|r| at(r, self.seed.hash_one((r, 0u8, &account, client)))),
            client: std::array::from_fn(|r| at(r, self.seed.hash_one((r, 1u8, client)))),
            account: std::array::from_fn(|r| at(r, self.seed.hash_one((r, 2u8, &account)))),
        }
    }
}

/// The client an address stands for: an IPv4 address (IPv4-mapped IPv6 included), or
/// an IPv6 /64, since one host commonly holds a whole /64.
fn client_key(ip: IpAddr) -> u128 {
    match ip.to_canonical() {
        IpAddr::V4(v4) => u128::from(v4.to_bits()),
        // The /64, tagged so it cannot equal an IPv4 address.
        IpAddr::V6(v6) => v6.to_bits() >> 64 | 1 << 127,
    }
}

/// An account as the users file compares names: ignoring case, bounded.
fn account_key(name: &str) -> String {
    name.chars()
        .take(super::name::NAME_LEN_MAX)
        .flat_map(char::to_lowercase)
        .collect()
}

fn secs(d: Duration) -> u64 {
    d.as_secs().max(1)
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const START: u64 = 1_700_000_000;

    /// Client A fails on `admin` as fast as it is let through, for three days; client B,
    /// which has already mistyped once, may try at every moment of it.
    #[test]
    fn one_client_cannot_lock_out_another() {
        let l = Arc::new(LoginLimiter::new(LoginLimits::default()));
        let (a, b) = (ip("192.0.2.1"), ip("198.51.100.7"));
        l.failed("admin", b, t(START));
        let (mut now, mut failures) = (START, 0);
        while now < START + 3 * 24 * 3600 {
            match l.check("admin", a, t(now)) {
                Ok(()) => {
                    l.failed("admin", a, t(now));
                    failures += 1;
                }
                Err(wait) => now += wait.as_secs(),
            }
            assert_eq!(l.check("admin", b, t(now)), Ok(()), "B held back at {now}");
            assert_eq!(l.check("reader", b, t(now)), Ok(()));
        }
        // ... while A's own guesses stayed slow: under 100 a day past its burst.
        assert!(failures <= 3 * 96 + 20, "{failures} guesses in three days");
        l.failed("admin", a, t(now));
        assert_eq!(l.check("admin", a, t(now)), Err(Duration::from_secs(900)));
    }

    #[test]
    fn per_client_throttle_still_stops_the_guesser() {
        let l = Arc::new(LoginLimiter::new(LoginLimits::default()));
        let (a, b) = (ip("192.0.2.1"), ip("192.0.2.2"));
        for _ in 0..5 {
            assert_eq!(l.check("admin", a, t(START)), Ok(()));
            l.failed("admin", a, t(START));
        }
        assert!(
            l.check("admin", a, t(START)).is_err(),
            "per (account, client)"
        );
        assert!(l.check("ADMIN", a, t(START)).is_err(), "names ignore case");
        assert_eq!(l.check("admin", b, t(START)), Ok(()), "not another client");
        // Spraying names: 20 failures over all accounts stop A on every name.
        for i in 0..15 {
            let name = format!("user{i}");
            assert_eq!(l.check(&name, a, t(START)), Ok(()));
            l.failed(&name, a, t(START));
        }
        assert!(l.check("someone-new", a, t(START)).is_err(), "per client");
        assert_eq!(l.check("someone-new", b, t(START)), Ok(()));
    }

    #[test]
    fn lockout_answers_retry_after() {
        let l = Arc::new(LoginLimiter::new(LoginLimits::default()));
        let a = ip("192.0.2.1");
        for _ in 0..5 {
            l.failed("ada", a, t(START));
        }
        assert_eq!(l.check("ada", a, t(START)), Err(Duration::from_secs(30)));
        assert_eq!(
            l.check("ada", a, t(START + 10)),
            Err(Duration::from_secs(20))
        );
        assert_eq!(l.check("ada", a, t(START + 30)), Ok(()));
        // Each further failure doubles the wait, up to 15 minutes.
        let mut now = START + 30;
        for expect in [60, 120, 240, 480, 900, 900] {
            l.failed("ada", a, t(now));
            assert_eq!(l.check("ada", a, t(now)), Err(Duration::from_secs(expect)));
            now += expect;
        }
        // A day without failures forgets them; a success forgets them at once.
        let later = now + 24 * 3600;
        assert_eq!(l.check("ada", a, t(later)), Ok(()));
        for _ in 0..5 {
            l.failed("bob", a, t(later));
        }
        assert!(l.check("bob", a, t(later)).is_err());
        l.reserve("bob", a, t(later + 30)).unwrap().succeeded();
        for _ in 0..4 {
            l.failed("bob", a, t(later + 30));
        }
        assert_eq!(l.check("bob", a, t(later + 30)), Ok(()));
    }

    /// Many addresses guessing one account: slowed to about one guess per address per
    /// day plus the drain, and the owner still signs in from an address of their own.
    #[test]
    fn distributed_guessing_is_bounded_and_the_owner_still_gets_in() {
        let l = Arc::new(LoginLimiter::new(LoginLimits::default()));
        let bots: Vec<IpAddr> = (0..200u32)
            .map(|i| IpAddr::from((0x0a00_0000 + i).to_be_bytes()))
            .collect();
        let owner = ip("203.0.113.5");
        let mut failures = 0;
        for minute in 0..24 * 60 {
            let now = START + minute * 60;
            for &bot in &bots {
                if l.check("admin", bot, t(now)).is_ok() {
                    l.failed("admin", bot, t(now));
                    failures += 1;
                }
            }
            assert_eq!(l.check("admin", owner, t(now)), Ok(()), "minute {minute}");
        }
        // Unthrottled per account, 200 clients would get about 200 x 100 a day.
        assert!(
            failures < 200 * 2 + 24 * 12 + 50,
            "{failures} guesses in a day"
        );
        // After a typo in slow mode the owner waits, but no longer than slow mode lasts.
        let now = START + 24 * 3600;
        l.failed("admin", owner, t(now));
        let wait = l.check("admin", owner, t(now)).unwrap_err();
        assert!(wait <= Duration::from_secs(3600), "{wait:?}");
        assert_eq!(l.check("admin", ip("203.0.113.99"), t(now)), Ok(()));
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let l = Arc::new(LoginLimiter::new(LoginLimits {
            per_pair: 1,
            ..LoginLimits::default()
        }));
        l.failed("x", ip("2001:db8::1"), t(START));
        assert!(l.check("x", ip("2001:db8::ffff:1"), t(START)).is_err());
        assert_eq!(l.check("x", ip("2001:db8:0:1::1"), t(START)), Ok(()));
        l.failed("x", ip("::ffff:192.0.2.9"), t(START));
        assert!(l.check("x", ip("192.0.2.9"), t(START)).is_err());
    }

    #[test]
    fn a_clock_stepping_back_never_lengthens_a_wait_past_the_ceiling() {
        let l = Arc::new(LoginLimiter::new(LoginLimits::default()));
        let a = ip("192.0.2.1");
        for _ in 0..30 {
            l.failed("ada", a, t(START));
        }
        let wait = l.check("ada", a, t(START - 3600)).unwrap_err();
        assert!(wait <= Duration::from_secs(900), "{wait:?}");
    }

    /// 100 guesses from one address at the same moment, each holding its booking
    /// until all have asked: exactly the documented 5 are let through to a password
    /// check, where checking before recording let all 100 through.
    #[test]
    fn concurrent_guesses_from_one_address_book_at_most_the_limit() {
        let l = Arc::new(LoginLimiter::new(LoginLimits::default()));
        let all = Arc::new(std::sync::Barrier::new(100));
        let booked: Vec<_> = (0..100)
            .map(|_| {
                let (l, all) = (l.clone(), all.clone());
                std::thread::spawn(move || {
                    all.wait();
                    let a = l.reserve("admin", ip("192.0.2.1"), t(START));
                    all.wait();
                    a.map(Attempt::failed).is_ok()
                })
            })
            .collect();
        let booked = booked
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&b| b)
            .count();
        assert_eq!(booked, 5);
        assert!(l.check("admin", ip("192.0.2.1"), t(START)).is_err());
        // Every booking was decided: none is left pending.
        let t = l.lock();
        assert!(t.pairs.iter().chain(&t.clients).all(|b| b.pending == 0));
    }

    /// A booking dropped undecided (the queue refused it) costs nothing.
    #[test]
    fn an_attempt_never_checked_is_released() {
        let l = Arc::new(LoginLimiter::new(LoginLimits::default()));
        for _ in 0..50 {
            drop(l.reserve("ada", ip("192.0.2.1"), t(START)).unwrap());
        }
        assert_eq!(l.check("ada", ip("192.0.2.1"), t(START)), Ok(()));
    }

    /// Guessers from 200 addresses keep `admin` in slow mode. The owner signed in
    /// from their usual address last week; a typo there does not hold them back for
    /// the hour of slow mode, since no guesser can make a pair known.
    #[test]
    fn a_typo_from_the_owners_known_address_is_not_held_by_slow_mode() {
        let l = Arc::new(LoginLimiter::new(LoginLimits::default()));
        let owner = ip("203.0.113.5");
        l.reserve("admin", owner, t(START)).unwrap().succeeded();
        let now = START + 7 * 24 * 3600;
        for i in 0..200u32 {
            let bot = IpAddr::from((0x0a00_0000 + i).to_be_bytes());
            if let Ok(a) = l.reserve("admin", bot, t(now)) {
                a.failed();
            }
        }
        let stranger = ip("198.51.100.1");
        l.failed("admin", stranger, t(now));
        assert!(l.check("admin", stranger, t(now)).unwrap_err() > Duration::from_secs(600));
        let typo = l.reserve("admin", owner, t(now)).unwrap();
        assert!(typo.known());
        typo.failed();
        let again = l.reserve("admin", owner, t(now)).unwrap();
        again.succeeded();
        // In slow mode a fresh address has one attempt under way at a time.
        let fresh = ip("198.51.100.2");
        let first = l.reserve("admin", fresh, t(now)).unwrap();
        assert!(l.reserve("admin", fresh, t(now)).is_err());
        drop(first);
    }
}
