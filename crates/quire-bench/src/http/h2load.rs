//! The load generator over TLS, `--tls`: `h2load` (Debian's nghttp2-client), the
//! HTTP/2 project's own benchmark client, speaking HTTPS/1.1 (`--h1`, keep-alive, one
//! request in flight per connection, as the cleartext runs) or HTTP/2 (`-m` streams
//! per connection). It runs as a separate process pinned with `taskset` (as
//! `wrk::run` does for wrk), a thread per generator CPU (one by default: on one core
//! it used 93 % of it at 50,000 HTTPS/1.1 requests/s against quire here, so the
//! report's warning of a saturated generator matters), for a fixed duration, over
//! the same path list as the cleartext runs (`-i`, against `-B https://host:port`)
//! with the same `Accept-Encoding`.
//!
//! What it gives back: h2load prints counts, not percentiles, so the latency
//! distribution comes from its `--log-file` (one line per request: start in µs since
//! the epoch, status, µs to the end of the response), read line by line into the
//! shared histogram (bounded memory whatever the run's length) and into completions
//! per 100 ms, as the built-in generator reports them. From its summary: responses
//! by status class (a 4xx/5xx counts as non-2xx/3xx and a failed stream as an error,
//! as in the other generators' runs), bytes, the run's length, and what TLS
//! negotiated.
//!
//! Known difference from the other generators: h2load starts every connection at the
//! top of the path list, so connections request the same pages at about the same
//! time (the order drifts apart as answers come back at different speeds). It is the
//! same for every server measured.

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use super::load::LoadResult;
use super::tls::{Negotiated, Protocol};
use crate::histogram::Histogram;

/// One h2load run.
#[derive(Debug, Clone)]
pub(crate) struct Spec<'a> {
    /// `host:port` of the HTTPS server.
    pub host: &'a str,
    /// Paths to request, one per line, in order.
    pub paths: &'a Path,
    /// HTTPS/1.1 or HTTP/2 (not [`Protocol::Handshake`]).
    pub protocol: Protocol,
    /// Connections.
    pub connections: usize,
    /// HTTP/2 streams in flight per connection.
    pub streams: usize,
    /// How long to send requests.
    pub duration: Duration,
    /// The `Accept-Encoding` field.
    pub accept_encoding: &'a str,
    /// A `Cookie` field (quire bypasses its cache for requests with one).
    pub cookie: Option<&'a str>,
    /// CPUs for h2load (a taskset list): one thread on each.
    pub cpus: &'a str,
    /// Where h2load writes its per-request log (removed after reading).
    pub log: &'a Path,
}

impl Spec<'_> {
    /// h2load's arguments after `taskset -c CPUS h2load`.
    pub(crate) fn args(&self) -> Vec<String> {
        let mut a = vec![
            format!(
                "--threads={}",
                super::servers::cpu_count(self.cpus).min(self.connections.max(1))
            ),
            format!("--clients={}", self.connections),
            format!("--duration={}", self.duration.as_secs().max(1)),
        ];
        match self.protocol {
            Protocol::H2 => a.push(format!("--max-concurrent-streams={}", self.streams.max(1))),
            // Streams would pipeline HTTP/1.1: one request in flight per connection.
            Protocol::Https1 | Protocol::Handshake => a.push("--h1".into()),
        }
        a.extend([
            format!("--base-uri=https://{}", self.host),
            format!("--input-file={}", self.paths.display()),
            format!("--header=Accept-Encoding: {}", self.accept_encoding),
        ]);
        if let Some(c) = self.cookie {
            a.push(format!("--header=Cookie: {c}"));
        }
        a.extend([
            format!("--tls13-ciphers={}", super::tls::CIPHER),
            format!("--groups={}", super::tls::GROUP),
            format!("--log-file={}", self.log.display()),
        ]);
        a
    }
}

/// Runs h2load as `spec` says, and returns its result and its CPU jiffies (sampled
/// while it ran).
pub(crate) fn run(spec: &Spec) -> anyhow::Result<(LoadResult, u64)> {
    let child = Command::new("taskset")
        .args(["-c", spec.cpus, "h2load"])
        .args(spec.args())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting h2load under taskset")?;
    let (out, jiffies) = super::procstat::wait_sampled(child, spec.duration, "h2load")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = parse_summary(&stdout).with_context(|| {
        format!(
            "h2load printed no summary (apt-get install nghttp2-client): {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let log = std::fs::File::open(spec.log)
        .with_context(|| format!("h2load wrote no log {}", spec.log.display()))?;
    let latencies = Latencies::read(std::io::BufReader::new(log))?;
    let _ = std::fs::remove_file(spec.log);
    Ok((summary.result(&latencies, spec.connections), jiffies))
}

/// What h2load's summary says.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Summary {
    /// The run's length (`finished in`), microseconds.
    pub duration_us: u64,
    /// Requests done (answered or failed).
    pub done: u64,
    /// Answered with 2xx or 3xx.
    pub succeeded: u64,
    /// Streams that failed (reset, closed, timed out).
    pub failed: u64,
    /// Answers by status class: 2xx, 3xx, 4xx, 5xx.
    pub status: [u64; 4],
    /// Bytes received, all included.
    pub bytes: u64,
    /// What TLS negotiated, when h2load printed it.
    pub tls: Option<Negotiated>,
}

/// The numbers in `text` (`"4034 total, 4036 started"` → 4034, 4036).
fn numbers(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// A duration as h2load prints it (`2.01s`, `211.30ms`, `950us`), in microseconds.
fn duration_us(text: &str) -> Option<u64> {
    let t = text.trim();
    let (n, scale) = if let Some(n) = t.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e3)
    } else {
        (t.strip_suffix('s')?, 1e6)
    };
    let v: f64 = n.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * scale).round() as u64)
}

/// Reads h2load's summary from its standard output; `None` without the
/// `finished in` and `requests:` lines.
pub(crate) fn parse_summary(stdout: &str) -> Option<Summary> {
    let mut s = Summary::default();
    let mut tls = Negotiated::default();
    let (mut finished, mut requests) = (false, false);
    for line in stdout.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("finished in ") {
            s.duration_us = duration_us(rest.split(',').next()?)?;
            finished = true;
        } else if let Some(rest) = line.strip_prefix("requests: ") {
            let field = |name: &str| {
                rest.split(',')
                    .find(|f| f.trim().ends_with(name))
                    .and_then(|f| numbers(f).first().copied())
            };
            s.done = field("done")?;
            s.succeeded = field("succeeded")?;
            s.failed = field("failed")?;
            requests = true;
        } else if let Some(rest) = line.strip_prefix("status codes: ") {
            // `3990 2xx, 10 3xx, 7 4xx, 3 5xx`: the count before each class.
            for (i, class) in ["2xx", "3xx", "4xx", "5xx"].iter().enumerate() {
                s.status[i] = rest
                    .split(',')
                    .find(|f| f.trim().ends_with(class))
                    .and_then(|f| numbers(f).first().copied())?;
            }
        } else if let Some(rest) = line.strip_prefix("traffic: ") {
            // `53.25MB (55831794) total, ...`: the exact count is in parentheses.
            let exact = rest.split_once('(')?.1.split_once(')')?.0;
            s.bytes = exact.trim().parse().ok()?;
        } else if let Some(v) = line.strip_prefix("TLS Protocol: ") {
            tls.version = v.trim().into();
        } else if let Some(v) = line.strip_prefix("Cipher: ") {
            tls.cipher = v.trim().into();
        } else if let Some(v) = line.strip_prefix("Server Temp Key: ") {
            tls.group = v.split_whitespace().next().unwrap_or("").into();
        } else if let Some(v) = line.strip_prefix("Application protocol: ") {
            tls.alpn = v.trim().into();
        }
    }
    if tls != Negotiated::default() {
        s.tls = Some(tls);
    }
    (finished && requests).then_some(s)
}

impl Summary {
    /// The run as the other generators report one, with the latency distribution and
    /// timeline from the log.
    pub(crate) fn result(&self, lat: &Latencies, connections: usize) -> LoadResult {
        let h = &lat.histogram;
        let requests: u64 = self.status.iter().sum();
        LoadResult {
            requests,
            duration_us: self.duration_us,
            bytes: self.bytes,
            errors: self.failed,
            non_2xx: self.status[2] + self.status[3],
            p50_us: h.percentile(50.0),
            p90_us: h.percentile(90.0),
            p99_us: h.percentile(99.0),
            p999_us: h.percentile(99.9),
            p9999_us: h.percentile(99.99),
            max_us: h.max() as f64,
            rate: None,
            achieved_rate: requests as f64 / (self.duration_us.max(1) as f64 / 1e6),
            connections,
            timeline: lat.timeline.clone(),
            latency: super::load::POINTS
                .iter()
                .map(|&p| (p, h.percentile(p)))
                .collect(),
            tls: self.tls.clone(),
            ..LoadResult::default()
        }
    }
}

/// What h2load's per-request log holds: latencies of answered requests, and
/// completions per 100 ms from the first request's start.
#[derive(Debug, Clone)]
pub(crate) struct Latencies {
    /// Microseconds from each request's start to the end of its response.
    pub histogram: Histogram,
    /// Completions per 100 ms.
    pub timeline: Vec<u64>,
    /// Lines for failed streams (status -1).
    pub failed: u64,
}

/// Timeline slots kept at most (a day of 100 ms slots): a garbled time cannot
/// allocate without bound.
const SLOTS_MAX: u64 = 864_000;

/// `(start µs, status, µs to the end)` of one log line; `None` for a line that is not
/// one.
fn log_line(line: &str) -> Option<(u64, i32, u64)> {
    let mut f = line.split('\t');
    let start = f.next()?.trim().parse().ok()?;
    let status = f.next()?.trim().parse().ok()?;
    let took = f.next()?.trim().parse().ok()?;
    Some((start, status, took))
}

impl Latencies {
    /// Reads a log twice over (the first pass finds the earliest start, which is not
    /// on the first line: lines are in order of completion), from a seekable reader.
    pub(crate) fn read<R: BufRead + std::io::Seek>(mut r: R) -> anyhow::Result<Latencies> {
        let mut t0 = u64::MAX;
        let mut line = String::new();
        while r.read_line(&mut line)? > 0 {
            if let Some((start, _, _)) = log_line(&line) {
                t0 = t0.min(start);
            }
            line.clear();
        }
        r.seek(std::io::SeekFrom::Start(0))?;
        let mut lat = Latencies {
            histogram: Histogram::new(),
            timeline: Vec::new(),
            failed: 0,
        };
        while r.read_line(&mut line)? > 0 {
            if let Some((start, status, took)) = log_line(&line) {
                lat.add(start.saturating_sub(t0), status, took);
            }
            line.clear();
        }
        Ok(lat)
    }

    /// One request, started `since_t0` µs after the first.
    fn add(&mut self, since_t0: u64, status: i32, took: u64) {
        if status < 0 {
            self.failed += 1;
            return;
        }
        self.histogram.record(took);
        let slot = (since_t0 + took) / 100_000;
        if slot < SLOTS_MAX {
            let slot = slot as usize;
            if self.timeline.len() <= slot {
                self.timeline.resize(slot + 1, 0);
            }
            self.timeline[slot] += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// h2load 1.52's output for a 2 s HTTP/2 run against nginx (progress lines cut).
    const OUT: &str = "starting benchmark...
spawning thread #0: 4 total client(s). Timing-based test with 0s of warm-up time and 2s of main duration for measurements.
TLS Protocol: TLSv1.3
Cipher: TLS_AES_128_GCM_SHA256
Server Temp Key: X25519 253 bits
Application protocol: h2
Process Request Failure:2
Main benchmark duration is over for thread #0. Stopping all clients.

finished in 2.01s, 2000.00 req/s, 26.62MB/s
requests: 4034 total, 4036 started, 4034 done, 4000 succeeded, 34 failed, 34 errored, 0 timeout
status codes: 3990 2xx, 10 3xx, 7 4xx, 3 5xx
traffic: 53.25MB (55831794) total, 664.05KB (679985) headers (space savings 29.17%), 52.49MB (55036480) data
                     min         max         mean         sd        +/- sd
time for request:       97us     73.25ms      3.98ms      8.02ms    95.58%
";

    #[test]
    fn the_summary_parses() {
        let s = parse_summary(OUT).unwrap();
        assert_eq!(s.duration_us, 2_010_000);
        assert_eq!((s.done, s.succeeded, s.failed), (4034, 4000, 34));
        assert_eq!(s.status, [3990, 10, 7, 3]);
        assert_eq!(s.bytes, 55_831_794);
        let tls = s.tls.clone().unwrap();
        assert_eq!(tls.version, "TLSv1.3");
        assert_eq!(tls.cipher, "TLS_AES_128_GCM_SHA256");
        assert_eq!(tls.group, "X25519");
        assert_eq!(tls.alpn, "h2");
        let lat = Latencies {
            histogram: Histogram::new(),
            timeline: vec![1, 2],
            failed: 0,
        };
        let r = s.result(&lat, 4);
        assert_eq!((r.requests, r.errors, r.non_2xx), (4010, 34, 10));
        assert!((r.achieved_rate - 4010.0 / 2.01).abs() < 1e-6);
        assert_eq!(r.tls, s.tls);
        // Cleartext, another unit, no TLS lines.
        let plain = "finished in 211.30ms, 94.65 req/s, 1.28MB/s
requests: 20 total, 20 started, 20 done, 20 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 20 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 277.98KB (284648) total, 3.34KB (3418) headers (space savings 29.06%), 273.82KB (280394) data
";
        let p = parse_summary(plain).unwrap();
        assert_eq!((p.duration_us, p.tls), (211_300, None));
        assert_eq!(parse_summary("finished in 2s\n"), None, "no requests line");
        assert_eq!(parse_summary("connect: Connection refused\n"), None);
        assert_eq!(duration_us("950us"), Some(950));
        assert_eq!(duration_us("x"), None);
    }

    #[test]
    fn the_log_gives_percentiles_and_a_timeline() {
        // Out of order by start (lines are in order of completion), one failure, one
        // line that is not one.
        let log = "1000200\t200\t100\n1000000\t200\t350\n1000100\t-1\t5\n\
                   1150000\t404\t120\ngarbage\n1250000\t200\t90\n";
        let lat = Latencies::read(Cursor::new(log)).unwrap();
        assert_eq!(lat.histogram.count(), 4);
        assert_eq!(lat.failed, 1);
        assert_eq!(lat.histogram.max(), 350);
        // Completions at 300, 350, 150,120 and 250,090 µs from the first start.
        assert_eq!(lat.timeline, [2, 1, 1]);
        assert_eq!(lat.histogram.percentile(50.0), 100.0);
    }

    #[test]
    fn the_command_line_says_protocol_suite_and_log() {
        let spec = Spec {
            host: "127.0.0.1:8443",
            paths: Path::new("/r/paths.txt"),
            protocol: Protocol::H2,
            connections: 64,
            streams: 10,
            duration: Duration::from_secs(10),
            accept_encoding: "gzip",
            cookie: None,
            cpus: "1",
            log: Path::new("/r/h2load.log"),
        };
        let a = spec.args();
        for want in [
            "--threads=1",
            "--clients=64",
            "--duration=10",
            "--max-concurrent-streams=10",
            "--base-uri=https://127.0.0.1:8443",
            "--input-file=/r/paths.txt",
            "--header=Accept-Encoding: gzip",
            "--tls13-ciphers=TLS_AES_128_GCM_SHA256",
            "--groups=X25519",
            "--log-file=/r/h2load.log",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} in {a:?}");
        }
        let h1 = Spec {
            protocol: Protocol::Https1,
            cookie: Some("s=1"),
            ..spec
        }
        .args();
        assert!(h1.iter().any(|x| x == "--h1"));
        assert!(!h1.iter().any(|x| x.starts_with("--max-concurrent")));
        assert!(h1.iter().any(|x| x == "--header=Cookie: s=1"));
    }
}
