//! The warm-up pass and its check (a cold cache, or a single URL, measures misses or
//! one page, not the cache). Every URL is requested once, then again until the server says it was a
//! cache hit: quire in `Cache-Status` (`quire; hit`), the peers in `X-Cache: HIT`.
//! A server that says neither is counted as unknown, not as warm. Over TLS the
//! pass runs over HTTPS/1.1 (the harness's client checks the certificate against the
//! run's CA), and [`check_h2`] asks a sample again over HTTP/2 with curl: a server
//! whose HTTP/2 answers miss what HTTP/1.1 stored would measure misses.

use std::path::Path;
use std::process::Command;

use std::time::Duration;

use super::urls;

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Warmth {
    /// URLs whose second request was a hit.
    pub hits: usize,
    /// URLs whose answers say nothing about the cache.
    pub unknown: usize,
    /// URLs that failed (`path (status)`).
    pub failed: Vec<String>,
    /// URLs checked.
    pub urls: usize,
}

impl Warmth {
    /// Warnings for the report: URLs that were not hits, URLs that failed.
    pub(crate) fn warnings(&self, server: &str) -> Vec<String> {
        let mut w = Vec::new();
        if self.hits + self.unknown < self.urls {
            w.push(format!(
                "{server}: {} URLs were not cache hits after the warm-up: the run measures misses too",
                self.urls - self.hits - self.unknown
            ));
        }
        w.extend(self.failures(server));
        w
    }

    /// The warning for URLs that failed, if any did.
    pub(crate) fn failures(&self, server: &str) -> Option<String> {
        (!self.failed.is_empty()).then(|| {
            format!(
                "{server}: {} URLs failed: {}",
                self.failed.len(),
                self.failed
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }
}

/// What a response head (lower-cased) says about the cache: `Some(true)` for a hit,
/// `Some(false)` for anything else it names, `None` when it names nothing.
pub(crate) fn hit_in(head: &str) -> Option<bool> {
    let field = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    if let Some(cs) = field("cache-status:") {
        // RFC 9211: the first member is the cache nearest the origin; ours is last.
        let last = cs.rsplit(',').next().unwrap_or(cs).trim();
        return Some(last.split(';').any(|p| p.trim() == "hit"));
    }
    field("x-cache:").map(|x| x.eq_ignore_ascii_case("hit"))
}

/// Requests every path on `host` through `client` (asking for `accept_encoding`, as
/// the run will), then checks each is a hit, retrying a while: stores land just
/// after the answers stream.
pub(crate) fn warm(
    client: &urls::Client,
    host: &str,
    paths: &[String],
    accept_encoding: &str,
) -> anyhow::Result<Warmth> {
    let mut w = Warmth {
        urls: paths.len(),
        ..Warmth::default()
    };
    for p in paths {
        let _ = client.get(host, p, accept_encoding)?;
    }
    std::thread::sleep(Duration::from_millis(300));
    for p in paths {
        let mut tries = 0;
        loop {
            let (status, head, _) = client.get(host, p, accept_encoding)?;
            let hit = hit_in(&head);
            let ok = (200..400).contains(&status);
            if hit != Some(false) || tries == 10 || !ok {
                if !ok {
                    w.failed.push(format!("{p} ({status})"));
                }
                match hit {
                    Some(true) => w.hits += 1,
                    Some(false) => {}
                    None => w.unknown += 1,
                }
                break;
            }
            tries += 1;
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(w)
}

/// The warm-up of a `--signed-in` run: every path asked once with the session
/// `cookie` (a server that caches signed-in answers stores them), then once more,
/// counting the hits. A miss is retried (as [`warm`] retries) only when its
/// `Cache-Status` names an audience (quire caches it, it is not stored yet); a
/// server that never caches a signed-in answer gets no retries it would make for
/// nothing. URLs that were not hits are not a warning here; the report says how many
/// were.
pub(crate) fn warm_signed_in(
    client: &urls::Client,
    host: &str,
    paths: &[String],
    accept_encoding: &str,
    cookie: &str,
) -> anyhow::Result<Warmth> {
    let mut w = Warmth {
        urls: paths.len(),
        ..Warmth::default()
    };
    for p in paths {
        let _ = client.get_with_cookie(host, p, accept_encoding, Some(cookie))?;
    }
    std::thread::sleep(Duration::from_millis(300));
    for p in paths {
        let mut tries = 0;
        let (status, head) = loop {
            let (status, head, _) =
                client.get_with_cookie(host, p, accept_encoding, Some(cookie))?;
            // Retried only when the answer says it is an audience's (cacheable, not
            // stored yet): a bypass stays one.
            let audience_miss = hit_in(&head) == Some(false) && head.contains("audience-");
            if !audience_miss || tries == 10 {
                break (status, head);
            }
            tries += 1;
            std::thread::sleep(Duration::from_millis(200));
        };
        if !(200..400).contains(&status) {
            w.failed.push(format!("{p} ({status})"));
        }
        match hit_in(&head) {
            Some(true) => w.hits += 1,
            Some(false) => {}
            None => w.unknown += 1,
        }
    }
    Ok(w)
}

/// The mean size in bytes (head and body as sent, for cleartext) of `host`'s answers
/// to `paths`, asked once each for `accept_encoding`: the floor's response size.
pub(crate) fn mean_response_bytes(
    client: &urls::Client,
    host: &str,
    paths: &[String],
    accept_encoding: &str,
) -> anyhow::Result<usize> {
    anyhow::ensure!(!paths.is_empty(), "no URLs to size the floor's response by");
    let mut total = 0usize;
    for p in paths {
        let (_, head, body) = client.get(host, p, accept_encoding)?;
        // `head` is the status line and fields without the blank line's CRLF CRLF.
        total += head.len() + 4 + body.len();
    }
    Ok(total / paths.len())
}

/// URLs [`check_h2`] asks over HTTP/2.
pub(crate) const H2_SAMPLE: usize = 50;

/// What curl prints per URL: HTTP version, status, then the two cache fields.
const CURL_FORMAT: &str = "%{http_version} %{http_code} %header{cache-status}|%header{x-cache}\n";

/// Asks `paths` of `host` over HTTP/2 with TLS (curl, trusting `ca`, one connection)
/// and counts the hits; an answer that is not HTTP/2 or not 2xx/3xx is a failure.
/// `None` when curl is not installed.
pub(crate) fn check_h2(
    ca: &Path,
    host: &str,
    paths: &[String],
    accept_encoding: &str,
) -> anyhow::Result<Option<Warmth>> {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--http2", "--cacert"])
        .arg(ca)
        .arg("-H")
        .arg(format!("Accept-Encoding: {accept_encoding}"))
        .args(["-w", CURL_FORMAT]);
    for p in paths {
        cmd.args(["-o", "/dev/null"])
            .arg(format!("https://{host}{p}"));
    }
    let Ok(out) = cmd.output() else {
        return Ok(None);
    };
    let mut w = h2_warmth(&String::from_utf8_lossy(&out.stdout), paths);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        w.failed.push(format!("curl: {}", err.trim()));
    }
    Ok(Some(w))
}

/// Counts curl's lines (in the order of `paths`).
fn h2_warmth(stdout: &str, paths: &[String]) -> Warmth {
    let mut w = Warmth {
        urls: paths.len(),
        ..Warmth::default()
    };
    let mut lines = stdout.lines();
    for p in paths {
        let line = lines.next().unwrap_or("");
        let mut f = line.splitn(3, ' ');
        let (version, status) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
        let (cs, xc) = f.next().unwrap_or("").split_once('|').unwrap_or(("", ""));
        let status: u16 = status.parse().unwrap_or(0);
        if version != "2" || !(200..400).contains(&status) {
            w.failed.push(format!("{p} (HTTP/{version} {status})"));
        }
        let mut head = String::new();
        for (name, v) in [("cache-status", cs), ("x-cache", xc)] {
            if !v.trim().is_empty() {
                head.push_str(&format!("{name}: {}\r\n", v.trim().to_ascii_lowercase()));
            }
        }
        match hit_in(&head) {
            Some(true) => w.hits += 1,
            Some(false) => {}
            None => w.unknown += 1,
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_are_read_from_cache_status_or_x_cache() {
        assert_eq!(hit_in("cache-status: quire; hit\r\n"), Some(true));
        assert_eq!(hit_in("cache-status: quire; fwd=miss; stored"), Some(false));
        assert_eq!(
            hit_in("cache-status: origin; hit, quire; fwd=miss"),
            Some(false),
            "the origin's hit is not ours"
        );
        assert_eq!(hit_in("x-cache: HIT"), Some(true));
        assert_eq!(hit_in("x-cache: MISS"), Some(false));
        assert_eq!(hit_in("content-type: text/html"), None);
        let w = Warmth {
            hits: 8,
            unknown: 0,
            failed: vec!["/a (500)".into()],
            urls: 10,
        };
        let warnings = w.warnings("nginx");
        assert!(warnings[0].contains("2 URLs were not cache hits"));
        assert!(warnings[1].contains("/a (500)"));
    }

    #[test]
    fn curls_http2_lines_count_hits_and_protocol() {
        let paths: Vec<String> = ["/a", "/b", "/c", "/d"].map(String::from).to_vec();
        let out = "2 200 quire; hit|\n2 200 |HIT\n1.1 200 |MISS\n2 200 |\n";
        let w = h2_warmth(out, &paths);
        assert_eq!((w.hits, w.unknown, w.urls), (2, 1, 4));
        assert_eq!(w.failed, ["/c (HTTP/1.1 200)"]);
        let short = h2_warmth("", &paths[..1]);
        assert_eq!(short.failed.len(), 1, "a missing line is a failure");
    }
}
