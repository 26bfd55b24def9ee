//! The search index through its public API, on real SQLite files: the example vault,
//! small vaults written to temporary folders, and a synthetic one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use quire_bench::synth;
use quire_vault::search::{IndexOptions, Results, SearchIndex, LIMIT_MAX};
use quire_vault::{Vault, Visibility};

fn write_vault(dir: &Path, files: &[(&str, &str)]) -> Vault {
    for (p, text) in files {
        let path = dir.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    Vault::load(dir).unwrap()
}

/// A vault in `<tmp>/vault`, indexed into `<tmp>/index/search.db`.
fn indexed(files: &[(&str, &str)]) -> (tempfile::TempDir, Vault, SearchIndex) {
    let tmp = tempfile::tempdir().unwrap();
    let vault = write_vault(&tmp.path().join("vault"), files);
    let index = SearchIndex::open(&db(&tmp)).unwrap();
    index.reindex(&vault).unwrap();
    (tmp, vault, index)
}

fn db(tmp: &tempfile::TempDir) -> PathBuf {
    tmp.path().join("index").join("search.db")
}

fn paths(r: &Results) -> Vec<&str> {
    r.hits.iter().map(|h| h.path.as_str()).collect()
}

fn example_vault() -> Vault {
    Vault::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault")).unwrap()
}

#[test]
fn the_example_vault_hides_private_and_draft_notes_from_anonymous_readers() {
    let tmp = tempfile::tempdir().unwrap();
    let vault = example_vault();
    let index = SearchIndex::open(&db(&tmp)).unwrap();
    index.reindex(&vault).unwrap();
    let published = (0..vault.notes().len())
        .filter(|&i| vault.by_url(&vault.notes()[i].url) == Some(i))
        .count();
    assert_eq!(index.note_count().unwrap(), published);

    // Every hit for every audience is a note that audience may read.
    for q in [
        "cache",
        "budget",
        "sourdough",
        "trail",
        "rust",
        "plan",
        "the",
    ] {
        for audience in [Visibility::Public, Visibility::Private, Visibility::Draft] {
            for h in index.search(q, audience, LIMIT_MAX).hits {
                let i = vault.by_url(&h.url).expect("a published page");
                assert!(vault.notes()[i].visibility() <= audience, "{q}: {}", h.path);
            }
        }
    }
    let budget = "Private/Budget 2026.md";
    assert!(!paths(&index.search("budget savings", Visibility::Public, 20)).contains(&budget));
    assert!(paths(&index.search("budget savings", Visibility::Private, 20)).contains(&budget));
    let tiny = "Caching/TinyLFU.md";
    assert!(!paths(&index.search("tinylfu", Visibility::Public, 20)).contains(&tiny));
    assert!(!paths(&index.search("tinylfu", Visibility::Private, 20)).contains(&tiny));
    assert_eq!(
        paths(&index.search("tinylfu", Visibility::Draft, 20)).first(),
        Some(&tiny),
        "the draft's title matches"
    );
    let fts = index.search("fts5", Visibility::Public, 5);
    assert_eq!(paths(&fts)[0], "Databases/SQLite FTS5.md");
    assert!(
        fts.hits[0].snippet.contains("<mark>"),
        "{}",
        fts.hits[0].snippet
    );
}

#[test]
fn a_title_match_ranks_above_body_matches() {
    let (_t, _v, index) = indexed(&[
        (
            "Body.md",
            "---\nfree: true\n---\nI bake sourdough. More sourdough, sourdough every week, sourdough.",
        ),
        ("Sourdough.md", "---\nfree: true\n---\nA starter and flour; once sourdough."),
        ("Other.md", "---\nfree: true\n---\nNothing about bread."),
    ]);
    let r = index.search("sourdough", Visibility::Public, 10);
    assert_eq!(paths(&r), ["Sourdough.md", "Body.md"]);
    assert!(r.hits[0].score > r.hits[1].score);
    assert_eq!(r.query, "\"sourdough\"");
    assert_eq!(r.notice, None);
    assert_eq!(r.hits[0].url, "/sourdough");
    assert_eq!(r.hits[0].title, "Sourdough");
}

#[test]
fn tags_and_stemming_match() {
    let (_t, _v, index) = indexed(&[
        ("A.md", "---\nfree: true\ntags: [fermentation]\n---\nJars."),
        (
            "B.md",
            "---\nfree: true\n---\nThe cache was caching cached pages.",
        ),
    ]);
    assert_eq!(
        paths(&index.search("fermentation", Visibility::Public, 10)),
        ["A.md"]
    );
    assert_eq!(
        paths(&index.search("caches", Visibility::Public, 10)),
        ["B.md"]
    );
}

#[test]
fn prefix_queries_match_word_beginnings() {
    let (_t, _v, index) = indexed(&[
        ("A.md", "---\nfree: true\n---\nRevalidation of stale pages."),
        ("B.md", "---\nfree: true\n---\nA review of the week."),
    ]);
    assert_eq!(
        paths(&index.search("revali*", Visibility::Public, 10)),
        ["A.md"]
    );
    assert!(index
        .search("revali", Visibility::Public, 10)
        .hits
        .is_empty());
    let typed = index.search_as_you_type("stale revali", Visibility::Public, 10);
    assert_eq!(paths(&typed), ["A.md"]);
    assert_eq!(typed.query, "\"stale\" \"revali\"*");
    let re = index.search("re*", Visibility::Public, 10);
    let mut both = paths(&re);
    both.sort();
    assert_eq!(both, ["A.md", "B.md"]);
}

#[test]
fn phrases_need_the_words_together_in_order() {
    let (_t, _v, index) = indexed(&[
        (
            "A.md",
            "---\nfree: true\n---\nThe write ahead log is fsynced.",
        ),
        (
            "B.md",
            "---\nfree: true\n---\nAhead of time we write the log.",
        ),
    ]);
    assert_eq!(
        paths(&index.search("\"write ahead\"", Visibility::Public, 10)),
        ["A.md"]
    );
    assert_eq!(
        paths(&index.search("write-ahead", Visibility::Public, 10)),
        ["A.md"]
    );
    assert_eq!(
        index
            .search("write ahead", Visibility::Public, 10)
            .hits
            .len(),
        2
    );
}

#[test]
fn malformed_queries_are_sanitised_or_empty_never_errors() {
    let (_t, _v, index) = indexed(&[(
        "A.md",
        "---\nfree: true\n---\nSourdough starter notes: flour and water, near the oven.",
    )]);
    let long = "sourdough ".repeat(1100);
    let ops = "AND OR NOT NEAR * ^ : ( ) - + \" ' { } [ ] ".repeat(300);
    // (query, does it still find the note?)
    let cases: Vec<(&str, bool)> = vec![
        ("\"sourdough", true),
        ("sourdough\"", true),
        ("\"\"\"sourdough\"", true),
        ("sourdough AND", true),
        ("OR sourdough", true),
        ("NOT sourdough", true),
        ("sourdough NEAR(starter oven, 2)", false),
        ("sourdough NEAR(starter oven)", true),
        ("NEAR(", false),
        ("(sourdough", true),
        ("sourdough)", true),
        ("title:sourdough", false),
        ("body : sourdough", false),
        ("^sourdough", true),
        ("sourdough*", true),
        ("*", false),
        ("-", false),
        ("- sourdough", true),
        ("sourdough -oven", true),
        ("+", false),
        ("\u{0}\u{1}\u{2}\u{1b}[31m", false),
        ("sour\u{0}dough", false),
        ("sourdough\u{7}", true),
        ("'", false),
        ("sourdough'", true),
        ("{sourdough}", true),
        ("🍞 sourdough", true),
        ("\u{202e}sourdough", true),
        ("ﬂour", false),
        ("", false),
        ("   ", false),
        (&long, true),
        (&ops, false),
    ];
    for (q, finds) in cases {
        for audience in [Visibility::Public, Visibility::Draft] {
            let r = index.search(q, audience, 10);
            let short: String = q.chars().take(40).collect();
            assert_eq!(r.hits.len(), usize::from(finds), "{short:?}: {r:?}");
            if r.query.is_empty() {
                assert_eq!(
                    r.notice.as_deref(),
                    Some("nothing searchable in the query"),
                    "{short:?}"
                );
            } else if let Some(n) = &r.notice {
                assert!(!n.contains("failed"), "{short:?}: {n}");
            }
            let typed = index.search_as_you_type(q, audience, 10);
            assert!(
                typed
                    .notice
                    .as_deref()
                    .is_none_or(|n| !n.contains("failed")),
                "{short:?}: {typed:?}"
            );
        }
    }
    let r = index.search(&long, Visibility::Public, 10);
    assert!(r.notice.unwrap().contains("too long"));
    assert!(index
        .search("sourdough", Visibility::Public, 0)
        .hits
        .is_empty());
}

#[test]
fn snippets_are_escaped_with_only_marks_live() {
    let (_t, _v, index) = indexed(&[
        (
            "Xss.md",
            "---\nfree: true\n---\nBefore <script>alert(\"sourdough\")</script> & <b onmouseover='x'>sourdough</b> after.\n",
        ),
        ("Img.md", "---\nfree: true\n---\n<img src=x onerror=alert(1)> croissant\n"),
    ]);
    let r = index.search("sourdough", Visibility::Public, 10);
    assert_eq!(r.hits.len(), 1);
    let s = &r.hits[0].snippet;
    assert!(
        s.contains("&lt;script&gt;alert(&quot;<mark>sourdough</mark>&quot;)&lt;/script&gt;"),
        "{s}"
    );
    assert!(
        s.contains("&amp; &lt;b onmouseover=&#39;x&#39;&gt;<mark>sourdough</mark>&lt;/b&gt;"),
        "{s}"
    );
    let bare = s.replace("<mark>", "").replace("</mark>", "");
    assert!(
        !bare.contains('<') && !bare.contains('>') && !bare.contains('"'),
        "{s}"
    );
    assert_eq!(s.matches("<mark>").count(), s.matches("</mark>").count());
    let img = index.search("croissant", Visibility::Public, 10);
    assert_eq!(
        img.hits[0].snippet,
        "&lt;img src=x onerror=alert(1)&gt; <mark>croissant</mark>"
    );
}

#[test]
fn bounded_ranking_keeps_title_matches_and_the_best_linked_notes() {
    // 40 notes mention "lantern"; a hub is linked from ten of them; "Lantern" itself
    // is linked from nowhere and sorts last.
    let mut files: Vec<(String, String)> = (0..40)
        .map(|i| {
            let link = if i < 10 { " See [[Hub]]." } else { "" };
            (
                format!("n/Note {i:02}.md"),
                format!("---\nfree: true\n---\nA lantern, once.{link}\n"),
            )
        })
        .collect();
    files.push((
        "Hub.md".into(),
        "---\nfree: true\n---\nLantern lantern lantern: the lantern hub.\n".into(),
    ));
    files.push((
        "Scrambled.md".into(),
        "---\nfree: true\n---\nLantern first, a word after: not the phrase.\n".into(),
    ));
    files.push((
        "z/Lantern.md".into(),
        "---\nfree: true\n---\nThe lamp of the title.\n".into(),
    ));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let vault = write_vault(&tmp.path().join("vault"), &refs);
    let exact = SearchIndex::open(&tmp.path().join("exact.db")).unwrap();
    exact.reindex(&vault).unwrap();
    let bounded = SearchIndex::open_with(
        &tmp.path().join("bounded.db"),
        IndexOptions {
            candidates_max: 5,
            ..IndexOptions::default()
        },
    )
    .unwrap();
    bounded.reindex(&vault).unwrap();

    let e = exact.search("lantern", Visibility::Public, 5);
    let b = bounded.search("lantern", Visibility::Public, 5);
    assert_eq!(paths(&e)[..2], ["z/Lantern.md", "Hub.md"]);
    assert_eq!(paths(&b)[..2], ["z/Lantern.md", "Hub.md"], "{b:?}");
    assert_eq!(b.hits.len(), 5);
    assert_eq!(
        b.hits[0].score, e.hits[0].score,
        "scored under the same query"
    );
    let scores: Vec<f64> = b.hits.iter().map(|h| h.score).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // A phrase past the bound is ranked by its words, among the phrase's matches.
    let p = bounded.search("\"a lantern\"", Visibility::Public, 5);
    assert_eq!(p.hits.len(), 5);
    for h in &p.hits {
        assert!(h.path.starts_with("n/"), "{h:?}");
        assert!(h.snippet.contains("<mark>A lantern</mark>"), "{h:?}");
    }
    let all = exact.search("\"a lantern\"", Visibility::Public, 50);
    assert_eq!(
        all.hits.len(),
        40,
        "not Scrambled, which has the words apart"
    );
    // A limit above the bound is still filled.
    assert_eq!(
        bounded.search("lantern", Visibility::Public, 30).hits.len(),
        30
    );
    // Under the bound, both agree exactly.
    let few_e = exact.search("lamp", Visibility::Public, 5);
    let few_b = bounded.search("lamp", Visibility::Public, 5);
    assert_eq!(few_e, few_b);
}

#[test]
fn update_upserts_changed_notes_and_removes_deleted_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vault");
    let v1 = write_vault(
        &root,
        &[
            ("A.md", "---\nfree: true\n---\nApples."),
            ("B.md", "---\nfree: true\n---\nBananas."),
            ("C.md", "---\nfree: true\n---\nCherries."),
        ],
    );
    let index = SearchIndex::open(&db(&tmp)).unwrap();
    index.reindex(&v1).unwrap();
    assert_eq!(index.note_count().unwrap(), 3);

    // A changes its text, B becomes private, C is deleted, D is new.
    std::fs::remove_file(root.join("C.md")).unwrap();
    let v2 = write_vault(
        &root,
        &[
            ("A.md", "---\nfree: true\n---\nApricots."),
            ("B.md", "---\n---\nBananas."),
            ("D.md", "---\nfree: true\n---\nDates."),
        ],
    );
    let changed: Vec<usize> = ["A", "B", "D"]
        .iter()
        .map(|n| v2.resolve(n).unwrap())
        .collect();
    index.update(&v2, &changed, &["C.md".to_owned()]).unwrap();
    let find = |q: &str, a| paths(&index.search(q, a, 10)).join(",");
    assert_eq!(find("apples", Visibility::Public), "");
    assert_eq!(find("apricots", Visibility::Public), "A.md");
    assert_eq!(find("bananas", Visibility::Public), "");
    assert_eq!(find("bananas", Visibility::Private), "B.md");
    assert_eq!(find("cherries", Visibility::Draft), "");
    assert_eq!(find("dates", Visibility::Public), "D.md");
    assert_eq!(index.note_count().unwrap(), 3);
    // Updating twice changes nothing; removing a path never indexed is no error.
    index
        .update(&v2, &changed, &["Nope.md".to_owned()])
        .unwrap();
    assert_eq!(find("apricots", Visibility::Public), "A.md");
    assert_eq!(index.note_count().unwrap(), 3);
}

/// Public notes about bread; five private notes and two drafts that share their words.
fn bread_vault(private: bool, drafts: bool) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = [
        (
            "Bread/Sourdough.md",
            "---\nfree: true\ntags: [baking]\n---\nA sourdough starter needs flour and water. Feed the starter daily.",
        ),
        (
            "Bread/Rye.md",
            "---\nfree: true\n---\nRye flour makes a dense loaf; a little sourdough helps the rise.",
        ),
        (
            "Bread/Focaccia.md",
            "---\nfree: true\n---\nOlive oil, flour, salt and a long rise.",
        ),
        (
            "Home.md",
            "---\nfree: true\n---\nNotes on [[Sourdough]] and [[Rye]] bread.",
        ),
    ]
    .iter()
    .map(|(p, t)| (p.to_string(), t.to_string()))
    .collect();
    // Notes on other things, so that the bread words are rare enough for bm25 to
    // weigh (a word in most notes has a floor IDF, which would hide differences).
    for (i, topic) in ["hiking boots", "tax forms", "garden beds", "bike repair"]
        .iter()
        .enumerate()
    {
        files.push((
            format!("Other/{i}.md"),
            format!("---\nfree: true\n---\nSomething about {topic}, and a long walk."),
        ));
    }
    for i in 0..5 {
        files.push((
            format!("Private/Bake {i}.md"),
            format!("---\ntags: [baking]\n---\nStarter log {i}: sourdough, flour, water, more sourdough flour. See [[Sourdough]] and [[Home]]."),
        ));
    }
    files.truncate(if private { 13 } else { 8 });
    if drafts {
        for i in 0..2 {
            files.push((
                format!("Drafts/Loaf {i}.md"),
                format!("---\ndraft: true\n---\nA sourdough rye loaf, flour everywhere, draft {i}. [[Rye]]"),
            ));
        }
    }
    files
}

fn own(files: &[(String, String)]) -> Vec<(&str, &str)> {
    files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect()
}

fn indexed_owned(files: &[(String, String)]) -> (tempfile::TempDir, Vault, SearchIndex) {
    indexed(&own(files))
}

const BREAD_QUERIES: [&str; 8] = [
    "sourdough",
    "flour",
    "sourdough starter",
    "\"sourdough starter\"",
    "sour*",
    "baking",
    "rye flour",
    "rise",
];

/// Every audience's answers to [`BREAD_QUERIES`], for a search prefix too.
fn answers(index: &SearchIndex, audience: Visibility) -> Vec<Results> {
    BREAD_QUERIES
        .iter()
        .flat_map(|q| {
            [
                index.search(q, audience, 10),
                index.search_as_you_type(q, audience, 10),
            ]
        })
        .collect()
}

#[test]
fn search_scores_do_not_depend_on_private_notes() {
    let (_a, _v, public_only) = indexed_owned(&bread_vault(false, false));
    let (_b, _w, with_private) = indexed_owned(&bread_vault(true, false));
    let (_c, _x, with_drafts) = indexed_owned(&bread_vault(true, true));
    let anonymous = answers(&public_only, Visibility::Public);
    assert!(anonymous.iter().all(|r| !r.hits.is_empty()));
    // Exactly the same hits, snippets and scores (f64 equality) for an anonymous
    // reader, however many private notes and drafts share the words.
    assert_eq!(answers(&with_private, Visibility::Public), anonymous);
    assert_eq!(answers(&with_drafts, Visibility::Public), anonymous);
    // And a signed-in reader's are not moved by the drafts only admins see.
    assert_eq!(
        answers(&with_drafts, Visibility::Private),
        answers(&with_private, Visibility::Private)
    );
    // Readers with access still find what they may read.
    let signed_in = with_drafts.search("starter log", Visibility::Private, 10);
    assert_eq!(signed_in.hits.len(), 5, "{signed_in:?}");
    assert!(paths(&signed_in).iter().all(|p| p.starts_with("Private/")));
    let admin = paths(&with_drafts.search("sourdough", Visibility::Draft, 20)).len();
    // Anonymous scores are real weights, not bm25's floor for very common words.
    assert!(
        anonymous.iter().all(|r| r.hits[0].score > 0.1),
        "{anonymous:?}"
    );
    assert_eq!(admin, 3 + 5 + 2);
}

#[test]
fn search_scores_do_not_depend_on_private_notes_after_updates() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vault");
    let v1 = write_vault(&root, &own(&bread_vault(false, false)));
    let index = SearchIndex::open(&db(&tmp)).unwrap();
    index.reindex(&v1).unwrap();
    let anonymous = answers(&index, Visibility::Public);
    // Private notes and drafts arrive one update at a time.
    let v2 = write_vault(&root, &own(&bread_vault(true, true)));
    let added: Vec<usize> = (0..v2.notes().len())
        .filter(|&i| v2.notes()[i].visibility() != Visibility::Public)
        .collect();
    assert_eq!(added.len(), 7);
    for &i in &added {
        index.update(&v2, &[i], &[]).unwrap();
    }
    assert_eq!(answers(&index, Visibility::Public), anonymous);
    // A private note made public counts, once public; made private again, it no
    // longer does.
    let private_only = answers(&index, Visibility::Private);
    std::fs::write(
        root.join("Private/Bake 0.md"),
        "---\nfree: true\n---\nStarter log 0: sourdough.",
    )
    .unwrap();
    let v3 = Vault::reload(&root, &v2).unwrap();
    let bake0 = v3.resolve("Bake 0").unwrap();
    index.update(&v3, &[bake0], &[]).unwrap();
    assert_ne!(answers(&index, Visibility::Public), anonymous);
    index
        .update(&v3, &[], &["Private/Bake 0.md".to_owned()])
        .unwrap();
    assert_eq!(answers(&index, Visibility::Public), anonymous);
    assert_ne!(answers(&index, Visibility::Private), private_only);
}

#[test]
fn a_page_shared_by_two_notes_is_indexed_once() {
    let (_t, v, index) = indexed(&[
        ("a/Note.md", "---\nfree: true\n---\nShared words here."),
        ("A/note.md", "---\nfree: true\n---\nShared words too."),
    ]);
    assert_eq!(v.notes().len(), 2);
    let r = index.search("shared", Visibility::Public, 10);
    assert_eq!(r.hits.len(), 1, "{r:?}");
    assert_eq!(
        v.by_url(&r.hits[0].url).map(|i| v.notes()[i].path.as_str()),
        Some(r.hits[0].path.as_str())
    );
}

#[test]
fn the_index_persists_across_reopening() {
    let (tmp, _v, index) = indexed(&[("A.md", "---\nfree: true\n---\nPersimmons.")]);
    drop(index);
    let index = SearchIndex::open(&db(&tmp)).unwrap();
    assert_eq!(index.note_count().unwrap(), 1);
    assert_eq!(
        paths(&index.search("persimmon", Visibility::Public, 10)),
        ["A.md"]
    );
    let (again, rebuilt) = SearchIndex::open_or_rebuild(&db(&tmp)).unwrap();
    assert!(!rebuilt);
    assert_eq!(again.note_count().unwrap(), 1);
}

#[test]
fn an_index_of_another_schema_version_is_rebuilt_empty() {
    let (tmp, _v, index) = indexed(&[("A.md", "---\nfree: true\n---\nPersimmons.")]);
    drop(index);
    let c = rusqlite::Connection::open(db(&tmp)).unwrap();
    c.execute_batch("PRAGMA user_version = 1").unwrap();
    drop(c);
    let index = SearchIndex::open(&db(&tmp)).unwrap();
    assert_eq!(index.note_count().unwrap(), 0);
    assert!(index
        .search("persimmon", Visibility::Draft, 10)
        .hits
        .is_empty());
}

#[test]
fn an_index_with_one_table_for_every_audience_is_rebuilt() {
    // Schema 2: one FTS table whose bm25 counted every audience's notes.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(db(&tmp).parent().unwrap()).unwrap();
    let c = rusqlite::Connection::open(db(&tmp)).unwrap();
    c.execute_batch(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE,
             url TEXT NOT NULL, title TEXT NOT NULL, tags TEXT NOT NULL,
             body TEXT NOT NULL, visibility INTEGER NOT NULL, version INTEGER NOT NULL);
         CREATE VIRTUAL TABLE notes_fts USING fts5(title, tags, body,
             content = 'notes', content_rowid = 'id');
         INSERT INTO notes VALUES (1, 'A.md', '/a', 'A', '', 'Persimmons.', 0, 1);
         INSERT INTO notes_fts (notes_fts) VALUES ('rebuild');
         PRAGMA user_version = 2;",
    )
    .unwrap();
    drop(c);
    let index = SearchIndex::open(&db(&tmp)).unwrap();
    assert_eq!(index.note_count().unwrap(), 0, "rebuilt empty");
    let vault = write_vault(
        &tmp.path().join("vault"),
        &[("A.md", "---\nfree: true\n---\nPersimmons.")],
    );
    index.reindex(&vault).unwrap();
    assert_eq!(
        paths(&index.search("persimmon", Visibility::Public, 10)),
        ["A.md"]
    );
    let c = rusqlite::Connection::open(db(&tmp)).unwrap();
    let old: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'notes_fts'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(old, 0, "the shared table is gone");
}

#[test]
fn a_corrupt_file_is_a_clear_error_and_open_or_rebuild_starts_afresh() {
    let tmp = tempfile::tempdir().unwrap();
    let path = db(&tmp);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        b"this is not an SQLite database, just text. ".repeat(200),
    )
    .unwrap();
    let e = SearchIndex::open(&path).unwrap_err();
    assert!(e.is_corrupt(), "{e}");
    assert!(e.to_string().contains(&*path.to_string_lossy()), "{e}");

    let (index, rebuilt) = SearchIndex::open_or_rebuild(&path).unwrap();
    assert!(rebuilt);
    assert_eq!(index.note_count().unwrap(), 0);
    let aside: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("search.db.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    let vault = write_vault(
        &tmp.path().join("vault"),
        &[("A.md", "---\nfree: true\n---\nQuince.")],
    );
    index.reindex(&vault).unwrap();
    assert_eq!(
        paths(&index.search("quince", Visibility::Public, 10)),
        ["A.md"]
    );
}

#[test]
fn a_database_of_something_else_is_refused_not_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("other.db");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch("CREATE TABLE users(name TEXT); INSERT INTO users VALUES ('ann');")
        .unwrap();
    drop(c);
    let e = SearchIndex::open(&path).unwrap_err();
    assert!(e.to_string().contains("users"), "{e}");
    let c = rusqlite::Connection::open(&path).unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM users", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
}

/// Two vaults with the same paths: `word` in every note of one, not the other.
fn twin_vaults(tmp: &Path, notes: usize) -> (Vault, Vault) {
    let make = |dir: &str, word: &str| {
        let files: Vec<(String, String)> = (0..notes)
            .map(|i| {
                (
                    format!("f{}/Note {i}.md", i % 7),
                    format!("---\nfree: true\n---\nNote {i} mentions {word} and common words.\n"),
                )
            })
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        write_vault(&tmp.join(dir), &refs)
    };
    (make("a", "alpha"), make("b", "beta"))
}

#[test]
fn searches_during_a_reindex_see_the_old_or_the_new_index_never_a_mix() {
    const NOTES: usize = 60;
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = twin_vaults(tmp.path(), NOTES);
    let index = Arc::new(SearchIndex::open(&db(&tmp)).unwrap());
    index.reindex(&a).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let searches = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (index, done, searches) = (index.clone(), done.clone(), searches.clone());
            std::thread::spawn(move || {
                // How often each word was found in every note.
                let mut full = [0usize; 2];
                while !done.load(Ordering::Relaxed) {
                    for (k, word) in ["alpha", "beta"].iter().enumerate() {
                        let r = index.search(word, Visibility::Public, LIMIT_MAX);
                        assert_eq!(r.notice, None);
                        let n = r.hits.len();
                        assert!(n == 0 || n == NOTES, "{word}: {n} hits, a half-built index");
                        full[k] += usize::from(n == NOTES);
                        let common = index.search("common", Visibility::Public, LIMIT_MAX);
                        assert_eq!(common.hits.len(), NOTES);
                        searches.fetch_add(1, Ordering::Relaxed);
                    }
                }
                full
            })
        })
        .collect();
    let mut rounds = 0;
    while rounds < 10 || searches.load(Ordering::Relaxed) < 400 {
        index.reindex(&b).unwrap();
        index.reindex(&a).unwrap();
        rounds += 1;
    }
    done.store(true, Ordering::Relaxed);
    let mut full = [0usize; 2];
    for r in readers {
        let f = r.join().expect("no reader panicked");
        full = [full[0] + f[0], full[1] + f[1]];
    }
    assert!(
        full[0] > 0 && full[1] > 0,
        "both indexes were seen: {full:?}"
    );
}

#[test]
fn batched_reindex_keeps_every_note_findable_throughout() {
    const NOTES: usize = 60;
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = twin_vaults(tmp.path(), NOTES);
    let options = IndexOptions {
        reindex_batch_notes: 7,
        ..IndexOptions::default()
    };
    let index = Arc::new(SearchIndex::open_with(&db(&tmp), options).unwrap());
    index.reindex(&a).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (index, done) = (index.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                // Note by note, each is old or new: together, always all of them.
                let alpha = index
                    .search("alpha", Visibility::Public, LIMIT_MAX)
                    .hits
                    .len();
                let common = index
                    .search("common", Visibility::Public, LIMIT_MAX)
                    .hits
                    .len();
                assert_eq!(common, NOTES);
                assert!(alpha <= NOTES);
            }
        })
    };
    for _ in 0..3 {
        index.reindex(&b).unwrap();
        index.reindex(&a).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    reader.join().expect("the reader did not panic");
    assert_eq!(
        index
            .search("alpha", Visibility::Public, LIMIT_MAX)
            .hits
            .len(),
        NOTES
    );
    assert_eq!(
        index
            .search("beta", Visibility::Public, LIMIT_MAX)
            .hits
            .len(),
        0
    );
    assert_eq!(index.note_count().unwrap(), NOTES);
}

#[test]
fn a_synthetic_vault_answers_within_its_audience() {
    let tmp = tempfile::tempdir().unwrap();
    synth::generate(&tmp.path().join("vault"), 300, 42).unwrap();
    let vault = Vault::load(&tmp.path().join("vault")).unwrap();
    let index = SearchIndex::open(&db(&tmp)).unwrap();
    index.reindex(&vault).unwrap();
    let mut rng = synth::Rng::new(1);
    let (mut found, mut marked) = (0, 0);
    for _ in 0..100 {
        let q = synth::content_word(&mut rng);
        for audience in [Visibility::Public, Visibility::Private] {
            let r = index.search(q, audience, 20);
            found += r.hits.len();
            for h in &r.hits {
                let i = vault.by_url(&h.url).unwrap();
                assert!(vault.notes()[i].visibility() <= audience);
                marked += usize::from(h.snippet.contains("<mark>"));
            }
            let scores: Vec<f64> = r.hits.iter().map(|h| h.score).collect();
            assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
        }
    }
    assert!(found > 1000, "{found}");
    // The rest matched in the title or tags only.
    assert!(
        marked * 10 > found * 8,
        "{marked} of {found} snippets show the match"
    );
}
