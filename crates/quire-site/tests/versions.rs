//! A page's version is what its render read (issue 29): the real server, a vault
//! edited under it, and what anonymous readers get from the cache afterwards.

mod common;

use std::time::{Duration, Instant};

use common::*;

const FREE: &str = "---\nfree: true\n---\n";

/// Waits until `f` holds, up to `limit`.
fn within(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if f() {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Gets `path` until it is a hit.
fn warm(r: &Running, path: &str) -> Resp {
    assert_eq!(get(r.addr, path).status, 200, "{path}");
    let mut last = None;
    within(Duration::from_secs(3), || {
        let resp = get(r.addr, path);
        let hit = resp.hit();
        last = Some(resp);
        hit
    })
    .unwrap_or_else(|| panic!("{path} never became a hit"));
    last.expect("a response")
}

#[test]
fn a_note_made_private_two_levels_down_leaves_every_public_page() {
    // 29.1: past 64 embeds (1 KB of pasted markers sets it up) the version walk
    // stopped early, so a page kept showing, as a cache hit, a note two levels down
    // made private.
    let pasted = "\u{E000}0\u{E001} ".repeat(70);
    let files = [
        (
            "Home.md",
            format!("{FREE}{pasted}\n\n![[Filler]]\n\n![[Middle]]\n"),
        ),
        ("Short.md", format!("{FREE}short page\n\n![[Middle]]\n")),
        ("Middle.md", format!("{FREE}middle text\n\n![[Deep]]\n")),
        ("Deep.md", format!("{FREE}the-deep-text\n")),
        ("Filler.md", format!("{FREE}filler\n")),
    ];
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let r = start_with(&refs, true);
    let pages = ["/home", "/short", "/middle"];
    for p in pages {
        warm(&r, p);
    }
    for p in pages {
        assert!(get(r.addr, p).body.contains("the-deep-text"), "{p}");
    }
    std::fs::write(
        r.vault.path().join("Deep.md"),
        "the-deep-text, private now\n",
    )
    .unwrap();
    within(Duration::from_secs(5), || {
        get(r.addr, "/deep").status == 404
    })
    .expect("the note itself is gone within 5 s");
    for p in pages {
        let page = warm(&r, p);
        assert!(!page.body.contains("the-deep-text"), "{p}: {}", page.body);
    }
    // What a cold start computes is what the reloads kept.
    let cold = quire_site::Site::open(r.vault.path()).unwrap().snapshot();
    let warm_snap = r.site.snapshot();
    for p in pages {
        assert_eq!(cold.versions.get(p), warm_snap.versions.get(p), "{p}");
    }
}

#[test]
fn a_private_note_a_public_page_links_to_keeps_its_etag_when_created_or_deleted() {
    // Low of 29: the page's ETag changed when a private note it links to (or
    // embeds) was created or deleted, though the body did not: a way to probe
    // for private notes' names.
    let files = [(
        "Home.md",
        format!("{FREE}see [[Secret]] and ![[Secret]] and ![[Secret#Plans]]\n"),
    )];
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let r = start_with(&refs, false);
    let before = warm(&r, "/home");
    let etag = before.header("etag").expect("an ETag").to_owned();
    let version = r.site.snapshot().versions.get("/home").copied();
    let secret = r.vault.path().join("Secret.md");
    for step in ["created", "deleted"] {
        if step == "created" {
            std::fs::write(&secret, "# Plans\nthe secret plans\n").unwrap();
        } else {
            std::fs::remove_file(&secret).unwrap();
        }
        let changed = r.site.reload().unwrap();
        assert!(
            !changed.contains(&"/home".to_owned()),
            "{step}: {changed:?}"
        );
        assert_eq!(
            r.site.snapshot().versions.get("/home").copied(),
            version,
            "{step}"
        );
        let after = get(r.addr, "/home");
        assert!(after.hit(), "{step}: still the cached page");
        assert_eq!(after.header("etag"), Some(etag.as_str()), "{step}");
        assert_eq!(after.body, before.body, "{step}");
    }
}
