//! Pages rendered before anyone asks, over real sockets: the first fill for a host
//! queues every public page, and after an edit the changed pages are filled in the
//! background, so the first reader after either gets a hit.

mod common;

use std::time::{Duration, Instant};

use common::{get, start, Running};
use quire_server::metrics::Prefilled;
use quire_server::prefill::Prefill;
use quire_vault::Visibility;

/// Prefills taken so far (any result).
fn taken(r: &Running) -> u64 {
    Prefilled::ALL
        .iter()
        .filter(|p| **p != Prefilled::Dropped)
        .map(|p| r.ctx.metrics.prefills(*p))
        .sum()
}

/// Waits until the prefill task has taken `n` URLs in all.
fn wait_taken(r: &Running, n: u64) {
    let t0 = Instant::now();
    while taken(r) < n {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "prefill stuck at {} of {n}",
            taken(r)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn public_notes(r: &Running) -> Vec<(String, String)> {
    let snap = r.site.snapshot();
    snap.vault
        .notes()
        .iter()
        .enumerate()
        .filter(|(i, n)| {
            n.visibility() == Visibility::Public && snap.vault.by_url(&n.url) == Some(*i)
        })
        .map(|(_, n)| (n.url.clone(), n.path.clone()))
        .collect()
}

#[test]
fn every_public_page_and_every_edit_is_a_hit_before_anyone_asks() {
    let r = start(false);
    let prefill = {
        let _in = r._rt.enter();
        Prefill::start(r.ctx.clone())
    };
    assert!(r.site.prefill_with(prefill));
    // The first fill names the origin: every public page is queued for it.
    let first = get(r.addr, "/");
    assert_eq!(first.status, 200);
    let pages = r
        .site
        .snapshot()
        .versions
        .keys()
        .filter(|p| quire_site::ahead::ahead_of_time(p))
        .count() as u64;
    wait_taken(&r, pages);
    assert_eq!(r.ctx.metrics.prefills(Prefilled::Dropped), 0);
    assert_eq!(r.ctx.metrics.prefills(Prefilled::Failed), 0);
    let notes = public_notes(&r);
    assert!(notes.len() > 3);
    let renders = r.site.renders();
    for (url, _) in &notes {
        let resp = get(r.addr, url);
        assert_eq!(resp.status, 200, "{url}");
        assert!(resp.hit(), "{url}: {:?}", resp.header("cache-status"));
    }
    assert_eq!(r.site.renders(), renders, "no reader paid a render");

    // An edit: the changed pages are filled before the next reader.
    let (url, path) = notes[0].clone();
    let file = r.vault.path().join(&path);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text}\n\nPrefilled line: quince-42.\n")).unwrap();
    let before = taken(&r);
    let changed = r.site.reload().unwrap();
    assert!(changed.contains(&url), "{changed:?}");
    let queued = r.site.prefill_changed(&changed) as u64;
    let wanted = changed
        .iter()
        .filter(|p| quire_site::ahead::ahead_of_time(p))
        .count();
    assert_eq!(queued, wanted as u64, "one origin seen");
    wait_taken(&r, before + queued);
    let resp = get(r.addr, &url);
    assert!(
        resp.hit(),
        "the first reader after the edit: {:?}",
        resp.header("cache-status")
    );
    assert!(resp.body.contains("quince-42"), "with the new text");
}

/// A made-up `Host` does not get the site rendered for it when `base_url` names the
/// site's own.
#[test]
fn a_strange_host_is_not_prefilled_when_base_url_is_set() {
    let r = common::start_with_settings("base_url = \"https://garden.example\"");
    let prefill = {
        let _in = r._rt.enter();
        Prefill::start(r.ctx.clone())
    };
    r.site.prefill_with(prefill);
    assert_eq!(get(r.addr, "/").status, 200, "Host: site.test");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(taken(&r), 0, "site.test is not the site's host");
    assert_eq!(r.site.prefill_changed(&["/".to_owned()]), 0);
}

/// One GET of `/` naming `host`, over a fresh connection; the status.
fn get_as_host(r: &Running, host: &str) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(r.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    String::from_utf8_lossy(&raw)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Without `base_url`, made-up `Host` fields take at most `ORIGINS_MAX` origins:
/// the site is rendered for no more of them, whatever a client sends.
#[test]
fn made_up_hosts_take_at_most_the_origin_limit() {
    let r = start(false);
    let prefill = {
        let _in = r._rt.enter();
        Prefill::start(r.ctx.clone())
    };
    r.site.prefill_with(prefill);
    let max = quire_site::ahead::ORIGINS_MAX;
    for i in 0..max + 3 {
        assert_eq!(get_as_host(&r, &format!("h{i}.example")), 200);
    }
    assert_eq!(
        r.site.prefill_changed(&["/".to_owned()]),
        max,
        "one queued page per origin kept"
    );
}

/// The queue is bounded: past it, URLs are refused and counted as dropped, and what
/// was queued is still filled.
#[test]
fn a_full_prefill_queue_drops_and_counts() {
    let r = start(false);
    let prefill = {
        let _in = r._rt.enter();
        Prefill::with_capacity(r.ctx.clone(), 2)
    };
    let paths: Vec<String> = (0..50).map(|i| format!("/no-such-page-{i}")).collect();
    let queued = paths
        .iter()
        .filter(|p| prefill.queue(format!("http://site.test{p}")))
        .count() as u64;
    assert!(queued <= 3, "a queue of 2, and one being filled: {queued}");
    assert_eq!(r.ctx.metrics.prefills(Prefilled::Dropped), 50 - queued);
    wait_taken(&r, queued);
}
