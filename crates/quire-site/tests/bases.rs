//! Obsidian Bases on the published site: a page embedding a base is cached like any
//! page, re-rendered exactly when what its base shows changes, and never shows a
//! private note to an anonymous reader (the real server, a vault edited under it).

mod common;

use common::*;

const BOOKS: &str = "filters: 'file.hasTag(\"book\")'\nviews:\n  - type: table\n    name: Shelf\n    order: [file.basename, status]\n";

fn book(free: bool, status: &str, date: &str) -> String {
    let free = if free { "free: true\n" } else { "" };
    format!("---\n{free}tags: [book]\nstatus: {status}\ndate: {date}\n---\nA book.\n")
}

/// The pages among `/shelf`, `/dune`, `/emma`, `/other` whose version an edit of
/// `path` to `text` changes (the edit is published as the watcher would).
fn edit(r: &Running, path: &str, text: &str) -> Vec<&'static str> {
    let pages = ["/shelf", "/dune", "/emma", "/other"];
    let before: Vec<Option<u64>> = pages
        .iter()
        .map(|p| r.site.snapshot().versions.get(*p).copied())
        .collect();
    edit_file(r, path, text);
    let snap = r.site.snapshot();
    pages
        .iter()
        .zip(before)
        .filter(|(p, v)| snap.versions.get(**p).copied() != *v)
        .map(|(p, _)| *p)
        .collect()
}

fn books() -> Running {
    let files = [
        ("Books.base", BOOKS.to_owned()),
        (
            "Shelf.md",
            "---\nfree: true\n---\n# Shelf\n\n![[Books.base]]\n".to_owned(),
        ),
        ("Dune.md", book(true, "reading", "2025-01-01")),
        ("Emma.md", book(true, "done", "2025-02-01")),
        ("Other.md", "---\nfree: true\n---\nNot a book.\n".to_owned()),
    ];
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    start_with(&refs, false)
}

#[test]
fn a_page_with_a_base_is_re_rendered_exactly_when_its_rows_change() {
    let r = books();
    let shelf = get(r.addr, "/shelf");
    assert_eq!(shelf.status, 200);
    assert!(
        shelf
            .body
            .contains("<a href=\"/dune\">Dune</a></td><td>reading</td>"),
        "{}",
        shelf.body
    );
    assert!(get(r.addr, "/shelf").hit(), "a base page is cached");

    // A property the base shows: the shelf changes, and so does the note's page.
    let changed = edit(&r, "Dune.md", &book(true, "done", "2025-01-01"));
    assert_eq!(changed, ["/shelf", "/dune"]);
    let shelf = get(r.addr, "/shelf");
    assert!(
        shelf
            .body
            .contains("<a href=\"/dune\">Dune</a></td><td>done</td>"),
        "{}",
        shelf.body
    );

    // A property it does not show: the note's page only.
    let changed = edit(&r, "Dune.md", &book(true, "done", "2025-03-01"));
    assert_eq!(changed, ["/dune"]);
    assert!(get(r.addr, "/shelf").hit(), "the shelf stayed cached");

    // A new note that matches: the shelf.
    // (A new note may change other pages too: their related notes and graphs.)
    let changed = edit(&r, "Zola.md", &book(true, "todo", "2025-04-01"));
    assert!(changed.contains(&"/shelf"), "{changed:?}");
    assert!(get(r.addr, "/shelf").body.contains("/zola"));

    // The base itself edited: the shelf.
    let changed = edit(&r, "Books.base", &BOOKS.replace("status]", "status, date]"));
    assert_eq!(changed, ["/shelf"]);
    assert!(get(r.addr, "/shelf").body.contains("<th>date</th>"));
}

#[test]
fn a_private_note_never_adds_a_row_a_count_or_a_change_to_a_public_base_page() {
    let r = books();
    let before = get(r.addr, "/shelf");
    assert!(before.body.contains("2 of 2 notes"), "{}", before.body);
    let etag = before.header("etag").expect("an ETag").to_owned();
    let changed = edit(
        &r,
        "Secret Book.md",
        &book(false, "secret-status", "2025-05-01"),
    );
    assert!(changed.is_empty(), "{changed:?}");
    let after = get(r.addr, "/shelf");
    assert!(after.hit(), "still the cached page");
    assert_eq!(after.header("etag"), Some(etag.as_str()));
    assert!(!after.body.contains("secret"), "{}", after.body);
    assert!(after.body.contains("2 of 2 notes"));
}

#[test]
fn a_base_file_is_not_served() {
    let r = books();
    assert_eq!(get(r.addr, "/attachments/books.base").status, 404);
    assert_eq!(get(r.addr, "/books.base").status, 404);
}
