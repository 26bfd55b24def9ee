//! The site's own settings, from `VAULT/.quire/site.toml`: title, description, the
//! public base URL (for the feed and sitemap, which need absolute links), the
//! language, and what `robots.txt` signals. A missing file means defaults; unknown keys are errors, so a typo never
//! silently changes nothing.

use std::path::Path;

use serde::Deserialize;

/// Where the site's settings, templates, users and databases live, inside the vault.
pub const DIR: &str = ".quire";

/// `site.toml`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct SiteConfig {
    /// The site's name, in every page title and the feed.
    pub title: String,
    /// One line about the site (index page, `<meta name=description>`, feed).
    pub description: String,
    /// `https://example.org` (no trailing slash): absolute links in the feed and
    /// sitemap. When empty, they are made from the request's `Host` (which is part
    /// of the cache key, so one host's links never reach another).
    pub base_url: String,
    /// The `lang` of every page (also part of the key epoch).
    pub language: String,
    /// Entries in the Atom feed.
    pub feed_entries: usize,
    /// How long a sign-in lasts, in hours.
    pub session_hours: u64,
    /// Mark the session cookie `Secure` even on plain HTTP (set this when a TLS
    /// terminator in front of quire does not send `X-Forwarded-Proto`); over HTTPS
    /// quire marks it `Secure` anyway.
    pub secure_cookies: bool,
    /// Add quire's one page script (off by default): a preview of a linked note in a
    /// popover on hover or focus, and pan and zoom on `/graph`. Served from the
    /// binary and allowed by its hash in the page's CSP (`crate::script`).
    pub hover_previews: bool,
    /// Which links browsers may prefetch before a reader clicks
    /// (`crate::speculation`): `"moderate"` (the default), `"conservative"`,
    /// `"eager"` or `"off"`. A prefetch is only ever answered from the cache.
    pub prefetch: crate::speculation::Prefetch,
    /// Build a compression dictionary from the site's pages and send pages
    /// compressed against it (`dcz`, RFC 9842) to browsers that hold it (on by
    /// default; `crate::dictionary`).
    pub compression_dictionary: bool,
    /// Cache signed-in readers' pages per audience (on by default; see
    /// `crate::audience`). Off, every signed-in request is rendered for its reader
    /// and never stored: for templates that show something personal on every page.
    pub cache_signed_in: bool,
    /// After a change to the templates or the stylesheet alone, how long (seconds)
    /// a page's previous rendering may still answer a request while the new one is
    /// rendered in the background (see `crate::snapshot`). 0: every page misses
    /// at once and its first reader waits for its render. A change to `site.toml`
    /// itself never lets previous pages answer.
    pub template_grace_secs: u64,
    /// `[render]`: what one page's render may spend (`quire_vault::render::budget`).
    pub render: RenderLimits,
    /// How many password checks run at once, and how sign-ins wait for one
    /// (`[sign_in]`; read at start-up).
    pub sign_in: SignInConfig,
    /// `[robots]`: AI-usage signals and crawlers refused in `/robots.txt`
    /// (`crate::robots`).
    pub robots: crate::robots::RobotsConfig,
}

/// `[render]` in `site.toml`: the render budgets. Past one, the construct is shown
/// as its source with a note, and the note and bound are logged once.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct RenderLimits {
    /// MathML bytes of one formula.
    pub formula_bytes_max: usize,
    /// MathML bytes of one page.
    pub math_bytes_max: usize,
    /// HTML bytes of one note's body; a note whose markdown is larger is not
    /// rendered.
    pub page_bytes_max: usize,
    /// Inline tags of one note (and front matter tags, apart).
    pub tags_per_note_max: usize,
    /// Links drawn on `/graph`.
    pub graph_edges_max: usize,
}

impl Default for RenderLimits {
    fn default() -> RenderLimits {
        let l = quire_vault::render::budget::Limits::default();
        RenderLimits {
            formula_bytes_max: l.formula_bytes_max,
            math_bytes_max: l.math_bytes_max,
            page_bytes_max: l.page_bytes_max,
            tags_per_note_max: l.tags_per_note_max,
            graph_edges_max: l.graph_edges_max,
        }
    }
}

/// `[sign_in]` of `site.toml`: the sign-in gate (`crate::gate`).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct SignInConfig {
    /// Password checks (argon2, 19 MiB each at the default cost) running at once.
    pub checks_at_once: usize,
    /// Sign-ins waiting for a check before more are refused with 503.
    pub queue: usize,
    /// Seconds a sign-in waits for a check before it is refused with 503.
    pub queue_wait: u64,
}

impl Default for SignInConfig {
    fn default() -> SignInConfig {
        SignInConfig {
            checks_at_once: 2,
            queue: 32,
            queue_wait: 10,
        }
    }
}

impl From<RenderLimits> for quire_vault::render::budget::Limits {
    fn from(r: RenderLimits) -> Self {
        quire_vault::render::budget::Limits {
            formula_bytes_max: r.formula_bytes_max,
            math_bytes_max: r.math_bytes_max,
            page_bytes_max: r.page_bytes_max,
            tags_per_note_max: r.tags_per_note_max,
            graph_edges_max: r.graph_edges_max,
        }
    }
}

impl SignInConfig {
    /// The gate's limits.
    pub fn limits(&self) -> crate::gate::GateLimits {
        crate::gate::GateLimits {
            at_once: self.checks_at_once.max(1),
            queue: self.queue,
            wait: std::time::Duration::from_secs(self.queue_wait.max(1)),
        }
    }
}

impl Default for SiteConfig {
    fn default() -> SiteConfig {
        SiteConfig {
            title: "Notes".into(),
            description: String::new(),
            base_url: String::new(),
            language: "en".into(),
            feed_entries: 30,
            session_hours: 24 * 14,
            secure_cookies: false,
            hover_previews: false,
            prefetch: crate::speculation::Prefetch::default(),
            compression_dictionary: true,
            cache_signed_in: true,
            template_grace_secs: 120,
            render: RenderLimits::default(),
            sign_in: SignInConfig::default(),
            robots: crate::robots::RobotsConfig::default(),
        }
    }
}

/// A bad `site.toml`.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {why}")]
pub struct SiteConfigError {
    /// The file.
    pub path: String,
    /// What is wrong.
    pub why: String,
}

impl SiteConfig {
    /// Reads `VAULT/.quire/site.toml` (defaults when absent); also returns the raw
    /// text, which goes into the key epoch.
    pub fn load(vault: &Path) -> Result<(SiteConfig, String), SiteConfigError> {
        let path = vault.join(DIR).join("site.toml");
        let err = |why: String| SiteConfigError {
            path: path.display().to_string(),
            why,
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((SiteConfig::default(), String::new()))
            }
            Err(e) => return Err(err(e.to_string())),
        };
        let cfg: SiteConfig = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        let base = cfg.base_url.trim_end_matches('/');
        if !(base.is_empty() || base.starts_with("http://") || base.starts_with("https://")) {
            return Err(err(format!(
                "base_url `{}` must start with http:// or https://",
                cfg.base_url
            )));
        }
        if cfg.language.is_empty()
            || !cfg
                .language
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err(err(format!(
                "language `{}` is not a language tag",
                cfg.language
            )));
        }
        cfg.robots.check().map_err(err)?;
        let r = &cfg.render;
        if r.formula_bytes_max < 1024 || r.page_bytes_max < 64 * 1024 {
            return Err(err(
                "[render] formula_bytes_max must be 1024 or more and page_bytes_max 65536 or more"
                    .into(),
            ));
        }
        Ok((
            SiteConfig {
                base_url: base.to_owned(),
                ..cfg
            },
            text,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<SiteConfig, SiteConfigError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(DIR)).unwrap();
        std::fs::write(dir.path().join(DIR).join("site.toml"), text).unwrap();
        SiteConfig::load(dir.path()).map(|(c, _)| c)
    }

    #[test]
    fn defaults_when_absent_and_errors_name_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            SiteConfig::load(dir.path()).unwrap().0,
            SiteConfig::default()
        );
        let c = load("title = \"Garden\"\nbase_url = \"https://x.org/\"\n").unwrap();
        assert_eq!(c.title, "Garden");
        assert_eq!(c.base_url, "https://x.org");
        assert!(load("titel = \"x\"").unwrap_err().why.contains("titel"));
        assert!(load("base_url = \"x.org\"").is_err());
        assert!(load("language = \"en us\"").is_err());
    }

    #[test]
    fn render_budgets_are_read_and_checked() {
        let c = load("[render]\nmath_bytes_max = 1000000\ngraph_edges_max = 50\n").unwrap();
        assert_eq!(c.render.math_bytes_max, 1_000_000);
        assert_eq!(c.render.graph_edges_max, 50);
        assert_eq!(
            c.render.page_bytes_max,
            RenderLimits::default().page_bytes_max
        );
        assert!(load("[render]\npage_bytes_max = 10\n").is_err());
        let c = load("[robots]\nai_train = false\ndisallow = [\"GPTBot\"]\n").unwrap();
        assert_eq!(c.robots.ai_train, Some(false));
        assert!(load("[robots]\ndisallow = [\"a b\"]\n")
            .unwrap_err()
            .why
            .contains("product token"));
        assert!(load("[render]\nformula_bytes = 10\n")
            .unwrap_err()
            .why
            .contains("formula_bytes"));
    }
}
