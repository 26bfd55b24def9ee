//! `quire-chaos hostile`: the hostile-client suite. Each case is one attack class that
//! broke a promise once (*one client never makes others' requests fail*, *no request
//! buys unbounded work*, *an invalidation is never lost*), replayed against the real
//! `quire` binary over real sockets, with the figure the class is judged by.
//!
//! Key decisions:
//! - **A case starts its own quire** with the configuration the attack needs (a short
//!   send deadline, a small rate budget, a trusted proxy), so cases never depend on one
//!   another's leftovers and one can be run alone (`--case NAME`).
//! - **Two scales, one code path**: `--scale small` (CI, seconds per case) and
//!   `--scale full` (the sizes the attacks were first found at); only counts and
//!   durations change.
//! - **A case judges outcomes, never timings of quire's speed**: "another client's
//!   request was answered correctly while the attack ran", "the stalled stream was
//!   reset", "no more misses were admitted than the budget". Wall-clock bounds appear
//!   only as generous limits that separate *bounded* from *never*.

mod clients;
mod cluster;
mod framing;
mod raw_origin;
mod stalls;
mod wire;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::quire::{self, Quire};

/// How big the attacks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub(crate) enum Scale {
    /// A few seconds per case: CI.
    Small,
    /// The sizes the attacks were found at: one command, minutes.
    Full,
}

impl Scale {
    /// `small` at small scale, `full` at full scale.
    pub(crate) fn pick<T>(self, small: T, full: T) -> T {
        match self {
            Scale::Small => small,
            Scale::Full => full,
        }
    }
}

/// What a case needs: the binary, a scratch directory, the scale.
#[derive(Debug)]
pub(crate) struct Env {
    pub(crate) exe: PathBuf,
    pub(crate) dir: PathBuf,
    pub(crate) scale: Scale,
    /// The logs of every quire started, searched for panics after each case.
    logs: std::sync::Mutex<Vec<PathBuf>>,
}

/// One case's result.
#[derive(Debug, Default, serde::Serialize)]
pub(crate) struct Outcome {
    pub(crate) name: String,
    /// What the case measured, by name.
    pub(crate) figures: Vec<(String, f64)>,
    /// Broken promises, in words.
    pub(crate) failures: Vec<String>,
    /// Why the case judged nothing (a tool it needs is missing), if it did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) skipped: Option<String>,
}

impl Outcome {
    pub(crate) fn new(name: &str) -> Outcome {
        Outcome {
            name: name.to_string(),
            ..Outcome::default()
        }
    }

    /// Records a figure.
    pub(crate) fn figure(&mut self, name: &str, value: f64) {
        self.figures.push((name.to_string(), value));
    }

    /// Records a failure unless `ok`.
    pub(crate) fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }
}

/// A quire proxy started for one case; stopped when dropped (the child is killed on
/// drop).
#[derive(Debug)]
pub(crate) struct Proxy {
    _quire: Quire,
    pub(crate) addr: SocketAddr,
}

impl Env {
    /// Starts `quire proxy` in front of `origin` with `toml` appended to its config
    /// file (which already sets `origin`, `listen` and `[cache]`), `case` naming its files.
    pub(crate) async fn proxy(
        &self,
        case: &str,
        origin: &str,
        toml: &str,
    ) -> anyhow::Result<Proxy> {
        self.proxy_sized(case, origin, toml, "64 MiB").await
    }

    /// [`Env::proxy`] with a cache of `size` (a larger volume stores larger objects).
    pub(crate) async fn proxy_sized(
        &self,
        case: &str,
        origin: &str,
        toml: &str,
        size: &str,
    ) -> anyhow::Result<Proxy> {
        let addr = quire::free_addr()?;
        let config = self.dir.join(format!("{case}.toml"));
        let volume = self.dir.join(format!("{case}.vol"));
        let origin_line = if origin.is_empty() {
            String::new()
        } else {
            format!("origin = \"{origin}\"\n")
        };
        let text = format!(
            "listen = \"{addr}\"\n{origin_line}{toml}\n\n[cache]\npath = \"{}\"\nsize = \"{size}\"\n",
            volume.display()
        );
        std::fs::write(&config, text)?;
        let args: Vec<OsString> = vec!["proxy".into(), "--config".into(), config.into()];
        let log = self.dir.join(format!("{case}.log"));
        self.watch_log(&log);
        let mut quire = Quire::new(&self.exe, args, addr, log);
        quire.start(Duration::from_secs(20)).await?;
        Ok(Proxy {
            _quire: quire,
            addr,
        })
    }

    /// Adds `log` to the logs searched for panics after the case.
    pub(crate) fn watch_log(&self, log: &Path) {
        if let Ok(mut logs) = self.logs.lock() {
            logs.push(log.to_path_buf());
        }
    }

    /// Panics in the logs of the quires started since the last call.
    fn panics(&self) -> Vec<String> {
        let logs = self
            .logs
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default();
        logs.iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .flat_map(|text| {
                text.lines()
                    .filter(|l| l.contains("panicked"))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// Every proxy case by name, in the order they run.
const CASES: &[&str] = &[
    "upgrade_with_content_length",
    "smuggling_shapes",
    "unkeyed_header_poisoning",
    "h2_zero_window",
    "h1_reader_that_never_reads",
    "forwarded_for_variants",
    "tunnel_hoarding",
    "origin_slowness",
];

/// Runs one case by name.
async fn run_case(env: &Env, name: &str) -> anyhow::Result<Outcome> {
    match name {
        "upgrade_with_content_length" => framing::upgrade_with_content_length(env).await,
        "smuggling_shapes" => framing::smuggling_shapes(env).await,
        "unkeyed_header_poisoning" => framing::unkeyed_header_poisoning(env).await,
        "h2_zero_window" => stalls::h2_zero_window(env).await,
        "h1_reader_that_never_reads" => stalls::h1_reader_that_never_reads(env).await,
        "forwarded_for_variants" => clients::forwarded_for_variants(env).await,
        "tunnel_hoarding" => clients::tunnel_hoarding(env).await,
        "origin_slowness" => clients::origin_slowness(env).await,
        other => anyhow::bail!("no case {other:?}; the cases: {}", CASES.join(", ")),
    }
}

/// Which cases a suite has and how one is run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Suite {
    /// Hostile clients of one `quire proxy`.
    Proxy,
    /// Three `quire proxy` nodes with `[cluster]` and a real Redis.
    Cluster,
}

impl Suite {
    /// Whether the suite has a case named `name`.
    pub(crate) fn has(self, name: &str) -> bool {
        self.cases().contains(&name)
    }

    fn cases(self) -> &'static [&'static str] {
        match self {
            Suite::Proxy => CASES,
            Suite::Cluster => cluster::CASES,
        }
    }

    async fn run(self, env: &Env, name: &str) -> anyhow::Result<Outcome> {
        match self {
            Suite::Proxy => run_case(env, name).await,
            Suite::Cluster => cluster::run_case(env, name).await,
        }
    }
}

/// Runs the cases of `suite` (`only` one of them, or all), prints each and returns
/// them.
pub(crate) async fn run_suite(
    suite: Suite,
    exe: &Path,
    dir: &Path,
    scale: Scale,
    only: Option<&str>,
) -> anyhow::Result<Vec<Outcome>> {
    let env = Env {
        exe: exe.to_path_buf(),
        dir: dir.to_path_buf(),
        scale,
        logs: std::sync::Mutex::default(),
    };
    let mut out = Vec::new();
    for &name in suite
        .cases()
        .iter()
        .filter(|n| only.is_none_or(|o| o == **n))
    {
        println!("quire-chaos hostile: {name}");
        let mut outcome = match suite.run(&env, name).await {
            Ok(o) => o,
            Err(e) => Outcome {
                name: name.to_string(),
                failures: vec![format!("the case could not run: {e:#}")],
                ..Outcome::default()
            },
        };
        for p in env.panics() {
            outcome.failures.push(format!("quire panicked: {p}"));
        }
        print(&outcome);
        out.push(outcome);
    }
    anyhow::ensure!(!out.is_empty(), "no case named {:?}", only.unwrap_or(""));
    Ok(out)
}

fn print(o: &Outcome) {
    for (name, value) in &o.figures {
        println!("    {name:<48} {value}");
    }
    let verdict = match (&o.skipped, o.failures.is_empty()) {
        (Some(why), true) => format!("SKIP ({why})"),
        (_, true) => "ok".to_string(),
        (_, false) => "FAIL".to_string(),
    };
    println!("  {verdict}: {}", o.name);
    for f in &o.failures {
        println!("    - {f}");
    }
}
