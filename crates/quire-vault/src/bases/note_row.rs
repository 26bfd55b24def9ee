//! A vault note as a row of a base: its front-matter properties as values (a
//! `[[link]]` as a link, a `YYYY-MM-DD` as a date, a number as a number) and what the
//! vault knows of its file (name, path, folder, tags, links).
//!
//! `file.mtime` and `file.ctime` are the file system's times as the vault read them
//! (a file system that keeps no creation time gives `ctime` as `mtime`, as Obsidian
//! does on Linux); a note not read from a file has neither, and they are null.

use super::row::Row;
use super::time::parse_date;
use super::value::Value;
use crate::front::Prop;
use crate::note::Note;

/// A note, as a base's expressions read it.
#[derive(Debug, Clone, Copy)]
pub struct NoteRow<'a> {
    note: &'a Note,
}

impl<'a> NoteRow<'a> {
    /// The row of `note`.
    pub fn new(note: &'a Note) -> NoteRow<'a> {
        NoteRow { note }
    }
}

/// A property's value as Bases types it.
fn value(p: &Prop) -> Value {
    match p {
        Prop::Null => Value::Null,
        Prop::Bool(b) => Value::Bool(*b),
        Prop::Num(n) => n.parse().map_or_else(|_| Value::Str(n.clone()), Value::Num),
        Prop::Text(t) => text(t),
        Prop::List(items) => Value::List(items.iter().map(value).collect()),
    }
}

fn text(t: &str) -> Value {
    let trimmed = t.trim();
    if let Some(inner) = trimmed
        .strip_prefix("[[")
        .and_then(|s| s.strip_suffix("]]"))
    {
        let (target, display) = match inner.split_once('|') {
            Some((t, d)) => (t, Some(d.trim().to_owned())),
            None => (inner, None),
        };
        let target = target.split('#').next().unwrap_or(target).trim();
        return Value::Link(target.to_owned(), display);
    }
    if trimmed.len() >= 10 && trimmed.as_bytes()[4] == b'-' {
        if let Some(ms) = parse_date(trimmed) {
            return Value::Date(ms);
        }
    }
    Value::Str(t.to_owned())
}

impl Row for NoteRow<'_> {
    fn property(&self, name: &str) -> Value {
        self.note
            .front
            .properties
            .iter()
            .find(|(k, _)| k == name)
            .map_or(Value::Null, |(_, p)| value(p))
    }

    fn file_field(&self, field: &str) -> Option<Value> {
        let path = self.note.path.as_str();
        let (folder, file) = path.rsplit_once('/').unwrap_or(("", path));
        let (base, ext) = file.rsplit_once('.').unwrap_or((file, ""));
        Some(match field {
            "name" => Value::Str(file.to_owned()),
            "basename" => Value::Str(base.to_owned()),
            "path" => Value::Str(path.to_owned()),
            "folder" => Value::Str(folder.to_owned()),
            "ext" => Value::Str(ext.to_owned()),
            "size" => Value::Num(self.note.body.len() as f64),
            "mtime" => self.note.modified_ms.map_or(Value::Null, Value::Date),
            "ctime" => self
                .note
                .created_ms
                .or(self.note.modified_ms)
                .map_or(Value::Null, Value::Date),
            "tags" => Value::List(
                self.note
                    .front
                    .tags
                    .iter()
                    .map(|t| Value::Str(t.clone()))
                    .collect(),
            ),
            "links" => Value::List(
                self.note
                    .links
                    .iter()
                    .filter(|l| !l.embed)
                    .map(|l| Value::Link(l.target.clone(), None))
                    .collect(),
            ),
            _ => return None,
        })
    }

    fn has_tag(&self, tag: &str) -> bool {
        self.note.front.tags.iter().any(|t| {
            t.eq_ignore_ascii_case(tag)
                || (t.len() > tag.len()
                    && t.as_bytes()[tag.len()] == b'/'
                    && t[..tag.len()].eq_ignore_ascii_case(tag))
        })
    }

    fn in_folder(&self, folder: &str) -> bool {
        folder.is_empty()
            || self
                .note
                .path
                .strip_prefix(folder)
                .is_some_and(|rest| rest.starts_with('/'))
    }

    fn has_link(&self, target: &str) -> bool {
        let target = target.trim_end_matches(".md");
        self.note.links.iter().any(|l| {
            !l.embed
                && l.target
                    .trim_end_matches(".md")
                    .eq_ignore_ascii_case(target)
        })
    }

    fn has_property(&self, name: &str) -> bool {
        self.note.front.properties.iter().any(|(k, _)| k == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bases::{eval, parse, Budget, Env};

    #[test]
    fn a_parsed_note_reads_as_obsidian_types_its_properties() {
        let note = Note::parse(
            "Books/Dune.md",
            b"---\ntitle: Dune\nrating: 4.5\npages: 412\nread: true\nstarted: 2025-01-05\nauthor: \"[[Frank Herbert|Herbert]]\"\ntags: [book, scifi/classic]\n---\nSee [[Arrakis]] and ![[map.png]].\n",
        );
        let formulas = Default::default();
        let env = Env {
            formulas: &formulas,
            now_ms: 0,
            clock_read: Default::default(),
        };
        let row = NoteRow::new(&note);
        let calc =
            |src: &str| eval(&parse(src).unwrap(), &row, &env, &mut Budget::new(1000)).display();
        for (src, want) in [
            ("rating * 2", "9"),
            ("pages + 1", "413"),
            ("read", "true"),
            (r#"started.format("D MMM")"#, "5 Jan"),
            ("author", "Herbert"),
            (r#"author == "Frank Herbert""#, "true"),
            ("file.basename + '.' + file.ext", "Dune.md"),
            ("file.folder", "Books"),
            (r#"file.hasTag("scifi") && !file.hasTag("sci")"#, "true"),
            (r#"file.inFolder("Books") && !file.inFolder("Boo")"#, "true"),
            (
                r#"file.hasLink("Arrakis") && !file.hasLink("map.png")"#,
                "true",
            ),
            (
                r#"file.hasProperty("pages") && !file.hasProperty("isbn")"#,
                "true",
            ),
            ("file.links.length", "1"),
            ("title", "Dune"),
        ] {
            assert_eq!(calc(src), want, "{src}");
        }
        // Not read from a file: no times.
        assert_eq!(calc("file.mtime"), "");
        assert_eq!(calc("file.mtime.isEmpty()"), "true");
    }

    #[test]
    fn file_times_are_the_file_systems() {
        let (_d, v) = crate::testing::vault(&[("N.md", "x")]);
        let n = &v.notes()[0];
        let mtime = std::fs::metadata(_d.path().join("N.md"))
            .unwrap()
            .modified()
            .unwrap();
        let ms = mtime
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        assert_eq!(NoteRow::new(n).file_field("mtime"), Some(Value::Date(ms)));
        assert!(matches!(
            NoteRow::new(n).file_field("ctime"),
            Some(Value::Date(_))
        ));
    }
}
