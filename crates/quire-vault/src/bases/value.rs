//! The values Bases expressions compute: what a property holds, what a function
//! returns, and how they compare, add up and show in a cell.
//!
//! An error is a value ([`Value::Error`]), not a failure: a formula that does not
//! apply to one note shows its reason in that note's cell, and a filter that errs
//! excludes the note, as in Obsidian; a page never fails for a base.

use std::cmp::Ordering;

use super::time;

/// A value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Nothing: a missing property, `null`, `if` without its else.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Num(f64),
    /// Text.
    Str(String),
    /// An instant, in ms since the Unix epoch (UTC).
    Date(i64),
    /// A length of time, in ms.
    Duration(i64),
    /// A list.
    List(Vec<Value>),
    /// A link to a note: its target as written (`[[target]]`) and its display text.
    Link(String, Option<String>),
    /// Why a value could not be computed (shown in its cell; false in a filter).
    Error(String),
}

impl Value {
    /// Whether a filter keeps a note for this value: `false`, `null`, `0`, `""`, an
    /// empty list and errors do not.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Null | Value::Error(_) => false,
            Value::Bool(b) => *b,
            Value::Num(n) => *n != 0.0 && !n.is_nan(),
            Value::Str(s) => !s.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Date(_) | Value::Duration(_) | Value::Link(..) => true,
        }
    }

    /// Whether the value is empty (`isEmpty()`): null, `""`, `[]`.
    pub fn is_empty(&self) -> bool {
        match self {
            Value::Null => true,
            Value::Str(s) => s.is_empty(),
            Value::List(l) => l.is_empty(),
            _ => false,
        }
    }

    /// The value as a cell shows it.
    pub fn display(&self) -> String {
        match self {
            Value::Null => String::new(),
            Value::Bool(b) => b.to_string(),
            Value::Num(n) => number(*n),
            Value::Str(s) => s.clone(),
            Value::Date(ms) if ms.rem_euclid(time::DAY_MS) == 0 => time::format(*ms, "YYYY-MM-DD"),
            Value::Date(ms) => time::format(*ms, "YYYY-MM-DD HH:mm"),
            Value::Duration(ms) => format!("{} days", number(*ms as f64 / time::DAY_MS as f64)),
            Value::List(l) => l.iter().map(Value::display).collect::<Vec<_>>().join(", "),
            Value::Link(target, display) => display.clone().unwrap_or_else(|| target.clone()),
            Value::Error(e) => format!("error: {e}"),
        }
    }

    /// The type's name, as `isType()` takes it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Num(_) => "number",
            Value::Str(_) => "string",
            Value::Date(_) => "date",
            Value::Duration(_) => "duration",
            Value::List(_) => "list",
            Value::Link(..) => "link",
            Value::Error(_) => "error",
        }
    }

    /// `==`: same type and value; a date equals a string naming the same instant, a
    /// link equals a string naming its target.
    pub fn loose_eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Date(a), Value::Str(s)) | (Value::Str(s), Value::Date(a)) => {
                time::parse_date(s) == Some(*a)
            }
            (Value::Link(t, _), Value::Str(s)) | (Value::Str(s), Value::Link(t, _)) => {
                t.eq_ignore_ascii_case(s)
            }
            (Value::Link(a, _), Value::Link(b, _)) => a.eq_ignore_ascii_case(b),
            (a, b) => a == b,
        }
    }

    /// `<`, `>` and sorting: numbers, text, dates (with a string that is a date),
    /// durations, booleans; other pairs do not compare.
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        match (self, other) {
            (Value::Num(a), Value::Num(b)) => a.partial_cmp(b),
            (Value::Str(a), Value::Str(b)) => Some(a.cmp(b)),
            (Value::Date(a), Value::Date(b)) | (Value::Duration(a), Value::Duration(b)) => {
                Some(a.cmp(b))
            }
            (Value::Date(a), Value::Str(s)) => time::parse_date(s).map(|b| a.cmp(&b)),
            (Value::Str(s), Value::Date(b)) => time::parse_date(s).map(|a| a.cmp(b)),
            (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }

    /// The order of a sort: nulls last, values that do not compare by their text.
    pub fn sort_order(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Greater,
            (_, Value::Null) => Ordering::Less,
            (a, b) => a
                .compare(b)
                .unwrap_or_else(|| a.display().cmp(&b.display())),
        }
    }
}

/// A number as text: integers without a fraction, others as Rust prints them.
pub(crate) fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthiness_equality_and_order_follow_the_documented_rules() {
        assert!(!Value::Num(0.0).truthy() && Value::Num(2.0).truthy());
        assert!(!Value::Str(String::new()).truthy() && !Value::Error("x".into()).truthy());
        let d = Value::Date(time::parse_date("2025-01-02").unwrap());
        assert!(d.loose_eq(&Value::Str("2025-01-02".into())));
        assert_eq!(
            d.compare(&Value::Str("2024-12-31".into())),
            Some(Ordering::Greater)
        );
        assert_eq!(Value::Num(1.0).compare(&Value::Str("1".into())), None);
        assert!(Value::Link("Book".into(), None).loose_eq(&Value::Str("book".into())));
        assert_eq!(Value::Null.sort_order(&Value::Num(1.0)), Ordering::Greater);
        assert_eq!(Value::Num(3.0).display(), "3");
        assert_eq!(Value::Num(2.5).display(), "2.5");
        assert_eq!(d.display(), "2025-01-02");
    }
}
