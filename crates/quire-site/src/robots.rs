//! `/robots.txt` (RFC 9309), with the site's AI-usage signals from `[robots]` in
//! `site.toml`:
//!
//! ```toml
//! [robots]
//! search = true        # Content-Signal: search=yes
//! ai_input = true      # ai-input=yes (answers that quote or summarise the site)
//! ai_train = false     # ai-train=no (training or fine-tuning models)
//! disallow = ["GPTBot", "CCBot"]   # these crawlers: Disallow: /
//! ```
//!
//! The three signals are the Content Signals Policy's (contentsignals.org), written
//! as a `Content-Signal` line in the `User-agent: *` group; a signal left out is not
//! written (no statement either way). Each name in `disallow` gets a group of its own
//! that disallows everything. A `robots.txt` is a request, not a fence: crawlers
//! that ignore it are not stopped by it.
//!
//! Names are checked when the settings are read ([`RobotsConfig::check`]): product
//! tokens only (letters, digits, `-`, `_`, `.`), at most [`AGENTS_MAX`] of them, so
//! no setting can add a line of its own.

use serde::Deserialize;

/// Most crawler names `disallow` may list.
pub const AGENTS_MAX: usize = 256;

/// Longest crawler name.
const AGENT_BYTES_MAX: usize = 64;

/// `[robots]` in `site.toml`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct RobotsConfig {
    /// `search=`: building a search index and linking to the site.
    pub search: Option<bool>,
    /// `ai-input=`: using the site as input to an AI answer (retrieval, grounding).
    pub ai_input: Option<bool>,
    /// `ai-train=`: training or fine-tuning AI models.
    pub ai_train: Option<bool>,
    /// Crawlers (by `User-agent` product token) disallowed everything.
    pub disallow: Vec<String>,
}

impl RobotsConfig {
    /// `Err` naming the first bad setting.
    pub fn check(&self) -> Result<(), String> {
        if self.disallow.len() > AGENTS_MAX {
            return Err(format!(
                "[robots] disallow lists {} crawlers; at most {AGENTS_MAX}",
                self.disallow.len()
            ));
        }
        for name in &self.disallow {
            let token = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
            if name.is_empty() || name.len() > AGENT_BYTES_MAX || !name.bytes().all(token) {
                return Err(format!(
                    "[robots] disallow: `{}` is not a crawler's product token (letters, digits, - _ . and at most {AGENT_BYTES_MAX} bytes)",
                    name.escape_debug()
                ));
            }
        }
        Ok(())
    }

    /// The `Content-Signal` value, if any signal is set: e.g.
    /// `search=yes, ai-input=yes, ai-train=no`.
    fn signal(&self) -> Option<String> {
        let said: Vec<String> = [
            ("search", self.search),
            ("ai-input", self.ai_input),
            ("ai-train", self.ai_train),
        ]
        .into_iter()
        .filter_map(|(name, v)| v.map(|v| format!("{name}={}", if v { "yes" } else { "no" })))
        .collect();
        (!said.is_empty()).then(|| said.join(", "))
    }
}

/// `/robots.txt` under `cfg`, its sitemap at `base`.
pub fn robots_txt(cfg: &RobotsConfig, base: &str) -> String {
    let mut out = String::from("User-agent: *\n");
    if let Some(signal) = cfg.signal() {
        out.push_str(&format!("Content-Signal: {signal}\n"));
    }
    out.push_str("Disallow: /_views\nDisallow: /api/\n");
    for name in &cfg.disallow {
        out.push_str(&format!("\nUser-agent: {name}\nDisallow: /\n"));
    }
    out.push_str(&format!("\nSitemap: {base}/sitemap.xml\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_and_groups_are_written_as_set() {
        assert_eq!(
            robots_txt(&RobotsConfig::default(), "https://x.org"),
            "User-agent: *\nDisallow: /_views\nDisallow: /api/\n\nSitemap: https://x.org/sitemap.xml\n"
        );
        let cfg = RobotsConfig {
            search: Some(true),
            ai_input: None,
            ai_train: Some(false),
            disallow: vec!["GPTBot".into(), "CCBot".into()],
        };
        cfg.check().unwrap();
        assert_eq!(
            robots_txt(&cfg, "https://x.org"),
            "User-agent: *\nContent-Signal: search=yes, ai-train=no\nDisallow: /_views\nDisallow: /api/\n\n\
             User-agent: GPTBot\nDisallow: /\n\nUser-agent: CCBot\nDisallow: /\n\n\
             Sitemap: https://x.org/sitemap.xml\n"
        );
    }

    #[test]
    fn a_crawler_name_cannot_add_a_line() {
        for bad in ["Evil\nAllow: /", "two words", "", "a:b", &"x".repeat(65)] {
            let cfg = RobotsConfig {
                disallow: vec![bad.to_owned()],
                ..RobotsConfig::default()
            };
            assert!(cfg.check().is_err(), "{bad:?}");
        }
        let many = RobotsConfig {
            disallow: vec!["Bot".into(); AGENTS_MAX + 1],
            ..RobotsConfig::default()
        };
        assert!(many.check().is_err());
    }
}
