//! Snippets made in Rust: the window of a note's body that best shows a query, its
//! matches marked, without asking FTS5 to re-scan the index.
//!
//! Why not FTS5's `snippet()`: it is an auxiliary function, so it only runs on rows
//! of a `MATCH` scan. Describing the 20 hits of a page meant scanning the query's
//! matches across the rowid range the hits span (a rowid lookup per hit restarts
//! the query, slower still), then tokenising each hit's body with the porter
//! tokenizer: together ~45 % of a query's time in `quire bench search`. Here the
//! hits' bodies are read by primary key and scanned once in Rust.
//!
//! Key decisions:
//! - **The same tokens as the index**: [`Tokens`] cuts text where FTS5's
//!   `unicode61 remove_diacritics 2` does (letters and digits are token
//!   characters), folds case and removes diacritics ([`fold`]), and [`stem`] is the
//!   porter stemmer as SQLite's FTS5 implements it, quirks included (it works on
//!   bytes; `y` is a vowel after a consonant, and anywhere but first in the "has a
//!   vowel" test). The tests hold both to SQLite's own tokenizer over the example
//!   vault, and the marks to `highlight()`.
//! - **Stemming only what could match**: the porter stemmer never changes a
//!   token's first byte, so a token is stemmed only when its first byte starts some
//!   query term; the rest of the body is only cut and folded.
//! - **The window**: 16 tokens, scored like FTS5's `snippet()`: 1000 per distinct
//!   query item shown plus 1 per further match, the matches centred, the earliest
//!   best window kept. A hit matched only by title or tags shows its first tokens.
//!
//! Folding is SQLite's for ASCII, U+00C0–U+024F (Latin-1, Latin Extended A/B) and
//! the Greek letters whose case folding differs from their lower case (tested
//! against SQLite). Elsewhere it is Rust's lower case, which SQLite's older Unicode
//! tables do not always match (Cherokee, some Cyrillic): a word there may go
//! unmarked in a snippet, which changes nothing about which notes match.

use super::text::{MARK_CLOSE, MARK_OPEN};

/// Tokens per snippet (FTS5's `snippet(..., 16)` as used before).
pub(super) const SNIPPET_TOKENS: usize = 16;
/// Longest token the porter stemmer changes, in bytes (FTS5: `FTS5_PORTER_MAX_TOKEN`).
const STEM_BYTES_MAX: usize = 64;

/// U+00C0..=U+024F folded without diacritics, as FTS5's `remove_diacritics 2` does;
/// `.` is "lower case only".
const LATIN_FOLD: [&str; 7] = [
    "aaaaaa.ceeeeiiii.nooooo..uuuuy..aaaaaa.ceeeeiiii.nooooo..uuuuy.y",
    "aaaaaaccccccccdd..eeeeeeeeeegggggggghh..iiiiiiiii...jjkk.llllll.",
    "...nnnnnn...oooooo..rrrrrrsssssssstttt..uuuuuuuuuuuuwwyyyzzzzzzs",
    "................................oo.............uu...............",
    ".............aaiioouuuuuuuuuu.aa......ggkkoooo..j...gg..nnaa....",
    "aaaaeeeeiiiioooorrrruuuusstt..hh......aaeeooooooooyy............",
    "................",
];

/// `c` as the index stores it: lower case, Latin diacritics removed.
pub(super) fn fold(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    let cp = c as u32;
    if (0xC0..=0x24F).contains(&cp) {
        let i = (cp - 0xC0) as usize;
        let base = LATIN_FOLD[i / 64].as_bytes()[i % 64];
        if base != b'.' {
            return char::from(base);
        }
    }
    // Case folding maps these to another letter than lower case does.
    match c {
        'µ' => 'μ',
        'ς' => 'σ',
        'ϐ' => 'β',
        'ϑ' => 'θ',
        'ϕ' => 'φ',
        'ϖ' => 'π',
        'ϰ' => 'κ',
        'ϱ' => 'ρ',
        'ϵ' => 'ε',
        // Otherwise the first char of the lower-case mapping.
        c => c.to_lowercase().next().unwrap_or(c),
    }
}

/// Whether `c` is part of a token (FTS5 unicode61: letters and numbers).
fn is_token_char(c: char) -> bool {
    c.is_alphanumeric()
}

/// A token: its byte range in the text and its folded form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Token {
    pub(crate) start: usize,
    pub(crate) end: usize,
    folded: String,
}

/// The tokens of a text, in order.
pub(super) struct Tokens<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Tokens<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Tokens { text, at: 0 }
    }

    /// The next token's range, its folded form written into `folded` (cleared first).
    fn next_into(&mut self, folded: &mut String) -> Option<(usize, usize)> {
        folded.clear();
        let rest = &self.text[self.at..];
        let mut start = None;
        let mut end = self.text.len();
        for (i, c) in rest.char_indices() {
            if is_token_char(c) {
                if start.is_none() {
                    start = Some(self.at + i);
                }
                folded.push(fold(c));
            } else if start.is_some() {
                end = self.at + i;
                break;
            }
        }
        let start = start?;
        self.at = end;
        Some((start, end))
    }
}

impl Iterator for Tokens<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        let mut folded = String::new();
        let (start, end) = self.next_into(&mut folded)?;
        Some(Token { start, end, folded })
    }
}

/// The porter stem of a folded token, as SQLite's FTS5 computes it (on bytes).
pub(super) fn stem(token: &[u8]) -> Vec<u8> {
    let mut b = token.to_vec();
    if b.len() < 3 || b.len() > STEM_BYTES_MAX {
        return b;
    }
    step1a(&mut b);
    if step1b(&mut b) && !apply(&mut b, STEP1B2, |_| true) {
        let n = b.len();
        let c = b[n - 1];
        if !is_vowel(c, false) && !matches!(c, b'l' | b's' | b'z') && n >= 2 && c == b[n - 2] {
            b.pop();
        } else if m_eq1(&b) && ostar(&b) {
            b.push(b'e');
        }
    }
    // Step 1c.
    let n = b.len();
    if n >= 1 && b[n - 1] == b'y' && has_vowel(&b[..n - 1]) {
        b[n - 1] = b'i';
    }
    if b.len() >= 2 {
        apply(&mut b, STEP2, m_gt0);
        apply(&mut b, STEP3, m_gt0);
        step4(&mut b);
    }
    // Step 5a.
    let n = b.len();
    if n >= 1 && b[n - 1] == b'e' {
        let s = &b[..n - 1];
        if m_gt1(s) || (m_eq1(s) && !ostar(s)) {
            b.pop();
        }
    }
    // Step 5b.
    let n = b.len();
    if n > 1 && b[n - 1] == b'l' && b[n - 2] == b'l' && m_gt1(&b[..n - 1]) {
        b.pop();
    }
    b
}

fn is_vowel(c: u8, y_is_vowel: bool) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u') || (y_is_vowel && c == b'y')
}

/// Past the first vowel-then-consonant run of `s` (`prev_cons`: whether the byte
/// before `s` was a consonant): the index after it, or 0 if there is none.
fn gobble_vc(s: &[u8], prev_cons: bool) -> usize {
    let mut cons = prev_cons;
    let mut i = 0;
    while i < s.len() {
        cons = !is_vowel(s[i], cons);
        if !cons {
            break;
        }
        i += 1;
    }
    i += 1;
    while i < s.len() {
        cons = !is_vowel(s[i], cons);
        if cons {
            return i + 1;
        }
        i += 1;
    }
    0
}

/// The porter measure m > 0.
fn m_gt0(s: &[u8]) -> bool {
    gobble_vc(s, false) != 0
}

/// m > 1.
fn m_gt1(s: &[u8]) -> bool {
    let n = gobble_vc(s, false);
    n != 0 && gobble_vc(&s[n..], true) != 0
}

/// m = 1.
fn m_eq1(s: &[u8]) -> bool {
    let n = gobble_vc(s, false);
    n != 0 && gobble_vc(&s[n..], true) == 0
}

/// *o: ends consonant-vowel-consonant, the last not w, x or y.
fn ostar(s: &[u8]) -> bool {
    let Some(&last) = s.last() else {
        return false;
    };
    if matches!(last, b'w' | b'x' | b'y') {
        return false;
    }
    let mut mask = 0u8;
    let mut cons = false;
    for &c in s {
        cons = !is_vowel(c, cons);
        mask = ((mask << 1) | u8::from(cons)) & 7;
    }
    mask == 5
}

/// *v*: holds a vowel (`y` counts anywhere but first, as in FTS5).
fn has_vowel(s: &[u8]) -> bool {
    s.iter().enumerate().any(|(i, &c)| is_vowel(c, i > 0))
}

fn step1a(b: &mut Vec<u8>) {
    let n = b.len();
    if b[n - 1] != b's' {
        return;
    }
    if b[n - 2] == b'e' {
        if (n > 4 && &b[n - 4..n - 2] == b"ss") || (n > 3 && b[n - 3] == b'i') {
            b.truncate(n - 2);
        } else {
            b.truncate(n - 1);
        }
    } else if b[n - 2] != b's' {
        b.truncate(n - 1);
    }
}

/// "eed", "ed", "ing"; true when "ed" or "ing" was removed.
fn step1b(b: &mut Vec<u8>) -> bool {
    let n = b.len();
    if n > 3 && b.ends_with(b"eed") {
        if m_gt0(&b[..n - 3]) {
            b.truncate(n - 1);
        }
        false
    } else if n > 2 && b.ends_with(b"ed") {
        let yes = has_vowel(&b[..n - 2]);
        if yes {
            b.truncate(n - 2);
        }
        yes
    } else if n > 3 && b.ends_with(b"ing") {
        let yes = has_vowel(&b[..n - 3]);
        if yes {
            b.truncate(n - 3);
        }
        yes
    } else {
        false
    }
}

/// (suffix, replacement): the first suffix that ends the word is the rule, applied
/// if the stem before it passes the step's condition.
type Rules = &'static [(&'static [u8], &'static [u8])];

/// Step 1b's second part, after "ed" or "ing" went: unconditional.
const STEP1B2: Rules = &[(b"at", b"ate"), (b"bl", b"ble"), (b"iz", b"ize")];

const STEP2: Rules = &[
    (b"ational", b"ate"),
    (b"tional", b"tion"),
    (b"enci", b"ence"),
    (b"anci", b"ance"),
    (b"izer", b"ize"),
    (b"logi", b"log"),
    (b"bli", b"ble"),
    (b"alli", b"al"),
    (b"entli", b"ent"),
    (b"eli", b"e"),
    (b"ousli", b"ous"),
    (b"ization", b"ize"),
    (b"ation", b"ate"),
    (b"ator", b"ate"),
    (b"alism", b"al"),
    (b"iveness", b"ive"),
    (b"fulness", b"ful"),
    (b"ousness", b"ous"),
    (b"aliti", b"al"),
    (b"iviti", b"ive"),
    (b"biliti", b"ble"),
];

const STEP3: Rules = &[
    (b"ical", b"ic"),
    (b"ness", b""),
    (b"icate", b"ic"),
    (b"iciti", b"ic"),
    (b"ful", b""),
    (b"ative", b""),
    (b"alize", b"al"),
];

/// Applies the first of `rules` whose suffix ends `b` (after a non-empty stem), if
/// its stem passes `cond`; true when it did.
fn apply(b: &mut Vec<u8>, rules: Rules, cond: fn(&[u8]) -> bool) -> bool {
    let n = b.len();
    let Some((suffix, with)) = rules.iter().find(|(s, _)| n > s.len() && b.ends_with(s)) else {
        return false;
    };
    let stem = n - suffix.len();
    if !cond(&b[..stem]) {
        return false;
    }
    b.truncate(stem);
    b.extend_from_slice(with);
    true
}

/// Step 4: suffixes removed where m > 1 ("ion" also needs s or t before it).
fn step4(b: &mut Vec<u8>) {
    const SUFFIXES: &[&[u8]] = &[
        b"al", b"ance", b"ence", b"er", b"ic", b"able", b"ible", b"ant", b"ement", b"ment", b"ent",
        b"ion", b"ou", b"ism", b"ate", b"iti", b"ous", b"ive", b"ize",
    ];
    let n = b.len();
    if let Some(suffix) = SUFFIXES.iter().find(|s| n > s.len() && b.ends_with(s)) {
        let stem = &b[..n - suffix.len()];
        let ok = if *suffix == b"ion" {
            matches!(stem.last(), Some(b's' | b't')) && m_gt1(stem)
        } else {
            m_gt1(stem)
        };
        if ok {
            b.truncate(n - suffix.len());
        }
    }
}

/// One item of a query: a phrase of stems (one for a word), the last a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Item {
    stems: Vec<Vec<u8>>,
    prefix: bool,
}

/// A sanitised FTS5 query ([`super::query`]'s output) as stems to look for.
#[derive(Debug, Clone)]
pub(super) struct Matcher {
    items: Vec<Item>,
    /// First bytes of every stem: a token starting otherwise cannot match.
    firsts: [bool; 256],
}

impl Matcher {
    /// The items of `fts`: quoted strings, each maybe followed by `*`, separated by
    /// spaces (the only syntax [`super::query::sanitize`] writes).
    pub(super) fn new(fts: &str) -> Matcher {
        let mut items = Vec::new();
        let mut rest = fts;
        while let Some(open) = rest.find('"') {
            let mut close = open + 1;
            let bytes = rest.as_bytes();
            // A doubled quote inside a string is a literal quote.
            loop {
                match bytes.get(close) {
                    None => break,
                    Some(b'"') if bytes.get(close + 1) == Some(&b'"') => close += 2,
                    Some(b'"') => break,
                    Some(_) => close += 1,
                }
            }
            let inner = &rest[open + 1..close.min(rest.len())];
            let prefix = rest[close.min(rest.len())..].starts_with("\"*");
            let stems: Vec<Vec<u8>> = Tokens::new(inner)
                .map(|t| stem(t.folded.as_bytes()))
                .collect();
            if !stems.is_empty() {
                items.push(Item { stems, prefix });
            }
            rest = &rest[(close + 1).min(rest.len())..];
        }
        let mut firsts = [false; 256];
        for s in items.iter().flat_map(|i| &i.stems) {
            match s.first() {
                Some(&b) => firsts[usize::from(b)] = true,
                // An empty prefix cannot happen (sanitize drops it), but would match
                // everything.
                None => firsts = [true; 256],
            }
        }
        Matcher { items, firsts }
    }

    /// The tokens of `text` and where items match, in token order.
    fn scan(&self, text: &str) -> Scan {
        // Each token's byte range, and its stem where it could match.
        let mut tokens = Vec::new();
        let mut stems: Vec<Option<Vec<u8>>> = Vec::new();
        let mut it = Tokens::new(text);
        let mut folded = String::new();
        while let Some(range) = it.next_into(&mut folded) {
            let first = folded.as_bytes()[0];
            stems.push(self.firsts[usize::from(first)].then(|| stem(folded.as_bytes())));
            tokens.push(range);
        }
        let mut matches = Vec::new();
        for i in 0..tokens.len() {
            if stems[i].is_none() {
                continue;
            }
            for (k, item) in self.items.iter().enumerate() {
                let n = item.stems.len();
                let Some(window) = stems.get(i..i + n) else {
                    continue;
                };
                let hit = item
                    .stems
                    .iter()
                    .zip(window)
                    .enumerate()
                    .all(|(j, (want, got))| {
                        got.as_ref().is_some_and(|got| {
                            if item.prefix && j + 1 == n {
                                got.starts_with(want)
                            } else {
                                got == want
                            }
                        })
                    });
                if hit {
                    matches.push(Match {
                        token: i,
                        len: n,
                        item: k,
                    });
                }
            }
        }
        debug_assert!(matches.windows(2).all(|w| w[0].token <= w[1].token));
        Scan { tokens, matches }
    }

    /// Byte ranges of `text` that match an item (a phrase: its whole span), in
    /// order, overlapping ones merged: what FTS5's `highlight()` marks.
    #[cfg(test)]
    pub(super) fn marked(&self, text: &str) -> Vec<(usize, usize)> {
        let scan = self.scan(text);
        merged(&scan, 0, scan.tokens.len())
    }

    /// The snippet of `text`: [`SNIPPET_TOKENS`] tokens around the best matches,
    /// matches between [`MARK_OPEN`] and [`MARK_CLOSE`], `…` where text was cut.
    pub(super) fn snippet(&self, text: &str) -> String {
        let scan = self.scan(text);
        let n = scan.tokens.len();
        if n == 0 {
            return String::new();
        }
        let width = SNIPPET_TOKENS.min(n);
        let last_start = n - width;
        let mut best = (0usize, 0usize); // (score, start): first best wins
        for m in &scan.matches {
            // The match centred in the window, the window kept inside the text.
            let start = m
                .token
                .saturating_sub(width.saturating_sub(m.len) / 2)
                .min(last_start);
            let score = score(&scan, start, start + width);
            if score > best.0 {
                best = (score, start);
            }
        }
        let (start, end) = (best.1, best.1 + width);
        let mut out = String::new();
        if start > 0 {
            out.push('…');
        }
        // At either end of the text, the text before the first token or after the
        // last is shown too (as FTS5 does): a quote or bracket is not cut off.
        let mut at = if start == 0 { 0 } else { scan.tokens[start].0 };
        for (a, b) in merged(&scan, start, end) {
            out.push_str(&text[at..a]);
            out.push(MARK_OPEN);
            out.push_str(&text[a..b]);
            out.push(MARK_CLOSE);
            at = b;
        }
        if end < n {
            out.push_str(&text[at..scan.tokens[end - 1].1]);
            out.push('…');
        } else {
            out.push_str(&text[at..]);
        }
        out
    }
}

/// What [`Matcher::scan`] found.
struct Scan {
    /// Every token's byte range.
    tokens: Vec<(usize, usize)>,
    /// Matches, by first token.
    matches: Vec<Match>,
}

/// An item matched at `token` over `len` tokens.
struct Match {
    token: usize,
    len: usize,
    item: usize,
}

/// FTS5's snippet score of the window `[start, end)` of tokens: 1000 per distinct
/// item wholly inside, 1 per further match.
fn score(scan: &Scan, start: usize, end: usize) -> usize {
    // Items are at most `query::WORDS_MAX` (16); past 64 a repeat may count as new.
    let mut seen = 0u64;
    let mut score = 0;
    for m in inside(scan, start, end) {
        let bit = 1u64 << (m.item % 64);
        score += if seen & bit != 0 { 1 } else { 1000 };
        seen |= bit;
    }
    score
}

/// The matches wholly inside tokens `[start, end)`: found by binary search in the
/// token-ordered matches, so scoring every candidate window stays linear in the
/// matches (a note repeating a word 30,000 times is one pass, not 30,000).
fn inside(scan: &Scan, start: usize, end: usize) -> impl Iterator<Item = &Match> {
    let lo = scan.matches.partition_point(|m| m.token < start);
    let hi = scan.matches.partition_point(|m| m.token < end);
    scan.matches[lo..hi]
        .iter()
        .filter(move |m| m.token + m.len <= end)
}

/// Byte ranges of the matches wholly inside tokens `[start, end)`, phrases that
/// share a token merged into one range.
fn merged(scan: &Scan, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for m in inside(scan, start, end) {
        let (first, last) = (m.token, m.token + m.len - 1);
        match spans.last_mut() {
            Some(s) if first <= s.1 => s.1 = s.1.max(last),
            _ => spans.push((first, last)),
        }
    }
    spans
        .into_iter()
        .map(|(a, b)| (scan.tokens[a].0, scan.tokens[b].1))
        .collect()
}

#[cfg(test)]
mod tests;
