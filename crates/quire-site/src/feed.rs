//! The Atom feed (RFC 4287) and `sitemap.xml` (sitemaps.org 0.9): public notes only,
//! with absolute links from `base_url` (or the request's host).

use quire_vault::pages;
use quire_vault::Visibility;

use crate::snapshot::Snapshot;
use quire_vault::render::escape;

/// Characters of a note's text in its feed summary.
const SUMMARY_CHARS: usize = 280;

/// The Atom feed: the newest public notes.
pub fn atom(s: &Snapshot, base: &str) -> String {
    let v = &s.vault;
    let list = pages::index(v, Visibility::Public);
    let updated = list
        .iter()
        .find_map(|e| e.date.as_deref())
        .map_or_else(|| "1970-01-01T00:00:00Z".to_owned(), rfc3339);
    let mut out = String::with_capacity(4096);
    out.push_str("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<feed xmlns=\"http://www.w3.org/2005/Atom\">\n");
    out.push_str(&format!(
        "  <title>{}</title>\n  <subtitle>{}</subtitle>\n  <id>{base}/</id>\n  <link href=\"{base}/\"/>\n  <link rel=\"self\" href=\"{base}/feed.xml\"/>\n  <updated>{updated}</updated>\n",
        escape(&s.config.title),
        escape(&s.config.description),
    ));
    for e in list.iter().take(s.config.feed_entries) {
        let n = &v.notes()[e.note];
        let url = format!("{base}{}", e.url);
        out.push_str(&format!(
            "  <entry>\n    <title>{}</title>\n    <link href=\"{}\"/>\n    <id>{}</id>\n    <updated>{}</updated>\n    <author><name>{}</name></author>\n    <summary>{}</summary>\n  </entry>\n",
            escape(&e.title),
            escape(&url),
            escape(&url),
            e.date.as_deref().map_or_else(|| updated.clone(), rfc3339),
            escape(&s.config.title),
            escape(&summary(&n.body)),
        ));
    }
    out.push_str("</feed>\n");
    out
}

/// `sitemap.xml`: every page an anonymous reader can see.
pub fn sitemap(s: &Snapshot, base: &str) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
    );
    let mut paths: Vec<(&String, Option<&str>)> = s
        .versions
        .keys()
        .filter(|p| p.starts_with('/') && (p.ends_with('/') || !p.contains('.')))
        .filter(|p| !p.starts_with("/_") && !p.starts_with("/attachments/"))
        // Aliases answer redirects: not pages of their own.
        .filter(|p| s.vault.by_url(p).is_some() || s.vault.alias_target(p).is_none())
        .map(|p| {
            let date = s
                .vault
                .by_url(p)
                .and_then(|i| s.vault.notes()[i].front.date.as_deref());
            (p, date)
        })
        .collect();
    paths.sort();
    for (p, date) in paths {
        out.push_str(&format!(
            "  <url><loc>{}</loc>",
            escape(&format!("{base}{p}"))
        ));
        if let Some(d) = date.filter(|d| d.len() == 10) {
            out.push_str(&format!("<lastmod>{}</lastmod>", escape(d)));
        }
        out.push_str("</url>\n");
    }
    out.push_str("</urlset>\n");
    out
}

/// A front-matter date (`YYYY-MM-DD`, or already a timestamp) as RFC 3339.
fn rfc3339(d: &str) -> String {
    if d.len() == 10 {
        format!("{d}T00:00:00Z")
    } else {
        d.to_owned()
    }
}

/// The first words of a note's markdown, with markup stripped.
fn summary(body: &str) -> String {
    let mut out = String::new();
    for line in body.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with("```") || t.starts_with('|') {
            continue;
        }
        for c in t.chars() {
            if !matches!(c, '*' | '_' | '`' | '[' | ']' | '>' | '!') {
                out.push(c);
            }
        }
        out.push(' ');
        if out.chars().count() >= SUMMARY_CHARS {
            break;
        }
    }
    let mut s: String = out.chars().take(SUMMARY_CHARS).collect();
    if out.chars().count() > SUMMARY_CHARS {
        s.push('…');
    }
    s.trim().to_owned()
}
