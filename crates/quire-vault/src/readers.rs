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

mod error;
mod file;
mod hex;
mod limiter;
mod name;
mod reader;
mod session;
mod signouts;
mod tokens;
mod users;

pub use error::ReadersError;

pub use limiter::{Attempt, LoginLimiter, LoginLimits};
pub use name::{check_name, NameError};
pub use reader::{Reader, Role};
pub use session::{clear_cookie_header, session_cookie, set_cookie_header, Sessions};
pub use tokens::{add_token, revoke_tokens, Tokens, TOKENS_MAX, TOKEN_LEN, TOKEN_PREFIX};
pub use users::{hash_password, write_user, CheckMemory, UserWrite, Users, PASSWORD_LEN_MAX};
