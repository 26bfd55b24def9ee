//! Pages filled before anyone asks for them.
//!
//! An upstream that knows which URLs just changed (`quire serve` after a reload, or
//! when it first sees a host) queues them here ([`Prefill::queue`]); one background
//! task fills them one at a time, through the same fill path a miss takes (coalesced
//! with a request for the same key, stored through the invalidation gate, compressed
//! like any fill). So the first reader after an edit gets a hit, not a render.
//!
//! Key decisions:
//! - **Requests always win.** One prefill runs at a time; before each, the task waits
//!   (up to [`YIELD_MAX`]) while any fill is in flight, since those are readers
//!   waiting; after each, it rests: as long as the prefill took while no request was
//!   answered meanwhile (at most half of one core), [`BUSY_REST`] times as long when
//!   requests were (at most a fifth), whatever the queue holds. So a site
//!   re-rendering every page after a template change takes a small share of the CPU
//!   its readers' hits need. A prefill is never answered to anyone: its response
//!   body is read and dropped.
//! - **Bounded.** The queue holds [`QUEUE_MAX`] URLs; past that, URLs are dropped and
//!   counted (`quire_prefills_total{result="dropped"}`): a later request fills them
//!   as a miss would. A URL already stored under its current key is skipped
//!   (`fresh`), so queueing the whole site twice costs lookups, not renders.
//! - **Nothing a prefill stores can be older than its key.** It is a fill like any
//!   other: it starts after the URL's version was published, keys by the version it
//!   reads, and commits through the invalidation gate, so an edit or purge that lands
//!   while it runs wins as it does over a reader's fill (see `crate::cache::invalidate`
//!   and `crate::upstream::port`).
//! - **Audiences' pages too, when asked.** [`Prefill::queue_for`] names the audience
//!   a URL is filled for (an upstream that saw its members ask for it): the fill
//!   carries the audience as a real audience fill does, and is keyed, looked up and
//!   skipped when fresh in that audience's scope. An audience whose versions the
//!   upstream cannot give yet fails the URL (counted); nothing is filled under
//!   another scope.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use http::{header, HeaderValue, Method, Request};
use http_body_util::BodyExt;
use quire_http::key::{self, MethodClass, NormalizedUrl};
use quire_http::status::{CacheStatus, Fwd};
use tokio::sync::mpsc;

use crate::edge::client::Client;
use crate::metrics::Prefilled;
use crate::request::exchange::Exchange;
use crate::request::lookup::{self, Reading};
use crate::state::{Ctx, Scope};
use crate::upstream::{origin, Audience};

/// URLs waiting to be filled, at most.
pub const QUEUE_MAX: usize = 1 << 16;

/// How long a prefill waits for fills in flight (readers) to end before it starts
/// anyway.
pub const YIELD_MAX: Duration = Duration::from_millis(500);

/// Lowers the calling thread's scheduling priority (nice 10), for an upstream's
/// threads doing work nobody waits for, such as rendering a background fill
/// (`FillMark::background`): they then take what the request workers leave.
pub fn lower_thread_priority() {
    crate::fill::compress_pool::lower_priority();
}

/// How many times as long as a prefill took the task rests after it when requests
/// were answered meanwhile (once as long when none were).
pub const BUSY_REST: u32 = 4;

/// A handle on the prefill queue of one server.
#[derive(Debug, Clone)]
pub struct Prefill {
    tx: mpsc::Sender<(String, Option<Audience>)>,
    /// Weak, as the task's: a queue kept in the `Ctx` itself (purges' refills)
    /// must not keep it alive (the volume's lock goes with it).
    ctx: Weak<Ctx>,
}

impl Prefill {
    /// Starts the prefill task on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(ctx: Arc<Ctx>) -> Prefill {
        Prefill::with_capacity(ctx, QUEUE_MAX)
    }

    /// [`Prefill::start`] with a queue of `capacity` URLs (at least 1).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn with_capacity(ctx: Arc<Ctx>, capacity: usize) -> Prefill {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        tokio::spawn(run(Arc::downgrade(&ctx), rx));
        Prefill {
            tx,
            ctx: Arc::downgrade(&ctx),
        }
    }

    /// Queues `url` (absolute: `https://host/path`) to be filled; it is keyed as
    /// the configuration in force when its turn comes says. False (and counted)
    /// when the queue is full.
    pub fn queue(&self, url: String) -> bool {
        self.queue_for(url, None)
    }

    /// Queues `url` to be filled for `audience` (`None`: the anonymous cache), as
    /// [`Prefill::queue`].
    pub fn queue_for(&self, url: String, audience: Option<Audience>) -> bool {
        let queued = self.tx.try_send((url, audience)).is_ok();
        if !queued {
            if let Some(ctx) = self.ctx.upgrade() {
                ctx.metrics.record_prefill(Prefilled::Dropped);
            }
        }
        queued
    }

    /// The URLs waiting.
    pub fn waiting(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }
}

impl crate::ops::refill::Refill for Prefill {
    fn queue(&self, url: String) -> bool {
        Prefill::queue(self, url)
    }
}

async fn run(ctx: Weak<Ctx>, mut rx: mpsc::Receiver<(String, Option<Audience>)>) {
    while let Some((raw, audience)) = rx.recv().await {
        // Held for one URL at a time: a server shutting down is not kept up.
        let Some(ctx) = ctx.upgrade() else { return };
        let Ok(url) = key::normalize_absolute(&raw, &ctx.peek().keys) else {
            ctx.metrics.record_prefill(Prefilled::Failed);
            continue;
        };
        let t0 = Instant::now();
        while ctx.metrics.fills_in_flight().load(Ordering::Relaxed) > 0 && t0.elapsed() < YIELD_MAX
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let t1 = Instant::now();
        let answered = answered(&ctx);
        let result = fill_one(&ctx, url, audience).await;
        ctx.metrics.record_prefill(result);
        if result == Prefilled::Stored {
            let busy = self::answered(&ctx) != answered;
            let took = t1.elapsed();
            tokio::time::sleep(if busy { took * BUSY_REST } else { took }).await;
        }
    }
}

/// Requests answered so far (every outcome).
fn answered(ctx: &Ctx) -> u64 {
    crate::metrics::Outcome::ALL
        .iter()
        .map(|o| ctx.metrics.requests(*o))
        .sum()
}

/// `url`'s scope for `audience` now (`None` when the upstream cannot version it).
fn scope_of(ctx: &Ctx, url: &NormalizedUrl, audience: Option<Audience>) -> Option<Scope> {
    match audience {
        Some(a) => ctx.audience_scope(url, a),
        None => Some(ctx.key_version(url)),
    }
}

/// Fills `url` for `audience` unless it is stored under its current key already.
async fn fill_one(ctx: &Arc<Ctx>, url: NormalizedUrl, audience: Option<Audience>) -> Prefilled {
    let Some(scope) = scope_of(ctx, &url, audience) else {
        return Prefilled::Failed;
    };
    let no_fields = http::HeaderMap::new();
    let look = lookup::lookup_as(
        ctx,
        MethodClass::Get,
        &url,
        &no_fields,
        scope,
        Reading::Quiet,
    );
    if look.record.is_some() || look.cold.is_some() {
        return Prefilled::Fresh;
    }
    let Ok(uri) = url.path_and_query().parse() else {
        return Prefilled::Failed;
    };
    let mut req = Request::new(origin::empty_body());
    *req.method_mut() = Method::GET;
    *req.uri_mut() = uri;
    let host = match url.port() {
        Some(p) => format!("{}:{p}", url.host()),
        None => url.host().to_owned(),
    };
    if let Ok(v) = HeaderValue::from_str(&host) {
        req.headers_mut().insert(header::HOST, v);
    }
    let url_again = url.clone();
    let x = Exchange {
        ctx,
        req,
        client: Client::direct(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))),
        url,
        now: ctx.clock.now(),
        policy: ctx.policy(),
        audience,
        background: true,
    };
    let status = CacheStatus::forward(Fwd::UriMiss);
    let (resp, _) = Box::pin(x.fill(look, status, None, None)).await;
    // A redirect or a 404 is a page like any other (an alias, a removed note).
    let ok = !resp.status().is_server_error();
    // Read to the end: a streamed fill commits when its body ends.
    let ended = resp.into_body().collect().await.is_ok();
    if !(ok && ended) {
        return Prefilled::Failed;
    }
    let no_fields = http::HeaderMap::new();
    let Some(scope) = scope_of(ctx, &url_again, audience) else {
        return Prefilled::NotStored;
    };
    let look = lookup::lookup_as(
        ctx,
        MethodClass::Get,
        &url_again,
        &no_fields,
        scope,
        Reading::Quiet,
    );
    match look.record.is_some() || look.cold.is_some() {
        true => Prefilled::Stored,
        false => Prefilled::NotStored,
    }
}
