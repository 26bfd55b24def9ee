//! Signed-in readers' pages cached by audience, never by person, through
//! quire-server over real sockets: every reader of an audience gets the same stored
//! bytes, audiences never share an entry, and a cookie that names no session now
//! (signed out, forged) is never answered from one.

mod common;

use common::{copy_dir, example_vault, get, get_with, start_on, wait_for_audiences, Resp, Running};
use quire_vault::readers::{hash_password, write_user, Role};
use quire_vault::Visibility;

const FORM: &str = "Content-Type: application/x-www-form-urlencoded\r\n";

/// A second reader whose name appears nowhere else in the vault.
const ZELDA: (&str, &str) = ("zeldaquill", "zelda-test-password-1");

/// The example vault with a second reader, served.
fn start() -> Running {
    let vault = tempfile::tempdir().unwrap();
    copy_dir(&example_vault(), vault.path());
    let users = vault.path().join(".quire/users.toml");
    write_user(&users, ZELDA.0, Role::Reader, &hash_password(ZELDA.1)).unwrap();
    start_on(vault, false)
}

/// Signs `name` in; the `Cookie:` line for their session.
fn sign_in(r: &Running, name: &str, password: &str) -> String {
    let ok = get_with(
        r.addr,
        "POST",
        "/login",
        FORM,
        &format!("name={name}&password={password}&next=/"),
    );
    assert_eq!(ok.status, 303, "{name} signs in: {ok:?}");
    let pair = ok
        .headers
        .iter()
        .find(|(n, _)| n == "set-cookie")
        .and_then(|(_, v)| v.split(';').next())
        .expect("a session cookie")
        .to_owned();
    format!("Cookie: {pair}\r\n")
}

fn url_of(r: &Running, vis: Visibility) -> String {
    r.site
        .snapshot()
        .vault
        .notes()
        .iter()
        .find(|n| n.visibility() == vis)
        .expect("the example vault has one")
        .url
        .clone()
}

fn status(r: &Resp) -> &str {
    r.header("cache-status").unwrap_or("")
}

#[test]
fn signed_in_pages_are_cached_per_audience_never_per_person() {
    let r = start();
    let private = url_of(&r, Visibility::Private);
    let draft = url_of(&r, Visibility::Draft);
    let reader = sign_in(&r, "reader", "reader-demo-password");
    let zelda = sign_in(&r, ZELDA.0, ZELDA.1);
    let admin = sign_in(&r, "admin", "admin-demo-password");

    // The first signed-in request starts making the audiences' versions; until
    // they exist, signed-in requests bypass the cache as before.
    let first = get_with(r.addr, "GET", &private, &reader, "");
    assert_eq!(first.status, 200);
    wait_for_audiences(&r);

    let a = get_with(r.addr, "GET", &private, &zelda, "");
    assert_eq!(a.status, 200);
    assert!(status(&a).contains("audience-reader"), "{}", status(&a));
    assert_eq!(a.header("cache-control"), Some("private, no-cache"));
    assert!(
        a.header("surrogate-control").is_none(),
        "quire's lifetime is never sent on"
    );
    assert!(a.header("cdn-cache-control").is_none());
    assert!(!a.body.contains(ZELDA.0), "no name on a shared page");
    assert!(a.body.contains(">Account</a>"), "the account link instead");

    // Another reader: the same stored bytes (a hit off the fast path, counted).
    let counted = r.ctx.metrics.audience_requests();
    let b = get_with(r.addr, "GET", &private, &reader, "");
    assert_eq!(r.ctx.metrics.audience_requests(), counted + 1);
    assert!(b.hit(), "{}", status(&b));
    assert!(status(&b).contains("audience-reader"));
    assert_eq!(a.bytes, b.bytes, "every reader of an audience, one page");

    // The name is on /account, which is personal and never stored.
    let acct = get_with(r.addr, "GET", "/account", &zelda, "");
    assert_eq!(acct.status, 200);
    assert!(acct.body.contains(ZELDA.0));
    assert!(acct.header("cache-control").unwrap().contains("no-store"));
    let again = get_with(r.addr, "GET", "/account", &zelda, "");
    assert!(!again.hit() && again.body.contains(ZELDA.0));
    let theirs = get_with(r.addr, "GET", "/account", &reader, "");
    assert!(!theirs.body.contains(ZELDA.0), "each reader their own");
    assert_eq!(
        get(r.addr, "/account").status,
        303,
        "strangers sign in first"
    );

    // Admins: an entry of their own, which readers never get.
    let ad = get_with(r.addr, "GET", &private, &admin, "");
    assert!(!ad.hit(), "not the readers' entry: {}", status(&ad));
    assert!(status(&ad).contains("audience-admin"));
    assert!(get_with(r.addr, "GET", &private, &admin, "").hit());
    let d = get_with(r.addr, "GET", &draft, &admin, "");
    assert_eq!(d.status, 200);
    assert!(get_with(r.addr, "GET", &draft, &admin, "").hit());
    assert_eq!(
        get_with(r.addr, "GET", &draft, &reader, "").status,
        404,
        "drafts stay admins'"
    );

    // Strangers never get an audience's entry.
    let anon = get(r.addr, &private);
    assert_eq!(anon.status, 404);
    assert!(!status(&anon).contains("audience"));

    // A forged cookie and a signed-out one name no audience: bypassed, answered as
    // anonymous, never from the readers' entry.
    let forged = reader.replace("\r\n", "x\r\n");
    let f = get_with(r.addr, "GET", &private, &forged, "");
    assert_eq!(f.status, 404);
    assert!(status(&f).contains("fwd=bypass"), "{}", status(&f));
    let out = get_with(r.addr, "POST", "/logout", &zelda, "");
    assert_eq!(out.status, 303);
    let gone = get_with(r.addr, "GET", &private, &zelda, "");
    assert_eq!(gone.status, 404, "a signed-out cookie reads nothing");
    assert!(status(&gone).contains("fwd=bypass"), "{}", status(&gone));
    // The reader who stayed signed in still hits.
    assert!(get_with(r.addr, "GET", &private, &reader, "").hit());
}

/// A browser that cached the anonymous page and then signs in must not get a 304
/// for it: audiences' versions (their `ETag`s) never equal an anonymous one.
#[test]
fn an_anonymous_etag_never_validates_an_audience_page() {
    let r = start();
    let public = r
        .site
        .snapshot()
        .vault
        .notes()
        .iter()
        .find(|n| n.visibility() == Visibility::Public)
        .unwrap()
        .url
        .clone();
    let anon = get(r.addr, &public);
    let etag = anon.header("etag").expect("an ETag").to_owned();
    let reader = sign_in(&r, "reader", "reader-demo-password");
    let _ = get_with(r.addr, "GET", &public, &reader, "");
    wait_for_audiences(&r);
    let filled = get_with(r.addr, "GET", &public, &reader, "");
    assert_ne!(filled.header("etag"), Some(etag.as_str()));
    let cond = format!("{reader}If-None-Match: {etag}\r\n");
    let resp = get_with(r.addr, "GET", &public, &cond, "");
    assert_eq!(
        resp.status, 200,
        "the reader's page, not the stranger's 304"
    );
    assert!(resp.hit());
}

/// An edit of a private note changes the readers' and admins' versions of exactly
/// the pages that show it, and the anonymous versions not at all; the next reader
/// request renders the new text.
#[test]
fn an_edit_changes_exactly_the_audience_pages_that_show_it() {
    let r = start();
    let reader = sign_in(&r, "reader", "reader-demo-password");
    let _ = get_with(r.addr, "GET", "/", &reader, "");
    wait_for_audiences(&r);
    let before = r.site.snapshot();
    let (path, url) = {
        let n = before
            .vault
            .notes()
            .iter()
            .find(|n| n.visibility() == Visibility::Private)
            .unwrap();
        (n.path.clone(), n.url.clone())
    };
    let old = get_with(r.addr, "GET", &url, &reader, "");
    assert!(get_with(r.addr, "GET", &url, &reader, "").hit());
    let file = r.vault.path().join(&path);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text}\n\nA line added: marmalade-17.\n")).unwrap();
    let changes = r.site.reload_changes().unwrap();
    assert!(changes.public.is_empty(), "{:?}", changes.public);
    let tag = |aud| quire_site::reply::audience_tag(&quire_site::reply::path_tag(&url), aud);
    assert!(changes.signed_in.contains(&tag(Visibility::Private)));
    assert!(changes.signed_in.contains(&tag(Visibility::Draft)));
    let after = r.site.snapshot();
    assert_eq!(before.versions, after.versions, "no anonymous page changed");
    let (rb, ra) = (
        before.signed_in_versions(Visibility::Private).unwrap(),
        after
            .signed_in_versions(Visibility::Private)
            .expect("made with the reload"),
    );
    assert_ne!(rb.pages.get(&url), ra.pages.get(&url), "the note's page");
    let unchanged = rb
        .pages
        .iter()
        .filter(|(p, v)| ra.pages.get(*p) == Some(v))
        .count();
    assert!(
        unchanged * 2 > rb.pages.len(),
        "most reader pages keep their version: {unchanged} of {}",
        rb.pages.len()
    );
    assert!(
        ra.rendered < rb.rendered.max(2),
        "only what changed re-rendered"
    );
    let new = get_with(r.addr, "GET", &url, &reader, "");
    assert!(!new.hit(), "a new version is a new key");
    assert!(new.body.contains("marmalade-17"));
    assert!(!old.body.contains("marmalade-17"));
}

/// After an edit, a page a reader asked for is rendered again for the readers'
/// audience before anyone asks; the first signed-in request after the edit is a hit
/// with the new text.
#[test]
fn an_edit_renders_again_the_audience_pages_readers_asked_for() {
    use quire_server::metrics::Prefilled;
    let r = start();
    let prefill = {
        let _in = r._rt.enter();
        quire_server::prefill::Prefill::start(r.ctx.clone())
    };
    assert!(r.site.prefill_with(prefill.clone()));
    let reader = sign_in(&r, "reader", "reader-demo-password");
    let _ = get_with(r.addr, "GET", "/", &reader, "");
    wait_for_audiences(&r);
    let (path, url) = {
        let snap = r.site.snapshot();
        let n = snap
            .vault
            .notes()
            .iter()
            .find(|n| n.visibility() == Visibility::Private)
            .unwrap();
        (n.path.clone(), n.url.clone())
    };
    // A reader asks: the fill for the readers' audience is remembered.
    let _ = get_with(r.addr, "GET", &url, &reader, "");
    assert!(get_with(r.addr, "GET", &url, &reader, "").hit());
    let settled = |r: &Running| {
        let t0 = std::time::Instant::now();
        let taken = |r: &Running| -> u64 {
            Prefilled::ALL
                .iter()
                .map(|p| r.ctx.metrics.prefills(*p))
                .sum()
        };
        let mut last = (taken(r), std::time::Instant::now());
        loop {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let now = taken(r);
            if now != last.0 {
                last = (now, std::time::Instant::now());
            } else if prefill.waiting() == 0 && last.1.elapsed().as_millis() > 500 {
                return;
            }
            assert!(t0.elapsed().as_secs() < 60, "prefill never settled");
        }
    };
    settled(&r);
    let stored = r.ctx.metrics.prefills(Prefilled::Stored);
    let file = r.vault.path().join(&path);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text}\n\nRendered ahead: quince-88.\n")).unwrap();
    quire_site::watch::republish(&r.site, &r.ctx);
    settled(&r);
    assert!(r.ctx.metrics.prefills(Prefilled::Stored) > stored);
    let resp = get_with(r.addr, "GET", &url, &reader, "");
    assert!(
        resp.hit() && status(&resp).contains("audience-reader"),
        "the first reader after the edit: {}",
        status(&resp)
    );
    assert!(resp.body.contains("quince-88"), "with the new text");
    assert!(!resp.body.contains("Reader Demo"), "nothing personal");
}
