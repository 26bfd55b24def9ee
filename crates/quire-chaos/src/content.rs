//! The chaos origin's content: a catalogue of URLs whose every property (size, type,
//! freshness, validator, surrogate key) and every body byte is a pure function of the
//! run's seed, the URL's index and its version, so the runner knows the exact bytes
//! any (URL, version) must have without keeping them.
//!
//! Key decisions:
//! - **The catalogue is virtual.** URL `i` is `/d{i % DIRS}/o{i}`; nothing is kept per
//!   URL but its version (one atomic), so a catalogue of 100,000 URLs costs 400 KB.
//! - **A body opens with a line naming its path, version and size**
//!   (`quire-chaos /d3/o17 v2 12345\n`), so a wrong body can be described: another
//!   URL's, another version's, or bytes from nowhere. The judge never trusts that
//!   line alone: it compares the whole body with the bytes the named version must have.
//! - **Text and binary.** Text bodies are words from a small vocabulary (compressible:
//!   quire stores gzip, br and zstd codings of them, so a client asking for a coding
//!   gets bytes quire made itself); binary bodies are splitmix64 output.
//! - **Sizes** are 70 % 100 B–16 KB, 20 % 16–100 KB and 10 % 100–300 KB; a fifth of
//!   the last are over 256 KiB, where quire streams a fill instead of holding it.
//! - **Surrogate keys** group a third of the URLs (`g{k}`, about ten URLs each), so a
//!   tag purge invalidates several URLs at once; directories do the same for prefixes.

use std::sync::atomic::{AtomicU32, Ordering};

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Directories URLs are spread over (prefix purges take one).
pub(crate) const DIRS: usize = 64;

/// The host clients send and purges name.
pub(crate) const HOST: &str = "chaos.test";

/// Freshness of the short-lived URLs: they go stale during a run, so quire revalidates
/// them (with `If-None-Match` when they carry an `ETag`).
pub(crate) const SHORT_MAX_AGE_SECS: u32 = 2;

/// Words of the text bodies.
const WORDS: [&str; 32] = [
    "cache", "region", "purge", "origin", "stale", "fresh", "entry", "volume", "fill", "hit",
    "miss", "tag", "quire", "page", "note", "byte", "reclaim", "index", "shard", "pin", "kill",
    "restart", "fault", "slow", "reset", "chunk", "head", "body", "soak", "edit", "version",
    "ledger",
];

/// One URL's properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spec {
    /// The index in the catalogue.
    pub(crate) index: usize,
    /// Body bytes.
    pub(crate) size: usize,
    /// `text/html` (compressible) or `application/octet-stream`.
    pub(crate) text: bool,
    /// `Cache-Control: max-age`.
    pub(crate) max_age_secs: u32,
    /// Whether responses carry an `ETag` (and the origin answers `If-None-Match`).
    pub(crate) etag: bool,
    /// Whether `Cache-Control` allows `stale-if-error` (quire may then serve a stale
    /// copy while the origin fails).
    pub(crate) stale_if_error: bool,
    /// The surrogate key, if any.
    pub(crate) tag: Option<String>,
}

/// The URLs of a run and their current versions.
#[derive(Debug)]
pub(crate) struct Catalog {
    seed: u64,
    versions: Vec<AtomicU32>,
}

impl Catalog {
    /// A catalogue of `urls` URLs, all at version 0.
    pub(crate) fn new(seed: u64, urls: usize) -> Catalog {
        Catalog {
            seed,
            versions: (0..urls.max(1)).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// How many URLs there are.
    pub(crate) fn len(&self) -> usize {
        self.versions.len()
    }

    /// The path of URL `i`.
    pub(crate) fn path(i: usize) -> String {
        format!("/d{}/o{i}", i % DIRS)
    }

    /// The absolute URL quire keys URL `i` under (what purges name).
    pub(crate) fn url(i: usize) -> String {
        format!("http://{HOST}{}", Catalog::path(i))
    }

    /// The index a request path names (its query ignored), if it is one of ours.
    pub(crate) fn index_of(&self, path: &str) -> Option<usize> {
        let path = path.split('?').next()?;
        let rest = path.strip_prefix("/d")?;
        let (dir, obj) = rest.split_once("/o")?;
        let dir: usize = dir.parse().ok()?;
        let i: usize = obj.parse().ok()?;
        (i < self.len() && i % DIRS == dir).then_some(i)
    }

    /// The current version of URL `i` (what the origin serves now).
    pub(crate) fn version(&self, i: usize) -> u32 {
        self.versions[i].load(Ordering::Acquire)
    }

    /// Moves URL `i` to its next version and returns it.
    pub(crate) fn bump(&self, i: usize) -> u32 {
        self.versions[i].fetch_add(1, Ordering::AcqRel) + 1
    }

    fn hash(&self, i: usize) -> u64 {
        xxh3_64_with_seed(&(i as u64).to_le_bytes(), self.seed)
    }

    /// Surrogate-key groups: about ten tagged URLs each.
    fn groups(&self) -> usize {
        (self.len() / 30).max(1)
    }

    /// The properties of URL `i`.
    pub(crate) fn spec(&self, i: usize) -> Spec {
        let h = self.hash(i);
        let pick = |shift: u32, n: u64| (h >> shift) % n;
        let size = match h % 100 {
            0..=69 => 100 + pick(8, 16_000 - 100),
            70..=89 => 16_000 + pick(8, 100_000 - 16_000),
            _ => 100_000 + pick(8, 300_000 - 100_000),
        } as usize;
        let short = pick(32, 10) == 0;
        Spec {
            index: i,
            size,
            text: pick(40, 2) == 0,
            max_age_secs: if short {
                SHORT_MAX_AGE_SECS
            } else if pick(41, 2) == 0 {
                600
            } else {
                3600
            },
            etag: short || pick(42, 2) == 0,
            stale_if_error: pick(44, 4) == 0,
            tag: (pick(48, 3) == 0).then(|| format!("g{}", i % self.groups())),
        }
    }

    /// The URLs that carry surrogate key `tag`.
    pub(crate) fn tag_members(&self, tag: &str) -> Vec<usize> {
        let Some(k) = tag.strip_prefix('g').and_then(|k| k.parse::<usize>().ok()) else {
            return Vec::new();
        };
        (k..self.len())
            .step_by(self.groups())
            .filter(|&i| self.spec(i).tag.as_deref() == Some(tag))
            .collect()
    }

    /// The URLs under directory `d`.
    pub(crate) fn dir_members(&self, d: usize) -> Vec<usize> {
        (d % DIRS..self.len()).step_by(DIRS).collect()
    }

    /// The `ETag` of URL `i` at `version`.
    pub(crate) fn etag(&self, i: usize, version: u32) -> String {
        format!("\"{:x}-v{version}\"", self.hash(i) & 0xffff_ffff)
    }

    /// The `Cache-Control` of URL `i`'s responses.
    pub(crate) fn cache_control(spec: &Spec) -> String {
        let mut cc = format!("max-age={}", spec.max_age_secs);
        if spec.stale_if_error {
            cc.push_str(", stale-if-error=600");
        }
        cc
    }

    /// The exact body of URL `i` at `version`.
    pub(crate) fn body(&self, i: usize, version: u32) -> Vec<u8> {
        let spec = self.spec(i);
        let mut out = format!(
            "quire-chaos {} v{version} {}\n",
            Catalog::path(i),
            spec.size
        )
        .into_bytes();
        let mut rng = SplitMix(self.hash(i) ^ u64::from(version).wrapping_mul(0x9e37_79b9));
        if spec.text {
            let mut words = 0u32;
            while out.len() < spec.size {
                let r = rng.next();
                out.extend_from_slice(WORDS[(r % WORDS.len() as u64) as usize].as_bytes());
                words += 1;
                out.push(if words.is_multiple_of(12) {
                    b'\n'
                } else {
                    b' '
                });
            }
        } else {
            while out.len() < spec.size {
                out.extend_from_slice(&rng.next().to_le_bytes());
            }
        }
        out.truncate(spec.size);
        out
    }

    /// The version a body's first line claims and the path it names, if it has one.
    pub(crate) fn claimed(body: &[u8]) -> Option<(String, u32)> {
        let line = body.split(|&b| b == b'\n').next()?;
        let line = std::str::from_utf8(line).ok()?;
        let mut parts = line.split(' ');
        (parts.next()? == "quire-chaos").then_some(())?;
        let path = parts.next()?.to_string();
        let version = parts.next()?.strip_prefix('v')?.parse().ok()?;
        Some((path, version))
    }
}

/// splitmix64: a tiny, fast, well-mixed generator for body bytes.
#[derive(Debug)]
pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    /// The next 64 bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_deterministic_sized_and_versioned() {
        let a = Catalog::new(7, 1000);
        let b = Catalog::new(7, 1000);
        for i in [0, 1, 17, 999] {
            let spec = a.spec(i);
            assert_eq!(spec, b.spec(i));
            let v0 = a.body(i, 0);
            assert_eq!(v0, b.body(i, 0));
            assert_eq!(v0.len(), spec.size);
            assert_ne!(v0, a.body(i, 1));
            assert_eq!(Catalog::claimed(&v0), Some((Catalog::path(i), 0)));
        }
    }

    #[test]
    fn sizes_span_the_buckets_and_some_exceed_256_kib() {
        let c = Catalog::new(1, 5000);
        let sizes: Vec<usize> = (0..c.len()).map(|i| c.spec(i).size).collect();
        assert!(sizes.iter().all(|&s| (100..300_000).contains(&s)));
        assert!(sizes.iter().any(|&s| s > 256 << 10));
        assert!(sizes.iter().filter(|&&s| s < 16_000).count() > 3000);
    }

    #[test]
    fn paths_round_trip_and_foreign_paths_are_refused() {
        let c = Catalog::new(1, 500);
        for i in [0, 63, 64, 499] {
            assert_eq!(c.index_of(&Catalog::path(i)), Some(i));
            assert_eq!(c.index_of(&format!("{}?x=1", Catalog::path(i))), Some(i));
        }
        assert_eq!(c.index_of("/d1/o2"), None);
        assert_eq!(c.index_of("/d4/o500"), None);
        assert_eq!(c.index_of("/other"), None);
    }

    #[test]
    fn tag_and_directory_members_carry_the_tag_and_the_directory() {
        let c = Catalog::new(3, 3000);
        let tagged: Vec<usize> = (0..c.len()).filter(|&i| c.spec(i).tag.is_some()).collect();
        let tag = c.spec(tagged[0]).tag.unwrap_or_default();
        let members = c.tag_members(&tag);
        assert!(members.contains(&tagged[0]));
        assert!(members
            .iter()
            .all(|&i| c.spec(i).tag.as_deref() == Some(&tag)));
        assert!(c.dir_members(5).iter().all(|&i| i % DIRS == 5));
        assert_eq!(c.bump(4), 1);
        assert_eq!(c.version(4), 1);
    }
}
