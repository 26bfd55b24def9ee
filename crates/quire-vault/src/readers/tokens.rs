//! Readers' API tokens, `VAULT/.quire/tokens.toml`: what lets an agent read as a
//! reader without a password or a cookie (the MCP endpoint).
//!
//! ```toml
//! [[token]]
//! user = "ada"
//! sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! label = "laptop agent"   # optional
//! created = 1764350000     # unix seconds
//! ```
//!
//! A token is `quire_` and 64 lower-case hex digits: 32 bytes from the OS's
//! generator, shown once when made (`quire user token NAME`). Only its SHA-256 is
//! kept — a fast hash is enough for 256 random bits, where a password needs argon2 —
//! so the file gives no one a token. A token reads as its user does, only while that
//! user is in the users file (deleting a user revokes their tokens), with the role
//! the users file gives them now. The file is checked whole at load, as the users
//! file is: a malformed entry is an error naming its line.

use std::collections::HashMap;
use std::path::Path;

use rand::RngCore;
use sha2::{Digest, Sha256};
use toml::Spanned;

use super::error::ReadersError;
use super::file::replace_file;
use super::hex::{hex, unhex_into};
use super::name::check_name;
use super::reader::Reader;
use super::users::Users;

/// What every token starts with.
pub const TOKEN_PREFIX: &str = "quire_";
/// A token's length: the prefix and 64 hex digits.
pub const TOKEN_LEN: usize = TOKEN_PREFIX.len() + 64;
/// Tokens a file may hold at most (a typo'd script must not grow it forever).
pub const TOKENS_MAX: usize = 10_000;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    token: Vec<Entry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    user: Spanned<String>,
    sha256: Spanned<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    created: u64,
}

/// The file as it is written back.
#[derive(serde::Serialize, Default)]
struct Written {
    token: Vec<Plain>,
}

/// An entry as it is written back.
#[derive(serde::Serialize)]
struct Plain {
    user: String,
    sha256: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    created: u64,
}

impl From<Entry> for Plain {
    fn from(e: Entry) -> Plain {
        Plain {
            user: e.user.into_inner(),
            sha256: e.sha256.into_inner(),
            label: e.label,
            created: e.created,
        }
    }
}

/// The tokens of a vault, by their hash.
#[derive(Default)]
pub struct Tokens {
    by_hash: HashMap<[u8; 32], String>,
}

impl std::fmt::Debug for Tokens {
    /// A count only: hashes stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({})", self.by_hash.len())
    }
}

impl Tokens {
    /// Reads the tokens file; a missing one is no tokens.
    pub fn load(path: &Path) -> Result<Tokens, ReadersError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Tokens::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Tokens::default()),
            Err(source) => Err(ReadersError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Parses a tokens file's text (`path` for messages).
    pub fn parse(text: &str, path: &Path) -> Result<Tokens, ReadersError> {
        let mut by_hash = HashMap::new();
        for e in entries(text, path)? {
            let bad = |span: std::ops::Range<usize>, message: String| ReadersError::Users {
                path: path.to_owned(),
                line: Some(line_of(text, span.start)),
                message,
            };
            check_name(e.user.get_ref()).map_err(|err| bad(e.user.span(), err.to_string()))?;
            let mut hash = [0u8; 32];
            if unhex_into(e.sha256.get_ref(), &mut hash).map(<[u8]>::len) != Some(32) {
                return Err(bad(
                    e.sha256.span(),
                    "sha256 must be 64 lower-case hex digits".into(),
                ));
            }
            by_hash.insert(hash, e.user.into_inner());
        }
        Ok(Tokens { by_hash })
    }

    /// The reader `token` stands for: a token in this file whose user is in
    /// `users` now, with the role `users` gives them.
    pub fn verify(&self, token: &str, users: &Users) -> Option<Reader> {
        if token.len() != TOKEN_LEN || !token.starts_with(TOKEN_PREFIX) {
            return None;
        }
        let user = self.by_hash.get(&digest(token))?;
        users.reader(user)
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}

fn entries(text: &str, path: &Path) -> Result<Vec<Entry>, ReadersError> {
    let file: File = toml::from_str(text).map_err(|e| ReadersError::Users {
        path: path.to_owned(),
        line: e.span().map(|s| line_of(text, s.start)),
        message: e.message().to_owned(),
    })?;
    if file.token.len() > TOKENS_MAX {
        return Err(ReadersError::Users {
            path: path.to_owned(),
            line: None,
            message: format!("more than {TOKENS_MAX} tokens"),
        });
    }
    Ok(file.token)
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A new token for `user`, added to the tokens file at `path` (created mode 0600
/// when missing, replaced atomically); the token, to be shown once.
pub fn add_token(path: &Path, user: &str, label: Option<&str>) -> Result<String, ReadersError> {
    let bad = |message: String| ReadersError::Users {
        path: path.to_owned(),
        line: None,
        message,
    };
    check_name(user).map_err(|e| bad(e.to_string()))?;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token = format!("{TOKEN_PREFIX}{}", hex(&bytes));
    let mut file = read_file(path)?;
    if file.token.len() >= TOKENS_MAX {
        return Err(bad(format!("the file holds {TOKENS_MAX} tokens already")));
    }
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    file.token.push(Plain {
        user: user.to_owned(),
        sha256: hex(&digest(&token)),
        label: label.map(|l| l.replace(['\n', '\r'], " ")),
        created,
    });
    write_file(path, &file)?;
    Ok(token)
}

/// Removes every token of `user` from the file at `path`; how many there were.
pub fn revoke_tokens(path: &Path, user: &str) -> Result<usize, ReadersError> {
    let mut file = read_file(path)?;
    let before = file.token.len();
    file.token.retain(|e| e.user != user);
    let removed = before - file.token.len();
    if removed > 0 {
        write_file(path, &file)?;
    }
    Ok(removed)
}

/// The file's entries, checked (a malformed file is never written over).
fn read_file(path: &Path) -> Result<Written, ReadersError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            Tokens::parse(&text, path)?;
            let token = entries(&text, path)?.into_iter().map(Plain::from).collect();
            Ok(Written { token })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Written::default()),
        Err(source) => Err(ReadersError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

fn write_file(path: &Path, file: &Written) -> Result<(), ReadersError> {
    let body = toml::to_string(file).map_err(|e| ReadersError::Users {
        path: path.to_owned(),
        line: None,
        message: e.to_string(),
    })?;
    let text = format!(
        "# quire API tokens, written by `quire user token`: only each token's SHA-256 is\n\
         # kept. Delete an entry (or run `quire user token NAME --revoke`) to revoke it.\n\n{body}"
    );
    replace_file(path, text.as_bytes(), true).map_err(|source| ReadersError::Io {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(dir: &Path) -> Users {
        let phc = crate::readers::hash_password("a long enough password");
        let path = dir.join("users.toml");
        crate::readers::write_user(&path, "ada", crate::readers::Role::Reader, &phc).unwrap();
        crate::readers::write_user(&path, "bob", crate::readers::Role::Admin, &phc).unwrap();
        Users::load(&path).unwrap()
    }

    #[test]
    fn a_token_reads_as_its_user_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let u = users(dir.path());
        let path = dir.path().join("tokens.toml");
        let ada = add_token(&path, "ada", Some("agent\nx")).unwrap();
        let bob = add_token(&path, "bob", None).unwrap();
        assert_eq!(ada.len(), TOKEN_LEN);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(&ada[TOKEN_PREFIX.len()..]),
            "only the hash is kept"
        );
        let t = Tokens::load(&path).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.verify(&ada, &u).unwrap().name, "ada");
        assert_eq!(
            t.verify(&bob, &u).unwrap().role,
            crate::readers::Role::Admin
        );
        // One digit changed, a prefix missing, too short or too long: nobody.
        let mut wrong = ada.clone().into_bytes();
        wrong[10] = if wrong[10] == b'0' { b'1' } else { b'0' };
        for bad in [
            String::from_utf8(wrong).unwrap(),
            ada[TOKEN_PREFIX.len()..].to_owned(),
            ada[..TOKEN_LEN - 1].to_owned(),
            format!("{ada}0"),
            String::new(),
        ] {
            assert!(t.verify(&bad, &u).is_none(), "{bad}");
        }
        assert_eq!(revoke_tokens(&path, "ada").unwrap(), 1);
        let t = Tokens::load(&path).unwrap();
        assert!(t.verify(&ada, &u).is_none());
        assert!(t.verify(&bob, &u).is_some());
        // A user no longer in the users file: their token reads as nobody.
        let empty = Users::load(&dir.path().join("none.toml")).unwrap();
        assert!(t.verify(&bob, &empty).is_none());
    }

    #[test]
    fn a_malformed_file_names_its_line() {
        let p = Path::new("tokens.toml");
        let e = Tokens::parse("[[token]]\nuser = \"ada\"\nsha256 = \"XYZ\"\n", p).unwrap_err();
        assert!(e.to_string().contains("tokens.toml:3"), "{e}");
        let e = Tokens::parse("[[token]]\nuser = \"ada\"\nsha = \"x\"\n", p).unwrap_err();
        assert!(e.to_string().contains("tokens.toml:"), "{e}");
        assert!(Tokens::parse("", p).unwrap().is_empty());
    }
}
