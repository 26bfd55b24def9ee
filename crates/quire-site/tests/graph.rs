//! The graphs and the opt-in page script end to end: a vault served by a real quire
//! server on a loopback port, over real sockets.

mod common;

use std::time::{Duration, Instant};

use base64::Engine as _;
use common::*;
use quire_vault::Visibility;
use sha2::{Digest, Sha256};

fn example() -> Running {
    start(false)
}

/// The local graph section of a note page, if it has one.
fn graph_section(html: &str) -> Option<&str> {
    let start = html.find("<section class=\"local-graph\"")?;
    let end = html[start..].find("</section>")? + start;
    Some(&html[start..end])
}

/// The value of `attr="…"` on the first tag containing `marker`, with the escapes
/// the templates write (`&#x2f;` for `/`, as minijinja escapes it) decoded.
fn attr(html: &str, marker: &str, attr: &str) -> Option<String> {
    let at = html.find(marker)?;
    let tag_end = html[at..].find('>')? + at;
    let tag = &html[at..tag_end];
    let key = format!("{attr}=\"");
    let v = tag.find(&key)? + key.len();
    let len = tag[v..].find('"')?;
    Some(tag[v..v + len].replace("&#x2f;", "/").replace("&amp;", "&"))
}

const FREE: &str = "---\nfree: true\n---\n";

#[test]
fn private_notes_never_reach_an_anonymous_graph() {
    let r = example();
    let snap = r.site.snapshot();
    let v = &snap.vault;
    let hidden: Vec<(&str, &str)> = v
        .notes()
        .iter()
        .filter(|n| n.visibility() != Visibility::Public)
        .map(|n| (n.url.as_str(), n.title()))
        .collect();
    assert!(hidden.len() >= 10, "the example vault has hidden notes");
    let site = get(r.addr, "/graph");
    assert_eq!(site.status, 200);
    let public = v
        .notes()
        .iter()
        .filter(|n| n.visibility() == Visibility::Public)
        .count();
    assert_eq!(
        site.body.matches("<a class=\"node").count(),
        public,
        "every public note is drawn"
    );
    let mut pages = vec![("/graph".to_owned(), site.body.clone())];
    // Every public note a hidden note links with, either way: its graph is where a
    // hidden neighbour would show.
    for (i, n) in v.notes().iter().enumerate() {
        if n.visibility() != Visibility::Public {
            continue;
        }
        let raw: Vec<usize> = v
            .targets(i)
            .iter()
            .flatten()
            .copied()
            .chain(v.backlinks(i).iter().copied())
            .collect();
        if raw
            .iter()
            .any(|&j| v.notes()[j].visibility() != Visibility::Public)
        {
            let page = get(r.addr, &n.url);
            assert_eq!(page.status, 200, "{}", n.url);
            if let Some(g) = graph_section(&page.body) {
                pages.push((n.url.clone(), g.to_owned()));
            }
        }
    }
    assert!(
        pages.len() > 3,
        "public notes next to hidden ones were checked"
    );
    for (url, html) in &pages {
        for (hurl, title) in &hidden {
            assert!(
                !html.contains(&format!("href=\"{hurl}\"")),
                "{url} links to hidden {hurl}"
            );
            let t = quire_vault::render::escape(title);
            assert!(
                !html.contains(&format!("<title>{t}</title>")),
                "{url} names hidden {title}"
            );
        }
    }
}

#[test]
fn adding_a_link_changes_the_targets_page_and_the_site_graph() {
    let a = format!("{FREE}# A\nalone\n");
    let b = format!("{FREE}# B\nno links yet\n");
    let c = format!("{FREE}# C\n[[D]]\n");
    let d = format!("{FREE}# D\n");
    let r = start_with(
        &[("A.md", &a), ("B.md", &b), ("C.md", &c), ("D.md", &d)],
        true,
    );
    let first = get(r.addr, "/a");
    assert_eq!(first.status, 200);
    assert!(
        graph_section(&first.body).is_none(),
        "no link, no graph: {}",
        first.body
    );
    let before = r.site.snapshot();
    std::fs::write(
        r.vault.path().join("B.md"),
        format!("{FREE}# B\nnow links [[A]]\n"),
    )
    .unwrap();
    let t0 = Instant::now();
    loop {
        let page = get(r.addr, "/a");
        if graph_section(&page.body).is_some_and(|g| g.contains("href=\"/b\"")) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "A's page never showed B in its graph"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = r.site.snapshot();
    for p in ["/a", "/b", "/graph"] {
        assert_ne!(before.versions.get(p), after.versions.get(p), "{p}");
    }
    for p in ["/c", "/d"] {
        assert_eq!(before.versions.get(p), after.versions.get(p), "{p}");
    }
    let site = get(r.addr, "/graph").body;
    assert!(site.contains("4 notes and 2 links"), "{site}");
}

#[test]
fn pages_have_no_script_unless_the_option_is_on() {
    let r = example();
    for path in ["/", "/graph", "/home"] {
        let page = get(r.addr, path);
        assert_eq!(page.status, 200, "{path}");
        assert!(!page.body.contains("<script"), "{path}");
        let csp = page.header("content-security-policy").unwrap_or("");
        assert!(csp.contains("script-src 'none'"), "{path}: {csp}");
    }
    assert_eq!(get(r.addr, "/_static/quire.js").status, 404);
}

#[test]
fn with_the_option_on_the_csp_allows_exactly_the_served_script() {
    let site_toml = "hover_previews = true\n";
    let a = format!("{FREE}# A\nsee [[B]]\n");
    let b = format!("{FREE}# B\nthe description of B\n");
    let r = start_with(
        &[(".quire/site.toml", site_toml), ("A.md", &a), ("B.md", &b)],
        false,
    );
    let page = get(r.addr, "/a");
    assert_eq!(page.status, 200);
    let src = attr(&page.body, "<script", "src").expect("a script element");
    let integrity = attr(&page.body, "<script", "integrity").expect("its integrity");
    assert!(src.starts_with("/_static/quire.js?v="), "{src}");
    assert_eq!(page.body.matches("<script").count(), 1);
    let script = get(r.addr, &src);
    assert_eq!(script.status, 200);
    assert!(script
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/javascript")));
    assert!(script
        .header("cache-control")
        .is_some_and(|c| c.contains("immutable")));
    // The hash of the bytes served, computed here.
    let ours = format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&script.bytes))
    );
    assert_eq!(integrity, ours);
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains(&format!("script-src '{ours}';")), "{csp}");
    assert!(!csp.contains("script-src 'none'") && !csp.contains("'self' 'sha256"));
    assert!(
        !script.body.contains("http://") && !script.body.contains("https://"),
        "the script names no other origin"
    );
}
