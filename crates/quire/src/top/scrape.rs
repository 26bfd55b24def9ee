//! One scrape of a running quire's `/_quire/metrics`: a blocking HTTP/1.0 exchange
//! over `std::net` (the admin API is on a trusted address; HTTP/1.0 so the body is
//! never chunked), and the Prometheus text parsed into its samples.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// The largest metrics text read (a scrape is tens of KB).
const BYTES_MAX: u64 = 8 << 20;

/// Every sample of one scrape, by series (`name{labels}` as written), and when it
/// was taken.
#[derive(Debug, Clone, Default)]
pub(crate) struct Samples {
    pub(crate) at: Option<Instant>,
    values: HashMap<String, f64>,
}

impl Samples {
    /// The value of `series` (`quire_fills_in_flight`, `quire_requests_total{cache="hit"}`).
    pub(crate) fn get(&self, series: &str) -> Option<f64> {
        self.values.get(series).copied()
    }

    /// Every series of family `name` (its samples whose name is `name` exactly, any
    /// labels), with its labels' text.
    pub(crate) fn family<'a>(&'a self, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
        self.values.iter().filter_map(move |(k, v)| {
            let rest = k.strip_prefix(name)?;
            if rest.is_empty() {
                return Some(("", *v));
            }
            let labels = rest.strip_prefix('{')?.strip_suffix('}')?;
            Some((labels, *v))
        })
    }
}

/// Parses the Prometheus text format: `series value [timestamp]` lines, comments and
/// blank lines skipped, a line that does not parse skipped.
pub(crate) fn parse(text: &str) -> Samples {
    let mut values = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // The series ends at the last space before the value (label values may hold
        // spaces, so split from the end).
        let mut parts = line.rsplitn(3, ' ');
        let (Some(a), Some(b)) = (parts.next(), parts.next()) else {
            continue;
        };
        let (series, value) = match parts.next() {
            // `series value timestamp`, unless the series itself held the space.
            Some(s)
                if a.parse::<i64>().is_ok() && b.parse::<f64>().is_ok() && !s.ends_with('\\') =>
            {
                (s, b)
            }
            _ => (line[..line.len() - a.len()].trim_end(), a),
        };
        if let Ok(v) = value.parse::<f64>() {
            values.insert(series.to_owned(), v);
        }
    }
    Samples { at: None, values }
}

/// Fetches and parses the metrics of the quire at `authority` (`host:port`).
pub(crate) fn scrape(authority: &str, token: &str) -> anyhow::Result<Samples> {
    let body = get(authority, token, "/_quire/metrics")?;
    let mut samples = parse(&body);
    samples.at = Some(Instant::now());
    Ok(samples)
}

/// URLs with their estimated counts, most first.
pub(crate) type Counted = Vec<(String, u64)>;

/// The URLs missing most and the hottest, lately (`GET /_quire/top`), `n` of each.
pub(crate) fn top_urls(
    authority: &str,
    token: &str,
    n: usize,
) -> anyhow::Result<(Counted, Counted)> {
    let body = get(authority, token, &format!("/_quire/top?n={n}"))?;
    let v: serde_json::Value = serde_json::from_str(&body).context("the top URLs' JSON")?;
    let list = |k: &str| -> Counted {
        v[k].as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| Some((e["url"].as_str()?.to_owned(), e["count"].as_u64()?)))
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok((list("missing"), list("hot")))
}

/// The body of `GET path` on `authority` with `token`, or why not.
fn get(authority: &str, token: &str, path: &str) -> anyhow::Result<String> {
    let mut s =
        TcpStream::connect(authority).with_context(|| format!("connecting to {authority}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.take(BYTES_MAX)
        .read_to_end(&mut raw)
        .context("reading the answer")?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    match status {
        "200" => Ok(body.to_owned()),
        "401" => bail!("the admin token was refused (HTTP 401)"),
        "403" => bail!("the admin API is off: set admin_token in the server's config (HTTP 403)"),
        s => bail!("GET {path}: HTTP {s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_is_read() {
        let s = parse(
            "# HELP x y\n# TYPE quire_requests_total counter\nquire_requests_total{cache=\"hit\"} 12\n\
             quire_uptime_seconds 3.5\nbad line\nquire_x{a=\"b c\"} 7 1700000000000\n",
        );
        assert_eq!(s.get("quire_requests_total{cache=\"hit\"}"), Some(12.0));
        assert_eq!(s.get("quire_uptime_seconds"), Some(3.5));
        assert_eq!(s.get("quire_x{a=\"b c\"}"), Some(7.0));
        let fam: Vec<_> = s.family("quire_requests_total").collect();
        assert_eq!(fam, vec![("cache=\"hit\"", 12.0)]);
    }
}
