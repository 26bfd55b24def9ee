//! Speculation rules: pages tell the browser which links it may prefetch before the
//! reader clicks (`prefetch` in `site.toml`: `"moderate"` by default, or
//! `"conservative"`, `"eager"`, `"off"`).
//!
//! Key decisions:
//! - **A header, not a script.** Every HTML page carries `Speculation-Rules`
//!   naming the rule set at [`PATH`] (versioned by its content, so it is cached as
//!   immutable). Chromium 156 fetches and applies a header's rule set under the
//!   pages' `script-src 'none'` (checked with a page that had both: the linked page
//!   was requested with `Sec-Purpose: prefetch`), so the CSP stays as strict as it
//!   was.
//! - **Only pages worth having ahead**: same-site links, but never sign-in,
//!   sign-out, the account page, search (page or API), view counts, attachments,
//!   feeds or quire's own paths (a path pattern matches the path with any query).
//!   Each exclusion is its own `href_matches` under one `or`: Chromium 156 drops a
//!   whole rule set whose `href_matches` is a list, and one with a pattern for "any
//!   query" (`/*\?*`); both were tried. A query needs no rule of its own: notes
//!   are keyed without theirs, so a prefetch of one is the note's hit.
//! - **A prefetch never makes work.** quire answers a prefetch only from the store
//!   (`quire_server`'s request floor: a stored page, or a 503 with `no-store`), so
//!   announcing prefetches cannot turn hovered links into renders.

use serde::Deserialize;
use serde_json::json;

/// Where the rule set is served.
pub const PATH: &str = "/_static/speculation-rules.json";

/// Its media type.
pub const MEDIA_TYPE: &str = "application/speculationrules+json";

/// How eagerly the browser prefetches (`prefetch` in `site.toml`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Prefetch {
    /// No rules, no header.
    Off,
    /// On pointer or touch down.
    Conservative,
    /// On hovering a link for a moment (the default).
    #[default]
    Moderate,
    /// As soon as a link is seen, or soon after.
    Eager,
}

impl Prefetch {
    fn eagerness(self) -> Option<&'static str> {
        match self {
            Prefetch::Off => None,
            Prefetch::Conservative => Some("conservative"),
            Prefetch::Moderate => Some("moderate"),
            Prefetch::Eager => Some("eager"),
        }
    }
}

/// Paths never prefetched (URL patterns, relative to the page).
const NEVER: &[&str] = &[
    "/login",
    "/logout",
    "/account",
    "/search",
    "/api/*",
    "/_views",
    "/_static/*",
    "/_quire/*",
    "/attachments/*",
    "/feed.xml",
    "/sitemap.xml",
    "/robots.txt",
    "/llms.txt",
    "/llms-full.txt",
];

/// The rule set for `p` (`None` when off).
pub fn rules(p: Prefetch) -> Option<String> {
    let eagerness = p.eagerness()?;
    let rules = json!({
        "prefetch": [{
            "source": "document",
            "where": {"and": [
                {"href_matches": "/*"},
                {"not": {"or": NEVER.iter().map(|p| json!({"href_matches": p})).collect::<Vec<_>>()}},
            ]},
            "eagerness": eagerness,
        }]
    });
    Some(rules.to_string())
}

/// The rule set's version (its content's hash).
pub fn version(p: Prefetch) -> Option<u64> {
    rules(p).map(|r| xxhash_rust::xxh3::xxh3_64(r.as_bytes()))
}

/// The `Speculation-Rules` field pages carry (`None` when off): a structured-field
/// string naming the versioned rule set.
pub fn header_value(p: Prefetch) -> Option<String> {
    version(p).map(|v| format!("\"{PATH}?v={v:016x}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_prefetch_same_site_pages_and_never_the_listed_paths() {
        let text = rules(Prefetch::Moderate).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let rule = &v["prefetch"][0];
        assert_eq!(rule["eagerness"], "moderate");
        assert_eq!(rule["where"]["and"][0]["href_matches"], "/*");
        let never = rule["where"]["and"][1]["not"]["or"].as_array().unwrap();
        for p in [
            "/login",
            "/logout",
            "/search",
            "/attachments/*",
            "/_quire/*",
        ] {
            assert!(never.iter().any(|n| n["href_matches"] == p), "{p} excluded");
        }
        assert!(rules(Prefetch::Off).is_none());
        assert!(header_value(Prefetch::Off).is_none());
        let h = header_value(Prefetch::Eager).unwrap();
        assert!(h.starts_with("\"/_static/speculation-rules.json?v=") && h.ends_with('"'));
        assert_ne!(version(Prefetch::Eager), version(Prefetch::Moderate));
    }
}
