//! `/llms.txt` end to end: a vault served by a real quire server on a loopback port.
//! Public notes only, in the llms.txt format, hostile front matter kept to its own
//! line, and an edit reaching the cached file.

mod common;

use common::*;
use quire_vault::Visibility;

/// The list lines of an llms.txt (`- [title](url)` or `- [title](url): about`).
fn links(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("- [")).collect()
}

/// The file is the llms.txt proposal's shape, lists every public note of the
/// example vault once with its absolute URL, and no hidden note's title or URL.
#[test]
fn llms_txt_lists_every_public_note_and_nothing_hidden() {
    let r = start(false);
    let got = get(r.addr, "/llms.txt");
    assert_eq!(got.status, 200);
    assert_eq!(
        got.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let text = &got.body;
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("# Ines's digital garden"));
    assert_eq!(lines.next(), Some(""));
    assert!(lines.next().unwrap().starts_with("> Notes on caches"));
    assert!(text.contains("\n## "), "sections");
    let snap = r.site.snapshot();
    let v = &snap.vault;
    let listed = links(text);
    let public: Vec<_> = v
        .notes()
        .iter()
        .enumerate()
        .filter(|(i, n)| n.visibility() == Visibility::Public && v.by_url(&n.url) == Some(*i))
        .collect();
    assert_eq!(listed.len(), public.len(), "{text}");
    for (_, n) in &public {
        let target = format!("](http://site.test{}.md)", n.url);
        assert_eq!(
            listed.iter().filter(|l| l.contains(&target)).count(),
            1,
            "{} listed once",
            n.url
        );
    }
    let hidden: Vec<_> = v
        .notes()
        .iter()
        .filter(|n| n.visibility() != Visibility::Public)
        .collect();
    assert!(hidden.len() >= 10, "the example vault has hidden notes");
    for n in hidden {
        assert!(
            !text.contains(&format!("{})", n.url)),
            "{} is hidden",
            n.url
        );
    }
    // Stored like a page: the next one is a hit.
    assert!(get(r.addr, "/llms.txt").hit());
}

/// A note whose title and description try to add a section and a link of their own
/// gets one line, its own.
#[test]
fn hostile_front_matter_adds_no_line_to_llms_txt() {
    let hostile = "---\nfree: true\ntitle: \"Evil](https://evil.test)\\n\\n## Injected\\n- [Fake\"\ndescription: \"x\\n- [Also fake](https://evil.test)\"\n---\nBody.\n";
    let r = start_with(
        &[
            ("good.md", "---\nfree: true\n---\nA good note.\n"),
            ("evil.md", hostile),
            ("secret.md", "A private note: plum-41.\n"),
        ],
        false,
    );
    let text = get(r.addr, "/llms.txt").body;
    assert_eq!(links(&text).len(), 2, "{text}");
    assert!(
        !text.lines().any(|l| l.starts_with("## Injected")),
        "{text}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("- [Also fake")),
        "{text}"
    );
    // (An escaped `\]` ends no link text.)
    let unescaped = text.replace("\\]", "");
    assert!(!unescaped.contains("](https://evil.test)"), "{text}");
    assert!(
        !text.contains("plum-41") && !text.contains("/secret"),
        "{text}"
    );
}

/// An edit to a listed note's title reaches `/llms.txt`, which was a hit before.
#[test]
fn an_edit_reaches_llms_txt() {
    let r = start_with(
        &[("a.md", "---\nfree: true\ntitle: Before\n---\nText.\n")],
        false,
    );
    assert!(get(r.addr, "/llms.txt").body.contains("- [Before]("));
    assert!(get(r.addr, "/llms.txt").hit());
    edit_file(&r, "a.md", "---\nfree: true\ntitle: After\n---\nText.\n");
    let text = get(r.addr, "/llms.txt").body;
    assert!(
        text.contains("- [After](") && !text.contains("Before"),
        "{text}"
    );
}

/// `/llms-full.txt` holds every public note's markdown (as its `.md` serves it), in
/// the order `/llms.txt` lists them, and nothing of a hidden note; an edit reaches
/// the cached file.
#[test]
fn llms_full_txt_holds_every_public_note_and_nothing_hidden() {
    let r = start(false);
    let got = get(r.addr, "/llms-full.txt");
    assert_eq!(got.status, 200);
    let text = got.body.clone();
    assert!(text.starts_with("# Ines's digital garden\n"));
    let snap = r.site.snapshot();
    let v = &snap.vault;
    let mut public = 0;
    for (i, n) in v.notes().iter().enumerate() {
        let url_line = format!("url: \"http://site.test{}\"", n.url);
        if n.visibility() == Visibility::Public && v.by_url(&n.url) == Some(i) {
            public += 1;
            let md = get(r.addr, &format!("{}.md", n.url));
            assert_eq!(md.status, 200, "{}", n.url);
            assert!(
                text.contains(&md.body),
                "{}'s markdown is in the file",
                n.url
            );
        } else if n.visibility() != Visibility::Public {
            assert!(!text.contains(&url_line), "{} is hidden", n.url);
        }
    }
    assert_eq!(text.matches("\nurl: \"").count(), public, "each note once");
    // The order is `/llms.txt`'s.
    let order: Vec<String> = links(&get(r.addr, "/llms.txt").body)
        .iter()
        .filter_map(|l| l.split_once("](")?.1.split_once(".md)"))
        .map(|(url, _)| url.to_owned())
        .collect();
    let at = |u: &str| text.find(&format!("url: \"{u}\""));
    let positions: Vec<usize> = order.iter().filter_map(|u| at(u)).collect();
    assert_eq!(positions.len(), public);
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "in llms.txt's order"
    );
    // Not a page to prefetch, nor to render ahead.
    assert!(!quire_site::ahead::ahead_of_time("/llms-full.txt"));

    edit_file(
        &r,
        "About.md",
        "---\ntitle: About\nfree: true\n---\nA new about text.\n",
    );
    let after = get(r.addr, "/llms-full.txt");
    assert!(
        after.body.contains("A new about text."),
        "the edit reached it"
    );
}
