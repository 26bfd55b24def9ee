//! The exporter's HTTP/1.1 client: one `POST` of a batch to the collector, over
//! plain TCP or TLS, on the exporter's own thread, with one deadline for the whole
//! exchange (connect, send, answer). A collector that accepts and never reads
//! costs the exporter at most that deadline per batch and costs requests nothing:
//! they only ever offer spans to the queue (`crate::trace::export`).
//!
//! The connection is kept for the next batch when the answer said how long its
//! body was; anything else (an error, chunked or unframed answers, a deadline
//! passed) closes it. Blocking sockets with per-operation timeouts, rather than
//! the runtime: the exporter must not need the runtime it observes (a tokio-based
//! exporter on a busy or one-worker runtime is how other exporters stalled).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Uri;

/// Where and how batches are posted.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    host: String,
    port: u16,
    /// `Host` field value.
    authority: String,
    path: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    /// Extra request field lines, `name: value\r\n` each.
    extra: String,
}

/// Why an endpoint cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("tracing.endpoint `{url}`: {why}")]
pub(crate) struct EndpointError {
    url: String,
    why: String,
}

impl Endpoint {
    /// Reads `url` (`http://` or `https://`, a host, an optional port and path;
    /// the path defaults to OTLP's `/v1/traces`).
    pub(crate) fn parse(
        url: &str,
        headers: &std::collections::BTreeMap<String, String>,
        ca_file: Option<std::path::PathBuf>,
    ) -> Result<Endpoint, EndpointError> {
        let bad = |why: &str| EndpointError {
            url: redacted(url),
            why: why.to_owned(),
        };
        let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(bad("the scheme must be http or https")),
        };
        let auth = uri.authority().ok_or_else(|| bad("no host"))?;
        if auth.as_str().contains('@') {
            return Err(bad("credentials go in tracing.headers, not the URL"));
        }
        let host = auth.host().trim_start_matches('[').trim_end_matches(']');
        let port = auth.port_u16().unwrap_or(if https { 443 } else { 80 });
        let path = match uri.path_and_query().map(|p| p.as_str()) {
            None | Some("/" | "") => "/v1/traces".to_owned(),
            Some(p) => p.to_owned(),
        };
        let tls = if https {
            let cfg = crate::upstream::origin::https_client_config(ca_file)
                .map_err(|e| bad(&e.to_string()))?;
            Some(cfg)
        } else {
            None
        };
        let extra = headers.iter().fold(String::new(), |mut s, (n, v)| {
            s.push_str(n);
            s.push_str(": ");
            s.push_str(v);
            s.push_str("\r\n");
            s
        });
        Ok(Endpoint {
            host: host.to_owned(),
            port,
            authority: auth.as_str().to_owned(),
            path,
            tls,
            extra,
        })
    }
}

/// `url` with any credentials before an `@` of its authority replaced by `…`: an
/// error naming the endpoint goes to the log.
fn redacted(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) if !scheme.is_empty() => format!("{scheme}://…{}", &rest[at..]),
        Some(at) => format!("…{}", &rest[at..]),
        None => url.to_owned(),
    }
}

/// A connection to the collector.
enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => &s.sock,
        }
    }

    fn io(&mut self) -> &mut dyn ReadWrite {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => s.as_mut(),
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Posts batches to one endpoint, keeping the connection between them.
pub(crate) struct Poster {
    endpoint: Endpoint,
    conn: Option<Conn>,
}

/// An answer's head is read up to this size; a larger one is an error.
const HEAD_MAX: usize = 16 << 10;
/// An answer's body is read (to keep the connection) up to this size; a larger one
/// closes it.
const BODY_MAX: usize = 64 << 10;

impl Poster {
    /// A poster to `endpoint`; it connects on its first batch.
    pub(crate) fn new(endpoint: Endpoint) -> Poster {
        Poster {
            endpoint,
            conn: None,
        }
    }

    /// Posts `body` (OTLP JSON) within `timeout`; the answer's status.
    pub(crate) fn post(&mut self, body: &[u8], timeout: Duration) -> io::Result<u16> {
        let deadline = Instant::now() + timeout;
        let result = self.exchange(body, deadline);
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    fn exchange(&mut self, body: &[u8], deadline: Instant) -> io::Result<u16> {
        let head = format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nuser-agent: quire/{}\r\n{}\r\n",
            self.endpoint.path,
            self.endpoint.authority,
            body.len(),
            env!("CARGO_PKG_VERSION"),
            self.endpoint.extra,
        );
        let conn = match &mut self.conn {
            Some(c) => c,
            none => none.insert(connect(&self.endpoint, deadline)?),
        };
        write_all(conn, head.as_bytes(), deadline)?;
        write_all(conn, body, deadline)?;
        let (status, keep) = read_answer(conn, deadline)?;
        if !keep {
            self.conn = None;
        }
        Ok(status)
    }
}

/// Time left before `deadline`, or a timeout error.
fn left(deadline: Instant) -> io::Result<Duration> {
    let d = deadline.saturating_duration_since(Instant::now());
    if d.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the export's deadline passed",
        ));
    }
    Ok(d)
}

fn connect(ep: &Endpoint, deadline: Instant) -> io::Result<Conn> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
    for addr in (ep.host.as_str(), ep.port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, left(deadline)?) {
            Ok(s) => {
                s.set_nodelay(true)?;
                let Some(cfg) = &ep.tls else {
                    return Ok(Conn::Plain(s));
                };
                let name = rustls_pki_types::ServerName::try_from(ep.host.clone())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                let tls =
                    rustls::ClientConnection::new(cfg.clone(), name).map_err(io::Error::other)?;
                return Ok(Conn::Tls(Box::new(rustls::StreamOwned::new(tls, s))));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Writes `buf` whole, each write bounded by the time left.
fn write_all(conn: &mut Conn, mut buf: &[u8], deadline: Instant) -> io::Result<()> {
    while !buf.is_empty() {
        conn.tcp().set_write_timeout(Some(left(deadline)?))?;
        conn.tcp().set_read_timeout(Some(left(deadline)?))?;
        match conn.io().write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    conn.tcp().set_write_timeout(Some(left(deadline)?))?;
    conn.io().flush()
}

/// Reads the answer: its status, and whether the connection may be kept (its
/// body was framed by a length, and read).
fn read_answer(conn: &mut Conn, deadline: Instant) -> io::Result<(u16, bool)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        conn.tcp().set_read_timeout(Some(left(deadline)?))?;
        let n = match conn.io().read(&mut chunk) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut fields = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut fields);
        let parsed = resp
            .parse(&buf)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let httparse::Status::Complete(end) = parsed else {
            if buf.len() > HEAD_MAX {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "answer head too large",
                ));
            }
            continue;
        };
        let status = resp.code.unwrap_or(0);
        let length = framed_length(resp.headers);
        let rest = buf.len() - end;
        let keep = match length {
            Some(len) if len <= BODY_MAX => {
                discard(conn, len.saturating_sub(rest), deadline)?;
                true
            }
            _ => false,
        };
        return Ok((status, keep));
    }
}

/// The body's length when `Content-Length` gives it and nothing says close.
fn framed_length(fields: &[httparse::Header<'_>]) -> Option<usize> {
    let mut length = None;
    for f in fields {
        if f.name.eq_ignore_ascii_case("connection") && f.value.eq_ignore_ascii_case(b"close") {
            return None;
        }
        if f.name.eq_ignore_ascii_case("transfer-encoding") {
            return None;
        }
        if f.name.eq_ignore_ascii_case("content-length") {
            length = std::str::from_utf8(f.value).ok()?.trim().parse().ok();
        }
    }
    length
}

/// Reads and drops `n` bytes.
fn discard(conn: &mut Conn, mut n: usize, deadline: Instant) -> io::Result<()> {
    let mut chunk = [0u8; 4096];
    while n > 0 {
        conn.tcp().set_read_timeout(Some(left(deadline)?))?;
        let want = n.min(chunk.len());
        match conn.io().read(&mut chunk[..want]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => n -= k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<Endpoint, EndpointError> {
        Endpoint::parse(url, &Default::default(), None)
    }

    #[test]
    fn an_endpoint_gets_otlps_path_and_its_schemes_port() {
        let e = parse("http://collector:4318").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("collector", 4318, "/v1/traces")
        );
        let e = parse("http://[::1]/custom/traces").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("::1", 80, "/custom/traces")
        );
        assert!(e.tls.is_none());
    }

    #[test]
    fn an_unusable_endpoint_is_refused_saying_why() {
        for (url, why) in [
            ("collector:4318", "scheme"),
            ("ftp://collector", "scheme"),
            ("http://user:secret@collector", "credentials"),
            ("not a url", "URL"),
        ] {
            let e = parse(url)
                .err()
                .unwrap_or_else(|| panic!("{url} accepted"))
                .to_string();
            assert!(e.contains(why), "{url}: {e}");
            assert!(!e.contains("secret"), "credentials in an error: {e}");
        }
    }
}
