//! Framing attacks: requests whose framing quire and the origin might read differently
//! (an `Upgrade` with a body, the classic request-smuggling shapes), and unkeyed
//! headers that try to change a stored answer. Judged from another client: its request
//! on the pooled origin connection must get the answer to *its* request.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use super::raw_origin::{Action, RawOrigin};
use super::wire::{self, connect_from};
use super::{Env, Outcome};

const ATTACKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const VICTIM: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

/// An origin that answers `/early*` before reading the body, reflects `/reflect*`,
/// and serves a page naming its path otherwise.
async fn origin() -> anyhow::Result<RawOrigin> {
    RawOrigin::start(Arc::new(|path: &str| {
        if path.starts_with("/early") {
            Action::AnswerEarly
        } else if path.starts_with("/reflect") {
            Action::Reflect
        } else {
            Action::Page { size: 64 }
        }
    }))
    .await
}

/// Whether a victim's `GET path` is answered with the page for `path`.
async fn victim_intact(addr: std::net::SocketAddr, path: &str) -> Result<(), String> {
    match wire::get(addr, VICTIM, path, "").await {
        Ok(a) if a.status == 200 && a.body.starts_with(format!("path={path}\n").as_bytes()) => {
            Ok(())
        }
        Ok(a) => Err(format!(
            "{path}: got {} {:?}",
            a.status,
            String::from_utf8_lossy(&a.body[..a.body.len().min(60)])
        )),
        Err(e) => Err(format!("{path}: {e:#}")),
    }
}

/// An `Upgrade` request with `Content-Length`, to an origin that answers before
/// reading the body: the next request on the pooled connection must be intact.
pub(crate) async fn upgrade_with_content_length(env: &Env) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("upgrade_with_content_length");
    let origin = origin().await?;
    let proxy = env.proxy("upgrade_cl", &origin.url(), "").await?;
    let rounds = env.scale.pick(5, 50);
    let mut broken = 0;
    for i in 0..rounds {
        let mut s = connect_from(ATTACKER, proxy.addr).await?;
        let body = format!("GET /poison-{i} HTTP/1.1\r\nhost: hostile.test\r\nx: ");
        let body = format!("{body:.<64}");
        let req = format!(
            "GET /early-{i} HTTP/1.1\r\nhost: hostile.test\r\nconnection: upgrade\r\n\
             upgrade: websocket\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = wire::exchange(&mut s, req.as_bytes(), Duration::from_secs(5)).await;
        if let Err(e) = victim_intact(proxy.addr, &format!("/victim-{i}")).await {
            broken += 1;
            out.failures
                .push(format!("after an upgrade with a body: {e}"));
        }
    }
    out.figure("rounds", f64::from(rounds));
    out.figure("victims_broken", f64::from(broken));
    Ok(out)
}

/// Ambiguous framings, each followed by a smuggled request in the same write; a
/// victim's request afterwards must be intact.
pub(crate) async fn smuggling_shapes(env: &Env) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("smuggling_shapes");
    let origin = origin().await?;
    let proxy = env.proxy("smuggling", &origin.url(), "").await?;
    let smuggled = "GET /smuggled HTTP/1.1\r\nhost: hostile.test\r\n\r\n";
    let shapes: Vec<(&str, String)> = vec![
        ("cl_and_te", format!("content-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}")),
        ("te_and_cl", format!("transfer-encoding: chunked\r\ncontent-length: 60\r\n\r\n0\r\n\r\n{smuggled}")),
        ("two_lengths", format!("content-length: 0\r\ncontent-length: 44\r\n\r\n{smuggled}")),
        ("te_space", format!("transfer-encoding : chunked\r\n\r\n0\r\n\r\n{smuggled}")),
        ("te_xchunked", format!("transfer-encoding: xchunked\r\ncontent-length: 3\r\n\r\nabc{smuggled}")),
        ("te_list", format!("transfer-encoding: chunked, identity\r\n\r\n0\r\n\r\n{smuggled}")),
        ("te_folded", format!("transfer-encoding:\r\n chunked\r\n\r\n0\r\n\r\n{smuggled}")),
        ("cl_plus", format!("content-length: +44\r\n\r\n{smuggled}")),
        ("cl_hex", format!("content-length: 0x2c\r\n\r\n{smuggled}")),
        ("chunk_overflow", format!("transfer-encoding: chunked\r\n\r\nfffffffffffffffff1\r\nx\r\n0\r\n\r\n{smuggled}")),
        ("chunk_bare_lf", format!("transfer-encoding: chunked\r\n\r\n2;x\nab\r\n0\r\n\r\n{smuggled}")),
        ("upgrade_te", format!("connection: upgrade\r\nupgrade: websocket\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n{smuggled}")),
    ];
    let mut broken = 0;
    for (i, (shape, rest)) in shapes.iter().enumerate() {
        let mut s = connect_from(ATTACKER, proxy.addr).await?;
        let req = format!("POST /early-{shape} HTTP/1.1\r\nhost: hostile.test\r\n{rest}");
        let _ = wire::exchange(&mut s, req.as_bytes(), Duration::from_secs(5)).await;
        // Whatever quire made of the rest of the attacker's bytes, read it off.
        let _ = tokio::time::timeout(Duration::from_millis(300), wire::read_answer(&mut s)).await;
        if let Err(e) = victim_intact(proxy.addr, &format!("/victim-{i}")).await {
            broken += 1;
            out.failures.push(format!("after {shape}: {e}"));
        }
    }
    out.figure("shapes", shapes.len() as f64);
    out.figure("victims_broken", f64::from(broken));
    Ok(out)
}

/// Headers outside the key (`X-Forwarded-Host`, `X-Original-URL`) sent with a miss
/// must not change the answer a clean request then gets.
pub(crate) async fn unkeyed_header_poisoning(env: &Env) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("unkeyed_header_poisoning");
    let origin = origin().await?;
    let proxy = env.proxy("poisoning", &origin.url(), "").await?;
    let rounds = env.scale.pick(4, 40);
    let mut poisoned = 0;
    for i in 0..rounds {
        let path = format!("/reflect-{i}");
        let evil = "x-forwarded-host: evil.example\r\nx-original-url: /admin\r\n";
        for _ in 0..2 {
            let _ = wire::get(proxy.addr, ATTACKER, &path, evil).await?;
        }
        let clean = wire::get(proxy.addr, VICTIM, &path, "").await?;
        let text = String::from_utf8_lossy(&clean.body);
        if text.contains("evil") || text.contains("/admin") {
            poisoned += 1;
            out.failures
                .push(format!("{path}: a clean request got {text:?}"));
        }
    }
    out.figure("rounds", f64::from(rounds));
    out.figure("poisoned", f64::from(poisoned));
    Ok(out)
}
