//! `quire bench http`: measures an HTTP server the way seeds 000 and 003 learned to —
//! a load generator on cores of its own, many real URLs in a realistic order, a
//! verified warm cache, repeated runs, tail latency, and the machine's own state
//! reported beside the figures.
//!
//! PARTIAL (issue 5): `--target URL` (an already running server) and `--serve VAULT`
//! (it starts `quire serve` itself, pinned to `--server-cpus`) work, with
//! `--uncached` measuring every request bypassing the cache, interleaved, for the
//! cached/uncached ratio. URLs come from
//! the target's sitemap or a file; uniform/Zipf/hot orders; a warm-up pass that
//! checks every URL is a cache hit (from `Cache-Status`), wrk pinned with taskset,
//! server and generator CPU and steal from `/proc`, warnings when the machine was not
//! quiet or the generator saturated, a table and `--json`. Not built yet: `--proxy`,
//! peers (`--peer nginx|varnish`), fixed-rate open-loop runs, sustained-run reporting
//! over time, and `--plot`.

pub mod load;
pub mod procstat;
pub mod urls;
pub mod wrk;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use crate::cli::BenchHttpArgs;

/// One run, in the JSON shape issue 5 fixes for other tools.
#[derive(Debug, Clone, serde::Serialize)]
struct Run {
    server: String,
    requests_per_sec: f64,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    errors: u64,
    non_2xx: u64,
    bytes_per_sec: f64,
    server_cpu_pct: f64,
    loadgen_cpu_pct: f64,
    other_cpu_pct: f64,
    steal_pct: f64,
    warnings: Vec<String>,
}

/// Runs the benchmark.
pub fn run(args: &BenchHttpArgs) -> anyhow::Result<()> {
    let started = match &args.serve {
        Some(vault) => Some(Started::start(vault, &args.server_cpus)?),
        None => None,
    };
    let target = match (&started, &args.target) {
        (Some(s), _) => s.url.clone(),
        (None, Some(t)) => t.clone(),
        (None, None) => anyhow::bail!("give --target URL or --serve VAULT"),
    };
    let server_pid = started.as_ref().map(|s| s.child.id()).or(args.server_pid);
    let result = measure(args, &target, server_pid);
    if let Some(s) = started {
        s.stop();
    }
    result
}

/// A `quire serve` this benchmark started.
struct Started {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Started {
    fn start(vault: &std::path::Path, cpus: &str) -> anyhow::Result<Started> {
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let exe = std::env::current_exe().context("finding the quire binary")?;
        let child = std::process::Command::new("taskset")
            .args(["-c", cpus])
            .arg(exe)
            .arg("serve")
            .arg(vault)
            .args([
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--workers",
                "1",
                "--no-watch",
            ])
            .arg("--cache")
            .arg(dir.path().join("cache.vol"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .context("starting quire serve under taskset")?;
        let url = format!("http://127.0.0.1:{port}");
        let host = format!("127.0.0.1:{port}");
        let mut s = Started {
            child,
            url,
            _dir: dir,
        };
        for _ in 0..600 {
            if urls::get_encoded(&host, "/", "identity").is_ok() {
                return Ok(s);
            }
            if let Some(status) = s.child.try_wait()? {
                anyhow::bail!("quire serve exited: {status}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        s.stop();
        anyhow::bail!("quire serve did not answer within 60 s")
    }

    fn stop(mut self) {
        // SIGTERM (a graceful drain), then wait.
        let _ = std::process::Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

fn measure(args: &BenchHttpArgs, target: &str, server_pid: Option<u32>) -> anyhow::Result<()> {
    let (host, _) = urls::split_url(target)?;
    let base = format!("http://{host}");
    let paths: Vec<String> = match &args.urls {
        Some(f) => std::fs::read_to_string(f)
            .with_context(|| format!("reading {}", f.display()))?
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with('/'))
            .map(str::to_owned)
            .collect(),
        None => {
            let (status, _, body) = urls::get_encoded(&host, "/sitemap.xml", "identity")
                .with_context(|| format!("fetching {base}/sitemap.xml (or give --urls FILE)"))?;
            anyhow::ensure!(
                status == 200,
                "{base}/sitemap.xml answered {status}: give --urls FILE"
            );
            urls::sitemap_paths(&String::from_utf8_lossy(&body))
        }
    };
    anyhow::ensure!(!paths.is_empty(), "no URLs to request");
    eprintln!(
        "bench http: {} URLs from {}",
        paths.len(),
        args.urls
            .as_ref()
            .map_or("the sitemap".into(), |p| p.display().to_string())
    );

    let mut warm_warnings = Vec::new();
    if !args.no_warmup {
        let mut hits = 0;
        let mut unknown = 0;
        let mut failed = Vec::new();
        // First every URL once (misses: render or fetch, compress, store), then
        // check each is now a hit, retrying a while: stores land just after the
        // answers stream.
        for p in &paths {
            let _ = urls::get(&host, p)?;
        }
        std::thread::sleep(Duration::from_millis(300));
        for p in &paths {
            let mut tries = 0;
            loop {
                let (status, head, _) = urls::get(&host, p)?;
                let cs = head.lines().find_map(|l| l.strip_prefix("cache-status:"));
                let hit = cs.is_some_and(|c| c.contains("hit"));
                if hit || cs.is_none() || tries == 10 || !(200..400).contains(&status) {
                    if !(200..400).contains(&status) {
                        failed.push(format!("{p} ({status})"));
                    }
                    match cs {
                        Some(_) if hit => hits += 1,
                        Some(_) => {}
                        None => unknown += 1,
                    }
                    break;
                }
                tries += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        eprintln!(
            "bench http: warm-up: {hits}/{} URLs were cache hits on their second request{}",
            paths.len(),
            if unknown > 0 {
                format!(" ({unknown} without Cache-Status)")
            } else {
                String::new()
            }
        );
        if hits + unknown < paths.len() {
            warm_warnings.push(format!(
                "{} URLs were not cache hits after the warm-up: the run measures misses too",
                paths.len() - hits - unknown
            ));
        }
        if !failed.is_empty() {
            warm_warnings.push(format!(
                "{} URLs failed: {}",
                failed.len(),
                failed
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }

    let dir = tempfile::tempdir()?;
    let list = dir.path().join("paths.txt");
    let seq = urls::sequence(
        &paths,
        args.order,
        (paths.len() * 20).max(20_000),
        args.seed,
    );
    std::fs::write(&list, seq.join("\n") + "\n")?;
    let mut variants: Vec<(&str, PathBuf)> = Vec::new();
    let cached: PathBuf = dir.path().join("cached.lua");
    std::fs::write(&cached, wrk::script(&list, None))?;
    variants.push(("cached", cached));
    if args.uncached {
        let bypass: PathBuf = dir.path().join("uncached.lua");
        std::fs::write(&bypass, wrk::script(&list, Some("quire_bench=1")))?;
        variants.push(("uncached", bypass));
    }
    let loadgen_cores = args.loadgen_cpus.split(',').count().max(1);

    let mut runs = Vec::new();
    for rep in 0..args.reps {
        for (name, script) in &variants {
            let before = procstat::machine().unwrap_or_default();
            let server_before = server_pid.and_then(procstat::process);
            let (r, loadgen) = wrk::run(
                &base,
                script,
                args.connections,
                Duration::from_secs(args.duration),
                &args.loadgen_cpus,
            )?;
            let after = procstat::machine().unwrap_or_default();
            let server = match (server_before, server_pid.and_then(procstat::process)) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            };
            let secs = r.duration_us as f64 / 1e6;
            let q = procstat::judge(before, after, server, loadgen, secs, loadgen_cores);
            let mut warnings = warm_warnings.clone();
            warnings.extend(q.warnings.iter().cloned());
            if r.errors > 0 || r.non_2xx > 0 {
                warnings.push(format!(
                    "{} errors and {} non-2xx/3xx answers",
                    r.errors, r.non_2xx
                ));
            }
            eprintln!(
                "bench http: {name} run {} of {}: {:.0} requests/s",
                rep + 1,
                args.reps,
                r.rps()
            );
            runs.push(Run {
                server: (*name).into(),
                requests_per_sec: r.rps(),
                p50_ms: r.p50_us / 1e3,
                p90_ms: r.p90_us / 1e3,
                p99_ms: r.p99_us / 1e3,
                p999_ms: r.p999_us / 1e3,
                errors: r.errors,
                non_2xx: r.non_2xx,
                bytes_per_sec: r.bytes as f64 / secs.max(1e-9),
                server_cpu_pct: q.server_cpu_pct,
                loadgen_cpu_pct: q.loadgen_cpu_pct,
                other_cpu_pct: q.other_cpu_pct,
                steal_pct: q.steal_pct,
                warnings,
            });
        }
    }

    println!(
        "{:>9} {:>12} {:>8} {:>8} {:>8} {:>9} {:>7} {:>10} {:>10} {:>8} {:>7}",
        "run",
        "requests/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "errors",
        "server cpu",
        "loadgen",
        "others",
        "steal"
    );
    for (i, r) in runs.iter().enumerate() {
        println!(
            "{:>9} {:>12.0} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>7} {:>9.0}% {:>9.0}% {:>7.0}% {:>6.1}%",
            format!("{} {}", r.server, i / variants.len() + 1),
            r.requests_per_sec,
            r.p50_ms,
            r.p90_ms,
            r.p99_ms,
            r.p999_ms,
            r.errors + r.non_2xx,
            r.server_cpu_pct,
            r.loadgen_cpu_pct,
            r.other_cpu_pct,
            r.steal_pct
        );
        for w in &r.warnings {
            println!("       warning: {w}");
        }
    }
    println!(
        "load generator: wrk, 1 thread, {} connections, pinned to CPU {}; order {:?}; {} URLs",
        args.connections,
        args.loadgen_cpus,
        args.order,
        paths.len()
    );
    let median = |name: &str| {
        let mut v: Vec<f64> = runs
            .iter()
            .filter(|r| r.server == name)
            .map(|r| r.requests_per_sec)
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let mut ratios = serde_json::Map::new();
    if let (Some(c), Some(u)) = (median("cached"), median("uncached")) {
        println!(
            "cached/uncached: {:.1}x (medians {c:.0} / {u:.0} requests/s)",
            c / u.max(1e-9)
        );
        ratios.insert("uncached".into(), (c / u.max(1e-9)).into());
    }
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "target": target,
            "urls": paths.len(),
            "order": args.order,
            "connections": args.connections,
            "duration_s": args.duration,
            "loadgen_cpus": args.loadgen_cpus,
            "runs": runs,
            "ratios": ratios,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
