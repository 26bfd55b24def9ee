//! A change to the templates alone gives every page a new version; until each is
//! rendered again, its previous version answers (`detail=previous-version`) and the
//! new one is filled in the background. These tests pin where that must stop: an
//! edit, a purge, a change of settings, a request that asks for a fresh answer, and
//! `template_grace_secs = 0`.

mod common;

use std::time::{Duration, Instant};

use common::{get, get_fast, get_with, start, start_with_settings, Resp, Running};
use quire_server::purge::{self, Target};

/// Writes a layout with `marker` before `</body>` and republishes, as the watcher
/// would.
fn restyle(r: &Running, marker: &str) {
    let dir = r.vault.path().join(".quire/templates");
    std::fs::create_dir_all(&dir).unwrap();
    let (name, default) = quire_site::templates::DEFAULTS[0];
    assert_eq!(name, "layout.html");
    let text = default.replacen("</body>", &format!("<i>{marker}</i></body>"), 1);
    std::fs::write(dir.join(name), text).unwrap();
    quire_site::watch::republish(&r.site, &r.ctx);
}

/// A public note's URL and vault path.
fn a_note(r: &Running, nth: usize) -> (String, String) {
    let snap = r.site.snapshot();
    let mut notes: Vec<_> = snap
        .vault
        .notes()
        .iter()
        .enumerate()
        .filter(|(i, n)| {
            n.visibility() == quire_vault::Visibility::Public
                && snap.vault.by_url(&n.url) == Some(*i)
        })
        .map(|(_, n)| (n.url.clone(), n.path.clone()))
        .collect();
    notes.sort();
    notes.swap_remove(nth)
}

fn status(resp: &Resp) -> &str {
    resp.header("cache-status").unwrap_or("")
}

fn from_previous(resp: &Resp) -> bool {
    resp.hit() && status(resp).contains("previous-version")
}

/// Stores `url` (a miss, then a hit).
fn store(r: &Running, url: &str) {
    get(r.addr, url);
    assert!(get(r.addr, url).hit(), "{url} stored");
}

/// Asks for `url` until the answer is a hit in the new style.
fn wait_restyled(r: &Running, url: &str, marker: &str) -> Resp {
    let t0 = Instant::now();
    loop {
        let resp = get(r.addr, url);
        if resp.body.contains(marker) && !from_previous(&resp) {
            return resp;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{url} never restyled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_template_change_keeps_readers_on_hits_while_pages_render_again() {
    let r = start(false);
    let (url, _) = a_note(&r, 0);
    store(&r, &url);
    let renders = r.site.renders();
    restyle(&r, "restyled-7");
    let resp = get(r.addr, &url);
    assert_eq!(resp.status, 200);
    assert!(from_previous(&resp), "{}", status(&resp));
    assert!(!resp.body.contains("restyled-7"), "the previous style");
    assert_eq!(r.ctx.metrics.previous_hits(), 1);
    // The current version was filled in the background: the next reader gets it.
    let resp = wait_restyled(&r, &url, "restyled-7");
    assert!(resp.hit(), "{}", status(&resp));
    assert!(r.site.renders() > renders, "the new style was rendered");
}

/// A reader whose browser sends the same request head each time (the fast path
/// answers it from what it decided the first time): the template change reaches
/// it as it reaches everyone, first as the previous version, then the new style.
#[test]
fn a_template_change_reaches_a_repeated_request() {
    let r = start(false);
    let (url, _) = a_note(&r, 0);
    for _ in 0..4 {
        get_fast(r.addr, &url);
    }
    assert!(get_fast(r.addr, &url).hit());
    assert!(r.ctx.metrics.repeats() > 0, "answered as a repeat");
    restyle(&r, "restyled-6");
    let resp = get_fast(r.addr, &url);
    assert!(from_previous(&resp), "{}", status(&resp));
    let t0 = Instant::now();
    while !get_fast(r.addr, &url).body.contains("restyled-6") {
        assert!(t0.elapsed() < Duration::from_secs(20), "never restyled");
        std::thread::sleep(Duration::from_millis(20));
    }
    let resp = get_fast(r.addr, &url);
    assert!(resp.hit() && resp.body.contains("restyled-6"));
}

/// quire's invariant: an edit is never answered from before it, whatever style.
#[test]
fn an_edit_is_never_answered_from_a_previous_version() {
    let r = start(false);
    let (edited, path) = a_note(&r, 0);
    let (other, _) = a_note(&r, 1);
    store(&r, &edited);
    store(&r, &other);
    restyle(&r, "restyled-8");
    let file = r.vault.path().join(&path);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        format!("{text}\n\nEdited during the grace: plum-17.\n"),
    )
    .unwrap();
    quire_site::watch::republish(&r.site, &r.ctx);
    let resp = get(r.addr, &edited);
    assert!(!from_previous(&resp), "{}", status(&resp));
    assert!(resp.body.contains("plum-17"), "the edit");
    assert!(resp.body.contains("restyled-8"), "in the new style");
    // A page the edit did not touch still answers from its previous version.
    let resp = get(r.addr, &other);
    assert!(from_previous(&resp), "{}", status(&resp));
}

/// An edit and a template change published together: the edited page is new.
#[test]
fn an_edit_published_with_a_template_change_is_never_answered_from_before() {
    let r = start(false);
    let (url, path) = a_note(&r, 0);
    store(&r, &url);
    let file = r.vault.path().join(&path);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text}\n\nEdited with the style: fig-23.\n")).unwrap();
    restyle(&r, "restyled-9");
    let resp = get(r.addr, &url);
    assert!(!from_previous(&resp), "{}", status(&resp));
    assert!(resp.body.contains("fig-23") && resp.body.contains("restyled-9"));
}

#[test]
fn a_purge_reaches_previous_versions() {
    let r = start(false);
    let (url, _) = a_note(&r, 0);
    store(&r, &url);
    restyle(&r, "restyled-10");
    let tag = quire_site::reply::path_tag(&url);
    assert!(purge::run(&r.ctx, &[Target::Key(tag)], false) > 0);
    let resp = get(r.addr, &url);
    assert!(!resp.hit(), "purged: {}", status(&resp));
    assert!(resp.body.contains("restyled-10"));
}

#[test]
fn a_settings_change_lets_no_previous_page_answer() {
    let r = start(false);
    let (url, _) = a_note(&r, 0);
    store(&r, &url);
    let file = r.vault.path().join(".quire/site.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text}\n# a comment is a change too\n")).unwrap();
    restyle(&r, "restyled-11");
    let resp = get(r.addr, &url);
    assert!(!resp.hit(), "{}", status(&resp));
    assert!(resp.body.contains("restyled-11"));
}

#[test]
fn a_request_for_a_fresh_answer_skips_previous_versions() {
    let r = start(false);
    let (url, _) = a_note(&r, 0);
    store(&r, &url);
    restyle(&r, "restyled-12");
    let resp = get_with(r.addr, "GET", &url, "Cache-Control: no-cache\r\n", "");
    assert!(!from_previous(&resp), "{}", status(&resp));
    assert!(resp.body.contains("restyled-12"));
}

#[test]
fn no_grace_means_no_previous_versions() {
    let r = start_with_settings("template_grace_secs = 0");
    let (url, _) = a_note(&r, 0);
    store(&r, &url);
    restyle(&r, "restyled-13");
    let resp = get(r.addr, &url);
    assert!(!resp.hit(), "{}", status(&resp));
    assert_eq!(r.ctx.metrics.previous_hits(), 0);
}

/// The old pages are not purged on a restyle (they answer), but a page whose
/// content changed is; `Site::reload_changes` tells the two apart.
#[test]
fn a_restyle_purges_nothing_and_renders_everything_again() {
    let r = start(false);
    let dir = r.vault.path().join(".quire/templates");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("style.css"), "body { color: #123456 }\n").unwrap();
    let changes = r.site.reload_changes().unwrap();
    // The stylesheet itself is versioned by its bytes: it changed, and is purged.
    assert_eq!(changes.public, [quire_site::routes::CSS_PATH]);
    // Every page links it: each is restyled, none purged.
    let snap = r.site.snapshot();
    assert_eq!(changes.restyled.len(), snap.contents.len());
    assert!(changes.restyled.contains(&"/".to_owned()));
}
