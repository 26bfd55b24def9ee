//! Related notes: for every note and every audience, the [`NEIGHBOURS`] notes most
//! like it that the audience may see, computed when notes change and looked up in
//! O(1) when a page renders.
//!
//! Key decisions:
//! - **Never on the read path.** A per-request similarity scan made pages ~30× slower
//!   in the note server quire grew from (~28 ms of a cosine scan over every note on
//!   each request). [`Related::build`] and [`Related::update`] do all the work
//!   (embedding, searching) when the vault loads or a note changes;
//!   [`Related::related`] is an index into a precomputed list.
//! - **Filtered by audience when computed.** Notes are split into three partitions by
//!   visibility; a note's list for audience `A` is the best of the partitions `A` may
//!   see (Public: public notes; Private: public and private; Draft: all), merged. No
//!   list ever names a note above its audience, and a public list depends on public
//!   notes only. A note has lists only for the audiences that may read it.
//! - **Exact below a threshold, HNSW above it**, per partition ([`EXACT_MAX`]): an
//!   exact scan is simple and fast enough for thousands of notes; past that an
//!   `hnsw_rs` graph picks candidates, which are then scored exactly (see `index`).
//! - **State is keyed by note path**, not by index: indices shift whenever a note is
//!   added or removed before others in path order, so an update matches old and new
//!   notes by [`Note::path`] (and spots edits by [`Note::version`]), and only the
//!   lookup table behind [`Related::related`] is rebuilt in the new vault's indices.
//! - **Exact incremental maintenance** ([`Related::update`]): changed notes get fresh
//!   lists; any other note whose list held a changed or removed note is recomputed;
//!   every other note only has to consider the changed notes, each entering its list
//!   if it beats the list's last. On the exact path this equals a full build (a
//!   tested property); on the HNSW path both are approximate. Many changes at once
//!   (a quarter of the vault) recompute every list instead.
//! - The embedder is a small trait ([`Embedder`]); the default is [`Lexical`] (TF-IDF,
//!   offline, no model). Its choice over a sentence-embedding model is measured in
//!   docs/related-notes.md.

pub mod eval;
mod index;
pub(crate) mod lexical;
mod slot;
mod vector;

use std::collections::{HashMap, HashSet};

pub use lexical::Lexical;
pub use slot::NEIGHBOURS;
pub use vector::{dot, note_text, Embedder};

use crate::note::{Note, Visibility};
use crate::vault::Vault;
use index::{offer, order, Partition};
use slot::{Hit, Lists, Slot};
use vector::normalise;

/// A partition (the notes of one visibility) with more notes than this is searched
/// through an HNSW graph; at or below it, by an exact scan.
pub const EXACT_MAX: usize = 5_000;

/// Notes whose lists are computed together, sharing one pass over each exact
/// partition.
const QUERY_BLOCK: usize = 16;

/// Texts handed to an embedder in one call, at most.
const EMBED_BATCH: usize = 64;

/// How [`Related`] searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// A partition larger than this uses an HNSW graph ([`EXACT_MAX`] by default).
    pub exact_max: usize,
    /// Threads for recomputing many lists at once (a build); 1 keeps it on the
    /// calling thread. Default: the machine's cores, as a build runs at load time or
    /// in the background, never while a reader waits.
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            exact_max: EXACT_MAX,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// Related notes of every note of a vault, for every audience (see the module doc).
pub struct Related {
    opts: Options,
    dim: usize,
    embedder: String,
    slots: Vec<Slot>,
    free: Vec<u32>,
    by_path: HashMap<String, u32>,
    parts: [Partition; 3],
    /// Vault index → lists in vault indices, per audience: what [`Related::related`]
    /// returns.
    view: Vec<[Vec<usize>; 3]>,
}

impl std::fmt::Debug for Related {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Related")
            .field("embedder", &self.embedder)
            .field("dim", &self.dim)
            .field("notes", &self.by_path.len())
            .field("partitions", &self.parts.each_ref().map(|p| p.len()))
            .field(
                "approximate",
                &self.parts.each_ref().map(|p| p.approximate()),
            )
            .finish()
    }
}

const AUDIENCES: [Visibility; 3] = [Visibility::Public, Visibility::Private, Visibility::Draft];

impl Related {
    /// Embeds every note of `vault` and computes every related list.
    pub fn build(vault: &Vault, embedder: &dyn Embedder) -> Related {
        Related::build_with(vault, embedder, Options::default())
    }

    /// [`Related::build`] with options.
    pub fn build_with(vault: &Vault, embedder: &dyn Embedder, opts: Options) -> Related {
        let dim = embedder.dim();
        let mut r = Related {
            opts,
            dim,
            embedder: embedder.name().to_owned(),
            slots: Vec::with_capacity(vault.notes().len()),
            free: Vec::new(),
            by_path: HashMap::with_capacity(vault.notes().len()),
            parts: [
                Partition::new(dim),
                Partition::new(dim),
                Partition::new(dim),
            ],
            view: Vec::new(),
        };
        let all: Vec<usize> = (0..vault.notes().len()).collect();
        let vectors = embed(embedder, vault, &all);
        for (&i, v) in all.iter().zip(vectors) {
            r.put(&vault.notes()[i], v);
        }
        r.sync_partitions();
        r.recompute_all();
        r.refresh_view(vault);
        tracing::debug!(?r, "related notes built");
        r
    }

    /// Note `note`'s related notes for a reader allowed up to `audience`, best first,
    /// as indices into the vault last built or updated. Empty when `audience` may not
    /// read the note, and for an index out of range. Never the note itself, never a
    /// note above `audience`.
    pub fn related(&self, note: usize, audience: Visibility) -> &[usize] {
        self.view
            .get(note)
            .map_or(&[], |l| l[audience as usize].as_slice())
    }

    /// Notes known.
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    /// Whether no note is known.
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }

    /// Whether the notes of visibility `vis` are searched through an HNSW graph
    /// (approximate) rather than exactly.
    pub fn approximate(&self, vis: Visibility) -> bool {
        self.parts[vis as usize].approximate()
    }

    /// Brings every list up to date with `vault` after notes changed, were added or
    /// were removed, and returns the indices (in `vault`) of every note whose related
    /// section may render differently: its list changed for some audience, or it
    /// lists a changed note (whose title or page may have moved). The caller purges
    /// exactly those pages; the changed notes' own pages it purges anyway.
    ///
    /// `changed` (indices in `vault`) are re-embedded; `removed` names paths no longer
    /// in `vault`. Neither has to be complete: a note whose [`Note::version`] differs
    /// from the one embedded, or that is new, counts as changed, and a known path
    /// missing from `vault` as removed. `embedder` must be the one the lists were
    /// built with (a refitted [`Lexical`] needs a full [`Related::build`]).
    pub fn update(
        &mut self,
        vault: &Vault,
        embedder: &dyn Embedder,
        changed: &[usize],
        removed: &[&str],
    ) -> Vec<usize> {
        debug_assert_eq!(embedder.dim(), self.dim, "update with another embedder");
        let notes = vault.notes();
        let index_of: HashMap<&str, usize> = notes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.path.as_str(), i))
            .collect();
        for p in removed {
            if index_of.contains_key(p) {
                tracing::debug!(path = p, "named as removed but still in the vault");
            }
        }
        let gone: Vec<u32> = self
            .by_path
            .iter()
            .filter(|(p, _)| !index_of.contains_key(p.as_str()))
            .map(|(_, &s)| s)
            .collect();
        let edited = self.edited(notes, changed);

        let bulk = gone.len() + edited.len() > (self.by_path.len() / 4).max(16);
        let mut before: HashMap<u32, Lists> = HashMap::new();
        if bulk {
            for s in self.live_slots() {
                before.insert(s, self.slots[s as usize].lists.clone());
            }
        }
        self.unplace_gone(&gone, &mut before);
        let vectors = embed(embedder, vault, &edited);
        let moved = self.place_edited(notes, &edited, vectors, &mut before);
        self.sync_partitions();
        if bulk {
            self.recompute_all();
        } else {
            self.maintain(&gone, &moved, &mut before);
        }
        // Freed only now, so no slot was reused while `before` named it.
        for &s in &gone {
            self.slots[s as usize].path = String::new();
            self.free.push(s);
        }
        self.refresh_view(vault);
        self.purges(&index_of, &moved, &before)
    }

    /// The notes to embed again, sorted: those named in `changed` (when in range), and
    /// every note whose version differs from the one embedded, or that is new.
    fn edited(&self, notes: &[Note], changed: &[usize]) -> Vec<usize> {
        let mut edited: Vec<usize> = changed
            .iter()
            .copied()
            .filter(|&i| i < notes.len())
            .collect();
        edited.extend(notes.iter().enumerate().filter_map(
            |(i, n)| match self.by_path.get(&n.path) {
                Some(&s) if self.slots[s as usize].version == n.version => None,
                _ => Some(i),
            },
        ));
        edited.sort_unstable();
        edited.dedup();
        edited
    }

    /// Takes the `gone` slots out of every list and index, their lists kept in
    /// `before`; the slots themselves stay reserved until the update ends.
    fn unplace_gone(&mut self, gone: &[u32], before: &mut HashMap<u32, Lists>) {
        for &s in gone {
            before
                .entry(s)
                .or_insert_with(|| self.slots[s as usize].lists.clone());
            self.unplace(s);
            let slot = &mut self.slots[s as usize];
            slot.alive = false;
            slot.lists = Default::default();
            self.by_path.remove(&slot.path);
        }
    }

    /// Puts each `edited` note with its new vector, a known note's old lists kept in
    /// `before` (a new note's as empty); returns their slots.
    fn place_edited(
        &mut self,
        notes: &[Note],
        edited: &[usize],
        vectors: Vec<Vec<f32>>,
        before: &mut HashMap<u32, Lists>,
    ) -> Vec<u32> {
        let mut moved: Vec<u32> = Vec::with_capacity(edited.len());
        for (&i, v) in edited.iter().zip(vectors) {
            let n = &notes[i];
            if let Some(&s) = self.by_path.get(&n.path) {
                before
                    .entry(s)
                    .or_insert_with(|| self.slots[s as usize].lists.clone());
                self.unplace(s);
            }
            let s = self.put(n, v);
            before.entry(s).or_default();
            moved.push(s);
        }
        moved
    }

    /// The exact incremental step (module doc): `moved` notes have new vectors and no
    /// valid lists, `gone` notes are out of every partition.
    fn maintain(&mut self, gone: &[u32], moved: &[u32], before: &mut HashMap<u32, Lists>) {
        let mut hot = vec![false; self.slots.len()];
        for &s in gone.iter().chain(moved) {
            hot[s as usize] = true;
        }
        let mut redo: Vec<u32> = moved.to_vec();
        for s in self.live_slots() {
            let slot = &self.slots[s as usize];
            if !hot[s as usize] && slot.lists.iter().flatten().any(|h| hot[h.slot as usize]) {
                redo.push(s);
            }
        }
        for &s in &redo[moved.len()..] {
            before
                .entry(s)
                .or_insert_with(|| self.slots[s as usize].lists.clone());
        }
        let fresh = self.lists_many(&redo);
        let mut done = vec![false; self.slots.len()];
        for (&s, lists) in redo.iter().zip(fresh) {
            self.slots[s as usize].lists = lists;
            done[s as usize] = true;
        }
        // Every other note only has to consider the moved notes.
        let incoming: Vec<(u32, Visibility, Vec<f32>)> = moved
            .iter()
            .filter_map(|&c| {
                let slot = &self.slots[c as usize];
                let row = slot.row?;
                Some((
                    c,
                    slot.vis,
                    self.parts[slot.vis as usize].vector(row).to_vec(),
                ))
            })
            .collect();
        if incoming.is_empty() {
            return;
        }
        for p in &self.parts {
            for (row, n) in p.rows() {
                if done[n as usize] {
                    continue;
                }
                let q = p.vector(row);
                let vis = self.slots[n as usize].vis;
                let mut lists = std::mem::take(&mut self.slots[n as usize].lists);
                let old = lists.clone();
                let mut touched = false;
                for (c, cvis, v) in &incoming {
                    let hit = Hit {
                        slot: *c,
                        score: dot(q, v),
                    };
                    for a in AUDIENCES.iter().filter(|&&a| a >= vis && a >= *cvis) {
                        touched |= offer(&mut lists[*a as usize], hit, &self.slots);
                    }
                }
                if touched {
                    before.entry(n).or_insert(old);
                }
                self.slots[n as usize].lists = lists;
            }
        }
    }

    /// Vault indices of the notes whose related section may render differently.
    fn purges(
        &self,
        index_of: &HashMap<&str, usize>,
        moved: &[u32],
        before: &HashMap<u32, Lists>,
    ) -> Vec<usize> {
        let ids = |l: &Lists| {
            l.each_ref()
                .map(|v| v.iter().map(|h| h.slot).collect::<Vec<_>>())
        };
        let moved: HashSet<u32> = moved.iter().copied().collect();
        let mut out: Vec<usize> = Vec::new();
        for s in self.live_slots() {
            let slot = &self.slots[s as usize];
            let differs = before.get(&s).is_some_and(|b| ids(b) != ids(&slot.lists));
            let lists_moved = slot.lists.iter().flatten().any(|h| moved.contains(&h.slot));
            if differs || lists_moved {
                if let Some(&i) = index_of.get(slot.path.as_str()) {
                    out.push(i);
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// Records note `n` with vector `v`, in a new slot or the one its path has, and
    /// places it in its partition. The slot's lists are left as they were.
    fn put(&mut self, n: &Note, mut v: Vec<f32>) -> u32 {
        assert_eq!(
            v.len(),
            self.dim,
            "embedder returned a vector of the wrong length"
        );
        normalise(&mut v);
        let s = match self.by_path.get(&n.path) {
            Some(&s) => s,
            None => {
                let slot = Slot {
                    path: n.path.clone(),
                    version: 0,
                    vis: Visibility::Draft,
                    alive: true,
                    row: None,
                    lists: Default::default(),
                };
                let s = match self.free.pop() {
                    Some(s) => {
                        self.slots[s as usize] = slot;
                        s
                    }
                    None => {
                        self.slots.push(slot);
                        (self.slots.len() - 1) as u32
                    }
                };
                self.by_path.insert(n.path.clone(), s);
                s
            }
        };
        let vis = n.visibility();
        let row = v
            .iter()
            .any(|&x| x != 0.0)
            .then(|| self.parts[vis as usize].push(s, &v));
        let slot = &mut self.slots[s as usize];
        slot.version = n.version;
        slot.vis = vis;
        slot.alive = true;
        slot.row = row;
        s
    }

    /// Takes slot `s`'s vector out of its partition.
    fn unplace(&mut self, s: u32) {
        let slot = &mut self.slots[s as usize];
        let Some(row) = slot.row.take() else {
            return;
        };
        if let Some(moved) = self.parts[slot.vis as usize].remove(row) {
            self.slots[moved as usize].row = Some(row);
        }
    }

    fn sync_partitions(&mut self) {
        let exact_max = self.opts.exact_max;
        for (p, vis) in self.parts.iter_mut().zip(AUDIENCES) {
            if p.sync(exact_max) {
                tracing::debug!(
                    ?vis,
                    notes = p.len(),
                    hnsw = p.approximate(),
                    "related index"
                );
            }
        }
    }

    fn live_slots(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.slots.len() as u32).filter(|&s| self.slots[s as usize].alive)
    }

    fn recompute_all(&mut self) {
        let all: Vec<u32> = self.live_slots().collect();
        let lists = self.lists_many(&all);
        for (s, l) in all.into_iter().zip(lists) {
            self.slots[s as usize].lists = l;
        }
    }

    /// Fresh lists for each of `slots`, on up to `opts.threads` threads.
    fn lists_many(&self, slots: &[u32]) -> Vec<Lists> {
        let threads = self.opts.threads.clamp(1, 64);
        if threads == 1 || slots.len() < 4 * QUERY_BLOCK {
            return self.lists_blocks(slots);
        }
        let chunk = slots.len().div_ceil(threads);
        std::thread::scope(|sc| {
            let handles: Vec<_> = slots
                .chunks(chunk)
                .map(|c| sc.spawn(move || self.lists_blocks(c)))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| match h.join() {
                    Ok(v) => v,
                    Err(e) => std::panic::resume_unwind(e),
                })
                .collect()
        })
    }

    /// Fresh lists for `slots`, [`QUERY_BLOCK`] at a time: for each, the best of each
    /// partition an audience may see, merged.
    fn lists_blocks(&self, slots: &[u32]) -> Vec<Lists> {
        let mut out: Vec<Lists> = Vec::with_capacity(slots.len());
        for block in slots.chunks(QUERY_BLOCK) {
            let queries: Vec<(&[f32], u32)> = block
                .iter()
                .filter_map(|&s| {
                    let slot = &self.slots[s as usize];
                    Some((self.parts[slot.vis as usize].vector(slot.row?), s))
                })
                .collect();
            let mut acc: Vec<Vec<Hit>> = vec![Vec::with_capacity(2 * NEIGHBOURS); queries.len()];
            let mut lists: Vec<Lists> = vec![Default::default(); queries.len()];
            for (p, a) in self.parts.iter().zip(AUDIENCES) {
                let tops = p.top_block(&queries, &self.slots);
                for (j, top) in tops.into_iter().enumerate() {
                    let acc = &mut acc[j];
                    acc.extend(top);
                    acc.sort_by(|x, y| order(&self.slots, x, y));
                    acc.truncate(NEIGHBOURS);
                    if a >= self.slots[queries[j].1 as usize].vis {
                        lists[j][a as usize] = acc.clone();
                    }
                }
            }
            // Notes without a vector have no lists; put them back in order.
            let mut lists = lists.into_iter();
            for &s in block {
                out.push(match self.slots[s as usize].row {
                    Some(_) => lists.next().unwrap_or_default(),
                    None => Default::default(),
                });
            }
        }
        out
    }

    /// Rebuilds the index-based lists for `vault`, whose notes are exactly the live
    /// slots.
    fn refresh_view(&mut self, vault: &Vault) {
        let mut index_of_slot = vec![usize::MAX; self.slots.len()];
        for (i, n) in vault.notes().iter().enumerate() {
            if let Some(&s) = self.by_path.get(&n.path) {
                index_of_slot[s as usize] = i;
            }
        }
        self.view = vault
            .notes()
            .iter()
            .map(|n| match self.by_path.get(&n.path) {
                Some(&s) => self.slots[s as usize].lists.each_ref().map(|l| {
                    l.iter()
                        .map(|h| index_of_slot[h.slot as usize])
                        .filter(|&i| i != usize::MAX)
                        .collect()
                }),
                None => Default::default(),
            })
            .collect();
    }
}

/// Embeds notes `which` of `vault`, in batches; checks the embedder kept its contract
/// on count.
fn embed(embedder: &dyn Embedder, vault: &Vault, which: &[usize]) -> Vec<Vec<f32>> {
    let mut out = Vec::with_capacity(which.len());
    for batch in which.chunks(EMBED_BATCH) {
        let texts: Vec<String> = batch
            .iter()
            .map(|&i| note_text(&vault.notes()[i]))
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vs = embedder.embed(&refs);
        assert_eq!(
            vs.len(),
            refs.len(),
            "embedder {} returned a vector count unlike the texts'",
            embedder.name()
        );
        out.extend(vs);
    }
    out
}

#[cfg(test)]
mod tests;
