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

use super::load::LoadResult;

/// The Lua script: requests cycle through `paths` (one per line in `list`), asking
/// for `accept_encoding`, with a `Cookie` field when `cookie` is given (a cookie makes
/// quire bypass its cache).
pub(crate) fn script(list: &Path, cookie: Option<&str>, accept_encoding: &str) -> String {
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
  io.write(string.format('QUIRE-WRK {{"requests":%d,"duration_us":%d,"bytes":%d,"errors":%d,"non_2xx":%d,"p50_us":%f,"p90_us":%f,"p99_us":%f,"p999_us":%f,"p9999_us":%f}}\n',
    summary.requests, summary.duration, summary.bytes, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency:percentile(99.99)))
end
"#,
        list.display()
            .to_string()
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
    )
}

/// Parses the JSON line the script prints, for a run on `connections` connections:
/// the latency distribution is the four percentiles wrk reports, and there is no
/// timeline.
pub(crate) fn parse(stdout: &str, connections: usize) -> Option<LoadResult> {
    let line = stdout.lines().find_map(|l| l.strip_prefix("QUIRE-WRK "))?;
    let mut r: LoadResult = serde_json::from_str(line).ok()?;
    r.latency = vec![
        (50.0, r.p50_us),
        (90.0, r.p90_us),
        (99.0, r.p99_us),
        (99.9, r.p999_us),
        (99.99, r.p9999_us),
    ];
    r.achieved_rate = r.requests as f64 / (r.duration_us.max(1) as f64 / 1e6);
    r.connections = connections;
    Some(r)
}

/// Runs wrk against `base` with `script_path`, pinned to `cpus` (a taskset list),
/// and returns its result and its CPU jiffies (sampled while it ran).
pub(crate) fn run(
    base: &str,
    script_path: &Path,
    connections: usize,
    duration: Duration,
    cpus: &str,
) -> anyhow::Result<(LoadResult, u64)> {
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
    let result = parse(&stdout, connections).with_context(|| {
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
        let r = parse(out, 8).unwrap();
        assert_eq!(
            (r.requests, r.errors, r.non_2xx, r.connections),
            (1000, 1, 2, 8)
        );
        assert!((r.achieved_rate - 500.0).abs() < 1e-9);
        assert_eq!(r.latency[2], (99.0, 300.0));
        assert!(r.timeline.is_empty() && r.rate.is_none());
        assert_eq!(parse("nothing", 8), None);
        assert!(script(Path::new("/tmp/a\"b"), None, "gzip").contains("/tmp/a\\\"b"));
        let s = script(Path::new("/p"), Some("s=1"), "gzip, br\"");
        assert!(s.contains("[\"Cookie\"] = \"s=1\""));
        assert!(s.contains("[\"Accept-Encoding\"] = \"gzip, br\""));
    }
}
