//! A base in a page: `![[X.base]]`, `![[X.base#View]]` and ```` ```base ```` blocks,
//! run for the page's audience and drawn as plain HTML (`bases::draw`).
//!
//! Key decisions:
//! - **A base reads only what its reader may read**: its rows are the notes of the
//!   page's audience (each once, at its own page), a `[[link]]` in a cell links only
//!   to a note the audience may read, and a card's image only shows an attachment
//!   the site serves to that audience (one a note of the audience embeds or shows as
//!   its image). A private note never adds a row, a count or a value to a public page.
//! - **The page depends on exactly what the base showed**: what a base contributes
//!   to a page is its HTML, so the page's record keeps that HTML's digest under the
//!   base's reference ([`BaseRef`]), and the record holds on a later vault when the
//!   same base, run there for the same audience, draws the same HTML. An edit that
//!   changes no row, cell, count or link of any view a page shows re-renders nothing;
//!   one that does re-renders exactly the pages showing it. `now()` is the vault's
//!   load time ([`Vault::now_ms`]), so a base that shows the time changes with every
//!   reload and one that does not, never.
//! - **Run once per vault and audience** ([`BaseMemo`]): every page embedding a base,
//!   and every check that a page still holds, shares one run, within
//!   [`MEMO_BYTES_MAX`] of kept HTML (past it, runs are not kept).
//! - **Bounded**: a view shows at most [`ROWS_MAX`] rows and pays at most
//!   [`STEPS_MAX`] evaluation steps; the HTML is bounded by the drawing.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use super::url::attachment_url;
use crate::base_files::Drawn;
pub use crate::base_files::{BaseMemo, BaseRef, Source};
use crate::bases::{self, Base, BaseError, Budget, Env, Links, NoteRow, Row};
use crate::html::escape;
use crate::note::Visibility;
use crate::preview::shown_files;
use crate::vault::Vault;

/// Rows a view shows at most, whatever its `limit`.
pub(crate) const ROWS_MAX: usize = 1000;

/// Evaluation steps one view may pay (a step per expression node, and per 64 bytes
/// or list item touched).
pub(crate) const STEPS_MAX: u64 = 4_000_000;

/// HTML of runs a vault keeps for its pages, at most.
pub(crate) const MEMO_BYTES_MAX: usize = 32 << 20;

/// Largest ```` ```base ```` block run: larger ones show why.
pub(crate) const INLINE_BYTES_MAX: usize = 64 * 1024;

/// `r` run on `vault` for `audience`: kept from an earlier run on this vault, else
/// run now (and kept, within [`MEMO_BYTES_MAX`]).
pub(crate) fn drawn(vault: &Vault, r: &BaseRef, audience: Visibility) -> Arc<Drawn> {
    let key = (r.clone(), audience);
    let memo = vault.base_memo();
    if let Some(d) = memo.get(&key) {
        return d;
    }
    let html = draw(vault, r, audience);
    let digest = xxhash_rust::xxh3::xxh3_64(html.as_bytes());
    let d = Arc::new(Drawn { html, digest });
    memo.keep(key, &d, MEMO_BYTES_MAX);
    d
}

/// The HTML of `r` on `vault` for `audience`: the view, or why it cannot be shown.
fn draw(vault: &Vault, r: &BaseRef, audience: Visibility) -> String {
    let base = match definition(vault, &r.source) {
        Ok(b) => b,
        Err(e) => return refused(&e.to_string()),
    };
    let view = match &r.view {
        Some(name) => base.views.iter().find(|v| v.name == *name),
        None => base.views.first(),
    };
    let Some(view) = view else {
        return refused(&match &r.view {
            Some(name) => format!("the base has no view named “{name}”"),
            None => "the base has no views".to_owned(),
        });
    };
    let notes = rows_of(vault, audience);
    let note_rows: Vec<NoteRow<'_>> = notes
        .iter()
        .map(|&i| NoteRow::new(&vault.notes()[i]))
        .collect();
    let rows: Vec<&dyn Row> = note_rows.iter().map(|r| r as &dyn Row).collect();
    let env = Env {
        formulas: &base.formulas,
        now_ms: vault.now_ms(),
        clock_read: Default::default(),
    };
    let mut budget = Budget::new(STEPS_MAX);
    let out = bases::run(&base, view, &rows, &env, &mut budget, ROWS_MAX);
    if env.clock_read.get() {
        vault.base_memo().clock_read();
    }
    let links = VaultLinks {
        vault,
        audience,
        notes: &notes,
        images: OnceLock::new(),
    };
    bases::draw(view, &out, &links)
}

/// The base `source` names, read.
fn definition(vault: &Vault, source: &Source) -> Result<Base, BaseError> {
    match source {
        Source::File(name) => match vault.base_file(name) {
            Some(f) => f.base.clone(),
            None => Err(BaseError::Shape("no such base")),
        },
        Source::Inline(yaml) if yaml.len() > INLINE_BYTES_MAX => Err(BaseError::Limit {
            what: "bytes in a base block",
            max: INLINE_BYTES_MAX,
        }),
        Source::Inline(yaml) => bases::read(yaml),
    }
}

/// A base that cannot be shown, saying why (escaped).
fn refused(why: &str) -> String {
    format!(
        "<p class=\"base base-error\">This base cannot be shown: {}.</p>",
        escape(why)
    )
}

/// The notes a base run for `audience` sees: each the audience may read, once (the
/// note published at its page; a note that lost its page to another is not one).
fn rows_of(vault: &Vault, audience: Visibility) -> Vec<usize> {
    vault
        .notes()
        .iter()
        .enumerate()
        .filter(|(i, n)| n.visibility() <= audience && vault.by_url(&n.url) == Some(*i))
        .map(|(i, _)| i)
        .collect()
}

/// Where a view's cells link, for one audience (see the module doc).
struct VaultLinks<'a> {
    vault: &'a Vault,
    audience: Visibility,
    /// The run's rows: note indexes.
    notes: &'a [usize],
    /// Attachments the site serves to the audience, by lower-cased name: found on
    /// the first image asked for.
    images: OnceLock<HashSet<String>>,
}

impl Links for VaultLinks<'_> {
    fn row_url(&self, index: usize) -> Option<String> {
        let i = *self.notes.get(index)?;
        Some(self.vault.notes()[i].url.clone())
    }

    fn link_url(&self, target: &str) -> Option<String> {
        let i = self.vault.resolve(target)?;
        let n = &self.vault.notes()[i];
        (n.visibility() <= self.audience).then(|| n.url.clone())
    }

    fn image_url(&self, name: &str) -> Option<String> {
        let rel = self.vault.attachment(name)?;
        if !super::wikilinks::is_image(rel) {
            return None;
        }
        let file = rel.rsplit('/').next().unwrap_or(rel).to_lowercase();
        let served = self
            .images
            .get_or_init(|| served_images(self.vault, self.audience));
        if !served.contains(&file) {
            return None;
        }
        let v = self.vault.attachment_version(name)?;
        Some(format!("{}?v={v:016x}", attachment_url(&file)))
    }
}

/// Attachments served to `audience`: those a note it may read shows (the site's
/// rule for serving an attachment: `preview::shown_files`), by lower-cased name.
fn served_images(vault: &Vault, audience: Visibility) -> HashSet<String> {
    let mut out = HashSet::new();
    for n in vault.notes().iter().filter(|n| n.visibility() <= audience) {
        for name in shown_files(vault, n) {
            if let Some(rel) = vault.attachment(name) {
                out.insert(rel.rsplit('/').next().unwrap_or(rel).to_lowercase());
            }
        }
    }
    out
}

/// `md` with each ```` ```base ```` block (a top-level fence whose info string is
/// `base`) replaced by a paragraph of its own holding what `put` makes of the
/// block's YAML (a marker). A fence left open runs to the end, as CommonMark reads it.
pub(super) fn replace_blocks(md: &str, put: &mut dyn FnMut(Arc<str>) -> String) -> String {
    let mut out = String::with_capacity(md.len());
    let mut fence = None;
    // The YAML of the base block being read, if one is open.
    let mut block: Option<String> = None;
    for line in md.split_inclusive('\n') {
        let was_open = fence.is_some();
        let is_fence = crate::scan::fence_line(line, &mut fence);
        if let Some(yaml) = block.as_mut() {
            if is_fence && fence.is_none() {
                let yaml = block.take().unwrap_or_default();
                push_marker(&mut out, &put(yaml.into()));
            } else {
                yaml.push_str(line);
            }
            continue;
        }
        if is_fence && !was_open && info_is_base(line) {
            block = Some(String::new());
            continue;
        }
        out.push_str(line);
    }
    if let Some(yaml) = block {
        push_marker(&mut out, &put(yaml.into()));
    }
    out
}

/// Whether the fence opening on `line` says `base` (its info string's first word).
fn info_is_base(line: &str) -> bool {
    let info = line.trim().trim_start_matches(['`', '~']);
    info.split_whitespace().next() == Some("base")
}

fn push_marker(out: &mut String, marker: &str) {
    if !out.is_empty() && !out.ends_with("\n\n") {
        out.push('\n');
    }
    out.push_str(marker);
    out.push_str("\n\n");
}

#[cfg(test)]
mod tests;
