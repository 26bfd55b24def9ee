//! Watches the vault and republishes it when a note, attachment, template or setting
//! changes: reload, swap the snapshot (new keys for exactly the changed pages), then
//! purge those pages' old entries by tag and queue them to be rendered before anyone
//! asks (`crate::ahead`). Runs on the watcher's own thread, never on
//! a request.
//!
//! Files quire itself writes under `.quire/` (databases, the session secret) are
//! ignored, so writing a view count never triggers a reload.
//!
//! A public note that reads as no longer public right after a write may be half
//! saved (quire-vault's `vault::SETTLE`): the vault keeps it as it was and says so,
//! and [`republish`] reloads again once `SETTLE` has passed, up to
//! [`SETTLE_ROUNDS`] times, so a real change of visibility is published late by
//! `SETTLE` at most, and an in-place save never serves a 404.
//!
//! A change made after the site was loaded but before watching began raises no event,
//! so [`start`] reloads once more as soon as events are caught (a reload re-reads only
//! files whose size or mtime changed). Reloads run one at a time, so the last to
//! publish has read the newest files.
//!
//! A base that reads the clock (`now()`, `today()`, `relative()`) shows what the
//! vault's load time makes of it, so while the vault holds one, a clock thread
//! republishes every [`CLOCK_PERIOD`] even without a change: the reload takes a new
//! time, and exactly the pages whose bases now draw something else are re-rendered.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notify::RecursiveMode;
use notify_debouncer_full::{new_debouncer, DebounceEventResult};
use quire_server::purge::{self, Target};
use quire_server::Ctx;

use crate::reply::path_tag;
use crate::site::Site;

/// Events closer together than this are handled as one change (an editor's
/// write-rename-chmod sequence).
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// How far behind the clock a page showing a base that reads it may be.
pub const CLOCK_PERIOD: Duration = Duration::from_secs(600);

/// A running watcher; dropping it stops watching (and the clock thread).
pub struct Watcher {
    _debouncer: Box<dyn std::any::Any + Send>,
    _clock: std::sync::mpsc::Sender<()>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

/// Whether a changed path cannot change the site: quire's own files, and editors'
/// swap, backup and temporary files (the vault loader never reads those either).
fn ignored(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    ours(p)
        || name.ends_with('~')
        || name.ends_with(".swp")
        || name.ends_with(".swx")
        || name.ends_with(".tmp")
        || name.starts_with(".#")
        || (name.starts_with('.') && !p.components().any(|c| c.as_os_str() == crate::config::DIR))
}

/// Whether a changed path is one of quire's own files.
fn ours(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let in_quire_dir = p.components().any(|c| c.as_os_str() == crate::config::DIR);
    in_quire_dir
        && (name == "secret"
            // The sign-out table and its temporary file: a sign-out reloads nothing.
            || name == "sessions"
            || name.starts_with("sessions.tmp")
            || name.ends_with(".db")
            || name.ends_with(".db-wal")
            || name.ends_with(".db-shm")
            || name.ends_with(".db-journal")
            || name.contains(".corrupt"))
}

/// Reloads after a half-saved note before giving up until the next event.
pub const SETTLE_ROUNDS: usize = 10;

/// Republishes `site` and purges what changed; again after
/// [`quire_vault::vault::SETTLE`] while a note may be half-saved.
pub fn republish(site: &Site, ctx: &Ctx) {
    publish_once(site, ctx);
    for _ in 0..SETTLE_ROUNDS {
        if !site.snapshot().vault.unsettled() {
            break;
        }
        std::thread::sleep(quire_vault::vault::SETTLE);
        publish_once(site, ctx);
    }
}

fn publish_once(site: &Site, ctx: &Ctx) {
    let t0 = Instant::now();
    match site.reload_changes() {
        Ok(changes) => {
            let paths = changes.public;
            let targets: Vec<Target> = paths
                .iter()
                .map(|p| Target::Key(path_tag(p)))
                .chain(changes.signed_in.into_iter().map(Target::Key))
                .collect();
            let purged = if targets.is_empty() {
                0
            } else {
                purge::run(ctx, &targets, false)
            };
            // Changed pages first: their previous entries were purged, while
            // restyled ones still answer from theirs.
            let mut render = paths.clone();
            render.extend(changes.restyled.iter().cloned());
            let prefilling =
                site.prefill_changed(&render) + site.prefill_signed_in(&changes.signed_in_render);
            tracing::info!(
                pages = paths.len(),
                restyled = changes.restyled.len(),
                purged,
                prefilling,
                ms = t0.elapsed().as_millis() as u64,
                "vault republished"
            );
        }
        Err(e) => {
            tracing::error!(error = %e, "vault reload failed; still serving the previous version")
        }
    }
}

/// Starts watching `site`'s vault, then republishes it once: an edit made while quire
/// was starting (after the vault was read, before this call) raised no event, and would
/// otherwise stay unpublished until some other file changed.
pub fn start(site: Site, ctx: Arc<Ctx>) -> Result<Watcher, notify::Error> {
    let root = site.root().to_owned();
    let serial = Arc::new(Mutex::new(()));
    let (first_site, first_ctx, first_serial) = (site.clone(), ctx.clone(), serial.clone());
    let mut debouncer = new_debouncer(DEBOUNCE, None, move |res: DebounceEventResult| {
        let relevant = match &res {
            Ok(events) => events
                .iter()
                .any(|e| !e.kind.is_access() && e.paths.iter().any(|p| !ignored(p))),
            Err(errors) => {
                for e in errors {
                    tracing::warn!(error = %e, "watch error; reloading to be safe");
                }
                true
            }
        };
        if relevant {
            let _one_at_a_time = serial.lock().unwrap_or_else(|e| e.into_inner());
            republish(&site, &ctx);
        }
    })?;
    debouncer.watch(&root, RecursiveMode::Recursive)?;
    {
        let _one_at_a_time = first_serial.lock().unwrap_or_else(|e| e.into_inner());
        republish(&first_site, &first_ctx);
    }
    Ok(Watcher {
        _debouncer: Box::new(debouncer),
        _clock: clock(first_site, first_ctx, first_serial),
    })
}

/// Starts the clock thread (see the module doc); it ends when the returned sender
/// is dropped.
fn clock(site: Site, ctx: Arc<Ctx>, serial: Arc<Mutex<()>>) -> std::sync::mpsc::Sender<()> {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("quire-site-clock".into())
        .spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                rx.recv_timeout(CLOCK_PERIOD)
            {
                if site.snapshot().vault.bases_read_clock() {
                    let _one_at_a_time = serial.lock().unwrap_or_else(|e| e.into_inner());
                    republish(&site, &ctx);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no clock thread: pages showing now() update only when the vault changes");
    }
    tx
}

#[cfg(test)]
mod tests {
    use super::*;

    /// quire-chaos's serve run found this: an edit written while `quire serve` was
    /// starting (between `Site::open` and the watcher) was never published; its page
    /// stayed old until another file changed or quire restarted.
    #[test]
    fn an_edit_made_before_watching_began_is_published_when_it_begins() {
        let vault = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let note = vault.path().join("a.md");
        std::fs::write(&note, "---\ntitle: A\nfree: true\n---\nmarker-old\n").unwrap();
        let site = Site::open(vault.path()).unwrap();
        let mut cfg = quire_server::Config::default();
        cfg.cache.path = cache.path().join("test.vol");
        cfg.cache.size = quire_server::config::ByteSize(16 << 20);
        let ctx = Ctx::with_upstream(cfg, Arc::new(site.clone())).unwrap();
        // Longer, so the file's stamp (size and mtime) differs whatever the mtime
        // granularity.
        std::fs::write(
            &note,
            "---\ntitle: A\nfree: true\n---\nmarker-new, longer\n",
        )
        .unwrap();
        let _watcher = start(site.clone(), ctx).unwrap();
        let snap = site.snapshot();
        let body = &snap.vault.notes()[0].body;
        assert!(body.contains("marker-new"), "still {body:?}");
    }

    #[test]
    fn quire_files_do_not_trigger_reloads() {
        assert!(ours(Path::new("/v/.quire/search.db-wal")));
        assert!(ours(Path::new("/v/.quire/secret")));
        assert!(ours(Path::new("/v/.quire/sessions")));
        assert!(ours(Path::new("/v/.quire/sessions.tmp4242")));
        assert!(!ours(Path::new("/v/.quire/site.toml")));
        assert!(!ours(Path::new("/v/.quire/templates/note.html")));
        assert!(!ours(Path::new("/v/Notes/a.db")));
        assert!(ignored(Path::new("/v/Notes/.a.md.swp")));
        assert!(ignored(Path::new("/v/Notes/a.md~")));
        assert!(!ignored(Path::new("/v/Notes/a.md")));
        assert!(!ignored(Path::new("/v/.quire/site.toml")));
    }
}
