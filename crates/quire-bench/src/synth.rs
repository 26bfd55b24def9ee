//! A deterministic synthetic vault for benchmarks: [`generate`] writes `notes`
//! realistic-looking markdown notes into folders, the same bytes for the same
//! `(notes, seed)` on every machine and every version of this crate's dependencies.
//!
//! Key decisions:
//! - **Its own PRNG** ([`Rng`], SplitMix64), not `rand`'s: `StdRng` may change between
//!   `rand` releases, and a benchmark corpus must not.
//! - **English-like text from a fixed word list with Zipf frequencies**: function
//!   words, general words, and seven themes of ~45 words each (caching, databases,
//!   Rust, the web, cooking, hiking, daily life). Each note has a theme (mostly its
//!   folder's) and draws most content words from it, so document frequencies look
//!   like a real vault's: `the` is in every note, `time` in most, `sourdough` in a
//!   few percent, and phrases recur. With a few hundred words and no themes every
//!   content word would be in most notes, and every query would rank thousands.
//! - Notes look like the example vault's: front matter (title, date, tags; ~70 %
//!   `free: true`, ~3 % `draft: true`, the rest private), headings, paragraphs with
//!   `[[Name]]` and `[[Name|label]]` wikilinks (mostly within a theme; a few hub
//!   notes are linked from many),
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
#[rustfmt::skip]
pub const FUNCTION_WORDS: &[&str] = &[
    "the", "of", "and", "to", "a", "in", "is", "it", "that", "for", "was", "on", "with", "as",
    "be", "at", "by", "this", "have", "from", "or", "but", "not", "are", "an", "they", "which",
    "one", "you", "were", "all", "we", "when", "there", "can", "if", "more", "so", "what",
    "about", "out", "up", "into", "than", "then", "them", "some", "only", "also", "its", "just",
    "over", "after", "how", "most", "much", "any", "each", "other", "these", "every", "still",
    "even", "because", "while", "where", "through", "before", "very", "again", "my", "our",
];

/// Words every theme uses, roughly most frequent first.
#[rustfmt::skip]
pub const GENERAL_WORDS: &[&str] = &[
    "time", "note", "make", "good", "new", "use", "keep", "small", "first", "work", "try",
    "better", "old", "simple", "find", "take", "start", "long", "right", "wrong", "check",
    "fast", "slow", "large", "quick", "careful", "hard", "easy", "strange", "quiet", "cheap",
    "expensive", "early", "late", "short", "obvious", "subtle", "stop", "measure", "learn",
    "break", "remember", "forget", "notice", "wonder", "prefer", "expect", "explain", "compare",
    "replace", "idea", "draft", "review", "project", "design", "sketch", "prototype", "mistake",
    "lesson", "habit", "question", "answer", "reason", "problem", "detail", "example", "number",
    "list", "step", "part", "place", "week", "month", "year", "morning", "evening", "weekend",
];

/// The themes' own words, each roughly most frequent first. A note draws most of its
/// content words from one theme, so a theme word is in a fraction of the notes, as in a
/// real vault, while general words are in most.
#[rustfmt::skip]
pub const THEMES: &[&[&str]] = &[
    // caching
    &["cache", "page", "request", "response", "header", "server", "origin", "proxy", "client",
      "latency", "eviction", "stale", "fresh", "hit", "miss", "purge", "cdn", "edge", "etag",
      "vary", "cookie", "surrogate", "revalidate", "invalidate", "admission", "frequency",
      "counter", "probation", "protected", "stampede", "coalescing", "ttl", "lru", "tinylfu",
      "memoization", "hierarchy", "warm", "cold", "bypass", "variant", "expiry", "freshness"],
    // databases
    &["query", "table", "row", "index", "database", "transaction", "commit", "rollback",
      "snapshot", "replica", "backup", "schema", "migration", "btree", "lsm", "compaction",
      "bloom", "filter", "fsync", "journal", "wal", "vacuum", "shard", "partition", "checksum",
      "postgres", "sqlite", "isolation", "mvcc", "deadlock", "cursor", "column", "planner",
      "covering", "durability", "checkpoint", "pragma", "segment", "tombstone", "sequence"],
    // rust
    &["rust", "borrow", "lifetime", "trait", "generic", "closure", "iterator", "compiler",
      "crate", "module", "macro", "panic", "result", "option", "async", "future", "runtime",
      "task", "channel", "mutex", "atomic", "pointer", "reference", "struct", "enum",
      "function", "method", "cargo", "clippy", "tokio", "serde", "unsafe", "ownership", "slice",
      "vector", "allocation", "benchmark", "profile", "release", "debug"],
    // web
    &["browser", "style", "layout", "font", "image", "link", "script", "render", "parse",
      "session", "password", "token", "dashboard", "deploy", "config", "html", "css", "markup",
      "template", "accessibility", "contrast", "viewport", "responsive", "grid", "flexbox",
      "animation", "feed", "sitemap", "domain", "certificate", "redirect", "form", "button",
      "menu", "navigation", "typography", "favicon", "analytics", "tracker", "privacy"],
    // kitchen
    &["sourdough", "flour", "water", "salt", "yeast", "starter", "dough", "oven", "bread",
      "loaf", "crust", "crumb", "pizza", "tomato", "garlic", "onion", "butter", "pasta", "rice",
      "stock", "broth", "soup", "pepper", "lemon", "herbs", "spice", "skillet", "knife",
      "kitchen", "recipe", "dinner", "breakfast", "ferment", "knead", "proof", "hydration",
      "rosemary", "olive", "basil", "parmesan", "mushroom", "risotto", "lentil", "chickpea",
      "cumin", "turmeric", "ginger", "chili", "vinegar", "honey"],
    // trails
    &["trail", "mountain", "river", "lake", "forest", "camp", "tent", "boots", "pack", "map",
      "ridge", "summit", "valley", "snow", "rain", "weather", "mile", "hike", "permit", "route",
      "blister", "ankle", "sunrise", "meadow", "glacier", "waterfall", "switchback",
      "trailhead", "headlamp", "stove", "compass", "lantern", "elevation", "pass", "creek",
      "bear", "canister", "layers", "poles", "campsite"],
    // life
    &["book", "chapter", "reading", "writing", "friend", "family", "budget", "plan", "goal",
      "season", "spring", "summer", "autumn", "winter", "city", "street", "market", "train",
      "station", "bicycle", "home", "window", "desk", "lamp", "apartment", "rent", "garden",
      "coffee", "tea", "music", "concert", "holiday", "gift", "birthday", "doctor", "sleep",
      "run", "harbor", "island", "letter"],
];

/// Folders notes are spread over (some nested), each with its theme; `None`: each
/// note there has a theme of its own.
const FOLDERS: &[(&str, Option<usize>)] = &[
    ("Caching", Some(0)),
    ("Databases", Some(1)),
    ("Rust", Some(2)),
    ("Web", Some(3)),
    ("Kitchen", Some(4)),
    ("Kitchen/Breads", Some(4)),
    ("Trails", Some(5)),
    ("Trails/Trip Reports", Some(5)),
    ("Projects", None),
    ("Reading", Some(6)),
    ("Journal/2024", None),
    ("Journal/2025", None),
    ("Journal/2026", None),
    ("Ideas", None),
    ("People", Some(6)),
    ("Private", None),
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

/// A word of running text in a note of `theme`: function words about half the time,
/// then mostly the theme's words, else general ones.
fn text_word(rng: &mut Rng, theme: usize) -> &'static str {
    if rng.chance(0.45) {
        FUNCTION_WORDS[rng.zipf(FUNCTION_WORDS.len(), 1.0)]
    } else if rng.chance(0.6) {
        theme_word(rng, theme)
    } else {
        GENERAL_WORDS[rng.zipf(GENERAL_WORDS.len(), 0.9)]
    }
}

/// One of `theme`'s words, Zipf-distributed.
fn theme_word(rng: &mut Rng, theme: usize) -> &'static str {
    let words = THEMES[theme % THEMES.len()];
    words[rng.zipf(words.len(), 0.9)]
}

/// A word as a searcher would type it: one theme's (80 %) or a general word.
pub fn content_word(rng: &mut Rng) -> &'static str {
    if rng.chance(0.8) {
        let theme = rng.below(THEMES.len());
        theme_word(rng, theme)
    } else {
        GENERAL_WORDS[rng.zipf(GENERAL_WORDS.len(), 0.9)]
    }
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
    theme: usize,
    title: Option<String>,
}

/// Writes `notes` notes under `dir` (created if missing), determined by `seed`.
pub fn generate(dir: &Path, notes: usize, seed: u64) -> std::io::Result<()> {
    let mut rng = Rng::new(seed);
    let plans = plan(&mut rng, notes);
    for (f, _) in FOLDERS {
        std::fs::create_dir_all(dir.join(f))?;
    }
    let mut by_theme = vec![Vec::new(); THEMES.len()];
    for (i, p) in plans.iter().enumerate() {
        by_theme[p.theme].push(i);
    }
    let mut text = String::with_capacity(16 * 1024);
    for (i, p) in plans.iter().enumerate() {
        text.clear();
        let mut w = Writer {
            rng: &mut rng,
            plans: &plans,
            by_theme: &by_theme,
            theme: p.theme,
            out: &mut text,
        };
        w.note(i);
        std::fs::write(dir.join(p.folder).join(format!("{}.md", p.name)), &text)?;
    }
    Ok(())
}

fn plan(rng: &mut Rng, notes: usize) -> Vec<Plan> {
    let mut names = HashSet::new();
    let mut plans = Vec::with_capacity(notes);
    for _ in 0..notes {
        let (folder, theme) = FOLDERS[rng.below(FOLDERS.len())];
        let theme = theme.unwrap_or_else(|| rng.below(THEMES.len()));
        let words = rng.range(1, 4);
        let base: Vec<String> = (0..words)
            .map(|_| capitalize(theme_word(rng, theme)))
            .collect();
        let mut name = base.join(" ");
        let mut n = 2;
        while !names.insert(name.to_lowercase()) {
            name = format!("{} {n}", base.join(" "));
            n += 1;
        }
        let title = rng.chance(0.2).then(|| {
            let general = GENERAL_WORDS[rng.zipf(GENERAL_WORDS.len(), 0.9)];
            format!("{} {}", capitalize(general), name.to_lowercase())
        });
        plans.push(Plan {
            name,
            folder,
            theme,
            title,
        });
    }
    plans
}

/// Writes one note's text.
struct Writer<'a> {
    rng: &'a mut Rng,
    plans: &'a [Plan],
    /// Indices of each theme's notes.
    by_theme: &'a [Vec<usize>],
    theme: usize,
    out: &'a mut String,
}

impl Writer<'_> {
    fn note(&mut self, i: usize) {
        let p = &self.plans[i];
        self.out.push_str("---\n");
        if let Some(t) = &p.title {
            let _ = writeln!(self.out, "title: \"{t}\"");
        }
        let _ = writeln!(
            self.out,
            "date: {}-{:02}-{:02}",
            self.rng.range(2019, 2026),
            self.rng.range(1, 12),
            self.rng.range(1, 28)
        );
        let tags: Vec<&str> = (0..self.rng.range(0, 3))
            .map(|_| TAGS[self.rng.zipf(TAGS.len(), 1.0)])
            .collect();
        let _ = writeln!(self.out, "tags: [{}]", tags.join(", "));
        if p.folder != "Private" && self.rng.chance(0.72) {
            self.out.push_str("free: true\n");
        }
        if self.rng.chance(0.03) {
            self.out.push_str("draft: true\n");
        }
        self.out.push_str("---\n\n");
        self.paragraph();
        for _ in 0..self.rng.range(1, 5) {
            self.section();
        }
    }

    fn word(&mut self) -> &'static str {
        text_word(self.rng, self.theme)
    }

    fn section(&mut self) {
        let words = self.rng.range(1, 4);
        let heading: Vec<&str> = (0..words)
            .map(|_| theme_word(self.rng, self.theme))
            .collect();
        let _ = writeln!(self.out, "## {}\n", capitalize(&heading.join(" ")));
        for _ in 0..self.rng.range(1, 3) {
            self.paragraph();
        }
        match self.rng.below(10) {
            0..=2 => self.list(),
            3 => self.code(),
            4 => {
                self.out.push_str("> ");
                self.sentence();
                self.out.push_str("\n\n");
            }
            _ => {}
        }
    }

    fn paragraph(&mut self) {
        for s in 0..self.rng.range(2, 6) {
            if s > 0 {
                self.out.push(' ');
            }
            self.sentence();
        }
        self.out.push_str("\n\n");
    }

    fn sentence(&mut self) {
        let len = self.rng.range(5, 18);
        for k in 0..len {
            if k > 0 {
                self.out.push(' ');
            }
            if k > 0 && self.rng.chance(0.03) {
                self.link();
                continue;
            }
            let w = self.word();
            match (k, self.rng.below(40)) {
                (0, _) => self.out.push_str(&capitalize(w)),
                (_, 0) => {
                    let _ = write!(self.out, "**{w}**");
                }
                (_, 1) => {
                    let _ = write!(self.out, "`{w}`");
                }
                (_, 2) => {
                    let _ = write!(self.out, "{w},");
                }
                _ => self.out.push_str(w),
            }
        }
        self.out.push('.');
    }

    fn link(&mut self) {
        // Mostly to a note of the same theme; sometimes to one of the first hundred
        // notes, Zipf-distributed: hubs, like a real vault's index notes.
        let same = &self.by_theme[self.theme];
        let t = if self.rng.chance(0.9) && !same.is_empty() {
            same[self.rng.below(same.len())]
        } else {
            self.rng.zipf(self.plans.len().min(100), 1.0)
        };
        let t = &self.plans[t];
        if self.rng.chance(0.3) {
            let label = theme_word(self.rng, self.theme);
            let _ = write!(self.out, "[[{}|{label}]]", t.name);
        } else {
            let _ = write!(self.out, "[[{}]]", t.name);
        }
    }

    fn list(&mut self) {
        let tasks = self.rng.chance(0.3);
        for _ in 0..self.rng.range(2, 6) {
            let marker = match (tasks, self.rng.chance(0.5)) {
                (true, true) => "- [x] ",
                (true, false) => "- [ ] ",
                _ => "- ",
            };
            self.out.push_str(marker);
            if self.rng.chance(0.2) {
                self.link();
            } else {
                let n = self.rng.range(2, 8);
                let words: Vec<&str> = (0..n).map(|_| self.word()).collect();
                self.out.push_str(&capitalize(&words.join(" ")));
            }
            self.out.push('\n');
        }
        self.out.push('\n');
    }

    fn code(&mut self) {
        let lang = ["rust", "sql", "sh", ""][self.rng.below(4)];
        let _ = writeln!(self.out, "```{lang}");
        for _ in 0..self.rng.range(1, 6) {
            let w = theme_word(self.rng, self.theme);
            let v = theme_word(self.rng, self.theme);
            let line = CODE_LINES[self.rng.below(CODE_LINES.len())]
                .replace("{w}", w)
                .replace("{W}", &capitalize(w))
                .replace("{v}", v)
                .replace("{n}", &self.rng.range(1, 4096).to_string())
                .replace("{{", "{")
                .replace("}}", "}");
            self.out.push_str(&line);
            self.out.push('\n');
        }
        self.out.push_str("```\n\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quire_vault::{Vault, Visibility};

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
        let themes = THEMES.iter().flat_map(|t| t.iter());
        for w in FUNCTION_WORDS.iter().chain(GENERAL_WORDS).chain(themes) {
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
