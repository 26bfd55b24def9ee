//! The load of proxy mode: clients that GET catalogue URLs through quire and judge
//! every answer byte for byte, and the editor that moves URLs to new versions at the
//! origin and purges them.
//!
//! Key decisions:
//! - **Skewed popularity**: URL `floor(n^u) - 1` for uniform `u` (log-uniform, close
//!   to Zipf with exponent 1), so a few hundred URLs take most requests and stay hot
//!   while the long tail keeps missing and forcing reclaim.
//! - **Mixed asks**: most requests take identity, some ask for gzip, br or zstd (the
//!   codings quire made itself, decoded here and compared with the origin's bytes) and
//!   some for a byte range; clients speak HTTP/1.1 or h2c; slow readers crawl through
//!   large bodies with a small receive buffer.
//! - **One editor, one edit at a time**: an edit bumps its URLs at the origin, then
//!   sends the purge until quire answers 200 (retrying through kills and restarts);
//!   only that answer is an ack in the [`Ledger`].
//! - **Purges of every kind**: `PURGE` (hard and soft), and `POST /_quire/purge` by
//!   URL, surrogate key and prefix. Soft purges only touch URLs without
//!   `stale-if-error`, which may rightly serve the purged copy while the origin fails.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use serde::Serialize;

use crate::client::{Conn, Failure, Proto, Response};
use crate::content::{Catalog, SplitMix, DIRS, HOST};
use crate::ledger::{Ledger, Part, Verdict};
use crate::quire::ADMIN_TOKEN;
use crate::tally::{Outcome, Sample, Tally};

/// A request's time limit (slow readers of 300 KB need a few seconds).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A slow reader's socket receive buffer and pause between body frames.
const SLOW_RECV_BUFFER: u32 = 4096;
const SLOW_PAUSE: Duration = Duration::from_millis(30);

/// A client's pause after an error (so a failing quire is not asked in a tight loop).
const ERROR_PAUSE: Duration = Duration::from_millis(20);

/// Bodies slow readers pick are at least this large.
const SLOW_BODY_BYTES_MIN: usize = 100_000;

/// How a client asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientKind {
    /// HTTP/1.1, mixed codings and ranges.
    H1,
    /// h2c, mixed codings and ranges.
    H2,
    /// HTTP/1.1, large bodies, read slowly.
    Slow,
}

/// What the load shares between its tasks.
#[derive(Debug)]
pub(crate) struct World {
    /// The URLs and their versions.
    pub(crate) catalog: Arc<Catalog>,
    /// Acknowledged purges.
    pub(crate) ledger: Ledger,
    /// Every response.
    pub(crate) tally: Tally,
    /// quire's address.
    pub(crate) addr: SocketAddr,
    stop: AtomicBool,
    edits: Mutex<Edits>,
    /// Sabotage: record edits as acknowledged without purging, to prove the judge
    /// sees the old versions quire then keeps serving.
    skip_purge: AtomicBool,
    /// While set, clients send nothing (the warm probe around a kill runs alone).
    held: AtomicBool,
    /// Signalled after every acknowledged purge.
    acked: tokio::sync::Notify,
    /// The URLs of the last acknowledged edit (at most [`LAST_ACKED_MAX`]).
    last_acked: Mutex<Vec<usize>>,
}

/// URLs of the last edit kept for the check after a restart.
const LAST_ACKED_MAX: usize = 20;

/// What the editor did.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Edits {
    /// Edits acknowledged, by purge kind.
    pub(crate) acked: std::collections::BTreeMap<&'static str, u64>,
    /// URL versions bumped.
    pub(crate) urls_bumped: u64,
    /// Purge attempts that failed or were not answered 200 (then retried).
    pub(crate) purge_retries: u64,
    /// Edits whose purge was never acknowledged (the run ended first).
    pub(crate) unacked: u64,
    /// Milliseconds from the bump to the ack, largest.
    pub(crate) ack_ms_max: u64,
    /// URLs edited (for the final sweep).
    #[serde(skip)]
    pub(crate) edited: std::collections::BTreeSet<usize>,
}

impl World {
    /// A world for quire at `addr`, its run starting at `t0`.
    pub(crate) fn new(catalog: Arc<Catalog>, addr: SocketAddr, t0: Instant) -> World {
        World {
            catalog,
            ledger: Ledger::default(),
            tally: Tally::new(t0),
            addr,
            stop: AtomicBool::new(false),
            edits: Mutex::new(Edits::default()),
            skip_purge: AtomicBool::new(false),
            held: AtomicBool::new(false),
            acked: tokio::sync::Notify::new(),
            last_acked: Mutex::new(Vec::new()),
        }
    }

    /// Sabotage for the runner's self-check: edits are acknowledged without a purge.
    pub(crate) fn skip_purges(&self) {
        self.skip_purge.store(true, Ordering::Relaxed);
    }

    /// Waits (at most `within`) for the next acknowledged purge.
    pub(crate) async fn next_ack(&self, within: Duration) {
        let _ = tokio::time::timeout(within, self.acked.notified()).await;
    }

    /// The URLs of the last acknowledged edit.
    pub(crate) fn last_acked(&self) -> Vec<usize> {
        self.last_acked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Holds (or releases) every client before its next request.
    pub(crate) fn hold(&self, held: bool) {
        self.held.store(held, Ordering::Release);
    }

    /// Tells every client and the editor to finish.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// What the editor did.
    pub(crate) fn edits(&self) -> Edits {
        self.edits.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A skewed pick from `n` URLs.
pub(crate) fn popular(rng: &mut SplitMix, n: usize) -> usize {
    let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    (((n as f64 + 1.0).powf(u) - 1.0) as usize).min(n - 1)
}

/// One GET as a client asks it.
#[derive(Debug)]
struct Ask {
    i: usize,
    fields: Vec<(&'static str, String)>,
    range: Option<(usize, usize)>,
}

fn ask(world: &World, kind: ClientKind, rng: &mut SplitMix) -> Ask {
    let n = world.catalog.len();
    if kind == ClientKind::Slow {
        let i = (0..50)
            .map(|_| popular(rng, n))
            .find(|&i| world.catalog.spec(i).size >= SLOW_BODY_BYTES_MIN)
            .unwrap_or_else(|| popular(rng, n));
        return Ask {
            i,
            fields: Vec::new(),
            range: None,
        };
    }
    let i = popular(rng, n);
    let mut fields = Vec::new();
    let mut range = None;
    match rng.below(100) {
        0..=9 => fields.push(("accept-encoding", "gzip".to_string())),
        10..=19 => fields.push(("accept-encoding", "br".to_string())),
        20..=29 => fields.push(("accept-encoding", "zstd".to_string())),
        30..=34 => fields.push(("accept-encoding", "gzip, br;q=0.9".to_string())),
        35..=44 => {
            let size = world.catalog.spec(i).size;
            let start = rng.below(size as u64) as usize;
            let end = (start + 1 + rng.below(20_000) as usize).min(size) - 1;
            fields.push(("range", format!("bytes={start}-{end}")));
            range = Some((start, end));
        }
        _ => {}
    }
    Ask { i, fields, range }
}

/// Runs one client until the world stops.
pub(crate) async fn client(world: Arc<World>, kind: ClientKind, seed: u64) {
    let mut rng = SplitMix(seed);
    let proto = if kind == ClientKind::H2 {
        Proto::H2
    } else {
        Proto::H1
    };
    let recv = (kind == ClientKind::Slow).then_some(SLOW_RECV_BUFFER);
    let pause = (kind == ClientKind::Slow).then_some(SLOW_PAUSE);
    let mut conn: Option<Conn> = None;
    while !world.stopped() {
        if world.held.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        if !conn.as_ref().is_some_and(Conn::is_open) {
            match Conn::connect(world.addr, proto, recv).await {
                Ok(c) => conn = Some(c),
                Err(f) => {
                    let i = popular(&mut rng, world.catalog.len());
                    fail(&world, i, Instant::now(), f, kind == ClientKind::Slow);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let a = ask(&world, kind, &mut rng);
        match get(&world, c, &a, pause).await {
            Some(o) if o.right() => {}
            Some(_) => tokio::time::sleep(ERROR_PAUSE).await,
            None => {
                conn = None;
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
}

/// Sends `a` on `c` and records what came back: the outcome, or `None` when the
/// connection failed.
async fn get(world: &World, c: &mut Conn, a: &Ask, pause: Option<Duration>) -> Option<Outcome> {
    let path = Catalog::path(a.i);
    let sent = Instant::now();
    let fields: Vec<(&str, String)> = a.fields.iter().map(|(k, v)| (*k, v.clone())).collect();
    let r = tokio::time::timeout(
        REQUEST_TIMEOUT,
        c.send(Method::GET, &path, HOST, &fields, Bytes::new(), pause),
    )
    .await
    .unwrap_or(Err(Failure::Timeout));
    match r {
        Ok(resp) => {
            let outcome = judge(world, a, sent, &resp);
            world.tally.record(Sample {
                url: a.i as u32,
                sent_ms: world.tally.ms(sent),
                done_ms: world.tally.ms(Instant::now()),
                outcome,
                hit: resp.hit(),
                stale: resp.stale_if_error(),
                slow_reader: pause.is_some(),
            });
            Some(outcome)
        }
        Err(f) => {
            fail(world, a.i, sent, f, pause.is_some());
            None
        }
    }
}

fn fail(world: &World, i: usize, sent: Instant, f: Failure, slow_reader: bool) {
    world.tally.record(Sample {
        url: i as u32,
        sent_ms: world.tally.ms(sent),
        done_ms: world.tally.ms(Instant::now()),
        outcome: Outcome::Fail(f),
        hit: false,
        stale: false,
        slow_reader,
    });
}

/// The outcome of `resp` to `a`, sent at `sent`; wrong and lost answers are described.
fn judge(world: &World, a: &Ask, sent: Instant, resp: &Response) -> Outcome {
    let expected = if a.range.is_some() {
        [200, 206]
    } else {
        [200, 200]
    };
    if !expected.contains(&resp.status) {
        return Outcome::Status(resp.status);
    }
    let context = || {
        format!(
            "status {} asked [{}] cache-status {:?} content-encoding {:?} age {:?} sent +{} ms",
            resp.status,
            a.fields
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            resp.header("cache-status"),
            resp.header("content-encoding"),
            resp.header("age"),
            world.tally.ms(sent),
        )
    };
    let body = match &resp.body {
        Ok(b) => b,
        Err(e) => {
            world
                .tally
                .note_wrong(format!("{}: {e}; {}", Catalog::path(a.i), context()));
            return Outcome::Wrong;
        }
    };
    let part = match part_of(resp, body) {
        Ok(p) => p,
        Err(e) => {
            world
                .tally
                .note_wrong(format!("{}: {e}; {}", Catalog::path(a.i), context()));
            return Outcome::Wrong;
        }
    };
    match world.ledger.judge(&world.catalog, a.i, sent, part) {
        Verdict::Current => Outcome::Current,
        Verdict::Previous => Outcome::Previous,
        Verdict::Lost { got, floor } => {
            world.tally.note_lost(format!(
                "{}: served v{got}, but v{floor} was purged-and-acked before the request; {}",
                Catalog::path(a.i),
                context()
            ));
            Outcome::Lost
        }
        Verdict::Wrong(what) => {
            world.tally.note_wrong(format!("{what}; {}", context()));
            Outcome::Wrong
        }
    }
}

/// The part of the body a 200 or 206 carries.
fn part_of<'a>(resp: &Response, body: &'a [u8]) -> Result<Part<'a>, String> {
    if resp.status == 200 {
        return Ok(Part::Full(body));
    }
    let cr = resp
        .header("content-range")
        .ok_or("206 without Content-Range")?;
    let start = cr
        .strip_prefix("bytes ")
        .and_then(|r| r.split('-').next())
        .and_then(|s| s.parse::<usize>().ok())
        .ok_or_else(|| format!("206 with Content-Range {cr:?}"))?;
    Ok(Part::Range { start, bytes: body })
}

/// One edit: the URLs it bumps and the purge request that invalidates them.
#[derive(Debug)]
struct Edit {
    kind: &'static str,
    targets: Vec<usize>,
    method: Method,
    path: String,
    fields: Vec<(&'static str, String)>,
    body: Bytes,
}

fn api(kind: &'static str, targets: Vec<usize>, json: serde_json::Value) -> Edit {
    Edit {
        kind,
        targets,
        method: Method::POST,
        path: "/_quire/purge".to_string(),
        fields: vec![("content-type", "application/json".to_string())],
        body: Bytes::from(json.to_string()),
    }
}

fn next_edit(cat: &Catalog, rng: &mut SplitMix) -> Edit {
    let n = cat.len();
    let i = popular(rng, n);
    let purge = |kind, soft: bool| Edit {
        kind,
        targets: vec![i],
        method: Method::from_bytes(b"PURGE").unwrap_or(Method::DELETE),
        path: Catalog::path(i),
        fields: if soft {
            vec![("quire-soft-purge", "1".to_string())]
        } else {
            Vec::new()
        },
        body: Bytes::new(),
    };
    match rng.below(100) {
        0..=39 => purge("purge", false),
        40..=49 if !cat.spec(i).stale_if_error => purge("purge-soft", true),
        40..=64 => {
            let mut targets = vec![i, popular(rng, n), popular(rng, n)];
            targets.sort_unstable();
            targets.dedup();
            let urls: Vec<String> = targets.iter().map(|&t| Catalog::url(t)).collect();
            api("api-urls", targets, serde_json::json!({ "urls": urls }))
        }
        65..=94 => {
            let tagged = (0..50)
                .map(|_| popular(rng, n))
                .find_map(|t| cat.spec(t).tag);
            match tagged {
                Some(tag) => api(
                    "api-tags",
                    cat.tag_members(&tag),
                    serde_json::json!({ "tags": [tag] }),
                ),
                None => purge("purge", false),
            }
        }
        _ => {
            let d = i % DIRS;
            api(
                "api-prefixes",
                cat.dir_members(d),
                serde_json::json!({ "prefixes": [format!("http://{HOST}/d{d}/")] }),
            )
        }
    }
}

/// Edits every `every` (jittered) until the world stops; the last edit's purge is
/// retried for up to `finish` after that.
pub(crate) async fn editor(world: Arc<World>, seed: u64, every: Duration, finish: Duration) {
    let mut rng = SplitMix(seed ^ 0xed17);
    let mut conn: Option<Conn> = None;
    while !world.stopped() {
        let jitter = rng.below(every.as_millis() as u64 + 1);
        tokio::time::sleep(every / 2 + Duration::from_millis(jitter)).await;
        if world.stopped() {
            break;
        }
        let edit = next_edit(&world.catalog, &mut rng);
        let bumped = Instant::now();
        let versions: Vec<(usize, u32)> = edit
            .targets
            .iter()
            .map(|&t| (t, world.catalog.bump(t)))
            .collect();
        let acked = if world.skip_purge.load(Ordering::Relaxed) {
            Some(Instant::now())
        } else {
            purge_until_acked(&world, &mut conn, &edit, finish).await
        };
        let mut e = world.edits.lock().unwrap_or_else(|e| e.into_inner());
        e.urls_bumped += versions.len() as u64;
        e.edited.extend(edit.targets.iter().copied());
        let Some(at) = acked else {
            e.unacked += 1;
            continue;
        };
        for (t, v) in versions {
            world.ledger.ack(t, v, at);
        }
        *e.acked.entry(edit.kind).or_default() += 1;
        e.ack_ms_max = e
            .ack_ms_max
            .max(at.duration_since(bumped).as_millis() as u64);
        drop(e);
        *world.last_acked.lock().unwrap_or_else(|e| e.into_inner()) =
            edit.targets.iter().copied().take(LAST_ACKED_MAX).collect();
        world.acked.notify_waiters();
    }
}

/// Sends `edit`'s purge until quire answers 200; the instant of that answer, or `None`
/// if the world stopped and `finish` passed first.
async fn purge_until_acked(
    world: &World,
    conn: &mut Option<Conn>,
    edit: &Edit,
    finish: Duration,
) -> Option<Instant> {
    let mut deadline: Option<Instant> = None;
    loop {
        if world.stopped() {
            let d = *deadline.get_or_insert_with(|| Instant::now() + finish);
            if Instant::now() > d {
                return None;
            }
        }
        if let Some(at) = purge_once(world, conn, edit).await {
            return Some(at);
        }
        world
            .edits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .purge_retries += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn purge_once(world: &World, conn: &mut Option<Conn>, edit: &Edit) -> Option<Instant> {
    if !conn.as_ref().is_some_and(Conn::is_open) {
        *conn = Some(Conn::connect(world.addr, Proto::H1, None).await.ok()?);
    }
    let c = conn.as_mut()?;
    let mut fields = edit.fields.clone();
    fields.push(("authorization", format!("Bearer {ADMIN_TOKEN}")));
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        c.send(
            edit.method.clone(),
            &edit.path,
            HOST,
            &fields,
            edit.body.clone(),
            None,
        ),
    )
    .await;
    match r {
        Ok(Ok(resp)) if resp.status == 200 => Some(Instant::now()),
        Ok(Ok(_)) => None,
        _ => {
            *conn = None;
            None
        }
    }
}

/// GETs `i` once on a fresh connection with `fields` and judges the answer as a
/// request sent now (every acknowledged purge applies): the final sweep's check. The
/// outcome, and whether it was a hit.
pub(crate) async fn check_now(
    world: &World,
    i: usize,
    fields: Vec<(&'static str, String)>,
) -> (Outcome, bool) {
    let a = Ask {
        i,
        fields,
        range: None,
    };
    let mut c = match Conn::connect(world.addr, Proto::H1, None).await {
        Ok(c) => c,
        Err(f) => return (Outcome::Fail(f), false),
    };
    let sent = Instant::now();
    let path = Catalog::path(i);
    let fields: Vec<(&str, String)> = a.fields.iter().map(|(k, v)| (*k, v.clone())).collect();
    let r = tokio::time::timeout(
        REQUEST_TIMEOUT,
        c.send(Method::GET, &path, HOST, &fields, Bytes::new(), None),
    )
    .await
    .unwrap_or(Err(Failure::Timeout));
    match r {
        Ok(resp) => (judge(world, &a, sent, &resp), resp.hit()),
        Err(f) => (Outcome::Fail(f), false),
    }
}

/// [`check_now`] in identity, recorded with the load's samples.
pub(crate) async fn check_recorded(world: &World, i: usize) {
    let sent = Instant::now();
    let (outcome, hit) = check_now(world, i, Vec::new()).await;
    world.tally.record(Sample {
        url: i as u32,
        sent_ms: world.tally.ms(sent),
        done_ms: world.tally.ms(Instant::now()),
        outcome,
        hit,
        stale: false,
        slow_reader: false,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn popularity_is_skewed_and_in_range() {
        let mut rng = SplitMix(1);
        let n = 20_000;
        let picks: Vec<usize> = (0..10_000).map(|_| popular(&mut rng, n)).collect();
        assert!(picks.iter().all(|&i| i < n));
        let top = picks.iter().filter(|&&i| i < 1000).count();
        assert!(top > 6000 && top < 8000, "{top}");
    }

    #[test]
    fn edits_bump_what_they_purge() {
        let cat = Catalog::new(5, 2000);
        let mut rng = SplitMix(2);
        for _ in 0..200 {
            let e = next_edit(&cat, &mut rng);
            assert!(!e.targets.is_empty(), "{}", e.kind);
            if e.kind == "purge-soft" {
                assert!(!cat.spec(e.targets[0]).stale_if_error);
            }
        }
    }
}
