//! `quire purge`: posts a purge to a running quire's admin API and prints the answer.
//! A blocking HTTP/1.1 exchange over `std::net`: the admin API is on a trusted
//! address, and this keeps the command free of a runtime.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::cli::PurgeArgs;

/// Runs `quire purge`.
pub(crate) fn run(args: &PurgeArgs) -> anyhow::Result<()> {
    if args.urls.is_empty() && args.prefixes.is_empty() && args.tags.is_empty() {
        bail!("nothing to purge: give --url, --prefix or --tag");
    }
    let token = args.admin.token()?;
    let authority = args.admin.authority()?;
    let mut body = serde_json::json!({
        "urls": args.urls,
        "prefixes": args.prefixes,
        "tags": args.tags,
        "soft": args.soft,
        "wait": if args.wait_all { "all" } else { "log" },
    });
    // Absent unless asked, so the server's storage.refill_after_purge decides.
    if args.refill {
        body["refill"] = serde_json::Value::Bool(true);
    }
    let body = body.to_string();
    let mut s =
        TcpStream::connect(authority).with_context(|| format!("connecting to {authority}"))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        s,
        "POST /_quire/purge HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).context("reading the answer")?;
    let (head, text) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    print!("{text}");
    if status != "200" {
        bail!("purge failed: HTTP {status}");
    }
    Ok(())
}
