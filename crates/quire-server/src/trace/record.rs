//! What a finished span holds, as the exporter queues and encodes it: its ids,
//! name, kind, times, attributes and status.

use std::borrow::Cow;

/// What a span is, in OTLP's `SpanKind` numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Work inside quire (a lookup, a fill, compression).
    Internal = 1,
    /// A request quire answers.
    Server = 2,
    /// A request quire sends (to the origin, a peer).
    Client = 3,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string.
    Str(Cow<'static, str>),
    /// A 64-bit integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

impl From<&'static str> for Value {
    fn from(s: &'static str) -> Value {
        Value::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(Cow::Owned(s))
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

/// A finished span, as the exporter sends it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanData {
    pub(crate) trace_id: u128,
    pub(crate) span_id: u64,
    /// 0 for a trace's root.
    pub(crate) parent_id: u64,
    pub(crate) name: Cow<'static, str>,
    pub(crate) kind: Kind,
    pub(crate) start_unix_ns: u64,
    pub(crate) end_unix_ns: u64,
    pub(crate) attributes: Vec<(&'static str, Value)>,
    /// The span's operation failed (OTLP status `ERROR`).
    pub(crate) error: bool,
}
