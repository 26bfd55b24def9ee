//! One GET of `quire warm`: a blocking HTTP/1.1 exchange over `std::net` with
//! `Connection: close`, sent to the server being warmed whatever host the URL names
//! (the URL's host goes in `Host`).
//!
//! - **Plain HTTP** (`--server http://...`): the URL's scheme goes in
//!   `X-Forwarded-Proto`, which counts when quire trusts the address warm connects
//!   from (see docs/admin.md).
//! - **HTTPS** (`--server https://...`): TLS to the server, with the URL's host as
//!   the server name (SNI), so quire presents that site's certificate, and the
//!   certificate checked against it (the system's roots plus `--ca-file`): warming
//!   goes through the front door readers use, and its requests are keyed `https`
//!   as theirs are.
//!
//! A body is read to its end and dropped unless the caller keeps it (a sitemap), and
//! then only up to a cap: a warm run holds no more memory for a large page than for a
//! small one.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
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

/// The server being warmed: where to connect, and how.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// `host:port`.
    pub addr: String,
    /// TLS, for an `https://` server.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Server {
    /// `--server` (`http://host:port` or `https://host:port`), with `ca_file` trusted
    /// for an HTTPS one besides the system's roots.
    pub(crate) fn parse(server: &str, ca_file: Option<&std::path::Path>) -> anyhow::Result<Server> {
        let (addr, https) = match (
            server.strip_prefix("http://"),
            server.strip_prefix("https://"),
        ) {
            (Some(a), _) => (a, false),
            (_, Some(a)) => (a, true),
            _ => bail!("--server must be http://host:port or https://host:port"),
        };
        let addr = addr.trim_end_matches('/').to_owned();
        if !https {
            if ca_file.is_some() {
                bail!("--ca-file is for an https:// server");
            }
            return Ok(Server { addr, tls: None });
        }
        let config = quire_server::upstream::origin::https_client_config(ca_file.map(Into::into))
            .context("the TLS client for --server")?;
        Ok(Server {
            addr,
            tls: Some(config),
        })
    }
}

/// A connection to the server, plain or TLS.
enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            // A server that closes without `close_notify` has still sent a whole
            // `Connection: close` answer; the framing is checked by the caller.
            Conn::Tls(s) => match s.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            },
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

/// Connects to `server`, with TLS for `host` (the URL's host, without its port)
/// when the server is HTTPS.
fn connect(server: &Server, host: &str) -> anyhow::Result<Conn> {
    let tcp = TcpStream::connect(&server.addr)
        .with_context(|| format!("connecting to {}", server.addr))?;
    tcp.set_read_timeout(Some(TIMEOUT))?;
    tcp.set_write_timeout(Some(TIMEOUT))?;
    let Some(config) = &server.tls else {
        return Ok(Conn::Plain(tcp));
    };
    let name = rustls_pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_owned())
        .with_context(|| format!("{host:?} is not a TLS server name"))?;
    let conn =
        rustls::ClientConnection::new(config.clone(), name).context("starting the TLS session")?;
    Ok(Conn::Tls(Box::new(rustls::StreamOwned::new(conn, tcp))))
}

/// GETs `url` from `server`; keeps up to `keep` body bytes.
pub(crate) fn get(server: &Server, url: &Uri, keep: usize) -> anyhow::Result<Answer> {
    let (Some(scheme), Some(authority)) = (url.scheme_str(), url.authority()) else {
        bail!("{url}: not an absolute http(s) URL");
    };
    let target = url.path_and_query().map_or("/", |p| p.as_str());
    let mut s = connect(server, authority.host())?;
    // Over TLS the scheme is the connection's own.
    let proto = match server.tls {
        None => format!("X-Forwarded-Proto: {scheme}\r\n"),
        Some(_) => String::new(),
    };
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {authority}\r\n{proto}Accept-Encoding: {}\r\nUser-Agent: quire-warm\r\nConnection: close\r\n\r\n",
        if keep > 0 { "identity" } else { "br, gzip" },
    )
    .with_context(|| format!("{url}: sending the request"))?;
    let (head, rest) = read_head(&mut s).with_context(|| format!("{url}: reading the answer"))?;
    let mut answer = parse_head(&head).with_context(|| format!("{url}: a malformed answer"))?;
    answer.body = rest;
    answer.cut = drain(&mut s, &mut answer.body, keep)
        .with_context(|| format!("{url}: reading the body"))?;
    Ok(answer)
}

/// Reads up to the end of the head; returns the head and the body bytes read with it.
fn read_head(s: &mut impl Read) -> anyhow::Result<(String, Vec<u8>)> {
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
