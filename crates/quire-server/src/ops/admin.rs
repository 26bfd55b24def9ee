//! The admin API under `/_quire/` and the `PURGE` method: purge, metrics, health,
//! explain. Everything but health needs `Authorization: Bearer <admin token>`.
//!
//! Key decisions:
//! - **No token configured means no admin API** (403), not an open one.
//! - The token is compared in constant time, and a wrong token is told nothing more
//!   than a missing one (401 with `WWW-Authenticate: Bearer`).
//! - Request bodies are bounded ([`PURGE_BODY_BYTES_MAX`]) and parsed strictly: an
//!   unknown field or a URL that does not normalise is a 400 naming the problem, and
//!   nothing is purged.

use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use quire_http::cache_control::CacheControl;
use quire_http::freshness;
use quire_http::key::{self, MethodClass};
use quire_store::{Engine, EntryRef};

use crate::cache::object::{self, Record};
use crate::metrics::Outcome;
use crate::ops::answer::{admin_status, authorise, error, json};
use crate::request::body::Body;
use crate::request::hit;
use crate::request::reply::plain;
use crate::state::Ctx;
use crate::upstream::origin::OutBody;

pub use crate::ops::purge_api::PURGE_BODY_BYTES_MAX;

/// The path prefix of the admin API.
pub const PREFIX: &str = "/_quire/";

/// Answers a request whose `path` (as sent, or normalised) is under [`PREFIX`].
pub async fn handle(
    ctx: &Arc<Ctx>,
    req: Request<OutBody>,
    path: &str,
) -> (Response<Body>, Outcome) {
    let method = req.method().clone();
    if path == "/_quire/health" && (method == Method::GET || method == Method::HEAD) {
        let mut text = String::from("ok\n");
        if let Some(line) = ctx.bus().and_then(|b| b.health()) {
            text.push_str(&line);
            text.push('\n');
        }
        let mut r = plain(StatusCode::OK, &text, admin_status());
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return (r, Outcome::Admin);
    }
    if path.starts_with(crate::fill::host_dictionaries::PATH_PREFIX) {
        return (dictionary(ctx, &req, path), Outcome::Admin);
    }
    if let Some(denied) = authorise(ctx, &req) {
        return (denied, Outcome::Admin);
    }
    let resp = match (method, path) {
        (Method::GET, "/_quire/metrics") => {
            let text = metrics_text(ctx);
            let mut r = plain(StatusCode::OK, &text, admin_status());
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            r
        }
        (Method::POST, "/_quire/purge") => crate::ops::purge_api::post(ctx, req).await,
        (Method::GET, "/_quire/explain") => explain(ctx, req.uri().query().unwrap_or("")),
        (Method::GET, "/_quire/top") => top_urls(ctx, req.uri().query().unwrap_or("")),
        (_, "/_quire/metrics" | "/_quire/purge" | "/_quire/explain" | "/_quire/top") => {
            error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => error(StatusCode::NOT_FOUND, "no such admin endpoint"),
    };
    (resp, Outcome::Admin)
}

/// `GET /_quire/dictionary/<sha256>.dict`: a `[dictionaries]` host's compression
/// dictionary (public, like the pages it compresses; `crate::fill::host_dictionaries`),
/// as brotli when the request takes it.
fn dictionary(ctx: &Ctx, req: &Request<OutBody>, path: &str) -> Response<Body> {
    use quire_http::dictionary::{use_as_dictionary, USE_AS_DICTIONARY};
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    }
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let policy = ctx.peek();
    let Some(made) = ctx
        .host_dictionaries
        .served(&policy.cfg.dictionaries, host, path)
    else {
        return error(StatusCode::NOT_FOUND, "no such dictionary");
    };
    let accept = quire_http::encoding::parse_accept_encoding(req.headers());
    // Identity unless brotli is preferred to it (as the hit path chooses).
    let br = made.br.clone().filter(|_| {
        use quire_http::encoding::{choose, Coding, DEFAULT_PREFS};
        choose(&accept, &[Coding::Identity, Coding::Br], &DEFAULT_PREFS) == Some(Coding::Br)
    });
    let body = br
        .clone()
        .unwrap_or_else(|| bytes::Bytes::copy_from_slice(made.dictionary.bytes()));
    let body = if req.method() == Method::HEAD {
        Body::Empty
    } else {
        Body::full(body)
    };
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if br.is_some() {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("br"));
    }
    if let Ok(v) = HeaderValue::from_str(&use_as_dictionary("/*", &made.dictionary.hex()[..16])) {
        h.insert(USE_AS_DICTIONARY, v);
    }
    r
}

/// Every Prometheus family of `/_quire/metrics`, and the one place a feature's
/// families are registered: the server's own counters and the store's
/// (`crate::metrics`), the fill path's shared parts, then each feature's writer
/// (the upstream, the cluster's bus, TLS, the access log, reloads, rate limits,
/// upgraded connections). A feature that adds families adds its writer here.
fn metrics_text(ctx: &Ctx) -> String {
    let mut text = ctx
        .metrics
        .render(&ctx.store.stats(), ctx.started.elapsed());
    fill_path_metrics(ctx, &mut text);
    ctx.origin.metrics(&mut text);
    if let Some(bus) = ctx.bus() {
        bus.metrics(&mut text);
    }
    if let Some(tls) = &ctx.tls {
        tls.write_metrics(&mut text);
    }
    if let Some(log) = &ctx.peek().access_log {
        log.write_metrics(&mut text);
    }
    ctx.reloads.write_metrics(&mut text);
    if let Some(t) = &ctx.tracer {
        t.exporter().write_metrics(&mut text);
    }
    ctx.limiter.write_metrics(&mut text);
    ctx.tunnels.write_metrics(&mut text);
    {
        let classes = ctx.crawlers.budgets();
        let mut budgets = vec![("everyone", ctx.budget.snapshot())];
        budgets.extend(classes.iter().map(|(n, s)| (n.as_str(), *s)));
        crate::edge::budget::write_metrics(&mut text, &budgets);
        ctx.crawlers.write_metrics(&mut text);
    }
    text
}

/// The fill path's shared parts: fill slots, the compression pool, the
/// invalidation log.
fn fill_path_metrics(ctx: &Ctx, out: &mut String) {
    crate::metrics::write_fill_path(
        out,
        &crate::metrics::FillPath {
            slots_used: ctx.fills.slots_used() as u64,
            compress_held_bytes: ctx.compress.held_bytes(),
            compress_budget_bytes: ctx.compress.budget_bytes(),
            compress_jobs: ctx.compress.done(),
            compress_refused: ctx.compress.refused(),
            log_overruns: ctx.invalidations.overruns(),
        },
    );
    ctx.compress.write_metrics(out);
    ctx.deferred.write_metrics(out);
    ctx.dictionaries.write_metrics(out);
    ctx.host_dictionaries.write_metrics(out);
}

/// `GET /_quire/top?n=N`: the URLs missing most and the hottest, lately (at most
/// N of each, 10 by default, 64 at most; see `metrics::top_urls`).
fn top_urls(ctx: &Ctx, query: &str) -> Response<Body> {
    use crate::metrics::top_urls::{ENTRIES, HALF_LIFE, HIT_SAMPLE};
    let n = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("n="))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(10)
        .min(ENTRIES);
    let (missing, hot) = ctx.metrics.top_urls(n);
    let list = |v: Vec<(String, u64)>| {
        v.into_iter()
            .map(|(url, count)| serde_json::json!({ "url": url, "count": count }))
            .collect::<Vec<_>>()
    };
    let body = serde_json::json!({
        "missing": list(missing),
        "hot": list(hot),
        "hit_sample": HIT_SAMPLE,
        "half_life_seconds": HALF_LIFE.as_secs(),
    });
    json(StatusCode::OK, &body)
}

/// `GET /_quire/explain?url=...`: what the cache holds for a URL and why.
fn explain(ctx: &Ctx, query: &str) -> Response<Body> {
    let Some(raw) = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("url="))
        .map(percent_decode)
    else {
        return error(StatusCode::BAD_REQUEST, "give ?url=<absolute URL>");
    };
    let url = match key::normalize_absolute(&raw, &ctx.peek().keys) {
        Ok(u) => u,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("url: {e}")),
    };
    let now = ctx.clock.now();
    let primary = ctx.primary_key(MethodClass::Get, &url, ctx.key_version(&url));
    let mut out = serde_json::json!({
        "url": raw,
        "normalized": url.as_str(),
        "key_hash": format!("{:016x}", key::key_hash(&primary)),
    });
    let record = ctx
        .store
        .get(&primary)
        .and_then(|h| object::decode(h.meta()));
    match record {
        None => {
            out["cached"] = false.into();
            out["why"] =
                "no stored response for this URL (never fetched, not storable, evicted or purged)"
                    .into();
        }
        Some(Record::Vary(v)) => {
            out["cached"] = "per variant".into();
            out["vary"] = v.to_string().into();
            out["why"] =
                "the response varies on request fields; each variant is stored under its own key"
                    .into();
        }
        Some(Record::Object(rec)) => {
            let t = rec.meta.timing();
            let decision = freshness::reuse(&t, &CacheControl::default(), &ctx.peek().reuse, now);
            out["cached"] = true.into();
            out["status"] = rec.meta.status.into();
            out["age_secs"] = t.age(now).as_secs().into();
            out["ttl_secs"] = hit::ttl_secs(&t, now).into();
            out["freshness_lifetime_secs"] = t.freshness_lifetime.map(|d| d.as_secs_f64()).into();
            out["heuristic"] = t.flags.heuristic.into();
            out["decision_for_plain_get"] = format!("{decision:?}").into();
            out["etag"] = rec.meta.etag.clone().into();
            out["codings"] = rec
                .codings
                .iter()
                .map(|(c, l)| serde_json::json!({ "coding": c.token(), "bytes": l }))
                .collect::<Vec<_>>()
                .into();
            out["tags"] = rec.meta.tags.clone().into();
            out["headers"] = rec
                .meta
                .headers
                .iter()
                .map(|(n, v)| format!("{}: {}", n, String::from_utf8_lossy(v.as_bytes())))
                .collect::<Vec<_>>()
                .into();
        }
    }
    json(StatusCode::OK, &out)
}

/// Decodes `%XX` escapes and `+` (form encoding) in a query value; a `%` not
/// followed by two hex digits stays as it is.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| char::from(c).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(hi), Some(lo)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_decode() {
        assert_eq!(
            percent_decode("http%3A%2F%2Fh%2Fa%3Fb%3D1"),
            "http://h/a?b=1"
        );
        assert_eq!(percent_decode("a+b"), "a b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%4"), "%4");
    }
}
