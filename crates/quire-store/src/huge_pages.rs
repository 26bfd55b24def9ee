//! Whether the volume's mapping asks the kernel for 2 MiB pages, and the memory
//! limit that decides it.
//!
//! A hit's body is copied by the kernel from the mapping into the socket. With the
//! page cache's 4 KiB pages, a working set of a few thousand pages (28 MB for the
//! peer corpus's 2,000 pages) is more than the CPU's TLB covers, and the copy walks
//! page tables: in a profile of quire proxy at saturation that copy was 1.42x the
//! same copy from the heap's huge pages (`bench http --peer floor-corpus`). Asked
//! for huge pages (`madvise(MADV_HUGEPAGE)`), a filesystem with large folios (ext4
//! since Linux 6.16, xfs before it, tmpfs mounted `huge=`) reads the volume in 2 MiB folios
//! and maps them whole; the copy then cost what the heap's did, and a hit about 6 %
//! less CPU (`docs/performance.md`, "A hit against the machine's floor"). Where the
//! filesystem or kernel cannot, the advice does nothing.
//!
//! The price is paid in 2 MiB units, which is why [`HugePages::Auto`] asks only for a
//! volume that fits in memory twice over:
//! - **Memory**: a page of the volume that is touched brings in its whole 2 MiB, so
//!   the volume tends to be resident whole (clean page cache, which the kernel may
//!   drop), and under memory pressure the hot set is kept and lost 2 MiB at a time. A
//!   volume bigger than the memory the process may use is the case `crate::residency`
//!   handles, and there huge pages would make every cold read read 2 MiB. A restart's
//!   scan reads every region's header, so the free regions' folios are let go after
//!   it ([`release_free_regions`]).
//! - **Writes**: a write through the mapping marks its whole folio dirty, so writeback
//!   writes 2 MiB for a small entry, a flags update or a region header. Puts append
//!   within a region, so a folio is filled by consecutive puts and written back a few
//!   times at most while it fills; a fresh volume's region headers are not written at
//!   all (`recovery::format`: the file reads as zeros).

use std::path::Path;

/// Lets go of what the recovery scan brought into memory for the regions it found
/// free, when the mapping has huge pages and a region spans at least one (smaller
/// regions share their huge pages with used neighbours, whose bytes stay). The scan
/// reads every region's header through the mapping, and with huge pages each read
/// brings in the header's whole 2 MiB folio: a restarted 1 GiB volume (128 regions)
/// holding 1.5 MB of entries had 268 MB of page cache mapped (`Pss_File`), against
/// 14 MB before the restart and after it with this release. Those bytes are clean (the scan
/// only reads), so they are dropped, not written; a writer that opens the region
/// later brings its pages in again. (Regions start one 4 KiB page past a huge
/// page's boundary, so a free region's first huge page holds its used neighbour's
/// last page, dropped too and read again when asked for.) Errors are ignored: this
/// only returns memory.
pub(crate) fn release_free_regions(
    volume: &crate::volume::Volume,
    header: &crate::layout::VolumeHeader,
    free: &[u32],
) {
    if volume.huge().is_none_or(|huge| header.region_bytes < huge) {
        return;
    }
    for &r in free {
        let at = header.region_start(r);
        let _ = volume.page_out(at, crate::layout::REGION_HEADER_BYTES);
    }
}

/// Whether the volume's mapping asks for 2 MiB pages (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HugePages {
    /// When the volume is at most half of the memory the process may use (the
    /// default).
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never: the page cache's own page size.
    Never,
}

impl HugePages {
    /// Whether a volume of `volume_bytes` asks for huge pages when the process may use
    /// `memory` bytes (`None`: not known, and `Auto` does not ask).
    pub(crate) fn wanted(self, volume_bytes: u64, memory: Option<u64>) -> bool {
        match self {
            HugePages::Always => true,
            HugePages::Never => false,
            HugePages::Auto => memory.is_some_and(|m| volume_bytes <= m / 2),
        }
    }
}

/// The kernel's huge page size for mappings (`hpage_pmd_size`: 2 MiB on x86-64 and on
/// arm64 with 4 KiB pages, more with larger base pages); 2 MiB where it cannot say.
pub(crate) fn huge_page_bytes() -> u64 {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n: &u64| n.is_power_of_two())
        .unwrap_or(2 << 20)
}

/// The memory this process may use: the least of the machine's (`MemTotal`) and every
/// memory cgroup limit above it (v2 `memory.max`, v1 `memory.limit_in_bytes`).
/// `None` when not even `MemTotal` can be read.
pub(crate) fn memory_limit() -> Option<u64> {
    memory_limit_from(|p| std::fs::read_to_string(p).ok())
}

/// [`memory_limit`], with the files read by `read`.
fn memory_limit_from(read: impl Fn(&Path) -> Option<String>) -> Option<u64> {
    let total = read(Path::new("/proc/meminfo")).and_then(|s| mem_total(&s));
    let cgroups = read(Path::new("/proc/self/cgroup")).unwrap_or_default();
    let limits = cgroup_limit_files(&cgroups)
        .into_iter()
        .filter_map(|f| read(&f))
        .filter_map(|s| cgroup_limit(&s));
    total.into_iter().chain(limits).min()
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line.split_whitespace().skip(1);
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// A cgroup limit file's value in bytes; `None` for `max` (no limit) or garbage. v1
/// writes "no limit" as a number near `i64::MAX`, which the minimum then ignores.
fn cgroup_limit(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// The limit files of this process's memory cgroups, from its `/proc/self/cgroup`:
/// the cgroup's own and each ancestor's (a parent's limit binds too), v2 and v1.
fn cgroup_limit_files(proc_cgroup: &str) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (roots, file): (&[&str], _) = if controllers.is_empty() {
            (&["/sys/fs/cgroup", "/sys/fs/cgroup/unified"], "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            (&["/sys/fs/cgroup/memory"], "memory.limit_in_bytes")
        } else {
            continue;
        };
        // A path of `..` or worse (another namespace's view) names nothing here.
        if path.split('/').any(|c| c == "..") {
            continue;
        }
        for root in roots {
            let mut dir = Path::new(root).join(path.trim_start_matches('/'));
            loop {
                files.push(dir.join(file));
                if dir.as_path() == Path::new(root) || !dir.pop() {
                    break;
                }
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_asks_only_for_a_volume_of_at_most_half_the_memory() {
        let gib = 1u64 << 30;
        assert!(HugePages::Auto.wanted(gib, Some(2 * gib)));
        assert!(!HugePages::Auto.wanted(gib + 1, Some(2 * gib)));
        assert!(!HugePages::Auto.wanted(gib, None));
        assert!(HugePages::Always.wanted(64 * gib, Some(gib)));
        assert!(!HugePages::Never.wanted(1, Some(64 * gib)));
    }

    #[test]
    fn mem_total_is_read_in_bytes() {
        let meminfo = "MemFree:   100 kB\nMemTotal:       24684092 kB\nBuffers: 1 kB\n";
        assert_eq!(mem_total(meminfo), Some(24_684_092 * 1024));
        assert_eq!(mem_total("MemTotal: 12 MB\n"), None);
        assert_eq!(mem_total("nothing\n"), None);
    }

    #[test]
    fn a_cgroup_limit_of_max_is_no_limit() {
        assert_eq!(cgroup_limit("1073741824\n"), Some(1 << 30));
        assert_eq!(cgroup_limit("max\n"), None);
        assert_eq!(
            cgroup_limit("9223372036854771712\n"),
            Some(9_223_372_036_854_771_712)
        );
    }

    /// v1 and v2 lines name the cgroup's own file and every ancestor's, up to the
    /// controller's root; other controllers and `..` paths name none.
    #[test]
    fn limit_files_cover_the_cgroup_and_its_ancestors() {
        let files = cgroup_limit_files(
            "9:name=systemd:/\n4:memory:/a/b\n3:cpuset:/\n0::/c\n2:cpu,memory:/../x\n",
        );
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        assert_eq!(
            names,
            [
                "/sys/fs/cgroup/memory/a/b/memory.limit_in_bytes",
                "/sys/fs/cgroup/memory/a/memory.limit_in_bytes",
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "/sys/fs/cgroup/c/memory.max",
                "/sys/fs/cgroup/memory.max",
                "/sys/fs/cgroup/unified/c/memory.max",
                "/sys/fs/cgroup/unified/memory.max",
            ]
        );
    }

    /// The store says which it did: never when told never, and always when told
    /// always wherever the kernel has transparent huge pages to ask for; the volume
    /// reads back what was written either way.
    #[test]
    fn the_store_asks_as_told_and_reads_back_its_entries() {
        use crate::{Engine as _, EntryRef as _, Options, Store};
        let thp = Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
        for (mode, want) in [(HugePages::Never, false), (HugePages::Always, thp)] {
            let dir = tempfile::tempdir().unwrap();
            let options = Options {
                huge_pages: mode,
                ..Options::default()
            };
            let path = dir.path().join("v");
            let store = Store::open(&path, 16 << 20, options.clone()).unwrap();
            assert_eq!(store.stats().huge_pages, want, "{mode:?}");
            let body = vec![7u8; 100_000];
            store.put(b"k", b"meta", &body, &[]).unwrap();
            store.close().unwrap();
            let store = Store::open(&path, 16 << 20, options).unwrap();
            let h = store.get(b"k").expect("kept across a reopen");
            assert_eq!((h.meta(), h.body()), (&b"meta"[..], &body[..]), "{mode:?}");
        }
    }

    /// Reopened with huge pages, a volume keeps none of its free regions' headers in
    /// memory (the scan's 2 MiB each are let go), and its entry still reads back.
    #[test]
    fn a_reopened_volume_lets_its_free_regions_go() {
        use crate::{Engine as _, EntryRef as _, Options, Store};
        if !Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v");
        let options = Options {
            huge_pages: HugePages::Always,
            region_bytes: Some(4 << 20),
            ..Options::default()
        };
        let store = Store::open(&path, 64 << 20, options.clone()).unwrap();
        store.put(b"k", b"m", &[1u8; 5000], &[]).unwrap();
        store.close().unwrap();
        let store = Store::open(&path, 64 << 20, options).unwrap();
        let s = store.shared();
        let free: Vec<u32> = (0..s.header.region_count)
            .filter(|&r| !s.volume.resident(s.header.region_start(r), 64))
            .collect();
        assert!(
            free.len() + 1 >= s.header.region_count as usize,
            "only the entry's region may stay in memory: {} of {} left",
            free.len(),
            s.header.region_count
        );
        assert_eq!(store.get(b"k").expect("kept").body(), &[1u8; 5000][..]);
    }

    /// The least of `MemTotal` and the limits along the cgroup's path binds: a
    /// parent's v1 limit under a leaf without one, a v2 `max` ignored; with nothing
    /// readable there is no limit to go by.
    #[test]
    fn the_memory_limit_is_the_least_that_binds() {
        let files = |pairs: &'static [(&'static str, &'static str)]| {
            move |p: &Path| {
                pairs
                    .iter()
                    .find(|(name, _)| Path::new(name) == p)
                    .map(|(_, text)| (*text).to_owned())
            }
        };
        let gib = 1u64 << 30;
        let machine = files(&[
            ("/proc/meminfo", "MemTotal: 8388608 kB\n"),
            ("/proc/self/cgroup", "4:memory:/a/b\n0::/c\n"),
            (
                "/sys/fs/cgroup/memory/a/b/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/a/memory.limit_in_bytes",
                "1073741824\n",
            ),
            ("/sys/fs/cgroup/c/memory.max", "max\n"),
        ]);
        assert_eq!(memory_limit_from(machine), Some(gib));
        let roomy = files(&[
            ("/proc/meminfo", "MemTotal: 1048576 kB\n"),
            ("/proc/self/cgroup", "0::/c\n"),
            ("/sys/fs/cgroup/c/memory.max", "4294967296\n"),
        ]);
        assert_eq!(memory_limit_from(roomy), Some(gib), "the machine's is less");
        assert_eq!(memory_limit_from(files(&[])), None);
    }
}
