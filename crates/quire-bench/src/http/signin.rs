//! `--signed-in`: the load as a signed-in reader sees the site. The vault quire
//! serves is a copy ([`super::servers::quire_signed_in`]) given a reader of the
//! benchmark's own, [`READER`], with a random password, as `quire user add` would add
//! one (the vault crate's own hash and users-file writer); the harness then signs in
//! over HTTP as a browser does (`POST /login` with the login form's fields, from the
//! site's own origin), keeps the session cookie from `Set-Cookie`, and checks `/account`
//! now names the reader. Every request of the load then carries `Cookie:
//! NAME=VALUE`, from whichever generator runs it.
//!
//! Key decisions:
//! - **The user's vault is never written**: the reader, and a session secret of the
//!   copy's own (the copied `secret` and `sessions` files are left out, so the copy's
//!   cookies are signed with a key that exists nowhere else), live in the copy, which
//!   goes away with the server.
//! - **Nothing here depends on what quire does with a signed-in request**: today it
//!   bypasses the cache (a render per request), it may one day be cached per
//!   audience. The harness measures whichever it is, and reports the `Cache-Status`
//!   a signed-in request got just before the rounds so a report says which.
//! - **The session cookie is found by quire's own rule**
//!   (`quire_vault::readers::session_cookie`), not by a copy of its name.

use std::path::Path;

use anyhow::Context;
use quire_vault::readers::{self, Role};
use rand::Rng;

use super::urls;

/// The reader the benchmark adds to its copy of the vault and signs in as.
pub(crate) const READER: &str = "bench-reader";

/// Length of the reader's random password (letters and digits).
const PASSWORD_LEN: usize = 32;

/// The page signed in to, and checked to name the reader.
const CHECK_PATH: &str = "/account";

/// Prepares a copy of a vault for `--signed-in`: leaves out the copied session secret
/// and sign-out table (quire makes fresh ones), and adds [`READER`] with a random
/// password to its users file. Returns the password.
pub(crate) fn prepare_copy(copy: &Path) -> anyhow::Result<String> {
    let dir = copy.join(".quire");
    for name in ["secret", "sessions"] {
        match std::fs::remove_file(dir.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing the copied .quire/{name}"));
            }
            _ => {}
        }
    }
    let password: String = rand::rng()
        .sample_iter(rand::distr::Alphanumeric)
        .take(PASSWORD_LEN)
        .map(char::from)
        .collect();
    let users = dir.join("users.toml");
    readers::write_user(
        &users,
        READER,
        Role::Reader,
        &readers::hash_password(&password),
    )
    .with_context(|| format!("adding {READER} to {}", users.display()))?;
    Ok(password)
}

/// An `application/x-www-form-urlencoded` body, as a browser encodes a form: every
/// byte but letters, digits and `*-._` percent-encoded, spaces as `+`.
pub(crate) fn form_body(fields: &[(&str, &str)]) -> String {
    let encode = |s: &str| {
        let mut out = String::with_capacity(s.len());
        for b in s.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                    out.push(char::from(b));
                }
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
        out
    };
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The session cookie a response head sets, as `NAME=VALUE` for a `Cookie` field:
/// the first `Set-Cookie` whose pair quire reads as its session (a cookie cleared
/// with an empty value is not one).
pub(crate) fn session_from_head(head: &str) -> Option<String> {
    head.split("\r\n").skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if !name.trim().eq_ignore_ascii_case("set-cookie") {
            return None;
        }
        let pair = value.split(';').next()?.trim();
        readers::session_cookie(pair).map(|_| pair.to_owned())
    })
}

/// The `POST /login` request a browser on the site's own login page sends.
fn login_request(scheme: &str, host: &str, password: &str) -> String {
    let body = form_body(&[
        ("name", READER),
        ("password", password),
        ("next", CHECK_PATH),
    ]);
    format!(
        "POST /login HTTP/1.1\r\nHost: {host}\r\nOrigin: {scheme}://{host}\r\nSec-Fetch-Site: same-origin\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
         Accept-Encoding: identity\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// What the login form said was wrong, when it says (`<p class="error" ...>TEXT</p>`).
fn form_error(body: &str) -> Option<&str> {
    let start = body.find("class=\"error\"")?;
    let text = &body[start..];
    let text = &text[text.find('>')? + 1..];
    Some(text[..text.find('<')?].trim()).filter(|t| !t.is_empty())
}

/// Signs in as [`READER`] with `password` on `host` (through `client`, so over HTTPS
/// with `--tls`) and checks a page then names the reader. Returns the `Cookie`
/// field's value (`NAME=VALUE`).
pub(crate) fn sign_in(client: &urls::Client, host: &str, password: &str) -> anyhow::Result<String> {
    let request = login_request(client.scheme(), host, password);
    let raw = client
        .exchange(host, request.as_bytes())
        .with_context(|| format!("--signed-in: POST /login to {host}"))?;
    let (status, _, body) = urls::response("/login", &raw)?;
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..end]);
    let Some(cookie) = session_from_head(&head) else {
        let body = String::from_utf8_lossy(&body);
        let why = match status {
            403 => "refused as a cross-site post".to_owned(),
            429 => "sign-ins throttled".to_owned(),
            503 => "every password check busy".to_owned(),
            _ => form_error(&body).map_or_else(
                || "no session cookie".to_owned(),
                |e| format!("the form says: {e}"),
            ),
        };
        anyhow::bail!(
            "--signed-in: signing in as {READER} failed: POST /login answered {status} ({why})"
        );
    };
    let (status, _, body) = client
        .get_with_cookie(host, CHECK_PATH, "identity", Some(&cookie))
        .with_context(|| format!("--signed-in: GET {CHECK_PATH} signed in"))?;
    anyhow::ensure!(
        status == 200 && String::from_utf8_lossy(&body).contains(READER),
        "--signed-in: POST /login gave a session cookie, but {CHECK_PATH} with it answered \
         {status} without naming {READER}: the session is not honoured (or the vault's \
         account template does not show the signed-in reader's name)"
    );
    Ok(cookie)
}

/// The `Cache-Status` field of a lower-cased response head, as sent.
pub(crate) fn cache_status(head: &str) -> Option<String> {
    head.lines()
        .find_map(|l| l.strip_prefix("cache-status:"))
        .map(|v| v.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// quire-site's own reading of a form field (`auth::field`): `+` is a space,
    /// then percent-decoding.
    fn decoded(body: &str, name: &str) -> Option<String> {
        body.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let dec = |s: &str| quire_site::routes::percent_decode(&s.replace('+', " "));
            (dec(k) == name).then(|| dec(v))
        })
    }

    #[test]
    fn form_bodies_are_encoded_as_a_browser_does_and_read_back_by_quire() {
        assert_eq!(
            form_body(&[("name", "bench-reader"), ("next", "/")]),
            "name=bench-reader&next=%2F"
        );
        let hard = "p&ss w=rd+%é/?#";
        let body = form_body(&[("name", READER), ("password", hard), ("next", "/a b?c")]);
        assert_eq!(
            body,
            "name=bench-reader&password=p%26ss+w%3Drd%2B%25%C3%A9%2F%3F%23&next=%2Fa+b%3Fc"
        );
        assert_eq!(decoded(&body, "password").as_deref(), Some(hard));
        assert_eq!(decoded(&body, "name").as_deref(), Some(READER));
        assert_eq!(decoded(&body, "next").as_deref(), Some("/a b?c"));
        let req = login_request("http", "127.0.0.1:9", "pw");
        assert!(req.starts_with("POST /login HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"));
        assert!(req.contains("\r\nOrigin: http://127.0.0.1:9\r\nSec-Fetch-Site: same-origin\r\n"));
        let body = "name=bench-reader&password=pw&next=%2Faccount";
        assert!(req.ends_with(&format!(
            "Content-Length: {}\r\n\
             Accept-Encoding: identity\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )));
    }

    #[test]
    fn the_session_cookie_is_taken_from_set_cookie() {
        let value = format!("{}.{}", "ab".repeat(20), "cd".repeat(32));
        let set = readers::set_cookie_header(&value, std::time::Duration::from_secs(60), true);
        let head = format!(
            "HTTP/1.1 303 See Other\r\nLocation: /\r\nSet-Cookie: theme=dark; Path=/\r\nset-cookie: {set}\r\nContent-Length: 0"
        );
        let cookie = session_from_head(&head).expect("a session cookie");
        assert!(cookie.ends_with(&format!("={value}")), "{cookie}");
        assert!(!cookie.contains(';') && !cookie.contains(' '), "{cookie}");
        assert_eq!(readers::session_cookie(&cookie), Some(value.as_str()));
        // A sign-out's cleared cookie, another cookie, no cookie: no session.
        let cleared = format!(
            "HTTP/1.1 303 See Other\r\nSet-Cookie: {}\r\n",
            readers::clear_cookie_header()
        );
        assert_eq!(session_from_head(&cleared), None);
        assert_eq!(
            session_from_head("HTTP/1.1 200 OK\r\nSet-Cookie: theme=dark"),
            None
        );
        assert_eq!(
            session_from_head("HTTP/1.1 200 OK\r\nContent-Length: 0"),
            None
        );
        // The status line is not a field.
        assert_eq!(session_from_head(&format!("set-cookie: {set}")), None);
    }

    #[test]
    fn the_login_forms_error_and_cache_status_are_read() {
        let page =
            "<h1>Sign in</h1>\n<p class=\"error\" role=\"alert\">Wrong name or password.</p>";
        assert_eq!(form_error(page), Some("Wrong name or password."));
        assert_eq!(form_error("<p class=\"error\"></p>"), None);
        assert_eq!(form_error("<h1>Sign in</h1>"), None);
        let head = "http/1.1 200 ok\r\ncache-control: private, no-store\r\ncache-status: quire; fwd=bypass; detail=cookie\r\n";
        assert_eq!(
            cache_status(head).as_deref(),
            Some("quire; fwd=bypass; detail=cookie")
        );
        assert_eq!(cache_status("http/1.1 200 ok\r\n"), None);
    }

    /// A full-cost argon2 hash: a second or so in a debug build.
    #[test]
    fn a_copy_gets_the_reader_and_loses_the_copied_secret() {
        let dir = tempfile::tempdir().unwrap();
        let q = dir.path().join(".quire");
        std::fs::create_dir_all(&q).unwrap();
        std::fs::write(q.join("secret"), [7u8; 32]).unwrap();
        std::fs::write(q.join("sessions"), "").unwrap();
        let demo =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault/.quire/users.toml");
        let before = std::fs::read_to_string(&demo).unwrap();
        std::fs::write(q.join("users.toml"), &before).unwrap();
        let password = prepare_copy(dir.path()).unwrap();
        assert_eq!(password.len(), PASSWORD_LEN);
        assert!(password.chars().all(|c| c.is_ascii_alphanumeric()));
        assert!(!q.join("secret").exists() && !q.join("sessions").exists());
        let text = std::fs::read_to_string(q.join("users.toml")).unwrap();
        assert!(text.starts_with(&before), "the demo users are kept: {text}");
        let users = readers::Users::load(&q.join("users.toml")).unwrap();
        let reader = users
            .verify(READER, &password)
            .expect("the password verifies");
        assert_eq!(reader.role, Role::Reader);
        assert!(users.verify(READER, "wrong").is_none());
        // A copy without a .quire folder gets one.
        let bare = tempfile::tempdir().unwrap();
        prepare_copy(bare.path()).unwrap();
        assert!(bare.path().join(".quire/users.toml").is_file());
    }
}
