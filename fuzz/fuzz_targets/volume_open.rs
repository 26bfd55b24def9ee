//! Fuzz target: open damaged volume files.
//!
//! A small valid volume (3 regions of 64 KiB; overwritten, removed and tagged entries)
//! is built once per process. Each input then makes a file, by its first byte's mode:
//!
//! - 0: the input is the whole file (not a volume, short files, a bare magic, ...);
//! - 1: the volume with the input written over its regions at an offset the input
//!   picks (bit 2 of the mode byte also clears the clean marker);
//! - 2: the volume with the header's unchecksummed tail (clean marker, next-generation
//!   hint) taken from the input and the rest written over the start of region 0;
//! - 3: the volume with a list of short patches anywhere in the file, header included.
//!
//! The store must then open it (or refuse it with `BadVolume`, leaving the file as it
//! was), serve every key it has byte-exact (bodies and metas are a function of key and
//! version, which the body carries) with `pread` at `body_extent()` equal to `body()`,
//! take writes, removes and `remove_tagged`, close, and reopen. Never panic.

#![no_main]

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use quire_store::format::{VOLUME_CLEAN_AT, VOLUME_HEADER_BYTES};
use quire_store::testkit::{self, meta_of};
use quire_store::{Engine, EntryRef, Handle, Options, Put, Store, StoreError};

const REGION: u64 = 64 << 10;
const CAP: u64 = VOLUME_HEADER_BYTES + 3 * REGION;
const KEYS: u64 = 24;
/// Where the regions start in the file.
const REGIONS_AT: usize = VOLUME_HEADER_BYTES as usize;

fn options() -> Options {
    Options {
        region_bytes: Some(REGION),
        admission: false,
        ..Options::default()
    }
}

/// Bodies of 24 B to ~3 KB.
fn body_of(k: u64, v: u64) -> Vec<u8> {
    testkit::body(k, v, |r| 24 + (r % 3000) as usize)
}

fn key_bytes(k: u64) -> Vec<u8> {
    format!("fuzz/{k}").into_bytes()
}

fn tag_of(k: u64) -> Vec<u8> {
    format!("g{}", k % 3).into_bytes()
}

fn put(store: &Store, k: u64, v: u64) -> Put {
    store
        .put(&key_bytes(k), &meta_of(k, v), &body_of(k, v), &[&tag_of(k)])
        .expect("put of a small object never errors")
}

/// A hit must be exactly a value once written for its key; returns its version.
fn check(h: &Handle, k: u64) -> u64 {
    let v = testkit::version_if_exact(h, k, body_of)
        .unwrap_or_else(|| panic!("key {k}: the hit is not a value ever written for it"));
    let b = h.body();
    let ext = h.body_extent().expect("the store hands out extents");
    let file = std::fs::File::from(ext.fd.try_clone_to_owned().unwrap());
    let mut buf = vec![0u8; ext.len as usize];
    file.read_exact_at(&mut buf, ext.offset).unwrap();
    assert!(buf == b, "key {k}: pread at the extent differs from body()");
    v
}

fn check_all(store: &Store) {
    for k in 0..KEYS {
        if let Some(h) = store.get(&key_bytes(k)) {
            check(&h, k);
        }
    }
}

struct Fixture {
    dir: PathBuf,
    template: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("quire-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("template");
        let _ = std::fs::remove_file(&path);
        let store = Store::open(&path, CAP, options()).unwrap();
        let mut v = 0;
        for round in 0..3 {
            for k in 0..KEYS {
                v += 1;
                if (k + round) % 7 == 0 {
                    store.remove(&key_bytes(k)).unwrap();
                } else {
                    put(&store, k, v);
                }
            }
        }
        store.close().unwrap();
        let template = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        Fixture { dir, template }
    })
}

fn patch(file: &mut [u8], at: usize, bytes: &[u8]) {
    if at >= file.len() {
        return;
    }
    let n = bytes.len().min(file.len() - at);
    file[at..at + n].copy_from_slice(&bytes[..n]);
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    for (i, x) in w.iter_mut().enumerate() {
        *x = b.get(at + i).copied().unwrap_or(0);
    }
    u32::from_le_bytes(w)
}

/// The file an input describes (see the module doc).
fn make_file(template: &[u8], data: &[u8]) -> Vec<u8> {
    let Some((&mode, rest)) = data.split_first() else {
        return Vec::new();
    };
    let regions = template.len() - REGIONS_AT;
    let mut file = template.to_vec();
    match mode % 4 {
        0 => file = rest.to_vec(),
        1 => {
            let at = REGIONS_AT + u32_at(rest, 0) as usize % regions;
            patch(&mut file, at, rest.get(4..).unwrap_or(&[]));
            if mode & 4 != 0 {
                file[VOLUME_CLEAN_AT..VOLUME_CLEAN_AT + 8].fill(0);
            }
        }
        2 => {
            let tail = rest.get(..16).unwrap_or(rest);
            patch(&mut file, VOLUME_CLEAN_AT, tail);
            patch(&mut file, REGIONS_AT, rest.get(16..).unwrap_or(&[]));
        }
        _ => {
            let mut r = rest;
            while r.len() >= 5 {
                let at = u32_at(r, 0) as usize % file.len();
                let n = (r[4] as usize % 64).min(r.len() - 5);
                patch(&mut file, at, &r[5..5 + n]);
                r = &r[5 + n..];
            }
        }
    }
    file
}

fn exercise(path: &Path, file: &[u8]) {
    let (store, report) = match Store::open_with_report(path, CAP, options()) {
        Ok(opened) => opened,
        Err(StoreError::BadVolume { .. }) => {
            let now = std::fs::read(path).unwrap();
            assert!(now == file, "a refused file was changed");
            return;
        }
        Err(e) => panic!("open failed: {e}"),
    };
    assert_eq!(std::fs::metadata(path).unwrap().len(), CAP);
    if report.cold_start.is_some() {
        assert_eq!(report.entries, 0, "{report:?}");
    }
    check_all(&store);
    // Writes on top of whatever was recovered.
    let mut fresh = Vec::new();
    for k in 0..KEYS {
        if k % 3 == 0 {
            if put(&store, k, 1_000_000 + k) == Put::Stored {
                fresh.push(k);
            }
        } else if k % 5 == 0 {
            store.remove(&key_bytes(k)).unwrap();
            assert!(
                store.get(&key_bytes(k)).is_none(),
                "key {k} survived remove"
            );
        }
    }
    for &k in &fresh {
        if let Some(h) = store.get(&key_bytes(k)) {
            assert_eq!(
                check(&h, k),
                1_000_000 + k,
                "key {k}: not the value just put"
            );
        }
    }
    store.remove_tagged(b"g2").unwrap();
    for k in (0..KEYS).filter(|k| k % 3 == 2) {
        assert!(
            store.get(&key_bytes(k)).is_none(),
            "key {k} survived remove_tagged"
        );
    }
    check_all(&store);
    store.close().unwrap();
    let store = Store::open(path, CAP, options()).expect("reopening what we closed");
    check_all(&store);
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let file = make_file(&f.template, data);
    let path = f.dir.join("vol");
    std::fs::write(&path, &file).unwrap();
    exercise(&path, &file);
});
