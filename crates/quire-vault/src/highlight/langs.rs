//! The languages the highlighter knows, one [`Lang`] table each: comment tokens,
//! string quotes and their rules, keywords, literals, builtin types and a few
//! switches. Data only: the lexer (`lexer`) reads the tables, `mode_of` names them.

/// How one language looks to the lexer.
pub(super) struct Lang {
    /// Tokens that start a comment running to the end of the line.
    pub(super) line_comments: &'static [&'static str],
    /// A line comment opens only at the start of a line or after whitespace
    /// (shell, YAML: `a#b` is a word).
    pub(super) comment_after_space: bool,
    pub(super) block_comment: Option<(&'static str, &'static str)>,
    /// Characters that open (and close) a string.
    pub(super) quotes: &'static [char],
    /// Quotes whose strings may span lines; the others stop at the end of the line
    /// when unterminated, so a stray quote cannot swallow the rest of the block.
    pub(super) multiline_quotes: &'static [char],
    /// Quotes inside which a backslash is an ordinary character (shell and YAML
    /// single quotes, Go raw strings).
    pub(super) raw_quotes: &'static [char],
    /// `"""` / `'''` strings (Python).
    pub(super) triple_quotes: bool,
    /// Identifiers that belong to a string when a quote follows directly
    /// (`b"..."`, `f"..."`, `u8"..."`); compared case-insensitively.
    pub(super) string_prefixes: &'static [&'static str],
    /// A quote right after a letter or digit is an apostrophe, not a string (YAML
    /// prose: `note: it's fine`).
    pub(super) apostrophes: bool,
    /// Keyword lists (a language may share a base list and add its own).
    pub(super) keywords: &'static [&'static [&'static str]],
    /// Literal words, shown as keywords.
    pub(super) literals: &'static [&'static str],
    /// Builtin type names.
    pub(super) types: &'static [&'static str],
    /// Capitalised identifiers are types (Rust, Java, TypeScript, C++ classes);
    /// all-capitals ones (`MAX_LEN`) are constants and stay plain.
    pub(super) capitalised_types: bool,
    /// Keywords, literals and types compare case-insensitively (SQL).
    pub(super) case_insensitive: bool,
    /// `-` continues an identifier (CSS properties, YAML keys).
    pub(super) dash_idents: bool,
    /// `@decorator` / `@Annotation` (Python, Java, TypeScript).
    pub(super) at_attributes: bool,
    /// Rust: `#[...]` attributes, `'a` lifetimes, `r#"..."#` raw strings, `name!(`
    /// macro calls.
    pub(super) rust: bool,
    /// `key:` / `key =` at the start of a line is an attribute, `[table]` a type.
    pub(super) config_keys: bool,
    /// CSS: `prop:` in a declaration is an attribute, `#fff` a number.
    pub(super) css: bool,
    /// C: the `<path>` after `#include` is a string.
    pub(super) include_paths: bool,
}

pub(super) const NONE: Lang = Lang {
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

pub(super) const RUST: Lang = Lang {
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

pub(super) const PYTHON: Lang = Lang {
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

pub(super) const JS: Lang = Lang {
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

pub(super) const TS: Lang = Lang {
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

pub(super) const GO: Lang = Lang {
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

pub(super) const C: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    string_prefixes: &["u8", "u", "l"],
    keywords: &[C_KEYWORDS],
    literals: &["true", "false", "NULL"],
    types: C_TYPES,
    include_paths: true,
    ..NONE
};

pub(super) const CPP: Lang = Lang {
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

pub(super) const JAVA: Lang = Lang {
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

pub(super) const SHELL: Lang = Lang {
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

pub(super) const SQL: Lang = Lang {
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
pub(super) const CONFIG: Lang = Lang {
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

pub(super) const JSON: Lang = Lang {
    line_comments: &["//"],
    block_comment: Some(("/*", "*/")),
    quotes: &['"'],
    literals: &["true", "false", "null"],
    ..NONE
};

pub(super) const CSS: Lang = Lang {
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
