//! What a burst of unique large misses costs in compression: 48 concurrent misses
//! of a 6 MB text page with unique query strings, then the CPU-seconds the
//! compression threads spend and the wall time until the pool is idle, with the
//! CPU limits off (the behaviour before them) and at their defaults.
//!
//! A measurement, not a check: run it in release, on an otherwise quiet machine for
//! the wall time (CPU-seconds are read from the threads' own clocks and
//! `/proc/self/stat`, so they hold on a busy one):
//!
//! ```text
//! cargo test --release -p quire-server --test compress_burst -- --ignored --nocapture
//! ```
//!
//! The bound itself is checked without timing: the pool's own unit tests shed
//! background work past the CPU bucket and downgrade large bodies.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use quire_server::config::{ByteSize, Secs};
use quire_testkit::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MISSES: usize = 48;
const BODY_BYTES: usize = 6_000_000;

/// An origin answering every GET with the same cacheable text page.
async fn page_origin(body: Bytes) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.clear();
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\
                         Cache-Control: max-age=600\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    if s.write_all(head.as_bytes()).await.is_err()
                        || s.write_all(&body).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

/// The process's user + system CPU time (`/proc/self/stat`, clock ticks of 10 ms).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // Fields 14 and 15 of the file; 12 and 13 after the command name.
    Duration::from_millis((f.get(11).unwrap_or(&0) + f.get(12).unwrap_or(&0)) * 10)
}

fn compress_cpu(q: &Quire) -> f64 {
    let mut text = String::new();
    q.ctx.compress.write_metrics(&mut text);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("quire_compress_cpu_seconds_total ")?
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

async fn burst(limits_off: bool) {
    let origin_url = page_origin(Bytes::from(page(BODY_BYTES))).await;
    let dummy = Origin::start().await;
    let q = Quire::start(&dummy, move |c| {
        c.origin = Some(origin_url);
        c.cache.size = ByteSize(1 << 30);
        c.rate_limit.misses_per_sec = 0.0;
        if limits_off {
            c.encodings.large_bytes = ByteSize(u64::MAX);
            c.encodings.background_cpu_burst = Secs(Duration::from_secs(1_000_000));
            c.encodings.background_cpu_share = 64.0;
        }
    })
    .await;
    let q = Arc::new(q);
    let (cpu0, t0) = (process_cpu(), Instant::now());
    let tasks: Vec<_> = (0..MISSES)
        .map(|i| {
            let url = q.url(&format!("/big?u={i}"));
            tokio::spawn(async move {
                let r = client().get(url.parse().unwrap()).await.unwrap();
                http_body_util::BodyExt::collect(r.into_body())
                    .await
                    .unwrap();
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let answered = t0.elapsed();
    while q.ctx.compress.held_bytes() > 0 && t0.elapsed() < Duration::from_secs(600) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let idle = t0.elapsed();
    let mut text = String::new();
    q.ctx.compress.write_metrics(&mut text);
    let pick = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    println!(
        "{}: answered in {:.1} s, compression idle after {:.1} s; compression CPU {:.1} s, \
         process CPU {:.1} s; jobs {}, shed {}, downgraded {}",
        if limits_off { "limits off" } else { "defaults" },
        answered.as_secs_f64(),
        idle.as_secs_f64(),
        compress_cpu(&q),
        (process_cpu() - cpu0).as_secs_f64(),
        q.ctx.compress.done(),
        pick("quire_compress_shed_total"),
        pick("quire_compress_downgraded_total"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
async fn a_burst_of_unique_large_misses_costs_bounded_compression_cpu() {
    burst(true).await;
    burst(false).await;
}
