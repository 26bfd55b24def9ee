//! `quire warm`: fetches every URL of a sitemap or a list through a running quire, at
//! a bounded rate and concurrency, so pages are cached before readers ask for them
//! (after a deploy, a purge of everything, a new cache volume).
//!
//! Key decisions:
//! - **Through the front door, as a client.** Each URL is a GET to the server being
//!   warmed, with the URL's host in `Host`, so it is keyed as a reader's request for
//!   that URL would be: to an HTTPS listener over TLS, naming the URL's host (its
//!   certificate is checked); to a plain one with the scheme in `X-Forwarded-Proto`
//!   (which counts only from a trusted proxy: see docs/admin.md). A miss is an
//!   ordinary fill, so everything that bounds fills bounds warming too.
//! - **Bounded by the operator, polite to the server.** Requests start on a fixed
//!   schedule (`--rate` a second) with at most `--concurrency` at once; a `429` or
//!   `503` is waited out (its `Retry-After`, at most a minute) and asked again, up to
//!   three times, instead of being pushed through.
//! - **It says what it did**: from each answer's `Cache-Status`, how many URLs were
//!   already cached, how many were stored by this run, how many the cache would not
//!   store (a private page, an uncacheable status) and how many failed; a progress
//!   line a second on standard error. It exits non-zero when any URL failed.

mod fetch;
mod sitemap;

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use http::Uri;

use crate::cli::WarmArgs;

/// Body bytes kept of a sitemap (the protocol's own limit is 50 MB).
const SITEMAP_BYTES_MAX: usize = 50 * 1024 * 1024;
/// Sitemaps read from an index at most.
const SITEMAPS_MAX: usize = 1000;
/// Tries of a URL answered `429` or `503`.
const TRIES: u32 = 3;
/// Failures printed at the end (all are counted).
const FAILURES_SHOWN: usize = 10;

/// Runs `quire warm`; returns whether every URL was fetched.
pub(crate) fn run(args: &WarmArgs) -> anyhow::Result<bool> {
    let server = &fetch::Server::parse(&args.server, args.ca_file.as_deref())?;
    if !(args.rate > 0.0 && args.rate.is_finite()) {
        bail!("--rate must be a positive number of requests a second");
    }
    let urls = match (&args.sitemap, &args.urls) {
        (Some(map), None) => from_sitemap(server, map, args.max)?,
        (None, Some(file)) => from_file(file, args.max)?,
        _ => bail!("give one of --sitemap URL or --urls FILE"),
    };
    eprintln!(
        "quire warm: {} URLs through {}, {} a second, {} at once",
        urls.len(),
        args.server,
        args.rate,
        args.concurrency.max(1)
    );
    let tally = Tally::default();
    let took = warm(server, &urls, args, &tally);
    tally.print_summary(urls.len(), took);
    Ok(tally.failed.load(Ordering::Relaxed) == 0)
}

/// The URLs a sitemap (or a sitemap index) names.
fn from_sitemap(server: &fetch::Server, map: &str, max: usize) -> anyhow::Result<Vec<Uri>> {
    let xml = fetch_text(server, map)?;
    let mut urls = Vec::new();
    if sitemap::is_index(&xml) {
        for child in sitemap::locs(&xml, SITEMAPS_MAX) {
            if urls.len() >= max {
                break;
            }
            let xml = fetch_text(server, &child)?;
            urls.extend(sitemap::locs(&xml, max - urls.len()));
        }
    } else {
        urls = sitemap::locs(&xml, max);
    }
    parse_all(urls.iter().map(String::as_str), map)
}

/// A sitemap's text, fetched through the server.
fn fetch_text(server: &fetch::Server, url: &str) -> anyhow::Result<String> {
    let uri: Uri = url
        .parse()
        .with_context(|| format!("sitemap URL {url:?}"))?;
    let answer = fetch::get(server, &uri, SITEMAP_BYTES_MAX)?;
    if answer.status != 200 {
        bail!("{url}: HTTP {}", answer.status);
    }
    if answer.cut {
        bail!(
            "{url}: longer than {} MB, the sitemap protocol's limit",
            SITEMAP_BYTES_MAX >> 20
        );
    }
    Ok(String::from_utf8_lossy(&answer.body).into_owned())
}

/// The URLs of a file, one a line (`-` is standard input); blank lines and `#`
/// comments skipped.
fn from_file(file: &Path, max: usize) -> anyhow::Result<Vec<Uri>> {
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    let lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .take(max);
    parse_all(lines, &file.display().to_string())
}

/// Every URL parsed as absolute `http`/`https`, or an error naming the first that is not.
fn parse_all<'a>(urls: impl Iterator<Item = &'a str>, from: &str) -> anyhow::Result<Vec<Uri>> {
    urls.map(|u| {
        let uri: Uri = u
            .parse()
            .ok()
            .filter(|uri: &Uri| {
                matches!(uri.scheme_str(), Some("http" | "https")) && uri.authority().is_some()
            })
            .with_context(|| format!("{from}: {u:?} is not an absolute http(s) URL"))?;
        Ok(uri)
    })
    .collect()
}

/// Fetches every URL on the schedule; returns how long it took.
fn warm(server: &fetch::Server, urls: &[Uri], args: &WarmArgs, tally: &Tally) -> Duration {
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    let gap = Duration::from_secs_f64(1.0 / args.rate);
    std::thread::scope(|s| {
        for _ in 0..args.concurrency.clamp(1, 256) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(url) = urls.get(i) else { break };
                // Request i starts no earlier than i gaps after the start.
                let due = start + gap.saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                tally.record(url, fetch_politely(server, url));
            });
        }
        while tally.done() < urls.len() as u64 {
            std::thread::sleep(Duration::from_millis(200));
            tally.print_progress(urls.len(), start.elapsed());
        }
    });
    start.elapsed()
}

/// A GET, asked again after the server's `Retry-After` when it answers 429 or 503.
fn fetch_politely(server: &fetch::Server, url: &Uri) -> anyhow::Result<fetch::Answer> {
    let mut tries = 0;
    loop {
        let answer = fetch::get(server, url, 0)?;
        tries += 1;
        if !matches!(answer.status, 429 | 503) || tries >= TRIES {
            return Ok(answer);
        }
        let wait = answer.retry_after.unwrap_or(1).clamp(1, 60);
        std::thread::sleep(Duration::from_secs(wait));
    }
}

/// What happened to each URL.
#[derive(Debug, Default)]
struct Tally {
    /// Answered from the cache: warm already.
    hit: AtomicU64,
    /// Fetched and stored by this run.
    stored: AtomicU64,
    /// Answered, but not stored (uncacheable, private, a pass).
    not_stored: AtomicU64,
    /// Not answered with a 2xx or 3xx, or not answered at all.
    failed: AtomicU64,
    /// The first failures, for the summary.
    failures: Mutex<Vec<String>>,
    /// When the last progress line was printed, in ms since the start.
    printed_ms: AtomicU64,
}

impl Tally {
    fn record(&self, url: &Uri, answer: anyhow::Result<fetch::Answer>) {
        let failure = match answer {
            Ok(a) if (200..400).contains(&a.status) => {
                let cs = a.cache_status.unwrap_or_default();
                let counter = if cs.contains("; hit") {
                    &self.hit
                } else if cs.contains("stored") {
                    &self.stored
                } else {
                    &self.not_stored
                };
                counter.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(a) => format!("{url}: HTTP {}", a.status),
            Err(e) => format!("{e:#}"),
        };
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut shown = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if shown.len() < FAILURES_SHOWN {
            shown.push(failure);
        }
    }

    fn done(&self) -> u64 {
        [&self.hit, &self.stored, &self.not_stored, &self.failed]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    fn line(&self) -> String {
        format!(
            "{} already cached, {} stored, {} not stored, {} failed",
            self.hit.load(Ordering::Relaxed),
            self.stored.load(Ordering::Relaxed),
            self.not_stored.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed)
        )
    }

    /// A progress line, at most once a second.
    fn print_progress(&self, total: usize, elapsed: Duration) {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        if ms < self.printed_ms.load(Ordering::Relaxed) + 1000 {
            return;
        }
        self.printed_ms.store(ms, Ordering::Relaxed);
        eprintln!("quire warm: {}/{total}: {}", self.done(), self.line());
    }

    fn print_summary(&self, total: usize, took: Duration) {
        println!(
            "warmed {total} URLs in {:.1} s: {}",
            took.as_secs_f64(),
            self.line()
        );
        for f in self
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            println!("  failed: {f}");
        }
    }
}
