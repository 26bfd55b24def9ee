//! Whether a read of the volume would wait on the disk.
//!
//! The volume is read through its mapping. While its pages are in memory, a hit is a
//! memory read; when the volume is bigger than the memory the process may use (a
//! memory cgroup, a small machine), an evicted page is a major fault, and the thread
//! that touches it blocks until the disk answers. On a request worker that is every
//! connection it serves: measured with `scripts/cold-cache.py`, a few cold reads
//! put the p99 of hits on a resident hot set up by tens of times.
//!
//! Two parts, so that a volume that fits in memory pays nothing:
//! - **Pressure** ([`Pressure`]): a sampler thread reads the process's major faults
//!   (`/proc/self/stat`) every [`SAMPLE`]; any fault turns the checks on, until
//!   [`HOLD`] passes without one. [`Residency::Always`] and [`Residency::Never`] pin
//!   the answer (tests, and operators who know).
//! - **The check** (`Volume::resident`): under pressure, a lookup asks the kernel
//!   (`mincore`) whether an entry's pages are in memory before it touches them; if not,
//!   the store says so ([`crate::Fetched::Cold`]) instead of faulting, and the caller
//!   warms the entry ([`crate::Store::warm`]) on a thread that may block, then looks
//!   it up again.
//!
//! A page can be evicted between the check and the read, so a fault on a worker is
//! made rare, not impossible.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the sampler reads the major-fault count.
pub(crate) const SAMPLE: Duration = Duration::from_millis(200);

/// How long the checks stay on after the last major fault.
pub(crate) const HOLD: Duration = Duration::from_secs(10);

/// When lookups check residency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Residency {
    /// While the process has had major faults lately (the default).
    #[default]
    Auto,
    /// Always (a volume known to be bigger than memory; tests).
    Always,
    /// Never (every read may fault on the reading thread).
    Never,
}

/// Whether lookups check residency now.
#[derive(Debug)]
pub(crate) struct Pressure {
    on: AtomicBool,
}

impl Pressure {
    /// Starts the sampler for [`Residency::Auto`].
    pub(crate) fn start(mode: Residency) -> Arc<Pressure> {
        let p = Arc::new(Pressure {
            on: AtomicBool::new(mode == Residency::Always),
        });
        if mode == Residency::Auto {
            let weak = Arc::downgrade(&p);
            let started = std::thread::Builder::new()
                .name("quire-residency".into())
                .spawn(move || sample(&weak));
            if let Err(e) = started {
                tracing::warn!(error = %e, "no residency sampler: reads never checked");
            }
        }
        p
    }

    /// Whether lookups check residency now.
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }
}

/// The sampler's loop, until the store is gone.
fn sample(p: &std::sync::Weak<Pressure>) {
    let mut last = major_faults();
    let mut last_fault: Option<Instant> = None;
    loop {
        std::thread::sleep(SAMPLE);
        let Some(p) = p.upgrade() else { return };
        let now = major_faults();
        if now > last {
            last_fault = Some(Instant::now());
        }
        last = now;
        let on = last_fault.is_some_and(|t| t.elapsed() < HOLD);
        if p.on.swap(on, Ordering::Relaxed) != on {
            tracing::info!(on, "volume residency checks");
        }
    }
}

/// The process's major faults so far (0 where `/proc` cannot say).
fn major_faults() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_majflt(&s))
        .unwrap_or(0)
}

/// `majflt` of a `/proc/PID/stat` line: the 10th field after the command's `)`.
fn parse_majflt(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(9)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majflt_is_read_after_the_command() {
        let line = "1234 (a (weird) name) S 1 2 3 4 5 6 7 8 42 9 10 11";
        assert_eq!(parse_majflt(line), Some(42));
        assert_eq!(parse_majflt("garbage"), None);
    }

    /// An entry evicted from memory is answered cold without being read; warmed, it
    /// is a hit with its bytes.
    #[test]
    fn a_cold_entry_is_found_without_reading_it_then_warmed() {
        use crate::{Engine as _, EntryRef as _, Fetched, Options, Store};
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            residency: Residency::Always,
            ..Options::default()
        };
        let store = Store::open(dir.path().join("v"), 8 << 20, options).unwrap();
        let body = vec![7u8; 48 << 10];
        store.put(b"k", b"meta", &body, &[]).unwrap();
        assert!(
            matches!(store.get_resident(b"k"), Fetched::Hit(_)),
            "just written"
        );
        store.evict_entry(b"k");
        let Fetched::Cold(cold) = store.get_resident(b"k") else {
            panic!("evicted, yet not cold");
        };
        store.warm(&cold);
        match store.get_resident(b"k") {
            Fetched::Hit(h) => assert_eq!(h.body(), &body[..]),
            other => panic!("warmed, yet {other:?}"),
        }
        assert!(matches!(store.get_resident(b"other"), Fetched::Miss));
    }

    #[test]
    fn pinned_modes_do_not_sample() {
        assert!(Pressure::start(Residency::Always).on());
        assert!(!Pressure::start(Residency::Never).on());
    }
}
