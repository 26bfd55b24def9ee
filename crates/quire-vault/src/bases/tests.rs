//! The expression engine end to end: parse, then evaluate for a note.

use std::collections::HashMap;

use super::time::parse_date;
use super::*;

/// A note for tests: properties, a path, tags and links.
struct Note {
    props: HashMap<&'static str, Value>,
    path: &'static str,
    tags: Vec<&'static str>,
    links: Vec<&'static str>,
    mtime: i64,
}

impl Row for Note {
    fn property(&self, name: &str) -> Value {
        self.props.get(name).cloned().unwrap_or(Value::Null)
    }
    fn file_field(&self, field: &str) -> Option<Value> {
        let base = self.path.rsplit('/').next().unwrap_or(self.path);
        Some(match field {
            "name" => Value::Str(base.to_owned()),
            "basename" => Value::Str(base.trim_end_matches(".md").to_owned()),
            "path" => Value::Str(self.path.to_owned()),
            "folder" => Value::Str(self.path.rsplit_once('/').map_or("", |(f, _)| f).to_owned()),
            "ext" => Value::Str("md".to_owned()),
            "mtime" | "ctime" => Value::Date(self.mtime),
            "tags" => Value::List(
                self.tags
                    .iter()
                    .map(|t| Value::Str((*t).to_owned()))
                    .collect(),
            ),
            _ => return None,
        })
    }
    fn has_tag(&self, tag: &str) -> bool {
        self.tags
            .iter()
            .any(|t| *t == tag || t.starts_with(&format!("{tag}/")))
    }
    fn in_folder(&self, folder: &str) -> bool {
        self.path.starts_with(&format!("{folder}/"))
    }
    fn has_link(&self, target: &str) -> bool {
        self.links.iter().any(|l| l.eq_ignore_ascii_case(target))
    }
    fn has_property(&self, name: &str) -> bool {
        self.props.contains_key(name)
    }
}

fn book() -> Note {
    Note {
        props: HashMap::from([
            ("status", Value::Str("reading".into())),
            ("price", Value::Num(12.5)),
            ("age", Value::Num(5.0)),
            ("due", Value::Str("2025-03-10".into())),
            (
                "authors",
                Value::List(vec![Value::Str("Ann".into()), Value::Str("Bo".into())]),
            ),
        ]),
        path: "Books/Dune.md",
        tags: vec!["book", "scifi/classic"],
        links: vec!["Herbert"],
        mtime: parse_date("2025-03-01 08:00").unwrap(),
    }
}

fn calc(src: &str) -> Value {
    calc_with(src, &HashMap::new())
}

fn calc_with(src: &str, formulas: &HashMap<String, Result<Expr, BaseError>>) -> Value {
    let env = Env {
        formulas,
        now_ms: parse_date("2025-03-05 12:00").unwrap(),
        clock_read: Default::default(),
    };
    let expr = parse(src).unwrap_or_else(|e| panic!("{src}: {e}"));
    eval(&expr, &book(), &env, &mut Budget::new(10_000))
}

fn shows(src: &str) -> String {
    calc(src).display()
}

#[test]
fn filters_read_properties_and_the_file_as_obsidian_documents() {
    for (src, want) in [
        (r#"status == "reading""#, true),
        (r#"status != "done" && price > 10"#, true),
        (r#"file.hasTag("book")"#, true),
        (r##"file.hasTag("#scifi")"##, true),
        (r#"file.hasTag("sci")"#, false),
        (r#"file.hasTag("poetry", "book")"#, true),
        (r#"file.inFolder("Books")"#, true),
        (r#"file.inFolder("Boo")"#, false),
        (r#"file.hasLink("[[Herbert]]")"#, true),
        (
            r#"file.hasProperty("price") && !file.hasProperty("rating")"#,
            true,
        ),
        (r#"authors.contains("Bo")"#, true),
        (r#"file.mtime > "2025-02-28""#, true),
        (r#"date(due) < now() + "1 week""#, true),
        (r#"file.name == "Dune.md" && file.ext == "md""#, true),
        ("rating > 3", false),
        (r#"price > "cheap""#, false),
        ("missing", false),
        ("nosuchfunction(1)", false),
    ] {
        assert_eq!(calc(src).truthy(), want, "{src}");
    }
}

#[test]
fn formulas_compute_text_numbers_dates_and_lists() {
    for (src, want) in [
        ("(price / age).toFixed(2)", "2.50"),
        (
            r#"if(price, price.toFixed(1) + " dollars")"#,
            "12.5 dollars",
        ),
        (r#"if(rating, "rated")"#, ""),
        ("price * 2 - 1", "24"),
        ("(now() - file.mtime).days", "4.166666666666667"),
        ("(date(due) - today()).days", "5"),
        (r#"file.mtime.format("D MMM YYYY")"#, "1 Mar 2025"),
        ("file.mtime.relative()", "4 days ago"),
        (r#"date("2025-03-05") + "2d""#, "2025-03-07"),
        (r#"authors.join(" & ")"#, "Ann & Bo"),
        ("authors.length + file.tags.length", "4"),
        (r#"status.upper().slice(0, 4)"#, "READ"),
        (r#""the quick fox".title()"#, "The Quick Fox"),
        ("max(price, age, 40)", "40"),
        ("[3, 1, 2].sort().reverse()", "3, 2, 1"),
        ("list(status)[0]", "reading"),
        ("authors[-1]", "Bo"),
        (r#"note["status"]"#, "reading"),
        (r#"number("4") * 2"#, "8"),
        ("(2.345).round(2)", "2.35"),
        (r#"link("[[Herbert|Frank]]")"#, "Herbert"),
        (r#"file.asLink("read it")"#, "read it"),
    ] {
        assert_eq!(calc(src).display(), want, "{src}");
    }
}

#[test]
fn unsupported_and_failing_parts_are_error_values_naming_them() {
    assert_eq!(
        shows("authors.map(x)"),
        "error: `list.map()` is not supported"
    );
    assert_eq!(shows("html(\"<b>\")"), "error: `html()` is not supported");
    assert_eq!(
        shows("file.nosuch"),
        "error: `file.nosuch` is not supported"
    );
    assert_eq!(shows("status - 1"), "error: cannot - a string and a number");
    assert_eq!(shows("formula.nope"), "error: no formula `nope`");
    assert_eq!(
        shows(r#"date("someday")"#),
        "error: \"someday\" is not a date"
    );
    assert!(shows(r#""ab".repeat(100000)"#).starts_with("error: repeat makes at most"));
    // A method on a property the note lacks.
    assert_eq!(
        shows("rating.round()"),
        "error: `null.round()` is not supported"
    );
}

#[test]
fn formulas_refer_to_each_other_and_a_cycle_is_an_error_not_a_hang() {
    let formulas: HashMap<String, Result<Expr, BaseError>> = [
        ("ppu", parse("price / age")),
        ("label", parse(r#"formula.ppu.toFixed(1) + " each""#)),
        ("loop_a", parse("formula.loop_b + 1")),
        ("loop_b", parse("formula.loop_a + 1")),
        ("broken", parse("price +")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(calc_with("formula.label", &formulas).display(), "2.5 each");
    assert_eq!(
        calc_with("formula.loop_a", &formulas).display(),
        "error: formula `loop_a` refers to itself"
    );
    assert!(calc_with("formula.broken", &formulas)
        .display()
        .starts_with("error: formula `broken`:"));
}

#[test]
fn a_hostile_expression_spends_its_budget_and_stops() {
    // 2^16 evaluations through doubling formulas: the budget stops it.
    let mut formulas: HashMap<String, Result<Expr, BaseError>> = HashMap::new();
    formulas.insert("f0".into(), parse("price"));
    for i in 1..16 {
        formulas.insert(
            format!("f{i}"),
            parse(&format!("formula.f{0} + formula.f{0}", i - 1)),
        );
    }
    let env = Env {
        formulas: &formulas,
        now_ms: 0,
        clock_read: Default::default(),
    };
    let mut budget = Budget::new(5_000);
    let v = eval(&parse("formula.f15").unwrap(), &book(), &env, &mut budget);
    assert!(budget.spent, "{v:?}");
    assert!(matches!(v, Value::Error(_)), "{v:?}");
    // A long list's methods pay by length.
    let mut budget = Budget::new(300);
    let long = format!("[{}].sort().join(\",\")", vec!["1"; 200].join(","));
    eval(&parse(&long).unwrap(), &book(), &env, &mut budget);
    assert!(budget.spent);
}

fn note(path: &'static str, status: &str, price: f64, tags: Vec<&'static str>) -> Note {
    Note {
        props: HashMap::from([
            ("status", Value::Str(status.into())),
            ("price", Value::Num(price)),
        ]),
        path,
        tags,
        links: vec![],
        mtime: 0,
    }
}

/// A base of books not done, by price descending, grouped by status, three at most.
fn open_books_base() -> Base {
    read(
        r#"
filters: 'file.hasTag("book")'
formulas:
  double: "price * 2"
properties:
  formula.double:
    displayName: Twice
views:
  - type: table
    name: Open
    filters:
      not:
        - 'status == "done"'
    order: [file.basename, status, formula.double]
    sort:
      - property: price
        direction: DESC
    groupBy:
      property: status
    limit: 3
"#,
    )
    .unwrap()
}

/// Five books and a film.
fn shelf() -> [Note; 6] {
    [
        note("a.md", "reading", 10.0, vec!["book"]),
        note("b.md", "done", 99.0, vec!["book"]),
        note("c.md", "queued", 30.0, vec!["book"]),
        note("d.md", "reading", 20.0, vec!["book"]),
        note("e.md", "reading", 50.0, vec!["film"]),
        note("f.md", "queued", 5.0, vec!["book"]),
    ]
}

/// The first view of `base` run over `notes` at `now_ms` 0.
fn run_first(base: &Base, notes: &[Note], steps: u64, rows_max: usize) -> Outcome {
    let rows: Vec<&dyn Row> = notes.iter().map(|n| n as &dyn Row).collect();
    let env = Env {
        formulas: &base.formulas,
        now_ms: 0,
        clock_read: Default::default(),
    };
    run(
        base,
        &base.views[0],
        &rows,
        &env,
        &mut Budget::new(steps),
        rows_max,
    )
}

#[test]
fn a_view_filters_sorts_groups_limits_and_computes_its_cells() {
    let base = open_books_base();
    let notes = shelf();
    let out = run_first(&base, &notes, 10_000, 1000);
    assert_eq!(out.matched, 4, "a, c, d, f: books not done");
    assert_eq!(out.cut, None);
    let labels: Vec<&str> = out.columns.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["file.basename", "status", "Twice"]);
    // By price descending, the first three (c 30, d 20, a 10), grouped by status.
    let groups: Vec<(String, Vec<String>)> = out
        .groups
        .iter()
        .map(|g| {
            let key = g.key.as_ref().map(Value::display).unwrap_or_default();
            (key, g.rows.iter().map(|r| r.cells[0].display()).collect())
        })
        .collect();
    assert_eq!(
        groups,
        [
            ("queued".to_owned(), vec!["c".to_owned()]),
            ("reading".to_owned(), vec!["d".to_owned(), "a".to_owned()])
        ]
    );
    assert_eq!(out.groups[0].rows[0].cells[2].display(), "60");

    let small = run_first(&base, &notes, 10_000, 2);
    assert_eq!(small.cut.as_deref(), Some("showing 2 of 4 notes"));
    assert_eq!(small.groups.iter().map(|g| g.rows.len()).sum::<usize>(), 2);

    let starved = run_first(&base, &notes, 10, 1000);
    assert_eq!(
        starved.cut.as_deref(),
        Some("the view's evaluation budget ran out")
    );
}

/// Links for the drawing tests: rows 0 and 2 readable, `[[Herbert]]` readable,
/// images only `cover.png`.
struct TestLinks;

impl Links for TestLinks {
    fn row_url(&self, index: usize) -> Option<String> {
        [0, 2].contains(&index).then(|| format!("/note-{index}"))
    }
    fn link_url(&self, target: &str) -> Option<String> {
        (target == "Herbert").then(|| "/herbert".to_owned())
    }
    fn image_url(&self, name: &str) -> Option<String> {
        (name == "cover.png").then(|| "/files/cover.png".to_owned())
    }
}

fn drawn(yaml: &str, notes: &[Note], rows_max: usize) -> String {
    let base = read(yaml).unwrap();
    let out = run_first(&base, notes, 100_000, rows_max);
    draw(&base.views[0], &out, &TestLinks)
}

#[test]
fn a_table_escapes_every_text_and_links_only_what_the_reader_may_open() {
    let mut notes = shelf();
    notes[0]
        .props
        .insert("status", Value::Str("<script>alert(1)</script>".into()));
    notes[1]
        .props
        .insert("by", Value::Link("Herbert".into(), None));
    notes[2].props.insert(
        "by",
        Value::Link("Secret".into(), Some("hidden name".into())),
    );
    let html = drawn(
        "views:\n  - type: table\n    name: <b>All</b>\n    order: [file.basename, status, by, formula.nope]\n",
        &notes,
        1000,
    );
    assert!(
        !html.contains("<script>") && html.contains("&lt;script&gt;"),
        "{html}"
    );
    assert!(html.contains("&lt;b&gt;All&lt;/b&gt;"), "{html}");
    assert!(
        html.contains("<td><a href=\"/note-0\">a</a></td>"),
        "{html}"
    );
    assert!(html.contains("<td>b</td>"), "row 1 is not linked: {html}");
    assert!(
        html.contains("<a class=\"wikilink\" href=\"/herbert\">Herbert</a>"),
        "{html}"
    );
    assert!(
        html.contains("<span class=\"wikilink broken\">hidden name</span>"),
        "{html}"
    );
    assert!(
        html.contains("class=\"base-error\" title=\"no formula `nope`\""),
        "{html}"
    );
    assert!(html.contains("6 of 6 notes"), "{html}");
}

#[test]
fn cards_show_their_image_and_a_cut_view_says_so() {
    let mut notes = shelf();
    notes[0]
        .props
        .insert("cover", Value::Str("cover.png".into()));
    notes[1]
        .props
        .insert("cover", Value::Str("https://evil.example/x.png".into()));
    let html = drawn(
        "views:\n  - type: cards\n    image: cover\n    order: [file.basename, price]\n",
        &notes,
        2,
    );
    assert!(html.contains("<img src=\"/files/cover.png\""), "{html}");
    assert!(!html.contains("evil.example"), "{html}");
    assert!(html.contains("<dt>price</dt><dd>10</dd>"), "{html}");
    assert!(
        html.contains("Not every note is shown: showing 2 of 6 notes."),
        "{html}"
    );
    let map = drawn("views:\n  - type: map\n    name: Places\n", &notes, 10);
    assert!(
        html_has_no_rows(&map) && map.contains("“map” are not shown"),
        "{map}"
    );
}

fn html_has_no_rows(html: &str) -> bool {
    !html.contains("<li") && !html.contains("<tr>")
}
