//! Fuzz target: a note's front matter, the YAML anyone who writes a note controls.
//! The input is parsed twice: whole, as a front matter block (so the YAML loader is
//! reached without fences), and as a note file (fences, BOM, body and wikilinks).
//! Nothing may panic, memory stays within the loader's bounds (run with
//! `-rss_limit_mb`), and a note whose front matter was rejected is never public.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quire_vault::front::{self, FrontError, Limit, BYTES_MAX};
use quire_vault::{Note, Visibility};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match front::parse(&text) {
        Err(FrontError::Limit(Limit::Bytes)) => assert!(text.len() > BYTES_MAX),
        Ok(_) | Err(_) => assert!(text.len() <= BYTES_MAX),
    }
    let note = Note::parse("fuzz.md", data);
    if note.front_error.is_some() {
        assert_ne!(note.visibility(), Visibility::Public);
    }
});
