//! `quire-chaos`: quire's reliability suite. It drives the real `quire` binary as a
//! child process against an in-process origin whose every body is known byte for
//! byte, under load, with SIGKILLs and restarts on the same volume, origin faults,
//! purges and edits, and checks every response.
//!
//! - `quire-chaos run`: the chaos run ([`proxy_run`], [`serve_run`], [`disk_full`]).
//!   Fails on any wrong byte, lost invalidation, crash, panic, failed restart, or
//!   error no fault or restart explains.
//! - `quire-chaos hostile`: the hostile suites, every attack class that once broke a
//!   promise replayed against the real binary: hostile clients of `quire proxy`
//!   ([`hostile`], `--suite proxy`) and hostile notes in a served vault
//!   ([`hostile_notes`], `--suite notes`: bombs past a time, memory or log bound).
//! - `quire-chaos soak`: the same load without chaos for a long time; fails on any
//!   error; reports quire's memory over the run.
//!
//! Key decisions: the runner is one tokio process with two worker threads (it shares
//! the machine with quire); everything it checks is computed, never recorded from a
//! previous run; figures are printed and, with `--json`, written as JSON.

#![forbid(unsafe_code)]

mod client;
mod content;
mod disk_full;
mod hostile;
mod hostile_notes;
mod kills;
mod ledger;
mod load;
mod origin;
mod proxy_run;
mod quire;
mod report;
mod schedule;
mod serve_run;
mod tally;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// quire-chaos: kill quire, break its origin, purge and edit under load, and check
/// every byte.
#[derive(Debug, Parser)]
#[command(name = "quire-chaos", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// SIGKILLs, origin faults, slow readers, purges and edits under load; a disk-full
    /// start. Exits non-zero on any wrong byte, lost invalidation, crash or failed
    /// restart.
    Run(RunArgs),
    /// A steady mix of hits, misses, purges and edits with no chaos; exits non-zero
    /// on any error; reports quire's memory (VmRSS, RssAnon) after a warm-up.
    Soak(SoakArgs),
    /// The hostile suites: every attack class that once broke a promise, replayed
    /// against the real binary (`--suite proxy`: framing, slow readers, forged client
    /// identity, hoarding, slow origins; `--suite notes`: the note bombs). Exits
    /// non-zero if any attack breaks a promise.
    Hostile(HostileArgs),
}

/// The hostile suites.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Suite {
    /// Hostile clients against `quire proxy` (`hostile`).
    Proxy,
    /// Hostile notes in a served vault (`hostile_notes`).
    Notes,
    /// Three `quire proxy` nodes with `[cluster]`, a real `redis-server` and a link
    /// that lags or is cut (`hostile::cluster`); skipped without `redis-server`.
    Cluster,
}

#[derive(Debug, Clone, Args)]
struct HostileArgs {
    /// Which suite (default: all three).
    #[arg(long, value_enum)]
    suite: Option<Suite>,
    /// The quire binary (default: $CARGO_TARGET_DIR/release/quire, then
    /// target/release/quire).
    #[arg(long, value_name = "PATH")]
    quire: Option<PathBuf>,
    /// small (CI, seconds per case) or full (the sizes the attacks were found at).
    #[arg(long, value_enum, default_value = "small")]
    scale: hostile::Scale,
    /// Run only this case of the proxy or the cluster suite.
    #[arg(long, value_name = "NAME")]
    case: Option<String>,
    /// The vault the note bombs are added to (a copy).
    #[arg(long, value_name = "DIR", default_value = "examples/vault")]
    vault: PathBuf,
    /// Also write the outcomes as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Keep quire's configs and logs here (default: a temporary directory).
    #[arg(long, value_name = "DIR")]
    scratch: Option<PathBuf>,
}

/// Which quire to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// `quire proxy` in front of the chaos origin.
    Proxy,
    /// `quire serve` on a copy of the example vault.
    Serve,
    /// Both, the duration and kills split 60/40.
    Both,
}

/// Options both commands take.
#[derive(Debug, Clone, Args)]
struct Common {
    /// The quire binary (default: $CARGO_TARGET_DIR/release/quire, then
    /// target/release/quire).
    #[arg(long, value_name = "PATH")]
    quire: Option<PathBuf>,
    /// How long the load runs: 90s, 10m, 1h (or seconds).
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// The seed of everything random (URLs, popularity, timetable).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write the figures as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// URLs in the origin's catalogue.
    #[arg(long, default_value_t = 20_000)]
    urls: usize,
    /// quire's --cache-size in proxy mode.
    #[arg(long, default_value = "64MiB")]
    cache_size: String,
    /// Put scratch files (volumes, logs, the vault copy) here and keep them
    /// (default: a temporary directory, removed at the end).
    #[arg(long, value_name = "DIR")]
    scratch: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// proxy, serve or both.
    #[arg(long, value_enum, default_value = "both")]
    mode: Mode,
    /// SIGKILLs over the run.
    #[arg(long, default_value_t = 5)]
    kills: usize,
    /// The vault serve mode copies.
    #[arg(long, value_name = "DIR", default_value = "examples/vault")]
    vault: PathBuf,
    /// Skip the disk-full check.
    #[arg(long)]
    no_disk_full: bool,
    /// Break the run on purpose (proxy mode) to prove its checks fail: skip-purge
    /// acknowledges edits without purging, corrupt-origin flips bytes at the origin.
    #[arg(long, value_enum, hide = true)]
    sabotage: Option<proxy_run::Sabotage>,
}

#[derive(Debug, Clone, Args)]
struct SoakArgs {
    #[command(flatten)]
    common: Common,
}

/// Parses `90`, `90s`, `500ms`, `10m`, `1h`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((s, ""), |at| s.split_at(at));
    let n: f64 = num.parse().map_err(|_| format!("not a duration: {s:?}"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("unknown unit in {s:?} (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("quire-chaos: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match &cli.command {
            Command::Run(a) => run(a).await,
            Command::Soak(a) => soak(a).await,
            Command::Hostile(a) => hostile(a).await,
        }
    });
    match result {
        Ok(failures) if failures.is_empty() => {
            println!("\nPASS");
            ExitCode::SUCCESS
        }
        Ok(failures) => {
            println!("\nFAIL");
            for f in failures {
                println!("  - {f}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("quire-chaos: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The scratch directory: `given` (kept), or a temporary one.
fn scratch(given: Option<&PathBuf>) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match given {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            Ok((d.clone(), None))
        }
        None => {
            let t = tempfile::Builder::new().prefix("quire-chaos-").tempdir()?;
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

fn proxy_plan(
    c: &Common,
    exe: &std::path::Path,
    duration: Duration,
    kills: usize,
) -> proxy_run::Plan {
    proxy_run::Plan {
        quire: exe.to_path_buf(),
        duration,
        kills,
        faults: false,
        seed: c.seed,
        urls: c.urls,
        cache_size: c.cache_size.clone(),
        clients: (12, 4, 2),
        edit_every: Duration::from_millis(250),
        sample_rss: false,
        sabotage: None,
    }
}

async fn run(a: &RunArgs) -> anyhow::Result<Vec<String>> {
    let c = &a.common;
    let exe = quire::find_binary(c.quire.as_deref())?;
    let duration = c.duration.unwrap_or(Duration::from_secs(60));
    let (dir, _tmp) = scratch(c.scratch.as_ref())?;
    let (proxy_share, proxy_kills) = match a.mode {
        Mode::Proxy => (duration, a.kills),
        Mode::Serve => (Duration::ZERO, 0),
        Mode::Both => (duration * 3 / 5, a.kills.div_ceil(2).max(a.kills * 3 / 5)),
    };
    let mut out = report::RunOutput::new("run", c.seed, duration, a.kills);
    if a.mode != Mode::Serve {
        println!(
            "quire-chaos: proxy mode, {:.0} s, {proxy_kills} kills, seed {}",
            proxy_share.as_secs_f64(),
            c.seed
        );
        let mut plan = proxy_plan(c, &exe, proxy_share, proxy_kills);
        plan.faults = true;
        plan.sabotage = a.sabotage;
        let pdir = dir.join("proxy");
        std::fs::create_dir_all(&pdir)?;
        out.proxy = Some(proxy_run::run(&plan, &pdir).await?);
    }
    if a.mode != Mode::Proxy {
        let serve_share = duration.saturating_sub(proxy_share);
        let serve_kills = a.kills - proxy_kills;
        println!(
            "quire-chaos: serve mode, {:.0} s, {serve_kills} kills",
            serve_share.as_secs_f64()
        );
        let plan = serve_run::Plan {
            quire: exe.clone(),
            vault: a.vault.clone(),
            duration: serve_share,
            kills: serve_kills,
            seed: c.seed,
            notes: 12,
            clients: 3,
            edit_every: Duration::from_millis(800),
        };
        let sdir = dir.join("serve");
        std::fs::create_dir_all(&sdir)?;
        out.serve = Some(serve_run::run(&plan, &sdir).await?);
    }
    if !a.no_disk_full {
        println!("quire-chaos: disk-full check");
        out.disk_full = Some(disk_full::check(&exe, &dir).await?);
    }
    out.finish(false);
    report::print(&out);
    report::write_json(&out, c.json.as_deref())?;
    Ok(out.failures)
}

async fn soak(a: &SoakArgs) -> anyhow::Result<Vec<String>> {
    let c = &a.common;
    let exe = quire::find_binary(c.quire.as_deref())?;
    let duration = c.duration.unwrap_or(Duration::from_secs(600));
    let (dir, _tmp) = scratch(c.scratch.as_ref())?;
    let mut plan = proxy_plan(c, &exe, duration, 0);
    plan.sample_rss = true;
    println!(
        "quire-chaos: soak, proxy mode, {:.0} s, seed {}",
        duration.as_secs_f64(),
        c.seed
    );
    let mut out = report::RunOutput::new("soak", c.seed, duration, 0);
    out.proxy = Some(proxy_run::run(&plan, &dir).await?);
    out.finish(true);
    report::print(&out);
    report::write_json(&out, c.json.as_deref())?;
    Ok(out.failures)
}

async fn hostile(a: &HostileArgs) -> anyhow::Result<Vec<String>> {
    let exe = quire::find_binary(a.quire.as_deref())?;
    let (dir, _tmp) = scratch(a.scratch.as_ref())?;
    let mut failures = Vec::new();
    let mut json = serde_json::Map::new();
    let chosen = |s: Suite| a.suite.is_none_or(|x| x == s);
    for (suite, wanted, name) in [
        (hostile::Suite::Proxy, Suite::Proxy, "proxy"),
        (hostile::Suite::Cluster, Suite::Cluster, "cluster"),
    ] {
        // A case named without a suite runs in the suite that has it.
        let elsewhere = a.suite.is_none() && a.case.as_deref().is_some_and(|c| !suite.has(c));
        if !chosen(wanted) || elsewhere {
            continue;
        }
        let sdir = dir.join(name);
        std::fs::create_dir_all(&sdir)?;
        let outcomes = hostile::run_suite(suite, &exe, &sdir, a.scale, a.case.as_deref()).await?;
        failures.extend(
            outcomes
                .iter()
                .flat_map(|o| o.failures.iter().map(move |f| format!("{}: {f}", o.name))),
        );
        json.insert(name.into(), serde_json::to_value(&outcomes)?);
    }
    if chosen(Suite::Notes) {
        let ndir = dir.join("notes");
        std::fs::create_dir_all(&ndir)?;
        let plan = hostile_notes::Plan {
            quire: exe,
            vault: a.vault.clone(),
            scale: a.scale,
        };
        let report = hostile_notes::run(&plan, &ndir).await?;
        failures.extend(report.failures.iter().map(|f| format!("notes: {f}")));
        json.insert("notes".into(), serde_json::to_value(&report)?);
    }
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_vec_pretty(&json)?)?;
    }
    Ok(failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5d").is_err());
    }
}
