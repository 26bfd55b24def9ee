//! The judge of the cluster cases: an edit at the origin, a purge with `wait=all`
//! on a node that does not own the URL, and then every node asked for it (the
//! others first, so they fill from the owner with peer fill, then the owner, then
//! everyone again for the hits), each answer held to the version the purge was for.
//!
//! A **stale answer** is any answer given after the purge's acknowledgement whose
//! body is an older version than the one the origin had when the purge was sent,
//! a hit or not: that is the promise of issue 28 (*an invalidation is never lost*),
//! and `wait=all` is the acknowledgement an operator relies on. Bytes that are not
//! exactly the version they claim are counted apart (`wrong_bytes`), as are answers
//! that are not 200 (`errors`: the origin is healthy throughout, so none is due).

use std::sync::Arc;

use super::rig::{Ack, Read, Rig, NODES};
use crate::content::Catalog;
use crate::hostile::Outcome;

/// How many broken answers a tally describes in words.
const EXAMPLES_MAX: usize = 6;

/// What a case (or one part of it) counted.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    /// Answers judged (200s whose version was compared with the purge's).
    pub(crate) answers: u64,
    pub(crate) stale: u64,
    pub(crate) stale_hits: u64,
    pub(crate) wrong_bytes: u64,
    pub(crate) errors: u64,
    /// Purges answered 200.
    pub(crate) purges: u64,
    /// Purges answered otherwise (nothing purged: no promise to judge).
    pub(crate) purges_refused: u64,
    /// Acknowledgements that named a node as not applied (`pending`, `unreachable`).
    pub(crate) acks_naming_missing: u64,
    pub(crate) examples: Vec<String>,
}

impl Tally {
    /// Judges one answer of URL `i` given after a purge for `version` was
    /// acknowledged.
    pub(crate) fn judge(&mut self, node: usize, i: usize, r: anyhow::Result<Read>, version: u32) {
        let r = match r {
            Ok(r) if r.status == 200 => r,
            Ok(r) => {
                self.errors += 1;
                self.example(format!(
                    "n{node} answered {} for {}",
                    r.status,
                    Catalog::path(i)
                ));
                return;
            }
            Err(e) => {
                self.errors += 1;
                self.example(format!("{e:#}"));
                return;
            }
        };
        self.answers += 1;
        if r.wrong_bytes {
            self.wrong_bytes += 1;
            self.example(format!(
                "n{node} served wrong bytes for {}",
                Catalog::path(i)
            ));
        } else if r.version.is_some_and(|v| v < version) {
            self.stale += 1;
            self.stale_hits += u64::from(r.hit);
            self.example(format!(
                "n{node} served v{} of {} after the purge for v{version} was acknowledged \
                 (cache-status {:?})",
                r.version.unwrap_or(0),
                Catalog::path(i),
                r.cache_status
            ));
        }
    }

    /// Counts a purge's answer.
    pub(crate) fn ack(&mut self, ack: &Ack) {
        if !ack.ok() {
            self.purges_refused += 1;
            self.example(format!("a purge answered {}: {}", ack.status, ack.body));
            return;
        }
        self.purges += 1;
        if ack.nodes.len() != NODES || ack.nodes.values().any(|s| s != "applied") {
            self.acks_naming_missing += 1;
        }
    }

    pub(crate) fn example(&mut self, what: String) {
        if self.examples.len() < EXAMPLES_MAX {
            self.examples.push(what);
        }
    }

    pub(crate) fn merge(&mut self, o: Tally) {
        self.answers += o.answers;
        self.stale += o.stale;
        self.stale_hits += o.stale_hits;
        self.wrong_bytes += o.wrong_bytes;
        self.errors += o.errors;
        self.purges += o.purges;
        self.purges_refused += o.purges_refused;
        self.acks_naming_missing += o.acks_naming_missing;
        for e in o.examples {
            self.example(e);
        }
    }

    /// Writes the counts as figures named `prefix.*`, and a failure for every
    /// broken promise: a stale answer, wrong bytes, an error answer.
    pub(crate) fn report(&self, o: &mut Outcome, prefix: &str) {
        let f = |n: &str| format!("{prefix}.{n}");
        o.figure(&f("answers_checked"), self.answers as f64);
        o.figure(&f("stale"), self.stale as f64);
        o.figure(&f("stale_hits"), self.stale_hits as f64);
        o.figure(&f("wrong_bytes"), self.wrong_bytes as f64);
        o.figure(&f("errors"), self.errors as f64);
        o.figure(&f("purges_acknowledged"), self.purges as f64);
        o.figure(&f("purges_refused"), self.purges_refused as f64);
        o.figure(
            &f("acks_naming_missing_nodes"),
            self.acks_naming_missing as f64,
        );
        let broken = self.stale + self.wrong_bytes + self.errors;
        o.check(broken == 0, || {
            format!(
                "{prefix}: {} stale, {} wrong bytes, {} errors in {} answers: {}",
                self.stale,
                self.wrong_bytes,
                self.errors,
                self.answers,
                self.examples.join("; ")
            )
        });
        o.check(self.answers > 0, || {
            format!("{prefix}: no answer was checked")
        });
    }
}

/// Every node, the owner last: the others fill from it with peer fill first.
fn read_order(owner: usize) -> impl Iterator<Item = usize> {
    (0..NODES).filter(move |&n| n != owner).chain([owner])
}

/// The origin moves URL `i` to its next version, node `at` purges it with
/// `wait=all`, and every node is asked for it twice after the answer. Returns the
/// tally, the acknowledgement and the version the purge was for.
pub(crate) async fn purge_and_check(
    rig: &Rig,
    i: usize,
    owner: usize,
    at: usize,
) -> (Tally, Ack, u32) {
    let mut t = Tally::default();
    let version = rig.catalog.bump(i);
    let ack = match rig.purge(at, i).await {
        Ok(a) => a,
        Err(e) => {
            t.errors += 1;
            t.example(format!("{e:#}"));
            return (t, Ack::default(), version);
        }
    };
    t.ack(&ack);
    if ack.ok() {
        check_all(rig, &mut t, i, owner, version).await;
    }
    (t, ack, version)
}

/// Asks every node for URL `i` twice (the owner last each time) and judges each
/// answer against `version`.
pub(crate) async fn check_all(rig: &Rig, t: &mut Tally, i: usize, owner: usize, version: u32) {
    for _ in 0..2 {
        for n in read_order(owner) {
            t.judge(n, i, rig.read(n, i).await, version);
        }
    }
}

/// [`purge_and_check`] for every `(url, owner)` of `urls` at once, each purged on
/// the node `at(owner, k)` names; the merged tally and each acknowledgement.
pub(crate) async fn batch(
    rig: &Arc<Rig>,
    urls: &[(usize, usize)],
    at: impl Fn(usize, usize) -> usize,
) -> (Tally, Vec<Ack>) {
    let mut set = tokio::task::JoinSet::new();
    for (k, &(i, owner)) in urls.iter().enumerate() {
        let rig = rig.clone();
        let node = at(owner, k);
        set.spawn(async move { purge_and_check(&rig, i, owner, node).await });
    }
    let mut tally = Tally::default();
    let mut acks = Vec::new();
    while let Some(done) = set.join_next().await {
        match done {
            Ok((t, a, _)) => {
                tally.merge(t);
                acks.push(a);
            }
            Err(e) => {
                tally.errors += 1;
                tally.example(format!("a purge task failed: {e}"));
            }
        }
    }
    (tally, acks)
}

/// A node other than `owner` (the `k`-th such choice, alternating).
pub(crate) fn not_owner(owner: usize, k: usize) -> usize {
    (owner + 1 + k % (NODES - 1)) % NODES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_is_read_last_and_purges_go_elsewhere() {
        assert_eq!(read_order(1).collect::<Vec<_>>(), vec![0, 2, 1]);
        for owner in 0..NODES {
            for k in 0..4 {
                assert_ne!(not_owner(owner, k), owner);
            }
        }
        assert_ne!(not_owner(0, 0), not_owner(0, 1));
    }

    #[test]
    fn an_old_version_after_the_ack_is_stale_and_fails_the_case() {
        let read = |version: u32, hit: bool| Read {
            status: 200,
            version: Some(version),
            wrong_bytes: false,
            hit,
            cache_status: String::new(),
        };
        let mut t = Tally::default();
        t.judge(0, 5, Ok(read(3, false)), 3);
        t.judge(1, 5, Ok(read(2, true)), 3);
        assert_eq!((t.answers, t.stale, t.stale_hits), (2, 1, 1));
        let mut o = Outcome::new("x");
        t.report(&mut o, "case");
        assert_eq!(o.failures.len(), 1, "{:?}", o.failures);
    }
}
