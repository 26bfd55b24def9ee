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
//! - **A request reaches at most two origins.** After an origin received it and
//!   failed, it is sent to at most one other ([`RESENDS_MAX`]); origins that never
//!   received it (refused connections) do not count, since they did no work. A
//!   slow page therefore costs the pool two exchanges per request, not one per
//!   origin, and each origin sees a request once, so its timeout counts against
//!   that origin once.
//! - **Health judges origins, not clients.** What a client asks for decides how
//!   long the origin takes and whether it answers at all (a slow report, a page
//!   that hangs): a failure *after* the request was sent (a timeout, a reset) is
//!   only a suspicion, and the origin is judged on a request quire chooses — one
//!   probe at a time per origin (`health_path`, or `HEAD /` where no check is set,
//!   any answer within `health_timeout` passing). Only a failed probe counts
//!   towards `max_fails`, so any number of slow requests from any number of
//!   clients can mark an origin down only if the origin also fails quire's own
//!   request. With active checks the scheduled check is the judge and a suspicion
//!   starts no probe. Failures to connect are the origin's own (no request content
//!   is involved) and count at once. Probes are counted in
//!   `quire_origins_probes_total{result}`.
//! - **Passes route as fills do**: on the normalised host and path of the URL the
//!   request was keyed by ([`crate::upstream::RouteBy`]), not the target as sent,
//!   so `/api/%2e%2e/admin`, `/%61pi/x` and `Host: a.example.` reach the pool of
//!   `/admin`, `/api/x` and `a.example`. Partial: upgrade requests
//!   ([`crate::request::tunnel`]) do not carry the mark yet and still route on the target
//!   as sent.
//! - **Origins marked down are skipped** (see [`health`]); when every origin of the
//!   pool is down the request fails at once, without a connection attempt, and the
//!   fill path answers from a stale copy where `stale-if-error` allows, else 502.
//! - A request no pool takes (a host no entry names, with no catch-all entry) is a
//!   502 naming the host and path, counted in `quire_origins_unrouted_total`.

mod health;
mod route;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{header, Request, Response};
use http_body::Body as _;

pub use crate::config::OriginEntry;
use health::{Check, Health, HealthOf};
use route::Routes;

use crate::config::{Config, ConfigError};
use crate::upstream::origin::{
    copy_head, family, label, FailureKind, Origin, OriginError, OriginOptions, OriginSetupError,
    OutBody, SendError,
};
use crate::upstream::{RouteBy, UpBody, UpFuture, Upstream};

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
    /// Probes after a suspicion: passed, failed.
    probes: [AtomicU64; 2],
}

/// Origins a request is sent to after the first that received it failed.
pub(crate) const RESENDS_MAX: usize = 1;

/// One origin server.
#[derive(Debug)]
struct Member {
    origin: Origin,
    health: Health,
    /// What judges a suspicion when no active check does (see the module doc).
    probe: Option<Arc<Check>>,
}

impl HealthOf for Shared {
    fn health(&self, i: usize) -> &Health {
        &self.members[i].health
    }
}

impl Origins {
    /// The origins `cfg.origins` lists, with their active checks started.
    pub fn new(cfg: &Config) -> Result<Origins, OriginSetupError> {
        let bad = |why: ConfigError| OriginSetupError::Config(why.reason().to_owned());
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
                    ..opts.clone()
                };
                checks.push(Check {
                    member: m,
                    origin: Origin::new(&e.url, &probe_opts)?,
                    path: path.clone(),
                    host,
                    status: e.health_status,
                    interval: e.health_interval.0,
                    timeout: e.health_timeout.0,
                    head_any_status: false,
                });
            }
            let active = e.health_path.is_some();
            let probe = (!active).then(|| {
                let host = routes
                    .pool_of(m)
                    .and_then(|p| p.check_host())
                    .map_or_else(|| origin.url().authority().to_owned(), str::to_owned);
                probe_of(m, &e.url, host, &opts, e.health_timeout.0)
            });
            let probe = probe.transpose()?.map(Arc::new);
            let health = Health::new(name, e.max_fails, active, e.health_interval.0);
            members.push(Member {
                origin,
                health,
                probe,
            });
        }
        let shared = Arc::new(Shared {
            members,
            routes,
            read_timeout: cfg.limits.origin_read_timeout.0,
            retries: AtomicU64::new(0),
            unrouted: AtomicU64::new(0),
            none_up: AtomicU64::new(0),
            probes: Default::default(),
        });
        health::spawn(checks, Arc::downgrade(&shared)).map_err(|e| {
            OriginSetupError::Config(format!("origins: cannot start the health checks: {e}"))
        })?;
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
pub fn check(cfg: &Config) -> Result<(), OriginSetupError> {
    validate(cfg).map_err(|e| OriginSetupError::Config(e.reason().to_owned()))?;
    if cfg.origins.is_empty() {
        let url = cfg.origin.as_deref().ok_or(OriginSetupError::NoOrigin)?;
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

/// The probe of member `m` when it has no active check: `HEAD /`, any answer
/// within `timeout` passing, on a client of its own (one connection).
fn probe_of(
    m: usize,
    url: &str,
    host: String,
    opts: &OriginOptions,
    timeout: Duration,
) -> Result<Check, OriginSetupError> {
    let probe_opts = OriginOptions {
        max_connections: 1,
        max_idle: 1,
        ..opts.clone()
    };
    Ok(Check {
        member: m,
        origin: Origin::new(url, &probe_opts)?,
        path: "/".into(),
        host,
        status: None,
        interval: Duration::ZERO,
        timeout,
        head_any_status: true,
    })
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
fn members_of(entries: &[OriginEntry]) -> Result<(Vec<usize>, Vec<usize>), ConfigError> {
    let mut firsts: Vec<usize> = Vec::new();
    let mut member_of = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        e.validate()?;
        let url = Origin::parse(&e.url).map_err(|e| ConfigError::new(e.to_string()))?;
        let same = |&f: &usize| Origin::parse(&entries[f].url).is_ok_and(|u| u == url);
        match firsts.iter().position(same) {
            Some(m) => {
                if !entries[firsts[m]].same_server_settings(e) {
                    return Err(ConfigError::new(format!(
                        "origin {url} is listed twice with different health or connection \
                         settings; give them once, the same in every entry"
                    )));
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
pub fn validate(cfg: &Config) -> Result<(), ConfigError> {
    if cfg.origins.is_empty() {
        return Ok(());
    }
    if cfg.origin.is_some() {
        return Err(ConfigError::new(
            "give `origin` or `[[origins]]`, not both".into(),
        ));
    }
    let (_, member_of) = members_of(&cfg.origins)?;
    Routes::build(&cfg.origins, &member_of).map(|_| ())
}

impl Shared {
    async fn send(self: Arc<Self>, req: Request<OutBody>) -> Result<Response<UpBody>, OriginError> {
        let (host, path) = match req.extensions().get::<RouteBy>() {
            Some(r) => (r.host.clone(), r.path.clone()),
            None => (request_host(&req), req.uri().path().to_owned()),
        };
        let Some(pool) = self.routes.pool_for(&host, &path) else {
            self.unrouted.fetch_add(1, Ordering::Relaxed);
            return Err(OriginError::failed(
                FailureKind::Unrouted,
                format!("no origin is configured for host `{host}` and path `{path}`"),
            ));
        };
        // A bodiless request can be sent again; a streamed body cannot.
        let spare = req.body().is_end_stream().then(|| copy_head(&req));
        let mut req = Some(req);
        let mut last = None;
        let mut received = 0;
        for m in pool.order() {
            let member = &self.members[m];
            if !member.health.is_up() && !member.health.try_again() {
                continue;
            }
            let Some(r) = req.take().or_else(|| spare.as_ref().map(copy_head)) else {
                break;
            };
            let e = match member.origin.exchange(r).await {
                Ok(resp) => {
                    member.health.request_ok();
                    return Ok(resp);
                }
                Err(e) => e,
            };
            if e.unsent() {
                // Busy is quire's own limit, not the origin failing.
                if !matches!(e, SendError::Busy) {
                    member.health.request_failed(&e.to_string());
                }
            } else {
                received += 1;
                self.suspect(m, &e);
            }
            let again =
                spare.as_ref().is_some_and(|s| may_resend(s, &e)) && received <= RESENDS_MAX;
            let e = OriginError::from(e);
            if !again {
                return Err(e);
            }
            self.retries.fetch_add(1, Ordering::Relaxed);
            last = Some(e);
        }
        if last.is_none() {
            self.none_up.fetch_add(1, Ordering::Relaxed);
        }
        Err(last.unwrap_or_else(|| {
            OriginError::failed(
                FailureKind::Down,
                format!("every origin for host `{host}` is marked down"),
            )
        }))
    }

    /// A request failed at member `m` after it was sent: the origin is judged by a
    /// probe of its own (one at a time), never by the request (see the module doc).
    fn suspect(self: &Arc<Self>, m: usize, e: &SendError) {
        let member = &self.members[m];
        let Some(probe) = member.probe.clone() else {
            return;
        };
        if !member.health.start_probe() {
            return;
        }
        let why = e.to_string();
        let shared = Arc::downgrade(self);
        tokio::spawn(async move {
            let outcome = probe.run().await;
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let health = &shared.members[m].health;
            match outcome {
                Ok(()) => {
                    shared.probes[0].fetch_add(1, Ordering::Relaxed);
                    health.request_ok();
                }
                Err(probe_why) => {
                    shared.probes[1].fetch_add(1, Ordering::Relaxed);
                    health.request_failed(&format!("{why}; then its probe: {probe_why}"));
                }
            }
            health.end_probe();
        });
    }

    fn metrics(&self, out: &mut String) {
        let rows: Vec<_> = self
            .members
            .iter()
            .map(|m| m.origin.metrics_row())
            .collect();
        crate::upstream::origin::write_families(out, &rows);
        self.health_families(out);
        self.probe_family(out);
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

    fn probe_family(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP quire_origins_probes_total Probes of an origin after a request sent to it failed (a timeout, a reset): only a failed probe counts towards max_fails.\n\
             # TYPE quire_origins_probes_total counter\n\
             quire_origins_probes_total{{result=\"pass\"}} {}\n\
             quire_origins_probes_total{{result=\"fail\"}} {}",
            self.probes[0].load(Ordering::Relaxed),
            self.probes[1].load(Ordering::Relaxed)
        );
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
        Box::pin(self.shared.clone().send(req))
    }

    fn read_timeout(&self) -> Duration {
        self.shared.read_timeout
    }

    fn metrics(&self, out: &mut String) {
        self.shared.metrics(out);
    }
}
