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
//! tests (the first 256; the rest are counted: a record's size is bounded whatever
//! the note holds). [`Record::holds`] asks a later vault whether every fingerprint is still
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
//!
//! **A base** (`base`) reads the whole vault, so it is recorded by what it showed:
//! the digest of its HTML under its reference. The render above reads a base only
//! through that HTML (its size counts against the page's budget, its bytes go into
//! the page), so the induction holds with one more case: a base whose HTML on the
//! later vault has the same digest gives the same page. [`Record::holds`] runs each
//! recorded base on the later vault (once per vault and audience, whatever the
//! number of pages: `base::BaseMemo`).
//!
//! **A canvas** is read by its file (whose stamp the embedding note's fingerprint
//! observes), the notes its file nodes embed (recorded as any embed), and what the
//! links of its text nodes and the targets of its file nodes show: that last part
//! is recorded as the canvas's fingerprint (`canvas_nodes::fingerprint`) under its
//! path, and compared again by [`Record::holds`].

use std::collections::BTreeMap;

use xxhash_rust::xxh3::Xxh3;

use super::base::{self, BaseRef};
use super::canvas_nodes;
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
    /// Every base the render showed → the digest of its HTML.
    bases: BTreeMap<BaseRef, u64>,
    /// Every canvas the render drew (vault path) → what its drawing read of the
    /// vault besides the notes it embeds (`canvas_nodes::fingerprint`).
    canvases: BTreeMap<String, u64>,
    /// The first [`EMBEDS_LISTED`] embeds met, in the order met.
    embeds: Vec<Embed>,
    /// Embeds met past those.
    embeds_unlisted: usize,
}

/// Embeds a record lists: a hostile note may hold thousands past the budget, and
/// the list is for logs and tests, not the version (which the notes read make).
const EMBEDS_LISTED: usize = 256;

impl Record {
    pub(super) fn new(audience: Visibility) -> Record {
        Record {
            audience,
            notes: BTreeMap::new(),
            bases: BTreeMap::new(),
            canvases: BTreeMap::new(),
            embeds: Vec::new(),
            embeds_unlisted: 0,
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

    /// Notes that the render showed base `r`, drawn with digest `digest`.
    pub(super) fn base(&mut self, r: &BaseRef, digest: u64) {
        self.bases.entry(r.clone()).or_insert(digest);
    }

    /// Notes that the render drew the canvas at vault path `path`, reading `fp`.
    pub(super) fn canvas(&mut self, path: &str, fp: u64) {
        self.canvases.entry(path.to_owned()).or_insert(fp);
    }

    /// Notes an embed of note `i` and what became of it.
    pub(super) fn embed(&mut self, vault: &Vault, i: usize, part: Option<&str>, outcome: Outcome) {
        if self.embeds.len() >= EMBEDS_LISTED {
            self.embeds_unlisted += 1;
            return;
        }
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
        }) && self
            .bases
            .iter()
            .all(|(r, &digest)| base::drawn(vault, r, self.audience).digest == digest)
            && self.canvases.iter().all(|(path, &fp)| {
                canvas_fp(vault, path, self.audience).is_some_and(|now| now == fp)
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
        for (path, fp) in &self.canvases {
            h.update(b"canvas:");
            h.update(path.as_bytes());
            h.update(&fp.to_le_bytes());
        }
        for (r, digest) in &self.bases {
            match &r.source {
                base::Source::File(name) => h.update(name.to_lowercase().as_bytes()),
                base::Source::Inline(yaml) => h.update(yaml.as_bytes()),
            }
            h.update(&[0]);
            h.update(r.view.as_deref().unwrap_or("").as_bytes());
            h.update(&[0]);
            h.update(&digest.to_le_bytes());
        }
        h.digest()
    }

    /// The vault paths of the notes the render read, sorted.
    pub fn notes(&self) -> impl Iterator<Item = &str> {
        self.notes.keys().map(String::as_str)
    }

    /// The bases the render showed, in order of reference.
    pub fn bases(&self) -> impl Iterator<Item = &BaseRef> {
        self.bases.keys()
    }

    /// The first embeds the render met, in order (at most 256).
    pub fn embeds(&self) -> &[Embed] {
        &self.embeds
    }

    /// How many embeds the render met past those [`Record::embeds`] lists.
    pub fn embeds_unlisted(&self) -> usize {
        self.embeds_unlisted
    }
}

/// The note at vault path `path` (notes are sorted by path).
/// The fingerprint of the canvas at vault path `path` on `vault`, if it is there.
fn canvas_fp(vault: &Vault, path: &str, audience: Visibility) -> Option<u64> {
    let file = vault.canvas_file(path).filter(|f| f.path == path)?;
    let canvas = file.canvas.as_ref().ok()?;
    Some(canvas_nodes::fingerprint(
        vault, canvas, file.stamp, audience,
    ))
}

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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed, TestRunner};

    use crate::render::{render, render_recorded, Record, EMBED_BYTES_MAX};
    use crate::vault::Vault;
    use crate::Visibility;

    const NOTES: usize = 5;

    /// One line of a note: a kind, a target note, a section number.
    type Line = (u8, u8, u8);
    /// A note: absent, or its visibility (0 public, 1 private, 2 draft) and lines.
    type Spec = Option<(u8, Vec<Line>)>;

    fn spec() -> impl Strategy<Value = Spec> {
        proptest::option::weighted(
            0.9,
            (
                0u8..3,
                proptest::collection::vec((0u8..9, 0..NOTES as u8, 0u8..3), 0..6),
            ),
        )
    }

    /// A note's text: every kind of embed and link, headings, block ids, pasted
    /// markers, embeds past the count budget, and text past the byte budget.
    fn text(k: usize, vis: u8, lines: &[Line]) -> String {
        let mut s = match vis {
            0 => "---\nfree: true\n---\n".to_owned(),
            1 => String::new(),
            _ => "---\ndraft: true\n---\n".to_owned(),
        };
        for (j, &(kind, t, sec)) in lines.iter().enumerate() {
            let line = match kind {
                0 => format!("![[N{t}]]"),
                1 => format!("![[N{t}#S{sec}]]"),
                2 => format!("![[N{t}#^b{sec}]]"),
                3 => format!("## S{sec}"),
                4 => format!("[[N{t}]] and [[N{t}#S{sec}]]"),
                5 => "\u{E000}0\u{E001} \u{E000}0000000000000000:0\u{E001}".to_owned(),
                6 => format!("![[N{t}#S{sec}]] ").repeat(70),
                7 => "filler words ".repeat(EMBED_BYTES_MAX / 13 / 3),
                _ => format!("![[N{t}]] ").repeat(3),
            };
            s.push_str(&format!("{line}\n\nbody{k}mark line{j} ^b{}\n\n", j % 3));
        }
        s.push_str(&format!("body{k}mark end\n"));
        s
    }

    fn write(dir: &std::path::Path, k: usize, spec: &Spec) {
        let path = dir.join(format!("N{k}.md"));
        match spec {
            Some((vis, lines)) => std::fs::write(path, text(k, *vis, lines)).unwrap(),
            None => {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// Stored pages: (vault path, audience) → the HTML and record of its render.
    type Store = HashMap<(String, Visibility), (String, Record)>;

    /// What a cache does after a change settles: a page whose record still holds
    /// is kept, any other rendered again; then every stored page must equal a
    /// fresh render, and no public page may hold a hidden note's text.
    fn settle(v: &Vault, store: &mut Store) -> Result<(), TestCaseError> {
        store.retain(|(path, aud), _| {
            v.notes()
                .iter()
                .any(|n| &n.path == path && n.visibility() <= *aud)
        });
        for aud in [Visibility::Public, Visibility::Private] {
            for (i, n) in v.notes().iter().enumerate() {
                if n.visibility() > aud {
                    continue;
                }
                let key = (n.path.clone(), aud);
                if !store.get(&key).is_some_and(|(_, r)| r.holds(v)) {
                    let (r, rec) = render_recorded(v, i, aud);
                    store.insert(key.clone(), (r.html, rec));
                }
                let fresh = render(v, i, aud).html;
                prop_assert!(store[&key].0 == fresh, "{} for {aud:?} is stale", n.path);
                if aud == Visibility::Public {
                    for m in v.notes().iter().filter(|m| m.visibility() > aud) {
                        let mark = format!("body{}mark", &m.name[1..]);
                        prop_assert!(!fresh.contains(&mark), "{} shows {}", n.name, m.name);
                    }
                }
            }
        }
        Ok(())
    }

    /// After every edit anywhere (a note created, deleted, rewritten, made
    /// private or public at any depth) every stored page whose record holds is
    /// byte-identical to a fresh render for its audience. Seeds are fixed (and
    /// reported on failure); `PROPTEST_CASES` scales the cases per seed.
    #[test]
    fn every_stored_page_equals_a_fresh_render_after_any_edit() {
        let cases = std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(48);
        let strategy = (
            proptest::collection::vec(spec(), NOTES),
            proptest::collection::vec((0..NOTES, spec()), 1..5),
        );
        for seed in [29, 2029, 20_261_127] {
            let config = Config {
                cases,
                rng_seed: RngSeed::Fixed(seed),
                failure_persistence: None,
                ..Config::default()
            };
            let result = TestRunner::new(config).run(&strategy, |(notes, edits)| {
                let dir = tempfile::tempdir().unwrap();
                for (k, s) in notes.iter().enumerate() {
                    write(dir.path(), k, s);
                }
                let mut store = Store::new();
                settle(&Vault::load(dir.path()).unwrap(), &mut store)?;
                for (k, s) in &edits {
                    write(dir.path(), *k, s);
                    settle(&Vault::load(dir.path()).unwrap(), &mut store)?;
                }
                Ok(())
            });
            if let Err(e) = result {
                panic!("seed {seed}: {e}");
            }
        }
    }
}
