//! What each template sees, built from the vault for one audience: the contexts of
//! `templates/README.md`. Listings come from `quire_vault::pages`, which filters by
//! audience, so no template can show a note its reader may not see.
//!
//! Pure functions of the vault: the snapshot computes every page's version from
//! these very contexts, so it sits above this module; the variables every page
//! shares (site settings, the reader, the stylesheet's URL) are added by
//! [`Snapshot::page_context`](crate::snapshot::Snapshot::page_context).

use std::collections::BTreeMap;

use quire_vault::links::slug;
use quire_vault::note::url_of;
use quire_vault::pages::{self, Entry};
use quire_vault::{Vault, Visibility};
use serde_json::{json, Value};

/// The signed-in reader, as templates see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    /// Name.
    pub name: String,
    /// `reader` or `admin`.
    pub role: &'static str,
    /// What they may see.
    pub audience: Visibility,
    /// Rendered for every member of the audience (`name` is empty): the page is
    /// cached under the audience's keys ([`crate::audience`]).
    pub shared: bool,
}

/// Who a page is rendered for: nobody (the anonymous, cached page) or a reader.
pub type Who<'a> = Option<&'a Viewer>;

/// The audience of `who`.
pub fn audience(who: Who<'_>) -> Visibility {
    who.map_or(Visibility::Public, |v| v.audience)
}

/// The folder a note lives in (`""` at the root).
pub fn folder_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(f, _)| f)
}

/// A folder's page.
pub fn folder_url(folder: &str) -> String {
    if folder.is_empty() {
        "/".into()
    } else {
        url_of(folder) + "/"
    }
}

/// A tag's page.
pub fn tag_url(tag: &str) -> String {
    format!("/tags/{}", slug(tag))
}

fn folder_name(folder: &str) -> &str {
    folder.rsplit('/').next().unwrap_or(folder)
}

/// A listing entry with its folder and tags.
pub fn entry(v: &Vault, e: &Entry) -> Value {
    let n = &v.notes()[e.note];
    let folder = folder_of(&n.path);
    json!({
        "title": e.title,
        "url": e.url,
        "date": e.date,
        "folder": (!folder.is_empty()).then_some(folder),
        "tags": n.front.tags,
    })
}

fn entries(v: &Vault, list: &[Entry]) -> Vec<Value> {
    list.iter().map(|e| entry(v, e)).collect()
}

/// `{name, url, count}` for each folder.
fn folder_list(folders: &BTreeMap<String, Vec<Entry>>) -> Vec<Value> {
    folders
        .iter()
        .filter(|(f, _)| !f.is_empty())
        .map(|(f, list)| json!({"name": f, "url": folder_url(f), "count": list.len()}))
        .collect()
}

/// `{name, url, count}` for each tag.
fn tag_list(tags: &BTreeMap<String, Vec<Entry>>) -> Vec<Value> {
    tags.iter()
        .map(|(t, list)| json!({"name": t, "url": tag_url(t), "count": list.len()}))
        .collect()
}

/// The index page's variables.
pub fn index(v: &Vault, audience: Visibility) -> Value {
    json!({
        "notes": entries(v, &pages::index(v, audience)),
        "folders": folder_list(&pages::folders(v, audience)),
        "tags": tag_list(&pages::tags(v, audience)),
    })
}

/// The tags page's variables.
pub fn tags(v: &Vault, audience: Visibility) -> Value {
    json!({ "tags": tag_list(&pages::tags(v, audience)) })
}

/// One tag's variables, if `audience` sees any note with a tag whose slug is `slug`.
pub fn tag(v: &Vault, audience: Visibility, tag_slug: &str) -> Option<Value> {
    let tags = pages::tags(v, audience);
    let (name, list) = tags.iter().find(|(t, _)| slug(t) == tag_slug)?;
    Some(tag_page(v, name, list))
}

/// A tag page's variables from its listing.
pub fn tag_page(v: &Vault, name: &str, list: &[Entry]) -> Value {
    json!({ "tag": {"name": name}, "notes": entries(v, list) })
}

/// Every folder with visible notes and every ancestor of one, with the number of
/// notes directly in it.
pub fn known_folders(folders: &BTreeMap<String, Vec<Entry>>) -> BTreeMap<String, usize> {
    let mut known: BTreeMap<String, usize> = BTreeMap::new();
    for (f, list) in folders {
        let mut cur = f.as_str();
        let mut first = true;
        while !cur.is_empty() {
            *known.entry(cur.to_owned()).or_default() += if first { list.len() } else { 0 };
            first = false;
            cur = folder_of(cur);
        }
    }
    known
}

/// One folder's variables (`url` ends in `/`), if `audience` sees a note in it or
/// below it.
pub fn folder(v: &Vault, audience: Visibility, url: &str) -> Option<Value> {
    let folders = pages::folders(v, audience);
    let known = known_folders(&folders);
    let path = known.keys().find(|f| folder_url(f) == url)?.clone();
    Some(folder_page(v, &folders, &known, &path))
}

/// The variables of the folder at `path`, from the audience's listings.
pub fn folder_page(
    v: &Vault,
    folders: &BTreeMap<String, Vec<Entry>>,
    known: &BTreeMap<String, usize>,
    path: &str,
) -> Value {
    let notes = folders.get(path).map_or_else(Vec::new, |l| entries(v, l));
    let subfolders: Vec<Value> = known
        .iter()
        .filter(|(f, _)| folder_of(f) == path)
        .map(|(f, &count)| json!({"name": folder_name(f), "url": folder_url(f), "count": count}))
        .collect();
    json!({
        "folder": {"name": folder_name(path), "url": folder_url(path), "path": path},
        "notes": notes,
        "subfolders": subfolders,
    })
}

/// A note page's variables, without the body (`note.html` is added by the caller,
/// so that a fingerprint can be taken without rendering). `related` are note indices.
pub fn note(v: &Vault, i: usize, audience: Visibility, related: &[usize]) -> Value {
    let n = &v.notes()[i];
    let folder = folder_of(&n.path);
    let link = |j: usize| {
        let m = &v.notes()[j];
        json!({"title": m.title(), "url": m.url})
    };
    let related: Vec<Value> = related
        .iter()
        .filter(|&&j| j != i && v.notes()[j].visibility() <= audience)
        .map(|&j| link(j))
        .collect();
    json!({
        "note": {
            "title": n.title(),
            "url": n.url,
            "date": n.front.date,
            "folder": (!folder.is_empty()).then(|| json!({"name": folder_name(folder), "url": folder_url(folder)})),
            "tags": n.front.tags.iter().map(|t| json!({"name": t, "url": tag_url(t)})).collect::<Vec<_>>(),
            "backlinks": pages::backlinks(v, i, audience).iter().map(|e| json!({"title": e.title, "url": e.url})).collect::<Vec<_>>(),
            "related": related,
            "visibility": match n.visibility() {
                Visibility::Public => "public",
                Visibility::Private => "private",
                Visibility::Draft => "draft",
            },
            "views": Value::Null,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_folders_and_tags() {
        assert_eq!(folder_url(""), "/");
        assert_eq!(folder_url("Projects/Quire Notes"), "/projects/quire-notes/");
        assert_eq!(tag_url("Web Perf"), "/tags/web-perf");
        assert_eq!(folder_of("a/b/c.md"), "a/b");
        assert_eq!(folder_of("c.md"), "");
    }
}
