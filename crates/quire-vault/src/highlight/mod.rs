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
//! goes through `escape`.
//!
//! Files by role: `langs` (the tables), `lexer` (the pass over code and markup),
//! and here the choice of mode by the fence's name, and diffs.

mod langs;
mod lexer;

use langs::{Lang, C, CONFIG, CPP, CSS, GO, JAVA, JS, JSON, PYTHON, RUST, SHELL, SQL, TS};
use lexer::{span, Lexer};

use crate::html::escape;

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
    let mut lx = Lexer::new(code);
    match mode {
        Mode::Code(l) => lx.code(l),
        Mode::Markup => lx.markup(),
        Mode::Diff => return Some(diff(code)),
    }
    Some(lx.into_html())
}

/// A diff: added, removed and header lines as whole-line spans.
fn diff(code: &str) -> String {
    let mut out = String::with_capacity(code.len() * 2);
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
            Some(c) => span(&mut out, c, body),
            None => out.push_str(&escape(body)),
        }
        out.push_str(nl);
    }
    out
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
