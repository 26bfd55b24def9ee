//! A page's version is what its render read (issue 29): the real server, a vault
//! edited under it, and what anonymous readers get from the cache afterwards.

mod common;

use std::sync::Arc;
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

/// A 70 KB note of embeds of missing sections and blocks of a large note (29.5:
/// each re-parsed the whole target, in the render and in the walk every reload ran).
fn missing_section_bomb(dir: &std::path::Path) {
    let target = "# Real\n".to_owned() + &"some text ^b1\n\n".repeat(3000);
    std::fs::write(dir.join("Bomb Target.md"), format!("{FREE}{target}")).unwrap();
    let mut bomb = FREE.to_owned();
    let mut k = 0;
    while bomb.len() < 70 * 1024 {
        bomb.push_str(&format!(
            "![[Bomb Target#nowhere {k}]] ![[Bomb Target#^no{k}]]\n"
        ));
        k += 1;
    }
    std::fs::write(dir.join("Bomb.md"), bomb).unwrap();
}

#[test]
fn a_hostile_note_costs_its_own_pages_not_every_reload() {
    let vault = tempfile::tempdir().unwrap();
    copy_dir(&example_vault(), vault.path());
    missing_section_bomb(vault.path());
    let site = quire_site::Site::open(vault.path()).unwrap();
    let first = site.snapshot();
    assert!(first.records.contains_key("Bomb.md"));
    // An edit elsewhere renders that note's page only: no record of the bomb is
    // made again.
    let about = vault.path().join("About.md");
    let text = std::fs::read_to_string(&about).unwrap();
    std::fs::write(&about, format!("{text}\nOne more line.\n")).unwrap();
    site.reload().unwrap();
    let snap = site.snapshot();
    assert_eq!(snap.rendered, 1, "only About's page was rendered again");
    assert!(Arc::ptr_eq(
        &first.records["Bomb.md"],
        &snap.records["Bomb.md"]
    ));
    // Its own edit renders it again, once, within the embed budget.
    std::fs::write(
        vault.path().join("Bomb.md"),
        format!("{FREE}![[Bomb Target#Real]]\n"),
    )
    .unwrap();
    site.reload().unwrap();
    assert_eq!(site.snapshot().rendered, 1);
}

/// The figure for docs/publishing.md: open and reload times of the example vault
/// with the missing-section bomb (run by hand; no threshold):
/// `cargo test -p quire-site --test versions -- --ignored --nocapture`
/// (`QUIRE_MEASURE_BOMB=0`: the example vault alone).
#[test]
#[ignore = "a measurement, run by hand"]
fn measure_reload_with_the_missing_section_bomb() {
    let vault = tempfile::tempdir().unwrap();
    copy_dir(&example_vault(), vault.path());
    if std::env::var("QUIRE_MEASURE_BOMB").as_deref() != Ok("0") {
        missing_section_bomb(vault.path());
    }
    let t0 = Instant::now();
    let site = quire_site::Site::open(vault.path()).unwrap();
    let open = t0.elapsed();
    let about = vault.path().join("About.md");
    let text = std::fs::read_to_string(&about).unwrap();
    let mut reloads = Vec::new();
    for n in 0..3 {
        std::fs::write(&about, format!("{text}\nline {n}\n")).unwrap();
        let t0 = Instant::now();
        site.reload().unwrap();
        reloads.push(t0.elapsed());
    }
    eprintln!("open {open:?}, reloads after an unrelated edit {reloads:?}");
}

#[test]
fn an_in_place_save_never_serves_a_404() {
    // Low of 29: an editor saving in place truncates, then writes; reloads in
    // between published the note as private, and 2,423 of 23,882 requests got 404.
    let files = [("Home.md", format!("{FREE}the old text\n"))];
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let r = start_with(&refs, true);
    warm(&r, "/home");
    let path = r.vault.path().join("Home.md");
    // Truncated, its mtime ahead so it reads as just written whatever the load.
    let f = std::fs::File::create(&path).unwrap();
    f.set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
        .unwrap();
    drop(f);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(600) {
        assert_eq!(get(r.addr, "/home").status, 200, "while half-saved");
    }
    assert!(r.site.snapshot().vault.unsettled());
    std::fs::write(&path, format!("{FREE}the new text\n")).unwrap();
    within(Duration::from_secs(5), || {
        let page = get(r.addr, "/home");
        assert_eq!(page.status, 200);
        page.body.contains("the new text")
    })
    .expect("the finished save is published");
}
