//! The functions and operators of Bases expressions: global functions (`if`, `now`,
//! `date`, `duration`, `number`, `min`, `max`, `list`, `link`), methods by the
//! receiver's type, fields (`.length`, `.year`, `.days`), and arithmetic.
//!
//! The subset is the one `docs/publishing.md` lists; anything else is an error value
//! naming it ("`x.map()` is not supported"), shown in its cell, never a failed page.
//! Text a formula makes is capped at [`TEXT_BYTES_MAX`]; the evaluator pays for work
//! that grows with its input before it calls in here.

use super::row::Row;
use super::time;
use super::value::Value;

/// Longest text a formula may make (`repeat`, `+`, `join`).
const TEXT_BYTES_MAX: usize = 64 * 1024;

fn unsupported(what: &str) -> Value {
    Value::Error(format!("`{what}` is not supported"))
}

/// The text value `s`, or an error when it is longer than a formula may make.
fn text(s: String) -> Value {
    if s.len() > TEXT_BYTES_MAX {
        Value::Error(format!("text longer than {TEXT_BYTES_MAX} bytes"))
    } else {
        Value::Str(s)
    }
}

/// A global function call but `if` (which the evaluator runs, one branch only).
pub(crate) fn global(name: &str, args: &[Value], now_ms: i64) -> Value {
    let first = args.first().cloned().unwrap_or(Value::Null);
    match name {
        "now" => Value::Date(now_ms),
        "today" => Value::Date(now_ms - now_ms.rem_euclid(time::DAY_MS)),
        "date" => to_date(&first),
        "duration" => match &first {
            Value::Str(s) => time::parse_duration(s).map_or_else(
                || Value::Error(format!("{s:?} is not a duration")),
                Value::Duration,
            ),
            Value::Duration(d) => Value::Duration(*d),
            v => Value::Error(format!("a {} is not a duration", v.type_name())),
        },
        "number" => to_number(&first),
        "min" | "max" => extreme(name == "max", args),
        "list" => match first {
            Value::List(l) => Value::List(l),
            v => Value::List(vec![v]),
        },
        "link" => match first {
            Value::Str(s) => Value::Link(strip_brackets(&s), args.get(1).map(Value::display)),
            Value::Link(t, d) => Value::Link(t, args.get(1).map(Value::display).or(d)),
            v => Value::Error(format!("cannot link a {}", v.type_name())),
        },
        "escapeHTML" => Value::Str(first.display()),
        _ => unsupported(&format!("{name}()")),
    }
}

fn strip_brackets(s: &str) -> String {
    let s = s.trim();
    s.strip_prefix("[[")
        .and_then(|s| s.strip_suffix("]]"))
        .map_or(s, |inner| inner.split('|').next().unwrap_or(inner))
        .to_owned()
}

fn to_date(v: &Value) -> Value {
    match v {
        Value::Date(d) => Value::Date(*d),
        Value::Str(s) => time::parse_date(s)
            .map_or_else(|| Value::Error(format!("{s:?} is not a date")), Value::Date),
        v => Value::Error(format!("a {} is not a date", v.type_name())),
    }
}

fn to_number(v: &Value) -> Value {
    match v {
        Value::Num(n) => Value::Num(*n),
        Value::Bool(b) => Value::Num(f64::from(u8::from(*b))),
        Value::Str(s) => s.trim().parse().map_or_else(
            |_| Value::Error(format!("{s:?} is not a number")),
            Value::Num,
        ),
        Value::Date(ms) | Value::Duration(ms) => Value::Num(*ms as f64),
        v => Value::Error(format!("a {} is not a number", v.type_name())),
    }
}

fn extreme(max: bool, args: &[Value]) -> Value {
    let nums: Vec<f64> = args
        .iter()
        .flat_map(|a| match a {
            Value::List(l) => l.clone(),
            v => vec![v.clone()],
        })
        .filter_map(|v| match v {
            Value::Num(n) => Some(n),
            _ => None,
        })
        .collect();
    let pick = if max { f64::max } else { f64::min };
    nums.into_iter()
        .reduce(pick)
        .map_or(Value::Null, Value::Num)
}

/// A field of a value: `.length`, a date's parts, a duration in a unit.
pub(crate) fn field(v: &Value, name: &str) -> Value {
    match (v, name) {
        (Value::Str(s), "length") => Value::Num(s.chars().count() as f64),
        (Value::List(l), "length") => Value::Num(l.len() as f64),
        (Value::Date(ms), _) => {
            let (y, m, d) = time::civil_from_days(ms.div_euclid(time::DAY_MS));
            let t = ms.rem_euclid(time::DAY_MS) / 1000;
            match name {
                "year" => Value::Num(y as f64),
                "month" => Value::Num(m as f64),
                "day" => Value::Num(d as f64),
                "hour" => Value::Num((t / 3600) as f64),
                "minute" => Value::Num((t / 60 % 60) as f64),
                "second" => Value::Num((t % 60) as f64),
                _ => unsupported(&format!("date.{name}")),
            }
        }
        (Value::Duration(ms), _) => {
            let unit = match name {
                "days" => time::DAY_MS,
                "hours" => 3_600_000,
                "minutes" => 60_000,
                "seconds" => 1000,
                "milliseconds" => 1,
                _ => return unsupported(&format!("duration.{name}")),
            };
            Value::Num(*ms as f64 / unit as f64)
        }
        (Value::Error(_), _) => v.clone(),
        (v, _) => unsupported(&format!("{}.{name}", v.type_name())),
    }
}

/// `file.hasTag(…)`, `file.inFolder(…)`, `file.hasLink(…)`, `file.hasProperty(…)`,
/// `file.asLink(…)`.
pub(crate) fn file_method(row: &dyn Row, name: &str, args: &[Value]) -> Value {
    let texts = || {
        args.iter().map(|a| match a {
            Value::Link(t, _) => t.clone(),
            v => v.display(),
        })
    };
    match name {
        "hasTag" => Value::Bool(texts().any(|t| row.has_tag(t.trim_start_matches('#')))),
        "inFolder" => Value::Bool(texts().any(|f| row.in_folder(f.trim_matches('/')))),
        "hasLink" => Value::Bool(texts().any(|t| row.has_link(&strip_brackets(&t)))),
        "hasProperty" => Value::Bool(texts().any(|p| row.has_property(&p))),
        "asLink" => match row.file_field("basename") {
            Some(Value::Str(name)) => Value::Link(name, args.first().map(Value::display)),
            _ => Value::Error("this file has no name".into()),
        },
        _ => unsupported(&format!("file.{name}()")),
    }
}

/// A method call on an evaluated receiver (the evaluator has paid for its size).
pub(crate) fn method(recv: Value, name: &str, args: &[Value], now_ms: i64) -> Value {
    match name {
        "isEmpty" => return Value::Bool(recv.is_empty()),
        "isTruthy" => return Value::Bool(recv.truthy()),
        "toString" => return Value::Str(recv.display()),
        "isType" => {
            return Value::Bool(
                args.first()
                    .is_some_and(|t| t.display() == recv.type_name()),
            )
        }
        _ => {}
    }
    match recv {
        Value::Str(s) => string_method(&s, name, args),
        Value::Num(n) => number_method(n, name, args),
        Value::List(l) => list_method(l, name, args),
        Value::Date(ms) => date_method(now_ms, ms, name, args),
        Value::Error(_) => recv,
        v => unsupported(&format!("{}.{name}()", v.type_name())),
    }
}

fn arg_text(args: &[Value], i: usize) -> String {
    args.get(i).map(Value::display).unwrap_or_default()
}

fn arg_num(args: &[Value], i: usize) -> Option<f64> {
    match args.get(i) {
        Some(Value::Num(n)) => Some(*n),
        _ => None,
    }
}

fn string_method(s: &str, name: &str, args: &[Value]) -> Value {
    let texts = || args.iter().map(Value::display);
    match name {
        "contains" => Value::Bool(s.contains(&arg_text(args, 0))),
        "containsAll" => Value::Bool(texts().all(|t| s.contains(&t))),
        "containsAny" => Value::Bool(texts().any(|t| s.contains(&t))),
        "startsWith" => Value::Bool(s.starts_with(&arg_text(args, 0))),
        "endsWith" => Value::Bool(s.ends_with(&arg_text(args, 0))),
        "lower" => Value::Str(s.to_lowercase()),
        "upper" => Value::Str(s.to_uppercase()),
        "title" => Value::Str(title_case(s)),
        "trim" => Value::Str(s.trim().to_owned()),
        "reverse" => Value::Str(s.chars().rev().collect()),
        "replace" => text(s.replace(&arg_text(args, 0), &arg_text(args, 1))),
        "split" => Value::List(
            s.split(&arg_text(args, 0))
                .map(|p| Value::Str(p.to_owned()))
                .collect(),
        ),
        "slice" => {
            let chars: Vec<char> = s.chars().collect();
            let (a, b) = span(chars.len(), arg_num(args, 0), arg_num(args, 1));
            Value::Str(chars[a..b].iter().collect())
        }
        "repeat" => match arg_num(args, 0) {
            Some(n) if n >= 0.0 && s.len() as f64 * n <= TEXT_BYTES_MAX as f64 => {
                Value::Str(s.repeat(n as usize))
            }
            _ => Value::Error(format!("repeat makes at most {TEXT_BYTES_MAX} bytes")),
        },
        _ => unsupported(&format!("string.{name}()")),
    }
}

fn title_case(s: &str) -> String {
    s.split(' ')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| {
                    f.to_uppercase()
                        .chain(c.flat_map(char::to_lowercase))
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect::<Vec<String>>()
        .join(" ")
}

/// `slice(start, end)` bounds on a sequence of `len`, negatives counting from the end.
fn span(len: usize, start: Option<f64>, end: Option<f64>) -> (usize, usize) {
    let at = |x: f64| {
        let i = if x < 0.0 { len as f64 + x } else { x };
        (i.max(0.0) as usize).min(len)
    };
    let a = start.map_or(0, at);
    let b = end.map_or(len, at);
    (a, b.max(a))
}

fn number_method(n: f64, name: &str, args: &[Value]) -> Value {
    match name {
        "abs" => Value::Num(n.abs()),
        "ceil" => Value::Num(n.ceil()),
        "floor" => Value::Num(n.floor()),
        "round" => {
            let digits = arg_num(args, 0).unwrap_or(0.0).clamp(0.0, 15.0) as i32;
            let f = 10f64.powi(digits);
            Value::Num((n * f).round() / f)
        }
        "toFixed" => {
            let digits = arg_num(args, 0).unwrap_or(0.0).clamp(0.0, 20.0) as usize;
            Value::Str(format!("{n:.digits$}"))
        }
        _ => unsupported(&format!("number.{name}()")),
    }
}

fn list_method(mut l: Vec<Value>, name: &str, args: &[Value]) -> Value {
    let has = |l: &[Value], x: &Value| l.iter().any(|v| v.loose_eq(x));
    match name {
        "contains" => Value::Bool(args.first().is_some_and(|x| has(&l, x))),
        "containsAll" => Value::Bool(args.iter().all(|x| has(&l, x))),
        "containsAny" => Value::Bool(args.iter().any(|x| has(&l, x))),
        "join" => text(
            l.iter()
                .map(Value::display)
                .collect::<Vec<_>>()
                .join(&arg_text(args, 0)),
        ),
        "sort" => {
            l.sort_by(Value::sort_order);
            Value::List(l)
        }
        "reverse" => {
            l.reverse();
            Value::List(l)
        }
        "unique" => {
            let mut out: Vec<Value> = Vec::new();
            for v in l {
                if !has(&out, &v) {
                    out.push(v);
                }
            }
            Value::List(out)
        }
        "flat" => Value::List(
            l.into_iter()
                .flat_map(|v| match v {
                    Value::List(inner) => inner,
                    v => vec![v],
                })
                .collect(),
        ),
        "slice" => {
            let (a, b) = span(l.len(), arg_num(args, 0), arg_num(args, 1));
            Value::List(l[a..b].to_vec())
        }
        _ => unsupported(&format!("list.{name}()")),
    }
}

fn date_method(now: i64, ms: i64, name: &str, args: &[Value]) -> Value {
    match name {
        "format" => Value::Str(time::format(ms, &arg_text(args, 0))),
        "date" => Value::Date(ms - ms.rem_euclid(time::DAY_MS)),
        "time" => Value::Str(time::format(ms, "HH:mm:ss")),
        "relative" => Value::Str(time::relative(ms, now)),
        _ => unsupported(&format!("date.{name}()")),
    }
}

/// `l op r` for the arithmetic and comparison operators.
pub(crate) fn binary(op: &str, l: Value, r: Value) -> Value {
    if let (Value::Error(_), _) = (&l, &r) {
        return l;
    }
    if let Value::Error(_) = r {
        return r;
    }
    match op {
        "==" => Value::Bool(l.loose_eq(&r)),
        "!=" => Value::Bool(!l.loose_eq(&r)),
        "<" | "<=" | ">" | ">=" => match l.compare(&r) {
            Some(o) => Value::Bool(match op {
                "<" => o.is_lt(),
                "<=" => o.is_le(),
                ">" => o.is_gt(),
                _ => o.is_ge(),
            }),
            None => Value::Bool(false),
        },
        _ => arithmetic(op, l, r),
    }
}

fn arithmetic(op: &str, l: Value, r: Value) -> Value {
    use Value::{Date, Duration, Num, Str};
    let as_duration = |v: &Value| match v {
        Duration(d) => Some(*d),
        Str(s) => time::parse_duration(s),
        _ => None,
    };
    match (op, &l, &r) {
        ("+", Num(a), Num(b)) => Num(a + b),
        ("-", Num(a), Num(b)) => Num(a - b),
        ("*", Num(a), Num(b)) => Num(a * b),
        ("/", Num(a), Num(b)) => Num(a / b),
        ("%", Num(a), Num(b)) => Num(a % b),
        ("-", Date(a), Date(b)) => Duration(a - b),
        ("+" | "-", Date(a), _) if as_duration(&r).is_some() => {
            let d = as_duration(&r).unwrap_or(0);
            Date(if op == "+" {
                a.saturating_add(d)
            } else {
                a.saturating_sub(d)
            })
        }
        ("+", Duration(a), Duration(b)) => Duration(a.saturating_add(*b)),
        ("-", Duration(a), Duration(b)) => Duration(a.saturating_sub(*b)),
        ("*", Duration(a), Num(b)) => Duration((*a as f64 * b) as i64),
        ("/", Duration(a), Num(b)) if *b != 0.0 => Duration((*a as f64 / b) as i64),
        ("+", Str(_), _) | ("+", _, Str(_)) => text(l.display() + &r.display()),
        _ => Value::Error(format!(
            "cannot {op} a {} and a {}",
            l.type_name(),
            r.type_name()
        )),
    }
}
