//! What related lists are made of: a list's entries ([`Hit`]), what is kept of each
//! note ([`Slot`]) and the limits every list keeps ([`NEIGHBOURS`], [`SCORE_MIN`]).
//! A leaf: the lists' owner (`related`) and the partition index both build on it.

use crate::note::Visibility;

/// Notes in a related list, at most.
pub const NEIGHBOURS: usize = 5;

/// Notes less similar than this (cosine) are never listed: a note with nothing like
/// it has a short or empty list rather than five arbitrary ones.
pub(super) const SCORE_MIN: f32 = 0.05;

/// One entry of a related list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Hit {
    pub(super) slot: u32,
    pub(crate) score: f32,
}

/// Related lists per audience, indexed by `Visibility as usize`.
pub(super) type Lists = [Vec<Hit>; 3];

/// What is kept of one note, found by its path.
pub(super) struct Slot {
    pub(crate) path: String,
    pub(super) version: u64,
    pub(super) vis: Visibility,
    pub(super) alive: bool,
    /// Row in `parts[vis]`; `None` for a zero vector (nothing to compare).
    pub(crate) row: Option<u32>,
    /// Lists for the audiences that may read the note; the others are empty.
    pub(super) lists: Lists,
}
