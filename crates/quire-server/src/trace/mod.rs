//! OpenTelemetry traces (`[tracing]`): spans for a request and the work it causes
//! — the lookup, the fill, the origin fetch (with `traceparent` sent to the
//! origin), the render of `quire serve`, a peer fill, compression and purges —
//! exported over OTLP/HTTP without ever slowing a request.
//!
//! - [`Tracer`] decides which requests are traced: a W3C `traceparent` from a
//!   trusted proxy is followed (its sampled flag decides, and quire's spans join its
//!   trace); otherwise `tracing.sample_ratio` of requests start a trace. An
//!   untraced request costs one random draw, and nothing at all with tracing off.
//! - Spans: `lookup`, `fill wait`, `fill`, `budget wait` (a slot of the
//!   uncached-work budget), the upstream's (`origin`, `render`, `peer fill`),
//!   `compress`, `purge`.
//! - The traced request's context lives in a task-local ([`within`]): the spans of
//!   the work it causes find their parent there ([`child`]), however deep in the
//!   call they are opened, and work handed to another task or thread takes the
//!   context along ([`current`]).
//! - Finished spans go to the exporter's bounded queue ([`export`]), sent in
//!   batches by its own thread ([`post`], [`otlp`]); a full queue or a failed
//!   batch drops spans and counts them (`quire_trace_spans_total`).
//!
//! Spans follow OpenTelemetry's HTTP conventions where they apply
//! (`http.request.method`, `url.path`, `http.response.status_code`) and add
//! quire's own (`quire.cache`: what the cache did).

mod context;
mod export;
mod otlp;
mod post;
mod record;
mod span;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;

pub use context::TRACEPARENT;
pub use export::Exporter;
pub use record::{Kind, Value};
pub use span::{Span, SpanContext, ATTRIBUTE_BYTES_MAX};

use crate::config::ConfigError;
use crate::config::TracingSection;
use export::Batching;

/// The sampler and the exporter of a server with `[tracing]` on.
#[derive(Debug)]
pub struct Tracer {
    exporter: Arc<Exporter>,
    /// A request is traced when a random draw is below this (ratio × 2^64).
    threshold: u64,
    always: bool,
}

impl Tracer {
    /// The tracer `section` describes; `None` when no endpoint is set.
    pub fn from_config(section: &TracingSection) -> Result<Option<Tracer>, ConfigError> {
        let Some(url) = &section.endpoint else {
            return Ok(None);
        };
        let endpoint = post::Endpoint::parse(url, &section.headers, section.ca_file.clone())
            .map_err(|e| ConfigError::new(e.to_string()))?;
        let batching = Batching {
            queue: section.queue_spans,
            batch: section.batch_spans,
            delay: section.batch_delay.0,
            timeout: section.timeout.0,
            service: section.service_name.clone(),
        };
        let exporter = Exporter::start(endpoint, batching)
            .map_err(|e| ConfigError::new(format!("tracing: starting the exporter: {e}")))?;
        Ok(Some(Tracer::with_exporter(
            Arc::new(exporter),
            section.sample_ratio,
        )))
    }

    /// A tracer sampling `ratio` of requests into `exporter`.
    fn with_exporter(exporter: Arc<Exporter>, ratio: f64) -> Tracer {
        // `as` saturates: a ratio of 1 gives u64::MAX.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a ratio within 0..=1 scaled to the u64 range; `as` saturates"
        )]
        let threshold = (ratio * u64::MAX as f64) as u64;
        Tracer {
            exporter,
            threshold,
            always: ratio >= 1.0,
        }
    }

    /// The root span of a request, when it is traced: under the trusted proxy's
    /// `traceparent` if it sent one (traced only if that says sampled), else a new
    /// trace for the sampled share.
    pub fn request(&self, headers: &HeaderMap, trusted: bool, method: &str) -> Option<Span> {
        self.request_at(headers, trusted, method, Instant::now())
    }

    /// [`Tracer::request`] for a request that started at `started`.
    pub fn request_at(
        &self,
        headers: &HeaderMap,
        trusted: bool,
        method: &str,
        started: Instant,
    ) -> Option<Span> {
        let parent = trusted
            .then(|| headers.get(TRACEPARENT))
            .flatten()
            .and_then(|v| context::parse(v.as_bytes()));
        let ids = match parent {
            Some(p) if !p.sampled => return None,
            Some(p) => (p.trace_id, p.span_id),
            None if self.sampled() => (context::trace_id(), 0),
            None => return None,
        };
        let method = known_method(method);
        let mut span = Span::opened_at(self.exporter.clone(), ids, method, Kind::Server, started);
        span.set("http.request.method", method);
        Some(span)
    }

    /// Whether a request with no parent is traced.
    pub fn sampled(&self) -> bool {
        self.always || (self.threshold > 0 && context::random() < self.threshold)
    }

    /// The exporter (for its metrics and its drain).
    pub fn exporter(&self) -> &Exporter {
        &self.exporter
    }

    /// Sends what is queued, waiting at most `wait`.
    pub fn shutdown(&self, wait: Duration) {
        self.exporter.shutdown(wait);
    }
}

/// A method as OpenTelemetry's HTTP conventions name it: a known one as itself,
/// anything else `_OTHER` (a client's invented method is neither a new span name nor
/// unbounded bytes).
fn known_method(method: &str) -> &'static str {
    const KNOWN: [&str; 10] = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PURGE",
    ];
    KNOWN
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or("_OTHER")
}

tokio::task_local! {
    /// The span the running task works for.
    static CURRENT: SpanContext;
}

/// The context of the span the running task works for, if it is traced.
pub fn current() -> Option<SpanContext> {
    CURRENT.try_with(Clone::clone).ok()
}

/// A span named `name` under the running task's, if it is traced.
pub fn child(name: &'static str, kind: Kind) -> Option<Span> {
    current().map(|p| p.child(name, kind))
}

impl SpanContext {
    /// A span under this one.
    pub fn child(&self, name: impl Into<std::borrow::Cow<'static, str>>, kind: Kind) -> Span {
        self.child_at(name, kind, Instant::now())
    }

    /// A span under this one that started at `started`.
    pub fn child_at(
        &self,
        name: impl Into<std::borrow::Cow<'static, str>>,
        kind: Kind,
        started: Instant,
    ) -> Span {
        Span::opened_at(
            self.exporter.clone(),
            (self.trace_id, self.span_id),
            name,
            kind,
            started,
        )
    }

    /// The `traceparent` naming this span, for a request it sends.
    pub fn traceparent(&self) -> http::HeaderValue {
        context::format(self.trace_id, self.span_id)
    }
}

/// A client span named `name` for a request the running task sends, when it is
/// traced; the request then carries the span's `traceparent`, so the server that
/// answers it joins the trace.
pub fn outbound(name: &'static str, headers: &mut HeaderMap) -> Option<Span> {
    let span = child(name, Kind::Client)?;
    headers.insert(TRACEPARENT, span.context().traceparent());
    Some(span)
}

/// Ends a client span with the answer's status, or as failed.
pub fn end_outbound<T>(
    span: Option<Span>,
    answer: &Result<http::Response<T>, impl std::fmt::Display>,
) {
    let Some(mut s) = span else {
        return;
    };
    match answer {
        Ok(r) => {
            s.set("http.response.status_code", i64::from(r.status().as_u16()));
            if r.status().is_server_error() {
                s.fail();
            }
        }
        Err(e) => {
            s.set("error.type", e.to_string());
            s.fail();
        }
    }
    s.end();
}

/// Ends a wait for a slot of the uncached-work budget (`crate::edge::budget`):
/// `quire.slot` says whether one was had (else the request was answered 503).
pub fn end_budget_wait(span: Option<Span>, got: bool) {
    if let Some(mut s) = span {
        s.set("quire.slot", got);
        s.end();
    }
}

/// Runs `fut` with `span` (when there is one) as the context of the spans it opens.
pub async fn within<F: Future>(span: Option<&Span>, fut: F) -> F::Output {
    match span {
        Some(s) => CURRENT.scope(s.context().clone(), fut).await,
        None => fut.await,
    }
}

/// Runs `fut` under `ctx` (a context taken along to another task).
pub async fn under<F: Future>(ctx: Option<SpanContext>, fut: F) -> F::Output {
    match ctx {
        Some(c) => CURRENT.scope(c, fut).await,
        None => fut.await,
    }
}

/// Runs `f` under `ctx` on this thread (work handed to a pool thread).
pub fn sync_under<R>(ctx: Option<SpanContext>, f: impl FnOnce() -> R) -> R {
    match ctx {
        Some(c) => CURRENT.sync_scope(c, f),
        None => f(),
    }
}
