//! The file-per-entry baseline ([`FileStore`]): the classic disk cache that memory-mapped
//! cache engines replaced (a published comparison measured 4-6x their read throughput at
//! 64 threads on a server's storage), kept so `quire bench store` has something honest to
//! compare against.
//!
//! It owns a cache directory. Every entry is one file, named by the hex of the 64-bit
//! xxh3 hash of its key and spread over 256 subdirectories by the first two hex digits
//! (like mod_pagespeed's `FileCache` or nginx's `levels=2`). A file is a fixed header
//! (magic, version, lengths, an xxh3 checksum) followed by key, tags, meta and body.
//!
//! Key design decision: do what the old design did, and nothing cleverer. A read is
//! open + read the whole file into a fresh buffer + close (one copy, no descriptor or
//! content caching); a write is a temp file + `rename` over the final name (atomic
//! replace). There is no index in RAM: eviction is left to a periodic janitor that walks
//! the whole tree, stats every file and deletes the oldest (by mtime) once the total is
//! over the cap, running synchronously on whichever `put` finds it due. So the directory
//! overshoots the cap between runs and the putting thread stalls while the walk runs;
//! those are the costs the benchmark measures. Tag invalidation walks the tree too.
//!
//! Anything on disk that does not check out (magic, version, lengths, full key, checksum)
//! or cannot be read is a miss, never an error or wrong bytes.

use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant, SystemTime};

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use quire_store::{Engine, EntryRef, FileExtent, Put, Result, Stats, StoreError};

/// First bytes of every entry file.
const MAGIC: [u8; 4] = *b"QFC\x01";
/// Entry file format version; files of another version read as misses.
const VERSION: u16 = 1;
/// Header layout (little-endian):
/// `magic[4] version:u16 tag_count:u16 key_len:u32 tags_len:u32 meta_len:u32
/// body_len:u64 checksum:u64`, then key, tags (each `len:u16` + bytes), meta, body.
const HEADER_LEN: usize = 36;
/// Offset of the checksum in the header. The checksum is xxh3 over the header bytes
/// before it and everything after the header.
const CHECKSUM_AT: usize = 28;
/// Names of files being written start with this; they never read as entries.
const TEMP_PREFIX: &str = ".tmp-";
/// A temp file this old is the leftover of a crashed writer and is deleted by a walk.
const TEMP_STALE: Duration = Duration::from_secs(600);
/// Length of an entry file's name: the 64-bit hash in hex.
const NAME_LEN: usize = 16;

/// Options of the baseline. `FileOptions::default()` is what the benchmark uses.
#[derive(Debug, Clone)]
pub(crate) struct FileOptions {
    /// How long after the janitor's last run a `put` runs it again (synchronously).
    pub janitor_interval: Duration,
    /// When the janitor finds the directory over the cap, it deletes the oldest files
    /// until usage is at most `cap * clean_target`. In `(0, 1]`.
    pub clean_target: f64,
    /// Largest object (header + key + tags + meta + body) accepted; larger puts fail
    /// with [`StoreError::TooLarge`].
    pub max_object_bytes: u64,
    /// `fsync` each temp file before renaming it into place.
    pub fsync: bool,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            janitor_interval: Duration::from_secs(1),
            clean_target: 0.75,
            max_object_bytes: 64 << 20,
            fsync: false,
        }
    }
}

/// The file-per-entry baseline engine; see the module doc.
#[derive(Debug)]
pub(crate) struct FileStore {
    root: PathBuf,
    cap_bytes: u64,
    options: FileOptions,
    /// `janitor_interval` in nanoseconds.
    interval_nanos: u64,
    /// When the store was opened; the janitor clock counts from here.
    epoch: Instant,
    /// Nanoseconds after `epoch` at which the last janitor run finished (0: the walk
    /// at open).
    last_janitor_nanos: AtomicU64,
    /// Held while the janitor runs; `put` only `try_lock`s it, so one thread runs the
    /// janitor and the others carry on.
    janitor: Mutex<()>,
    /// Makes temp file names unique within the process.
    temp_seq: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    admitted: AtomicU64,
    evicted: AtomicU64,
    /// Estimate: bytes the janitor's last walk counted, plus writes, minus removes since.
    bytes_used: AtomicU64,
    /// Estimate of live entry files, kept the same way as `bytes_used`.
    entries: AtomicU64,
}

/// A hit: the whole entry file read into one buffer owned by the handle.
pub(crate) struct FileEntry {
    buf: Vec<u8>,
    meta: Range<usize>,
    body: Range<usize>,
}

impl std::fmt::Debug for FileEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileEntry")
            .field("file_bytes", &self.buf.len())
            .field("meta_bytes", &self.meta.len())
            .field("body_bytes", &self.body.len())
            .finish()
    }
}

impl EntryRef for FileEntry {
    fn meta(&self) -> &[u8] {
        self.buf.get(self.meta.clone()).unwrap_or_default()
    }

    fn body(&self) -> &[u8] {
        self.buf.get(self.body.clone()).unwrap_or_default()
    }

    fn body_extent(&self) -> Option<FileExtent<'_>> {
        None
    }
}

impl FileEntry {
    /// Checks a whole entry file read for `key`; `None` (a miss) unless everything
    /// matches.
    fn parse(buf: Vec<u8>, key: &[u8]) -> Option<FileEntry> {
        let header = Header::decode(&buf)?;
        if header.file_len()? != u64::try_from(buf.len()).ok()? {
            return None;
        }
        let key_end = HEADER_LEN.checked_add(usize::try_from(header.key_len).ok()?)?;
        if buf.get(HEADER_LEN..key_end)? != key {
            return None; // another key with the same hash
        }
        let sum = checksum(buf.get(..CHECKSUM_AT)?, &[buf.get(HEADER_LEN..)?]);
        if sum != header.checksum {
            return None;
        }
        let meta_start = key_end.checked_add(usize::try_from(header.tags_len).ok()?)?;
        let meta_end = meta_start.checked_add(usize::try_from(header.meta_len).ok()?)?;
        let body_end = meta_end.checked_add(usize::try_from(header.body_len).ok()?)?;
        if body_end != buf.len() {
            return None;
        }
        Some(FileEntry {
            buf,
            meta: meta_start..meta_end,
            body: meta_end..body_end,
        })
    }
}

/// The fixed header at the start of every entry file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    tag_count: u16,
    key_len: u32,
    tags_len: u32,
    meta_len: u32,
    body_len: u64,
    checksum: u64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&VERSION.to_le_bytes());
        out[6..8].copy_from_slice(&self.tag_count.to_le_bytes());
        out[8..12].copy_from_slice(&self.key_len.to_le_bytes());
        out[12..16].copy_from_slice(&self.tags_len.to_le_bytes());
        out[16..20].copy_from_slice(&self.meta_len.to_le_bytes());
        out[20..28].copy_from_slice(&self.body_len.to_le_bytes());
        out[28..36].copy_from_slice(&self.checksum.to_le_bytes());
        out
    }

    /// Reads the header at the start of `bytes`; `None` if it is short, or of another
    /// format or version.
    fn decode(bytes: &[u8]) -> Option<Header> {
        if bytes.get(0..4)? != MAGIC || le_u16(bytes, 4)? != VERSION {
            return None;
        }
        Some(Header {
            tag_count: le_u16(bytes, 6)?,
            key_len: le_u32(bytes, 8)?,
            tags_len: le_u32(bytes, 12)?,
            meta_len: le_u32(bytes, 16)?,
            body_len: le_u64(bytes, 20)?,
            checksum: le_u64(bytes, 28)?,
        })
    }

    /// The length of the whole file this header describes; `None` on overflow.
    fn file_len(&self) -> Option<u64> {
        (HEADER_LEN as u64)
            .checked_add(u64::from(self.key_len))?
            .checked_add(u64::from(self.tags_len))?
            .checked_add(u64::from(self.meta_len))?
            .checked_add(self.body_len)
    }
}

fn le_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// xxh3 over the header bytes before the checksum field and the parts after the header.
fn checksum(header_prefix: &[u8], rest: &[&[u8]]) -> u64 {
    let mut hasher = Xxh3::new();
    hasher.update(header_prefix);
    for part in rest {
        hasher.update(part);
    }
    hasher.digest()
}

/// Whether the encoded tag list `tags` (`count` entries of `len:u16` + bytes) holds
/// `tag`. A malformed list holds nothing.
fn tags_contain(mut tags: &[u8], count: u16, tag: &[u8]) -> bool {
    for _ in 0..count {
        let Some(len) = le_u16(tags, 0) else {
            return false;
        };
        let end = 2 + usize::from(len);
        let Some(this) = tags.get(2..end) else {
            return false;
        };
        if this == tag {
            return true;
        }
        tags = tags.get(end..).unwrap_or_default();
    }
    false
}

/// Writes all of `parts` to `file`, with as few `writev` calls as the kernel allows.
fn write_all_vectored(file: &mut File, parts: &[&[u8]]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| IoSlice::new(p))
        .collect();
    let mut remaining: usize = parts.iter().map(|p| p.len()).sum();
    let mut bufs = &mut slices[..];
    while remaining > 0 {
        match file.write_vectored(bufs) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "wrote 0 bytes of an entry",
                ))
            }
            Ok(n) => {
                remaining = remaining.saturating_sub(n);
                IoSlice::advance_slices(&mut bufs, n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What a walk found a file to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An entry file (named by a 64-bit hash in hex).
    Entry,
    /// A temp file of a write in progress (or of a crashed one).
    Temp,
}

fn classify(name: &std::ffi::OsStr) -> Option<Kind> {
    let name = name.to_str()?;
    if name.len() == NAME_LEN && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Some(Kind::Entry)
    } else if name.starts_with(TEMP_PREFIX) {
        Some(Kind::Temp)
    } else {
        None
    }
}

fn is_subdir_name(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.len() == 2 && n.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// An entry file as the janitor saw it.
#[derive(Debug)]
struct FileInfo {
    path: PathBuf,
    bytes: u64,
    mtime: SystemTime,
}

/// The result of a full walk: every entry file, and the bytes of entries and fresh temp
/// files together.
#[derive(Debug, Default)]
struct Scan {
    files: Vec<FileInfo>,
    total_bytes: u64,
}

/// Subtracts without wrapping below zero (the gauges are estimates and may race).
fn saturating_sub(counter: &AtomicU64, by: u64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_sub(by))
    });
}

impl FileStore {
    /// Opens (creating it if needed) the cache directory `dir` with a cap of `cap_bytes`.
    /// Entry files already there are the cache; one walk learns how much they take.
    pub(crate) fn open(
        dir: impl AsRef<Path>,
        cap_bytes: u64,
        options: FileOptions,
    ) -> Result<FileStore> {
        if cap_bytes == 0 {
            return Err(StoreError::InvalidOptions(
                "the file cache needs a cap above 0 bytes".into(),
            ));
        }
        if !(options.clean_target > 0.0 && options.clean_target <= 1.0) {
            return Err(StoreError::InvalidOptions(format!(
                "clean_target must be in (0, 1], not {}",
                options.clean_target
            )));
        }
        if options.max_object_bytes < HEADER_LEN as u64 {
            return Err(StoreError::InvalidOptions(format!(
                "max_object_bytes must be at least the {HEADER_LEN}-byte entry header, not {}",
                options.max_object_bytes
            )));
        }
        let root = dir.as_ref().to_path_buf();
        fs::create_dir_all(&root)
            .map_err(|e| io_error(format!("creating cache directory {}", root.display()), e))?;
        let interval_nanos = u64::try_from(options.janitor_interval.as_nanos()).unwrap_or(u64::MAX);
        let store = FileStore {
            root,
            cap_bytes,
            options,
            interval_nanos,
            epoch: Instant::now(),
            last_janitor_nanos: AtomicU64::new(0),
            janitor: Mutex::new(()),
            temp_seq: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            bytes_used: AtomicU64::new(0),
            entries: AtomicU64::new(0),
        };
        let scan = store.scan()?;
        store.bytes_used.store(scan.total_bytes, Ordering::Relaxed);
        store
            .entries
            .store(scan.files.len() as u64, Ordering::Relaxed);
        Ok(store)
    }

    /// Walks the directory and returns the real sum of the sizes of the files this
    /// engine keeps there (entries and temp files). Unreadable parts count as empty.
    pub(crate) fn disk_bytes(&self) -> u64 {
        let mut total = 0u64;
        let _ = self.walk(|_, _, dirent| {
            if let Ok(meta) = dirent.metadata() {
                if meta.is_file() {
                    total = total.saturating_add(meta.len());
                }
            }
        });
        total
    }

    /// Runs the janitor now, waiting for a run in progress on another thread first.
    #[cfg(test)]
    pub(crate) fn run_janitor(&self) -> Result<()> {
        let guard = self
            .janitor
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.janitor_locked(&guard)
    }

    /// Runs the janitor if `janitor_interval` has passed since its last run and no
    /// other thread is running it. Called by `put`, on the putting thread.
    fn maybe_run_janitor(&self) {
        if !self.janitor_due() {
            return;
        }
        let guard = match self.janitor.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        // Another thread may have finished a run between the check and the lock.
        if !self.janitor_due() {
            return;
        }
        if let Err(e) = self.janitor_locked(&guard) {
            tracing::warn!(dir = %self.root.display(), error = %e, "file cache janitor failed");
        }
    }

    fn janitor_due(&self) -> bool {
        let last = self.last_janitor_nanos.load(Ordering::Relaxed);
        self.now_nanos().saturating_sub(last) >= self.interval_nanos
    }

    fn now_nanos(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// One janitor run; the caller holds the janitor lock.
    fn janitor_locked(&self, _running: &MutexGuard<'_, ()>) -> Result<()> {
        let result = self.clean();
        self.last_janitor_nanos
            .store(self.now_nanos(), Ordering::Relaxed);
        result
    }

    /// Walks and stats everything; if the total is over the cap, deletes the oldest
    /// entry files until it is at most `cap * clean_target`. Resets the gauges to what
    /// the walk found.
    fn clean(&self) -> Result<()> {
        let mut scan = self.scan()?;
        let mut total = scan.total_bytes;
        let mut live = scan.files.len() as u64;
        let mut first_error = None;
        if total > self.cap_bytes {
            let target = (self.cap_bytes as f64 * self.options.clean_target) as u64;
            scan.files.sort_unstable_by_key(|f| f.mtime);
            for file in &scan.files {
                if total <= target {
                    break;
                }
                match fs::remove_file(&file.path) {
                    Ok(()) => {
                        self.evicted.fetch_add(1, Ordering::Relaxed);
                    }
                    // Removed (or renamed over and removed) since the walk saw it.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => {
                        first_error.get_or_insert_with(|| {
                            io_error(format!("evicting {}", file.path.display()), e)
                        });
                        continue;
                    }
                }
                total = total.saturating_sub(file.bytes);
                live = live.saturating_sub(1);
            }
        }
        self.bytes_used.store(total, Ordering::Relaxed);
        self.entries.store(live, Ordering::Relaxed);
        first_error.map_or(Ok(()), Err)
    }

    /// One full walk that stats every file; deletes temp files left by crashed writers.
    fn scan(&self) -> Result<Scan> {
        let now = SystemTime::now();
        let mut scan = Scan::default();
        self.walk(|path, kind, dirent| {
            let Ok(meta) = dirent.metadata() else {
                return; // gone since readdir
            };
            if !meta.is_file() {
                return;
            }
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            match kind {
                Kind::Temp => {
                    let stale = now.duration_since(mtime).is_ok_and(|age| age >= TEMP_STALE);
                    if stale {
                        let _ = fs::remove_file(&path);
                    } else {
                        scan.total_bytes = scan.total_bytes.saturating_add(meta.len());
                    }
                }
                Kind::Entry => {
                    scan.total_bytes = scan.total_bytes.saturating_add(meta.len());
                    scan.files.push(FileInfo {
                        path,
                        bytes: meta.len(),
                        mtime,
                    });
                }
            }
        })?;
        Ok(scan)
    }

    /// Calls `visit` for every entry and temp file in the two-level tree.
    fn walk(&self, mut visit: impl FnMut(PathBuf, Kind, &fs::DirEntry)) -> Result<()> {
        let top = fs::read_dir(&self.root).map_err(|e| {
            io_error(
                format!("reading cache directory {}", self.root.display()),
                e,
            )
        })?;
        for sub in top {
            let sub = sub.map_err(|e| {
                io_error(
                    format!("reading cache directory {}", self.root.display()),
                    e,
                )
            })?;
            if !is_subdir_name(&sub.file_name()) || !sub.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dir = sub.path();
            let files = match fs::read_dir(&dir) {
                Ok(files) => files,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(io_error(
                        format!("reading cache directory {}", dir.display()),
                        e,
                    ))
                }
            };
            for file in files {
                let file = file.map_err(|e| {
                    io_error(format!("reading cache directory {}", dir.display()), e)
                })?;
                if let Some(kind) = classify(&file.file_name()) {
                    visit(file.path(), kind, &file);
                }
            }
        }
        Ok(())
    }

    /// The subdirectory and file name of the entry whose key hashes to `hash`.
    fn entry_location(&self, hash: u64) -> (PathBuf, String) {
        let name = format!("{hash:016x}");
        let dir = self.root.join(&name[..2]);
        (dir, name)
    }

    fn entry_path(&self, hash: u64) -> PathBuf {
        let (dir, name) = self.entry_location(hash);
        dir.join(name)
    }

    /// Writes `parts` to the new file `tmp` in `dir` (creating `dir` if needed), synced
    /// if asked. On failure the temp file is removed.
    fn write_temp(&self, dir: &Path, tmp: &Path, parts: &[&[u8]]) -> Result<()> {
        let create = || OpenOptions::new().write(true).create_new(true).open(tmp);
        let mut file = match create() {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(dir).map_err(|e| {
                    io_error(format!("creating cache directory {}", dir.display()), e)
                })?;
                create().map_err(|e| io_error(format!("creating {}", tmp.display()), e))?
            }
            Err(e) => return Err(io_error(format!("creating {}", tmp.display()), e)),
        };
        let mut written = write_all_vectored(&mut file, parts);
        if written.is_ok() && self.options.fsync {
            written = file.sync_all();
        }
        drop(file);
        if let Err(e) = written {
            let _ = fs::remove_file(tmp);
            return Err(io_error(format!("writing {}", tmp.display()), e));
        }
        Ok(())
    }

    /// Whether the entry file at `path` carries `tag`; reads only its header and tags.
    /// Returns the file's length (from its header) if it does.
    fn tagged_len(path: &Path, tag: &[u8]) -> Option<u64> {
        let mut file = File::open(path).ok()?;
        let mut head = [0u8; HEADER_LEN];
        file.read_exact(&mut head).ok()?;
        let header = Header::decode(&head)?;
        let want = u64::from(header.key_len) + u64::from(header.tags_len);
        let mut buf = Vec::new();
        file.take(want).read_to_end(&mut buf).ok()?;
        if u64::try_from(buf.len()).ok()? != want {
            return None;
        }
        let tags = buf.get(usize::try_from(header.key_len).ok()?..)?;
        if tags_contain(tags, header.tag_count, tag) {
            header.file_len()
        } else {
            None
        }
    }

    fn forget_file(&self, bytes: u64) {
        saturating_sub(&self.bytes_used, bytes);
        saturating_sub(&self.entries, 1);
    }
}

impl Engine for FileStore {
    type Entry = FileEntry;

    fn put(&self, key: &[u8], meta: &[u8], body: &[u8], tags: &[&[u8]]) -> Result<Put> {
        let (head, size) = encode_head(key, meta, body, tags, self.options.max_object_bytes)?;
        let (dir, name) = self.entry_location(xxh3_64(key));
        let seq = self.temp_seq.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!("{TEMP_PREFIX}{name}-{}-{seq}", std::process::id()));
        let path = dir.join(&name);
        self.write_temp(&dir, &tmp, &[&head, meta, body])?;

        // For the gauges only: what the rename is about to replace.
        let replaced = fs::symlink_metadata(&path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        if let Err(e) = fs::rename(&tmp, &path) {
            let _ = fs::remove_file(&tmp);
            return Err(io_error(
                format!("renaming {} to {}", tmp.display(), path.display()),
                e,
            ));
        }
        self.bytes_used.fetch_add(size, Ordering::Relaxed);
        match replaced {
            Some(old) => saturating_sub(&self.bytes_used, old),
            None => {
                self.entries.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.admitted.fetch_add(1, Ordering::Relaxed);

        self.maybe_run_janitor();
        Ok(Put::Stored)
    }

    fn get(&self, key: &[u8]) -> Option<FileEntry> {
        let path = self.entry_path(xxh3_64(key));
        let found = fs::read(&path)
            .ok()
            .and_then(|buf| FileEntry::parse(buf, key));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Unlinks the file `key` hashes to. (Should another key share the 64-bit hash, its
    /// file is the one removed; a cache may always drop an entry.)
    fn remove(&self, key: &[u8]) -> Result<bool> {
        let path = self.entry_path(xxh3_64(key));
        let bytes = match fs::symlink_metadata(&path) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error(format!("stat {}", path.display()), e)),
        };
        match fs::remove_file(&path) {
            Ok(()) => {
                self.forget_file(bytes);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error(format!("removing {}", path.display()), e)),
        }
    }

    /// Walks the whole tree and reads every entry's header and tags: there is no tag
    /// index in this design.
    fn remove_tagged(&self, tag: &[u8]) -> Result<usize> {
        let mut paths = Vec::new();
        self.walk(|path, kind, _| {
            if kind == Kind::Entry {
                paths.push(path);
            }
        })?;
        let mut removed = 0;
        for path in paths {
            let Some(bytes) = Self::tagged_len(&path, tag) else {
                continue;
            };
            match fs::remove_file(&path) {
                Ok(()) => {
                    self.forget_file(bytes);
                    removed += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(io_error(format!("removing {}", path.display()), e));
                }
            }
        }
        Ok(removed)
    }

    fn stats(&self) -> Stats {
        Stats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            admitted: self.admitted.load(Ordering::Relaxed),
            rejected: 0,
            evicted: self.evicted.load(Ordering::Relaxed),
            carried: 0,
            ram_hits: 0,
            bytes_used: self.bytes_used.load(Ordering::Relaxed),
            bytes_live: self.bytes_used.load(Ordering::Relaxed),
            cap_bytes: self.cap_bytes,
            entries: self.entries.load(Ordering::Relaxed),
            index_bytes: 0,
            tag_index_bytes: 0,
            ram_bytes: 0,
            huge_pages: false,
        }
    }

    fn name(&self) -> &'static str {
        "file"
    }
}

/// An entry file's first part, checked against the format's field limits and
/// `max_object_bytes`: header (with the checksum over everything), key and tags. Meta
/// and body follow it in the file, written from the caller's slices. Returns it and
/// the whole file's length.
fn encode_head(
    key: &[u8],
    meta: &[u8],
    body: &[u8],
    tags: &[&[u8]],
    max_object_bytes: u64,
) -> Result<(Vec<u8>, u64)> {
    let too_long = |what: &'static str, len: usize, limit: usize| StoreError::FieldTooLong {
        what,
        len,
        limit,
    };
    let key_len =
        u32::try_from(key.len()).map_err(|_| too_long("key", key.len(), u32::MAX as usize))?;
    let tag_count = u16::try_from(tags.len())
        .map_err(|_| too_long("tag list", tags.len(), usize::from(u16::MAX)))?;
    let mut tags_bytes = 0usize;
    for tag in tags {
        if tag.len() > usize::from(u16::MAX) {
            return Err(too_long("tag", tag.len(), usize::from(u16::MAX)));
        }
        tags_bytes += 2 + tag.len();
    }
    let tags_len =
        u32::try_from(tags_bytes).map_err(|_| too_long("tags", tags_bytes, u32::MAX as usize))?;
    let meta_len =
        u32::try_from(meta.len()).map_err(|_| too_long("meta", meta.len(), u32::MAX as usize))?;
    let body_len = body.len() as u64;
    let header = Header {
        tag_count,
        key_len,
        tags_len,
        meta_len,
        body_len,
        checksum: 0,
    };
    let size = header.file_len().unwrap_or(u64::MAX);
    if size > max_object_bytes {
        return Err(StoreError::TooLarge {
            size_bytes: size,
            limit_bytes: max_object_bytes,
        });
    }

    // Header, key and tags in one small buffer; meta and body are written from the
    // caller's slices by the same writev.
    let mut head = Vec::with_capacity(HEADER_LEN + key.len() + tags_bytes);
    head.extend_from_slice(&[0u8; HEADER_LEN]);
    head.extend_from_slice(key);
    for tag in tags {
        // Checked above: every tag fits a u16 length.
        head.extend_from_slice(&(tag.len() as u16).to_le_bytes());
        head.extend_from_slice(tag);
    }
    let mut encoded = header.encode();
    let sum = checksum(&encoded[..CHECKSUM_AT], &[&head[HEADER_LEN..], meta, body]);
    encoded[CHECKSUM_AT..].copy_from_slice(&sum.to_le_bytes());
    head[..HEADER_LEN].copy_from_slice(&encoded);
    Ok((head, size))
}

/// An I/O error with what was being done, in the store's error type (the baseline
/// reports through the same [`Engine`] contract as the store).
fn io_error(context: impl Into<String>, source: io::Error) -> StoreError {
    StoreError::Io {
        context: context.into(),
        source,
    }
}

#[cfg(test)]
mod tests;
