//! Tests of `meta`.

use super::*;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, SET_COOKIE};
use proptest::prelude::*;

fn sample() -> StoredMeta {
    StoredMeta {
        status: 200,
        headers: vec![
            (CONTENT_TYPE, HeaderValue::from_static("text/html")),
            (SET_COOKIE, HeaderValue::from_static("a=1")),
            (CACHE_CONTROL, HeaderValue::from_static("max-age=60")),
            (SET_COOKIE, HeaderValue::from_static("b=2")),
        ],
        request_time_ms: 1_700_000_000_000,
        response_time_ms: 1_700_000_000_120,
        date_ms: 1_699_999_999_000,
        age_at_store_ms: 1_120,
        freshness_lifetime_ms: Some(60_000),
        stale_while_revalidate_ms: Some(30_000),
        stale_if_error_ms: None,
        flags: MetaFlags {
            has_validator: true,
            forbids_stale: true,
            ..MetaFlags::default()
        },
        etag: Some("W/\"abc\"".into()),
        last_modified_secs: Some(1_600_000_000),
        content_encoding: Some("br".into()),
        body_len: 51_234,
        variant_key_hash: 0xdead_beef_cafe_f00d,
        vary: vec![HeaderName::from_static("accept-language")],
        tags: vec!["note:42".into(), "tag:rust".into()],
    }
}

/// Rewrites a record's checksum after a test tampers with its payload, so the
/// field checks (not the checksum) must catch the damage.
fn reseal(buf: &mut [u8]) {
    let n = buf.len() - CHECKSUM_LEN;
    let sum = xxh3_64(&buf[..n]);
    buf[n..].copy_from_slice(&sum.to_le_bytes());
}

#[test]
fn round_trip_keeps_every_field_and_header_order() {
    let m = sample();
    let buf = encode(&m).unwrap();
    assert_eq!(&buf[..4], b"QMTA");
    let back = decode(&buf).unwrap();
    assert_eq!(back, m);
    let names: Vec<&str> = back.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["content-type", "set-cookie", "cache-control", "set-cookie"]
    );
    assert_eq!(back.headers[3].1, "b=2");
}

#[test]
fn round_trip_of_minimal_record() {
    let m = StoredMeta {
        status: 404,
        headers: vec![],
        request_time_ms: -5,
        response_time_ms: i64::MIN,
        date_ms: i64::MAX,
        age_at_store_ms: 0,
        freshness_lifetime_ms: Some(0),
        stale_while_revalidate_ms: None,
        stale_if_error_ms: None,
        flags: MetaFlags::default(),
        etag: Some(String::new()),
        last_modified_secs: Some(0),
        content_encoding: None,
        body_len: 0,
        variant_key_hash: 0,
        vary: vec![],
        tags: vec![],
    };
    let buf = encode(&m).unwrap();
    assert_eq!(
        buf.len(),
        HEAD_LEN + FIXED_PAYLOAD_LEN + 2 + 6 + CHECKSUM_LEN
    );
    assert_eq!(decode(&buf).unwrap(), m);
}

#[test]
fn every_truncation_is_a_typed_error() {
    let buf = encode(&sample()).unwrap();
    for n in 0..buf.len() {
        let err = decode(&buf[..n]).unwrap_err();
        assert!(
            matches!(err, MetaError::Truncated { .. }),
            "prefix {n}: {err:?}"
        );
    }
}

#[test]
fn every_flipped_bit_is_detected() {
    let buf = encode(&sample()).unwrap();
    for i in 0..buf.len() {
        for bitpos in 0..8 {
            let mut b = buf.clone();
            b[i] ^= 1 << bitpos;
            assert!(decode(&b).is_err(), "byte {i} bit {bitpos}");
        }
    }
}

#[test]
fn bad_magic_and_wrong_version_are_named() {
    let mut buf = encode(&sample()).unwrap();
    buf[0] = b'X';
    assert_eq!(decode(&buf), Err(MetaError::BadMagic));
    let mut buf = encode(&sample()).unwrap();
    buf[4..6].copy_from_slice(&2u16.to_le_bytes());
    assert_eq!(
        decode(&buf),
        Err(MetaError::UnsupportedVersion {
            found: 2,
            expected: FORMAT_VERSION
        })
    );
}

#[test]
fn corrupt_payload_is_a_checksum_mismatch() {
    let mut buf = encode(&sample()).unwrap();
    buf[HEAD_LEN + 20] ^= 0xff;
    assert_eq!(decode(&buf), Err(MetaError::ChecksumMismatch));
}

#[test]
fn trailing_bytes_are_rejected() {
    let mut buf = encode(&sample()).unwrap();
    buf.push(0);
    assert_eq!(decode(&buf), Err(MetaError::TrailingBytes(1)));
}

#[test]
fn oversized_buffer_and_payload_length_are_rejected() {
    let big = vec![0u8; META_BYTES_MAX + 1];
    assert!(matches!(
        decode(&big),
        Err(MetaError::TooLarge {
            field: "record",
            ..
        })
    ));
    let mut buf = encode(&sample()).unwrap();
    buf[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        decode(&buf),
        Err(MetaError::TooLarge {
            field: "payload",
            ..
        })
    ));
}

/// Damage behind a valid checksum (a writer bug, or a checksum collision) is
/// still caught by the field checks.
#[test]
fn resealed_invalid_fields_are_typed_errors() {
    let base = encode(&sample()).unwrap();
    // status 42
    let mut b = base.clone();
    b[HEAD_LEN..HEAD_LEN + 2].copy_from_slice(&42u16.to_le_bytes());
    reseal(&mut b);
    assert_eq!(decode(&b), Err(MetaError::Invalid { field: "status" }));
    // unknown flag bit
    let mut b = base.clone();
    b[HEAD_LEN + 3] |= 0x80;
    reseal(&mut b);
    assert_eq!(decode(&b), Err(MetaError::Invalid { field: "flags" }));
    // non-canonical: value in an absent slot (stale_if_error is absent)
    let mut b = base.clone();
    let sie = HEAD_LEN + 4 + 3 * 8 + 3 * 8;
    b[sie] = 1;
    reseal(&mut b);
    assert!(matches!(decode(&b), Err(MetaError::Invalid { .. })));
    // an impossible header count
    let mut b = base.clone();
    let etag_at = HEAD_LEN + FIXED_PAYLOAD_LEN;
    let headers_at = etag_at + 2 + 7 + 2 + 2;
    assert_eq!(&b[headers_at..headers_at + 2], &4u16.to_le_bytes());
    b[headers_at..headers_at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
    reseal(&mut b);
    assert!(matches!(
        decode(&b),
        Err(MetaError::TooLarge {
            field: "headers",
            ..
        })
    ));
    // a header name with a space in it
    let mut b = base.clone();
    b[headers_at + 4] = b' ';
    reseal(&mut b);
    assert_eq!(
        decode(&b),
        Err(MetaError::Invalid {
            field: "header name"
        })
    );
    // an upper-case header name (not what encode writes)
    let mut b = base.clone();
    b[headers_at + 4] = b'C';
    reseal(&mut b);
    assert_eq!(
        decode(&b),
        Err(MetaError::Invalid {
            field: "header name"
        })
    );
    // a header value with a NUL in it
    let mut b = base.clone();
    let value_at = headers_at + 2 + 2 + "content-type".len() + 2;
    b[value_at] = 0;
    reseal(&mut b);
    assert_eq!(
        decode(&b),
        Err(MetaError::Invalid {
            field: "header value"
        })
    );
    // invalid UTF-8 in a tag (the last bytes before the checksum)
    let mut b = base;
    let last = b.len() - CHECKSUM_LEN - 1;
    b[last] = 0xff;
    reseal(&mut b);
    assert_eq!(decode(&b), Err(MetaError::Invalid { field: "tag" }));
}

#[test]
fn encode_refuses_what_decode_would_reject() {
    let mut m = sample();
    m.status = 1000;
    assert_eq!(encode(&m), Err(MetaError::Invalid { field: "status" }));
    let mut m = sample();
    m.etag = Some("x".repeat(ETAG_BYTES_MAX + 1));
    assert!(matches!(
        encode(&m),
        Err(MetaError::TooLarge { field: "etag", .. })
    ));
    let mut m = sample();
    m.tags = vec!["t".into(); TAGS_MAX + 1];
    assert!(matches!(
        encode(&m),
        Err(MetaError::TooLarge { field: "tags", .. })
    ));
    let mut m = sample();
    m.headers = vec![(CONTENT_TYPE, HeaderValue::from_static("x")); HEADERS_MAX + 1];
    assert!(matches!(
        encode(&m),
        Err(MetaError::TooLarge {
            field: "headers",
            ..
        })
    ));
    let long = HeaderValue::try_from("v".repeat(HEADER_VALUE_BYTES_MAX)).unwrap();
    let mut m = sample();
    m.headers = vec![(CONTENT_TYPE, long); 20];
    assert!(matches!(
        encode(&m),
        Err(MetaError::TooLarge {
            field: "record",
            ..
        })
    ));
}

#[test]
fn largest_allowed_record_round_trips() {
    let mut m = sample();
    let long = HeaderValue::try_from("v".repeat(HEADER_VALUE_BYTES_MAX)).unwrap();
    m.headers = vec![(CONTENT_TYPE, long); 15];
    m.tags = vec!["t".repeat(TAG_BYTES_MAX); 10];
    let buf = encode(&m).unwrap();
    assert!(buf.len() <= META_BYTES_MAX);
    assert_eq!(decode(&buf).unwrap(), m);
}

fn header_strategy() -> impl Strategy<Value = (HeaderName, HeaderValue)> {
    (
        "[a-z][a-z0-9-]{0,24}",
        proptest::collection::vec(prop_oneof![Just(b'\t'), 0x20u8..0x7f, 0x80u8..=0xff], 0..64),
    )
        .prop_map(|(n, v)| {
            (
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_bytes(&v).unwrap(),
            )
        })
}

fn meta_strategy() -> impl Strategy<Value = StoredMeta> {
    let times = (
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<u64>(),
        any::<Option<u64>>(),
        any::<Option<u64>>(),
        any::<Option<u64>>(),
        any::<Option<i64>>(),
    );
    let flags = any::<[bool; 5]>().prop_map(|f| MetaFlags {
        no_cache: f[0],
        forbids_stale: f[1],
        has_validator: f[2],
        heuristic: f[3],
        immutable: f[4],
    });
    let rest = (
        100u16..=999,
        proptest::collection::vec(header_strategy(), 0..12),
        proptest::option::of(".{0,40}"),
        proptest::option::of("[a-z0-9-]{0,12}"),
        any::<u64>(),
        any::<u64>(),
        proptest::collection::vec("[a-z][a-z0-9-]{0,16}", 0..4),
        proptest::collection::vec(".{0,24}", 0..6),
    );
    (times, flags, rest).prop_map(|(t, flags, r)| StoredMeta {
        status: r.0,
        headers: r.1,
        request_time_ms: t.0,
        response_time_ms: t.1,
        date_ms: t.2,
        age_at_store_ms: t.3,
        freshness_lifetime_ms: t.4,
        stale_while_revalidate_ms: t.5,
        stale_if_error_ms: t.6,
        flags,
        etag: r.2,
        last_modified_secs: t.7,
        content_encoding: r.3,
        body_len: r.4,
        variant_key_hash: r.5,
        vary: r
            .6
            .iter()
            .map(|n| HeaderName::from_bytes(n.as_bytes()).unwrap())
            .collect(),
        tags: r.7,
    })
}

proptest! {
    /// decode(encode(x)) == x for every valid x.
    #[test]
    fn encode_decode_round_trips(m in meta_strategy()) {
        let buf = encode(&m).unwrap();
        prop_assert_eq!(decode(&buf).unwrap(), m);
    }

    /// decode never panics on arbitrary bytes.
    #[test]
    fn decode_arbitrary_bytes_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&buf);
    }

    /// Arbitrary payloads behind a valid envelope and checksum exercise the field
    /// checks: never a panic, and a success re-encodes to the same bytes.
    #[test]
    fn sealed_arbitrary_payload_never_panics(payload in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut buf = Vec::new();
        buf.extend_from_slice(&MAGIC);
        buf.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        buf.extend_from_slice(&0u16.to_le_bytes());
        buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        buf.extend_from_slice(&payload);
        buf.extend_from_slice(&[0; 8]);
        reseal(&mut buf);
        if let Ok(m) = decode(&buf) {
            prop_assert_eq!(encode(&m).unwrap(), buf);
        }
    }

    /// Mutating one byte of a valid record is always detected.
    #[test]
    fn mutated_record_is_rejected(m in meta_strategy(), at in any::<prop::sample::Index>(), x in 1u8..=255) {
        let mut buf = encode(&m).unwrap();
        let i = at.index(buf.len());
        buf[i] ^= x;
        prop_assert!(decode(&buf).is_err());
    }
}

/// The record keeps exactly what `freshness::reuse` reads, to the millisecond.
#[test]
fn timing_round_trips_through_the_record() {
    use crate::freshness::{StoredTiming, TimingFlags};
    use std::time::{Duration, UNIX_EPOCH};
    let t = StoredTiming {
        request_time: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        response_time: UNIX_EPOCH + Duration::from_millis(1_700_000_000_456),
        date: UNIX_EPOCH - Duration::from_millis(5_000),
        age_at_store: Duration::from_millis(1_500),
        freshness_lifetime: Some(Duration::from_millis(60_250)),
        stale_while_revalidate: None,
        stale_if_error: Some(Duration::from_secs(300)),
        flags: TimingFlags {
            forbids_stale: true,
            heuristic: true,
            ..TimingFlags::default()
        },
    };
    let mut m = decode(&encode(&sample()).unwrap()).unwrap();
    m.set_timing(&t);
    let back = decode(&encode(&m).unwrap()).unwrap().timing();
    assert_eq!(back, t);
}
