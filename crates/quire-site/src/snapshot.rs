//! One consistent state of the site: the vault as loaded, its settings and templates,
//! related notes, and the **version of every cacheable page**.
//!
//! A page's version is a hash of everything its anonymous rendering depends on: for a
//! note, **its body's version is what its last anonymous render read** (the
//! renderer's `Record`: every note read, with what each link showed; see
//! quire-vault's `render::record`), plus its backlinks, its local graph, related
//! notes, folder and tags; for a listing, the listing itself; for `/graph`, the
//! public site graph. Each snapshot keeps the record of every public note: a record
//! that still holds on the new vault is kept (no render), one that does not is made
//! again by rendering that note. So a reload renders exactly the pages whose
//! dependencies changed, a hostile note costs its own pages' renders, and there is
//! no second walk that could count differently from the renderer. Every version also folds in the epoch (settings, templates,
//! stylesheet, quire's own version). So a change to a
//! note changes the versions of exactly the pages that show it, and those pages'
//! cache keys with them (`Upstream::key_version`): nothing else is invalidated, and
//! nothing stale can be served once the new snapshot is published.
//!
//! A version is the epoch mixed with the page's content hash, and the content hash is
//! kept ([`Snapshot::contents`]). After a change to the templates or the stylesheet
//! alone, a snapshot remembers the previous epochs for `template_grace_secs`, and the
//! version a page had under one of them is that epoch mixed with the page's *current*
//! content hash ([`Snapshot::previous_version`]): a page whose content is unchanged
//! finds its previous entry and answers from it while it renders again (quire-server's
//! `request::previous`); a page whose content changed gets a key nothing was stored
//! under, so no edit is ever answered from before it.
//!
//! Pages that anonymous readers cannot see (private and draft notes, unknown paths)
//! share one version, the epoch's: their anonymous answer is the same 404 whatever
//! the note holds, so their keys reveal nothing either.
//!
//! The signed-in audiences (readers, admins) get versions of their own, made the same
//! way from their own renders ([`Snapshot::compute_signed_in`], see
//! `crate::audience`), under epochs of their own: no version of an audience's page
//! equals an anonymous one or another audience's, so an `ETag` never validates across
//! audiences. They are made on demand, off the request path, and again on each
//! reload once asked for, reusing the previous snapshot's records that still hold.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use quire_vault::graph::{self, Graphs};
use quire_vault::pages;
use quire_vault::preview::{front_image, shown_files};
use quire_vault::render::{attachment_url, render_recorded, Record};
use quire_vault::{Vault, Visibility};
use serde_json::{json, Value};
use xxhash_rust::xxh3::{xxh3_64, Xxh3, Xxh3Builder};

use crate::config::SiteConfig;
use crate::model::{self, Who};
use crate::related::RelatedNotes;
use crate::routes::{route, Page, CSS_PATH, GRAPH_PATH, MARKDOWN_SUFFIX};
use crate::templates::Templates;

/// A published state of the site.
#[derive(Debug)]
pub struct Snapshot {
    /// The notes.
    pub vault: Vault,
    /// `site.toml`.
    pub config: SiteConfig,
    /// Templates and stylesheet.
    pub templates: Arc<Templates>,
    /// Related notes per note and audience.
    pub related: Arc<RelatedNotes>,
    /// Who sees which links, and the site graph laid out, per audience.
    pub graphs: Arc<Graphs>,
    /// Settings, templates, stylesheet and quire's version, hashed.
    pub epoch: u64,
    /// The stylesheet's version (its URL carries it).
    pub css_version: u64,
    /// Path → version of every page an anonymous reader can see.
    pub versions: HashMap<String, u64, Xxh3Builder>,
    /// Path → content hash of every page whose version is the epoch and its
    /// content mixed (not stylesheet, script, attachments): what a previous
    /// epoch's version of the page is made from (see [`Snapshot::previous_version`]).
    pub contents: HashMap<String, u64, Xxh3Builder>,
    /// The content hash of search answers.
    pub search_content: u64,
    /// The hash of `site.toml`'s text: a change to it is not presentation only.
    config_hash: u64,
    /// The epochs of earlier snapshots whose pages may answer while this one's are
    /// rendered, newest first (a change to templates or stylesheet only), and until
    /// when.
    previous: Previous,
    /// The compression dictionaries, set once before the snapshot is published
    /// (`crate::dictionary::Set::for_snapshot`).
    dictionaries: std::sync::OnceLock<crate::dictionary::Set>,
    /// The version of search answers (any public note changed: all of them change).
    pub search_version: u64,
    /// The version of every other path (404s, private notes, sign-in).
    pub other_version: u64,
    /// Lower-cased attachment name → the widest audience of a note embedding it.
    /// An attachment no note embeds is for admins only: a file lying in the vault
    /// is not published by being there.
    pub attachment_audience: HashMap<String, Visibility>,
    /// Page path → the note's vault path, shared, for view counts (no allocation on
    /// the hit path).
    pub note_paths: HashMap<String, Arc<str>, Xxh3Builder>,
    /// Vault path → the record of the public note's last anonymous render: its
    /// body's dependencies and version.
    pub records: HashMap<String, Arc<Record>>,
    /// How many pages were rendered to make this snapshot's records (those whose
    /// previous record no longer held).
    pub rendered: usize,
    /// The versions of the signed-in audiences' pages (readers, admins), made on
    /// demand ([`Snapshot::compute_signed_in`]); empty until then.
    signed_in: [OnceLock<Arc<Versions>>; 2],
    /// Someone started making `signed_in`.
    signed_in_started: AtomicBool,
}

/// The versions of every page one signed-in audience can see, made as the anonymous
/// ones are, from that audience's own renders, listings, related notes and graphs.
#[derive(Debug)]
pub struct Versions {
    /// Path → version of every page the audience can see.
    pub pages: HashMap<String, u64, Xxh3Builder>,
    /// Path → content hash, as [`Snapshot::contents`].
    pub contents: HashMap<String, u64, Xxh3Builder>,
    /// The content hash of its search answers.
    pub search_content: u64,
    /// The version of its search answers (any note it can see changed: all change).
    pub search: u64,
    /// The version of every other path.
    pub other: u64,
    /// Vault path → the record of the note's last render for the audience.
    pub records: HashMap<String, Arc<Record>>,
    /// How many notes were rendered to make `records`.
    pub rendered: usize,
}

/// The slot of a signed-in audience in [`Snapshot`]'s versions.
fn slot(aud: Visibility) -> Option<usize> {
    match aud {
        Visibility::Public => None,
        Visibility::Private => Some(0),
        Visibility::Draft => Some(1),
    }
}

/// How many earlier epochs a snapshot keeps answering from (a designer saving a
/// template three times in a row keeps the pages of the one before the first).
pub const PREVIOUS_MAX: usize = 3;

/// Earlier epochs whose pages may answer a miss until `until`.
#[derive(Debug, Clone, Default)]
struct Previous {
    epochs: Vec<u64>,
    until: Option<Instant>,
}

impl Previous {
    /// What a snapshot at `epoch` (settings hashed to `config_hash`) keeps of
    /// `old`'s: the same epochs when nothing of the presentation changed; `old`'s
    /// epoch in front of them, for `grace` from now, when only templates or the
    /// stylesheet did; none after a change to the settings (which may change what
    /// a page says: no previous page may answer for it).
    fn after(old: Option<&Snapshot>, epoch: u64, config_hash: u64, grace: Duration) -> Previous {
        let Some(old) = old else {
            return Previous::default();
        };
        let now = Instant::now();
        let live = old.previous.until.is_some_and(|u| now < u);
        if old.epoch == epoch {
            return if live {
                old.previous.clone()
            } else {
                Previous::default()
            };
        }
        if old.config_hash != config_hash || grace.is_zero() {
            return Previous::default();
        }
        let mut epochs = vec![old.epoch];
        if live {
            epochs.extend(old.previous.epochs.iter().copied().filter(|e| *e != epoch));
        }
        epochs.truncate(PREVIOUS_MAX);
        Previous {
            epochs,
            until: Some(now + grace),
        }
    }

    /// The `nth` epoch, while they may answer.
    fn epoch(&self, nth: usize) -> Option<u64> {
        let live = self.until.is_some_and(|u| Instant::now() < u);
        live.then(|| self.epochs.get(nth).copied()).flatten()
    }
}

impl Snapshot {
    /// The compression dictionaries (none until set).
    pub fn dictionaries(&self) -> &crate::dictionary::Set {
        static NONE: std::sync::OnceLock<crate::dictionary::Set> = std::sync::OnceLock::new();
        self.dictionaries
            .get()
            .unwrap_or_else(|| NONE.get_or_init(Default::default))
    }

    /// Sets the compression dictionaries; a second call changes nothing.
    pub fn set_dictionaries(&self, set: crate::dictionary::Set) {
        let _ = self.dictionaries.set(set);
    }

    /// Computes every version for `vault`, and lays out its graphs (reusing
    /// `previous`'s layouts where a graph did not change).
    pub fn new(
        vault: Vault,
        config: SiteConfig,
        config_text: &str,
        templates: Arc<Templates>,
        related: Arc<RelatedNotes>,
        previous: Option<&Snapshot>,
    ) -> Snapshot {
        let mut h = Xxh3::new();
        h.update(env!("CARGO_PKG_VERSION").as_bytes());
        h.update(&[0]);
        h.update(config_text.as_bytes());
        h.update(&[0]);
        h.update(&templates.fingerprint.to_le_bytes());
        let epoch = h.digest();
        let config_hash = xxh3_64(config_text.as_bytes());
        let grace = Duration::from_secs(config.template_grace_secs);
        let previous_epochs = Previous::after(previous, epoch, config_hash, grace);
        let css_version = xxh3_64(templates.css.as_bytes()) | 1;
        let t0 = std::time::Instant::now();
        let graphs = Arc::new(Graphs::build(&vault, previous.map(|p| &*p.graphs)));
        tracing::info!(
            notes = vault.notes().len(),
            drawn = graphs.public().shown(),
            ms = t0.elapsed().as_millis() as u64,
            "graphs built"
        );
        let mut s = Snapshot {
            vault,
            config,
            templates,
            related,
            graphs,
            epoch,
            css_version,
            versions: HashMap::with_hasher(Xxh3Builder::new()),
            contents: HashMap::with_hasher(Xxh3Builder::new()),
            search_content: 0,
            config_hash,
            previous: previous_epochs,
            dictionaries: std::sync::OnceLock::new(),
            search_version: 0,
            other_version: mix(epoch, 0),
            attachment_audience: HashMap::new(),
            note_paths: HashMap::with_hasher(Xxh3Builder::new()),
            records: HashMap::new(),
            rendered: 0,
            signed_in: Default::default(),
            signed_in_started: AtomicBool::new(false),
        };
        for (i, n) in s.vault.notes().iter().enumerate() {
            if s.vault.by_url(&n.url) == Some(i) {
                s.note_paths
                    .insert(n.url.clone(), Arc::from(n.path.as_str()));
            }
        }
        s.attachment_audience = attachment_audience(&s.vault);
        let pub_ = Visibility::Public;
        (s.records, s.rendered) = body_records(&s.vault, previous.map(|p| &p.records), pub_);
        (s.versions, s.contents) = s.page_versions(pub_, epoch, &s.records);
        s.search_content = search_content(&s.vault, pub_);
        s.search_version = mix(epoch, s.search_content);
        s
    }

    /// The version of `path` for `aud` (public or signed-in), or `None` while the
    /// signed-in versions are not made yet.
    pub fn version_for(&self, path: &str, search: bool, aud: Visibility) -> Option<u64> {
        let Some(v) = self.signed_in_versions(aud) else {
            return (aud == Visibility::Public).then(|| self.version_of(path, search));
        };
        Some(match search {
            true => v.search,
            false => v.pages.get(path).copied().unwrap_or(v.other),
        })
    }

    /// The version of paths `aud` has no page at (errors, forms), or `None` while
    /// the signed-in versions are not made yet.
    pub fn other_for(&self, aud: Visibility) -> Option<u64> {
        match self.signed_in_versions(aud) {
            Some(v) => Some(v.other),
            None => (aud == Visibility::Public).then_some(self.other_version),
        }
    }

    /// The version `path` had for `aud` under the `nth` previous epoch (newest
    /// first) if its content is what it is now; `None` when there is no such epoch
    /// or it no longer answers, for a path versioned by its own bytes (stylesheet,
    /// script, attachments: their versions did not change), and while `aud`'s
    /// versions are not made. A page whose content changed gets a version no entry
    /// was ever stored under: a previous epoch's page answers only for the same
    /// content.
    pub fn previous_version(
        &self,
        path: &str,
        search: bool,
        aud: Visibility,
        nth: usize,
    ) -> Option<u64> {
        let epoch = self.previous.epoch(nth)?;
        let (contents, versions, search_content, epoch) = match slot(aud) {
            None => (&self.contents, &self.versions, self.search_content, epoch),
            Some(_) => {
                let v = self.signed_in_versions(aud)?;
                let e = audience_epoch(epoch, aud);
                (&v.contents, &v.pages, v.search_content, e)
            }
        };
        let content = match (search, contents.get(path)) {
            (true, _) => search_content,
            (false, Some(c)) => *c,
            (false, None) if versions.contains_key(path) => return None,
            // Paths with no page (404s, forms) answer the same whatever the notes say.
            (false, None) => 0,
        };
        Some(mix(epoch, content))
    }

    /// Whether a change from `old` to this snapshot lets `old`'s pages answer while
    /// this one's are rendered (only templates or the stylesheet changed).
    pub fn follows_presentation_of(&self, old: &Snapshot) -> bool {
        self.epoch != old.epoch && self.previous.epochs.first() == Some(&old.epoch)
    }

    /// The versions of signed-in audience `aud`'s pages, once made.
    pub fn signed_in_versions(&self, aud: Visibility) -> Option<&Arc<Versions>> {
        self.signed_in[slot(aud)?].get()
    }

    /// Claims the making of the signed-in versions: true for the first caller only.
    pub fn start_signed_in(&self) -> bool {
        !self.signed_in_started.swap(true, Ordering::AcqRel)
    }

    /// Whether the signed-in versions were asked for (so a reload makes them too).
    pub fn signed_in_wanted(&self) -> bool {
        self.signed_in_started.load(Ordering::Acquire)
    }

    /// Makes the versions of the readers' and the admins' pages, reusing the
    /// records of `previous` that still hold. Slow (it renders what changed for
    /// each audience): run off the request path. Until it is done, signed-in
    /// requests bypass the cache.
    pub fn compute_signed_in(&self, previous: Option<&Snapshot>) {
        self.signed_in_started.store(true, Ordering::Release);
        for aud in [Visibility::Private, Visibility::Draft] {
            let Some(i) = slot(aud) else { continue };
            if self.signed_in[i].get().is_some() {
                continue;
            }
            let epoch = audience_epoch(self.epoch, aud);
            let prev = previous
                .and_then(|p| p.signed_in_versions(aud))
                .map(|v| &v.records);
            let (records, rendered) = body_records(&self.vault, prev, aud);
            let (pages, contents) = self.page_versions(aud, epoch, &records);
            let search_content = search_content(&self.vault, aud);
            let versions = Versions {
                pages,
                contents,
                search_content,
                search: mix(epoch, search_content),
                other: mix(epoch, 0),
                records,
                rendered,
            };
            let _ = self.signed_in[i].set(Arc::new(versions));
        }
    }

    /// The version of every page `aud` can see, under `epoch`, its notes' bodies
    /// versioned by `records`; and the content hash of each whose version mixes
    /// the epoch in.
    fn page_versions(
        &self,
        aud: Visibility,
        epoch: u64,
        records: &HashMap<String, Arc<Record>>,
    ) -> (
        HashMap<String, u64, Xxh3Builder>,
        HashMap<String, u64, Xxh3Builder>,
    ) {
        let v = &self.vault;
        let pub_ = aud;
        let mut out: HashMap<String, u64, Xxh3Builder> = HashMap::with_hasher(Xxh3Builder::new());
        let mut put = |path: String, value: &serde_json::Value| {
            let bytes = serde_json::to_vec(value).unwrap_or_default();
            out.insert(path, xxh3_64(&bytes));
        };
        put("/".into(), &model::index(v, pub_));
        put("/tags/".into(), &model::tags(v, pub_));
        for (name, list) in &pages::tags(v, pub_) {
            put(model::tag_url(name), &model::tag_page(v, name, list));
        }
        let folders = pages::folders(v, pub_);
        let known = model::known_folders(&folders);
        for f in known.keys() {
            put(
                model::folder_url(f),
                &model::folder_page(v, &folders, &known, f),
            );
        }
        let mut feed = Xxh3::new();
        let mut sitemap = Xxh3::new();
        let mut llms = Xxh3::new();
        llms.update(self.config.title.as_bytes());
        llms.update(self.config.description.as_bytes());
        for (i, n) in v.notes().iter().enumerate() {
            if n.visibility() > pub_ || v.by_url(&n.url) != Some(i) {
                continue;
            }
            let mut ctx = model::note(v, i, pub_, self.related.of(i, pub_));
            ctx["body"] = records
                .get(&n.path)
                .map(|r| format!("{:016x}", r.version()))
                .into();
            ctx["image"] = front_image(n).and_then(|a| v.attachment_version(a)).into();
            ctx["graph"] = graph::local(v, self.graphs.links(pub_), i)
                .map(|g| format!("{:016x}", g.fingerprint()))
                .into();
            put(n.url.clone(), &ctx);
            // The note as markdown shows what its page shows (the same links, seen
            // the same way): versioned with the page.
            put(format!("{}{MARKDOWN_SUFFIX}", n.url), &ctx);
            for s in [&mut feed, &mut sitemap] {
                s.update(n.url.as_bytes());
                s.update(n.title().as_bytes());
                s.update(n.front.date.as_deref().unwrap_or("").as_bytes());
            }
            feed.update(&n.version.to_le_bytes());
            // (A note's line is its URL, title and description: all in its text.)
            llms.update(n.url.as_bytes());
            llms.update(&n.version.to_le_bytes());
        }
        // Listing pages appear in the sitemap too.
        for k in out.keys() {
            sitemap.update(k.as_bytes());
        }
        let (feed, sitemap) = (feed.digest(), sitemap.digest());
        out.insert("/feed.xml".into(), feed);
        out.insert("/sitemap.xml".into(), sitemap);
        insert_llms_versions(v, llms.digest(), &mut out);
        // Not in the sitemap (added after it): a drawing of pages it lists.
        let site_graph = self.graphs.site(v, aud).fingerprint();
        out.insert(GRAPH_PATH.into(), site_graph);
        self.alias_contents(&mut out, aud);
        // Everything so far is content, versioned with the epoch; what follows is
        // versioned by its own bytes.
        let contents = out;
        let mut out: HashMap<String, u64, Xxh3Builder> = contents
            .iter()
            .map(|(p, c)| (p.clone(), mix(epoch, *c)))
            .collect();
        if self.config.hover_previews {
            out.insert(crate::script::SCRIPT_PATH.into(), crate::script::version());
        }
        out.insert(CSS_PATH.into(), self.css_version);
        for (name, _, version) in v.attachments() {
            if self
                .attachment_audience
                .get(name)
                .is_some_and(|a| *a <= aud)
            {
                out.insert(attachment_url(name), version);
            }
        }
        // A path that answers something versioned by its own bytes has no content
        // version (an alias spelled like an attachment is the attachment).
        let mut contents = contents;
        contents.retain(|p, c| out.get(p) == Some(&mix(epoch, *c)));
        (out, contents)
    }

    /// An alias of a public note answers a redirect to it, versioned by where it
    /// leads; not when its path is a page of its own (a listing, or a fixed path
    /// the router answers first). Added after the sitemap's version: aliases are
    /// not in the sitemap.
    fn alias_contents(&self, out: &mut HashMap<String, u64, Xxh3Builder>, aud: Visibility) {
        let v = &self.vault;
        for (url, i) in v.alias_urls() {
            let n = &v.notes()[i];
            if n.visibility() <= aud && matches!(route(url), Page::Note(_)) {
                out.entry(url.to_owned())
                    .or_insert(xxh3_64(n.url.as_bytes()));
            }
        }
    }

    /// A page's template context: the variables every template gets (site settings,
    /// the reader, the stylesheet's URL, the path) with `extra`'s fields added.
    pub fn page_context(&self, who: Who<'_>, path: &str, extra: Value) -> Value {
        let mut v = json!({
            "site": {
                "title": self.config.title,
                "description": self.config.description,
                "base_url": self.config.base_url,
                "language": self.config.language,
            },
            // A page rendered for a whole audience carries no name (see
            // `crate::audience`); `/account` shows it.
            "reader": who.map(|v| json!({
                "name": (!v.shared).then_some(v.name.as_str()),
                "role": v.role,
                "account_url": crate::routes::ACCOUNT_PATH,
            })),
            "css_url": format!("{CSS_PATH}?v={:016x}", self.css_version),
            "feed_url": "/feed.xml",
            "graph_url": GRAPH_PATH,
            "path": path,
        });
        if self.config.hover_previews {
            v["script"] = json!({
                "url": crate::script::url(),
                "integrity": crate::script::integrity(),
            });
        }
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
        v
    }

    /// The version of the page at `path` (percent-decoded, without query).
    pub fn version_of(&self, path: &str, search: bool) -> u64 {
        if search {
            return self.search_version;
        }
        self.versions
            .get(path)
            .copied()
            .unwrap_or(self.other_version)
    }
}

/// An attachment is for the widest audience of a note that embeds it (itself, or
/// as a file node of a canvas it embeds) or shows it as its link preview's image
/// (`image:` / `cover:`).
fn attachment_audience(v: &Vault) -> HashMap<String, Visibility> {
    let mut out: HashMap<String, Visibility> = HashMap::new();
    for n in v.notes() {
        for name in shown_files(v, n) {
            if let Some(rel) = v.attachment(name) {
                let name = rel.rsplit('/').next().unwrap_or(rel).to_lowercase();
                let a = out.entry(name).or_insert(Visibility::Draft);
                *a = (*a).min(n.visibility());
            }
        }
    }
    out
}

/// The content hash of search answers for `aud`: any note it can see changed, all
/// change.
fn search_content(v: &Vault, aud: Visibility) -> u64 {
    let mut search = Xxh3::new();
    for n in v.notes() {
        if n.visibility() <= aud {
            search.update(&n.version.to_le_bytes());
            search.update(n.path.as_bytes());
        }
    }
    search.digest()
}

/// A signed-in audience's own epoch: no version of its pages equals an anonymous
/// one, so an `ETag` never matches across audiences.
fn audience_epoch(epoch: u64, aud: Visibility) -> u64 {
    mix(epoch, 0xa0 + aud as u64)
}

/// The record of the render for `aud` of every note `aud` can see: `previous`'s
/// where it still holds on `v` (the render would read the same, so make the same
/// body), else a new render's.
fn body_records(
    v: &Vault,
    previous: Option<&HashMap<String, Arc<Record>>>,
    aud: Visibility,
) -> (HashMap<String, Arc<Record>>, usize) {
    let t0 = std::time::Instant::now();
    let mut out = HashMap::new();
    let mut rendered = 0usize;
    for (i, n) in v.notes().iter().enumerate() {
        if n.visibility() > aud {
            continue;
        }
        let kept = previous
            .and_then(|p| p.get(&n.path))
            .filter(|r| r.holds(v))
            .cloned();
        let record = kept.unwrap_or_else(|| {
            rendered += 1;
            Arc::new(render_recorded(v, i, aud).1)
        });
        out.insert(n.path.clone(), record);
    }
    tracing::debug!(
        rendered,
        kept = out.len() - rendered,
        ms = t0.elapsed().as_millis() as u64,
        "page records"
    );
    (out, rendered)
}

/// A nonzero version from the epoch and a content hash.
fn mix(epoch: u64, content: u64) -> u64 {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&epoch.to_le_bytes());
    b[8..].copy_from_slice(&content.to_le_bytes());
    xxh3_64(&b) | 1
}

/// What changed between `old` and `new` for each signed-in audience both made: as
/// [`changed_paths`], per audience.
pub fn changed_signed_in(old: &Snapshot, new: &Snapshot) -> Vec<(Visibility, PathChanges)> {
    let by_content = new.follows_presentation_of(old);
    let mut out = Vec::new();
    for aud in [Visibility::Private, Visibility::Draft] {
        let (Some(o), Some(n)) = (old.signed_in_versions(aud), new.signed_in_versions(aud)) else {
            continue;
        };
        let changes = split(by_content, (&o.pages, &o.contents), (&n.pages, &n.contents));
        out.push((aud, changes));
    }
    out
}

/// What changed between `old` and `new` for the anonymous audience.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PathChanges {
    /// Paths whose page changed, appeared or went away: purged, then rendered.
    pub changed: Vec<String>,
    /// Paths whose content is the same but whose presentation changed: their
    /// previous entries answer until they are rendered again, so they are not purged.
    pub restyled: Vec<String>,
}

/// The paths whose version differs between `old` and `new` (changed, added or
/// removed): exactly the pages to purge, less those `old`'s entries answer for
/// while they are rendered ([`Snapshot::follows_presentation_of`]).
pub fn changed_paths(old: &Snapshot, new: &Snapshot) -> PathChanges {
    split(
        new.follows_presentation_of(old),
        (&old.versions, &old.contents),
        (&new.versions, &new.contents),
    )
}

/// Versions and contents by path.
type Maps<'a> = (
    &'a HashMap<String, u64, Xxh3Builder>,
    &'a HashMap<String, u64, Xxh3Builder>,
);

/// The paths whose version differs between `old` and `new`; when `by_content`
/// (the old pages answer while the new ones render), those whose content is the
/// same apart as restyled.
fn split(by_content: bool, old: Maps<'_>, new: Maps<'_>) -> PathChanges {
    let all = differing(old.0, old.0, new.0, new.0);
    if !by_content {
        return PathChanges {
            changed: all,
            restyled: Vec::new(),
        };
    }
    let changed = differing(old.0, old.1, new.0, new.1);
    let restyled = all
        .into_iter()
        .filter(|p| changed.binary_search(p).is_err())
        .collect();
    PathChanges { changed, restyled }
}

/// The paths of `new_paths` whose value differs from `old_paths`', or that are in
/// only one of them (sorted). A path's value is its entry in `old`/`new` (its
/// content, when those are contents), or else its version (for a path versioned by
/// its own bytes).
fn differing(
    old_paths: &HashMap<String, u64, Xxh3Builder>,
    old: &HashMap<String, u64, Xxh3Builder>,
    new_paths: &HashMap<String, u64, Xxh3Builder>,
    new: &HashMap<String, u64, Xxh3Builder>,
) -> Vec<String> {
    let value = |paths: &HashMap<String, u64, Xxh3Builder>,
                 values: &HashMap<String, u64, Xxh3Builder>,
                 p: &str| {
        match values.get(p) {
            Some(c) => Some((true, *c)),
            None => paths.get(p).map(|v| (false, *v)),
        }
    };
    let mut out: Vec<String> = new_paths
        .keys()
        .filter(|p| value(old_paths, old, p) != value(new_paths, new, p))
        .cloned()
        .collect();
    out.extend(
        old_paths
            .keys()
            .filter(|p| !new_paths.contains_key(*p))
            .cloned(),
    );
    out.sort();
    out
}

/// Puts `/llms.txt`'s version (`llms`) in `versions`, and `/llms-full.txt`'s: that
/// and every public note's markdown's (which `versions` holds by their `.md`
/// paths already).
fn insert_llms_versions<S: std::hash::BuildHasher>(
    v: &Vault,
    llms: u64,
    versions: &mut HashMap<String, u64, S>,
) {
    let mut full = Xxh3::new();
    full.update(&llms.to_le_bytes());
    for n in v.notes() {
        if let Some(version) = versions.get(&format!("{}{MARKDOWN_SUFFIX}", n.url)) {
            full.update(&version.to_le_bytes());
        }
    }
    versions.insert("/llms.txt".into(), llms);
    versions.insert(crate::routes::LLMS_FULL_PATH.into(), full.digest());
}
