//! `quire bench serve`: what publishing costs as a vault grows. For each vault size
//! it generates a synthetic vault ([`synth`](crate::synth)), starts `quire serve` on it
//! in this process (loopback, one worker), and times, over one keep-alive
//! connection, the first request to a sample of note pages (a miss: render,
//! compress, store) and the second (a hit). The figure of merit is how the miss time
//! grows from the smallest vault to the largest: related notes, backlinks and listings
//! are precomputed when the vault changes, so a note's miss should not depend on how
//! many other notes there are. Each vault also holds a page embedding a base over
//! the whole vault (`serve_bases`), timed apart: that page's cost does grow with it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use quire_server::config::ByteSize;
use quire_server::{Config, Ctx, Server};
use quire_site::Site;
use quire_vault::Visibility;

use crate::serve_bases;

/// Arguments of `quire bench serve`.
#[derive(Debug, Clone, Args)]
pub struct BenchServeArgs {
    /// Vault sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 10_000])]
    pub notes: Vec<usize>,
    /// Note pages timed per size.
    #[arg(long, default_value_t = 300)]
    pub pages: usize,
    /// Seed of the synthetic vaults.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Pages requested before timing starts.
const WARMUP: usize = 30;

/// Renders and hits of the base page timed per size.
const BASE_REPS: usize = 40;

/// Latency summary in microseconds.
#[derive(Debug, Clone, serde::Serialize)]
struct Summary {
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    mean_us: f64,
}

fn summarize(mut v: Vec<Duration>) -> Summary {
    v.sort();
    let at = |q: f64| {
        let i = ((v.len() as f64 - 1.0) * q).round() as usize;
        v.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    let mean = v.iter().map(|d| d.as_secs_f64()).sum::<f64>() / v.len().max(1) as f64 * 1e6;
    Summary {
        p50_us: at(0.50),
        p90_us: at(0.90),
        p99_us: at(0.99),
        mean_us: mean,
    }
}

#[derive(Debug, serde::Serialize)]
struct SizeResult {
    notes: usize,
    load_ms: f64,
    pages: usize,
    miss: Summary,
    hit: Summary,
    index_miss_us: f64,
    /// The page embedding a base over the whole vault (`serve_bases`): its render
    /// alone, its first request (by then rendered ahead: the site queues every
    /// public page after the first fill) and its hits.
    base_render: Summary,
    base_first_us: f64,
    base_hit: Summary,
    /// Republishing after one note is edited: reload, related-notes update, search
    /// update, new versions.
    reload_ms: f64,
    /// MCP `tools/call` of `search` and of `get_note` (`serve_mcp`), anonymous,
    /// one at a time on a keep-alive connection.
    mcp_search: Summary,
    mcp_get_note: Summary,
}

/// One request on `conn`; returns the status.
fn request(conn: &mut TcpStream, buf: &mut Vec<u8>, path: &str) -> anyhow::Result<u16> {
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: bench.test\r\nAccept-Encoding: gzip, br\r\n\r\n"
    )?;
    read_answer(conn, buf)
}

/// Reads one answer off `conn` into `buf` (head and body); returns the status.
pub(crate) fn read_answer(conn: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<u16> {
    buf.clear();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let n = conn.read(&mut chunk)?;
        anyhow::ensure!(n > 0, "connection closed");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status: u16 = head
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if let Some(len) = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
            {
                while buf.len() < end + 4 + len {
                    let n = conn.read(&mut chunk)?;
                    anyhow::ensure!(n > 0, "connection closed");
                    buf.extend_from_slice(&chunk[..n]);
                }
                return Ok(status);
            }
            if head.contains("transfer-encoding: chunked") {
                while !buf.ends_with(b"0\r\n\r\n") {
                    let n = conn.read(&mut chunk)?;
                    anyhow::ensure!(n > 0, "connection closed");
                    buf.extend_from_slice(&chunk[..n]);
                }
                return Ok(status);
            }
            return Ok(status);
        }
    }
}

/// One vault size: generates the vault, opens it as a site, serves it in-process and
/// times the note pages (miss, then hit), the index page, and a reload after an edit.
fn measure(notes: usize, pages: usize, seed: u64) -> anyhow::Result<SizeResult> {
    let dir = tempfile::tempdir()?;
    let vault = dir.path().join("vault");
    crate::synth::generate(&vault, notes, seed).context("generating the vault")?;
    serve_bases::write(&vault).context("writing the base page")?;
    let t0 = Instant::now();
    let site = Site::open(&vault)?;
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;
    let urls = sample_urls(&site, pages + WARMUP);
    let (addr, stop) = start_server(&site, dir.path().join("cache.vol"))?;
    let mut conn = TcpStream::connect(addr)?;
    conn.set_nodelay(true)?;
    let mut buf = Vec::new();
    let (mut miss, mut hit) = (Vec::new(), Vec::new());
    // Warm code paths, allocator and page cache on pages that are not timed.
    let (warm, urls) = urls.split_at(WARMUP.min(urls.len() / 2));
    for u in warm {
        request(&mut conn, &mut buf, u)?;
    }
    for u in urls {
        let t = Instant::now();
        anyhow::ensure!(request(&mut conn, &mut buf, u)? == 200, "{u}: not 200");
        miss.push(t.elapsed());
    }
    // Stores finish just after the answers stream: let them land before the hits.
    std::thread::sleep(Duration::from_millis(200));
    for u in urls {
        let t = Instant::now();
        request(&mut conn, &mut buf, u)?;
        hit.push(t.elapsed());
    }
    let t = Instant::now();
    request(&mut conn, &mut buf, "/")?;
    let index_miss_us = t.elapsed().as_secs_f64() * 1e6;
    let t = Instant::now();
    anyhow::ensure!(
        request(&mut conn, &mut buf, serve_bases::URL)? == 200,
        "the base page"
    );
    let base_first_us = t.elapsed().as_secs_f64() * 1e6;
    std::thread::sleep(Duration::from_millis(200));
    let mut base_hit = Vec::new();
    for _ in 0..BASE_REPS {
        let t = Instant::now();
        request(&mut conn, &mut buf, serve_bases::URL)?;
        base_hit.push(t.elapsed());
    }
    let queries = crate::serve_mcp::queries(&site, urls.len());
    let (mcp_search, mcp_get_note) = crate::serve_mcp::times(&mut conn, &mut buf, &queries, urls)?;
    drop(conn);
    stop.send(()).ok();
    site.flush();
    let reload_ms = time_reload(&site, &vault)?;
    let base_render = summarize(serve_bases::render_times(&vault, BASE_REPS)?);
    Ok(SizeResult {
        notes,
        load_ms,
        pages: urls.len(),
        miss: summarize(miss),
        hit: summarize(hit),
        index_miss_us,
        base_render,
        base_first_us,
        base_hit: summarize(base_hit),
        reload_ms,
        mcp_search: summarize(mcp_search),
        mcp_get_note: summarize(mcp_get_note),
    })
}

/// Up to `count` public note URLs spread evenly over the vault.
fn sample_urls(site: &Site, count: usize) -> Vec<String> {
    let snap = site.snapshot();
    let public: Vec<String> = snap
        .vault
        .notes()
        .iter()
        .filter(|n| n.visibility() == Visibility::Public)
        .map(|n| n.url.clone())
        .collect();
    let step = (public.len() / count.max(1)).max(1);
    public.into_iter().step_by(step).take(count).collect()
}

/// Starts quire's server for `site` on a loopback port, on a thread of its own with a
/// one-thread runtime and a 256 MiB cache at `cache`; returns its address and the
/// sender that stops it.
fn start_server(
    site: &Site,
    cache: PathBuf,
) -> anyhow::Result<(SocketAddr, tokio::sync::oneshot::Sender<()>)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut cfg = Config {
        listen: "127.0.0.1:0".parse()?,
        ..Config::default()
    };
    cfg.cache.path = cache;
    cfg.cache.size = ByteSize(256 << 20);
    let site = site.clone();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (atx, arx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        rt.block_on(async move {
            let ctx = match Ctx::with_upstream(cfg, Arc::new(site)) {
                Ok(ctx) => ctx,
                Err(e) => return atx.send(Err(format!("server state: {e}"))).unwrap_or(()),
            };
            let server = match Server::bind(ctx).await {
                Ok(server) => server,
                Err(e) => return atx.send(Err(format!("binding: {e}"))).unwrap_or(()),
            };
            atx.send(server.local_addr().map_err(|e| format!("address: {e}")))
                .ok();
            server
                .run(async {
                    rx.await.ok();
                })
                .await;
        });
    });
    let addr = arx
        .recv()
        .context("the server thread ended")?
        .map_err(anyhow::Error::msg)
        .context("starting the server")?;
    Ok((addr, tx))
}

/// Milliseconds to republish after one note (the middle one) is edited.
fn time_reload(site: &Site, vault: &Path) -> anyhow::Result<f64> {
    let edited = {
        let snap = site.snapshot();
        let n = &snap.vault.notes()[snap.vault.notes().len() / 2];
        vault.join(&n.path)
    };
    let text = std::fs::read_to_string(&edited)?;
    std::fs::write(&edited, format!("{text}\nEdited for the reload timing.\n"))?;
    let t = Instant::now();
    site.reload()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// Runs the benchmark and prints a table (and JSON if asked).
pub fn run(args: &BenchServeArgs) -> anyhow::Result<()> {
    let mut results = Vec::new();
    for &n in &args.notes {
        eprintln!("bench serve: {n} notes ...");
        results.push(measure(n, args.pages, args.seed)?);
    }
    println!(
        "{:>8} {:>9} {:>6} {:>10} {:>10} {:>10} {:>9} {:>9} {:>12} {:>10}",
        "notes",
        "load ms",
        "pages",
        "miss p50",
        "miss p90",
        "miss p99",
        "hit p50",
        "hit p99",
        "index miss",
        "reload ms"
    );
    for r in &results {
        println!(
            "{:>8} {:>9.0} {:>6} {:>8.0}us {:>8.0}us {:>8.0}us {:>7.0}us {:>7.0}us {:>10.0}us {:>10.0}",
            r.notes,
            r.load_ms,
            r.pages,
            r.miss.p50_us,
            r.miss.p90_us,
            r.miss.p99_us,
            r.hit.p50_us,
            r.hit.p99_us,
            r.index_miss_us,
            r.reload_ms
        );
    }
    let growth = match (results.first(), results.last()) {
        (Some(a), Some(b)) if results.len() > 1 => Some(b.miss.p50_us / a.miss.p50_us),
        _ => None,
    };
    if let Some(g) = growth {
        println!(
            "note miss p50 grows {g:.2}x from {} to {} notes (target: at most 1.5x)",
            results[0].notes,
            results[results.len() - 1].notes
        );
    }
    println!(
        "{:>8} {:>16} {:>16} {:>14} {:>12}",
        "notes", "base render p50", "base render p99", "base 1st req", "base hit p50"
    );
    for r in &results {
        println!(
            "{:>8} {:>14.0}us {:>14.0}us {:>12.0}us {:>10.0}us",
            r.notes, r.base_render.p50_us, r.base_render.p99_us, r.base_first_us, r.base_hit.p50_us
        );
    }
    println!(
        "{:>8} {:>16} {:>16} {:>16} {:>16}",
        "notes", "mcp search p50", "mcp search p99", "get_note p50", "get_note p99"
    );
    for r in &results {
        println!(
            "{:>8} {:>14.0}us {:>14.0}us {:>14.0}us {:>14.0}us",
            r.notes,
            r.mcp_search.p50_us,
            r.mcp_search.p99_us,
            r.mcp_get_note.p50_us,
            r.mcp_get_note.p99_us
        );
    }
    if let Some(path) = &args.json {
        let doc = serde_json::json!({ "sizes": results, "miss_p50_growth": growth });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
