//! Syntax highlighting for fenced code blocks, done when a note is rendered (once per
//! note version), never per request.
//!
//! A small table-driven lexer, written here rather than taken from syntect or
//! tree-sitter: those bring grammars, regex engines or C parsers (build time, binary
//! size) for what a notes site needs, which is comments, strings, numbers, keywords,
//! types, calls and attributes in a dozen languages. Output is HTML-escaped code with
//! `<span class="hl-…">` around tokens (`hl-keyword`, `hl-string`, `hl-comment`,
//! `hl-number`, `hl-function`, `hl-type`, `hl-attribute`, and for diffs
//! `hl-inserted` / `hl-deleted`), which the stylesheet colours.
//!
//! Hostile input is safe by construction: the lexer walks characters (never slicing
//! inside one), every token ends at the latest at the end of the input (an
//! unterminated string or comment runs to it), each step consumes at least one
//! character (linear time), every span is closed where it is opened, and every piece
//! of text goes through [`escape`](crate::render::escape).

use crate::render::escape;

/// How one language looks to the lexer.
struct Lang {
    line_comments: &'static [&'static str],
    block_comment: Option<(&'static str, &'static str)>,
    quotes: &'static [char],
    keywords: &'static [&'static str],
    /// Builtin type names.
    types: &'static [&'static str],
    /// Capitalised identifiers are types (Rust, Go, Java, TypeScript, C++ classes).
    capitalised_types: bool,
    /// Rust's `#[...]` and `#![...]`.
    hash_attributes: bool,
    /// `@decorator` (Python, Java, TypeScript).
    at_attributes: bool,
    /// `'a` is a lifetime, not a character (Rust).
    lifetimes: bool,
    /// `"""` / `'''` strings (Python).
    triple_quotes: bool,
    /// Keywords compare case-insensitively (SQL).
    case_insensitive: bool,
}

const NONE: Lang = Lang {
    line_comments: &[],
    block_comment: None,
    quotes: &['"', '\''],
    keywords: &[],
    types: &[],
    capitalised_types: false,
    hash_attributes: false,
    at_attributes: false,
    lifetimes: false,
    triple_quotes: false,
    case_insensitive: false,
};

const RUST: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    keywords: &[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
        "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
        "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
        "true", "type", "unsafe", "use", "where", "while",
    ],
    types: &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "bool", "char", "str",
    ],
    capitalised_types: true,
    hash_attributes: true,
    lifetimes: true,
    ..NONE
};

const PYTHON: Lang = Lang {
    line_comments: &["#"],
    keywords: &[
        "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
        "elif", "else", "except", "False", "finally", "for", "from", "global", "if", "import",
        "in", "is", "lambda", "None", "nonlocal", "not", "or", "pass", "raise", "return", "True",
        "try", "while", "with", "yield",
    ],
    types: &[
        "int", "float", "str", "bytes", "bool", "list", "dict", "set", "tuple",
    ],
    at_attributes: true,
    triple_quotes: true,
    ..NONE
};

const JS: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    quotes: &['"', '\'', '`'],
    keywords: &[
        "async",
        "await",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "default",
        "delete",
        "do",
        "else",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "from",
        "function",
        "if",
        "import",
        "in",
        "instanceof",
        "interface",
        "let",
        "new",
        "null",
        "of",
        "return",
        "static",
        "super",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "type",
        "typeof",
        "undefined",
        "var",
        "void",
        "while",
        "yield",
    ],
    types: &["string", "number", "boolean", "any", "unknown", "never"],
    capitalised_types: true,
    at_attributes: true,
    ..NONE
};

const GO: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    quotes: &['"', '\'', '`'],
    keywords: &[
        "break",
        "case",
        "chan",
        "const",
        "continue",
        "default",
        "defer",
        "else",
        "false",
        "for",
        "func",
        "go",
        "goto",
        "if",
        "import",
        "interface",
        "map",
        "nil",
        "package",
        "range",
        "return",
        "select",
        "struct",
        "switch",
        "true",
        "type",
        "var",
    ],
    types: &[
        "int", "int64", "int32", "uint", "uint64", "uint32", "byte", "rune", "string", "bool",
        "error", "float64", "float32",
    ],
    capitalised_types: true,
    ..NONE
};

const C: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    keywords: &[
        "auto",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "default",
        "delete",
        "do",
        "else",
        "enum",
        "extern",
        "false",
        "for",
        "goto",
        "if",
        "inline",
        "namespace",
        "new",
        "nullptr",
        "private",
        "protected",
        "public",
        "return",
        "sizeof",
        "static",
        "struct",
        "switch",
        "template",
        "this",
        "throw",
        "true",
        "try",
        "typedef",
        "typename",
        "union",
        "using",
        "virtual",
        "volatile",
        "while",
        "#include",
        "#define",
        "#ifdef",
        "#ifndef",
        "#endif",
        "#if",
        "#else",
    ],
    types: &[
        "int", "long", "short", "char", "float", "double", "void", "unsigned", "signed", "bool",
        "size_t", "uint8_t", "uint32_t", "uint64_t", "int64_t",
    ],
    ..NONE
};

const JAVA: Lang = Lang {
    keywords: &[
        "abstract",
        "boolean",
        "break",
        "case",
        "catch",
        "class",
        "continue",
        "default",
        "do",
        "else",
        "enum",
        "extends",
        "false",
        "final",
        "finally",
        "for",
        "if",
        "implements",
        "import",
        "instanceof",
        "interface",
        "new",
        "null",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "static",
        "super",
        "switch",
        "this",
        "throw",
        "throws",
        "true",
        "try",
        "var",
        "void",
        "while",
    ],
    types: &[
        "int", "long", "short", "byte", "char", "float", "double", "boolean",
    ],
    capitalised_types: true,
    at_attributes: true,
    ..C
};

const SHELL: Lang = Lang {
    line_comments: &["#"],
    keywords: &[
        "if", "then", "else", "elif", "fi", "for", "in", "do", "done", "while", "until", "case",
        "esac", "function", "return", "export", "local", "set", "unset", "echo", "cd", "exit",
        "sudo",
    ],
    ..NONE
};

const SQL: Lang = Lang {
    line_comments: &["--"],
    block_comment: Some(("/*", "*/")),
    keywords: &[
        "select",
        "from",
        "where",
        "and",
        "or",
        "not",
        "insert",
        "into",
        "values",
        "update",
        "set",
        "delete",
        "create",
        "table",
        "index",
        "view",
        "drop",
        "alter",
        "add",
        "join",
        "left",
        "right",
        "inner",
        "outer",
        "on",
        "group",
        "by",
        "order",
        "having",
        "limit",
        "offset",
        "as",
        "distinct",
        "union",
        "all",
        "null",
        "is",
        "in",
        "like",
        "primary",
        "key",
        "references",
        "begin",
        "commit",
        "rollback",
        "transaction",
        "with",
        "case",
        "when",
        "then",
        "else",
        "end",
        "exists",
        "pragma",
        "virtual",
        "using",
        "default",
        "unique",
        "asc",
        "desc",
    ],
    types: &[
        "integer",
        "int",
        "text",
        "real",
        "blob",
        "varchar",
        "boolean",
        "timestamp",
        "bigint",
        "numeric",
    ],
    case_insensitive: true,
    ..NONE
};

const CONFIG: Lang = Lang {
    line_comments: &["#"],
    keywords: &["true", "false", "null", "yes", "no", "on", "off"],
    ..NONE
};

const JSON: Lang = Lang {
    quotes: &['"'],
    keywords: &["true", "false", "null"],
    ..NONE
};

const CSS: Lang = Lang {
    block_comment: Some(("/*", "*/")),
    keywords: &["@media", "@import", "@font-face", "@supports", "!important"],
    ..NONE
};

const MARKUP: Lang = Lang {
    block_comment: Some(("<!--", "-->")),
    quotes: &['"'],
    ..NONE
};

/// The language a fence names, by name or alias (any case).
fn lang_of(name: &str) -> Option<(&'static Lang, Special)> {
    let l = name.to_ascii_lowercase();
    Some(match l.as_str() {
        "rust" | "rs" => (&RUST, Special::None),
        "python" | "py" | "python3" => (&PYTHON, Special::None),
        "javascript" | "js" | "jsx" | "mjs" | "typescript" | "ts" | "tsx" => (&JS, Special::None),
        "go" | "golang" => (&GO, Special::None),
        "c" | "h" | "cpp" | "c++" | "cc" | "hpp" | "cxx" => (&C, Special::None),
        "java" | "kotlin" => (&JAVA, Special::None),
        "sh" | "bash" | "shell" | "zsh" | "console" => (&SHELL, Special::None),
        "sql" | "sqlite" | "postgres" | "postgresql" => (&SQL, Special::None),
        "toml" | "yaml" | "yml" | "ini" | "conf" | "nginx" => (&CONFIG, Special::None),
        "json" | "jsonc" => (&JSON, Special::None),
        "css" | "scss" => (&CSS, Special::None),
        "html" | "xml" | "svg" => (&MARKUP, Special::Markup),
        "diff" | "patch" => (&NONE, Special::Diff),
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Special {
    None,
    Markup,
    Diff,
}

/// The code highlighted as HTML, or `None` for a language this does not know (the
/// caller then shows it plain).
pub fn highlight(lang: &str, code: &str) -> Option<String> {
    let (l, special) = lang_of(lang.trim())?;
    let mut out = String::with_capacity(code.len() * 2);
    match special {
        Special::Diff => diff(code, &mut out),
        _ => Lexer::new(l, special == Special::Markup, code).run(&mut out),
    }
    Some(out)
}

fn span(out: &mut String, class: &str, text: &str) {
    if text.is_empty() {
        return;
    }
    out.push_str("<span class=\"hl-");
    out.push_str(class);
    out.push_str("\">");
    out.push_str(&escape(text));
    out.push_str("</span>");
}

fn diff(code: &str, out: &mut String) {
    for line in code.split_inclusive('\n') {
        let class = if line.starts_with("+++") || line.starts_with("---") || line.starts_with("@@")
        {
            Some("comment")
        } else if line.starts_with('+') {
            Some("inserted")
        } else if line.starts_with('-') {
            Some("deleted")
        } else {
            None
        };
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        match class {
            Some(c) => span(out, c, body),
            None => out.push_str(&escape(body)),
        }
        out.push_str(nl);
    }
}

struct Lexer<'a> {
    l: &'static Lang,
    markup: bool,
    s: &'a str,
    at: usize,
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl<'a> Lexer<'a> {
    fn new(l: &'static Lang, markup: bool, s: &'a str) -> Lexer<'a> {
        Lexer {
            l,
            markup,
            s,
            at: 0,
        }
    }

    fn rest(&self) -> &'a str {
        &self.s[self.at..]
    }

    /// The byte offset just past the first `n` characters of `rest`, or its end.
    fn chars_end(&self, n: usize) -> usize {
        self.rest()
            .char_indices()
            .nth(n)
            .map_or(self.s.len(), |(i, _)| self.at + i)
    }

    fn take_to(&mut self, end: usize, out: &mut String, class: Option<&str>) {
        let text = &self.s[self.at..end];
        match class {
            Some(c) => span(out, c, text),
            None => out.push_str(&escape(text)),
        }
        self.at = end;
    }

    /// Offset just past `close` after `from`, or the end of the input.
    fn until(&self, from: usize, close: &str) -> usize {
        self.s[from..]
            .find(close)
            .map_or(self.s.len(), |i| from + i + close.len())
    }

    /// Offset just past the string that starts at `self.at` with `quote`
    /// (backslash escapes honoured), or the end of the input.
    fn string_end(&self, quote: &str) -> usize {
        let mut it = self.s[self.at + quote.len()..].char_indices();
        while let Some((i, c)) = it.next() {
            if c == '\\' {
                it.next();
                continue;
            }
            if self.s[self.at + quote.len() + i..].starts_with(quote) {
                return self.at + quote.len() + i + quote.len();
            }
        }
        self.s.len()
    }

    fn run(mut self, out: &mut String) {
        let l = self.l;
        while self.at < self.s.len() {
            let rest = self.rest();
            let c = rest.chars().next().unwrap_or(' ');
            if let Some(tok) = l.line_comments.iter().find(|t| rest.starts_with(**t)) {
                let _ = tok;
                let end = rest.find('\n').map_or(self.s.len(), |i| self.at + i);
                self.take_to(end, out, Some("comment"));
                continue;
            }
            if let Some((open, close)) = l.block_comment {
                if rest.starts_with(open) {
                    let end = self.until(self.at + open.len(), close);
                    self.take_to(end, out, Some("comment"));
                    continue;
                }
            }
            if l.hash_attributes && (rest.starts_with("#[") || rest.starts_with("#![")) {
                let mut depth = 0usize;
                let mut end = self.s.len();
                for (i, ch) in rest.char_indices() {
                    match ch {
                        '[' => depth += 1,
                        ']' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                end = self.at + i + 1;
                                break;
                            }
                        }
                        '\n' => {
                            end = self.at + i;
                            break;
                        }
                        _ => {}
                    }
                }
                self.take_to(end, out, Some("attribute"));
                continue;
            }
            if l.at_attributes && c == '@' && rest[1..].starts_with(is_ident_start) {
                let end = self.at
                    + 1
                    + rest[1..]
                        .find(|ch: char| !is_ident(ch) && ch != '.')
                        .unwrap_or(rest.len() - 1);
                self.take_to(end, out, Some("attribute"));
                continue;
            }
            if self.markup && c == '<' {
                let name_at = if rest[1..].starts_with('/') { 2 } else { 1 };
                if rest[name_at..].starts_with(is_ident_start) {
                    self.take_to(self.at + name_at, out, None);
                    let r = self.rest();
                    let end = self.at
                        + r.find(|ch: char| !(is_ident(ch) || ch == '-' || ch == ':'))
                            .unwrap_or(r.len());
                    self.take_to(end, out, Some("keyword"));
                    continue;
                }
            }
            if l.triple_quotes && (rest.starts_with("\"\"\"") || rest.starts_with("'''")) {
                let q = &rest[..3];
                let end = self.until(self.at + 3, q);
                self.take_to(end, out, Some("string"));
                continue;
            }
            if l.lifetimes && c == '\'' {
                // `'a` (lifetime or label) unless it closes as a char literal `'a'`.
                let mut it = rest.chars().skip(1);
                if let (Some(a), b) = (it.next(), it.next()) {
                    if is_ident_start(a) && b != Some('\'') {
                        let end = self.at
                            + 1
                            + rest[1..]
                                .find(|ch: char| !is_ident(ch))
                                .unwrap_or(rest.len() - 1);
                        self.take_to(end, out, None);
                        continue;
                    }
                }
            }
            if l.lifetimes
                && (rest.starts_with("r#")
                    || rest.starts_with("r\"")
                    || rest.starts_with("br\"")
                    || rest.starts_with("br#"))
            {
                let start = if rest.starts_with('b') { 2 } else { 1 };
                let hashes = rest[start..].chars().take_while(|&h| h == '#').count();
                if rest[start + hashes..].starts_with('"') {
                    let close = format!("\"{}", "#".repeat(hashes));
                    let end = self.until(self.at + start + hashes + 1, &close);
                    self.take_to(end, out, Some("string"));
                    continue;
                }
            }
            if l.quotes.contains(&c) {
                let end = self.string_end(&rest[..c.len_utf8()]);
                self.take_to(end, out, Some("string"));
                continue;
            }
            if c.is_ascii_digit() {
                let end = self.at
                    + rest
                        .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_' || ch == '.'))
                        .unwrap_or(rest.len());
                self.take_to(end, out, Some("number"));
                continue;
            }
            let word_start = is_ident_start(c)
                || ((c == '#' || c == '@' || c == '!') && rest[1..].starts_with(is_ident_start));
            if word_start {
                let end = self.at
                    + c.len_utf8()
                    + rest[c.len_utf8()..]
                        .find(|ch: char| !(is_ident(ch) || ch == '-' && self.markup))
                        .unwrap_or(rest.len() - c.len_utf8());
                let word = &self.s[self.at..end];
                let is_kw = if l.case_insensitive {
                    l.keywords.iter().any(|k| k.eq_ignore_ascii_case(word))
                } else {
                    l.keywords.contains(&word)
                };
                let is_type = if l.case_insensitive {
                    l.types.iter().any(|k| k.eq_ignore_ascii_case(word))
                } else {
                    l.types.contains(&word)
                };
                let next = self.s[end..].trim_start_matches([' ', '\t']).chars().next();
                let class = if is_kw {
                    Some("keyword")
                } else if is_type
                    || (l.capitalised_types && word.starts_with(|ch: char| ch.is_uppercase()))
                {
                    Some("type")
                } else if next == Some('(') && !self.markup {
                    Some("function")
                } else if (c == '#' || c == '@' || c == '!') && !is_ident_start(c) {
                    // A sigil that is not a known keyword: plain.
                    None
                } else {
                    None
                };
                self.take_to(end, out, class);
                continue;
            }
            let end = self.chars_end(1);
            self.take_to(end, out, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Removes span tags and unescapes: must give back the input.
    fn plain(html: &str) -> String {
        let mut s = String::new();
        let mut rest = html;
        while let Some(i) = rest.find('<') {
            s.push_str(&rest[..i]);
            let j = rest[i..].find('>').map_or(rest.len(), |j| i + j + 1);
            rest = &rest[j..];
        }
        s.push_str(rest);
        s.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }

    fn balanced(html: &str) -> bool {
        html.matches("<span").count() == html.matches("</span>").count()
    }

    #[test]
    fn tokens_get_their_classes() {
        let h = highlight(
            "rust",
            "#[derive(Debug)]\nfn main() { let x: u64 = 42; // hi\n}",
        )
        .unwrap();
        assert!(
            h.contains("<span class=\"hl-attribute\">#[derive(Debug)]</span>"),
            "{h}"
        );
        assert!(
            h.contains(
                "<span class=\"hl-keyword\">fn</span> <span class=\"hl-function\">main</span>"
            ),
            "{h}"
        );
        assert!(h.contains("<span class=\"hl-type\">u64</span>"));
        assert!(h.contains("<span class=\"hl-number\">42</span>"));
        assert!(h.contains("<span class=\"hl-comment\">// hi</span>"));
        let h = highlight("rust", "fn f<'a>(s: &'a str) -> char { 'x' }").unwrap();
        assert!(
            h.contains("<span class=\"hl-string\">&#39;x&#39;</span>"),
            "{h}"
        );
        assert!(
            !h.contains("hl-string\">&#39;a"),
            "a lifetime is not a string: {h}"
        );
        let h = highlight("py", "@cache\ndef f():\n    return \"\"\"doc\"\"\"  # c").unwrap();
        assert!(h.contains("hl-attribute\">@cache<"));
        assert!(
            h.contains("hl-string\">&quot;&quot;&quot;doc&quot;&quot;&quot;<"),
            "{h}"
        );
        let h = highlight("SQL", "SELECT x FROM t -- c").unwrap();
        assert!(
            h.contains("hl-keyword\">SELECT<") && h.contains("hl-comment\">-- c<"),
            "{h}"
        );
        let h = highlight("diff", "+a\n-b\n c").unwrap();
        assert_eq!(
            h,
            "<span class=\"hl-inserted\">+a</span>\n<span class=\"hl-deleted\">-b</span>\n c"
        );
        let h = highlight("html", "<a href=\"x\"><!-- c --></a>").unwrap();
        assert!(h.contains("&lt;<span class=\"hl-keyword\">a</span>"), "{h}");
        assert!(highlight("brainfuck", "+").is_none());
    }

    #[test]
    fn any_input_round_trips_escaped_and_balanced() {
        let alphabet: Vec<char> = "ab_Z09 \n\t\"'`/*#<>&\\-+@![]()r{}.é😀".chars().collect();
        let langs = [
            "rust", "python", "js", "go", "c", "java", "sh", "sql", "toml", "json", "css", "html",
            "diff",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for round in 0..3000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 40) as usize;
            let s: String = (0..len)
                .map(|i| alphabet[((x >> (i % 50)) as usize + i * 7) % alphabet.len()])
                .collect();
            let lang = langs[round % langs.len()];
            let h = highlight(lang, &s).unwrap();
            assert!(balanced(&h), "{lang} {s:?}: {h}");
            assert!(
                !h.contains("<script")
                    && !h
                        .replace("<span class=\"hl-", "")
                        .replace("</span>", "")
                        .contains('<'),
                "{lang} {s:?}: {h}"
            );
            assert_eq!(plain(&h), s, "{lang}: {h}");
        }
    }
}
