//! The HTTP/1.1 framing guard and the stored-record decoder on hostile bytes.
//!
//! - `guard::Scanner`: never panics, and its verdict (refuse or not, and where) does
//!   not depend on how the bytes were split into reads.
//! - `object::decode` / `object::identity`: never panic on any buffer, and a record
//!   that decodes re-encodes to a buffer that decodes to the same record.
#![no_main]

use libfuzzer_sys::fuzz_target;
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
});
