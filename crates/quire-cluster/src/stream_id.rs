//! Redis stream entry ids (`<ms>-<seq>`): parsed, ordered, printed.

use std::fmt;

/// An entry id; `0-0` is before every entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct StreamId {
    /// Milliseconds (the Redis server's clock when the entry was added).
    pub ms: u64,
    /// Sequence within the millisecond.
    pub seq: u64,
}

impl StreamId {
    /// Parses `<ms>-<seq>` (or `<ms>`, as Redis accepts).
    pub fn parse(s: &str) -> Option<StreamId> {
        let (ms, seq) = s.split_once('-').unwrap_or((s, "0"));
        Some(StreamId {
            ms: ms.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_order_by_time_then_sequence() {
        let a = StreamId::parse("1700000000000-5").unwrap();
        let b = StreamId::parse("1700000000000-12").unwrap();
        let c = StreamId::parse("1700000000001-0").unwrap();
        assert!(a < b && b < c, "numeric, not textual");
        assert_eq!(StreamId::parse("7"), Some(StreamId { ms: 7, seq: 0 }));
        assert_eq!(b.to_string(), "1700000000000-12");
        assert_eq!(StreamId::parse("x-1"), None);
        assert_eq!(StreamId::default().to_string(), "0-0");
    }
}
