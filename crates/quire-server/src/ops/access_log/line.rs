//! One access-log line: what is known of a finished request ([`Entry`]) and its two
//! formats.
//!
//! - **`combined`** is nginx's and Apache's `combined` format, which every log tool
//!   reads, followed by the cache outcome as `cache=hit` (tools that read
//!   `combined` ignore what follows the user agent):
//!   `1.2.3.4 - - [25/Nov/2026:05:34:33 +0000] "GET /a HTTP/1.1" 200 512 "-" "curl/8" cache=hit`.
//!   Bytes are the body bytes sent (0 for none, as nginx writes `$body_bytes_sent`).
//! - **`json`** is one object a line with every field by name (below).
//!
//! Everything in a line that came from a client (the target, the user agent, the
//! referer, the method) is hostile: a newline in it would forge a second line, a
//! quote would end the field early. In `combined`, `"`, `\` and every byte outside
//! printable ASCII are written as `\xHH`, as nginx escapes them; in `json` strings
//! are JSON-escaped (and bytes that are not UTF-8 become U+FFFD).

use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use quire_http::syntax::push_decimal;

use crate::config::Format;

/// What the origin said, for a request that went to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upstream {
    /// The origin's status.
    pub status: u16,
    /// From sending the request to the origin's response head.
    pub time: Duration,
}

/// A finished request, as the log records it.
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    /// When the answer ended.
    pub(crate) time: SystemTime,
    /// The client, as the trusted-proxy rules name it.
    pub(crate) client: IpAddr,
    pub(crate) method: &'a str,
    /// The request target as sent (origin form: path and query).
    pub(crate) target: &'a str,
    pub(crate) version: http::Version,
    pub(crate) status: u16,
    /// Body bytes sent.
    pub(crate) bytes: u64,
    /// From the complete request head to the end of the answer.
    pub(crate) duration: Duration,
    /// The cache outcome (`hit`, `miss`, `stale`, ...).
    pub(crate) cache: &'static str,
    pub(crate) upstream: Option<Upstream>,
    pub(crate) user_agent: Option<&'a [u8]>,
    pub(crate) referer: Option<&'a [u8]>,
}

impl Entry<'_> {
    /// Appends the line (with its newline) to `out`.
    pub(crate) fn write(&self, format: Format, out: &mut Vec<u8>) {
        match format {
            Format::Combined => self.combined(out),
            Format::Json => self.json(out),
        }
        out.push(b'\n');
    }

    fn combined(&self, out: &mut Vec<u8>) {
        push_ip(out, self.client);
        out.extend_from_slice(b" - - [");
        push_clf_time(out, self.time);
        out.extend_from_slice(b"] \"");
        push_escaped(out, self.method.as_bytes());
        out.push(b' ');
        push_escaped(out, self.target.as_bytes());
        out.push(b' ');
        out.extend_from_slice(version_text(self.version).as_bytes());
        out.extend_from_slice(b"\" ");
        push_decimal(out, u64::from(self.status));
        out.push(b' ');
        push_decimal(out, self.bytes);
        for field in [self.referer, self.user_agent] {
            out.extend_from_slice(b" \"");
            match field {
                Some(v) if !v.is_empty() => push_escaped(out, v),
                _ => out.push(b'-'),
            }
            out.push(b'"');
        }
        out.extend_from_slice(b" cache=");
        out.extend_from_slice(self.cache.as_bytes());
    }

    fn json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"time\":\"");
        push_rfc3339(out, self.time);
        out.extend_from_slice(b"\",\"client\":\"");
        push_ip(out, self.client);
        out.extend_from_slice(b"\",\"method\":");
        push_json_str(out, self.method.as_bytes());
        out.extend_from_slice(b",\"target\":");
        push_json_str(out, self.target.as_bytes());
        out.extend_from_slice(b",\"protocol\":\"");
        out.extend_from_slice(version_text(self.version).as_bytes());
        out.extend_from_slice(b"\",\"status\":");
        push_decimal(out, u64::from(self.status));
        out.extend_from_slice(b",\"bytes\":");
        push_decimal(out, self.bytes);
        out.extend_from_slice(b",\"duration\":");
        push_seconds(out, self.duration);
        out.extend_from_slice(b",\"cache\":\"");
        out.extend_from_slice(self.cache.as_bytes());
        out.extend_from_slice(b"\",\"upstream_status\":");
        match self.upstream {
            Some(u) => push_decimal(out, u64::from(u.status)),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"upstream_time\":");
        match self.upstream {
            Some(u) => push_seconds(out, u.time),
            None => out.extend_from_slice(b"null"),
        }
        for (name, v) in [("user_agent", self.user_agent), ("referer", self.referer)] {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            match v {
                Some(v) => push_json_str(out, v),
                None => out.extend_from_slice(b"null"),
            }
        }
        out.push(b'}');
    }
}

fn version_text(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        http::Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// `ip` as text, without an allocation.
fn push_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, o) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                push_decimal(out, u64::from(o));
            }
        }
        IpAddr::V6(v6) => {
            let mut buf = [0u8; 48];
            let mut w = &mut buf[..];
            let _ = std::io::Write::write_fmt(&mut w, format_args!("{v6}"));
            let left = w.len();
            out.extend_from_slice(&buf[..buf.len() - left]);
        }
    }
}

/// `bytes` with `"`, `\` and every byte outside printable ASCII as `\xHH`.
fn push_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        if (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\' {
            out.push(b);
        } else {
            out.extend_from_slice(b"\\x");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 15)]);
        }
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// `bytes` as a JSON string (lossy UTF-8), quotes included.
fn push_json_str(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for c in String::from_utf8_lossy(bytes).chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' || c == '\u{2028}' || c == '\u{2029}' => {
                let mut s = String::new();
                let _ = write!(s, "\\u{:04x}", c as u32);
                out.extend_from_slice(s.as_bytes());
            }
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// Seconds with microseconds, `0.000123`.
fn push_seconds(out: &mut Vec<u8>, d: Duration) {
    push_decimal(out, d.as_secs());
    out.push(b'.');
    push_padded(out, u64::from(d.subsec_micros()), 6);
}

fn push_padded(out: &mut Vec<u8>, n: u64, width: usize) {
    let start = out.len();
    push_decimal(out, n);
    let written = out.len() - start;
    if written < width {
        let pad = width - written;
        out.splice(start..start, std::iter::repeat_n(b'0', pad));
    }
}

/// A civil date and time in UTC.
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    micros: u32,
}

impl Civil {
    /// `t` in UTC (times before 1970 are written as 1970-01-01).
    fn of(t: SystemTime) -> Civil {
        let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = d.as_secs();
        let days = i64::try_from(secs / 86_400).unwrap_or(0);
        let rem = (secs % 86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem / 60 % 60,
            second: rem % 60,
            micros: d.subsec_micros(),
        }
    }
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `25/Nov/2026:05:34:33 +0000` (the common log format's time, in UTC). The text
/// of the current second is kept per thread: a busy server writes thousands of
/// lines a second, all with the same time.
fn push_clf_time(out: &mut Vec<u8>, t: SystemTime) {
    thread_local! {
        static LAST: std::cell::RefCell<(u64, Vec<u8>)> = const { std::cell::RefCell::new((u64::MAX, Vec::new())) };
    }
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    LAST.with_borrow_mut(|(at, text)| {
        if *at != secs {
            text.clear();
            write_clf_time(text, t);
            *at = secs;
        }
        out.extend_from_slice(text);
    });
}

fn write_clf_time(out: &mut Vec<u8>, t: SystemTime) {
    let c = Civil::of(t);
    push_padded(out, u64::from(c.day), 2);
    out.push(b'/');
    out.extend_from_slice(MONTHS[(c.month - 1) as usize].as_bytes());
    out.push(b'/');
    push_decimal(out, c.year.max(0) as u64);
    for (sep, n) in [(b':', c.hour), (b':', c.minute), (b':', c.second)] {
        out.push(sep);
        push_padded(out, u64::from(n), 2);
    }
    out.extend_from_slice(b" +0000");
}

/// `2026-11-25T05:34:33.123456Z`.
fn push_rfc3339(out: &mut Vec<u8>, t: SystemTime) {
    let c = Civil::of(t);
    push_decimal(out, c.year.max(0) as u64);
    for (sep, n) in [(b'-', c.month), (b'-', c.day), (b'T', c.hour)] {
        out.push(sep);
        push_padded(out, u64::from(n), 2);
    }
    for (sep, n) in [(b':', c.minute), (b':', c.second)] {
        out.push(sep);
        push_padded(out, u64::from(n), 2);
    }
    out.push(b'.');
    push_padded(out, u64::from(c.micros), 6);
    out.push(b'Z');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(target: &'a str, ua: Option<&'a [u8]>) -> Entry<'a> {
        Entry {
            // 2026-11-25T05:34:33.000120Z
            time: UNIX_EPOCH + Duration::new(1_795_584_873, 120_000),
            client: "192.0.2.7".parse().unwrap(),
            method: "GET",
            target,
            version: http::Version::HTTP_11,
            status: 200,
            bytes: 512,
            duration: Duration::from_micros(1_250),
            cache: "hit",
            upstream: None,
            user_agent: ua,
            referer: None,
        }
    }

    fn text(e: &Entry<'_>, f: Format) -> String {
        let mut out = Vec::new();
        e.write(f, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn combined_is_nginx_combined_plus_the_cache_outcome() {
        let e = entry("/a?b=1", Some(b"curl/8.5"));
        assert_eq!(
            text(&e, Format::Combined),
            "192.0.2.7 - - [25/Nov/2026:05:34:33 +0000] \"GET /a?b=1 HTTP/1.1\" 200 512 \"-\" \"curl/8.5\" cache=hit\n"
        );
    }

    #[test]
    fn ipv6_clients_are_written_in_full() {
        let mut e = entry("/", None);
        e.client = "2001:db8::7".parse().unwrap();
        assert!(text(&e, Format::Combined).starts_with("2001:db8::7 - - ["));
    }

    #[test]
    fn json_names_every_field() {
        let mut e = entry("/a", None);
        e.upstream = Some(Upstream {
            status: 404,
            time: Duration::from_millis(12),
        });
        e.cache = "miss";
        e.version = http::Version::HTTP_2;
        let line = text(&e, Format::Json);
        let v: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(v["time"], "2026-11-25T05:34:33.000120Z");
        assert_eq!(v["client"], "192.0.2.7");
        assert_eq!(v["method"], "GET");
        assert_eq!(v["target"], "/a");
        assert_eq!(v["protocol"], "HTTP/2.0");
        assert_eq!(v["status"], 200);
        assert_eq!(v["bytes"], 512);
        assert_eq!(v["duration"], 0.00125);
        assert_eq!(v["cache"], "miss");
        assert_eq!(v["upstream_status"], 404);
        assert_eq!(v["upstream_time"], 0.012);
        assert!(v["user_agent"].is_null());
        assert!(v["referer"].is_null());
    }

    #[test]
    fn log_injection_cannot_forge_a_line_or_end_a_field() {
        let ua: &[u8] = b"x\" 200 0\n1.1.1.1 - - [forged]\\\x1b\xff";
        let e = entry("/p\"q", Some(ua));
        let combined = text(&e, Format::Combined);
        assert_eq!(combined.matches('\n').count(), 1, "{combined}");
        assert!(combined.contains(r#""GET /p\x22q HTTP/1.1""#), "{combined}");
        assert!(
            combined.contains(r#""x\x22 200 0\x0A1.1.1.1 - - [forged]\x5C\x1B\xFF""#),
            "{combined}"
        );
        let json = text(&e, Format::Json);
        assert_eq!(json.matches('\n').count(), 1, "{json}");
        let v: serde_json::Value = serde_json::from_str(json.trim_end()).unwrap();
        assert_eq!(v["target"], "/p\"q");
        assert_eq!(
            v["user_agent"],
            "x\" 200 0\n1.1.1.1 - - [forged]\\\u{1b}\u{fffd}"
        );
    }

    #[test]
    fn dates_match_the_calendar() {
        // Against httpdate's formatting of the same instants.
        for secs in [
            0u64,
            951_782_400,
            1_709_164_800,
            4_102_444_799,
            1_795_584_873,
        ] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            let http = httpdate::fmt_http_date(t); // "Wed, 25 Nov 2026 05:34:33 GMT"
            let parts: Vec<&str> = http.split(' ').collect();
            let mut clf = Vec::new();
            push_clf_time(&mut clf, t);
            let want = format!("{}/{}/{}:{} +0000", parts[1], parts[2], parts[3], parts[4]);
            assert_eq!(String::from_utf8(clf).unwrap(), want);
        }
    }
}
