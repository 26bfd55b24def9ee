//! A batch of spans as an OTLP/HTTP request body in the protocol's JSON encoding
//! (OTLP 1.x, `ExportTraceServiceRequest`): ids as lower-case hex, 64-bit times
//! as decimal strings, enums as numbers, as the specification's JSON mapping
//! asks. JSON rather than protobuf keeps the exporter free of a code generator;
//! every OTLP/HTTP collector accepts both.

use std::fmt::Write as _;

use super::record::{SpanData, Value};

/// The request body exporting `spans` for `service`.
pub(crate) fn encode(service: &str, spans: &[SpanData]) -> Vec<u8> {
    let mut out = String::with_capacity(256 + spans.len() * 320);
    out.push_str(r#"{"resourceSpans":[{"resource":{"attributes":["#);
    attribute(
        &mut out,
        "service.name",
        &Value::Str(service.to_owned().into()),
    );
    out.push_str(r#"]},"scopeSpans":[{"scope":{"name":"quire","version":""#);
    out.push_str(env!("CARGO_PKG_VERSION"));
    out.push_str(r#""},"spans":["#);
    for (i, s) in spans.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        span(&mut out, s);
    }
    out.push_str("]}]}]}");
    out.into_bytes()
}

fn span(out: &mut String, s: &SpanData) {
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        r#"{{"traceId":"{:032x}","spanId":"{:016x}","#,
        s.trace_id, s.span_id
    );
    if s.parent_id != 0 {
        let _ = write!(out, r#""parentSpanId":"{:016x}","#, s.parent_id);
    }
    out.push_str(r#""name":"#);
    string(out, &s.name);
    let _ = write!(
        out,
        r#","kind":{},"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":["#,
        s.kind as u8, s.start_unix_ns, s.end_unix_ns
    );
    for (i, (name, value)) in s.attributes.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        attribute(out, name, value);
    }
    // Status codes: 0 unset, 2 error.
    let code = if s.error { 2 } else { 0 };
    let _ = write!(out, r#"],"status":{{"code":{code}}}}}"#);
}

fn attribute(out: &mut String, name: &str, value: &Value) {
    out.push_str(r#"{"key":"#);
    string(out, name);
    out.push_str(r#","value":"#);
    match value {
        Value::Str(s) => {
            out.push_str(r#"{"stringValue":"#);
            string(out, s);
            out.push('}');
        }
        // 64-bit integers are strings in OTLP's JSON.
        Value::Int(n) => {
            let _ = write!(out, r#"{{"intValue":"{n}"}}"#);
        }
        Value::Bool(b) => {
            let _ = write!(out, r#"{{"boolValue":{b}}}"#);
        }
    }
    out.push('}');
}

/// `s` as a JSON string.
fn string(out: &mut String, s: &str) {
    // serde_json escapes exactly what JSON needs; a `&str` always serialises.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::record::Kind;

    #[test]
    fn a_batch_is_the_json_otlp_describes() {
        let spans = [SpanData {
            trace_id: 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
            span_id: 0x00f0_67aa_0ba9_02b7,
            parent_id: 7,
            name: "GET \"/a\"".into(),
            kind: Kind::Server,
            start_unix_ns: 1_700_000_000_000_000_000,
            end_unix_ns: 1_700_000_000_000_500_000,
            attributes: vec![
                ("url.path", Value::from("/a")),
                ("http.response.status_code", Value::Int(200)),
                ("quire.collapsed", Value::Bool(true)),
            ],
            error: true,
        }];
        let body = encode("quire-test", &spans);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let rs = &v["resourceSpans"][0];
        assert_eq!(
            rs["resource"]["attributes"][0]["value"]["stringValue"],
            "quire-test"
        );
        let s = &rs["scopeSpans"][0]["spans"][0];
        assert_eq!(s["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(s["spanId"], "00f067aa0ba902b7");
        assert_eq!(s["parentSpanId"], "0000000000000007");
        assert_eq!(s["name"], "GET \"/a\"");
        assert_eq!(s["kind"], 2);
        assert_eq!(s["startTimeUnixNano"], "1700000000000000000");
        assert_eq!(s["endTimeUnixNano"], "1700000000000500000");
        assert_eq!(s["attributes"][1]["value"]["intValue"], "200");
        assert_eq!(s["attributes"][2]["value"]["boolValue"], true);
        assert_eq!(s["status"]["code"], 2);
    }

    #[test]
    fn a_root_has_no_parent_field() {
        let mut s = SpanData {
            trace_id: 1,
            span_id: 2,
            parent_id: 0,
            name: "x".into(),
            kind: Kind::Internal,
            start_unix_ns: 0,
            end_unix_ns: 0,
            attributes: Vec::new(),
            error: false,
        };
        let v: serde_json::Value = serde_json::from_slice(&encode("q", &[s.clone()])).unwrap();
        let got = &v["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert!(got.get("parentSpanId").is_none());
        assert_eq!(got["status"]["code"], 0);
        s.parent_id = 3;
        let two = encode("q", &[s.clone(), s]);
        let v: serde_json::Value = serde_json::from_slice(&two).unwrap();
        assert_eq!(
            v["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }
}
