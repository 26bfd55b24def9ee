//! A model test of audience caching: random vaults of public, private and draft
//! notes, random readers, admins, strangers, sign-outs, forged cookies, edits and
//! changes of visibility, in random order, through quire-server over real sockets.
//! After every step, each answer is checked against the model:
//!
//! - a note is answered 200 exactly when the requester's audience *now* may see it
//!   (a signed-out or forged cookie is a stranger), with the note's latest text, and
//!   never with the text of a note that audience may not see;
//! - `Cache-Status` names the requester's own audience, or none (a stranger, a
//!   signed-out or forged cookie is never answered from an audience's entry);
//! - no cached page carries a reader's name;
//! - after a change to the templates alone (a restyle, also in random order), a page
//!   answered from its previous version (`detail=previous-version`) still holds the
//!   note's latest text, in an earlier style; any other answer is in the newest.
//!
//! Seeds are fixed (`SEEDS`), so a failure reproduces; the failing seed and step are
//! in the message.

mod common;

use common::{get_with, start_on, wait_for_audiences, Resp, Running};
use quire_vault::readers::{hash_password, write_user, Role};
use quire_vault::Visibility;

const FORM: &str = "Content-Type: application/x-www-form-urlencoded\r\n";
const NOTES: usize = 7;
const STEPS: usize = 140;
const SEEDS: [u64; 3] = [0x5eed_0001, 0x5eed_0002, 0x5eed_0003];

/// xorshift64*: small, deterministic, enough for choosing steps.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Who {
    Stranger,
    User(usize),
    Forged(usize),
}

struct User {
    name: &'static str,
    password: &'static str,
    role: Role,
    /// The `Cookie:` line of the session, and whether it was signed out.
    cookie: Option<(String, bool)>,
}

struct Model {
    vis: Vec<Visibility>,
    version: Vec<u32>,
    links: Vec<Vec<usize>>,
    users: Vec<User>,
    /// The layout's version: each restyle writes a new marker into it.
    style: u32,
}

/// The layout template with `style`'s marker.
fn layout(style: u32) -> String {
    let default = quire_site::templates::DEFAULTS[0];
    assert_eq!(default.0, "layout.html");
    default
        .1
        .replacen("</body>", &format!("<i>style-{style}-end</i></body>"), 1)
}

fn vis_of(r: &mut Rng) -> Visibility {
    [Visibility::Public, Visibility::Private, Visibility::Draft][r.below(3)]
}

fn note_text(m: &Model, i: usize) -> String {
    let front = match m.vis[i] {
        Visibility::Public => "free: true\n",
        Visibility::Private => "",
        Visibility::Draft => "draft: true\n",
    };
    let links: String = m.links[i].iter().map(|j| format!("[[n{j}]] ")).collect();
    format!(
        "---\n{front}title: Note {i}\n---\nbody-{i}-v{} links: {links}\n",
        m.version[i]
    )
}

fn audience(m: &Model, who: Who) -> Option<Visibility> {
    match who {
        Who::User(u) => match (&m.users[u].cookie, m.users[u].role) {
            (Some((_, false)), Role::Reader) => Some(Visibility::Private),
            (Some((_, false)), Role::Admin) => Some(Visibility::Draft),
            _ => None,
        },
        Who::Stranger | Who::Forged(_) => None,
    }
}

fn cookie_line(m: &Model, who: Who) -> String {
    match who {
        Who::Stranger => String::new(),
        Who::User(u) => m.users[u]
            .cookie
            .as_ref()
            .map_or(String::new(), |(c, _)| c.clone()),
        Who::Forged(u) => m.users[u]
            .cookie
            .as_ref()
            .map_or(String::new(), |(c, _)| c.replace("\r\n", "AA\r\n")),
    }
}

fn sign_in(r: &Running, u: &User) -> String {
    let ok = get_with(
        r.addr,
        "POST",
        "/login",
        FORM,
        &format!("name={}&password={}&next=/", u.name, u.password),
    );
    assert_eq!(ok.status, 303, "{} signs in: {ok:?}", u.name);
    let pair = ok
        .headers
        .iter()
        .find(|(n, _)| n == "set-cookie")
        .and_then(|(_, v)| v.split(';').next())
        .expect("a session cookie");
    format!("Cookie: {pair}\r\n")
}

fn vault(m: &Model) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..NOTES {
        std::fs::write(dir.path().join(format!("n{i}.md")), note_text(m, i)).unwrap();
    }
    std::fs::create_dir_all(dir.path().join(".quire")).unwrap();
    let users = dir.path().join(".quire/users.toml");
    for u in &m.users {
        write_user(&users, u.name, u.role, &hash_password(u.password)).unwrap();
    }
    dir
}

fn check(m: &Model, who: Who, i: usize, resp: &Resp, at: &str) {
    let aud = audience(m, who);
    let sees = m.vis[i] <= aud.unwrap_or(Visibility::Public);
    let status = resp.header("cache-status").unwrap_or("");
    assert_eq!(
        resp.status,
        if sees { 200 } else { 404 },
        "{at}: n{i} ({:?}) for {who:?} ({aud:?}): {status}",
        m.vis[i]
    );
    if sees {
        let want = format!("body-{i}-v{}", m.version[i]);
        assert!(
            resp.body.contains(&want),
            "{at}: latest text of n{i}: {status}"
        );
        let newest = format!("style-{}-end", m.style);
        if status.contains("previous-version") {
            let earlier = (0..m.style).any(|s| resp.body.contains(&format!("style-{s}-end")));
            assert!(earlier, "{at}: a previous version in no earlier style");
        } else {
            assert!(
                resp.body.contains(&newest),
                "{at}: not in the newest style: {status}"
            );
        }
    }
    for j in (0..NOTES).filter(|&j| m.vis[j] > aud.unwrap_or(Visibility::Public)) {
        assert!(
            !resp.body.contains(&format!("body-{j}-")),
            "{at}: n{j}'s text reached {who:?}"
        );
    }
    match aud {
        Some(Visibility::Private) => assert!(
            !status.contains("audience-") || status.contains("audience-reader"),
            "{at}: {status}"
        ),
        Some(_) => assert!(
            !status.contains("audience-") || status.contains("audience-admin"),
            "{at}: {status}"
        ),
        None => assert!(
            !status.contains("audience-"),
            "{at}: {who:?} answered from an audience's entry: {status}"
        ),
    }
    if aud.is_none() && who != Who::Stranger {
        assert!(status.contains("fwd=bypass"), "{at}: {status}");
    }
    for u in &m.users {
        assert!(!resp.body.contains(u.name), "{at}: {} on a page", u.name);
    }
}

fn new_model(rng: &mut Rng) -> Model {
    let user = |name, password, role| User {
        name,
        password,
        role,
        cookie: None,
    };
    Model {
        vis: (0..NOTES).map(|_| vis_of(rng)).collect(),
        version: vec![1; NOTES],
        links: (0..NOTES)
            .map(|_| (0..2).map(|_| rng.below(NOTES)).collect())
            .collect(),
        users: vec![
            user("quokkareader", "quokka-password-1", Role::Reader),
            user("wombatreader", "wombat-password-2", Role::Reader),
            user("numbatadmin", "numbat-password-3", Role::Admin),
        ],
        style: 0,
    }
}

/// Rewrites note `i` as the model has it and republishes, as the watcher would.
fn rewrite(r: &Running, m: &Model, i: usize) {
    let path = r.vault.path().join(format!("n{i}.md"));
    std::fs::write(path, note_text(m, i)).unwrap();
    quire_site::watch::republish(&r.site, &r.ctx);
}

/// Writes the layout in the model's style and republishes.
fn restyle(r: &Running, m: &Model) {
    let dir = r.vault.path().join(".quire/templates");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("layout.html"), layout(m.style)).unwrap();
    quire_site::watch::republish(&r.site, &r.ctx);
}

/// One request by a random requester for a random note, checked; whether it was an
/// audience's hit.
fn request(r: &Running, m: &Model, rng: &mut Rng, at: &str) -> (bool, bool) {
    let who = match rng.below(6) {
        0 => Who::Stranger,
        1 => Who::Forged(rng.below(m.users.len())),
        _ => Who::User(rng.below(m.users.len())),
    };
    let i = rng.below(NOTES);
    let resp = get_with(r.addr, "GET", &format!("/n{i}"), &cookie_line(m, who), "");
    check(m, who, i, &resp, at);
    let status = resp.header("cache-status").unwrap_or("");
    (
        status.contains("hit") && status.contains("audience-"),
        status.contains("previous-version"),
    )
}

fn run(seed: u64) {
    let mut rng = Rng(seed);
    let mut m = new_model(&mut rng);
    let v = vault(&m);
    let dir = v.path().join(".quire/templates");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("layout.html"), layout(m.style)).unwrap();
    let r = start_on(v, false);
    for u in 0..m.users.len() {
        let c = sign_in(&r, &m.users[u]);
        m.users[u].cookie = Some((c, false));
    }
    // The first signed-in request starts making the audiences' versions.
    let _ = get_with(r.addr, "GET", "/n0", &cookie_line(&m, Who::User(0)), "");
    wait_for_audiences(&r);
    let mut sign_outs = 0;
    let mut audience_hits = 0;
    let mut previous_hits = 0;
    for step in 0..STEPS {
        let at = format!("seed {seed:#x} step {step}");
        match rng.below(20) {
            0 => {
                let i = rng.below(NOTES);
                m.version[i] += 1;
                rewrite(&r, &m, i);
            }
            1 => {
                let i = rng.below(NOTES);
                m.vis[i] = vis_of(&mut rng);
                m.version[i] += 1;
                rewrite(&r, &m, i);
            }
            3 => {
                m.style += 1;
                restyle(&r, &m);
            }
            2 if sign_outs < 2 => {
                let u = rng.below(m.users.len());
                let line = cookie_line(&m, Who::User(u));
                if let Some((_, out)) = m.users[u].cookie.as_mut().filter(|(_, o)| !*o) {
                    let resp = get_with(r.addr, "POST", "/logout", &line, "");
                    assert_eq!(resp.status, 303, "{at}");
                    *out = true;
                    sign_outs += 1;
                }
            }
            _ => {
                let (audience, previous) = request(&r, &m, &mut rng, &at);
                audience_hits += usize::from(audience);
                previous_hits += usize::from(previous);
            }
        }
    }
    assert!(
        previous_hits > 0,
        "seed {seed:#x}: no answer came from a previous version: restyles checked nothing"
    );
    assert!(
        audience_hits > 0,
        "seed {seed:#x}: the model never saw an audience hit: it checked nothing"
    );
}

#[test]
fn no_answer_comes_from_another_audience_or_reaches_a_revoked_cookie() {
    for seed in SEEDS {
        run(seed);
    }
}
