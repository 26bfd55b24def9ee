//! Signed session cookies and the `Cookie`/`Set-Cookie` header text around them.
//!
//! Cookie value: `hex(payload) "." hex(tag)`, payload
//! `v2|name|role|expires_unix|epoch|generation|nonce`, tag HMAC-SHA256 over the payload
//! bytes. Hex is lowercase only, so each payload has one encoding. `epoch` and
//! `generation` tie the cookie to the sign-out table ([`SignOuts`]): signing out bumps
//! the user's generation and every cookie issued before is refused. Checking order,
//! cheapest first: length, shape, MAC (constant time), expiry, the sign-out table,
//! then the user still being in the users file with the same role. `v1` cookies (from
//! before sign-outs were kept) are refused: their holders sign in once more.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use hmac::{Hmac, Mac};
use rand::{RngCore, TryRngCore};
use sha2::{Digest, Sha256};

use super::error::ReadersError;
use super::file::create_private;
use super::hex::{hex, unhex_into};
use super::reader::{Reader, Role};
use super::signouts::SignOuts;
use super::users::Users;

/// The session cookie's name.
const COOKIE: &str = "quire_session";
/// Longest cookie value looked at; anything longer is refused before decoding. Real
/// values are under 400 bytes (names are at most 64).
const COOKIE_LEN_MAX: usize = 512;
/// Shortest secret file accepted, bytes.
const SECRET_LEN_MIN: usize = 32;
const NONCE_LEN: usize = 16;
const VERSION: &str = "v2";
/// Domain separation: the secret file may one day key other things.
const KEY_CONTEXT: &[u8] = b"quire session cookie v1\0";

type HmacSha256 = Hmac<Sha256>;

/// Issues and checks session cookies.
pub struct Sessions {
    /// HMAC keyed by the secret (hashed with [`KEY_CONTEXT`]), its pads hashed once:
    /// each check clones it instead of hashing them again (two of a check's five
    /// compressions).
    keyed: HmacSha256,
    ttl: Duration,
    signouts: SignOuts,
    /// Sign-outs are the cluster's ([`Sessions::shared`]).
    shared: bool,
}

impl std::fmt::Debug for Sessions {
    /// The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    /// Sessions keyed by `secret` (32 bytes or more, random), lasting `ttl`, with
    /// sign-outs kept in memory only (lost on restart).
    #[cfg(test)]
    fn new(secret: &[u8], ttl: Duration) -> Option<Sessions> {
        Sessions::with_signouts(secret, ttl, SignOuts::in_memory())
    }

    fn with_signouts(secret: &[u8], ttl: Duration, signouts: SignOuts) -> Option<Sessions> {
        if secret.trim_ascii().len() < SECRET_LEN_MIN {
            return None;
        }
        let mut h = Sha256::new();
        h.update(KEY_CONTEXT);
        h.update(secret);
        let key: [u8; 32] = h.finalize().into();
        Some(Sessions {
            keyed: HmacSha256::new_from_slice(&key).expect("HMAC takes any key length"),
            ttl,
            signouts,
            shared: false,
        })
    }

    /// Sessions keyed by the secret file at `path` (`VAULT/.quire/secret`, see
    /// [`Sessions::secret_file`]), with sign-outs kept in the file at `signouts`
    /// (`VAULT/.quire/sessions`, see `SignOuts`). Deleting either file signs everyone
    /// out.
    pub fn load_or_create(
        path: &Path,
        signouts: &Path,
        ttl: Duration,
    ) -> Result<Sessions, ReadersError> {
        let secret = Sessions::secret_file(path)?;
        let signouts = SignOuts::load_or_create(signouts)?;
        Sessions::with_signouts(&secret, ttl, signouts).ok_or_else(|| ReadersError::Secret {
            path: path.to_owned(),
            message: "unusable".into(),
        })
    }

    /// The secret in the file at `path`, made with 32 random bytes (as hex) and mode
    /// 0600 if missing. A secret shorter than 32 bytes is an error.
    pub fn secret_file(path: &Path) -> Result<Vec<u8>, ReadersError> {
        let secret = match std::fs::read(path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_secret(path)?,
            Err(source) => {
                return Err(ReadersError::Io {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        warn_if_readable_by_others(path);
        if secret.trim_ascii().len() < SECRET_LEN_MIN {
            return Err(ReadersError::Secret {
                path: path.to_owned(),
                message: format!(
                    "it holds {} bytes; it needs {SECRET_LEN_MIN} or more random bytes \
                     (delete it and quire makes one; everyone then signs in again)",
                    secret.trim_ascii().len()
                ),
            });
        }
        Ok(secret)
    }

    /// Sessions of a cluster node: keyed by `secret`, the same on every node (32
    /// bytes or more, else `None`), so a cookie issued by one node signs in on all;
    /// sign-outs are the cluster's (see `SignOuts::shared`): no cookie of the
    /// cluster is honoured until [`Sessions::adopt_sign_outs`] has given this node
    /// the cluster's table (one issued here before then holds only here, and only
    /// until then),
    /// and [`Sessions::sign_out`] is refused (the cluster records sign-outs, then
    /// [`Sessions::raise_sign_out`] applies them here).
    pub fn shared(secret: &[u8], ttl: Duration) -> Option<Sessions> {
        let mut s = Sessions::with_signouts(secret, ttl, SignOuts::shared())?;
        s.shared = true;
        Some(s)
    }

    /// Whether sign-outs are the cluster's ([`Sessions::shared`]).
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// Takes the cluster's sign-out table: its `epoch` (which every cookie issued
    /// from now on carries) and each user's generation.
    pub fn adopt_sign_outs(&self, epoch: u64, generations: HashMap<String, u64>) {
        self.signouts.adopt(epoch, generations);
    }

    /// Applies a sign-out the cluster recorded: `name`'s cookies issued below
    /// `generation` are refused from now on.
    pub fn raise_sign_out(&self, name: &str, generation: u64) {
        self.signouts.raise(name, generation);
    }

    /// How long an issued session lasts.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A cookie value signing `reader` in until `now + ttl`.
    pub fn issue(&self, reader: &Reader, now: SystemTime) -> String {
        debug_assert!(
            !reader.name.contains(['|', ';', '\r', '\n']),
            "names come from the users file"
        );
        let expires = unix_secs(now).saturating_add(self.ttl.as_secs());
        let (epoch, generation) = self.signouts.current(&reader.name);
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let payload = format!(
            "{VERSION}|{}|{}|{expires}|{epoch:016x}|{generation}|{}",
            reader.name,
            reader.role,
            hex(&nonce)
        );
        let tag = self.mac(payload.as_bytes()).finalize().into_bytes();
        format!("{}.{}", hex(payload.as_bytes()), hex(&tag))
    }

    /// The reader a cookie value signs in, if its tag is right, it has not expired, it
    /// does not outlive this `ttl` (shortening the ttl shortens old sessions too), its
    /// user has not signed out since it was issued, and its user is still in `users`
    /// with the same role. Reads memory only.
    pub fn verify(&self, cookie_value: &str, users: &Users, now: SystemTime) -> Option<Reader> {
        self.check(cookie_value, now, |name, role| {
            users.get(name).filter(|r| r.role == role)
        })
    }

    /// The role of [`Sessions::verify`]'s reader, with every check it makes, without
    /// copying the reader: nothing is allocated (a signed-in hit checks its cookie
    /// with this).
    pub fn verify_role(&self, cookie_value: &str, users: &Users, now: SystemTime) -> Option<Role> {
        self.check(cookie_value, now, |name, role| {
            (users.role_of(name) == Some(role)).then_some(role)
        })
    }

    /// Decodes and checks `cookie_value` (in stack buffers) up to the users file,
    /// whose check is `users_say` (given the name and role the cookie signs).
    fn check<R>(
        &self,
        cookie_value: &str,
        now: SystemTime,
        users_say: impl FnOnce(&str, Role) -> Option<R>,
    ) -> Option<R> {
        if cookie_value.len() > COOKIE_LEN_MAX {
            return None;
        }
        let (payload_hex, tag_hex) = cookie_value.split_once('.')?;
        let mut payload_buf = [0u8; COOKIE_LEN_MAX / 2];
        let mut tag_buf = [0u8; COOKIE_LEN_MAX / 2];
        let payload = unhex_into(payload_hex, &mut payload_buf)?;
        let tag = unhex_into(tag_hex, &mut tag_buf)?;
        self.mac(payload).verify_slice(tag).ok()?;
        // Authentic from here on: we wrote it.
        let payload = std::str::from_utf8(payload).ok()?;
        let mut fields = payload.split('|');
        let [version, name, role, expires, epoch, generation, _nonce] =
            std::array::from_fn(|_| fields.next());
        if fields.next().is_some() || version? != VERSION {
            return None;
        }
        let (name, role) = (name?, Role::parse(role?)?);
        let expires: u64 = expires?.parse().ok()?;
        let now = unix_secs(now);
        if now >= expires || expires > now.saturating_add(self.ttl.as_secs()) {
            return None;
        }
        let epoch = u64::from_str_radix(epoch?, 16).ok()?;
        let generation: u64 = generation?.parse().ok()?;
        if !self.signouts.is_current(name, epoch, generation) {
            return None;
        }
        users_say(name, role)
    }

    /// Signs out the reader `cookie_value` names, if it is valid now: every session of
    /// that reader issued so far ends, on every browser (see `SignOuts`). `Ok(None)`:
    /// the cookie signed no one in, nothing changed. On an error the sessions are
    /// ended in this process but the sign-out was not written, so a restart would
    /// honour them again. Refused on a cluster node ([`Sessions::shared`]): a
    /// sign-out there is the cluster's to record.
    pub fn sign_out(
        &self,
        cookie_value: &str,
        users: &Users,
        now: SystemTime,
    ) -> Result<Option<Reader>, ReadersError> {
        let Some(reader) = self.verify(cookie_value, users, now) else {
            return Ok(None);
        };
        if self.shared {
            return Err(ReadersError::SharedSignOut);
        }
        self.signouts.sign_out(&reader.name)?;
        Ok(Some(reader))
    }

    fn mac(&self, payload: &[u8]) -> HmacSha256 {
        let mut m = self.keyed.clone();
        m.update(payload);
        m
    }
}

fn create_secret(path: &Path) -> Result<Vec<u8>, ReadersError> {
    let io = |source| ReadersError::Io {
        path: path.to_owned(),
        source,
    };
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| ReadersError::Secret {
            path: path.to_owned(),
            message: format!("no randomness from the OS: {e}"),
        })?;
    let text = format!("{}\n", hex(&bytes));
    // Written whole under a temporary name, then linked into place: a reader never
    // sees half a secret, and when two processes race the first link wins for both.
    if create_private(path, text.as_bytes()).map_err(io)? {
        tracing::info!(path = %path.display(), "made a new session secret");
        Ok(text.into_bytes())
    } else {
        std::fs::read(path).map_err(io)
    }
}

fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(m) = std::fs::metadata(path) {
            if m.permissions().mode() & 0o077 != 0 {
                tracing::warn!(
                    path = %path.display(),
                    "the session secret is readable by other users; chmod 600 it"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The value of a `Set-Cookie` header signing a browser in: `HttpOnly`, `SameSite=Lax`,
/// `Path=/`, `Max-Age` = `ttl`, and `Secure` when the site is served over HTTPS.
/// Characters a cookie value may not hold are dropped, so a header can never be split.
pub fn set_cookie_header(value: &str, ttl: Duration, secure: bool) -> String {
    debug_assert!(value.bytes().all(is_cookie_octet), "a value from issue()");
    let value: String = value
        .chars()
        .filter(|&c| c.is_ascii() && is_cookie_octet(c as u8))
        .collect();
    format!(
        "{COOKIE}={value}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{}",
        ttl.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

/// The value of a `Set-Cookie` header signing a browser out.
pub fn clear_cookie_header() -> String {
    format!("{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax")
}

/// The session cookie's value in a `Cookie` header (`a=b; quire_session=...; c=d`): the
/// first one wins, surrounding quotes are dropped, an empty value is none. Call it once
/// per `Cookie` header line.
pub fn session_cookie(header: &str) -> Option<&str> {
    let (_, value) = header
        .split(';')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| name.trim() == COOKIE)?;
    let value = value.trim();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    Some(value).filter(|v| !v.is_empty())
}

/// RFC 6265 §4.1.1 `cookie-octet`.
fn is_cookie_octet(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x2b | 0x2d..=0x3a | 0x3c..=0x5b | 0x5d..=0x7e)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "$argon2id$v=19$m=256,t=1,p=1$c29tZXNhbHQxMjM0NTY$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    const HOUR: Duration = Duration::from_secs(3600);

    fn users(list: &[(&str, &str)]) -> Users {
        let text: String = list
            .iter()
            .map(|(n, r)| {
                format!("[[user]]\nname = \"{n}\"\npassword = \"{HASH}\"\nrole = \"{r}\"\n")
            })
            .collect();
        Users::parse(&text, Path::new("users.toml")).unwrap()
    }

    fn sessions(ttl: Duration) -> Sessions {
        Sessions::new(&[7u8; 32], ttl).unwrap()
    }

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn reader(name: &str, role: Role) -> Reader {
        Reader {
            name: name.into(),
            role,
        }
    }

    /// The hit path's check answers exactly as the full one: a role for a valid
    /// session, nothing for a forged, expired, signed-out or demoted one.
    #[test]
    fn verify_role_agrees_with_verify() {
        let s = sessions(HOUR);
        let u = users(&[("ada", "reader"), ("bob", "admin")]);
        let ada = s.issue(&reader("ada", Role::Reader), t(1000));
        let bob = s.issue(&reader("bob", Role::Admin), t(1000));
        assert_eq!(s.verify_role(&ada, &u, t(1001)), Some(Role::Reader));
        assert_eq!(s.verify_role(&bob, &u, t(1001)), Some(Role::Admin));
        // Change the MAC's last digit to another one (a fixed '0' would be no change
        // one time in sixteen).
        let mut forged = ada.clone();
        let last = forged.pop().unwrap();
        forged.push(if last == '0' { '1' } else { '0' });
        for c in [&forged, &format!("{ada}0"), &"zz".repeat(400)] {
            assert_eq!(s.verify_role(c, &u, t(1001)), None, "{c}");
            assert_eq!(s.verify(c, &u, t(1001)), None);
        }
        assert_eq!(s.verify_role(&ada, &u, t(1000 + 7200)), None, "expired");
        let demoted = users(&[("ada", "reader"), ("bob", "reader")]);
        assert_eq!(s.verify_role(&bob, &demoted, t(1001)), None, "demoted");
        s.sign_out(&ada, &u, t(1002)).unwrap();
        assert_eq!(s.verify_role(&ada, &u, t(1003)), None, "signed out");
        assert_eq!(s.verify(&ada, &u, t(1003)), None);
    }

    #[test]
    fn a_cookie_round_trips_until_it_expires() {
        let s = sessions(HOUR);
        let u = users(&[("ada", "admin")]);
        let ada = reader("ada", Role::Admin);
        let c = s.issue(&ada, t(1_000_000));
        assert!(c.len() < COOKIE_LEN_MAX);
        assert_eq!(s.verify(&c, &u, t(1_000_000)), Some(ada.clone()));
        assert_eq!(s.verify(&c, &u, t(1_003_599)), Some(ada.clone()));
        assert_eq!(s.verify(&c, &u, t(1_003_600)), None, "expired");
        assert_ne!(c, s.issue(&ada, t(1_000_000)), "nonces differ");
        // Another key, or a shorter ttl than the one issued under, refuses it.
        let other = Sessions::new(&[8u8; 32], HOUR).unwrap();
        assert_eq!(other.verify(&c, &u, t(1_000_000)), None);
        let short = Sessions::new(&[7u8; 32], Duration::from_secs(60)).unwrap();
        assert_eq!(short.verify(&c, &u, t(1_000_000)), None);
        assert_eq!(short.verify(&c, &u, t(1_003_590)), Some(ada));
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let s = sessions(HOUR);
        let u = users(&[("ada", "reader")]);
        let c = s.issue(&reader("ada", Role::Reader), t(1000));
        for i in 0..c.len() {
            for bit in [0x01u8, 0x20, 0x80] {
                let mut b = c.clone().into_bytes();
                b[i] ^= bit;
                let Ok(tampered) = String::from_utf8(b) else {
                    continue;
                };
                assert_eq!(
                    s.verify(&tampered, &u, t(1000)),
                    None,
                    "byte {i} ^ {bit:#x}"
                );
            }
        }
        assert_eq!(s.verify(&c[..c.len() - 2], &u, t(1000)), None, "truncated");
        assert_eq!(s.verify("", &u, t(1000)), None);
        assert_eq!(s.verify(".", &u, t(1000)), None);
    }

    #[test]
    fn removing_or_demoting_a_user_ends_their_sessions() {
        let s = sessions(HOUR);
        let admin = s.issue(&reader("ada", Role::Admin), t(1000));
        let bob = s.issue(&reader("bob", Role::Reader), t(1000));
        let before = users(&[("ada", "admin"), ("bob", "reader")]);
        assert!(s.verify(&admin, &before, t(1000)).is_some());
        assert!(s.verify(&bob, &before, t(1000)).is_some());
        let after = users(&[("ada", "reader")]);
        assert_eq!(s.verify(&admin, &after, t(1000)), None, "demoted");
        assert_eq!(s.verify(&bob, &after, t(1000)), None, "removed");
    }

    #[test]
    fn an_oversized_cookie_is_refused_before_decoding() {
        let s = sessions(HOUR);
        let u = users(&[("ada", "reader")]);
        let c = s.issue(&reader("ada", Role::Reader), t(1000));
        let huge = format!("{c}{}", "0".repeat(100 * 1024));
        assert_eq!(s.verify(&huge, &u, t(1000)), None);
        assert_eq!(s.verify(&"a".repeat(COOKIE_LEN_MAX + 1), &u, t(1000)), None);
    }

    #[test]
    fn the_secret_is_made_private_reused_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".quire/secret");
        let signouts = dir.path().join(".quire/sessions");
        let a = Sessions::load_or_create(&path, &signouts, HOUR).unwrap();
        let first = std::fs::read(&path).unwrap();
        assert_eq!(first.len(), 65, "32 random bytes as hex, newline");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let b = Sessions::load_or_create(&path, &signouts, HOUR).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), first, "reused, not remade");
        let u = users(&[("ada", "reader")]);
        let c = a.issue(&reader("ada", Role::Reader), t(1000));
        assert!(b.verify(&c, &u, t(1000)).is_some(), "survives a restart");
        assert_eq!(
            std::fs::read_dir(dir.path().join(".quire"))
                .unwrap()
                .count(),
            2,
            "the secret and the sign-out table, no temporary files"
        );

        std::fs::write(&path, "too short\n").unwrap();
        let e = Sessions::load_or_create(&path, &signouts, HOUR)
            .unwrap_err()
            .to_string();
        assert!(e.contains("secret") && e.contains("32"), "{e}");
        assert!(!format!("{a:?}").contains("key"), "no key in Debug");
    }

    /// Sign in, copy the cookie, sign out: the copy no longer signs anyone in, in this
    /// process or after a restart. Other users and later sign-ins are untouched.
    #[test]
    fn signed_out_cookie_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (secret, table) = (dir.path().join("secret"), dir.path().join("sessions"));
        let s = Sessions::load_or_create(&secret, &table, HOUR).unwrap();
        let u = users(&[("ada", "reader"), ("bob", "reader")]);
        let ada = reader("ada", Role::Reader);
        let copy = s.issue(&ada, t(1000));
        let other_device = s.issue(&ada, t(1001));
        let bob = s.issue(&reader("bob", Role::Reader), t(1000));
        assert_eq!(s.sign_out(&copy, &u, t(1002)).unwrap(), Some(ada.clone()));
        assert_eq!(s.verify(&copy, &u, t(1003)), None, "the copied cookie");
        assert_eq!(s.verify(&other_device, &u, t(1003)), None, "everywhere");
        assert!(s.verify(&bob, &u, t(1003)).is_some(), "other users stay");
        let fresh = s.issue(&ada, t(1004));
        assert_eq!(s.verify(&fresh, &u, t(1004)), Some(ada.clone()));
        // Signing out with a dead cookie changes nothing.
        assert_eq!(s.sign_out(&copy, &u, t(1005)).unwrap(), None);
        assert_eq!(s.verify(&fresh, &u, t(1005)), Some(ada.clone()));

        let restarted = Sessions::load_or_create(&secret, &table, HOUR).unwrap();
        assert_eq!(
            restarted.verify(&copy, &u, t(1006)),
            None,
            "after a restart"
        );
        assert_eq!(restarted.verify(&other_device, &u, t(1006)), None);
        assert_eq!(restarted.verify(&fresh, &u, t(1006)), Some(ada));
        assert!(restarted.verify(&bob, &u, t(1006)).is_some());

        // Losing the table signs everyone out; it never brings the copy back.
        std::fs::remove_file(&table).unwrap();
        let lost = Sessions::load_or_create(&secret, &table, HOUR).unwrap();
        assert_eq!(lost.verify(&copy, &u, t(1007)), None);
        assert_eq!(lost.verify(&bob, &u, t(1007)), None);
    }

    #[test]
    fn cluster_sessions_sign_in_on_every_node_and_honour_the_clusters_sign_outs() {
        let secret = b"a secret every node of the cluster shares, 32+ bytes";
        let (a, b) = (
            Sessions::shared(secret, Duration::from_secs(3600)).unwrap(),
            Sessions::shared(secret, Duration::from_secs(3600)).unwrap(),
        );
        assert!(a.is_shared());
        assert!(Sessions::shared(b"short", Duration::from_secs(1)).is_none());
        let u = users(&[("ada", "reader")]);
        let ada = reader("ada", Role::Reader);
        let early = b.issue(&ada, t(100));
        assert_eq!(a.verify(&early, &u, t(101)), None, "no table adopted yet");
        for s in [&a, &b] {
            s.adopt_sign_outs(42, HashMap::from([("ada".to_owned(), 1)]));
        }
        let cookie = a.issue(&ada, t(100));
        assert_eq!(
            b.verify(&cookie, &u, t(101)),
            Some(ada.clone()),
            "on the other node"
        );
        assert!(matches!(
            b.sign_out(&cookie, &u, t(101)),
            Err(ReadersError::SharedSignOut)
        ));
        assert_eq!(
            b.verify(&cookie, &u, t(101)),
            Some(ada),
            "refusing changed nothing"
        );
        b.raise_sign_out("ada", 2);
        assert_eq!(
            b.verify(&cookie, &u, t(101)),
            None,
            "signed out by the cluster"
        );
    }

    #[test]
    fn a_cookie_of_the_old_format_is_refused() {
        let s = sessions(HOUR);
        let u = users(&[("ada", "reader")]);
        let payload = format!("v1|ada|reader|{}|{}", 2000, "00".repeat(16));
        let tag = s.mac(payload.as_bytes()).finalize().into_bytes();
        let v1 = format!("{}.{}", hex(payload.as_bytes()), hex(&tag));
        assert_eq!(s.verify(&v1, &u, t(1000)), None);
    }

    #[test]
    fn cookie_headers() {
        assert_eq!(
            set_cookie_header("ab.cd", HOUR, false),
            "quire_session=ab.cd; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax"
        );
        assert!(set_cookie_header("ab.cd", HOUR, true).ends_with("; Secure"));
        assert_eq!(
            clear_cookie_header(),
            "quire_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"
        );
        assert_eq!(session_cookie("quire_session=abc"), Some("abc"));
        assert_eq!(
            session_cookie("a=b;quire_session = \"x.y\" ; quire_session=z"),
            Some("x.y")
        );
        assert_eq!(session_cookie("xquire_session=1; quire_sessionx=2"), None);
        assert_eq!(session_cookie("junk; =; ;; quire_session=v=w"), Some("v=w"));
        assert_eq!(session_cookie("quire_session=; a=b"), None);
        assert_eq!(session_cookie(""), None);
    }
}
