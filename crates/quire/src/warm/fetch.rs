//! One GET of `quire warm`: a blocking HTTP/1.1 exchange over `std::net` with
//! `Connection: close`, sent to the server being warmed whatever host the URL names
//! (the URL's host goes in `Host`, its scheme in `X-Forwarded-Proto`).
//!
//! A body is read to its end and dropped unless the caller keeps it (a sitemap), and
//! then only up to a cap: a warm run holds no more memory for a large page than for a
//! small one.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context};
use http::Uri;

/// The longest a request may take, connect to last byte.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The longest response head read.
const HEAD_MAX: usize = 64 * 1024;

/// What came back.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The status code.
    pub status: u16,
    /// `Cache-Status`, when the server sent one.
    pub cache_status: Option<String>,
    /// `Retry-After` in seconds, when sent as a number.
    pub retry_after: Option<u64>,
    /// The body, when asked for (cut at the cap).
    pub body: Vec<u8>,
    /// Whether the body was longer than the cap (and `body` is only its start).
    pub cut: bool,
}

/// GETs `url` from `server` (`host:port`); keeps up to `keep` body bytes.
pub(crate) fn get(server: &str, url: &Uri, keep: usize) -> anyhow::Result<Answer> {
    let (Some(scheme), Some(host)) = (url.scheme_str(), url.authority()) else {
        bail!("{url}: not an absolute http(s) URL");
    };
    let target = url.path_and_query().map_or("/", |p| p.as_str());
    let mut s = TcpStream::connect(server).with_context(|| format!("connecting to {server}"))?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nX-Forwarded-Proto: {scheme}\r\nAccept-Encoding: {}\r\nUser-Agent: quire-warm\r\nConnection: close\r\n\r\n",
        if keep > 0 { "identity" } else { "br, gzip" },
    )?;
    let (head, rest) = read_head(&mut s).with_context(|| format!("{url}: reading the answer"))?;
    let mut answer = parse_head(&head).with_context(|| format!("{url}: a malformed answer"))?;
    answer.body = rest;
    answer.cut = drain(&mut s, &mut answer.body, keep)
        .with_context(|| format!("{url}: reading the body"))?;
    Ok(answer)
}

/// Reads up to the end of the head; returns the head and the body bytes read with it.
fn read_head(s: &mut TcpStream) -> anyhow::Result<(String, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > HEAD_MAX {
            bail!("a head longer than {HEAD_MAX} bytes");
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            bail!("the connection closed before the head ended");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads the body to its end, keeping at most `keep` bytes of it in `body` (which
/// may hold its first bytes already); returns whether it was longer than that.
fn drain(s: &mut impl Read, body: &mut Vec<u8>, keep: usize) -> std::io::Result<bool> {
    let mut cut = body.len() > keep;
    body.truncate(keep);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(cut);
        }
        let room = keep.saturating_sub(body.len()).min(n);
        cut |= room < n;
        body.extend_from_slice(&chunk[..room]);
    }
}

/// The status line and the two fields warming reads.
fn parse_head(head: &str) -> anyhow::Result<Answer> {
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .context("no status line")?;
    let mut answer = Answer {
        status,
        cache_status: None,
        retry_after: None,
        body: Vec::new(),
        cut: false,
    };
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.eq_ignore_ascii_case("cache-status") {
            answer.cache_status = Some(value.trim().to_owned());
        } else if name.eq_ignore_ascii_case("retry-after") {
            answer.retry_after = value.trim().parse().ok();
        }
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_gives_its_status_cache_status_and_retry_after() {
        let a = parse_head("HTTP/1.1 429 Too Many Requests\r\nretry-after: 3\r\nCache-Status: quire; fwd=uri-miss; stored").unwrap();
        assert_eq!(a.status, 429);
        assert_eq!(a.retry_after, Some(3));
        assert_eq!(
            a.cache_status.as_deref(),
            Some("quire; fwd=uri-miss; stored")
        );
        assert!(parse_head("garbage").is_err());
    }

    #[test]
    fn a_body_past_the_cap_is_kept_up_to_it_and_said_to_be_cut() {
        let mut body = b"abc".to_vec();
        let cut = drain(&mut std::io::Cursor::new(vec![b'x'; 40_000]), &mut body, 10).unwrap();
        assert!(cut);
        assert_eq!(body, b"abcxxxxxxx");
        let mut body = b"abc".to_vec();
        assert!(!drain(&mut std::io::Cursor::new(b"def".to_vec()), &mut body, 10).unwrap());
        assert_eq!(body, b"abcdef");
        let mut body = b"abcdef".to_vec();
        assert!(drain(&mut std::io::Cursor::new(Vec::new()), &mut body, 4).unwrap());
        assert_eq!(body, b"abcd");
    }
}
