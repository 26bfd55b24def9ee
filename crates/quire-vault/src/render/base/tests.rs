//! Bases in pages: who sees which rows, blocks and named views, and the record's
//! exactness against a model of random vaults, bases and edits.

use std::collections::HashMap;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};

use crate::render::{render, render_recorded, Record};
use crate::testing::vault;
use crate::vault::Vault;
use crate::Visibility;

const BOOKS: &str = "properties:\n  note.status:\n    displayName: Status\nfilters:\n  and:\n    - file.hasTag(\"book\")\nviews:\n  - type: table\n    name: Shelf\n    order: [file.basename, status]\n  - type: list\n    name: Done\n    filters: 'status == \"done\"'\n    order: [file.basename]\n";

fn note(free: bool, status: &str, body: &str) -> String {
    let free = if free { "free: true\n" } else { "" };
    format!("---\n{free}tags: [book]\nstatus: {status}\n---\n{body}\n")
}

#[test]
fn a_base_shows_only_the_notes_its_reader_may_read() {
    let (_d, v) = vault(&[
        ("Books.base", BOOKS),
        (
            "Home.md",
            "---\nfree: true\n---\n# Reading\n\n![[Books.base]]\n",
        ),
        ("Dune.md", &note(true, "reading", "")),
        ("Hidden Title.md", &note(false, "secret-status", "")),
    ]);
    let home = v.resolve("home").unwrap();
    let public = render(&v, home, Visibility::Public).html;
    assert!(public.contains("<a href=\"/dune\">Dune</a>"), "{public}");
    assert!(public.contains("1 of 1 notes"), "{public}");
    // `note.status` in `properties` names the `status` of `order`.
    assert!(public.contains("<th>Status</th>"), "{public}");
    for leak in ["Hidden", "secret-status", "hidden-title"] {
        assert!(!public.contains(leak), "{leak} in {public}");
    }
    let private = render(&v, home, Visibility::Private).html;
    assert!(private.contains("secret-status"), "{private}");
    assert!(private.contains("2 of 2 notes"), "{private}");
}

#[test]
fn a_named_view_and_a_base_block_are_run_and_a_bad_one_says_why() {
    let block = "```base\nviews:\n  - type: list\n    name: All\n    order: [status]\n```\n";
    let (_d, v) = vault(&[
        ("Books.base", BOOKS),
        (
            "Home.md",
            &format!("---\nfree: true\n---\n![[Books.base#Done]]\n\n{block}\n![[Books.base#Nope]]\n\n![[Gone.base]]\n"),
        ),
        ("Dune.md", &note(true, "done", "")),
        ("Emma.md", &note(true, "reading", "")),
    ]);
    let html = render(&v, v.resolve("home").unwrap(), Visibility::Public).html;
    let done = html
        .find("base-list\"><h4 class=\"base-name\">Done")
        .expect(&html);
    let all = html
        .find("base-name\">All</h4><p class=\"base-count\">3 of 3")
        .expect(&html);
    assert!(done < all, "{html}");
    assert!(!html.contains("```"), "{html}");
    assert!(
        html.contains("This base cannot be shown: the base has no view named “Nope”."),
        "{html}"
    );
    assert!(
        html.contains("wikilink broken\">Gone.base</span>"),
        "{html}"
    );
}

#[test]
fn a_base_file_is_never_an_attachment() {
    let (_d, v) = vault(&[("Books.base", BOOKS), ("cover.png", "png")]);
    assert!(v.attachment("Books.base").is_none());
    assert!(v.attachment("cover.png").is_some());
    assert!(v.base_file("books.BASE").is_some_and(|b| b.base.is_ok()));
}

#[test]
fn a_hostile_base_costs_its_budget_and_shows_a_cut() {
    // Every note matches, and each row's formula is as long as the engine allows.
    let mut files = vec![(
        "Big.base".to_owned(),
        "formulas:\n  w: '\"x\".repeat(60000)'\nviews:\n  - type: table\n    name: Big\n    order: [formula.w, formula.w, formula.w]\n".to_owned(),
    )];
    for k in 0..40 {
        files.push((format!("N{k}.md"), "---\nfree: true\n---\nx\n".to_owned()));
    }
    let embeds = "![[Big.base]]\n\n".repeat(8);
    files.push(("Home.md".into(), format!("---\nfree: true\n---\n{embeds}")));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let (_d, v) = vault(&refs);
    let html = render(&v, v.resolve("home").unwrap(), Visibility::Public).html;
    let bound = crate::render::BASE_BYTES_MAX + 64 * 1024;
    assert!(html.len() < bound, "{} bytes", html.len());
    assert!(html.contains("Not every note is shown"), "no cut shown");
    assert!(
        html.contains("past the page&#x27;s bases budget")
            || html.contains("past the page's bases budget"),
        "no page bound shown"
    );
}

/// A note of the model: visibility (0 public, 1 private, 2 draft), status (0..3),
/// whether tagged `book`, and whether it embeds the base (0 no, 1 its first view,
/// 2 the view `Done`, 3 a base block).
type Spec = Option<(u8, u8, bool, u8)>;

const NOTES: usize = 6;
const STATUS: [&str; 3] = ["todo", "doing", "done"];
/// The base file's filters, one of which an edit may choose.
const FILTERS: [&str; 4] = [
    "file.hasTag(\"book\")",
    "status != \"todo\"",
    "file.hasTag(\"book\") && rank > 1",
    "true",
];

fn spec() -> impl Strategy<Value = Spec> {
    proptest::option::weighted(0.85, (0u8..3, 0u8..3, any::<bool>(), 0u8..4))
}

fn note_text(k: usize, s: &(u8, u8, bool, u8)) -> String {
    let (vis, status, book, embeds) = *s;
    let mut t = String::from("---\n");
    match vis {
        0 => t.push_str("free: true\n"),
        2 => t.push_str("draft: true\n"),
        _ => {}
    }
    if book {
        t.push_str("tags: [book]\n");
    }
    t.push_str(&format!(
        "status: {}\nrank: {}\nmark: mark{k}x\n---\n",
        STATUS[status as usize],
        k % 3
    ));
    t.push_str(match embeds {
        1 => "![[Books.base]]\n",
        2 => "![[Books.base#Done]]\n",
        3 => "```base\nfilters: 'status == \"doing\"'\nviews:\n  - type: cards\n    name: B\n    order: [file.basename, mark]\n```\n",
        _ => "plain\n",
    });
    t
}

fn base_text(filter: usize) -> String {
    format!(
        "filters: '{}'\nviews:\n  - type: table\n    name: T\n    order: [file.basename, status, mark]\n    sort:\n      - property: rank\n        direction: DESC\n  - type: list\n    name: Done\n    filters: 'status == \"done\"'\n    order: [mark]\n",
        FILTERS[filter].replace('\'', "''")
    )
}

/// Stored pages: (vault path, audience) → HTML and record.
type Store = HashMap<(String, Visibility), (String, Record)>;

/// After a change: a page whose record holds is kept, any other rendered again;
/// every stored page must then equal a fresh render, no public page may show a
/// hidden note's mark, and a page whose note was not edited must be re-rendered
/// exactly when its HTML changed.
fn settle(v: &Vault, store: &mut Store, edited: &str) -> Result<(), TestCaseError> {
    store.retain(|(path, aud), _| {
        v.notes()
            .iter()
            .any(|n| &n.path == path && n.visibility() <= *aud)
    });
    for aud in [Visibility::Public, Visibility::Private] {
        for (i, n) in v
            .notes()
            .iter()
            .enumerate()
            .filter(|(_, n)| n.visibility() <= aud)
        {
            let key = (n.path.clone(), aud);
            let fresh = render(v, i, aud).html;
            let holds = store.get(&key).map(|(_, r)| r.holds(v));
            if let (Some(h), false) = (holds, n.path == edited) {
                let same = store[&key].0 == fresh;
                prop_assert!(
                    h == same,
                    "{} for {aud:?}: holds {h}, same HTML {same}",
                    n.path
                );
            }
            if holds != Some(true) {
                store.insert(key.clone(), (fresh.clone(), render_recorded(v, i, aud).1));
            }
            prop_assert!(store[&key].0 == fresh, "{} for {aud:?} is stale", n.path);
            if aud == Visibility::Public {
                for (k, m) in v
                    .notes()
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.visibility() > aud)
                {
                    let _ = k;
                    let mark = format!("mark{}x", &m.name[1..]);
                    prop_assert!(
                        !fresh.contains(&mark),
                        "{} shows {}'s {mark}",
                        n.name,
                        m.name
                    );
                }
            }
        }
    }
    Ok(())
}

/// Random vaults, a random base, random edits (a note's visibility, status, tag or
/// embeds, a note created or deleted, the base's filter changed): every stored page
/// equals a fresh render, and a page is re-rendered exactly when what it shows
/// changed. Seeds are fixed; `PROPTEST_CASES` scales the cases per seed.
#[test]
fn a_page_with_a_base_is_re_rendered_exactly_when_its_base_shows_something_else() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(24);
    let strategy = (
        proptest::collection::vec(spec(), NOTES),
        0..FILTERS.len(),
        proptest::collection::vec((0..NOTES + 1, spec(), 0..FILTERS.len()), 1..6),
    );
    for seed in [36, 2036, 20_261_128] {
        let config = Config {
            cases,
            rng_seed: RngSeed::Fixed(seed),
            failure_persistence: None,
            ..Config::default()
        };
        let result = TestRunner::new(config).run(&strategy, |(notes, filter, edits)| {
            let dir = tempfile::tempdir().unwrap();
            let write = |k: usize, s: &Spec| {
                let path = dir.path().join(format!("N{k}.md"));
                match s {
                    Some(s) => std::fs::write(path, note_text(k, s)).unwrap(),
                    None => {
                        let _ = std::fs::remove_file(path);
                    }
                }
            };
            for (k, s) in notes.iter().enumerate() {
                write(k, s);
            }
            std::fs::write(dir.path().join("Books.base"), base_text(filter)).unwrap();
            let mut v = Vault::load(dir.path()).unwrap();
            let mut store = Store::new();
            settle(&v, &mut store, "")?;
            for (k, s, f) in edits {
                let edited = if k == NOTES {
                    std::fs::write(dir.path().join("Books.base"), base_text(f)).unwrap();
                    String::new()
                } else {
                    write(k, &s);
                    format!("N{k}.md")
                };
                // A new stamp even when the size is the same.
                std::thread::sleep(std::time::Duration::from_millis(2));
                v = Vault::reload(dir.path(), &v).unwrap();
                settle(&v, &mut store, &edited)?;
            }
            Ok(())
        });
        if let Err(e) = result {
            panic!("seed {seed}: {e}");
        }
    }
}

#[test]
fn a_page_runs_at_most_its_bound_of_bases() {
    // Twenty distinct blocks: each a base of its own, each reading every note.
    let mut home = String::from("---\nfree: true\n---\n");
    for k in 0..20 {
        home.push_str(&format!(
            "```base\nviews:\n  - type: list\n    name: V{k}\n```\n\n"
        ));
    }
    let (_d, v) = vault(&[("Home.md", &home), ("Dune.md", &note(true, "done", ""))]);
    let html = render(&v, v.resolve("home").unwrap(), Visibility::Public).html;
    let shown = html.matches("<section class=\"base ").count();
    assert_eq!(shown, crate::render::BASES_PER_PAGE_MAX, "{html}");
    assert!(html.contains("more than 16 bases on the page"), "{html}");
}

#[test]
fn a_base_that_reads_the_clock_says_so_and_a_reload_moves_it() {
    let clock = "```base\nformulas:\n  ms: '(now() - date(\"2000-01-01\")).milliseconds'\nviews:\n  - type: list\n    name: T\n    order: [file.basename, formula.ms]\n```\n";
    let (d, v) = vault(&[
        ("Home.md", &format!("---\nfree: true\n---\n{clock}")),
        ("Shelf.md", "---\nfree: true\n---\n![[Books.base]]\n"),
        ("Books.base", BOOKS),
        ("Dune.md", &note(true, "done", "")),
    ]);
    let shelf = v.resolve("shelf").unwrap();
    let (_, shelf_rec) = render_recorded(&v, shelf, Visibility::Public);
    assert!(!v.bases_read_clock(), "Books.base reads no clock");
    let home = v.resolve("home").unwrap();
    let (_, home_rec) = render_recorded(&v, home, Visibility::Public);
    assert!(v.bases_read_clock());
    std::thread::sleep(std::time::Duration::from_millis(5));
    let v2 = Vault::reload(d.path(), &v).unwrap();
    assert!(!home_rec.holds(&v2), "a reload takes a new now()");
    assert!(
        shelf_rec.holds(&v2),
        "and moves no base that reads no clock"
    );
}

#[test]
fn a_base_block_past_its_bound_says_why_and_is_not_read() {
    let yaml = format!(
        "# {}\nviews:\n  - type: list\n    name: L\n",
        "x".repeat(crate::render::base::INLINE_BYTES_MAX)
    );
    let (_d, v) = vault(&[
        (
            "Home.md",
            &format!("---\nfree: true\n---\n```base\n{yaml}```\n"),
        ),
        ("Dune.md", &note(true, "done", "")),
    ]);
    let html = render(&v, v.resolve("home").unwrap(), Visibility::Public).html;
    assert!(
        html.contains("This base cannot be shown: bytes in a base block: more than 65536."),
        "{}",
        &html[..html.len().min(2000)]
    );
}

#[test]
fn the_memo_keeps_runs_only_within_its_bound() {
    use crate::base_files::{BaseMemo, BaseRef, Drawn, Source};
    let memo = BaseMemo::default();
    let run = |k: &str, bytes: usize| {
        let key = (
            BaseRef {
                source: Source::File(k.into()),
                view: None,
            },
            Visibility::Public,
        );
        let d = std::sync::Arc::new(Drawn {
            html: "x".repeat(bytes),
            digest: 1,
        });
        (key, d)
    };
    let (a, da) = run("a", 600);
    let (b, db) = run("b", 600);
    memo.keep(a.clone(), &da, 1000);
    memo.keep(b.clone(), &db, 1000);
    assert!(memo.get(&a).is_some(), "the first fits");
    assert!(
        memo.get(&b).is_none(),
        "the second would pass the bound: not kept"
    );
}
