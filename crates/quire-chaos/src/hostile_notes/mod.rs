//! `quire-chaos hostile --suite notes`: the bombs of issue 29 as generated notes in a
//! copy of a vault (`bombs`), served by the real `quire serve`, each page requested
//! anonymously and with a junk cookie (which bypasses the cache and forces a render),
//! while an ordinary page is requested every 100 ms; then an ordinary note is edited
//! and the time until its page shows the edit is the reload time.
//!
//! It fails when a bomb's page takes longer than the scale's bound or is not a 200,
//! when quire's peak memory (`VmHWM`) passes the scale's bound, when the ordinary page
//! is slower than [`ORDINARY_MAX`] meanwhile, when the reload takes longer than the
//! scale's bound, or when a bomb a render budget stops has no log line naming its
//! note and the bound.
//!
//! Key decision: **bounds are generous and absolute** (seconds, hundreds of MiB),
//! an order of magnitude under what the issue measured and over what a busy 2-core
//! machine needs, so the suite fails on a bomb that is back, never on a slow day.

mod bombs;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use serde::Serialize;

use crate::client::{Conn, Proto, Response};
use crate::quire::{self, Quire};

/// How big the bombs are: `Small` is a tenth of the sizes or less (seconds,
/// for CI), `Full` the sizes; one scale for every hostile suite.
pub(crate) use crate::hostile::Scale;

/// The bounds one scale is held to.
#[derive(Debug, Clone, Copy, Serialize)]
struct Bounds {
    start_s: u64,
    page_s: u64,
    reload_s: u64,
    peak_mib: u64,
}

impl Scale {
    fn bounds(self) -> Bounds {
        match self {
            Scale::Small => Bounds {
                start_s: 60,
                page_s: 15,
                reload_s: 15,
                peak_mib: 768,
            },
            Scale::Full => Bounds {
                start_s: 180,
                page_s: 30,
                reload_s: 30,
                peak_mib: 1536,
            },
        }
    }
}

/// The slowest the ordinary page may answer while the bombs are requested.
const ORDINARY_MAX: Duration = Duration::from_secs(3);

/// The host requests name.
const HOST: &str = "garden.test";

/// The ordinary page requested meanwhile (a public note of the example vault).
const ORDINARY_URL: &str = "/about";

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The quire binary.
    pub(crate) quire: PathBuf,
    /// The vault to copy.
    pub(crate) vault: PathBuf,
    /// The bombs' size.
    pub(crate) scale: Scale,
}

/// One bomb's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BombReport {
    name: &'static str,
    url: String,
    /// Status, body bytes and ms of the anonymous request (a render, then stored).
    anonymous: Option<(u16, usize, u64)>,
    /// The same again: a hit when the page could be stored.
    again: Option<(u16, usize, u64)>,
    /// With `Cookie: junk=1` (a render every time).
    cookie: Option<(u16, usize, u64)>,
    /// The log line naming the note and its bound, if one was expected.
    log_line: Option<String>,
}

/// The suite's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    scale: &'static str,
    bounds: Bounds,
    start_ms: u64,
    bombs: Vec<BombReport>,
    /// quire's peak resident memory (`VmHWM`), MiB.
    peak_mib: u64,
    /// The ordinary page's slowest answer while the bombs were requested, ms.
    ordinary_max_ms: u64,
    /// Ordinary page requests that failed meanwhile.
    ordinary_failed: u64,
    /// From an ordinary note's edit to its page showing it, ms.
    reload_ms: Option<u64>,
    /// Panic lines in quire's log.
    panics: Vec<String>,
    /// Why the suite failed (empty: it passed).
    pub(crate) failures: Vec<String>,
}

/// Runs the suite in `dir` (the vault copy, the volume and quire's log go there).
pub(crate) async fn run(plan: &Plan, dir: &Path) -> anyhow::Result<Report> {
    let vault = dir.join("vault");
    crate::serve_run::copy_vault(&plan.vault, &vault)?;
    let t = Instant::now();
    let bombs = bombs::write(&vault, plan.scale)?;
    let (ordinary_path, text) = bombs::ordinary(0);
    std::fs::write(vault.join(&ordinary_path), text)?;
    println!(
        "quire-chaos: hostile notes ({:?} scale), {} bombs written in {} ms",
        plan.scale,
        bombs.len(),
        t.elapsed().as_millis()
    );
    let addr = quire::free_addr()?;
    let log = dir.join("quire.log");
    let args = crate::serve_run::serve_args(vault.clone(), addr, dir);
    let mut q = Quire::new(&plan.quire, args, addr, log.clone());
    let bounds = plan.scale.bounds();
    let start = q.start(Duration::from_secs(bounds.start_s)).await?;
    let pid = q.pid().unwrap_or(0);
    let mut report = Report {
        scale: match plan.scale {
            Scale::Small => "small",
            Scale::Full => "full",
        },
        bounds,
        start_ms: start.as_millis() as u64,
        bombs: Vec::new(),
        peak_mib: 0,
        ordinary_max_ms: 0,
        ordinary_failed: 0,
        reload_ms: None,
        panics: Vec::new(),
        failures: Vec::new(),
    };
    let prober = Prober::start(addr);
    for b in &bombs {
        report.bombs.push(request_bomb(addr, b, bounds).await);
    }
    let (max, failed) = prober.stop().await;
    report.ordinary_max_ms = max;
    report.ordinary_failed = failed;
    report.reload_ms = reload(addr, &vault, &ordinary_path, bounds).await;
    report.peak_mib = peak_kib(pid).unwrap_or(0) / 1024;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    for (b, r) in bombs.iter().zip(&mut report.bombs) {
        r.log_line = text
            .lines()
            .find(|l| l.contains(&b.path) && b.bounds.iter().any(|bound| l.contains(bound)))
            .map(str::to_owned);
    }
    report.panics = q.panics();
    let _ = q.stop(Duration::from_secs(20)).await;
    judge(&mut report, &bombs);
    print(&report);
    Ok(report)
}

/// Requests bomb `b` anonymously, again, and with a junk cookie.
async fn request_bomb(addr: SocketAddr, b: &bombs::Bomb, bounds: Bounds) -> BombReport {
    let within = Duration::from_secs(bounds.page_s);
    let anonymous = get(addr, &b.url, &[], within).await;
    let again = get(addr, &b.url, &[], within).await;
    let cookie = get(addr, &b.url, &[("cookie", "junk=1".to_owned())], within).await;
    BombReport {
        name: b.name,
        url: b.url.clone(),
        anonymous,
        again,
        cookie,
        log_line: None,
    }
}

/// `GET path` on a new connection: status, body bytes and ms, or `None` if it did not
/// answer within `within`.
async fn get(
    addr: SocketAddr,
    path: &str,
    fields: &[(&str, String)],
    within: Duration,
) -> Option<(u16, usize, u64)> {
    let t = Instant::now();
    let answer = tokio::time::timeout(within, async {
        let mut c = Conn::connect(addr, Proto::H1, None).await.ok()?;
        c.send(Method::GET, path, HOST, fields, Bytes::new(), None)
            .await
            .ok()
    })
    .await
    .ok()
    .flatten()?;
    let len = answer.body.as_ref().map_or(0, Vec::len);
    Some((answer.status, len, t.elapsed().as_millis() as u64))
}

/// Requests the ordinary page every 100 ms until stopped.
struct Prober {
    stop: Arc<AtomicBool>,
    max_ms: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Prober {
    fn start(addr: SocketAddr) -> Prober {
        let stop = Arc::new(AtomicBool::new(false));
        let max_ms = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let (s, m, f) = (stop.clone(), max_ms.clone(), failed.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                let t = Instant::now();
                match get(addr, ORDINARY_URL, &[], Duration::from_secs(30)).await {
                    Some((200, _, _)) => {}
                    _ => {
                        f.fetch_add(1, Ordering::Relaxed);
                    }
                }
                m.fetch_max(t.elapsed().as_millis() as u64, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Prober {
            stop,
            max_ms,
            failed,
            task,
        }
    }

    /// Stops it; the slowest answer (ms) and the failures.
    async fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        (
            self.max_ms.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

/// Edits the ordinary note (atomically) and waits for its page to show the edit;
/// the ms it took, or `None` past the bound.
async fn reload(addr: SocketAddr, vault: &Path, path: &str, bounds: Bounds) -> Option<u64> {
    let (_, text) = bombs::ordinary(1);
    let file = vault.join(path);
    let tmp = file.with_extension("md.tmp");
    std::fs::write(&tmp, text).ok()?;
    let t = Instant::now();
    std::fs::rename(&tmp, &file).ok()?;
    let url = format!("/{}/ordinary", bombs::FOLDER.to_lowercase());
    while t.elapsed() < Duration::from_secs(bounds.reload_s) {
        let shown = tokio::time::timeout(Duration::from_secs(5), async {
            let mut c = Conn::connect(addr, Proto::H1, None).await.ok()?;
            let r: Response = c
                .send(Method::GET, &url, HOST, &[], Bytes::new(), None)
                .await
                .ok()?;
            let body = r.body.ok()?;
            Some(String::from_utf8_lossy(&body).contains("ordinary-marker-v1-end"))
        })
        .await;
        if matches!(shown, Ok(Some(true))) {
            return Some(t.elapsed().as_millis() as u64);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// The peak resident memory of `pid` (`VmHWM`), KiB.
fn peak_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Fills `r.failures` from the figures.
fn judge(r: &mut Report, bombs: &[bombs::Bomb]) {
    let mut f = Vec::new();
    for (b, br) in bombs.iter().zip(&r.bombs) {
        for (what, got) in [
            ("anonymous", br.anonymous),
            ("again", br.again),
            ("cookie", br.cookie),
        ] {
            match got {
                Some((200, _, _)) => {}
                Some((status, _, _)) => {
                    f.push(format!("{}: {what} request answered {status}", b.name))
                }
                None => f.push(format!(
                    "{}: {what} request got no answer within {} s",
                    b.name, r.bounds.page_s
                )),
            }
        }
        if !b.bounds.is_empty() && br.log_line.is_none() {
            f.push(format!(
                "{}: no log line names {} and one of {:?}",
                b.name, b.path, b.bounds
            ));
        }
    }
    if r.peak_mib > r.bounds.peak_mib {
        f.push(format!(
            "peak memory {} MiB, past {} MiB",
            r.peak_mib, r.bounds.peak_mib
        ));
    }
    if r.ordinary_max_ms > ORDINARY_MAX.as_millis() as u64 || r.ordinary_failed > 0 {
        f.push(format!(
            "the ordinary page {ORDINARY_URL}: slowest {} ms, {} failed (bound {} ms)",
            r.ordinary_max_ms,
            r.ordinary_failed,
            ORDINARY_MAX.as_millis()
        ));
    }
    if r.reload_ms.is_none() {
        f.push(format!(
            "an edit did not show within {} s (reload)",
            r.bounds.reload_s
        ));
    }
    if !r.panics.is_empty() {
        f.push(format!("{} panics in quire's log", r.panics.len()));
    }
    r.failures = f;
}

fn print(r: &Report) {
    let cell = |x: Option<(u16, usize, u64)>| {
        x.map_or_else(
            || "no answer".to_owned(),
            |(s, len, ms)| format!("{s} {:>9} B {ms:>6} ms", len),
        )
    };
    println!(
        "\nhostile notes, {} scale: start {} ms",
        r.scale, r.start_ms
    );
    println!(
        "{:<24} {:<27} {:<27} {:<27} log",
        "bomb", "anonymous", "again", "junk cookie"
    );
    for b in &r.bombs {
        println!(
            "{:<24} {:<27} {:<27} {:<27} {}",
            b.name,
            cell(b.anonymous),
            cell(b.again),
            cell(b.cookie),
            if b.log_line.is_some() { "yes" } else { "-" }
        );
    }
    println!(
        "peak RSS (VmHWM) {} MiB; ordinary page slowest {} ms ({} failed); reload {}",
        r.peak_mib,
        r.ordinary_max_ms,
        r.ordinary_failed,
        r.reload_ms
            .map_or_else(|| "never".to_owned(), |ms| format!("{ms} ms"))
    );
}
