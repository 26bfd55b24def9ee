//! Heading ids: every heading gets a unique id (its own `{#id}`, else the slug of its
//! text) and is listed for the table of contents.
//!
//! Key decision: ids are slugs, lower-case, so `[[Note#Some Heading]]` and
//! `[[Note#some heading]]` reach the same heading, as Obsidian resolves heading links
//! case-insensitively (help.obsidian.md, "Internal links" › "Link to a heading in a
//! note"), without the linking page depending on the target's headings.

use pulldown_cmark::{CowStr, Event, HeadingLevel, Tag, TagEnd};

use super::end_of;
use crate::links;

/// Gives every heading in `events` a unique id; returns `(level, id, text)` of each.
pub(super) fn assign_ids(events: &mut [Event<'_>]) -> Vec<(u8, String, String)> {
    let mut headings = Vec::new();
    let mut used: Vec<String> = Vec::new();
    for i in 0..events.len() {
        let Event::Start(Tag::Heading { level, id, .. }) = &events[i] else {
            continue;
        };
        let level = *level;
        let end = end_of(events, i, |e| matches!(e, Event::End(TagEnd::Heading(_))));
        let text: String = events[i + 1..end]
            .iter()
            .filter_map(|e| match e {
                Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
                _ => None,
            })
            .collect();
        let id_s = heading_id(id.as_deref(), &text, &mut used);
        if let Event::Start(Tag::Heading { id, .. }) = &mut events[i] {
            *id = Some(CowStr::from(id_s.clone()));
        }
        headings.push((level_num(level), id_s, text));
    }
    headings
}

/// A heading's id: its own (`{#id}`), else the slug of its `text`, else `section`;
/// `-2`, `-3`.. appended until it is not in `used`, where it is then recorded.
fn heading_id(id: Option<&str>, text: &str, used: &mut Vec<String>) -> String {
    let base = id.map_or_else(|| links::slug(text), str::to_owned);
    let base = if base.is_empty() {
        "section".to_owned()
    } else {
        base
    };
    let mut id_s = base.clone();
    let mut n = 1;
    while used.contains(&id_s) {
        n += 1;
        id_s = format!("{base}-{n}");
    }
    used.push(id_s.clone());
    id_s
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
