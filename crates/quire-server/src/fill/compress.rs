//! Content-coding codecs: quire's encoders and bounded decoders, plus the
//! "is it worth it?" policy.
//!
//! quire stores an object once per coding (see `quire_http::encoding`), so all compression
//! happens here, **once, at fill time** — never on the hit path, which only chooses
//! among stored variants. This module owns:
//!
//! - [`encode`]: identity / gzip / br / zstd at configurable [`Levels`];
//! - [`decode`]: turning a body the origin sent compressed back into identity, with a
//!   hard output bound;
//! - the policy helpers [`compressible`], [`MIN_COMPRESS_BYTES`] and [`worth_keeping`].
//!
//! Key decisions:
//! - **Slow, strong defaults** (gzip 9 on libdeflate's 1..=12 scale, brotli 5, zstd 19).
//!   The cost is paid once per fill and the bytes are saved on every hit. Brotli stays
//!   at 5 because qualities 10–11 cost two orders of magnitude more CPU for a few
//!   percent, and a fill that stalls holds every coalesced waiter.
//! - **gzip through libdeflate, one shot**, in gzip framing (header + CRC-32 + ISIZE) so
//!   any gunzip reads it. The whole body is in memory at fill time anyway, and
//!   libdeflate's one-shot compressor beats zlib on both ratio and speed.
//! - **Brotli window 2^22 (4 MiB)**: bodies beyond that gain little from a larger
//!   window, and it keeps the decoder's ring buffer modest on clients.
//! - **Decoding is bounded by output, not input.** A decompression bomb is reported as
//!   [`CompressError::TooLarge`] as soon as the `limit + 1`-th byte appears; the output
//!   buffer grows geometrically but is never allowed past `limit + 1` bytes, so a bomb
//!   costs at most `limit + 1` bytes of output plus the codec's fixed working state.
//! - **zstd windows are capped at 8 MiB** (`window_log_max = 23`), the limit RFC 9659
//!   sets for the `zstd` content coding and that browsers enforce. A frame asking for
//!   more is refused as [`CompressError::Corrupt`], which also bounds the decoder's own
//!   window allocation.
//! - **Brotli is decoded strictly** (RFC 7932 windows, at most 16 MiB): the crate's
//!   `Decompressor` reader would also accept the large-window extension, letting a
//!   few bytes of input demand a 1 GiB ring buffer.
//! - **An empty body decodes to an empty body** for every coding. Origins do send
//!   `Content-Encoding: gzip` on zero-length responses, and browsers accept that.
//! - **Nothing panics on input.** Every codec error becomes a [`CompressError`].

use std::io::{self, Read};

use brotli::enc::StandardAlloc;
use brotli::BrotliResult;
use http::HeaderValue;
use quire_http::dictionary::{Dictionary, DCZ_HEADER_LEN};
use quire_http::encoding::Coding;

pub use crate::config::Levels;

/// Smallest body worth compressing (bytes): 256. Below it, only identity is stored —
/// framing overhead eats most of the gain, and such bodies fit in one packet anyway.
pub const MIN_COMPRESS_BYTES: usize = 256;

/// Minimum absolute saving (bytes) for an encoded variant to be kept; see [`worth_keeping`].
const MIN_SAVING_BYTES: usize = 64;

/// Minimum relative saving for an encoded variant to be kept, as `1 / N` of the
/// identity length (20 → 5 %); see [`worth_keeping`].
const MIN_SAVING_DIVISOR: u128 = 20;

/// libdeflate's level scale.
const GZIP_LEVEL_MIN: i32 = 1;
const GZIP_LEVEL_MAX: i32 = 12;
/// Brotli qualities.
const BROTLI_LEVEL_MIN: u32 = 0;
const BROTLI_LEVEL_MAX: u32 = 11;
/// zstd's regular levels. Negative ("fast") levels are refused: they trade ratio for
/// speed, which is the wrong trade for compress-once storage.
const ZSTD_LEVEL_MIN: i32 = 1;
const ZSTD_LEVEL_MAX: i32 = 22;

/// Brotli encoder window, log2 bytes (see the module doc).
const BROTLI_LGWIN: i32 = 22;
/// Largest zstd window accepted when decoding, log2 bytes (8 MiB, RFC 9659 §3).
const ZSTD_WINDOW_LOG_MAX: u32 = 23;

/// Initial output allocation when decoding, before geometric growth (capped by the limit).
const DECODE_INITIAL_CAPACITY: usize = 16 * 1024;

impl Levels {
    /// Checks every level against its coding's range; the first one out of range is
    /// reported as [`CompressError::Level`].
    ///
    /// # Errors
    ///
    /// [`CompressError::Level`] for the first level out of range.
    pub fn validate(&self) -> Result<(), CompressError> {
        for coding in [Coding::Gzip, Coding::Br, Coding::Zstd] {
            self.check(coding)?;
        }
        Ok(())
    }

    /// Checks the level of one coding. Identity has no level and always passes.
    fn check(&self, coding: Coding) -> Result<(), CompressError> {
        let (level, ok) = match coding {
            Coding::Identity => return Ok(()),
            Coding::Gzip => (
                i64::from(self.gzip),
                (GZIP_LEVEL_MIN..=GZIP_LEVEL_MAX).contains(&self.gzip),
            ),
            Coding::Br => (
                i64::from(self.brotli),
                (BROTLI_LEVEL_MIN..=BROTLI_LEVEL_MAX).contains(&self.brotli),
            ),
            Coding::Zstd | Coding::Dcz => (
                i64::from(self.zstd),
                (ZSTD_LEVEL_MIN..=ZSTD_LEVEL_MAX).contains(&self.zstd),
            ),
        };
        if ok {
            Ok(())
        } else {
            Err(CompressError::Level { coding, level })
        }
    }
}

/// The valid level range of a coding, for error messages.
fn level_range(coding: Coding) -> &'static str {
    match coding {
        Coding::Identity => "none",
        Coding::Gzip => "1..=12",
        Coding::Br => "0..=11",
        Coding::Zstd | Coding::Dcz => "1..=22",
    }
}

/// Why encoding or decoding a body failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompressError {
    /// A configured compression level is outside its coding's range.
    #[error("{coding} level {level} is out of range (valid: {})", level_range(*.coding))]
    Level {
        /// The coding whose level is wrong.
        coding: Coding,
        /// The level as configured.
        level: i64,
    },
    /// The compressed input is malformed or truncated, or (zstd) asks for a window
    /// larger than the content coding allows.
    #[error("corrupt {coding} body: {detail}")]
    Corrupt {
        /// The coding the body claimed.
        coding: Coding,
        /// The decoder's description of the problem.
        detail: String,
    },
    /// Decoding would produce more than `limit` bytes (e.g. a decompression bomb).
    #[error("decoded {coding} body exceeds {limit} bytes")]
    TooLarge {
        /// The coding being decoded.
        coding: Coding,
        /// The output bound that was hit.
        limit: usize,
    },
    /// A dictionary coding was asked for without its dictionary ([`encode_dcz`]), or
    /// came from an origin (quire does not hold an origin's dictionaries).
    #[error("{coding} is made and read only against a dictionary")]
    NoDictionary {
        /// The coding.
        coding: Coding,
    },
    /// A codec failed for a reason unrelated to the input (allocation of codec state,
    /// an encoder's internal output error).
    #[error("compression I/O error: {0}")]
    Io(#[from] io::Error),
}

/// Encodes `body` with `coding`. Identity returns a copy. gzip via libdeflater
/// (one-shot, gzip format with header and CRC so any gunzip reads it), brotli via the
/// `brotli` crate (lgwin 22), zstd via `zstd::bulk::compress`.
///
/// Only the level of the requested coding is checked; an out-of-range level is
/// [`CompressError::Level`].
///
/// # Errors
///
/// [`CompressError::Level`] for an out-of-range level; [`CompressError::Io`] if the
/// codec itself fails (not expected for in-memory input).
pub fn encode(coding: Coding, body: &[u8], levels: &Levels) -> Result<Vec<u8>, CompressError> {
    levels.check(coding)?;
    match coding {
        Coding::Identity => Ok(body.to_vec()),
        Coding::Gzip => encode_gzip(body, levels.gzip),
        Coding::Br => encode_brotli(body, levels.brotli),
        Coding::Zstd => Ok(zstd::bulk::compress(body, levels.zstd)?),
        Coding::Dcz => Err(CompressError::NoDictionary { coding }),
    }
}

/// Encodes `body` as `dcz` against `dict` (RFC 9842 §5.2): the 40-byte header naming
/// the dictionary, then a zstd frame at `level` that uses the dictionary as raw
/// content (its bytes as history before the body's first byte; a quire dictionary
/// never starts with zstd's dictionary magic, so a decoder that detects formatted
/// dictionaries reads it as raw content too).
///
/// # Errors
///
/// [`CompressError::Level`] for a level outside zstd's; [`CompressError::Io`] if
/// the codec fails.
pub fn encode_dcz(body: &[u8], dict: &Dictionary, level: i32) -> Result<Vec<u8>, CompressError> {
    if !(ZSTD_LEVEL_MIN..=ZSTD_LEVEL_MAX).contains(&level) {
        return Err(CompressError::Level {
            coding: Coding::Dcz,
            level: i64::from(level),
        });
    }
    let prepared = prepared_dictionary(dict, level);
    let mut compressor = zstd::bulk::Compressor::with_prepared_dictionary(&prepared)?;
    let frame = compressor.compress(body)?;
    let mut out = Vec::with_capacity(DCZ_HEADER_LEN + frame.len());
    out.extend_from_slice(&dict.dcz_header());
    out.extend_from_slice(&frame);
    Ok(out)
}

/// `dict` digested for zstd at `level`, made once and kept while the site uses it:
/// digesting a 128 KiB dictionary at a strong level costs more than compressing a
/// page with it, so each page would pay it again otherwise.
fn prepared_dictionary(
    dict: &Dictionary,
    level: i32,
) -> std::sync::Arc<zstd::dict::EncoderDictionary<'static>> {
    type Kept = Option<(
        quire_http::dictionary::Hash,
        i32,
        std::sync::Arc<zstd::dict::EncoderDictionary<'static>>,
    )>;
    static KEPT: std::sync::Mutex<Kept> = std::sync::Mutex::new(None);
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((h, l, d)) = kept.as_ref() {
        if h == dict.hash() && *l == level {
            return d.clone();
        }
    }
    let d = std::sync::Arc::new(zstd::dict::EncoderDictionary::copy(dict.bytes(), level));
    *kept = Some((*dict.hash(), level, d.clone()));
    d
}

/// Decodes a `dcz` body made against `dict`, bounded by `limit` as [`decode`] is
/// (what a client does; quire uses it to check its own output).
///
/// # Errors
///
/// [`CompressError::Corrupt`] when the header names another dictionary or the
/// frame is malformed; [`CompressError::TooLarge`] past `limit`.
pub fn decode_dcz(body: &[u8], dict: &Dictionary, limit: usize) -> Result<Vec<u8>, CompressError> {
    let corrupt = |detail: &str| CompressError::Corrupt {
        coding: Coding::Dcz,
        detail: detail.to_owned(),
    };
    match quire_http::dictionary::dcz_hash(body) {
        Some(h) if h == *dict.hash() => {}
        Some(_) => return Err(corrupt("made against another dictionary")),
        None => return Err(corrupt("no dcz header")),
    }
    let frame = body.get(DCZ_HEADER_LEN..).unwrap_or_default();
    let mut decoder =
        zstd::stream::read::Decoder::with_dictionary(std::io::BufReader::new(frame), dict.bytes())?;
    decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
    read_bounded(decoder, Coding::Dcz, limit)
}

fn encode_gzip(body: &[u8], level: i32) -> Result<Vec<u8>, CompressError> {
    let lvl = libdeflater::CompressionLvl::new(level).map_err(|_| CompressError::Level {
        coding: Coding::Gzip,
        level: i64::from(level),
    })?;
    let mut compressor = libdeflater::Compressor::new(lvl);
    let bound = compressor.gzip_compress_bound(body.len());
    let mut out = vec![0u8; bound];
    // The bound is libdeflate's worst case, so running out of space is a library bug,
    // not an input problem; report it rather than panic.
    let len = compressor
        .gzip_compress(body, &mut out)
        .map_err(io::Error::other)?;
    out.truncate(len);
    Ok(out)
}

fn encode_brotli(body: &[u8], quality: u32) -> Result<Vec<u8>, CompressError> {
    let params = brotli::enc::BrotliEncoderParams {
        // Validated to 0..=11 by the caller, so this cannot fail; fall back to the
        // maximum rather than panic all the same.
        quality: i32::try_from(quality).unwrap_or(11),
        lgwin: BROTLI_LGWIN,
        size_hint: body.len(),
        ..Default::default()
    };
    let mut out = Vec::with_capacity(body.len() / 2 + 64);
    let mut input = body;
    brotli::BrotliCompress(&mut input, &mut out, &params)?;
    Ok(out)
}

/// Decodes a body the origin sent compressed, refusing to produce more than `limit`
/// bytes: a decompression bomb is [`CompressError::TooLarge`], found without the
/// output buffer ever exceeding `limit + 1` bytes. gzip: flate2's `MultiGzDecoder`
/// (concatenated members allowed); br: the `brotli` crate's stream decoder in strict
/// RFC 7932 mode (no large-window extension); zstd: zstd's streaming decoder (frames
/// concatenate; window capped at 8 MiB). Bytes after the end of the compressed data
/// are [`CompressError::Corrupt`]. Identity returns a copy, still
/// bounded by `limit`. An empty body decodes to an empty body for every coding.
///
/// # Errors
///
/// [`CompressError::TooLarge`] when the output would exceed `limit`;
/// [`CompressError::Corrupt`] for malformed, truncated or trailing-garbage input (and
/// zstd windows over 8 MiB); [`CompressError::Io`] if decoder state cannot be set up.
pub fn decode(coding: Coding, body: &[u8], limit: usize) -> Result<Vec<u8>, CompressError> {
    if body.is_empty() {
        return Ok(Vec::new());
    }
    match coding {
        Coding::Identity => {
            if body.len() > limit {
                Err(CompressError::TooLarge { coding, limit })
            } else {
                Ok(body.to_vec())
            }
        }
        Coding::Gzip => read_bounded(flate2::bufread::MultiGzDecoder::new(body), coding, limit),
        Coding::Br => read_bounded(BrotliSliceReader::new(body), coding, limit),
        Coding::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(body)?;
            decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            read_bounded(decoder, coding, limit)
        }
        Coding::Dcz => Err(CompressError::NoDictionary { coding }),
    }
}

/// A strict RFC 7932 brotli decoder over an in-memory body, as a [`Read`].
///
/// `brotli::Decompressor` is not used because it enables the non-standard
/// large-window extension (windows up to 1 GiB, allocated before any output exists)
/// and only notices bytes after the end of the stream on a second read past EOF.
/// Here the standard 16 MiB window cap applies, and trailing bytes are an error.
struct BrotliSliceReader<'a> {
    input: &'a [u8],
    offset: usize,
    state: brotli::BrotliState<StandardAlloc, StandardAlloc, StandardAlloc>,
    done: bool,
}

impl<'a> BrotliSliceReader<'a> {
    fn new(input: &'a [u8]) -> Self {
        BrotliSliceReader {
            input,
            offset: 0,
            state: brotli::BrotliState::new_strict(
                StandardAlloc::default(),
                StandardAlloc::default(),
                StandardAlloc::default(),
            ),
            done: false,
        }
    }
}

impl Read for BrotliSliceReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        let mut available_in = self.input.len().saturating_sub(self.offset);
        let mut available_out = buf.len();
        let mut output_offset = 0;
        let mut total_out = 0;
        let result = brotli::BrotliDecompressStream(
            &mut available_in,
            &mut self.offset,
            self.input,
            &mut available_out,
            &mut output_offset,
            buf,
            &mut total_out,
            &mut self.state,
        );
        match result {
            BrotliResult::ResultSuccess => {
                self.done = true;
                if available_in != 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{available_in} bytes after the end of the brotli stream"),
                    ));
                }
                Ok(output_offset)
            }
            // The output buffer is full; the caller reads again. Zero progress with a
            // non-empty buffer would loop forever, so treat it as a decoder fault.
            BrotliResult::NeedsMoreOutput if output_offset > 0 => Ok(output_offset),
            BrotliResult::NeedsMoreOutput => {
                Err(io::Error::other("brotli decoder made no progress"))
            }
            // All input is consumed but the stream has not ended: hand out what was
            // produced; the next call reports the truncation.
            BrotliResult::NeedsMoreInput if output_offset > 0 => Ok(output_offset),
            BrotliResult::NeedsMoreInput => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "truncated brotli stream",
            )),
            BrotliResult::ResultFailure => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("invalid brotli stream ({:?})", self.state.error_code),
            )),
        }
    }
}

/// Reads `reader` to its end into a vector of at most `limit` bytes. Capacity grows
/// geometrically but never past `limit + 1`, the one extra byte being how an
/// over-long stream is detected.
fn read_bounded<R: Read>(
    mut reader: R,
    coding: Coding,
    limit: usize,
) -> Result<Vec<u8>, CompressError> {
    let cap = limit.saturating_add(1);
    let mut out: Vec<u8> = Vec::with_capacity(DECODE_INITIAL_CAPACITY.min(cap));
    loop {
        let len = out.len();
        if len >= cap {
            return Err(CompressError::TooLarge { coding, limit });
        }
        if len == out.capacity() {
            let target = len.saturating_mul(2).max(DECODE_INITIAL_CAPACITY).min(cap);
            out.reserve_exact(target - len);
        }
        // Read into the spare capacity (zero-filled; this is the fill path, not the
        // hit path), never past the bound.
        let end = out.capacity().min(cap);
        out.resize(end, 0);
        match reader.read(&mut out[len..end]) {
            Ok(0) => {
                out.truncate(len);
                return Ok(out);
            }
            Ok(n) => out.truncate(len + n.min(end - len)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => out.truncate(len),
            Err(e) => {
                return Err(CompressError::Corrupt {
                    coding,
                    detail: e.to_string(),
                })
            }
        }
    }
}

/// `type/subtype` pairs [`compressible`] accepts besides `text/*`, `+json` and `+xml`.
const COMPRESSIBLE_TYPES: &[(&str, &str)] = &[
    ("application", "json"),
    ("application", "javascript"),
    ("application", "x-javascript"),
    ("application", "ecmascript"),
    ("application", "xml"),
    ("application", "wasm"),
    ("application", "vnd.ms-fontobject"),
    ("image", "x-icon"),
    ("image", "vnd.microsoft.icon"),
    ("font", "ttf"),
    ("font", "otf"),
];

/// Whether a response with this Content-Type is worth compressing: `text/*`,
/// `application/json` and any `+json`, `application/javascript` (and the legacy
/// `application/x-javascript`), `application/ecmascript`, `application/xml` and any
/// `+xml` (which covers `application/xhtml+xml`, `application/rss+xml`,
/// `application/atom+xml` and `image/svg+xml`), `application/wasm`,
/// `application/manifest+json`, `image/x-icon`, `image/vnd.microsoft.icon`, `font/ttf`,
/// `font/otf`, `application/vnd.ms-fontobject`.
///
/// Parameters (`; charset=utf-8`) are ignored; matching is case-insensitive and
/// tolerant of surrounding whitespace. No Content-Type, or a malformed one, is
/// `false`; so is everything already compressed (images, video, audio, zip, gzip,
/// woff/woff2, pdf) since it is not on the list.
pub fn compressible(content_type: Option<&HeaderValue>) -> bool {
    let Some(value) = content_type else {
        return false;
    };
    let raw = value.as_bytes();
    let essence = raw.split(|&b| b == b';').next().unwrap_or(raw);
    let essence = trim_ows(essence);
    let Some(slash) = essence.iter().position(|&b| b == b'/') else {
        return false;
    };
    let (kind, subtype) = (&essence[..slash], &essence[slash + 1..]);
    if !is_token(kind) || !is_token(subtype) {
        return false;
    }
    let eq = |a: &[u8], b: &str| a.eq_ignore_ascii_case(b.as_bytes());
    let ends_with =
        |a: &[u8], suffix: &str| a.len() > suffix.len() && eq(&a[a.len() - suffix.len()..], suffix);

    if eq(kind, "text") {
        return true;
    }
    if ends_with(subtype, "+json") || ends_with(subtype, "+xml") {
        return true;
    }
    COMPRESSIBLE_TYPES
        .iter()
        .any(|(k, s)| eq(kind, k) && eq(subtype, s))
}

/// Strips optional whitespace (SP / HTAB) from both ends.
fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Whether `s` is a non-empty RFC 9110 token.
fn is_token(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether an encoded variant is worth keeping: it must save at least 5 % and at least
/// 64 bytes against identity. A variant that is not smaller is never kept.
pub fn worth_keeping(identity_len: usize, encoded_len: usize) -> bool {
    let Some(saved) = identity_len.checked_sub(encoded_len) else {
        return false;
    };
    saved >= MIN_SAVING_BYTES && (saved as u128) * MIN_SAVING_DIVISOR >= identity_len as u128
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const CODINGS: [Coding; 4] = [Coding::Identity, Coding::Gzip, Coding::Br, Coding::Zstd];
    const COMPRESSED: [Coding; 3] = [Coding::Gzip, Coding::Br, Coding::Zstd];

    fn xorshift_bytes(len: usize, mut state: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            out.extend_from_slice(&state.to_le_bytes());
        }
        out.truncate(len);
        out
    }

    fn repetitive_text(len: usize) -> Vec<u8> {
        let line = b"<li class=\"item\">The quick brown fox jumps over the lazy dog.</li>\n";
        line.iter().copied().cycle().take(len).collect()
    }

    fn bodies() -> Vec<Vec<u8>> {
        vec![
            Vec::new(),
            vec![b'x'],
            repetitive_text(100 * 1024),
            xorshift_bytes(64 * 1024, 0x9E37_79B9_7F4A_7C15),
        ]
    }

    #[test]
    fn round_trip_every_coding() {
        let levels = Levels::default();
        for coding in CODINGS {
            for body in bodies() {
                let encoded = encode(coding, &body, &levels).expect("encode");
                let decoded = decode(coding, &encoded, body.len()).expect("decode");
                assert_eq!(decoded, body, "{coding} len {}", body.len());
            }
        }
    }

    #[test]
    fn round_trip_at_extreme_levels() {
        let body = repetitive_text(20_000);
        for levels in [
            Levels {
                gzip: 1,
                brotli: 0,
                zstd: 1,
            },
            Levels {
                gzip: 12,
                brotli: 11,
                zstd: 22,
            },
        ] {
            for coding in COMPRESSED {
                let encoded = encode(coding, &body, &levels).expect("encode");
                assert!(encoded.len() < body.len() / 4, "{coding} {levels:?}");
                assert_eq!(decode(coding, &encoded, body.len()).expect("decode"), body);
            }
        }
    }

    #[test]
    fn repetitive_text_shrinks() {
        let body = repetitive_text(100 * 1024);
        for coding in COMPRESSED {
            let encoded = encode(coding, &body, &Levels::default()).expect("encode");
            assert!(worth_keeping(body.len(), encoded.len()), "{coding}");
        }
    }

    #[test]
    fn identity_encode_is_a_copy() {
        let body = xorshift_bytes(1000, 7);
        assert_eq!(
            encode(Coding::Identity, &body, &Levels::default()).expect("encode"),
            body
        );
    }

    #[test]
    fn gzip_is_standard_gzip() {
        let body = repetitive_text(5000);
        let encoded = encode(Coding::Gzip, &body, &Levels::default()).expect("encode");
        assert_eq!(&encoded[..2], &[0x1f, 0x8b]);
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&encoded[..])
            .read_to_end(&mut plain)
            .expect("flate2 reads libdeflate gzip");
        assert_eq!(plain, body);
    }

    #[test]
    fn concatenated_gzip_members_and_zstd_frames_decode() {
        let levels = Levels::default();
        for coding in [Coding::Gzip, Coding::Zstd] {
            let mut joined = encode(coding, b"hello, ", &levels).expect("encode");
            joined.extend(encode(coding, b"world", &levels).expect("encode"));
            assert_eq!(
                decode(coding, &joined, 100).expect("decode"),
                b"hello, world",
                "{coding}"
            );
        }
    }

    #[test]
    fn empty_input_decodes_to_empty() {
        for coding in CODINGS {
            assert_eq!(decode(coding, b"", 0).expect("decode"), Vec::<u8>::new());
        }
    }

    #[test]
    fn truncated_input_is_an_error() {
        let levels = Levels::default();
        for coding in COMPRESSED {
            for body in [repetitive_text(100 * 1024), xorshift_bytes(64 * 1024, 3)] {
                let encoded = encode(coding, &body, &levels).expect("encode");
                for cut in [1, 2, encoded.len() / 2, encoded.len() - 1] {
                    let result = decode(coding, &encoded[..cut], body.len());
                    assert!(
                        matches!(result, Err(CompressError::Corrupt { .. })),
                        "{coding} cut at {cut} of {}: {result:?}",
                        encoded.len()
                    );
                }
            }
        }
    }

    #[test]
    fn garbage_input_is_an_error() {
        let garbage = xorshift_bytes(4096, 11);
        for coding in COMPRESSED {
            let result = decode(coding, &garbage, 1 << 20);
            assert!(
                matches!(result, Err(CompressError::Corrupt { .. })),
                "{coding}: {result:?}"
            );
        }
    }

    #[test]
    fn corrupted_input_never_panics() {
        let levels = Levels::default();
        let body = repetitive_text(10_000);
        for coding in COMPRESSED {
            let encoded = encode(coding, &body, &levels).expect("encode");
            let mut state = 0x1234_5678_9abc_def0_u64;
            for i in 0..200 {
                let mut bad = encoded.clone();
                let noise = xorshift_bytes(8, state.wrapping_add(i));
                state = u64::from_le_bytes(noise[..8].try_into().expect("8 bytes"));
                let pos = (state as usize) % bad.len();
                bad[pos] ^= noise[0] | 1;
                // Either outcome is fine; what matters is no panic and no overrun.
                if let Ok(out) = decode(coding, &bad, body.len()) {
                    assert!(out.len() <= body.len());
                }
            }
        }
    }

    #[test]
    fn trailing_garbage_is_an_error() {
        let levels = Levels::default();
        for coding in COMPRESSED {
            let mut encoded = encode(coding, &repetitive_text(1000), &levels).expect("encode");
            encoded.extend_from_slice(b"\x00garbage after the end of the stream");
            let result = decode(coding, &encoded, 1 << 20);
            assert!(result.is_err(), "{coding}: {result:?}");
        }
    }

    #[test]
    fn gzip_bomb_is_too_large() {
        let zeros = vec![0u8; 10 * 1024 * 1024];
        let bomb = encode(Coding::Gzip, &zeros, &Levels::default()).expect("encode");
        assert!(bomb.len() < 100 * 1024);
        let result = decode(Coding::Gzip, &bomb, 1024 * 1024);
        assert!(
            matches!(
                result,
                Err(CompressError::TooLarge {
                    coding: Coding::Gzip,
                    limit: 1_048_576
                })
            ),
            "{result:?}"
        );
    }

    #[test]
    fn bombs_are_too_large_for_every_coding() {
        let zeros = vec![0u8; 4 * 1024 * 1024];
        for coding in CODINGS {
            let encoded = encode(coding, &zeros, &Levels::default()).expect("encode");
            let result = decode(coding, &encoded, 100_000);
            assert!(
                matches!(result, Err(CompressError::TooLarge { limit: 100_000, .. })),
                "{coding}: {result:?}"
            );
        }
    }

    #[test]
    fn limit_exactly_output_length_succeeds() {
        for coding in CODINGS {
            for body in bodies().into_iter().filter(|b| !b.is_empty()) {
                let encoded = encode(coding, &body, &Levels::default()).expect("encode");
                assert_eq!(
                    decode(coding, &encoded, body.len()).expect("exact limit"),
                    body,
                    "{coding}"
                );
                let result = decode(coding, &encoded, body.len() - 1);
                assert!(
                    matches!(result, Err(CompressError::TooLarge { .. })),
                    "{coding} one under: {result:?}"
                );
            }
        }
    }

    #[test]
    fn zero_limit() {
        for coding in CODINGS {
            let encoded = encode(coding, b"", &Levels::default()).expect("encode");
            assert_eq!(decode(coding, &encoded, 0).expect("empty body"), b"");
            let encoded = encode(coding, b"a", &Levels::default()).expect("encode");
            assert!(matches!(
                decode(coding, &encoded, 0),
                Err(CompressError::TooLarge { limit: 0, .. })
            ));
        }
    }

    #[test]
    fn usize_max_limit_does_not_overflow() {
        let body = repetitive_text(3000);
        for coding in CODINGS {
            let encoded = encode(coding, &body, &Levels::default()).expect("encode");
            assert_eq!(decode(coding, &encoded, usize::MAX).expect("decode"), body);
        }
    }

    #[test]
    fn zstd_window_over_8_mib_is_refused() {
        // A long-distance-matching stream with a 2^27 window and unknown content size.
        let body = repetitive_text(1000);
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).expect("encoder");
        encoder.window_log(27).expect("window log");
        encoder.write_all(&body).expect("write");
        let encoded = encoder.finish().expect("finish");
        let result = decode(Coding::Zstd, &encoded, 1 << 20);
        assert!(
            matches!(
                result,
                Err(CompressError::Corrupt {
                    coding: Coding::Zstd,
                    ..
                })
            ),
            "{result:?}"
        );
    }

    #[test]
    fn zstd_streamed_without_content_size_decodes() {
        // What an origin streaming zstd at a high level sends: no content size, an
        // 8 MiB window — the largest RFC 9659 allows.
        let body = repetitive_text(50_000);
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 19).expect("encoder");
        encoder.window_log(23).expect("window log");
        encoder.write_all(&body).expect("write");
        let encoded = encoder.finish().expect("finish");
        assert_eq!(
            decode(Coding::Zstd, &encoded, body.len()).expect("decode"),
            body
        );
    }

    #[test]
    fn brotli_output_is_standard_and_large_window_is_refused() {
        let body = repetitive_text(50_000);
        let encoded = encode(Coding::Br, &body, &Levels::default()).expect("encode");
        let mut plain = Vec::new();
        brotli::Decompressor::new(&encoded[..], 4096)
            .read_to_end(&mut plain)
            .expect("brotli crate reads our output");
        assert_eq!(plain, body);

        let params = brotli::enc::BrotliEncoderParams {
            quality: 5,
            lgwin: 26,
            large_window: true,
            ..Default::default()
        };
        let mut large = Vec::new();
        brotli::BrotliCompress(&mut &body[..], &mut large, &params).expect("encode");
        let result = decode(Coding::Br, &large, body.len());
        assert!(
            matches!(
                result,
                Err(CompressError::Corrupt {
                    coding: Coding::Br,
                    ..
                })
            ),
            "{result:?}"
        );
    }

    #[test]
    fn levels_validation() {
        assert!(Levels::default().validate().is_ok());
        assert_eq!(
            Levels::default(),
            Levels {
                gzip: 9,
                brotli: 5,
                zstd: 19
            }
        );
        let base = Levels::default();
        let bad = [
            (Levels { gzip: 0, ..base }, Coding::Gzip, 0),
            (Levels { gzip: 13, ..base }, Coding::Gzip, 13),
            (Levels { gzip: -1, ..base }, Coding::Gzip, -1),
            (Levels { brotli: 12, ..base }, Coding::Br, 12),
            (Levels { zstd: 0, ..base }, Coding::Zstd, 0),
            (Levels { zstd: 23, ..base }, Coding::Zstd, 23),
            (Levels { zstd: -5, ..base }, Coding::Zstd, -5),
        ];
        for (levels, want_coding, want_level) in bad {
            match levels.validate() {
                Err(CompressError::Level { coding, level }) => {
                    assert_eq!((coding, level), (want_coding, want_level));
                }
                other => panic!("{levels:?}: {other:?}"),
            }
            // encode refuses the bad level for that coding only.
            assert!(matches!(
                encode(want_coding, b"body", &levels),
                Err(CompressError::Level { .. })
            ));
            assert!(encode(Coding::Identity, b"body", &levels).is_ok());
        }
        for ok in [
            Levels {
                gzip: 1,
                brotli: 0,
                zstd: 1,
            },
            Levels {
                gzip: 12,
                brotli: 11,
                zstd: 22,
            },
        ] {
            assert!(ok.validate().is_ok(), "{ok:?}");
        }
        let msg = Levels { gzip: 13, ..base }
            .validate()
            .expect_err("invalid")
            .to_string();
        assert_eq!(msg, "gzip level 13 is out of range (valid: 1..=12)");
    }

    #[test]
    fn compressible_table() {
        let table: &[(&str, bool)] = &[
            ("text/html", true),
            ("Text/HTML; charset=UTF-8", true),
            ("  text/css ;charset=utf-8", true),
            ("\ttext/plain\t", true),
            ("text/javascript", true),
            ("application/json", true),
            ("APPLICATION/JSON;charset=utf-8", true),
            ("application/ld+json", true),
            ("application/problem+json", true),
            ("application/manifest+json", true),
            ("application/javascript", true),
            ("application/x-javascript", true),
            ("application/ecmascript", true),
            ("application/xml", true),
            ("application/xhtml+xml", true),
            ("application/rss+xml", true),
            ("application/atom+xml", true),
            ("application/wasm", true),
            ("image/svg+xml", true),
            ("image/x-icon", true),
            ("image/vnd.microsoft.icon", true),
            ("font/ttf", true),
            ("font/otf", true),
            ("application/vnd.ms-fontobject", true),
            ("image/png", false),
            ("image/jpeg", false),
            ("image/webp", false),
            ("video/mp4", false),
            ("audio/mpeg", false),
            ("application/zip", false),
            ("application/gzip", false),
            ("application/epub+zip", false),
            ("font/woff", false),
            ("font/woff2", false),
            ("application/pdf", false),
            ("application/octet-stream", false),
            ("", false),
            ("text", false),
            ("text/", false),
            ("/html", false),
            ("+json", false),
            ("application/+json", false),
            ("text /html", false),
            ("application/json+", false),
        ];
        for &(ct, want) in table {
            let value = HeaderValue::from_str(ct).expect("valid header value");
            assert_eq!(compressible(Some(&value)), want, "{ct:?}");
        }
        assert!(!compressible(None));
        let non_utf8 = HeaderValue::from_bytes(b"text/\xffhtml").expect("opaque bytes");
        assert!(!compressible(Some(&non_utf8)));
    }

    #[test]
    fn worth_keeping_edges() {
        assert!(!worth_keeping(0, 0));
        assert!(!worth_keeping(100, 100));
        assert!(!worth_keeping(100, 200));
        // 64 of 1000 bytes saved is 6.4 %: both rules met.
        assert!(worth_keeping(1000, 936));
        assert!(!worth_keeping(1000, 937)); // 63 bytes saved
                                            // 5 % exactly is enough; one byte short is not.
        assert!(worth_keeping(2000, 1900));
        assert!(!worth_keeping(2000, 1901));
        // Big relative saving, too few bytes.
        assert!(!worth_keeping(100, 37));
        assert!(worth_keeping(100, 36));
        // Large sizes do not overflow.
        assert!(worth_keeping(usize::MAX, usize::MAX / 20 * 19));
        assert!(!worth_keeping(usize::MAX, usize::MAX - 64));
        assert!(worth_keeping(usize::MAX, 0));
    }

    #[test]
    fn min_compress_bytes_value() {
        assert_eq!(MIN_COMPRESS_BYTES, 256);
    }

    /// A `dcz` body names its dictionary, decodes with it to the input, is far
    /// smaller than zstd alone when the dictionary holds the page's chrome, and is
    /// refused against any other dictionary.
    #[test]
    fn dcz_round_trips_against_its_dictionary_only() {
        let chrome = "<html><head><title>Notes</title><link rel=stylesheet href=/s.css></head><body><nav>home tags graph search</nav>".repeat(20);
        let dict = Dictionary::new(chrome.clone().into_bytes());
        let page = format!("{chrome}<main>A note of its own.</main></body></html>");
        let coded = encode_dcz(page.as_bytes(), &dict, 19).unwrap();
        assert_eq!(quire_http::dictionary::dcz_hash(&coded), Some(*dict.hash()));
        assert_eq!(decode_dcz(&coded, &dict, 1 << 20).unwrap(), page.as_bytes());
        let alone = zstd::bulk::compress(page.as_bytes(), 19).unwrap();
        assert!(
            coded.len() < alone.len(),
            "{} against {}",
            coded.len(),
            alone.len()
        );
        let other = Dictionary::new(b"something else".to_vec());
        assert!(decode_dcz(&coded, &other, 1 << 20).is_err());
        assert!(decode_dcz(&coded, &dict, 10).is_err(), "bounded");
        assert!(encode_dcz(b"x", &dict, 0).is_err(), "level checked");
        assert!(matches!(
            encode(Coding::Dcz, b"x", &Levels::default()),
            Err(CompressError::NoDictionary { .. })
        ));
    }
}
