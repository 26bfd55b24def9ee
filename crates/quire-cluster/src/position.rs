//! Where this node is in the log, kept beside its volume (`<volume>.cluster`):
//! the log's incarnation, the last entry it applied, and the instant before which
//! everything it holds counts as stale.
//!
//! An entry id names an entry only within one incarnation of the stream (see
//! `crate::bus`: Redis that lost the stream starts a new one, whose ids may be lower
//! than positions the nodes saved), so a position is always the pair, and two
//! positions of different incarnations never compare.
//!
//! Written after every batch it applies, by writing a temporary file and renaming
//! it over the old one, so a kill at any moment leaves the old position or the
//! new one, never half of one. The position only ever names entries whose effect
//! is already in the store (which survives a kill: the volume is a shared
//! mapping), so a restart replays from there and misses nothing. A file that is
//! missing or does not parse means "unknown": the node then revalidates everything
//! it holds (see `reader`).

use std::path::{Path, PathBuf};

use crate::stream_id::StreamId;

/// The saved position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    /// The last entry applied.
    pub applied: StreamId,
    /// Unix milliseconds before which stored responses are stale (0: none).
    pub stale_before_ms: u64,
    /// The incarnation of the log `applied` belongs to (0: unknown).
    pub incarnation: u64,
    /// The latest this node's clock read (Unix ms) when it was saved: responses
    /// stored before a restart may carry reception times up to about this, even
    /// if the clock is behind it now (see `reader`'s revalidation instant).
    pub clock_seen_ms: u64,
}

/// The position file of the volume at `volume`.
pub fn path_for(volume: &Path) -> PathBuf {
    let mut p = volume.as_os_str().to_owned();
    p.push(".cluster");
    PathBuf::from(p)
}

/// Reads the position at `path`; `None` when there is none or it does not parse.
pub fn load(path: &Path) -> Option<Position> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut applied = None;
    let mut stale_before_ms = None;
    let mut incarnation = 0;
    let mut clock_seen_ms = 0;
    for line in text.lines() {
        match line.split_once('=') {
            Some(("applied", v)) => applied = StreamId::parse(v.trim()),
            Some(("stale_before_ms", v)) => stale_before_ms = v.trim().parse().ok(),
            Some(("clock_seen_ms", v)) => clock_seen_ms = v.trim().parse().unwrap_or(0),
            Some(("incarnation", v)) => {
                incarnation = u64::from_str_radix(v.trim(), 16).unwrap_or(0);
            }
            _ => {}
        }
    }
    Some(Position {
        applied: applied?,
        stale_before_ms: stale_before_ms?,
        incarnation,
        clock_seen_ms,
    })
}

/// Saves `pos` at `path` (atomically: a temporary file renamed over it).
pub fn save(path: &Path, pos: &Position) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let text = format!(
        "# quire cluster position: the last log entry applied to this volume\napplied={}\nstale_before_ms={}\nincarnation={:016x}\nclock_seen_ms={}\n",
        pos.applied, pos.stale_before_ms, pos.incarnation, pos.clock_seen_ms
    );
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_survives_a_save_and_garbage_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(&dir.path().join("cache.vol"));
        assert!(path.ends_with("cache.vol.cluster"));
        assert_eq!(load(&path), None, "none yet");
        let pos = Position {
            applied: StreamId { ms: 17, seq: 3 },
            stale_before_ms: 99,
            incarnation: 0xfeed,
            clock_seen_ms: 1234,
        };
        save(&path, &pos).unwrap();
        assert_eq!(load(&path), Some(pos));
        std::fs::write(&path, "applied=oops\n").unwrap();
        assert_eq!(load(&path), None);
    }
}
