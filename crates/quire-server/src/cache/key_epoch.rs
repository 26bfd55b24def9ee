//! Key-scheme epochs: every `[keys]` configuration a volume has been served under
//! gets a number that is never used again, and every store key carries the
//! number of the configuration that made it.
//!
//! The bug this closes: a purge names entries by their URL *as the running
//! configuration normalises it*. Stored under config A (`/page?v=1` keeps its
//! query), purged under config B (which drops it: the purge looked for `/page`),
//! the entry came back as a hit at its old version once A was reloaded.
//!
//! Two mechanisms were possible: purges recorded by URL and checked on every
//! lookup against every key scheme an entry could have been stored under (which
//! needs every scheme ever used, with its aliases and query rules, and a check on
//! the hit path), or an epoch. This module is the epoch, because it is exact by
//! construction: an entry is reachable only under the key scheme that stored it,
//! and a scheme that comes back (A → B → A) is a new epoch, so what A stored
//! before B cannot be reached again — whatever was purged, or not, in between.
//! The price is paid once per `[keys]` change: the cache refills (entries of old
//! epochs are never served and age out as the volume's regions are reclaimed).
//! A reload or restart that leaves `[keys]` alone keeps the epoch and the cache.
//!
//! The epoch and the fingerprint of the configuration it belongs to are kept in a
//! file beside the volume (`<cache.path>.keys`, written whole and renamed), so a
//! restart under another `[keys]` takes a new epoch too. A volume that exists
//! without the file (made by an older quire, or the file was lost) starts at an
//! epoch taken from the clock's nanoseconds, never one used before in practice;
//! a new volume starts at 0, whose keys are those of a build without epochs. If
//! the file cannot be written the epoch is still new for this process and a
//! warning is logged.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use quire_http::key::KeyConfig;

/// The epoch of the running key scheme and where it is kept.
#[derive(Debug)]
pub(crate) struct KeyEpochs {
    file: PathBuf,
    /// (epoch, fingerprint of its `[keys]`), changed under this lock.
    state: Mutex<(u64, u64)>,
    /// The epoch requests read (one atomic load per lookup).
    current: AtomicU64,
}

impl KeyEpochs {
    /// The epochs of the volume at `volume`; `fresh` when the volume did not exist
    /// before this start.
    pub(crate) fn open(volume: &Path, fresh: bool, keys: &KeyConfig) -> KeyEpochs {
        let mut file = volume.as_os_str().to_owned();
        file.push(".keys");
        let file = PathBuf::from(file);
        let saved = std::fs::read_to_string(&file).ok().and_then(|s| parse(&s));
        let state = match saved {
            Some(s) => s,
            None if fresh => (0, fingerprint(keys)),
            // An old volume without its file: an epoch no earlier run used.
            None => (clock_epoch(), 0),
        };
        let e = KeyEpochs {
            file,
            state: Mutex::new(state),
            current: AtomicU64::new(state.0),
        };
        e.adopt(keys);
        e
    }

    /// Makes `keys` the running scheme: the same epoch if it is the same scheme,
    /// else the next one (saved before it is used).
    pub(crate) fn adopt(&self, keys: &KeyConfig) -> u64 {
        let fp = fingerprint(keys);
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.1 != fp {
            *s = (s.0.wrapping_add(1).max(1), fp);
            self.save(*s);
        } else if !self.file.exists() {
            self.save(*s);
        }
        self.current.store(s.0, Ordering::Release);
        s.0
    }

    /// The running epoch.
    pub(crate) fn current(&self) -> u64 {
        self.current.load(Ordering::Acquire)
    }

    fn save(&self, (epoch, fp): (u64, u64)) {
        let mut tmp = self.file.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let written = std::fs::write(&tmp, format!("{epoch} {fp:016x}\n"))
            .and_then(|()| std::fs::rename(&tmp, &self.file));
        if let Err(e) = written {
            tracing::warn!(file = %self.file.display(), error = %e,
                "cannot save the key-scheme epoch: a restart under another [keys] may reach entries of an older one");
        }
    }
}

/// `version` (an upstream's key version) combined with the key-scheme `epoch`:
/// unchanged at epoch 0, else mixed with a hash of the epoch, so two epochs never
/// give one version the same key in practice.
pub(crate) fn mix(version: u64, epoch: u64) -> u64 {
    if epoch == 0 {
        return version;
    }
    version ^ xxhash_rust::xxh3::xxh3_64(&epoch.to_le_bytes())
}

fn parse(s: &str) -> Option<(u64, u64)> {
    let (e, fp) = s.trim().split_once(' ')?;
    Some((e.parse().ok()?, u64::from_str_radix(fp, 16).ok()?))
}

/// A hash of everything in `[keys]` that decides what a URL's key is.
fn fingerprint(keys: &KeyConfig) -> u64 {
    xxhash_rust::xxh3::xxh3_64(format!("{keys:?}").as_bytes())
}

fn clock_epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a() -> KeyConfig {
        KeyConfig::default()
    }

    fn b() -> KeyConfig {
        KeyConfig {
            query_paths: Some(Vec::new()),
            ..KeyConfig::default()
        }
    }

    #[test]
    fn a_key_scheme_that_comes_back_gets_a_new_epoch_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let vol = dir.path().join("c.vol");
        let e = KeyEpochs::open(&vol, true, &a());
        assert_eq!(e.current(), 0, "a new volume keys as before");
        assert_eq!(e.adopt(&a()), 0, "the same scheme keeps its epoch");
        let one = e.adopt(&b());
        let two = e.adopt(&a());
        assert!(one != 0 && two != one && two != 0, "{one} {two}");
        drop(e);
        // A restart under the same scheme keeps the epoch (a warm cache)…
        let e = KeyEpochs::open(&vol, false, &a());
        assert_eq!(e.current(), two);
        drop(e);
        // …and under another takes a new one.
        let e = KeyEpochs::open(&vol, false, &b());
        assert!(![0, one, two].contains(&e.current()), "{}", e.current());
    }

    #[test]
    fn an_old_volume_without_its_file_never_reuses_epoch_zero() {
        let dir = tempfile::tempdir().unwrap();
        let e = KeyEpochs::open(&dir.path().join("c.vol"), false, &a());
        assert_ne!(e.current(), 0);
        assert_ne!(mix(7, e.current()), 7);
        assert_eq!(mix(7, 0), 7);
    }
}
