//! The volume file and its mapping: create/preallocate/open, raw reads and writes.
//!
//! This module (with `handle`) is where the store's `unsafe` lives. The mapping is a
//! `MmapRaw`: no `&mut [u8]` over it ever exists, because readers hold `&[u8]` slices
//! into entries while writers append elsewhere. Who may touch which bytes is the
//! store's protocol, stated where it is upheld:
//! - bytes of an entry, once published in the index, are never written again while its
//!   region keeps its generation, except the entry's `flags` word, which is only
//!   accessed atomically (`store_flags`/`read_entry_header`);
//! - a writer writes only the bytes it reserved (`reclaim`: disjoint ranges handed out
//!   under the allocation lock, past every published entry), holding a pin on the region
//!   until its entry is published;
//! - a region's generation changes only when a reclaimer claims it with no pin held
//!   (`region::RegionTable::try_claim`), and only then may that reclaimer rewrite it;
//! - region headers are written only by the writer that opens or reclaims the region;
//!   readers never read them.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Result, StoreError};
use crate::layout::{self, EntryHeader, VolumeHeader};
use crate::layout::{ENTRY_FLAGS_AT, ENTRY_HEADER_BYTES, VOLUME_HEADER_BYTES};

/// An open, mapped volume file of exactly `len` bytes.
#[derive(Debug)]
pub(crate) struct Volume {
    path: PathBuf,
    file: File,
    map: MmapRaw,
    len: u64,
    /// The huge page's size when the mapping asked for them ([`Volume::advise_huge`]).
    huge: Option<u64>,
}

impl Volume {
    /// Opens `path` (creating it if missing), makes it exactly `len` bytes with the blocks
    /// of its first `used` bytes allocated (so a full disk fails here, not as SIGBUS on a
    /// later write), and maps it. The bytes from `used` to `len` (the layout's tail too
    /// short for a region) are never written: they are left a hole, and punched out of
    /// a file that had them allocated. That tail is what keeps the file's blocks within
    /// `len` once the filesystem adds its own: ext4 splits a preallocated extent at
    /// every boundary between written and not-yet-written blocks, and the block map of
    /// a volume written piecemeal outgrows its inode (4 KiB over a 16 MiB cap in
    /// `quire bench store`'s overflow run when the whole file was allocated).
    /// With `wipe`, or when the size differs, the old contents are discarded (the file
    /// is truncated to nothing first, so no byte of an earlier life survives).
    /// Returns the volume and whether it starts zeroed. The file stays locked
    /// (`flock`, exclusive) while the volume is open: a second open fails with
    /// [`StoreError::InUse`].
    ///
    /// A volume that cannot be sized or preallocated (a full disk) is not left
    /// behind: a file this call created is removed, one it resized is emptied, so
    /// the next start begins afresh instead of meeting a file of zeros it will not
    /// overwrite.
    pub(crate) fn open(path: &Path, len: u64, used: u64, wipe: bool) -> Result<(Volume, bool)> {
        assert!(len >= used && used >= VOLUME_HEADER_BYTES);
        let ctx = |what: &str| format!("{what} {}", path.display());
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| StoreError::io(ctx("opening volume"), e))?;
        // One store per volume: the lock is taken before anything is resized, and
        // held as long as the file is open (the kernel drops it with the process, so
        // a kill -9 leaves no stale lock).
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(StoreError::InUse {
                    path: path.to_owned(),
                })
            }
            Err(e) => return Err(StoreError::io(ctx("locking"), e.into())),
        }
        let old_len = file
            .metadata()
            .map_err(|e| StoreError::io(ctx("reading metadata of"), e))?
            .len();
        let fresh = wipe || old_len != len;
        // Undoes a half-made volume (see above).
        let undo = |file: &File| {
            let _ = file.set_len(0);
            if !existed {
                let _ = std::fs::remove_file(path);
            }
        };
        if fresh {
            if let Err(e) = file.set_len(0).and_then(|()| file.set_len(len)) {
                undo(&file);
                return Err(StoreError::io(ctx("sizing"), e));
            }
        }
        // Allocate every block now. Filesystems without fallocate fall back to the
        // sparse file set_len made (tmpfs and ext4 have it).
        match rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, used) {
            Ok(()) => {}
            Err(rustix::io::Errno::OPNOTSUPP) | Err(rustix::io::Errno::NOSYS) => {}
            Err(e) => {
                if fresh {
                    undo(&file);
                }
                return Err(StoreError::io(ctx("preallocating"), e.into()));
            }
        }
        punch_tail(&file, used, len);
        let map = MmapOptions::new()
            .len(len as usize)
            .map_raw(&file)
            .map_err(|e| StoreError::io(ctx("mapping"), e))?;
        Ok((
            Volume {
                path: path.to_owned(),
                file,
                map,
                len,
                huge: None,
            },
            fresh,
        ))
    }

    /// The mapping's length.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Asks the kernel to back the mapping with huge pages of `size` bytes where the
    /// filesystem can; `false` if it refused the advice. (Whether to ask is the
    /// store's to decide, by its huge-pages module.)
    pub(crate) fn advise_huge(&mut self, size: u64) -> bool {
        let asked = self.map.advise(memmap2::Advice::HugePage).is_ok();
        self.huge = asked.then_some(size);
        asked
    }

    /// The huge page's size, when the mapping asked for huge pages.
    pub(crate) fn huge(&self) -> Option<u64> {
        self.huge
    }

    /// The mapping's address and length (bytes at `addr + off` are the file's bytes
    /// at `off`).
    pub(crate) fn span(&self) -> (usize, u64) {
        (self.map.as_ptr() as usize, self.len)
    }

    fn check(&self, off: u64, len: u64) {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "volume access {off}+{len} past {}",
            self.len
        );
    }

    /// Borrows `len` bytes at `off`.
    ///
    /// # Safety
    /// For as long as the slice lives, no one writes those bytes: the caller holds a
    /// pin on the region they lie in (or has claimed it, or runs before any other thread
    /// has the store), and the range excludes every entry `flags` word.
    pub(crate) unsafe fn slice(&self, off: u64, len: u64) -> &[u8] {
        self.check(off, len);
        // SAFETY: the range is inside the mapping (checked above), which lives as long
        // as `self`; the caller guarantees no writer touches it while borrowed.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off as usize), len as usize) }
    }

    /// Copies `bytes` into the volume at `off`.
    ///
    /// # Safety
    /// The caller reserved these bytes (or claimed their region) and no reader can
    /// reach them: no published entry covers them.
    pub(crate) unsafe fn write(&self, off: u64, bytes: &[u8]) {
        self.check(off, bytes.len() as u64);
        // SAFETY: in bounds (checked); exclusive by the caller's guarantee; `bytes` is
        // a distinct allocation or an earlier range of the mapping that the caller
        // staged into a buffer, never overlapping the destination.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.as_mut_ptr().add(off as usize),
                bytes.len(),
            )
        }
    }

    /// The 40-byte entry header at `off`, reading the flags word atomically because a
    /// remover may flip it while readers look at the rest.
    ///
    /// # Safety
    /// As for [`Volume::slice`] on the header range, flags excepted.
    pub(crate) unsafe fn read_entry_header(&self, off: u64) -> [u8; ENTRY_HEADER_BYTES as usize] {
        let mut h = [0u8; ENTRY_HEADER_BYTES as usize];
        // SAFETY: forwarded from the caller: nobody writes these bytes but the flags.
        let head = unsafe { self.slice(off, ENTRY_FLAGS_AT as u64) };
        h[..ENTRY_FLAGS_AT].copy_from_slice(head);
        let rest_at = ENTRY_FLAGS_AT as u64 + 2;
        // SAFETY: as above.
        let rest = unsafe { self.slice(off + rest_at, ENTRY_HEADER_BYTES - rest_at) };
        h[rest_at as usize..].copy_from_slice(rest);
        let flags = self.flags_atomic(off).load(Ordering::Relaxed);
        h[ENTRY_FLAGS_AT..ENTRY_FLAGS_AT + 2].copy_from_slice(&flags.to_le_bytes());
        h
    }

    /// The entries of region `r` written under generation `gen32`, as (offset in the
    /// region, header), stopping where its log ends ([`layout::region_log`] over the
    /// mapping). Does not check checksums. Callers are reclaim (region claimed), a pin
    /// holder, or recovery (no other thread): nobody writes these bytes but the atomic
    /// flags word, which `read_entry_header` reads as such.
    pub(crate) fn entries(
        &self,
        header: &VolumeHeader,
        r: u32,
        gen32: u32,
    ) -> impl Iterator<Item = (u64, EntryHeader)> + '_ {
        let start = header.region_start(r);
        layout::region_log(header.region_bytes, gen32, move |off| {
            // SAFETY: see above: the region is claimed, pinned or not yet shared.
            unsafe { self.read_entry_header(start + off) }
        })
    }

    /// Sets an entry's flags word (marks it dead on disk).
    pub(crate) fn store_flags(&self, entry_off: u64, flags: u16) {
        self.flags_atomic(entry_off).store(flags, Ordering::Relaxed);
    }

    fn flags_atomic(&self, entry_off: u64) -> &AtomicU16 {
        let at = entry_off + ENTRY_FLAGS_AT as u64;
        self.check(at, 2);
        assert_eq!(at % 2, 0, "entry flags must be 2-aligned");
        // SAFETY: in bounds and 2-aligned (checked; the mapping is page-aligned); the
        // flags word is only ever accessed through this atomic view after publication,
        // and the mapping outlives the returned reference (tied to `&self`).
        unsafe { AtomicU16::from_ptr(self.map.as_mut_ptr().add(at as usize).cast()) }
    }

    /// An atomic view of a u64 in the volume header (clean marker, next-gen hint).
    pub(crate) fn header_word(&self, at: usize) -> &AtomicU64 {
        assert!(at.is_multiple_of(8) && (at as u64) + 8 <= VOLUME_HEADER_BYTES);
        // SAFETY: in bounds and 8-aligned; these header words are only accessed through
        // this atomic view once the volume is open; lifetime tied to `&self`.
        unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(at).cast()) }
    }

    /// The page-aligned span of the mapping that holds `[off, off+len)`: its start
    /// and length.
    fn pages_of(&self, off: u64, len: u64) -> (*mut u8, usize) {
        self.check(off, len);
        let page = page_bytes();
        let start = off - off % page;
        let end = (off + len).div_ceil(page) * page;
        let end = end.min(self.len.div_ceil(page) * page);
        // SAFETY: `start` is inside the mapping (checked above, rounded down).
        let at = unsafe { self.map.as_mut_ptr().add(start as usize) };
        (at, (end - start) as usize)
    }

    /// Whether every page of `[off, off+len)` is in memory now (`mincore`): reading
    /// it will not wait on the disk. An error answers yes (the read then faults as
    /// it would have anyway).
    pub(crate) fn resident(&self, off: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let (at, span) = self.pages_of(off, len);
        let pages = span.div_ceil(page_bytes() as usize);
        let mut small = [0u8; 64];
        let mut large = Vec::new();
        let vec: &mut [u8] = if pages <= small.len() {
            &mut small[..pages]
        } else {
            large.resize(pages, 0);
            &mut large
        };
        // SAFETY: `at` is page-aligned, `[at, at+span)` lies in our mapping, and
        // `vec` has one byte per page of it, as mincore(2) requires; the kernel only
        // writes `vec`.
        let r = unsafe { libc::mincore(at.cast(), span, vec.as_mut_ptr()) };
        r != 0 || vec.iter().all(|b| b & 1 == 1)
    }

    /// Brings `[off, off+len)` into memory: asks the kernel to read it ahead, then
    /// reads a byte of every page. Blocks on the disk: call it off the request path.
    pub(crate) fn warm(&self, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (at, span) = self.pages_of(off, len);
        // SAFETY: a page-aligned range of our own mapping; WILLNEED only starts reads.
        let _ = unsafe { rustix::mm::madvise(at.cast(), span, rustix::mm::Advice::WillNeed) };
        let page = page_bytes() as usize;
        for i in (0..span).step_by(page) {
            // SAFETY: inside the mapping; a volatile read of one byte changes nothing
            // and is not optimised away, so the page is faulted in here.
            unsafe { std::ptr::read_volatile(at.add(i)) };
        }
    }

    /// Drops `[off, off+len)` from memory (written back first), as memory pressure
    /// would: for tests and benchmarks of cold reads, and for the free regions after
    /// a restart's scan (by the store's huge-pages module). The caller holds
    /// no borrow of those bytes across this call. With huge pages, the whole huge
    /// pages around the range go, as pressure takes them (the kernel does not evict
    /// part of a folio).
    pub(crate) fn page_out(&self, off: u64, len: u64) -> Result<()> {
        let (off, len) = match self.huge {
            Some(huge) => {
                let start = off - off % huge;
                let end = (off + len).div_ceil(huge) * huge;
                (start, end.min(self.len) - start)
            }
            None => (off, len),
        };
        self.flush_range(off, len)?;
        let (at, span) = self.pages_of(off, len);
        let io = |e| StoreError::io(format!("paging out {}", self.path.display()), e);
        // SAFETY: our own mapping; DONTNEED on a shared file mapping drops the
        // page-table entries only (the file keeps the bytes, just flushed), and a
        // reader that touches them later faults them in again.
        unsafe { rustix::mm::madvise(at.cast(), span, rustix::mm::Advice::LinuxDontNeed) }
            .map_err(|e| io(e.into()))?;
        let start = at as u64 - self.map.as_ptr() as u64;
        let len = std::num::NonZeroU64::new(span as u64);
        rustix::fs::fadvise(&self.file, start, len, rustix::fs::Advice::DontNeed)
            .map_err(|e| io(e.into()))
    }

    /// Writes dirty pages of `[off, off+len)` back to the file and waits.
    pub(crate) fn flush_range(&self, off: u64, len: u64) -> Result<()> {
        self.check(off, len);
        self.map
            .flush_range(off as usize, len as usize)
            .map_err(|e| StoreError::io(format!("flushing {}", self.path.display()), e))
    }

    pub(crate) fn flush(&self) -> Result<()> {
        self.flush_range(0, self.len)
    }
}

/// Deallocates bytes `used..len` of `file` (a volume made before the tail was left a
/// hole had it allocated). Best effort: a filesystem that cannot punch holes keeps
/// them, as it did before.
fn punch_tail(file: &File, used: u64, len: u64) {
    if len > used {
        let flags = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
        let _ = rustix::fs::fallocate(file, flags, used, len - used);
    }
}

/// The system's page size.
fn page_bytes() -> u64 {
    rustix::param::page_size() as u64
}
