//! `quire serve` end to end: a copy of the bundled example vault served by a real
//! quire server on a loopback port, talked to over real sockets.

mod common;

use std::time::{Duration, Instant};

use common::*;
use quire_site::Site;

/// A public note that a public note links to: its index and URL.
fn public_linked_note(site: &Site) -> (usize, String) {
    let snap = site.snapshot();
    let v = &snap.vault;
    let public = |i: usize| v.notes()[i].visibility() == quire_vault::Visibility::Public;
    let i = (0..v.notes().len())
        .find(|&i| public(i) && v.backlinks(i).iter().any(|&j| public(j)))
        .expect("a linked public note");
    (i, v.notes()[i].url.clone())
}

#[test]
fn pages_render_once_then_hit() {
    let r = start(false);
    let note_url = public_linked_note(&r.site).1;
    for path in [
        "/",
        "/tags/",
        "/caching/",
        note_url.as_str(),
        "/feed.xml",
        "/sitemap.xml",
    ] {
        let a = get(r.addr, path);
        assert_eq!(a.status, 200, "{path}: {a:?}");
        assert!(!a.hit(), "{path}: first request renders");
        assert!(
            a.header("cache-status")
                .is_some_and(|c| c.contains("stored")),
            "{path}: {:?}",
            a.header("cache-status")
        );
        let before = r.site.renders();
        // The first answer was committed before it was sent: the next request is a
        // hit at once.
        let b = get(r.addr, path);
        assert!(b.hit(), "{path}: {:?}", b.header("cache-status"));
        assert_eq!(b.status, 200, "{path}");
        assert_eq!(r.site.renders(), before, "{path}: a hit does not render");
        assert_eq!(a.body, b.body, "{path}");
        assert!(b.header("etag").is_some(), "{path}");
    }
    let note = get(r.addr, &note_url);
    assert!(
        note.body.contains("<html"),
        "{}",
        &note.body[..200.min(note.body.len())]
    );
    assert!(note.header("content-security-policy").is_some());
}

#[test]
fn unique_queries_on_a_page_are_one_key_and_one_render() {
    // Pages do not read their query string: `?u=1`, `?u=2`, … are one cached page,
    // so a client cannot buy a render and a compression per request with them.
    let r = start(false);
    let note_url = public_linked_note(&r.site).1;
    let first = get(r.addr, &format!("{note_url}?u=0"));
    assert_eq!(first.status, 200);
    let before = r.site.renders();
    for u in 1..40 {
        let a = get(r.addr, &format!("{note_url}?u={u}"));
        assert!(a.hit(), "?u={u}: {:?}", a.header("cache-status"));
        assert_eq!(a.body, first.body);
    }
    assert_eq!(r.site.renders(), before, "no render for a new query");
    // Search still reads its query.
    let a = get(r.addr, "/search?q=cache");
    let b = get(r.addr, "/search?q=vault");
    assert_ne!(a.body, b.body);
}

#[test]
fn private_notes_never_reach_anonymous_readers() {
    let r = start(false);
    let snap = r.site.snapshot();
    let hidden: Vec<(String, String)> = snap
        .vault
        .notes()
        .iter()
        .filter(|n| n.visibility() != quire_vault::Visibility::Public)
        .map(|n| (n.url.clone(), n.title().to_owned()))
        .collect();
    assert!(hidden.len() >= 10, "the example vault has private notes");
    let mut everything = String::new();
    for path in ["/", "/tags/", "/feed.xml", "/sitemap.xml", "/private/"] {
        everything.push_str(&get(r.addr, path).body);
    }
    for tag in snap.versions.keys().filter(|p| p.starts_with("/tags/")) {
        everything.push_str(&get(r.addr, tag).body);
    }
    // Every public note page too: links, backlinks and related notes.
    let mut related_sections = 0;
    for n in snap
        .vault
        .notes()
        .iter()
        .filter(|n| n.visibility() == quire_vault::Visibility::Public)
    {
        let page = get(r.addr, &n.url).body;
        related_sections += usize::from(page.contains("id=\"related\""));
        everything.push_str(&page);
    }
    assert!(related_sections > 10, "public notes list related notes");
    // minijinja writes `/` as `&#x2f;` in attributes: compare both spellings.
    let everything = everything.replace("&#x2f;", "/");
    for (url, title) in &hidden {
        let page = get(r.addr, url);
        assert_eq!(page.status, 404, "{url}");
        assert!(!page.body.contains(title.as_str()), "{url}: title leaked");
        assert!(
            !everything.contains(&format!("\"{url}\"")),
            "{url} linked somewhere public"
        );
        assert!(
            !everything.contains(&format!("{url}<")),
            "{url} in the feed or sitemap"
        );
    }
}

#[test]
fn attachments_are_immutable_when_versioned_and_hidden_when_unreferenced() {
    let r = start(false);
    let snap = r.site.snapshot();
    let (name, version) = snap
        .vault
        .attachments()
        .find(|(n, _, _)| {
            snap.attachment_audience.get(*n) == Some(&quire_vault::Visibility::Public)
        })
        .map(|(n, _, v)| (n.to_owned(), v))
        .expect("a public attachment");
    let url = quire_vault::render::attachment_url(&name);
    let a = get(r.addr, &format!("{url}?v={version:016x}"));
    assert_eq!(a.status, 200);
    assert!(a.header("cache-control").unwrap().contains("immutable"));
    let b = get(r.addr, &url);
    assert_eq!(b.status, 200);
    assert!(!b.header("cache-control").unwrap().contains("immutable"));
    std::fs::write(r.vault.path().join("stray.png"), b"not referenced").unwrap();
    r.site.reload().unwrap();
    assert_eq!(get(r.addr, "/attachments/stray.png").status, 404);
    assert_eq!(
        get(r.addr, "/attachments/..%2F.quire%2Fusers.toml").status,
        404
    );
}

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

#[test]
fn an_edit_changes_exactly_the_pages_that_show_it() {
    let r = start(true);
    // Warm a few pages: the edited note, a note linking to it, an unrelated note.
    let snap = r.site.snapshot();
    let v = &snap.vault;
    let (target, target_url) = public_linked_note(&r.site);
    let unrelated = v
        .notes()
        .iter()
        .position(|n| {
            n.visibility() == quire_vault::Visibility::Public
                && n.path.starts_with("Kitchen/")
                && !v.backlinks(target).contains(&v.by_url(&n.url).unwrap())
        })
        .unwrap();
    let unrelated_url = v.notes()[unrelated].url.clone();
    for p in [target_url.as_str(), unrelated_url.as_str(), "/"] {
        get(r.addr, p);
        within(Duration::from_secs(3), || get(r.addr, p).hit()).expect("warmed");
    }
    let path = r.vault.path().join(&v.notes()[target].path);
    let text = std::fs::read_to_string(&path).unwrap();
    drop(snap);
    let marker = "Edited by the watcher test.";
    std::fs::write(&path, format!("{text}\n\n{marker}\n")).unwrap();
    within(Duration::from_secs(5), || {
        get(r.addr, &target_url).body.contains(marker)
    })
    .expect("the edit is served");
    assert!(
        get(r.addr, &unrelated_url).hit(),
        "an unrelated page stays cached"
    );
    assert!(
        get(r.addr, "/").hit(),
        "the index shows no body text: still cached"
    );
    // Renaming the title changes the index too.
    let retitled = text.replacen("title: ", "title: Renamed ", 1);
    assert_ne!(retitled, text, "the note has a title line");
    std::fs::write(&path, retitled).unwrap();
    within(Duration::from_secs(5), || {
        get(r.addr, "/").body.contains("Renamed ")
    })
    .expect("the index shows the new title");
    let _ = &r.ctx;
}

#[test]
fn concurrent_first_requests_render_once() {
    let r = start(false);
    let before = r.site.renders();
    let addr = r.addr;
    let threads: Vec<_> = (0..8)
        .map(|_| std::thread::spawn(move || get(addr, "/caching/").status))
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 200);
    }
    assert_eq!(
        r.site.renders() - before,
        1,
        "one render for eight requests"
    );
}

#[test]
fn hostile_requests_get_clear_answers() {
    let r = start(false);
    assert_eq!(get(r.addr, "/%00%ff/x").status, 404);
    assert_eq!(
        get(r.addr, "/a/../../..").status,
        200,
        "dot segments resolve to /"
    );
    assert_eq!(get(r.addr, "/tags/%3Cscript%3E").status, 404);
    let big = "x".repeat(64 * 1024);
    let resp = get_with(
        r.addr,
        "POST",
        "/login",
        "Content-Type: application/x-www-form-urlencoded\r\n",
        &big,
    );
    assert!(matches!(resp.status, 413 | 400), "{}", resp.status);
    assert_eq!(get_with(r.addr, "DELETE", "/", "", "").status, 405);
}

/// The `quire_session=...` pair from a sign-in answer.
fn session(resp: &Resp) -> Option<String> {
    resp.headers
        .iter()
        .find(|(n, _)| n == "set-cookie")
        .and_then(|(_, v)| v.split(';').next())
        .map(str::to_owned)
}

#[test]
fn readers_sign_in_see_private_notes_and_bypass_the_cache() {
    let r = start(false);
    let snap = r.site.snapshot();
    let private = snap
        .vault
        .notes()
        .iter()
        .find(|n| n.visibility() == quire_vault::Visibility::Private)
        .unwrap();
    let draft = snap
        .vault
        .notes()
        .iter()
        .find(|n| n.visibility() == quire_vault::Visibility::Draft)
        .unwrap();
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let bad = get_with(
        r.addr,
        "POST",
        "/login",
        form,
        "name=reader&password=wrong&next=/",
    );
    assert_eq!(bad.status, 200);
    assert!(session(&bad).is_none(), "no cookie for a wrong password");
    let ok = get_with(
        r.addr,
        "POST",
        "/login",
        form,
        &format!(
            "name=reader&password=reader-demo-password&next={}",
            private.url
        ),
    );
    assert_eq!(ok.status, 303, "{ok:?}");
    assert_eq!(ok.header("location"), Some(private.url.as_str()));
    let cookie = session(&ok).expect("a session cookie");
    let with = format!("Cookie: {cookie}\r\n");
    let page = get_with(r.addr, "GET", &private.url, &with, "");
    assert_eq!(page.status, 200, "a reader sees a private note");
    assert!(page
        .body
        .contains(&quire_vault::render::escape(private.title())));
    assert!(page.header("cache-control").unwrap().contains("no-store"));
    assert!(!page.hit());
    assert_eq!(
        get(r.addr, &private.url).status,
        404,
        "still hidden from strangers"
    );
    assert_eq!(
        get_with(r.addr, "GET", &draft.url, &with, "").status,
        404,
        "drafts are for admins"
    );
    // A forged cookie is nobody.
    let forged = format!("Cookie: {}x\r\n", cookie);
    assert_eq!(
        get_with(r.addr, "GET", &private.url, &forged, "").status,
        404
    );
    let out = get_with(r.addr, "POST", "/logout", &with, "");
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
}

/// Signing out used to clear the cookie in the browser only: a copy kept working until
/// it expired. Now the copy is refused at once, and after a restart; readers who did
/// not sign out stay signed in across it.
#[test]
fn signed_out_cookie_is_refused() {
    let r = start(false);
    let snap = r.site.snapshot();
    let private = snap
        .vault
        .notes()
        .iter()
        .find(|n| n.visibility() == quire_vault::Visibility::Private)
        .unwrap()
        .url
        .clone();
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let sign_in = |r: &Running, who: &str| {
        let ok = get_with(r.addr, "POST", "/login", form, who);
        format!("Cookie: {}\r\n", session(&ok).expect("a session cookie"))
    };
    let copy = sign_in(&r, "name=reader&password=reader-demo-password");
    let admin = sign_in(&r, "name=admin&password=admin-demo-password");
    assert_eq!(get_with(r.addr, "GET", &private, &copy, "").status, 200);
    let out = get_with(r.addr, "POST", "/logout", &copy, "");
    assert_eq!(out.status, 303);
    assert_eq!(
        get_with(r.addr, "GET", &private, &copy, "").status,
        404,
        "the copied cookie no longer signs in"
    );
    assert_eq!(get_with(r.addr, "GET", &private, &admin, "").status, 200);

    let r = restart(r);
    assert_eq!(
        get_with(r.addr, "GET", &private, &copy, "").status,
        404,
        "nor after a restart"
    );
    assert_eq!(
        get_with(r.addr, "GET", &private, &admin, "").status,
        200,
        "others stay signed in across a restart"
    );
    // A page on another site cannot sign a reader out (nor in).
    let cross = format!("{admin}Sec-Fetch-Site: cross-site\r\n");
    assert_eq!(get_with(r.addr, "POST", "/logout", &cross, "").status, 403);
    assert_eq!(get_with(r.addr, "GET", &private, &admin, "").status, 200);
}

/// A throttled sign-in is a 429 that says when to try again, through quire-server.
#[test]
fn lockout_answers_retry_after() {
    let r = start(false);
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let attempt = || get_with(r.addr, "POST", "/login", form, "name=admin&password=guess");
    for _ in 0..5 {
        assert_eq!(attempt().status, 200);
    }
    let refused = attempt();
    assert_eq!(refused.status, 429);
    let secs: u64 = refused
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("delay-seconds");
    assert!((1..=30).contains(&secs), "{secs}");
    assert!(refused
        .header("cache-control")
        .unwrap()
        .contains("no-store"));
}

/// The sign-in form's hidden `next` value, HTML escapes of `/` undone.
fn form_next(html: &str) -> String {
    let (_, rest) = html
        .split_once(r#"name="next" value=""#)
        .expect("a next field");
    rest.split('"').next().unwrap_or("").replace("&#x2f;", "/")
}

/// `next` reaches the redirect after signing in two ways: the query of `GET /login`
/// (put into the form's hidden field) and the form field of `POST /login`. A tab in
/// it (`/\t/evil.example`, which browsers read as `//evil.example`) must leave the
/// site by neither.
#[test]
fn open_redirect_via_tab_is_refused() {
    let r = start(false);
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    for hostile in [
        "%2F%09%2Fevil.example",
        "%2F%2509%2Fevil.example",
        "%2F%5Cevil.example",
    ] {
        let page = get(r.addr, &format!("/login?next={hostile}"));
        assert_eq!(page.status, 200);
        assert_eq!(form_next(&page.body), "/", "{hostile}: the form's next");
    }
    for hostile in [
        "%2F%09%2Fevil.example",
        "%2F%2F%09evil.example",
        "%2F%5Cevil.example",
    ] {
        let wrong = get_with(
            r.addr,
            "POST",
            "/login",
            form,
            &format!("name=reader&password=wrong&next={hostile}"),
        );
        assert_eq!(
            form_next(&wrong.body),
            "/",
            "{hostile}: the form shown again"
        );
    }
    let ok = get_with(
        r.addr,
        "POST",
        "/login",
        form,
        "name=reader&password=reader-demo-password&next=%2F%09%2Fevil.example",
    );
    assert_eq!(ok.status, 303);
    assert_eq!(ok.header("location"), Some("/"));
    let good = get_with(
        r.addr,
        "POST",
        "/login",
        form,
        "name=reader&password=reader-demo-password&next=%2Fnotes%2Fa%3Fx%3D1%23y",
    );
    assert_eq!(good.header("location"), Some("/notes/a?x=1#y"));
}

/// Pages that bypass the cache are compressed per request into a coding the client
/// accepts, and decode to exactly the page an identity request gets.
#[test]
fn bypassing_pages_are_compressed_per_request() {
    // Signed-in pages bypass the cache when `cache_signed_in` is off.
    let r = common::start_with_settings("cache_signed_in = false");
    let is_private = |n: &&quire_vault::Note| n.visibility() == quire_vault::Visibility::Private;
    let private = r
        .site
        .snapshot()
        .vault
        .notes()
        .iter()
        .find(is_private)
        .unwrap()
        .url
        .clone();
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let body = "name=reader&password=reader-demo-password&next=/";
    let cookie = session(&get_with(r.addr, "POST", "/login", form, body)).expect("a session");
    let identity = get_with(
        r.addr,
        "GET",
        &private,
        &format!("Cookie: {cookie}\r\n"),
        "",
    );
    assert_eq!(identity.status, 200);
    assert_eq!(identity.header("content-encoding"), None);
    for (accept, coding) in [
        ("gzip", quire_http::encoding::Coding::Gzip),
        ("gzip, br", quire_http::encoding::Coding::Br),
        ("zstd;q=1, gzip;q=0.5", quire_http::encoding::Coding::Zstd),
    ] {
        let extra = format!("Cookie: {cookie}\r\nAccept-Encoding: {accept}\r\n");
        let page = get_with(r.addr, "GET", &private, &extra, "");
        assert_eq!(page.status, 200);
        assert!(!page.hit());
        assert_eq!(
            page.header("content-encoding"),
            Some(coding.token()),
            "{accept}"
        );
        // Every `Vary` line: a note's page names `Accept` on one of its own.
        assert!(page
            .headers
            .iter()
            .any(|(n, v)| n == "vary" && v.to_ascii_lowercase().contains("accept-encoding")));
        assert!(page.header("cache-control").unwrap().contains("no-store"));
        assert!(
            page.bytes.len() * 2 < identity.bytes.len(),
            "{accept}: compressed"
        );
        let decoded = quire_server::compress::decode(coding, &page.bytes, 1 << 24).unwrap();
        assert_eq!(decoded, identity.bytes, "{accept}: the same page");
    }
    // A client that accepts no coding gets identity.
    let extra = format!("Cookie: {cookie}\r\nAccept-Encoding: identity\r\n");
    let page = get_with(r.addr, "GET", &private, &extra, "");
    assert_eq!(page.header("content-encoding"), None);
    assert_eq!(page.bytes, identity.bytes);
}

#[test]
fn views_are_counted_on_hits_and_admins_see_them() {
    let r = start(false);
    let (i, url) = public_linked_note(&r.site);
    let path = r.site.snapshot().vault.notes()[i].path.clone();
    for _ in 0..5 {
        assert_eq!(get(r.addr, &url).status, 200);
    }
    r.site.flush();
    assert_eq!(
        r.site.views().count(&path).unwrap(),
        5,
        "misses and hits alike"
    );
    assert_eq!(get(r.addr, "/_views").status, 404, "not for strangers");
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let ok = get_with(
        r.addr,
        "POST",
        "/login",
        form,
        "name=admin&password=admin-demo-password",
    );
    let with = format!("Cookie: {}\r\n", session(&ok).expect("admin cookie"));
    let page = get_with(r.addr, "GET", "/_views", &with, "");
    assert_eq!(page.status, 200);
    // (minijinja escapes `/` in attribute values)
    assert!(
        page.body.contains(&url.replace('/', "&#x2f;")),
        "the views page lists the note"
    );
}

#[test]
fn search_finds_public_notes_only_and_survives_hostile_queries() {
    let r = start(false);
    let snap = r.site.snapshot();
    let (i, url) = public_linked_note(&r.site);
    let title = snap.vault.notes()[i].title().to_owned();
    let q = title.replace(' ', "+");
    let api = get(r.addr, &format!("/api/search?q={q}"));
    assert_eq!(api.status, 200);
    let json: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    let urls: Vec<&str> = json["hits"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["url"].as_str())
        .collect();
    assert!(urls.contains(&url.as_str()), "{title}: {urls:?}");
    for n in snap
        .vault
        .notes()
        .iter()
        .filter(|n| n.visibility() != quire_vault::Visibility::Public)
    {
        let q = n.title().replace(' ', "+");
        let body = get(r.addr, &format!("/api/search?q={q}")).body;
        assert!(
            !body.contains(&format!("\"{}\"", n.url)),
            "{} found by strangers",
            n.url
        );
    }
    for hostile in [
        "%22unbalanced",
        "NEAR(a+b)",
        "*",
        "a+OR+",
        "%00%01",
        "-",
        "%3Cscript%3E",
    ] {
        let mut page = get(r.addr, &format!("/search?q={hostile}"));
        if page.status == 301 {
            // Asked again by its canonical spelling.
            let to = page.header("location").unwrap().to_owned();
            assert!(to.starts_with("/search?q="), "{hostile}: {to}");
            page = get(r.addr, &to);
        }
        assert_eq!(page.status, 200, "{hostile}");
        assert!(!page.body.contains("<script>"), "{hostile}");
    }
}

/// Spellings of one query share one stored answer: each redirects to the canonical
/// spelling, whose answer is searched once and then a hit.
#[test]
fn spellings_of_a_search_share_one_stored_answer() {
    let r = start(false);
    let first = get(r.addr, "/search?q=Write-Ahead%20%20LOG");
    assert_eq!(first.status, 301);
    let to = first.header("location").unwrap().to_owned();
    assert_eq!(to, "/search?q=%22write+ahead%22+log");
    let answer = get(r.addr, &to);
    assert_eq!(answer.status, 200);
    let renders = r.site.renders();
    for spelling in [
        "WRITE-AHEAD+log",
        "write-ahead+LOG+log",
        "%22Write+Ahead%22++Log",
    ] {
        let again = get(r.addr, &format!("/search?q={spelling}"));
        assert_eq!(again.status, 301, "{spelling}");
        assert_eq!(again.header("location"), Some(to.as_str()), "{spelling}");
        let answered = get(r.addr, &to);
        assert!(
            answered.hit(),
            "{spelling}: {:?}",
            answered.header("cache-status")
        );
        assert_eq!(answered.body, answer.body);
    }
    assert_eq!(
        r.site.renders(),
        renders + 3,
        "one redirect each, no search"
    );
    // The JSON API answers as asked.
    assert_eq!(get(r.addr, "/api/search?q=Write-Ahead").status, 200);
}

#[test]
fn large_attachments_stream_whole() {
    let r = start(false);
    let big: String = (0..300_000).map(|i| format!("{:09}\n", i)).collect();
    assert!(big.len() > 2 << 20);
    std::fs::write(r.vault.path().join("big.txt"), &big).unwrap();
    std::fs::write(
        r.vault.path().join("Big file.md"),
        "---\nfree: true\n---\nThe log: ![[big.txt]]\n",
    )
    .unwrap();
    r.site.reload().unwrap();
    for _ in 0..2 {
        let a = get(r.addr, "/attachments/big.txt");
        assert_eq!(a.status, 200);
        assert_eq!(a.body.len(), big.len());
        assert!(a.body == big, "the bytes are the file's");
    }
}

#[test]
fn editing_an_embedded_note_changes_exactly_the_pages_that_embed_it() {
    let free = "---\nfree: true\n---\n";
    let files = [
        ("Shared.md", format!("{free}# Shared\nshared-old\n")),
        ("Direct.md", format!("{free}direct text\n\n![[Shared]]\n")),
        (
            "Middle.md",
            format!("{free}middle text\n\n![[Shared#Shared]]\n"),
        ),
        ("Chain.md", format!("{free}chain text\n\n![[Middle]]\n")),
        ("Linker.md", format!("{free}only a link to [[Shared]]\n")),
        ("Other.md", format!("{free}unrelated text\n")),
    ];
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let r = start_with(&refs, true);
    let embedding = ["/direct", "/middle", "/chain"];
    let untouched = ["/linker", "/other"];
    for p in embedding.iter().chain(&untouched).chain(&["/shared"]) {
        let first = get(r.addr, p);
        assert_eq!(first.status, 200, "{p}");
        within(Duration::from_secs(3), || get(r.addr, p).hit()).expect("warmed");
    }
    for p in embedding {
        assert!(
            get(r.addr, p).body.contains("shared-old"),
            "{p} transcludes"
        );
    }
    let before = r.site.snapshot();
    std::fs::write(
        r.vault.path().join("Shared.md"),
        format!("{free}# Shared\nshared-new, longer\n"),
    )
    .unwrap();
    let took = within(Duration::from_secs(1), || {
        embedding
            .iter()
            .all(|p| get(r.addr, p).body.contains("shared-new"))
    })
    .expect("every embedding page shows the edit within a second");
    eprintln!("embedding pages changed after {took:?}");
    let after = r.site.snapshot();
    for p in untouched {
        assert_eq!(
            before.versions.get(p),
            after.versions.get(p),
            "{p} keeps its version"
        );
        assert!(get(r.addr, p).hit(), "{p} is not purged");
    }
    for p in embedding {
        assert_ne!(before.versions.get(p), after.versions.get(p), "{p}");
    }
    let _ = &r.ctx;
}

#[test]
fn private_note_embed_never_reaches_an_anonymous_page() {
    let files = [
        (
            "Home.md",
            "---\nfree: true\n---\nintro\n\n![[Secret]]\n\n![[Gone]]\n",
        ),
        ("Secret.md", "# Plans\nthe-secret-text\n"),
    ];
    let r = start_with(&files, false);
    let page = get(r.addr, "/home");
    assert_eq!(page.status, 200);
    assert!(!page.body.contains("the-secret-text"), "{}", page.body);
    assert!(!page.body.contains("/secret"), "{}", page.body);
    assert_eq!(
        page.body
            .matches("<span class=\"wikilink broken\">")
            .count(),
        2,
        "the private note shows as the missing one does"
    );
}

#[test]
fn aliases_answer_a_permanent_redirect_to_the_note() {
    let files = [
        (
            "Caching/Stale While Revalidate.md",
            "---\nfree: true\naliases: [SWR, Old Notes/Stale, Other, \"//evil.example\", \"../x\"]\n---\nSee [[Home]].\n",
        ),
        ("Other.md", "---\nfree: true\n---\nI keep my page.\n"),
        ("Home.md", "---\nfree: true\n---\n[[SWR]] goes to the note.\n"),
        ("Secret.md", "---\naliases: [Hidden Alias]\n---\nshh\n"),
    ];
    let r = start_with(&files, false);
    for from in ["/swr", "/old-notes/stale"] {
        let a = get(r.addr, from);
        assert_eq!(a.status, 301, "{from}: {a:?}");
        assert_eq!(
            a.header("location"),
            Some("/caching/stale-while-revalidate"),
            "{from}: a path on this site"
        );
        let b = get(r.addr, from);
        assert_eq!(b.status, 301);
        assert!(b.hit(), "{from}: the redirect is cached");
    }
    assert_eq!(get(r.addr, "/other").status, 200, "the note's page wins");
    assert!(get(r.addr, "/other").body.contains("I keep my page."));
    for hostile in ["//evil.example", "/evil-example", "/x", "/..%2Fx"] {
        let a = get(r.addr, hostile);
        assert_ne!(a.status, 301, "{hostile}");
        assert!(a.header("location").is_none(), "{hostile}");
    }
    assert_eq!(
        get(r.addr, "/hidden-alias").status,
        404,
        "a private note's alias is the 404 of a missing page"
    );
    let home = get(r.addr, "/home").body.replace("&#x2f;", "/");
    assert!(
        home.contains("href=\"/caching/stale-while-revalidate\""),
        "a wikilink to an alias reaches the note"
    );
    let sitemap = get(r.addr, "/sitemap.xml").body;
    assert!(!sitemap.contains("/swr<"), "{sitemap}");
}

/// The value of `<meta property|name="{key}" content="…">` in `html`, entities as
/// written.
fn meta(html: &str, key: &str) -> Option<String> {
    let needle = format!("=\"{key}\" content=\"");
    let rest = &html[html.find(&needle)? + needle.len()..];
    Some(rest[..rest.find('"')?].to_owned())
}

#[test]
fn link_previews_come_from_front_matter_and_the_sites_own_origin() {
    let files = [
        (
            "Garden/Tomatoes.md",
            "---\nfree: true\ntitle: Growing tomatoes\nlang: fr-CA\ncover: '[[Plant.png]]'\n---\nFirst paragraph about *tomatoes* and [[Soil]].\n\nSecond.\n",
        ),
        ("att/plant.png", "png"),
        ("Soil.md", "---\nfree: true\n---\nPlain.\n"),
    ];
    let r = start_with(&files, false);
    let page = get(r.addr, "/garden/tomatoes").body.replace("&#x2f;", "/");
    assert!(page.contains("<html lang=\"fr-CA\">"), "{page}");
    assert_eq!(meta(&page, "og:title").as_deref(), Some("Growing tomatoes"));
    assert_eq!(
        meta(&page, "og:description").as_deref(),
        Some("First paragraph about tomatoes and Soil.")
    );
    assert_eq!(
        meta(&page, "og:url").as_deref(),
        Some("http://site.test/garden/tomatoes")
    );
    assert_eq!(meta(&page, "og:type").as_deref(), Some("article"));
    assert_eq!(
        meta(&page, "twitter:card").as_deref(),
        Some("summary_large_image")
    );
    let image = meta(&page, "og:image").unwrap();
    assert!(
        image.starts_with("http://site.test/attachments/plant.png?v="),
        "{image}"
    );
    let path = image.trim_start_matches("http://site.test");
    assert_eq!(get(r.addr, path).status, 200, "the preview image is public");
    assert!(page.contains("<link rel=\"canonical\" href=\"http://site.test/garden/tomatoes\">"));
    assert!(page.contains(
        "<link rel=\"alternate\" hreflang=\"fr-CA\" href=\"http://site.test/garden/tomatoes\">"
    ));
    let soil = get(r.addr, "/soil").body;
    assert!(soil.contains("<html lang=\"en\">"), "the site's language");
    assert_eq!(meta(&soil, "twitter:card").as_deref(), Some("summary"));
    assert!(!soil.contains("hreflang"));
}

#[test]
fn hostile_front_matter_is_escaped_in_every_preview_attribute() {
    let files = [(
        "Evil.md",
        "---\nfree: true\ntitle: '\"><script>alert(1)</script>'\ndescription: \"x\\\" onmouseover='alert(2)' <b>\"\nimage: 'https://evil.example/x.png'\n---\nbody\n",
    )];
    let r = start_with(&files, false);
    let page = get(r.addr, "/evil");
    assert_eq!(page.status, 200);
    let head = &page.body[..page.body.find("</head>").unwrap()];
    assert!(!head.contains("<script>"), "{head}");
    assert!(!head.contains("\" onmouseover"), "{head}");
    assert!(!head.contains("<b>"), "{head}");
    assert!(
        !head.contains("evil.example"),
        "no host from front matter: {head}"
    );
    assert!(head.contains("&lt;script&gt;"), "{head}");
    assert!(meta(head, "og:image").is_none());
    assert!(
        head.contains("content=\"http:&#x2f;&#x2f;site.test&#x2f;evil\""),
        "{head}"
    );
}
