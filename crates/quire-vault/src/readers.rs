//! Readers: who is signed in, and what they may read.
//!
//! `free: true` notes are public; other notes need a signed-in reader; `draft: true`
//! notes only admins see. Readers and admins come from `VAULT/.quire/users.toml`
//! ([`Users`]), each with an argon2 PHC password hash ([`hash_password`]). A sign-in
//! becomes a signed session cookie ([`Sessions`]); a login form can be throttled with
//! a [`LoginLimiter`]. No sockets here: the HTTP routes live in the serving crate and
//! call these pieces.
//!
//! Key decisions:
//! - **Sessions are signed cookies, checked against memory**: the cookie is
//!   `hex(payload).hex(tag)` with payload `v2|name|role|expires_unix|epoch|generation|nonce`
//!   and an HMAC-SHA256 tag under a key derived from `VAULT/.quire/secret`. The only
//!   state server side is a generation per user who signed out (`SignOuts`,
//!   `VAULT/.quire/sessions`, loaded at start and written on sign-out), so a restart
//!   keeps everyone signed in and a request never touches the disk. Revocation:
//!   signing out ends every session of that user, everywhere (a copied cookie too); a
//!   cookie is honoured only while its user is still in the users file *with the same
//!   role*, so deleting or demoting a user ends their sessions on the next reload;
//!   deleting the secret or the sessions file ends every session. A password change
//!   does not end sessions already issued (signing out does).
//! - **Timing says nothing about which names exist**: verifying an unknown name still
//!   runs an argon2 verification with the same cost as a real one.
//! - **Every input is bounded** before any work: names, passwords, cookie values.
//! - Only argon2 hashes (argon2id, argon2i, argon2d) are accepted; scrypt or bcrypt
//!   strings are rejected with a message (no scrypt implementation is built in).
//!
//! Lifecycle of a session: `Users::verify` (login form) → [`Reader`] →
//! `Sessions::issue` → `Set-Cookie` ([`set_cookie_header`]) → each request:
//! [`session_cookie`] on the `Cookie` header → `Sessions::verify` → [`Reader`] or
//! anonymous → logout: `Sessions::sign_out` (bumps the generation) and
//! [`clear_cookie_header`].

mod limiter;
mod session;
mod signouts;
mod users;

use std::path::PathBuf;

use crate::note::Visibility;

pub use limiter::{Attempt, LoginLimiter, LoginLimits};
pub use session::{clear_cookie_header, session_cookie, set_cookie_header, Sessions};
pub(crate) use users::NAME_LEN_MAX;
pub use users::{
    check_name, hash_password, write_user, CheckMemory, UserWrite, Users, PASSWORD_LEN_MAX,
};

/// A signed-in person.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reader {
    /// Their name in the users file.
    pub name: String,
    /// What they may see.
    pub role: Role,
}

impl Reader {
    /// The most restricted notes they may read: readers see public and private notes,
    /// admins drafts too. A note is shown when `note.visibility() <= reader.audience()`.
    pub fn audience(&self) -> Visibility {
        match self.role {
            Role::Reader => Visibility::Private,
            Role::Admin => Visibility::Draft,
        }
    }
}

/// A reader's role, as written in the users file (`"reader"` or `"admin"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads public and private notes.
    Reader,
    /// Reads everything, drafts included, and sees view counts.
    Admin,
}

impl Role {
    /// The name in the users file and in cookies.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Admin => "admin",
        }
    }

    fn parse(s: &str) -> Option<Role> {
        match s {
            "reader" => Some(Role::Reader),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the users file or the session secret could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadersError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The users file is malformed.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Users {
        /// The users file.
        path: PathBuf,
        /// The 1-based line of the problem, when known.
        line: Option<usize>,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The session secret is unusable.
    #[error("session secret {}: {message}", path.display())]
    Secret {
        /// The secret file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A cluster node's sessions were asked to record a sign-out themselves: the
    /// cluster records them (see `Sessions::shared`).
    #[error("sign-outs on a cluster node are recorded by the cluster")]
    SharedSignOut,
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// Decodes lowercase hex only, so every byte string has exactly one encoding (a changed
/// character always changes the bytes or fails).
fn unhex(s: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_is_canonical() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&bytes)).unwrap(), bytes);
        assert_eq!(unhex("0aff"), Some(vec![0x0a, 0xff]));
        assert_eq!(unhex("0AFF"), None);
        assert_eq!(unhex("0af"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn audiences_follow_roles() {
        let r = |role| Reader {
            name: "a".into(),
            role,
        };
        assert_eq!(r(Role::Reader).audience(), Visibility::Private);
        assert_eq!(r(Role::Admin).audience(), Visibility::Draft);
        assert!(Visibility::Public <= r(Role::Reader).audience());
        assert!(Visibility::Draft > r(Role::Reader).audience());
    }
}
