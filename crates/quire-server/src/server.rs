//! The listener: accepts connections (bounded), serves HTTP/1.1 and HTTP/2 on one
//! port — cleartext (HTTP/2 by prior knowledge) or, with `[tls]`, HTTPS (HTTP/2 or
//! HTTP/1.1 by ALPN) — and drains on shutdown.
//!
//! Key decisions:
//! - **`TCP_NODELAY` on every accepted socket.** hyper writes a response head and
//!   body as one vectored write when it can, but a body that arrives in several
//!   frames (a fill, multipart ranges) would otherwise meet Nagle plus delayed ACK:
//!   up to ~40 ms per response, the delayed-ACK timer on Linux.
//! - **The connection limit is a semaphore taken before `accept`**: at the limit quire
//!   stops accepting and new connections wait in the kernel backlog instead of being
//!   accepted and dropped — while idle keep-alive connections are asked to close to
//!   make room, and no client may hold more than its share ([`crate::edge::conns`]).
//! - **Graceful shutdown**: on the shutdown signal the listener closes, idle
//!   keep-alive connections are closed, in-flight requests finish (HTTP/2 gets a
//!   GOAWAY), for at most `limits.shutdown_grace`.
//! - **TLS handshakes run in the connection's task**, inside its slot and bounded by
//!   `tls.handshake_timeout`: a client that never finishes one holds one slot for
//!   that long and no more, and the accept loop never waits on a handshake. A
//!   connection that chose `h2` goes to hyper at once; HTTP/1.1 starts on the fast
//!   path as cleartext does ([`crate::edge::wire`]).
//! - Every connection's reads pass through [`crate::edge::guard`], which refuses ambiguously
//!   framed requests (`Content-Length` with `Transfer-Encoding`, several lengths).
//! - **Every response makes progress or ends** ([`crate::edge::stall`]): on hyper's
//!   path each response body is watched, one that hyper stops asking for (an HTTP/2
//!   window kept shut) is dropped after `limits.send_stall` and the connection
//!   closes when nothing else is open on it; writes that the client does not take
//!   fail after the same deadline ([`crate::edge::guard::Guarded`], and the fast path's
//!   own writes).
//! - Oversized request heads get 431 from hyper (`max_buf_size` = `limits.header_bytes`),
//!   slow or idle clients are cut by `header_read_timeout` = `limits.client_idle_timeout`.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, Weak};

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::edge::client::Peer;
use crate::edge::conns::{self, Conns};
use crate::edge::guard::Guarded;
use crate::edge::h2conn::cork::Cork;
use crate::edge::h2conn::inline::InlineFirst;
use crate::edge::sendfile::Volume;
use crate::edge::wire::Wire;
use crate::http1::fastpath::{self, Start};
use crate::http1::hit_loop::{Handoff, Held, Loops, Parked, Spawn, To};
use crate::metrics::{Handshake, Outcome};
use crate::policy::StartError;
use crate::request::service;
use crate::state::Ctx;

/// A bound server, ready to run.
#[derive(Debug)]
pub struct Server {
    ctx: Arc<Ctx>,
    listener: TcpListener,
    /// The plain-HTTP listener that redirects to HTTPS (`listen_http`).
    redirect: Option<TcpListener>,
}

/// Gives `ctx` the queue its purges' refills go to (see `crate::ops::purge_api`):
/// a prefill queue of its own, so refills take their turn behind readers as
/// prefills do and are counted with them.
fn start_refills(ctx: &Arc<Ctx>) {
    let queue = crate::request::prefill::Prefill::with_capacity(
        ctx.clone(),
        crate::ops::purge_api::REFILL_QUEUE_MAX,
    );
    // A second server on the same context keeps the first one's queue.
    let _ = ctx.attach_refills(Box::new(queue));
}

impl Server {
    /// Binds the configured address (`SO_REUSEADDR`, backlog 1024).
    pub async fn bind(ctx: Arc<Ctx>) -> Result<Server, StartError> {
        let (addr, listen_http) = {
            let cfg = &ctx.peek().cfg;
            (cfg.listen, cfg.listen_http)
        };
        let listen = |source| StartError::Listen { addr, source };
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
        }
        .map_err(listen)?;
        socket.set_reuseaddr(true).map_err(listen)?;
        socket.bind(addr).map_err(listen)?;
        let listener = socket.listen(1024).map_err(listen)?;
        let redirect = match listen_http {
            Some(addr) => Some(
                crate::edge::redirect::bind(addr)
                    .await
                    .map_err(|source| StartError::Listen { addr, source })?,
            ),
            None => None,
        };
        start_refills(&ctx);
        Ok(Server {
            ctx,
            listener,
            redirect,
        })
    }

    /// Serves on listening sockets this process was handed instead of binding its
    /// own ([`crate::edge::inherit`]: systemd's socket activation, or the process a binary
    /// upgrade replaces). `listen` is served whatever the configured address; with
    /// no `listen_http` socket handed over the configured one is bound, and a handed
    /// one the configuration has no use for is closed (with a warning).
    pub async fn adopt(
        ctx: Arc<Ctx>,
        listen: std::net::TcpListener,
        listen_http: Option<std::net::TcpListener>,
    ) -> Result<Server, StartError> {
        let (addr, http_addr) = {
            let cfg = &ctx.peek().cfg;
            (cfg.listen, cfg.listen_http)
        };
        let listener = adopt_listener(listen, addr)?;
        let redirect = match (listen_http, http_addr) {
            (Some(l), Some(addr)) => Some(adopt_listener(l, addr)?),
            (None, Some(addr)) => Some(
                crate::edge::redirect::bind(addr)
                    .await
                    .map_err(|source| StartError::Listen { addr, source })?,
            ),
            (Some(l), None) => {
                tracing::warn!(
                    addr = ?l.local_addr().ok(),
                    "a socket for listen_http was handed over but listen_http is not configured; closing it"
                );
                None
            }
            (None, None) => None,
        };
        start_refills(&ctx);
        Ok(Server {
            ctx,
            listener,
            redirect,
        })
    }

    /// Copies of the listening sockets (`listen`, then `listen_http` when there is
    /// one), close-on-exec: what a binary upgrade hands to the new process. The
    /// sockets stay open in the kernel while any copy is.
    pub fn dup_listeners(
        &self,
    ) -> std::io::Result<(std::net::TcpListener, Option<std::net::TcpListener>)> {
        use std::os::fd::AsFd;
        let dup = |l: &TcpListener| {
            l.as_fd()
                .try_clone_to_owned()
                .map(std::net::TcpListener::from)
        };
        Ok((
            dup(&self.listener)?,
            self.redirect.as_ref().map(dup).transpose()?,
        ))
    }

    /// The bound plain-HTTP redirect address, when there is one.
    pub fn redirect_addr(&self) -> Option<SocketAddr> {
        self.redirect.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The bound address (the port when 0 was asked for).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves, then drains.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Server {
            ctx,
            listener,
            redirect,
        } = self;
        // What the listener sized at start-up stays for its life (a reload says
        // which of these changed and need a restart: see `crate::policy`).
        let start = ctx.policy();
        let limits = &start.cfg.limits;
        let builder = hyper_builder(&start.cfg);
        let sendfile_min = start.cfg.sendfile_min_bytes.0;
        let volume = (sendfile_min > 0).then(|| Volume::new(ctx.clone(), sendfile_min as usize));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        spawn_companions(&ctx, redirect, &listener, &stop_rx);
        let pace = spawn_pace(&ctx);
        let permits = Arc::new(Semaphore::new(limits.connections));
        let conns = Conns::new(limits.connections_per_client, start.trusted_proxies.clone());
        // The hit loops take cleartext connections (not with sendfile, whose pins
        // need a task's waits).
        let loops = (ctx.tls.is_none() && volume.is_none())
            .then(|| start_loops(&ctx, &builder, &stop_rx, &conns));
        let place = Place {
            ctx: ctx.clone(),
            builder,
            volume,
            stop: stop_rx,
            conns: conns.clone(),
            loops: loops.clone(),
        };
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                p = connection_slot(&permits, &conns) => match p {
                    Some(p) => p,
                    None => break,
                },
                () = &mut shutdown => break,
            };
            let (stream, peer) = tokio::select! {
                r = listener.accept() => match r {
                    Ok(s) => s,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            place.connection(stream, peer, permit);
        }
        drop(listener);
        drop(place);
        // Fast-path connections close when idle; hyper's get the graceful signal.
        let _ = stop_tx.send(true);
        drain(&permits, limits.connections, limits.shutdown_grace.0).await;
        if let Some(loops) = &loops {
            loops.stop().await;
        }
        // Paced until the drain ends (a drained request may still wait for a slot);
        // then the task, and the `Ctx` it holds, are gone before `run` returns, so
        // the volume can be opened again at once.
        pace.stop().await;
        if let Some(log) = ctx.policy().access_log.clone() {
            // The lines of the drained requests; a writer blocked (a FIFO nobody
            // reads) is left behind rather than waited for.
            let wait = std::time::Duration::from_secs(2);
            let _ = tokio::task::spawn_blocking(move || log.finish(wait)).await;
        }
        if let Some(tracer) = ctx.tracer.clone() {
            // The drained requests' spans: one export's deadline, 5 s at most.
            let wait = ctx
                .policy()
                .cfg
                .tracing
                .timeout
                .0
                .min(std::time::Duration::from_secs(5));
            let _ = tokio::task::spawn_blocking(move || tracer.shutdown(wait)).await;
        }
    }
}

/// Where the listener puts each connection it accepts, and what it gives it.
struct Place {
    ctx: Arc<Ctx>,
    builder: auto::Builder<InlineFirst>,
    volume: Option<Volume>,
    stop: tokio::sync::watch::Receiver<bool>,
    conns: Arc<Conns>,
    loops: Option<Arc<Loops>>,
}

impl Place {
    /// Counts an accepted connection in (or refuses it: its client holds too
    /// many), and hands it to a hit loop (cleartext) or a task of its own.
    fn connection(
        &self,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        permit: OwnedSemaphorePermit,
    ) {
        let ctx = &self.ctx;
        let Some(admitted) = self.conns.admit(peer.ip()) else {
            // Over the per-client cap: a 429 it can read, then closed. (A fresh
            // socket's send buffer takes these few bytes without blocking.)
            ctx.metrics.record_connection_refused();
            let _ = rustix::io::write(&stream, conns::TOO_MANY);
            let _ = rustix::net::shutdown(&stream, rustix::net::Shutdown::Write);
            return;
        };
        let _ = stream.set_nodelay(true);
        let held = Held::new(ctx.clone(), admitted, permit);
        let peer = Peer {
            addr: peer,
            tls: ctx.tls.is_some(),
        };
        if let Some(loops) = &self.loops {
            // Cleartext: the hit loop serves it from its first request.
            if let Ok(stream) = stream.into_std() {
                let bufs = fastpath::Bufs::new();
                loops.park(Parked {
                    stream,
                    peer,
                    held,
                    bufs,
                });
            }
            return;
        }
        let conn = Connection {
            ctx: ctx.clone(),
            peer,
            builder: self.builder.clone(),
            volume: self.volume.clone(),
            stop: self.stop.clone(),
            reap: self.conns.reaper(),
            loops: None,
            held,
        };
        tokio::spawn(conn.serve(stream));
    }
}

/// The hit loops, one per worker (`crate::http1::hit_loop`), and the tasks they
/// hand connections to: a task per connection on the fast path or hyper, which
/// parks the connection in a loop again once it is idle.
fn start_loops(
    ctx: &Arc<Ctx>,
    builder: &auto::Builder<InlineFirst>,
    stop: &tokio::sync::watch::Receiver<bool>,
    conns: &Arc<Conns>,
) -> Arc<Loops> {
    let cell: Arc<OnceLock<Weak<Loops>>> = Arc::default();
    let spawn: Spawn = {
        let (ctx, builder, stop, conns, cell) = (
            ctx.clone(),
            builder.clone(),
            stop.clone(),
            conns.clone(),
            cell.clone(),
        );
        Arc::new(move |h: Handoff| {
            let conn = Connection {
                ctx: ctx.clone(),
                peer: h.peer,
                builder: builder.clone(),
                volume: None,
                stop: stop.clone(),
                reap: conns.reaper(),
                loops: cell.get().and_then(Weak::upgrade),
                held: h.held,
            };
            tokio::spawn(conn.resume(h.stream, h.to));
        })
    };
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let loops = Loops::start(ctx, workers, stop, &conns.reaper(), spawn);
    let _ = cell.set(Arc::downgrade(&loops));
    loops
}

/// The pace of the budget for uncached work (`crate::edge::budget`), running until
/// [`Pace::stop`].
struct Pace {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Pace {
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

fn spawn_pace(ctx: &Arc<Ctx>) -> Pace {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let c = ctx.clone();
    let task = tokio::spawn(async move {
        let max = || c.policy().cfg.budget.cpu_busy_max;
        c.budget
            .pace(max, async move {
                let _ = stopped.await;
            })
            .await;
    });
    Pace { stop, task }
}

/// A listening socket from elsewhere, on the runtime (`addr`: what errors name).
fn adopt_listener(l: std::net::TcpListener, addr: SocketAddr) -> Result<TcpListener, StartError> {
    let addr = l.local_addr().unwrap_or(addr);
    l.set_nonblocking(true)
        .and_then(|()| TcpListener::from_std(l))
        .map_err(|source| StartError::Listen { addr, source })
}

/// Starts what runs beside the listener until shutdown: ACME renewal, and the
/// plain-HTTP listener that redirects to this one.
fn spawn_companions(
    ctx: &Arc<Ctx>,
    redirect: Option<TcpListener>,
    listener: &TcpListener,
    stop: &tokio::sync::watch::Receiver<bool>,
) {
    if let Some(tls) = ctx.tls.clone().filter(|t| t.acme().is_some()) {
        tokio::spawn(crate::edge::tls::acme::run(tls, stop.clone()));
    }
    if let (Some(plain), Ok(https)) = (redirect, listener.local_addr()) {
        let mut stop = stop.clone();
        let stopped = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        tokio::spawn(crate::edge::redirect::run(
            ctx.clone(),
            plain,
            https.port(),
            stopped,
        ));
    }
}

/// hyper's settings for the connections handed to it: header limits and timers from
/// `limits` (cloned into each connection task; the builder is a bundle of settings).
fn hyper_builder(cfg: &crate::config::Config) -> auto::Builder<InlineFirst> {
    let limits = &cfg.limits;
    let mut builder = auto::Builder::new(InlineFirst);
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.client_idle_timeout.0)
        .max_buf_size(limits.header_bytes.0.clamp(8192, 16 << 20) as usize)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(limits.header_bytes.0.min(u64::from(u32::MAX)) as u32)
        .keep_alive_interval(Some(limits.client_idle_timeout.0));
    builder
}

/// Waits until every connection has ended (each holds a permit until it does), for
/// at most `grace`.
async fn drain(permits: &Semaphore, connections: usize, grace: std::time::Duration) {
    tracing::info!(?grace, "draining connections");
    let all = u32::try_from(connections).unwrap_or(u32::MAX);
    let drained = async {
        let _ = permits.acquire_many(all).await;
    };
    tokio::select! {
        () = drained => tracing::info!("drained"),
        () = tokio::time::sleep(grace) => tracing::warn!("shutdown grace elapsed; closing remaining connections"),
    }
}

/// One accepted connection and what it needs for its life.
struct Connection {
    ctx: Arc<Ctx>,
    peer: Peer,
    builder: auto::Builder<InlineFirst>,
    volume: Option<Volume>,
    /// Turns true when the server shuts down.
    stop: tokio::sync::watch::Receiver<bool>,
    /// Changes when the server is full and idle connections should close.
    reap: tokio::sync::watch::Receiver<u64>,
    /// Where an idle cleartext connection goes back to; `None` without hit loops.
    loops: Option<Arc<Loops>>,
    /// Its slots and its place in the gauge (dropped last).
    held: Held,
}

impl Connection {
    /// Serves a new connection to its end: the fast path first (hits off the socket,
    /// plain requests through the service); from the first request that needs
    /// protocol machinery on, hyper (see [`crate::http1::fastpath`]).
    async fn serve(self, stream: tokio::net::TcpStream) {
        match self.wire(stream).await {
            Some((wire, true)) => self.on_hyper(wire, bytes::Bytes::new(), true).await,
            Some((wire, false)) => self.fast(wire, Start::new()).await,
            None => {}
        }
    }

    /// Serves a connection a hit loop handed over, from where the loop left it.
    async fn resume(self, stream: std::net::TcpStream, to: To) {
        let Ok(stream) = tokio::net::TcpStream::from_std(stream) else {
            return;
        };
        match to {
            To::Fast(start) => self.fast(Wire::Plain(stream), *start).await,
            To::Hyper(prefix) => {
                // The socket was registered with the reactor a moment ago: until
                // tokio has seen it writable, hyper's first write waits, and hyper
                // closes a connection it answers without reading its request's body
                // (a refused upgrade with a body) before that write is made.
                let _ = stream.writable().await;
                let wire = Wire::Plain(stream);
                self.ctx.metrics.record_handover();
                self.on_hyper(wire, prefix, false).await;
            }
        }
    }

    /// The fast path from `start`; then hyper, a hit loop, or the end.
    async fn fast(mut self, mut wire: Wire, start: Start) {
        let ctx = self.ctx.clone();
        let signals = fastpath::Signals {
            shutdown: &mut self.stop,
            reap: self.reap.clone(),
            park: self.loops.is_some() && wire.plain().is_some(),
        };
        let volume = self.volume.as_ref();
        let exit = fastpath::run(&ctx, &mut wire, self.peer, volume, signals, start).await;
        match exit {
            Ok(fastpath::Exit::Handover(prefix)) => {
                ctx.metrics.record_handover();
                self.on_hyper(wire, prefix, false).await;
            }
            Ok(fastpath::Exit::Park(bufs)) => self.park(wire, bufs),
            Ok(fastpath::Exit::Closed) => {}
            Err(e) => {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    // Only writes time out there: limits.send_stall.
                    ctx.metrics.record_send_stalls(0, 1);
                }
                tracing::debug!(error = %e, peer = %self.peer.addr, "connection failed")
            }
        }
    }

    /// Puts the idle connection back into a hit loop.
    fn park(self, wire: Wire, bufs: fastpath::Bufs) {
        let (Some(loops), Wire::Plain(stream)) = (self.loops, wire) else {
            return;
        };
        if let Ok(stream) = stream.into_std() {
            loops.park(Parked {
                stream,
                peer: self.peer,
                held: self.held,
                bufs,
            });
        }
    }

    /// The connection's transport, and whether it goes straight to hyper (HTTPS
    /// with `h2` chosen); `None` when the TLS handshake failed or timed out.
    async fn wire(&self, stream: tokio::net::TcpStream) -> Option<(Wire, bool)> {
        let Some(tls) = &self.ctx.tls else {
            return Some((Wire::Plain(stream), false));
        };
        let metrics = &self.ctx.metrics;
        let handshake = tls.acceptor().accept(stream);
        let tls_stream = match tokio::time::timeout(tls.handshake_timeout(), handshake).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                metrics.record_handshake(Handshake::Failed);
                tracing::debug!(error = %e, peer = %self.peer.addr, "TLS handshake failed");
                return None;
            }
            Err(_) => {
                metrics.record_handshake(Handshake::TimedOut);
                return None;
            }
        };
        let alpn = tls_stream.get_ref().1.alpn_protocol();
        if alpn == Some(crate::edge::tls::ACME_TLS_ALPN) {
            // An ACME server checked the TLS-ALPN-01 certificate: nothing follows.
            return None;
        }
        let h2 = alpn == Some(b"h2");
        metrics.record_handshake(if h2 { Handshake::H2 } else { Handshake::Http1 });
        Some((Wire::Tls(Box::new(tls_stream)), h2))
    }

    /// The rest of the connection on hyper, starting with the unanswered bytes
    /// `prefix` the fast path read; `h2`: HTTPS with `h2` chosen. HTTP/2 (by ALPN
    /// or the cleartext preface) writes through a [`Cork`].
    async fn on_hyper(self, wire: Wire, prefix: bytes::Bytes, h2: bool) {
        let Connection {
            ctx,
            peer,
            builder,
            stop,
            reap,
            ..
        } = self;
        let (head_limit, send_stall) = {
            let limits = &ctx.peek().cfg.limits;
            (limits.header_bytes.0 as usize, limits.send_stall.0)
        };
        let h2 = h2 || prefix.starts_with(H2_PREFACE);
        // No sendfile on hyper's path: it drops a body's pin as soon as the write
        // returns (see `sendfile`).
        let io = Guarded::new(wire, prefix, head_limit, send_stall).on_stall(ctx.clone());
        let guard_refused = io.refusal.clone();
        let on = OnHyper {
            ctx: ctx.clone(),
            peer,
            builder,
            stop,
            reap,
        };
        let hyper_refused = if h2 {
            let cork = Cork::new(io);
            let flusher = cork.flusher();
            flusher.around(on.drive(cork)).await
        } else {
            on.drive(io).await
        };
        let refused = guard_refused.get().map(|_| 400).or(hyper_refused);
        if let Some(status) = refused {
            refused_before_routing(&ctx, peer, status);
        }
    }
}

/// The start of the HTTP/2 connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n";

/// What a connection on hyper needs besides its transport.
struct OnHyper {
    ctx: Arc<Ctx>,
    peer: Peer,
    builder: auto::Builder<InlineFirst>,
    stop: tokio::sync::watch::Receiver<bool>,
    reap: tokio::sync::watch::Receiver<u64>,
}

impl OnHyper {
    /// Serves `io` with hyper to the connection's end; the status hyper answered
    /// a head it could not parse with, if it did.
    async fn drive<I>(self, io: I) -> Option<u16>
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let OnHyper {
            ctx,
            peer,
            builder,
            mut stop,
            reap,
        } = self;
        let svc_ctx = ctx.clone();
        let watch = crate::edge::stall::Watch::new();
        let svc_watch = watch.clone();
        let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
            let ctx = svc_ctx.clone();
            let watch = svc_watch.clone();
            let req = req.map(crate::upstream::origin::boxed_incoming);
            async move {
                let resp = service::handle(ctx, req, peer).await;
                Ok::<_, Infallible>(resp.map(|b| watch.wrap(b)))
            }
        });
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(io), svc)
            .into_owned();
        // On shutdown, and when the server is full, the connection is asked to close
        // gracefully: at once if idle, else after the request in flight (HTTP/2 gets
        // a GOAWAY). hyper does not say whether it is idle: one handed over less than
        // REAP_IDLE_MIN ago has the request it was handed over for still to read, and
        // is left alone. Responses that stop moving are dropped, and a connection
        // left with nothing else closes ([`crate::edge::stall`]).
        tokio::pin!(conn);
        let mut asked = false;
        let handed = tokio::time::Instant::now();
        let mut reap = Box::pin(fastpath::next_change(reap));
        let stall = ctx.peek().cfg.limits.send_stall.0;
        let mut sweeps = sweeps(stall);
        let ended = loop {
            tokio::select! {
                r = conn.as_mut() => break r,
                _ = stop.wait_for(|s| *s), if !asked => {
                    asked = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = sweeps.tick() => if stalled_out(&watch, stall, &ctx) {
                    break Ok(());
                },
                rx = &mut reap => {
                    if only_still(&watch, stall, &ctx) {
                        // Nothing but responses that do not move: close now.
                        ctx.metrics.record_connection_reaped();
                        break Ok(());
                    }
                    if asked || handed.elapsed() < conns::REAP_IDLE_MIN {
                        reap = Box::pin(fastpath::next_change(rx));
                        continue;
                    }
                    asked = true;
                    reap = Box::pin(fastpath::next_change(rx));
                    ctx.metrics.record_connection_reaped();
                    conn.as_mut().graceful_shutdown();
                }
            }
        };
        let e = ended.err()?;
        tracing::debug!(error = %e, peer = %peer.addr, "connection ended with an error");
        let e = e.downcast_ref::<hyper::Error>()?;
        if e.is_parse_too_large() {
            Some(431)
        } else {
            e.is_parse().then_some(400)
        }
    }
}

/// Drops the responses of `watch` that stalled; whether the connection is left with
/// nothing else (it closes then).
fn stalled_out(watch: &crate::edge::stall::Watch, stall: std::time::Duration, ctx: &Ctx) -> bool {
    let swept = watch.sweep(stall, stall);
    ctx.metrics.record_send_stalls(swept.newly as u64, 0);
    let all = swept.all_stalled();
    if all {
        ctx.metrics.record_send_stalls(0, 1);
    }
    all
}

/// Whether every open response of `watch` has been still for
/// [`conns::REAP_IDLE_MIN`] (and there is one): a full server closes such a
/// connection at once.
fn only_still(watch: &crate::edge::stall::Watch, stall: std::time::Duration, ctx: &Ctx) -> bool {
    let s = watch.sweep(stall, conns::REAP_IDLE_MIN);
    ctx.metrics.record_send_stalls(s.newly as u64, 0);
    s.open > 0 && s.still == s.open
}

/// The connection's stall sweeps: every half `stall` (at least every 10 ms).
fn sweeps(stall: std::time::Duration) -> tokio::time::Interval {
    let every = (stall / 2).max(std::time::Duration::from_millis(10));
    let mut i = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}

/// Counts, and logs when there is an access log, a request refused before it was
/// routed: by the framing guard or by hyper's parser (see
/// [`crate::ops::access_log::refused_before_routing`]).
fn refused_before_routing(ctx: &Ctx, peer: Peer, status: u16) {
    ctx.metrics.record_request(Outcome::Error, status, 0);
    if let Some(log) = &ctx.peek().access_log {
        crate::ops::access_log::refused_before_routing(log, peer.addr, status);
    }
}

/// A connection slot: at once if one is free; else, while the server is full, idle
/// connections are asked to close every [`conns::REAP_EVERY`] until one frees.
/// `None` when the semaphore is closed.
async fn connection_slot(permits: &Arc<Semaphore>, conns: &Conns) -> Option<OwnedSemaphorePermit> {
    if let Ok(p) = permits.clone().try_acquire_owned() {
        return Some(p);
    }
    loop {
        conns.reap_idle();
        tokio::select! {
            p = permits.clone().acquire_owned() => return p.ok(),
            () = tokio::time::sleep(conns::REAP_EVERY) => {}
        }
    }
}
