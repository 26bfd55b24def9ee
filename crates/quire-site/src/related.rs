//! Related notes as the site reads them: for each note and audience, a precomputed
//! list of note indices. Computed when the vault changes (never per request) and
//! swapped in with the snapshot.

use quire_vault::Visibility;

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
