//! Self-verifying test values, shared by the store's integration tests and the
//! `volume_open` fuzz target (behind the `testkit` feature; tests turn it on through
//! the crate's dev-dependency on itself, the fuzz crate in its manifest).
//!
//! A body names its key, version and length and is otherwise a pseudo-random pattern
//! derived from them, and a meta names key and version, so any hit can be checked byte
//! for byte without keeping the values written: a hit is either exactly a value once
//! written for its key, or wrong. Test data, not format: where things lie in a volume
//! file is [`crate::format`]'s, which needs no feature.

use crate::engine::EntryRef;

/// SplitMix64: a small, well-mixed generator for test data.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The body of (key, version): key, version and length as little-endian words, then a
/// pattern. `len_of` turns one random word into the length (at least 24 bytes).
pub fn body(k: u64, v: u64, len_of: impl FnOnce(u64) -> usize) -> Vec<u8> {
    let mut s = k.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ v;
    let len = len_of(splitmix(&mut s)).max(24);
    let mut out = Vec::with_capacity(len + 8);
    out.extend_from_slice(&k.to_le_bytes());
    out.extend_from_slice(&v.to_le_bytes());
    out.extend_from_slice(&(len as u64).to_le_bytes());
    while out.len() < len {
        out.extend_from_slice(&splitmix(&mut s).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The meta of (key, version).
pub fn meta_of(k: u64, v: u64) -> Vec<u8> {
    format!("k={k} v={v}").into_bytes()
}

/// If a hit for key `k` is exactly a value once written for it (body from `body_of`,
/// meta from [`meta_of`]), its version.
pub fn version_if_exact(
    h: &impl EntryRef,
    k: u64,
    body_of: fn(u64, u64) -> Vec<u8>,
) -> Option<u64> {
    let b = h.body();
    let word = |i: usize| {
        let w = b.get(i * 8..i * 8 + 8)?;
        Some(u64::from_le_bytes(w.try_into().ok()?))
    };
    let (key, v, len) = (word(0)?, word(1)?, word(2)?);
    (key == k && len == b.len() as u64 && b == &body_of(k, v)[..] && h.meta() == &meta_of(k, v)[..])
        .then_some(v)
}
