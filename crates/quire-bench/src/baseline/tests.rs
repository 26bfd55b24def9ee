//! Tests of `baseline`.

use super::*;
use std::time::UNIX_EPOCH;

const HOUR: Duration = Duration::from_secs(3600);

/// Options whose janitor never fires by itself during a test.
fn manual() -> FileOptions {
    FileOptions {
        janitor_interval: HOUR,
        ..FileOptions::default()
    }
}

fn open(dir: &Path, cap: u64) -> FileStore {
    FileStore::open(dir, cap, manual()).expect("open")
}

fn key(i: usize) -> Vec<u8> {
    format!("https://example.com/page/{i:04}").into_bytes()
}

fn file_of(store: &FileStore, key: &[u8]) -> PathBuf {
    store.entry_path(xxh3_64(key))
}

fn set_mtime(path: &Path, secs: u64) {
    let file = File::options()
        .write(true)
        .open(path)
        .expect("open for mtime");
    file.set_modified(UNIX_EPOCH + Duration::from_secs(secs))
        .expect("set mtime");
}

#[test]
fn round_trip_with_meta_and_tags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    let k = b"key-1".as_slice();
    assert_eq!(
        store
            .put(
                k,
                b"HTTP/1.1 200",
                b"hello body",
                &[b"site:a", b"type:html"]
            )
            .expect("put"),
        Put::Stored
    );
    let hit = store.get(k).expect("hit");
    assert_eq!(hit.meta(), b"HTTP/1.1 200");
    assert_eq!(hit.body(), b"hello body");
    assert!(hit.body_extent().is_none());
    assert!(store.get(b"key-2").is_none());

    // The file lives under the first two hex digits of the key's hash.
    let name = format!("{:016x}", xxh3_64(k));
    let path = dir.path().join(&name[..2]).join(&name);
    assert!(path.is_file(), "{} missing", path.display());
    let file_len = fs::metadata(&path).expect("stat").len();
    let expected_len = (HEADER_LEN + k.len() + (2 + 6) + (2 + 9) + 12 + 10) as u64;
    assert_eq!(file_len, expected_len);

    // Both tags were stored.
    assert_eq!(
        FileStore::tagged_len(&path, b"type:html"),
        Some(expected_len)
    );
    assert_eq!(FileStore::tagged_len(&path, b"site:a"), Some(expected_len));
    assert_eq!(FileStore::tagged_len(&path, b"site:b"), None);

    let stats = store.stats();
    assert_eq!(stats.hits, 1);
    assert_eq!(stats.misses, 1);
    assert_eq!(stats.admitted, 1);
    assert_eq!(stats.rejected, 0);
    assert_eq!(stats.entries, 1);
    assert_eq!(stats.bytes_used, expected_len);
    assert_eq!(stats.cap_bytes, 1 << 20);
    assert_eq!(store.disk_bytes(), expected_len);
    assert_eq!(store.name(), "file");
}

#[test]
fn empty_meta_body_and_tags_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    store.put(b"", b"", b"", &[]).expect("put");
    let hit = store.get(b"").expect("hit");
    assert!(hit.meta().is_empty());
    assert!(hit.body().is_empty());
}

#[test]
fn overwrite_replaces_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    store
        .put(b"k", b"m1", b"first value", &[b"t1"])
        .expect("put 1");
    store.put(b"k", b"m2", b"second", &[]).expect("put 2");
    let hit = store.get(b"k").expect("hit");
    assert_eq!(hit.meta(), b"m2");
    assert_eq!(hit.body(), b"second");
    let stats = store.stats();
    assert_eq!(stats.admitted, 2);
    assert_eq!(stats.entries, 1);
    assert_eq!(stats.bytes_used, store.disk_bytes());
    assert_eq!(
        stats.bytes_used,
        (HEADER_LEN + 1 + 2 + 6) as u64,
        "only the second file is counted"
    );
    // The old tag went with the old value.
    assert_eq!(store.remove_tagged(b"t1").expect("remove_tagged"), 0);
    // No temp files are left behind.
    let sub = file_of(&store, b"k");
    let leftovers: Vec<_> = fs::read_dir(sub.parent().expect("parent"))
        .expect("readdir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(TEMP_PREFIX))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn held_handle_keeps_its_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    store.put(b"k", b"m", b"old", &[]).expect("put");
    let held = store.get(b"k").expect("hit");
    store.put(b"k", b"m", b"new", &[]).expect("put");
    assert!(store.remove(b"k").expect("remove"));
    assert_eq!(held.body(), b"old");
}

#[test]
fn remove_unlinks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    store.put(b"a", b"m", b"body a", &[]).expect("put a");
    store.put(b"b", b"m", b"body b", &[]).expect("put b");
    assert!(store.remove(b"a").expect("remove"));
    assert!(store.get(b"a").is_none());
    assert!(!file_of(&store, b"a").exists());
    assert!(!store.remove(b"a").expect("remove again"));
    assert!(!store.remove(b"never").expect("remove absent"));
    assert_eq!(store.get(b"b").expect("b").body(), b"body b");
    let stats = store.stats();
    assert_eq!(stats.entries, 1);
    assert_eq!(stats.bytes_used, store.disk_bytes());
}

#[test]
fn remove_tagged_removes_only_tagged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    store.put(b"1", b"", b"x", &[b"blue", b"red"]).expect("put");
    store.put(b"2", b"", b"y", &[b"red"]).expect("put");
    store.put(b"3", b"", b"z", &[b"blue"]).expect("put");
    store.put(b"4", b"", b"w", &[]).expect("put");
    store.put(b"5", b"", b"v", &[b"re"]).expect("put");
    assert_eq!(store.remove_tagged(b"red").expect("remove_tagged"), 2);
    assert!(store.get(b"1").is_none());
    assert!(store.get(b"2").is_none());
    assert!(store.get(b"3").is_some());
    assert!(store.get(b"4").is_some());
    assert!(store.get(b"5").is_some());
    assert_eq!(store.remove_tagged(b"red").expect("again"), 0);
    assert_eq!(store.remove_tagged(b"none").expect("none"), 0);
    assert_eq!(store.remove_tagged(b"blue").expect("blue"), 1);
    let stats = store.stats();
    assert_eq!(stats.entries, 2);
    assert_eq!(stats.bytes_used, store.disk_bytes());
}

#[test]
fn corrupted_body_is_a_miss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    store.put(b"k", b"meta", b"body bytes", &[]).expect("put");
    let path = file_of(&store, b"k");
    let mut bytes = fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs::write(&path, &bytes).expect("write");
    assert!(store.get(b"k").is_none());
    assert_eq!(store.stats().misses, 1);
    assert_eq!(store.stats().hits, 0);
}

#[test]
fn corrupted_header_is_a_miss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    store
        .put(b"k", b"meta", b"body bytes", &[b"t"])
        .expect("put");
    let path = file_of(&store, b"k");
    let good = fs::read(&path).expect("read");
    // Magic, version, a length, the tag count and the checksum.
    for at in [0, 4, 6, 16, 30] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        fs::write(&path, &bad).expect("write");
        assert!(store.get(b"k").is_none(), "flip at {at} read as a hit");
    }
    fs::write(&path, &good).expect("restore");
    assert_eq!(store.get(b"k").expect("hit").body(), b"body bytes");
}

#[test]
fn truncated_or_extended_file_is_a_miss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    store.put(b"k", b"meta", b"body bytes", &[]).expect("put");
    let path = file_of(&store, b"k");
    let good = fs::read(&path).expect("read");
    for len in [good.len() - 1, HEADER_LEN + 1, HEADER_LEN, 10, 0] {
        fs::write(&path, &good[..len]).expect("truncate");
        assert!(
            store.get(b"k").is_none(),
            "truncated to {len} read as a hit"
        );
    }
    let mut longer = good.clone();
    longer.push(0);
    fs::write(&path, &longer).expect("extend");
    assert!(store.get(b"k").is_none());
    assert_eq!(store.stats().hits, 0);
}

#[test]
fn hash_collision_is_a_miss() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    store.put(b"a", b"meta", b"body of a", &[]).expect("put");
    // Pretend "b" hashes where "a" does: put a's file at b's name.
    let b_path = file_of(&store, b"b");
    fs::create_dir_all(b_path.parent().expect("parent")).expect("mkdir");
    fs::copy(file_of(&store, b"a"), &b_path).expect("copy");
    assert!(store.get(b"b").is_none());
    assert!(store.get(b"a").is_some());
}

#[test]
fn reopen_keeps_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("nested").join("cache");
    {
        let store = open(&cache, 1 << 20);
        for i in 0..50 {
            store
                .put(&key(i), b"meta", format!("body {i}").as_bytes(), &[b"all"])
                .expect("put");
        }
    }
    let store = open(&cache, 1 << 20);
    let stats = store.stats();
    assert_eq!(stats.entries, 50);
    assert_eq!(stats.bytes_used, store.disk_bytes());
    assert!(stats.bytes_used > 0);
    for i in 0..50 {
        let hit = store.get(&key(i)).expect("hit after reopen");
        assert_eq!(hit.body(), format!("body {i}").as_bytes());
        assert_eq!(hit.meta(), b"meta");
    }
    assert_eq!(store.remove_tagged(b"all").expect("remove_tagged"), 50);
    assert_eq!(store.disk_bytes(), 0);
}

#[test]
fn janitor_evicts_oldest_first_to_the_target() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = vec![7u8; 1000];
    let one = (HEADER_LEN + key(0).len() + body.len()) as u64;
    let cap = one * 10; // room for 10 of the 20
    let store = open(dir.path(), cap);
    for i in 0..20 {
        store.put(&key(i), b"", &body, &[]).expect("put");
        // Key i is older the larger i is: eviction must follow mtime, not names or
        // write order.
        set_mtime(&file_of(&store, &key(i)), 1_000_000 - i as u64);
    }
    assert_eq!(
        store.disk_bytes(),
        one * 20,
        "janitor ran before it was due"
    );
    assert_eq!(store.stats().evicted, 0);

    store.run_janitor().expect("janitor");
    // cap * 0.75 = 7.5 entries' worth: 7 stay, the 13 oldest go.
    assert_eq!(store.disk_bytes(), one * 7);
    assert!(store.disk_bytes() as f64 <= cap as f64 * 0.75);
    let stats = store.stats();
    assert_eq!(stats.evicted, 13);
    assert_eq!(stats.entries, 7);
    assert_eq!(stats.bytes_used, one * 7);
    for i in 0..7 {
        assert!(store.get(&key(i)).is_some(), "newest entry {i} evicted");
    }
    for i in 7..20 {
        assert!(store.get(&key(i)).is_none(), "old entry {i} kept");
    }

    // Under the cap, a run deletes nothing.
    store.run_janitor().expect("janitor");
    assert_eq!(store.stats().evicted, 13);
    assert_eq!(store.disk_bytes(), one * 7);
}

#[test]
fn janitor_runs_from_put_when_due() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = vec![1u8; 500];
    let one = (HEADER_LEN + key(0).len() + body.len()) as u64;
    let cap = one * 8;
    let options = FileOptions {
        janitor_interval: Duration::ZERO,
        ..FileOptions::default()
    };
    let store = FileStore::open(dir.path(), cap, options).expect("open");
    for i in 0..40 {
        store.put(&key(i), b"", &body, &[]).expect("put");
        // Every put runs the janitor on its own thread before returning.
        assert!(store.disk_bytes() <= cap, "over the cap after put {i}");
    }
    let stats = store.stats();
    assert!(stats.evicted >= 32, "evicted only {}", stats.evicted);
    assert_eq!(stats.bytes_used, store.disk_bytes());
    assert_eq!(stats.admitted, 40);
    // The entry just written is never the one evicted (it is the newest).
    assert!(store.get(&key(39)).is_some());
}

#[test]
fn usage_overshoots_the_cap_between_janitor_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = vec![1u8; 500];
    let one = (HEADER_LEN + key(0).len() + body.len()) as u64;
    let store = open(dir.path(), one * 4);
    for i in 0..40 {
        store.put(&key(i), b"", &body, &[]).expect("put");
    }
    assert_eq!(store.disk_bytes(), one * 40);
    assert_eq!(store.stats().bytes_used, one * 40);
    assert_eq!(store.stats().evicted, 0);
    assert_eq!(store.stats().admitted, 40);
}

#[test]
fn stale_temp_files_are_cleaned_fresh_ones_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    store.put(b"k", b"", b"v", &[]).expect("put");
    let sub = file_of(&store, b"k")
        .parent()
        .expect("parent")
        .to_path_buf();
    let stale = sub.join(format!("{TEMP_PREFIX}stale"));
    let fresh = sub.join(format!("{TEMP_PREFIX}fresh"));
    fs::write(&stale, b"half written").expect("write");
    fs::write(&fresh, b"in flight").expect("write");
    set_mtime(&stale, 1);
    store.run_janitor().expect("janitor");
    assert!(!stale.exists());
    assert!(fresh.exists());
    assert_eq!(store.get(b"k").expect("hit").body(), b"v");
}

#[test]
fn too_large_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = FileOptions {
        max_object_bytes: 1024,
        ..manual()
    };
    let store = FileStore::open(dir.path(), 1 << 20, options).expect("open");
    let body = vec![0u8; 1024];
    match store.put(b"big", b"m", &body, &[]) {
        Err(StoreError::TooLarge {
            size_bytes,
            limit_bytes,
        }) => {
            assert_eq!(size_bytes, (HEADER_LEN + 3 + 1 + 1024) as u64);
            assert_eq!(limit_bytes, 1024);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(store.get(b"big").is_none());
    assert_eq!(store.disk_bytes(), 0);
    assert_eq!(store.stats().admitted, 0);
    // Exactly at the limit is fine.
    let fits = vec![0u8; 1024 - HEADER_LEN - 3 - 1];
    assert_eq!(
        store.put(b"big", b"m", &fits, &[]).expect("put"),
        Put::Stored
    );
}

#[test]
fn overlong_tag_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 20);
    let tag = vec![b't'; 70_000];
    assert!(matches!(
        store.put(b"k", b"", b"", &[&tag]),
        Err(StoreError::FieldTooLong { what: "tag", .. })
    ));
}

#[test]
fn invalid_options_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    for clean_target in [0.0, -1.0, 1.5, f64::NAN] {
        let options = FileOptions {
            clean_target,
            ..FileOptions::default()
        };
        assert!(matches!(
            FileStore::open(dir.path(), 1 << 20, options),
            Err(StoreError::InvalidOptions(_))
        ));
    }
    assert!(matches!(
        FileStore::open(dir.path(), 0, FileOptions::default()),
        Err(StoreError::InvalidOptions(_))
    ));
}

#[test]
fn concurrent_puts_and_gets_see_whole_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), 1 << 30);
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let store = &store;
            s.spawn(move || {
                for i in 0..200usize {
                    let k = key(i % 10);
                    let body = vec![t; 100 + i];
                    store.put(&k, &[t], &body, &[]).expect("put");
                    if let Some(hit) = store.get(&key((i + 3) % 10)) {
                        let writer = hit.meta()[0];
                        assert!(hit.body().iter().all(|&b| b == writer));
                    }
                }
            });
        }
    });
    assert_eq!(store.stats().admitted, 800);
    assert_eq!(store.disk_bytes(), {
        let mut sum = 0;
        for i in 0..10 {
            sum += store.get(&key(i)).map_or(0, |h| {
                (HEADER_LEN + key(i).len() + h.meta().len() + h.body().len()) as u64
            });
        }
        sum
    });
}
