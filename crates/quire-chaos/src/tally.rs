//! The record of every response of a run and what it meant, and the figures drawn from
//! it afterwards: totals, each fault's outcome, errors outside any fault or kill, hit
//! ratios around restarts.
//!
//! Key decisions:
//! - **One small sample per response** (URL, send and end instants, outcome, hit), kept
//!   in memory (about 24 bytes; ten minutes of load is a few million), so windows can
//!   be drawn after the fact: a fault's end, or a restart's ready instant, is not known
//!   while its responses are recorded.
//! - **A sample belongs to a window when its span overlaps it**, a fault's window
//!   widened by a grace for what quire does late (a 504 comes after its read timeout).
//! - **Wrong and lost responses are also described at once** (the first few), since a
//!   sample cannot say which bytes were wrong.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::client::Failure;
use crate::schedule::Window;

/// Examples of wrong or lost responses kept for the report.
const EXAMPLES_MAX: usize = 10;

/// What one request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The current version (serve mode: the newest marker or later).
    Current,
    /// An older version allowed by the ack rule.
    Previous,
    /// An invalidation lost: an older version than an acknowledged purge allows.
    Lost,
    /// Bytes that are no version of the URL.
    Wrong,
    /// A status other than the expected one (200, or 206 to a range).
    Status(u16),
    /// No complete response.
    Fail(Failure),
}

impl Outcome {
    /// Whether the request got a right answer (current or allowed previous).
    pub(crate) fn right(self) -> bool {
        matches!(self, Outcome::Current | Outcome::Previous)
    }
}

/// One response.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    /// The URL's index (serve mode: the page's).
    pub(crate) url: u32,
    /// When the request was sent, ms from the run's start.
    pub(crate) sent_ms: u32,
    /// When the answer was complete (or failed), ms from the run's start.
    pub(crate) done_ms: u32,
    /// What it came to.
    pub(crate) outcome: Outcome,
    /// Whether `Cache-Status` said hit.
    pub(crate) hit: bool,
    /// Whether quire served a stale copy because the origin failed.
    pub(crate) stale: bool,
    /// Whether a slow reader asked.
    pub(crate) slow_reader: bool,
}

/// A restart after a SIGKILL, ms from the run's start.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Restart {
    /// The kill.
    pub(crate) killed_ms: u32,
    /// `/_quire/health` answered again.
    pub(crate) ready_ms: u32,
}

/// Every response of a run.
#[derive(Debug)]
pub(crate) struct Tally {
    t0: Instant,
    samples: Mutex<Vec<Sample>>,
    wrong: Mutex<(u64, Vec<String>)>,
    lost: Mutex<(u64, Vec<String>)>,
}

impl Tally {
    /// An empty tally for a run that starts at `t0`.
    pub(crate) fn new(t0: Instant) -> Tally {
        Tally {
            t0,
            samples: Mutex::new(Vec::new()),
            wrong: Mutex::new((0, Vec::new())),
            lost: Mutex::new((0, Vec::new())),
        }
    }

    /// ms from the run's start to `at`.
    pub(crate) fn ms(&self, at: Instant) -> u32 {
        at.saturating_duration_since(self.t0).as_millis() as u32
    }

    /// Records a sample.
    pub(crate) fn record(&self, s: Sample) {
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(s);
    }

    /// Describes a wrong response (the first few are kept and printed at once).
    pub(crate) fn note_wrong(&self, what: String) {
        note(&self.wrong, "WRONG", what);
    }

    /// Describes a lost invalidation (the first few are kept and printed at once).
    pub(crate) fn note_lost(&self, what: String) {
        note(&self.lost, "LOST INVALIDATION", what);
    }

    /// The kept descriptions of wrong and of lost responses.
    pub(crate) fn examples(&self) -> (Vec<String>, Vec<String>) {
        let w = self
            .wrong
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone();
        let l = self
            .lost
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .clone();
        (w, l)
    }

    /// The distinct URLs of the hits among the last `n` samples, newest first.
    pub(crate) fn recent_hits(&self, n: usize) -> Vec<u32> {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let mut urls = Vec::new();
        for s in samples.iter().rev().take(n) {
            if s.hit && s.outcome.right() && !urls.contains(&s.url) {
                urls.push(s.url);
            }
        }
        urls
    }

    /// A copy of the samples so far.
    pub(crate) fn samples(&self) -> Vec<Sample> {
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn note(list: &Mutex<(u64, Vec<String>)>, label: &str, what: String) {
    let mut l = list.lock().unwrap_or_else(|e| e.into_inner());
    l.0 += 1;
    if l.1.len() < EXAMPLES_MAX {
        eprintln!("quire-chaos: {label}: {what}");
        l.1.push(what);
    }
}

/// Counts of outcomes over some samples.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Counts {
    /// Requests.
    pub(crate) requests: u64,
    /// Responses whose body was checked (every 200/206 that arrived whole).
    pub(crate) checked: u64,
    /// Of those, the current version.
    pub(crate) current: u64,
    /// Of those, an older version allowed by the ack rule.
    pub(crate) previous: u64,
    /// Of those, bytes that are no version of the URL.
    pub(crate) wrong: u64,
    /// Of those, older than an acknowledged purge allows.
    pub(crate) lost_invalidations: u64,
    /// Of the checked ones, cache hits.
    pub(crate) hits: u64,
    /// Stale copies served because the origin failed.
    pub(crate) stale_if_error: u64,
    /// Other statuses, by code.
    pub(crate) statuses: BTreeMap<u16, u64>,
    /// Requests without a complete response, by where they failed.
    pub(crate) failures: BTreeMap<&'static str, u64>,
}

impl Counts {
    /// The counts of `samples`.
    pub(crate) fn of<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Counts {
        let mut c = Counts::default();
        for s in samples {
            c.add(s);
        }
        c
    }

    fn add(&mut self, s: &Sample) {
        self.requests += 1;
        let checked = match s.outcome {
            Outcome::Current => {
                self.current += 1;
                true
            }
            Outcome::Previous => {
                self.previous += 1;
                true
            }
            Outcome::Lost => {
                self.lost_invalidations += 1;
                true
            }
            Outcome::Wrong => {
                self.wrong += 1;
                true
            }
            Outcome::Status(code) => {
                *self.statuses.entry(code).or_default() += 1;
                false
            }
            Outcome::Fail(f) => {
                *self.failures.entry(f.name()).or_default() += 1;
                false
            }
        };
        if checked {
            self.checked += 1;
            self.hits += u64::from(s.hit);
            self.stale_if_error += u64::from(s.stale);
        }
    }

    /// Adds `other`'s counts to these.
    pub(crate) fn merge(&mut self, other: &Counts) {
        self.requests += other.requests;
        self.checked += other.checked;
        self.current += other.current;
        self.previous += other.previous;
        self.wrong += other.wrong;
        self.lost_invalidations += other.lost_invalidations;
        self.hits += other.hits;
        self.stale_if_error += other.stale_if_error;
        for (k, v) in &other.statuses {
            *self.statuses.entry(*k).or_default() += v;
        }
        for (k, v) in &other.failures {
            *self.failures.entry(k).or_default() += v;
        }
    }

    /// Requests that got no right answer (a status, a failure, wrong or lost).
    pub(crate) fn errors(&self) -> u64 {
        self.requests - self.current - self.previous
    }

    /// The hit share of checked responses.
    pub(crate) fn hit_ratio(&self) -> Option<f64> {
        (self.checked > 0).then(|| self.hits as f64 / self.checked as f64)
    }
}

/// Whether sample `s` overlaps `[from_ms, to_ms]`.
pub(crate) fn overlaps(s: &Sample, from_ms: u32, to_ms: u32) -> bool {
    s.sent_ms <= to_ms && s.done_ms >= from_ms
}

/// A fault's window in ms, widened by `grace` after its end.
pub(crate) fn fault_span(w: &Window, grace: Duration) -> (u32, u32) {
    (
        w.start.as_millis() as u32,
        (w.end + grace).as_millis() as u32,
    )
}

/// A restart's window: from the kill until a second after quire was ready again.
pub(crate) fn restart_span(r: &Restart) -> (u32, u32) {
    (r.killed_ms, r.ready_ms + 1000)
}

/// Samples outside every fault (widened by `grace`) and every restart.
pub(crate) fn outside<'a>(
    samples: &'a [Sample],
    faults: &'a [Window],
    grace: Duration,
    restarts: &'a [Restart],
) -> impl Iterator<Item = &'a Sample> + 'a {
    samples.iter().filter(move |s| {
        !faults.iter().any(|w| {
            let (a, b) = fault_span(w, grace);
            overlaps(s, a, b)
        }) && !restarts.iter().any(|r| {
            let (a, b) = restart_span(r);
            overlaps(s, a, b)
        })
    })
}

/// Hit ratios around restarts: the 5 s before each kill, the 5 s after each ready
/// instant, and the share of URLs hit before a kill whose first answer after the
/// restart was a hit too (warm entries that came back).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Warmth {
    /// Hit ratio of checked responses in the 5 s before the kills.
    pub(crate) hit_ratio_before_kill: Option<f64>,
    /// Hit ratio of checked responses in the 5 s after the restarts.
    pub(crate) hit_ratio_after_restart: Option<f64>,
    /// URLs hit in the 5 s before a kill and asked again within 5 s of the restart.
    pub(crate) warm_urls_asked_again: u64,
    /// Of those, answered by a hit the first time.
    pub(crate) warm_urls_hit_again: u64,
}

/// The [`Warmth`] of `restarts`.
pub(crate) fn warmth(samples: &[Sample], restarts: &[Restart]) -> Warmth {
    const SPAN_MS: u32 = 5000;
    let mut before = Counts::default();
    let mut after = Counts::default();
    let mut w = Warmth::default();
    for r in restarts {
        let pre: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.done_ms < r.killed_ms && s.sent_ms + SPAN_MS >= r.killed_ms)
            .collect();
        let post: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.sent_ms >= r.ready_ms && s.sent_ms < r.ready_ms + SPAN_MS)
            .collect();
        pre.iter().for_each(|s| before.add(s));
        post.iter().for_each(|s| after.add(s));
        let warm: std::collections::HashSet<u32> =
            pre.iter().filter(|s| s.hit).map(|s| s.url).collect();
        let mut seen = std::collections::HashSet::new();
        for s in post.iter().filter(|s| s.outcome.right()) {
            if warm.contains(&s.url) && seen.insert(s.url) {
                w.warm_urls_asked_again += 1;
                w.warm_urls_hit_again += u64::from(s.hit);
            }
        }
    }
    w.hit_ratio_before_kill = before.hit_ratio();
    w.hit_ratio_after_restart = after.hit_ratio();
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(url: u32, sent_ms: u32, done_ms: u32, outcome: Outcome, hit: bool) -> Sample {
        Sample {
            url,
            sent_ms,
            done_ms,
            outcome,
            hit,
            stale: false,
            slow_reader: false,
        }
    }

    #[test]
    fn counts_split_checked_answers_from_errors() {
        let samples = [
            s(1, 0, 1, Outcome::Current, true),
            s(1, 0, 1, Outcome::Previous, false),
            s(1, 0, 1, Outcome::Status(502), false),
            s(1, 0, 1, Outcome::Fail(Failure::Body), false),
            s(1, 0, 1, Outcome::Lost, true),
        ];
        let c = Counts::of(&samples);
        assert_eq!((c.requests, c.checked, c.hits), (5, 3, 2));
        let mut twice = c.clone();
        twice.merge(&c);
        assert_eq!((twice.requests, twice.statuses[&502]), (10, 2));
        assert_eq!(c.errors(), 3);
        assert_eq!(c.statuses[&502], 1);
        assert_eq!(c.failures["body-cut"], 1);
    }

    #[test]
    fn warm_urls_are_followed_across_a_restart() {
        let restarts = [Restart {
            killed_ms: 10_000,
            ready_ms: 11_000,
        }];
        let samples = [
            s(1, 9_000, 9_010, Outcome::Current, true),
            s(2, 9_000, 9_010, Outcome::Current, true),
            s(1, 11_100, 11_110, Outcome::Current, true),
            s(1, 11_200, 11_210, Outcome::Current, true),
            s(2, 11_100, 11_110, Outcome::Current, false),
        ];
        let w = warmth(&samples, &restarts);
        assert_eq!((w.warm_urls_asked_again, w.warm_urls_hit_again), (2, 1));
        assert_eq!(w.hit_ratio_before_kill, Some(1.0));
    }
}
