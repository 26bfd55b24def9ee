//! User names: what a name may be ([`check_name`]) and why one is refused
//! ([`NameError`]). A leaf: the users file, sign-outs and the login limiter use it.

/// Longest user name, bytes.
pub(crate) const NAME_LEN_MAX: usize = 64;

/// Whether `name` can be a user name: 1 to `NAME_LEN_MAX` ASCII letters, digits, `.`,
/// `_`, `-` or `@` (names go into cookies and TOML strings unescaped). The error says so.
pub fn check_name(name: &str) -> Result<(), NameError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@');
    if name.is_empty() || name.len() > NAME_LEN_MAX || !name.chars().all(ok) {
        return Err(NameError::new(name));
    }
    Ok(())
}

/// Why a name cannot be a user name (see [`check_name`]): the name as far as it may be
/// shown, and what names may be. The client's mistake (a name typed or written in
/// the users file), so asking again with the same name cannot help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "user name `{shown}` must be 1 to {} letters, digits, `.`, `_`, `-` or `@`",
    NAME_LEN_MAX
)]
pub struct NameError {
    /// The name, cut to the longest a name may be.
    shown: String,
}

impl NameError {
    /// The error for `name`.
    pub(super) fn new(name: &str) -> NameError {
        NameError {
            shown: name.chars().take(NAME_LEN_MAX).collect(),
        }
    }
}
