//! quire's own HTTP load generator, `quire bench load` (hidden): one thread, epoll,
//! N keep-alive connections, requests pre-formatted once and sent in the order of a
//! path file, closed loop or open loop at a fixed rate with latency counted from each
//! request's due time (coordinated omission corrected, as wrk2 does).
//!
//! Why written by hand: Debian's `wrk` runs Lua for every
//! request and saturates its core at about 100k requests/s on the benchmark machine,
//! before quire does; and it has no fixed-rate mode. wrk2 and oha, which have one, are
//! not packaged. This generator does the least per request: one write, one read, an
//! incremental parse without copies, an increment in a fixed histogram.
//!
//! [`run`] starts it as a separate process pinned with `taskset` (as `wrk::run`
//! does for wrk) and returns its `LoadResult` and CPU time; [`main`] is the process.
//! With `--handshakes` the process runs the new-connection TLS client of `handshake`
//! instead (`quire bench http --tls`), and prints the same result line.

mod conn;
mod engine;
mod handshake;
mod parse;
mod report;
mod request;
mod schedule;
mod stats;
#[cfg(test)]
mod tests;
#[expect(
    unsafe_code,
    reason = "epoll_pwait2, which rustix calls only when built for Linux 5.11; see the module doc"
)]
mod wait;

use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use clap::Args;

pub(crate) use report::{LoadResult, POINTS};

/// Arguments of `quire bench load` (hidden: the harness runs it).
#[derive(Debug, Clone, Args)]
pub struct BenchLoadArgs {
    /// The server, host:port (or http://host:port).
    #[arg(long, value_name = "ADDR")]
    pub host: String,
    /// Paths to request, one per line, in this order (cycled).
    #[arg(long, value_name = "FILE")]
    pub paths: PathBuf,
    /// Keep-alive connections.
    #[arg(long, default_value_t = 32)]
    pub connections: usize,
    /// Seconds to send requests.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub duration: f64,
    /// Open loop: this many requests per second in total, latency counted from when
    /// each was due (default: closed loop).
    #[arg(long, value_name = "R")]
    pub rate: Option<f64>,
    /// The Accept-Encoding field.
    #[arg(long, default_value = "gzip, br")]
    pub accept_encoding: String,
    /// A Cookie field for every request.
    #[arg(long, value_name = "STR")]
    pub cookie: Option<String>,
    /// Seconds before an unanswered request is an error.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub timeout: f64,
    /// Every request on a new TLS connection (a full TLS 1.3 handshake, no
    /// resumption), closed by the server after its answer; `--rate` is not used.
    #[arg(long, conflicts_with = "rate")]
    pub handshakes: bool,
    /// Never sleep: wait for events without a timeout's sleep (`epoll_pwait2` with
    /// a zero timeout), spinning the generator's core. A server then never has to
    /// wake the generator to hand it an answer (see `engine`).
    #[arg(long, conflicts_with = "handshakes")]
    pub spin: bool,
}

/// One run of the generator as a separate process.
#[derive(Debug, Clone)]
pub struct Spec<'a> {
    /// The server, `host:port` or `http://host:port`.
    pub host: &'a str,
    /// Paths to request, one per line, in order (cycled).
    pub paths: &'a Path,
    /// Keep-alive connections.
    pub connections: usize,
    /// How long to send requests.
    pub duration: Duration,
    /// Open loop at this many requests per second in total; `None`: closed loop.
    pub rate: Option<f64>,
    /// The `Accept-Encoding` field.
    pub accept_encoding: &'a str,
    /// A `Cookie` field (quire bypasses its cache for requests with one).
    pub cookie: Option<&'a str>,
    /// CPUs for the generator (a taskset list).
    pub cpus: &'a str,
    /// A new TLS connection for every request (`--handshakes`).
    pub handshakes: bool,
    /// The generator never sleeps (`--spin`).
    pub spin: bool,
}

/// Runs `quire bench load` (this binary) pinned to `spec.cpus`, and returns its
/// result and its CPU jiffies (utime + stime: as the process read its own at the end,
/// or else the last sample from /proc while it ran).
pub fn run(spec: &Spec) -> anyhow::Result<(LoadResult, u64)> {
    let exe = std::env::current_exe().context("finding the quire binary")?;
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", spec.cpus])
        .arg(exe)
        .args(["bench", "load", "--host", spec.host, "--paths"])
        .arg(spec.paths)
        .arg("--connections")
        .arg(spec.connections.to_string())
        .arg("--duration")
        .arg(spec.duration.as_secs_f64().to_string())
        .arg("--accept-encoding")
        .arg(spec.accept_encoding);
    if let Some(r) = spec.rate {
        cmd.arg("--rate").arg(r.to_string());
    }
    if let Some(c) = spec.cookie {
        cmd.arg("--cookie").arg(c);
    }
    if spec.handshakes {
        cmd.arg("--handshakes");
    }
    if spec.spin {
        cmd.arg("--spin");
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting quire bench load under taskset")?;
    let (out, jiffies) = super::procstat::wait_sampled(child, spec.duration, "quire bench load")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result = report::parse(&stdout).with_context(|| {
        format!(
            "quire bench load printed no result: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let jiffies = result.cpu_jiffies.unwrap_or(jiffies).max(jiffies);
    Ok((result, jiffies))
}

/// `quire bench load`: runs the generator in this process and prints the result line.
pub fn main(args: &BenchLoadArgs) -> anyhow::Result<()> {
    let host = args.host.strip_prefix("http://").unwrap_or(&args.host);
    let host = host.trim_end_matches('/');
    let addr = host
        .to_socket_addrs()
        .with_context(|| format!("resolving {host}"))?
        .next()
        .with_context(|| format!("{host}: no address"))?;
    let text = std::fs::read_to_string(&args.paths)
        .with_context(|| format!("reading {}", args.paths.display()))?;
    let paths = request::paths_from(&text);
    let secs = |name: &str, s: f64| {
        Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| !d.is_zero())
            .with_context(|| format!("--{name} {s}: give a positive number of seconds"))
    };
    anyhow::ensure!(
        args.rate.is_none_or(|r| r.is_finite() && r > 0.0),
        "--rate must be a positive number of requests per second"
    );
    let cfg = engine::Config {
        addr,
        connections: args.connections,
        duration: secs("duration", args.duration)?,
        rate: args.rate,
        timeout: secs("timeout", args.timeout)?,
        spin: args.spin,
    };
    let (ae, cookie) = (&args.accept_encoding, args.cookie.as_deref());
    let (stats, tls) = if args.handshakes {
        let reqs = request::Requests::closing(&paths, host, ae, cookie)?;
        handshake::run(&cfg, reqs).context("running the handshakes")?
    } else {
        let reqs = request::Requests::new(&paths, host, ae, cookie)?;
        (engine::run(&cfg, &reqs).context("running the load")?, None)
    };
    let mut result = LoadResult::from_stats(&stats, args.rate, args.connections);
    result.tls = tls;
    result.cpu_jiffies = super::procstat::process(std::process::id());
    println!("{}", result.line());
    Ok(())
}
