//! Who is signed in: a [`Reader`] and their [`Role`], and what each role may read.
//! A leaf: the users file, sessions and the site build on it.

use crate::note::Visibility;

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
        self.role.audience()
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
    /// The most restricted notes the role may read (see [`Reader::audience`]).
    pub fn audience(self) -> Visibility {
        match self {
            Role::Reader => Visibility::Private,
            Role::Admin => Visibility::Draft,
        }
    }

    /// The name in the users file and in cookies.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reader => "reader",
            Role::Admin => "admin",
        }
    }

    pub(super) fn parse(s: &str) -> Option<Role> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
