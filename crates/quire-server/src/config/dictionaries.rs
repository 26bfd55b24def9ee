//! The `[dictionaries]` section: the hosts of `quire proxy` whose HTML quire makes a
//! compression dictionary for (RFC 9842), and how (the dictionaries themselves are
//! `crate::fill::host_dictionaries`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::units::{ByteSize, Secs};
use super::ConfigError;

/// The `[dictionaries]` section.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DictionariesSection {
    /// Hosts (as requests name them, without a port) whose HTML pages get a
    /// dictionary made from their own pages; empty (the default): none.
    pub hosts: Vec<String>,
    /// Pages sampled per host to make a dictionary from (2 to 256).
    pub sample_pages: usize,
    /// How long a host's sample may take to fill: past it, a dictionary is made of
    /// what was sampled (at least 2 pages).
    pub sample_wait: Secs,
    /// The dictionary's size at most (4 KiB to 1 MiB).
    pub max_bytes: ByteSize,
    /// How long a dictionary is used before one is made from a new sample (the
    /// previous one is still served to browsers that hold it).
    pub rebuild_after: Secs,
    /// URL patterns of versioned assets (`/static/app.*.js`: literal text and `*`,
    /// any host): a stored response whose URL one matches, and that names no
    /// dictionary itself, is marked `Use-As-Dictionary` with that pattern, so its
    /// next version travels as a delta of it.
    pub assets: Vec<String>,
}

/// Hosts at most.
pub(crate) const HOSTS_MAX: usize = 64;

impl Default for DictionariesSection {
    fn default() -> Self {
        DictionariesSection {
            hosts: Vec::new(),
            sample_pages: 64,
            sample_wait: Secs(Duration::from_secs(60)),
            max_bytes: ByteSize(128 << 10),
            rebuild_after: Secs(Duration::from_secs(86_400)),
            assets: Vec::new(),
        }
    }
}

impl DictionariesSection {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::new(format!("dictionaries.{m}")));
        if self.hosts.len() > HOSTS_MAX {
            return bad(&format!("hosts: at most {HOSTS_MAX}"));
        }
        for h in &self.hosts {
            let ok = !h.is_empty()
                && h.len() <= 253
                && h.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b));
            if !ok {
                return bad(&format!(
                    "hosts: {h:?} is not a lower-case host name without a port"
                ));
            }
        }
        if !(2..=256).contains(&self.sample_pages) {
            return bad("sample_pages must be within 2..=256");
        }
        if !(4 << 10..=1 << 20).contains(&self.max_bytes.0) {
            return bad("max_bytes must be within 4 KiB..=1 MiB");
        }
        if self.sample_wait.0.is_zero() || self.rebuild_after.0 < Duration::from_secs(60) {
            return bad("sample_wait must be above 0 and rebuild_after at least 1m");
        }
        if self.assets.len() > HOSTS_MAX {
            return bad(&format!("assets: at most {HOSTS_MAX}"));
        }
        for a in &self.assets {
            let read = a.starts_with('/')
                && !a.contains('"')
                && quire_http::dictionary_use::Pattern::parse(a, "http://h/").is_some();
            if !read {
                return bad(&format!(
                    "assets: {a:?} is not a path pattern of literal text and * (at most {} bytes)",
                    quire_http::dictionary_use::PATTERN_MAX
                ));
            }
        }
        Ok(())
    }

    /// The `Use-As-Dictionary` value quire gives a stored response at `url` with
    /// `content_type`: the first of [`Self::assets`] that matches the URL.
    pub fn asset_field(&self, url: &str, content_type: &str) -> Option<String> {
        use quire_http::dictionary_use::Pattern;
        let pattern = self
            .assets
            .iter()
            .find(|a| Pattern::parse(a, url).is_some_and(|p| p.matches(url)))?;
        let ct = content_type.trim_start().to_ascii_lowercase();
        let dest = if ct.starts_with("text/css") {
            ", match-dest=(\"style\")"
        } else if ct.contains("javascript") {
            ", match-dest=(\"script\")"
        } else {
            ""
        };
        Some(format!("match=\"{pattern}\"{dest}"))
    }

    /// Whether `host` (lower-case, no port) is one of [`Self::hosts`].
    pub fn covers(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h == host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionaries_settings_are_checked() {
        assert!(DictionariesSection::default().validate().is_ok());
        let with = |f: &dyn Fn(&mut DictionariesSection)| {
            let mut d = DictionariesSection::default();
            f(&mut d);
            d.validate().map_err(|e| e.to_string())
        };
        assert!(with(&|d| d.hosts = vec!["example.com".into()]).is_ok());
        for bad in ["Example.com", "example.com:8080", "", "a b"] {
            assert!(with(&|d| d.hosts = vec![bad.into()]).is_err(), "{bad:?}");
        }
        assert!(with(&|d| d.hosts = vec!["a.test".into(); HOSTS_MAX + 1]).is_err());
        assert!(with(&|d| d.sample_pages = 1).is_err());
        assert!(with(&|d| d.max_bytes = ByteSize(2 << 20)).is_err());
        assert!(with(&|d| d.rebuild_after = Secs(Duration::from_secs(1))).is_err());
        assert!(with(&|d| d.assets = vec!["/static/app.*.js".into()]).is_ok());
        for bad in ["static/*.js", "/a/:v.js", "/a\"b", "/(x)"] {
            assert!(with(&|d| d.assets = vec![bad.into()]).is_err(), "{bad:?}");
        }
        let d = DictionariesSection {
            hosts: vec!["a.test".into()],
            ..DictionariesSection::default()
        };
        assert!(d.covers("a.test") && !d.covers("b.test"));
    }

    #[test]
    fn an_asset_pattern_marks_the_responses_it_matches() {
        let d = DictionariesSection {
            assets: vec!["/static/app.*.js".into(), "/css/*".into()],
            ..DictionariesSection::default()
        };
        let js = d.asset_field("https://a.test/static/app.v1.js?x=1", "text/javascript");
        assert_eq!(
            js.as_deref(),
            Some("match=\"/static/app.*.js\", match-dest=(\"script\")")
        );
        let css = d.asset_field("http://b.test/css/site.css", "text/css; charset=utf-8");
        assert_eq!(
            css.as_deref(),
            Some("match=\"/css/*\", match-dest=(\"style\")")
        );
        assert_eq!(
            d.asset_field("https://a.test/static/other.js", "text/javascript"),
            None
        );
        let read = quire_http::dictionary_use::UseAsDictionary::parse(js.unwrap().as_bytes());
        assert!(read.is_some(), "what quire writes, it reads back");
    }
}
