//! `quire bench http`: measures an HTTP server the way earlier measurements of the note
//! server quire grew from learned to, after a generator on the server's cores, a cold
//! cache and a development build had each understated it about 2x —
//! a load generator in a process of its own on cores of its own, many real URLs in
//! a realistic order, a verified warm cache, repeated and interleaved runs, tail
//! latency, and the machine's own state reported beside the figures.
//!
//! What it measures ([`run`]):
//! - `--target URL`: a server already running;
//! - `--serve VAULT` / `--proxy ORIGIN`: a `quire serve` / `quire proxy` it starts
//!   itself ([`servers`]), release build, one worker, pinned to `--server-cpus`;
//! - `--uncached`: the same server with a cookie on every request (quire then renders
//!   or fetches each time), for the cached/uncached ratio;
//! - `--peer nginx|varnish`: the peer with an equivalent cache configuration in front
//!   of the same origin, pinned to the same CPUs, measured in the same run (in serve
//!   mode their origin is a second `quire serve` of the vault, idle once they are
//!   warm).
//!
//! How ([`measure`]): URLs from the sitemap or `--urls`, in uniform, Zipf or hot
//! order ([`urls`]); every server warmed and checked to answer every URL as a hit
//! ([`warm`]); then `--reps` rounds, each running every server in turn (the order
//! rotates each round, so none always runs first), with the load from the built-in
//! generator ([`load`], closed loop, or open loop at `--rate`) or `wrk`, pinned to
//! `--loadgen-cpus`; server, generator and other CPU and steal from `/proc`
//! ([`procstat`]), with warnings when the machine was not quiet or the generator
//! saturated its core. Output: a table, `--json FILE` (`runs`, `ratios`), and
//! `--plot FILE.svg` ([`plot`]).

pub mod load;
pub mod plot;
pub mod procstat;
pub mod servers;
pub mod summary;
pub mod urls;
pub mod warm;
pub mod wrk;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use crate::cli::{BenchHttpArgs, Loadgen, Peer};
use load::LoadResult;
use servers::Server;
use summary::Run;

/// The cookie of `--uncached` runs: any cookie makes quire bypass its cache.
const BYPASS_COOKIE: &str = "quire_bench=1";

/// One thing measured: a server, and whether its requests bypass the cache.
#[derive(Debug)]
struct Subject {
    /// The name in tables and JSON: `quire`, `uncached`, `nginx`, `varnish`.
    name: String,
    /// `host:port`.
    host: String,
    /// Index into the started servers, for CPU accounting (`None`: `--target`).
    server: Option<usize>,
    /// A `Cookie` field for every request.
    cookie: Option<&'static str>,
}

/// Runs the benchmark.
pub fn run(args: &BenchHttpArgs) -> anyhow::Result<()> {
    let duration = args.duration.0;
    anyhow::ensure!(
        duration >= Duration::from_secs(1),
        "--duration: a run lasts at least a second"
    );
    if args.rate.is_some() && args.loadgen == Loadgen::Wrk {
        anyhow::bail!("--rate needs the built-in generator (wrk has no fixed-rate mode)");
    }
    let mut started: Vec<Server> = Vec::new();
    let mut subjects = Vec::new();
    let quire = match (&args.serve, &args.proxy, &args.target) {
        (Some(vault), _, _) => Some(servers::quire(
            Some(vault),
            None,
            args.quire_config.as_deref(),
            &args.server_cpus,
        )?),
        (None, Some(origin), _) => {
            let (o, _) = urls::split_url(origin)?;
            Some(servers::quire(
                None,
                Some(&format!("http://{o}")),
                args.quire_config.as_deref(),
                &args.server_cpus,
            )?)
        }
        (None, None, Some(_)) => None,
        (None, None, None) => anyhow::bail!("give --target URL, --serve VAULT or --proxy ORIGIN"),
    };
    let name = if args.target.is_some() {
        "target"
    } else {
        "quire"
    };
    let host = match (&quire, &args.target) {
        (Some(q), _) => q.host.clone(),
        (None, Some(t)) => urls::split_url(t)?.0,
        (None, None) => unreachable!("checked above"),
    };
    let quire_index = quire.map(|q| {
        started.push(q);
        started.len() - 1
    });
    subjects.push(Subject {
        name: name.into(),
        host: host.clone(),
        server: quire_index,
        cookie: None,
    });
    if args.uncached {
        subjects.push(Subject {
            name: "uncached".into(),
            host: host.clone(),
            server: quire_index,
            cookie: Some(BYPASS_COOKIE),
        });
    }
    if !args.peer.is_empty() {
        let origin = match (&args.serve, &args.proxy) {
            (Some(vault), _) => {
                // The peers' origin: a second quire serve of the same vault, not
                // pinned (it is idle once the peers are warm).
                let o = servers::quire_origin(vault, &args.origin_cpus)?;
                let host = o.host.clone();
                started.push(o);
                host
            }
            (None, Some(origin)) => urls::split_url(origin)?.0,
            (None, None) => anyhow::bail!("--peer needs --serve VAULT or --proxy ORIGIN"),
        };
        for peer in &args.peer {
            let s = match peer {
                Peer::Nginx => servers::nginx(&origin, &args.server_cpus)?,
                Peer::Varnish => servers::varnish(&origin, &args.server_cpus)?,
            };
            subjects.push(Subject {
                name: s.kind.name().into(),
                host: s.host.clone(),
                server: Some(started.len()),
                cookie: None,
            });
            started.push(s);
        }
    }
    let server_pid = if args.target.is_some() {
        args.server_pid
    } else {
        None
    };
    // The servers stop when `started` is dropped (SIGTERM, then SIGKILL).
    measure(args, duration, &subjects, &started, server_pid)
}

/// The paths to request: from `--urls`, else the server's sitemap.
fn paths(args: &BenchHttpArgs, host: &str) -> anyhow::Result<Vec<String>> {
    let paths: Vec<String> = match &args.urls {
        Some(f) => std::fs::read_to_string(f)
            .with_context(|| format!("reading {}", f.display()))?
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with('/'))
            .map(str::to_owned)
            .collect(),
        None => {
            let (status, _, body) = urls::get_encoded(host, "/sitemap.xml", "identity")
                .with_context(|| {
                    format!("fetching http://{host}/sitemap.xml (or give --urls FILE)")
                })?;
            anyhow::ensure!(
                status == 200,
                "http://{host}/sitemap.xml answered {status}: give --urls FILE"
            );
            urls::sitemap_paths(&String::from_utf8_lossy(&body))
        }
    };
    anyhow::ensure!(!paths.is_empty(), "no URLs to request");
    Ok(paths)
}

/// One load run against `host`.
fn load_run(
    args: &BenchHttpArgs,
    duration: Duration,
    host: &str,
    list: &Path,
    script: &Path,
    cookie: Option<&str>,
) -> anyhow::Result<(LoadResult, u64)> {
    match args.loadgen {
        Loadgen::Builtin => load::run(&load::Spec {
            host,
            paths: list,
            connections: args.connections,
            duration,
            rate: args.rate,
            accept_encoding: &args.accept_encoding,
            cookie,
            cpus: &args.loadgen_cpus,
        }),
        Loadgen::Wrk => wrk::run(
            &format!("http://{host}"),
            script,
            args.connections,
            duration,
            &args.loadgen_cpus,
        ),
    }
}

fn measure(
    args: &BenchHttpArgs,
    duration: Duration,
    subjects: &[Subject],
    started: &[Server],
    target_pid: Option<u32>,
) -> anyhow::Result<()> {
    let paths = paths(args, &subjects[0].host)?;
    eprintln!(
        "bench http: {} URLs from {}",
        paths.len(),
        args.urls
            .as_ref()
            .map_or("the sitemap".into(), |p| p.display().to_string())
    );
    let mut warnings: Vec<Vec<String>> = vec![Vec::new(); subjects.len()];
    if cfg!(debug_assertions) && subjects.iter().any(|s| s.server.is_some()) {
        // Seed 003's first trap (a development build): the quire this started is
        // this very binary.
        let w = "this is a debug build of quire: the quire it started measures the debug \
                 build (run with cargo run --release)";
        eprintln!("bench http: warning: {w}");
        for list in &mut warnings {
            list.push(w.into());
        }
    }
    if !args.no_warmup {
        for (i, s) in subjects.iter().enumerate() {
            if s.cookie.is_some() {
                continue;
            }
            let w = warm::warm(&s.host, &paths, &args.accept_encoding)?;
            eprintln!(
                "bench http: warm-up: {}: {}/{} URLs were cache hits on their second request{}",
                s.name,
                w.hits,
                w.urls,
                if w.unknown > 0 {
                    format!(" ({} without Cache-Status or X-Cache)", w.unknown)
                } else {
                    String::new()
                }
            );
            warnings[i].extend(w.warnings(&s.name));
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
    // wrk's scripts, one per cookie.
    let cached = dir.path().join("cached.lua");
    let bypass = dir.path().join("uncached.lua");
    if args.loadgen == Loadgen::Wrk {
        std::fs::write(&cached, wrk::script(&list, None, &args.accept_encoding))?;
        std::fs::write(
            &bypass,
            wrk::script(&list, Some(BYPASS_COOKIE), &args.accept_encoding),
        )?;
    }
    let loadgen_cores = args.loadgen_cpus.split(',').count().max(1);

    let mut runs: Vec<Run> = Vec::new();
    for rep in 0..args.reps {
        for k in 0..subjects.len() {
            // The order rotates each round, so no server always runs first.
            let i = (k + rep) % subjects.len();
            let s = &subjects[i];
            let cpu = || match s.server {
                Some(i) => started[i].cpu_jiffies(),
                None => target_pid.and_then(procstat::process),
            };
            let before = procstat::machine().unwrap_or_default();
            let server_before = cpu();
            let script = if s.cookie.is_some() { &bypass } else { &cached };
            let (r, loadgen) = load_run(args, duration, &s.host, &list, script, s.cookie)?;
            let after = procstat::machine().unwrap_or_default();
            let server = match (server_before, cpu()) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                _ => None,
            };
            let secs = r.duration_us as f64 / 1e6;
            let q = procstat::judge(before, after, server, loadgen, secs, loadgen_cores);
            let mut w = warnings[i].clone();
            w.extend(q.warnings.iter().cloned());
            let run = Run::new(&s.name, rep + 1, &r, &q, w);
            eprintln!(
                "bench http: round {} of {}: {}: {:.0} requests/s, p99 {:.2} ms",
                rep + 1,
                args.reps,
                s.name,
                run.requests_per_sec,
                run.p99_ms
            );
            runs.push(run);
        }
    }
    runs.sort_by_key(|r| (subjects.iter().position(|s| s.name == r.server), r.round));
    let names: Vec<&str> = subjects.iter().map(|s| s.name.as_str()).collect();
    summary::print(&runs, &names);
    println!(
        "load generator: {}, {} connections{}, pinned to CPU {}; server CPUs {}; order {:?}; {} URLs; Accept-Encoding: {}",
        match args.loadgen {
            Loadgen::Builtin => "quire bench load (1 thread, epoll)",
            Loadgen::Wrk => "wrk (1 thread)",
        },
        args.connections,
        args.rate
            .map_or(", closed loop".into(), |r| format!(", open loop at {r:.0} requests/s")),
        args.loadgen_cpus,
        args.server_cpus,
        args.order,
        paths.len(),
        args.accept_encoding
    );
    let ratios = summary::ratios(&runs, &names);
    for (peer, x) in &ratios {
        let x = x.as_f64().unwrap_or(0.0);
        match peer.as_str() {
            "uncached" => println!("cached/uncached: {x:.1}x (medians of requests/s)"),
            p => println!("{}/{p}: {x:.2}x (medians of requests/s)", names[0]),
        }
    }
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "servers": names,
            "urls": paths.len(),
            "order": args.order,
            "connections": args.connections,
            "rate": args.rate,
            "duration_s": duration.as_secs(),
            "loadgen": format!("{:?}", args.loadgen).to_lowercase(),
            "loadgen_cpus": args.loadgen_cpus,
            "server_cpus": args.server_cpus,
            "accept_encoding": args.accept_encoding,
            "machine": quire_store::bench::machine::Machine::probe(),
            "runs": runs,
            "ratios": ratios,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        let series: Vec<plot::Series> = runs.iter().map(Run::series).collect();
        let title = format!(
            "quire bench http: {} URLs, {} connections, {}",
            paths.len(),
            args.connections,
            args.rate
                .map_or("closed loop".into(), |r| format!("open loop at {r:.0}/s"))
        );
        std::fs::write(path, plot::svg(&title, &series))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
