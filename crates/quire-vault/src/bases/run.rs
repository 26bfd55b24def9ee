//! Running one view of a base over a vault's notes: the base's and the view's
//! filters, then sort, groups, limit, and the cells of each shown row.
//!
//! The caller passes only the notes the reader's audience may read: a base cannot
//! see, count or compute from a note its reader may not. Every expression is paid
//! from one [`Budget`] for the whole view, and rows are bounded by `rows_max`
//! besides the view's own `limit`; when either cuts the view, [`Outcome::cut`] says
//! why, for the page to show.

use std::cmp::Ordering;

use super::definition::{Base, Filter, View};
use super::eval::{eval, Budget, Env};
use super::parse::{parse, Expr};
use super::row::Row;
use super::value::Value;

/// A column of a view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The property key (`file.name`, `status`, `formula.ppu`).
    pub key: String,
    /// Its heading: the base's display name, or the key without `note.`.
    pub label: String,
}

/// A shown row.
#[derive(Debug, Clone)]
pub struct Shown {
    /// Which of the input rows it is.
    pub index: usize,
    /// Its cells, a column each.
    pub cells: Vec<Value>,
    /// Cards: its image property's value.
    pub image: Option<Value>,
}

/// A group of rows (one group, keyed `None`, when the view has no `groupBy`).
#[derive(Debug, Clone)]
pub struct Group {
    /// The value the rows share.
    pub key: Option<Value>,
    /// The rows.
    pub rows: Vec<Shown>,
}

/// A view, run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The columns.
    pub columns: Vec<Column>,
    /// The groups, in order.
    pub groups: Vec<Group>,
    /// Notes the filters kept (before `limit`).
    pub matched: usize,
    /// Why the view shows less than it matched, past its own `limit`: a bound of
    /// the server's (rows, evaluation steps).
    pub cut: Option<String>,
}

/// Runs `view` of `base` over `rows`.
pub fn run(
    base: &Base,
    view: &View,
    rows: &[&dyn Row],
    env: &Env<'_>,
    budget: &mut Budget,
    rows_max: usize,
) -> Outcome {
    let mut kept = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let keep = [&base.filters, &view.filters]
            .into_iter()
            .flatten()
            .all(|f| keeps(f, *row, env, budget));
        if budget.spent {
            break;
        }
        if keep {
            kept.push(i);
        }
    }
    let matched = kept.len();
    let sort_keys: Vec<(Expr, bool)> = view.sort.iter().map(|(k, d)| (key_expr(k), *d)).collect();
    let mut keyed: Vec<(usize, Vec<Value>)> = kept
        .into_iter()
        .map(|i| {
            (
                i,
                sort_keys
                    .iter()
                    .map(|(e, _)| eval(e, rows[i], env, budget))
                    .collect(),
            )
        })
        .collect();
    keyed.sort_by(|(_, a), (_, b)| {
        a.iter()
            .zip(b)
            .zip(&sort_keys)
            .map(|((x, y), (_, desc))| {
                if *desc {
                    y.sort_order(x)
                } else {
                    x.sort_order(y)
                }
            })
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    let shown_max = view.limit.unwrap_or(usize::MAX).min(rows_max);
    let mut cut = (matched > rows_max).then(|| format!("showing {rows_max} of {matched} notes"));
    keyed.truncate(shown_max);
    let columns = columns(base, view);
    let exprs: Vec<Expr> = columns.iter().map(|c| key_expr(&c.key)).collect();
    let image = view.image.as_deref().map(key_expr);
    let shown: Vec<Shown> = keyed
        .into_iter()
        .map(|(index, _)| Shown {
            index,
            cells: exprs
                .iter()
                .map(|e| eval(e, rows[index], env, budget))
                .collect(),
            image: image.as_ref().map(|e| eval(e, rows[index], env, budget)),
        })
        .collect();
    let groups = group(view, shown, rows, env, budget);
    if budget.spent {
        cut = Some("the view's evaluation budget ran out".to_owned());
    }
    Outcome {
        columns,
        groups,
        matched,
        cut,
    }
}

/// Whether `f` keeps `row`.
fn keeps(f: &Filter, row: &dyn Row, env: &Env<'_>, budget: &mut Budget) -> bool {
    match f {
        Filter::Expr(Ok(e)) => eval(e, row, env, budget).truthy(),
        Filter::Expr(Err(_)) => false,
        Filter::And(fs) => fs.iter().all(|f| keeps(f, row, env, budget)),
        Filter::Or(fs) => fs.iter().any(|f| keeps(f, row, env, budget)),
        Filter::Not(fs) => !fs.iter().any(|f| keeps(f, row, env, budget)),
    }
}

/// A property key as an expression: `file.name`, `formula.x`, `note.x` and bare
/// names parse as they are; a key that is not an expression (`my property`) is the
/// note property of that name.
fn key_expr(key: &str) -> Expr {
    parse(key).unwrap_or_else(|_| {
        Expr::Index(
            Box::new(Expr::Name("note".into())),
            Box::new(Expr::Str(key.into())),
        )
    })
}

fn columns(base: &Base, view: &View) -> Vec<Column> {
    let keys: Vec<String> = if view.order.is_empty() {
        vec!["file.name".to_owned()]
    } else {
        view.order.clone()
    };
    keys.into_iter()
        .map(|key| {
            // `author` and `note.author` name one property, in `order` and in
            // `properties` alike.
            let bare = key.strip_prefix("note.").unwrap_or(&key);
            let label = [key.as_str(), bare, &format!("note.{bare}")]
                .iter()
                .find_map(|k| base.display_names.get(*k))
                .cloned()
                .unwrap_or_else(|| bare.to_owned());
            Column { key, label }
        })
        .collect()
}

fn group(
    view: &View,
    shown: Vec<Shown>,
    rows: &[&dyn Row],
    env: &Env<'_>,
    budget: &mut Budget,
) -> Vec<Group> {
    let Some((key, desc)) = &view.group_by else {
        return vec![Group {
            key: None,
            rows: shown,
        }];
    };
    let e = key_expr(key);
    let mut groups: Vec<Group> = Vec::new();
    for s in shown {
        let k = eval(&e, rows[s.index], env, budget);
        match groups
            .iter_mut()
            .find(|g| g.key.as_ref().is_some_and(|gk| gk.loose_eq(&k)))
        {
            Some(g) => g.rows.push(s),
            None => groups.push(Group {
                key: Some(k),
                rows: vec![s],
            }),
        }
    }
    groups.sort_by(|a, b| {
        let (x, y) = (
            a.key.as_ref().unwrap_or(&Value::Null),
            b.key.as_ref().unwrap_or(&Value::Null),
        );
        if *desc {
            y.sort_order(x)
        } else {
            x.sort_order(y)
        }
    });
    groups
}
