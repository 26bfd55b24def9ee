//! What a reader types, turned into an FTS5 query that cannot fail to parse.
//!
//! Key decision: **nothing the reader typed reaches FTS5 as syntax.** The input is cut
//! into words (runs of letters and digits); every word is written as a quoted FTS5
//! string and the strings are joined by spaces (implicit AND). The only syntax kept is
//! what we re-create ourselves:
//! - text between a balanced pair of `"` is a phrase (an unbalanced `"` is ignored);
//! - words joined by `-`, `'`, `.`, `/`, `@` or `_` with no space (`write-ahead`,
//!   `don't`, `node.js`) are a phrase, as the tokenizer would split them anyway;
//! - a `*` right after a word or a phrase makes it a prefix query, and so does the end
//!   of the input in "as you type" mode; a prefix needs at least
//!   [`PREFIX_CHARS_MIN`] characters (one-letter prefixes would expand to most of
//!   the vocabulary), shorter ones are searched as whole words;
//! - a bare, upper-case `AND`, `OR`, `NOT` or `NEAR` is FTS syntax and is dropped;
//!   everything else that is syntax (`( ) : ^ + - *`, control characters) separates
//!   words.
//!
//! The input is capped at [`INPUT_CHARS_MAX`] characters and [`WORDS_MAX`] words,
//! with a notice saying what was left out.

/// Longest input searched, in characters; the rest is ignored.
const INPUT_CHARS_MAX: usize = 256;
/// Most words searched (words inside phrases count); the rest are ignored.
pub(crate) const WORDS_MAX: usize = 16;
/// Shortest word a prefix query is run for.
const PREFIX_CHARS_MIN: usize = 2;

/// A sanitised query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sanitized {
    /// The FTS5 query: quoted strings joined by spaces. Empty: nothing to search.
    pub(crate) fts: String,
    /// The same query with its phrases cut into words (the same as `fts` when it has
    /// no phrase): what a phrase query matching very many notes is ranked by, since
    /// bm25 of a phrase checks the phrase in every note holding its words.
    pub(crate) words: String,
    /// What was changed that the reader should know about.
    pub(crate) notice: Option<String>,
}

/// One item of the query: a word or a phrase, maybe a prefix.
#[derive(Debug)]
struct Item {
    words: Vec<String>,
    prefix: bool,
}

/// Characters that join two words into one phrase when written between them.
fn is_joiner(c: char) -> bool {
    matches!(c, '-' | '\'' | '’' | '.' | '/' | '@' | '_')
}

fn is_operator(word: &str) -> bool {
    matches!(word, "AND" | "OR" | "NOT" | "NEAR")
}

/// Sanitises `input`. With `last_prefix`, the last word is a prefix unless the input
/// ends in white space (the reader is still typing it).
pub(crate) fn sanitize(input: &str, last_prefix: bool) -> Sanitized {
    let mut notices = Vec::new();
    let chars: Vec<char> = input.chars().take(INPUT_CHARS_MAX + 1).collect();
    let chars = if chars.len() > INPUT_CHARS_MAX {
        notices.push(format!(
            "query too long: only its first {INPUT_CHARS_MAX} characters were searched"
        ));
        // A word cut in two is left out, not searched as a fragment.
        let mut end = INPUT_CHARS_MAX;
        if chars[end].is_alphanumeric() {
            while end > 0 && chars[end - 1].is_alphanumeric() {
                end -= 1;
            }
        }
        &chars[..end]
    } else {
        &chars[..]
    };
    let mut items = parse(chars);
    if last_prefix && chars.last().is_some_and(|c| !c.is_whitespace()) {
        if let Some(last) = items.last_mut() {
            last.prefix = true;
        }
    }
    dedup(&mut items);
    let mut words = 0;
    let mut out = String::new();
    let mut split = String::new();
    for (n, item) in items.iter().enumerate() {
        if words + item.words.len() > WORDS_MAX {
            notices.push(format!(
                "only the first {WORDS_MAX} words were searched ({} left out)",
                items[n..].iter().map(|i| i.words.len()).sum::<usize>()
            ));
            break;
        }
        words += item.words.len();
        if !out.is_empty() {
            out.push(' ');
        }
        write_item(&mut out, item);
        for (k, w) in item.words.iter().enumerate() {
            if !split.is_empty() {
                split.push(' ');
            }
            let word = Item {
                words: vec![w.clone()],
                prefix: item.prefix && k + 1 == item.words.len(),
            };
            write_item(&mut split, &word);
        }
    }
    if out.is_empty() {
        notices.push("nothing searchable in the query".to_owned());
    }
    Sanitized {
        fts: out,
        words: split,
        notice: (!notices.is_empty()).then(|| notices.join("; ")),
    }
}

/// The same word twice adds nothing to an AND but work: keeps the first.
fn dedup(items: &mut Vec<Item>) {
    let mut seen = std::collections::HashSet::new();
    items.retain(|i| seen.insert((i.words.join(" ").to_lowercase(), i.prefix)));
}

/// The one spelling of every query that searches the same as `input` (not as you
/// type): its words lower-cased (the index folds case), a phrase in quotes, a
/// prefix with its `*`, repeats dropped, one space between. `None` when sanitising
/// `input` has something to tell the reader (too long, too many words, nothing to
/// search): such a query is answered as typed. A canonical query is its own
/// canonical form, and searches exactly what `input` does.
pub fn canonical(input: &str) -> Option<String> {
    if sanitize(input, false).notice.is_some() {
        return None;
    }
    let chars: Vec<char> = input.chars().collect();
    let mut items = parse(&chars);
    dedup(&mut items);
    let mut out = String::new();
    for item in &items {
        if !out.is_empty() {
            out.push(' ');
        }
        let text = item.words.join(" ").to_lowercase();
        if item.words.len() > 1 {
            out.push('"');
            out.push_str(&text);
            out.push('"');
        } else {
            out.push_str(&text);
        }
        let last_len = item.words.last().map_or(0, |w| w.chars().count());
        if item.prefix && last_len >= PREFIX_CHARS_MIN {
            out.push('*');
        }
    }
    Some(out)
}

fn write_item(out: &mut String, item: &Item) {
    out.push('"');
    for (i, w) in item.words.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        // Words hold letters and digits only; doubling quotes keeps that a non-issue.
        out.push_str(&w.replace('"', "\"\""));
    }
    out.push('"');
    let last_len = item.words.last().map_or(0, |w| w.chars().count());
    if item.prefix && last_len >= PREFIX_CHARS_MIN {
        out.push('*');
    }
}

/// Cuts `chars` into items: phrases between balanced quotes, and runs of words
/// joined by joiners outside them.
fn parse(chars: &[char]) -> Vec<Item> {
    let quotes: Vec<usize> = (0..chars.len()).filter(|&i| chars[i] == '"').collect();
    // An odd quote out (the last one) is not syntax: it separates words.
    let paired = &quotes[..quotes.len() & !1];
    let mut items = Vec::new();
    let mut at = 0;
    for pair in paired.chunks_exact(2) {
        let (open, close) = (pair[0], pair[1]);
        loose(&chars[at..open], &mut items);
        let words = words_of(&chars[open + 1..close]);
        let prefix = chars.get(close + 1) == Some(&'*');
        if !words.is_empty() {
            items.push(Item { words, prefix });
        }
        at = close + 1;
    }
    loose(&chars[at..], &mut items);
    items
}

fn words_of(chars: &[char]) -> Vec<String> {
    chars
        .split(|c| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.iter().collect())
        .collect()
}

/// Items from text outside quotes: words, joined words as phrases, operators dropped.
fn loose(chars: &[char], items: &mut Vec<Item>) {
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_alphanumeric() {
            i += 1;
            continue;
        }
        let mut words = Vec::new();
        loop {
            let start = i;
            while i < chars.len() && chars[i].is_alphanumeric() {
                i += 1;
            }
            words.push(chars[start..i].iter().collect::<String>());
            let joined =
                i + 1 < chars.len() && is_joiner(chars[i]) && chars[i + 1].is_alphanumeric();
            if !joined {
                break;
            }
            i += 1;
        }
        let prefix = chars.get(i) == Some(&'*');
        if words.len() == 1 && is_operator(&words[0]) {
            continue;
        }
        items.push(Item { words, prefix });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_canonical_query_is_its_own_and_searches_the_same() {
        let inputs = [
            "Write-Ahead  LOG",
            "  cache   stale ",
            "\"Page Cache\" eviction*",
            "foo foo FOO",
            "a AND b OR NOT c",
            "don't stop",
            "x* ab*",
            "\"single\"",
            "node.js / rust",
            "übergrößen Straße",
        ];
        for q in inputs {
            let c = canonical(q).unwrap_or_else(|| panic!("{q:?} has a canonical form"));
            assert_eq!(canonical(&c).as_deref(), Some(c.as_str()), "{q:?} → {c:?}");
            assert_eq!(
                sanitize(q, false).fts.to_lowercase(),
                sanitize(&c, false).fts.to_lowercase(),
                "{q:?} → {c:?} searches the same"
            );
        }
        assert_eq!(
            canonical("Write-Ahead  LOG").unwrap(),
            "\"write ahead\" log"
        );
        assert_eq!(canonical("  Cache   STALE ").unwrap(), "cache stale");
        // Told to the reader: answered as typed.
        assert_eq!(canonical(""), None);
        assert_eq!(canonical("( ) *"), None);
        let many: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
        assert_eq!(canonical(&many.join(" ")), None);
    }

    use super::*;

    fn fts(q: &str) -> String {
        sanitize(q, false).fts
    }

    #[test]
    fn words_are_quoted_and_anded() {
        assert_eq!(fts("cache stampede"), r#""cache" "stampede""#);
        assert_eq!(fts("  Crème   brûlée "), r#""Crème" "brûlée""#);
        assert_eq!(fts("sqlite3 fts5"), r#""sqlite3" "fts5""#);
    }

    #[test]
    fn phrases_prefixes_and_joined_words() {
        let s = sanitize(r#""write ahead" log "stale whi"*"#, false);
        assert_eq!(s.fts, r#""write ahead" "log" "stale whi"*"#);
        assert_eq!(s.words, r#""write" "ahead" "log" "stale" "whi"*"#);
        assert_eq!(sanitize("a b*", false).words, sanitize("a b*", false).fts);
        assert_eq!(fts(r#""write ahead" log"#), r#""write ahead" "log""#);
        assert_eq!(fts("write-ahead"), r#""write ahead""#);
        assert_eq!(fts("don't"), r#""don t""#);
        assert_eq!(fts("cach*"), r#""cach"*"#);
        assert_eq!(fts(r#""stale whi"*"#), r#""stale whi"*"#);
        assert_eq!(fts("c*"), r#""c""#, "one-letter prefixes are words");
        assert_eq!(sanitize("sourdough sta", true).fts, r#""sourdough" "sta"*"#);
        assert_eq!(sanitize("sourdough sta ", true).fts, r#""sourdough" "sta""#);
    }

    #[test]
    fn syntax_is_dropped() {
        assert_eq!(fts(r#"unbalanced "quote"#), r#""unbalanced" "quote""#);
        assert_eq!(fts("a AND b OR NOT c"), r#""a" "b" "c""#);
        assert_eq!(fts("and or"), r#""and" "or""#, "lower case is words");
        assert_eq!(fts("NEAR(a b, 3)"), r#""a" "b" "3""#);
        assert_eq!(
            fts("title:pizza -dough ^x (y)"),
            r#""title" "pizza" "dough" "x" "y""#
        );
        assert_eq!(fts("a\u{0}b\u{7}c"), r#""a" "b" "c""#);
    }

    #[test]
    fn nothing_searchable_is_a_notice() {
        for q in ["", "   ", "-", "*", "\"\"", "AND OR NOT", "( ) : ^ * -"] {
            let s = sanitize(q, true);
            assert_eq!(s.fts, "", "{q:?}");
            assert_eq!(
                s.notice.as_deref(),
                Some("nothing searchable in the query"),
                "{q:?}"
            );
        }
    }

    #[test]
    fn long_queries_are_capped_with_a_notice() {
        let s = sanitize(&"word ".repeat(2000), false);
        assert_eq!(s.fts, "\"word\"", "repeated words once, no cut word");
        assert!(s.notice.unwrap().contains("too long"));
        let many: String = (0..300).map(|i| format!("w{i} ")).collect();
        let s = sanitize(&many, false);
        assert_eq!(s.fts.matches('"').count(), 2 * WORDS_MAX);
        let n = s.notice.unwrap();
        assert!(
            n.contains("too long") && n.contains("first 16 words"),
            "{n}"
        );
        let s = sanitize("a b c d e f g h i j k l m n o p q", false);
        assert_eq!(s.fts.matches('"').count(), 2 * WORDS_MAX);
        assert!(s.notice.unwrap().contains("1 left out"));
    }
}
