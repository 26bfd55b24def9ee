//! A vault: every note and attachment under a folder, wikilinks resolved, backlinks
//! computed.
//!
//! Key decisions:
//! - **Names resolve like Obsidian's**: a wikilink names a note by file name (without
//!   `.md`) or alias, case-insensitively, wherever it sits in the folders. A file
//!   name wins over another note's alias; when two notes share a name, the one with
//!   the shortest path wins and a warning names both.
//! - **An alias is also a page path** (`alias_target`): taken from the vault's root
//!   like a note's path (`Old Folder/Old Name` → `/old-folder/old-name`), so an
//!   old URL can lead to a renamed note. Only a path on this site: an alias that is
//!   not a plain relative name (`..`, `//host`, a scheme, a backslash, a control
//!   character) has no page, and a note's own page wins over any alias.
//! - Dot folders (`.obsidian`, `.quire`, `.git`) are skipped; other files are
//!   attachments, addressed by file name.
//! - A note that cannot be read is reported and left out; it never stops the load.
//! - **An in-place save never makes a public note 404**: an editor saving in place
//!   truncates the file, then writes it, and a reload between the two read a note
//!   without front matter, so private. On a reload, a note that was public and now
//!   reads as not public (or empty) while its file was written less than [`SETTLE`]
//!   ago keeps its previous parse and stamp, and the vault says it is
//!   [`unsettled`](Vault::unsettled): the watcher reloads again once `SETTLE` has
//!   passed, when a real change of visibility is published. A note made private is
//!   so published at most `SETTLE` (plus a reload) later than another edit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::base_files::{self, BaseFile, BaseMemo};
use crate::canvas::{self, CanvasFile};
use crate::front::FrontError;
use crate::note::Note;

/// How long after its last write a public note that reads as no longer public is
/// taken to be half-saved (see the module doc).
pub const SETTLE: Duration = Duration::from_secs(1);

/// A problem met while loading, with the file it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Vault-relative path.
    pub path: String,
    /// What happened.
    pub message: String,
}

/// Why a vault could not be loaded at all.
#[derive(Debug, thiserror::Error)]
#[error("vault {path}: {source}")]
pub struct VaultError {
    /// The root given.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// The loaded vault.
#[derive(Debug)]
pub struct Vault {
    root: PathBuf,
    notes: Vec<Note>,
    by_name: HashMap<String, usize>,
    by_url: HashMap<String, usize>,
    /// Page path of an alias → its note (never a note's own page).
    by_alias: HashMap<String, usize>,
    /// Lower-cased file name → (vault-relative path, version).
    attachments: HashMap<String, (String, u64)>,
    /// Lower-cased file name → its `.base` file (never an attachment).
    bases: HashMap<String, Arc<BaseFile>>,
    /// Lower-cased file name → its `.canvas` file (never an attachment).
    canvases: HashMap<String, Arc<CanvasFile>>,
    /// `now()` for every base run on this vault, in ms since the epoch: when it
    /// was loaded, so a page and the check that it still holds agree.
    now_ms: i64,
    /// Bases run on this vault, per audience (see `render::base`).
    base_memo: BaseMemo,
    /// Each note's file stamp (size and mtime), for [`Vault::reload`]; empty when
    /// the vault was not loaded from files.
    stamps: Vec<u64>,
    /// For each note, the notes linking to it (sorted, unique).
    backlinks: Vec<Vec<usize>>,
    /// For each note, its wikilinks' targets (`None`: broken), in link order.
    resolved: Vec<Vec<Option<usize>>>,
    warnings: Vec<Warning>,
    /// Whether a public note that reads as no longer public was kept as it was,
    /// written too recently to tell a save in progress from an edit.
    unsettled: bool,
}

/// The warning for a note whose front matter was rejected (it is then private).
fn front_warning(n: &Note) -> Option<Warning> {
    n.front_error.as_ref().map(|e| Warning {
        path: n.path.clone(),
        message: format!("{e}; the note is treated as private"),
    })
}

/// A file's version from its size and modification time (nanoseconds), not
/// its bytes: a vault may hold large PDFs, and loading must not read them all. An
/// edit that keeps both size and mtime (only `touch -d` does that on purpose) keeps
/// the version; an unreadable file gets 0 and is served as missing.
fn file_stamp(path: &Path) -> u64 {
    let Ok(m) = std::fs::metadata(path) else {
        return 0;
    };
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let mut buf = [0u8; 24];
    buf[..8].copy_from_slice(&m.len().to_le_bytes());
    buf[8..].copy_from_slice(&mtime.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&buf) | 1
}

/// The file's modification and creation times in ms since the epoch, where the
/// file system keeps them.
fn file_times(path: &Path) -> (Option<i64>, Option<i64>) {
    let Ok(m) = std::fs::metadata(path) else {
        return (None, None);
    };
    let ms = |t: std::io::Result<SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_millis()).ok())
    };
    (ms(m.modified()), ms(m.created()))
}

/// Whether `new`, just read from `path`, may be `old` half-saved: `old` was public,
/// `new` is not (or is empty), and the file was written less than [`SETTLE`] ago
/// (or in the future).
fn half_saved(path: &Path, old: &Note, new: &Note) -> bool {
    use crate::note::Visibility;
    let drops = old.visibility() == Visibility::Public
        && (new.visibility() != Visibility::Public || new.body.trim().is_empty());
    if !drops {
        return false;
    }
    let written = std::fs::metadata(path).and_then(|m| m.modified());
    written.is_ok_and(|t| {
        SystemTime::now()
            .duration_since(t)
            .map_or(true, |age| age < SETTLE)
    })
}

/// The files of a vault that are not notes, as a load finds them: `.base` and
/// `.canvas` files read (or kept from the previous load), the rest attachments.
#[derive(Default)]
struct Others {
    attachments: HashMap<String, (String, u64)>,
    bases: HashMap<String, Arc<BaseFile>>,
    canvases: HashMap<String, Arc<CanvasFile>>,
    /// Bytes of `.base` and `.canvas` files counted so far.
    data_bytes: u64,
}

/// Bytes of `.base` and `.canvas` files one vault reads, in all: past it, the rest
/// are not read (their embeds say why), so a vault of many large ones cannot fill
/// memory.
pub const DATA_FILES_BYTES_MAX: u64 = 64 << 20;

impl Others {
    fn add(&mut self, root: &Path, rel: String, previous: Option<&Vault>) {
        let path = root.join(&rel);
        let stamp = file_stamp(&path);
        let name = base_files::name_of(&rel);
        let is_base = base_files::is_base(&rel);
        if !is_base && !canvas::is_canvas(&rel) {
            self.attachments.entry(name).or_insert((rel, stamp));
            return;
        }
        // A file past its own bound is not read: it counts for nothing.
        let len = std::fs::metadata(&path).map_or(0, |m| m.len());
        let bound = if is_base {
            base_files::BASE_FILE_BYTES_MAX
        } else {
            canvas::CANVAS_FILE_BYTES_MAX
        };
        self.data_bytes += if len > bound { 0 } else { len };
        let over = self.data_bytes > DATA_FILES_BYTES_MAX;
        let what = "bytes of .base and .canvas files in the vault";
        let max = DATA_FILES_BYTES_MAX as usize;
        if is_base {
            let kept = previous.map(|p| &p.bases);
            self.bases.entry(name).or_insert_with(|| match over {
                false => base_files::load(root, &rel, stamp, kept),
                true => Arc::new(BaseFile {
                    path: rel.clone(),
                    stamp,
                    base: Err(crate::bases::BaseError::Limit { what, max }),
                }),
            });
        } else {
            let kept = previous.map(|p| &p.canvases);
            self.canvases.entry(name).or_insert_with(|| match over {
                false => canvas::load(root, &rel, stamp, kept),
                true => Arc::new(CanvasFile {
                    path: rel.clone(),
                    stamp,
                    canvas: Err(canvas::CanvasError::Limit { what, max }),
                }),
            });
        }
    }
}

/// The wall clock in ms since the epoch (0 before it).
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Deepest folder nesting followed.
const DEPTH_MAX: usize = 32;

impl Vault {
    /// Loads every note under `root`.
    pub fn load(root: &Path) -> Result<Vault, VaultError> {
        Vault::load_reusing(root, None)
    }

    /// Loads `root` again after a change, re-reading only the notes whose size or
    /// modification time differ from `previous` (see `file_stamp`); the others
    /// are taken from `previous` as parsed. Links, names and backlinks are always
    /// resolved afresh.
    pub fn reload(root: &Path, previous: &Vault) -> Result<Vault, VaultError> {
        Vault::load_reusing(root, Some(previous))
    }

    fn load_reusing(root: &Path, previous: Option<&Vault>) -> Result<Vault, VaultError> {
        let reuse: HashMap<&str, (u64, &Note)> = previous.map_or_else(HashMap::new, |p| {
            p.notes
                .iter()
                .zip(&p.stamps)
                .map(|(n, &s)| (n.path.as_str(), (s, n)))
                .collect()
        });
        let err = |source| VaultError {
            path: root.to_owned(),
            source,
        };
        let meta = std::fs::metadata(root).map_err(err)?;
        if !meta.is_dir() {
            return Err(err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a folder",
            )));
        }
        let mut files = Vec::new();
        let mut warnings = Vec::new();
        walk(root, "", 0, &mut files, &mut warnings);
        files.sort();
        let mut notes = Vec::new();
        let mut others = Others::default();
        let mut stamps = Vec::new();
        let mut unsettled = false;
        for rel in files {
            if rel.ends_with(".md") {
                let stamp = file_stamp(&root.join(&rel));
                if let Some(&(_, n)) = reuse.get(rel.as_str()).filter(|(s, _)| *s == stamp) {
                    warnings.extend(front_warning(n));
                    notes.push(n.clone());
                    stamps.push(stamp);
                    continue;
                }
                match std::fs::read(root.join(&rel)) {
                    Ok(bytes) => {
                        let mut n = Note::parse(&rel, &bytes);
                        (n.modified_ms, n.created_ms) = file_times(&root.join(&rel));
                        if let Some(&(old_stamp, old)) = reuse.get(rel.as_str()) {
                            if half_saved(&root.join(&rel), old, &n) {
                                unsettled = true;
                                warnings.extend(front_warning(old));
                                notes.push(old.clone());
                                stamps.push(old_stamp);
                                continue;
                            }
                        }
                        stamps.push(stamp);
                        if let Some(e @ FrontError::Limit(_)) = &n.front_error {
                            // Past a bound: likely hostile, logged as an error when read.
                            tracing::error!(path = %rel, "{e}; the note is treated as private");
                        }
                        warnings.extend(front_warning(&n));
                        notes.push(n);
                    }
                    Err(e) => warnings.push(Warning {
                        path: rel,
                        message: format!("unreadable: {e}"),
                    }),
                }
            } else {
                others.add(root, rel, previous);
            }
        }
        let mut v = Vault::index(root.to_owned(), notes, others.attachments, warnings);
        v.bases = others.bases;
        v.canvases = others.canvases;
        v.stamps = stamps;
        v.unsettled = unsettled;
        Ok(v)
    }

    /// Whether a note was kept as it was because it may be half-saved: reload again
    /// once [`SETTLE`] has passed.
    pub fn unsettled(&self) -> bool {
        self.unsettled
    }

    fn index(
        root: PathBuf,
        notes: Vec<Note>,
        attachments: HashMap<String, (String, u64)>,
        mut warnings: Vec<Warning>,
    ) -> Vault {
        let by_name = names(&notes, &mut warnings);
        let by_url = urls(&notes, &mut warnings);
        let by_alias = alias_urls(&notes, &by_url, &mut warnings);
        let (resolved, backlinks) = resolve_links(&notes, &by_name);
        Vault {
            root,
            notes,
            by_name,
            by_url,
            by_alias,
            attachments,
            bases: HashMap::new(),
            canvases: HashMap::new(),
            now_ms: now_ms(),
            base_memo: BaseMemo::default(),
            backlinks,
            resolved,
            warnings,
            stamps: Vec::new(),
            unsettled: false,
        }
    }

    /// The folder the vault was loaded from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every note, sorted by path.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The note a wikilink target names (file name or alias, any case).
    pub fn resolve(&self, name: &str) -> Option<usize> {
        self.by_name.get(&name.trim().to_lowercase()).copied()
    }

    /// The note published at `url`.
    pub fn by_url(&self, url: &str) -> Option<usize> {
        self.by_url.get(url).copied()
    }

    /// The note an alias's page path `url` leads to (a note's own page is never an
    /// alias's: see [`Vault::by_url`] first).
    pub fn alias_target(&self, url: &str) -> Option<usize> {
        self.by_alias.get(url).copied()
    }

    /// Every alias page path and its note.
    pub fn alias_urls(&self) -> impl Iterator<Item = (&str, usize)> {
        self.by_alias.iter().map(|(u, &i)| (u.as_str(), i))
    }

    /// The vault-relative path of the attachment called `name` (any case).
    pub fn attachment(&self, name: &str) -> Option<&str> {
        self.attachments
            .get(&name.trim().to_lowercase())
            .map(|(rel, _)| rel.as_str())
    }

    /// The version of the attachment called `name`: changes when its size or
    /// modification time does (see `file_stamp`).
    pub fn attachment_version(&self, name: &str) -> Option<u64> {
        self.attachments
            .get(&name.trim().to_lowercase())
            .map(|&(_, v)| v)
    }

    /// Every attachment: lower-cased name, vault-relative path, version.
    pub fn attachments(&self) -> impl Iterator<Item = (&str, &str, u64)> {
        self.attachments
            .iter()
            .map(|(n, (rel, v))| (n.as_str(), rel.as_str(), *v))
    }

    /// The `.base` file called `name` (its file name, any case; a folder before it
    /// is ignored, as Obsidian finds a file by name).
    pub fn base_file(&self, name: &str) -> Option<&Arc<BaseFile>> {
        self.bases.get(&base_files::name_of(name.trim()))
    }

    /// Every `.base` file, by lower-cased name.
    pub fn base_files(&self) -> impl Iterator<Item = &BaseFile> {
        self.bases.values().map(|b| &**b)
    }

    /// The `.canvas` file called `name` (its file name, any case).
    pub fn canvas_file(&self, name: &str) -> Option<&Arc<CanvasFile>> {
        self.canvases.get(&base_files::name_of(name.trim()))
    }

    /// `now()` for the bases run on this vault: when it was loaded.
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// Whether a base run on this vault so far read the clock: then the pages showing
    /// it change as time passes, and a reload (which takes a new `now()`) updates them.
    pub fn bases_read_clock(&self) -> bool {
        self.base_memo.read_clock()
    }

    /// The bases run on this vault, kept for the pages that embed them.
    pub(crate) fn base_memo(&self) -> &BaseMemo {
        &self.base_memo
    }

    /// Notes linking to note `i`.
    pub fn backlinks(&self, i: usize) -> &[usize] {
        &self.backlinks[i]
    }

    /// Note `i`'s wikilinks resolved (`None`: broken, or an embed), in link order.
    pub fn targets(&self, i: usize) -> &[Option<usize>] {
        &self.resolved[i]
    }

    /// Problems met while loading.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
}
/// Every note's name and aliases (lower-cased) to its index: file names first, then
/// aliases where no file name is taken. On a clash the shortest path wins (fewest
/// folders, then fewest bytes); each loser gets a warning.
fn names(notes: &[Note], warnings: &mut Vec<Warning>) -> HashMap<String, usize> {
    let mut order: Vec<usize> = (0..notes.len()).collect();
    order.sort_by_key(|&i| (notes[i].path.matches('/').count(), notes[i].path.len(), i));
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let file_names = order.iter().map(|&i| (i, notes[i].name.as_str()));
    let aliases = order
        .iter()
        .flat_map(|&i| notes[i].front.aliases.iter().map(move |a| (i, a.as_str())));
    for (i, name) in file_names.chain(aliases) {
        let key = name.to_lowercase();
        match by_name.get(&key) {
            Some(&j) if j != i => warnings.push(Warning {
                path: notes[i].path.clone(),
                message: format!(
                    "the name `{name}` is also {}; links go there",
                    notes[j].path
                ),
            }),
            Some(_) => {}
            None => {
                by_name.insert(key, i);
            }
        }
    }
    by_name
}

/// Longest alias given a page.
const ALIAS_LEN_MAX: usize = 256;

/// The page path of `alias`, if it is a plain relative name: no control character,
/// no backslash, no leading `/`, no empty, `.` or `..` segment (so never `//host`,
/// `scheme://`, or a way out of the site), and every segment with a slug.
pub fn alias_url(alias: &str) -> Option<String> {
    let plain = alias.len() <= ALIAS_LEN_MAX
        && !alias.chars().any(|c| c.is_control() || c == '\\')
        && alias.split('/').all(|seg| {
            let seg = seg.trim();
            !seg.is_empty() && seg != "." && seg != ".." && !crate::links::slug(seg).is_empty()
        });
    plain.then(|| crate::note::url_of(alias))
}

/// Every alias's page path to its note, for aliases that are plain names (see
/// [`alias_url`]) and are not a note's page; the first note (by path) keeps a path
/// two notes alias.
fn alias_urls(
    notes: &[Note],
    by_url: &HashMap<String, usize>,
    warnings: &mut Vec<Warning>,
) -> HashMap<String, usize> {
    let mut out: HashMap<String, usize> = HashMap::new();
    for (i, n) in notes.iter().enumerate() {
        for a in &n.front.aliases {
            let Some(url) = alias_url(a) else {
                warnings.push(Warning {
                    path: n.path.clone(),
                    message: format!("the alias {a:?} is not a plain name; it has no page"),
                });
                continue;
            };
            if by_url.get(&url).is_some_and(|&j| j != i) {
                warnings.push(Warning {
                    path: n.path.clone(),
                    message: format!(
                        "the alias {a:?} is the page of another note; that note keeps it"
                    ),
                });
            } else if by_url.get(&url) != Some(&i) {
                out.entry(url).or_insert(i);
            }
        }
    }
    out
}

/// Every page URL to its note. A later note with the same URL is not published and
/// gets a warning.
fn urls(notes: &[Note], warnings: &mut Vec<Warning>) -> HashMap<String, usize> {
    let mut by_url: HashMap<String, usize> = HashMap::new();
    for (i, n) in notes.iter().enumerate() {
        if let Some(&j) = by_url.get(&n.url) {
            warnings.push(Warning {
                path: n.path.clone(),
                message: format!(
                    "its page {} is also {}'s; it is not published",
                    n.url, notes[j].path
                ),
            });
            continue;
        }
        by_url.insert(n.url.clone(), i);
    }
    by_url
}

/// Each note's link targets (`None` for an embed or an unknown name), and each note's
/// backlinks: the other notes linking to it, sorted, once each.
fn resolve_links(
    notes: &[Note],
    by_name: &HashMap<String, usize>,
) -> (Vec<Vec<Option<usize>>>, Vec<Vec<usize>>) {
    let mut backlinks = vec![Vec::new(); notes.len()];
    let mut resolved = Vec::with_capacity(notes.len());
    for (i, n) in notes.iter().enumerate() {
        let mut targets = Vec::with_capacity(n.links.len());
        for l in &n.links {
            let t = if l.embed || l.target.is_empty() {
                None
            } else {
                by_name.get(&l.target.to_lowercase()).copied()
            };
            if let Some(t) = t {
                if t != i {
                    backlinks[t].push(i);
                }
            }
            targets.push(t);
        }
        resolved.push(targets);
    }
    for b in &mut backlinks {
        b.sort_unstable();
        b.dedup();
    }
    (resolved, backlinks)
}

fn walk(dir: &Path, rel: &str, depth: usize, files: &mut Vec<String>, warnings: &mut Vec<Warning>) {
    if depth > DEPTH_MAX {
        warnings.push(Warning {
            path: rel.to_owned(),
            message: format!("folders nested deeper than {DEPTH_MAX} are skipped"),
        });
        return;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            warnings.push(Warning {
                path: rel.to_owned(),
                message: format!("unreadable folder: {e}"),
            });
            return;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            warnings.push(Warning {
                path: rel.to_owned(),
                message: "a file name that is not UTF-8 is skipped".into(),
            });
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let child = if rel.is_empty() {
            name.to_owned()
        } else {
            format!("{rel}/{name}")
        };
        // Symlinks are not followed: a vault cannot publish files outside itself.
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&entry.path(), &child, depth + 1, files, warnings),
            Ok(t) if t.is_file() => files.push(child),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::Visibility;
    use crate::testing::vault;

    #[test]
    fn links_resolve_by_name_and_alias_across_folders_with_backlinks() {
        let (_d, v) = vault(&[
            ("Home.md", "---\nfree: true\n---\n[[stale while revalidate]] [[SWR|short]] [[Nowhere]] ![[pic.svg]]"),
            ("Caching/Stale While Revalidate.md", "---\naliases: [SWR]\n---\nBack to [[Home]]."),
            ("attachments/Pic.svg", "<svg/>"),
            (".obsidian/workspace.md", "[[Home]]"),
        ]);
        assert_eq!(v.notes().len(), 2, "dot folders skipped");
        let home = v.resolve("home").unwrap();
        let swr = v.resolve("Stale While Revalidate").unwrap();
        assert_eq!(v.resolve("swr"), Some(swr));
        assert_eq!(v.targets(home), &[Some(swr), Some(swr), None, None]);
        assert_eq!(v.backlinks(swr), &[home]);
        assert_eq!(v.backlinks(home), &[swr]);
        assert_eq!(v.attachment("pic.svg"), Some("attachments/Pic.svg"));
        assert_eq!(v.by_url("/caching/stale-while-revalidate"), Some(swr));
    }

    #[test]
    fn aliases_are_page_paths_from_the_vault_root() {
        let (_d, v) = vault(&[(
            "Caching/Stale While Revalidate.md",
            "---\naliases: [SWR, Old Folder/Old Name, Crème brûlée]\n---\n",
        )]);
        let n = v.resolve("stale while revalidate").unwrap();
        assert_eq!(v.alias_target("/swr"), Some(n));
        assert_eq!(v.alias_target("/old-folder/old-name"), Some(n));
        assert_eq!(v.alias_target("/crème-brûlée"), Some(n));
        assert_eq!(v.alias_target("/caching/swr"), None);
        assert_eq!(v.resolve("old folder/old name"), Some(n), "a name too");
    }

    #[test]
    fn alias_colliding_with_a_note_page_loses_to_the_note() {
        let (_d, v) = vault(&[
            ("Home.md", "---\naliases: [Other, Self, Home]\n---\n"),
            ("Other.md", "x"),
        ]);
        assert_eq!(v.alias_target("/other"), None);
        assert_eq!(v.by_url("/other"), v.resolve("other"));
        assert_eq!(v.alias_target("/home"), None, "its own page is no alias");
        assert_eq!(v.alias_target("/self"), v.resolve("home"));
        assert!(v
            .warnings()
            .iter()
            .any(|w| w.path == "Home.md" && w.message.contains("another note")));
    }

    #[test]
    fn file_name_wins_over_another_notes_alias() {
        let (_d, v) = vault(&[
            ("a.md", "---\naliases: [Deep]\n---\n"),
            ("x/y/Deep.md", "d"),
        ]);
        assert_eq!(v.notes()[v.resolve("deep").unwrap()].path, "x/y/Deep.md");
    }

    /// The page an alias gets, through a note's front matter (the alias written as
    /// a YAML double-quoted string, every control character escaped).
    fn alias_page(alias: &str) -> Option<String> {
        let mut quoted = String::from("\"");
        for c in alias.chars() {
            match c {
                '"' | '\\' => quoted.extend(['\\', c]),
                c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => quoted.push(c),
            }
        }
        quoted.push('"');
        let yaml = format!("---\naliases: [{quoted}]\n---\n");
        let (_d, v) = vault(&[("Note.md", &yaml)]);
        assert_eq!(v.notes()[0].front.aliases, [alias], "{yaml}");
        let pages: Vec<String> = v.alias_urls().map(|(u, _)| u.to_owned()).collect();
        assert!(pages.len() <= 1);
        pages.into_iter().next()
    }

    #[test]
    fn alias_dot_dot_is_ignored() {
        for a in ["../x", "..", "a/../b", "./x", "a/./b", "../../etc/passwd"] {
            assert_eq!(alias_page(a), None, "{a:?}");
        }
    }

    #[test]
    fn alias_scheme_relative_or_absolute_url_is_ignored() {
        for a in [
            "//evil.example",
            "///evil.example",
            "https://evil.example/x",
            "/x",
            "a//b",
        ] {
            assert_eq!(alias_page(a), None, "{a:?}");
        }
        assert_eq!(
            alias_page("evil.example").as_deref(),
            Some("/evil-example"),
            "a local path"
        );
    }

    #[test]
    fn alias_backslash_is_ignored() {
        for a in ["\\\\evil.example", "a\\b", "/\\evil.example"] {
            assert_eq!(alias_page(a), None, "{a:?}");
        }
    }

    #[test]
    fn alias_control_characters_are_ignored() {
        for a in [
            "a\tb",
            "a\nb",
            "a\rb",
            "x\u{0}y",
            "x\u{7f}y",
            "x\u{85}y",
            "a/\t/evil.example",
        ] {
            assert_eq!(alias_page(a), None, "{a:?}");
        }
        assert_eq!(alias_page(&"a".repeat(300)), None, "over-long");
        assert_eq!(alias_page("???"), None, "no slug");
    }

    #[test]
    fn name_clashes_prefer_the_shortest_path_and_warn() {
        let (_d, v) = vault(&[
            ("a/Note.md", "x"),
            ("Note.md", "y"),
            ("bad.md", "---\nfree: maybe\n---\n"),
        ]);
        let i = v.resolve("note").unwrap();
        assert_eq!(v.notes()[i].path, "Note.md");
        assert!(v.warnings().iter().any(|w| w.path == "a/Note.md"));
        assert!(v
            .warnings()
            .iter()
            .any(|w| w.path == "bad.md" && w.message.contains("private")));
    }

    #[test]
    fn reload_rereads_changed_files_only_and_resolves_links_afresh() {
        let (dir, v) = vault(&[("a.md", "see [[B]]"), ("b.md", "bee"), ("c.md", "sea")]);
        std::fs::write(dir.path().join("b.md"), "bee, longer now").unwrap();
        std::fs::remove_file(dir.path().join("c.md")).unwrap();
        std::fs::write(dir.path().join("d.md"), "links [[A]]").unwrap();
        let w = Vault::reload(dir.path(), &v).unwrap();
        let names: Vec<&str> = w.notes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "d"]);
        assert_eq!(w.notes()[1].body, "bee, longer now");
        assert_eq!(w.notes()[0].version, v.notes()[0].version);
        let a = w.resolve("a").unwrap();
        assert_eq!(w.backlinks(a), &[w.resolve("d").unwrap()]);
        // Reloading a reload keeps working (stamps carried over).
        let x = Vault::reload(dir.path(), &w).unwrap();
        assert_eq!(x.notes().len(), 3);
    }

    #[test]
    fn yaml_alias_bomb_is_bounded_and_private_and_the_other_notes_load() {
        let bomb = format!("---\n{}---\nBoom.\n", crate::front::tests::alias_bomb());
        let (_d, v) = vault(&[
            ("bomb.md", &bomb),
            ("Home.md", "---\nfree: true\n---\nSee [[Other]]."),
            ("Other.md", "---\nfree: true\n---\nHello."),
        ]);
        assert_eq!(v.notes().len(), 3);
        let b = &v.notes()[v.resolve("bomb").unwrap()];
        assert_eq!(
            b.visibility(),
            crate::Visibility::Private,
            "despite free: true"
        );
        assert_eq!(b.body, "Boom.\n");
        let w: Vec<&Warning> = v
            .warnings()
            .iter()
            .filter(|w| w.path == "bomb.md")
            .collect();
        assert_eq!(w.len(), 1);
        assert_eq!(
            w[0].message,
            "front matter exceeds 10000 nodes after alias expansion; the note is treated as private"
        );
        for name in ["home", "other"] {
            let n = &v.notes()[v.resolve(name).unwrap()];
            assert_eq!(n.visibility(), crate::Visibility::Public);
        }
        assert_eq!(v.backlinks(v.resolve("other").unwrap()).len(), 1);
    }

    #[test]
    fn a_note_past_a_front_matter_bound_is_logged_as_an_error_naming_file_and_limit() {
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        let sink = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .finish();
        let bomb = format!("---\n{}---\n", crate::front::tests::alias_bomb());
        tracing::subscriber::with_default(subscriber, || {
            vault(&[
                ("Notes/bomb.md", &bomb),
                ("ok.md", "---\nfree: true\n---\n"),
            ])
        });
        let text = String::from_utf8(log.lock().unwrap().clone()).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("ERROR"))
            .expect("an error line");
        assert!(line.contains("Notes/bomb.md"), "{line}");
        assert!(
            line.contains("exceeds 10000 nodes after alias expansion"),
            "{line}"
        );
    }

    /// A log writer appending to a shared buffer.
    struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_missing_vault_is_a_clear_error() {
        let e = Vault::load(Path::new("/nonexistent/vault")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/vault"));
    }

    #[test]
    fn an_in_place_save_never_makes_a_public_note_404() {
        // Low of 29: an editor saving in place truncates, then writes; a reload
        // between the two read a note without front matter (private): 404.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.md");
        std::fs::write(&path, "---\nfree: true\n---\nthe old text\n").unwrap();
        let v = Vault::load(dir.path()).unwrap();
        let set_mtime = |age: i64| {
            let now = SystemTime::now();
            let t = if age >= 0 {
                now - Duration::from_secs(age.unsigned_abs())
            } else {
                now + Duration::from_secs(age.unsigned_abs())
            };
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(t)
                .unwrap();
        };
        // Truncated, or half-written front matter, just now: kept as it was.
        for half in ["", "---\nfre"] {
            std::fs::write(&path, half).unwrap();
            set_mtime(-10);
            let w = Vault::reload(dir.path(), &v).unwrap();
            assert_eq!(w.notes()[0].visibility(), Visibility::Public, "{half:?}");
            assert!(w.notes()[0].body.contains("the old text"));
            assert!(w.unsettled());
        }
        // The save finished: read.
        std::fs::write(&path, "---\nfree: true\n---\nthe new text\n").unwrap();
        let w = Vault::reload(dir.path(), &v).unwrap();
        assert!(w.notes()[0].body.contains("the new text") && !w.unsettled());
        // Made private on purpose: published once the file has settled.
        std::fs::write(&path, "private now\n").unwrap();
        set_mtime(-10);
        let x = Vault::reload(dir.path(), &w).unwrap();
        assert_eq!(x.notes()[0].visibility(), Visibility::Public);
        set_mtime(10);
        let y = Vault::reload(dir.path(), &x).unwrap();
        assert_eq!(y.notes()[0].visibility(), Visibility::Private);
        assert!(!y.unsettled());
    }
}
