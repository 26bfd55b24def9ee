//! The site as `quire-server` sees it: an [`Upstream`] that renders instead of
//! fetching, and versions every page's cache key from the current snapshot.
//!
//! Key decisions:
//! - **The snapshot is swapped whole** (`arc_swap`): a request reads one snapshot for
//!   its key version and another load for its render may see a newer one — never an
//!   older one. So the worst race stores a newer page under an older key, which no
//!   request computes any more once the newer snapshot is published: a stale page is
//!   never served after the swap.
//! - **Rendering runs on threads of its own**, not on the runtime's workers, so a
//!   slow render never delays a hit on the same worker; and below the workers' CPU
//!   priority (`quire_server::uncached_work`), so a crowd's renders never take the
//!   core a hit needs.
//! - `key_version` is one atomic load and one hash lookup: the hit path's share of
//!   publishing.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Limited};
use quire_http::key::NormalizedUrl;
use quire_server::origin::{FailureKind, OriginError, OutBody};
use quire_server::prefill::Prefill;
use quire_server::upstream::{Audience, FillMark, UpFuture, Upstream};
use quire_vault::readers::{LoginLimiter, LoginLimits, Sessions, Users};
use quire_vault::search::SearchIndex;
use quire_vault::views::Views;
use quire_vault::{Vault, Visibility};

use crate::ahead::Ahead;
use crate::auth;
use crate::config::{SiteConfig, SiteConfigError, DIR};
use crate::dictionary_pages;
use crate::gate::Gate;
use crate::model::Viewer;
use crate::related;
use crate::reply::{Policy, Reply};
use crate::request::{self, Req};
use crate::respond;
use crate::routes::{self, percent_decode};
use crate::shared::{SessionMode, Shared};
use crate::snapshot::{self, Snapshot};
use crate::templates::{TemplateError, Templates};

/// Largest form body read (sign-in).
const FORM_BYTES_MAX: usize = 16 * 1024;

/// How long a form body may take to arrive (a trickled body cannot hold a task).
const FORM_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the site could not be opened or reloaded.
#[derive(Debug, thiserror::Error)]
pub enum SiteError {
    /// The vault folder.
    #[error(transparent)]
    Vault(#[from] quire_vault::vault::VaultError),
    /// `site.toml`.
    #[error(transparent)]
    Config(#[from] SiteConfigError),
    /// A template.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The users file or the session secret.
    #[error(transparent)]
    Readers(#[from] quire_vault::readers::ReadersError),
    /// The views database.
    #[error(transparent)]
    Views(#[from] quire_vault::views::ViewsError),
    /// The search index.
    #[error(transparent)]
    Search(#[from] quire_vault::search::SearchError),
}

/// A published vault.
#[derive(Debug, Clone)]
pub struct Site {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    snap: ArcSwap<Snapshot>,
    /// Answers rendered (every request that reached the site).
    renders: AtomicU64,
    /// `.quire/users.toml`, reloaded with the vault.
    users: ArcSwap<Users>,
    /// Session cookie signing (`.quire/secret`) and sign-outs (`.quire/sessions`).
    sessions: Sessions,
    /// Failed sign-in throttle.
    limiter: Arc<LoginLimiter>,
    /// Password checks at once (`[sign_in]` of `site.toml`, read at start).
    gate: Arc<Gate>,
    /// Page views (`.quire/views.db`).
    views: Views,
    /// Full-text search (`.quire/search.db`).
    search: SearchIndex,
    /// Related notes, updated on reload (one reload at a time holds it).
    related: Mutex<related::Engine>,
    /// The cluster, once joined (`SessionMode::Cluster` only).
    shared: OnceLock<Arc<dyn Shared>>,
    /// Pages rendered before anyone asks (`crate::ahead`).
    ahead: Ahead,
    /// Readers' API tokens (`.quire/tokens.toml`), for the MCP endpoint.
    tokens: crate::mcp::TokenFile,
}

/// What a reload changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The paths whose anonymous page changed (to purge by their page tag, and to
    /// render before anyone asks).
    pub public: Vec<String>,
    /// The paths whose anonymous page only changed how it is presented (templates,
    /// stylesheet): not purged, since their previous entries answer until they are
    /// rendered again (`Snapshot::previous_version`); rendered before anyone asks.
    pub restyled: Vec<String>,
    /// The surrogate keys of the signed-in audiences' pages that changed (to purge).
    pub signed_in: Vec<String>,
    /// The signed-in audiences' pages to render again: changed or restyled, by
    /// audience (only those its readers asked for lately are, see `crate::ahead`).
    pub signed_in_render: Vec<(Visibility, String)>,
}

/// Views queued before new ones are dropped (and counted as dropped).
const VIEWS_QUEUE: usize = 64 * 1024;

impl Site {
    /// Loads the vault at `root` and everything the site needs to serve it.
    pub fn open(root: &Path) -> Result<Site, SiteError> {
        Site::open_with(root, &SessionMode::Local)
    }

    /// [`Site::open`], with sessions kept as `mode` says.
    pub fn open_with(root: &Path, mode: &SessionMode) -> Result<Site, SiteError> {
        let parts = load(root, None)?;
        let t0 = std::time::Instant::now();
        let engine = related::Engine::build(&parts.vault);
        tracing::info!(
            notes = parts.vault.notes().len(),
            ms = t0.elapsed().as_millis() as u64,
            "related notes computed"
        );
        let snap = parts.into_snapshot(&engine, None);
        let dir = root.join(DIR);
        std::fs::create_dir_all(&dir).map_err(|source| quire_vault::vault::VaultError {
            path: dir.clone(),
            source,
        })?;
        let users = Users::load(&dir.join("users.toml"))?;
        let snap_gate = snap.config.sign_in.limits();
        let sessions = open_sessions(&dir, mode, auth::ttl(&snap))?;
        let views = Views::open(&dir.join("views.db"), VIEWS_QUEUE)?;
        let (search, rebuilt) = SearchIndex::open_or_rebuild(&dir.join("search.db"))?;
        if rebuilt {
            tracing::warn!("the search index was unreadable and has been rebuilt");
        }
        // Before serving: search answers are cached under the snapshot's search
        // version, so the index must already match it.
        let t0 = std::time::Instant::now();
        search.reindex(&snap.vault)?;
        tracing::info!(
            notes = snap.vault.notes().len(),
            ms = t0.elapsed().as_millis() as u64,
            "search index rebuilt"
        );
        let site = Site {
            inner: Arc::new(Inner {
                root: root.to_owned(),
                snap: ArcSwap::from_pointee(snap),
                renders: AtomicU64::new(0),
                users: ArcSwap::from_pointee(users),
                sessions,
                limiter: Arc::new(LoginLimiter::new(LoginLimits::default())),
                gate: Gate::new(snap_gate),
                views,
                search,
                related: Mutex::new(engine),
                shared: OnceLock::new(),
                ahead: Ahead::default(),
                tokens: crate::mcp::TokenFile::new(dir.join("tokens.toml")),
            }),
        };
        // Before anything is served, so every page names the dictionary.
        let snap = site.inner.snap.load_full();
        snap.set_dictionaries(dictionary_pages::for_snapshot(
            &snap,
            None,
            &site.inner.stores(),
        ));
        Ok(site)
    }

    /// The session keeper (a cluster adopts and raises sign-outs through it).
    pub fn sessions(&self) -> &Sessions {
        &self.inner.sessions
    }

    /// Joins the cluster: sign-outs are recorded and `/_views` reads totals
    /// through `shared` from now on. `false` if one was set already.
    pub fn share_with(&self, shared: Arc<dyn Shared>) -> bool {
        self.inner.shared.set(shared).is_ok()
    }

    /// Renders changed pages before anyone asks, through `prefill` (the server's
    /// prefill queue): every public page for each new origin a fill names, and
    /// after each reload the pages that changed. False if one was attached already.
    pub fn prefill_with(&self, prefill: Prefill) -> bool {
        self.inner.ahead.attach(prefill)
    }

    /// Queues `paths` (changed by a reload) to be rendered before anyone asks; how
    /// many were queued.
    pub fn prefill_changed(&self, paths: &[String]) -> usize {
        self.inner.ahead.changed(paths)
    }

    /// Queues the signed-in audiences' `pages` (changed by a reload) that their
    /// readers asked for lately to be rendered before anyone asks; how many were
    /// queued.
    pub fn prefill_signed_in(&self, pages: &[(Visibility, String)]) -> usize {
        self.inner.ahead.changed_signed_in(pages)
    }

    /// Writes every queued view count (on shutdown: a graceful stop loses none).
    pub fn flush(&self) {
        self.inner.views.flush();
    }

    /// The view counter.
    pub fn views(&self) -> &Views {
        &self.inner.views
    }

    /// The vault folder.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.inner.snap.load_full()
    }

    /// How many requests reached the site (misses, bypasses, forms): a hit never
    /// does.
    pub fn renders(&self) -> u64 {
        self.inner.renders.load(Ordering::Relaxed)
    }

    /// Reloads the vault and publishes the new snapshot; returns the paths whose
    /// pages changed (to purge; not those only restyled, see
    /// [`Changes::restyled`]). On an error the current snapshot stays.
    pub fn reload(&self) -> Result<Vec<String>, SiteError> {
        self.reload_changes().map(|c| c.public)
    }

    /// [`Site::reload`], with the signed-in audiences' changes too.
    pub fn reload_changes(&self) -> Result<Changes, SiteError> {
        let t0 = Instant::now();
        let parts = load(&self.inner.root, Some(&self.inner.snap.load().vault))?;
        let t_load = t0.elapsed();
        let (changed, removed) = note_changes(&self.inner.snap.load().vault, &parts.vault);
        let mut engine = self
            .inner
            .related
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !changed.is_empty() || !removed.is_empty() {
            engine.update(&parts.vault, &changed, &removed);
        }
        let t_related = t0.elapsed();
        let new = Arc::new(parts.into_snapshot(&engine, Some(&self.inner.snap.load())));
        drop(engine);
        let t_snapshot = t0.elapsed();
        // The index follows before the snapshot is published (see `open`).
        if !changed.is_empty() || !removed.is_empty() {
            if let Err(e) = self.inner.search.update(&new.vault, &changed, &removed) {
                tracing::error!(error = %e, "search index update failed; rebuilding it");
                self.inner.search.reindex(&new.vault)?;
            }
        }
        match Users::load(&self.inner.root.join(DIR).join("users.toml")) {
            Ok(u) => self.inner.users.store(Arc::new(u)),
            Err(e) => {
                tracing::error!(error = %e, "users file not reloaded; the previous one stays")
            }
        }
        // Claimed before the swap, so no signed-in request starts a second making.
        let wanted = self.inner.snap.load().signed_in_wanted() && new.start_signed_in();
        // Before the swap, so every page of the new snapshot names its dictionary.
        new.set_dictionaries(dictionary_pages::for_snapshot(
            &new,
            Some(&self.inner.snap.load()),
            &self.inner.stores(),
        ));
        let old = self.inner.snap.swap(new.clone());
        // Anonymous pages first; then, when signed-in readers were seen, their
        // audiences' versions (their requests bypass the cache until then).
        if wanted {
            new.compute_signed_in(Some(&old));
        }
        tracing::debug!(
            load_ms = t_load.as_millis() as u64,
            related_ms = (t_related - t_load).as_millis() as u64,
            snapshot_ms = (t_snapshot - t_related).as_millis() as u64,
            search_ms = (t0.elapsed() - t_snapshot).as_millis() as u64,
            "reload phases"
        );
        let paths = snapshot::changed_paths(&old, &new);
        let mut signed_in = Vec::new();
        let mut signed_in_render = Vec::new();
        for (aud, c) in snapshot::changed_signed_in(&old, &new) {
            let tag = |p: &String| crate::reply::audience_tag(&crate::reply::path_tag(p), aud);
            signed_in.extend(c.changed.iter().map(tag));
            signed_in_render.extend(c.changed.into_iter().chain(c.restyled).map(|p| (aud, p)));
        }
        signed_in.sort();
        Ok(Changes {
            public: paths.changed,
            restyled: paths.restyled,
            signed_in,
            signed_in_render,
        })
    }
}

/// The notes of `new` that are new or changed since `old` (indices into `new`), and
/// the paths of `old`'s notes that are gone.
fn note_changes(old: &Vault, new: &Vault) -> (Vec<usize>, Vec<String>) {
    let before: HashMap<&str, u64> = old
        .notes()
        .iter()
        .map(|n| (n.path.as_str(), n.version))
        .collect();
    let changed = new
        .notes()
        .iter()
        .enumerate()
        .filter(|(_, n)| before.get(n.path.as_str()) != Some(&n.version))
        .map(|(i, _)| i)
        .collect();
    let now: HashSet<&str> = new.notes().iter().map(|n| n.path.as_str()).collect();
    let removed = old
        .notes()
        .iter()
        .filter(|n| !now.contains(n.path.as_str()))
        .map(|n| n.path.clone())
        .collect();
    (changed, removed)
}

/// What a snapshot is made of, loaded from disk.
struct Parts {
    vault: Vault,
    config: SiteConfig,
    text: String,
    templates: Arc<Templates>,
}

impl Parts {
    fn into_snapshot(self, engine: &related::Engine, previous: Option<&Snapshot>) -> Snapshot {
        let lists = Arc::new(engine.lists(&self.vault));
        Snapshot::new(
            self.vault,
            self.config,
            &self.text,
            self.templates,
            lists,
            previous,
        )
    }
}

/// The sessions `mode` asks for, from the vault's `.quire` folder `dir`.
fn open_sessions(dir: &Path, mode: &SessionMode, ttl: Duration) -> Result<Sessions, SiteError> {
    use quire_vault::readers::ReadersError;
    let secret_path = dir.join("secret");
    let secret = match mode {
        SessionMode::Local => {
            return Ok(Sessions::load_or_create(
                &secret_path,
                &dir.join("sessions"),
                ttl,
            )?)
        }
        SessionMode::Cluster { secret: Some(s) } => s.clone(),
        SessionMode::Cluster { secret: None } => Sessions::secret_file(&secret_path)?,
    };
    Sessions::shared(&secret, ttl).ok_or_else(|| {
        SiteError::Readers(ReadersError::Secret {
            path: "cluster.session_secret".into(),
            message: "it needs 32 or more random bytes".into(),
        })
    })
}

fn load(root: &Path, previous: Option<&Vault>) -> Result<Parts, SiteError> {
    // The render budgets first: the tag cap applies while notes are parsed.
    let (config, text) = SiteConfig::load(root)?;
    quire_vault::render::budget::set_limits(config.render.into());
    let vault = match previous {
        Some(p) => Vault::reload(root, p)?,
        None => Vault::load(root)?,
    };
    for w in vault.warnings() {
        tracing::warn!(path = %w.path, "{}", w.message);
    }
    let templates = Arc::new(Templates::load(root)?);
    Ok(Parts {
        vault,
        config,
        text,
        templates,
    })
}

/// A normalised URL path as the snapshot's page paths are spelt: percent-decoded,
/// borrowed (no allocation on a lookup) when there is nothing to decode.
fn page_path(path: &str) -> std::borrow::Cow<'_, str> {
    match path.contains('%') {
        true => std::borrow::Cow::Owned(percent_decode(path)),
        false => std::borrow::Cow::Borrowed(path),
    }
}

/// Whether `path?query` is a search answer (versioned by the whole public corpus).
fn is_search(path: &str) -> bool {
    matches!(path, "/search" | "/api/search")
}

impl Upstream for Site {
    fn send(&self, req: Request<OutBody>) -> UpFuture<'_> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            if parts.extensions.get::<FillMark>().is_some() {
                let aud = parts.extensions.get::<Audience>();
                let aud = aud.and_then(|a| crate::audience::visibility(*a));
                inner.ahead.seen(&parts.headers, &inner.snap.load());
                if let Some(aud) = aud {
                    inner.ahead.asked(aud, &percent_decode(parts.uri.path()));
                }
            }
            let form = if parts.method == Method::POST {
                let read = Limited::new(body, FORM_BYTES_MAX).collect();
                match tokio::time::timeout(FORM_READ_TIMEOUT, read).await {
                    Ok(Ok(b)) => Some(b.to_bytes()),
                    Err(_) => {
                        return Ok(Reply::new(
                            StatusCode::REQUEST_TIMEOUT,
                            "text/plain; charset=utf-8",
                            "the form did not arrive in time\n",
                            Policy::NoStore,
                        )
                        .into_response())
                    }
                    Ok(Err(_)) => {
                        return Ok(Reply::new(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "text/plain; charset=utf-8",
                            "form too large\n",
                            Policy::NoStore,
                        )
                        .into_response())
                    }
                }
            } else {
                None
            };
            if parts.method == Method::POST && percent_decode(parts.uri.path()) == "/login" {
                return Ok(sign_in(&inner, &parts, form).await.into_response());
            }
            // Raised when this future is dropped (the client left, or the fill
            // timed out) so a render nobody waits for stops early.
            let cancel = Arc::new(AtomicBool::new(false));
            let _on_drop = CancelOnDrop(cancel.clone());
            let background = parts
                .extensions
                .get::<FillMark>()
                .is_some_and(|m| m.background);
            let render = move || answer(&inner, &parts, form.as_deref(), &cancel);
            // Nobody waits for a background fill: its render takes what the
            // request workers leave (`crate::behind`).
            let render = match background {
                true => match crate::behind::render(render).await {
                    Ok(Some(reply)) => return Ok(reply.into_response()),
                    Ok(None) => return Err(render_failed("the background render ended")),
                    Err(render) => render,
                },
                false => render,
            };
            // At a lower priority than the request workers: a crowd's renders
            // must not slow the hits (`quire_server::uncached_work`).
            let reply = quire_server::uncached_work::spawn(render)
                .await
                .map_err(render_failed)?;
            Ok(reply.into_response())
        })
    }

    fn read_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }

    fn span_name(&self) -> &'static str {
        "render"
    }

    fn answers_admin_path(&self, path: &str) -> bool {
        path == crate::mcp::PATH
    }

    /// A note's page asked for with an `Accept` that prefers markdown is its
    /// `<note>.md`, stored under that URL (`quire_http::media`).
    fn negotiate(
        &self,
        url: &quire_http::key::NormalizedUrl,
        headers: &http::HeaderMap,
    ) -> Option<quire_http::key::NormalizedUrl> {
        if !quire_http::media::prefers_markdown(headers) {
            return None;
        }
        match crate::routes::route(&percent_decode(url.path())) {
            crate::routes::Page::Note(_) => {
                Some(url.with_path_suffix(crate::routes::MARKDOWN_SUFFIX))
            }
            _ => None,
        }
    }

    fn negotiated_field(&self) -> Option<&'static str> {
        Some("accept")
    }

    fn dictionary_for(
        &self,
        headers: &http::HeaderMap,
    ) -> Option<Arc<quire_http::dictionary::Dictionary>> {
        // Pages only: the dictionary is made of them and matches documents.
        let html = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/html"));
        match html {
            true => self.inner.snap.load().dictionaries().current().cloned(),
            false => None,
        }
    }

    fn works_here(&self) -> bool {
        // Pages, searches and 404s are rendered on this machine's cores.
        true
    }

    fn compress_passes(&self) -> bool {
        // Signed-in readers' pages (and any request that bypasses the cache) are
        // compressed per request, as the cached ones were once.
        true
    }

    fn served(&self, target: &str) {
        let path = target.split_once('?').map_or(target, |(p, _)| p);
        let snap = self.inner.snap.load();
        if let Some(p) = snap.note_paths.get(&*page_path(path)) {
            self.inner.views.record_shared(p);
        }
    }

    fn metrics(&self, out: &mut String) {
        use std::fmt::Write;
        self.inner.gate.metrics(out);
        let v = &self.inner.views;
        let mut family = |name: &str, help: &str, value: u64| {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"
            );
        };
        family(
            "quire_site_renders_total",
            "Requests the site rendered (misses, bypasses, forms).",
            self.inner.renders.load(Ordering::Relaxed),
        );
        family(
            "quire_views_recorded_total",
            "Page views queued for counting.",
            v.recorded(),
        );
        family(
            "quire_views_dropped_total",
            "Page views dropped because the queue was full.",
            v.dropped(),
        );
        family(
            "quire_views_written_total",
            "Page views written to the views database.",
            v.written(),
        );
        budget_metrics(out);
    }

    fn query_paths(&self) -> Option<Vec<String>> {
        // Only these read their query: search (`q`), sign-in (`next`), and the
        // stylesheet, the script, the speculation rules and attachments (`v`, which
        // makes them immutable). Notes,
        // listings and feeds do not: keying them on it let 64 unique queries of one
        // 2 MB note make 64 fills and 64 compressions. Dropped rather than
        // redirected: a redirect would cost every such link a round trip, and the
        // page is the same.
        Some(
            [
                "/search",
                "/api/search",
                "/login",
                routes::CSS_PATH,
                crate::script::SCRIPT_PATH,
                crate::speculation::PATH,
                "/attachments/*",
            ]
            .map(String::from)
            .to_vec(),
        )
    }

    fn audience(&self, url: &NormalizedUrl, headers: &http::HeaderMap) -> Option<Audience> {
        if !self.inner.snap.load().config.cache_signed_in {
            return None;
        }
        let users = self.inner.users.load();
        crate::audience::of_request(url, headers, &self.inner.sessions, &users)
    }

    fn audience_version(&self, url: &NormalizedUrl, audience: Audience) -> Option<u64> {
        let aud = crate::audience::visibility(audience)?;
        let snap = self.inner.snap.load();
        let path = url.path();
        let found = snap.version_for(&page_path(path), is_search(path), aud);
        if found.is_none() && snap.start_signed_in() {
            // The first signed-in request: make the audiences' versions off the
            // request path; until then signed-in requests bypass the cache.
            let snap = arc_swap::Guard::into_inner(snap);
            let spawned = std::thread::Builder::new()
                .name("quire-audiences".into())
                .spawn(move || snap.compute_signed_in(None));
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "could not start making the signed-in versions");
            }
        }
        found
    }

    fn previous_version(
        &self,
        url: &NormalizedUrl,
        audience: Option<Audience>,
        nth: usize,
    ) -> Option<u64> {
        let aud = match audience {
            Some(a) => crate::audience::visibility(a)?,
            None => Visibility::Public,
        };
        let path = url.path();
        let snap = self.inner.snap.load();
        snap.previous_version(&page_path(path), is_search(path), aud, nth)
    }

    fn key_version(&self, url: &NormalizedUrl) -> u64 {
        let path = url.path();
        self.inner
            .snap
            .load()
            .version_of(&page_path(path), is_search(path))
    }
}

/// A render that did not end with an answer.
fn render_failed(e: impl std::fmt::Display) -> OriginError {
    OriginError::failed(FailureKind::Render, format!("render failed: {e}"))
}

/// Raises its flag when dropped: the answer's future was dropped, so nobody waits.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The render budgets' counters (`quire_vault::render::budget`).
fn budget_metrics(out: &mut String) {
    use quire_vault::render::budget::{self, Bound};
    use std::fmt::Write;
    let name = "quire_site_render_budget_reached_total";
    let _ = write!(
        out,
        "# HELP {name} Renders that reached a render budget (site.toml [render]), by bound.\n# TYPE {name} counter\n"
    );
    for b in Bound::ALL {
        let _ = writeln!(
            out,
            "{name}{{bound=\"{}\"}} {}",
            b.key(),
            budget::exceeded_total(b)
        );
    }
    let name = "quire_site_renders_cancelled_total";
    let _ = write!(
        out,
        "# HELP {name} Note renders stopped because nobody waited for them any more.\n# TYPE {name} counter\n{name} {}\n",
        budget::cancelled_total()
    );
}

/// `POST /login`, on the runtime: it waits for a check slot there, and only the
/// password check itself takes a blocking thread (`crate::gate`).
async fn sign_in(inner: &Inner, parts: &http::request::Parts, form: Option<Bytes>) -> Reply {
    inner.renders.fetch_add(1, Ordering::Relaxed);
    let snap = inner.snap.load_full();
    if !auth::from_this_site(&parts.headers, &snap) {
        return auth::cross_site();
    }
    let users = inner.users.load_full();
    let login = auth::Login {
        snap: &snap,
        users: &users,
        sessions: &inner.sessions,
        limiter: &inner.limiter,
        gate: &inner.gate,
    };
    auth::login(&login, &parts.headers, form.as_deref().unwrap_or_default()).await
}

/// Renders the answer to one request; `cancel` is raised once nobody waits for it.
impl Inner {
    /// The stores a render reads, for a render nobody asked for (no cancel).
    fn stores(&self) -> respond::Stores<'_> {
        respond::Stores {
            views: &self.views,
            search: &self.search,
            shared: self.shared.get().map(|s| &**s),
            cancel: None,
        }
    }
}

fn answer(
    inner: &Inner,
    parts: &http::request::Parts,
    form: Option<&[u8]>,
    cancel: &Arc<AtomicBool>,
) -> Reply {
    inner.renders.fetch_add(1, Ordering::Relaxed);
    let snap = inner.snap.load_full();
    let users = inner.users.load();
    let path = percent_decode(parts.uri.path());
    if parts.uri.path() == crate::mcp::PATH {
        let call = crate::mcp::Call {
            method: &parts.method,
            headers: &parts.headers,
            body: form,
            base: base_of(&parts.headers),
            users: &users,
            tokens: &inner.tokens,
            search: &inner.search,
        };
        return crate::mcp::answer(&snap, &call);
    }
    // A fill for an audience (set by quire-server, never by a client) is rendered
    // for the audience, whoever asked; anything else for its cookie's reader.
    let viewer = match parts.extensions.get::<Audience>() {
        Some(a) => crate::audience::visibility(*a).map(Viewer::of_audience),
        None => auth::viewer(&parts.headers, &inner.sessions, &users),
    };
    let req = Req {
        method: &parts.method,
        path: &path,
        query: parts.uri.query(),
        viewer: viewer.as_ref(),
        base: base_of(&parts.headers),
    };
    match (&parts.method, path.as_str()) {
        (&Method::GET | &Method::HEAD, _) => respond::page(
            &snap,
            &req,
            &respond::Stores {
                views: &inner.views,
                search: &inner.search,
                shared: inner.shared.get().map(|s| &**s),
                cancel: Some(cancel),
            },
        ),
        (&Method::POST, "/login" | "/logout") if !auth::from_this_site(&parts.headers, &snap) => {
            auth::cross_site()
        }
        (&Method::POST, "/logout") => auth::logout(
            &parts.headers,
            &inner.sessions,
            &users,
            inner.shared.get().map(|s| &**s),
        ),
        _ => request::error(
            &snap,
            req.viewer,
            &path,
            StatusCode::METHOD_NOT_ALLOWED,
            "This page does not take that method.",
        )
        .with(header::ALLOW, "GET, HEAD".into()),
    }
}

/// Scheme and host of a request, for absolute links when `base_url` is not set.
fn base_of(headers: &http::HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| h.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or("localhost");
    let scheme = if auth::over_https(headers) {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{host}")
}
