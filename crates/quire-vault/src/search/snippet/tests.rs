//! The Rust tokenizer, stemmer and marks held to SQLite's own: the example vault's
//! text through FTS5's `porter unicode61 remove_diacritics 2` and `highlight()`.

use rusqlite::Connection;

use super::*;
use crate::search::query::sanitize;
use crate::search::text::plain_body;
use crate::vault::Vault;

const TOKENIZE: &str = "porter unicode61 remove_diacritics 2";

fn example_bodies() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault");
    let vault = Vault::load(&root).unwrap();
    assert!(vault.notes().len() > 100, "the example vault is there");
    let mut bodies: Vec<String> = vault.notes().iter().map(plain_body).collect();
    bodies.push(
        "Crème brûlée, Ærøskøbing, naïve façade, ÀÉÎÕÜ ŞŢĂ, Straße, İstanbul, ǅemal; \
         agreed feed hopping filing happy sky conflated troubling sized relational \
         generalization oscillators ies sses caresses ponies ties cats y yy yyy \
         running runs ran 3rd 10x x2 a1b2 über-cool e-mail don't µm ΣΊΣΥΦΟΣ ϐϑϕϖϰϱϵ"
            .to_owned(),
    );
    bodies
}

/// SQLite's terms for `text`, in order.
fn sqlite_terms(c: &Connection, text: &str) -> Vec<String> {
    c.execute("DELETE FROM t", []).unwrap();
    c.execute("INSERT INTO t (rowid, x) VALUES (1, ?1)", [text])
        .unwrap();
    let mut stmt = c
        .prepare("SELECT term FROM v WHERE doc = 1 ORDER BY offset")
        .unwrap();
    let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

fn fts(tokenize: &str) -> Connection {
    let c = Connection::open_in_memory().unwrap();
    c.execute_batch(&format!(
        "CREATE VIRTUAL TABLE t USING fts5(x, tokenize = '{tokenize}');
         CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance');"
    ))
    .unwrap();
    c
}

#[test]
fn tokens_and_stems_are_sqlites() {
    let c = fts(TOKENIZE);
    let mut words = 0;
    for body in example_bodies() {
        let want = sqlite_terms(&c, &body);
        let got: Vec<String> = Tokens::new(&body)
            .map(|t| String::from_utf8(stem(t.folded.as_bytes())).unwrap())
            .collect();
        assert_eq!(got.len(), want.len(), "token count of {body:.80}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "in {body:.80}");
        }
        words += got.len();
    }
    assert!(words > 20_000, "{words} words compared");
}

#[test]
fn latin_folding_is_sqlites() {
    let c = fts("unicode61 remove_diacritics 2");
    for cp in 0xC0u32..=0x24F {
        let ch = char::from_u32(cp).unwrap();
        let text = format!("a{ch}a");
        let want = sqlite_terms(&c, &text);
        let got: Vec<String> = Tokens::new(&text).map(|t| t.folded).collect();
        assert_eq!(got, want, "U+{cp:04X} {ch}");
    }
}

/// `text` with `ranges` between the sentinels, as `highlight()` writes it.
fn render(text: &str, ranges: &[(usize, usize)]) -> String {
    let mut out = String::new();
    let mut at = 0;
    for &(a, b) in ranges {
        out.push_str(&text[at..a]);
        out.push(MARK_OPEN);
        out.push_str(&text[a..b]);
        out.push(MARK_CLOSE);
        at = b;
    }
    out.push_str(&text[at..]);
    out
}

#[test]
fn marks_are_highlights() {
    let bodies = example_bodies();
    let c = Connection::open_in_memory().unwrap();
    c.execute_batch(&format!(
        "CREATE VIRTUAL TABLE t USING fts5(x, tokenize = '{TOKENIZE}');"
    ))
    .unwrap();
    for (i, b) in bodies.iter().enumerate() {
        c.execute(
            "INSERT INTO t (rowid, x) VALUES (?1, ?2)",
            rusqlite::params![i as i64, b],
        )
        .unwrap();
    }
    // Queries from the text itself: words, pairs, phrases, prefixes.
    let words: Vec<String> = bodies
        .iter()
        .step_by(7)
        .flat_map(|b| {
            b.split_whitespace()
                .take(40)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let mut queries: Vec<(String, bool)> = Vec::new();
    for (k, w) in words.iter().enumerate().step_by(3) {
        let next = words.get(k + 1).map_or("", String::as_str);
        queries.push((w.clone(), false));
        queries.push((format!("{w} {next}"), false));
        queries.push((format!("\"{w} {next}\""), false));
        queries.push((w.chars().take(3).collect(), true));
        queries.push((
            format!("cache {}", w.chars().take(4).collect::<String>()),
            true,
        ));
    }
    let mut stmt = c
        .prepare("SELECT rowid, highlight(t, 0, char(1), char(2)) FROM t WHERE t MATCH ?1")
        .unwrap();
    let (mut checked, mut marked) = (0, 0);
    for (q, typing) in &queries {
        let s = sanitize(q, *typing);
        if s.fts.is_empty() {
            continue;
        }
        let m = Matcher::new(&s.fts);
        let rows = stmt
            .query_map([&s.fts], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .unwrap();
        for row in rows {
            let (id, want) = row.unwrap();
            let body = &bodies[id as usize];
            let ranges = m.marked(body);
            assert_eq!(
                render(body, &ranges),
                want,
                "query {:?} in note {id}",
                s.fts
            );
            checked += 1;
            marked += ranges.len();
        }
    }
    assert!(
        checked > 1000 && marked > checked,
        "{checked} notes, {marked} marks"
    );
}

#[test]
fn snippets_centre_the_best_window() {
    let text = "one two three four five six seven eight nine ten eleven twelve thirteen \
                fourteen fifteen sixteen seventeen eighteen nineteen twenty cache stale \
                twentyone twentytwo twentythree twentyfour twentyfive twentysix \
                twentyseven twentyeight twentynine thirty thirtyone thirtytwo";
    let m = Matcher::new(&sanitize("cache stale", false).fts);
    let s = m.snippet(text);
    assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
    assert!(s.contains("\u{1}cache\u{2} \u{1}stale\u{2}"), "{s}");
    assert_eq!(s.split_whitespace().count(), SNIPPET_TOKENS, "{s}");
    // The window holding both items beats an earlier one holding one.
    let text2 = format!("cache {} cache stale end", "filler ".repeat(30));
    let s2 = m.snippet(&text2);
    assert!(s2.contains("\u{1}cache\u{2} \u{1}stale\u{2}"), "{s2}");
    // No match in the body (a title hit): the beginning.
    let s3 = Matcher::new(&sanitize("absent", false).fts).snippet(text);
    assert!(s3.starts_with("one two") && s3.ends_with('…'), "{s3}");
    // Short text: all of it, no ellipsis.
    assert_eq!(
        m.snippet("a stale cache"),
        "a \u{1}stale\u{2} \u{1}cache\u{2}"
    );
    assert_eq!(m.snippet(""), "");
    assert_eq!(m.snippet(" ,; "), "");
}

#[test]
fn stems_of_the_porter_paper() {
    for (w, s) in [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("ties", "ti"),
        ("cats", "cat"),
        ("feed", "feed"),
        ("agreed", "agre"),
        ("plastered", "plaster"),
        ("motoring", "motor"),
        ("sing", "sing"),
        ("conflated", "conflat"),
        ("troubled", "troubl"),
        ("sized", "size"),
        ("hopping", "hop"),
        ("falling", "fall"),
        ("filing", "file"),
        ("happy", "happi"),
        ("relational", "relat"),
        ("generalization", "gener"),
        ("oscillators", "oscil"),
    ] {
        assert_eq!(String::from_utf8(stem(w.as_bytes())).unwrap(), s, "{w}");
    }
}

#[test]
fn many_matches_keep_the_best_window() {
    // 5,000 windows with one item each, then the one with both: it wins, and the
    // earliest of equal windows is kept.
    let m = Matcher::new(&sanitize("cache stale", false).fts);
    let body = format!("{}cache stale end", "cache filler ".repeat(5_000));
    let s = m.snippet(&body);
    assert!(s.contains("\u{1}cache\u{2} \u{1}stale\u{2} end"), "{s}");
    let s = m.snippet(&"cache filler ".repeat(5_000));
    assert!(s.starts_with("\u{1}cache\u{2} filler"), "{s}");
}
