//! The markdown parser as every pass sees it: the options each render (and each
//! search for a section) parses with, and a helper over its events. A leaf.

use pulldown_cmark::{Event, Options};

/// The markdown options every render and every search for a section parse with.
pub(super) fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_MATH
}

/// The index of the first event at or after `i` that `is_end`, or the end.
pub(super) fn end_of(events: &[Event<'_>], i: usize, is_end: impl Fn(&Event<'_>) -> bool) -> usize {
    events[i..]
        .iter()
        .position(is_end)
        .map_or(events.len(), |p| i + p)
}
