//! One `[[origins]]` entry of the configuration: its fields, defaults and checks.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConfigError, OriginUrl, Secs};

/// An origin among several (`[[origins]]`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OriginEntry {
    /// `http://host[:port]` or `https://host[:port]`.
    pub url: String,
    /// Its share of its pool's requests, against the other entries with the same
    /// `hosts` and `path_prefix` (1 to 1000).
    #[serde(default = "one")]
    pub weight: u32,
    /// The request hosts it serves (`example.com`, or `*.example.com` for every
    /// subdomain); empty (the default): every host no other entry names.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// The paths it serves: this prefix, on a segment boundary (`/api` takes `/api`
    /// and `/api/x`, not `/apix`). The path is sent as the client asked for it.
    #[serde(default = "root")]
    pub path_prefix: String,
    /// A path to GET every `health_interval` (active checks). Without it, only
    /// requests' failures mark the origin down (passive checks).
    #[serde(default)]
    pub health_path: Option<String>,
    /// Time between active checks; without `health_path`, how long an origin marked
    /// down is skipped before one request tries it again.
    #[serde(default = "five_seconds")]
    pub health_interval: Secs,
    /// Longest an active check may take.
    #[serde(default = "two_seconds")]
    pub health_timeout: Secs,
    /// The status an active check expects; by default any 2xx or 3xx.
    #[serde(default)]
    pub health_status: Option<u16>,
    /// Requests that fail in a row (connection failures, timeouts) before the origin
    /// is marked down. One failed active check marks it down at once.
    #[serde(default = "three")]
    pub max_fails: u32,
    /// Requests in flight to this origin at once; by default
    /// `limits.origin_connections`.
    #[serde(default)]
    pub max_connections: Option<usize>,
}

fn one() -> u32 {
    1
}

fn three() -> u32 {
    3
}

fn root() -> String {
    "/".into()
}

fn five_seconds() -> Secs {
    Secs(Duration::from_secs(5))
}

fn two_seconds() -> Secs {
    Secs(Duration::from_secs(2))
}

/// Longest weight: a pool's schedule has one slot per unit of weight.
const WEIGHT_MAX: u32 = 1000;

impl OriginEntry {
    /// An entry for `url` with every default.
    pub fn new(url: &str) -> OriginEntry {
        OriginEntry {
            url: url.into(),
            weight: one(),
            hosts: Vec::new(),
            path_prefix: root(),
            health_path: None,
            health_interval: five_seconds(),
            health_timeout: two_seconds(),
            health_status: None,
            max_fails: three(),
            max_connections: None,
        }
    }

    /// Whether `other` (an entry with the same URL) sets the server's own settings
    /// — health checks and connection limit — as this one does.
    pub(crate) fn same_server_settings(&self, other: &OriginEntry) -> bool {
        let key = |e: &OriginEntry| {
            (
                e.health_path.clone(),
                e.health_interval.0,
                e.health_timeout.0,
                e.health_status,
                e.max_fails,
                e.max_connections,
            )
        };
        key(self) == key(other)
    }

    /// Checks the entry alone (pools are checked together by `route`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        OriginUrl::parse(&self.url).map_err(|e| ConfigError::new(e.to_string()))?;
        let at = |why: String| Err(ConfigError::new(format!("origin {}: {why}", self.url)));
        if !(1..=WEIGHT_MAX).contains(&self.weight) {
            return at(format!("weight must be within 1..={WEIGHT_MAX}"));
        }
        if !self.path_prefix.starts_with('/') || has_unsafe_char(&self.path_prefix) {
            return at("path_prefix must start with / and hold no spaces or controls".into());
        }
        for h in &self.hosts {
            check_host(h).or_else(|why| at(format!("host `{h}`: {why}")))?;
        }
        if let Some(p) = &self.health_path {
            let ok = p.starts_with('/') && p.parse::<http::uri::PathAndQuery>().is_ok();
            if !ok || has_unsafe_char(p) {
                return at("health_path must be a path starting with /".into());
            }
        }
        if self.health_interval.0 < Duration::from_millis(100) {
            return at("health_interval must be at least 100ms".into());
        }
        if self.health_timeout.0.is_zero() {
            return at("health_timeout must be above 0".into());
        }
        if self
            .health_status
            .is_some_and(|s| !(100..=599).contains(&s))
        {
            return at("health_status must be an HTTP status (100..=599)".into());
        }
        if self.max_fails == 0 {
            return at("max_fails must be at least 1".into());
        }
        if self.max_connections == Some(0) {
            return at("max_connections must be at least 1".into());
        }
        Ok(())
    }
}

fn has_unsafe_char(s: &str) -> bool {
    s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// A host pattern: a name of letters, digits, `-` and `.`, optionally behind `*.`;
/// no port (routing reads the host without its port).
fn check_host(h: &str) -> Result<(), &'static str> {
    let name = h.strip_prefix("*.").unwrap_or(h);
    if name.is_empty() || name.starts_with('.') || name.ends_with('.') {
        return Err("not a host name");
    }
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    if !name.chars().all(ok) {
        return Err("a host is letters, digits, `-` and `.`, maybe after `*.`, without a port");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_needs_only_its_url() {
        let e: OriginEntry = toml::from_str("url = \"http://10.0.0.1:8080\"").unwrap();
        assert_eq!(e, OriginEntry::new("http://10.0.0.1:8080"));
        e.validate().unwrap();
    }

    #[test]
    fn bad_entries_are_refused_naming_the_origin() {
        let bad = [
            ("url = \"ftp://a\"", "scheme"),
            ("url = \"http://a\"\nweight = 0", "weight"),
            ("url = \"http://a\"\nweight = 1001", "weight"),
            ("url = \"http://a\"\npath_prefix = \"api\"", "path_prefix"),
            ("url = \"http://a\"\nhosts = [\"a.com:80\"]", "host"),
            ("url = \"http://a\"\nhosts = [\"a b\"]", "host"),
            ("url = \"http://a\"\nhosts = [\"*.\"]", "host"),
            ("url = \"http://a\"\nhealth_path = \"ping\"", "health_path"),
            ("url = \"http://a\"\nhealth_path = \"/a b\"", "health_path"),
            (
                "url = \"http://a\"\nhealth_interval = \"10ms\"",
                "health_interval",
            ),
            ("url = \"http://a\"\nhealth_status = 42", "health_status"),
            ("url = \"http://a\"\nmax_fails = 0", "max_fails"),
            ("url = \"http://a\"\nmax_connections = 0", "max_connections"),
        ];
        for (text, what) in bad {
            let e: OriginEntry = toml::from_str(text).unwrap();
            let why = e.validate().expect_err(text);
            assert!(why.reason().contains(what), "{text}: {why}");
        }
        assert!(toml::from_str::<OriginEntry>("url = \"http://a\"\nweigth = 2").is_err());
    }

    #[test]
    fn wildcard_and_plain_hosts_are_accepted() {
        let mut e = OriginEntry::new("https://a.example:8443");
        e.hosts = vec!["example.com".into(), "*.example.com".into()];
        e.health_path = Some("/healthz?full=1".into());
        e.validate().unwrap();
    }
}
