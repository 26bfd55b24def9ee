//! Related notes as the site reads them: for each note and audience, a precomputed
//! list of note indices. Computed when the vault changes (never per request) and
//! swapped in with the snapshot.

use quire_vault::related::{Lexical, Options, Related};
use quire_vault::{Vault, Visibility};

/// How far the vault's IDF may drift from the fitted one before the lexical
/// embedder is refitted and every list rebuilt (see `Lexical::drift`).
const DRIFT_MAX: f32 = 0.05;

/// The share of the fitted documents that must change before the drift is measured.
const RECHECK_SHARE: f64 = 0.02;

/// The related-notes state kept between reloads: the embedder and the lists it made.
pub struct Engine {
    embedder: Lexical,
    related: Related,
    /// Notes changed or removed since the embedder was fitted.
    changed_since_fit: usize,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("notes", &self.related.len())
            .finish()
    }
}

impl Engine {
    /// Fits the embedder on the vault's public notes (so a public list depends on
    /// public text only) and computes every list.
    pub fn build(vault: &Vault) -> Engine {
        Engine::build_with(vault, Options::default())
    }

    /// [`Engine::build`] with `opts` (a rebuild while serving uses one thread, so
    /// it never takes the hit path's core).
    fn build_with(vault: &Vault, opts: Options) -> Engine {
        let embedder = Lexical::for_vault(vault, Visibility::Public);
        let related = Related::build_with(vault, &embedder, opts);
        Engine {
            embedder,
            related,
            changed_since_fit: 0,
        }
    }

    /// Brings the lists up to date with `vault` after `changed` notes (indices in
    /// `vault`) changed and `removed` paths went away; refits and rebuilds when the
    /// vocabulary has drifted.
    ///
    /// IDF can only drift as far as the documents that changed since the fit, so the
    /// drift (a pass over every public note) is measured only once those reach
    /// `RECHECK_SHARE` (2 %) of the fitted documents: an everyday edit costs the update
    /// of one note's neighbours, not a pass over the vault.
    pub fn update(&mut self, vault: &Vault, changed: &[usize], removed: &[String]) {
        self.changed_since_fit += changed.len() + removed.len();
        if self.changed_since_fit as f64 > self.embedder.fitted_docs().max(1) as f64 * RECHECK_SHARE
        {
            let public: Vec<String> = vault
                .notes()
                .iter()
                .filter(|n| n.visibility() == Visibility::Public)
                .map(quire_vault::related::note_text)
                .collect();
            let refs: Vec<&str> = public.iter().map(String::as_str).collect();
            if self.embedder.drift(&refs) > DRIFT_MAX {
                let opts = Options {
                    threads: 1,
                    ..Options::default()
                };
                *self = Engine::build_with(vault, opts);
                return;
            }
            self.changed_since_fit = 0;
        }
        let removed: Vec<&str> = removed.iter().map(String::as_str).collect();
        self.related
            .update(vault, &self.embedder, changed, &removed);
    }

    /// The lists as the snapshot reads them.
    pub fn lists(&self, vault: &Vault) -> RelatedNotes {
        let lists = (0..vault.notes().len())
            .map(|i| {
                [Visibility::Public, Visibility::Private, Visibility::Draft]
                    .map(|a| self.related.related(i, a).to_vec())
            })
            .collect();
        RelatedNotes { lists }
    }
}

/// Per note, per audience (public, private, draft), the related notes.
#[derive(Debug, Default)]
pub struct RelatedNotes {
    lists: Vec<[Vec<usize>; 3]>,
}

impl RelatedNotes {
    /// No related notes at all.
    pub fn empty() -> RelatedNotes {
        RelatedNotes::default()
    }

    /// Note `i`'s related notes for `audience`.
    pub fn of(&self, i: usize, audience: Visibility) -> &[usize] {
        let a = match audience {
            Visibility::Public => 0,
            Visibility::Private => 1,
            Visibility::Draft => 2,
        };
        self.lists.get(i).map_or(&[], |l| l[a].as_slice())
    }
}
