//! The budget for uncached work against a crowd, end to end: the real `quire proxy`
//! binary in front of a slow origin, and a crowd of source addresses from
//! 127.0.0.0/8 (all loopback) asking for new URLs as fast as they are answered,
//! directly and through a trusted proxy's `X-Forwarded-For`. A reader of another
//! network is served while the crowd waits, after at most one turn of each of the
//! crowd's networks, and the origin never sees more than the budget's slots.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Process, QUIRE};
use quire_testkit::{
    direct_crowd, forwarded_crowd, get_from, metric, raw, run_crowd, Origin, Route,
};

const TOKEN: &str = "crowd-test-admin-token-0123456789abcdef";
const SLOTS: usize = 2;
const NETS: u8 = 6;
const PER_NET: u8 = 6;

/// `quire_budget_waiting` of everyone's class, read from the admin API.
async fn waiting(q: SocketAddr) -> usize {
    let request = format!(
        "GET /_quire/metrics HTTP/1.1\r\nHost: site.test\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    let text = tokio::task::spawn_blocking(move || raw(q, request.as_bytes()))
        .await
        .unwrap();
    metric(&text, "quire_budget_waiting{class=\"everyone\"}") as usize
}

/// `quire proxy` in front of `origin`, one budget of [`SLOTS`], trusting
/// 127.0.0.1's `X-Forwarded-For`.
fn proxy(dir: &Path, origin: &str) -> Process {
    let config = dir.join("quire.toml");
    std::fs::write(
        &config,
        format!(
            "admin_token = \"{TOKEN}\"\ntrusted_proxies = [\"127.0.0.1\"]\n\
             [budget]\nslots = {SLOTS}\nqueue_timeout = \"60s\"\nqueue_per_client = 2\n\
             [rate_limit]\nmisses_per_sec = 0\n\
             [limits]\nconnections_per_client = 100000\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new(QUIRE);
    cmd.args(["proxy", "--origin", origin, "--listen", "127.0.0.1:0"])
        .arg("--config")
        .arg(&config)
        .arg("--cache")
        .arg(dir.join("proxy.vol"))
        .args(["--cache-size", "16MiB", "--workers", "2"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    Process::start(&mut cmd)
}

/// The crowd asks, then a reader of another network misses once: see the module
/// documentation.
fn a_reader_is_served_within_a_turn_per_network(forwarded: bool) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let origin = Origin::start().await;
        origin.fallback(
            Route::ok("a page", &[("cache-control", "max-age=600")])
                .delay(Duration::from_millis(30)),
        );
        let dir = tempfile::tempdir().unwrap();
        let q = proxy(dir.path(), &origin.url());
        let members = if forwarded {
            forwarded_crowd(NETS, PER_NET)
        } else {
            direct_crowd(NETS, PER_NET)
        };
        let size = members.len();
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = run_crowd(q.addr, members, stop.clone());
        // Most of the crowd queued behind the slots.
        let deadline = Instant::now() + Duration::from_secs(60);
        while waiting(q.addr).await < size {
            assert!(
                Instant::now() < deadline,
                "the crowd never filled the queue"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let before = origin.seen_all().len();
        let via = [("x-forwarded-for", "198.51.100.7")];
        let (reader, carried): (_, &[(&str, &str)]) = if forwarded {
            (IpAddr::from([127, 0, 0, 1]), &via)
        } else {
            (IpAddr::from([127, 200, 0, 1]), &[])
        };
        let got = get_from(reader, q.addr, "/reader/page", carried).await;
        stop.store(true, Ordering::Relaxed);
        assert_eq!(got.status, 200, "{}", got.head);
        let seen = origin.seen_all();
        let ahead = seen[before..]
            .iter()
            .position(|s| s.uri == "/reader/page")
            .expect("the reader's fill reached the origin");
        // One turn of each crowd network after the reader queued, and what was
        // granted before it did; first come, first served it would wait behind the
        // whole queue (72 requests).
        let bound = usize::from(NETS) + 2 * SLOTS + 2;
        assert!(
            ahead <= bound,
            "{ahead} crowd requests reached the origin before the reader's (at most {bound})"
        );
        let mut statuses = Vec::new();
        for t in tasks {
            statuses.extend(t.await.unwrap());
        }
        assert!(
            origin.in_flight_max() <= SLOTS,
            "{} at once at the origin",
            origin.in_flight_max()
        );
        assert!(
            statuses.iter().all(|s| matches!(s, 200 | 503)),
            "{statuses:?}"
        );
    });
}

#[test]
fn budget_a_crowd_of_addresses_against_the_binary_leaves_a_reader_its_turn() {
    a_reader_is_served_within_a_turn_per_network(false);
}

#[test]
fn budget_a_crowd_behind_a_trusted_proxy_against_the_binary_leaves_a_reader_its_turn() {
    a_reader_is_served_within_a_turn_per_network(true);
}
