//! The requests, formatted once before the run: one `GET` per distinct path, all in
//! one buffer, and the sequence to send them in as indices into it (cycled). Sending
//! a request is a slice of that buffer: nothing is formatted or allocated per request.

use std::collections::HashMap;

/// Pre-formatted requests and their order.
#[derive(Debug, Clone)]
pub(crate) struct Requests {
    bytes: Vec<u8>,
    spans: Vec<(usize, usize)>,
    order: Vec<u32>,
}

fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).collect()
}

impl Requests {
    /// Requests for `paths` in that order (repeats share one formatted request), to
    /// `host` (the `Host` field), asking for `accept_encoding`, with a `Cookie` when
    /// given. Control characters are dropped from every value.
    pub(crate) fn new(
        paths: &[String],
        host: &str,
        accept_encoding: &str,
        cookie: Option<&str>,
    ) -> anyhow::Result<Requests> {
        Requests::build(paths, host, accept_encoding, cookie, "")
    }

    /// As [`Requests::new`], each asking the server to close the connection after
    /// its answer (`Connection: close`: the handshake runs).
    pub(crate) fn closing(
        paths: &[String],
        host: &str,
        accept_encoding: &str,
        cookie: Option<&str>,
    ) -> anyhow::Result<Requests> {
        Requests::build(
            paths,
            host,
            accept_encoding,
            cookie,
            "Connection: close\r\n",
        )
    }

    fn build(
        paths: &[String],
        host: &str,
        accept_encoding: &str,
        cookie: Option<&str>,
        extra: &str,
    ) -> anyhow::Result<Requests> {
        anyhow::ensure!(!paths.is_empty(), "no paths to request");
        anyhow::ensure!(paths.len() <= u32::MAX as usize, "too many paths");
        let mut bytes = Vec::new();
        let mut spans = Vec::new();
        let mut seen: HashMap<&str, u32> = HashMap::new();
        let mut order = Vec::with_capacity(paths.len());
        let (host, ae) = (clean(host), clean(accept_encoding));
        let cookie = cookie.map(|c| format!("Cookie: {}\r\n", clean(c)));
        for p in paths {
            let i = *seen.entry(p.as_str()).or_insert_with(|| {
                let start = bytes.len();
                let path: String = p.chars().filter(|c| !c.is_whitespace()).collect();
                bytes.extend_from_slice(
                    format!(
                        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: {ae}\r\n{}{extra}\r\n",
                        cookie.as_deref().unwrap_or("")
                    )
                    .as_bytes(),
                );
                spans.push((start, bytes.len()));
                (spans.len() - 1) as u32
            });
            order.push(i);
        }
        Ok(Requests {
            bytes,
            spans,
            order,
        })
    }

    /// The `n`-th request sent (the sequence cycles).
    pub(crate) fn nth(&self, n: u64) -> &[u8] {
        let (a, b) = self.spans[self.order[(n % self.order.len() as u64) as usize] as usize];
        &self.bytes[a..b]
    }

    /// Distinct requests.
    #[cfg(test)]
    pub(crate) fn distinct(&self) -> usize {
        self.spans.len()
    }
}

/// Paths from a file's text: one per line, blank lines and lines not starting with
/// `/` skipped.
pub(crate) fn paths_from(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('/'))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_formatted_once_and_cycled() {
        let paths = paths_from("/a\n\n/b c\nx\n/a\n");
        assert_eq!(paths, ["/a", "/b c", "/a"]);
        let r = Requests::new(&paths, "h:1", "gzip, br", Some("s=1\r\nX: y")).unwrap();
        assert_eq!(r.distinct(), 2);
        assert_eq!(
            r.nth(0),
            b"GET /a HTTP/1.1\r\nHost: h:1\r\nAccept-Encoding: gzip, br\r\nCookie: s=1X: y\r\n\r\n"
        );
        assert!(r.nth(1).starts_with(b"GET /bc HTTP/1.1\r\n"));
        assert_eq!(r.nth(2), r.nth(0));
        assert_eq!(r.nth(4), r.nth(1));
        let r = Requests::new(&paths, "h", "identity", None).unwrap();
        assert_eq!(
            r.nth(0),
            b"GET /a HTTP/1.1\r\nHost: h\r\nAccept-Encoding: identity\r\n\r\n"
        );
        assert!(Requests::new(&[], "h", "x", None).is_err());
        let r = Requests::closing(&paths, "h", "gzip", None).unwrap();
        assert_eq!(
            r.nth(0),
            b"GET /a HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
        );
    }
}
