//! The MCP endpoint's latency in `quire bench serve`: `tools/call` of `search` and
//! of `get_note`, anonymous, one at a time on a keep-alive connection, as an agent
//! calls them. Each call is a pass through the cache to the site (a search of the
//! SQLite index, or a note's markdown rendered), so these are uncached timings.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use quire_site::Site;

/// Search queries: a word of each of `count` public notes' titles, spread over the
/// vault (the synthetic titles are words of its list).
pub(crate) fn queries(site: &Site, count: usize) -> Vec<String> {
    let snap = site.snapshot();
    let titles: Vec<String> = snap
        .vault
        .notes()
        .iter()
        .filter(|n| n.visibility() == quire_vault::Visibility::Public)
        .filter_map(|n| n.title().split_whitespace().next().map(str::to_lowercase))
        .collect();
    let step = (titles.len() / count.max(1)).max(1);
    titles.into_iter().step_by(step).take(count).collect()
}

/// The times of one `search` per query and one `get_note` per URL.
pub(crate) fn times(
    conn: &mut TcpStream,
    buf: &mut Vec<u8>,
    queries: &[String],
    urls: &[String],
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let search = |q: &str| serde_json::json!({"name": "search", "arguments": {"query": q}});
    let note = |u: &str| serde_json::json!({"name": "get_note", "arguments": {"url": u}});
    // Warm the endpoint's path (and the index's pages) on calls not timed.
    for q in queries.iter().take(10) {
        call(conn, buf, &search(q))?;
    }
    let mut s = Vec::with_capacity(queries.len());
    for q in queries {
        let t = Instant::now();
        call(conn, buf, &search(q))?;
        s.push(t.elapsed());
    }
    let mut g = Vec::with_capacity(urls.len());
    for u in urls {
        let t = Instant::now();
        call(conn, buf, &note(u))?;
        g.push(t.elapsed());
    }
    Ok((s, g))
}

/// One `tools/call`; fails unless it is answered 200 without a tool error.
fn call(conn: &mut TcpStream, buf: &mut Vec<u8>, params: &serde_json::Value) -> anyhow::Result<()> {
    let body =
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
            .to_string();
    write!(
        conn,
        "POST /_quire/mcp HTTP/1.1\r\nHost: bench.test\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let status = crate::serve::read_answer(conn, buf)?;
    anyhow::ensure!(status == 200, "MCP call answered {status}: {params}");
    anyhow::ensure!(
        !buf.windows(14).any(|w| w == b"\"isError\":true"),
        "MCP tool failed: {params}: {}",
        String::from_utf8_lossy(buf)
    );
    Ok(())
}
