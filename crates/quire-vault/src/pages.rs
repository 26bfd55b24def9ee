//! What the site's listing pages show, for one audience: the index (newest first),
//! each folder, each tag, and the notes linking to a note. Pure data: templates turn
//! it into HTML.
//!
//! Key decision: **every listing is filtered by the reader's audience here**, once,
//! so no template can list a note its reader may not see — a private note never
//! appears to an anonymous reader on an index, folder, tag or backlinks list.

use std::collections::BTreeMap;

use crate::note::{Note, Visibility};
use crate::vault::Vault;

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The note's index in the vault.
    pub note: usize,
    /// Its title.
    pub title: String,
    /// Its page.
    pub url: String,
    /// Its `date`, if any.
    pub date: Option<String>,
}

fn entry(v: &Vault, i: usize) -> Entry {
    let n = &v.notes()[i];
    Entry {
        note: i,
        title: n.title().to_owned(),
        url: n.url.clone(),
        date: n.front.date.clone(),
    }
}

fn visible(n: &Note, audience: Visibility) -> bool {
    n.visibility() <= audience
}

/// Every note `audience` may see, newest `date` first (undated last, by title).
pub fn index(v: &Vault, audience: Visibility) -> Vec<Entry> {
    let mut out: Vec<Entry> = (0..v.notes().len())
        .filter(|&i| visible(&v.notes()[i], audience))
        .map(|i| entry(v, i))
        .collect();
    out.sort_by(|a, b| match (&a.date, &b.date) {
        (Some(x), Some(y)) => y.cmp(x).then_with(|| a.title.cmp(&b.title)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.title.cmp(&b.title),
    });
    out
}

/// Notes per folder (`""` is the vault root), by title, for `audience`. Folders with
/// nothing visible are absent.
pub fn folders(v: &Vault, audience: Visibility) -> BTreeMap<String, Vec<Entry>> {
    let mut out: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for (i, n) in v.notes().iter().enumerate() {
        if !visible(n, audience) {
            continue;
        }
        let folder = n.path.rsplit_once('/').map_or("", |(f, _)| f).to_owned();
        out.entry(folder).or_default().push(entry(v, i));
    }
    for list in out.values_mut() {
        list.sort_by(|a, b| a.title.cmp(&b.title));
    }
    out
}

/// Notes per tag (lower-cased), newest first, for `audience`. Tags only hidden notes
/// carry are absent.
pub fn tags(v: &Vault, audience: Visibility) -> BTreeMap<String, Vec<Entry>> {
    let mut out: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for e in index(v, audience) {
        for t in &v.notes()[e.note].front.tags {
            let list = out.entry(t.to_lowercase()).or_default();
            // A note's entries are pushed together: only the last can be the same
            // note (a scan of the list made this quadratic in a tag's notes).
            if list.last().is_none_or(|x| x.note != e.note) {
                list.push(e.clone());
            }
        }
    }
    out
}

/// The notes linking to note `i` that `audience` may see, by title.
pub fn backlinks(v: &Vault, i: usize, audience: Visibility) -> Vec<Entry> {
    let mut out: Vec<Entry> = v
        .backlinks(i)
        .iter()
        .filter(|&&j| visible(&v.notes()[j], audience))
        .map(|&j| entry(v, j))
        .collect();
    out.sort_by(|a, b| a.title.cmp(&b.title));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::vault;

    fn titles(e: &[Entry]) -> Vec<&str> {
        e.iter().map(|e| e.title.as_str()).collect()
    }

    #[test]
    fn listings_show_only_what_the_audience_may_see() {
        let (_d, v) = vault(&[
            (
                "Old.md",
                "---\nfree: true\ndate: 2024-01-01\ntags: [a]\n---\n[[Target]]",
            ),
            (
                "New.md",
                "---\nfree: true\ndate: 2026-01-01\ntags: [a, B]\n---\n[[Target]]",
            ),
            ("Undated.md", "---\nfree: true\n---\n"),
            (
                "Priv/Secret.md",
                "---\ndate: 2026-06-01\ntags: [a, hidden]\n---\n[[Target]]",
            ),
            (
                "Draft.md",
                "---\nfree: true\ndraft: true\ntags: [a]\n---\n[[Target]]",
            ),
            ("Target.md", "---\nfree: true\n---\n"),
        ]);
        assert_eq!(
            titles(&index(&v, Visibility::Public)),
            ["New", "Old", "Target", "Undated"]
        );
        assert_eq!(titles(&index(&v, Visibility::Private))[0], "Secret");
        assert!(titles(&index(&v, Visibility::Draft)).contains(&"Draft"));
        let f = folders(&v, Visibility::Public);
        assert!(
            !f.contains_key("Priv"),
            "a folder of hidden notes is not listed"
        );
        assert_eq!(titles(&f[""]), ["New", "Old", "Target", "Undated"]);
        let t = tags(&v, Visibility::Public);
        assert_eq!(titles(&t["a"]), ["New", "Old"]);
        assert!(t.contains_key("b"), "tags are lower-cased");
        assert!(
            !t.contains_key("hidden"),
            "a tag only hidden notes carry is not listed"
        );
        let target = v.resolve("Target").unwrap();
        assert_eq!(
            titles(&backlinks(&v, target, Visibility::Public)),
            ["New", "Old"]
        );
        assert_eq!(
            titles(&backlinks(&v, target, Visibility::Draft)),
            ["Draft", "New", "Old", "Secret"]
        );
    }
}
