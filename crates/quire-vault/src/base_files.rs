//! A vault's `.base` files (Obsidian Bases): read when the vault loads, parsed once,
//! and named as embeds name them (`![[Reading list.base]]`, any case, by file name
//! like an attachment).
//!
//! Key decisions:
//! - **A `.base` file is never an attachment**: its YAML is not served (its filters
//!   may name private folders or tags); it is only ever run, into the page that
//!   embeds it, for that page's reader.
//! - **Bounded**: a file over [`BASE_FILE_BYTES_MAX`] is not read (its embeds show
//!   why), and the YAML is parsed within the front matter's bounds; a file that does
//!   not parse keeps its error, shown where it is embedded. A reload re-reads only
//!   the files whose size or modification time changed.
//! - What names one view of a base in a page ([`BaseRef`]: a file or a block's YAML,
//!   and the view) and the runs a vault keeps ([`BaseMemo`]) live here, below both
//!   the vault and the renderer that fills them (`render::base`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::bases::{read, Base, BaseError};
use crate::note::Visibility;

/// The largest `.base` file read: Obsidian's are a few hundred bytes.
pub const BASE_FILE_BYTES_MAX: u64 = 256 * 1024;

/// One `.base` file.
#[derive(Debug)]
pub struct BaseFile {
    /// Vault-relative path.
    pub path: String,
    /// Its stamp (size and modification time), for reloads.
    pub(crate) stamp: u64,
    /// The base, or why it could not be read.
    pub base: Result<Base, BaseError>,
}

/// Whether the vault-relative path `rel` is a base file.
pub(crate) fn is_base(rel: &str) -> bool {
    rel.len() > 5 && rel[rel.len() - 5..].eq_ignore_ascii_case(".base")
}

/// The name an embed finds `rel` by: its file name, lower-cased.
pub(crate) fn name_of(rel: &str) -> String {
    rel.rsplit('/').next().unwrap_or(rel).to_lowercase()
}

/// Reads the base file at `rel` under `root`, stamped `stamp`, unless `previous`
/// holds it with the same stamp.
pub(crate) fn load(
    root: &Path,
    rel: &str,
    stamp: u64,
    previous: Option<&HashMap<String, Arc<BaseFile>>>,
) -> Arc<BaseFile> {
    if let Some(kept) = previous
        .and_then(|p| p.get(&name_of(rel)))
        .filter(|b| b.path == rel && b.stamp == stamp)
    {
        return Arc::clone(kept);
    }
    Arc::new(BaseFile {
        path: rel.to_owned(),
        stamp,
        base: read_file(&root.join(rel)),
    })
}

fn read_file(path: &Path) -> Result<Base, BaseError> {
    let too_big = std::fs::metadata(path).is_ok_and(|m| m.len() > BASE_FILE_BYTES_MAX);
    if too_big {
        return Err(BaseError::Limit {
            what: "bytes in a .base file",
            max: BASE_FILE_BYTES_MAX as usize,
        });
    }
    match std::fs::read_to_string(path) {
        Ok(text) => read(&text),
        Err(_) => Err(BaseError::Shape("the .base file could not be read")),
    }
}

/// Where a base's definition is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// A `.base` file, by the name an embed gave (any case).
    File(String),
    /// A ```` ```base ```` block's YAML.
    Inline(Arc<str>),
}

/// One view of one base, as a page names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BaseRef {
    /// The definition.
    pub source: Source,
    /// `#View`: the view named, else the base's first.
    pub view: Option<String>,
}

/// A base run and drawn (by `render::base`): its HTML, and the digest a page's
/// record keeps.
#[derive(Debug)]
pub(crate) struct Drawn {
    pub(crate) html: String,
    pub(crate) digest: u64,
}

/// Bases run on one vault, by reference and audience (`render::base` runs them;
/// the vault keeps this, so that a run lives exactly as long as the vault it read).
#[derive(Debug, Default)]
pub struct BaseMemo {
    runs: Mutex<Memo>,
    /// Whether a base run on this vault read the clock.
    clock: AtomicBool,
}

impl BaseMemo {
    /// The run kept under `key`.
    pub(crate) fn get(&self, key: &(BaseRef, Visibility)) -> Option<Arc<Drawn>> {
        let m = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        m.map.get(key).map(Arc::clone)
    }

    /// Notes that a base run on this vault read the clock.
    pub(crate) fn clock_read(&self) {
        self.clock.store(true, Ordering::Relaxed);
    }

    /// Whether a base run on this vault read the clock (`now()`, `today()`,
    /// `relative()`): its pages change as time passes.
    pub fn read_clock(&self) -> bool {
        self.clock.load(Ordering::Relaxed)
    }

    /// Keeps `d` under `key`, unless the kept HTML would pass `bytes_max`.
    pub(crate) fn keep(&self, key: (BaseRef, Visibility), d: &Arc<Drawn>, bytes_max: usize) {
        let mut m = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        if m.bytes + d.html.len() <= bytes_max {
            m.bytes += d.html.len();
            m.map.insert(key, Arc::clone(d));
        }
    }
}

#[derive(Debug, Default)]
struct Memo {
    map: HashMap<(BaseRef, Visibility), Arc<Drawn>>,
    bytes: usize,
}
