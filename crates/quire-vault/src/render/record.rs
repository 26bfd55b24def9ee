//! What one render read: **a page's dependency set and version are the record its
//! render kept**, not a second walk that would have to count as the renderer does.
//!
//! While it renders, the renderer (`embed::Page`) notes every note whose markdown it
//! read (the page's own, and every note it transcludes, found or past a budget),
//! each with a fingerprint (`fingerprint`) of everything the render could read of
//! it: its bytes, its path and page, and what each of its links shows to the
//! audience (`wikilinks::observe`: an attached file and its version, a note's page,
//! or nothing — missing and hidden alike). It also lists every embed it met and
//! what became of it (shown, missing part, cycle, past a budget), for logs and
//! tests. [`Record::holds`] asks a later vault whether every fingerprint is still
//! the same; [`Record::version`] hashes them.
//!
//! Why no edit that changes a page can leave its record holding: a render is a
//! function of the vault that reads it only through `source` (a note's body, links
//! and link targets — all in its fingerprint) and through the notes `source` was
//! asked for. Replay the render on a vault where every recorded fingerprint is
//! unchanged: it starts from the same page note (recorded), reads the same markdown,
//! sees the same targets, makes the same budget, cycle and privacy decisions
//! (functions of what it has read so far), so asks for the same notes next, and by
//! induction produces the same HTML. Hence:
//! - an edit of the page that adds an embed changes the page's own fingerprint;
//! - a note made private two levels down changes the fingerprint of the note
//!   embedding it (its link now shows nothing) and its own (its bytes);
//! - an embed past a budget either read its target (recorded: its size decided) or
//!   did not (its link shows only the embedding note's link and the target's page,
//!   both in the embedding note's fingerprint);
//! - a name taken by a new note, or freed, changes what some recorded note's link
//!   resolves to, so that note's fingerprint.
//!
//! A note that exists but that the reader may not see, and a note that does not
//! exist, are one observation: creating or deleting a hidden note changes no
//! public page's version.

use std::collections::BTreeMap;

use xxhash_rust::xxh3::Xxh3;

use super::wikilinks;
use crate::note::Visibility;
use crate::vault::Vault;

/// What became of one embed of a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Rendered into the page.
    Shown,
    /// The note has no such section or block.
    Missing,
    /// The note is already being rendered (itself, or a note up the chain).
    Cycle,
    /// Past the depth, count or byte budget: a link.
    Budget,
}

/// One embed the render met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Embed {
    /// The embedded note's vault path.
    pub note: String,
    /// The `#…` part named, if any.
    pub part: Option<String>,
    /// What became of it.
    pub outcome: Outcome,
}

/// Everything one render of a page read (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    audience: Visibility,
    /// Vault path → fingerprint, of every note whose markdown the render read.
    notes: BTreeMap<String, u64>,
    /// Every embed met, in the order met.
    embeds: Vec<Embed>,
}

impl Record {
    pub(super) fn new(audience: Visibility) -> Record {
        Record {
            audience,
            notes: BTreeMap::new(),
            embeds: Vec::new(),
        }
    }

    /// Notes that note `i` was read.
    pub(super) fn read(&mut self, vault: &Vault, i: usize) {
        let path = &vault.notes()[i].path;
        if !self.notes.contains_key(path) {
            let fp = fingerprint(vault, i, self.audience);
            self.notes.insert(path.clone(), fp);
        }
    }

    /// Notes an embed of note `i` and what became of it.
    pub(super) fn embed(&mut self, vault: &Vault, i: usize, part: Option<&str>, outcome: Outcome) {
        self.embeds.push(Embed {
            note: vault.notes()[i].path.clone(),
            part: part.map(str::to_owned),
            outcome,
        });
    }

    /// Whether a render on `vault` would read what this one read, and so make the
    /// same page: every recorded note is there with the same fingerprint.
    pub fn holds(&self, vault: &Vault) -> bool {
        self.notes.iter().all(|(path, &fp)| {
            by_path(vault, path).is_some_and(|i| fingerprint(vault, i, self.audience) == fp)
        })
    }

    /// The page's version: a hash of every recorded fingerprint.
    pub fn version(&self) -> u64 {
        let mut h = Xxh3::new();
        h.update(&[self.audience as u8]);
        for (path, fp) in &self.notes {
            h.update(path.as_bytes());
            h.update(&[0]);
            h.update(&fp.to_le_bytes());
        }
        h.digest()
    }

    /// The vault paths of the notes the render read, sorted.
    pub fn notes(&self) -> impl Iterator<Item = &str> {
        self.notes.keys().map(String::as_str)
    }

    /// Every embed the render met, in order.
    pub fn embeds(&self) -> &[Embed] {
        &self.embeds
    }
}

/// The note at vault path `path` (notes are sorted by path).
fn by_path(vault: &Vault, path: &str) -> Option<usize> {
    vault
        .notes()
        .binary_search_by(|n| n.path.as_str().cmp(path))
        .ok()
}

/// Everything a render can read of note `i` for `audience`: its bytes (front
/// matter included), its path and page, and what each link shows.
fn fingerprint(vault: &Vault, i: usize, audience: Visibility) -> u64 {
    let n = &vault.notes()[i];
    let mut h = Xxh3::new();
    h.update(&n.version.to_le_bytes());
    h.update(n.path.as_bytes());
    h.update(&[0]);
    h.update(n.url.as_bytes());
    h.update(&[0]);
    wikilinks::observe(vault, i, audience, &mut h);
    h.digest()
}
