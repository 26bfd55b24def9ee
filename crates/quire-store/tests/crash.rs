//! Crash consistency: a writer process killed with SIGKILL mid-write, then the volume
//! reopened.
//!
//! `killed_writer_leaves_a_consistent_volume` re-executes this test binary as a child
//! (`child_writer`, selected with `--exact`, told what to do by `QUIRE_CRASH_CHILD`;
//! without that variable the child test returns at once). The child opens the volume
//! and writes continuously — puts of 16 B to 100 KB with overwrites, removes,
//! `remove_tagged`, on a volume small enough that reclaim runs all the time — and logs
//! each operation after it returns. The parent kills it after a random 50–300 ms,
//! reopens, and checks: open succeeds warm, the report says not clean, every hit is
//! byte-exact (bodies and metas are a function of key and version, which the body
//! carries), and no hit is older than the last put or remove of its key the child
//! logged. Several rounds run on the same volume (reopen, the child continues, kill),
//! alternating clean and unclean closes by the parent in between.
//!
//! `crash_between_write_and_retire_then_remove_stays_removed` builds, byte for byte,
//! the state such a kill leaves when it lands between writing an overwrite and marking
//! the superseded entry dead, and checks a later `remove` survives another crash.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quire_store::format::{self, ENTRY_FLAGS_AT, VOLUME_CLEAN_AT, VOLUME_HEADER_BYTES};
use quire_store::testkit::{self, meta_of, splitmix};
use quire_store::{Engine, Handle, Options, Put, Store};

const CHILD_ENV: &str = "QUIRE_CRASH_CHILD";
const LOG_ENV: &str = "QUIRE_CRASH_LOG";
const ROUND_ENV: &str = "QUIRE_CRASH_ROUND";
const READY: &str = "QUIRE_CHILD_READY";

/// 15 regions of 256 KiB: objects up to ~100 KB, and reclaim every few dozen puts.
const CAP: u64 = (4 << 20) + VOLUME_HEADER_BYTES;
const KEYS: u64 = 64;
const VERSIONS_PER_ROUND: u64 = 1_000_000_000;

fn options() -> Options {
    Options {
        region_bytes: Some(256 << 10),
        admission: false,
        ..Options::default()
    }
}

/// Bodies of 24 B to 100 KB, mostly small.
fn body_of(k: u64, v: u64) -> Vec<u8> {
    testkit::body(k, v, |r| match r % 100 {
        0..=69 => 24 + r as usize % 4000,
        70..=94 => 4000 + r as usize % 30_000,
        _ => 30_000 + r as usize % 70_000,
    })
}

/// Checks a hit for key `k` is exactly the value of the version it carries; returns
/// that version.
fn check(h: &Handle, k: u64) -> u64 {
    testkit::version_if_exact(h, k, body_of)
        .unwrap_or_else(|| panic!("key {k}: the hit is not a value ever written for it"))
}

fn key_bytes(k: u64) -> Vec<u8> {
    format!("crash/{k}").into_bytes()
}

fn tag_of(k: u64) -> Vec<u8> {
    format!("g{}", k % 4).into_bytes()
}

/// The child: writes until killed (or, as a safety net, for 20 s).
#[test]
fn child_writer() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return; // a normal test run: nothing to do
    };
    let log_path = std::env::var_os(LOG_ENV).expect("log path");
    let round: u64 = std::env::var(ROUND_ENV).unwrap().parse().unwrap();
    let store = Store::open(&path, CAP, options()).unwrap();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .unwrap();
    let mut say = |line: String| log.write_all(line.as_bytes()).unwrap();
    println!("{READY}");
    std::io::stdout().flush().unwrap();
    let mut rng = 0xc0ff_ee00 + round;
    let until = Instant::now() + Duration::from_secs(20);
    let mut v = round * VERSIONS_PER_ROUND;
    while Instant::now() < until {
        v += 1;
        let r = splitmix(&mut rng);
        let k = r % KEYS;
        match (r >> 32) % 100 {
            0..=79 => {
                let put = store
                    .put(&key_bytes(k), &meta_of(k, v), &body_of(k, v), &[&tag_of(k)])
                    .unwrap();
                if put == Put::Stored {
                    say(format!("P {k} {v}\n"));
                }
            }
            80..=91 => {
                store.remove(&key_bytes(k)).unwrap();
                say(format!("R {k} {v}\n"));
            }
            92..=94 => {
                store.remove_tagged(&tag_of(k)).unwrap();
                say(format!("T {} {v}\n", k % 4));
            }
            _ => {
                if let Some(h) = store.get(&key_bytes(k)) {
                    check(&h, k);
                }
            }
        }
    }
    // Not killed in time: leave without a clean close, like a crash.
    store.abandon();
    std::process::exit(3);
}

/// The oldest version a hit of each key may carry, from the child's log: after
/// `P k v` at least v; after a remove (`R k v`, or `T g v` for k's group) above v.
fn floors(log: &Path) -> HashMap<u64, u64> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut floor = HashMap::new();
    // A line cut short by the kill has no newline: ignore it.
    let complete = text.rsplit_once('\n').map_or("", |(done, _)| done);
    for line in complete.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (n, v): (u64, u64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        match f[0] {
            "P" => {
                floor.insert(n, v);
            }
            "R" => {
                floor.insert(n, v + 1);
            }
            "T" => {
                for k in (0..KEYS).filter(|k| k % 4 == n) {
                    floor.insert(k, v + 1);
                }
            }
            other => panic!("bad log line {other:?}"),
        }
    }
    floor
}

/// Checks every key of the store against the log; returns the number of hits.
fn check_against_log(store: &Store, log: &Path) -> usize {
    let floor = floors(log);
    let mut hits = 0;
    for k in 0..KEYS {
        if let Some(h) = store.get(&key_bytes(k)) {
            let v = check(&h, k);
            let f = floor.get(&k).copied().unwrap_or(0);
            assert!(
                v >= f,
                "key {k}: v{v} came back though the log has its version {f} or a remove \
                 after it completed before the kill"
            );
            hits += 1;
        }
    }
    hits
}

fn run_child(exe: &Path, vol: &Path, log: &Path, round: u64, delay: Duration) {
    let mut child = Command::new(exe)
        .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, vol)
        .env(LOG_ENV, log)
        .env(ROUND_ENV, round.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            let status = child.wait().unwrap();
            panic!("round {round}: child ended before it was ready: {status:?}");
        }
        if line.contains(READY) {
            break;
        }
    }
    std::thread::sleep(delay);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "round {round}: the child must die of SIGKILL mid-write, not end: {status:?}"
    );
}

#[test]
fn killed_writer_leaves_a_consistent_volume() {
    let dir = tempfile::tempdir().unwrap();
    let vol = dir.path().join("vol");
    let log: PathBuf = dir.path().join("log");
    let exe = std::env::current_exe().unwrap();
    let mut rng = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("seed {rng}");
    for round in 1..=8u64 {
        let delay = Duration::from_millis(50 + splitmix(&mut rng) % 251);
        run_child(&exe, &vol, &log, round, delay);
        let (store, report) = Store::open_with_report(&vol, CAP, options()).unwrap();
        assert_eq!(report.cold_start, None, "round {round}: {report:?}");
        assert!(!report.was_clean, "round {round}: {report:?}");
        assert!(report.entries > 0, "round {round}: {report:?}");
        let hits = check_against_log(&store, &log);
        assert!(hits > 0, "round {round}: no key survived");
        let logged = std::fs::read_to_string(&log).unwrap().lines().count();
        println!(
            "round {round}: killed after {delay:?}, {logged} ops logged, {report:?}, {hits} hits"
        );
        // The store works after recovery.
        let k = KEYS + round;
        let v = round * VERSIONS_PER_ROUND - 1;
        assert_eq!(
            store
                .put(&key_bytes(k), &meta_of(k, v), &body_of(k, v), &[])
                .unwrap(),
            Put::Stored
        );
        assert_eq!(check(&store.get(&key_bytes(k)).unwrap(), k), v);
        if round % 2 == 0 {
            store.close().unwrap();
        } else {
            store.abandon(); // the next child opens an unclean volume
        }
    }
    // A clean close after all that: the next open is clean and sees the same data.
    let (store, _) = Store::open_with_report(&vol, CAP, options()).unwrap();
    let before: Vec<Option<u64>> = (0..KEYS)
        .map(|k| store.get(&key_bytes(k)).map(|h| check(&h, k)))
        .collect();
    store.close().unwrap();
    let (store, report) = Store::open_with_report(&vol, CAP, options()).unwrap();
    assert!(
        report.was_clean && report.cold_start.is_none(),
        "{report:?}"
    );
    let after: Vec<Option<u64>> = (0..KEYS)
        .map(|k| store.get(&key_bytes(k)).map(|h| check(&h, k)))
        .collect();
    assert_eq!(before, after);
    check_against_log(&store, &log);
}

/// Offsets of the entries of `key` in a volume file, oldest first, as
/// (absolute offset of the entry, its flags) (see `quire_store::format`).
fn entries_of(file: &[u8], key: &[u8]) -> Vec<(u64, u16)> {
    let entries = format::entries(file).expect("a volume this build reads");
    entries
        .iter()
        .filter(|e| e.key == key)
        .map(|e| (e.at, e.flags))
        .collect()
}

/// A kill between the two steps of an overwrite — the new entry written and indexed,
/// the superseded one not yet marked dead — leaves two live entries of one key on disk.
/// Recovery correctly serves the newer; but it does not mark the older dead, so after
/// the key is removed (which marks only the newer) and the process crashes again, the
/// older value comes back: a removed key returns, with a stale value.
#[test]
fn crash_between_write_and_retire_then_remove_stays_removed() {
    let dir = tempfile::tempdir().unwrap();
    let vol = dir.path().join("vol");
    let store = Store::open(&vol, CAP, options()).unwrap();
    let (v1, v2) = (1, 2);
    for v in [v1, v2] {
        store
            .put(&key_bytes(1), &meta_of(1, v), &body_of(1, v), &[])
            .unwrap();
    }
    drop(store);
    // Rebuild the state a kill between `Entry::write` and `retire` leaves: v1 not dead,
    // no clean marker.
    let bytes = std::fs::read(&vol).unwrap();
    let found = entries_of(&bytes, &key_bytes(1));
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].1 & 1, 1, "v1 was marked dead by the overwrite");
    let file = std::fs::OpenOptions::new().write(true).open(&vol).unwrap();
    file.write_all_at(
        &(found[0].1 & !1).to_le_bytes(),
        found[0].0 + ENTRY_FLAGS_AT as u64,
    )
    .unwrap();
    file.write_all_at(&0u64.to_le_bytes(), VOLUME_CLEAN_AT as u64)
        .unwrap();
    drop(file);

    let (store, report) = Store::open_with_report(&vol, CAP, options()).unwrap();
    assert!(!report.was_clean);
    assert_eq!(
        check(&store.get(&key_bytes(1)).unwrap(), 1),
        v2,
        "newest wins"
    );
    assert!(store.remove(&key_bytes(1)).unwrap());
    assert!(store.get(&key_bytes(1)).is_none());
    store.abandon(); // crash again
    let store = Store::open(&vol, CAP, options()).unwrap();
    let got = store.get(&key_bytes(1)).map(|h| check(&h, 1));
    assert_eq!(got, None, "the removed key came back as v{got:?}");
}
