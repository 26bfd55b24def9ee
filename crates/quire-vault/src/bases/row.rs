//! What a Bases expression may ask of the note it is evaluated for: its properties
//! and what the vault knows of its file. The vault implements it for its notes; tests
//! for a note of their own.

use super::value::Value;

/// What an expression may ask of the note it is evaluated for.
pub trait Row {
    /// A front-matter property by name; `Null` when the note has none.
    fn property(&self, name: &str) -> Value;
    /// A file field: `name`, `basename`, `path`, `folder`, `ext`, `ctime`, `mtime`,
    /// `size`, `tags`, `links`; `None` for a field the vault does not know.
    fn file_field(&self, field: &str) -> Option<Value>;
    /// Whether the note has `tag` or a tag nested under it (`a` matches `a/b`).
    fn has_tag(&self, tag: &str) -> bool;
    /// Whether the note is in `folder` or a folder under it.
    fn in_folder(&self, folder: &str) -> bool;
    /// Whether the note links to the note `target` names.
    fn has_link(&self, target: &str) -> bool;
    /// Whether the note's front matter has the property `name`.
    fn has_property(&self, name: &str) -> bool;
}
