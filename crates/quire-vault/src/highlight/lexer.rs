//! The lexer: one pass over the code, linear, slicing only at character boundaries,
//! writing escaped text and one `<span class="hl-…">` per token (see the module doc
//! of `highlight` for the classes and why it is safe on hostile input). Code is read
//! through a [`Lang`] table; HTML/XML has its own small mode ([`Lexer::markup`]).

use super::langs::Lang;
use crate::html::escape;

/// Appends `text`, escaped, inside a span of `class` (nothing if empty).
pub(super) fn span(out: &mut String, class: &str, text: &str) {
    if text.is_empty() {
        return;
    }
    out.push_str("<span class=\"hl-");
    out.push_str(class);
    out.push_str("\">");
    out.push_str(&escape(text));
    out.push_str("</span>");
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `Foo`, `T`, `HttpServer` but not `MAX_LEN`.
fn looks_like_type(w: &str) -> bool {
    let mut cs = w.chars();
    cs.next().is_some_and(char::is_uppercase)
        && (w.chars().nth(1).is_none() || cs.any(char::is_lowercase))
}

fn contains(list: &[&str], word: &str, fold: bool) -> bool {
    list.iter()
        .any(|k| *k == word || (fold && k.eq_ignore_ascii_case(word)))
}

pub(super) struct Lexer<'a> {
    s: &'a str,
    /// Byte offset of the next character; always a character boundary.
    at: usize,
    out: String,
    /// Only blanks (and a YAML list dash) since the start of the line.
    line_start: bool,
    /// CSS: `(from, to)` where `to` is the first `;`, `{` or `}` at or after `from`.
    css_term: Option<(usize, usize)>,
}

impl<'a> Lexer<'a> {
    /// A lexer over `code`, with nothing written yet.
    pub(super) fn new(code: &'a str) -> Lexer<'a> {
        Lexer {
            s: code,
            at: 0,
            out: String::with_capacity(code.len() * 2),
            line_start: true,
            css_term: None,
        }
    }

    /// The HTML written so far.
    pub(super) fn into_html(self) -> String {
        self.out
    }

    fn rest(&self) -> &'a str {
        &self.s[self.at..]
    }

    fn prev_char(&self) -> Option<char> {
        self.s[..self.at].chars().next_back()
    }

    /// Emits `self.s[self.at..end]` (in `class`, or plain) and moves to `end`.
    fn take_to(&mut self, end: usize, class: Option<&str>) {
        let text = &self.s[self.at..end];
        match class {
            Some(c) => span(&mut self.out, c, text),
            None => self.out.push_str(&escape(text)),
        }
        self.at = end;
    }

    /// Offset of the first character at or after `from` that is not an identifier
    /// character (nor one of `extra`), or the end.
    fn ident_end(&self, from: usize, extra: &[char]) -> usize {
        self.s[from..]
            .find(|ch: char| !(is_ident(ch) || extra.contains(&ch)))
            .map_or(self.s.len(), |i| from + i)
    }

    /// The first character at or after `from` that is not a space or tab.
    fn next_nonblank(&self, from: usize) -> Option<char> {
        self.s[from..]
            .trim_start_matches([' ', '\t'])
            .chars()
            .next()
    }

    /// Offset just past `close` at or after `from`, or the end of the input.
    fn until(&self, from: usize, close: &str) -> usize {
        self.s[from..]
            .find(close)
            .map_or(self.s.len(), |i| from + i + close.len())
    }

    /// Offset of the end of the line containing `from` (its `\n` not included).
    fn line_end(&self, from: usize) -> usize {
        self.s[from..].find('\n').map_or(self.s.len(), |i| from + i)
    }

    /// Offset just past the string whose body starts at `from` and which ends with
    /// `close`: backslashes escape the next character if `escapes`; an unterminated
    /// string ends at the end of the input, or of its line unless `multiline`.
    fn string_end(&self, from: usize, close: &str, escapes: bool, multiline: bool) -> usize {
        let mut it = self.s[from..].char_indices();
        while let Some((i, c)) = it.next() {
            if c == '\n' && !multiline {
                return from + i;
            }
            if c == '\\' && escapes {
                if let Some((j, '\n')) = it.next() {
                    if !multiline {
                        return from + j;
                    }
                }
                continue;
            }
            if self.s[from + i..].starts_with(close) {
                return from + i + close.len();
            }
        }
        self.s.len()
    }

    /// Offset just past the string whose opening quote is at `q` (a triple quote
    /// where the language has them).
    fn quoted_end(&self, l: &Lang, q: usize) -> usize {
        let rest = &self.s[q..];
        if l.triple_quotes {
            for t in ["\"\"\"", "'''"] {
                if rest.starts_with(t) {
                    let raw = l.raw_quotes.contains(&'\'') && t == "'''";
                    return self.string_end(q + 3, t, !raw, true);
                }
            }
        }
        let c = rest.chars().next().unwrap_or('"');
        let w = c.len_utf8();
        self.string_end(
            q + w,
            &rest[..w],
            !l.raw_quotes.contains(&c),
            l.multiline_quotes.contains(&c),
        )
    }

    /// The CSS terminator (`;`, `{`, `}`) at or after `from`, cached so that many
    /// look-ups on one line stay linear.
    fn css_terminator(&mut self, from: usize) -> Option<char> {
        let to = match self.css_term {
            Some((f, t)) if f <= from && from <= t => t,
            _ => {
                let t = self.s[from..]
                    .find([';', '{', '}'])
                    .map_or(self.s.len(), |i| from + i);
                self.css_term = Some((from, t));
                t
            }
        };
        self.s[to..].chars().next()
    }

    /// A numeric literal at `self.at` (which is an ASCII digit): radix prefixes,
    /// `_` separators, one fraction, an exponent, a suffix (`u8`, `f32`, `px`).
    fn number_end(&self) -> usize {
        let b = self.s.as_bytes();
        let n = b.len();
        let digit = |i: usize| i < n && (b[i].is_ascii_digit() || b[i] == b'_');
        let alnum = |i: usize| i < n && (b[i].is_ascii_alphanumeric() || b[i] == b'_');
        let mut i = self.at;
        if b[i] == b'0' && i + 1 < n && matches!(b[i + 1] | 0x20, b'x' | b'b' | b'o') {
            i += 2;
            while alnum(i) {
                i += 1;
            }
            return i;
        }
        while digit(i) {
            i += 1;
        }
        if i + 1 < n && b[i] == b'.' && b[i + 1].is_ascii_digit() {
            i += 1;
            while digit(i) {
                i += 1;
            }
        }
        if i < n && b[i] | 0x20 == b'e' {
            let sign = usize::from(i + 1 < n && matches!(b[i + 1], b'+' | b'-'));
            if i + 1 + sign < n && b[i + 1 + sign].is_ascii_digit() {
                i += 1 + sign;
                while digit(i) {
                    i += 1;
                }
            }
        }
        while alnum(i) {
            i += 1;
        }
        i
    }

    /// Lexes code in language `l`: at each position the first rule that matches takes
    /// the token (comment, attribute, string, number, sigil keyword, word), in that
    /// order; anything else passes one character at a time.
    pub(super) fn code(&mut self, l: &'static Lang) {
        while self.at < self.s.len() {
            let c = self.rest().chars().next().unwrap_or(' ');
            let at_line_start = self.line_start;
            self.line_start = false;
            let taken = self.comment(l)
                || self.attribute(l, c, at_line_start)
                || self.string(l, c)
                || self.number(l, c)
                || self.sigil_keyword(l, c)
                || self.word(l, c, at_line_start);
            if !taken {
                self.other(l, c, at_line_start);
            }
        }
    }

    /// A line or block comment at `self.at`, taken whole.
    fn comment(&mut self, l: &Lang) -> bool {
        let rest = self.rest();
        if l.line_comments.iter().any(|t| rest.starts_with(t))
            && (!l.comment_after_space || self.prev_char().is_none_or(char::is_whitespace))
        {
            let end = self.line_end(self.at);
            self.take_to(end, Some("comment"));
            return true;
        }
        if let Some((open, close)) = l.block_comment {
            if rest.starts_with(open) {
                let end = self.until(self.at + open.len(), close);
                self.take_to(end, Some("comment"));
                return true;
            }
        }
        false
    }

    /// An attribute or a config header at `self.at`: Rust's `#[..]`, `@name`, or a
    /// `[section]` at the start of a config line.
    fn attribute(&mut self, l: &Lang, c: char, at_line_start: bool) -> bool {
        let rest = self.rest();
        if l.rust && (rest.starts_with("#[") || rest.starts_with("#![")) {
            let end = self.rust_attribute_end();
            self.take_to(end, Some("attribute"));
            return true;
        }
        if l.at_attributes && c == '@' && rest[1..].starts_with(is_ident_start) {
            let end = self.ident_end(self.at + 1, &['.']);
            self.take_to(end, Some("attribute"));
            return true;
        }
        if l.config_keys && at_line_start && c == '[' {
            let line = self.line_end(self.at);
            let end = self.s[self.at..line]
                .rfind(']')
                .map_or(line, |i| self.at + i + 1);
            self.take_to(end, Some("type"));
            return true;
        }
        false
    }

    /// Offset just past the bracket that closes the Rust attribute at `self.at`, or
    /// the end of its line.
    fn rust_attribute_end(&self) -> usize {
        let mut depth = 0usize;
        for (i, ch) in self.rest().char_indices() {
            match ch {
                '[' => depth += 1,
                ']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return self.at + i + 1;
                    }
                }
                '\n' => break,
                _ => {}
            }
        }
        self.line_end(self.at)
    }

    /// A string at `self.at`: Rust's raw strings, a prefixed string (`b"`, `f'`), or
    /// a quoted one. A Rust lifetime or label (`'a`) is taken plain.
    fn string(&mut self, l: &Lang, c: char) -> bool {
        let rest = self.rest();
        if l.rust && (rest.starts_with('r') || rest.starts_with("br")) {
            let start = if rest.starts_with('b') { 2 } else { 1 };
            let hashes = rest[start..].bytes().take_while(|&h| h == b'#').count();
            if rest[start + hashes..].starts_with('"') {
                let close = format!("\"{}", "#".repeat(hashes));
                let end = self.until(self.at + start + hashes + 1, &close);
                self.take_to(end, Some("string"));
                return true;
            }
        }
        if let Some(p) = l.string_prefixes.iter().find(|p| {
            rest.get(..p.len())
                .is_some_and(|x| x.eq_ignore_ascii_case(p))
                && rest[p.len()..].starts_with(|q: char| l.quotes.contains(&q))
        }) {
            let end = self.quoted_end(l, self.at + p.len());
            self.take_to(end, Some("string"));
            return true;
        }
        if l.rust && c == '\'' {
            // `'a` (a lifetime or label) unless it closes as a char literal `'a'`.
            let mut it = rest[1..].chars();
            if let (Some(a), b) = (it.next(), it.next()) {
                if is_ident_start(a) && b != Some('\'') {
                    let end = self.ident_end(self.at + 1, &[]);
                    self.take_to(end, None);
                    return true;
                }
            }
        }
        if l.quotes.contains(&c)
            && !(l.apostrophes && self.prev_char().is_some_and(char::is_alphanumeric))
        {
            let end = self.quoted_end(l, self.at);
            self.take_to(end, Some("string"));
            return true;
        }
        false
    }

    /// A numeric literal, or a CSS hex colour (`#fff`, `#00ff0080`), at `self.at`.
    fn number(&mut self, l: &Lang, c: char) -> bool {
        if c.is_ascii_digit() {
            let end = self.number_end();
            self.take_to(end, Some("number"));
            return true;
        }
        if l.css && c == '#' {
            let rest = self.rest();
            let hex = rest[1..].bytes().take_while(u8::is_ascii_hexdigit).count();
            let after = rest[1 + hex..].chars().next();
            if (3..=8).contains(&hex) && !after.is_some_and(|a| is_ident(a) || a == '-') {
                self.take_to(self.at + 1 + hex, Some("number"));
                return true;
            }
        }
        false
    }

    /// A keyword that starts with a sigil (`#include`, `@media`, `!important`) at
    /// `self.at`, and the `<path>` after an `#include` or `#import`.
    fn sigil_keyword(&mut self, l: &Lang, c: char) -> bool {
        if !(matches!(c, '#' | '@' | '!') && self.rest()[1..].starts_with(is_ident_start)) {
            return false;
        }
        let end = self.ident_end(self.at + 1, if l.dash_idents { &['-'] } else { &[] });
        let word = &self.s[self.at..end];
        if !l
            .keywords
            .iter()
            .any(|k| contains(k, word, l.case_insensitive))
        {
            return false;
        }
        let include = l.include_paths && (word == "#include" || word == "#import");
        self.take_to(end, Some("keyword"));
        if include {
            self.include_path(end);
        }
        true
    }

    /// The `<path>` of an include directive that ends at `end`, as a string.
    fn include_path(&mut self, end: usize) {
        let blank = self.s[end..]
            .find(|ch: char| ch != ' ' && ch != '\t')
            .map_or(self.s.len(), |i| end + i);
        if self.s[blank..].starts_with('<') {
            self.take_to(blank, None);
            let line = self.line_end(blank);
            let close = self.s[blank..line]
                .find('>')
                .map_or(line, |i| blank + i + 1);
            self.take_to(close, Some("string"));
        }
    }

    /// A word at `self.at`: a config key, or an identifier classed by [`Self::word_class`].
    fn word(&mut self, l: &Lang, c: char, at_line_start: bool) -> bool {
        if !is_ident_start(c) {
            return false;
        }
        if l.config_keys && at_line_start {
            let end = self.ident_end(self.at, &['-', '.']);
            if matches!(self.next_nonblank(end), Some(':' | '=')) {
                self.take_to(end, Some("attribute"));
                return true;
            }
        }
        let end = self.ident_end(self.at, if l.dash_idents { &['-'] } else { &[] });
        let class = self.word_class(l, end);
        self.take_to(end, class);
        true
    }

    /// The class of the identifier `self.s[self.at..end]`: keyword or literal, type,
    /// macro or function call, CSS property, or plain.
    fn word_class(&mut self, l: &Lang, end: usize) -> Option<&'static str> {
        let fold = l.case_insensitive;
        let word = &self.s[self.at..end];
        let next = self.next_nonblank(end);
        if l.keywords.iter().any(|k| contains(k, word, fold)) || contains(l.literals, word, fold) {
            Some("keyword")
        } else if contains(l.types, word, fold) || (l.capitalised_types && looks_like_type(word)) {
            Some("type")
        } else if l.rust
            && self.s[end..].starts_with('!')
            && self.s[end + 1..].starts_with(['(', '[', '{'])
        {
            Some("function")
        } else if l.css && next == Some(':') && self.css_terminator(end) != Some('{') {
            Some("attribute")
        } else if next == Some('(') {
            Some("function")
        } else {
            None
        }
    }

    /// One character no rule took, plain; tracks whether the line so far is blank.
    fn other(&mut self, l: &Lang, c: char, at_line_start: bool) {
        match c {
            '\n' => self.line_start = true,
            ' ' | '\t' => self.line_start = at_line_start,
            '-' if l.config_keys && self.rest()[1..].starts_with(' ') => {
                self.line_start = at_line_start;
            }
            _ => {}
        }
        self.take_to(self.at + c.len_utf8(), None);
    }

    /// Lexes HTML or XML: tag names as keywords, attribute names as attributes,
    /// quoted values as strings, comments; text between tags stays plain.
    pub(super) fn markup(&mut self) {
        let name_chars: &[char] = &['-', ':', '.'];
        let mut in_tag = false;
        while self.at < self.s.len() {
            let rest = self.rest();
            let c = rest.chars().next().unwrap_or(' ');
            if !in_tag {
                if rest.starts_with("<!--") {
                    let end = self.until(self.at + 4, "-->");
                    self.take_to(end, Some("comment"));
                    continue;
                }
                if c == '<' {
                    let name_at = if rest[1..].starts_with(['/', '!', '?']) {
                        2
                    } else {
                        1
                    };
                    if rest[name_at..].starts_with(is_ident_start) {
                        self.take_to(self.at + name_at, None);
                        let end = self.ident_end(self.at, name_chars);
                        self.take_to(end, Some("keyword"));
                        in_tag = true;
                        continue;
                    }
                }
                let w = c.len_utf8();
                let end = rest[w..]
                    .find('<')
                    .map_or(self.s.len(), |i| self.at + w + i);
                self.take_to(end, None);
                continue;
            }
            match c {
                '>' => {
                    in_tag = false;
                    self.take_to(self.at + 1, None);
                }
                '"' | '\'' => {
                    let end = self.until(self.at + 1, &rest[..1]);
                    self.take_to(end, Some("string"));
                }
                c if is_ident_start(c) => {
                    let end = self.ident_end(self.at, name_chars);
                    self.take_to(end, Some("attribute"));
                }
                c => self.take_to(self.at + c.len_utf8(), None),
            }
        }
    }
}
