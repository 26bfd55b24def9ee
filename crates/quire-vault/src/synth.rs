//! A deterministic synthetic vault for benchmarks: [`generate`] writes `notes`
//! realistic-looking markdown notes into folders, the same bytes for the same
//! `(notes, seed)` on every machine and every version of this crate's dependencies.
//!
//! Key decisions:
//! - **Its own PRNG** ([`Rng`], SplitMix64), not `rand`'s: `StdRng` may change between
//!   `rand` releases, and a benchmark corpus must not.
//! - **English-like text from a fixed word list with Zipf frequencies**: function
//!   words first, then a few hundred content words from the vault's themes (caching,
//!   databases, Rust, cooking, hiking, the web), so full-text queries behave as on a
//!   real vault: common words match most notes, rare ones a few, phrases occur.
//! - Notes look like the example vault's: front matter (title, date, tags; ~70 %
//!   `free: true`, ~3 % `draft: true`, the rest private), headings, paragraphs with
//!   `[[Name]]` and `[[Name|label]]` wikilinks (some notes are hubs, linked often),
//!   lists, task lists, quotes and fenced code.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;

/// SplitMix64: small, fast, and its output is fixed forever.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0);
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * n as f64) as usize % n.max(1)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// Zipf-ish over `0..n`: rank `r` drawn with weight `1 / (r + 1)^s`, by inverse
    /// transform of the continuous approximation (no tables needed).
    pub fn zipf(&mut self, n: usize, s: f64) -> usize {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let n1 = n as f64 + 1.0;
        let x = if (s - 1.0).abs() < 1e-9 {
            n1.powf(u)
        } else {
            let a = 1.0 - s;
            (1.0 + u * (n1.powf(a) - 1.0)).powf(1.0 / a)
        };
        (x as usize).saturating_sub(1).min(n - 1)
    }
}

/// Function words, most frequent first: about half of running English text.
pub const FUNCTION_WORDS: &[&str] = &[
    "the", "of", "and", "to", "a", "in", "is", "it", "that", "for", "was", "on", "with", "as",
    "be", "at", "by", "this", "have", "from", "or", "but", "not", "are", "an", "they", "which",
    "one", "you", "were", "all", "we", "when", "there", "can", "if", "more", "so", "what", "about",
    "out", "up", "into", "than", "then", "them", "some", "only", "also", "its", "just", "over",
    "after", "how", "most", "much", "any", "each", "other", "these", "every", "still", "even",
    "because", "while", "where", "through", "before", "very", "again", "my", "our",
];

/// Content words from the vault's themes, roughly most frequent first.
pub const CONTENT_WORDS: &[&str] = &[
    "cache",
    "page",
    "time",
    "note",
    "request",
    "server",
    "data",
    "file",
    "test",
    "write",
    "read",
    "index",
    "query",
    "memory",
    "disk",
    "key",
    "value",
    "small",
    "fast",
    "make",
    "keep",
    "use",
    "run",
    "check",
    "build",
    "simple",
    "good",
    "better",
    "new",
    "old",
    "slow",
    "response",
    "header",
    "table",
    "row",
    "database",
    "log",
    "lock",
    "thread",
    "queue",
    "latency",
    "throughput",
    "eviction",
    "stale",
    "fresh",
    "origin",
    "proxy",
    "client",
    "network",
    "socket",
    "buffer",
    "stream",
    "byte",
    "block",
    "segment",
    "checksum",
    "version",
    "schema",
    "migration",
    "transaction",
    "commit",
    "rollback",
    "snapshot",
    "replica",
    "backup",
    "cluster",
    "node",
    "shard",
    "partition",
    "hash",
    "tree",
    "graph",
    "vector",
    "search",
    "ranking",
    "token",
    "phrase",
    "prefix",
    "sourdough",
    "flour",
    "water",
    "salt",
    "yeast",
    "starter",
    "dough",
    "oven",
    "bread",
    "loaf",
    "crust",
    "crumb",
    "pizza",
    "tomato",
    "garlic",
    "onion",
    "butter",
    "pasta",
    "rice",
    "stock",
    "broth",
    "soup",
    "pepper",
    "lemon",
    "herbs",
    "spice",
    "skillet",
    "knife",
    "kitchen",
    "recipe",
    "dinner",
    "breakfast",
    "coffee",
    "tea",
    "trail",
    "mountain",
    "river",
    "lake",
    "forest",
    "camp",
    "tent",
    "boots",
    "pack",
    "map",
    "ridge",
    "summit",
    "valley",
    "snow",
    "rain",
    "weather",
    "mile",
    "hike",
    "permit",
    "route",
    "rust",
    "borrow",
    "lifetime",
    "trait",
    "generic",
    "closure",
    "iterator",
    "compiler",
    "crate",
    "module",
    "macro",
    "error",
    "panic",
    "result",
    "option",
    "async",
    "future",
    "runtime",
    "task",
    "channel",
    "mutex",
    "atomic",
    "pointer",
    "reference",
    "struct",
    "enum",
    "function",
    "method",
    "benchmark",
    "profile",
    "release",
    "debug",
    "deploy",
    "config",
    "editor",
    "terminal",
    "shell",
    "script",
    "browser",
    "style",
    "layout",
    "font",
    "image",
    "link",
    "garden",
    "idea",
    "draft",
    "review",
    "budget",
    "plan",
    "goal",
    "week",
    "month",
    "year",
    "morning",
    "evening",
    "weekend",
    "friend",
    "family",
    "book",
    "chapter",
    "reading",
    "writing",
    "talk",
    "slide",
    "meeting",
    "project",
    "design",
    "sketch",
    "prototype",
    "feature",
    "bug",
    "fix",
    "patch",
    "issue",
    "team",
    "user",
    "reader",
    "author",
    "home",
    "window",
    "desk",
    "lamp",
    "bicycle",
    "train",
    "station",
    "city",
    "street",
    "market",
    "season",
    "spring",
    "summer",
    "autumn",
    "winter",
    "large",
    "quick",
    "careful",
    "warm",
    "cold",
    "hard",
    "easy",
    "strange",
    "quiet",
    "bright",
    "dark",
    "heavy",
    "light",
    "cheap",
    "expensive",
    "early",
    "late",
    "long",
    "short",
    "wrong",
    "right",
    "obvious",
    "subtle",
    "take",
    "find",
    "try",
    "start",
    "stop",
    "measure",
    "cook",
    "bake",
    "walk",
    "climb",
    "learn",
    "break",
    "remember",
    "forget",
    "notice",
    "wonder",
    "prefer",
    "expect",
    "explain",
    "compare",
    "replace",
    "invalidate",
    "revalidate",
    "purge",
    "compress",
    "serve",
    "render",
    "parse",
    "validate",
    "retry",
    "timeout",
    "backoff",
    "limit",
    "threshold",
    "percentile",
    "histogram",
    "sample",
    "trace",
    "metric",
    "dashboard",
    "alert",
    "incident",
    "outage",
    "postmortem",
    "capacity",
    "storage",
    "volume",
    "region",
    "edge",
    "cdn",
    "purging",
    "surrogate",
    "etag",
    "vary",
    "cookie",
    "session",
    "password",
    "fsync",
    "journal",
    "wal",
    "vacuum",
    "btree",
    "lsm",
    "compaction",
    "bloom",
    "filter",
    "counter",
    "frequency",
    "admission",
    "probation",
    "protected",
    "ferment",
    "knead",
    "proof",
    "hydration",
    "rosemary",
    "olive",
    "basil",
    "parmesan",
    "mushroom",
    "risotto",
    "lentil",
    "chickpea",
    "cumin",
    "turmeric",
    "ginger",
    "chili",
    "vinegar",
    "honey",
    "blister",
    "ankle",
    "sunrise",
    "meadow",
    "glacier",
    "waterfall",
    "switchback",
    "trailhead",
    "headlamp",
    "stove",
    "compass",
    "lantern",
    "harbor",
    "island",
];

/// Folders notes are spread over (some nested).
const FOLDERS: &[&str] = &[
    "Caching",
    "Databases",
    "Rust",
    "Web",
    "Kitchen",
    "Kitchen/Breads",
    "Trails",
    "Trails/Trip Reports",
    "Projects",
    "Reading",
    "Journal/2024",
    "Journal/2025",
    "Journal/2026",
    "Ideas",
    "People",
    "Private",
];

/// Tags notes carry.
const TAGS: &[&str] = &[
    "caching",
    "databases",
    "sqlite",
    "rust",
    "web",
    "http",
    "performance",
    "cooking",
    "baking",
    "hiking",
    "gear",
    "reading",
    "journal",
    "ideas",
    "projects",
    "tools",
    "linux",
    "search",
    "writing",
    "til",
];

const CODE_LINES: &[&str] = &[
    "let {w} = {W}::new({n});",
    "fn {w}_{v}(&self) -> Result<u64, Error> {{ todo!() }}",
    "SELECT {w} FROM {v} WHERE id = {n};",
    "CREATE INDEX {w}_{v} ON {w}({v});",
    "curl -sI https://example.com/{w} | grep -i {v}",
    "cargo run --release -- {w} --{v} {n}",
    "if {w}.len() > {n} {{ {v}.clear(); }}",
    "const {W}_MAX: usize = {n};",
];

/// A word: function and content words together, Zipf-distributed.
pub fn word(rng: &mut Rng) -> &'static str {
    let n = FUNCTION_WORDS.len() + CONTENT_WORDS.len();
    let r = rng.zipf(n, 1.0);
    if r < FUNCTION_WORDS.len() {
        FUNCTION_WORDS[r]
    } else {
        CONTENT_WORDS[r - FUNCTION_WORDS.len()]
    }
}

/// A content word, Zipf-distributed (flatter than [`word`]'s tail).
pub fn content_word(rng: &mut Rng) -> &'static str {
    CONTENT_WORDS[rng.zipf(CONTENT_WORDS.len(), 0.8)]
}

fn capitalize(w: &str) -> String {
    let mut c = w.chars();
    c.next().map_or_else(String::new, |f| {
        f.to_uppercase().chain(c).collect::<String>()
    })
}

/// The plan of one note, made before any body so links can name any note.
struct Plan {
    name: String,
    folder: &'static str,
    title: Option<String>,
}

/// Writes `notes` notes under `dir` (created if missing), determined by `seed`.
pub fn generate(dir: &Path, notes: usize, seed: u64) -> std::io::Result<()> {
    let mut rng = Rng::new(seed);
    let plans = plan(&mut rng, notes);
    for f in FOLDERS {
        std::fs::create_dir_all(dir.join(f))?;
    }
    let mut text = String::with_capacity(16 * 1024);
    for (i, p) in plans.iter().enumerate() {
        text.clear();
        note(&mut rng, &plans, i, &mut text);
        std::fs::write(dir.join(p.folder).join(format!("{}.md", p.name)), &text)?;
    }
    Ok(())
}

fn plan(rng: &mut Rng, notes: usize) -> Vec<Plan> {
    let mut names = HashSet::new();
    let mut plans = Vec::with_capacity(notes);
    for _ in 0..notes {
        let words = rng.range(1, 4);
        let base: Vec<String> = (0..words).map(|_| capitalize(content_word(rng))).collect();
        let mut name = base.join(" ");
        let mut n = 2;
        while !names.insert(name.to_lowercase()) {
            name = format!("{} {n}", base.join(" "));
            n += 1;
        }
        let title = rng
            .chance(0.2)
            .then(|| format!("{} {}", capitalize(word(rng)), name.to_lowercase()));
        plans.push(Plan {
            name,
            folder: FOLDERS[rng.below(FOLDERS.len())],
            title,
        });
    }
    plans
}

fn note(rng: &mut Rng, plans: &[Plan], i: usize, out: &mut String) {
    let p = &plans[i];
    out.push_str("---\n");
    if let Some(t) = &p.title {
        let _ = writeln!(out, "title: \"{t}\"");
    }
    let _ = writeln!(
        out,
        "date: {}-{:02}-{:02}",
        rng.range(2019, 2026),
        rng.range(1, 12),
        rng.range(1, 28)
    );
    let tags: Vec<&str> = (0..rng.range(0, 3))
        .map(|_| TAGS[rng.zipf(TAGS.len(), 1.0)])
        .collect();
    let _ = writeln!(out, "tags: [{}]", tags.join(", "));
    let private_folder = p.folder == "Private";
    if !private_folder && rng.chance(0.72) {
        out.push_str("free: true\n");
    }
    if rng.chance(0.03) {
        out.push_str("draft: true\n");
    }
    out.push_str("---\n\n");
    paragraph(rng, plans, out);
    for _ in 0..rng.range(1, 5) {
        section(rng, plans, out);
    }
}

fn section(rng: &mut Rng, plans: &[Plan], out: &mut String) {
    let words = rng.range(1, 4);
    let heading: Vec<&str> = (0..words).map(|_| content_word(rng)).collect();
    let _ = writeln!(out, "## {}\n", capitalize(&heading.join(" ")));
    for _ in 0..rng.range(1, 3) {
        paragraph(rng, plans, out);
    }
    match rng.below(10) {
        0..=2 => list(rng, plans, out),
        3 => code(rng, out),
        4 => {
            out.push_str("> ");
            sentence(rng, plans, out);
            out.push_str("\n\n");
        }
        _ => {}
    }
}

fn paragraph(rng: &mut Rng, plans: &[Plan], out: &mut String) {
    for s in 0..rng.range(2, 6) {
        if s > 0 {
            out.push(' ');
        }
        sentence(rng, plans, out);
    }
    out.push_str("\n\n");
}

fn sentence(rng: &mut Rng, plans: &[Plan], out: &mut String) {
    let len = rng.range(5, 18);
    for k in 0..len {
        if k > 0 {
            out.push(' ');
        }
        if k > 0 && rng.chance(0.03) {
            link(rng, plans, out);
            continue;
        }
        let w = word(rng);
        match (k, rng.below(40)) {
            (0, _) => out.push_str(&capitalize(w)),
            (_, 0) => {
                let _ = write!(out, "**{w}**");
            }
            (_, 1) => {
                let _ = write!(out, "`{w}`");
            }
            (_, 2) => {
                let _ = write!(out, "{w},");
            }
            _ => out.push_str(w),
        }
    }
    out.push('.');
}

fn link(rng: &mut Rng, plans: &[Plan], out: &mut String) {
    // Low indices are linked far more often: hubs, like a real vault's index notes.
    let t = &plans[rng.zipf(plans.len(), 0.9)];
    if rng.chance(0.3) {
        let _ = write!(out, "[[{}|{}]]", t.name, content_word(rng));
    } else {
        let _ = write!(out, "[[{}]]", t.name);
    }
}

fn list(rng: &mut Rng, plans: &[Plan], out: &mut String) {
    let tasks = rng.chance(0.3);
    for _ in 0..rng.range(2, 6) {
        out.push_str(match (tasks, rng.chance(0.5)) {
            (true, true) => "- [x] ",
            (true, false) => "- [ ] ",
            _ => "- ",
        });
        if rng.chance(0.2) {
            link(rng, plans, out);
        } else {
            let n = rng.range(2, 8);
            let words: Vec<&str> = (0..n).map(|_| word(rng)).collect();
            out.push_str(&capitalize(&words.join(" ")));
        }
        out.push('\n');
    }
    out.push('\n');
}

fn code(rng: &mut Rng, out: &mut String) {
    let lang = ["rust", "sql", "sh", ""][rng.below(4)];
    let _ = writeln!(out, "```{lang}");
    for _ in 0..rng.range(1, 6) {
        let w = content_word(rng);
        let line = CODE_LINES[rng.below(CODE_LINES.len())]
            .replace("{w}", w)
            .replace("{W}", &capitalize(w))
            .replace("{v}", content_word(rng))
            .replace("{n}", &rng.range(1, 4096).to_string())
            .replace("{{", "{")
            .replace("}}", "}");
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str("```\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::Visibility;
    use crate::vault::Vault;

    #[test]
    fn the_same_seed_writes_the_same_vault() {
        let (a, b, c) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        generate(a.path(), 60, 7).unwrap();
        generate(b.path(), 60, 7).unwrap();
        generate(c.path(), 60, 8).unwrap();
        let (va, vb, vc) = (
            Vault::load(a.path()).unwrap(),
            Vault::load(b.path()).unwrap(),
            Vault::load(c.path()).unwrap(),
        );
        let versions = |v: &Vault| -> Vec<(String, u64)> {
            v.notes()
                .iter()
                .map(|n| (n.path.clone(), n.version))
                .collect()
        };
        assert_eq!(versions(&va), versions(&vb));
        assert_ne!(versions(&va), versions(&vc));
    }

    #[test]
    fn notes_look_like_a_vault() {
        let d = tempfile::tempdir().unwrap();
        generate(d.path(), 400, 1).unwrap();
        let v = Vault::load(d.path()).unwrap();
        assert_eq!(v.notes().len(), 400);
        assert!(v.warnings().is_empty(), "{:?}", &v.warnings()[..1]);
        let count = |vis| v.notes().iter().filter(|n| n.visibility() == vis).count();
        let public = count(Visibility::Public);
        assert!((200..330).contains(&public), "{public} public");
        assert!(count(Visibility::Draft) > 0 && count(Visibility::Private) > 50);
        let links: usize = v.notes().iter().map(|n| n.links.len()).sum();
        let resolved = (0..v.notes().len())
            .flat_map(|i| v.targets(i))
            .filter(|t| t.is_some())
            .count();
        assert!(links > 400 && resolved == links, "{resolved}/{links}");
        let bodies: String = v.notes().iter().map(|n| n.body.as_str()).collect();
        for want in ["## ", "```", "- [x] ", "|", "> "] {
            assert!(bodies.contains(want), "no {want:?}");
        }
    }

    #[test]
    fn word_lists_have_no_duplicates_and_zipf_stays_in_range() {
        let mut seen = HashSet::new();
        for w in FUNCTION_WORDS.iter().chain(CONTENT_WORDS) {
            assert!(seen.insert(*w), "{w} twice");
        }
        let mut rng = Rng::new(3);
        let mut hist = [0usize; 10];
        for _ in 0..10_000 {
            hist[rng.zipf(10, 1.0)] += 1;
        }
        assert!(
            hist[0] > hist[4] && hist[4] > hist[9] && hist[9] > 0,
            "{hist:?}"
        );
    }
}
