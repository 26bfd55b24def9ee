//! OpenTelemetry traces (`[tracing]`) against a real quire, a real origin and a
//! collector that reads OTLP/HTTP JSON off a real socket: the spans of a miss, a
//! hit and a purge and how they nest, `traceparent` sent to the origin and
//! followed only from a trusted proxy, and the attack this section invites — a
//! collector that accepts and never reads, or is down — answered without a
//! request ever waiting on it, its dropped spans counted.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quire_server::config::Secs;
use quire_testkit::raw_h1::exchange;
use quire_testkit::*;

/// One span as the collector received it.
#[derive(Debug, Clone)]
struct Got {
    trace: String,
    id: String,
    parent: Option<String>,
    name: String,
    kind: u64,
    attrs: HashMap<String, serde_json::Value>,
}

impl Got {
    fn attr(&self, k: &str) -> Option<&serde_json::Value> {
        self.attrs.get(k)
    }
    fn str_attr(&self, k: &str) -> Option<&str> {
        self.attr(k)?.get("stringValue")?.as_str()
    }
}

/// An OTLP/HTTP collector on a loopback port: answers each `POST` 200 and keeps
/// the spans.
struct Collector {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Got>>>,
}

impl Collector {
    fn start() -> Collector {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(conn) = conn else { return };
                let kept = kept.clone();
                std::thread::spawn(move || serve(conn, &kept));
            }
        });
        Collector { addr, spans }
    }

    fn spans(&self) -> Vec<Got> {
        self.spans.lock().unwrap().clone()
    }

    async fn wait_for(&self, what: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        assert!(
            wait_for(|| what(&self.spans())).await,
            "never collected: {:#?}",
            self.spans()
        );
        self.spans()
    }
}

fn serve(mut conn: std::net::TcpStream, kept: &Mutex<Vec<Got>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        assert!(head.starts_with("post /v1/traces http/1.1"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert!(head.contains("x-api-key: k1"), "{head}");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        while buf.len() < end + 4 + len {
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: serde_json::Value = serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap();
        kept.lock().unwrap().extend(parse(&body));
        buf.drain(..end + 4 + len);
        let ok =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        if conn.write_all(ok).is_err() {
            return;
        }
    }
}

fn parse(body: &serde_json::Value) -> Vec<Got> {
    let rs = &body["resourceSpans"][0];
    assert_eq!(
        rs["resource"]["attributes"][0]["value"]["stringValue"],
        "quire-test"
    );
    let spans = rs["scopeSpans"][0]["spans"].as_array().unwrap();
    spans
        .iter()
        .map(|s| {
            let start: u64 = s["startTimeUnixNano"].as_str().unwrap().parse().unwrap();
            let end: u64 = s["endTimeUnixNano"].as_str().unwrap().parse().unwrap();
            assert!(start <= end && start > 1_600_000_000_000_000_000, "{s}");
            Got {
                trace: s["traceId"].as_str().unwrap().to_owned(),
                id: s["spanId"].as_str().unwrap().to_owned(),
                parent: s["parentSpanId"].as_str().map(str::to_owned),
                name: s["name"].as_str().unwrap().to_owned(),
                kind: s["kind"].as_u64().unwrap(),
                attrs: s["attributes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| (a["key"].as_str().unwrap().to_owned(), a["value"].clone()))
                    .collect(),
            }
        })
        .collect()
}

fn traced(c: &Collector, ratio: f64) -> impl FnOnce(&mut quire_server::Config) {
    let endpoint = format!("http://{}", c.addr);
    move |cfg| {
        cfg.tracing.endpoint = Some(endpoint);
        cfg.tracing.sample_ratio = ratio;
        cfg.tracing.batch_delay = Secs(Duration::from_millis(20));
        cfg.tracing.service_name = "quire-test".into();
        cfg.tracing.headers.insert("x-api-key".into(), "k1".into());
    }
}

fn root<'a>(spans: &'a [Got], cache: &str) -> Option<&'a Got> {
    spans
        .iter()
        .find(|s| s.kind == 2 && s.str_attr("quire.cache") == Some(cache))
}

fn children<'a>(spans: &'a [Got], of: &Got) -> Vec<&'a Got> {
    spans
        .iter()
        .filter(|s| s.parent.as_deref() == Some(of.id.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_miss_a_hit_and_a_purge_are_traced_and_the_origin_joins_the_trace() {
    let c = Collector::start();
    let o = Origin::start().await;
    o.route(
        "/a",
        Route::ok(page(3), &[("cache-control", "max-age=600")]),
    );
    let q = Quire::start(&o, traced(&c, 1.0)).await;
    assert_eq!(
        get(&q, "/a", &[("accept-encoding", "gzip")]).await.status,
        200
    );
    settle(&q).await;
    let spans = c
        .wait_for(|s| root(s, "miss").is_some() && s.iter().any(|x| x.name == "fill"))
        .await;
    let miss = root(&spans, "miss").unwrap();
    assert_eq!(miss.name, "GET");
    assert_eq!(miss.str_attr("url.path"), Some("/a"));
    assert_eq!(
        miss.attr("http.response.status_code").unwrap()["intValue"],
        "200"
    );
    assert!(miss.parent.is_none(), "a root: no trusted parent");
    let under: Vec<_> = children(&spans, miss)
        .iter()
        .map(|s| s.name.clone())
        .collect();
    let fill = spans.iter().find(|s| s.name == "fill").unwrap();
    let waited = children(&spans, fill);
    assert!(
        waited
            .iter()
            .any(|s| s.name == "budget wait" && s.attr("quire.slot").unwrap()["boolValue"] == true),
        "the fill's wait for a budget slot: {waited:?}"
    );
    for name in ["lookup", "fill", "fill wait"] {
        assert!(
            under.contains(&name.to_owned()),
            "{name} not under the request: {under:?}"
        );
    }
    let fill = spans.iter().find(|s| s.name == "fill").unwrap();
    let origin = children(&spans, fill)
        .into_iter()
        .find(|s| s.name == "origin")
        .expect("the origin fetch is the fill's child");
    assert_eq!(origin.kind, 3, "a client span");
    assert_eq!(origin.trace, miss.trace);
    // The origin was told the trace and the span that asked it.
    let seen = o.seen("/a");
    let tp = seen[0].headers["traceparent"].to_str().unwrap().to_owned();
    assert_eq!(tp, format!("00-{}-{}-01", origin.trace, origin.id));
    assert!(spans
        .iter()
        .any(|s| s.name == "compress" && s.trace == miss.trace));

    // A hit on the fast path (a raw keep-alive connection): its own trace.
    let req = format!(
        "GET /a HTTP/1.1\r\nHost: {}\r\nAccept-Encoding: gzip\r\n\r\n",
        q.addr
    );
    assert_eq!(exchange(q.addr, req, 1).await[0].0, 200);
    let spans = c.wait_for(|s| root(s, "hit").is_some()).await;
    let hit = root(&spans, "hit").unwrap();
    assert_ne!(hit.trace, miss.trace);
    let look: Vec<_> = children(&spans, hit);
    assert_eq!(look.len(), 1, "{look:?}");
    assert_eq!(look[0].name, "lookup");
    assert_eq!(o.hits("/a"), 1);

    a_purge_is_a_span_of_its_request(&c, &q).await;
    exporter_sleeps_when_idle().await;
}

/// A purge through the admin API is a span of its request; then the exporter's
/// counters.
async fn a_purge_is_a_span_of_its_request(c: &Collector, q: &Quire) {
    let auth = format!("Bearer {TOKEN}");
    let got = send(q, "PURGE", "/a", &[("authorization", &auth)], b"").await;
    assert_eq!(got.status, 200);
    let spans = c.wait_for(|s| root(s, "admin").is_some()).await;
    let purge = spans.iter().find(|s| s.name == "purge").unwrap();
    assert_eq!(purge.attr("quire.purge.targets").unwrap()["intValue"], "1");
    let asked = root(&spans, "admin").unwrap();
    assert_eq!(
        (asked.name.as_str(), Some(&asked.id)),
        ("PURGE", purge.parent.as_ref())
    );

    let metrics = metrics_text(q).await;
    assert!(
        metrics.contains("quire_trace_spans_total{result=\"exported\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("quire_trace_spans_total{result=\"dropped_queue_full\"} 0"));
}

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const UNSAMPLED: &str = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxys_traceparent_is_followed_and_anyone_elses_ignored() {
    let c = Collector::start();
    let o = Origin::start().await;
    o.fallback(Route::ok("x", &[("cache-control", "max-age=600")]));
    let tweak = traced(&c, 0.0);
    let q = Quire::start(&o, |cfg| {
        tweak(cfg);
        cfg.trusted_proxies = vec!["127.0.0.1".into()];
    })
    .await;
    // Sampled upstream: traced, under the proxy's span, though the ratio is 0.
    assert_eq!(get(&q, "/p", &[("traceparent", PARENT)]).await.status, 200);
    // Not sampled upstream: not traced.
    assert_eq!(
        get(&q, "/u", &[("traceparent", UNSAMPLED)]).await.status,
        200
    );
    // No parent, ratio 0: not traced; nor a hit on the fast path that names one.
    assert_eq!(get(&q, "/n", &[]).await.status, 200);
    let req = format!(
        "GET /p HTTP/1.1\r\nHost: {}\r\ntraceparent: {PARENT}\r\n\r\n",
        q.addr
    );
    assert_eq!(exchange(q.addr, req, 1).await[0].0, 200);
    let spans = c
        .wait_for(|s| root(s, "miss").is_some() && root(s, "hit").is_some())
        .await;
    for r in [root(&spans, "miss").unwrap(), root(&spans, "hit").unwrap()] {
        assert_eq!(r.trace, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(r.parent.as_deref(), Some("00f067aa0ba902b7"));
    }
    settle(&q).await;
    assert!(spans
        .iter()
        .all(|s| s.trace == "4bf92f3577b34da6a3ce929d0e0e4736"));
    // The origin's traceparent continues the proxy's trace.
    let tp = o.seen("/p")[0].headers["traceparent"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        tp.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
        "{tp}"
    );
    assert!(o.seen("/u")[0].headers.get("traceparent").is_none());
    assert!(o.seen("/n")[0].headers.get("traceparent").is_none());

    // From an address that is not a trusted proxy, a traceparent means nothing.
    let c2 = Collector::start();
    let q2 = Quire::start(&o, traced(&c2, 0.0)).await;
    assert_eq!(get(&q2, "/t", &[("traceparent", PARENT)]).await.status, 200);
    settle(&q2).await;
    let text = metrics_text(&q2).await;
    assert_eq!(
        metric_u64(&text, "quire_trace_spans_total{result=\"exported\"}"),
        0,
        "{text}"
    );
    assert!(c2.spans().is_empty());
    // Its origin was not handed the client's traceparent either.
    assert!(o.seen("/t")[0].headers.get("traceparent").is_none());
}

/// A collector that accepts connections and never reads a byte.
fn stalled_collector() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in l.incoming() {
            held.push(conn);
        }
    });
    addr
}

/// A port nothing listens on.
fn down_collector() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// The attack: a collector that takes spans' connections and never reads them,
/// with an export deadline of an hour, so the exporter is stuck on it for the
/// whole test. Every request is still answered — were one to wait on the
/// exporter, it would wait an hour and the test would never end — and the spans
/// that did not fit are counted as dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exporter_stall_never_holds_a_request() {
    for (name, collector) in [("stalled", stalled_collector()), ("down", down_collector())] {
        let o = Origin::start().await;
        o.fallback(Route::ok(page(40), &[("cache-control", "max-age=600")]));
        let q = Quire::start(&o, |cfg| {
            cfg.tracing.endpoint = Some(format!("http://{collector}"));
            cfg.tracing.sample_ratio = 1.0;
            cfg.tracing.queue_spans = 64;
            cfg.tracing.batch_spans = 16;
            cfg.tracing.batch_delay = Secs(Duration::from_millis(10));
            cfg.tracing.timeout = Secs(Duration::from_secs(3600));
        })
        .await;
        let mut answered = 0;
        for i in 0..20 {
            assert_eq!(get(&q, &format!("/p{i}"), &[]).await.status, 200);
        }
        settle(&q).await;
        // Hits, on the fast path and through hyper, several spans each.
        let req = format!("GET /p1 HTTP/1.1\r\nHost: {}\r\n\r\n", q.addr);
        for _ in 0..10 {
            answered += exchange(q.addr, req.repeat(50), 50).await.len();
        }
        for i in 0..200 {
            answered += usize::from(get(&q, &format!("/p{}", i % 20), &[]).await.status == 200);
        }
        assert_eq!(answered, 700, "{name}");
        let text = metrics_text(&q).await;
        let dropped = metric_u64(
            &text,
            "quire_trace_spans_total{result=\"dropped_queue_full\"}",
        ) + metric_u64(
            &text,
            "quire_trace_spans_total{result=\"dropped_export_failed\"}",
        );
        assert!(dropped > 0, "{name}: {text}");
        assert_eq!(
            metric_u64(&text, "quire_trace_spans_total{result=\"exported\"}"),
            0
        );
        assert!(metric_u64(&text, "quire_trace_queue_spans") <= 64, "{text}");
    }
}

/// CPU time (user + system, clock ticks) of each of this process's `quire-trace`
/// threads, by thread id (other tests' servers in this process start and end
/// theirs: a sum over all of them can fall between two readings).
fn exporter_ticks() -> std::collections::HashMap<String, u64> {
    let mut ticks = std::collections::HashMap::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "quire-trace" {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // After the `(comm)` field: state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 12 {
            let used = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
            ticks.insert(task.file_name().to_string_lossy().into_owned(), used);
        }
    }
    ticks
}

/// With nothing to send, the exporter thread sleeps: over a second with no span,
/// it uses a small part of it (a thread that spun on a past deadline used all of
/// it, and a core of the machine).
async fn exporter_sleeps_when_idle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = exporter_ticks();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = exporter_ticks();
    // The most any one exporter thread alive over the whole second used.
    let used = after
        .iter()
        .filter_map(|(tid, t)| Some(t - before.get(tid)?))
        .max()
        .unwrap_or(0);
    assert!(
        before.keys().any(|tid| after.contains_key(tid)),
        "an exporter thread lived through the second"
    );
    assert!(
        used < 30,
        "the idle exporter used {used} ticks of 100 in a second"
    );
}

/// [`metric`] of a counter, as a whole number.
fn metric_u64(text: &str, series: &str) -> u64 {
    let v = metric(text, series);
    assert!(v >= 0.0 && v.fract() == 0.0, "{series} = {v}");
    v as u64
}
