//! An origin's URL as the configuration writes it (`http://host[:port]` or
//! `https://host[:port]`), checked: plain data that the `[[origins]]` entries, the
//! `[cluster]` peers and the origin client all parse the same way.

use http::uri::{Authority, Scheme};

/// A bad origin URL in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("origin `{url}`: {why}")]
pub struct OriginUrlError {
    url: String,
    why: &'static str,
}

/// A checked origin URL: a scheme (`http` or `https`) and an authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginUrl {
    pub(crate) scheme: Scheme,
    pub(crate) authority: Authority,
}

impl OriginUrl {
    /// Checks an origin URL: `http://host[:port]` or `https://host[:port]`, with
    /// nothing after an optional `/`.
    pub fn parse(url: &str) -> Result<OriginUrl, OriginUrlError> {
        let err = |why| OriginUrlError {
            url: url.to_owned(),
            why,
        };
        let uri: http::Uri = url.parse().map_err(|_| err("not a URL"))?;
        let scheme = match uri.scheme_str() {
            Some("http") => Scheme::HTTP,
            Some("https") => Scheme::HTTPS,
            _ => return Err(err("the scheme must be http:// or https://")),
        };
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(err("an origin is scheme://host[:port], without a path"));
        }
        let authority = uri.authority().cloned().ok_or_else(|| err("no host"))?;
        if authority.as_str().contains('@') {
            return Err(err("an origin URL carries no user or password"));
        }
        Ok(OriginUrl { scheme, authority })
    }

    /// Whether the origin is reached over TLS.
    pub fn is_https(&self) -> bool {
        self.scheme == Scheme::HTTPS
    }

    /// The host: a name, or an address (an IPv6 one in brackets).
    pub fn host(&self) -> &str {
        self.authority.host()
    }

    /// The authority as written: host and optional port.
    pub fn authority(&self) -> &str {
        self.authority.as_str()
    }

    /// The port: the one given, else the scheme's (80 or 443).
    pub fn port(&self) -> u16 {
        let default = if self.is_https() { 443 } else { 80 };
        self.authority.port_u16().unwrap_or(default)
    }
}

impl std::fmt::Display for OriginUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.scheme, self.authority)
    }
}
