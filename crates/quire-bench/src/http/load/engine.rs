//! The event loop: one thread, one epoll set, N keep-alive connections. Closed loop:
//! each connection sends its next request once the previous answer is complete
//! (after the batch of events that completed it). Open loop (`rate`): requests fall
//! due on the [`Schedule`], the wait's own (nanosecond: [`super::wait`]) timeout
//! wakes the loop at the next due time, a due request goes to a free connection or
//! waits for one, and its latency counts from when it was due. At the end no new
//! request is sent and the ones in flight are awaited (up to the timeout), so every
//! request the server answered is counted.
//!
//! Cost: closed loop is about one `send`, one `recv` and a twentieth of an
//! `epoll_wait` per request (about 9 µs of CPU per request: 74 % of its core at
//! 85k/s). Open loop wakes for about every other request; an earlier version armed a
//! timerfd for each wake (two more system calls) and used 96–97 % of its core at 40k
//! requests/s against the vault, the wait's own timeout 66–67 %.
//!
//! Spinning (`spin`, `--spin`): every wait has a zero timeout, so the loop never
//! sleeps and its core is always busy. On loopback a server answers into the
//! generator's own socket, and when the generator sleeps the server's send pays to
//! wake it (`sock_def_readable`, then `try_to_wake_up`: on a VM an interrupt to the
//! generator's CPU). A server faster than the generator seldom finds it asleep; a
//! slower one does. Profiled at saturation, quire paid 0.3–0.45 µs a hit there that
//! the floor did not, and with the generator spinning its CPU per hit fell by that
//! much. A client on another machine costs the server no such wake-up, so spinning
//! figures are the fairer comparison of servers at saturation; the default
//! (sleeping) is what a generator on the same machine costs.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::event::epoll::{self, EventData, EventFlags};

use super::conn::{self, Conn, Phase};
use super::request::Requests;
use super::schedule::Schedule;
use super::stats::Stats;
use super::wait::wait;

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// The server.
    pub addr: SocketAddr,
    /// Keep-alive connections.
    pub connections: usize,
    /// How long to send requests.
    pub duration: Duration,
    /// Open loop at this many requests per second in total; `None`: closed loop.
    pub rate: Option<f64>,
    /// A request unanswered this long is an error (its connection is reopened).
    pub timeout: Duration,
    /// Never sleep in the wait (`--spin`).
    pub spin: bool,
}

/// How often timeouts and connect retries are checked.
const TICK: Duration = Duration::from_millis(10);
/// Wait before reconnecting after a failed connect.
const BACKOFF: Duration = Duration::from_millis(10);

struct Engine<'a> {
    cfg: &'a Config,
    reqs: &'a Requests,
    epoll: OwnedFd,
    conns: Vec<Conn>,
    /// Idle connections.
    free: Vec<usize>,
    stats: Stats,
    t0: Instant,
    schedule: Option<Schedule>,
    /// Requests sent (the sequence position of the next one).
    sent: u64,
    /// Open loop: requests handed to a connection.
    dispatched: u64,
    stopping: bool,
}

/// Runs the load and returns what it counted.
pub(crate) fn run(cfg: &Config, reqs: &Requests) -> io::Result<Stats> {
    let schedule = match cfg.rate {
        Some(r) => Some(
            Schedule::new(r)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad rate"))?,
        ),
        None => None,
    };
    if cfg.connections == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no connections",
        ));
    }
    let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    let now = Instant::now();
    let mut e = Engine {
        cfg,
        reqs,
        epoll,
        conns: (0..cfg.connections).map(|_| Conn::new(now)).collect(),
        free: Vec::with_capacity(cfg.connections),
        stats: Stats::new(cfg.duration),
        t0: now,
        schedule,
        sent: 0,
        dispatched: 0,
        stopping: false,
    };
    e.run()?;
    Ok(e.stats)
}

impl Engine<'_> {
    fn run(&mut self) -> io::Result<()> {
        let deadline = self.t0 + self.cfg.duration;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        let mut fine = true;
        for i in 0..self.conns.len() {
            self.connect(i, self.t0);
        }
        let mut next_tick = self.t0 + TICK;
        let mut drain_until = None;
        loop {
            let now = Instant::now();
            if !self.stopping && now >= deadline {
                // What fell due since the last pass still goes out if a connection is
                // free: `unsent` below counts only the requests that found none.
                self.dispatch(deadline)?;
                self.stopping = true;
                drain_until = Some(now + self.cfg.timeout);
                if let Some(s) = self.schedule {
                    self.stats.unsent = s.due_by(deadline - self.t0) - self.dispatched;
                }
                for i in 0..self.conns.len() {
                    if self.conns[i].phase != Phase::Busy {
                        self.conns[i].reset();
                    }
                }
                self.free.clear();
            }
            if let Some(until) = drain_until {
                let busy = self.conns.iter().filter(|c| c.phase == Phase::Busy).count();
                if busy == 0 || now >= until {
                    self.stats.errors.timeout += busy as u64;
                    self.stats.elapsed = now - self.t0;
                    return Ok(());
                }
            }
            if now >= next_tick {
                self.tick(now);
                next_tick = now + TICK;
            }
            self.dispatch(now)?;
            let mut wake = next_tick;
            if let Some(until) = drain_until {
                wake = wake.min(until);
            } else {
                wake = wake.min(deadline);
                // Open loop with nothing due waiting: wake when the next one falls
                // due (due ones waiting for a connection wake with its answer).
                if let Some(s) = self.schedule {
                    if self.dispatched == s.due_by(now - self.t0) {
                        wake = wake.min(self.t0 + s.due(self.dispatched));
                    }
                }
            }
            let timeout = if self.cfg.spin {
                Duration::ZERO
            } else {
                wake.saturating_duration_since(now)
            };
            let n = match wait(&self.epoll, &mut events, timeout, &mut fine) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            for ev in &events[..n] {
                let (key, flags) = (ev.u64, ev.events);
                self.event(key as usize, EventFlags::from_bits_retain(flags));
            }
        }
    }

    /// Hands requests to free connections: closed loop, one to each; open loop, the
    /// due ones.
    fn dispatch(&mut self, now: Instant) -> io::Result<()> {
        if self.stopping {
            return Ok(());
        }
        let Some(s) = self.schedule else {
            while let Some(i) = self.free.pop() {
                self.send(i, now, now);
            }
            return Ok(());
        };
        let due = s.due_by(now - self.t0);
        while self.dispatched < due {
            let Some(i) = self.free.pop() else { break };
            let origin = self.t0 + s.due(self.dispatched);
            self.dispatched += 1;
            self.send(i, origin, now);
        }
        Ok(())
    }

    /// Timeouts of requests in flight, and reconnects after failed connects.
    fn tick(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.phase == Phase::Busy && now.duration_since(c.sent) > self.cfg.timeout {
                self.stats.errors.timeout += 1;
                self.close(i, now);
            } else if c.phase == Phase::Down && c.retry_at.is_some_and(|t| t <= now) {
                self.connect(i, now);
            }
        }
    }

    fn interest(&mut self, i: usize, out: bool) {
        let c = &mut self.conns[i];
        if c.want_out == out {
            return;
        }
        c.want_out = out;
        if let Some(s) = &c.sock {
            let flags = if out {
                EventFlags::IN | EventFlags::OUT
            } else {
                EventFlags::IN
            };
            let _ = epoll::modify(&self.epoll, s, EventData::new_u64(i as u64), flags);
        }
    }

    fn connect(&mut self, i: usize, now: Instant) {
        if self.stopping {
            return;
        }
        let c = &mut self.conns[i];
        c.reset();
        c.retry_at = None;
        match conn::open(self.cfg.addr) {
            Ok(s) => {
                let flags = EventFlags::IN | EventFlags::OUT;
                if epoll::add(&self.epoll, &s, EventData::new_u64(i as u64), flags).is_err() {
                    self.stats.errors.connect += 1;
                    c.retry_at = Some(now + BACKOFF);
                    return;
                }
                c.sock = Some(s);
                c.want_out = true;
                c.phase = Phase::Connecting;
            }
            Err(_) => {
                self.stats.errors.connect += 1;
                c.retry_at = Some(now + BACKOFF);
            }
        }
    }

    /// Closes connection `i` (its request in flight, if any, is already counted) and
    /// opens it again unless the run is ending.
    fn close(&mut self, i: usize, now: Instant) {
        if self.conns[i].phase == Phase::Idle {
            self.free.retain(|&j| j != i);
        }
        self.conns[i].reset();
        self.connect(i, now);
    }

    /// A connection is ready for a request.
    fn ready(&mut self, i: usize) {
        self.conns[i].phase = Phase::Idle;
        if self.stopping {
            self.conns[i].reset();
            return;
        }
        // Sent after the whole batch of events is handled (as wrk does, through a
        // writability event): the server then gets requests in bursts, not one
        // wake-up per request, on both sides.
        self.free.push(i);
    }

    fn send(&mut self, i: usize, origin: Instant, now: Instant) {
        let c = &mut self.conns[i];
        c.phase = Phase::Busy;
        c.req = self.sent;
        c.written = 0;
        c.origin = origin;
        c.sent = now;
        self.sent += 1;
        self.write(i, now);
    }

    fn write(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        let req = self.reqs.nth(c.req);
        let Some(sock) = &c.sock else { return };
        let mut sock = sock;
        while c.written < req.len() {
            match sock.write(&req[c.written..]) {
                Ok(0) => {
                    self.stats.errors.write += 1;
                    return self.close(i, now);
                }
                Ok(n) => c.written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return self.interest(i, true);
                }
                Err(_) => {
                    self.stats.errors.write += 1;
                    return self.close(i, now);
                }
            }
        }
        self.interest(i, false);
    }

    fn event(&mut self, i: usize, flags: EventFlags) {
        let Some(c) = self.conns.get(i) else { return };
        let now = Instant::now();
        match c.phase {
            Phase::Down => {}
            Phase::Connecting => {
                let ok = c.sock.as_ref().is_some_and(|s| conn::connected(s).is_ok());
                if ok {
                    self.interest(i, false);
                    self.ready(i);
                } else {
                    self.stats.errors.connect += 1;
                    self.conns[i].reset();
                    self.conns[i].retry_at = Some(now + BACKOFF);
                }
            }
            Phase::Idle | Phase::Busy => {
                if c.phase == Phase::Busy
                    && c.written < self.reqs.nth(c.req).len()
                    && flags.contains(EventFlags::OUT)
                {
                    self.write(i, now);
                }
                if flags.intersects(EventFlags::IN | EventFlags::HUP | EventFlags::ERR) {
                    self.read(i);
                }
            }
        }
    }

    fn read(&mut self, i: usize) {
        loop {
            let c = &mut self.conns[i];
            if !matches!(c.phase, Phase::Idle | Phase::Busy) {
                return;
            }
            if !c.make_room() {
                self.stats.errors.parse += 1;
                return self.close(i, Instant::now());
            }
            let Some(mut sock) = c.sock.as_ref() else {
                return;
            };
            let end = c.end;
            match sock.read(&mut c.buf[end..]) {
                Ok(0) => return self.eof(i),
                Ok(n) => {
                    c.end += n;
                    let full = c.end == c.buf.len();
                    if !self.parse(i) || !full {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    if c.phase == Phase::Busy {
                        self.stats.errors.read += 1;
                    }
                    return self.close(i, Instant::now());
                }
            }
        }
    }

    /// Parses what connection `i` has read (no request is pipelined, so at most one
    /// response); false if the connection was closed.
    fn parse(&mut self, i: usize) -> bool {
        let c = &mut self.conns[i];
        if c.start == c.end {
            return true;
        }
        let done = match c.parser.feed(&c.buf[c.start..c.end]) {
            Err(_) => {
                self.stats.errors.parse += 1;
                self.close(i, Instant::now());
                return false;
            }
            Ok((n, None)) => {
                c.start += n;
                return true;
            }
            Ok((n, Some(done))) => {
                c.start += n;
                done
            }
        };
        let now = Instant::now();
        if c.phase != Phase::Busy || (c.start < c.end && !done.close) {
            // An answer nobody asked for.
            self.stats.errors.parse += 1;
            self.close(i, now);
            return false;
        }
        self.stats.complete(
            done.status,
            done.bytes,
            now.saturating_duration_since(c.origin),
            now - self.t0,
        );
        if done.close {
            c.phase = Phase::Down;
            self.close(i, now);
            return false;
        }
        self.ready(i);
        self.conns[i].phase != Phase::Down
    }

    fn eof(&mut self, i: usize) {
        let now = Instant::now();
        let c = &mut self.conns[i];
        if c.phase == Phase::Busy {
            match c.parser.eof() {
                Ok(done) => self.stats.complete(
                    done.status,
                    done.bytes,
                    now.saturating_duration_since(c.origin),
                    now - self.t0,
                ),
                Err(_) => self.stats.errors.read += 1,
            }
        } else if !c.parser.idle() {
            self.stats.errors.parse += 1;
        }
        self.close(i, now);
    }
}
