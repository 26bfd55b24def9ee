//! `quire bench search`: query latency of the full-text index (the aim: p99 under
//! 5 ms on a 10,000-note vault while a full re-index runs).
//!
//! It generates a synthetic vault ([`crate::synth`]) or takes `--vault`, builds
//! the index, then runs one fixed list of queries of mixed kinds (one word, two words,
//! prefix, phrase, as-you-type, malformed) three times on one thread: with nothing
//! else running, while another thread re-indexes the whole vault in a loop as one
//! transaction (the default), and the same with batches of 500 notes per
//! transaction. It prints p50/p99/p99.9 per kind and writes `--json`.
//!
//! Every hit is checked against the vault: one a query's audience may not read
//! fails the run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use clap::Args;
use quire_vault::search::{self, IndexOptions, SearchIndex};
use quire_vault::{Vault, Visibility};
use serde::Serialize;

use crate::synth::{self, Rng};

/// Arguments of `quire bench search`.
#[derive(Debug, Clone, Args)]
pub struct BenchSearchArgs {
    /// Notes in the generated vault.
    #[arg(long, default_value_t = 10_000)]
    pub notes: usize,
    /// Seed of the generated vault and of the queries.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Queries per scenario.
    #[arg(long, default_value_t = 5_000)]
    pub queries: usize,
    /// Search this vault instead of generating one.
    #[arg(long, value_name = "DIR", conflicts_with = "keep")]
    pub vault: Option<PathBuf>,
    /// Generate the vault into DIR (new or empty) and leave it there.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Put the scratch vault and index under DIR (default: the system temp
    /// directory); they are removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Hits asked for per query: a results page.
const LIMIT: usize = 20;
/// Notes per transaction in the batched re-index scenario.
const BATCH_NOTES: usize = 500;

/// What a query exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Word,
    TwoWords,
    Prefix,
    Phrase,
    AsYouType,
    Malformed,
}

const KINDS: [Kind; 6] = [
    Kind::Word,
    Kind::TwoWords,
    Kind::Prefix,
    Kind::Phrase,
    Kind::AsYouType,
    Kind::Malformed,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Word => "word",
            Kind::TwoWords => "two words",
            Kind::Prefix => "prefix",
            Kind::Phrase => "phrase",
            Kind::AsYouType => "as you type",
            Kind::Malformed => "malformed",
        }
    }
}

struct Query {
    kind: Kind,
    text: String,
    audience: Visibility,
}

/// Latencies of one kind of query (or all) in one scenario.
#[derive(Debug, Serialize)]
struct Row {
    kind: String,
    queries: usize,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    hits_mean: f64,
}

#[derive(Debug, Serialize)]
struct Scenario {
    name: &'static str,
    reindexes_completed: usize,
    reindex_secs_mean: Option<f64>,
    rows: Vec<Row>,
    /// The slowest queries: kind, text (cut to 60 characters), milliseconds.
    slowest: Vec<(String, String, f64)>,
}

#[derive(Debug, Serialize)]
struct Report {
    notes: usize,
    public_notes: usize,
    seed: u64,
    vault: String,
    generated: bool,
    load_secs: f64,
    index_secs: f64,
    index_bytes: u64,
    queries: usize,
    limit: usize,
    cores: usize,
    /// `/proc/loadavg`'s one-minute figure before and after: other work on the machine.
    load_before: Option<f64>,
    load_after: Option<f64>,
    scenarios: Vec<Scenario>,
    /// Hits returned to an audience that may not read them (must be 0).
    leaks: usize,
}

/// Runs the benchmark as `args` say.
pub fn run(args: &BenchSearchArgs) -> anyhow::Result<ExitCode> {
    let t0 = Instant::now();
    let progress = |line: &str| eprintln!("[{:6.1}s] {line}", t0.elapsed().as_secs_f64());
    let scratch = tempfile_dir(args.dir.as_deref())?;
    let (root, generated) = match (&args.vault, &args.keep) {
        (Some(v), _) => (v.clone(), false),
        (None, keep) => {
            let root = keep.clone().unwrap_or_else(|| scratch.join("vault"));
            if root.exists() && std::fs::read_dir(&root)?.next().is_some() {
                bail!("{} is not empty; --keep wants a new folder", root.display());
            }
            let t = Instant::now();
            synth::generate(&root, args.notes, args.seed)
                .with_context(|| format!("generating a vault in {}", root.display()))?;
            progress(&format!(
                "generated {} notes in {} ({:.2}s)",
                args.notes,
                root.display(),
                t.elapsed().as_secs_f64()
            ));
            (root, true)
        }
    };
    let result = measure(args, &root, generated, &scratch, &progress);
    if let Err(e) = std::fs::remove_dir_all(&scratch) {
        eprintln!("could not remove {}: {e}", scratch.display());
    }
    let report = result?;
    print!("{}", render(&report));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report).context("encoding the report")?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if report.leaks > 0 {
        eprintln!(
            "quire bench search: FAILED: {} hits went to an audience that may not read them",
            report.leaks
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn tempfile_dir(under: Option<&Path>) -> anyhow::Result<PathBuf> {
    let base = under.map_or_else(std::env::temp_dir, Path::to_owned);
    let dir = base.join(format!("quire-bench-search-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn measure(
    args: &BenchSearchArgs,
    root: &Path,
    generated: bool,
    scratch: &Path,
    progress: &dyn Fn(&str),
) -> anyhow::Result<Report> {
    let load_before = load_average();
    let t = Instant::now();
    let vault = Vault::load(root)?;
    let load_secs = t.elapsed().as_secs_f64();
    let public_notes = vault
        .notes()
        .iter()
        .filter(|n| n.visibility() == Visibility::Public)
        .count();
    progress(&format!(
        "loaded {} notes ({public_notes} public) in {load_secs:.2}s",
        vault.notes().len()
    ));
    let db = scratch.join("search.db");
    let index = SearchIndex::open(&db)?;
    let t = Instant::now();
    index.reindex(&vault)?;
    let index_secs = t.elapsed().as_secs_f64();
    let index_bytes = ["", "-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", db.display())).ok())
        .map(|m| m.len())
        .sum();
    progress(&format!(
        "indexed in {index_secs:.2}s: {:.1} MiB",
        index_bytes as f64 / (1 << 20) as f64
    ));
    let queries = queries(&vault, args.queries, args.seed);
    let mut leaks = 0;
    let scenarios = scenarios(index, &db, &vault, &queries, &mut leaks, progress)?;
    Ok(Report {
        notes: vault.notes().len(),
        public_notes,
        seed: args.seed,
        vault: root.display().to_string(),
        generated,
        load_secs,
        index_secs,
        index_bytes,
        queries: queries.len(),
        limit: LIMIT,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_before,
        load_after: load_average(),
        scenarios,
        leaks,
    })
}

/// The three scenarios on the index at `db`, in order: idle, under a one-transaction
/// re-index, and under a re-index in batches (the index reopened with that option).
/// Each starts with warm readers: the server runs warm.
fn scenarios(
    index: SearchIndex,
    db: &Path,
    vault: &Vault,
    queries: &[Query],
    leaks: &mut usize,
    progress: &dyn Fn(&str),
) -> anyhow::Result<Vec<Scenario>> {
    let warm = &queries[..queries.len().min(500)];
    run_queries(&index, vault, warm, leaks);
    let mut scenarios = Vec::new();
    let (lat, hits) = run_queries(&index, vault, queries, leaks);
    scenarios.push(scenario("idle", 0, None, queries, &lat, &hits));
    progress("idle: done");
    scenarios.push(under_reindex(
        "re-index, one transaction",
        &index,
        vault,
        queries,
        leaks,
    ));
    progress("under a one-transaction re-index: done");
    drop(index);
    let batched = SearchIndex::open_with(
        db,
        IndexOptions {
            reindex_batch_notes: BATCH_NOTES,
            ..IndexOptions::default()
        },
    )?;
    run_queries(&batched, vault, warm, leaks);
    scenarios.push(under_reindex(
        "re-index, 500-note batches",
        &batched,
        vault,
        queries,
        leaks,
    ));
    progress("under a batched re-index: done");
    Ok(scenarios)
}

/// The one-minute load average, where the system tells it.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The queries while another thread re-indexes the whole vault, again and again.
fn under_reindex(
    name: &'static str,
    index: &SearchIndex,
    vault: &Vault,
    queries: &[Query],
    leaks: &mut usize,
) -> Scenario {
    let stop = AtomicBool::new(false);
    let (lat, hits, times) = std::thread::scope(|s| {
        let indexer = s.spawn(|| {
            let mut times = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                if let Err(e) = index.reindex(vault) {
                    eprintln!("re-index failed: {e}");
                    break;
                }
                times.push(t.elapsed().as_secs_f64());
            }
            times
        });
        // Let the re-index get going before measuring.
        std::thread::sleep(Duration::from_millis(200));
        let (lat, hits) = run_queries(index, vault, queries, leaks);
        stop.store(true, Ordering::Relaxed);
        (lat, hits, indexer.join().unwrap_or_default())
    });
    let mean = (!times.is_empty()).then(|| times.iter().sum::<f64>() / times.len() as f64);
    scenario(name, times.len(), mean, queries, &lat, &hits)
}

/// Runs `queries` in order; their latencies and hit counts. Counts leaks.
fn run_queries(
    index: &SearchIndex,
    vault: &Vault,
    queries: &[Query],
    leaks: &mut usize,
) -> (Vec<Duration>, Vec<usize>) {
    let mut lat = Vec::with_capacity(queries.len());
    let mut hits = Vec::with_capacity(queries.len());
    for q in queries {
        let t = Instant::now();
        let r = if q.kind == Kind::AsYouType {
            index.search_as_you_type(&q.text, q.audience, LIMIT)
        } else {
            index.search(&q.text, q.audience, LIMIT)
        };
        lat.push(t.elapsed());
        hits.push(r.hits.len());
        for h in &r.hits {
            let ok = vault
                .by_url(&h.url)
                .is_some_and(|i| vault.notes()[i].visibility() <= q.audience);
            *leaks += usize::from(!ok);
        }
    }
    (lat, hits)
}

fn scenario(
    name: &'static str,
    reindexes_completed: usize,
    reindex_secs_mean: Option<f64>,
    queries: &[Query],
    lat: &[Duration],
    hits: &[usize],
) -> Scenario {
    let mut rows: Vec<Row> = KINDS
        .iter()
        .map(|&k| {
            let pick = |i: &usize| queries[*i].kind == k;
            let idx: Vec<usize> = (0..queries.len()).filter(pick).collect();
            row(k.name(), &idx, lat, hits)
        })
        .collect();
    let mut all: Vec<usize> = (0..queries.len()).collect();
    rows.push(row("all", &all, lat, hits));
    all.sort_by_key(|&i| std::cmp::Reverse(lat[i]));
    let slowest = all
        .iter()
        .take(10)
        .map(|&i| {
            let q = &queries[i];
            let text: String = q.text.chars().take(60).collect();
            (q.kind.name().to_owned(), text, lat[i].as_secs_f64() * 1e3)
        })
        .collect();
    Scenario {
        name,
        reindexes_completed,
        reindex_secs_mean,
        rows,
        slowest,
    }
}

fn row(kind: &str, idx: &[usize], lat: &[Duration], hits: &[usize]) -> Row {
    let mut us: Vec<f64> = idx.iter().map(|&i| lat[i].as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    let pct = |q: f64| {
        if us.is_empty() {
            return 0.0;
        }
        let rank = ((q * us.len() as f64).ceil() as usize).clamp(1, us.len());
        us[rank - 1]
    };
    Row {
        kind: kind.to_owned(),
        queries: us.len(),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        p999_us: pct(0.999),
        max_us: us.last().copied().unwrap_or(0.0),
        hits_mean: idx.iter().map(|&i| hits[i]).sum::<usize>() as f64 / idx.len().max(1) as f64,
    }
}

/// `n` queries, a fixed mix of kinds, drawn from the synthetic word list and from the
/// vault's own text (phrases); 70 % anonymous, 30 % signed-in.
fn queries(vault: &Vault, n: usize, seed: u64) -> Vec<Query> {
    let mut rng = Rng::new(seed ^ 0x00c0_ffee);
    let bodies: Vec<Vec<String>> = vault
        .notes()
        .iter()
        .take(2000)
        .map(|note| {
            search::plain_body(note)
                .split(|c: char| !c.is_alphabetic())
                .filter(|w| !w.is_empty())
                .take(200)
                .map(str::to_lowercase)
                .collect()
        })
        .filter(|w: &Vec<String>| w.len() >= 2)
        .collect();
    (0..n)
        .map(|_| {
            let kind = match rng.below(100) {
                0..=29 => Kind::Word,
                30..=49 => Kind::TwoWords,
                50..=61 => Kind::Prefix,
                62..=76 => Kind::Phrase,
                77..=89 => Kind::AsYouType,
                _ => Kind::Malformed,
            };
            let text = query_text(kind, &mut rng, &bodies);
            let audience = if rng.chance(0.7) {
                Visibility::Public
            } else {
                Visibility::Private
            };
            Query {
                kind,
                text,
                audience,
            }
        })
        .collect()
}

fn query_text(kind: Kind, rng: &mut Rng, bodies: &[Vec<String>]) -> String {
    let cut = |w: &str, rng: &mut Rng| -> String {
        let n = w.chars().count();
        w.chars().take(rng.range(2.min(n), n)).collect()
    };
    match kind {
        Kind::Word => synth::content_word(rng).to_owned(),
        Kind::TwoWords => format!("{} {}", synth::content_word(rng), synth::content_word(rng)),
        Kind::Prefix => format!("{}*", cut(synth::content_word(rng), rng)),
        Kind::Phrase if !bodies.is_empty() => {
            // Two neighbouring words of a note, not both function words: people quote
            // "write ahead", not "of the".
            let words = &bodies[rng.below(bodies.len())];
            let function = |w: &str| synth::FUNCTION_WORDS.contains(&w);
            let mut at = rng.below(words.len() - 1);
            for _ in 0..words.len() {
                if !(function(&words[at]) && function(&words[at + 1])) {
                    break;
                }
                at = (at + 1) % (words.len() - 1);
            }
            format!("\"{} {}\"", words[at], words[at + 1])
        }
        Kind::Phrase => format!("\"{}\"", synth::content_word(rng)),
        Kind::AsYouType => format!(
            "{} {}",
            synth::content_word(rng),
            cut(synth::content_word(rng), rng)
        ),
        Kind::Malformed => malformed(rng),
    }
}

fn malformed(rng: &mut Rng) -> String {
    const FIXED: &[&str] = &[
        "\"unbalanced quote",
        "cache AND OR NOT",
        "NEAR(cache stale, 3)",
        "title:sourdough",
        "-",
        "*",
        "^cache",
        "( ) : ^ * - +",
        "\u{0}\u{1}\u{1b}[31mcache",
        "\"\"\"\"",
        "c*",
        "{cache} [page]",
    ];
    match rng.below(4) {
        0 => FIXED[rng.below(FIXED.len())].to_owned(),
        1 => "cache stale page ".repeat(600), // ~10 KB
        _ => {
            const SYNTAX: &[&str] = &[
                "\"", "*", "(", ")", ":", "^", "-", "+", " AND ", " OR ", " NOT ", "NEAR", "'",
            ];
            let mut s = String::new();
            for _ in 0..rng.range(2, 8) {
                if rng.chance(0.5) {
                    s.push_str(synth::content_word(rng));
                } else {
                    s.push_str(SYNTAX[rng.below(SYNTAX.len())]);
                }
            }
            s
        }
    }
}

fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nquire bench search: {} notes ({} public), {} queries per scenario, limit {}, {} cores",
        r.notes, r.public_notes, r.queries, r.limit, r.cores
    );
    let _ = writeln!(
        out,
        "vault load {:.2}s; full index {:.2}s, {:.1} MiB",
        r.load_secs,
        r.index_secs,
        r.index_bytes as f64 / (1 << 20) as f64
    );
    if let (Some(a), Some(b)) = (r.load_before, r.load_after) {
        let _ = writeln!(
            out,
            "load average {a:.2} before, {b:.2} after (other work on the machine skews latency)"
        );
    }
    for s in &r.scenarios {
        let _ = write!(out, "\n{}", s.name);
        if let Some(m) = s.reindex_secs_mean {
            let _ = write!(
                out,
                " ({} re-indexes completed meanwhile, {m:.2}s each)",
                s.reindexes_completed
            );
        }
        let _ = writeln!(
            out,
            "\n  {:<12} {:>7} {:>9} {:>9} {:>9} {:>9} {:>6}",
            "kind", "queries", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "hits"
        );
        for row in &s.rows {
            let _ = writeln!(
                out,
                "  {:<12} {:>7} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>6.1}",
                row.kind,
                row.queries,
                row.p50_us / 1e3,
                row.p99_us / 1e3,
                row.p999_us / 1e3,
                row.max_us / 1e3,
                row.hits_mean
            );
        }
    }
    out
}
