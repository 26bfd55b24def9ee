//! Makes a snapshot's compression dictionaries ([`crate::dictionary`]) from its own
//! pages: the sample rendered as an anonymous reader sees it, before the snapshot
//! is published.

use std::sync::Arc;

use http::Method;
use quire_http::dictionary::Dictionary;

use crate::dictionary::{assemble, Set, SAMPLES};
use crate::request::Req;
use crate::respond::{self, Stores};
use crate::routes::{self, Page};
use crate::snapshot::Snapshot;

/// `new`'s set, made before it is published: `old`'s when the presentation
/// (the epoch) is the same, else a new dictionary with `old`'s kept as the
/// previous one.
pub fn for_snapshot(new: &Arc<Snapshot>, old: Option<&Snapshot>, db: &Stores<'_>) -> Set {
    if let Some(old) = old.filter(|o| o.epoch == new.epoch) {
        return old.dictionaries().clone();
    }
    let t0 = std::time::Instant::now();
    let current = build(new, db).map(Arc::new);
    if let Some(d) = &current {
        tracing::info!(
            bytes = d.bytes().len(),
            ms = t0.elapsed().as_millis() as u64,
            hash = %&d.hex()[..16],
            "compression dictionary built"
        );
    }
    Set::new(
        current,
        old.and_then(|o| o.dictionaries().current().cloned()),
    )
}

/// Builds `s`'s dictionary from its public pages (`None` when off, or when no page
/// could be rendered).
pub fn build(s: &Arc<Snapshot>, db: &Stores<'_>) -> Option<Dictionary> {
    if !s.config.compression_dictionary {
        return None;
    }
    let pages: Vec<Vec<u8>> = sample_paths(s)
        .iter()
        .filter_map(|p| render(s, db, p))
        .collect();
    let bytes = assemble(&pages);
    (!bytes.is_empty()).then(|| Dictionary::new(bytes))
}

/// The index, then notes spread evenly over the sorted public paths.
fn sample_paths(s: &Snapshot) -> Vec<String> {
    let mut notes: Vec<&String> = s
        .versions
        .keys()
        .filter(|p| matches!(routes::route(p), Page::Note(_)))
        .collect();
    notes.sort();
    let mut out = vec!["/".to_owned()];
    let step = (notes.len() / (SAMPLES - 1)).max(1);
    out.extend(
        notes
            .iter()
            .step_by(step)
            .take(SAMPLES - 1)
            .map(|p| (*p).clone()),
    );
    out
}

/// `path` as an anonymous reader gets it, if it is an HTML page.
fn render(s: &Arc<Snapshot>, db: &Stores<'_>, path: &str) -> Option<Vec<u8>> {
    let base = match s.config.base_url.as_str() {
        "" => "http://localhost".to_owned(),
        b => b.trim_end_matches('/').to_owned(),
    };
    let req = Req {
        method: &Method::GET,
        path,
        query: None,
        viewer: None,
        base,
    };
    let reply = respond::page(s, &req, db);
    (reply.status == http::StatusCode::OK && reply.content_type == crate::reply::HTML)
        .then(|| reply.body.to_vec())
}
