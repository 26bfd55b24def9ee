//! Clients that stop reading: HTTP/2 streams whose flow-control window stays at zero
//! (`SETTINGS_INITIAL_WINDOW_SIZE = 0`, PINGs answered) and HTTP/1 sockets that never
//! read. Each must be reset after the send deadline, releasing what it held, and while
//! the hold lasts quire must keep answering other clients.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

use super::raw_origin::{Action, RawOrigin};
use super::wire::{self, connect_from};
use super::{Env, Outcome};

/// The send deadline the cases configure.
const SEND_STALL: Duration = Duration::from_secs(2);
/// Body size of the objects the stalled clients ask for (stored: under the 64 MiB
/// volume's object limit).
const BIG: usize = 256 * 1024;

/// Body size of the hit a never-reading HTTP/1 client asks for: more than the socket
/// buffers of both sides hold (Linux sends at most 4 MiB ahead by default), so
/// quire's write really stalls; stored in a 1 GiB volume (8 MiB regions).
const HUGE: usize = 7 << 20;

async fn big_origin() -> anyhow::Result<RawOrigin> {
    sized_origin(BIG).await
}

async fn sized_origin(size: usize) -> anyhow::Result<RawOrigin> {
    RawOrigin::start(Arc::new(move |_: &str| Action::Page { size })).await
}

/// Makes `paths` hits (the second miss stores, the third is a hit).
async fn prime(addr: SocketAddr, paths: &[String]) -> anyhow::Result<usize> {
    let mut hits = 0;
    for p in paths {
        for _ in 0..3 {
            let a = wire::get(addr, Ipv4Addr::LOCALHOST, p, "").await?;
            hits += usize::from(a.hit());
        }
    }
    Ok(hits)
}

/// An HTTP/2 connection from `from` whose streams' windows start, and stay, at zero.
async fn shut_window_conn(
    from: Ipv4Addr,
    to: SocketAddr,
) -> anyhow::Result<http2::SendRequest<Empty<Bytes>>> {
    let stream = connect_from(from, to).await?;
    let (send, conn) = http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(0)
        .handshake(TokioIo::new(stream))
        .await?;
    tokio::spawn(conn);
    Ok(send)
}

/// Whether a health check from `from` answers within five seconds.
async fn health_from(from: Ipv4Addr, to: SocketAddr) -> bool {
    let probe = wire::get(to, from, "/_quire/health", "");
    matches!(
        tokio::time::timeout(Duration::from_secs(5), probe).await,
        Ok(Ok(a)) if a.status == 200
    )
}

/// Zero-window HTTP/2 streams holding hits: reset after the send deadline; health from
/// another address and new objects meanwhile and after.
pub(crate) async fn h2_zero_window(env: &Env) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("h2_zero_window");
    let origin = big_origin().await?;
    let conns = env.scale.pick(8, 40);
    let toml = format!(
        "[limits]\nsend_stall = \"{}s\"\nconnections = {conns}\nclient_idle_timeout = \"5s\"\n",
        SEND_STALL.as_secs()
    );
    let proxy = env.proxy("h2_zero_window", &origin.url(), &toml).await?;
    let paths: Vec<String> = (0..8).map(|i| format!("/big-{i}")).collect();
    prime(proxy.addr, &paths).await?;
    let streams = env.scale.pick(10, 100);
    let began = Instant::now();
    let mut bodies = Vec::new();
    // Every connection slot taken by stalled clients from three addresses.
    for c in 0..conns {
        let from = Ipv4Addr::new(127, 0, 0, 2 + (c % 3) as u8);
        let Ok(mut send) = shut_window_conn(from, proxy.addr).await else {
            continue;
        };
        for s in 0..streams {
            let req = http::Request::get(format!("http://hostile.test{}", paths[s % paths.len()]))
                .body(Empty::new())?;
            match tokio::time::timeout(Duration::from_secs(5), send.send_request(req)).await {
                Ok(Ok(resp)) => bodies.push(resp.into_body()),
                _ => break,
            }
        }
    }
    out.figure("stalled_streams", bodies.len() as f64);
    let health = health_from(Ipv4Addr::new(127, 0, 0, 9), proxy.addr).await;
    out.check(health, || {
        "a health check from another address got no answer during the hold".into()
    });
    // Each stalled body must end (reset) soon after the deadline.
    let mut held_longest = Duration::ZERO;
    let mut never_reset = 0;
    let limit = SEND_STALL * 3 + Duration::from_secs(5);
    for mut body in bodies {
        let left = limit.saturating_sub(began.elapsed());
        match tokio::time::timeout(left, body.frame()).await {
            Ok(_) => held_longest = held_longest.max(began.elapsed()),
            Err(_) => never_reset += 1,
        }
    }
    out.figure("seconds_until_last_reset", held_longest.as_secs_f64());
    out.figure("streams_never_reset", f64::from(never_reset));
    out.check(never_reset == 0, || {
        format!("{never_reset} zero-window streams still held {limit:?} after they stalled (send deadline {SEND_STALL:?})")
    });
    let fresh: Vec<String> = (0..env.scale.pick(10, 100))
        .map(|i| format!("/fresh-{i}"))
        .collect();
    let hits = prime(proxy.addr, &fresh).await?;
    out.figure("new_objects_hit_after_reset", hits as f64);
    out.check(hits >= fresh.len() * 9 / 10, || {
        format!(
            "after the reset only {hits} of {} new objects became hits",
            fresh.len()
        )
    });
    Ok(out)
}

/// HTTP/1 sockets with a tiny receive buffer that never read a large hit: closed after
/// the send deadline, while another address is answered.
pub(crate) async fn h1_reader_that_never_reads(env: &Env) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("h1_reader_that_never_reads");
    let origin = sized_origin(HUGE).await?;
    let toml = format!("[limits]\nsend_stall = \"{}s\"\n", SEND_STALL.as_secs());
    let proxy = env
        .proxy_sized("h1_never_reads", &origin.url(), &toml, "1 GiB")
        .await?;
    let paths: Vec<String> = (0..4).map(|i| format!("/big-{i}")).collect();
    prime(proxy.addr, &paths).await?;
    let count = env.scale.pick(20, 200);
    let mut socks = Vec::new();
    for i in 0..count {
        let socket = TcpSocket::new_v4()?;
        socket.set_recv_buffer_size(4096)?;
        socket.bind(SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), 0)))?;
        let mut s = socket.connect(proxy.addr).await?;
        let req = format!(
            "GET {} HTTP/1.1\r\nhost: hostile.test\r\n\r\n",
            paths[i % paths.len()]
        );
        s.write_all(req.as_bytes()).await?;
        socks.push(s);
    }
    let health = health_from(Ipv4Addr::new(127, 0, 0, 9), proxy.addr).await;
    out.check(health, || {
        "a health check from another address got no answer during the hold".into()
    });
    tokio::time::sleep(SEND_STALL * 2 + Duration::from_secs(2)).await;
    // A socket quire gave up on ends before the whole answer; one it still serves
    // delivers all of it once read.
    let mut whole = 0;
    for mut s in socks {
        let mut got = 0usize;
        let mut buf = vec![0u8; 64 * 1024];
        let read_all = async {
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                got += n;
                if got > HUGE {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), read_all).await;
        whole += usize::from(got > HUGE);
    }
    out.figure("readers", count as f64);
    out.figure("still_served_after_deadline", whole as f64);
    out.check(whole == 0, || {
        format!("{whole} of {count} stalled HTTP/1 readers were still being served after the send deadline")
    });
    Ok(out)
}
