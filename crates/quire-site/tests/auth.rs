//! Signing in and out through `quire_site::auth`, with the client address and the
//! browser's fields set per request (the end-to-end tests in `serve.rs` all come from
//! 127.0.0.1). Each test is named for the attack it pins.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::header::{self, HeaderMap, HeaderValue};
use http::StatusCode;
use quire_site::auth::{self, Login};
use quire_site::config::SignInConfig;
use quire_site::gate::Gate;
use quire_site::reply::Reply;
use quire_site::shared::{SharedError, SharedErrorKind};
use quire_site::Site;
use quire_vault::readers::{LoginLimiter, LoginLimits, Sessions, Users};

const ADMIN: (&str, &str) = ("admin", "admin-demo-password");
const HOUR: Duration = Duration::from_secs(3600);

/// An empty vault with the example's users (`reader`, `admin`).
struct Vault {
    dir: tempfile::TempDir,
    site: Site,
    users: Arc<Users>,
}

impl Vault {
    fn new() -> Vault {
        let dir = tempfile::tempdir().unwrap();
        let quire = dir.path().join(".quire");
        std::fs::create_dir_all(&quire).unwrap();
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault/.quire");
        std::fs::copy(example.join("users.toml"), quire.join("users.toml")).unwrap();
        let site = Site::open(dir.path()).unwrap();
        let users = Arc::new(Users::load(&quire.join("users.toml")).unwrap());
        Vault { dir, site, users }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(".quire").join(name)
    }

    /// The sessions as a (re)started site loads them.
    fn sessions(&self) -> Sessions {
        Sessions::load_or_create(&self.path("secret"), &self.path("sessions"), HOUR).unwrap()
    }

    /// `POST /login` from `ip` with `name` and `password`.
    fn login(&self, s: &Sessions, l: &Arc<LoginLimiter>, ip: &str, who: (&str, &str)) -> Reply {
        let snap = self.site.snapshot();
        let gate = Gate::new(SignInConfig::default().limits());
        let login = Login {
            snap: &snap,
            users: &self.users,
            sessions: s,
            limiter: l,
            gate: &gate,
        };
        let body = format!("name={}&password={}&next=/", who.0, who.1);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(auth::login(&login, &from(ip), body.as_bytes()))
    }
}

/// Request fields of a client at `ip`, as quire-server forwards them: whatever the
/// client wrote in `X-Forwarded-For`, then the address quire resolved, last.
fn from(ip: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    let xff = format!("203.0.113.66, {ip}");
    h.insert("x-forwarded-for", HeaderValue::from_str(&xff).unwrap());
    h
}

fn field<'a>(r: &'a Reply, name: &header::HeaderName) -> Option<&'a str> {
    r.extra
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The `quire_session=...` pair a sign-in set, as a `Cookie` field.
fn cookie(r: &Reply) -> HeaderMap {
    let set = field(r, &header::SET_COOKIE).expect("a session cookie");
    let pair = set.split(';').next().unwrap();
    let mut h = HeaderMap::new();
    h.insert(header::COOKIE, HeaderValue::from_str(pair).unwrap());
    h
}

fn limiter() -> Arc<LoginLimiter> {
    Arc::new(LoginLimiter::new(LoginLimits::default()))
}

/// Behind one TLS terminator every reader used to share one address, and ten wrong
/// passwords locked every account out for everyone. Now client A's failures on
/// `admin` do not stop client B, with the right password, from signing in as `admin`.
#[test]
fn one_client_cannot_lock_out_another() {
    let v = Vault::new();
    let (s, l) = (v.sessions(), limiter());
    for _ in 0..12 {
        let r = v.login(&s, &l, "192.0.2.10", (ADMIN.0, "guess"));
        assert!(matches!(
            r.status,
            StatusCode::OK | StatusCode::TOO_MANY_REQUESTS
        ));
        assert!(field(&r, &header::SET_COOKIE).is_none());
    }
    let b = v.login(&s, &l, "198.51.100.20", ADMIN);
    assert_eq!(b.status, StatusCode::SEE_OTHER, "client B signs in");
    let who = auth::viewer(&cookie(&b), &s, &v.users).expect("signed in");
    assert_eq!(who.name, "admin");
    // Other accounts, from other clients, were never touched either.
    let reader = v.login(&s, &l, "198.51.100.21", ("reader", "reader-demo-password"));
    assert_eq!(reader.status, StatusCode::SEE_OTHER);
}

/// The client that guessed is still stopped: by its failures on the account, even with
/// the right password, and by its failures over many names.
#[test]
fn per_client_throttle_still_stops_the_guesser() {
    let v = Vault::new();
    let (s, l) = (v.sessions(), limiter());
    for _ in 0..5 {
        assert_eq!(
            v.login(&s, &l, "192.0.2.10", (ADMIN.0, "guess")).status,
            StatusCode::OK
        );
    }
    let a = v.login(&s, &l, "192.0.2.10", ADMIN);
    assert_eq!(
        a.status,
        StatusCode::TOO_MANY_REQUESTS,
        "not even the right password"
    );
    assert!(field(&a, &header::SET_COOKIE).is_none());
    // Spraying names: past the per-client limit (4 here, 20 by default; fewer argon2
    // runs in a debug build) every name is refused. An IPv6 client is its /64.
    let l = Arc::new(LoginLimiter::new(LoginLimits {
        per_client: 4,
        ..LoginLimits::default()
    }));
    for i in 0..4 {
        let ip = format!("2001:db8:1:2::{i:x}");
        let r = v.login(&s, &l, &ip, (&format!("user{i}"), "guess"));
        assert_eq!(r.status, StatusCode::OK, "failure {i}");
    }
    let sprayer = v.login(
        &s,
        &l,
        "2001:db8:1:2::ffff",
        ("reader", "reader-demo-password"),
    );
    assert_eq!(
        sprayer.status,
        StatusCode::TOO_MANY_REQUESTS,
        "per client, any name"
    );
    let elsewhere = v.login(
        &s,
        &l,
        "2001:db8:1:3::1",
        ("reader", "reader-demo-password"),
    );
    assert_eq!(elsewhere.status, StatusCode::SEE_OTHER);
}

/// A refusal says when to come back: `Retry-After` in seconds, and the page in words.
#[test]
fn lockout_answers_retry_after() {
    let v = Vault::new();
    let (s, l) = (v.sessions(), limiter());
    for _ in 0..5 {
        v.login(&s, &l, "192.0.2.10", (ADMIN.0, "guess"));
    }
    let r = v.login(&s, &l, "192.0.2.10", (ADMIN.0, "guess"));
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    let secs: u64 = field(&r, &header::RETRY_AFTER)
        .expect("Retry-After")
        .parse()
        .expect("delay-seconds");
    assert!((1..=30).contains(&secs), "{secs}");
    let page = String::from_utf8_lossy(&r.body);
    assert!(page.contains("Try again in"), "{page}");
}

/// Sign in, copy the cookie, sign out: the copy no longer signs anyone in, and a
/// restarted site (the table reloaded from `.quire/sessions`) refuses it too.
#[test]
fn signed_out_cookie_is_refused() {
    let v = Vault::new();
    let (s, l) = (v.sessions(), limiter());
    let signed_in = v.login(&s, &l, "192.0.2.10", ADMIN);
    let copy = cookie(&signed_in);
    let other_device = cookie(&v.login(&s, &l, "198.51.100.20", ADMIN));
    assert!(auth::viewer(&copy, &s, &v.users).is_some());

    let out = auth::logout(&copy, &s, &v.users, None);
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(field(&out, &header::SET_COOKIE)
        .unwrap()
        .contains("Max-Age=0"));
    assert!(
        auth::viewer(&copy, &s, &v.users).is_none(),
        "the copied cookie"
    );
    assert!(
        auth::viewer(&other_device, &s, &v.users).is_none(),
        "signed out everywhere"
    );

    let restarted = v.sessions();
    assert!(
        auth::viewer(&copy, &restarted, &v.users).is_none(),
        "after a restart"
    );
    let again = cookie(&v.login(&restarted, &l, "192.0.2.10", ADMIN));
    assert!(
        auth::viewer(&again, &restarted, &v.users).is_some(),
        "a new sign-in works"
    );
}

/// A page elsewhere (another site, or a sibling subdomain: "same-site") cannot post
/// the sign-in or sign-out form; this site's pages and tools without a browser can.
#[test]
fn cross_site_form_posts_are_refused() {
    let v = Vault::new();
    let snap = v.site.snapshot();
    let with = |fields: &[(&str, &str)]| {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("notes.example"));
        for (n, val) in fields {
            let name = header::HeaderName::from_bytes(n.as_bytes()).unwrap();
            h.insert(name, HeaderValue::from_str(val).unwrap());
        }
        auth::from_this_site(&h, &snap)
    };
    assert!(with(&[("sec-fetch-site", "same-origin")]));
    assert!(with(&[("sec-fetch-site", "none")]));
    assert!(!with(&[("sec-fetch-site", "cross-site")]));
    assert!(!with(&[("sec-fetch-site", "same-site")]));
    assert!(!with(&[
        ("sec-fetch-site", "same-site"),
        ("origin", "https://notes.example")
    ]));
    assert!(with(&[("origin", "https://notes.example")]));
    assert!(!with(&[("origin", "https://evil.example")]));
    assert!(!with(&[("origin", "null")]));
    assert!(with(&[]), "curl and other tools");
    assert_eq!(auth::cross_site().status, StatusCode::FORBIDDEN);
}

/// The cluster, as a test double that records sign-outs in memory or refuses them
/// (Redis down); the real one is tested end to end in the `quire` crate.
#[derive(Debug, Default)]
struct Cluster {
    refuse: bool,
    generations: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

impl quire_site::shared::Shared for Cluster {
    fn sign_out(&self, name: &str) -> Result<u64, SharedError> {
        if self.refuse {
            return Err(SharedError::new(SharedErrorKind::Unavailable, "bus down"));
        }
        let mut g = self.generations.lock().unwrap();
        let n = g.entry(name.to_owned()).or_insert(0);
        *n += 1;
        Ok(*n)
    }

    fn view_totals(&self) -> Result<Vec<(String, u64)>, SharedError> {
        Err(SharedError::new(
            SharedErrorKind::Unavailable,
            "not used here",
        ))
    }
}

/// On a cluster node a sign-out that only this node heard of would leave copies of
/// the cookie working on the others. A sign-out the cluster cannot record answers
/// 503 and says so (the cookie is cleared in this browser); one it records holds
/// here at once, and on another node once it applies the cluster's generation.
#[test]
fn cluster_sign_out_is_recorded_by_the_cluster_or_refused_loudly() {
    let v = Vault::new();
    let secret = b"the secret every node of this cluster shares";
    let (a, b) = (
        Sessions::shared(secret, HOUR).unwrap(),
        Sessions::shared(secret, HOUR).unwrap(),
    );
    for s in [&a, &b] {
        s.adopt_sign_outs(9, std::collections::HashMap::new());
    }
    let l = limiter();
    let copy = cookie(&v.login(&a, &l, "192.0.2.10", ADMIN));
    assert!(
        auth::viewer(&copy, &b, &v.users).is_some(),
        "signed in on b too"
    );

    let down = Cluster {
        refuse: true,
        ..Cluster::default()
    };
    let out = auth::logout(&copy, &a, &v.users, Some(&down));
    assert_eq!(out.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(String::from_utf8_lossy(&out.body).contains("this browser only"));
    assert!(field(&out, &header::SET_COOKIE)
        .unwrap()
        .contains("Max-Age=0"));
    let out = auth::logout(&copy, &a, &v.users, None);
    assert_eq!(
        out.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "not joined yet"
    );

    let up = Cluster::default();
    let out = auth::logout(&copy, &a, &v.users, Some(&up));
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(auth::viewer(&copy, &a, &v.users).is_none(), "at once here");
    assert!(
        auth::viewer(&copy, &b, &v.users).is_some(),
        "b has not read it yet"
    );
    b.raise_sign_out("admin", 1);
    assert!(
        auth::viewer(&copy, &b, &v.users).is_none(),
        "and on b once it has"
    );
}
