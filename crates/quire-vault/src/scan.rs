//! Raw markdown scanned before it is parsed: fenced code blocks, inline code spans
//! and Obsidian `%%comments%%`. Links and comments are both found on the source text
//! (a comment may hide markdown that must not be parsed at all), and both skip code.
//!
//! A leaf: `links` (wikilinks outside comments) and `render::comments` (the text
//! without them) build on it and it imports neither.

use std::ops::Range;

/// Whether `line` opens or closes a fenced code block, updating `fence` (the open
/// fence's character and length). CommonMark fences: three or more ` or ~, indented
/// less than four spaces, closed by a fence of the same character at least as long.
pub(crate) fn fence_line(line: &str, fence: &mut Option<(u8, usize)>) -> bool {
    let trimmed = line.trim_start();
    let indent = line.len() - trimmed.len();
    let Some(c) = trimmed
        .bytes()
        .next()
        .filter(|c| (*c == b'`' || *c == b'~') && indent < 4)
    else {
        return false;
    };
    let n = trimmed.bytes().take_while(|b| *b == c).count();
    if n < 3 {
        return false;
    }
    match *fence {
        None => {
            *fence = Some((c, n));
            true
        }
        Some((fc, fnum)) if fc == c && n >= fnum && trimmed[n..].trim().is_empty() => {
            *fence = None;
            true
        }
        _ => false,
    }
}

/// The length of the inline code span opening at `line[i]` (a run of backticks) up
/// to its matching run, or of the run alone when it is not closed on the line.
pub(crate) fn code_span_len(line: &str, i: usize) -> usize {
    let n = line.as_bytes()[i..]
        .iter()
        .take_while(|c| **c == b'`')
        .count();
    let ticks = &line[i..i + n];
    match line[i + n..].find(ticks) {
        Some(end) => n + end + n,
        None => n,
    }
}

/// The byte ranges of every comment in `body`, `%%` markers included, in order.
pub(crate) fn comment_ranges(body: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    if !body.contains("%%") {
        return out;
    }
    let mut open: Option<usize> = None;
    let mut fence: Option<(u8, usize)> = None;
    let mut at = 0;
    for line in body.split_inclusive('\n') {
        if open.is_none() && (fence_line(line, &mut fence) || fence.is_some()) {
            at += line.len();
            continue;
        }
        scan_line(line, at, &mut open, &mut out);
        at += line.len();
    }
    if let Some(start) = open {
        out.push(start..body.len());
    }
    out
}

/// Finds `%%` markers in one line starting at byte `base`, skipping inline code
/// outside comments.
fn scan_line(line: &str, base: usize, open: &mut Option<usize>, out: &mut Vec<Range<usize>>) {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'`' && open.is_none() {
            i += code_span_len(line, i);
            continue;
        }
        if b[i] == b'%' && b.get(i + 1) == Some(&b'%') {
            match open.take() {
                None => *open = Some(base + i),
                Some(start) => out.push(start..base + i + 2),
            }
            i += 2;
            continue;
        }
        i += 1;
    }
}
