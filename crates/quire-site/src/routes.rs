//! The site's URL space: which page a path names, and which paths may be a target
//! after signing in ([`local_target`]). Pure: no I/O, no vault.
//!
//! | path | page |
//! |---|---|
//! | `/` | index |
//! | `/<folder>/…/` (trailing slash) | a folder's notes |
//! | `/<folder>/…/<note>` | a note (`quire_vault::note::url_of`) |
//! | `/<folder>/…/<note>.md` | the note as markdown, for agents |
//! | `/tags/`, `/tags/<tag>` | tags, one tag |
//! | `/search?q=`, `/api/search?q=` | search page, JSON |
//! | `/feed.xml`, `/sitemap.xml`, `/robots.txt` | feed, sitemap, robots |
//! | `/llms.txt` | the public notes listed for language models' agents |
//! | `/login`, `/logout` | sign-in and sign-out |
//! | `/account` | the signed-in reader's name and the sign-out form (never cached) |
//! | `/_views` | view counts (admins) |
//! | `/_static/style.css` | the stylesheet |
//! | `/graph` | the site's graph |
//! | `/_static/quire.js` | the opt-in page script (`hover_previews`) |
//! | `/_static/speculation-rules.json` | the links browsers may prefetch (`prefetch`) |
//! | `/_static/dictionary-<sha256>.dict` | the compression dictionary (`crate::dictionary`) |
//! | `/attachments/<name>` | an attachment, by file name |
//!
//! Note URLs are slugs (lower-case ASCII letters, digits and `-`), so none of them
//! collides with the fixed paths except a note literally named `tags`, `search`,
//! `login`, … at the vault root; the fixed page wins and the vault loader's warning
//! says so.

/// A page of the site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    /// `/`.
    Index,
    /// `/tags/`.
    Tags,
    /// `/tags/<slug>`.
    Tag(String),
    /// `/search`.
    Search,
    /// `/api/search`.
    ApiSearch,
    /// `/feed.xml`.
    Feed,
    /// `/sitemap.xml`.
    Sitemap,
    /// `/llms.txt`.
    LlmsTxt,
    /// `/llms-full.txt`.
    LlmsFullTxt,
    /// `/robots.txt`.
    Robots,
    /// `/login`.
    Login,
    /// `/logout`.
    Logout,
    /// `/account`.
    Account,
    /// `/_views`.
    Views,
    /// `/_static/style.css`.
    Css,
    /// `/graph`.
    Graph,
    /// `/_static/quire.js`.
    Script,
    /// `/_static/speculation-rules.json`.
    SpeculationRules,
    /// `/_static/dictionary-<hex>.dict`: a compression dictionary, by its hash.
    Dictionary(String),
    /// `/attachments/<name>` (percent-decoded, lower-cased).
    Attachment(String),
    /// A path ending in `/`: a folder, if one has that URL.
    Folder(String),
    /// Any other path: a note, if one has that URL.
    Note(String),
    /// A note's URL with `.md` after it: the note as markdown.
    NoteMarkdown(String),
}

/// What a note's URL ends with to name the note as markdown.
pub const MARKDOWN_SUFFIX: &str = ".md";

/// The stylesheet's path.
pub const CSS_PATH: &str = "/_static/style.css";
/// Every public note's markdown in one file (`crate::llms`).
pub const LLMS_FULL_PATH: &str = "/llms-full.txt";

/// The signed-in reader's own page.
pub const ACCOUNT_PATH: &str = "/account";

/// The site graph's path.
pub const GRAPH_PATH: &str = "/graph";

/// The page `path` (without query) names.
pub fn route(path: &str) -> Page {
    match path {
        "/" | "" => Page::Index,
        "/tags/" | "/tags" => Page::Tags,
        "/search" => Page::Search,
        "/api/search" => Page::ApiSearch,
        "/feed.xml" => Page::Feed,
        "/sitemap.xml" => Page::Sitemap,
        "/llms.txt" => Page::LlmsTxt,
        LLMS_FULL_PATH => Page::LlmsFullTxt,
        "/robots.txt" => Page::Robots,
        "/login" => Page::Login,
        ACCOUNT_PATH => Page::Account,
        "/logout" => Page::Logout,
        "/_views" => Page::Views,
        CSS_PATH => Page::Css,
        GRAPH_PATH => Page::Graph,
        crate::script::SCRIPT_PATH => Page::Script,
        crate::speculation::PATH => Page::SpeculationRules,
        _ => {
            if let Some(t) = path.strip_prefix("/tags/") {
                return Page::Tag(t.trim_end_matches('/').to_owned());
            }
            if let Some(hex) = path
                .strip_prefix(crate::dictionary::PATH_PREFIX)
                .and_then(|p| p.strip_suffix(".dict"))
            {
                return Page::Dictionary(hex.to_owned());
            }
            if let Some(a) = path.strip_prefix("/attachments/") {
                return Page::Attachment(percent_decode(a).to_lowercase());
            }
            if path.ends_with('/') {
                Page::Folder(path.to_owned())
            } else if let Some(note) = path
                .strip_suffix(MARKDOWN_SUFFIX)
                .filter(|n| !n.contains('.'))
            {
                Page::NoteMarkdown(note.to_owned())
            } else {
                Page::Note(path.to_owned())
            }
        }
    }
}

/// The first value of `name` in a query string, `+` and percent-escapes decoded.
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (percent_decode(&k.replace('+', " ")) == name).then(|| percent_decode(&v.replace('+', " ")))
    })
}

/// Decodes `%XX` escapes; invalid escapes and invalid UTF-8 are kept/replaced, never
/// an error (a hostile path only ever names a page that does not exist).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Longest sign-in target kept; a longer `next` becomes `/`.
pub const TARGET_LEN_MAX: usize = 2048;

/// Percent-decodings of a target checked before it is given up on as deliberately
/// nested (`%25252f...`): real paths need one, or none.
const TARGET_DECODE_ROUNDS: usize = 3;

/// `next` as a safe redirect target after signing in: `next` itself when it is a path
/// on this site, else `/`. Non-ASCII characters come back percent-encoded, so the
/// `Location` field is plain ASCII.
///
/// The rule, applied to `next` and to every percent-decoding of it (a target is
/// decoded again when it is followed, by quire or by whatever sits in front of it):
/// - it starts with exactly one `/`: not `//host` (scheme-relative) and not `/\host`
///   (browsers read `\` as `/` in http URLs), and never with a scheme;
/// - it holds no control character (C0, DEL, C1): browsers delete tabs and newlines
///   anywhere in a URL before parsing it, so `/\t/evil.example` is `//evil.example`
///   to them; other controls have no place in a path either;
/// - no whitespace, ASCII or Unicode (leading and trailing spaces are stripped by
///   URL parsers too, and no URL quire makes holds a bare space);
/// - no backslash anywhere.
pub fn local_target(next: &str) -> String {
    if is_local_target(next) {
        ascii_only(next)
    } else {
        "/".to_owned()
    }
}

fn is_local_target(next: &str) -> bool {
    if next.len() > TARGET_LEN_MAX {
        return false;
    }
    let mut s = next.to_owned();
    for _ in 0..=TARGET_DECODE_ROUNDS {
        if !is_plain_local_path(&s) {
            return false;
        }
        let decoded = percent_decode(&s);
        if decoded == s {
            return true;
        }
        s = decoded;
    }
    false
}

/// The rule of [`local_target`] on one form of the target.
fn is_plain_local_path(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next() == Some('/')
        && !matches!(chars.next(), Some('/' | '\\'))
        && !s
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
}

/// `s` with every byte of a non-ASCII character percent-encoded.
fn ascii_only(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_pages() {
        assert_eq!(route("/"), Page::Index);
        assert_eq!(route("/tags/"), Page::Tags);
        assert_eq!(route("/tags/rust"), Page::Tag("rust".into()));
        assert_eq!(route("/caching/"), Page::Folder("/caching/".into()));
        assert_eq!(route("/caching/lru"), Page::Note("/caching/lru".into()));
        assert_eq!(
            route("/attachments/A%20b.SVG"),
            Page::Attachment("a b.svg".into())
        );
        assert_eq!(route(CSS_PATH), Page::Css);
        assert_eq!(route("/graph"), Page::Graph);
        assert_eq!(route("/_static/quire.js"), Page::Script);
        assert_eq!(
            route("/_static/speculation-rules.json"),
            Page::SpeculationRules
        );
    }

    #[test]
    fn queries_and_escapes_decode_without_errors() {
        assert_eq!(
            query_param(Some("a=1&q=caf%C3%A9+au+lait"), "q").as_deref(),
            Some("café au lait")
        );
        assert_eq!(query_param(Some("q"), "q").as_deref(), Some(""));
        assert_eq!(query_param(None, "q"), None);
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%FF"), "\u{fffd}");
    }

    /// Sign-in targets that leave the site in some browser, or that a proxy or a second
    /// decoding could turn into one: every one becomes `/`.
    const HOSTILE_TARGETS: &[&str] = &[
        "//evil.example",
        "///evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "/\t/evil.example",
        "/%09/evil.example",
        "/%0909/evil.example",
        "/%2509/evil.example",
        "/\x0b/evil.example",
        "/%0b/evil.example",
        "/\r\n/evil.example",
        "/%0d%0a/evil.example",
        "/a\r\nSet-Cookie: x=y",
        "/\x00/evil.example",
        "/\x7f/evil.example",
        "/\u{85}/evil.example",
        "/%C2%85/evil.example",
        "/%2f/evil.example",
        "/%2F%2Fevil.example",
        "/%252f/evil.example",
        "/%5c/evil.example",
        "/%5C%5Cevil.example",
        "/a\\b",
        "/ /evil.example",
        " //evil.example",
        "/\u{a0}/evil.example",
        "/\u{3000}/evil.example",
        "/%E3%80%80/evil.example",
        "/\u{2028}/evil.example",
        "https://evil.example",
        "javascript:alert(1)",
        "evil.example",
        "",
        "%2Fevil.example",
        "/%25252525252f/evil.example",
    ];

    #[test]
    fn open_redirect_via_tab_is_refused() {
        for bad in HOSTILE_TARGETS {
            assert_eq!(local_target(bad), "/", "{bad:?}");
        }
        let long = format!("/{}", "a".repeat(TARGET_LEN_MAX));
        assert_eq!(local_target(&long), "/", "over-long");
    }

    #[test]
    fn local_targets_survive_as_written() {
        for good in [
            "/",
            "/notes/a?x=1#y",
            "/caching/lru?x=1",
            "/tags/",
            "/a/b/c/",
            "/search?q=a+b&x=%2F",
            "/notes/caf%C3%A9",
        ] {
            assert_eq!(local_target(good), good, "{good:?}");
        }
        assert_eq!(local_target("/café?q=ü"), "/caf%C3%A9?q=%C3%BC");
        // The price of checking every decoding: an escaped space goes too. No URL
        // quire links to holds one (note, folder and tag URLs are slugs).
        assert_eq!(local_target("/a%20b"), "/");
    }
}
