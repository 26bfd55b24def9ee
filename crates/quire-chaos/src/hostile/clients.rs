//! Clients that cheat on who they are or hoard what is shared: a trusted proxy's
//! hostile `X-Forwarded-For`, addresses that hold every upgrade slot, and one client's
//! slow requests against a pool of origins. Judged by what other clients get and by
//! what the attacker was admitted against its budget.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::raw_origin::{Action, RawOrigin};
use super::wire::{self, connect_from};
use super::{Env, Outcome};

/// The `X-Forwarded-For` lines of one variant, for client number `n`.
type XffFor = Box<dyn Fn(usize) -> String>;

/// Misses a trusted proxy forwards for one client with a hostile `X-Forwarded-For`:
/// no more are admitted than the client's budget (or the request is refused).
pub(crate) async fn forwarded_for_variants(env: &Env) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("forwarded_for_variants");
    let origin = RawOrigin::start(Arc::new(|_: &str| Action::Page { size: 64 })).await?;
    let burst = 5;
    let toml = format!(
        "trusted_proxies = [\"127.0.0.1\"]\n\n[rate_limit]\nmisses_per_sec = 1\nmisses_burst = {burst}\n"
    );
    let proxy = env.proxy("xff", &origin.url(), &toml).await?;
    let tries = env.scale.pick(12, 60);
    let variants: Vec<(&str, XffFor)> = vec![
        (
            "long",
            Box::new(|c| {
                format!(
                    "x-forwarded-for: {}\r\n",
                    format!("10.9.{c}.9, ").repeat(300)
                )
            }),
        ),
        (
            "non_ascii",
            Box::new(|c| format!("x-forwarded-for: 10.9.{c}.9\u{e9}\r\n")),
        ),
        (
            "several_fields",
            Box::new(|c| format!("x-forwarded-for: 10.1.{c}.1\r\nx-forwarded-for: 10.9.{c}.9\r\n")),
        ),
        (
            "garbage",
            Box::new(|_| "x-forwarded-for: not-an-address\r\n".to_string()),
        ),
        ("empty", Box::new(|_| "x-forwarded-for: \r\n".to_string())),
    ];
    for (v, (name, xff)) in variants.iter().enumerate() {
        let began = Instant::now();
        let (mut admitted, mut refused) = (0u32, 0u32);
        for i in 0..tries {
            let path = format!("/xff-{name}-{i}");
            let a = wire::get(proxy.addr, Ipv4Addr::LOCALHOST, &path, &xff(v)).await?;
            match a.status {
                200 => admitted += 1,
                400 => refused += 1,
                _ => {}
            }
        }
        let budget = burst + began.elapsed().as_secs_f64().ceil() as u32 + 1;
        out.figure(&format!("{name}_admitted"), f64::from(admitted));
        out.figure(&format!("{name}_refused_400"), f64::from(refused));
        out.check(admitted <= budget, || {
            format!("X-Forwarded-For {name}: {admitted} of {tries} misses admitted against a budget of {budget}")
        });
    }
    Ok(out)
}

/// Tries `most` upgrades from `from` (stopping at the first refusal when
/// `stop_when_refused`): the tunnels opened and the refusals.
async fn open_tunnels(
    from: Ipv4Addr,
    to: std::net::SocketAddr,
    most: usize,
    stop_when_refused: bool,
) -> anyhow::Result<(Vec<tokio::net::TcpStream>, usize)> {
    let (mut open, mut refused) = (Vec::new(), 0);
    for i in 0..most {
        let mut s = connect_from(from, to).await?;
        let req = format!(
            "GET /ws-{i} HTTP/1.1\r\nhost: hostile.test\r\nconnection: upgrade\r\nupgrade: websocket\r\n\
             sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        );
        match wire::exchange(&mut s, req.as_bytes(), Duration::from_secs(5)).await {
            Ok(a) if a.status == 101 => open.push(s),
            _ => refused += 1,
        }
        if refused > 0 && stop_when_refused {
            break;
        }
    }
    Ok((open, refused))
}

/// Three addresses hoarding tunnels cannot take the upgrade slots a fourth needs.
pub(crate) async fn tunnel_hoarding(env: &Env) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("tunnel_hoarding");
    let origin = RawOrigin::start(Arc::new(|_: &str| Action::Upgrade)).await?;
    // Small: 24 slots, 6 a client (three hoarders hold 18). Full: the defaults (1,024
    // slots, 64 a client).
    let (slots, per_client) = env.scale.pick((24, 6), (1024, 64));
    let toml = format!("[limits]\nupgrades = {slots}\nupgrades_per_client = {per_client}\n");
    let proxy = env.proxy("tunnels", &origin.url(), &toml).await?;
    let mut held = Vec::new();
    for h in 0..3u8 {
        let (open, _) =
            open_tunnels(Ipv4Addr::new(127, 0, 0, 2 + h), proxy.addr, slots, true).await?;
        out.figure(&format!("hoarder_{h}_tunnels"), open.len() as f64);
        held.extend(open);
    }
    let tries = 4;
    let (fresh, refused) =
        open_tunnels(Ipv4Addr::new(127, 0, 0, 9), proxy.addr, tries, false).await?;
    out.figure("newcomer_refused_share", refused as f64 / tries as f64);
    out.check(fresh.len() == tries, || {
        format!(
            "three addresses holding {} tunnels left a fourth {} of {tries} upgrades",
            held.len(),
            fresh.len()
        )
    });
    Ok(out)
}

/// One client's slow requests to a pool of three origins must not make other
/// clients' requests fail.
pub(crate) async fn origin_slowness(env: &Env) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("origin_slowness");
    let behaviour: super::raw_origin::Behaviour = Arc::new(|path: &str| {
        if path.starts_with("/slow") {
            Action::Slow(Duration::from_secs(8), 64)
        } else {
            Action::Page { size: 64 }
        }
    });
    let mut origins = Vec::new();
    let mut toml = String::from("[limits]\norigin_read_timeout = \"1s\"\n");
    for _ in 0..3 {
        let o = RawOrigin::start(behaviour.clone()).await?;
        toml.push_str(&format!("\n[[origins]]\nurl = \"{}\"\n", o.url()));
        origins.push(o);
    }
    let proxy = env.proxy("origins", "", &toml).await?;
    let slow = env.scale.pick(3, 12);
    let addr = proxy.addr;
    let attackers: Vec<_> = (0..slow)
        .map(|i| {
            tokio::spawn(async move {
                let _ =
                    wire::get(addr, Ipv4Addr::new(127, 0, 0, 2), &format!("/slow-{i}"), "").await;
            })
        })
        .collect();
    // The slow requests run their course first (each may be tried on every origin),
    // then another client asks: nothing that client did should find the pool down.
    for a in attackers {
        let _ = a.await;
    }
    let (mut failed, mut asked) = (0u32, 0u32);
    let until = Instant::now() + Duration::from_secs(env.scale.pick(6, 20));
    while Instant::now() < until {
        asked += 1;
        let a = wire::get(
            addr,
            Ipv4Addr::new(127, 0, 0, 3),
            &format!("/fast-{asked}"),
            "",
        )
        .await;
        failed += u32::from(!matches!(a, Ok(ref a) if a.status == 200));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let origin_requests: u64 = origins.iter().map(RawOrigin::requests).sum();
    out.figure("slow_requests", f64::from(slow));
    out.figure("other_client_requests", f64::from(asked));
    out.figure("other_client_failures", f64::from(failed));
    out.figure("origin_requests_total", origin_requests as f64);
    out.check(failed == 0, || {
        format!("{failed} of {asked} other clients' requests failed while one client sent {slow} slow requests")
    });
    Ok(out)
}
