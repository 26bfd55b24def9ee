//! The `[tracing]` section: OpenTelemetry traces sent over OTLP/HTTP (the exporter
//! itself is `crate::trace`). Off unless `endpoint` is set.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Secs};

/// The `[tracing]` section.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TracingSection {
    /// The collector's OTLP/HTTP address, `http://host:port` or `https://…`; spans
    /// are posted to its `/v1/traces` unless the address names a path of its own.
    /// Tracing is off when absent.
    pub endpoint: Option<String>,
    /// The share of requests traced when no trusted proxy said (a W3C `traceparent`
    /// from a trusted proxy is followed: its sampled flag decides). 0 to 1.
    pub sample_ratio: f64,
    /// Finished spans waiting for the exporter at most; past it spans are dropped
    /// and counted (`quire_trace_spans_total{result="dropped_queue_full"}`), never
    /// waited for.
    pub queue_spans: usize,
    /// Spans sent in one request to the collector at most.
    pub batch_spans: usize,
    /// Longest a batch waits before it is sent.
    pub batch_delay: Secs,
    /// Longest one export may take (connect, send, answer); a batch that takes
    /// longer is dropped and counted, and the exporter goes on with the next.
    pub timeout: Secs,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// Extra request fields sent to the collector (an API key, say).
    pub headers: BTreeMap<String, String>,
    /// A PEM file of CA certificates trusted for an `https://` collector besides
    /// the system's.
    pub ca_file: Option<PathBuf>,
}

impl Default for TracingSection {
    fn default() -> Self {
        TracingSection {
            endpoint: None,
            sample_ratio: 0.01,
            queue_spans: 4096,
            batch_spans: 512,
            batch_delay: Secs(std::time::Duration::from_secs(1)),
            timeout: Secs(std::time::Duration::from_secs(2)),
            service_name: "quire".to_owned(),
            headers: BTreeMap::new(),
            ca_file: None,
        }
    }
}

impl TracingSection {
    /// Checks the bounds; the endpoint itself is parsed by the exporter as it
    /// starts.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let bad = |s: &str| Err(ConfigError::new(format!("tracing.{s}")));
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return bad("sample_ratio must be within 0..=1");
        }
        if !(1..=1 << 20).contains(&self.queue_spans) {
            return bad("queue_spans must be within 1..=1048576");
        }
        if !(1..=self.queue_spans).contains(&self.batch_spans) {
            return bad("batch_spans must be within 1..=queue_spans");
        }
        if self.timeout.0.is_zero() || self.batch_delay.0.is_zero() {
            return bad("timeout and batch_delay must be above 0");
        }
        if self.service_name.is_empty() {
            return bad("service_name must not be empty");
        }
        for (name, value) in &self.headers {
            if http::HeaderName::try_from(name.as_str()).is_err()
                || http::HeaderValue::try_from(value.as_str()).is_err()
            {
                return Err(ConfigError::new(format!(
                    "tracing.headers: `{name}` is not a valid request field"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change that breaks one bound.
    type Breaks = fn(&mut TracingSection);

    /// Each bound of the section refuses what is past it, naming the key.
    #[test]
    fn impossible_settings_are_refused_by_name() {
        assert!(TracingSection::default().validate().is_ok());
        let cases: [(&str, Breaks); 7] = [
            ("sample_ratio", |t| t.sample_ratio = 1.5),
            ("sample_ratio", |t| t.sample_ratio = f64::NAN),
            ("queue_spans", |t| t.queue_spans = 0),
            ("batch_spans", |t| t.batch_spans = t.queue_spans + 1),
            ("timeout", |t| t.timeout = Secs(std::time::Duration::ZERO)),
            ("service_name", |t| t.service_name.clear()),
            ("headers", |t| {
                t.headers.insert("bad name".into(), "v".into());
            }),
        ];
        for (key, break_it) in cases {
            let mut t = TracingSection::default();
            break_it(&mut t);
            let e = t.validate().expect_err(key).to_string();
            assert!(e.contains(&format!("tracing.{key}")), "{key}: {e}");
        }
    }
}
