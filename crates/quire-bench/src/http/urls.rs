//! The URLs a run requests, and in which order: from the target's `sitemap.xml` or
//! a file, then uniform (every URL in turn, shuffled), Zipf (a few pages take most
//! requests, as real traffic does) or hot-set (a tenth of the pages).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How requests pick URLs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum Order {
    /// Every URL equally often.
    Uniform,
    /// Zipf with exponent 1 over the URLs (in sitemap order, shuffled).
    Zipf,
    /// A tenth of the URLs, uniformly.
    Hot,
}

/// `host:port` and path of an `http://` URL.
pub(crate) fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow::anyhow!("{url}: only http:// targets are supported"))?;
    let (host, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
    anyhow::ensure!(!host.is_empty(), "{url}: no host");
    let host = if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:80")
    };
    Ok((host, format!("/{path}")))
}

/// How the harness's own requests (probes, sitemap, warm-up) reach a server.
#[derive(Debug, Clone)]
pub(crate) enum Client {
    /// Cleartext HTTP/1.1.
    Plain,
    /// HTTP/1.1 over TLS, trusting the run's test CA (`--tls`).
    Tls(std::sync::Arc<rustls::ClientConfig>),
}

impl Client {
    /// `http` or `https`, for messages.
    pub(crate) fn scheme(&self) -> &'static str {
        match self {
            Client::Plain => "http",
            Client::Tls(_) => "https",
        }
    }

    /// One GET over a fresh connection asking for `accept_encoding` (`identity` to
    /// read the body): status, head (lower-cased), body (still encoded).
    pub(crate) fn get(
        &self,
        host: &str,
        path: &str,
        accept_encoding: &str,
    ) -> anyhow::Result<(u16, String, Vec<u8>)> {
        self.get_with_cookie(host, path, accept_encoding, None)
    }

    /// As [`Client::get`], with a `Cookie` field when `cookie` is given.
    pub(crate) fn get_with_cookie(
        &self,
        host: &str,
        path: &str,
        accept_encoding: &str,
        cookie: Option<&str>,
    ) -> anyhow::Result<(u16, String, Vec<u8>)> {
        let cookie = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: {accept_encoding}\r\n{cookie}Connection: close\r\n\r\n"
        );
        response(path, &self.exchange(host, request.as_bytes())?)
    }

    /// Sends `request` (whole, with `Connection: close`) over a fresh connection and
    /// returns the server's answer as it came, until the server closed.
    pub(crate) fn exchange(&self, host: &str, request: &[u8]) -> anyhow::Result<Vec<u8>> {
        let mut s = TcpStream::connect(host)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(match self {
            Client::Plain => {
                s.write_all(request)?;
                let mut raw = Vec::new();
                s.read_to_end(&mut raw)?;
                raw
            }
            Client::Tls(cfg) => tls_exchange(cfg, host, s, request)?,
        })
    }
}

/// Sends `request` over TLS on `sock` and reads until the server closes.
fn tls_exchange(
    cfg: &std::sync::Arc<rustls::ClientConfig>,
    host: &str,
    sock: TcpStream,
    request: &[u8],
) -> anyhow::Result<Vec<u8>> {
    let conn = rustls::ClientConnection::new(cfg.clone(), super::tls::server_name(host)?)?;
    let mut s = rustls::StreamOwned::new(conn, sock);
    s.write_all(request)?;
    s.flush()?;
    let mut raw = Vec::new();
    match s.read_to_end(&mut raw) {
        Ok(_) => {}
        // A server may close without close_notify after `Connection: close`: the
        // response is whole when its head was (the caller checks).
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e.into()),
    }
    Ok(raw)
}

/// Status, lower-cased head and de-chunked body of a whole response.
pub(crate) fn response(path: &str, raw: &[u8]) -> anyhow::Result<(u16, String, Vec<u8>)> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("{path}: no response head"))?;
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut body = raw[end + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    Ok((status, head, body))
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(p) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..p])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 || b.len() < p + 2 + size {
            break;
        }
        out.extend_from_slice(&b[p + 2..p + 2 + size]);
        b = &b[(p + 4 + size).min(b.len())..];
    }
    out
}

/// The paths of the `<loc>` entries of a sitemap.
pub(crate) fn sitemap_paths(xml: &str) -> Vec<String> {
    xml.split("<loc>")
        .skip(1)
        .filter_map(|s| s.split("</loc>").next())
        .map(|loc| {
            let loc = loc.trim().replace("&amp;", "&");
            match loc
                .strip_prefix("http://")
                .or_else(|| loc.strip_prefix("https://"))
            {
                Some(r) => r.find('/').map_or("/".to_owned(), |i| r[i..].to_owned()),
                None => loc,
            }
        })
        .filter(|p| p.starts_with('/'))
        .collect()
}

/// A deterministic generator (xorshift) for orders.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `len` requests over `urls` in `order` (seeded, so runs are comparable).
pub(crate) fn sequence(urls: &[String], order: Order, len: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed | 1);
    let mut shuffled: Vec<String> = urls.to_vec();
    for i in (1..shuffled.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        shuffled.swap(i, j);
    }
    let n = shuffled.len();
    if n == 0 {
        return Vec::new();
    }
    match order {
        Order::Uniform => (0..len).map(|i| shuffled[i % n].clone()).collect(),
        Order::Hot => {
            let hot = (n / 10).max(1);
            (0..len)
                .map(|_| shuffled[(rng.next() % hot as u64) as usize].clone())
                .collect()
        }
        Order::Zipf => {
            // Inverse CDF over harmonic weights 1/k.
            let mut cdf = Vec::with_capacity(n);
            let mut acc = 0.0;
            for k in 1..=n {
                acc += 1.0 / k as f64;
                cdf.push(acc);
            }
            (0..len)
                .map(|_| {
                    let x = rng.unit() * acc;
                    let i = cdf.partition_point(|&c| c < x).min(n - 1);
                    shuffled[i].clone()
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sitemaps_and_urls_parse() {
        let xml = "<urlset><url><loc>http://h:8/a</loc></url><url><loc>https://x.org/b?c=1&amp;d=2</loc></url><url><loc>http://h</loc></url></urlset>";
        assert_eq!(sitemap_paths(xml), ["/a", "/b?c=1&d=2", "/"]);
        assert_eq!(
            split_url("http://127.0.0.1:8080").unwrap(),
            ("127.0.0.1:8080".into(), "/".into())
        );
        assert_eq!(
            split_url("http://h/x/y").unwrap(),
            ("h:80".into(), "/x/y".into())
        );
        assert!(split_url("https://h/").is_err());
    }

    #[test]
    fn orders_have_their_shapes() {
        let urls: Vec<String> = (0..100).map(|i| format!("/{i}")).collect();
        let uni = sequence(&urls, Order::Uniform, 1000, 7);
        let count = |s: &[String], u: &str| s.iter().filter(|x| *x == u).count();
        assert!(urls.iter().all(|u| count(&uni, u) == 10));
        let hot = sequence(&urls, Order::Hot, 1000, 7);
        let distinct: std::collections::HashSet<_> = hot.iter().collect();
        assert!(distinct.len() <= 10);
        let zipf = sequence(&urls, Order::Zipf, 20_000, 7);
        let mut counts: Vec<usize> = urls.iter().map(|u| count(&zipf, u)).collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        // The top page takes about 1/H(100) ≈ 19 % of requests; the top ten about 56 %.
        let top1 = counts[0] as f64 / 20_000.0;
        let top10: usize = counts[..10].iter().sum();
        assert!((0.16..0.23).contains(&top1), "{top1}");
        assert!((0.50..0.62).contains(&(top10 as f64 / 20_000.0)), "{top10}");
        assert_eq!(
            sequence(&urls, Order::Zipf, 50, 7),
            sequence(&urls, Order::Zipf, 50, 7)
        );
    }
}
