//! A `.base` file (or a ```` ```base ```` block) read into a [`Base`]: its filters,
//! formulas, property display names and views, as Obsidian's Bases syntax writes
//! them in YAML.
//!
//! The YAML is loaded within the front-matter bounds (size, nodes, depth); past
//! them, or when it is not a mapping, the base is refused with the reason, which its
//! embed shows. Inside, a part that does not parse is kept as its error (a formula,
//! a filter) and shown where it is used, as Obsidian does; a view of a type quire
//! does not draw (`map`) is kept and shown as unsupported. Counts are bounded:
//! [`FORMULAS_MAX`] formulas, [`VIEWS_MAX`] views, [`FILTER_NODES_MAX`] filter nodes,
//! [`COLUMNS_MAX`] columns a view.

use std::collections::HashMap;

use yaml_rust2::Yaml;

use super::error::BaseError;
use super::parse::{parse, Expr};

/// Formulas a base may define.
pub(crate) const FORMULAS_MAX: usize = 256;
/// Views a base may define.
pub(crate) const VIEWS_MAX: usize = 32;
/// Filter nodes (`and`/`or`/`not` and expressions) a base may hold, all views together.
pub(crate) const FILTER_NODES_MAX: usize = 512;
/// Columns (`order`) a view may show.
pub(crate) const COLUMNS_MAX: usize = 64;

/// A base.
#[derive(Debug, Clone, Default)]
pub struct Base {
    /// Filters every view applies.
    pub filters: Option<Filter>,
    /// Formulas by name (a formula that does not parse holds why).
    pub formulas: HashMap<String, Result<Expr, BaseError>>,
    /// `properties: x: displayName:` — a column's heading.
    pub display_names: HashMap<String, String>,
    /// The views, in order.
    pub views: Vec<View>,
}

/// A filter: an expression, or `and`/`or`/`not` over filters.
#[derive(Debug, Clone)]
pub enum Filter {
    /// An expression (or why it did not parse: then it keeps no note).
    Expr(Result<Expr, BaseError>),
    /// Every filter holds.
    And(Vec<Filter>),
    /// At least one holds.
    Or(Vec<Filter>),
    /// None holds.
    Not(Vec<Filter>),
}

/// How a view draws its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewKind {
    /// A table: a row a note, a column a property.
    Table,
    /// Cards: a card a note, with its image property on top.
    Cards,
    /// A list: a line a note.
    List,
    /// A type quire does not draw (`map`, a plugin's), shown as unsupported.
    Other(String),
}

/// One view of a base.
#[derive(Debug, Clone)]
pub struct View {
    /// How it draws.
    pub kind: ViewKind,
    /// Its name (`![[X.base#name]]` picks it).
    pub name: String,
    /// Filters of this view, on top of the base's.
    pub filters: Option<Filter>,
    /// The columns: property keys (`file.name`, `status`, `formula.ppu`).
    pub order: Vec<String>,
    /// Sort keys, each with whether it is descending.
    pub sort: Vec<(String, bool)>,
    /// Rows shown at most.
    pub limit: Option<usize>,
    /// The property rows are grouped by, and whether groups run descending.
    pub group_by: Option<(String, bool)>,
    /// Cards: the property holding each card's image.
    pub image: Option<String>,
}

/// Reads a base from its YAML text.
pub fn read(yaml: &str) -> Result<Base, BaseError> {
    let doc = crate::front::load_bounded(yaml)?;
    let map = match doc {
        None | Some(Yaml::Null) => return Ok(Base::default()),
        Some(Yaml::Hash(h)) => h,
        Some(_) => {
            return Err(BaseError::Shape(
                "a base is a mapping of `filters`, `formulas`, `views`…",
            ))
        }
    };
    let mut nodes = 0;
    let mut base = Base::default();
    for (k, v) in &map {
        match k.as_str() {
            Some("filters") => base.filters = Some(filter(v, &mut nodes)?),
            Some("formulas") => base.formulas = formulas(v)?,
            Some("properties") => base.display_names = display_names(v),
            Some("views") => base.views = views(v, &mut nodes)?,
            _ => {}
        }
    }
    Ok(base)
}

fn filter(v: &Yaml, nodes: &mut usize) -> Result<Filter, BaseError> {
    *nodes += 1;
    if *nodes > FILTER_NODES_MAX {
        return Err(BaseError::Limit {
            what: "filter nodes",
            max: FILTER_NODES_MAX,
        });
    }
    match v {
        Yaml::String(s) => Ok(Filter::Expr(parse(s))),
        Yaml::Boolean(b) => Ok(Filter::Expr(Ok(Expr::Bool(*b)))),
        Yaml::Hash(h) if h.len() == 1 => {
            let (k, inner) = h.iter().next().ok_or(BaseError::Shape("an empty filter"))?;
            let items = match inner {
                Yaml::Array(a) => a
                    .iter()
                    .map(|f| filter(f, nodes))
                    .collect::<Result<_, _>>()?,
                one => vec![filter(one, nodes)?],
            };
            match k.as_str() {
                Some("and") => Ok(Filter::And(items)),
                Some("or") => Ok(Filter::Or(items)),
                Some("not") => Ok(Filter::Not(items)),
                _ => Err(BaseError::Shape(
                    "a filter object has one key: `and`, `or` or `not`",
                )),
            }
        }
        _ => Err(BaseError::Shape(
            "a filter is an expression, or `and`/`or`/`not` with a list",
        )),
    }
}

fn formulas(v: &Yaml) -> Result<HashMap<String, Result<Expr, BaseError>>, BaseError> {
    let Yaml::Hash(h) = v else {
        return Err(BaseError::Shape("`formulas` maps names to expressions"));
    };
    if h.len() > FORMULAS_MAX {
        return Err(BaseError::Limit {
            what: "formulas",
            max: FORMULAS_MAX,
        });
    }
    Ok(h.iter()
        .filter_map(|(k, v)| {
            let expr = match v {
                Yaml::String(s) => parse(s),
                Yaml::Integer(i) => Ok(Expr::Num(*i as f64)),
                _ => Err(BaseError::Shape("a formula is an expression in a string")),
            };
            Some((k.as_str()?.to_owned(), expr))
        })
        .collect())
}

fn display_names(v: &Yaml) -> HashMap<String, String> {
    let Yaml::Hash(h) = v else {
        return HashMap::new();
    };
    h.iter()
        .filter_map(|(k, v)| {
            let name = v["displayName"].as_str()?;
            Some((k.as_str()?.to_owned(), name.to_owned()))
        })
        .collect()
}

fn views(v: &Yaml, nodes: &mut usize) -> Result<Vec<View>, BaseError> {
    let Yaml::Array(list) = v else {
        return Err(BaseError::Shape("`views` is a list"));
    };
    if list.len() > VIEWS_MAX {
        return Err(BaseError::Limit {
            what: "views",
            max: VIEWS_MAX,
        });
    }
    list.iter()
        .enumerate()
        .map(|(i, v)| view(i, v, nodes))
        .collect()
}

fn view(i: usize, v: &Yaml, nodes: &mut usize) -> Result<View, BaseError> {
    let kind = match v["type"].as_str().unwrap_or("table") {
        "table" => ViewKind::Table,
        "cards" => ViewKind::Cards,
        "list" => ViewKind::List,
        other => ViewKind::Other(other.to_owned()),
    };
    let strings = |y: &Yaml| -> Vec<String> {
        match y {
            Yaml::Array(a) => a
                .iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    };
    let mut order = strings(&v["order"]);
    order.truncate(COLUMNS_MAX);
    let descending = |y: &Yaml| {
        y["direction"]
            .as_str()
            .is_some_and(|d| d.eq_ignore_ascii_case("desc"))
    };
    let sort = match &v["sort"] {
        Yaml::Array(a) => a
            .iter()
            .take(COLUMNS_MAX)
            .filter_map(|s| Some((s["property"].as_str()?.to_owned(), descending(s))))
            .collect(),
        _ => Vec::new(),
    };
    let group = &v["groupBy"];
    Ok(View {
        kind,
        name: v["name"]
            .as_str()
            .map_or_else(|| format!("View {}", i + 1), str::to_owned),
        filters: match &v["filters"] {
            Yaml::BadValue | Yaml::Null => None,
            f => Some(filter(f, nodes)?),
        },
        order,
        sort,
        limit: v["limit"].as_i64().and_then(|n| usize::try_from(n).ok()),
        group_by: group["property"]
            .as_str()
            .map(|p| (p.to_owned(), descending(group))),
        image: v["image"].as_str().map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
filters:
  or:
    - file.hasTag("tag")
    - and:
        - file.hasTag("book")
        - file.hasLink("Textbook")
    - not:
        - file.hasTag("book")
        - file.inFolder("Required Reading")
formulas:
  formatted_price: 'if(price, price.toFixed(2) + " dollars")'
  ppu: "(price / age).toFixed(2)"
  broken: "price +"
properties:
  status:
    displayName: Status
  formula.formatted_price:
    displayName: "Price"
views:
  - type: table
    name: "My table"
    limit: 10
    groupBy:
      property: note.age
      direction: DESC
    filters:
      and:
        - 'status != "done"'
        - or:
            - "formula.ppu > 5"
            - "price > 2.1"
    order:
      - file.name
      - note.age
      - formula.ppu
    sort:
      - property: file.name
        direction: ASC
  - type: cards
    image: cover
  - type: map
    name: Places
"#;

    #[test]
    fn the_documented_example_reads_whole() {
        let b = read(EXAMPLE).unwrap();
        let Some(Filter::Or(ors)) = &b.filters else {
            panic!("{:?}", b.filters)
        };
        assert_eq!(ors.len(), 3);
        assert!(matches!(&ors[2], Filter::Not(n) if n.len() == 2));
        assert_eq!(b.formulas.len(), 3);
        assert!(b.formulas["broken"].is_err() && b.formulas["ppu"].is_ok());
        assert_eq!(b.display_names["formula.formatted_price"], "Price");
        assert_eq!(b.views.len(), 3);
        let t = &b.views[0];
        assert_eq!(
            (t.kind.clone(), t.name.as_str(), t.limit),
            (ViewKind::Table, "My table", Some(10))
        );
        assert_eq!(t.group_by, Some(("note.age".into(), true)));
        assert_eq!(t.order, ["file.name", "note.age", "formula.ppu"]);
        assert_eq!(t.sort, [("file.name".to_owned(), false)]);
        assert!(matches!(&t.filters, Some(Filter::And(a)) if a.len() == 2));
        assert_eq!(
            (b.views[1].kind.clone(), b.views[1].name.as_str()),
            (ViewKind::Cards, "View 2")
        );
        assert_eq!(b.views[1].image.as_deref(), Some("cover"));
        assert_eq!(b.views[2].kind, ViewKind::Other("map".into()));
    }

    #[test]
    fn a_base_that_is_not_one_is_refused_with_the_reason() {
        let shape = |yaml: &str| match read(yaml) {
            Err(BaseError::Shape(why)) => why,
            other => panic!("{yaml:?}: {other:?}"),
        };
        assert!(shape("- a\n- b").contains("mapping"));
        assert!(shape("filters:\n  maybe: [a]").contains("one key"));
        assert!(shape("views: 3").contains("list"));
        assert!(matches!(
            read("filters: [unclosed"),
            Err(BaseError::Yaml(_))
        ));
        let many = format!(
            "filters:\n  and:\n{}",
            "    - a\n".repeat(FILTER_NODES_MAX + 1)
        );
        assert!(matches!(
            read(&many),
            Err(BaseError::Limit {
                what: "filter nodes",
                ..
            })
        ));
        let views = format!("views:\n{}", "  - type: list\n".repeat(VIEWS_MAX + 1));
        assert!(matches!(
            read(&views),
            Err(BaseError::Limit { what: "views", .. })
        ));
        assert!(read("").unwrap().views.is_empty());
    }
}
