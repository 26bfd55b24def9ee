//! What went wrong during a run, shared by every scenario and thread: content mismatches
//! (a hit whose bytes are not what was stored) and engine errors (a put or remove that
//! returned an error a cache should not), counted, with the first few described.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use quire_store::StoreError;

/// How many problems of each kind keep their description.
const KEEP: usize = 8;

/// Thread-safe problem counters.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    mismatches: AtomicU64,
    errors: AtomicU64,
    too_large: AtomicU64,
    no_space: AtomicU64,
    notes: Mutex<Vec<String>>,
}

impl Tally {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn note(&self, what: String) {
        if let Ok(mut notes) = self.notes.lock() {
            if notes.len() < 2 * KEEP {
                notes.push(what);
            }
        }
    }

    /// A hit whose bytes are wrong.
    pub(crate) fn mismatch(&self, engine: &str, scenario: &str, what: impl std::fmt::Display) {
        if self.mismatches.fetch_add(1, Ordering::Relaxed) < KEEP as u64 {
            self.note(format!("mismatch [{engine} {scenario}] {what}"));
        }
    }

    /// Classifies a failed put or remove. `TooLarge` and `NoSpace` are a cache declining
    /// to store (counted apart); anything else is an engine error.
    pub(crate) fn error(&self, engine: &str, scenario: &str, op: &str, err: &StoreError) {
        match err {
            StoreError::TooLarge { .. } => {
                self.too_large.fetch_add(1, Ordering::Relaxed);
            }
            StoreError::NoSpace => {
                self.no_space.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                if self.errors.fetch_add(1, Ordering::Relaxed) < KEEP as u64 {
                    self.note(format!("error [{engine} {scenario}] {op}: {err}"));
                }
            }
        }
    }

    pub(crate) fn mismatches(&self) -> u64 {
        self.mismatches.load(Ordering::Relaxed)
    }

    pub(crate) fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Puts declined with `TooLarge`.
    pub(crate) fn too_large(&self) -> u64 {
        self.too_large.load(Ordering::Relaxed)
    }

    /// Puts declined with `NoSpace`.
    pub(crate) fn no_space(&self) -> u64 {
        self.no_space.load(Ordering::Relaxed)
    }

    /// The first few problems, described.
    pub(crate) fn notes(&self) -> Vec<String> {
        self.notes.lock().map(|n| n.clone()).unwrap_or_default()
    }
}
