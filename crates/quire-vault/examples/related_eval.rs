//! Judges the lexical embedder on the example vault's labelled related pairs and
//! times related-list builds, on the example vault and on a generated one.
//!
//! ```text
//! cargo run --release -p quire-vault --example related_eval [-- --notes 10000,20000 --misses]
//! ```
//!
//! Results and method: docs/related-notes.md. The sentence-embedding model is judged
//! by the same code in tools/embed-eval.

use std::path::Path;
use std::time::Instant;

use quire_vault::related::eval::{self, Pair};
use quire_vault::related::{Embedder, Lexical, Options, Related};
use quire_vault::{Vault, Visibility};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let sizes: Vec<usize> = arg("--notes")
        .unwrap_or_else(|| "10000".into())
        .split(',')
        .filter_map(|n| n.parse().ok())
        .collect();
    let show_misses = args.iter().any(|a| a == "--misses");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let vault = Vault::load(&root.join("../../examples/vault")).expect("examples/vault loads");
    let pairs_text = std::fs::read_to_string(root.join("tests/data/related_pairs.toml"))
        .expect("the pairs file reads");
    let pairs = eval::parse_pairs(&pairs_text).expect("the pairs file parses");
    println!(
        "example vault: {} notes, {} labelled pairs ({} directions)",
        vault.notes().len(),
        pairs.len(),
        2 * pairs.len()
    );
    println!(
        "{:<34} {:>9} {:>6} {:>11} {:>9} {:>9}",
        "embedder", "recall@5", "MRR", "hard r@5", "embed ms", "build ms"
    );
    let mut variants: Vec<(String, Lexical)> = Vec::new();
    for (fit, aud) in [("public", Visibility::Public), ("all", Visibility::Draft)] {
        for dim in [256, 512, 1024, 2048, 4096, 1 << 16] {
            let l = Lexical::for_vault_with_dim(&vault, aud, dim);
            variants.push((format!("{} (idf: {fit})", l.name()), l));
        }
    }
    for (label, l) in &variants {
        let s = judge(&vault, l, &pairs);
        println!(
            "{label:<34} {:>9.3} {:>6.3} {:>11.3} {:>9.2} {:>9.2}",
            s.0.recall, s.0.mrr, s.0.recall_hard, s.1, s.2
        );
    }
    if show_misses {
        let l = Lexical::for_vault(&vault, Visibility::Public);
        let (s, ..) = judge(&vault, &l, &pairs);
        println!("\nmisses of {} (idf: public):", l.name());
        for (a, b, rank) in &s.misses {
            println!("  {rank:>4}  {a}  →  {b}");
        }
    }
    lookups(&vault);
    for n in sizes.into_iter().filter(|&n| n > 0) {
        synthetic(n);
    }
}

/// What a page render pays: one lookup into the precomputed lists.
fn lookups(vault: &Vault) {
    let l = Lexical::for_vault(vault, Visibility::Public);
    let r = Related::build(vault, &l);
    let n = vault.notes().len();
    let rounds = 20_000;
    let t = Instant::now();
    let mut listed = 0usize;
    for k in 0..rounds {
        for i in 0..n {
            let a = [Visibility::Public, Visibility::Private, Visibility::Draft][k % 3];
            listed += std::hint::black_box(r.related(i, a)).len();
        }
    }
    let per = t.elapsed().as_secs_f64() * 1e9 / (rounds * n) as f64;
    println!(
        "\nread path: Related::related, {per:.1} ns a lookup ({} lookups, {listed} notes listed)",
        rounds * n
    );
}

/// Score, embed time (ms), build time (ms, embedding included).
fn judge(vault: &Vault, e: &dyn Embedder, pairs: &[Pair]) -> (eval::Score, f64, f64) {
    let t = Instant::now();
    let vectors = eval::vectors(vault, e);
    let embed_ms = t.elapsed().as_secs_f64() * 1e3;
    let score = eval::score(vault, &vectors, pairs).expect("every pair names a note");
    let t = Instant::now();
    let r = Related::build(vault, e);
    let build_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(r.len(), vault.notes().len());
    (score, embed_ms, build_ms)
}

fn synthetic(notes: usize) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let t = Instant::now();
    quire_bench::synth::generate(dir.path(), notes, 1).expect("the synthetic vault writes");
    let vault = Vault::load(dir.path()).expect("the synthetic vault loads");
    println!(
        "\ngenerated vault: {} notes (synth::generate seed 1, written and loaded in {:.0} ms)",
        vault.notes().len(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let count = |v: Visibility| vault.notes().iter().filter(|n| n.visibility() == v).count();
    println!(
        "  public {}, private {}, draft {}",
        count(Visibility::Public),
        count(Visibility::Private),
        count(Visibility::Draft)
    );
    let t = Instant::now();
    let l = Lexical::for_vault(&vault, Visibility::Public);
    println!("  fit IDF: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    let t = Instant::now();
    let vectors = eval::vectors(&vault, &l);
    let embed = t.elapsed().as_secs_f64();
    println!(
        "  embed: {:.0} ms ({:.3} ms a note)",
        embed * 1e3,
        embed * 1e3 / vectors.len() as f64
    );
    drop(vectors);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut built = Vec::new();
    for (label, exact_max) in [
        (
            "default (HNSW past 5,000 a partition)",
            quire_vault::related::EXACT_MAX,
        ),
        ("exact everywhere", usize::MAX),
    ] {
        let opts = Options { exact_max, threads };
        let t = Instant::now();
        let r = Related::build_with(&vault, &l, opts);
        println!(
            "  build, {label}: {:.0} ms on {threads} threads (embedding included); {r:?}",
            t.elapsed().as_secs_f64() * 1e3
        );
        built.push(r);
    }
    let (ann, exact) = (&built[0], &built[1]);
    let (mut found, mut total) = (0usize, 0usize);
    for i in 0..vault.notes().len() {
        let want = exact.related(i, Visibility::Draft);
        let got = ann.related(i, Visibility::Draft);
        total += want.len();
        found += want.iter().filter(|w| got.contains(w)).count();
    }
    println!(
        "  HNSW recall@5 against exact (Draft lists): {:.4}",
        found as f64 / total.max(1) as f64
    );
    // One edit, the way the site sees it: reload, update, purge.
    let mut r = built.swap_remove(0);
    let victim = vault.notes()[vault.notes().len() / 2].path.clone();
    let file = dir.path().join(&victim);
    let mut text = std::fs::read_to_string(&file).expect("the note reads");
    text.push_str("\nAn added line about sourdough and caching.\n");
    std::fs::write(&file, text).expect("the note writes");
    let vault2 = Vault::load(dir.path()).expect("the vault reloads");
    let i = vault2
        .notes()
        .iter()
        .position(|n| n.path == victim)
        .expect("the note is still there");
    let t = Instant::now();
    let purge = r.update(&vault2, &l, &[i], &[]);
    println!(
        "  update after editing one note: {:.1} ms, {} pages to purge",
        t.elapsed().as_secs_f64() * 1e3,
        purge.len()
    );
}
