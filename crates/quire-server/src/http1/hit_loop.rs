//! The hit loop: idle cleartext keep-alive connections, and the fresh hits they ask
//! for, served by one task per worker from an epoll set of its own, without a task
//! per connection.
//!
//! With a task per connection, each keep-alive hit costs tokio's work around it: the
//! reactor sets the socket's readiness and wakes the task, the scheduler polls it,
//! and the connection's future polls its socket, its idle timer, its shutdown and
//! its reap waiters (`select!`) before the hit is read. The loop takes that away
//! for the hits that need nothing else: tokio wakes one task when the loop's epoll
//! set (level-triggered, nested in tokio's) has ready sockets, and the task reads
//! every ready connection, then answers and writes each one's hits in turn, by the
//! same code the fast path answers with ([`fastpath::Bufs::fresh_hit`],
//! [`fastpath::answered`]). Reading them all first lets the CPU fetch what their
//! answers will read while it works on the others (`Set::turn`).
//!
//! Anything that would wait goes to a task of its own, with its buffers and what it
//! owes ([`Handoff`]; the server spawns it): a request the service answers (a miss,
//! a stale entry, an admin call), a hit over its client's rate (the 429), a write the
//! socket did not take whole, pipelining past [`PIPELINED_MAX`] heads at once, and
//! anything for hyper. Such a connection comes back when it is idle again
//! ([`fastpath::Exit::Park`]). New cleartext connections start here (the server
//! parks them as they are accepted).
//!
//! **Invalidations.** The loop keeps nothing of a response between requests: a
//! connection holds only its buffers, and every hit asks the key version and the
//! store again through the fast path's code (a repeat as in
//! [`crate::http1::repeat`]), so a purge, an edit or a refill reaches the loop's
//! next hit exactly as it reaches a task's (`tests/repeat.rs` races purges against
//! keep-alive connections, which are the loop's).
//!
//! What a task per connection kept, the loop keeps:
//! - **The idle limit** (`limits.client_idle_timeout`) bounds the wait for each head
//!   from the moment the last answer was written (bytes trickling in do not extend
//!   it), checked every quarter of the limit (at least every 10 ms, at most every
//!   second): a connection is closed up to a quarter late, never early.
//! - **Shutdown**: idle connections close at once; one with a head partly read
//!   closes when it has been answered, or at its idle limit.
//! - **A full server** (`crate::edge::conns`): connections idle for at least
//!   `REAP_IDLE_MIN` close when asked.
//! - **Bounded work**: the loop holds only connections that already hold a slot of
//!   `limits.connections`; a turn reads once from each ready connection and answers
//!   at most [`PIPELINED_MAX`] of its heads; heads past the header limit go to hyper
//!   (which refuses them). `quire_fastpath_parked` counts the connections it holds,
//!   `quire_fastpath_handoffs_total` those it handed to tasks.

use std::io::{self, IoSlice};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use rustix::event::epoll::{self, Event, EventData, EventFlags};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};

use crate::edge::client::Peer;
use crate::edge::conns::{Admitted, REAP_IDLE_MIN};
use crate::edge::wire::head_end;
use crate::http1::fastpath::{self, Admit, Bufs, First, Fresh, Start};
use crate::http1::repeat;
use crate::metrics::Outcome;
use crate::policy::Policy;
use crate::state::Ctx;

/// Most heads of one connection answered in one turn; a client pipelining more is
/// handed to a task (which answers them in order), so it cannot hold the loop.
pub(crate) const PIPELINED_MAX: usize = 16;

/// Ready connections taken from the epoll set at once.
const EVENTS: usize = 256;

/// What an open connection holds for its life, wherever it is served: its client's
/// count (`limits.connections_per_client`), its slot of `limits.connections`, and
/// its place in the open-connections gauge. Dropping it gives all three back (the
/// slot last: the drain waits for the slots, and nothing of the server may be held
/// after it).
pub(crate) struct Held {
    ctx: Arc<Ctx>,
    _admitted: Admitted,
    _permit: OwnedSemaphorePermit,
}

impl Held {
    /// Counts the connection open.
    pub(crate) fn new(ctx: Arc<Ctx>, admitted: Admitted, permit: OwnedSemaphorePermit) -> Held {
        ctx.metrics.connections().fetch_add(1, Ordering::Relaxed);
        Held {
            ctx,
            _admitted: admitted,
            _permit: permit,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.ctx
            .metrics
            .connections()
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// An idle connection on its way into the loop.
pub(crate) struct Parked {
    pub(crate) stream: TcpStream,
    pub(crate) peer: Peer,
    pub(crate) held: Held,
    pub(crate) bufs: Bufs,
}

/// A connection leaving the loop for a task of its own.
pub(crate) struct Handoff {
    pub(crate) stream: TcpStream,
    pub(crate) peer: Peer,
    pub(crate) held: Held,
    pub(crate) to: To,
}

/// Where a connection leaving the loop goes.
pub(crate) enum To {
    /// The fast path, owing what the loop could not finish (boxed: the buffers
    /// and a hit's answer are a few hundred bytes, and a hand-off is rare).
    Fast(Box<Start>),
    /// hyper, with every unanswered byte.
    Hyper(Bytes),
}

/// What starts the task a connection is handed to (the server's: it holds what a
/// connection on hyper needs).
pub(crate) type Spawn = Arc<dyn Fn(Handoff) + Send + Sync>;

/// The server's hit loops, one per worker.
pub(crate) struct Loops {
    senders: Vec<mpsc::UnboundedSender<Parked>>,
    next: AtomicUsize,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Loops {
    /// Starts `n` loops, running until `stop` turns true and their connections
    /// have closed (or [`Loops::stop`]).
    pub(crate) fn start(
        ctx: &Arc<Ctx>,
        n: usize,
        stop: &watch::Receiver<bool>,
        reap: &watch::Receiver<u64>,
        spawn: Spawn,
    ) -> Arc<Loops> {
        let mut senders = Vec::new();
        let mut tasks = Vec::new();
        for _ in 0..n.max(1) {
            let (tx, rx) = mpsc::unbounded_channel();
            let ends = Ends {
                stop: stop.clone(),
                reap: reap.clone(),
            };
            tasks.push(tokio::spawn(run(ctx.clone(), rx, ends, spawn.clone())));
            senders.push(tx);
        }
        Arc::new(Loops {
            senders,
            next: AtomicUsize::new(0),
            tasks: Mutex::new(tasks),
        })
    }

    /// Puts an idle connection into a loop (in turn). Once the loops have ended (the
    /// server is stopping) it is closed instead.
    pub(crate) fn park(&self, p: Parked) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.senders.len();
        // (A send to an ended loop drops the connection: closed, its slot freed.)
        let _ = self.senders[i].send(p);
    }

    /// Ends the loops, closing what they still hold, and waits until they are gone
    /// (each holds the server's state).
    pub(crate) async fn stop(&self) {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for t in tasks {
            t.abort();
            let _ = t.await;
        }
    }
}

/// What ends a loop's connections besides their clients.
struct Ends {
    /// Turns true when the server shuts down.
    stop: watch::Receiver<bool>,
    /// Changes when the server is full and idle connections should close.
    reap: watch::Receiver<u64>,
}

/// A connection in the loop.
struct Conn {
    stream: TcpStream,
    peer: Peer,
    held: Held,
    b: Bufs,
    /// When the wait for the next head began (the last answer written, or the
    /// connection parked).
    idle_since: Instant,
}

/// A loop's connections, by their key in its epoll set.
struct Set<'ep> {
    ep: BorrowedFd<'ep>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    ctx: Arc<Ctx>,
    spawn: Spawn,
    idle: Duration,
    stopping: bool,
    /// What a turn's first pass read from each ready connection.
    ready: Vec<Ready>,
}

/// What a turn left a connection with.
enum After {
    Keep,
    Close,
    Leave(To),
}

async fn run(ctx: Arc<Ctx>, mut parked: mpsc::UnboundedReceiver<Parked>, ends: Ends, spawn: Spawn) {
    let ep = match crate::edge::sys::epoll_set() {
        Ok(ep) => ep,
        Err(e) => {
            // No loop: every connection parked here gets a task of its own.
            tracing::warn!(error = %e, "no epoll set for the hit loop; a task per connection");
            while let Some(p) = parked.recv().await {
                spawn(Handoff {
                    stream: p.stream,
                    peer: p.peer,
                    held: p.held,
                    to: To::Fast(Box::new(Start {
                        bufs: p.bufs,
                        first: None,
                    })),
                });
            }
            return;
        }
    };
    let idle = ctx.peek().cfg.limits.client_idle_timeout.0;
    let mut set = Set {
        ep: ep.get_ref().as_fd(),
        conns: Vec::new(),
        free: Vec::new(),
        ctx,
        spawn,
        idle,
        stopping: *ends.stop.borrow(),
        ready: Vec::new(),
    };
    let every = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut sweeps = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    sweeps.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut parked_open = true;
    let mut reap_open = true;
    // The two signals' waits live across the loop's wake-ups: a `changed()` made
    // afresh at each `select!` joins the channel's waiters and leaves them again
    // every time, twice per wake-up at thousands of wake-ups a second.
    let mut stop = std::pin::pin!(next_change(ends.stop));
    let mut reap = std::pin::pin!(next_change(ends.reap));
    loop {
        tokio::select! {
            // (`poll_read_ready` keeps the task's waker in the file's one reader
            // slot; `readable()` would join and leave a list of waiters each time.)
            ready = std::future::poll_fn(|cx| ep.poll_read_ready(cx)) => {
                let Ok(mut ready) = ready else { break };
                // Cleared only when the set has nothing ready: its sockets are
                // level-triggered, so one with bytes left unread stays ready, and
                // tokio's edge would not come again for it. (Bytes that arrive
                // after the turn's look make a new edge: see `Set::turn`.)
                if !set.turn() {
                    ready.clear_ready();
                }
            }
            p = parked.recv(), if parked_open => match p {
                Some(p) => set.add(p),
                None => parked_open = false,
            },
            _ = sweeps.tick() => set.sweep(),
            // (Ended, each is not polled again: `stopping` stays set, `reap_open`
            // cleared, or a new wait takes its place.)
            _ = &mut stop, if !set.stopping => {
                set.stopping = true;
                set.close_idle(Duration::ZERO);
            }
            (changed, rx) = &mut reap, if reap_open => {
                if !changed {
                    // (The server is going away: its stop follows.)
                    reap_open = false;
                    continue;
                }
                reap.set(next_change(rx));
                let n = set.close_idle(REAP_IDLE_MIN);
                for _ in 0..n {
                    set.ctx.metrics.record_connection_reaped();
                }
            }
        }
        if set.stopping && set.open() == 0 {
            break;
        }
    }
}

/// `rx`'s next change (`false`: its sender is gone), with `rx` back for the wait
/// after it.
async fn next_change<T>(mut rx: watch::Receiver<T>) -> (bool, watch::Receiver<T>) {
    let changed = rx.changed().await.is_ok();
    (changed, rx)
}

impl Set<'_> {
    /// Connections the loop holds.
    fn open(&self) -> usize {
        self.conns.len() - self.free.len()
    }

    fn add(&mut self, p: Parked) {
        if self.stopping && p.bufs.buf.is_empty() {
            return; // idle at shutdown: closed
        }
        let i = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let data = EventData::new_u64(i as u64);
        // (`RDHUP`: a turn must know when the client's end came with its last bytes,
        // see `Set::turn`.)
        if let Err(e) = epoll::add(self.ep, &p.stream, data, EventFlags::IN | EventFlags::RDHUP) {
            tracing::debug!(error = %e, "a connection could not join the hit loop");
            self.free.push(i);
            self.leave(
                p.stream,
                p.peer,
                p.held,
                To::Fast(Box::new(Start {
                    bufs: p.bufs,
                    first: None,
                })),
            );
            return;
        }
        self.conns[i] = Some(Conn {
            stream: p.stream,
            peer: p.peer,
            held: p.held,
            b: p.bufs,
            idle_since: Instant::now(),
        });
        self.ctx.metrics.record_parked(1);
    }

    /// Serves every ready connection once; whether the set may still have ready
    /// connections (`false`: its readiness may be cleared).
    ///
    /// It may not when the look took fewer than [`EVENTS`], every read left its
    /// socket empty (it returned less than the room it had), and no client's end
    /// or error had come (`RDHUP`, `HUP`, `ERR`: a read returns the bytes before an
    /// end, and only the next one sees the end, with nothing new to signal it). No
    /// connection was left ready then, and any that became ready after the look did
    /// so by bytes (or an end) arriving, which wakes the set's own file in tokio's
    /// epoll set (an epoll file signals its waiters at each readiness of its
    /// sockets), so tokio sees a new edge. A turn that found the set empty costs a
    /// look and a trip through the loop's `select!` at every wake-up, which this
    /// saves.
    ///
    /// In passes over the ready connections, so that the cache misses of one
    /// connection's repeat overlap with the others' work instead of following one
    /// another: each is read, and its head's recipe set asked of the CPU
    /// ([`repeat::prefetch_set`]); then the recipes in those sets
    /// ([`repeat::prefetch_recipes`]); then what those recipes point at
    /// ([`repeat::prefetch_recipe_reads`]); then each is answered. (The recipes
    /// of a few thousand pages do not stay in the CPU's caches between two
    /// requests for the same page, and a repeat's reads depend on one another:
    /// the set, then the recipe, then what the recipe points at.)
    fn turn(&mut self) -> bool {
        // (Not initialised: the look writes the events it returns.)
        let mut events = [std::mem::MaybeUninit::<Event>::uninit(); EVENTS];
        let (events, _) = match epoll::wait(self.ep, &mut events[..], Some(&ZERO)) {
            Ok(got) => got,
            // Not known to be empty: look again (readiness stays set).
            Err(rustix::io::Errno::INTR) => return true,
            Err(e) => {
                tracing::warn!(error = %e, "the hit loop's epoll set failed");
                return false;
            }
        };
        let mut more = events.len() == EVENTS;
        // (The set's, kept between turns: a turn clears it rather than filling an
        // array for a turn's most events each time.)
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        // (Read once for the turn: every hit of the turn is answered under it. A
        // reload lands at the next turn, a few microseconds on.)
        let policy = self.ctx.peek();
        for ev in events.iter() {
            let i = ev.data.u64() as usize;
            let Some(Some(c)) = self.conns.get_mut(i) else {
                continue;
            };
            let (got, drained) = receive(c);
            let ended = EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR;
            let flags = ev.flags; // (a copy: the event is a packed struct)
            more |= !drained || flags.intersects(ended);
            let end = if got == Got::Bytes {
                head_end(&c.b.buf)
            } else {
                None
            };
            let head = end.map(|end| &c.b.buf[..end]);
            let hash = head.and_then(|h| repeat::prefetch_set(h, c.peer, &policy));
            ready.push(Ready { i, got, end, hash });
        }
        for hash in ready.iter().filter_map(|r| r.hash) {
            repeat::prefetch_recipes(hash);
        }
        for hash in ready.iter().filter_map(|r| r.hash) {
            repeat::prefetch_recipe_reads(hash);
        }
        for r in &ready {
            let Some(Some(c)) = self.conns.get_mut(r.i) else {
                continue;
            };
            let after = match r.got {
                Got::Bytes => serve(&self.ctx, &policy, c, (r.end, r.hash)),
                Got::Nothing => After::Keep,
                Got::Closed => After::Close,
                // The client ended in the middle of a head: hyper's to refuse.
                Got::EndedInHead => After::Leave(To::Hyper(c.b.buf.split().freeze())),
            };
            let after = match after {
                After::Keep if self.stopping && c.b.buf.is_empty() => After::Close,
                a => a,
            };
            match after {
                After::Keep => {}
                After::Close => drop(self.take(r.i)),
                After::Leave(to) => {
                    if let Some(c) = self.take(r.i) {
                        self.leave(c.stream, c.peer, c.held, to);
                    }
                }
            }
        }
        self.ready = ready;
        more
    }

    /// Takes connection `i` out of the loop (and its epoll set).
    fn take(&mut self, i: usize) -> Option<Conn> {
        let c = self.conns.get_mut(i)?.take()?;
        let _ = epoll::delete(self.ep, &c.stream);
        self.free.push(i);
        self.ctx.metrics.record_parked(-1);
        Some(c)
    }

    fn leave(&self, stream: TcpStream, peer: Peer, held: Held, to: To) {
        self.ctx.metrics.record_loop_handoff();
        (self.spawn)(Handoff {
            stream,
            peer,
            held,
            to,
        });
    }

    /// Closes the connections whose wait for a head passed the idle limit.
    fn sweep(&mut self) {
        let idle = self.idle;
        self.close_where(|_, since| since >= idle);
    }

    /// Closes the connections idle (nothing read of a next head) for at least
    /// `min`; how many.
    fn close_idle(&mut self, min: Duration) -> usize {
        self.close_where(|c, since| c.b.buf.is_empty() && since >= min)
    }

    /// Closes the connections `close` picks, given how long each has waited for
    /// its next head; how many.
    fn close_where(&mut self, close: impl Fn(&Conn, Duration) -> bool) -> usize {
        let now = Instant::now();
        let picked: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let c = c.as_ref()?;
                close(c, now.duration_since(c.idle_since)).then_some(i)
            })
            .collect();
        for &i in &picked {
            drop(self.take(i));
        }
        picked.len()
    }
}

/// A ready connection, as a turn's first pass left it for the next ones.
struct Ready {
    /// Its key in the set.
    i: usize,
    got: Got,
    /// Where its first head ends, if it has one.
    end: Option<usize>,
    /// Its first head's hash, when a recipe may be kept for it
    /// ([`repeat::prefetch_set`]).
    hash: Option<u64>,
}

const ZERO: rustix::time::Timespec = rustix::time::Timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

/// What reading a ready connection found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Got {
    /// Bytes (perhaps only more of a head).
    Bytes,
    /// Nothing yet.
    Nothing,
    /// The end of the connection, or an error: it is closed.
    Closed,
    /// The client ended in the middle of a head.
    EndedInHead,
}

/// Reads what arrived on a ready connection, and whether that left its socket
/// empty (the read returned less than the room it had, or nothing).
fn receive(c: &mut Conn) -> (Got, bool) {
    if c.b.buf.capacity() - c.b.buf.len() < 4096 {
        c.b.buf.reserve(8192);
    }
    match crate::edge::sys::recv_into_spare(&c.stream, &mut c.b.buf) {
        Ok((0, _)) if c.b.buf.is_empty() => (Got::Closed, true),
        Ok((0, _)) => (Got::EndedInHead, true),
        Ok((got, room)) => (Got::Bytes, got < room),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => (Got::Nothing, true),
        Err(_) => (Got::Closed, true),
    }
}

/// Answers the fresh hits a connection's buffer holds (at most [`PIPELINED_MAX`]),
/// once bytes have arrived; `first` is where its first head ends, if it has one,
/// and that head's hash, if the first pass took it.
fn serve(
    ctx: &Arc<Ctx>,
    policy: &Arc<Policy>,
    c: &mut Conn,
    first: (Option<usize>, Option<u64>),
) -> After {
    let limit = policy.cfg.limits.header_bytes.0 as usize;
    for turn in 0..PIPELINED_MAX {
        let (end, hashed) = if turn == 0 {
            first
        } else {
            (head_end(&c.b.buf), None)
        };
        let Some(end) = end else {
            if c.b.buf.len() > limit.min(64 * 1024) {
                return After::Leave(To::Hyper(c.b.buf.split().freeze()));
            }
            return After::Keep;
        };
        match answer(ctx, policy, c, end, hashed) {
            After::Keep => {}
            other => return other,
        }
        if c.b.buf.is_empty() {
            // Answered: the wait for the next head starts now.
            c.idle_since = Instant::now();
            return After::Keep;
        }
    }
    // More heads than a turn answers: a task answers the rest in order.
    After::Leave(To::Fast(Box::new(Start {
        bufs: std::mem::replace(&mut c.b, Bufs::empty()),
        first: None,
    })))
}

/// Answers the head ending at `end` (`hashed`: its hash, if taken already): a fresh
/// hit written whole stays in the loop; anything else leaves it.
fn answer(
    ctx: &Arc<Ctx>,
    policy: &Arc<Policy>,
    c: &mut Conn,
    end: usize,
    hashed: Option<u64>,
) -> After {
    let peer = c.peer;
    c.b.out.clear();
    let start = Instant::now();
    let (answer, asker) = match c.b.fresh_hit(ctx, policy, peer, end, hashed) {
        Fresh::Hit(answer, asker) => (answer, asker),
        Fresh::Other(req) => return leave_fast(c, First::Request(req)),
        Fresh::Handover(rest) => return After::Leave(To::Hyper(rest)),
    };
    let took = start.elapsed();
    if let Err(wait) = fastpath::admit_hit(ctx, policy, asker.client(ctx, peer), start) {
        // Over its rate: a task writes the 429.
        let first = First::Hit {
            answer,
            asker,
            at: (start, took),
            admit: Admit::Refused(wait),
        };
        return leave_fast(c, first);
    }
    let body: &[u8] = answer.body.as_deref().unwrap_or(&[]);
    let head_len = c.b.out.len();
    let written = match write_some(&c.stream, &c.b.out, body) {
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
        Err(_) => return After::Close,
    };
    if written == head_len + body.len() {
        let sent = (Outcome::Hit, answer.status, answer.body_len);
        fastpath::answered(ctx, policy, &asker, peer, sent, (start, took));
        c.b.reuse(asker);
        return After::Keep;
    }
    // The socket took part of it: a task writes the rest, waiting for room.
    let mut answer = answer;
    c.b.out.drain(..written.min(head_len));
    if let Some(b) = answer.body.as_mut() {
        b.advance(written.saturating_sub(head_len));
    }
    let first = First::Hit {
        answer,
        asker,
        at: (start, took),
        admit: Admit::Taken,
    };
    leave_fast(c, first)
}

/// The connection leaves for the fast path's task, owing `first`.
fn leave_fast(c: &mut Conn, first: First) -> After {
    After::Leave(To::Fast(Box::new(Start {
        bufs: std::mem::replace(&mut c.b, Bufs::empty()),
        first: Some(first),
    })))
}

/// One non-blocking vectored write of a hit's head and body: what the socket took.
fn write_some(stream: &TcpStream, head: &[u8], body: &[u8]) -> io::Result<usize> {
    let parts = [IoSlice::new(head), IoSlice::new(body)];
    let n = if body.is_empty() { 1 } else { 2 };
    Ok(rustix::io::writev(stream, &parts[..n])?)
}
