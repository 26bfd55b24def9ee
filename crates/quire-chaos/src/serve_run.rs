//! A chaos run of `quire serve`: a copy of the example vault with a `Chaos/` folder of
//! notes the runner rewrites on disk while clients read their pages, SIGKILLs and
//! restarts on the same volume, and the check that an edit, once seen, never goes
//! back.
//!
//! Pages are not deterministic bytes here, so each carries markers: note `i`'s page
//! holds `chaos-marker-{i}-v{k}-end` and its title `Chaos note {i} v{k}`, which the
//! folder page `/chaos/` and the tag page `/tags/chaos` list for every note. A page
//! must be 200 and carry a marker (else it is wrong); its version must not be older
//! than the newest one any response completed before this request was sent showed,
//! nor than the edit's version once the editor saw it (else an invalidation was lost).
//!
//! Key decisions:
//! - **Edits are atomic on disk** (a `.tmp` file quire's watcher ignores, renamed over
//!   the note), as editors write, so a reload never reads half a note.
//! - **The version on disk is raised before the rename**, so no page can be newer than
//!   what the runner knows.
//! - **An edit must become visible within 15 s** (polled every 50 ms); one that does
//!   not is a failure. Some edits are made while quire is down, so the restart has to
//!   pick them up from the vault.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use serde::Serialize;

use crate::client::{Conn, Failure, Proto, Response};
use crate::content::SplitMix;
use crate::kills::{self, Chaos, KillFigures};
use crate::quire::{self, Quire};
use crate::schedule;
use crate::tally::{self, Counts, Outcome, Sample, Tally, Warmth};

/// The host serve-mode requests name.
const HOST: &str = "garden.test";

/// How long an edit may take to show.
const VISIBLE_WITHIN: Duration = Duration::from_secs(15);

/// A request's time limit.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The quire binary.
    pub(crate) quire: PathBuf,
    /// The vault to copy.
    pub(crate) vault: PathBuf,
    /// How long the load runs.
    pub(crate) duration: Duration,
    /// SIGKILLs.
    pub(crate) kills: usize,
    /// The run's seed.
    pub(crate) seed: u64,
    /// Notes in the `Chaos/` folder.
    pub(crate) notes: usize,
    /// Concurrent clients.
    pub(crate) clients: usize,
    /// Mean time between edits.
    pub(crate) edit_every: Duration,
}

/// The figures of a serve run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// Seconds of load.
    pub(crate) duration_s: f64,
    /// The kills and restarts.
    #[serde(flatten)]
    pub(crate) kills: KillFigures,
    /// Every request.
    pub(crate) totals: Counts,
    /// Requests outside every restart: errors here are unexplained.
    pub(crate) outside_restarts: Counts,
    /// Hit ratios around restarts.
    pub(crate) warmth: Warmth,
    /// Edits made (files rewritten).
    pub(crate) edits: u64,
    /// Of those, made while quire was down.
    pub(crate) edits_while_down: u64,
    /// Edits that did not show within 15 s.
    pub(crate) edits_never_visible: u64,
    /// Slowest edit to show, ms (edits made while up).
    pub(crate) visible_ms_max: u64,
    /// The final check of every chaos page.
    pub(crate) sweep: Counts,
    /// The first wrong pages, described.
    pub(crate) wrong_examples: Vec<String>,
    /// The first lost invalidations, described.
    pub(crate) lost_examples: Vec<String>,
    /// Panic lines in quire's log.
    pub(crate) panics: Vec<String>,
    /// Whether quire drained and exited 0 on SIGTERM at the end.
    pub(crate) stopped_cleanly: bool,
}

impl Report {
    /// Why the run failed (empty: it passed).
    pub(crate) fn failures(&self) -> Vec<String> {
        let mut f = Vec::new();
        let wrong = self.totals.wrong + self.sweep.wrong;
        let lost = self.totals.lost_invalidations + self.sweep.lost_invalidations;
        if wrong > 0 {
            f.push(format!("serve: {wrong} wrong pages"));
        }
        if lost > 0 {
            f.push(format!("serve: {lost} lost invalidations"));
        }
        self.kills.failures("serve: ", &mut f);
        if !self.panics.is_empty() {
            f.push(format!(
                "serve: {} panics in quire's log",
                self.panics.len()
            ));
        }
        if self.edits_never_visible > 0 {
            f.push(format!(
                "serve: {} edits never visible",
                self.edits_never_visible
            ));
        }
        if self.sweep.errors() > 0 {
            f.push(format!(
                "serve: {} errors in the final sweep",
                self.sweep.errors()
            ));
        }
        if self.outside_restarts.errors() > 0 {
            f.push(format!(
                "serve: {} errors outside restarts",
                self.outside_restarts.errors()
            ));
        }
        f
    }
}

/// A page the load asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Page {
    /// Note `i`'s page.
    Note(usize),
    /// `/chaos/`, listing every note's title.
    Folder,
    /// `/tags/chaos`, listing every note's title.
    Tag,
}

impl Page {
    fn path(self) -> String {
        match self {
            Page::Note(i) => format!("/chaos/note-{i}"),
            Page::Folder => "/chaos/".to_string(),
            Page::Tag => "/tags/chaos".to_string(),
        }
    }

    fn id(self, notes: usize) -> u32 {
        match self {
            Page::Note(i) => i as u32,
            Page::Folder => notes as u32,
            Page::Tag => notes as u32 + 1,
        }
    }
}

/// What the serve run shares between its tasks.
#[derive(Debug)]
struct Site {
    notes: usize,
    dir: PathBuf,
    addr: std::net::SocketAddr,
    tally: Tally,
    /// The version of each note on disk.
    on_disk: Vec<AtomicU32>,
    /// Per note: (instant a response showing it completed, version), versions rising.
    seen: Mutex<HashMap<usize, Vec<(Instant, u32)>>>,
    stop: AtomicBool,
    edits: Mutex<EditFigures>,
    /// Notes edited while quire was down, awaiting a check that they show.
    pending: Mutex<Vec<usize>>,
}

#[derive(Debug, Default, Clone)]
struct EditFigures {
    edits: u64,
    while_down: u64,
    never_visible: u64,
    visible_ms_max: u64,
}

impl Site {
    /// `notes` chaos notes in `dir`, all at version 0, served at `addr`; times count
    /// from `t0`.
    fn new(notes: usize, dir: PathBuf, addr: std::net::SocketAddr, t0: Instant) -> Site {
        Site {
            notes,
            dir,
            addr,
            tally: Tally::new(t0),
            on_disk: (0..notes).map(|_| AtomicU32::new(0)).collect(),
            seen: Mutex::new(HashMap::new()),
            stop: AtomicBool::new(false),
            edits: Mutex::new(EditFigures::default()),
            pending: Mutex::new(Vec::new()),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// The oldest version of note `i` a request sent at `sent` may show.
    fn floor(&self, i: usize, sent: Instant) -> u32 {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(&i).map_or(0, |l| {
            l.iter()
                .filter(|(at, _)| *at < sent)
                .map(|&(_, v)| v)
                .max()
                .unwrap_or(0)
        })
    }

    fn observe(&self, i: usize, v: u32, at: Instant) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let l = seen.entry(i).or_default();
        if l.last().is_none_or(|&(_, last)| v > last) {
            l.push((at, v));
        }
    }

    /// Rewrites note `i` at its next version; the version.
    fn edit(&self, i: usize) -> anyhow::Result<u32> {
        let v = self.on_disk[i].load(Ordering::Acquire) + 1;
        // A name of its own per version: the editor and the kill hook may both write.
        let tmp = self.dir.join(format!("Note {i}.md.v{v}.tmp"));
        std::fs::write(&tmp, note_text(i, v, self.notes))?;
        self.on_disk[i].store(v, Ordering::Release);
        std::fs::rename(&tmp, self.dir.join(format!("Note {i}.md")))?;
        self.edits.lock().unwrap_or_else(|e| e.into_inner()).edits += 1;
        Ok(v)
    }
}

/// The text of note `i` at version `v`.
fn note_text(i: usize, v: u32, notes: usize) -> String {
    format!(
        "---\ntitle: Chaos note {i} v{v}\nfree: true\ntags: [chaos]\ndate: 2025-01-01\n---\n\n\
         This note is rewritten by quire-chaos. Marker: chaos-marker-{i}-v{v}-end.\n\n\
         See [[Note {}]] and [[Note {}]].\n",
        (i + 1) % notes,
        (i + notes - 1) % notes
    )
}

/// The version in marker `prefix` + digits, if `text` has it.
fn version_after(text: &str, prefix: &str) -> Option<u32> {
    let at = text.find(prefix)? + prefix.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The versions of the notes `page` shows: `Err` names what is missing.
fn versions_on(page: Page, text: &str, notes: usize) -> Result<Vec<(usize, u32)>, String> {
    match page {
        Page::Note(i) => version_after(text, &format!("chaos-marker-{i}-v"))
            .map(|v| vec![(i, v)])
            .ok_or_else(|| format!("no marker of note {i}")),
        Page::Folder | Page::Tag => (0..notes)
            .map(|i| {
                version_after(text, &format!("Chaos note {i} v"))
                    .map(|v| (i, v))
                    .ok_or_else(|| format!("no title of note {i}"))
            })
            .collect(),
    }
}

/// Copies a vault's files, but not its databases or session secret.
pub(crate) fn copy_vault(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let name = e.file_name();
        let n = name.to_string_lossy();
        if n.ends_with(".db") || n.contains(".db-") || n == "secret" {
            continue;
        }
        if e.file_type()?.is_dir() {
            copy_vault(&e.path(), &to.join(&name))?;
        } else {
            std::fs::copy(e.path(), to.join(&name))?;
        }
    }
    Ok(())
}

/// Copies `plan.vault` to `dir/vault` and writes the chaos notes, each at version 0,
/// into its `Chaos` folder; returns both folders.
fn prepare_vault(plan: &Plan, dir: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    let vault = dir.join("vault");
    copy_vault(&plan.vault, &vault)?;
    let chaos_dir = vault.join("Chaos");
    std::fs::create_dir_all(&chaos_dir)?;
    for i in 0..plan.notes {
        std::fs::write(
            chaos_dir.join(format!("Note {i}.md")),
            note_text(i, 0, plan.notes),
        )?;
    }
    Ok((vault, chaos_dir))
}

/// quire's arguments for serve mode: `vault` on `addr`, a 64 MiB volume in `dir`.
pub(crate) fn serve_args(vault: PathBuf, addr: std::net::SocketAddr, dir: &Path) -> Vec<OsString> {
    vec![
        "serve".into(),
        vault.into(),
        "--listen".into(),
        addr.to_string().into(),
        "--cache".into(),
        dir.join("serve.vol").into(),
        "--cache-size".into(),
        "64MiB".into(),
    ]
}

/// Runs `plan` in `dir` (the vault copy, the volume and quire's log go there).
pub(crate) async fn run(plan: &Plan, dir: &Path) -> anyhow::Result<Report> {
    let (vault, chaos_dir) = prepare_vault(plan, dir)?;
    let addr = quire::free_addr()?;
    let args = serve_args(vault, addr, dir);
    let mut q = Quire::new(&plan.quire, args, addr, dir.join("quire-serve.log"));
    q.start(Duration::from_secs(120)).await?;
    let t0 = Instant::now();
    let site = Arc::new(Site::new(plan.notes, chaos_dir, addr, t0));
    let mut tasks = Vec::new();
    for k in 0..plan.clients {
        let proto = if k % 3 == 2 { Proto::H2 } else { Proto::H1 };
        tasks.push(tokio::spawn(client(
            site.clone(),
            proto,
            plan.seed ^ (k as u64 + 1),
        )));
    }
    let editor = tokio::spawn(editor(site.clone(), plan.seed, plan.edit_every));
    let pid = AtomicU32::new(q.pid().unwrap_or(0));
    let kill_at = schedule::kill_times(plan.seed, plan.duration, plan.kills);
    let mut hooks = EditWhileDown {
        site: site.clone(),
        rng: SplitMix(plan.seed ^ 0xd0_11),
    };
    let chaos = kills::drive(&mut q, &kill_at, t0, plan.duration, &pid, &mut hooks).await;
    site.stop.store(true, Ordering::Release);
    for t in tasks {
        let _ = t.await;
    }
    let _ = editor.await;
    let sweep = if chaos.restart_failed.is_none() {
        sweep(&site).await
    } else {
        Counts::default()
    };
    let stopped_cleanly = q.stop(Duration::from_secs(40)).await.unwrap_or(false);
    Ok(report(
        plan,
        &site,
        chaos,
        sweep,
        q.panics(),
        stopped_cleanly,
    ))
}

/// Every other kill, a note changes while quire is down: the restart must show it.
struct EditWhileDown {
    site: Arc<Site>,
    rng: SplitMix,
}

impl kills::Hooks for EditWhileDown {
    fn while_down(&mut self) {
        if self.rng.below(2) != 0 {
            return;
        }
        let i = self.rng.below(self.site.notes as u64) as usize;
        if self.site.edit(i).is_ok() {
            self.site
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(i);
            self.site
                .edits
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .while_down += 1;
        }
    }
}

fn report(
    plan: &Plan,
    site: &Site,
    chaos: Chaos,
    sweep: Counts,
    panics: Vec<String>,
    stopped_cleanly: bool,
) -> Report {
    let samples = site.tally.samples();
    let (wrong_examples, lost_examples) = site.tally.examples();
    let edits = site.edits.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Report {
        duration_s: plan.duration.as_secs_f64(),
        kills: chaos.figures(plan.kills),
        totals: Counts::of(&samples),
        outside_restarts: Counts::of(tally::outside(
            &samples,
            &[],
            Duration::ZERO,
            &chaos.restarts,
        )),
        warmth: tally::warmth(&samples, &chaos.restarts),
        edits: edits.edits,
        edits_while_down: edits.while_down,
        edits_never_visible: edits.never_visible,
        visible_ms_max: edits.visible_ms_max,
        sweep,
        wrong_examples,
        lost_examples,
        panics,
        stopped_cleanly,
    }
}

/// Asks for a page: notes (skewed), the folder and the tag page.
fn pick(site: &Site, rng: &mut SplitMix) -> Page {
    match rng.below(100) {
        0..=69 => Page::Note(crate::load::popular(rng, site.notes)),
        70..=84 => Page::Folder,
        _ => Page::Tag,
    }
}

async fn client(site: Arc<Site>, proto: Proto, seed: u64) {
    let mut rng = SplitMix(seed);
    let mut conn: Option<Conn> = None;
    while !site.stopped() {
        let page = pick(&site, &mut rng);
        let coding = ["identity", "gzip", "br", "zstd"][rng.below(4) as usize];
        if !fetch(&site, &mut conn, proto, page, coding).await.right() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// GETs `page` on `conn` (connecting first if needed), judges and records the
/// answer.
async fn fetch(
    site: &Site,
    conn: &mut Option<Conn>,
    proto: Proto,
    page: Page,
    coding: &str,
) -> Outcome {
    let sent = Instant::now();
    let outcome = match fetch_once(site, conn, proto, page, coding).await {
        Ok(resp) => {
            let o = judge(site, page, sent, &resp);
            record(site, page, sent, o, resp.hit());
            return o;
        }
        Err(f) => {
            *conn = None;
            Outcome::Fail(f)
        }
    };
    record(site, page, sent, outcome, false);
    outcome
}

async fn fetch_once(
    site: &Site,
    conn: &mut Option<Conn>,
    proto: Proto,
    page: Page,
    coding: &str,
) -> Result<Response, Failure> {
    if !conn.as_ref().is_some_and(Conn::is_open) {
        *conn = Some(Conn::connect(site.addr, proto, None).await?);
    }
    let c = conn.as_mut().ok_or(Failure::Connect)?;
    let fields = [("accept-encoding", coding.to_string())];
    tokio::time::timeout(
        REQUEST_TIMEOUT,
        c.send(Method::GET, &page.path(), HOST, &fields, Bytes::new(), None),
    )
    .await
    .unwrap_or(Err(Failure::Timeout))
}

fn record(site: &Site, page: Page, sent: Instant, outcome: Outcome, hit: bool) {
    site.tally.record(Sample {
        url: page.id(site.notes),
        sent_ms: site.tally.ms(sent),
        done_ms: site.tally.ms(Instant::now()),
        outcome,
        hit,
        stale: false,
        slow_reader: false,
    });
}

/// The outcome of `resp` to a request for `page` sent at `sent`.
fn judge(site: &Site, page: Page, sent: Instant, resp: &Response) -> Outcome {
    if resp.status != 200 {
        return Outcome::Status(resp.status);
    }
    let done = Instant::now();
    let path = page.path();
    let text = match &resp.body {
        Ok(b) => String::from_utf8_lossy(b),
        Err(e) => {
            site.tally.note_wrong(format!("{path}: {e}"));
            return Outcome::Wrong;
        }
    };
    let versions = match versions_on(page, &text, site.notes) {
        Ok(v) => v,
        Err(e) => {
            site.tally.note_wrong(format!(
                "{path}: {e}; cache-status {:?}",
                resp.header("cache-status")
            ));
            return Outcome::Wrong;
        }
    };
    let mut outcome = Outcome::Current;
    for (i, v) in versions {
        let on_disk = site.on_disk[i].load(Ordering::Acquire);
        let floor = site.floor(i, sent);
        if v > on_disk {
            site.tally.note_wrong(format!(
                "{path}: note {i} at v{v}, newer than the file's v{on_disk}"
            ));
            return Outcome::Wrong;
        }
        if v < floor {
            site.tally.note_lost(format!(
                "{path}: note {i} at v{v}, but v{floor} was seen before this request \
                 (sent +{} ms); cache-status {:?}",
                site.tally.ms(sent),
                resp.header("cache-status")
            ));
            outcome = Outcome::Lost;
        } else if v < on_disk && outcome == Outcome::Current {
            outcome = Outcome::Previous;
        }
        site.observe(i, v, done);
    }
    outcome
}

/// Edits a note every `every` (jittered), then polls its page until the edit shows.
async fn editor(site: Arc<Site>, seed: u64, every: Duration) {
    let mut rng = SplitMix(seed ^ 0xed);
    let mut conn = None;
    while !site.stopped() {
        let pending: Vec<usize> =
            std::mem::take(&mut *site.pending.lock().unwrap_or_else(|e| e.into_inner()));
        for i in pending {
            await_visible(&site, &mut conn, i, false).await;
        }
        let jitter = rng.below(every.as_millis() as u64 + 1);
        tokio::time::sleep(every / 2 + Duration::from_millis(jitter)).await;
        if site.stopped() {
            break;
        }
        let i = rng.below(site.notes as u64) as usize;
        if let Err(e) = site.edit(i) {
            eprintln!("quire-chaos: editing note {i}: {e}");
            continue;
        }
        await_visible(&site, &mut conn, i, true).await;
    }
}

/// Polls note `i`'s page until it shows the version on disk, at most 15 s.
async fn await_visible(site: &Site, conn: &mut Option<Conn>, i: usize, timed: bool) {
    let want = site.on_disk[i].load(Ordering::Acquire);
    let began = Instant::now();
    while began.elapsed() < VISIBLE_WITHIN {
        let o = fetch(site, conn, Proto::H1, Page::Note(i), "identity").await;
        if o == Outcome::Current && site.floor(i, Instant::now()) >= want {
            if timed {
                let mut e = site.edits.lock().unwrap_or_else(|e| e.into_inner());
                e.visible_ms_max = e.visible_ms_max.max(began.elapsed().as_millis() as u64);
            }
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // quire may have been down for part of the wait: one more bounded try once it is up.
    if quire::healthy(site.addr).await {
        let o = fetch(site, conn, Proto::H1, Page::Note(i), "identity").await;
        if o == Outcome::Current {
            return;
        }
    }
    eprintln!("quire-chaos: serve: the edit of note {i} to v{want} did not show within {VISIBLE_WITHIN:?}");
    site.edits
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .never_visible += 1;
}

/// Checks every chaos page once, in identity and gzip, as requests sent now: only
/// the version on disk is right (everything is quiet).
async fn sweep(site: &Site) -> Counts {
    let mut conn = None;
    let mut samples = Vec::new();
    let pages = (0..site.notes)
        .map(Page::Note)
        .chain([Page::Folder, Page::Tag]);
    for page in pages {
        for coding in ["identity", "gzip"] {
            let sent = Instant::now();
            let (outcome, hit) = match fetch_once(site, &mut conn, Proto::H1, page, coding).await {
                Ok(resp) => (judge(site, page, sent, &resp), resp.hit()),
                Err(f) => {
                    conn = None;
                    (Outcome::Fail(f), false)
                }
            };
            let outcome = if outcome == Outcome::Previous {
                site.tally.note_lost(format!(
                    "{}: an older version in the final sweep",
                    page.path()
                ));
                Outcome::Lost
            } else {
                outcome
            };
            samples.push(Sample {
                url: page.id(site.notes),
                sent_ms: 0,
                done_ms: 0,
                outcome,
                hit,
                stale: false,
                slow_reader: false,
            });
        }
    }
    Counts::of(&samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_and_titles_are_read_per_note() {
        let text = "<h1>Chaos note 1 v3</h1> chaos-marker-1-v3-end <li>Chaos note 10 v7</li>";
        assert_eq!(versions_on(Page::Note(1), text, 11), Ok(vec![(1, 3)]));
        assert!(versions_on(Page::Note(2), text, 11).is_err());
        let listing = "Chaos note 0 v2, Chaos note 1 v5";
        assert_eq!(
            versions_on(Page::Folder, listing, 2),
            Ok(vec![(0, 2), (1, 5)])
        );
        assert!(versions_on(Page::Tag, listing, 3).is_err());
    }

    #[test]
    fn a_note_links_its_neighbours() {
        let t = note_text(0, 4, 5);
        assert!(t.contains("title: Chaos note 0 v4"));
        assert!(t.contains("chaos-marker-0-v4-end"));
        assert!(t.contains("[[Note 1]]") && t.contains("[[Note 4]]"));
    }
}
