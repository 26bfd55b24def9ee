//! Heading ids: every heading gets a unique id (its own `{#id}`, else the slug of its
//! text) and is listed for the table of contents.
//!
//! Key decisions:
//! - **De-duplication is linear**: the ids given are a hash set, and each base keeps
//!   the next suffix to try, so `-2`, `-3`.. are never searched from the start (8,000
//!   `# a` headings cost 114 s when every candidate was compared with every id).
//!   Each candidate `base-n` belongs to one base, so every id is skipped at most once.
//! - Ids are slugs, lower-case, so `[[Note#Some Heading]]` and
//!   `[[Note#some heading]]` reach the same heading, as Obsidian resolves heading
//!   links case-insensitively (help.obsidian.md, "Internal links" › "Link to a heading
//!   in a note"), without the linking page depending on the target's headings.

use std::collections::{HashMap, HashSet};

use pulldown_cmark::{CowStr, Event, HeadingLevel, Tag, TagEnd};

use super::events::end_of;
use crate::links;

/// Gives every heading in `events` a unique id; returns `(level, id, text)` of each.
pub(super) fn assign_ids(events: &mut [Event<'_>]) -> Vec<(u8, String, String)> {
    let mut headings = Vec::new();
    let mut used = Ids::default();
    for i in 0..events.len() {
        let Event::Start(Tag::Heading { level, id, .. }) = &events[i] else {
            continue;
        };
        let level = *level;
        let end = end_of(events, i, |e| matches!(e, Event::End(TagEnd::Heading(_))));
        let mut text = String::new();
        for e in &events[i + 1..end] {
            match e {
                Event::Text(t) | Event::Code(t) => text.push_str(t),
                // A `#tag` or a formula, made HTML before this pass: its text.
                Event::InlineHtml(h) => text.push_str(&html_text(h)),
                _ => {}
            }
        }
        let id_s = heading_id(id.as_deref(), &text, &mut used);
        if let Event::Start(Tag::Heading { id, .. }) = &mut events[i] {
            *id = Some(CowStr::from(id_s.clone()));
        }
        headings.push((level_num(level), id_s, text));
    }
    headings
}

/// The text an inline HTML run shows: tags dropped, a formula's `<annotation>` (its
/// TeX source, not shown) skipped, the entities quire's own HTML writes decoded.
fn html_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        rest = &rest[lt..];
        if rest.starts_with("<annotation") {
            rest = rest
                .find("</annotation>")
                .map_or("", |e| &rest[e + "</annotation>".len()..]);
            continue;
        }
        rest = rest.find('>').map_or("", |gt| &rest[gt + 1..]);
    }
    out.push_str(rest);
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The ids given so far on a page, and per base the last suffix tried.
#[derive(Debug, Default)]
struct Ids {
    used: HashSet<String>,
    last: HashMap<String, usize>,
}

/// A heading's id: its own (`{#id}`), else the slug of its `text`, else `section`;
/// `-2`, `-3`.. appended until it is not in `used`, where it is then recorded.
fn heading_id(id: Option<&str>, text: &str, used: &mut Ids) -> String {
    let base = id.map_or_else(|| links::slug(text), str::to_owned);
    let base = if base.is_empty() {
        "section".to_owned()
    } else {
        base
    };
    if used.used.insert(base.clone()) {
        return base;
    }
    let n = used.last.entry(base.clone()).or_insert(1);
    loop {
        *n += 1;
        let id_s = format!("{base}-{n}");
        if used.used.insert(id_s.clone()) {
            return id_s;
        }
    }
}

pub(super) fn level_num(l: HeadingLevel) -> u8 {
    match l {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

#[cfg(test)]
mod tests {
    use super::html_text;
    use crate::render::to_html;

    #[test]
    fn tags_and_formulas_in_a_heading_stay_in_its_text_and_id() {
        let r = to_html("## Plans #garden\n\n## Euler $e^{i\\pi}$ & co\n\n## A <b>bold</b> one\n");
        let texts: Vec<(&str, &str)> = r
            .headings
            .iter()
            .map(|(_, id, text)| (id.as_str(), text.as_str()))
            .collect();
        assert_eq!(texts[0], ("plans-garden", "Plans #garden"));
        assert!(texts[1].1.starts_with("Euler e"), "{texts:?}");
        assert!(texts[1].1.ends_with(" & co"), "{texts:?}");
        assert!(!texts[1].1.contains('\\'), "no TeX source twice: {texts:?}");
        assert_eq!(texts[2], ("a-bold-one", "A bold one"));
    }

    #[test]
    fn eight_thousand_same_headings_get_unique_ids_in_linear_work() {
        // Issue 29.4: 8,000 `# a` lines cost 114 s when each candidate id was compared
        // with every id given. Correctness here (unique, in order, explicit ids
        // respected); the suite `quire-chaos hostile --suite notes` times it.
        let mut md = "# a-3\n".to_owned();
        md.push_str(&"# a\n".repeat(8_000));
        let r = to_html(&md);
        assert_eq!(r.headings.len(), 8_001);
        let ids: std::collections::HashSet<&str> =
            r.headings.iter().map(|(_, id, _)| id.as_str()).collect();
        assert_eq!(ids.len(), 8_001, "every id unique");
        let order: Vec<&str> = r.headings[..5]
            .iter()
            .map(|(_, id, _)| id.as_str())
            .collect();
        assert_eq!(order, ["a-3", "a", "a-2", "a-4", "a-5"]);
        assert_eq!(r.headings[8_000].1, "a-8001");
    }

    #[test]
    fn html_text_drops_markup_and_annotations() {
        assert_eq!(
            html_text("<math><mi>x</mi><annotation encoding=\"tex\">x</annotation></math> &amp; &lt;y&gt;"),
            "x & <y>"
        );
        assert_eq!(html_text("<unclosed"), "");
        assert_eq!(html_text("<annotation>never closed"), "");
    }
}
