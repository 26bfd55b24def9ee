//! The server's clock: the wall-clock time every freshness, age and staleness
//! decision is made at.
//!
//! It is the system clock plus an offset that only tests move
//! ([`Clock::advance`]): a test of "stale after `max-age=1`" advances the server's
//! clock by two seconds instead of sleeping them, and the server decides exactly as
//! it would two seconds later. Timers (idle limits, deadlines) stay on tokio's
//! monotonic clock; they are not what a freshness test waits on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// The system clock, shifted forward by what tests have advanced it.
#[derive(Debug, Default)]
pub struct Clock {
    /// Milliseconds added to the system time.
    ahead_ms: AtomicU64,
}

impl Clock {
    /// The time now, as the server sees it.
    #[inline]
    pub fn now(&self) -> SystemTime {
        let ahead = self.ahead_ms.load(Ordering::Relaxed);
        let now = SystemTime::now();
        if ahead == 0 {
            now
        } else {
            now + Duration::from_millis(ahead)
        }
    }

    /// Moves the clock forward by `by` (whole milliseconds). For tests: a server
    /// in production never calls it, so its clock is the system's.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.ahead_ms.fetch_add(ms, Ordering::Relaxed);
    }
}
