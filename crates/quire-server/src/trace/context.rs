//! W3C Trace Context (`traceparent`, version 00): the ids of a trace and a span,
//! read from a trusted proxy's request and written into the origin's, and the
//! random source new ids and sampling draws come from.

use std::cell::Cell;

use http::HeaderValue;

/// The request field carrying a trace's context (W3C Trace Context §3.2).
pub const TRACEPARENT: &str = "traceparent";

/// A parent's context: the trace it belongs to, its span, and whether it is
/// sampled (the `01` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parent {
    /// The trace.
    pub(crate) trace_id: u128,
    /// The parent span.
    pub(crate) span_id: u64,
    /// The caller recorded it (flag `01`).
    pub(crate) sampled: bool,
}

/// Reads a `traceparent` value: `00-<32 hex>-<16 hex>-<2 hex>`. A later version's
/// value is read by the same prefix, as the specification asks (§3.3); anything
/// malformed, and all-zero ids, is `None`.
pub(crate) fn parse(value: &[u8]) -> Option<Parent> {
    if value.len() < 55 || (value.len() > 55 && value[55] != b'-') {
        return None;
    }
    let version = hex_u128(&value[0..2])?;
    if version == 0xff || (version == 0 && value.len() != 55) {
        return None;
    }
    if value[2] != b'-' || value[35] != b'-' || value[52] != b'-' {
        return None;
    }
    let trace_id = hex_u128(&value[3..35])?;
    let span_id = u64::try_from(hex_u128(&value[36..52])?).ok()?;
    let flags = hex_u128(&value[53..55])?;
    (trace_id != 0 && span_id != 0).then_some(Parent {
        trace_id,
        span_id,
        sampled: flags & 1 == 1,
    })
}

/// The `traceparent` value naming `span_id` of `trace_id`, sampled.
pub(crate) fn format(trace_id: u128, span_id: u64) -> HeaderValue {
    let s = format!("00-{trace_id:032x}-{span_id:016x}-01");
    // Hex digits and dashes only: always a valid field value.
    HeaderValue::try_from(s).expect("hex is a valid field value")
}

/// Lower-case hex only (the specification's `HEXDIGLC`), at most 32 digits.
fn hex_u128(s: &[u8]) -> Option<u128> {
    if s.is_empty() || s.len() > 32 {
        return None;
    }
    s.iter().try_fold(0u128, |acc, &b| {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        Some(acc << 4 | u128::from(d))
    })
}

thread_local! {
    /// Each thread's xorshift state, seeded once from the OS's generator.
    static STATE: Cell<u64> = Cell::new(rand::random::<u64>() | 1);
}

/// A random 64-bit number from this thread's generator (xorshift64*): enough for
/// span ids and sampling, and a few nanoseconds, where the OS's generator would
/// be a system call.
pub(crate) fn random() -> u64 {
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

/// A new span id (never 0, which means "none").
pub(crate) fn span_id() -> u64 {
    random().max(1)
}

/// A new trace id (never 0).
pub(crate) fn trace_id() -> u128 {
    (u128::from(random()) << 64 | u128::from(random())).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_specifications_example() {
        let p = parse(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(p.trace_id, 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736);
        assert_eq!(p.span_id, 0x00f0_67aa_0ba9_02b7);
        assert!(p.sampled);
        let q = parse(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        assert!(!q.sampled);
    }

    #[test]
    fn refuses_what_is_malformed() {
        for bad in [
            &b""[..],
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            b"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736x00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        // A later version may carry more after a dash.
        assert!(parse(b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz").is_some());
    }

    #[test]
    fn writes_what_it_reads() {
        let v = format(0xabc, 0x123);
        let p = parse(v.as_bytes()).unwrap();
        assert_eq!((p.trace_id, p.span_id, p.sampled), (0xabc, 0x123, true));
        assert_ne!(span_id(), 0);
        assert_ne!(trace_id(), 0);
    }
}
