//! Rendered embeds put in place: the markers that stand for embeds in a note's
//! markdown before it is parsed, and the pass that splices each embed's HTML where
//! its marker is in the parser's events (see `embed` for why markers, and for the
//! render that fills the slots). A paragraph holding an embed is split around it (a
//! block may not sit in a `<p>`); where no block may go the embed is its link.
//!
//! A pass like the others: the pipeline calls [`splice`] and [`strip_ids`], and the
//! embed driver (which calls the pipeline) makes the [`Slots`]; this file imports
//! neither.

use pulldown_cmark::{CowStr, Event, Tag, TagEnd};

/// Opens and closes an embed's marker in the markdown.
const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';

/// An embed, rendered: as a block, and as the inline HTML used where no block may go.
#[derive(Debug)]
pub(super) struct Slot {
    block: String,
    inline: String,
}

/// The embeds a part's markers stand for, and the render's marker tag.
#[derive(Debug, Default)]
pub(super) struct Slots {
    tag: String,
    list: Vec<Option<Slot>>,
}

impl Slots {
    /// The slots of one part: `list[k]` is what marker `k` (tagged `tag`) stands for.
    pub(super) fn new(tag: String, list: Vec<Option<Slot>>) -> Slots {
        Slots { tag, list }
    }

    /// The slot a marker's text (what follows [`OPEN`] up to [`CLOSE`]) names.
    fn get(&self, marker: &str) -> Option<(usize, &Slot)> {
        let k: usize = marker.strip_prefix(self.tag.as_str())?.parse().ok()?;
        Some((k, self.list.get(k)?.as_ref()?))
    }
}

impl Slot {
    /// An embed shown as `block`, or as `link` where no block may go.
    pub(super) fn block(block: String, link: String) -> Slot {
        Slot {
            block,
            inline: link,
        }
    }

    /// The block, where the caller places it itself (a canvas node).
    pub(super) fn into_block(self) -> String {
        self.block
    }

    /// An embed shown as its link.
    pub(super) fn inline(link: String) -> Slot {
        Slot {
            block: format!("<p>{link}</p>\n"),
            inline: link,
        }
    }

    /// A visible mark (a cycle, a missing section) before the link.
    pub(super) fn mark(class: &str, what: &str, link: &str) -> Slot {
        Slot {
            block: format!("<p class=\"embed-error {class}\">{what} {link}</p>\n"),
            inline: format!("<span class=\"embed-error {class}\">{what} {link}</span>"),
        }
    }
}

/// The marker that stands for embed `n` of a render tagged `tag`.
pub(super) fn marker(tag: &str, n: usize) -> String {
    format!("{OPEN}{tag}{n}{CLOSE}")
}

/// The embed numbers of this render's markers (tagged `tag`) in `md`, in order.
pub(super) fn markers<'m>(md: &'m str, tag: &'m str) -> impl Iterator<Item = usize> + 'm {
    md.split(OPEN).skip(1).filter_map(move |s| {
        let (n, _) = s.split_once(CLOSE)?;
        n.strip_prefix(tag)?.parse().ok()
    })
}

/// Where text sits: what an embed found in it may become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A paragraph: split around the embed's block.
    Paragraph,
    /// A tight list item: the block goes in.
    Item,
    /// Anywhere else (a heading, a cell, a link, emphasis): the inline form.
    Inline,
}

/// Puts each rendered embed where its marker is (see [`Place`]), once: a slot is
/// spliced at its first marker only.
pub(super) fn splice<'a>(events: Vec<Event<'a>>, slots: &Slots) -> Vec<Event<'a>> {
    if slots.list.iter().all(Option::is_none) {
        return events;
    }
    let mut used = vec![false; slots.list.len()];
    let mut out = Vec::with_capacity(events.len() + 4 * slots.list.len());
    let mut open: Vec<Place> = Vec::new();
    for e in events {
        match &e {
            Event::Start(Tag::Paragraph) => open.push(Place::Paragraph),
            Event::Start(Tag::Item) => open.push(Place::Item),
            Event::Start(_) => open.push(Place::Inline),
            Event::End(_) => {
                open.pop();
            }
            _ => {}
        }
        let at = open.last().copied().unwrap_or(Place::Inline);
        match e {
            Event::Text(t) if t.contains(OPEN) => put_text(&t, at, slots, &mut used, &mut out),
            Event::Html(h) if h.contains(OPEN) => {
                out.push(Event::Html(inline_all(&h, slots, &mut used)));
            }
            Event::InlineHtml(h) if h.contains(OPEN) => {
                out.push(Event::InlineHtml(inline_all(&h, slots, &mut used)));
            }
            e => out.push(e),
        }
    }
    tidy(out)
}

/// The slot the marker opening `after` names, if not spliced yet (then marked
/// spliced), and the text after the marker.
fn take<'s, 't>(
    after: &'t str,
    slots: &'s Slots,
    used: &mut [bool],
) -> Option<(&'s Slot, &'t str)> {
    let (n, tail) = after.split_once(CLOSE)?;
    let (k, slot) = slots.get(n)?;
    let u = used.get_mut(k)?;
    if *u {
        return None;
    }
    *u = true;
    Some((slot, tail))
}

/// Splits the pieces of a text holding markers into events.
fn put_text<'a>(t: &str, at: Place, slots: &Slots, used: &mut [bool], out: &mut Vec<Event<'a>>) {
    let mut rest = t;
    while let Some(o) = rest.find(OPEN) {
        let after = &rest[o + OPEN.len_utf8()..];
        let Some((slot, tail)) = take(after, slots, used) else {
            // Not one of ours, or spliced already: text as written.
            out.push(Event::Text(CowStr::from(
                rest[..o + OPEN.len_utf8()].to_owned(),
            )));
            rest = after;
            continue;
        };
        if o > 0 {
            out.push(Event::Text(CowStr::from(rest[..o].to_owned())));
        }
        match at {
            Place::Paragraph => {
                out.push(Event::End(TagEnd::Paragraph));
                out.push(Event::Html(CowStr::from(slot.block.clone())));
                out.push(Event::Start(Tag::Paragraph));
            }
            Place::Item => out.push(Event::Html(CowStr::from(slot.block.clone()))),
            Place::Inline => out.push(Event::InlineHtml(CowStr::from(slot.inline.clone()))),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        out.push(Event::Text(CowStr::from(rest.to_owned())));
    }
}

/// `html` with every marker replaced by its embed's inline form (once).
fn inline_all<'a>(html: &str, slots: &Slots, used: &mut [bool]) -> CowStr<'a> {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(o) = rest.find(OPEN) {
        out.push_str(&rest[..o]);
        let after = &rest[o + OPEN.len_utf8()..];
        match take(after, slots, used) {
            Some((s, tail)) => {
                out.push_str(&s.inline);
                rest = tail;
            }
            None => {
                out.push(OPEN);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    CowStr::from(out)
}

/// Drops what splitting paragraphs left: empty paragraphs, and line breaks at a
/// paragraph's edges.
fn tidy(events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    let mut out: Vec<Event<'_>> = Vec::with_capacity(events.len());
    let blank = |e: Option<&Event<'_>>| match e {
        Some(Event::SoftBreak | Event::HardBreak) => true,
        Some(Event::Text(t)) => t.trim().is_empty(),
        _ => false,
    };
    for e in events {
        let after_start = matches!(out.last(), Some(Event::Start(Tag::Paragraph)));
        match e {
            Event::End(TagEnd::Paragraph) => {
                while blank(out.last()) {
                    out.pop();
                }
                if matches!(out.last(), Some(Event::Start(Tag::Paragraph))) {
                    out.pop();
                } else {
                    out.push(e);
                }
            }
            e if after_start && blank(Some(&e)) => {}
            e => out.push(e),
        }
    }
    out
}

/// Removes ids from embedded headings and blocks: they belong to the embedded
/// note's own page, and would repeat ids of the page's.
pub(super) fn strip_ids(events: &mut [Event<'_>]) {
    for e in events {
        match e {
            Event::Start(Tag::Heading { id, .. }) => *id = None,
            Event::Html(h) if h.starts_with("<p id=\"^") => *h = CowStr::Borrowed("<p>"),
            Event::Html(h) if h.starts_with("<li id=\"^") => *h = CowStr::Borrowed("<li>"),
            _ => {}
        }
    }
}
