//! The access log through a real server: lines for hits (fast path), misses and
//! passes with the fields the formats promise, reopen after a rotation, and a log
//! whose writes block (a FIFO nobody reads) that never holds a request.

use std::path::Path;
use std::time::Duration;

use quire_server::access_log::Format;
use quire_testkit::*;

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn metric(q: &Quire, name: &str) -> u64 {
    let mut text = String::new();
    if let Some(log) = &q.ctx.peek().access_log {
        log.write_metrics(&mut text);
    }
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in\n{text}"))
}

#[tokio::test]
async fn json_lines_for_a_miss_a_hit_and_a_pass() {
    let origin = Origin::start().await;
    origin.route(
        "/page",
        Route::ok("hello page", &[("cache-control", "max-age=60")]),
    );
    origin.route("/form", Route::ok("posted", &[]).status(201));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let p = path.clone();
    let mut q = Quire::start(&origin, move |c| {
        c.log.access = Some(p);
        c.log.format = Format::Json;
    })
    .await;
    let ua = ("user-agent", "test-agent/1.0");
    let referer = ("referer", "https://example.org/from");
    assert_eq!(
        send(&q, "GET", "/page", &[ua, referer], b"").await.status,
        200
    );
    settle(&q).await;
    let hit = send(&q, "GET", "/page", &[ua], b"").await;
    assert!(hit.cache_status().contains("hit"), "{}", hit.cache_status());
    assert_eq!(send(&q, "POST", "/form", &[ua], b"x=1").await.status, 201);
    q.shutdown().await;

    let lines = read_lines(&path);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let v: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    // The miss: through the service, with what the origin said.
    assert_eq!(v[0]["cache"], "miss");
    assert_eq!(v[0]["method"], "GET");
    assert_eq!(v[0]["target"], "/page");
    assert_eq!(v[0]["status"], 200);
    assert_eq!(v[0]["bytes"], 10);
    assert_eq!(v[0]["upstream_status"], 200);
    assert!(v[0]["upstream_time"].as_f64().unwrap() >= 0.0);
    assert_eq!(v[0]["referer"], "https://example.org/from");
    // The hit: answered by the fast path, no upstream.
    assert_eq!(v[1]["cache"], "hit");
    assert_eq!(v[1]["bytes"], 10);
    assert!(v[1]["upstream_status"].is_null());
    assert!(v[1]["referer"].is_null());
    // The pass.
    assert_eq!(v[2]["cache"], "pass");
    assert_eq!(v[2]["method"], "POST");
    assert_eq!(v[2]["status"], 201);
    assert_eq!(v[2]["upstream_status"], 201);
    for e in &v {
        assert_eq!(e["client"], "127.0.0.1");
        assert_eq!(e["user_agent"], "test-agent/1.0");
        assert_eq!(e["protocol"], "HTTP/1.1");
        assert!(e["duration"].as_f64().unwrap() >= 0.0);
        assert!(e["time"].as_str().unwrap().ends_with('Z'));
    }
}

#[tokio::test]
async fn combined_lines_go_to_the_new_file_after_a_reopen() {
    let origin = Origin::start().await;
    origin.route("/a", Route::ok("aaaa", &[("cache-control", "max-age=60")]));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let p = path.clone();
    let mut q = Quire::start(&origin, move |c| c.log.access = Some(p)).await;
    send(&q, "GET", "/a", &[("user-agent", "one")], b"").await;
    // Rotated as logrotate does: moved away, then the server told.
    let log = q.ctx.peek().access_log.clone().unwrap();
    assert!(
        wait_for(|| read_lines(&path).len() == 1).await,
        "first line written"
    );
    let rotated = dir.path().join("access.log.1");
    std::fs::rename(&path, &rotated).unwrap();
    log.reopen();
    assert!(wait_for(|| path.exists()).await, "reopened at the path");
    send(&q, "GET", "/a?x", &[("user-agent", "two")], b"").await;
    q.shutdown().await;

    let old = read_lines(&rotated);
    let new = read_lines(&path);
    assert_eq!(old.len(), 1, "{old:#?}");
    assert_eq!(new.len(), 1, "{new:#?}");
    assert!(old[0].starts_with("127.0.0.1 - - ["), "{}", old[0]);
    assert!(
        old[0].ends_with("\"GET /a HTTP/1.1\" 200 4 \"-\" \"one\" cache=miss"),
        "{}",
        old[0]
    );
    assert!(new[0].contains("\"GET /a?x HTTP/1.1\""), "{}", new[0]);
    assert!(new[0].ends_with("\"two\" cache=miss"), "{}", new[0]);
    assert_eq!(metric(&q, "quire_log_lines_total"), 2);
    assert_eq!(metric(&q, "quire_log_dropped_total"), 0);
}

/// The log's writes block for good (a FIFO whose reader never reads): requests
/// keep being answered, the lines past the queue are dropped and counted, and
/// shutdown does not wait on the blocked writer.
#[tokio::test]
async fn log_that_blocks_never_holds_a_request() {
    use std::os::unix::fs::OpenOptionsExt;
    let origin = Origin::start().await;
    origin.route("/h", Route::ok("x", &[("cache-control", "max-age=600")]));
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("log.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    // The reader: open, never read (the pipe fills at 64 KiB, then writes block).
    let _reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&fifo)
        .unwrap();
    let f = fifo.clone();
    let mut q = Quire::start(&origin, move |c| {
        c.log.access = Some(f);
        c.log.queue_bytes = quire_server::config::ByteSize(16 << 10);
    })
    .await;
    // Lines of ~4 KiB: 64 KiB of pipe and 16 KiB of queue hold about 20 of them.
    let ua = "a".repeat(4000);
    let headers = [("user-agent", ua.as_str())];
    for _ in 0..300 {
        let got = send(&q, "GET", "/h", &headers, b"").await;
        assert_eq!(got.status, 200);
    }
    let dropped = metric(&q, "quire_log_dropped_total");
    let written = metric(&q, "quire_log_lines_total");
    assert!(dropped >= 250, "dropped {dropped}, written {written}");
    assert!(
        written < 50,
        "written {written}: the pipe holds ~16 such lines"
    );
    let t = std::time::Instant::now();
    q.shutdown().await;
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "shutdown left the blocked writer behind"
    );
}

#[tokio::test]
async fn a_log_that_cannot_be_opened_is_a_start_up_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = quire_server::Config {
        origin: Some("http://127.0.0.1:9".into()),
        ..quire_server::Config::default()
    };
    cfg.cache.path = dir.path().join("c.vol");
    cfg.cache.size = quire_server::config::ByteSize(16 << 20);
    cfg.log.access = Some(dir.path().join("missing-dir/access.log"));
    let err = quire_server::Ctx::new(cfg).unwrap_err().to_string();
    assert!(
        err.contains("access log") && err.contains("missing-dir/access.log"),
        "{err}"
    );

    // A FIFO nobody reads: refused at once rather than hanging the start.
    let fifo = dir.path().join("nobody.fifo");
    if std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        let mut cfg = quire_server::Config {
            origin: Some("http://127.0.0.1:9".into()),
            ..quire_server::Config::default()
        };
        cfg.cache.path = dir.path().join("d.vol");
        cfg.cache.size = quire_server::config::ByteSize(16 << 20);
        cfg.log.access = Some(fifo);
        let err = quire_server::Ctx::new(cfg).unwrap_err().to_string();
        assert!(err.contains("no process has it open for reading"), "{err}");
    }
}

/// HTTP/2 requests are logged as such, with the body bytes the stream carried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_requests_are_logged_with_their_protocol() {
    use http_body_util::BodyExt;
    let origin = Origin::start().await;
    origin.route(
        "/h2",
        Route::ok("over h2", &[("cache-control", "max-age=60")]),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let p = path.clone();
    let mut q = Quire::start(&origin, move |c| {
        c.log.access = Some(p);
        c.log.format = Format::Json;
    })
    .await;
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    for _ in 0..2 {
        let req = http::Request::get(q.url("/h2"))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let resp = h2.request(req).await.unwrap();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"over h2");
        settle(&q).await;
    }
    q.shutdown().await;
    let lines = read_lines(&path);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let v: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v[0]["cache"], "miss");
    assert_eq!(v[1]["cache"], "hit");
    for e in &v {
        assert_eq!(e["protocol"], "HTTP/2.0");
        assert_eq!(e["target"], "/h2");
        assert_eq!(e["bytes"], 7);
    }
}

/// Requests refused before routing — ambiguous framing (the guard) and a head
/// hyper cannot parse — still get their line (status, the peer; `-` for what was
/// never parsed) and count in the metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_refused_before_routing_are_logged() {
    let origin = Origin::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let p = path.clone();
    let mut q = Quire::start(&origin, move |c| {
        c.log.access = Some(p);
        c.log.format = Format::Json;
    })
    .await;
    let smuggle: &'static [u8] = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\
        Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    let r = raw_async(q.addr, smuggle).await;
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    let r = raw_async(q.addr, b"GET /y HTTP/1.1\r\nHost h\r\n\r\n").await;
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    // Logged when the connection ends, which may be just after the client saw it.
    let errors = || {
        q.ctx
            .metrics
            .requests(quire_server::metrics::Outcome::Error)
    };
    assert!(wait_for(|| errors() == 2).await, "counted: {}", errors());
    q.shutdown().await;
    let lines = read_lines(&path);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["status"], 400, "{l}");
        assert_eq!(v["client"], "127.0.0.1", "{l}");
        assert_eq!(v["method"], "-", "{l}");
    }
}
