//! The page templates: the defaults compiled into the binary, each replaceable by a
//! file of the same name in `VAULT/.quire/templates/` (see `templates/README.md` for
//! every template and its variables), and the stylesheet, likewise replaceable by
//! `VAULT/.quire/templates/style.css`.
//!
//! Templates run only on a miss (a render), never on a hit. A template that does not
//! parse is an error naming the file and line at start-up; on a reload the previous
//! templates stay in use and the error is logged.

use std::path::Path;

use minijinja::Environment;

use crate::config::DIR;

/// Every template, with its default source.
pub const DEFAULTS: [(&str, &str); 12] = [
    ("layout.html", include_str!("../templates/layout.html")),
    ("index.html", include_str!("../templates/index.html")),
    ("note.html", include_str!("../templates/note.html")),
    ("folder.html", include_str!("../templates/folder.html")),
    ("tags.html", include_str!("../templates/tags.html")),
    ("tag.html", include_str!("../templates/tag.html")),
    ("search.html", include_str!("../templates/search.html")),
    ("login.html", include_str!("../templates/login.html")),
    ("account.html", include_str!("../templates/account.html")),
    ("error.html", include_str!("../templates/error.html")),
    ("views.html", include_str!("../templates/views.html")),
    ("graph.html", include_str!("../templates/graph.html")),
];

/// The default stylesheet.
pub const DEFAULT_CSS: &str = include_str!("../static/style.css");

/// Loaded templates and stylesheet.
#[derive(Debug)]
pub struct Templates {
    /// The compiled templates.
    pub env: Environment<'static>,
    /// The stylesheet.
    pub css: String,
    /// A hash of every source (part of the key epoch).
    pub fingerprint: u64,
}

/// A template that does not parse, or an override that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("template {path}: {why}")]
pub struct TemplateError {
    /// The file (or default name).
    pub path: String,
    /// What is wrong.
    pub why: String,
}

impl Templates {
    /// The defaults with the vault's overrides.
    pub fn load(vault: &Path) -> Result<Templates, TemplateError> {
        let dir = vault.join(DIR).join("templates");
        let mut env = Environment::new();
        env.set_auto_escape_callback(|name| {
            if name.ends_with(".html") {
                minijinja::AutoEscape::Html
            } else {
                minijinja::AutoEscape::None
            }
        });
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Lenient);
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for (name, default) in DEFAULTS {
            let (src, path) = read_override(&dir, name)?
                .map_or((default.to_owned(), name.to_owned()), |(s, p)| (s, p));
            h.update(name.as_bytes());
            h.update(&[0]);
            h.update(src.as_bytes());
            h.update(&[0]);
            env.add_template_owned(name, src)
                .map_err(|e| TemplateError {
                    path,
                    why: describe(&e),
                })?;
        }
        let css =
            read_override(&dir, "style.css")?.map_or_else(|| DEFAULT_CSS.to_owned(), |(s, _)| s);
        h.update(css.as_bytes());
        Ok(Templates {
            env,
            css,
            fingerprint: h.digest(),
        })
    }

    /// Renders template `name` with `ctx`.
    pub fn render(&self, name: &str, ctx: &serde_json::Value) -> Result<String, TemplateError> {
        let t = self.env.get_template(name).map_err(|e| TemplateError {
            path: name.to_owned(),
            why: describe(&e),
        })?;
        t.render(ctx).map_err(|e| TemplateError {
            path: name.to_owned(),
            why: describe(&e),
        })
    }
}

fn read_override(dir: &Path, name: &str) -> Result<Option<(String, String)>, TemplateError> {
    let path = dir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(s) => Ok(Some((s, path.display().to_string()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TemplateError {
            path: path.display().to_string(),
            why: e.to_string(),
        }),
    }
}

fn describe(e: &minijinja::Error) -> String {
    match e.line() {
        Some(l) => format!("line {l}: {e}"),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse_and_overrides_replace_them() {
        let dir = tempfile::tempdir().unwrap();
        let a = Templates::load(dir.path()).unwrap();
        let t = dir.path().join(DIR).join("templates");
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("error.html"), "E{{ status }}").unwrap();
        let b = Templates::load(dir.path()).unwrap();
        assert_ne!(a.fingerprint, b.fingerprint);
        let out = b
            .render("error.html", &serde_json::json!({"status": 404}))
            .unwrap();
        assert_eq!(out, "E404");
        std::fs::write(t.join("error.html"), "{% if %}").unwrap();
        let e = Templates::load(dir.path()).unwrap_err();
        assert!(e.path.ends_with("error.html"), "{e}");
    }
}
