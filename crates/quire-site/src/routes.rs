//! The site's URL space: which page a path names. Pure: no I/O, no vault.
//!
//! | path | page |
//! |---|---|
//! | `/` | index |
//! | `/<folder>/…/` (trailing slash) | a folder's notes |
//! | `/<folder>/…/<note>` | a note (`quire_vault::note::url_of`) |
//! | `/tags/`, `/tags/<tag>` | tags, one tag |
//! | `/search?q=`, `/api/search?q=` | search page, JSON |
//! | `/feed.xml`, `/sitemap.xml`, `/robots.txt` | feed, sitemap, robots |
//! | `/login`, `/logout` | sign-in and sign-out |
//! | `/_views` | view counts (admins) |
//! | `/_static/style.css` | the stylesheet |
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
    /// `/robots.txt`.
    Robots,
    /// `/login`.
    Login,
    /// `/logout`.
    Logout,
    /// `/_views`.
    Views,
    /// `/_static/style.css`.
    Css,
    /// `/attachments/<name>` (percent-decoded, lower-cased).
    Attachment(String),
    /// A path ending in `/`: a folder, if one has that URL.
    Folder(String),
    /// Any other path: a note, if one has that URL.
    Note(String),
}

/// The stylesheet's path.
pub const CSS_PATH: &str = "/_static/style.css";

/// The page `path` (without query) names.
pub fn route(path: &str) -> Page {
    match path {
        "/" | "" => Page::Index,
        "/tags/" | "/tags" => Page::Tags,
        "/search" => Page::Search,
        "/api/search" => Page::ApiSearch,
        "/feed.xml" => Page::Feed,
        "/sitemap.xml" => Page::Sitemap,
        "/robots.txt" => Page::Robots,
        "/login" => Page::Login,
        "/logout" => Page::Logout,
        "/_views" => Page::Views,
        CSS_PATH => Page::Css,
        _ => {
            if let Some(t) = path.strip_prefix("/tags/") {
                return Page::Tag(t.trim_end_matches('/').to_owned());
            }
            if let Some(a) = path.strip_prefix("/attachments/") {
                return Page::Attachment(percent_decode(a).to_lowercase());
            }
            if path.ends_with('/') {
                Page::Folder(path.to_owned())
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

/// `next` as a safe local redirect target: an absolute path on this site, never
/// `//host` or a scheme (no open redirect through the login form).
pub fn local_target(next: &str) -> &str {
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.contains(['\r', '\n'])
        && next.len() <= 2048;
    if ok {
        next
    } else {
        "/"
    }
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

    #[test]
    fn redirects_stay_on_the_site() {
        for bad in [
            "//evil.org",
            "https://evil.org",
            "/\\evil.org",
            "evil",
            "/a\r\nx: y",
        ] {
            assert_eq!(local_target(bad), "/", "{bad}");
        }
        assert_eq!(local_target("/caching/lru?x=1"), "/caching/lru?x=1");
    }
}
