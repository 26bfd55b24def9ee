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

mod case;
mod clients;
mod cluster;
mod framing;
mod raw_origin;
mod stalls;
mod wire;

use std::path::Path;

pub(crate) use case::{Env, Outcome, Scale};

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
    let env = Env::new(exe, dir, scale);
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
