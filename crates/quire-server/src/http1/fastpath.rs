//! The HTTP/1.1 fast path: fresh hits answered straight off the socket, without
//! hyper.
//!
//! A connection's hits are answered here, on its own task (a TLS connection, or a
//! cleartext one a hit loop handed over: [`crate::http1::hit_loop`], which answers
//! an idle cleartext connection's hits with this module's [`Bufs::fresh_hit`] and
//! [`answered`], and takes the connection back once it is idle, [`Exit::Park`]).
//! Request heads are parsed with `httparse`
//! ([`crate::http1::head`]; a head this worker answered as a fresh hit before is not
//! parsed again, [`crate::http1::repeat`]); a
//! plain `GET`/`HEAD` that is a fresh hit (no body, no range or origin-bound
//! precondition fields, no bypass but a session cookie the upstream names an
//! audience for, a stored response fresh for this request) is
//! answered by one write — a 304 when `If-None-Match`/`If-Modified-Since` match:
//! the status line, the record's pre-serialised field lines
//! ([`crate::request::hit::Prepared::head_block`]), the per-response fields
//! ([`crate::http1::fresh`]), and the body from the mapping
//! (or by sendfile, see [`crate::edge::sendfile`]: a body sent that way stays pinned until
//! the peer has acknowledged it, since the socket's queue still points into the
//! volume's pages). Pipelined requests are answered in order from the same buffer.
//!
//! Any other plain request — a miss, a stale entry, a conditional or range request, a
//! bypass, an admin call — is answered by [`crate::request::service`], as on hyper's path, and
//! its response written by [`crate::http1::h1`]; the connection stays here, so its next hit
//! is fast again. All of the semantics live in one place (the service) and this path
//! only ever answers what the hyper path would answer the same way: hits are the same
//! bytes `hit::serve` produces, and the service's answers are framed as hyper frames
//! them (the tests run the same requests through both).
//!
//! The first request that needs protocol machinery — a body, framing, upgrade or
//! connection-level fields, `Expect`, HTTP/1.0, an HTTP/2 preface, a malformed or
//! oversized head — hands the connection, with every unanswered byte, to hyper
//! ([`crate::server`]) for the rest of its life.
//!
//! Why: on one core, hyper's request parsing, header-map building and response
//! encoding were about a third of the user-space time of a hit.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use tokio::net::TcpStream;

use crate::edge::client::Peer;
use crate::edge::rate_limit::Class;
use crate::edge::sendfile::Volume;
use crate::edge::wire::{head_end, Wire};
use crate::http1::fresh::{self, Answer};
use crate::http1::h1;
use crate::http1::head::{parse, Plain};
use crate::http1::repeat::{self, Kept};
use crate::metrics::Outcome;
use crate::ops::access_log::{self, AccessLog, Entry};
use crate::policy::Policy;
use crate::request::body::Mapped;
use crate::state::Ctx;

/// What ended the fast path on a connection.
pub(crate) enum Exit {
    /// The client closed, went idle, or the server is shutting down.
    Closed,
    /// Hand the connection to hyper with these unanswered bytes.
    Handover(Bytes),
    /// Idle between requests, nothing unanswered or in flight: back to the hit
    /// loop ([`crate::http1::hit_loop`]) with its buffers.
    Park(Bufs),
}

/// Where a connection's fast path starts: its buffers (with any bytes not yet
/// answered) and what is owed first.
pub(crate) struct Start {
    pub(crate) bufs: Bufs,
    pub(crate) first: Option<First>,
}

impl Start {
    /// A new connection: nothing read, nothing owed.
    pub(crate) fn new() -> Start {
        Start {
            bufs: Bufs::new(),
            first: None,
        }
    }
}

/// What the hit loop hands a connection over with: what it could not finish
/// without waiting.
pub(crate) enum First {
    /// A request the service answers (not a fresh hit).
    Request(Plain),
    /// A fresh hit, its head (or what is left of it) in the buffers' `out`, and
    /// what its client's rate said.
    Hit {
        answer: Answer,
        asker: Asker,
        at: (std::time::Instant, Duration),
        admit: Admit,
    },
}

/// What the rate limit said of a hit handed over.
pub(crate) enum Admit {
    /// Its token was taken, and part of the answer may have been written
    /// (`answer.body` is then what is left of the body).
    Taken,
    /// Over the client's rate: a 429, to ask again after this wait.
    Refused(Duration),
}

impl Admit {
    /// What [`admit_hit`] would have said.
    fn result(self) -> Result<(), Duration> {
        match self {
            Admit::Taken => Ok(()),
            Admit::Refused(wait) => Err(wait),
        }
    }
}

/// Most sent-by-sendfile bodies a connection keeps pinned before it waits for its
/// send queue to drain (a pipelining client could otherwise pin without bound).
const IN_FLIGHT_MAX: usize = 64;

/// Sent-by-sendfile bodies a connection holds before it asks the socket whether the
/// peer has acknowledged them all.
const IN_FLIGHT_CHECK: usize = 16;

/// Bodies this connection sent with sendfile whose pages its socket's send queue may
/// still reference (see [`crate::edge::sendfile`]): their store handles, kept until the
/// peer has acknowledged every byte.
#[derive(Default)]
struct InFlight(Vec<Bytes>);

impl InFlight {
    /// Lets go of the bodies if the peer has acknowledged everything sent.
    fn release_acked(&mut self, stream: &TcpStream) {
        if !self.0.is_empty() && crate::edge::sys::unacked(stream) == Some(0) {
            self.0.clear();
        }
    }

    /// Aborts the connection ([`crate::edge::sendfile::abort`]: the queue is gone when it
    /// returns) and lets go of the bodies.
    fn abort(&mut self, stream: &TcpStream) {
        crate::edge::sendfile::abort(stream);
        self.0.clear();
    }

    /// Waits until the peer has acknowledged everything sent, then lets go; `false`
    /// when no byte was acknowledged for `stall` (the connection was aborted). A
    /// slow reader that keeps acknowledging is waited for.
    async fn settle(&mut self, stream: &TcpStream, stall: std::time::Duration) -> bool {
        let mut deadline = tokio::time::Instant::now() + stall;
        let mut pause = std::time::Duration::from_micros(200);
        let mut left = None;
        while !self.0.is_empty() {
            let unacked = crate::edge::sys::unacked(stream);
            if unacked == Some(0) {
                self.0.clear();
                break;
            }
            if unacked < left || left.is_none() {
                left = unacked;
                deadline = tokio::time::Instant::now() + stall;
            }
            if tokio::time::Instant::now() >= deadline {
                self.abort(stream);
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_millis(50));
        }
        true
    }
}

/// Serves fresh hits on `stream` until something else arrives. Before it returns,
/// the bodies it sent with sendfile are acknowledged (or the connection is set to
/// reset on close, and reported closed).
pub(crate) async fn run(
    ctx: &Arc<Ctx>,
    wire: &mut Wire,
    peer: Peer,
    volume: Option<&Volume>,
    signals: Signals<'_>,
    start: Start,
) -> io::Result<Exit> {
    let mut in_flight = InFlight::default();
    let exit = serve(ctx, wire, peer, volume, signals, &mut in_flight, start).await;
    let stall = ctx.peek().cfg.limits.send_stall.0;
    let drained = in_flight.settle(wire.tcp(), stall).await;
    if !drained {
        ctx.metrics.record_send_stalls(0, 1);
    }
    match exit {
        Ok(Exit::Handover(_)) if !drained => Ok(Exit::Closed),
        e => e,
    }
}

/// What a fast-path connection listens for besides its socket.
#[derive(Debug)]
pub(crate) struct Signals<'a> {
    /// The server is shutting down: close once idle.
    pub shutdown: &'a mut tokio::sync::watch::Receiver<bool>,
    /// The server is full: close if idle (see [`crate::edge::conns`]).
    pub reap: tokio::sync::watch::Receiver<u64>,
    /// Whether an idle connection goes back to the hit loop ([`Exit::Park`]).
    pub park: bool,
}

/// Resolves when `rx` sees a new value, handing it back (never, once the sender is
/// gone). Owning the receiver lets the connection keep one such future armed for
/// its life and re-arm it only when it fires.
pub(crate) async fn next_change(
    mut rx: tokio::sync::watch::Receiver<u64>,
) -> tokio::sync::watch::Receiver<u64> {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
    rx
}

/// One connection on the fast path: its socket and buffers.
struct Conn<'a> {
    ctx: &'a Arc<Ctx>,
    wire: &'a mut Wire,
    peer: Peer,
    volume: Option<&'a Volume>,
    /// How long a client may stay silent between requests.
    idle: Duration,
    /// How long a response's bytes may stay still (`limits.send_stall`): a socket
    /// left full, sent bytes left unacknowledged.
    stall: Duration,
    b: Bufs,
}

/// A connection's buffers, which go with it between its task and the hit loop.
pub(crate) struct Bufs {
    /// Request bytes read and not yet answered.
    pub(crate) buf: BytesMut,
    /// Response heads are built here, reused for the life of the connection.
    pub(crate) out: Vec<u8>,
    /// The last hit's request fields, cleared: the next request's are parsed into
    /// the same map, so a keep-alive hit allocates none (a request the service
    /// answers takes the map with it).
    pub(crate) fields: HeaderMap,
}

impl Bufs {
    pub(crate) fn new() -> Bufs {
        Bufs {
            buf: BytesMut::with_capacity(8 * 1024),
            out: Vec::with_capacity(1024),
            fields: HeaderMap::new(),
        }
    }

    /// Buffers with no memory yet (what a connection leaving the hit loop leaves
    /// behind).
    pub(crate) fn empty() -> Bufs {
        Bufs {
            buf: BytesMut::new(),
            out: Vec::new(),
            fields: HeaderMap::new(),
        }
    }

    /// Takes back the field map of an answered request, for the next one.
    pub(crate) fn reuse(&mut self, asker: Asker) {
        if let Asker::Parsed(req) = asker {
            self.fields = req.into_fields();
        }
    }
}

/// What a connection waits on besides its socket: one timer and one shutdown
/// waiter for the connection's life, not one of each per request. The timer stays
/// in tokio's wheel and is moved on only when it fires early (the deadline is kept
/// by the caller), as nginx does with its lazy timers.
struct Waits<'w, C> {
    stopping: bool,
    changed: Pin<&'w mut C>,
    timer: Pin<&'w mut tokio::time::Sleep>,
    reap: Reap,
}

/// The armed wait for the server's next "full, close if idle" signal.
type Reap = Pin<Box<dyn Future<Output = tokio::sync::watch::Receiver<u64>> + Send>>;

/// How far reading a request head got.
enum Read {
    /// A complete head ends at this offset of the buffer.
    Head(usize),
    /// The connection ends on the fast path.
    Exit(Exit),
}

async fn serve(
    ctx: &Arc<Ctx>,
    wire: &mut Wire,
    peer: Peer,
    volume: Option<&Volume>,
    signals: Signals<'_>,
    in_flight: &mut InFlight,
    start: Start,
) -> io::Result<Exit> {
    let Signals {
        shutdown,
        reap,
        park,
    } = signals;
    let (idle, stall) = {
        let limits = &ctx.peek().cfg.limits;
        (limits.client_idle_timeout.0, limits.send_stall.0)
    };
    let mut c = Conn {
        ctx,
        wire,
        peer,
        volume,
        idle,
        stall,
        b: start.bufs,
    };
    let answered = match start.first {
        None => true,
        Some(First::Request(req)) => c.serve_other(req, in_flight).await?,
        Some(First::Hit {
            answer,
            asker,
            at,
            admit,
        }) => {
            c.answer_hit(answer, asker, at, Some(admit.result()), in_flight)
                .await?
        }
    };
    if !answered {
        return Ok(Exit::Closed);
    }
    let stopping = *shutdown.borrow();
    let changed = shutdown.changed();
    tokio::pin!(changed);
    let timer = tokio::time::sleep(idle);
    tokio::pin!(timer);
    let mut waits = Waits {
        stopping,
        changed: changed.as_mut(),
        timer: timer.as_mut(),
        reap: Box::pin(next_change(reap)),
    };
    loop {
        if park && c.b.buf.is_empty() && in_flight.0.is_empty() && !waits.stopping {
            return Ok(Exit::Park(c.b));
        }
        let end = match c.read_head(&mut waits).await? {
            Read::Head(end) => end,
            Read::Exit(e) => return Ok(e),
        };
        c.b.out.clear();
        let start = std::time::Instant::now();
        // (Its own statement: the policy's guard ends with it, not held through the
        // service's answer below.)
        let fresh =
            c.b.fresh_hit(ctx, &ctx.peek(), peer, (end, None), ctx.clock.now());
        let (answer, asker) = match fresh {
            Fresh::Hit(answer, asker) => (answer, asker),
            Fresh::Other(req) => {
                // Not a fresh hit: the service answers, and the connection stays here.
                if !c.serve_other(req, in_flight).await? {
                    return Ok(Exit::Closed);
                }
                continue;
            }
            Fresh::Handover(rest) => return Ok(Exit::Handover(rest)),
        };
        // Its head is in the output buffer: what `quire_request_duration_seconds`
        // measures (not the body's writing, which a slow client sets).
        let took = start.elapsed();
        if !c
            .answer_hit(answer, asker, (start, took), None, in_flight)
            .await?
        {
            return Ok(Exit::Closed);
        }
    }
}

/// The bookkeeping of a fresh hit (or its 429) written: metrics, the hot URLs, the
/// trace and the access log. `at`: when its head was read, and how long its answer
/// took to make. `policy`: the one the answer was made under.
pub(crate) fn answered(
    ctx: &Ctx,
    policy: &Policy,
    asker: &Asker,
    peer: Peer,
    (outcome, status, bytes): (Outcome, u16, u64),
    (start, took): (std::time::Instant, Duration),
) {
    ctx.metrics.record_request(outcome, status, bytes);
    ctx.metrics.record_duration(outcome, took);
    if let Some(tracer) = &ctx.tracer {
        trace_hit(tracer, ctx, asker, peer, (start, took), (outcome, status));
    }
    if outcome == Outcome::Hit {
        ctx.metrics.record_hot(asker.target());
    }
    if let Some(log) = &policy.access_log {
        log_answer(log, ctx, asker, peer, (outcome, status, bytes), start);
    }
}

/// What the head at the front of a connection's buffer gets.
pub(crate) enum Fresh {
    /// A fresh hit, its head in the connection's output buffer.
    Hit(Answer, Asker),
    /// Not a fresh hit: the service's to answer.
    Other(Plain),
    /// Hyper's, with every unanswered byte.
    Handover(Bytes),
}

/// Who asked for a fresh hit: a head parsed now, or one answered before
/// ([`repeat`]).
// (Boxing the parsed head would cost an allocation per hit; the value lives on the
// stack for one request.)
#[expect(clippy::large_enum_variant, reason = "an allocation per hit to box it")]
pub(crate) enum Asker {
    Parsed(Plain),
    Kept(Arc<Kept>),
}

impl Asker {
    /// The client the request is from (`[rate_limit]`, the access log).
    pub(crate) fn client(&self, ctx: &Ctx, peer: Peer) -> std::net::IpAddr {
        match self {
            Asker::Parsed(req) => {
                access_log::client_ip(peer.addr, &req.headers, &ctx.peek().trusted_proxies)
            }
            Asker::Kept(k) => k.client(peer),
        }
    }

    pub(crate) fn method(&self) -> &str {
        match self {
            Asker::Parsed(req) => req.method.as_str(),
            Asker::Kept(k) => k.method(),
        }
    }

    fn target(&self) -> &str {
        match self {
            Asker::Parsed(req) => req.path(),
            Asker::Kept(k) => &k.target,
        }
    }

    fn field(&self, name: header::HeaderName) -> Option<&[u8]> {
        match self {
            Asker::Parsed(req) => req.headers.get(name).map(HeaderValue::as_bytes),
            Asker::Kept(k) => match name {
                header::USER_AGENT => k.user_agent.as_deref(),
                header::REFERER => k.referer.as_deref(),
                _ => None,
            },
        }
    }
}

/// Takes a hit token for `client` (`[rate_limit]`) at `now`, the moment the hit's
/// answer began (read once for the hit's timing and its token: a clock read less
/// per hit); the wait until one is back when it has none.
pub(crate) fn admit_hit(
    ctx: &Ctx,
    policy: &Policy,
    client: std::net::IpAddr,
    now: std::time::Instant,
) -> Result<(), Duration> {
    ctx.limiter
        .admit(client, Class::Hit, &policy.cfg.rate_limit, now)
}

/// The spans of an answer the fast path wrote, when its request is traced
/// (`crate::trace`): the request, from its head read to its answer written, and
/// the lookup within it — the entry found and the answer's head built, `took`
/// after `start`. A kept head ([`repeat`]) carries no `traceparent` to follow.
fn trace_hit(
    tracer: &crate::trace::Tracer,
    ctx: &Ctx,
    asker: &Asker,
    peer: Peer,
    (start, took): (std::time::Instant, Duration),
    (outcome, status): (Outcome, u16),
) {
    let none = HeaderMap::new();
    let (fields, trusted) = match asker {
        Asker::Parsed(req) => (
            &req.headers,
            ctx.peek().trusted_proxies.contains(peer.addr.ip()),
        ),
        Asker::Kept(_) => (&none, false),
    };
    let Some(mut span) = tracer.request_at(fields, trusted, asker.method(), start) else {
        return;
    };
    let path = asker.target().split('?').next().unwrap_or("/");
    span.set("url.path", path.to_owned());
    span.set("network.protocol.version", "1.1");
    let mut lookup = span
        .context()
        .child_at("lookup", crate::trace::Kind::Internal, start);
    lookup.set("quire.found", true);
    lookup.end_at(start + took);
    crate::request::service::end_request_span(span, status, outcome);
}

/// The access-log line of an answer the fast path wrote: outcome, status, body
/// bytes.
fn log_answer(
    log: &AccessLog,
    ctx: &Ctx,
    asker: &Asker,
    peer: Peer,
    (outcome, status, bytes): (Outcome, u16, u64),
    start: std::time::Instant,
) {
    log.record(&Entry {
        time: std::time::SystemTime::now(),
        client: asker.client(ctx, peer),
        method: asker.method(),
        target: asker.target(),
        version: http::Version::HTTP_11,
        status,
        bytes,
        duration: start.elapsed(),
        cache: outcome.label(),
        upstream: None,
        user_agent: asker.field(header::USER_AGENT),
        referer: asker.field(header::REFERER),
    });
}

impl Bufs {
    /// What the head ending at `end` of the buffer gets: a repeat answered from a
    /// kept recipe ([`repeat`]), or a head parsed now, answered if it is a fresh hit
    /// (and its recipe kept), else the service's or hyper's.
    /// `hashed`: the head's hash, if already taken ([`repeat::find`]); `policy`: the
    /// one in force, which the caller read (the hit loop once per turn); `now`: the
    /// server's clock ([`Ctx::clock`]) read after the head arrived, which freshness,
    /// `Age` and `ttl` are reckoned at.
    pub(crate) fn fresh_hit(
        &mut self,
        ctx: &Arc<Ctx>,
        policy: &Arc<Policy>,
        peer: Peer,
        (end, hashed): (usize, Option<u64>),
        now: SystemTime,
    ) -> Fresh {
        if let Some(k) = repeat::find(&self.buf[..end], peer, policy, hashed) {
            if let Some(answer) = repeat::answer(ctx, policy, &k, peer, now, &mut self.out) {
                self.buf.advance(end);
                ctx.metrics.record_repeat();
                return Fresh::Hit(answer, Asker::Kept(k));
            }
            self.out.clear();
        }
        // The head leaves the buffer as shared bytes, so the request's target and
        // field values are slices of it rather than copies (an allocation each).
        let head = self.buf.split_to(end).freeze();
        let Some(req) = parse(&head, std::mem::take(&mut self.fields)) else {
            return Fresh::Handover(rejoin(&head, &self.buf));
        };
        let Some((recipe, entry)) = fresh::prepare(ctx, policy, &req, peer) else {
            return Fresh::Other(req);
        };
        let at = (req.path(), peer);
        let Some(answer) = fresh::serve(ctx, policy, &recipe, entry, at, now, &mut self.out) else {
            self.out.clear();
            return Fresh::Other(req);
        };
        repeat::keep(&head, &req, peer, policy, recipe);
        Fresh::Hit(answer, Asker::Parsed(req))
    }
}

impl Conn<'_> {
    /// A complete head in the buffer, or read more. The wait for a head — idle
    /// between requests, or a head trickling in — is bounded as a whole (a client
    /// sending a byte a minute does not hold the connection forever).
    async fn read_head<C: Future>(&mut self, w: &mut Waits<'_, C>) -> io::Result<Read> {
        let limit = self.ctx.peek().cfg.limits.header_bytes.0 as usize;
        let deadline = tokio::time::Instant::now() + self.idle;
        loop {
            if let Some(e) = head_end(&self.b.buf) {
                return Ok(Read::Head(e));
            }
            if self.b.buf.len() > limit.min(64 * 1024) {
                return Ok(Read::Exit(Exit::Handover(self.b.buf.split().freeze())));
            }
            if w.stopping && self.b.buf.is_empty() {
                return Ok(Read::Exit(Exit::Closed));
            }
            let read = tokio::select! {
                r = self.wire.read_some(&mut self.b.buf) => r?,
                // (a dropped sender also means the server is going away)
                _ = w.changed.as_mut(), if !w.stopping => {
                    w.stopping = true;
                    continue;
                }
                () = w.timer.as_mut() => {
                    if tokio::time::Instant::now() >= deadline {
                        return Ok(Read::Exit(Exit::Closed));
                    }
                    w.timer.as_mut().reset(deadline);
                    continue;
                }
                rx = w.reap.as_mut() => {
                    let idle_since = deadline - self.idle;
                    if self.b.buf.is_empty() && idle_since.elapsed() >= crate::edge::conns::REAP_IDLE_MIN {
                        self.ctx.metrics.record_connection_reaped();
                        return Ok(Read::Exit(Exit::Closed));
                    }
                    w.reap = Box::pin(next_change(rx));
                    continue;
                }
            };
            if read == 0 {
                return Ok(Read::Exit(if self.b.buf.is_empty() {
                    Exit::Closed
                } else {
                    Exit::Handover(self.b.buf.split().freeze())
                }));
            }
        }
    }

    /// Answers a plain request that is not a fresh hit through the service and
    /// writes the response; `false` when the connection is to close.
    async fn serve_other(&mut self, req: Plain, in_flight: &mut InFlight) -> io::Result<bool> {
        let head_only = req.method == http::Method::HEAD;
        let req = req.into_request();
        // Bodies sent by sendfile stay pinned until acknowledged; do not hold them
        // through a wait on the origin.
        if !in_flight.0.is_empty() && !in_flight.settle(self.wire.tcp(), self.stall).await {
            self.ctx.metrics.record_send_stalls(0, 1);
            return Ok(false);
        }
        let resp = crate::request::service::handle(self.ctx.clone(), req, self.peer).await;
        let after = h1::write_response(self.wire, resp, head_only, &mut self.b.out, self.stall);
        if after.await? == h1::After::Close {
            // A clean end (FIN after the answer), as hyper ends a connection.
            self.wire.close_write().await;
            return Ok(false);
        }
        Ok(true)
    }

    /// Answers a fresh hit whose head is in `out`: its body, or a 429 when its
    /// client is over its hit rate (`admit`: what the rate limit said already, if
    /// it was asked); `false` when the connection is to close.
    async fn answer_hit(
        &mut self,
        mut answer: Answer,
        asker: Asker,
        at: (std::time::Instant, Duration),
        admit: Option<Result<(), Duration>>,
        in_flight: &mut InFlight,
    ) -> io::Result<bool> {
        let (ctx, peer) = (self.ctx, self.peer);
        let admit =
            admit.unwrap_or_else(|| admit_hit(ctx, &ctx.peek(), asker.client(ctx, peer), at.0));
        let sent = match admit {
            Ok(()) => self.send_hit(&mut answer, in_flight).await?.then_some((
                Outcome::Hit,
                answer.status,
                answer.body_len,
            )),
            Err(wait) => {
                drop(answer);
                self.send_limited(wait, asker.method() == "HEAD").await?
            }
        };
        let Some(sent) = sent else {
            return Ok(false);
        };
        answered(ctx, &ctx.peek(), &asker, peer, sent, at);
        self.b.reuse(asker);
        Ok(true)
    }

    /// Writes the 429 of a client over its hit rate; what was sent, or `None` when
    /// the connection is to close.
    async fn send_limited(
        &mut self,
        wait: Duration,
        head_only: bool,
    ) -> io::Result<Option<(Outcome, u16, u64)>> {
        use http_body::Body as _;
        let resp = crate::request::reply::too_many_requests(wait);
        let len = if head_only {
            0
        } else {
            resp.body().size_hint().exact().unwrap_or(0)
        };
        let after = h1::write_response(self.wire, resp, head_only, &mut self.b.out, self.stall);
        Ok((after.await? == h1::After::KeepAlive).then_some((Outcome::Error, 429, len)))
    }

    /// Writes a fresh hit whose head is in `out`, keeping a body sent by sendfile
    /// pinned until the peer has acknowledged it; `false` when the connection is to
    /// close.
    async fn send_hit(
        &mut self,
        answer: &mut Answer,
        in_flight: &mut InFlight,
    ) -> io::Result<bool> {
        // Ask the socket (one ioctl) only every IN_FLIGHT_CHECK bodies: a pin held a
        // few responses longer costs nothing, a system call per response does.
        if in_flight.0.len() >= IN_FLIGHT_CHECK {
            in_flight.release_acked(self.wire.tcp());
        }
        if in_flight.0.len() >= IN_FLIGHT_MAX
            && !in_flight.settle(self.wire.tcp(), self.stall).await
        {
            self.ctx.metrics.record_send_stalls(0, 1);
            return Ok(false);
        }
        match write_answer(self.wire, &self.b.out, answer, self.volume, self.stall).await {
            Ok(false) => {}
            Ok(true) => in_flight
                .0
                .extend(answer.body.take().map(Mapped::into_bytes)),
            Err(e) => {
                // Failed, or the client stopped reading for limits.send_stall. The queue
                // may hold part of a sendfile'd body: drop it with the connection
                // rather than let it outlive the pin.
                in_flight.abort(self.wire.tcp());
                return Err(e);
            }
        }
        Ok(true)
    }
}

/// `head` and the bytes after it as one buffer again, for hyper.
fn rejoin(head: &[u8], rest: &[u8]) -> Bytes {
    let mut all = BytesMut::with_capacity(head.len() + rest.len());
    all.extend_from_slice(head);
    all.extend_from_slice(rest);
    all.freeze()
}

/// Writes a hit's head and body (see [`Wire::write_all`]); `true` when the body
/// went (in part) by sendfile — cleartext only — so the caller keeps it pinned
/// until the peer has acknowledged it.
async fn write_answer(
    wire: &mut Wire,
    head: &[u8],
    a: &Answer,
    volume: Option<&Volume>,
    stall: std::time::Duration,
) -> io::Result<bool> {
    let body: &[u8] = a.body.as_ref().map_or(&[], AsRef::as_ref);
    if let (Some(stream), Some(volume)) = (wire.plain(), volume) {
        let mut sent_from_file = false;
        let write = |slices: &[IoSlice<'_>]| {
            if volume.wants(slices) {
                sent_from_file = true;
                volume.write(stream, slices)
            } else {
                Ok(rustix::io::writev(stream, slices)?)
            }
        };
        crate::edge::wire::write_all_with(stream, &[head, body], stall, write).await?;
        return Ok(sent_from_file);
    }
    wire.write_all(&[head, body], stall).await?;
    Ok(false)
}
