//! The HTTP/1.1 framing guard and the stored-record decoder on hostile bytes.
//!
//! - `guard::Scanner`: never panics, and its verdict (refuse or not, and where) does
//!   not depend on how the bytes were split into reads.
//! - `object::decode` / `object::identity`: never panic on any buffer, and a record
//!   that decodes re-encodes to a buffer that decodes to the same record.
//! - `client::Client::resolve` on a hostile `X-Forwarded-For`: never panics, and when
//!   it names a client (it may refuse: a trusted peer's header that names nobody), the
//!   chain it forwards always ends with the client it resolved; `Cidr` parsing never
//!   panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quire_server::client::{Cidr, Client, TrustedProxies};
use quire_server::guard::Scanner;
use quire_server::object;

const LIMIT: usize = 4096;

/// Whether the stream is refused, and why. (Offsets are reported relative to the read
/// that completed the refused head, so they differ by splitting; the verdict must not.)
fn verdict(input: &[u8], split: usize) -> Option<&'static str> {
    let mut s = Scanner::new(LIMIT);
    input
        .chunks(split.max(1))
        .find_map(|chunk| s.feed(chunk).err().map(|(_, why)| why))
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, input)) = data.split_first() else {
        return;
    };
    let whole = verdict(input, input.len());
    let pieces = verdict(input, usize::from(split % 31) + 1);
    assert_eq!(whole, pieces, "the verdict depends on read boundaries");

    let _ = object::identity(input);
    if let Some(object::Record::Object(rec)) = object::decode(input) {
        let again = object::encode_object(&rec).expect("a decoded record encodes");
        match object::decode(&again) {
            Some(object::Record::Object(r2)) => assert_eq!(*r2, *rec),
            other => panic!("re-encoded record decodes to {other:?}"),
        }
    }

    if let Ok(text) = std::str::from_utf8(input) {
        let _ = text.parse::<Cidr>();
    }
    if let Ok(v) = http::HeaderValue::from_bytes(input) {
        let mut h = http::HeaderMap::new();
        h.insert("x-forwarded-for", v);
        let trusted = TrustedProxies::parse(&["127.0.0.0/8", "10.0.0.0/8", "::1"]).unwrap();
        for peer in ["127.0.0.1:1", "192.0.2.1:1", "[::1]:1"] {
            // `Err`: a trusted peer's header names nobody and the request is refused.
            let Ok(c) = Client::resolve(peer.parse().unwrap(), &h, &trusted) else {
                continue;
            };
            let last = c.forwarded_for.rsplit(',').next().unwrap_or("").trim();
            let last = last.parse::<std::net::IpAddr>().map(|ip| ip.to_canonical());
            assert_eq!(last, Ok(c.ip), "{:?} does not end with {}", c.forwarded_for, c.ip);
        }
    }
});
