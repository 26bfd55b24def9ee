//! The URLs of a sitemap (sitemaps.org 0.9): every `<loc>` of a `<urlset>`, or of
//! each sitemap a `<sitemapindex>` lists (one level deep, as the protocol allows).
//! A plain scan for `<loc>` elements, not an XML parser: warming needs the URLs and
//! nothing else, and a sitemap that is not well-formed still gives what it names.

/// The `<loc>` values of `xml`, unescaped, in order, at most `max`.
pub(crate) fn locs(xml: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = xml;
    while out.len() < max {
        let Some(start) = rest.find("<loc>") else {
            break;
        };
        rest = &rest[start + "<loc>".len()..];
        let Some(end) = rest.find("</loc>") else {
            break;
        };
        let loc = unescape(rest[..end].trim());
        if !loc.is_empty() {
            out.push(loc);
        }
        rest = &rest[end..];
    }
    out
}

/// Whether `xml` is a sitemap index (its `<loc>`s are sitemaps, not pages).
pub(crate) fn is_index(xml: &str) -> bool {
    xml.contains("<sitemapindex")
}

/// XML's five predefined entities; a `<![CDATA[…]]>` wrapper is taken off.
fn unescape(s: &str) -> String {
    let s = s
        .strip_prefix("<![CDATA[")
        .and_then(|s| s.strip_suffix("]]>"))
        .unwrap_or(s);
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locs_are_read_in_order_unescaped_and_capped() {
        let xml = r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<url><loc> https://example.com/a?x=1&amp;y=2 </loc><lastmod>2026-01-01</lastmod></url>
<url><loc><![CDATA[https://example.com/b]]></loc></url>
<url><loc></loc></url>
<url><loc>https://example.com/c</loc></url></urlset>"#;
        assert_eq!(
            locs(xml, 10),
            [
                "https://example.com/a?x=1&y=2",
                "https://example.com/b",
                "https://example.com/c"
            ]
        );
        assert_eq!(locs(xml, 1), ["https://example.com/a?x=1&y=2"]);
        assert!(!is_index(xml));
        assert!(is_index(
            "<sitemapindex><sitemap><loc>https://example.com/s1.xml</loc></sitemap></sitemapindex>"
        ));
        assert!(locs("<loc>unterminated", 10).is_empty());
    }
}
