//! The open-loop schedule: request `i` (from 0) is due `i / rate` seconds after the
//! start, whatever the server does. A request's latency counts from its due time,
//! so time spent waiting for a free connection is part of it (the correction for
//! coordinated omission that wrk2 makes).

use std::time::Duration;

/// Due times at a fixed rate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    /// Nanoseconds between requests (fractional: exact over long runs).
    interval_ns: f64,
}

impl Schedule {
    /// `rate` requests per second in total; `None` unless it is positive and finite.
    pub(crate) fn new(rate: f64) -> Option<Schedule> {
        (rate.is_finite() && rate > 0.0).then(|| Schedule {
            interval_ns: 1e9 / rate,
        })
    }

    /// When request `i` is due, after the start.
    pub(crate) fn due(&self, i: u64) -> Duration {
        Duration::from_nanos((i as f64 * self.interval_ns).round() as u64)
    }

    /// How many requests are due `elapsed` after the start (request 0 is due at once).
    pub(crate) fn due_by(&self, elapsed: Duration) -> u64 {
        let n = (elapsed.as_nanos() as f64 / self.interval_ns).floor() as u64 + 1;
        // Rounding in `due` may put request n-1 a nanosecond later or n earlier.
        if n > 0 && self.due(n - 1) > elapsed {
            n - 1
        } else if self.due(n) <= elapsed {
            n + 1
        } else {
            n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_fall_due_at_the_rate() {
        assert!(Schedule::new(0.0).is_none());
        assert!(Schedule::new(f64::NAN).is_none());
        let s = Schedule::new(1000.0).unwrap();
        assert_eq!(s.due(0), Duration::ZERO);
        assert_eq!(s.due(1), Duration::from_millis(1));
        assert_eq!(s.due(2500), Duration::from_millis(2500));
        assert_eq!(s.due_by(Duration::ZERO), 1);
        assert_eq!(s.due_by(Duration::from_micros(999)), 1);
        assert_eq!(s.due_by(Duration::from_millis(1)), 2);
        assert_eq!(s.due_by(Duration::from_secs(10)), 10_001);
        // A rate that is not a whole number of nanoseconds: consistent both ways.
        let s = Schedule::new(30_000.0).unwrap();
        for ns in (0..5_000_000u64).step_by(997) {
            let e = Duration::from_nanos(ns);
            let n = s.due_by(e);
            assert!(s.due(n - 1) <= e && s.due(n) > e, "{ns}");
        }
        assert_eq!(s.due_by(Duration::from_secs(1)), 30_001);
    }
}
