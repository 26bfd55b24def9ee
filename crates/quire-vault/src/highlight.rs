//! Syntax highlighting for fenced code blocks, done when a note is rendered (once per
//! note version), never per request.
//!
//! A small table-driven lexer, written here rather than taken from syntect or
//! tree-sitter: those bring grammars, regex engines or C parsers (build time, binary
//! size) for what a notes site needs, which is comments, strings, numbers, keywords,
//! types, calls and attributes in a dozen languages. Each language is one `Lang`
//! table: line-comment tokens, a block-comment pair, string quotes (which of them may
//! span lines, which take no backslash escapes, which prefixes glue onto them),
//! keywords, literal words, builtin types and a few switches (Rust lifetimes and raw
//! strings, `@decorators`, YAML/TOML keys, CSS properties). HTML/XML and diffs have
//! their own small modes.
//!
//! Output is HTML-escaped code with `<span class="hl-…">` around tokens:
//! `hl-keyword` (keywords and the literals `true`/`false`/`null`/`None`/`nil`),
//! `hl-string`, `hl-comment`, `hl-number`, `hl-function` (an identifier followed by
//! `(`, and Rust macro calls), `hl-type` (builtin type names, and capitalised
//! identifiers where that means a type), `hl-attribute` (Rust `#[...]`, `@decorator`,
//! HTML attribute names, CSS properties, YAML/TOML keys), and for diffs
//! `hl-inserted` / `hl-deleted` (and `hl-comment` for file and hunk headers).
//!
//! It is a lexer, not a parser: no regex literals in JavaScript, no interpolation
//! inside strings, no embedded languages (`<script>` in HTML is plain text).
//!
//! Hostile input is safe by construction: the lexer only slices at character
//! boundaries (it advances over ASCII bytes or whole characters), every token ends at
//! the latest at the end of the input (an unterminated string or comment runs to it,
//! or to the end of its line for strings that cannot span lines), every look-ahead is
//! either consumed or bounded by the next token (linear time, no backtracking), every
//! span is opened and closed in one place and never nested, and every piece of text
//! goes through [`escape`].

use crate::html::escape;

/// How one language looks to the lexer.
struct Lang {
    /// Tokens that start a comment running to the end of the line.
    line_comments: &'static [&'static str],
    /// A line comment opens only at the start of a line or after whitespace
    /// (shell, YAML: `a#b` is a word).
    comment_after_space: bool,
    block_comment: Option<(&'static str, &'static str)>,
    /// Characters that open (and close) a string.
    quotes: &'static [char],
    /// Quotes whose strings may span lines; the others stop at the end of the line
    /// when unterminated, so a stray quote cannot swallow the rest of the block.
    multiline_quotes: &'static [char],
    /// Quotes inside which a backslash is an ordinary character (shell and YAML
    /// single quotes, Go raw strings).
    raw_quotes: &'static [char],
    /// `"""` / `'''` strings (Python).
    triple_quotes: bool,
    /// Identifiers that belong to a string when a quote follows directly
    /// (`b"..."`, `f"..."`, `u8"..."`); compared case-insensitively.
    string_prefixes: &'static [&'static str],
    /// A quote right after a letter or digit is an apostrophe, not a string (YAML
    /// prose: `note: it's fine`).
    apostrophes: bool,
    /// Keyword lists (a language may share a base list and add its own).
    keywords: &'static [&'static [&'static str]],
    /// Literal words, shown as keywords.
    literals: &'static [&'static str],
    /// Builtin type names.
    types: &'static [&'static str],
    /// Capitalised identifiers are types (Rust, Java, TypeScript, C++ classes);
    /// all-capitals ones (`MAX_LEN`) are constants and stay plain.
    capitalised_types: bool,
    /// Keywords, literals and types compare case-insensitively (SQL).
    case_insensitive: bool,
    /// `-` continues an identifier (CSS properties, YAML keys).
    dash_idents: bool,
    /// `@decorator` / `@Annotation` (Python, Java, TypeScript).
    at_attributes: bool,
    /// Rust: `#[...]` attributes, `'a` lifetimes, `r#"..."#` raw strings, `name!(`
    /// macro calls.
    rust: bool,
    /// `key:` / `key =` at the start of a line is an attribute, `[table]` a type.
    config_keys: bool,
    /// CSS: `prop:` in a declaration is an attribute, `#fff` a number.
    css: bool,
    /// C: the `<path>` after `#include` is a string.
    include_paths: bool,
}

const NONE: Lang = Lang {
    line_comments: &[],
    comment_after_space: false,
    block_comment: None,
    quotes: &['"', '\''],
    multiline_quotes: &[],
    raw_quotes: &[],
    triple_quotes: false,
    string_prefixes: &[],
    apostrophes: false,
    keywords: &[],
    literals: &[],
    types: &[],
    capitalised_types: false,
    case_insensitive: false,
    dash_idents: false,
    at_attributes: false,
    rust: false,
    config_keys: false,
    css: false,
    include_paths: false,
};

const RUST: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    multiline_quotes: &['"'],
    string_prefixes: &["b"],
    keywords: &[&[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
        "extern", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
        "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "type",
        "unsafe", "use", "where", "while", "yield",
    ]],
    literals: &["true", "false"],
    types: &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "bool", "char", "str",
    ],
    capitalised_types: true,
    rust: true,
    ..NONE
};

const PYTHON: Lang = Lang {
    line_comments: &["#"],
    triple_quotes: true,
    string_prefixes: &["rb", "br", "fr", "rf", "r", "b", "f", "u"],
    keywords: &[&[
        "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
        "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is",
        "lambda", "match", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
        "with", "yield",
    ]],
    literals: &["True", "False", "None"],
    types: &[
        "int",
        "float",
        "complex",
        "str",
        "bytes",
        "bool",
        "list",
        "dict",
        "set",
        "frozenset",
        "tuple",
        "object",
    ],
    at_attributes: true,
    ..NONE
};

const JS_KEYWORDS: &[&str] = &[
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "export",
    "extends",
    "finally",
    "for",
    "from",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "let",
    "new",
    "of",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "yield",
];

const JS: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    quotes: &['"', '\'', '`'],
    multiline_quotes: &['`'],
    keywords: &[JS_KEYWORDS],
    literals: &["true", "false", "null", "undefined", "NaN", "Infinity"],
    capitalised_types: true,
    at_attributes: true,
    ..NONE
};

const TS: Lang = Lang {
    keywords: &[
        JS_KEYWORDS,
        &[
            "abstract",
            "as",
            "declare",
            "enum",
            "implements",
            "interface",
            "is",
            "keyof",
            "namespace",
            "private",
            "protected",
            "public",
            "readonly",
            "satisfies",
            "type",
        ],
    ],
    types: &[
        "string", "number", "boolean", "bigint", "symbol", "object", "any", "unknown", "never",
    ],
    ..JS
};

const GO: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    quotes: &['"', '\'', '`'],
    multiline_quotes: &['`'],
    raw_quotes: &['`'],
    keywords: &[&[
        "break",
        "case",
        "chan",
        "const",
        "continue",
        "default",
        "defer",
        "else",
        "fallthrough",
        "for",
        "func",
        "go",
        "goto",
        "if",
        "import",
        "interface",
        "map",
        "package",
        "range",
        "return",
        "select",
        "struct",
        "switch",
        "type",
        "var",
    ]],
    literals: &["true", "false", "nil", "iota"],
    // In Go a capital letter means exported, not a type: only builtin types.
    types: &[
        "any",
        "bool",
        "byte",
        "complex64",
        "complex128",
        "error",
        "float32",
        "float64",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "rune",
        "string",
        "uint",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "uintptr",
    ],
    ..NONE
};

const C_KEYWORDS: &[&str] = &[
    "auto", "break", "case", "const", "continue", "default", "do", "else", "enum", "extern", "for",
    "goto", "if", "inline", "register", "restrict", "return", "sizeof", "static", "struct",
    "switch", "typedef", "union", "volatile", "while", "#include", "#define", "#undef", "#if",
    "#ifdef", "#ifndef", "#elif", "#else", "#endif", "#pragma", "#error",
];

const C_TYPES: &[&str] = &[
    "int",
    "long",
    "short",
    "char",
    "float",
    "double",
    "void",
    "unsigned",
    "signed",
    "bool",
    "size_t",
    "ssize_t",
    "ptrdiff_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
];

const C: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    string_prefixes: &["u8", "u", "l"],
    keywords: &[C_KEYWORDS],
    literals: &["true", "false", "NULL"],
    types: C_TYPES,
    include_paths: true,
    ..NONE
};

const CPP: Lang = Lang {
    keywords: &[
        C_KEYWORDS,
        &[
            "catch",
            "class",
            "constexpr",
            "delete",
            "explicit",
            "friend",
            "mutable",
            "namespace",
            "new",
            "noexcept",
            "operator",
            "override",
            "private",
            "protected",
            "public",
            "template",
            "this",
            "throw",
            "try",
            "typename",
            "using",
            "virtual",
        ],
    ],
    literals: &["true", "false", "nullptr", "NULL"],
    capitalised_types: true,
    ..C
};

const JAVA: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    keywords: &[&[
        "abstract",
        "assert",
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
        "final",
        "finally",
        "for",
        "if",
        "implements",
        "import",
        "instanceof",
        "interface",
        "new",
        "package",
        "private",
        "protected",
        "public",
        "record",
        "return",
        "static",
        "super",
        "switch",
        "synchronized",
        "this",
        "throw",
        "throws",
        "try",
        "var",
        "while",
    ]],
    literals: &["true", "false", "null"],
    types: &[
        "int", "long", "short", "byte", "char", "float", "double", "boolean", "void",
    ],
    capitalised_types: true,
    at_attributes: true,
    ..NONE
};

const SHELL: Lang = Lang {
    line_comments: &["#"],
    comment_after_space: true,
    multiline_quotes: &['"', '\''],
    raw_quotes: &['\''],
    keywords: &[&[
        "if", "then", "else", "elif", "fi", "for", "in", "do", "done", "while", "until", "case",
        "esac", "function", "return", "export", "local", "readonly", "set", "unset", "shift",
        "source", "echo", "cd", "exit", "sudo",
    ]],
    ..NONE
};

const SQL: Lang = Lang {
    line_comments: &["--"],
    block_comment: Some(("/*", "*/")),
    multiline_quotes: &['\''],
    raw_quotes: &['\'', '"'],
    keywords: &[&[
        "add",
        "all",
        "alter",
        "and",
        "as",
        "asc",
        "begin",
        "between",
        "by",
        "case",
        "check",
        "commit",
        "conflict",
        "create",
        "cross",
        "default",
        "delete",
        "desc",
        "distinct",
        "do",
        "drop",
        "else",
        "end",
        "exists",
        "foreign",
        "from",
        "full",
        "group",
        "having",
        "if",
        "in",
        "index",
        "inner",
        "insert",
        "into",
        "is",
        "join",
        "key",
        "left",
        "like",
        "limit",
        "not",
        "offset",
        "on",
        "or",
        "order",
        "outer",
        "pragma",
        "primary",
        "references",
        "returning",
        "right",
        "rollback",
        "select",
        "set",
        "table",
        "then",
        "transaction",
        "union",
        "unique",
        "update",
        "using",
        "values",
        "view",
        "virtual",
        "when",
        "where",
        "with",
    ]],
    literals: &["null", "true", "false"],
    types: &[
        "integer",
        "int",
        "bigint",
        "smallint",
        "text",
        "real",
        "float",
        "double",
        "blob",
        "char",
        "varchar",
        "boolean",
        "date",
        "timestamp",
        "numeric",
        "decimal",
    ],
    case_insensitive: true,
    ..NONE
};

/// TOML, YAML and INI: keys, tables, strings, comments, numbers and literals.
const CONFIG: Lang = Lang {
    line_comments: &["#"],
    comment_after_space: true,
    multiline_quotes: &[],
    raw_quotes: &['\''],
    triple_quotes: true,
    apostrophes: true,
    literals: &["true", "false", "null"],
    dash_idents: true,
    config_keys: true,
    ..NONE
};

const JSON: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    quotes: &['"'],
    literals: &["true", "false", "null"],
    ..NONE
};

const CSS: Lang = Lang {
    block_comment: Some(("/*", "*/")),
    keywords: &[&[
        "@media",
        "@import",
        "@font-face",
        "@supports",
        "@keyframes",
        "@layer",
        "@container",
        "@charset",
        "@page",
        "!important",
    ]],
    dash_idents: true,
    css: true,
    ..NONE
};

/// What a fence's language selects.
#[derive(Clone, Copy)]
enum Mode {
    Code(&'static Lang),
    Markup,
    Diff,
}

/// The language a fence names, by name or alias (any case).
fn mode_of(name: &str) -> Option<Mode> {
    let l = name.to_ascii_lowercase();
    Some(Mode::Code(match l.as_str() {
        "rust" | "rs" => &RUST,
        "python" | "py" | "python3" => &PYTHON,
        "javascript" | "js" | "jsx" | "mjs" | "cjs" => &JS,
        "typescript" | "ts" | "tsx" => &TS,
        "go" | "golang" => &GO,
        "c" | "h" => &C,
        "cpp" | "c++" | "cc" | "cxx" | "hpp" | "hh" => &CPP,
        "java" => &JAVA,
        "sh" | "bash" | "shell" | "zsh" | "console" => &SHELL,
        "sql" | "sqlite" | "postgres" | "postgresql" | "mysql" => &SQL,
        "toml" | "yaml" | "yml" | "ini" => &CONFIG,
        "json" | "jsonc" | "json5" => &JSON,
        "css" => &CSS,
        "html" | "htm" | "xml" | "svg" | "xhtml" => return Some(Mode::Markup),
        "diff" | "patch" => return Some(Mode::Diff),
        _ => return None,
    }))
}

/// The code highlighted as HTML, or `None` for a language this does not know (the
/// caller then shows it plain). `lang` is the fence's first word; anything after a
/// comma (`rust,ignore`) is ignored.
pub(crate) fn highlight(lang: &str, code: &str) -> Option<String> {
    let name = lang.trim().split(',').next().unwrap_or("");
    let mode = mode_of(name)?;
    let mut lx = Lexer {
        s: code,
        at: 0,
        out: String::with_capacity(code.len() * 2),
        line_start: true,
        css_term: None,
    };
    match mode {
        Mode::Code(l) => lx.code(l),
        Mode::Markup => lx.markup(),
        Mode::Diff => diff(code, &mut lx.out),
    }
    Some(lx.out)
}

/// Appends `text`, escaped, inside a span of `class` (nothing if empty).
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
        let header = ["+++", "---", "@@", "diff ", "index "];
        let class = if header.iter().any(|h| line.starts_with(h)) {
            Some("comment")
        } else if line.starts_with('+') || line.starts_with('>') {
            Some("inserted")
        } else if line.starts_with('-') || line.starts_with('<') {
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

struct Lexer<'a> {
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
    fn code(&mut self, l: &'static Lang) {
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
    fn markup(&mut self) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const CLASSES: [(&str, &str); 9] = [
        ("keyword", "k"),
        ("string", "s"),
        ("comment", "c"),
        ("number", "n"),
        ("function", "f"),
        ("type", "t"),
        ("attribute", "a"),
        ("inserted", "+"),
        ("deleted", "-"),
    ];

    /// The highlighted HTML with each `<span class="hl-keyword">x</span>` written
    /// `«k:x»` (and the escapes undone), so expected outputs stay readable; exact,
    /// because [`well_formed`] checks every span has this shape.
    fn short(lang: &str, code: &str) -> String {
        let h = highlight(lang, code).unwrap();
        let mut s = h.clone();
        for (long, abbr) in CLASSES {
            s = s.replace(&format!("<span class=\"hl-{long}\">"), &format!("«{abbr}:"));
        }
        unescape(&s.replace("</span>", "»"))
    }

    fn unescape(s: &str) -> String {
        s.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }

    /// Checks the output is text and non-nested, non-empty spans of known classes,
    /// with nothing unescaped; returns the text with the spans removed, unescaped.
    fn well_formed(html: &str) -> Result<String, String> {
        let mut text = String::new();
        let mut rest = html;
        let mut open = false;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("</span>") {
                if !open {
                    return Err("close without open".into());
                }
                open = false;
                rest = r;
                continue;
            }
            if let Some(r) = rest.strip_prefix("<span class=\"hl-") {
                if open {
                    return Err("nested span".into());
                }
                let (class, r) = r.split_once("\">").ok_or("bad span")?;
                if !CLASSES.iter().any(|(c, _)| *c == class) {
                    return Err(format!("unknown class {class}"));
                }
                if r.starts_with("</span>") {
                    return Err("empty span".into());
                }
                open = true;
                rest = r;
                continue;
            }
            if let Some(r) = rest.strip_prefix('&') {
                let ent = ["amp;", "lt;", "gt;", "quot;", "#39;"]
                    .into_iter()
                    .find(|e| r.starts_with(e))
                    .ok_or("bare &")?;
                text.push_str(&unescape(&rest[..1 + ent.len()]));
                rest = &r[ent.len()..];
                continue;
            }
            let c = rest.chars().next().unwrap_or(' ');
            if matches!(c, '<' | '>' | '"' | '\'') {
                return Err(format!("unescaped {c}"));
            }
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
        if open {
            return Err("span left open".into());
        }
        Ok(text)
    }

    #[test]
    fn exact_html_for_a_small_snippet() {
        assert_eq!(
            highlight("rust", "fn f(s: &str) -> u8 { 1 } // \"x\"").unwrap(),
            "<span class=\"hl-keyword\">fn</span> <span class=\"hl-function\">f</span>(s: \
             &amp;<span class=\"hl-type\">str</span>) -&gt; <span class=\"hl-type\">u8</span> \
             { <span class=\"hl-number\">1</span> } \
             <span class=\"hl-comment\">// &quot;x&quot;</span>"
        );
    }

    #[test]
    fn rust() {
        assert_eq!(
            short(
                "rust",
                "#[derive(Debug)]\npub struct P<'a> { s: &'a str, n: Option<u64> }"
            ),
            "«a:#[derive(Debug)]»\n«k:pub» «k:struct» «t:P»<'a> { s: &'a «t:str», n: «t:Option»<«t:u64»> }"
        );
        assert_eq!(
            short(
                "rs",
                "let c = '\\''; let r = r#\"a\"b\"#; let b = b\"x\"; 'outer: loop {}"
            ),
            "«k:let» c = «s:'\\''»; «k:let» r = «s:r#\"a\"b\"#»; «k:let» b = «s:b\"x\"»; 'outer: «k:loop» {}"
        );
        assert_eq!(
            short(
                "Rust",
                "println!(\"{}\", !v.is_empty()); const MAX: f64 = 1.5e-3; 0..10; true"
            ),
            "«f:println»!(«s:\"{}\"», !v.«f:is_empty»()); «k:const» MAX: «t:f64» = «n:1.5e-3»; «n:0»..«n:10»; «k:true»"
        );
        assert_eq!(
            short("rust", "/* a\n b */ x // y"),
            "«c:/* a\n b */» x «c:// y»"
        );
    }

    #[test]
    fn python() {
        assert_eq!(
            short(
                "py",
                "@app.route(\"/\")\ndef f(x: int) -> None:\n    return f'{x}' + \"\"\"a\n\"b\"\"\"\"  # c"
            ),
            "«a:@app.route»(«s:\"/\"»)\n«k:def» «f:f»(x: «t:int») -> «k:None»:\n    «k:return» «s:f'{x}'» + «s:\"\"\"a\n\"b\"\"\"»«s:\"  # c»"
        );
        assert_eq!(
            short("python", "x = 0x1F if y else 'it\\'s'"),
            "x = «n:0x1F» «k:if» y «k:else» «s:'it\\'s'»"
        );
    }

    #[test]
    fn javascript_and_typescript() {
        assert_eq!(
            short("js", "const s = `a\n${b}`; // it's\nnew Map(); null"),
            "«k:const» s = «s:`a\n${b}`»; «c:// it's»\n«k:new» «t:Map»(); «k:null»"
        );
        assert_eq!(
            short(
                "tsx",
                "@Component\nexport interface A { x: number; y?: Foo }\nenum E {}"
            ),
            "«a:@Component»\n«k:export» «k:interface» «t:A» { x: «t:number»; y?: «t:Foo» }\n«k:enum» «t:E» {}"
        );
        // `interface` is TypeScript's, not JavaScript's.
        assert_eq!(short("JavaScript", "interface"), "interface");
    }

    #[test]
    fn go() {
        assert_eq!(
            short(
                "golang",
                "func main() { fmt.Println(`a\\`, \"b\", nil) } // c"
            ),
            "«k:func» «f:main»() { fmt.«f:Println»(«s:`a\\`», «s:\"b\"», «k:nil») } «c:// c»"
        );
        assert_eq!(
            short("go", "var x int64 = 'x'"),
            "«k:var» x «t:int64» = «s:'x'»"
        );
    }

    #[test]
    fn c_and_cpp() {
        assert_eq!(
            short(
                "c",
                "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return NULL; }"
            ),
            "«k:#include» «s:<stdio.h>»\n«t:int» «f:main»(«t:void») { «f:printf»(«s:\"%d\\n\"», «n:42»); «k:return» «k:NULL»; }"
        );
        assert_eq!(
            short(
                "c++",
                "template <typename T> class Box { std::string s = u8\"x\"; };"
            ),
            "«k:template» <«k:typename» «t:T»> «k:class» «t:Box» { std::string s = «s:u8\"x\"»; };"
        );
        // C has no capitalised types, nor C++ keywords.
        assert_eq!(short("h", "class Box"), "class Box");
    }

    #[test]
    fn java() {
        assert_eq!(
            short(
                "java",
                "@Override\npublic String toString() { return \"x\" + 1L; }"
            ),
            "«a:@Override»\n«k:public» «t:String» «f:toString»() { «k:return» «s:\"x\"» + «n:1L»; }"
        );
    }

    #[test]
    fn shell() {
        assert_eq!(
            short(
                "bash",
                "export A=1 # set\necho a#b 'c\\' \"$HOME\" | grep -v x"
            ),
            "«k:export» A=«n:1» «c:# set»\n«k:echo» a#b «s:'c\\'» «s:\"$HOME\"» | grep -v x"
        );
        assert_eq!(short("console", "$ cargo test"), "$ cargo test");
    }

    #[test]
    fn sql() {
        assert_eq!(
            short(
                "SQL",
                "SELECT count(*) FROM t WHERE a = 'it''s' AND b IS NULL; -- c"
            ),
            "«k:SELECT» «f:count»(*) «k:FROM» t «k:WHERE» a = «s:'it'»«s:'s'» «k:AND» b «k:IS» «k:NULL»; «c:-- c»"
        );
        assert_eq!(
            short("sqlite", "create table t (id integer)"),
            "«k:create» «k:table» «f:t» (id «t:integer»)"
        );
    }

    #[test]
    fn toml_and_yaml() {
        assert_eq!(
            short(
                "toml",
                "[package]\nname = \"quire\" # c\nlints.workspace = true\nv = 'C:\\x'"
            ),
            "«t:[package]»\n«a:name» = «s:\"quire\"» «c:# c»\n«a:lints.workspace» = «k:true»\n«a:v» = «s:'C:\\x'»"
        );
        assert_eq!(
            short(
                "yml",
                "on:\n  push:\n    - branch-name: main#x\n      note: it's fine # ok\n"
            ),
            "«a:on»:\n  «a:push»:\n    - «a:branch-name»: main#x\n      «a:note»: it's fine «c:# ok»\n"
        );
    }

    #[test]
    fn json() {
        assert_eq!(
            short("json", "{\"a\": [1.5, true, null, \"\\\"\"]}"),
            "{«s:\"a\"»: [«n:1.5», «k:true», «k:null», «s:\"\\\"\"»]}"
        );
    }

    #[test]
    fn markup() {
        assert_eq!(
            short(
                "html",
                "<!-- c -->\n<a href=\"x\" data-id='1'>It's \"q\" & <b>bold</b></a>"
            ),
            "«c:<!-- c -->»\n<«k:a» «a:href»=«s:\"x\"» «a:data-id»=«s:'1'»>It's \"q\" & <«k:b»>bold</«k:b»></«k:a»>"
        );
        assert_eq!(
            short("XML", "<?xml version=\"1.0\"?><svg:g/>"),
            "<?«k:xml» «a:version»=«s:\"1.0\"»?><«k:svg:g»/>"
        );
    }

    #[test]
    fn css() {
        assert_eq!(
            short(
                "css",
                "a:hover, #main { color: #fff; margin: 0 10px !important }\n@media (x) { .b { font-size: 1.5em } } /* c */"
            ),
            "a:hover, #main { «a:color»: «n:#fff»; «a:margin»: «n:0» «n:10px» «k:!important» }\n«k:@media» (x) { .b { «a:font-size»: «n:1.5em» } } «c:/* c */»"
        );
    }

    #[test]
    fn diff() {
        assert_eq!(
            short("diff", "--- a\n+++ b\n@@ -1 +1 @@\n-old <x>\n+new\n same"),
            "«c:--- a»\n«c:+++ b»\n«c:@@ -1 +1 @@»\n«-:-old <x>»\n«+:+new»\n same"
        );
    }

    #[test]
    fn unknown_languages_are_none_and_aliases_any_case() {
        assert!(highlight("brainfuck", "+").is_none());
        assert!(highlight("", "x").is_none());
        assert!(highlight("PY", "x").is_some());
        assert_eq!(highlight("rust,ignore", "fn"), highlight("rust", "fn"));
    }

    #[test]
    fn unterminated_tokens_run_to_their_end() {
        assert_eq!(
            short("rust", "x /* never closed\ny"),
            "x «c:/* never closed\ny»"
        );
        assert_eq!(short("rust", "\"open\nstill"), "«s:\"open\nstill»");
        assert_eq!(short("js", "'open\nnext"), "«s:'open»\nnext");
        assert_eq!(short("py", "'''open\nx"), "«s:'''open\nx»");
        assert_eq!(short("html", "<a b=\"open>x"), "<«k:a» «a:b»=«s:\"open>x»");
        assert_eq!(short("rust", "r##\"x\"#"), "«s:r##\"x\"#»");
        assert_eq!(short("rust", "#[cfg(x)\nfn"), "«a:#[cfg(x)»\n«k:fn»");
    }

    const LANGS: [&str; 16] = [
        "rust", "python", "js", "ts", "go", "c", "cpp", "java", "sh", "sql", "toml", "yaml",
        "json", "css", "html", "diff",
    ];

    /// Pieces random inputs are made of: single characters (multi-byte and
    /// combining ones included) and the fragments the lexer looks for.
    const PIECES: &[&str] = &[
        "a", "b", "r", "Z", "_", "0", "9", " ", "\n", "\t", "\"", "'", "`", "/", "*", "#", "<",
        ">", "&", "\\", "-", "+", "@", "!", "[", "]", "(", ")", "{", "}", ".", ":", ";", "=", "é",
        "😀", "\u{301}", "日", "\"\"\"", "'''", "r#\"", "\"#", "br\"", "b'", "<!--", "-->", "/*",
        "*/", "//", "--", "#[", "#![", "'a", "0x", "1e", "1.5e-", "@media", "#include", "f\"",
        "u8\"", "<a", "</", "key: ", "[t]", "+++", "@@", "fn", "def", "#fff", "x!(",
    ];

    #[test]
    fn any_input_is_well_formed_and_round_trips() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2500 {
            let len = (next() % 48) as usize;
            let s: String = (0..len)
                .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
                .collect();
            for lang in LANGS {
                let h = highlight(lang, &s).unwrap();
                match well_formed(&h) {
                    Ok(text) => assert_eq!(text, s, "{lang}: {h}"),
                    Err(e) => panic!("{lang} {s:?}: {e}: {h}"),
                }
            }
        }
    }

    #[test]
    fn hostile_inputs_stay_linear() {
        // Quadratic behaviour on any of these (up to 32,000 characters) would take
        // tens of seconds, not milliseconds.
        let n = 8_000;
        for piece in [
            "a:", "\"", "'a", "r#", "#[", "/*", "<a ", "x(", "#", "-- ", "1.", "key.", "é\\",
            "<!--", "'''",
        ] {
            let s = piece.repeat(n);
            for lang in LANGS {
                let h = highlight(lang, &s).unwrap();
                assert_eq!(well_formed(&h).unwrap(), s, "{lang} {piece}");
            }
        }
    }
}
