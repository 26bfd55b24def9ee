//! The second load generator, `--loadgen wrk`: Debian's `wrk`, run as a separate
//! process pinned to its own cores with `taskset`, keep-alive connections, fed the
//! request sequence by a generated Lua script that also prints the results as one
//! JSON line. Kept to cross-check the built-in generator ([`super::load`]), which is
//! the default because wrk runs Lua for every request (it saturates its core before
//! quire does) and has no fixed-rate mode.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;

/// What one wrk run measured.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct WrkResult {
    /// Requests completed.
    pub requests: u64,
    /// Run length, microseconds.
    pub duration_us: u64,
    /// Response bytes read.
    pub bytes: u64,
    /// Connect, read, write and timeout errors.
    pub errors: u64,
    /// Responses with a status other than 2xx/3xx.
    pub non_2xx: u64,
    /// Latency percentiles, microseconds.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th.
    pub p99_us: f64,
    /// 99.9th.
    pub p999_us: f64,
}

impl WrkResult {
    /// Requests per second.
    pub fn rps(&self) -> f64 {
        self.requests as f64 / (self.duration_us.max(1) as f64 / 1e6)
    }
}

/// The Lua script: requests cycle through `paths` (one per line in `list`), asking
/// for `accept_encoding`, with a `Cookie` field when `cookie` is given (a cookie makes
/// quire bypass its cache).
pub fn script(list: &Path, cookie: Option<&str>, accept_encoding: &str) -> String {
    let clean = |s: &str| s.replace(['"', '\\', '\r', '\n'], "");
    let cookie = cookie.map_or(String::new(), |c| {
        format!(", [\"Cookie\"] = \"{}\"", clean(c))
    });
    let accept = clean(accept_encoding);
    format!(
        r#"local paths = {{}}
for line in io.lines("{}") do paths[#paths + 1] = line end
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i], {{["Accept-Encoding"] = "{accept}"{cookie}}})
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('QUIRE-WRK {{"requests":%d,"duration_us":%d,"bytes":%d,"errors":%d,"non_2xx":%d,"p50_us":%f,"p90_us":%f,"p99_us":%f,"p999_us":%f}}\n',
    summary.requests, summary.duration, summary.bytes, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9)))
end
"#,
        list.display()
            .to_string()
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
    )
}

/// Parses the JSON line the script prints.
pub fn parse(stdout: &str) -> Option<WrkResult> {
    let line = stdout.lines().find_map(|l| l.strip_prefix("QUIRE-WRK "))?;
    serde_json::from_str(line).ok()
}

/// Runs wrk against `base` with `script_path`, pinned to `cpus` (a taskset list),
/// and returns its result and its CPU jiffies (sampled while it ran).
pub fn run(
    base: &str,
    script_path: &Path,
    connections: usize,
    duration: Duration,
    cpus: &str,
) -> anyhow::Result<(WrkResult, u64)> {
    let child = Command::new("taskset")
        .args(["-c", cpus, "wrk", "-t1"])
        .arg(format!("-c{connections}"))
        .arg(format!("-d{}s", duration.as_secs().max(1)))
        .arg("--latency")
        .arg("-s")
        .arg(script_path)
        .arg(base)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting wrk (apt-get install wrk)")?;
    let (out, jiffies) = super::procstat::wait_sampled(child, duration, "wrk")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result = parse(&stdout).with_context(|| {
        format!(
            "wrk printed no result: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    Ok((result, jiffies))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_line_parses() {
        let out = "Running 1s test\nQUIRE-WRK {\"requests\":1000,\"duration_us\":2000000,\"bytes\":5,\"errors\":1,\"non_2xx\":2,\"p50_us\":100.5,\"p90_us\":200.0,\"p99_us\":300.0,\"p999_us\":400.0}\n";
        let r = parse(out).unwrap();
        assert_eq!(r.requests, 1000);
        assert!((r.rps() - 500.0).abs() < 1e-9);
        assert_eq!(parse("nothing"), None);
        assert!(script(Path::new("/tmp/a\"b"), None, "gzip").contains("/tmp/a\\\"b"));
        let s = script(Path::new("/p"), Some("s=1"), "gzip, br\"");
        assert!(s.contains("[\"Cookie\"] = \"s=1\""));
        assert!(s.contains("[\"Accept-Encoding\"] = \"gzip, br\""));
    }
}
