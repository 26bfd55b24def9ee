//! Signing in and out: the `/login` and `/logout` forms, and who a request's session
//! cookie names.
//!
//! Key decisions:
//! - **Signed-in readers are cached by audience, never by person** (see
//!   [`crate::audience`]): `quire-server` asks the site for a cookie's audience,
//!   which [`viewer`] decides with every check below, and keeps the pages under
//!   that audience's keys. A cookie that names no valid session bypasses the cache
//!   and is answered as anonymous, `private, no-store`. The anonymous cache is filled
//!   only by requests that carry no session cookie, so it never holds a reader's view.
//! - Sessions are signed cookies (`quire_vault::readers::Sessions`), checked against
//!   the users file and the sign-out table (in memory) on every request, so removing
//!   or demoting a user takes effect at once.
//! - **Signing out ends the session server side**: `POST /logout` with the session
//!   cookie bumps that reader's session generation, so the cookie (and any copy, and
//!   the reader's sessions on other devices) is refused from then on, across restarts.
//! - **Failed sign-ins are throttled per (account, client), per client and, loosely,
//!   per account** (`quire_vault::readers::LoginLimiter`): one client cannot lock
//!   another out, and a refusal is a 429 with `Retry-After`. The attempt is booked
//!   before its password is checked, so concurrent guesses cannot outrun the budget.
//! - **Password checks are bounded** (`crate::gate`): a fixed number run at once,
//!   each in memory the gate reuses; a sign-in waits for one on the runtime, in a
//!   bounded queue with a deadline, and past it gets a 503 with `Retry-After`.
//! - **After signing in, only a path on this site is a target** (`routes::local_target`):
//!   `next` arrives both in `GET /login?next=` (put into the form) and in the form's
//!   field, and is checked on both ways in.
//! - **Both forms refuse cross-site posts** ([`from_this_site`]): with the session
//!   cookie `SameSite=Lax` a cross-site post carries no session anyway, but a sibling
//!   subdomain is "same-site" and login CSRF needs no cookie. The browser's
//!   `Sec-Fetch-Site` decides (or `Origin` against `Host` when it sends none); tools
//!   that send neither are let through, since only a browser can be tricked into
//!   posting. No form token, so templates a vault overrides keep working unchanged.
//! - The address is the last `X-Forwarded-For` entry: quire-server guarantees the last
//!   entry it forwards is the client address it resolved (the peer, or the client a
//!   trusted proxy named); earlier entries come from the client and are ignored.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::header::{self, HeaderMap};
use http::StatusCode;
use quire_http::Fault;
use quire_vault::readers::{
    clear_cookie_header, session_cookie, set_cookie_header, LoginLimiter, Sessions, Users,
};
use serde_json::json;

use crate::gate::Gate;
use crate::model::Viewer;
use crate::reply::{Policy, Reply, HTML};
use crate::routes::{local_target, percent_decode};
use crate::shared::{Shared, SharedError, SharedErrorKind};
use crate::snapshot::Snapshot;

/// The session cookie's value in a request, if it has one.
pub(crate) fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(session_cookie)
}

/// The reader a request's session cookie names, if it is valid now.
pub fn viewer(headers: &HeaderMap, sessions: &Sessions, users: &Users) -> Option<Viewer> {
    cookie(headers)
        .and_then(|c| sessions.verify(c, users, SystemTime::now()))
        .map(|r| Viewer {
            name: r.name.clone(),
            role: r.role.as_str(),
            audience: r.audience(),
            shared: false,
        })
}

/// The client's address as quire saw it.
pub fn peer(headers: &HeaderMap) -> IpAddr {
    headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .and_then(|ip| ip.trim().parse().ok())
        .unwrap_or(IpAddr::from([0, 0, 0, 0]))
}

/// One field of an `application/x-www-form-urlencoded` body.
fn field(form: &str, name: &str) -> Option<String> {
    form.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (percent_decode(&k.replace('+', " ")) == name).then(|| percent_decode(&v.replace('+', " ")))
    })
}

/// Everything `POST /login` needs.
#[derive(Debug)]
pub struct Login<'a> {
    /// The published site.
    pub snap: &'a Snapshot,
    /// The users file.
    pub users: &'a Arc<Users>,
    /// Session signing.
    pub sessions: &'a Sessions,
    /// Failed-attempt throttle.
    pub limiter: &'a Arc<LoginLimiter>,
    /// How many password checks run at once.
    pub gate: &'a Arc<Gate>,
}

/// Whether the request reached quire over HTTPS: quire's server sets
/// `X-Forwarded-Proto` on every request it hands the site, replacing any a client
/// sent, so the value is quire's own.
pub fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes() == b"https")
}

/// The login form again, with `error`.
fn again(l: &Login<'_>, next: &str, status: StatusCode, error: &str) -> Reply {
    let ctx = l
        .snap
        .page_context(None, "/login", json!({"error": error, "next": next}));
    match l.snap.templates.render("login.html", &ctx) {
        Ok(html) => Reply::new(status, HTML, html, Policy::NoStore),
        Err(e) => Reply::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain; charset=utf-8",
            format!("{e}\n"),
            Policy::NoStore,
        ),
    }
}

/// `POST /login`: signs in and redirects to `next`, or shows the form again. In
/// order: the throttle books the attempt (or refuses it, 429), the gate gives it a
/// check slot (or refuses it, 503), argon2 runs on the blocking pool in the slot's
/// memory, and the booking becomes a failure or a success.
pub async fn login(l: &Login<'_>, headers: &HeaderMap, body: &[u8]) -> Reply {
    let form = String::from_utf8_lossy(body);
    let name = field(&form, "name").unwrap_or_default();
    let password = field(&form, "password").unwrap_or_default();
    let next = field(&form, "next").unwrap_or_else(|| "/".into());
    let next = local_target(&next);
    let ip = peer(headers);
    let now = SystemTime::now();
    let attempt = match l.limiter.reserve(&name, ip, now) {
        Ok(a) => a,
        Err(wait) => {
            tracing::info!(%ip, wait_secs = wait.as_secs(), "sign-in throttled");
            let message = format!("Too many failed attempts. Try again in {}.", spoken(wait));
            // RFC 9110 §10.2.3: seconds until this client may try this account again.
            return again(l, &next, StatusCode::TOO_MANY_REQUESTS, &message)
                .with(header::RETRY_AFTER, wait.as_secs().max(1).to_string());
        }
    };
    let mut pass = match l.gate.enter(attempt.known()).await {
        Ok(p) => p,
        Err(why) => {
            // Dropping `attempt` releases it: it was never checked.
            let wait = l.gate.retry_after();
            tracing::warn!(%ip, ?why, "sign-in refused: every password check is busy");
            let message = format!("Too many sign-ins at once. Try again in {}.", spoken(wait));
            return again(l, &next, StatusCode::SERVICE_UNAVAILABLE, &message)
                .with(header::RETRY_AFTER, wait.as_secs().max(1).to_string());
        }
    };
    let users = l.users.clone();
    // Below the request workers' priority, as renders are: a burst of sign-ins
    // must not slow the hits.
    let check = quire_server::uncached_work::spawn(move || {
        let reader = users.verify_in(&name, &password, pass.memory());
        drop(pass);
        reader
    });
    // A check that panicked is a failure; one cut short by shutdown is never booked.
    let reader = match check.await {
        Ok(r) => r,
        Err(e) if e.is_panic() => None,
        Err(_) => return again(l, &next, StatusCode::SERVICE_UNAVAILABLE, "Shutting down."),
    };
    let Some(reader) = reader else {
        attempt.failed();
        return again(l, &next, StatusCode::OK, "Wrong name or password.");
    };
    attempt.succeeded();
    let cookie = l.sessions.issue(&reader, now);
    tracing::info!(reader = %reader.name, "signed in");
    Reply::redirect(&next).with(
        header::SET_COOKIE,
        set_cookie_header(
            &cookie,
            l.sessions.ttl(),
            l.snap.config.secure_cookies || over_https(headers),
        ),
    )
}

/// A wait as a reader would say it: "30 seconds", "1 minute", "15 minutes".
fn spoken(wait: Duration) -> String {
    match wait.as_secs() {
        s @ 0..=59 => format!("{} second{}", s.max(1), if s > 1 { "s" } else { "" }),
        s => {
            let m = s.div_ceil(60);
            format!("{m} minute{}", if m > 1 { "s" } else { "" })
        }
    }
}

/// `POST /logout`: ends the session server side (every session of its reader, see
/// `Sessions::sign_out`) and clears the cookie. On a cluster node the cluster
/// records the sign-out first (see `crate::shared`).
pub fn logout(
    headers: &HeaderMap,
    sessions: &Sessions,
    users: &Users,
    shared: Option<&dyn Shared>,
) -> Reply {
    let signed_out = Reply::redirect("/").with(header::SET_COOKIE, clear_cookie_header());
    let Some(c) = cookie(headers) else {
        return signed_out;
    };
    if sessions.is_shared() {
        return match cluster_sign_out(c, sessions, users, shared) {
            Ok(()) => signed_out,
            // Why is in the log; the reader needs what it means for them.
            Err(_) => Reply::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                "You are signed out in this browser only: the sign-out could not be \
                 recorded for every server of this site, so a copy of this session would \
                 still work until it expires. Sign in and out again in a moment.\n",
                Policy::NoStore,
            )
            .with(header::SET_COOKIE, clear_cookie_header()),
        };
    }
    match sessions.sign_out(c, users, SystemTime::now()) {
        Ok(Some(reader)) => tracing::info!(reader = %reader.name, "signed out"),
        Ok(None) => {}
        Err(e) => tracing::error!(
            error = %e,
            "sign-out not written: the session stays refused until quire restarts"
        ),
    }
    signed_out
}

/// Records the sign-out of the reader `cookie_value` signs in with the cluster,
/// then applies it here. A cookie that signs no one in is done already.
fn cluster_sign_out(
    cookie_value: &str,
    sessions: &Sessions,
    users: &Users,
    shared: Option<&dyn Shared>,
) -> Result<(), SharedError> {
    let Some(reader) = sessions.verify(cookie_value, users, SystemTime::now()) else {
        return Ok(());
    };
    let shared = shared.ok_or_else(|| {
        SharedError::new(
            SharedErrorKind::NotJoined,
            "this node has not joined the cluster yet",
        )
    })?;
    match shared.sign_out(&reader.name) {
        Ok(generation) => {
            sessions.raise_sign_out(&reader.name, generation);
            tracing::info!(reader = %reader.name, generation, "signed out on every node");
            Ok(())
        }
        Err(e) => {
            tracing::error!(reader = %reader.name, error = %e, side = %e.side(), "sign-out refused: the cluster could not record it");
            Err(e)
        }
    }
}

/// Whether a form post comes from this site's own pages, as far as the browser says:
/// `Sec-Fetch-Site` when it is sent (every current browser does), else `Origin`
/// against `Host` (or the configured `base_url`). A post with neither is let through:
/// only a browser can be made to post for someone, and one that sends neither field
/// still keeps the `SameSite=Lax` session cookie off cross-site posts.
pub fn from_this_site(headers: &HeaderMap, snap: &Snapshot) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        // `none`: the user's own action (typed, bookmarked); never another page's.
        return matches!(site.as_bytes(), b"same-origin" | b"none");
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else {
        return true;
    };
    let authority = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let base = &snap.config.base_url;
    (authority.is_some() && authority == host) || (!base.is_empty() && origin == base)
}

/// The answer to a form posted from another site.
pub fn cross_site() -> Reply {
    Reply::new(
        StatusCode::FORBIDDEN,
        "text/plain; charset=utf-8",
        "This form can only be sent from this site's own pages.\n",
        Policy::NoStore,
    )
}

/// How long a session lasts for `snap`'s settings.
pub fn ttl(snap: &Snapshot) -> Duration {
    Duration::from_secs(snap.config.session_hours.max(1) * 3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_and_peers_parse() {
        let f = "name=ada&password=p%26ss+word&next=%2Fa%3Fb";
        assert_eq!(field(f, "password").as_deref(), Some("p&ss word"));
        assert_eq!(field(f, "next").as_deref(), Some("/a?b"));
        assert_eq!(field(f, "nope"), None);
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", "6.6.6.6, 192.0.2.1".parse().unwrap());
        assert_eq!(peer(&h), "192.0.2.1".parse::<IpAddr>().unwrap());
    }
}
