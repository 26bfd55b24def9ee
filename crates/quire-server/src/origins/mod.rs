//! Several origins (`[[origins]]`): routing by host and path prefix, weights,
//! health, and trying the next origin when one cannot be reached.
//!
//! [`Origins`] is an [`Upstream`]: the fill path, passes and tunnels send to it as
//! to one origin, and everything it decides happens inside `send`.
//!
//! Key decisions:
//! - **One origin per URL.** Entries naming the same URL (one server in two pools)
//!   share its connections, its limit and its health, so their health settings
//!   must agree; weights, `hosts` and `path_prefix` are per entry.
//! - **A request goes to the next origin of its pool** (see [`route`] for the
//!   order) when the one tried never received it — a refused or timed-out
//!   connection, a failed TLS handshake, no connection slot free — or when it is a
//!   safe method (GET, HEAD, OPTIONS) that failed or timed out there: sending a
//!   GET twice changes nothing (RFC 9110 §9.2.1), and a fill then finds its page on
//!   a working origin instead of answering 502 or 504. Only a request whose body
//!   is empty is sent again (a streamed body cannot be replayed), and a POST or
//!   any other unsafe method that reached an origin is never sent again, even if
//!   it then timed out: the origin may have acted on it.
//! - **Origins marked down are skipped** (see [`health`]); when every origin of the
//!   pool is down the request fails at once, without a connection attempt, and the
//!   fill path answers from a stale copy where `stale-if-error` allows, else 502.
//! - A request no pool takes (a host no entry names, with no catch-all entry) is a
//!   502 naming the host and path, counted in `quire_origins_unrouted_total`.

mod entry;
mod health;
mod route;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{header, Request, Response};
use http_body::Body as _;

pub use entry::OriginEntry;
use health::{Check, Health, HealthOf};
use route::Routes;

use crate::config::Config;
use crate::origin::{
    copy_head, family, label, Origin, OriginError, OriginOptions, OriginSetupError, OutBody,
    SendError,
};
use crate::upstream::{UpBody, UpFuture, Upstream};

/// The origins of `[[origins]]` and how requests are shared among them.
#[derive(Debug)]
pub struct Origins {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    members: Vec<Member>,
    routes: Routes,
    read_timeout: Duration,
    retries: AtomicU64,
    unrouted: AtomicU64,
    none_up: AtomicU64,
}

/// One origin server.
#[derive(Debug)]
struct Member {
    origin: Origin,
    health: Health,
}

impl HealthOf for Shared {
    fn health(&self, i: usize) -> &Health {
        &self.members[i].health
    }
}

impl Origins {
    /// The origins `cfg.origins` lists, with their active checks started.
    pub fn new(cfg: &Config) -> Result<Origins, OriginSetupError> {
        let bad = |why: String| OriginSetupError::Config(why);
        let (urls, member_of) = members_of(&cfg.origins).map_err(bad)?;
        let routes = Routes::build(&cfg.origins, &member_of).map_err(bad)?;
        let mut members = Vec::with_capacity(urls.len());
        let mut checks = Vec::new();
        for (m, &first) in urls.iter().enumerate() {
            let e = &cfg.origins[first];
            let opts = options(cfg, e);
            let origin = Origin::new(&e.url, &opts)?;
            let name = origin.url().to_string();
            if let Some(path) = &e.health_path {
                let host = routes
                    .pool_of(m)
                    .and_then(|p| p.check_host())
                    .map_or_else(|| origin.url().authority().to_owned(), str::to_owned);
                let probe_opts = OriginOptions {
                    max_connections: 1,
                    max_idle: 1,
                    ..opts
                };
                checks.push(Check {
                    member: m,
                    origin: Origin::new(&e.url, &probe_opts)?,
                    path: path.clone(),
                    host,
                    status: e.health_status,
                    interval: e.health_interval.0,
                    timeout: e.health_timeout.0,
                });
            }
            let active = e.health_path.is_some();
            let health = Health::new(name, e.max_fails, active, e.health_interval.0);
            members.push(Member { origin, health });
        }
        let shared = Arc::new(Shared {
            members,
            routes,
            read_timeout: cfg.limits.origin_read_timeout.0,
            retries: AtomicU64::new(0),
            unrouted: AtomicU64::new(0),
            none_up: AtomicU64::new(0),
        });
        health::spawn(checks, Arc::downgrade(&shared))
            .map_err(|e| bad(format!("origins: cannot start the health checks: {e}")))?;
        Ok(Origins { shared })
    }

    /// Whether the origin at `url` is taken for requests now (`None`: no such origin).
    pub fn is_up(&self, url: &str) -> Option<bool> {
        let url = Origin::parse(url).ok()?;
        self.shared
            .members
            .iter()
            .find(|m| *m.origin.url() == url)
            .map(|m| m.health.is_up())
    }
}

/// Builds every origin client `cfg` names (`origin` or `[[origins]]`) without
/// sending anything: what a new process checks before it takes over.
pub fn check(cfg: &Config) -> Result<(), crate::state::StartError> {
    validate(cfg).map_err(crate::config::ConfigError)?;
    if cfg.origins.is_empty() {
        let url = cfg
            .origin
            .as_deref()
            .ok_or(crate::state::StartError::NoOrigin)?;
        Origin::new(url, &OriginOptions::from_config(cfg))?;
    }
    for e in &cfg.origins {
        Origin::new(&e.url, &options(cfg, e))?;
    }
    Ok(())
}

/// A one-line summary of where requests go, for the start-up line.
pub fn describe(cfg: &Config) -> String {
    match (&cfg.origin, cfg.origins.as_slice()) {
        (Some(o), _) => o.clone(),
        (None, [one]) => one.url.clone(),
        (None, []) => "?".into(),
        (None, many) => format!("{} origins", many.len()),
    }
}

/// How quire reaches the origin of entry `e`.
fn options(cfg: &Config, e: &OriginEntry) -> OriginOptions {
    let mut o = OriginOptions::from_config(cfg);
    if let Some(n) = e.max_connections {
        o.max_connections = n;
    }
    o
}

/// The distinct URLs (each as the index of its first entry) and each entry's
/// member index; entries sharing a URL must agree on its health settings.
fn members_of(entries: &[OriginEntry]) -> Result<(Vec<usize>, Vec<usize>), String> {
    let mut firsts: Vec<usize> = Vec::new();
    let mut member_of = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        e.validate()?;
        let url = Origin::parse(&e.url).map_err(|e| e.to_string())?;
        let same = |&f: &usize| Origin::parse(&entries[f].url).is_ok_and(|u| u == url);
        match firsts.iter().position(same) {
            Some(m) => {
                if !entries[firsts[m]].same_server_settings(e) {
                    return Err(format!(
                        "origin {url} is listed twice with different health or connection \
                         settings; give them once, the same in every entry"
                    ));
                }
                member_of.push(m);
            }
            None => {
                member_of.push(firsts.len());
                firsts.push(i);
            }
        }
    }
    Ok((firsts, member_of))
}

/// Checks `[[origins]]` as a whole (with `origin` not set beside it).
pub fn validate(cfg: &Config) -> Result<(), String> {
    if cfg.origins.is_empty() {
        return Ok(());
    }
    if cfg.origin.is_some() {
        return Err("give `origin` or `[[origins]]`, not both".into());
    }
    let (_, member_of) = members_of(&cfg.origins)?;
    Routes::build(&cfg.origins, &member_of).map(|_| ())
}

impl Shared {
    async fn send(&self, req: Request<OutBody>) -> Result<Response<UpBody>, OriginError> {
        let host = request_host(&req);
        let Some(pool) = self.routes.pool_for(&host, req.uri().path()) else {
            self.unrouted.fetch_add(1, Ordering::Relaxed);
            return Err(OriginError::Failed(format!(
                "no origin is configured for host `{host}` and path `{}`",
                req.uri().path()
            )));
        };
        // A bodiless request can be sent again; a streamed body cannot.
        let spare = req.body().is_end_stream().then(|| copy_head(&req));
        let mut req = Some(req);
        let mut last = None;
        for m in pool.order() {
            let member = &self.members[m];
            if !member.health.is_up() && !member.health.try_again() {
                continue;
            }
            let Some(r) = req.take().or_else(|| spare.as_ref().map(copy_head)) else {
                break;
            };
            match member.origin.exchange(r).await {
                Ok(resp) => {
                    member.health.request_ok();
                    return Ok(resp);
                }
                Err(e) => {
                    let again = spare.as_ref().is_some_and(|s| may_resend(s, &e));
                    if !matches!(e, SendError::Busy) {
                        // Busy is quire's own limit, not the origin failing.
                        member.health.request_failed(&e.to_string());
                    }
                    let e = OriginError::from(e);
                    if !again {
                        return Err(e);
                    }
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    last = Some(e);
                }
            }
        }
        if last.is_none() {
            self.none_up.fetch_add(1, Ordering::Relaxed);
        }
        Err(last.unwrap_or_else(|| {
            OriginError::Failed(format!("every origin for host `{host}` is marked down"))
        }))
    }

    fn metrics(&self, out: &mut String) {
        let rows: Vec<_> = self
            .members
            .iter()
            .map(|m| m.origin.metrics_row())
            .collect();
        crate::origin::write_families(out, &rows);
        self.health_families(out);
        for (name, help, v) in [
            (
                "quire_origins_retries_total",
                "Requests sent to another origin after the first could not be reached.",
                &self.retries,
            ),
            (
                "quire_origins_unrouted_total",
                "Requests no [[origins]] entry takes (host and path prefix); answered 502.",
                &self.unrouted,
            ),
            (
                "quire_origins_none_up_total",
                "Requests whose every origin was marked down; answered stale or 502.",
                &self.none_up,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Ordering::Relaxed)
            );
        }
    }

    fn health_families(&self, out: &mut String) {
        let url = |m: &Member| m.origin.url().to_string();
        family(
            out,
            "quire_origin_up",
            "gauge",
            "Whether each origin is taken for requests (1) or marked down (0).",
            self.members
                .iter()
                .map(|m| (url(m), u64::from(m.health.is_up()))),
        );
        out.push_str(
            "# HELP quire_origin_health_checks_total Active health checks of each origin, by result.\n\
             # TYPE quire_origin_health_checks_total counter\n",
        );
        for m in &self.members {
            let (pass, fail, _) = m.health.counts();
            let n = label(&url(m));
            for (result, v) in [("pass", pass), ("fail", fail)] {
                let _ = writeln!(
                    out,
                    "quire_origin_health_checks_total{{origin=\"{n}\",result=\"{result}\"}} {v}"
                );
            }
        }
        family(
            out,
            "quire_origin_marked_down_total",
            "counter",
            "Times each origin was marked down.",
            self.members.iter().map(|m| (url(m), m.health.counts().2)),
        );
    }
}

/// The host a request is for: its `Host` field (every request quire sends
/// upstream carries one), else its URI's authority.
fn request_host(req: &Request<OutBody>) -> String {
    req.headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or("")
        .to_owned()
}

/// Whether a request with this head may go to the next origin after `e`: when
/// the first never received it, or when it is safe (GET, HEAD, OPTIONS: RFC 9110
/// §9.2.1 — sending it twice changes nothing on the origin).
fn may_resend(head: &Request<OutBody>, e: &SendError) -> bool {
    let safe = matches!(
        *head.method(),
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    );
    e.unsent() || safe
}

impl Upstream for Origins {
    fn send(&self, req: Request<OutBody>) -> UpFuture<'_> {
        Box::pin(self.shared.send(req))
    }

    fn read_timeout(&self) -> Duration {
        self.shared.read_timeout
    }

    fn metrics(&self, out: &mut String) {
        self.shared.metrics(out);
    }
}
