//! YAML front matter: the `---` block at the top of a note, and the keys quire reads
//! from it (`title`, `free`, `draft`, `tags`, `date`, `aliases`).
//!
//! Key decisions:
//! - **A note whose front matter does not parse is private.** Its content is kept and
//!   the problem is reported with the note's path, but nothing that may have said
//!   `free: true` is trusted: a typo can hide a note, never publish one.
//! - Unknown keys are ignored (vaults carry keys for other tools); known keys with the
//!   wrong type are errors naming the key.
//! - `tags` may be a list or a comma/space separated string; a leading `#` is dropped.

use yaml_rust2::{Yaml, YamlLoader};

/// What quire reads from a note's front matter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrontMatter {
    /// `title`.
    pub title: Option<String>,
    /// `free: true`: readable by everyone.
    pub free: bool,
    /// `draft: true`: only admins see it.
    pub draft: bool,
    /// `tags`, without `#`, in order, de-duplicated.
    pub tags: Vec<String>,
    /// `date` as `YYYY-MM-DD`.
    pub date: Option<String>,
    /// `aliases`: other names wikilinks may use for the note.
    pub aliases: Vec<String>,
}

/// Why front matter was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontError {
    /// Not YAML.
    #[error("front matter is not valid YAML: {0}")]
    Yaml(String),
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
pub fn split(text: &str) -> (Option<&str>, &str) {
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

/// Parses a front matter block.
pub fn parse(yaml: &str) -> Result<FrontMatter, FrontError> {
    let docs = YamlLoader::load_from_str(yaml).map_err(|e| FrontError::Yaml(e.to_string()))?;
    let mut fm = FrontMatter::default();
    let Some(doc) = docs.into_iter().next() else {
        return Ok(fm);
    };
    let map = match doc {
        Yaml::Hash(h) => h,
        Yaml::Null => return Ok(fm),
        _ => return Err(FrontError::NotMapping),
    };
    for (k, v) in map {
        let Some(key) = k.as_str() else { continue };
        match key {
            "title" => fm.title = Some(scalar(v, "title")?).filter(|t| !t.is_empty()),
            "free" => fm.free = boolean(v, "free")?,
            "draft" => fm.draft = boolean(v, "draft")?,
            "date" => fm.date = Some(date(v)?),
            "tags" => fm.tags = list(v, "tags")?,
            "aliases" => fm.aliases = list(v, "aliases")?,
            _ => {}
        }
    }
    Ok(fm)
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
mod tests {
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
}
