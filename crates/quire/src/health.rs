//! `quire health [--server URL]`: asks a running quire's `/_quire/health` (no token
//! needed) and exits 0 when it answers 200, 1 otherwise — the container image's
//! health check, so the image needs no HTTP client of its own. Plain HTTP only: it
//! runs beside the server it checks.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

/// Arguments of `quire health`.
#[derive(Debug, Clone, Args)]
pub(crate) struct HealthArgs {
    /// The quire server, http://host:port.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// Longest the check may take, in seconds.
    #[arg(long, default_value_t = 3.0)]
    pub timeout: f64,
}

/// Checks the server; `Ok(())` when it answered 200.
pub(crate) fn run(args: &HealthArgs) -> anyhow::Result<()> {
    let authority = crate::cli::authority_of(&args.server)?;
    if !(args.timeout > 0.0 && args.timeout <= 60.0) {
        bail!("--timeout must be above 0 and at most 60 seconds");
    }
    let timeout = Duration::from_secs_f64(args.timeout);
    let addr = authority
        .to_socket_addrs()
        .with_context(|| format!("resolving {authority}"))?
        .next()
        .with_context(|| format!("{authority} has no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("connecting to {authority}"))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(
        s,
        "GET /_quire/health HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head).context("reading the answer")?;
    let line = String::from_utf8_lossy(&head[..n]);
    let status = line.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        bail!(
            "{authority} answered {}",
            line.lines().next().unwrap_or("nothing")
        );
    }
    Ok(())
}
