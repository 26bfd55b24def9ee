//! [`Options`]: how a [`Store`](crate::Store) is laid out and behaves. Plain data,
//! below everything that reads it; the store checks it against the cap when it opens
//! a volume.

/// How a [`Store`](crate::Store) is laid out and behaves. `Options::default()` is what quire uses.
#[derive(Debug, Clone)]
pub struct Options {
    /// Region size; `None` derives it from the cap (1/128 of it rounded down to a power
    /// of two between 64 KiB and 16 MiB). It also bounds the largest object.
    pub region_bytes: Option<u64>,
    /// Largest object (key + tags + meta + body + entry header) accepted; `None` means
    /// whatever fits in a region. Larger puts fail with [`StoreError::TooLarge`](crate::StoreError::TooLarge).
    pub max_object_bytes: Option<u64>,
    /// Admission policy on: once the volume is full, a new key is written only if it
    /// was asked for before recently (a count-min sketch of misses), or if it was asked
    /// for once and is much smaller than what reclaim is evicting (see `admission`), so
    /// one-hit wonders do not flush the working set.
    pub admission: bool,
    /// Bytes of RAM for the hot-set tier (0 turns it off).
    pub ram_tier_bytes: u64,
    /// Share of a region that reclaiming it may spend carrying live entries forward,
    /// most hits per byte first (0.0 turns carrying off; at most 0.9). Higher keeps
    /// more of the volume live (less space lost to overwritten entries) at the cost of
    /// copying: measured on the benchmark's mix (before carrying went by hits per
    /// byte), 0.5 → 82 % of used bytes live, 0.9 → 98 %, with a slower tail for the
    /// writers that reclaim.
    pub carry_share: f64,
    /// Check each entry's checksum on every `get`, not only when it enters the index
    /// (at write and at recovery). Costs a hash of the body per hit.
    pub verify_reads: bool,
    /// When [`crate::Store::get_resident`] checks that an entry is in memory before
    /// reading it (see `crate::residency`).
    pub residency: crate::residency::Residency,
    /// Whether the volume's mapping asks for 2 MiB pages (see `crate::huge_pages`).
    pub huge_pages: crate::huge_pages::HugePages,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            region_bytes: None,
            max_object_bytes: None,
            admission: true,
            ram_tier_bytes: 0,
            carry_share: 0.5,
            verify_reads: false,
            residency: crate::residency::Residency::Auto,
            huge_pages: crate::huge_pages::HugePages::Auto,
        }
    }
}
