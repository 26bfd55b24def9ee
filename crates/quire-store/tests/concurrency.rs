//! Concurrent readers and writers on a small volume where reclaim runs constantly.
//!
//! - `readers_hold_handles_while_writers_churn`: writer threads put (and remove) keys
//!   whose meta and body are a deterministic function of (key, version), with the key
//!   and version inside the body; reader threads get keys and hold the handles for a
//!   while (a queue of them, with pauses, plus one handle per reader held for the whole
//!   run). Each handle is checked when acquired and again just before it is dropped:
//!   `meta()`/`body()` are exactly the value for the version they carry, and the bytes
//!   `pread` returns at `body_extent()` equal `body()`. A hit is never older than the
//!   last put or remove of that key that completed before the `get` started, and one
//!   reader never sees a key's version go backwards.
//! - `put_is_rejected_while_every_region_is_pinned`: with a handle pinning every
//!   region, `put` returns `Ok(Put::Rejected)` (it neither blocks nor errors); once the
//!   handles are dropped, puts are stored again.
//! - `handle_outlives_its_store`: a handle stays valid after the store is dropped.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use quire_store::testkit::splitmix;
use quire_store::{Engine, EntryRef, Handle, Options, Put, Store};

fn seed_of(key: u64, version: u64) -> u64 {
    let mut s = key.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ version;
    splitmix(&mut s)
}

fn key_bytes(key: u64) -> Vec<u8> {
    format!("key/{key}").into_bytes()
}

/// The body of (key, version): key and version, then a pattern; 16 B to ~8 KB.
fn body_of(key: u64, version: u64) -> Vec<u8> {
    let mut s = seed_of(key, version);
    let len = 16 + (splitmix(&mut s) % 8000) as usize;
    let mut out = Vec::with_capacity(len + 8);
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    while out.len() < len {
        out.extend_from_slice(&splitmix(&mut s).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn meta_of(key: u64, version: u64) -> Vec<u8> {
    format!(
        "meta key={key} version={version} seed={}",
        seed_of(key, version)
    )
    .into_bytes()
}

fn tag_of(writer: u64, key: u64) -> Vec<u8> {
    format!("w{writer}/g{}", key % 4).into_bytes()
}

/// Checks a handle for `key` is a self-consistent value and returns its version.
fn check(h: &Handle, key: u64) -> u64 {
    let body = h.body();
    assert!(body.len() >= 16, "body of {} bytes", body.len());
    let k = u64::from_le_bytes(body[..8].try_into().unwrap());
    let v = u64::from_le_bytes(body[8..16].try_into().unwrap());
    assert_eq!(k, key, "the body of another key");
    assert!(
        body == &body_of(key, v)[..],
        "body of key {key} version {v} differs from its pattern"
    );
    assert_eq!(h.meta(), &meta_of(key, v)[..], "meta of key {key} v{v}");
    let ext = h.body_extent().expect("the store hands out extents");
    assert_eq!(ext.len, body.len() as u64);
    let file = File::from(ext.fd.try_clone_to_owned().unwrap());
    let mut buf = vec![0u8; ext.len as usize];
    file.read_exact_at(&mut buf, ext.offset).unwrap();
    assert!(buf == body, "pread at the extent differs from body()");
    v
}

fn small_store(dir: &tempfile::TempDir, carry_share: f64) -> Store {
    let options = Options {
        region_bytes: Some(64 << 10),
        admission: false,
        carry_share,
        ..Options::default()
    };
    Store::open(dir.path().join("vol"), 1 << 20, options).unwrap()
}

const KEYS: u64 = 256;
const WRITERS: u64 = 2;
const READERS: usize = 2;
const WRITES_PER_WRITER: u64 = 8000;

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one model run: readers, writers and reclaim interleaved, then checked"
)]
fn readers_hold_handles_while_writers_churn() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(small_store(&dir, 0.25));
    // floor[k]: version of the last put or remove of k that completed. Versions are
    // per writer and keys are split between writers, so they grow per key.
    let floor: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    for k in 0..KEYS {
        let w = k % WRITERS;
        let put = store
            .put(
                &key_bytes(k),
                &meta_of(k, 0),
                &body_of(k, 0),
                &[&tag_of(w, k)],
            )
            .unwrap();
        assert_eq!(put, Put::Stored);
    }
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(WRITERS as usize + READERS));
    let checked = Arc::new(AtomicUsize::new(0));
    let rejected = Arc::new(AtomicU64::new(0));

    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (store, floor, start, rejected) = (
            store.clone(),
            floor.clone(),
            start.clone(),
            rejected.clone(),
        );
        writers.push(std::thread::spawn(move || {
            let mut rng = 0x5eed_0000 + w;
            let mine: Vec<u64> = (0..KEYS).filter(|k| k % WRITERS == w).collect();
            start.wait();
            for version in 1..=WRITES_PER_WRITER {
                let r = splitmix(&mut rng);
                let k = mine[(r % mine.len() as u64) as usize];
                match (r >> 32) % 100 {
                    0..=89 => {
                        let put = store
                            .put(
                                &key_bytes(k),
                                &meta_of(k, version),
                                &body_of(k, version),
                                &[&tag_of(w, k)],
                            )
                            .expect("put never errors here");
                        match put {
                            Put::Stored => floor[k as usize].store(version, Ordering::Release),
                            Put::Rejected => {
                                rejected.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    90..=97 => {
                        store.remove(&key_bytes(k)).unwrap();
                        floor[k as usize].store(version, Ordering::Release);
                    }
                    _ => {
                        store.remove_tagged(&tag_of(w, k)).unwrap();
                        for &m in mine.iter().filter(|m| *m % 4 == k % 4) {
                            floor[m as usize].store(version, Ordering::Release);
                        }
                    }
                }
            }
        }));
    }

    let mut readers = Vec::new();
    for id in 0..READERS {
        let (store, floor, start, done, checked) = (
            store.clone(),
            floor.clone(),
            start.clone(),
            done.clone(),
            checked.clone(),
        );
        // Held for the whole run: its region must survive every reclaim. (Taken here,
        // not in the thread, so a failure cannot leave the others at the barrier.)
        let long_key = KEYS - 1 - id as u64;
        let long = store.get(&key_bytes(long_key)).expect("just written");
        let long_version = check(&long, long_key);
        readers.push(std::thread::spawn(move || {
            let mut rng = 0xbeef_0000 + id as u64;
            let mut last_seen = vec![0u64; KEYS as usize];
            let mut queue: VecDeque<(u64, u64, Handle)> = VecDeque::new();
            start.wait();
            let mut n = 0u64;
            while !done.load(Ordering::Acquire) {
                n += 1;
                let k = splitmix(&mut rng) % KEYS;
                let f = floor[k as usize].load(Ordering::Acquire);
                let Some(h) = store.get(&key_bytes(k)) else {
                    continue;
                };
                let v = check(&h, k);
                assert!(v >= f, "key {k}: got v{v} after v{f} completed: stale");
                assert!(
                    v >= last_seen[k as usize],
                    "key {k}: v{v} after this reader saw v{}",
                    last_seen[k as usize]
                );
                last_seen[k as usize] = v;
                checked.fetch_add(1, Ordering::Relaxed);
                queue.push_back((k, v, h));
                if queue.len() > 6 {
                    let (k, v, h) = queue.pop_front().unwrap();
                    assert_eq!(check(&h, k), v, "a held handle changed version");
                }
                if n.is_multiple_of(50) {
                    // A slow client: hold everything while writers churn.
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            for (k, v, h) in queue {
                assert_eq!(check(&h, k), v, "a held handle changed version");
            }
            assert_eq!(check(&long, long_key), long_version, "long-held handle");
        }));
    }

    for w in writers {
        w.join().expect("writer panicked");
    }
    done.store(true, Ordering::Release);
    for r in readers {
        r.join().expect("reader panicked");
    }
    let st = store.stats();
    assert!(st.evicted > 0, "reclaim must have run: {st:?}");
    assert!(st.bytes_used <= 1 << 20, "{st:?}");
    assert_eq!(st.rejected, rejected.load(Ordering::Relaxed), "{st:?}");
    assert!(
        checked.load(Ordering::Relaxed) > 0,
        "readers checked no hit"
    );
    // After the churn every key reads as its last completed operation left it.
    for k in 0..KEYS {
        if let Some(h) = store.get(&key_bytes(k)) {
            assert!(check(&h, k) >= floor[k as usize].load(Ordering::Acquire));
        }
    }
}

#[test]
fn put_is_rejected_while_every_region_is_pinned() {
    let dir = tempfile::tempdir().unwrap();
    // No carrying: reclaim frees whole regions, so what is live is easy to reason about.
    let store = small_store(&dir, 0.0);
    let body = |k: u64| {
        let mut b = vec![(k % 251) as u8; 8000];
        b[..8].copy_from_slice(&k.to_le_bytes());
        b
    };
    // 8 entries of ~8 KB per 64 KiB region, 15 regions: 200 distinct keys wrap the
    // volume, and every region then holds live entries (nothing was overwritten).
    for k in 0..200u64 {
        assert_eq!(
            store.put(&k.to_le_bytes(), b"m", &body(k), &[]).unwrap(),
            Put::Stored
        );
    }
    assert!(store.stats().evicted > 0);
    let held: Vec<(u64, Handle)> = (0..200u64)
        .filter_map(|k| store.get(&k.to_le_bytes()).map(|h| (k, h)))
        .collect();
    assert!(held.len() >= 100, "{} live", held.len());

    // New entries are pinned too as soon as they are stored, or reclaim would simply
    // cycle through the regions holding them.
    let mut outcomes = Vec::new();
    let mut held_new = Vec::new();
    for k in 1000..1030u64 {
        outcomes.push(store.put(&k.to_le_bytes(), b"m", &body(k), &[]).unwrap());
        held_new.extend(store.get(&k.to_le_bytes()));
    }
    let first_rejected = outcomes
        .iter()
        .position(|p| *p == Put::Rejected)
        .unwrap_or_else(|| {
            panic!(
                "with every region pinned, puts must be rejected: {:?}",
                store.stats()
            )
        });
    // The active region's room, plus the ready region reclaim prepared ahead.
    assert!(
        first_rejected <= 16,
        "only the active and ready regions' room can be used: {outcomes:?}"
    );
    assert!(
        outcomes[first_rejected..]
            .iter()
            .all(|p| *p == Put::Rejected),
        "nothing was unpinned, so nothing can be reclaimed: {outcomes:?}"
    );
    let rejected = (outcomes.len() - first_rejected) as u64;
    assert_eq!(store.stats().rejected, rejected);
    for k in 1000..1000 + first_rejected as u64 {
        assert_eq!(store.get(&k.to_le_bytes()).unwrap().body(), &body(k)[..]);
    }
    for k in 1000 + first_rejected as u64..1030 {
        assert!(store.get(&k.to_le_bytes()).is_none(), "rejected key {k}");
    }
    // An overwrite of a held key is rejected too; the key keeps its previous value
    // (the store declines the new one, it does not drop the old one).
    let (k0, _) = held[0];
    assert_eq!(
        store
            .put(&k0.to_le_bytes(), b"new", b"new body", &[])
            .unwrap(),
        Put::Rejected
    );
    assert_eq!(store.get(&k0.to_le_bytes()).unwrap().body(), &body(k0)[..]);
    for (k, h) in &held {
        assert_eq!(h.body(), &body(*k)[..], "held handle of key {k}");
        assert_eq!(h.meta(), b"m");
    }

    drop(held);
    drop(held_new);
    for k in 2000..2100u64 {
        assert_eq!(
            store.put(&k.to_le_bytes(), b"m", &body(k), &[]).unwrap(),
            Put::Stored,
            "with no pins every put is stored again"
        );
        assert_eq!(store.get(&k.to_le_bytes()).unwrap().body(), &body(k)[..]);
    }
}

#[test]
fn handle_outlives_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = small_store(&dir, 0.25);
    assert_eq!(
        store
            .put(&key_bytes(7), &meta_of(7, 3), &body_of(7, 3), &[])
            .unwrap(),
        Put::Stored
    );
    let h = store.get(&key_bytes(7)).unwrap();
    drop(store);
    assert_eq!(check(&h, 7), 3);
}
