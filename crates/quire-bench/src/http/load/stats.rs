//! What a run counted, as the event loop records it: completions, bytes, errors by
//! kind, statuses other than 2xx/3xx, the latency histogram and completions per
//! 100 ms. Everything is allocated before the run starts.

use std::time::Duration;

use crate::histogram::Histogram;

/// Width of a timeline slot.
pub(crate) const SLOT: Duration = Duration::from_millis(100);

/// Errors by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Errors {
    /// Connections that could not be opened.
    pub connect: u64,
    /// Reads that failed, or the server closed the connection inside a response.
    pub read: u64,
    /// Writes that failed.
    pub write: u64,
    /// Requests unanswered within the timeout.
    pub timeout: u64,
    /// Responses that were not HTTP/1.1, or bytes that came unasked.
    pub parse: u64,
}

impl Errors {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.parse
    }
}

/// A run's raw counts.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Responses completed.
    pub requests: u64,
    /// Bytes of those responses, heads and bodies.
    pub bytes: u64,
    /// Errors by kind.
    pub errors: Errors,
    /// Completed responses with a status outside 200-399.
    pub non_2xx: u64,
    /// Latency of each completed response, microseconds.
    pub latency: Histogram,
    /// Completions per [`SLOT`] from the start.
    pub timeline: Vec<u64>,
    /// From the start to the last completion (or the end of the drain).
    pub elapsed: Duration,
    /// Open loop: requests that fell due but were never sent (no connection was free
    /// before the run ended).
    pub unsent: u64,
}

impl Stats {
    /// Empty counts for a run of about `duration`.
    pub fn new(duration: Duration) -> Stats {
        let slots = (duration.as_millis() / SLOT.as_millis()) as usize + 64;
        Stats {
            requests: 0,
            bytes: 0,
            errors: Errors::default(),
            non_2xx: 0,
            latency: Histogram::new(),
            timeline: Vec::with_capacity(slots),
            elapsed: Duration::ZERO,
            unsent: 0,
        }
    }

    /// One completed response, `since_start` after the start, `latency` after it
    /// was due (or sent).
    pub fn complete(&mut self, status: u16, bytes: u64, latency: Duration, since_start: Duration) {
        self.requests += 1;
        self.bytes += bytes;
        if !(200..400).contains(&status) {
            self.non_2xx += 1;
        }
        self.latency.record(latency.as_micros() as u64);
        let slot = (since_start.as_nanos() / SLOT.as_nanos()) as usize;
        if self.timeline.len() <= slot {
            self.timeline.resize(slot + 1, 0);
        }
        self.timeline[slot] += 1;
    }
}
