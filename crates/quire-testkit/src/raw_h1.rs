//! Raw HTTP/1.1 on a socket, for tests that must see the bytes a server wrote:
//! responses parsed from a byte stream (`Content-Length` or chunked framing), and a
//! pipelined exchange on one connection.

use std::io::{Read, Write};
use std::time::Duration;

/// A parsed response: status, sorted lower-case fields, body.
pub type Raw = (u16, Vec<(String, String)>, Vec<u8>);

/// Responses parsed from a raw HTTP/1.1 byte stream (Content-Length framing only).
pub fn parse_responses(mut b: &[u8], head_only: bool) -> Vec<Raw> {
    let mut out = Vec::new();
    while let Some(end) = b.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&b[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let mut fields: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l.split_once(':').unwrap();
                (n.trim().to_ascii_lowercase(), v.trim().to_string())
            })
            .collect();
        fields.sort();
        let chunked = fields
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v == "chunked");
        if chunked && !head_only {
            let Some((body, used)) = dechunk(&b[end + 4..]) else {
                break;
            };
            b = &b[end + 4 + used..];
            out.push((status, fields, body));
            continue;
        }
        let len: usize = if head_only || status == 304 || status == 204 {
            0
        } else {
            fields
                .iter()
                .find(|(n, _)| n == "content-length")
                .map_or(0, |(_, v)| v.parse().unwrap())
        };
        if b.len() < end + 4 + len {
            break;
        }
        let body = b[end + 4..end + 4 + len].to_vec();
        b = &b[end + 4 + len..];
        out.push((status, fields, body));
    }
    out
}

/// A chunked body at the start of `b` (RFC 9112 §7.1, no trailers): the body and the
/// bytes it took, or `None` when it is not all there yet.
pub fn dechunk(mut b: &[u8]) -> Option<(Vec<u8>, usize)> {
    let start = b.len();
    let mut body = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap().trim(), 16)
            .expect("a chunk size");
        b = &b[eol + 2..];
        if size == 0 {
            if b.len() < 2 {
                return None;
            }
            assert_eq!(&b[..2], b"\r\n", "no trailers expected");
            return Some((body, start - b.len() + 2));
        }
        if b.len() < size + 2 {
            return None;
        }
        body.extend_from_slice(&b[..size]);
        assert_eq!(&b[size..size + 2], b"\r\n");
        b = &b[size + 2..];
    }
}

/// Sends `requests` on one connection in one write; reads until `n` responses.
pub async fn exchange(
    addr: std::net::SocketAddr,
    requests: String,
    n: usize,
) -> Vec<(u16, Vec<(String, String)>, Vec<u8>)> {
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(requests.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            let parsed = parse_responses(&got, requests.starts_with("HEAD"));
            if parsed.len() >= n {
                return parsed;
            }
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return parse_responses(&got, requests.starts_with("HEAD")),
                Ok(k) => got.extend_from_slice(&buf[..k]),
            }
        }
    })
    .await
    .unwrap()
}
