//! Tests of `conditional`.

use super::*;
use http::HeaderValue;
use proptest::prelude::*;

const STORED_ETAG: &str = "\"v1\"";

fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

fn date(secs: u64) -> String {
    httpdate::fmt_http_date(t(secs))
}

fn req(pairs: &[(HeaderName, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in pairs {
        h.append(n.clone(), HeaderValue::from_str(v).unwrap());
    }
    h
}

fn pre(pairs: &[(HeaderName, &str)]) -> Precondition {
    evaluate_preconditions(
        &Method::GET,
        &req(pairs),
        Some(STORED_ETAG),
        Some(t(1_000_000)),
    )
}

fn range(pairs: &[(HeaderName, &str)], len: u64) -> RangeAnswer {
    evaluate_range(
        &req(pairs),
        &Method::GET,
        len,
        Some(STORED_ETAG),
        Some(t(1_000_000)),
        Some(t(1_000_100)),
    )
}

fn partial(v: &[(u64, u64)]) -> RangeAnswer {
    RangeAnswer::Partial(v.to_vec())
}

/// RFC 9110 §8.8.3: grammar of an entity-tag.
#[test]
fn entity_tag_grammar() {
    assert_eq!(
        parse_entity_tag("W/\"a,b\""),
        Some(EntityTag {
            weak: true,
            opaque: "a,b"
        })
    );
    assert_eq!(
        parse_entity_tag(" \"\" "),
        Some(EntityTag {
            weak: false,
            opaque: ""
        })
    );
    assert_eq!(parse_entity_tag("abc"), None);
    assert_eq!(parse_entity_tag("w/\"abc\""), None, "W/ is case-sensitive");
    assert_eq!(parse_entity_tag("\"abc"), None);
    assert_eq!(parse_entity_tag("\"a\"b"), None);
    assert_eq!(parse_entity_tag("\"a b\""), None, "space is not etagc");
}

/// RFC 9110 §8.8.3.2: the comparison table.
#[test]
fn strong_and_weak_comparison_table() {
    let w1 = parse_entity_tag("W/\"1\"").unwrap();
    let w2 = parse_entity_tag("W/\"2\"").unwrap();
    let s1 = parse_entity_tag("\"1\"").unwrap();
    assert!(!w1.strong_eq(&w1) && w1.weak_eq(&w1));
    assert!(!w1.strong_eq(&w2) && !w1.weak_eq(&w2));
    assert!(!w1.strong_eq(&s1) && w1.weak_eq(&s1));
    assert!(s1.strong_eq(&s1) && s1.weak_eq(&s1));
}

/// RFC 9110 §13.1.2: matching If-None-Match on GET → 304.
#[test]
fn if_none_match_exact_is_not_modified() {
    assert_eq!(pre(&[(IF_NONE_MATCH, "\"v1\"")]), Precondition::NotModified);
    assert_eq!(pre(&[(IF_NONE_MATCH, "\"v2\"")]), Precondition::Proceed);
}

/// RFC 9110 §13.1.2: If-None-Match uses weak comparison, in both directions.
#[test]
fn if_none_match_uses_weak_comparison() {
    assert_eq!(
        pre(&[(IF_NONE_MATCH, "W/\"v1\"")]),
        Precondition::NotModified
    );
    let weak_stored = evaluate_preconditions(
        &Method::GET,
        &req(&[(IF_NONE_MATCH, "\"v1\"")]),
        Some("W/\"v1\""),
        None,
    );
    assert_eq!(weak_stored, Precondition::NotModified);
}

/// RFC 9110 §5.6.1, §5.2: lists across elements and lines; commas in tags.
#[test]
fn if_none_match_list_and_lines() {
    assert_eq!(
        pre(&[(IF_NONE_MATCH, "\"a\", W/\"b\",  \"v1\"")]),
        Precondition::NotModified
    );
    assert_eq!(
        pre(&[(IF_NONE_MATCH, "\"a\""), (IF_NONE_MATCH, "\"v1\"")]),
        Precondition::NotModified
    );
    // "v1, x" is one tag containing a comma, not "v1".
    assert_eq!(pre(&[(IF_NONE_MATCH, "\"v1,x\"")]), Precondition::Proceed);
    // A malformed element is skipped, the next one still counts.
    assert_eq!(
        pre(&[(IF_NONE_MATCH, "bogus, \"v1\"")]),
        Precondition::NotModified
    );
}

/// RFC 9110 §13.1.2: `*` matches any current representation — the stored one.
#[test]
fn if_none_match_star_matches_any() {
    assert_eq!(pre(&[(IF_NONE_MATCH, " * ")]), Precondition::NotModified);
    let no_etag = evaluate_preconditions(&Method::HEAD, &req(&[(IF_NONE_MATCH, "*")]), None, None);
    assert_eq!(no_etag, Precondition::NotModified);
    // `*` inside a list is not the `*` form.
    assert_eq!(pre(&[(IF_NONE_MATCH, "\"x\", *")]), Precondition::Proceed);
}

/// RFC 9110 §13.1.3, §13.2.2: If-None-Match takes precedence over IMS.
#[test]
fn if_none_match_takes_precedence_over_if_modified_since() {
    // IMS alone would say 304; a non-matching INM says 200.
    let p = pre(&[
        (IF_NONE_MATCH, "\"other\""),
        (IF_MODIFIED_SINCE, &date(2_000_000)),
    ]);
    assert_eq!(p, Precondition::Proceed);
    // IMS alone would say 200; a matching INM says 304.
    let p = pre(&[(IF_NONE_MATCH, "\"v1\""), (IF_MODIFIED_SINCE, &date(1))]);
    assert_eq!(p, Precondition::NotModified);
    // Even a malformed INM suppresses IMS.
    let p = pre(&[
        (IF_NONE_MATCH, "garbage"),
        (IF_MODIFIED_SINCE, &date(2_000_000)),
    ]);
    assert_eq!(p, Precondition::Proceed);
}

/// RFC 9110 §13.1.3: not modified iff Last-Modified <= the date, to the second.
#[test]
fn if_modified_since_compares_dates() {
    assert_eq!(
        pre(&[(IF_MODIFIED_SINCE, &date(1_000_000))]),
        Precondition::NotModified
    );
    assert_eq!(
        pre(&[(IF_MODIFIED_SINCE, &date(1_000_001))]),
        Precondition::NotModified
    );
    assert_eq!(
        pre(&[(IF_MODIFIED_SINCE, &date(999_999))]),
        Precondition::Proceed
    );
    // Sub-second stored time compares as its whole second.
    let h = req(&[(IF_MODIFIED_SINCE, &date(1_000_000))]);
    let lm = t(1_000_000) + Duration::from_millis(700);
    assert_eq!(
        evaluate_preconditions(&Method::GET, &h, None, Some(lm)),
        Precondition::NotModified
    );
    // Without any stored time there is nothing to compare: full response.
    assert_eq!(
        evaluate_preconditions(&Method::GET, &h, None, None),
        Precondition::Proceed
    );
}

/// RFC 9110 §5.6.7: the obsolete date formats are accepted too.
#[test]
fn if_modified_since_accepts_obsolete_date_forms() {
    // 1994-11-06T08:49:37Z = 784111777.
    let h = |v: &str| {
        evaluate_preconditions(
            &Method::GET,
            &req(&[(IF_MODIFIED_SINCE, v)]),
            None,
            Some(t(784_111_777)),
        )
    };
    assert_eq!(
        h("Sunday, 06-Nov-94 08:49:37 GMT"),
        Precondition::NotModified
    );
    assert_eq!(h("Sun Nov  6 08:49:37 1994"), Precondition::NotModified);
    assert_eq!(h("Sun, 06 Nov 1994 08:49:36 GMT"), Precondition::Proceed);
}

/// RFC 9110 §13.1.3: invalid dates and several members are ignored.
#[test]
fn if_modified_since_invalid_or_repeated_is_ignored() {
    assert_eq!(
        pre(&[(IF_MODIFIED_SINCE, "yesterday")]),
        Precondition::Proceed
    );
    assert_eq!(pre(&[(IF_MODIFIED_SINCE, "")]), Precondition::Proceed);
    let d = date(2_000_000);
    assert_eq!(
        pre(&[(IF_MODIFIED_SINCE, &d), (IF_MODIFIED_SINCE, &d)]),
        Precondition::Proceed
    );
}

/// RFC 9111 §4.3.2: origin-only preconditions and non-GET/HEAD go to the origin.
#[test]
fn origin_preconditions_and_other_methods_forward() {
    assert_eq!(pre(&[(IF_MATCH, "\"v1\"")]), Precondition::Forward);
    assert_eq!(
        pre(&[(IF_UNMODIFIED_SINCE, &date(1)), (IF_NONE_MATCH, "\"v1\"")]),
        Precondition::Forward
    );
    for m in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
        let h = req(&[(IF_MODIFIED_SINCE, &date(2_000_000))]);
        assert_eq!(
            evaluate_preconditions(&m, &h, Some(STORED_ETAG), Some(t(1))),
            Precondition::Forward,
            "{m}"
        );
    }
    assert_eq!(pre(&[]), Precondition::Proceed);
}

/// Hostile lists are bounded: a match past the item limit is not seen.
#[test]
fn if_none_match_list_is_bounded() {
    let mut v = "\"x\", ".repeat(ETAG_LIST_ITEMS_MAX);
    v.push_str("\"v1\"");
    assert_eq!(pre(&[(IF_NONE_MATCH, &v)]), Precondition::Proceed);
    let mut v = "\"x\", ".repeat(ETAG_LIST_ITEMS_MAX - 1);
    v.push_str("\"v1\"");
    assert_eq!(pre(&[(IF_NONE_MATCH, &v)]), Precondition::NotModified);
}

/// An unbalanced quote ends the list instead of swallowing or panicking.
#[test]
fn if_none_match_unbalanced_quote_ends_list() {
    assert_eq!(pre(&[(IF_NONE_MATCH, "\"v1")]), Precondition::Proceed);
    assert_eq!(
        pre(&[(IF_NONE_MATCH, "x\"y, \"v1\"")]),
        Precondition::Proceed,
        "the quote opened in `x\"y` swallows the rest"
    );
    assert_eq!(
        pre(&[(IF_NONE_MATCH, "\"v1\" junk, \"v2\"")]),
        Precondition::Proceed
    );
}

/// RFC 9110 §14.1.2: the three range forms, clamped to the body.
#[test]
fn range_forms_single() {
    assert_eq!(range(&[(RANGE, "bytes=0-99")], 1000), partial(&[(0, 99)]));
    assert_eq!(
        range(&[(RANGE, "bytes=900-")], 1000),
        partial(&[(900, 999)])
    );
    assert_eq!(
        range(&[(RANGE, "bytes=-100")], 1000),
        partial(&[(900, 999)])
    );
    // last-pos past the end is clamped; a suffix longer than the body is all of it.
    assert_eq!(
        range(&[(RANGE, "bytes=990-5000")], 1000),
        partial(&[(990, 999)])
    );
    assert_eq!(range(&[(RANGE, "bytes=-5000")], 1000), partial(&[(0, 999)]));
    assert_eq!(
        range(&[(RANGE, "bytes=999-999")], 1000),
        partial(&[(999, 999)])
    );
}

/// RFC 9110 §14.1: range units are case-insensitive; OWS in the list.
#[test]
fn range_unit_case_and_whitespace() {
    assert_eq!(
        range(&[(RANGE, "Bytes=0-0 , 500-509")], 1000),
        partial(&[(0, 0), (500, 509)])
    );
}

/// RFC 9110 §14.1.2, §15.5.17: no satisfiable range → 416; unsatisfiable members of
/// a satisfiable set are dropped.
#[test]
fn range_unsatisfiable() {
    assert_eq!(
        range(&[(RANGE, "bytes=1000-")], 1000),
        RangeAnswer::Unsatisfiable
    );
    assert_eq!(
        range(&[(RANGE, "bytes=-0")], 1000),
        RangeAnswer::Unsatisfiable
    );
    assert_eq!(
        range(&[(RANGE, "bytes=5000-6000, -0")], 1000),
        RangeAnswer::Unsatisfiable
    );
    assert_eq!(
        range(&[(RANGE, "bytes=5000-6000, 0-9")], 1000),
        partial(&[(0, 9)])
    );
    assert_eq!(
        range(&[(RANGE, "bytes=99999999999999999999999-")], 1000),
        RangeAnswer::Unsatisfiable,
        "saturated first-pos"
    );
    assert_eq!(content_range_unsatisfied(1000), "bytes */1000");
}

/// RFC 9110 §14.2: invalid syntax and unknown units are ignored (200).
#[test]
fn range_invalid_or_unknown_unit_is_full() {
    for v in [
        "items=0-5",
        "bytes",
        "bytes=",
        "bytes=,",
        "bytes=a-b",
        "bytes=5-1",
        "bytes=--5",
        "bytes=0-5-",
        "bytes=-",
        "bytes=1 -2",
        "bytes=0x10-",
    ] {
        assert_eq!(range(&[(RANGE, v)], 1000), RangeAnswer::Full, "{v}");
    }
    assert_eq!(
        range(&[(RANGE, "bytes=0-1"), (RANGE, "bytes=2-3")], 1000),
        RangeAnswer::Full,
        "Range is a singleton field"
    );
}

/// RFC 9110 §14.2: Range only applies to GET (HEAD and others get the full answer).
#[test]
fn range_ignored_for_non_get() {
    let h = req(&[(RANGE, "bytes=0-1")]);
    for m in [Method::HEAD, Method::POST] {
        assert_eq!(
            evaluate_range(&h, &m, 10, None, None, None),
            RangeAnswer::Full
        );
    }
    assert_eq!(range(&[], 10), RangeAnswer::Full);
}

/// RFC 9110 §15.3.7.2, §17.15: ranges are sorted, overlaps and small gaps coalesced.
#[test]
fn ranges_sorted_and_coalesced() {
    assert_eq!(
        range(&[(RANGE, "bytes=500-600, 0-100")], 10_000),
        partial(&[(0, 100), (500, 600)])
    );
    assert_eq!(
        range(&[(RANGE, "bytes=0-100, 50-200, 150-160")], 10_000),
        partial(&[(0, 200)])
    );
    // A 79-byte gap (101..=179) merges; an 80-byte gap (101..=180) does not.
    assert_eq!(
        range(&[(RANGE, "bytes=0-100, 180-200")], 10_000),
        partial(&[(0, 200)])
    );
    assert_eq!(
        range(&[(RANGE, "bytes=0-100, 181-200")], 10_000),
        partial(&[(0, 100), (181, 200)])
    );
    // Many identical ranges collapse to one.
    let v = format!("bytes={}", vec!["0-0"; RANGES_MAX].join(","));
    assert_eq!(range(&[(RANGE, &v)], 10), partial(&[(0, 0)]));
}

/// RFC 9110 §17.15: more than RANGES_MAX range-specs → the full body.
#[test]
fn too_many_ranges_is_full() {
    let specs: Vec<String> = (0..=RANGES_MAX)
        .map(|i| format!("{}-{}", i * 1000, i * 1000))
        .collect();
    let v = format!("bytes={}", specs.join(","));
    assert_eq!(range(&[(RANGE, &v)], 1_000_000), RangeAnswer::Full);
    let v = format!("bytes={}", specs[..RANGES_MAX].join(","));
    match range(&[(RANGE, &v)], 1_000_000) {
        RangeAnswer::Partial(r) => assert_eq!(r.len(), RANGES_MAX),
        other => panic!("{other:?}"),
    }
}

/// A zero-length body is sent whole.
#[test]
fn empty_body_is_full() {
    assert_eq!(range(&[(RANGE, "bytes=-5")], 0), RangeAnswer::Full);
    assert_eq!(range(&[(RANGE, "bytes=0-")], 0), RangeAnswer::Full);
}

/// RFC 9110 §13.1.5: If-Range with an entity-tag uses strong comparison.
#[test]
fn if_range_etag_strong_comparison() {
    let r = |v: &str, stored: &str| {
        evaluate_range(
            &req(&[(RANGE, "bytes=0-9"), (IF_RANGE, v)]),
            &Method::GET,
            100,
            Some(stored),
            None,
            None,
        )
    };
    assert_eq!(r("\"v1\"", "\"v1\""), partial(&[(0, 9)]));
    assert_eq!(r("\"v2\"", "\"v1\""), RangeAnswer::Full);
    assert_eq!(
        r("W/\"v1\"", "\"v1\""),
        RangeAnswer::Full,
        "weak never matches"
    );
    assert_eq!(
        r("\"v1\"", "W/\"v1\""),
        RangeAnswer::Full,
        "weak never matches"
    );
    assert_eq!(r("v1", "\"v1\""), RangeAnswer::Full, "unquoted is invalid");
}

/// RFC 9110 §13.1.5, §8.8.2.2: If-Range with a date needs an exact match with a
/// strong Last-Modified (Date at least one second later).
#[test]
fn if_range_date_exact_and_strong() {
    let r = |v: &str, lm: u64, date_secs: Option<u64>| {
        evaluate_range(
            &req(&[(RANGE, "bytes=0-9"), (IF_RANGE, v)]),
            &Method::GET,
            100,
            Some(STORED_ETAG),
            Some(t(lm)),
            date_secs.map(t),
        )
    };
    let d = date(1_000_000);
    assert_eq!(r(&d, 1_000_000, Some(1_000_001)), partial(&[(0, 9)]));
    assert_eq!(
        r(&d, 1_000_000, Some(1_000_000)),
        RangeAnswer::Full,
        "weak LM"
    );
    assert_eq!(r(&d, 1_000_000, None), RangeAnswer::Full, "no Date");
    assert_eq!(
        r(&d, 999_999, Some(1_000_001)),
        RangeAnswer::Full,
        "not exact"
    );
    assert_eq!(
        r("not a date", 1_000_000, Some(1_000_001)),
        RangeAnswer::Full
    );
}

/// If-Range without Range is ignored; Range without If-Range is evaluated.
#[test]
fn if_range_only_with_range() {
    assert_eq!(range(&[(IF_RANGE, "\"nope\"")], 100), RangeAnswer::Full);
    assert_eq!(range(&[(RANGE, "bytes=0-0")], 100), partial(&[(0, 0)]));
}

/// RFC 9110 §14.4: Content-Range formatting.
#[test]
fn content_range_format() {
    assert_eq!(content_range(0, 99, 1000), "bytes 0-99/1000");
    assert_eq!(content_range(999, 999, 1000), "bytes 999-999/1000");
}

/// RFC 9110 §14.6, §15.3.7.2: multipart/byteranges layout and length.
#[test]
fn multipart_plan_layout() {
    let b = boundary_for(42);
    assert!(b.len() <= 70);
    let plan = multipart_plan(&[(0, 1), (8, 9)], 10, Some("text/html"), &b);
    assert_eq!(
        plan.content_type,
        format!("multipart/byteranges; boundary={b}")
    );
    assert_eq!(
        plan.parts[0].head,
        format!("\r\n--{b}\r\nContent-Type: text/html\r\nContent-Range: bytes 0-1/10\r\n\r\n")
            .into_bytes()
    );
    assert_eq!(plan.parts[1].range, (8, 9));
    assert_eq!(plan.trailer, format!("\r\n--{b}--\r\n").into_bytes());
    // Render it and check the declared length is the real one.
    let body = b"0123456789";
    let mut out = Vec::new();
    for p in &plan.parts {
        out.extend_from_slice(&p.head);
        out.extend_from_slice(&body[p.range.0 as usize..=p.range.1 as usize]);
    }
    out.extend_from_slice(&plan.trailer);
    assert_eq!(out.len() as u64, plan.content_length);
    assert!(String::from_utf8(out).unwrap().contains("\r\n\r\n89\r\n--"));
    assert_ne!(boundary_for(1), boundary_for(2));
}

/// RFC 9110 §15.4.5: which headers a 304 carries.
#[test]
fn not_modified_header_selection() {
    let stored = req(&[
        (CACHE_CONTROL, "max-age=60"),
        (CACHE_CONTROL, "public"),
        (CONTENT_LOCATION, "/a"),
        (DATE, &date(1)),
        (ETAG, STORED_ETAG),
        (EXPIRES, &date(61)),
        (VARY, "Accept-Encoding"),
        (LAST_MODIFIED, &date(0)),
        (http::header::CONTENT_TYPE, "text/html"),
        (http::header::CONTENT_LENGTH, "10"),
        (http::header::SET_COOKIE, "a=b"),
    ]);
    let out = not_modified_headers(&stored);
    assert_eq!(out.get_all(CACHE_CONTROL).iter().count(), 2);
    for n in [CONTENT_LOCATION, DATE, ETAG, EXPIRES, VARY] {
        assert_eq!(out.get(&n), stored.get(&n), "{n}");
    }
    assert!(!out.contains_key(LAST_MODIFIED), "ETag present");
    assert!(!out.contains_key(http::header::CONTENT_TYPE));
    assert!(!out.contains_key(http::header::CONTENT_LENGTH));
    assert!(!out.contains_key(http::header::SET_COOKIE));
    assert_eq!(out.len(), 7);
}

/// RFC 9110 §15.4.5: Last-Modified guides cache updates when there is no ETag.
#[test]
fn not_modified_keeps_last_modified_without_etag() {
    let stored = req(&[(LAST_MODIFIED, &date(0)), (DATE, &date(1))]);
    let out = not_modified_headers(&stored);
    assert_eq!(out.get(LAST_MODIFIED), stored.get(LAST_MODIFIED));
    assert_eq!(out.len(), 2);
}

fn hostile_headers(name: HeaderName, lines: &[Vec<u8>], extra: &[(HeaderName, &str)]) -> HeaderMap {
    let mut h = req(extra);
    for l in lines {
        if let Ok(v) = HeaderValue::from_bytes(l) {
            h.append(name.clone(), v);
        }
    }
    h
}

proptest! {
    /// Arbitrary If-None-Match / If-Modified-Since bytes never panic.
    #[test]
    fn hostile_preconditions_never_panic(
        inm in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..3),
        ims in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..2),
        stored in proptest::option::of(".{0,20}"),
    ) {
        let mut h = hostile_headers(IF_NONE_MATCH, &inm, &[]);
        for l in &ims {
            if let Ok(v) = HeaderValue::from_bytes(l) {
                h.append(IF_MODIFIED_SINCE, v);
            }
        }
        let p = evaluate_preconditions(&Method::GET, &h, stored.as_deref(), Some(t(5)));
        prop_assert_ne!(p, Precondition::Forward);
    }

    /// Arbitrary Range / If-Range bytes never panic, and any Partial answer is
    /// sorted, disjoint, within the body and bounded.
    #[test]
    fn hostile_range_never_panics(
        rng in proptest::collection::vec(any::<u8>(), 0..300),
        len in 0u64..5000,
    ) {
        let h = hostile_headers(RANGE, &[rng], &[]);
        if let RangeAnswer::Partial(r) = evaluate_range(&h, &Method::GET, len, Some(STORED_ETAG), None, None) {
            prop_assert!(!r.is_empty() && r.len() <= RANGES_MAX);
            for w in r.windows(2) {
                prop_assert!(w[0].1 < w[1].0);
            }
            for &(s, e) in &r {
                prop_assert!(s <= e && e < len);
            }
        }
    }

    /// Structured range sets always resolve to valid ranges covering what was asked.
    #[test]
    fn generated_ranges_are_valid(
        specs in proptest::collection::vec((0u64..2000, 0u64..2000), 1..RANGES_MAX),
        len in 1u64..1500,
    ) {
        let v: Vec<String> = specs.iter().map(|&(a, b)| format!("{}-{}", a.min(b), a.max(b))).collect();
        let h = req(&[(RANGE, &format!("bytes={}", v.join(",")))]);
        let any_ok = specs.iter().any(|&(a, b)| a.min(b) < len);
        match evaluate_range(&h, &Method::GET, len, None, None, None) {
            RangeAnswer::Partial(r) => {
                prop_assert!(any_ok);
                for &(a, b) in &specs {
                    let (a, b) = (a.min(b), a.max(b).min(len - 1));
                    if a < len {
                        prop_assert!(r.iter().any(|&(s, e)| s <= a && b <= e));
                    }
                }
            }
            RangeAnswer::Unsatisfiable => prop_assert!(!any_ok),
            RangeAnswer::Full => prop_assert!(false, "valid set answered Full"),
        }
    }
}
