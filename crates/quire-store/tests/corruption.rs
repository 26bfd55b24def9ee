//! Damaged volume files: the store must open them without panicking and never serve
//! wrong or stale bytes from an entry it could have checked.
//!
//! - Random byte flips across the regions of a populated, cleanly closed volume, with
//!   the clean marker cleared (`flipped_bytes_with_clean_marker_cleared`) and left in
//!   place (`flipped_bytes_with_clean_marker_kept`, opened once with `verify_reads` and
//!   once as quire opens it). Open verifies every entry's checksum in both cases (the
//!   marker only says whether the last close was orderly; see recovery.rs), so the
//!   guarantee is the same: every hit is byte-exact; a hit on an entry none of whose
//!   bytes were flipped is the key's current value (never an older or removed one); a
//!   hit on a damaged entry is possible only if just its `flags` word (outside the
//!   checksum by design) was flipped, and is then still a value once written for that
//!   key. After the checks the damaged store keeps taking writes, removes and
//!   `remove_tagged`, and is reopened again.
//! - Truncation to 0, 100, 5000 bytes, half and all but one byte: a cold start, no
//!   stale data.
//! - A wrong format version, a damaged volume header, another cap or region size: a cold
//!   start.
//! - A file of random bytes or text: `Err(StoreError::BadVolume)`, file left unchanged.
//! - The volume header's next-generation hint (not checksummed) set to huge values:
//!   open and later writes must not panic.
//! - A flipped bit in a `dead` flags word.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use quire_store::format::{self, FileEntry, CLEAN_MARKER, ENTRY_FLAGS_AT, VOLUME_HEADER_BYTES};
use quire_store::testkit::{self, meta_of, splitmix};
use quire_store::{Engine, EntryRef, Handle, Options, Put, Store, StoreError};

const CAP: u64 = (1 << 20) + VOLUME_HEADER_BYTES;
const REGION: u64 = 64 << 10;
const KEYS: u64 = 40;
const VOLUME_CLEAN_AT: u64 = format::VOLUME_CLEAN_AT as u64;
const VOLUME_NEXT_GEN_AT: u64 = format::VOLUME_NEXT_GEN_AT as u64;

fn options() -> Options {
    Options {
        region_bytes: Some(REGION),
        admission: false,
        ..Options::default()
    }
}

/// Bodies of 24 B to ~6 KB.
fn body_of(k: u64, v: u64) -> Vec<u8> {
    testkit::body(k, v, |r| 24 + (r % 6000) as usize)
}

fn version_if_exact(h: &Handle, k: u64) -> Option<u64> {
    testkit::version_if_exact(h, k, body_of)
}

fn key_bytes(k: u64) -> Vec<u8> {
    format!("corrupt/{k}").into_bytes()
}

/// What was written: each key's current version (None: removed or never written).
#[derive(Debug, Default, Clone)]
struct Model {
    current: HashMap<u64, Option<u64>>,
    next_version: u64,
}

impl Model {
    fn apply(&mut self, store: &Store, rng: &mut u64) {
        let r = splitmix(rng);
        let k = r % KEYS;
        if (r >> 32) % 100 < 85 {
            self.next_version += 1;
            let v = self.next_version;
            let put = store
                .put(&key_bytes(k), &meta_of(k, v), &body_of(k, v), &[b"all"])
                .unwrap();
            assert_eq!(put, Put::Stored);
            self.current.insert(k, Some(v));
        } else {
            store.remove(&key_bytes(k)).unwrap();
            self.current.insert(k, None);
        }
    }
}

/// A populated volume, cleanly closed: 400 puts and removes over 40 keys, enough to
/// wrap the 15 regions once, so there are overwritten (dead), removed and evicted
/// entries.
fn populate(path: &Path, seed: u64) -> Model {
    let store = open_ok(path, CAP, options());
    let mut model = Model::default();
    let mut rng = seed;
    for _ in 0..400 {
        model.apply(&store, &mut rng);
    }
    store.close().unwrap();
    model
}

/// The entries of a volume file (see `quire_store::format`).
fn parse_entries(file: &[u8]) -> Vec<FileEntry<'_>> {
    format::entries(file).expect("a volume this build reads")
}

/// Flips `n` random bytes (xor with a nonzero byte) inside the regions; returns their
/// offsets.
fn flip_bytes(path: &Path, n: usize, rng: &mut u64) -> HashSet<u64> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let header = VOLUME_HEADER_BYTES;
    let regions_end = header + (CAP - header) / REGION * REGION;
    let mut flipped = HashSet::new();
    while flipped.len() < n {
        let off = header + splitmix(rng) % (regions_end - header);
        if !flipped.insert(off) {
            continue;
        }
        let mut b = [0u8];
        file.read_exact_at(&mut b, off).unwrap();
        b[0] ^= 1 + (splitmix(rng) % 255) as u8;
        file.write_all_at(&b, off).unwrap();
    }
    flipped
}

fn write_at(path: &Path, off: u64, bytes: &[u8]) {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, off).unwrap();
}

/// How the hits on a damaged volume turned out.
#[derive(Debug, Default)]
struct Outcome {
    hits: usize,
    /// Hits served from entries with a flipped byte, and how many of those were not
    /// the bytes originally written.
    damaged_hits: usize,
    wrong_bytes: usize,
}

/// Gets every key and checks it against the entries as they were before the flips.
fn check_damaged(
    store: &Store,
    model: &Model,
    before: &[FileEntry],
    flipped: &HashSet<u64>,
    ctx: &str,
) -> Outcome {
    let flags_at = ENTRY_FLAGS_AT as u64;
    let by_body: HashMap<u64, &FileEntry> = before.iter().map(|e| (e.body_at, e)).collect();
    let damaged_in = |e: &FileEntry| -> Vec<u64> {
        let mut d: Vec<u64> = flipped
            .iter()
            .filter(|&&o| o >= e.at && o < e.at + e.stride)
            .map(|o| o - e.at)
            .collect();
        d.sort_unstable();
        d
    };
    let mut out = Outcome::default();
    for k in 0..KEYS {
        let Some(h) = store.get(&key_bytes(k)) else {
            continue;
        };
        out.hits += 1;
        let ext = h.body_extent().unwrap();
        let entry = by_body.get(&ext.offset).copied();
        let damage = entry.map(damaged_in);
        match (entry, damage) {
            (Some(e), Some(d)) if d.is_empty() => {
                // An undamaged entry: exactly as written, and the key's current value.
                assert_eq!(e.key, key_bytes(k), "{ctx}: key {k} served another key");
                assert!(
                    h.body() == e.body && h.meta() == e.meta,
                    "{ctx}: key {k}: undamaged entry served with other bytes"
                );
                let v = version_if_exact(&h, k);
                assert!(v.is_some(), "{ctx}: key {k}: not a written value");
                assert_eq!(
                    v, model.current[&k],
                    "{ctx}: key {k}: an older or removed value from an undamaged entry"
                );
            }
            (entry, damage) => {
                out.damaged_hits += 1;
                let exact = entry.is_some_and(|e| h.body() == e.body && h.meta() == e.meta);
                if !exact {
                    out.wrong_bytes += 1;
                }
                let v = version_if_exact(&h, k);
                assert!(
                    v.is_some(),
                    "{ctx}: key {k}: damaged bytes served (damage at {damage:?} of the entry)"
                );
                let d = damage.unwrap_or_default();
                assert!(
                    d.iter().all(|&o| o == flags_at || o == flags_at + 1),
                    "{ctx}: key {k}: served though bytes {d:?} of its entry were \
                     flipped; only the flags word is outside the checksum"
                );
            }
        }
    }
    out
}

/// After the checks, the damaged store keeps working: writes, removes, reclaim,
/// `remove_tagged`, reopen; every key must then read as the model says, or miss.
fn keep_using(path: &Path, store: Store, model: &mut Model, seed: u64) {
    let mut rng = seed ^ 0xabcd;
    for _ in 0..300 {
        model.apply(&store, &mut rng);
        for k in 0..KEYS {
            if let Some(h) = store.get(&key_bytes(k)) {
                // Touch every byte: no panic, no fault.
                std::hint::black_box(h.body().iter().map(|&b| u64::from(b)).sum::<u64>());
            }
        }
    }
    store.remove_tagged(b"all").unwrap();
    for k in 0..KEYS {
        model.current.insert(k, None);
    }
    for _ in 0..100 {
        model.apply(&store, &mut rng);
    }
    let check = |store: &Store, what: &str| {
        for k in 0..KEYS {
            let want = model.current[&k];
            if let Some(h) = store.get(&key_bytes(k)) {
                assert_eq!(version_if_exact(&h, k), want, "{what}: key {k}");
            }
        }
    };
    check(&store, "after remove_tagged and new writes");
    store.close().unwrap();
    let (store, report) = open_report(path, CAP, options()).unwrap();
    assert!(
        report.was_clean && report.cold_start.is_none(),
        "{report:?}"
    );
    check(&store, "after a clean reopen");
}

fn flip_round(seed: u64, flips: usize, clear_marker: bool) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vol");
    let mut model = populate(&path, seed);
    let file = std::fs::read(&path).unwrap();
    let before = parse_entries(&file);
    assert!(before.len() > 50, "{} entries", before.len());
    let mut rng = seed.wrapping_mul(31) + 7;
    let flipped = flip_bytes(&path, flips, &mut rng);
    if clear_marker {
        write_at(&path, VOLUME_CLEAN_AT, &0u64.to_le_bytes());
    }
    let ctx = format!("seed {seed}, {flips} flips, marker cleared: {clear_marker}");
    let out = if clear_marker {
        let (store, report) = open_report(&path, CAP, options()).unwrap();
        assert!(
            report.cold_start.is_none() && !report.was_clean,
            "{report:?}"
        );
        check_damaged(&store, &model, &before, &flipped, &ctx)
    } else {
        // First with checked reads; leaked, not closed, and the marker put back, so
        // the second open (as quire opens it) sees the same clean-marked file.
        let checked = Options {
            verify_reads: true,
            ..options()
        };
        let (store, report) = open_report(&path, CAP, checked).unwrap();
        assert!(
            report.cold_start.is_none() && report.was_clean,
            "{report:?}"
        );
        let first = check_damaged(&store, &model, &before, &flipped, &ctx);
        store.abandon();
        write_at(&path, VOLUME_CLEAN_AT, &CLEAN_MARKER.to_le_bytes());
        let (store, report) = open_report(&path, CAP, options()).unwrap();
        assert!(
            report.cold_start.is_none() && report.was_clean,
            "{report:?}"
        );
        let second = check_damaged(&store, &model, &before, &flipped, &ctx);
        store.abandon();
        assert_eq!(
            first.hits, second.hits,
            "{ctx}: verify_reads changed the hits"
        );
        second
    };
    assert_eq!(out.wrong_bytes, 0, "{ctx}: {out:?}");
    let store = open_ok(&path, CAP, options());
    keep_using(&path, store, &mut model, seed);
    println!("{ctx}: {out:?}");
    out
}

#[test]
fn flipped_bytes_with_clean_marker_cleared() {
    let mut total = Outcome::default();
    for seed in 0..12u64 {
        let flips = [1, 8, 64, 512][seed as usize % 4];
        let out = flip_round(seed, flips, true);
        total.hits += out.hits;
        total.damaged_hits += out.damaged_hits;
    }
    assert!(total.hits > 0, "the damaged volumes still serve something");
}

#[test]
fn flipped_bytes_with_clean_marker_kept() {
    let mut total = Outcome::default();
    for seed in 100..112u64 {
        let flips = [1, 8, 64, 512][seed as usize % 4];
        let out = flip_round(seed, flips, false);
        total.hits += out.hits;
        total.damaged_hits += out.damaged_hits;
        total.wrong_bytes += out.wrong_bytes;
    }
    println!("clean marker kept, all rounds: {total:?}");
    assert!(total.hits > 0, "the damaged volumes still serve something");
}

/// One flipped body byte in a cleanly closed volume is a miss: with the clean marker
/// left (open rehashes regardless), with `verify_reads`, and with the marker cleared.
#[test]
fn flipped_body_byte_is_a_miss_with_or_without_clean_marker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vol");
    let store = open_ok(&path, CAP, options());
    for k in [1, 2] {
        store
            .put(&key_bytes(k), &meta_of(k, 1), &body_of(k, 1), &[])
            .unwrap();
    }
    store.close().unwrap();
    let file = std::fs::read(&path).unwrap();
    let entries = parse_entries(&file);
    assert_eq!(entries[0].key, key_bytes(1));
    let e = &entries[0];
    write_at(&path, e.body_at + 20, &[e.body[20] ^ 0x55]);

    let checked = Options {
        verify_reads: true,
        ..options()
    };
    for (what, opts, marker) in [
        ("clean marker", options(), CLEAN_MARKER),
        ("clean marker, verify_reads", checked, CLEAN_MARKER),
        ("no clean marker", options(), 0),
    ] {
        write_at(&path, VOLUME_CLEAN_AT, &marker.to_le_bytes());
        let (store, report) = open_report(&path, CAP, opts).unwrap();
        assert_eq!(report.was_clean, marker != 0, "{what}: {report:?}");
        if let Some(h) = store.get(&key_bytes(1)) {
            panic!(
                "{what}: a damaged body was served ({} bytes differ)",
                h.body().iter().zip(e.body).filter(|(a, b)| a != b).count()
            );
        }
        store.abandon(); // keep the file as it is for the next case
    }
}

/// Overwritten and removed entries stay on disk marked dead by a flag outside the
/// checksum (so `remove` can flip it in place). One flipped bit there brings a removed
/// value back after a reopen — even with the clean marker cleared (checksums verified)
/// and with `verify_reads`.
#[test]
fn flipped_dead_flag_does_not_resurrect_a_removed_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vol");
    let store = open_ok(&path, CAP, options());
    store
        .put(&key_bytes(1), &meta_of(1, 1), &body_of(1, 1), &[])
        .unwrap();
    assert!(store.remove(&key_bytes(1)).unwrap());
    store.close().unwrap();
    let file = std::fs::read(&path).unwrap();
    let e = parse_entries(&file)[0];
    assert_eq!(e.flags & 1, 1, "marked dead on disk");
    write_at(
        &path,
        e.at + ENTRY_FLAGS_AT as u64,
        &(e.flags & !1).to_le_bytes(),
    );
    write_at(&path, VOLUME_CLEAN_AT, &0u64.to_le_bytes());
    let checked = Options {
        verify_reads: true,
        ..options()
    };
    let store = open_ok(&path, CAP, checked);
    let got = store.get(&key_bytes(1)).map(|h| version_if_exact(&h, 1));
    assert_eq!(got, None, "a removed key came back: {got:?}");
}

fn populated_volume(dir: &tempfile::TempDir) -> (PathBuf, Model) {
    let path = dir.path().join("vol");
    let model = populate(&path, 42);
    (path, model)
}

/// Opens `path` expecting a cold start; checks the volume is empty and usable.
fn expect_cold(path: &Path, cap: u64, opts: Options, ctx: &str) {
    let (store, report) = open_report(path, cap, opts.clone()).unwrap();
    assert!(report.cold_start.is_some(), "{ctx}: {report:?}");
    assert_eq!(report.entries, 0, "{ctx}: {report:?}");
    assert_eq!(std::fs::metadata(path).unwrap().len(), cap, "{ctx}: size");
    for k in 0..KEYS {
        assert!(store.get(&key_bytes(k)).is_none(), "{ctx}: stale key {k}");
    }
    assert_eq!(store.stats().entries, 0);
    assert_eq!(
        store
            .put(&key_bytes(0), &meta_of(0, 9), &body_of(0, 9), &[])
            .unwrap(),
        Put::Stored
    );
    assert_eq!(
        version_if_exact(&store.get(&key_bytes(0)).unwrap(), 0),
        Some(9)
    );
    store.close().unwrap();
    // Reopened, the volume holds that one entry and nothing of its earlier life:
    // formatting leaves the region headers as the emptied file's zeros, and the scan
    // must read every old region as free.
    let (store, report) = open_report(path, cap, opts).unwrap();
    assert!(report.cold_start.is_none(), "{ctx}: reopened: {report:?}");
    assert_eq!(report.entries, 1, "{ctx}: reopened: {report:?}");
    for k in 1..KEYS {
        assert!(
            store.get(&key_bytes(k)).is_none(),
            "{ctx}: reopened: stale key {k}"
        );
    }
    store.close().unwrap();
}

#[test]
fn truncated_volume_starts_cold() {
    for len in [0, 100, 5000, CAP / 2, CAP - 1] {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = populated_volume(&dir);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len)
            .unwrap();
        expect_cold(&path, CAP, options(), &format!("truncated to {len}"));
    }
}

#[test]
fn wrong_version_or_damaged_header_starts_cold() {
    let cases: [(&str, u64, &[u8]); 3] = [
        ("format version 2", 8, &2u32.to_le_bytes()),
        ("format version 0", 8, &0u32.to_le_bytes()),
        ("damaged cap field", 20, &[0x5a]),
    ];
    for (what, at, bytes) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = populated_volume(&dir);
        write_at(&path, at, bytes);
        expect_cold(&path, CAP, options(), what);
    }
}

#[test]
fn other_cap_or_region_size_starts_cold() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = populated_volume(&dir);
    expect_cold(&path, 2 << 20, options(), "a larger cap");
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = populated_volume(&dir);
    expect_cold(&path, 512 << 10, options(), "a smaller cap");
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = populated_volume(&dir);
    let bigger_regions = Options {
        region_bytes: Some(128 << 10),
        ..options()
    };
    expect_cold(&path, CAP, bigger_regions, "another region size");
}

#[test]
fn a_file_that_is_not_a_volume_is_refused_and_left_alone() {
    let mut rng = 7u64;
    let random: Vec<u8> = (0..100_000).map(|_| splitmix(&mut rng) as u8).collect();
    let text = b"# not a quire volume\nkey = value\n".repeat(100);
    let cases: [(&str, &[u8]); 4] = [
        ("random bytes", &random),
        ("text", &text),
        ("a short file", b"hello"),
        (
            "a magic that is almost right",
            b"QUIREVOX and then some more bytes",
        ),
    ];
    for (what, content) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vol");
        std::fs::write(&path, content).unwrap();
        match Store::open(&path, CAP, options()) {
            Err(StoreError::BadVolume { path: p, .. }) => assert_eq!(p, path, "{what}"),
            other => panic!("{what}: expected BadVolume, got {other:?}"),
        }
        assert_eq!(
            std::fs::read(&path).unwrap(),
            content,
            "{what}: file changed"
        );
    }
}

#[test]
fn a_disk_image_with_a_zero_boot_block_is_refused_too() {
    // Only a header page of zeros counts as "never formatted": an ext4 image has
    // 1 KiB of zeros before its superblock.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vol");
    let mut content = vec![0u8; 1024];
    content.extend_from_slice(&[0x53, 0xef, 1, 2, 3, 4]);
    content.resize(CAP as usize, 0);
    std::fs::write(&path, &content).unwrap();
    assert!(matches!(
        Store::open(&path, CAP, options()),
        Err(StoreError::BadVolume { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), content, "file changed");
}

#[test]
fn a_volume_never_formatted_is_formatted() {
    // A start killed while preallocating leaves a file of zeros: the next start
    // must use it, not refuse it as somebody else's file forever.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vol");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(CAP).unwrap();
    drop(f);
    let store = Store::open(&path, CAP, options()).expect("a file of zeros is formatted");
    store.put(b"k", b"m", b"body", &[]).unwrap();
    assert!(store.get(b"k").is_some());
}

#[test]
#[cfg_attr(
    not(can_mount_tmpfs),
    ignore = "needs mount(8) on PATH and CAP_SYS_ADMIN (root) to make a small tmpfs"
)]
fn a_volume_whose_preallocation_failed_is_not_left_behind() {
    // Disk full while preallocating: the error is returned and no half-made file
    // stays to block the next start. Needs a small tmpfs (see build.rs).
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(&mnt)
        .status();
    assert!(
        mounted.as_ref().is_ok_and(|s| s.success()),
        "mounting a tmpfs failed though the build found mount(8) and CAP_SYS_ADMIN: \
         {mounted:?}"
    );
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let path = mnt.join("vol");
    let err = Store::open(&path, 8 << 20, options()).expect_err("8 MiB on a 2 MiB disk");
    assert!(err.to_string().contains("preallocating"), "{err}");
    assert!(!path.exists(), "the half-made volume was removed");
    // The next start, with a size that fits, works.
    let store = Store::open(&path, 1 << 20, options()).expect("a size that fits");
    store.put(b"k", b"m", b"body", &[]).unwrap();
    assert!(store.get(b"k").is_some());
}

/// The next-generation hint in the volume header is not checksummed (it is bumped as
/// regions open). A damaged one must not make open or later writes panic. Today a hint
/// of `u64::MAX` overflows `max_gen.max(hint) + 1` in `recovery::scan`, and
/// `u64::MAX - 1` overflows `take_gen` on the first region opened (debug builds panic;
/// release builds wrap to generation 0, which region headers cannot hold, so the
/// "generations are never reused" invariant breaks).
#[test]
fn huge_next_generation_hint_does_not_panic() {
    for hint in [u64::MAX, u64::MAX - 1, 1 << 63, u64::from(u32::MAX)] {
        for clear_marker in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let (path, mut model) = populated_volume(&dir);
            write_at(&path, VOLUME_NEXT_GEN_AT, &hint.to_le_bytes());
            if clear_marker {
                write_at(&path, VOLUME_CLEAN_AT, &0u64.to_le_bytes());
            }
            let ctx = format!("hint {hint:#x}, marker cleared: {clear_marker}");
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let store = open_ok(&path, CAP, options());
                let mut rng = hint ^ 3;
                for _ in 0..200 {
                    model.apply(&store, &mut rng);
                }
                store.close().unwrap();
                let store = open_ok(&path, CAP, options());
                for k in 0..KEYS {
                    if let Some(h) = store.get(&key_bytes(k)) {
                        assert!(version_if_exact(&h, k).is_some(), "{ctx}: key {k}");
                    }
                }
            }));
            assert!(result.is_ok(), "{ctx}: panicked");
        }
    }
}

/// Opens `path` again, waiting out a lock a forked child still holds: another test
/// of this binary spawns `mount` and `umount`, and a child forked while a store of
/// this one was open shares the volume's file (and its `flock`) until it execs. A
/// store that stays locked for 5 s is a failure.
fn open_report(
    path: &std::path::Path,
    cap: u64,
    opts: Options,
) -> Result<(Store, quire_store::OpenReport), quire_store::StoreError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match Store::open_with_report(path, cap, opts.clone()) {
            Err(quire_store::StoreError::InUse { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// [`open_report`] for a store that must open.
fn open_ok(path: &std::path::Path, cap: u64, opts: Options) -> Store {
    open_report(path, cap, opts).unwrap().0
}
