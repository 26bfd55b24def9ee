//! One note: its file, front matter, body, links, and who may read it.

use crate::front::{self, FrontError, FrontMatter};
use crate::links::{self, WikiLink};

/// Who may read a note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Visibility {
    /// `free: true`: everyone, from the anonymous cache.
    Public,
    /// Signed-in readers (the default: nothing is published by accident).
    Private,
    /// `draft: true`: admins only.
    Draft,
}

/// A parsed note.
#[derive(Debug, Clone)]
pub struct Note {
    /// Path relative to the vault root, `/`-separated, with `.md`.
    pub path: String,
    /// File name without `.md`: what wikilinks name.
    pub(crate) name: String,
    /// The page's path on the site: `/` + slugged folders and name.
    pub url: String,
    /// Front matter (defaults when absent or rejected), with the body's inline
    /// `#tags` added to `tags` after its own.
    pub front: FrontMatter,
    /// Why the front matter was rejected, if it was (the note is then private).
    pub front_error: Option<FrontError>,
    /// The markdown after the front matter.
    pub body: String,
    /// Wikilinks and embeds in the body.
    pub links: Vec<WikiLink>,
    /// xxh3 of the file's bytes: changes whenever the note does.
    pub version: u64,
    /// When the file was last modified and created, in ms since the epoch, as the
    /// file system says (`None` for a note not read from a file, or where the file
    /// system keeps no creation time). Only a base shows them (`file.mtime`,
    /// `file.ctime`).
    pub modified_ms: Option<i64>,
    /// See `modified_ms`.
    pub created_ms: Option<i64>,
}

impl Note {
    /// Parses the note at vault-relative `path` from its file contents.
    pub fn parse(path: &str, bytes: &[u8]) -> Note {
        let text = String::from_utf8_lossy(bytes);
        let (yaml, body) = front::split(&text);
        let (front, front_error) = match yaml.map(front::parse) {
            None => (FrontMatter::default(), None),
            Some(Ok(f)) => (f, None),
            Some(Err(e)) => (FrontMatter::default(), Some(e)),
        };
        let name = path
            .rsplit('/')
            .next()
            .unwrap_or(path)
            .trim_end_matches(".md")
            .to_owned();
        let body = body.to_owned();
        let links = links::extract(&body);
        let mut front = front;
        add_inline_tags(path, &body, &links, &mut front.tags);
        Note {
            url: url_of(path),
            path: path.to_owned(),
            name,
            front,
            front_error,
            links,
            body,
            version: xxhash_rust::xxh3::xxh3_64(bytes),
            modified_ms: None,
            created_ms: None,
        }
    }

    /// The title: front matter `title`, else the file name.
    pub fn title(&self) -> &str {
        self.front.title.as_deref().unwrap_or(&self.name)
    }

    /// Who may read it. Rejected front matter makes a note private (never public).
    pub fn visibility(&self) -> Visibility {
        if self.front.draft {
            Visibility::Draft
        } else if self.front.free && self.front_error.is_none() {
            Visibility::Public
        } else {
            Visibility::Private
        }
    }
}

/// Adds the body's inline `#tags` to a note's `tags`, after those of the front
/// matter: at most `tags_per_note_max` of each (see `render::tags`; the note and
/// bound are logged when the cap cuts), de-duplicated through a hash set.
fn add_inline_tags(path: &str, body: &str, links: &[WikiLink], tags: &mut Vec<String>) {
    let max = crate::render::budget::limits().tags_per_note_max;
    let (inline, more) = crate::render::inline_tags(body, links, max);
    let over_front = tags.len() > max;
    tags.truncate(max);
    let mut have: std::collections::HashSet<String> =
        tags.iter().map(|t| t.to_ascii_lowercase()).collect();
    for t in inline {
        if have.insert(t.to_ascii_lowercase()) {
            tags.push(t);
        }
    }
    if more || over_front {
        tracing::warn!(
            note = path,
            bound = "tags_per_note_max",
            limit = max,
            "render budget reached: tags past the cap are text, not tag pages"
        );
    }
}

/// `/folder-slug/name-slug` for a vault-relative `.md` path.
pub fn url_of(path: &str) -> String {
    let mut url = String::new();
    let stem = path.strip_suffix(".md").unwrap_or(path);
    for seg in stem.split('/').filter(|s| !s.is_empty()) {
        url.push('/');
        let s = links::slug(seg);
        url.push_str(if s.is_empty() { "-" } else { &s });
    }
    if url.is_empty() {
        url.push('/');
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_note() {
        let n = Note::parse(
            "Caching/Stale While Revalidate.md",
            b"---\ntitle: SWR\nfree: true\ntags: [caching]\n---\nSee [[HTTP Caching]].\n",
        );
        assert_eq!(n.name, "Stale While Revalidate");
        assert_eq!(n.url, "/caching/stale-while-revalidate");
        assert_eq!(n.title(), "SWR");
        assert_eq!(n.visibility(), Visibility::Public);
        assert_eq!(n.links.len(), 1);
        assert_eq!(n.body, "See [[HTTP Caching]].\n");
    }

    #[test]
    fn visibility_defaults_to_private_and_bad_front_matter_never_publishes() {
        assert_eq!(
            Note::parse("a.md", b"no front matter").visibility(),
            Visibility::Private
        );
        let n = Note::parse("a.md", b"---\nfree: true\ndate: someday\n---\nx");
        assert!(n.front_error.is_some());
        assert_eq!(n.visibility(), Visibility::Private);
        let n = Note::parse("a.md", b"---\nfree: true\ndraft: true\n---\nx");
        assert_eq!(n.visibility(), Visibility::Draft);
    }

    #[test]
    fn versions_follow_the_bytes() {
        assert_eq!(
            Note::parse("a.md", b"x").version,
            Note::parse("b.md", b"x").version
        );
        assert_ne!(
            Note::parse("a.md", b"x").version,
            Note::parse("a.md", b"y").version
        );
    }
}
