//! Object content for the benchmark: keys, metadata and bodies as deterministic
//! functions of (key id, version), object sizes as functions of the key id, and the byte
//! checker that tells a correct hit from a wrong one.
//!
//! A body starts with a 16-byte header (key id, version, length, little-endian) and goes
//! on with a xorshift stream seeded by (id, version), so any hit can be checked without
//! keeping the bytes around: the header says which (id, version) the bytes claim to be,
//! and the rest must be that pair's stream. The metadata repeats id and version, so a hit
//! whose meta and body come from different writes is caught too.

use quire_store::EntryRef;

/// Bytes of the body header: id (8), version (4), length (4).
pub(crate) const HEADER_LEN: usize = 16;
/// Bytes of metadata stored with every object (about a small response head).
pub(crate) const META_LEN: usize = 64;
const META_MAGIC: &[u8; 4] = b"qbm1";
const KEY_PREFIX: &[u8] = b"https://bench.quire.test/o/";
/// Bytes of every key the benchmark uses.
pub(crate) const KEY_LEN: usize = KEY_PREFIX.len() + 16;
/// The smallest body: the header alone.
pub(crate) const MIN_BODY: usize = HEADER_LEN;

/// SplitMix64: a cheap, well-mixed hash of a `u64`.
pub(crate) fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// xorshift64*: the pattern generator behind bodies, and the threads' cheap RNG.
#[derive(Debug, Clone)]
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        XorShift(splitmix64(seed) | 1)
    }
    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant here.
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

fn pattern_seed(id: u64, version: u32) -> u64 {
    splitmix64(splitmix64(id) ^ u64::from(version))
}

/// Writes the key of object `id` into `buf` (cleared first).
pub(crate) fn write_key(buf: &mut Vec<u8>, id: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.clear();
    buf.extend_from_slice(KEY_PREFIX);
    for shift in (0..16).rev() {
        buf.push(HEX[((id >> (shift * 4)) & 0xf) as usize]);
    }
}

/// The key of object `id`.
pub(crate) fn key(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(KEY_LEN);
    write_key(&mut k, id);
    k
}

/// The metadata stored with version `version` of object `id`.
pub(crate) fn meta(id: u64, version: u32) -> [u8; META_LEN] {
    let mut m = [0u8; META_LEN];
    m[..4].copy_from_slice(META_MAGIC);
    m[4..12].copy_from_slice(&id.to_le_bytes());
    m[12..16].copy_from_slice(&version.to_le_bytes());
    let mut rng = XorShift::new(pattern_seed(id, version) ^ 0x6d65_7461);
    for chunk in m[16..].chunks_mut(8) {
        let w = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
    m
}

/// Fills `buf` with the `len`-byte body of version `version` of object `id`.
/// `len` is raised to [`MIN_BODY`] if smaller.
pub(crate) fn fill_body(buf: &mut Vec<u8>, id: u64, version: u32, len: usize) {
    let len = len.max(MIN_BODY);
    buf.clear();
    buf.resize(len, 0);
    buf[..8].copy_from_slice(&id.to_le_bytes());
    buf[8..12].copy_from_slice(&version.to_le_bytes());
    buf[12..16].copy_from_slice(&(len as u32).to_le_bytes());
    let mut rng = XorShift::new(pattern_seed(id, version));
    for chunk in buf[HEADER_LEN..].chunks_mut(8) {
        let w = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// The body of version `version` of object `id`, `len` bytes long.
#[cfg(test)]
pub(crate) fn body(id: u64, version: u32, len: usize) -> Vec<u8> {
    let mut b = Vec::new();
    fill_body(&mut b, id, version, len);
    b
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

/// What is wrong with the bytes of a hit for one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Corrupt {
    /// The body is shorter than the header every body starts with.
    Short { id: u64, len: usize },
    /// The body belongs to another object.
    OtherObject { id: u64, got: u64 },
    /// The body's length is not the one its header says.
    Length {
        id: u64,
        version: u32,
        len: usize,
        header: usize,
    },
    /// The body's length is not the object's size.
    Size {
        id: u64,
        version: u32,
        len: usize,
        want: usize,
    },
    /// The metadata belongs to another object or version.
    Meta { id: u64, version: u32 },
    /// The metadata's bytes differ from what was written.
    MetaBytes { id: u64, version: u32 },
    /// The body's bytes differ from what was written, near byte `at`.
    Body { id: u64, version: u32, at: usize },
}

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Corrupt::Short { id, len } => write!(
                f,
                "object {id}: body of {len} bytes is shorter than its header"
            ),
            Corrupt::OtherObject { id, got } => {
                write!(f, "object {id}: body belongs to object {got}")
            }
            Corrupt::Length {
                id,
                version,
                len,
                header,
            } => write!(
                f,
                "object {id} v{version}: body is {len} bytes, its header says {header}"
            ),
            Corrupt::Size {
                id,
                version,
                len,
                want,
            } => write!(
                f,
                "object {id} v{version}: body is {len} bytes, expected {want}"
            ),
            Corrupt::Meta { id, version } => write!(
                f,
                "object {id} v{version}: metadata does not belong to this body"
            ),
            Corrupt::MetaBytes { id, version } => {
                write!(f, "object {id} v{version}: metadata bytes differ")
            }
            Corrupt::Body { id, version, at } => {
                write!(f, "object {id} v{version}: body differs near byte {at}")
            }
        }
    }
}

/// Checks a hit for object `id`: the headers of meta and body always (cheap), and with
/// `full` every byte against the regenerated pattern. `expected_len` pins the body
/// length when the object's size is known. Returns the version the bytes carry, or what
/// is wrong with them.
pub(crate) fn verify(
    meta_bytes: &[u8],
    body_bytes: &[u8],
    id: u64,
    expected_len: Option<usize>,
    full: bool,
) -> Result<u32, Corrupt> {
    if body_bytes.len() < HEADER_LEN {
        return Err(Corrupt::Short {
            id,
            len: body_bytes.len(),
        });
    }
    let got_id = le_u64(&body_bytes[..8]);
    let version = le_u32(&body_bytes[8..12]);
    let len = le_u32(&body_bytes[12..16]) as usize;
    if got_id != id {
        return Err(Corrupt::OtherObject { id, got: got_id });
    }
    if len != body_bytes.len() {
        return Err(Corrupt::Length {
            id,
            version,
            len: body_bytes.len(),
            header: len,
        });
    }
    if let Some(want) = expected_len {
        if want.max(MIN_BODY) != len {
            return Err(Corrupt::Size {
                id,
                version,
                len,
                want,
            });
        }
    }
    if meta_bytes.len() != META_LEN
        || &meta_bytes[..4] != META_MAGIC
        || le_u64(&meta_bytes[4..12]) != id
        || le_u32(&meta_bytes[12..16]) != version
    {
        return Err(Corrupt::Meta { id, version });
    }
    if full {
        if meta_bytes != meta(id, version) {
            return Err(Corrupt::MetaBytes { id, version });
        }
        let mut rng = XorShift::new(pattern_seed(id, version));
        for (i, chunk) in body_bytes[HEADER_LEN..].chunks(8).enumerate() {
            let w = rng.next_u64().to_le_bytes();
            if chunk != &w[..chunk.len()] {
                return Err(Corrupt::Body {
                    id,
                    version,
                    at: HEADER_LEN + i * 8,
                });
            }
        }
    }
    Ok(version)
}

/// [`verify`] applied to an engine's hit.
pub(crate) fn verify_entry<H: EntryRef>(
    entry: &H,
    id: u64,
    expected_len: Option<usize>,
    full: bool,
) -> Result<u32, Corrupt> {
    verify(entry.meta(), entry.body(), id, expected_len, full)
}

/// How big each object is, as a pure function of its id (so every engine and the LRU
/// model see the same sizes without a table).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum SizeModel {
    /// Every body is this long (the tests' model).
    #[cfg(test)]
    Fixed(usize),
    /// Uniform in `lo..=hi`.
    Uniform { lo: usize, hi: usize },
    /// Log-normal with this median and shape, clipped to `min..=max`: a heavy tail.
    LogNormal {
        median: f64,
        sigma: f64,
        min: usize,
        max: usize,
    },
}

impl SizeModel {
    /// Body bytes of object `id`.
    pub(crate) fn body_len(&self, id: u64) -> usize {
        let len = match *self {
            #[cfg(test)]
            SizeModel::Fixed(n) => n,
            SizeModel::Uniform { lo, hi } => {
                lo + (splitmix64(id ^ 0x5eed_0001) % ((hi - lo) as u64 + 1)) as usize
            }
            SizeModel::LogNormal {
                median,
                sigma,
                min,
                max,
            } => {
                // Box-Muller from two hashed uniforms in (0, 1].
                let h1 = splitmix64(id ^ 0x5eed_0002);
                let h2 = splitmix64(h1);
                let u1 = ((h1 >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
                let u2 = (h2 >> 11) as f64 / (1u64 << 53) as f64;
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let v = median * (sigma * z).exp();
                (v.round() as usize).clamp(min, max)
            }
        };
        len.max(MIN_BODY)
    }

    /// Bytes object `id` takes in a byte-capped cache as the LRU model counts it:
    /// key + meta + body.
    pub(crate) fn object_bytes(&self, id: u64) -> u64 {
        (KEY_LEN + META_LEN + self.body_len(id)) as u64
    }

    /// The number of ids `0..n` whose objects add up to at least `bytes`.
    pub(crate) fn keys_for_bytes(&self, bytes: u64) -> usize {
        let mut total = 0u64;
        let mut n = 0usize;
        while total < bytes {
            total += self.object_bytes(n as u64);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_and_fixed_length() {
        let a = key(1);
        let b = key(0x1_0000_0001);
        assert_eq!(a.len(), KEY_LEN);
        assert_eq!(b.len(), KEY_LEN);
        assert_ne!(a, b);
        assert!(a.ends_with(b"0000000000000001"));
    }

    #[test]
    fn a_correct_body_verifies() {
        for len in [0, 16, 17, 100, 4099] {
            let b = body(42, 7, len);
            assert_eq!(verify(&meta(42, 7), &b, 42, Some(len), true), Ok(7));
        }
    }

    #[test]
    fn a_flipped_byte_is_detected_anywhere() {
        let m = meta(9, 3);
        let b = body(9, 3, 1000);
        for pos in [0, 8, 12, 16, 17, 500, 999] {
            let mut bad = b.clone();
            bad[pos] ^= 0x01;
            assert!(
                verify(&m, &bad, 9, Some(1000), true).is_err(),
                "flip at {pos} not caught"
            );
        }
        // Past the header, only the full check reads the bytes.
        let mut bad = b.clone();
        bad[700] ^= 0x80;
        assert!(verify(&m, &bad, 9, None, false).is_ok());
        let mut bad_meta = m;
        bad_meta[40] ^= 0x01;
        assert!(verify(&bad_meta, &b, 9, None, true).is_err());
    }

    #[test]
    fn another_objects_or_versions_bytes_are_detected() {
        let b = body(5, 1, 300);
        assert!(verify(&meta(5, 1), &b, 6, None, false).is_err());
        // Meta from another write of the same key.
        assert!(verify(&meta(5, 2), &b, 5, None, false).is_err());
        // A truncated body.
        assert!(verify(&meta(5, 1), &b[..200], 5, None, false).is_err());
        // Right header, wrong pattern: version 2's header on version 1's bytes.
        let mut forged = b.clone();
        forged[8..12].copy_from_slice(&2u32.to_le_bytes());
        assert!(verify(&meta(5, 2), &forged, 5, None, false).is_ok());
        assert!(verify(&meta(5, 2), &forged, 5, None, true).is_err());
    }

    #[test]
    fn lognormal_sizes_are_clipped_and_centred() {
        let m = SizeModel::LogNormal {
            median: 8192.0,
            sigma: 1.3,
            min: 1024,
            max: 1 << 20,
        };
        let mut sizes: Vec<usize> = (0..20_000).map(|id| m.body_len(id)).collect();
        assert!(sizes.iter().all(|&s| (1024..=1 << 20).contains(&s)));
        sizes.sort_unstable();
        let median = sizes[sizes.len() / 2];
        assert!((7000..9500).contains(&median), "median {median}");
        assert_eq!(m.body_len(77), m.body_len(77));
    }

    #[test]
    fn keys_for_bytes_covers_the_target() {
        let m = SizeModel::Fixed(1000);
        let per = (KEY_LEN + META_LEN + 1000) as u64;
        assert_eq!(m.keys_for_bytes(per * 10), 10);
        assert_eq!(m.keys_for_bytes(per * 10 + 1), 11);
    }
}
