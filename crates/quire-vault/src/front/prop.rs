//! Every front-matter property as YAML gave it, kept for what reads properties by
//! name (Bases filters and formulas): numbers keep their text, so front matter stays
//! comparable for equality, and what a property means (a date, a link) is decided by
//! the reader of it.

use yaml_rust2::Yaml;

/// One property's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prop {
    /// Empty, or a mapping (which no reader of properties uses).
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, as written.
    Num(String),
    /// Text.
    Text(String),
    /// A list.
    List(Vec<Prop>),
}

/// `y` as a property.
pub(crate) fn from_yaml(y: &Yaml) -> Prop {
    match y {
        Yaml::Boolean(b) => Prop::Bool(*b),
        Yaml::Integer(i) => Prop::Num(i.to_string()),
        Yaml::Real(r) => Prop::Num(r.clone()),
        Yaml::String(s) => Prop::Text(s.clone()),
        Yaml::Array(a) => Prop::List(a.iter().map(from_yaml).collect()),
        _ => Prop::Null,
    }
}
