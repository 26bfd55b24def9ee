//! The oracle of proxy mode: which versions of a URL a response may carry, given when
//! its request was sent, and the verdict on a body.
//!
//! The rule: an edit moves a URL to version `n` at the origin, then purges it; once
//! quire has answered the purge with 200 (the *ack*), every request sent after that
//! instant must get version `n` or later. A request sent before the ack may still get
//! `n - 1` (its fill, or its hit, may have started before the purge). Versions below
//! the floor are *lost invalidations*; bytes that are not exactly some version of the
//! URL are *wrong*. A purge that fails or is not answered is not an ack: the editor
//! retries it, and until then the old version stays allowed.
//!
//! Key decisions:
//! - **Acks are kept per edited URL**, as (instant, version) in order; the floor for a
//!   request is the last version acked strictly before it was sent.
//! - **The version is read after the response is complete**, so a body can never be
//!   newer than it: versions only grow.
//! - **A body is identified by comparing bytes**, never by its first line alone: the
//!   claimed version is tried first, then every version from the current one down.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::content::Catalog;

/// How many versions back a body that claims none is searched for.
const SEARCH_VERSIONS_MAX: u32 = 64;

/// What part of a body a response carries.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Part<'a> {
    /// The whole body.
    Full(&'a [u8]),
    /// Bytes from `start` on (a 206 to a single range).
    Range {
        /// Offset of the first byte.
        start: usize,
        /// The bytes.
        bytes: &'a [u8],
    },
}

/// The verdict on one response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The current version.
    Current,
    /// An older version a request sent before the purge's ack may get.
    Previous,
    /// A version older than one whose purge was acknowledged before the request.
    Lost {
        /// The version served.
        got: u32,
        /// The oldest version allowed.
        floor: u32,
    },
    /// Bytes that are no version of this URL.
    Wrong(String),
}

/// Acknowledged purges, per URL.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    acks: Mutex<HashMap<usize, Vec<(Instant, u32)>>>,
}

impl Ledger {
    /// Records that URL `i`'s purge for `version` was acknowledged at `at`.
    pub(crate) fn ack(&self, i: usize, version: u32, at: Instant) {
        let mut acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.entry(i).or_default().push((at, version));
    }

    /// The oldest version a request for URL `i` sent at `sent` may get.
    pub(crate) fn floor(&self, i: usize, sent: Instant) -> u32 {
        let acks = self.acks.lock().unwrap_or_else(|e| e.into_inner());
        acks.get(&i).map_or(0, |list| {
            list.iter()
                .filter(|(at, _)| *at < sent)
                .map(|&(_, v)| v)
                .max()
                .unwrap_or(0)
        })
    }

    /// The verdict on a body of URL `i` whose request was sent at `sent`; reads the
    /// current version now (call it once the body is complete).
    pub(crate) fn judge(&self, cat: &Catalog, i: usize, sent: Instant, part: Part<'_>) -> Verdict {
        let current = cat.version(i);
        let Some(v) = identify(cat, i, current, part) else {
            return Verdict::Wrong(describe(cat, i, current, part));
        };
        let floor = self.floor(i, sent);
        if v < floor {
            Verdict::Lost { got: v, floor }
        } else if v == current {
            Verdict::Current
        } else {
            Verdict::Previous
        }
    }
}

/// The version of URL `i` (at most `current`) whose bytes `part` are exactly.
fn identify(cat: &Catalog, i: usize, current: u32, part: Part<'_>) -> Option<u32> {
    if let Part::Full(body) = part {
        if let Some((path, v)) = Catalog::claimed(body) {
            if path == Catalog::path(i) && v <= current && cat.body(i, v) == body {
                return Some(v);
            }
        }
    }
    let oldest = current.saturating_sub(SEARCH_VERSIONS_MAX);
    (oldest..=current)
        .rev()
        .find(|&v| matches(&cat.body(i, v), part))
}

fn matches(expected: &[u8], part: Part<'_>) -> bool {
    match part {
        Part::Full(body) => expected == body,
        Part::Range { start, bytes } => expected
            .get(start..start.saturating_add(bytes.len()))
            .is_some_and(|e| e == bytes),
    }
}

/// A line saying how `part` differs from URL `i`'s current version.
fn describe(cat: &Catalog, i: usize, current: u32, part: Part<'_>) -> String {
    let expected = cat.body(i, current);
    let (start, got) = match part {
        Part::Full(b) => (0, b),
        Part::Range { start, bytes } => (start, bytes),
    };
    let want = expected.get(start..).unwrap_or(&[]);
    let first_diff = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    let claim = Catalog::claimed(got).map_or_else(
        || "no header".to_string(),
        |(p, v)| format!("claims {p} v{v}"),
    );
    let want_len = match part {
        Part::Full(_) => want.len(),
        Part::Range { .. } => got.len().min(want.len()),
    };
    format!(
        "{} (current v{current}): {} bytes from offset {start}, expected {want_len} \
         ({} in all); first difference at +{first_diff}; {claim}",
        Catalog::path(i),
        got.len(),
        expected.len(),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_current_version_is_right_and_the_previous_only_before_the_ack() {
        let cat = Catalog::new(1, 100);
        let ledger = Ledger::default();
        let old = cat.body(5, 0);
        let sent_before = Instant::now();
        cat.bump(5);
        let ack = Instant::now() + Duration::from_millis(1);
        ledger.ack(5, 1, ack);
        let sent_after = ack + Duration::from_millis(1);
        let new = cat.body(5, 1);
        assert_eq!(
            ledger.judge(&cat, 5, sent_before, Part::Full(&old)),
            Verdict::Previous
        );
        assert_eq!(
            ledger.judge(&cat, 5, sent_after, Part::Full(&old)),
            Verdict::Lost { got: 0, floor: 1 }
        );
        assert_eq!(
            ledger.judge(&cat, 5, sent_after, Part::Full(&new)),
            Verdict::Current
        );
    }

    #[test]
    fn foreign_truncated_or_flipped_bytes_are_wrong() {
        let cat = Catalog::new(1, 100);
        let ledger = Ledger::default();
        let now = Instant::now();
        let other = cat.body(6, 0);
        assert!(matches!(
            ledger.judge(&cat, 5, now, Part::Full(&other)),
            Verdict::Wrong(_)
        ));
        let mut body = cat.body(5, 0);
        body.pop();
        assert!(matches!(
            ledger.judge(&cat, 5, now, Part::Full(&body)),
            Verdict::Wrong(_)
        ));
        let mut body = cat.body(5, 0);
        let last = body.len() - 1;
        body[last] ^= 1;
        assert!(matches!(
            ledger.judge(&cat, 5, now, Part::Full(&body)),
            Verdict::Wrong(_)
        ));
    }

    #[test]
    fn ranges_are_identified_by_their_bytes() {
        let cat = Catalog::new(1, 100);
        let ledger = Ledger::default();
        let v0 = cat.body(7, 0);
        cat.bump(7);
        let v1 = cat.body(7, 1);
        let now = Instant::now();
        let start = v0.len() / 2;
        let part = Part::Range {
            start,
            bytes: &v1[start..],
        };
        assert_eq!(ledger.judge(&cat, 7, now, part), Verdict::Current);
        let part = Part::Range {
            start,
            bytes: &v0[start..],
        };
        assert_eq!(ledger.judge(&cat, 7, now, part), Verdict::Previous);
        let part = Part::Range {
            start: start + 1,
            bytes: &v0[start..],
        };
        assert!(matches!(
            ledger.judge(&cat, 7, now, part),
            Verdict::Wrong(_)
        ));
    }
}
