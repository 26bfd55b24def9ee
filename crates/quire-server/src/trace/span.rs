//! A span: opened with its parent's ids and the wall clock, given attributes,
//! and handed to the exporter's queue when it ends (or is dropped: a request
//! cancelled half-way still shows how far it got).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::export::Exporter;
use super::record::{Kind, SpanData, Value};

/// Longest string attribute kept, in bytes: with the queue's `queue_spans`, what
/// bounds the exporter's memory (4,096 spans of a few attributes each hold at most a
/// few tens of MiB, whatever clients send).
pub const ATTRIBUTE_BYTES_MAX: usize = 1024;

/// The ids a span's children are made under, and where they go when they end.
#[derive(Debug, Clone)]
pub struct SpanContext {
    pub(crate) trace_id: u128,
    pub(crate) span_id: u64,
    pub(crate) exporter: Arc<Exporter>,
}

/// A span in progress; it is queued for export when it ends or is dropped.
#[derive(Debug)]
pub struct Span {
    data: SpanData,
    started: Instant,
    ctx: SpanContext,
    ended: bool,
}

impl Span {
    /// A span that started at `started` (a moment already past: the fast path
    /// decides to trace a hit after answering it).
    pub(crate) fn opened_at(
        exporter: Arc<Exporter>,
        (trace_id, parent_id): (u128, u64),
        name: impl Into<Cow<'static, str>>,
        kind: Kind,
        started: Instant,
    ) -> Span {
        let span_id = super::context::span_id();
        let back = started.elapsed();
        let start_unix_ns = unix_ns(SystemTime::now()).saturating_sub(nanos(back));
        Span {
            data: SpanData {
                trace_id,
                span_id,
                parent_id,
                name: name.into(),
                kind,
                start_unix_ns,
                end_unix_ns: start_unix_ns,
                attributes: Vec::new(),
                error: false,
            },
            started,
            ctx: SpanContext {
                trace_id,
                span_id,
                exporter,
            },
            ended: false,
        }
    }

    /// The context this span's children are made under.
    pub fn context(&self) -> &SpanContext {
        &self.ctx
    }

    /// Sets an attribute (the latest value of a name wins). A string is kept to its
    /// first [`ATTRIBUTE_BYTES_MAX`] bytes: paths and URLs come from clients, and the
    /// queue bounds spans, not their bytes.
    pub fn set(&mut self, name: &'static str, value: impl Into<Value>) {
        let value = match value.into() {
            Value::Str(s) if s.len() > ATTRIBUTE_BYTES_MAX => {
                let mut end = ATTRIBUTE_BYTES_MAX;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                Value::Str(Cow::Owned(s[..end].to_owned()))
            }
            v => v,
        };
        match self.data.attributes.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.data.attributes.push((name, value)),
        }
    }

    /// Marks the span's operation failed.
    pub fn fail(&mut self) {
        self.data.error = true;
    }

    /// Ends the span now and queues it for export.
    pub fn end(mut self) {
        self.finish(Instant::now());
    }

    /// Ends the span as of `at` (a moment already past) and queues it.
    pub(crate) fn end_at(mut self, at: Instant) {
        self.finish(at);
    }

    fn finish(&mut self, at: Instant) {
        if self.ended {
            return;
        }
        self.ended = true;
        let took = nanos(at.saturating_duration_since(self.started));
        self.data.end_unix_ns = self.data.start_unix_ns.saturating_add(took);
        let data = std::mem::replace(
            &mut self.data,
            SpanData {
                trace_id: 0,
                span_id: 0,
                parent_id: 0,
                name: Cow::Borrowed(""),
                kind: Kind::Internal,
                start_unix_ns: 0,
                end_unix_ns: 0,
                attributes: Vec::new(),
                error: false,
            },
        );
        self.ctx.exporter.offer(data);
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.finish(Instant::now());
    }
}

fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, nanos)
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The attack: a path as long as the request head allows, on every traced
    /// request. Its span keeps the first KiB of it, cut at a character boundary.
    #[test]
    fn a_clients_long_path_is_cut_in_its_span() {
        let exporter = Arc::new(Exporter::dropping());
        let mut span = Span::opened_at(exporter, (1, 0), "GET", Kind::Server, Instant::now());
        span.set("url.path", format!("/{}", "é".repeat(40_000)));
        let Value::Str(kept) = &span.data.attributes[0].1 else {
            panic!("a string");
        };
        assert!(kept.len() <= ATTRIBUTE_BYTES_MAX && kept.len() > ATTRIBUTE_BYTES_MAX - 2);
        span.set("url.path", "/short");
        assert_eq!(span.data.attributes.len(), 1, "the latest value replaces");
        assert_eq!(span.data.attributes[0].1, Value::from("/short"));
    }
}
