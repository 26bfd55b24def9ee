//! Fuzz target: every parser in `quire-http` that reads bytes from outside — request
//! and response header fields, URLs, and the stored-metadata codec — fed the same
//! hostile input. None may panic; the metadata codec must also round-trip whatever it
//! accepts.
#![no_main]

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};
use libfuzzer_sys::fuzz_target;
use quire_http::{bypass, cache_control, conditional, encoding, freshness, key, meta};
use std::time::{Duration, SystemTime};

/// Splits the input into header lines on `\n`; each becomes the value of every field
/// the parsers read (values that are not valid header bytes are skipped).
fn headers(data: &[u8]) -> HeaderMap {
    let names = [
        "cache-control",
        "cdn-cache-control",
        "expires",
        "date",
        "age",
        "last-modified",
        "etag",
        "vary",
        "accept-encoding",
        "cookie",
        "authorization",
        "if-none-match",
        "if-modified-since",
        "if-range",
        "range",
        "set-cookie",
        "connection",
        "content-type",
        "location",
        "content-location",
    ];
    let mut map = HeaderMap::new();
    for (i, line) in data.split(|&b| b == b'\n').enumerate().take(64) {
        if let Ok(v) = HeaderValue::from_bytes(line) {
            let name = HeaderName::from_static(names[i % names.len()]);
            map.append(name, v);
        }
    }
    map
}

fuzz_target!(|data: &[u8]| {
    let _ = meta::decode(data).map(|m| {
        let again = meta::encode(&m).expect("a decoded record encodes");
        assert_eq!(meta::decode(&again).expect("and decodes again"), m);
    });
    let cc = cache_control::CacheControl::parse_lines(data.split(|&b| b == b'\n'));
    let h = headers(data);
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let cfg = freshness::StorageConfig::default();
    let _ = freshness::storable(&Method::GET, &h, StatusCode::OK, &h, &cfg);
    let timing = freshness::StoredTiming::new(StatusCode::OK, &h, &cc, now, now, &cfg.heuristic);
    let _ = freshness::reuse(&timing, &cc, &freshness::ReuseConfig::default(), now);
    let _ = freshness::current_age(&h, now, now, now + Duration::from_secs(5));
    let _ = freshness::merge_304(&h, &h);
    let _ = encoding::parse_accept_encoding(&h);
    let _ = bypass::bypass(&Method::GET, &h, &bypass::BypassConfig::default());
    let _ = conditional::evaluate_preconditions(&Method::GET, &h, Some("\"x\""), Some(now));
    let _ = conditional::evaluate_range(
        &h,
        &Method::GET,
        1 << 20,
        Some("\"x\""),
        Some(now),
        Some(now),
    );
    let _ = key::vary_fields(&h);
    if let Ok(text) = std::str::from_utf8(data) {
        let kc = key::KeyConfig::default();
        let _ = key::normalize_absolute(text, &kc);
        if let Ok(uri) = text.parse::<Uri>() {
            let _ = key::normalize("http", h.get("location"), &uri, &kc);
        }
    }
});
