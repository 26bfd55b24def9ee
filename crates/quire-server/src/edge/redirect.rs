//! The plain-HTTP listener beside HTTPS (`listen_http`): every request is sent to
//! HTTPS with a `308 Permanent Redirect` to the same host and path (308, not 301:
//! a `POST` stays a `POST`), except ACME HTTP-01 challenges, answered from the
//! tokens [`crate::edge::tls`] holds while a certificate order is pending.
//!
//! Key decisions:
//! - **The target is the host the client asked for**, on the HTTPS port: the
//!   `Host` field must be a plain host (a name or an address, optionally a port)
//!   — no user info, no path, no spaces — or the answer is 400. A redirect never
//!   names a host the request did not.
//! - **Nothing here reaches the cache or the origin**; the listener has its own
//!   connection limits (`limits.connections` in all, `connections_per_client` for
//!   one client, over which it answers 429) and hyper's header limits and timeouts,
//!   so a flood on port 80 cannot take slots from HTTPS clients.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::edge::conns::Conns;
use crate::state::Ctx;

/// Where ACME HTTP-01 challenges are fetched (RFC 8555 §8.3).
const CHALLENGE_PREFIX: &str = "/.well-known/acme-challenge/";

/// Serves redirects on `listener` until `shutdown` resolves; `https_port` is where
/// they point.
pub(crate) async fn run(
    ctx: Arc<Ctx>,
    listener: TcpListener,
    https_port: u16,
    shutdown: impl Future<Output = ()>,
) {
    let start = ctx.policy();
    let limits = &start.cfg.limits;
    let permits = Arc::new(Semaphore::new(limits.connections));
    let per_client = Conns::new(limits.connections_per_client, start.trusted_proxies.clone());
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(limits.client_idle_timeout.0)
        .max_buf_size(limits.header_bytes.0.clamp(8192, 1 << 20) as usize);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed (plain HTTP)");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(admitted) = per_client.admit(peer.ip()) else {
            ctx.metrics.record_connection_refused();
            let _ = rustix::io::write(&stream, crate::edge::conns::TOO_MANY);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let ctx = ctx.clone();
        let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
            let resp = answer(&ctx, &req, https_port);
            async move { Ok::<_, Infallible>(resp) }
        });
        let conn = http1.serve_connection(TokioIo::new(stream), svc);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(admitted);
            drop(permit);
        });
    }
}

/// The answer to one plain-HTTP request.
fn answer<B>(ctx: &Ctx, req: &Request<B>, https_port: u16) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if let Some(token) = path.strip_prefix(CHALLENGE_PREFIX) {
        return match ctx.tls.as_ref().and_then(|t| t.http01(token)) {
            Some(key_authorization) => text(StatusCode::OK, key_authorization),
            None => text(StatusCode::NOT_FOUND, "no such challenge\n".into()),
        };
    }
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().host());
    let Some(host) = host.and_then(plain_host) else {
        return text(
            StatusCode::BAD_REQUEST,
            "bad request: a plain Host is needed to redirect to HTTPS\n".into(),
        );
    };
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let location = match https_port {
        443 => format!("https://{host}{target}"),
        port => format!("https://{host}:{port}{target}"),
    };
    match HeaderValue::from_str(&location) {
        Ok(v) => {
            let mut resp = text(
                StatusCode::PERMANENT_REDIRECT,
                format!("moved to {location}\n"),
            );
            resp.headers_mut().insert(header::LOCATION, v);
            resp
        }
        Err(_) => text(StatusCode::BAD_REQUEST, "bad request target\n".into()),
    }
}

/// The host part of a `Host` value that names only a host (and maybe a port): a
/// DNS name, an IPv4 address or a bracketed IPv6 one. `None` for anything else.
fn plain_host(value: &str) -> Option<&str> {
    let host = if let Some(rest) = value.strip_prefix('[') {
        let end = rest.find(']')?;
        &value[..end + 2]
    } else {
        value.rsplit_once(':').map_or(value, |(h, _)| h)
    };
    let port = &value[host.len()..];
    let port_ok = port.is_empty()
        || (port.len() > 1
            && port.starts_with(':')
            && port[1..].bytes().all(|b| b.is_ascii_digit()));
    let name_ok = if host.starts_with('[') {
        host.len() > 2
            && host[1..host.len() - 1]
                .parse::<std::net::Ipv6Addr>()
                .is_ok()
    } else {
        !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    };
    (port_ok && name_ok).then_some(host)
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Binds `addr` for the redirect listener.
pub(crate) async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_hosts_are_redirected_to() {
        assert_eq!(plain_host("example.com"), Some("example.com"));
        assert_eq!(plain_host("example.com:8080"), Some("example.com"));
        assert_eq!(plain_host("127.0.0.1:80"), Some("127.0.0.1"));
        assert_eq!(plain_host("[::1]:80"), Some("[::1]"));
        assert_eq!(plain_host("[::1]"), Some("[::1]"));
        for bad in [
            "",
            "evil.example/x",
            "user@evil.example",
            "a b",
            "example.com:",
            "example.com:8x",
            "[nope]",
            "[::1",
            "evil.example\\@good",
        ] {
            assert_eq!(plain_host(bad), None, "{bad:?}");
        }
    }
}
