//! YAML front matter: the `---` block at the top of a note, and the keys quire reads
//! from it (`title`, `free`, `draft`, `tags`, `date`, `aliases`, and for link
//! previews `description`, `image` or `cover`, `lang`), and every property by name as
//! YAML gave it (`front/prop.rs`, for Bases).
//!
//! Key decisions:
//! - **A note whose front matter does not parse is private.** Its content is kept and
//!   the problem is reported with the note's path, but nothing that may have said
//!   `free: true` is trusted: a typo can hide a note, never publish one.
//! - Unknown keys are ignored (vaults carry keys for other tools); known keys with the
//!   wrong type are errors naming the key.
//! - `tags` may be a list or a comma/space separated string; a leading `#` is dropped.
//! - **Front matter is bounded** (`front/bounded.rs`): at most [`BYTES_MAX`] bytes, and,
//!   counted after alias expansion, `NODES_MAX` nodes, `TEXT_BYTES_MAX` bytes of
//!   text and `DEPTH_MAX` levels. Past a bound the load stops at once and the
//!   error names the bound ([`FrontError::Limit`]); like any rejected front matter,
//!   the note is then private. A hostile note costs a few milliseconds and a few MiB,
//!   never the server.

mod bounded;
mod prop;

use yaml_rust2::Yaml;

pub use bounded::{Limit, BYTES_MAX};
pub use prop::Prop;

/// What quire reads from a note's front matter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrontMatter {
    /// `title`.
    pub(crate) title: Option<String>,
    /// `free: true`: readable by everyone.
    pub(crate) free: bool,
    /// `draft: true`: only admins see it.
    pub(crate) draft: bool,
    /// `tags`, without `#`, in order, de-duplicated.
    pub tags: Vec<String>,
    /// `date` as `YYYY-MM-DD`.
    pub date: Option<String>,
    /// `aliases`: other names wikilinks may use for the note.
    pub(crate) aliases: Vec<String>,
    /// `description`: the note in a sentence, for link previews.
    pub description: Option<String>,
    /// `image` or `cover`: the attachment a link preview shows, as written (a file
    /// name, or an embed `![[name]]`).
    pub image: Option<String>,
    /// `lang`: the note's language, a BCP 47 tag (`en`, `pt-BR`).
    pub lang: Option<String>,
    /// Every property by name, in order, known keys included (Bases read them).
    pub properties: Vec<(String, Prop)>,
}

/// Why front matter was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontError {
    /// Not YAML.
    #[error("front matter is not valid YAML: {0}")]
    Yaml(String),
    /// Past a bound on its size, nodes, text or depth (hostile or runaway YAML).
    #[error("front matter exceeds {0}")]
    Limit(Limit),
    /// YAML, but not a mapping.
    #[error("front matter is not a mapping of keys to values")]
    NotMapping,
    /// A known key with a value of the wrong type.
    #[error("front matter key `{key}`: {expected}")]
    Type {
        /// The key.
        key: &'static str,
        /// What it should be.
        expected: &'static str,
    },
}

/// Splits `text` into its front matter block (without the `---` fences) and the body.
/// A byte-order mark and CRLF line ends are accepted. No opening fence, or no closing
/// one, means no front matter.
pub(crate) fn split(text: &str) -> (Option<&str>, &str) {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = t
        .strip_prefix("---\n")
        .or_else(|| t.strip_prefix("---\r\n"))
    else {
        return (None, t);
    };
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\r', '\n']);
        if bare == "---" || bare == "..." {
            return (Some(&rest[..at]), &rest[at + line.len()..]);
        }
        at += line.len();
    }
    (None, t)
}

/// The first YAML document of `yaml`, loaded within the bounds of `front/bounded.rs`
/// (front matter, and the other YAML a vault holds: `.base` files).
pub(crate) fn load_bounded(yaml: &str) -> Result<Option<Yaml>, FrontError> {
    bounded::load_first(yaml).map_err(|e| match e {
        bounded::LoadError::Yaml(e) => FrontError::Yaml(e),
        bounded::LoadError::Limit(l) => FrontError::Limit(l),
    })
}

/// Parses a front matter block, within the bounds of `front/bounded.rs`.
pub fn parse(yaml: &str) -> Result<FrontMatter, FrontError> {
    let doc = load_bounded(yaml)?;
    let mut fm = FrontMatter::default();
    let Some(doc) = doc else {
        return Ok(fm);
    };
    let map = match doc {
        Yaml::Hash(h) => h,
        Yaml::Null => return Ok(fm),
        _ => return Err(FrontError::NotMapping),
    };
    for (k, v) in map {
        let Some(key) = k.as_str() else { continue };
        fm.properties.push((key.to_owned(), prop::from_yaml(&v)));
        match key {
            "title" => fm.title = Some(scalar(v, "title")?).filter(|t| !t.is_empty()),
            "free" => fm.free = boolean(v, "free")?,
            "draft" => fm.draft = boolean(v, "draft")?,
            "date" => fm.date = Some(date(v)?),
            "tags" => fm.tags = list(v, "tags")?,
            "aliases" | "alias" => fm.aliases = aliases(v)?,
            "description" => {
                fm.description = Some(scalar(v, "description")?).filter(|d| !d.is_empty());
            }
            "image" => fm.image = Some(scalar(v, "image")?).filter(|i| !i.is_empty()),
            "cover" => fm.image = Some(scalar(v, "cover")?).filter(|i| !i.is_empty()),
            "lang" => fm.lang = Some(lang(v)?),
            _ => {}
        }
    }
    Ok(fm)
}

/// A language tag as BCP 47 writes one (RFC 5646 §2.1): subtags of 1–8 ASCII letters
/// and digits joined by `-`, the first letters only; at most 35 bytes (what any
/// real tag needs).
fn lang(v: Yaml) -> Result<String, FrontError> {
    let bad = FrontError::Type {
        key: "lang",
        expected: "a language tag such as en or pt-BR",
    };
    let Yaml::String(s) = v else {
        return Err(bad);
    };
    let t = s.trim();
    let mut subtags = t.split('-');
    let first_ok = subtags
        .next()
        .is_some_and(|f| (1..=8).contains(&f.len()) && f.bytes().all(|b| b.is_ascii_alphabetic()));
    let rest_ok =
        subtags.all(|s| (1..=8).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric()));
    if first_ok && rest_ok && t.len() <= 35 {
        Ok(t.to_owned())
    } else {
        Err(bad)
    }
}

fn scalar(v: Yaml, key: &'static str) -> Result<String, FrontError> {
    match v {
        Yaml::String(s) => Ok(s.trim().to_owned()),
        Yaml::Integer(i) => Ok(i.to_string()),
        Yaml::Real(r) => Ok(r),
        Yaml::Boolean(b) => Ok(b.to_string()),
        _ => Err(FrontError::Type {
            key,
            expected: "a string",
        }),
    }
}

fn boolean(v: Yaml, key: &'static str) -> Result<bool, FrontError> {
    match v {
        Yaml::Boolean(b) => Ok(b),
        Yaml::Null => Ok(false),
        _ => Err(FrontError::Type {
            key,
            expected: "true or false",
        }),
    }
}

fn date(v: Yaml) -> Result<String, FrontError> {
    let bad = FrontError::Type {
        key: "date",
        expected: "a date written YYYY-MM-DD",
    };
    let s = match v {
        Yaml::String(s) => s,
        _ => return Err(bad),
    };
    let d = s.trim();
    let d = d.get(..10).unwrap_or(d);
    let b = d.as_bytes();
    let ok = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && (1..=12).contains(&d[5..7].parse::<u8>().unwrap_or(0))
        && (1..=31).contains(&d[8..10].parse::<u8>().unwrap_or(0));
    if ok {
        Ok(d.to_owned())
    } else {
        Err(bad)
    }
}

/// `aliases` (or `alias`): a list, or one string of names separated by commas, as
/// Obsidian reads it (a name may hold spaces, so a string is not split on them).
fn aliases(v: Yaml) -> Result<Vec<String>, FrontError> {
    match v {
        Yaml::String(s) => list(
            Yaml::Array(s.split(',').map(|a| Yaml::String(a.to_owned())).collect()),
            "aliases",
        ),
        v => list(v, "aliases"),
    }
}

fn list(v: Yaml, key: &'static str) -> Result<Vec<String>, FrontError> {
    let items: Vec<String> = match v {
        Yaml::Array(a) => a
            .into_iter()
            .map(|i| scalar(i, key))
            .collect::<Result<_, _>>()?,
        Yaml::String(s) => s
            .split(|c: char| c == ',' || c.is_whitespace())
            .map(str::to_owned)
            .collect(),
        Yaml::Null => Vec::new(),
        _ => {
            return Err(FrontError::Type {
                key,
                expected: "a list",
            })
        }
    };
    let mut out: Vec<String> = Vec::new();
    for i in items {
        let i = i.trim().trim_start_matches('#').trim().to_owned();
        if !i.is_empty() && !out.contains(&i) {
            out.push(i);
        }
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::bounded::{DEPTH_MAX, NODES_MAX};
    use super::*;

    #[test]
    fn splits_front_matter_from_the_body() {
        assert_eq!(split("---\na: 1\n---\nbody\n"), (Some("a: 1\n"), "body\n"));
        assert_eq!(
            split("\u{feff}---\r\na: 1\r\n---\r\nbody"),
            (Some("a: 1\r\n"), "body")
        );
        assert_eq!(split("---\na: 1\n...\nbody"), (Some("a: 1\n"), "body"));
        assert_eq!(
            split("no front matter\n---\n"),
            (None, "no front matter\n---\n")
        );
        assert_eq!(split("---\nnever closed\n"), (None, "---\nnever closed\n"));
        assert_eq!(split("---\n---\nx"), (Some(""), "x"));
    }

    #[test]
    fn reads_every_known_key() {
        let fm = parse(
            "title: Stale While Revalidate\nfree: true\ndraft: false\ntags: [caching, '#http', caching]\ndate: 2025-03-04\naliases:\n  - SWR\n  - stale-while-revalidate\nother: ignored\n",
        )
        .unwrap();
        assert_eq!(fm.title.as_deref(), Some("Stale While Revalidate"));
        assert!(fm.free && !fm.draft);
        assert_eq!(fm.tags, vec!["caching", "http"]);
        assert_eq!(fm.date.as_deref(), Some("2025-03-04"));
        assert_eq!(fm.aliases, vec!["SWR", "stale-while-revalidate"]);
    }

    #[test]
    fn preview_keys_are_read_and_hostile_languages_refused() {
        let fm = parse("description: One line.\ncover: '[[a b.png]]'\nlang: pt-BR\n").unwrap();
        assert_eq!(fm.description.as_deref(), Some("One line."));
        assert_eq!(fm.image.as_deref(), Some("[[a b.png]]"));
        assert_eq!(fm.lang.as_deref(), Some("pt-BR"));
        for bad in [
            "'en\" onload=x'",
            "'<b>'",
            "''",
            "'-en'",
            "'en--x'",
            "'123'",
            "'abcdefghi'",
        ] {
            assert!(
                matches!(
                    parse(&format!("lang: {bad}\n")),
                    Err(FrontError::Type { key: "lang", .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn aliases_may_be_one_string_of_names_with_spaces() {
        assert_eq!(
            parse("aliases: Stale While Revalidate\n").unwrap().aliases,
            ["Stale While Revalidate"]
        );
        assert_eq!(
            parse("alias: SWR, s-w-r\n").unwrap().aliases,
            ["SWR", "s-w-r"]
        );
    }

    #[test]
    fn tags_may_be_a_string_and_missing_keys_default() {
        let fm = parse("tags: rust, web perf\n").unwrap();
        assert_eq!(fm.tags, vec!["rust", "web", "perf"]);
        assert!(!fm.free && !fm.draft && fm.title.is_none());
        assert_eq!(parse("").unwrap(), FrontMatter::default());
    }

    #[test]
    fn wrong_types_and_bad_yaml_are_errors_naming_the_key() {
        assert_eq!(
            parse("free: yes please\n").unwrap_err(),
            FrontError::Type {
                key: "free",
                expected: "true or false"
            }
        );
        assert!(matches!(
            parse("date: March\n").unwrap_err(),
            FrontError::Type { key: "date", .. }
        ));
        assert!(matches!(
            parse("date: 2025-13-01\n").unwrap_err(),
            FrontError::Type { key: "date", .. }
        ));
        assert!(matches!(
            parse("tags: {a: 1}\n").unwrap_err(),
            FrontError::Type { key: "tags", .. }
        ));
        assert!(matches!(
            parse("- a\n- b\n").unwrap_err(),
            FrontError::NotMapping
        ));
        assert!(matches!(
            parse("title: [unclosed\n").unwrap_err(),
            FrontError::Yaml(_)
        ));
    }

    /// Nine levels of nine aliases: 9⁹ scalars if expanded in full.
    pub(crate) fn alias_bomb() -> String {
        let mut yaml = String::from("a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
        for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            let refs = vec![format!("*{prev}"); 9].join(",");
            yaml.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        yaml.push_str("free: true\n");
        yaml
    }

    #[test]
    fn yaml_alias_bomb_is_bounded_and_private() {
        let bomb = alias_bomb();
        assert!(bomb.len() < 400, "{}", bomb.len());
        // (Expanded in full it would be 9^9 nodes: the node bound is what stops it.)
        let e = parse(&bomb).unwrap_err();
        assert_eq!(e, FrontError::Limit(Limit::Nodes));
        assert_eq!(
            e.to_string(),
            "front matter exceeds 10000 nodes after alias expansion"
        );
    }

    #[test]
    fn yaml_alias_bomb_of_long_text_is_bounded() {
        // Few nodes, but each alias copies 32 KiB.
        let yaml = format!(
            "a: &a '{}'\nb: [{}]\n",
            "x".repeat(32 * 1024),
            vec!["*a"; 64].join(",")
        );
        assert_eq!(parse(&yaml).unwrap_err(), FrontError::Limit(Limit::Text));
    }

    #[test]
    fn yaml_alias_nesting_bomb_is_bounded() {
        // Each alias is shallow where it is written, deep once expanded.
        let deep = format!("{}x{}", "[".repeat(40), "]".repeat(40));
        let yaml = format!("a: &a {deep}\nb: {}*a{}\n", "[".repeat(30), "]".repeat(30));
        assert_eq!(parse(&yaml).unwrap_err(), FrontError::Limit(Limit::Depth));
    }

    #[test]
    fn yaml_nested_anchors_copies_are_bounded() {
        // 260 nodes, but each of the 60 anchors keeps a copy of what it encloses.
        let open: String = (0..60).map(|i| format!("&a{i} [")).collect();
        let yaml = format!("k: {open}{}{}\n", vec!["1"; 200].join(","), "]".repeat(60));
        assert_eq!(parse(&yaml).unwrap_err(), FrontError::Limit(Limit::Nodes));
    }

    #[test]
    fn front_matter_past_its_size_bound_is_rejected_unparsed() {
        let yaml = format!("title: ok\nfiller: '{}'\n", "x".repeat(BYTES_MAX));
        assert_eq!(parse(&yaml).unwrap_err(), FrontError::Limit(Limit::Bytes));
        assert_eq!(
            parse(&yaml).unwrap_err().to_string(),
            "front matter exceeds 65536 bytes"
        );
    }

    #[test]
    fn deeply_nested_flow_sequences_are_bounded() {
        // Deeper than yaml_rust2's own flow limit (255, met by its scanner, which
        // reads ahead of the parser) and than the stack would take if anything
        // recursed per level; run on a test thread's small stack.
        for depth in [DEPTH_MAX + 1, 200, 255, 10_000, 30_000] {
            let yaml = format!("k: {}{}", "[".repeat(depth), "]".repeat(depth));
            let e = parse(&yaml).unwrap_err();
            let bounded = match &e {
                FrontError::Limit(l) => *l == Limit::Depth || *l == Limit::Bytes,
                FrontError::Yaml(m) => depth > 255 && m.contains("recursion limit"),
                _ => false,
            };
            assert!(bounded, "{depth}: {e}");
        }
        let ok = format!(
            "k: {}{}",
            "[".repeat(DEPTH_MAX - 1),
            "]".repeat(DEPTH_MAX - 1)
        );
        assert!(parse(&ok).is_ok(), "the root mapping and 63 lists fit");
    }

    #[test]
    fn deeply_nested_block_sequences_and_mappings_are_bounded() {
        let seqs = format!("k:\n{}x\n", "- ".repeat(20_000));
        assert_eq!(parse(&seqs).unwrap_err(), FrontError::Limit(Limit::Depth));
        let maps: String = (0..200)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        assert_eq!(parse(&maps).unwrap_err(), FrontError::Limit(Limit::Depth));
    }

    #[test]
    fn the_node_bound_is_exact() {
        // The mapping, its key and the list are three nodes.
        let list = |n: usize| format!("k: [{}]\n", vec!["1"; n].join(","));
        assert!(parse(&list(NODES_MAX - 3)).is_ok());
        assert_eq!(
            parse(&list(NODES_MAX - 2)).unwrap_err(),
            FrontError::Limit(Limit::Nodes)
        );
    }

    #[test]
    fn anchors_and_aliases_within_bounds_still_work() {
        let fm = parse("tags: &t [rust, web]\naliases: *t\ntitle: &x T\nfree: true\n").unwrap();
        assert_eq!(fm.tags, vec!["rust", "web"]);
        assert_eq!(fm.aliases, fm.tags);
        assert_eq!(fm.title.as_deref(), Some("T"));
        assert!(fm.free);
        // A self-referencing alias is not expanded.
        assert!(parse("a: &a [*a]\n").is_ok());
        assert!(matches!(
            parse("a: 1\na: 2\n").unwrap_err(),
            FrontError::Yaml(m) if m.contains("duplicated key")
        ));
        assert!(matches!(
            parse("a: *nowhere\n").unwrap_err(),
            FrontError::Yaml(_)
        ));
        assert_eq!(parse("# only a comment\n").unwrap(), FrontMatter::default());
        assert!(parse("free: !!bool true\n").unwrap().free);
    }
}
