//! The hit loop: idle cleartext keep-alive connections, and the fresh hits they ask
//! for, served by one thread per worker from an epoll set of its own, without a task
//! per connection and without tokio between a socket and its answer.
//!
//! With a task per connection, each keep-alive hit costs tokio's work around it: the
//! reactor sets the socket's readiness and wakes the task, the scheduler polls it,
//! and the connection's future polls its socket, its idle timer, its shutdown and
//! its reap waiters (`select!`) before the hit is read. A loop that was one task
//! for all its connections, its epoll set nested in tokio's, still paid two waits
//! per wake-up (tokio's, then its own set's) and a trip through the scheduler and a
//! `select!`. The loop's thread waits in its own set only, as a server written for
//! hits alone would: it reads every ready connection, then answers and writes each
//! one's hits in turn, by the same code the fast path answers with
//! ([`fastpath::Bufs::fresh_hit`], [`fastpath::answered`]). Reading them all first
//! lets the CPU fetch what their answers will read while it works on the others
//! (`Set::turn`). Measured against the nested loop on the peer corpus: 0.938x the
//! CPU per hit at 40,000 hits/s, 0.969x at 80,000 (`scripts/hit-ab.sh`, see
//! `docs/performance.md`); and a hit no longer waits behind the runtime's other
//! tasks on its worker.
//!
//! The thread enters the runtime (so it can spawn the tasks it hands connections
//! to) but never blocks anything of it, and nothing of a hit waits: the store's
//! lookup takes only resident entries (a cold one is the service's, on a task), and
//! the write is one non-blocking `writev`. What tokio told the loop's task, a
//! [`Wake`] tells the thread: an eventfd in its set, rung by a park (new or
//! returning connections) and by a small task that forwards the server's stop and
//! reap signals; the sweep of idle connections is the wait's timeout.
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
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rustix::event::epoll::{self, Event, EventData, EventFlags};
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit};

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

/// Ready connections a turn reads before it answers them ([`Set::turn`]'s passes
/// go over this many at a time). Enough for the prefetches of one connection's
/// repeat to overlap with the others' work; few enough that a turn never reads a
/// burst of requests with no answer written between them. The kernel frees a
/// request's buffer (`skb`) back to the CPU that made it, the client's on loopback
/// or the network card's interrupt CPU, in lists it drains as that CPU receives;
/// the 32nd buffer freed into a list before it drains (half of
/// `net.core.skb_defer_max`) costs an interrupt to that CPU. With every ready
/// connection read first, a saturated loop read about 70 requests per wake-up
/// with no answer between them, and sent that interrupt every 32 of them: 200 to
/// 280 ns of CPU per hit on this project's VM, where the interrupt traps to the
/// hypervisor (`native_write_msr` under `tcp_recvmsg`). In groups of 16 the
/// client's answers and next requests come between, its CPU drains the list, and
/// the interrupt fell to 2 to 4 ns per hit (`docs/performance.md`).
const GROUP: usize = 16;

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
    loops: Vec<One>,
    next: AtomicUsize,
    /// What [`Loops::stop`] ends and waits for.
    ends: Mutex<Vec<Ending>>,
}

/// One loop: where its connections are sent, and what wakes its thread (`None`
/// for a loop that could not start its thread: a task per connection instead).
struct One {
    parked: mpsc::UnboundedSender<Parked>,
    wake: Option<Arc<Wake>>,
}

/// How a loop ends: the task that signals it (aborting it ends a loop's thread,
/// see [`Ring`]), and the thread's end (its sender drops when it is gone).
struct Ending {
    task: tokio::task::JoinHandle<()>,
    gone: Option<oneshot::Receiver<()>>,
}

impl Loops {
    /// Starts `n` loops, running until `stop` turns true and their connections
    /// have closed (or [`Loops::stop`]). Each runs on a thread of its own, which
    /// enters the current runtime to spawn the tasks it hands connections to.
    pub(crate) fn start(
        ctx: &Arc<Ctx>,
        n: usize,
        stop: &watch::Receiver<bool>,
        reap: &watch::Receiver<u64>,
        spawn: Spawn,
    ) -> Arc<Loops> {
        let mut loops = Vec::new();
        let mut ends = Vec::new();
        for _ in 0..n.max(1) {
            let (tx, rx) = mpsc::unbounded_channel();
            let (wake, ending) = match start_thread(ctx, rx, (stop, reap), &spawn) {
                Ok((wake, ending)) => (Some(wake), ending),
                Err((e, rx)) => {
                    // No loop: every connection parked here gets a task of its own.
                    tracing::warn!(error = %e, "no hit loop; a task per connection");
                    let task = tokio::spawn(no_loop(rx, spawn.clone()));
                    (None, Ending { task, gone: None })
                }
            };
            loops.push(One { parked: tx, wake });
            ends.push(ending);
        }
        Arc::new(Loops {
            loops,
            next: AtomicUsize::new(0),
            ends: Mutex::new(ends),
        })
    }

    /// Puts an idle connection into a loop (in turn). Once the loops have ended (the
    /// server is stopping) it is closed instead.
    pub(crate) fn park(&self, p: Parked) {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.loops.len();
        let one = &self.loops[i];
        // (A send to an ended loop drops the connection: closed, its slot freed.)
        if one.parked.send(p).is_ok() {
            if let Some(w) = &one.wake {
                w.ring();
            }
        }
    }

    /// Ends the loops, closing what they still hold, and waits until they are gone
    /// (each holds the server's state).
    pub(crate) async fn stop(&self) {
        let ends = std::mem::take(&mut *self.ends.lock().unwrap_or_else(|e| e.into_inner()));
        for e in ends {
            e.task.abort();
            let _ = e.task.await;
            if let Some(gone) = e.gone {
                let _ = gone.await;
            }
        }
    }
}

/// The key of a loop's wake-up in its epoll set (connections' keys are their
/// indexes).
const WAKE: u64 = u64::MAX;

/// What wakes a loop's thread from its wait besides its connections, and what it
/// is woken for.
struct Wake {
    /// An eventfd in the loop's epoll set: readable while a wake-up is owed.
    fd: OwnedFd,
    /// A wake-up is owed (the eventfd written and not yet read): another ring
    /// writes nothing (a park's cost is a send, not a system call, while the loop
    /// has not yet woken for the last one).
    owed: AtomicBool,
    /// The server is stopping.
    stop: AtomicBool,
    /// How many times the server asked for idle connections to be reaped.
    reaps: AtomicU64,
    /// The loop must end now, closing what it holds.
    abort: AtomicBool,
}

impl Wake {
    fn new() -> io::Result<Wake> {
        use rustix::event::{eventfd, EventfdFlags};
        let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Wake {
            fd,
            owed: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            reaps: AtomicU64::new(0),
            abort: AtomicBool::new(false),
        })
    }

    /// Wakes the loop (to read what was set or sent before this).
    fn ring(&self) {
        if !self.owed.swap(true, Ordering::SeqCst) {
            // (Only a full counter, 2^64 - 2 rings unread, could refuse it.)
            let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
        }
    }

    /// Takes the owed wake-up, before the loop reads what it was for: a ring after
    /// this writes again, so what it was for is read at the next wake-up if not at
    /// this one.
    ///
    /// The eventfd is read before `owed` is cleared. The other order loses
    /// wake-ups: a ring between the two would see `owed` clear and write, the read
    /// would take that write, and `owed` would stay set with nothing to read, so no
    /// later ring would write again (a stop, or a parked connection, never heard).
    /// In this order a ring before the clear writes nothing but was sent before
    /// it, so the loop reads what it was for now; a ring after it writes.
    /// (`wake_ups_are_never_lost` races rings against takes.) The clear is a swap,
    /// not a store: reading the last ring's swap, it makes what that ring's sender
    /// sent before it visible to the reads that follow.
    fn take(&self) {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut count);
        self.owed.swap(false, Ordering::SeqCst);
    }
}

/// Ends a loop's thread when dropped: the task that forwards the server's signals
/// holds it, so the thread ends when [`Loops::stop`] aborts that task, or when the
/// runtime (which drops its tasks) goes away.
struct Ring(Arc<Wake>);

impl Drop for Ring {
    fn drop(&mut self) {
        self.0.abort.store(true, Ordering::SeqCst);
        self.0.ring();
    }
}

/// Starts a loop's thread, and the task that forwards the server's signals to it;
/// the receiver back if it could not.
fn start_thread(
    ctx: &Arc<Ctx>,
    rx: mpsc::UnboundedReceiver<Parked>,
    (stop, reap): (&watch::Receiver<bool>, &watch::Receiver<u64>),
    spawn: &Spawn,
) -> Result<(Arc<Wake>, Ending), (io::Error, mpsc::UnboundedReceiver<Parked>)> {
    let made = rustix::event::epoll::create(epoll::CreateFlags::CLOEXEC)
        .map_err(io::Error::from)
        .and_then(|ep| Ok((ep, Arc::new(Wake::new()?))))
        .and_then(|(ep, wake)| {
            let data = EventData::new_u64(WAKE);
            epoll::add(&ep, &wake.fd, data, EventFlags::IN)?;
            Ok((ep, wake))
        });
    let (ep, wake) = match made {
        Ok(made) => made,
        Err(e) => return Err((e, rx)),
    };
    let (gone_tx, gone) = oneshot::channel();
    let runtime = tokio::runtime::Handle::current();
    let (ctx, spawn, w) = (ctx.clone(), spawn.clone(), wake.clone());
    // (The receiver moves into the thread only once it has started; a failed start
    // drops it, and parked connections close: a thread that cannot start is a
    // process out of threads.)
    let started = std::thread::Builder::new()
        .name("quire-hits".into())
        .spawn(move || {
            let _in = runtime.enter();
            run(ctx, rx, &w, ep.as_fd(), spawn);
            drop(gone_tx);
        });
    if let Err(e) = started {
        tracing::warn!(error = %e, "no thread for a hit loop");
    }
    let ring = Ring(wake.clone());
    let task = tokio::spawn(forward(ring, stop.clone(), reap.clone()));
    Ok((
        wake,
        Ending {
            task,
            gone: Some(gone),
        },
    ))
}

/// Tells a loop's thread of the server's stop and reaps, until aborted.
async fn forward(ring: Ring, mut stop: watch::Receiver<bool>, mut reap: watch::Receiver<u64>) {
    let wake = &ring.0;
    let stopping = |wake: &Wake| {
        wake.stop.store(true, Ordering::SeqCst);
        wake.ring();
    };
    if *stop.borrow_and_update() {
        stopping(wake);
    }
    let (mut stop_open, mut reap_open) = (true, true);
    while stop_open || reap_open {
        tokio::select! {
            changed = stop.changed(), if stop_open => {
                // (A server gone without a stop is stopping too.)
                if changed.is_err() || *stop.borrow_and_update() {
                    stopping(wake);
                }
                stop_open = changed.is_ok();
            }
            changed = reap.changed(), if reap_open => {
                if changed.is_ok() {
                    wake.reaps.fetch_add(1, Ordering::SeqCst);
                    wake.ring();
                }
                reap_open = changed.is_ok();
            }
        }
    }
    // (The thread ends when this is aborted or dropped, with the runtime.)
    std::future::pending::<()>().await;
}

/// Hands every connection parked on a loop that could not start to a task of its
/// own.
async fn no_loop(mut parked: mpsc::UnboundedReceiver<Parked>, spawn: Spawn) {
    while let Some(p) = parked.recv().await {
        spawn(p.into_task());
    }
}

impl Parked {
    /// Its hand-off to a task of its own, owing nothing (it is idle).
    fn into_task(self) -> Handoff {
        Handoff {
            stream: self.stream,
            peer: self.peer,
            held: self.held,
            to: To::Fast(Box::new(Start {
                bufs: self.bufs,
                first: None,
            })),
        }
    }
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

/// A loop's thread: waits in its epoll set for ready connections (or a wake-up,
/// or the next sweep of idle ones), serves them, and ends when the server has
/// stopped and its connections have closed, or when told to end now.
fn run(
    ctx: Arc<Ctx>,
    mut parked: mpsc::UnboundedReceiver<Parked>,
    wake: &Wake,
    ep: BorrowedFd<'_>,
    spawn: Spawn,
) {
    let idle = ctx.peek().cfg.limits.client_idle_timeout.0;
    let mut set = Set {
        ep,
        conns: Vec::new(),
        free: Vec::new(),
        ctx,
        spawn,
        idle,
        stopping: false,
        ready: Vec::new(),
    };
    let every = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    // (One clock read per wake-up: the next wait is reckoned from the end of this
    // one's turn, at most a turn's work early, so a sweep comes that much later.)
    let mut now = Instant::now();
    let mut next_sweep = now + every;
    let mut reaps = 0;
    loop {
        let wait = next_sweep.saturating_duration_since(now);
        let wait = rustix::time::Timespec {
            tv_sec: wait.as_secs() as i64,
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        if set.turn(&wait) && !set.heard(wake, &mut parked, &mut reaps) {
            break;
        }
        now = Instant::now();
        if now >= next_sweep {
            set.sweep();
            next_sweep = now + every;
        }
        if set.stopping && set.open() == 0 {
            break;
        }
    }
}

impl Set<'_> {
    /// Takes the loop's wake-up and does what it was for: connections parked, the
    /// server's stop, a reap asked for since `reaps` (the count last seen); `false`
    /// when the loop must end now.
    fn heard(
        &mut self,
        wake: &Wake,
        parked: &mut mpsc::UnboundedReceiver<Parked>,
        reaps: &mut u64,
    ) -> bool {
        wake.take();
        if wake.abort.load(Ordering::SeqCst) {
            return false;
        }
        while let Ok(p) = parked.try_recv() {
            self.add(p);
        }
        if wake.stop.load(Ordering::SeqCst) && !self.stopping {
            self.stopping = true;
            self.close_idle(Duration::ZERO);
        }
        let asked = wake.reaps.load(Ordering::SeqCst);
        if asked != *reaps {
            *reaps = asked;
            let n = self.close_idle(REAP_IDLE_MIN);
            for _ in 0..n {
                self.ctx.metrics.record_connection_reaped();
            }
        }
        true
    }

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
        if let Err(e) = epoll::add(self.ep, &p.stream, data, EventFlags::IN) {
            tracing::debug!(error = %e, "a connection could not join the hit loop");
            self.free.push(i);
            self.leave(p.into_task());
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

    /// Waits at most `wait` for ready connections, and serves each once; whether
    /// the loop's wake-up came too ([`Wake`]: its eventfd stays readable until
    /// taken). The set is level-triggered and each turn asks it afresh, so a
    /// connection left with bytes unread (a read that filled its room) or an end
    /// behind the bytes read is simply ready again at the next turn.
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
    ///
    /// The passes go over [`GROUP`] connections at a time, not over all of a
    /// wake-up's: see there.
    fn turn(&mut self, wait: &rustix::time::Timespec) -> bool {
        // (Not initialised: the wait writes the events it returns.)
        let mut events = [std::mem::MaybeUninit::<Event>::uninit(); EVENTS];
        let (events, _) = match epoll::wait(self.ep, &mut events[..], Some(wait)) {
            Ok(got) => got,
            Err(rustix::io::Errno::INTR) => return false,
            Err(e) => {
                // (Not expected of a set this thread owns; a wake-up is read, so a
                // stop or an abort still ends the loop.)
                tracing::warn!(error = %e, "the hit loop's epoll set failed");
                std::thread::sleep(Duration::from_millis(10));
                return true;
            }
        };
        // (Read once for the turn: every hit of the turn is answered under it. A
        // reload lands at the next turn, a few microseconds on.)
        let policy = self.ctx.peek();
        let mut woke = false;
        for group in events.chunks(GROUP) {
            woke |= self.serve_ready(group, &policy);
        }
        woke
    }

    /// Serves a group of the turn's ready connections (at most [`GROUP`]), in the
    /// passes [`Set::turn`] describes; whether the loop's wake-up was among them.
    fn serve_ready(&mut self, events: &[Event], policy: &Arc<Policy>) -> bool {
        let mut woke = false;
        // (The set's, kept between turns: a turn clears it rather than filling an
        // array for a turn's most events each time.)
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        for ev in events.iter() {
            let key = ev.data.u64();
            if key == WAKE {
                woke = true;
                continue;
            }
            let Some(Some(c)) = self.conns.get_mut(key as usize) else {
                continue;
            };
            let i = key as usize;
            let got = receive(c);
            let end = if got == Got::Bytes {
                head_end(&c.b.buf)
            } else {
                None
            };
            let head = end.map(|end| &c.b.buf[..end]);
            let hash = head.and_then(|h| repeat::prefetch_set(h, c.peer, policy));
            ready.push(Ready { i, got, end, hash });
        }
        for hash in ready.iter().filter_map(|r| r.hash) {
            repeat::prefetch_recipes(hash);
        }
        for hash in ready.iter().filter_map(|r| r.hash) {
            repeat::prefetch_recipe_reads(hash);
        }
        let mut clock = Moments::read(&self.ctx.clock);
        for r in &ready {
            let Some(Some(c)) = self.conns.get_mut(r.i) else {
                continue;
            };
            let after = match r.got {
                Got::Bytes => serve(&self.ctx, policy, c, (r.end, r.hash), &mut clock),
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
                        self.leave(Handoff {
                            stream: c.stream,
                            peer: c.peer,
                            held: c.held,
                            to,
                        });
                    }
                }
            }
        }
        self.ready = ready;
        woke
    }

    /// Takes connection `i` out of the loop (and its epoll set).
    fn take(&mut self, i: usize) -> Option<Conn> {
        let c = self.conns.get_mut(i)?.take()?;
        let _ = epoll::delete(self.ep, &c.stream);
        self.free.push(i);
        self.ctx.metrics.record_parked(-1);
        Some(c)
    }

    /// Hands a connection that left the loop to a task of its own.
    fn leave(&self, h: Handoff) {
        self.ctx.metrics.record_loop_handoff();
        (self.spawn)(h);
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

/// Reads what arrived on a ready connection.
fn receive(c: &mut Conn) -> Got {
    if c.b.buf.capacity() - c.b.buf.len() < 4096 {
        c.b.buf.reserve(8192);
    }
    match crate::edge::sys::recv_into_spare(&c.stream, &mut c.b.buf) {
        Ok((0, _)) if c.b.buf.is_empty() => Got::Closed,
        Ok((0, _)) => Got::EndedInHead,
        Ok(_) => Got::Bytes,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Got::Nothing,
        Err(_) => Got::Closed,
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
    clock: &mut Moments,
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
        match answer(ctx, policy, c, (end, hashed), clock) {
            After::Keep => {}
            other => return other,
        }
        if c.b.buf.is_empty() {
            return After::Keep;
        }
    }
    // More heads than a turn answers: a task answers the rest in order.
    After::Leave(To::Fast(Box::new(Start {
        bufs: std::mem::replace(&mut c.b, Bufs::empty()),
        first: None,
    })))
}

/// Answers the head ending at `end` (`hashed`: its hash, if taken already), at the
/// moment `clock` gives: a fresh hit written whole stays in the loop; anything else
/// leaves it.
fn answer(
    ctx: &Arc<Ctx>,
    policy: &Arc<Policy>,
    c: &mut Conn,
    (end, hashed): (usize, Option<u64>),
    clock: &mut Moments,
) -> After {
    let peer = c.peer;
    c.b.out.clear();
    let (start, now) = clock.start();
    let (answer, asker) = match c.b.fresh_hit(ctx, policy, peer, (end, hashed), now) {
        Fresh::Hit(answer, asker) => (answer, asker),
        Fresh::Other(req) => {
            clock.end();
            return leave_fast(c, First::Request(req));
        }
        Fresh::Handover(rest) => return After::Leave(To::Hyper(rest)),
    };
    if let Err(wait) = fastpath::admit_hit(ctx, policy, asker.client(ctx, peer), start) {
        // Over its rate: a task writes the 429.
        let took = clock.end() - start;
        let first = First::Hit {
            answer,
            asker,
            at: (start, took),
            admit: Admit::Refused(wait),
        };
        return leave_fast(c, first);
    }
    let body: &[u8] = answer.body.as_ref().map_or(&[], AsRef::as_ref);
    let head_len = c.b.out.len();
    let written = match write_some(&c.stream, &c.b.out, body) {
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
        Err(_) => return After::Close,
    };
    let end = clock.end();
    let took = end - start;
    if written == head_len + body.len() {
        // Answered: the wait for the next head starts.
        c.idle_since = end;
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

/// The clock as a group of answers reads it: once for the group (the monotonic
/// clock and the server's wall clock, [`Ctx::clock`]), then once per answer, at its
/// end, which is where the next answer starts.
///
/// A hit had read the clock three times (its start and end for
/// `quire_request_duration_seconds`, and the wall clock for its freshness, `Age`
/// and `ttl`): `__vdso_clock_gettime` took 57–64 ns a hit in profiles at 80,000
/// hits/s, and 32–40 ns after this change. Here an answer's start is the previous
/// one's end (or the group's read), and its wall-clock moment is the group's plus
/// the monotonic time since: exact to the clock's own drift over a group, a few
/// microseconds. Every moment is
/// read after the group's heads arrived, so no answer is reckoned at a time before
/// its request. What a hit's duration measures in the loop: from the end of the
/// answer before it in the group (or the group's start) to its own write's return,
/// which is one non-blocking system call (a write the socket does not take whole
/// leaves the loop), so the time spent between two answers on a connection that had
/// nothing to read counts in the next.
struct Moments {
    /// The group's monotonic read.
    base: Instant,
    /// The server's wall clock at `base`.
    wall: std::time::SystemTime,
    /// The last answer's end (`base` before the first).
    last: Instant,
}

impl Moments {
    /// Reads the monotonic clock and the server's wall clock `clock`.
    fn read(clock: &crate::clock::Clock) -> Moments {
        let base = Instant::now();
        Moments {
            base,
            wall: clock.now(),
            last: base,
        }
    }

    /// The next answer's start, and the server's wall clock then.
    fn start(&self) -> (Instant, std::time::SystemTime) {
        (self.last, self.wall + (self.last - self.base))
    }

    /// The answer begun at [`Moments::start`] ended now; when.
    fn end(&mut self) -> Instant {
        self.last = Instant::now();
        self.last
    }
}

/// One non-blocking vectored write of a hit's head and body: what the socket took.
fn write_some(stream: &TcpStream, head: &[u8], body: &[u8]) -> io::Result<usize> {
    let parts = [IoSlice::new(head), IoSlice::new(body)];
    let n = if body.is_empty() { 1 } else { 2 };
    Ok(rustix::io::writev(stream, &parts[..n])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each answer of a group starts where the one before ended, and its wall-clock
    /// moment is the group's moved on by exactly the monotonic time since; a test's
    /// advanced server clock is in it.
    #[test]
    fn each_answer_starts_where_the_last_ended_on_the_servers_clock() {
        let clock = crate::clock::Clock::default();
        clock.advance(Duration::from_secs(3600));
        let before = std::time::SystemTime::now();
        let mut m = Moments::read(&clock);
        let (s1, w1) = m.start();
        assert_eq!(s1, m.base);
        assert_eq!(w1, m.wall);
        assert!(
            w1 >= before + Duration::from_secs(3600),
            "the advanced clock"
        );
        std::thread::sleep(Duration::from_millis(2));
        let e1 = m.end();
        let (s2, w2) = m.start();
        assert_eq!(s2, e1, "the next answer starts at the last one's end");
        assert!(e1 - s1 >= Duration::from_millis(2));
        assert_eq!(w2.duration_since(w1).unwrap(), e1 - s1);
        let e2 = m.end();
        assert!(e2 >= e1);
        assert_eq!(m.start().0, e2);
    }

    /// Rings from several threads, each after sending something, against a thread
    /// that waits on the eventfd and takes each wake-up before reading what was
    /// sent, as the loop does: nothing sent may be left unread while the reader
    /// waits (a lost wake-up leaves its wait to time out with messages pending).
    #[test]
    fn wake_ups_are_never_lost() {
        const SENDERS: usize = 4;
        const EACH: usize = 50_000;
        let wake = Arc::new(Wake::new().expect("an eventfd"));
        let sent = Arc::new(AtomicUsize::new(0));
        let senders: Vec<_> = (0..SENDERS)
            .map(|_| {
                let (wake, sent) = (wake.clone(), sent.clone());
                std::thread::spawn(move || {
                    for _ in 0..EACH {
                        sent.fetch_add(1, Ordering::SeqCst);
                        wake.ring();
                    }
                })
            })
            .collect();
        let mut read = 0;
        while read < SENDERS * EACH {
            let mut fds = [rustix::event::PollFd::new(
                &wake.fd,
                rustix::event::PollFlags::IN,
            )];
            let timeout = rustix::time::Timespec {
                tv_sec: 2,
                tv_nsec: 0,
            };
            let n = rustix::event::poll(&mut fds, Some(&timeout)).expect("poll");
            let pending = sent.load(Ordering::SeqCst);
            assert!(n == 1, "a wake-up lost: {read} read of {pending} sent");
            wake.take();
            read = sent.load(Ordering::SeqCst);
        }
        for s in senders {
            s.join().expect("a sender");
        }
        assert_eq!(read, SENDERS * EACH);
    }
}
