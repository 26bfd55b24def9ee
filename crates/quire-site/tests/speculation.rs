//! Speculation rules: every page names the rule set browsers prefetch links by
//! (`Speculation-Rules`), under the same strict CSP; `prefetch = "off"` removes
//! both; and a prefetch is answered only from the cache, never rendered.

mod common;

use common::*;

const FREE: &str = "---\nfree: true\n---\n";

fn two_notes(site_toml: &str) -> Running {
    let a = format!("{FREE}# A\nsee [[B]]\n");
    let b = format!("{FREE}# B\nthe description of B\n");
    start_with(
        &[(".quire/site.toml", site_toml), ("A.md", &a), ("B.md", &b)],
        false,
    )
}

#[test]
fn pages_name_the_rule_set_under_the_same_csp_and_it_is_served_immutable() {
    let r = two_notes("");
    let page = get(r.addr, "/a");
    assert_eq!(page.status, 200);
    let field = page.header("speculation-rules").expect("the field");
    let path = field.trim_matches('"');
    assert!(
        field.starts_with('"') && path.starts_with("/_static/speculation-rules.json?v="),
        "{field}"
    );
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("script-src 'none'"), "{csp}");
    let rules = get(r.addr, path);
    assert_eq!(rules.status, 200);
    assert_eq!(
        rules.header("content-type"),
        Some("application/speculationrules+json")
    );
    assert!(
        rules
            .header("cache-control")
            .is_some_and(|c| c.contains("immutable")),
        "{field} {:?}",
        rules.headers
    );
    let v: serde_json::Value = serde_json::from_str(&rules.body).unwrap();
    assert_eq!(v["prefetch"][0]["eagerness"], "moderate");
}

#[test]
fn prefetch_off_means_no_field_and_no_rule_set() {
    let r = two_notes("prefetch = \"off\"\n");
    let page = get(r.addr, "/a");
    assert_eq!(page.status, 200);
    assert_eq!(page.header("speculation-rules"), None);
    assert_eq!(get(r.addr, "/_static/speculation-rules.json").status, 404);
}

#[test]
fn a_prefetch_is_answered_from_the_cache_or_refused_never_rendered() {
    let r = two_notes("");
    let prefetch = "Sec-Purpose: prefetch\r\n";
    // Not rendered yet: refused at once, and not stored by the refusal.
    let refused = get_with(r.addr, "GET", "/b", prefetch, "");
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("cache-control"), Some("no-store"));
    let first = get(r.addr, "/b");
    assert_eq!(first.status, 200);
    assert!(!first.hit(), "the reader's request rendered it");
    // Stored now: the prefetch is a hit.
    let again = get_with(r.addr, "GET", "/b", prefetch, "");
    assert_eq!(again.status, 200);
    assert!(again.hit());
    assert!(again.body.contains("the description of B"));
}
