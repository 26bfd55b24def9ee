//! The site's compression dictionary (RFC 9842) end to end: a real quire server on
//! a loopback port, pages fetched over real sockets.

mod common;

use std::time::{Duration, Instant};

use base64::Engine;
use common::*;
use quire_http::dictionary::Dictionary;

/// The dictionary the page at `path` points at: its path and its bytes.
fn dictionary_of(r: &Running, path: &str) -> (String, Dictionary) {
    let page = get(r.addr, path);
    assert_eq!(page.status, 200);
    let link = page.header("link").expect("a Link to the dictionary");
    assert!(link.contains("rel=\"compression-dictionary\""), "{link}");
    let at = link
        .split_once('<')
        .and_then(|(_, l)| l.split_once('>'))
        .map(|(p, _)| p.to_owned())
        .unwrap();
    let d = get(r.addr, &at);
    assert_eq!(d.status, 200);
    let use_as = d.header("use-as-dictionary").expect("Use-As-Dictionary");
    assert!(use_as.contains("match=\"/*\""), "{use_as}");
    assert!(use_as.contains("match-dest=(\"document\")"), "{use_as}");
    assert!(
        d.header("cache-control")
            .is_some_and(|c| c.contains("immutable")),
        "{:?}",
        d.header("cache-control")
    );
    let dict = Dictionary::new(d.bytes.clone());
    assert!(at.contains(&dict.hex()), "{at} is named by its hash");
    (at, dict)
}

fn sf(d: &Dictionary) -> String {
    format!(
        ":{}:",
        base64::engine::general_purpose::STANDARD.encode(d.hash())
    )
}

/// `path` with these `Accept-Encoding` and `Available-Dictionary` values.
fn ask(r: &Running, path: &str, ae: &str, ad: Option<&str>) -> Resp {
    let mut extra = format!("Accept-Encoding: {ae}\r\n");
    if let Some(ad) = ad {
        extra.push_str(&format!("Available-Dictionary: {ad}\r\n"));
    }
    get_with(r.addr, "GET", path, &extra, "")
}

#[test]
fn dictionary_pages_go_dcz_only_to_a_client_holding_the_dictionary() {
    let r = start(false);
    let (_, dict) = dictionary_of(&r, "/");
    let ae = "gzip, deflate, br, zstd, dcz";
    let identity = get(r.addr, "/about");
    assert_eq!(identity.status, 200);
    // The page is stored, then made dcz in the background.
    let deadline = Instant::now() + Duration::from_secs(20);
    let coded = loop {
        let a = ask(&r, "/about", ae, Some(&sf(&dict)));
        if a.header("content-encoding") == Some("dcz") {
            break a;
        }
        assert!(Instant::now() < deadline, "never dcz: {:?}", a.headers);
        std::thread::sleep(Duration::from_millis(100));
    };
    let vary = coded
        .headers
        .iter()
        .filter(|(n, _)| n == "vary")
        .map(|(_, v)| v.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(", ");
    assert!(vary.contains("available-dictionary"), "{vary}");
    assert!(vary.contains("accept-encoding"), "{vary}");
    let decoded = quire_server::compress::decode_dcz(&coded.bytes, &dict, 1 << 24).unwrap();
    assert_eq!(decoded, identity.bytes, "decodes to the page");
    assert!(
        coded.bytes.len() * 2 < identity.bytes.len(),
        "{} against {}",
        coded.bytes.len(),
        identity.bytes.len()
    );
    // Another dictionary, none, or dcz not listed: never dcz.
    let other = Dictionary::new(b"another dictionary".to_vec());
    for (ae, ad) in [
        (ae, Some(sf(&other))),
        (ae, None),
        ("gzip, br, zstd", Some(sf(&dict))),
        ("*", Some(sf(&dict))),
        (ae, Some(":not base64!:".to_owned())),
    ] {
        let a = ask(&r, "/about", ae, ad.as_deref());
        assert_eq!(a.status, 200);
        assert_ne!(a.header("content-encoding"), Some("dcz"), "{ae} {ad:?}");
    }
    // An unknown dictionary path is a 404.
    assert_eq!(get(r.addr, "/_static/dictionary-00.dict").status, 404);
}

#[test]
fn a_note_edit_keeps_the_dictionary_and_a_template_change_makes_a_new_one() {
    let r = start(false);
    let (before, _) = dictionary_of(&r, "/");
    edit_file(&r, "About.md", "---\nfree: true\n---\nAn edited note.\n");
    let (after_edit, _) = dictionary_of(&r, "/");
    assert_eq!(before, after_edit, "a note edit keeps the dictionary");
    let css = r.vault.path().join(".quire/templates/style.css");
    std::fs::create_dir_all(css.parent().unwrap()).unwrap();
    std::fs::write(&css, "body { color: #123456 }\n").unwrap();
    quire_site::watch::republish(&r.site, &r.ctx);
    // A page rendered since (the index may still answer from its previous
    // rendering while it is rendered again: `template_grace_secs`).
    let (after_style, _) = dictionary_of(&r, "/tags/");
    assert_ne!(before, after_style, "a new presentation, a new dictionary");
    // The previous one is still served to browsers that hold it.
    assert_eq!(get(r.addr, &before).status, 200);
}

#[test]
fn compression_dictionary_off_means_no_link_and_no_dictionary() {
    let r = start_with_settings("compression_dictionary = false\n");
    let page = get(r.addr, "/");
    assert_eq!(page.status, 200);
    assert!(page.header("link").is_none(), "{:?}", page.header("link"));
}

/// The stylesheet URL (`/_static/style.css?v=…`) the page at `path` links.
fn css_url(r: &Running, path: &str) -> String {
    let page = String::from_utf8(get(r.addr, path).bytes).unwrap();
    let page = page.replace("&#x2f;", "/");
    let at = page
        .find("/_static/style.css?v=")
        .expect("a versioned stylesheet");
    page[at..].split('"').next().unwrap().to_owned()
}

#[test]
fn a_restyled_stylesheet_goes_as_a_delta_of_the_one_the_browser_holds() {
    let r = start(false);
    let old_url = css_url(&r, "/");
    let old = get(r.addr, &old_url);
    let use_as = old.header("use-as-dictionary").expect("Use-As-Dictionary");
    assert!(use_as.contains("match=\"/_static/style.css\""), "{use_as}");
    assert!(use_as.contains("match-dest=(\"style\")"), "{use_as}");
    // A new edition of the stylesheet: one rule more.
    let mut new_css = String::from_utf8(old.bytes.clone()).unwrap();
    new_css.push_str("\n.callout { border-left: 3px solid #7a5; }\n");
    let css = r.vault.path().join(".quire/templates/style.css");
    std::fs::create_dir_all(css.parent().unwrap()).unwrap();
    std::fs::write(&css, &new_css).unwrap();
    quire_site::watch::republish(&r.site, &r.ctx);
    let new_url = css_url(&r, "/tags/");
    assert_ne!(old_url, new_url, "a new version, a new URL");
    let plain = get(r.addr, &new_url);
    assert_eq!(plain.bytes, new_css.as_bytes());
    let held = Dictionary::new(old.bytes.clone());
    let deadline = Instant::now() + Duration::from_secs(20);
    let delta = loop {
        let a = ask(&r, &new_url, "gzip, br, zstd, dcz", Some(&sf(&held)));
        if a.header("content-encoding") == Some("dcz") {
            break a;
        }
        assert!(Instant::now() < deadline, "never dcz: {:?}", a.headers);
        std::thread::sleep(Duration::from_millis(100));
    };
    let decoded = quire_server::compress::decode_dcz(&delta.bytes, &held, 1 << 24).unwrap();
    assert_eq!(decoded, new_css.as_bytes(), "decodes to the new stylesheet");
    let br = ask(&r, &new_url, "br", None);
    assert_eq!(br.header("content-encoding"), Some("br"));
    assert!(
        delta.bytes.len() * 4 < br.bytes.len(),
        "a delta of {} bytes against brotli's {}",
        delta.bytes.len(),
        br.bytes.len()
    );
}
