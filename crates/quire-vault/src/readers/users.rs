//! The users file, `VAULT/.quire/users.toml`, and argon2 password hashes.
//!
//! ```toml
//! [[user]]
//! name = "ada"
//! password = "$argon2id$v=19$m=19456,t=2,p=1$..."   # PHC string
//! role = "reader"   # or "admin"
//! ```
//!
//! The file is checked whole at load: unknown keys, duplicate names (ignoring case),
//! bad roles and anything that is not an argon2 PHC string are errors naming the line,
//! so a typo never silently locks someone out or lets someone in. Error messages never
//! repeat a password value (it may be a plain-text password written by mistake).

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use argon2::password_hash::{Output, PasswordHash, PasswordHasher, Salt, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use rand::RngCore;
use toml::Spanned;

use super::error::ReadersError;
use super::file::replace_file;
use super::name::{check_name, NAME_LEN_MAX};
use super::reader::{Reader, Role};

/// Longest password accepted by [`Users::verify`], bytes (longer ones fail at once).
pub const PASSWORD_LEN_MAX: usize = 1024;
/// Largest argon2 memory cost accepted from the file, KiB (1 GiB): a typo must not make
/// every login allocate the machine away.
const M_COST_MAX: u32 = 1 << 20;
/// The dummy hash's salt and output: any fixed values do, it never matches.
const DUMMY_SALT: &str = "cXVpcmUtZHVtbXktc2FsdA";
const DUMMY_OUTPUT: [u8; 32] = [0; 32];

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    user: Vec<Entry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: Spanned<String>,
    password: Spanned<String>,
    role: Spanned<Role>,
}

struct User {
    name: String,
    role: Role,
    phc: String,
}

/// The readers and admins of a vault.
pub struct Users {
    users: Vec<User>,
    by_name: HashMap<String, usize>,
    /// Verified against when a name is unknown, with the cost of a real hash.
    dummy: String,
}

impl std::fmt::Debug for Users {
    /// Names and roles only: hashes stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.users.iter().map(|u| (&u.name, u.role)))
            .finish()
    }
}

impl Default for Users {
    fn default() -> Users {
        Users {
            users: Vec::new(),
            by_name: HashMap::new(),
            dummy: dummy_hash(None),
        }
    }
}

impl Users {
    /// Loads the users file at `path`. A missing file is no users (everything but
    /// public notes is then unreadable), not an error.
    pub fn load(path: &Path) -> Result<Users, ReadersError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Users::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Users::default()),
            Err(source) => Err(ReadersError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Parses users file `text`; `path` names it in errors.
    pub(crate) fn parse(text: &str, path: &Path) -> Result<Users, ReadersError> {
        let entries = entries(text, path)?;
        let mut users = Users::default();
        let mut lines: HashMap<String, usize> = HashMap::new();
        for e in entries {
            let err = |span: Range<usize>, message: String| ReadersError::Users {
                path: path.to_owned(),
                line: Some(line_of(text, span.start)),
                message,
            };
            let name = e.name.get_ref();
            check_name(name).map_err(|m| err(e.name.span(), m.to_string()))?;
            let line = line_of(text, e.name.span().start);
            if let Some(first) = lines.insert(name.to_lowercase(), line) {
                return Err(err(
                    e.name.span(),
                    format!(
                        "user `{name}` is listed twice (also line {first}); names are compared ignoring case"
                    ),
                ));
            }
            check_phc(name, e.password.get_ref())
                .map_err(|m| err(e.password.span(), m.to_string()))?;
            users.by_name.insert(name.clone(), users.users.len());
            users.users.push(User {
                name: e.name.into_inner(),
                role: e.role.into_inner(),
                phc: e.password.into_inner(),
            });
        }
        users.dummy = dummy_hash(users.users.first().map(|u| u.phc.as_str()));
        Ok(users)
    }

    /// How many users there are.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether there are none.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// The user called `name` (exact case), without checking a password: for sessions
    /// already verified.
    /// The role of user `name`, if there is one (no copy of the name).
    pub(crate) fn role_of(&self, name: &str) -> Option<Role> {
        Some(self.users[*self.by_name.get(name)?].role)
    }

    pub(crate) fn get(&self, name: &str) -> Option<Reader> {
        let u = &self.users[*self.by_name.get(name)?];
        Some(Reader {
            name: u.name.clone(),
            role: u.role,
        })
    }

    /// The reader named `name`, with the role the file gives them (for an API
    /// token, which proves who it is by itself: see `tokens`).
    pub fn reader(&self, name: &str) -> Option<Reader> {
        let u = &self.users[*self.by_name.get(name)?];
        Some(Reader {
            name: u.name.clone(),
            role: u.role,
        })
    }

    /// Checks a sign-in. Takes about as long whether or not `name` exists: an unknown
    /// name is verified against a dummy hash with the first user's argon2 parameters.
    /// Over-long names or passwords fail at once (that says nothing about who exists).
    /// Allocates argon2's memory for this one check; [`Users::verify_in`] reuses it.
    pub fn verify(&self, name: &str, password: &str) -> Option<Reader> {
        self.verify_in(name, password, &mut CheckMemory::default())
    }

    /// [`Users::verify`] with argon2's working memory (19 MiB at the default cost)
    /// taken from `memory`, grown when a hash needs more and kept for the next
    /// check: a fixed set of these bounds what sign-ins hold, whatever the allocator
    /// keeps of freed blocks.
    pub fn verify_in(
        &self,
        name: &str,
        password: &str,
        memory: &mut CheckMemory,
    ) -> Option<Reader> {
        if name.len() > NAME_LEN_MAX || password.len() > PASSWORD_LEN_MAX {
            return None;
        }
        let user = self.by_name.get(name).map(|&i| &self.users[i]);
        let phc = user.map_or(self.dummy.as_str(), |u| u.phc.as_str());
        // Parsed at load already; parsing again here keeps `Users` free of borrows.
        let ok = PasswordHash::new(phc).is_ok_and(|h| memory.matches(password, &h));
        match user {
            Some(u) if ok => Some(Reader {
                name: u.name.clone(),
                role: u.role,
            }),
            _ => None,
        }
    }
}

/// argon2's working memory for one password check at a time (see
/// [`Users::verify_in`]).
#[derive(Default)]
pub struct CheckMemory {
    blocks: Vec<Block>,
}

impl std::fmt::Debug for CheckMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CheckMemory({} bytes)", self.bytes())
    }
}

impl CheckMemory {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.blocks.len() * Block::SIZE
    }

    /// Whether `password` hashes to `h`, in this memory; the output is compared in
    /// constant time (`Output`'s equality).
    fn matches(&mut self, password: &str, h: &PasswordHash<'_>) -> bool {
        let (Some(salt), Some(expected)) = (h.salt, h.hash) else {
            return false;
        };
        let Ok(params) = Params::try_from(h) else {
            return false;
        };
        let Ok(algorithm) = Algorithm::try_from(h.algorithm) else {
            return false;
        };
        let version = h.version.map_or(Ok(Version::default()), Version::try_from);
        let mut salt_buf = [0u8; 64];
        let (Ok(version), Ok(salt)) = (version, salt.decode_b64(&mut salt_buf)) else {
            return false;
        };
        if self.blocks.len() < params.block_count() {
            self.blocks.resize(params.block_count(), Block::default());
        }
        let mut out = [0u8; Output::MAX_LENGTH];
        let out = &mut out[..expected.len()];
        Argon2::new(algorithm, version, params)
            .hash_password_into_with_memory(password.as_bytes(), salt, out, &mut self.blocks[..])
            .is_ok()
            && Output::new(out).is_ok_and(|o| o == expected)
    }
}

/// An argon2id PHC string for `password`: default parameters (m=19 MiB, t=2, p=1) and a
/// random 16-byte salt. Unit tests of this crate use m=256 KiB, t=1 instead, because
/// argon2 at full cost takes seconds in debug builds; hashes made there verify anywhere.
pub fn hash_password(password: &str) -> String {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    // 16 bytes is within the PHC salt limits, and argon2 takes passwords up to 4 GiB.
    let salt = SaltString::encode_b64(&salt).expect("a 16-byte salt encodes");
    hasher()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 hashes any password under 4 GiB")
        .to_string()
}

fn hasher() -> Argon2<'static> {
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params())
}

#[cfg(not(test))]
fn params() -> Params {
    Params::DEFAULT
}

/// Light parameters for this crate's unit tests only (see [`hash_password`]).
#[cfg(test)]
fn params() -> Params {
    Params::new(256, 1, 1, None).expect("valid test params")
}

/// Whether [`write_user`] added a user or replaced one's password and role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserWrite {
    /// A new `[[user]]` entry was appended.
    Added,
    /// The existing entry's password and role were replaced in place.
    Updated,
}

/// Adds user `name` to the users file at `path`, or replaces their password hash and
/// role. Other text (comments, other users) is kept byte for byte; the file is checked
/// before and after and replaced atomically. A new file is created with mode 0600.
pub fn write_user(
    path: &Path,
    name: &str,
    role: Role,
    phc: &str,
) -> Result<UserWrite, ReadersError> {
    let bad = |message: String| ReadersError::Users {
        path: path.to_owned(),
        line: None,
        message,
    };
    check_name(name).map_err(|e| bad(e.to_string()))?;
    check_phc(name, phc).map_err(|e| bad(e.to_string()))?;
    let io = |source| ReadersError::Io {
        path: path.to_owned(),
        source,
    };
    let old = match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    let text = old.as_deref().unwrap_or("");
    Users::parse(text, path)?;
    let mut new = text.to_owned();
    let mut outcome = UserWrite::Added;
    for e in entries(text, path)? {
        if e.name.get_ref() == name {
            // Later span first, so the earlier one's offsets still hold.
            let mut edits = [
                (e.password.span(), format!("\"{phc}\"")),
                (e.role.span(), format!("\"{role}\"")),
            ];
            edits.sort_by_key(|(s, _)| std::cmp::Reverse(s.start));
            for (span, value) in edits {
                new.replace_range(span, &value);
            }
            outcome = UserWrite::Updated;
        } else if e.name.get_ref().eq_ignore_ascii_case(name) {
            return Err(bad(format!(
                "a user named `{}` exists; names are compared ignoring case",
                e.name.get_ref()
            )));
        }
    }
    if outcome == UserWrite::Added {
        if new.is_empty() {
            new.push_str(
                "# quire readers: `quire user add NAME [--admin]` adds one or resets a password.\n",
            );
        } else if !new.ends_with('\n') {
            new.push('\n');
        }
        new.push_str(&format!(
            "\n[[user]]\nname = \"{name}\"\npassword = \"{phc}\"\nrole = \"{role}\"\n"
        ));
    }
    let check = Users::parse(&new, path)?;
    debug_assert_eq!(check.get(name).map(|r| r.role), Some(role));
    replace_file(path, new.as_bytes(), old.is_none()).map_err(io)?;
    Ok(outcome)
}

fn entries(text: &str, path: &Path) -> Result<Vec<Entry>, ReadersError> {
    let file: File = toml::from_str(text).map_err(|e| ReadersError::Users {
        path: path.to_owned(),
        line: e.span().map(|s| line_of(text, s.start)),
        message: e.message().trim().to_owned(),
    })?;
    Ok(file.user)
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Why a stored password is not a hash quire accepts. Every message ends with how to
/// make one; none echoes the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PhcError {
    #[error("the password of `{name}` is not a hash (plain text is never accepted); {}", how(.name))]
    NotAHash { name: String },
    #[error("the password of `{name}` is not a valid PHC hash string ({why}); {}", how(.name))]
    NotPhc { name: String, why: String },
    #[error("the password of `{name}` is a `{algorithm}` hash; only argon2 (argon2id, argon2i, argon2d) is supported: {}", how(.name))]
    NotArgon2 { name: String, algorithm: String },
    #[error("the argon2 version of `{name}`: {why}")]
    Version { name: String, why: String },
    #[error("the password hash of `{name}` lacks a salt or an output; {}", how(.name))]
    Incomplete { name: String },
    #[error("the argon2 parameters of `{name}`: {why}")]
    Params { name: String, why: String },
    #[error("the argon2 memory cost of `{name}` is over {} KiB; {}", M_COST_MAX, how(.name))]
    MemoryCost { name: String },
}

/// How to store a good hash for `name`.
fn how(name: &str) -> String {
    format!(
        "run `quire user add {name}` (it reads the password on stdin and stores an argon2id hash)"
    )
}

/// Accepts argon2 PHC strings with a salt, an output and sane parameters. Never echoes
/// the value.
fn check_phc(name: &str, phc: &str) -> Result<(), PhcError> {
    let name = || name.to_owned();
    if !phc.starts_with('$') {
        return Err(PhcError::NotAHash { name: name() });
    }
    let h = PasswordHash::new(phc).map_err(|e| PhcError::NotPhc {
        name: name(),
        why: e.to_string(),
    })?;
    if Algorithm::try_from(h.algorithm).is_err() {
        return Err(PhcError::NotArgon2 {
            name: name(),
            algorithm: h.algorithm.to_string(),
        });
    }
    if let Some(v) = h.version {
        Version::try_from(v).map_err(|e| PhcError::Version {
            name: name(),
            why: e.to_string(),
        })?;
    }
    if h.salt.is_none() || h.hash.is_none() {
        return Err(PhcError::Incomplete { name: name() });
    }
    let params = Params::try_from(&h).map_err(|e| PhcError::Params {
        name: name(),
        why: e.to_string(),
    })?;
    if params.m_cost() > M_COST_MAX {
        return Err(PhcError::MemoryCost { name: name() });
    }
    Ok(())
}

/// A never-matching hash that costs what `like` costs to verify (algorithm, version,
/// parameters, output length), or what [`hash_password`] makes when there is no user.
/// Built from parts: making it costs no hashing.
fn dummy_hash(like: Option<&str>) -> String {
    if let Some(Ok(mut h)) = like.map(PasswordHash::new) {
        let len = h.hash.map_or(DUMMY_OUTPUT.len(), |o| o.len());
        let zeros = [0u8; Output::MAX_LENGTH];
        h.salt = Salt::from_b64(DUMMY_SALT).ok();
        h.hash = Output::new(&zeros[..len.min(zeros.len())]).ok();
        return h.to_string();
    }
    let p = params();
    let salt = Salt::from_b64(DUMMY_SALT).expect("valid dummy salt");
    let output = Output::new(&DUMMY_OUTPUT).expect("32 bytes is a valid output");
    format!(
        "$argon2id$v=19$m={},t={},p={}${salt}${output}",
        p.m_cost(),
        p.t_cost(),
        p.p_cost()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(users: &[(&str, &str, &str)]) -> String {
        users
            .iter()
            .map(|(n, p, r)| {
                format!("[[user]]\nname = \"{n}\"\npassword = \"{p}\"\nrole = \"{r}\"\n\n")
            })
            .collect()
    }

    #[test]
    fn hash_and_verify_round_trip_wrong_password_and_unknown_user() {
        let h = hash_password("correct horse");
        assert!(h.starts_with("$argon2id$v=19$"), "{h}");
        let users = Users::parse(&file(&[("ada", &h, "admin")]), Path::new("u.toml")).unwrap();
        assert_eq!(
            users.verify("ada", "correct horse"),
            Some(Reader {
                name: "ada".into(),
                role: Role::Admin
            })
        );
        assert_eq!(users.verify("ada", "wrong horse"), None);
        assert_eq!(users.verify("bob", "correct horse"), None);
        assert_eq!(
            users.verify("Ada", "correct horse"),
            None,
            "names are exact"
        );
        assert_eq!(users.verify("ada", &"x".repeat(PASSWORD_LEN_MAX + 1)), None);
        assert_eq!(users.len(), 1);
        assert!(
            !format!("{users:?}").contains("argon2"),
            "no hashes in Debug"
        );
    }

    #[test]
    fn the_dummy_hash_costs_what_a_real_one_does() {
        let real = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQxMjM0NTY$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        let d = dummy_hash(Some(real));
        assert!(d.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{d}");
        assert_ne!(d, real);
        check_phc("x", &d).unwrap();
        check_phc("x", &dummy_hash(None)).unwrap();
    }

    #[test]
    fn a_missing_file_is_no_users() {
        let u = Users::load(Path::new("/nonexistent/users.toml")).unwrap();
        assert!(u.is_empty());
        assert_eq!(u.verify("ada", "pw"), None);
    }

    #[test]
    fn malformed_users_files_are_clear_errors_with_lines() {
        let h = "$argon2id$v=19$m=256,t=1,p=1$c29tZXNhbHQxMjM0NTY$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        let ok = file(&[("ada", h, "reader")]);
        let cases: &[(&str, String, usize, &str)] = &[
            (
                "missing name",
                format!("[[user]]\npassword = \"{h}\"\nrole = \"reader\"\n"),
                1,
                "name",
            ),
            ("bad role", file(&[("ada", h, "root")]), 4, "root"),
            (
                "plain-text password",
                file(&[("ada", "hunter2", "reader")]),
                3,
                "quire user add ada",
            ),
            (
                "scrypt hash",
                file(&[(
                    "ada",
                    "$scrypt$ln=16,r=8,p=1$c2FsdHNhbHQ$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                    "reader",
                )]),
                3,
                "only argon2",
            ),
            (
                "duplicate",
                format!("{ok}{}", file(&[("ADA", h, "admin")])),
                7,
                "listed twice (also line 2)",
            ),
            (
                "unknown key",
                ok.replace("role = \"reader\"", "role = \"reader\"\nemail = \"a@b\""),
                5,
                "email",
            ),
            (
                "unknown top-level key",
                format!("users = 1\n{ok}"),
                1,
                "users",
            ),
            (
                "bad name",
                file(&[("a|b", h, "reader")]),
                2,
                "letters, digits",
            ),
            ("not toml", "[[user]\n".into(), 1, ""),
        ];
        for (what, text, line, needle) in cases {
            let e = Users::parse(text, Path::new("/v/.quire/users.toml"))
                .err()
                .unwrap_or_else(|| panic!("{what}: accepted"));
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("/v/.quire/users.toml:{line}: ")),
                "{what}: {msg}"
            );
            assert!(msg.contains(needle), "{what}: {msg}");
            assert!(
                !msg.contains("hunter2"),
                "{what}: echoes the password: {msg}"
            );
        }
        Users::parse(&ok, Path::new("u")).unwrap();
        Users::parse("", Path::new("u")).unwrap();
    }

    #[test]
    fn write_user_adds_then_updates_in_place_keeping_comments() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".quire/users.toml");
        let h1 = dummy_hash(None);
        assert_eq!(
            write_user(&path, "ada", Role::Reader, &h1).unwrap(),
            UserWrite::Added
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("# keep me\n");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(
            write_user(&path, "bob", Role::Admin, &h1).unwrap(),
            UserWrite::Added
        );
        let h2 = h1.replace("AAAA", "BBBB");
        assert_eq!(
            write_user(&path, "ada", Role::Admin, &h2).unwrap(),
            UserWrite::Updated
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("# keep me"), "{text}");
        assert!(text.contains(&h2));
        let u = Users::load(&path).unwrap();
        assert_eq!(u.len(), 2);
        assert_eq!(u.get("ada").unwrap().role, Role::Admin);
        assert_eq!(u.get("bob").unwrap().role, Role::Admin);
        assert!(write_user(&path, "ADA", Role::Reader, &h1).is_err());
        assert!(write_user(&path, "eve", Role::Reader, "plain").is_err());
        assert_eq!(
            Users::load(&path).unwrap().len(),
            2,
            "failed writes change nothing"
        );
    }
}
