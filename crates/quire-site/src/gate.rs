//! The sign-in gate: how many password checks run at once, and what a sign-in that
//! finds them all busy gets.
//!
//! The attack this answers: each `POST /login` ran argon2 (19 MiB of working memory at
//! the default cost) on the blocking pool, as many at once as requests came: 400
//! concurrent wrong sign-ins from 8 addresses took `quire serve` from 63 MB to 6.9 GB,
//! and the allocator kept most of it after the burst. Now:
//! - **A fixed number of checks run at once** (`[sign_in] checks_at_once`, default 2:
//!   argon2 is CPU-bound, more than the cores only adds memory). Each holds one of a
//!   fixed set of [`CheckMemory`] buffers, reused from check to check, so sign-ins hold
//!   at most `(checks_at_once + 1) x` the hash's memory cost whatever the burst, and
//!   the same after it as before (argon2 never allocates its blocks itself here).
//! - **A sign-in waits in a bounded queue with a deadline** (`queue`, default 32;
//!   `queue_wait`, default 10 s): past either it is answered `503` with `Retry-After`
//!   at once, and its booking in the throttle is released (it was never checked, so
//!   it is no failure). Waiting happens on the runtime, not on a blocking thread.
//! - **A known pair has a lane of its own**: an (account, address) pair that signed in
//!   before (`quire_vault::readers::Attempt::known`, which only the right password makes true) may also
//!   take one extra slot that no other sign-in can, and is not refused for a full
//!   queue. During a distributed guessing burst that fills the queue, the owner
//!   signing in from their usual address still gets a check within one check's time.
//! - The throttle is asked before the gate (`quire_vault::readers::LoginLimiter`), so
//!   a throttled guess costs no queue place and no argon2.
//!
//! Metrics: `quire_sign_in_checks_in_flight`, `quire_sign_in_checks_in_flight_max`,
//! `quire_sign_in_queued`, `quire_sign_in_checks_total`,
//! `quire_sign_in_refused_total{reason}`, `quire_sign_in_memory_bytes`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quire_vault::readers::CheckMemory;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The gate's settings (`[sign_in]` in `site.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateLimits {
    /// Password checks running at once (at least 1).
    pub at_once: usize,
    /// Sign-ins waiting for a check before more are refused.
    pub queue: usize,
    /// How long a sign-in waits for a check before it is refused.
    pub wait: Duration,
}

/// Why a sign-in was refused a check; either way, come back after `retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue was full.
    QueueFull,
    /// No check came free within the deadline.
    Deadline,
}

/// Bounds the password checks of one site.
#[derive(Debug)]
pub struct Gate {
    limits: GateLimits,
    general: Arc<Semaphore>,
    /// The extra slot only known pairs may take.
    known: Arc<Semaphore>,
    /// Buffers not in use; at most `at_once + 1` exist.
    memory: Mutex<Vec<CheckMemory>>,
    queued: AtomicUsize,
    in_flight: AtomicUsize,
    in_flight_max: AtomicUsize,
    checks: AtomicU64,
    refused_full: AtomicU64,
    refused_deadline: AtomicU64,
}

/// A check's slot and memory; both return to the gate when it is dropped.
#[derive(Debug)]
pub struct Pass {
    gate: Arc<Gate>,
    memory: Option<CheckMemory>,
    _permit: OwnedSemaphorePermit,
}

impl Pass {
    /// The working memory for this check.
    pub fn memory(&mut self) -> &mut CheckMemory {
        self.memory.get_or_insert_with(CheckMemory::default)
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.gate.in_flight.fetch_sub(1, Ordering::Relaxed);
        if let Some(m) = self.memory.take() {
            self.gate.pool().push(m);
        }
    }
}

/// Takes one place in the queue for as long as it lives.
struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Gate {
    /// A gate with `limits` (`at_once` of 0 counts as 1).
    pub fn new(limits: GateLimits) -> Arc<Gate> {
        Arc::new(Gate {
            limits,
            general: Arc::new(Semaphore::new(limits.at_once.max(1))),
            known: Arc::new(Semaphore::new(1)),
            memory: Mutex::new(Vec::new()),
            queued: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            in_flight_max: AtomicUsize::new(0),
            checks: AtomicU64::new(0),
            refused_full: AtomicU64::new(0),
            refused_deadline: AtomicU64::new(0),
        })
    }

    /// The seconds a refused sign-in is told to wait (`Retry-After`).
    pub fn retry_after(&self) -> Duration {
        self.limits.wait.max(Duration::from_secs(1))
    }

    /// Waits for a check slot; `known` pairs may also take the extra slot and are
    /// never refused for a full queue.
    pub async fn enter(self: &Arc<Self>, known: bool) -> Result<Pass, Refused> {
        let place = self.queued.fetch_add(1, Ordering::Relaxed);
        let _queued = Queued(&self.queued);
        if place >= self.limits.queue && !known {
            self.refused_full.fetch_add(1, Ordering::Relaxed);
            return Err(Refused::QueueFull);
        }
        let general = self.general.clone().acquire_owned();
        let permit = if known {
            let lane = self.known.clone().acquire_owned();
            tokio::time::timeout(self.limits.wait, async {
                tokio::select! {
                    p = general => p,
                    p = lane => p,
                }
            })
            .await
        } else {
            tokio::time::timeout(self.limits.wait, general).await
        };
        // The semaphores are never closed: `Err` inside is unreachable, and is a refusal.
        let Ok(Ok(permit)) = permit else {
            self.refused_deadline.fetch_add(1, Ordering::Relaxed);
            return Err(Refused::Deadline);
        };
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.in_flight_max.fetch_max(now, Ordering::Relaxed);
        self.checks.fetch_add(1, Ordering::Relaxed);
        Ok(Pass {
            gate: self.clone(),
            memory: self.pool().pop(),
            _permit: permit,
        })
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, Vec<CheckMemory>> {
        // A list of buffers stays whole whatever panicked while it was held.
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks run so far.
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }

    /// The most checks that ever ran at once.
    pub fn in_flight_max(&self) -> usize {
        self.in_flight_max.load(Ordering::Relaxed)
    }

    /// Bytes of argon2 memory the gate holds between checks.
    pub fn idle_memory_bytes(&self) -> usize {
        self.pool().iter().map(CheckMemory::bytes).sum()
    }

    /// Buffers the gate holds between checks.
    pub fn idle_buffers(&self) -> usize {
        self.pool().len()
    }

    /// The gate's metric families, in the text exposition format.
    pub fn metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let mut family = |name: &str, kind: &str, help: &str, lines: &[(&str, u64)]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, v) in lines {
                let _ = writeln!(out, "{name}{labels} {v}");
            }
        };
        let load = |a: &AtomicUsize| a.load(Ordering::Relaxed) as u64;
        family(
            "quire_sign_in_checks_in_flight",
            "gauge",
            "Password checks running now.",
            &[("", load(&self.in_flight))],
        );
        family(
            "quire_sign_in_checks_in_flight_max",
            "gauge",
            "The most password checks that ever ran at once.",
            &[("", load(&self.in_flight_max))],
        );
        family(
            "quire_sign_in_queued",
            "gauge",
            "Sign-ins waiting for a password check.",
            &[("", load(&self.queued))],
        );
        family(
            "quire_sign_in_checks_total",
            "counter",
            "Password checks run.",
            &[("", self.checks())],
        );
        family(
            "quire_sign_in_refused_total",
            "counter",
            "Sign-ins refused a password check (503), by reason.",
            &[
                (
                    "{reason=\"queue_full\"}",
                    self.refused_full.load(Ordering::Relaxed),
                ),
                (
                    "{reason=\"deadline\"}",
                    self.refused_deadline.load(Ordering::Relaxed),
                ),
            ],
        );
        family(
            "quire_sign_in_memory_bytes",
            "gauge",
            "argon2 working memory held between checks.",
            &[("", self.idle_memory_bytes() as u64)],
        );
    }
}
