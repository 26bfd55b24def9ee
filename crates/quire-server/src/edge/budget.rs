//! The budget for uncached work (`[budget]`): one count of slots, shared by every
//! render, origin fetch, search and 404 that a request makes quire do, handed out
//! fairly between clients, so that a crowd of addresses gets at most its share and
//! the site's readers keep theirs.
//!
//! Per-client limits (`[rate_limit]`, `limits.fills_per_client`) bound what one
//! address asks for; they do nothing against two thousand addresses that each stay
//! inside their own. This budget bounds the total, and decides who goes next.
//!
//! Key decisions:
//! - **Only work that is not a hit waits.** A fill's leader takes a slot before it
//!   asks the upstream and gives it back when its fill ends (the requests that join
//!   its fill take none); a pass of a safe method (`GET`, `HEAD`: a bypass, an
//!   uncacheable answer) takes one until the upstream's head is back. Hits, cold
//!   reads, the admin API, background fills (prefills, revalidations nobody waits
//!   for: already paced, one per key) and writes never touch it: a `POST` is the
//!   origin's to take or refuse (a sign-in has its own queue and throttles, a form
//!   its rate limit), and a 503 from a queue would lose a reader's comment. A
//!   refresh-ahead ([`Budget::try_acquire`]) takes a slot only when one is free and
//!   nobody waits: it never queues ahead of a request.
//! - **Fair by network, then by client, then in order.** Waiting requests are kept
//!   per client (an IPv4 address, an IPv6 /64, as the rate limits count them) and
//!   clients per network (an IPv4 /24, an IPv6 /48). A free slot goes to the next
//!   network in turn, to its next client in turn, to that client's oldest request.
//!   So two clients of one network take turns, and a network's many addresses get
//!   one network's share.
//! - **A network that asks now and then goes first** (the sparse flows of FQ-CoDel,
//!   RFC 8290 §4.1). A network with nothing waiting that asks joins the *new*
//!   networks, served before the *old* ones; once served it joins the old, and
//!   leaves them only when its turn comes with nothing waiting. A crowd whose
//!   addresses keep asking (each asks again before its turn comes round) stays old,
//!   however many networks it spans; a reader whose misses are seconds apart finds
//!   its network gone and is new again, so it waits behind other new networks' first
//!   requests, not behind a round of the crowd. The first version took networks in
//!   one round: with a crowd of 2,000 networks a reader's miss waited 1.8 s.
//! - **A queue, never an unbounded one.** A request waits at most
//!   `budget.queue_timeout`; at most `budget.queue_per_client` of one client's wait
//!   (loopback and cluster peers excepted: they carry others' requests) and
//!   `budget.queue_max` in all. Past any of these it is answered `503` with
//!   `Retry-After`, at once, and counted by reason.
//! - **Cancel-safe.** A request whose client leaves while it waits leaves the queue
//!   (its waiter is removed under the lock); a slot granted to a request that left at
//!   that moment is given on, never lost. Every slot is a [`Slot`] that gives itself
//!   back when dropped, whatever path the work took.
//! - **Bounded in rate too, while the cores are busy** ([`pace`]): slots bound the
//!   work in progress, not how much of it a second; when the process uses more of
//!   its cores than `budget.cpu_busy_max` and requests wait, slots are handed out at
//!   a pace, so a crowd of cheap misses cannot fill the cores the hits need.
//! - **Sized to the machine.** `budget.slots = 0` (the default) means twice the
//!   cores when the upstream works on this machine (`quire serve` renders: more
//!   would only queue for the cores), and sixteen per core, at least 32, for a
//!   proxy's origin, which mostly waits on the network.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

pub(crate) use crate::config::BudgetSection;
use crate::edge::conns::ClientKey;
use pace::Pace;

mod pace;

/// Why a request got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// It waited `budget.queue_timeout` and no slot came.
    Deadline,
    /// Its client already had `budget.queue_per_client` requests waiting.
    ClientQueueFull,
    /// `budget.queue_max` requests were waiting.
    QueueFull,
}

impl Refused {
    /// The reason as metrics and logs name it.
    pub fn label(self) -> &'static str {
        match self {
            Refused::Deadline => "deadline",
            Refused::ClientQueueFull => "client_queue_full",
            Refused::QueueFull => "queue_full",
        }
    }

    /// The seconds a refused client is told to wait (`Retry-After`).
    pub fn retry_after(self) -> u64 {
        match self {
            Refused::Deadline | Refused::QueueFull => 2,
            Refused::ClientQueueFull => 1,
        }
    }
}

/// The network a client is counted in: its IPv4 /24 or IPv6 /48.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Network {
    V4([u8; 3]),
    V6([u8; 6]),
}

impl Network {
    fn of(client: ClientKey) -> Network {
        match client {
            ClientKey::V4(o) => Network::V4([o[0], o[1], o[2]]),
            ClientKey::V6(o) => Network::V6([o[0], o[1], o[2], o[3], o[4], o[5]]),
        }
    }
}

/// One waiting request: the channel its slot arrives on.
#[derive(Debug)]
struct Waiter {
    id: u64,
    grant: oneshot::Sender<()>,
}

/// A network known to the budget: one with requests waiting, in a turn list, or
/// holding slots.
#[derive(Debug)]
struct Net {
    /// Its clients with requests waiting, in turn order.
    turn: VecDeque<ClientKey>,
    queues: HashMap<ClientKey, VecDeque<Waiter>>,
    /// Slots its requests hold now.
    held: usize,
    /// Since when it has had nothing waiting and no slot held.
    idle_since: Instant,
    /// Its entry in a turn list is the one with this number (older ones are
    /// skipped: it moved); meaningful while `listed`.
    gen: u64,
    /// It has a live entry in `new` or `old`.
    listed: bool,
}

impl Net {
    fn new(now: Instant, sparse_idle: Duration) -> Net {
        Net {
            turn: VecDeque::new(),
            queues: HashMap::new(),
            held: 0,
            // Never seen: as idle as can be.
            idle_since: now.checked_sub(sparse_idle).unwrap_or(now),
            gen: 0,
            listed: false,
        }
    }

    fn idle(&self) -> bool {
        self.queues.is_empty() && self.held == 0
    }
}

/// Networks kept with nothing waiting, at least half of the bound past which they
/// are swept out at once (see [`State::push`]).
const NETS_KEPT_MIN: usize = 16_384;

/// How long a network must have had nothing waiting and no slot held for its next
/// request to count as new (see the module documentation): above a round trip over
/// the internet, so a crowd that asks again as soon as it is answered stays old,
/// well below the seconds between a reader's page views.
pub(crate) const SPARSE_IDLE: Duration = Duration::from_millis(250);

/// What the lock covers: the slots in use and who waits for one.
#[derive(Debug)]
struct State {
    in_use: usize,
    /// The rate slots are handed out at while the process is busy (`pace`).
    pace: Pace,
    limit: usize,
    waiting: usize,
    next_id: u64,
    /// Networks new to the queue, served first, in order (with their `gen`).
    new: VecDeque<(Network, u64)>,
    /// Networks served lately, in turn order; some may have nothing waiting now:
    /// they leave when their turn finds them so.
    old: VecDeque<(Network, u64)>,
    nets: HashMap<Network, Net>,
    sparse_idle: Duration,
}

impl State {
    fn new(limit: usize, sparse_idle: Duration) -> State {
        State {
            in_use: 0,
            pace: Pace::new(Instant::now()),
            limit: limit.max(1),
            waiting: 0,
            next_id: 0,
            new: VecDeque::new(),
            old: VecDeque::new(),
            nets: HashMap::new(),
            sparse_idle,
        }
    }

    /// `net`'s entry, made if it has none.
    fn net(&mut self, key: Network, now: Instant) -> &mut Net {
        let idle = self.sparse_idle;
        self.nets.entry(key).or_insert_with(|| Net::new(now, idle))
    }

    /// Queues a waiter for `client`; its id. `kept_max` bounds the networks kept
    /// with nothing waiting.
    fn push(&mut self, client: ClientKey, grant: oneshot::Sender<()>, kept_max: usize) -> u64 {
        let now = Instant::now();
        self.next_id += 1;
        let id = self.next_id;
        let net_key = Network::of(client);
        if !self.nets.contains_key(&net_key) && self.nets.len() >= kept_max {
            self.sweep();
        }
        let sparse_idle = self.sparse_idle;
        let net = self.net(net_key, now);
        // Unlisted, or idle long enough: new. (A stale entry left in `old` is
        // skipped by its number.)
        let is_new = !net.listed || (net.idle() && now - net.idle_since >= sparse_idle);
        if is_new {
            net.gen += 1;
            net.listed = true;
        }
        let gen = net.gen;
        let queue = net.queues.entry(client).or_insert_with(|| {
            net.turn.push_back(client);
            VecDeque::new()
        });
        queue.push_back(Waiter { id, grant });
        if is_new {
            self.new.push_back((net_key, gen));
        }
        self.waiting += 1;
        id
    }

    /// Requests `client` has waiting.
    fn waiting_of(&self, client: ClientKey) -> usize {
        self.nets
            .get(&Network::of(client))
            .and_then(|n| n.queues.get(&client))
            .map_or(0, VecDeque::len)
    }

    /// Drops every network with nothing waiting from the turn lists (and from the
    /// map unless it holds slots): a pass over them all, done when the networks
    /// kept reach their bound.
    fn sweep(&mut self) {
        self.nets.retain(|_, net| {
            if net.queues.is_empty() {
                net.listed = false;
            }
            !net.idle() || net.listed
        });
        let nets = &self.nets;
        let live =
            |(n, gen): &(Network, u64)| nets.get(n).is_some_and(|x| x.listed && x.gen == *gen);
        self.new.retain(live);
        self.old.retain(live);
    }

    /// Takes waiter `id` of `client` out of the queue; `false` when it is not there
    /// (it was granted a slot). Its network stays in its list until its turn.
    fn remove(&mut self, client: ClientKey, id: u64) -> bool {
        let net_key = Network::of(client);
        let Some(net) = self.nets.get_mut(&net_key) else {
            return false;
        };
        let Some(queue) = net.queues.get_mut(&client) else {
            return false;
        };
        let Some(at) = queue.iter().position(|w| w.id == id) else {
            return false;
        };
        queue.remove(at);
        self.waiting -= 1;
        if queue.is_empty() {
            net.queues.remove(&client);
            net.turn.retain(|c| *c != client);
            if net.idle() {
                net.idle_since = Instant::now();
            }
        }
        true
    }

    /// The next waiter in turn (new networks, then old ones; in a network, its next
    /// client; of a client, the oldest), out of the queue, with its network, which
    /// now holds the slot.
    fn next(&mut self) -> Option<Waiter> {
        loop {
            let ((net_key, gen), was_new) = match self.new.pop_front() {
                Some(n) => (n, true),
                None => (self.old.pop_front()?, false),
            };
            let Some(net) = self
                .nets
                .get_mut(&net_key)
                .filter(|n| n.listed && n.gen == gen)
            else {
                continue; // a stale entry: the network moved, or left
            };
            let Some(client) = net.turn.pop_front() else {
                // Nothing waiting: a new network joins the old (so one that asks
                // again at once is not new again); an old one leaves.
                if was_new {
                    self.old.push_back((net_key, gen));
                } else {
                    net.listed = false;
                    if net.idle() {
                        self.nets.remove(&net_key);
                    }
                }
                continue;
            };
            let Some(w) = net.queues.get_mut(&client).and_then(VecDeque::pop_front) else {
                debug_assert!(false, "a client in turn has a request waiting");
                self.old.push_back((net_key, gen));
                continue;
            };
            self.waiting -= 1;
            if net.queues[&client].is_empty() {
                net.queues.remove(&client);
            } else {
                net.turn.push_back(client);
            }
            net.held += 1;
            self.old.push_back((net_key, gen));
            return Some(w);
        }
    }

    /// A slot `net` held is given back.
    fn release(&mut self, net: Option<Network>) {
        debug_assert!(self.in_use > 0, "a slot given back that was never taken");
        self.in_use = self.in_use.saturating_sub(1);
        let Some(key) = net else { return };
        let Some(n) = self.nets.get_mut(&key) else {
            debug_assert!(false, "a network holding a slot is known");
            return;
        };
        n.held = n.held.saturating_sub(1);
        if n.idle() {
            n.idle_since = Instant::now();
            if !n.listed {
                self.nets.remove(&key);
            }
        }
    }

    /// Hands free slots to waiters in turn while both last.
    fn grant(&mut self) {
        let now = Instant::now();
        while self.in_use < self.limit && self.waiting > 0 && self.pace.take(now) {
            let Some(w) = self.next() else { return };
            // A waiter whose request left has removed itself under this lock, so
            // the send fails only if the receiver is dropping right now; its drop
            // then finds the slot granted and gives it back (for its network).
            self.in_use += 1;
            let _ = w.grant.send(());
        }
    }
}

/// Counters of the budget, for `/_quire/metrics`.
#[derive(Debug, Default)]
struct Counters {
    at_once: AtomicU64,
    after_wait: AtomicU64,
    wait_micros: AtomicU64,
    refused: [AtomicU64; 3],
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    counters: Counters,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn release(&self, net: Option<Network>) {
        let mut s = self.lock();
        s.release(net);
        s.grant();
    }
}

/// The budget for uncached work: see the module documentation.
#[derive(Debug, Clone)]
pub struct Budget {
    inner: Arc<Inner>,
}

/// One slot of the budget; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    inner: Arc<Inner>,
    /// The network it is held for (`None`: work of nobody's, see
    /// [`Budget::try_acquire`]).
    net: Option<Network>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.inner.release(self.net);
    }
}

/// A request's place in the queue: removed if it leaves before its slot comes, and
/// a slot that came as it left is given back.
struct Place<'a> {
    inner: &'a Inner,
    client: ClientKey,
    id: u64,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return; // the slot was taken as a `Slot`
        };
        let mut s = self.inner.lock();
        if !s.remove(self.client, self.id) && rx.try_recv().is_ok() {
            // Granted as it left: the slot goes on to the next in turn.
            s.release(Some(Network::of(self.client)));
            s.grant();
        }
    }
}

impl Budget {
    /// A budget of `slots` (at least one).
    pub fn new(slots: usize) -> Budget {
        Budget::with_sparse_idle(slots, SPARSE_IDLE)
    }

    /// [`Budget::new`] with networks idle for `sparse_idle` counted new (tests).
    pub(crate) fn with_sparse_idle(slots: usize, sparse_idle: Duration) -> Budget {
        let state = State::new(slots, sparse_idle);
        Budget {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                counters: Counters::default(),
            }),
        }
    }

    /// Sets the number of slots (a reload); waiters get the new ones at once.
    pub fn resize(&self, slots: usize) {
        let mut s = self.inner.lock();
        s.limit = slots.max(1);
        s.grant();
    }

    /// The slots there are.
    pub fn slots(&self) -> usize {
        self.inner.lock().limit
    }

    /// A slot for `client`'s uncached work: at once when one is free and nobody
    /// waits, else in turn; refused past the limits of `cfg`. A client that
    /// `carries_others` (a cluster peer asking for its readers) or is on loopback (a
    /// local TLS terminator) is not held to `queue_per_client`.
    pub async fn acquire(
        &self,
        client: IpAddr,
        carries_others: bool,
        cfg: &BudgetSection,
    ) -> Result<Slot, Refused> {
        let key = ClientKey::of(client);
        let start = Instant::now();
        let mut place = {
            let mut s = self.inner.lock();
            if s.waiting == 0 && s.in_use < s.limit && s.pace.take(start) {
                s.in_use += 1;
                s.net(Network::of(key), start).held += 1;
                self.inner.counters.at_once.fetch_add(1, Ordering::Relaxed);
                return Ok(self.slot(Some(Network::of(key))));
            }
            if s.waiting >= cfg.queue_max {
                return Err(self.refuse(Refused::QueueFull));
            }
            let capped = !(carries_others || client.is_loopback());
            if capped && s.waiting_of(key) >= cfg.queue_per_client {
                return Err(self.refuse(Refused::ClientQueueFull));
            }
            let (tx, rx) = oneshot::channel();
            // Twice what can wait: a sweep leaves room for as many again.
            let id = s.push(key, tx, 2 * NETS_KEPT_MIN.max(cfg.queue_max));
            // A slot freed between the check above and now is granted here.
            s.grant();
            Place {
                inner: &self.inner,
                client: key,
                id,
                rx: Some(rx),
            }
        };
        let rx = place.rx.as_mut().expect("the receiver is taken only below");
        match tokio::time::timeout(cfg.queue_timeout.0, rx).await {
            Ok(Ok(())) => {
                place.rx = None;
                let c = &self.inner.counters;
                c.after_wait.fetch_add(1, Ordering::Relaxed);
                c.wait_micros
                    .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
                Ok(self.slot(Some(Network::of(key))))
            }
            // The sender is dropped only with the budget itself.
            Ok(Err(_)) | Err(_) => Err(self.refuse(Refused::Deadline)),
        }
    }

    /// A slot only if one is free and nobody waits for one (work nobody waits for,
    /// such as a refresh-ahead, never queues ahead of a request).
    pub fn try_acquire(&self) -> Option<Slot> {
        let mut s = self.inner.lock();
        if s.waiting > 0 || s.in_use >= s.limit || !s.pace.take(Instant::now()) {
            return None;
        }
        s.in_use += 1;
        Some(self.slot(None))
    }

    /// Whether slots are handed out at a rate and requests wait for them: the
    /// controller then grants every [`pace::GRANT_EVERY`].
    pub(crate) fn paced_with_waiters(&self) -> bool {
        let s = self.inner.lock();
        s.pace.paced() && s.waiting > 0
    }

    /// Hands out the slots free and the tokens accrued.
    pub(crate) fn grant_paced(&self) {
        self.inner.lock().grant();
    }

    /// One tick of the pace's controller (see [`pace`]): the process used `share` of
    /// its cores over the last `dt`, and may use `max` before uncached work is paced.
    pub(crate) fn adjust_pace(&self, share: f64, max: f64, dt: Duration) {
        let mut s = self.inner.lock();
        let (waiting, limit) = (s.waiting > 0, s.limit);
        s.pace.adjust(share, max, waiting, dt, limit);
        s.grant();
    }

    /// Paces this budget by the process's share of its cores, until `stop` (see
    /// [`pace`]); `max` reads `budget.cpu_busy_max` as configured now.
    pub async fn pace(&self, max: impl Fn() -> f64, stop: impl std::future::Future<Output = ()>) {
        let mut busy = pace::Busy::here();
        let mut next_tick = Instant::now() + pace::TICK;
        tokio::pin!(stop);
        loop {
            let fine = self.paced_with_waiters();
            let nap = if fine {
                pace::GRANT_EVERY
            } else {
                next_tick.saturating_duration_since(Instant::now())
            };
            tokio::select! {
                () = &mut stop => break,
                () = tokio::time::sleep(nap) => {}
            }
            if fine {
                self.grant_paced();
            }
            if Instant::now() >= next_tick {
                let (share, dt) = busy.sample();
                self.adjust_pace(share, max(), dt);
                next_tick = Instant::now() + pace::TICK;
            }
        }
        // Nobody sets the pace any more: lifted, and whoever waits is granted.
        self.adjust_pace(0.0, 1.0, pace::TICK);
    }

    fn slot(&self, net: Option<Network>) -> Slot {
        Slot {
            inner: self.inner.clone(),
            net,
        }
    }

    fn refuse(&self, why: Refused) -> Refused {
        let i = match why {
            Refused::Deadline => 0,
            Refused::ClientQueueFull => 1,
            Refused::QueueFull => 2,
        };
        self.inner.counters.refused[i].fetch_add(1, Ordering::Relaxed);
        why
    }

    /// The slots the networks hold, summed, and the networks known (tests of the
    /// bookkeeping).
    #[cfg(test)]
    fn nets_held_and_known(&self) -> (usize, usize) {
        let s = self.inner.lock();
        (s.nets.values().map(|n| n.held).sum(), s.nets.len())
    }

    /// The slots in use and the requests waiting now.
    pub fn load(&self) -> (usize, usize) {
        let s = self.inner.lock();
        (s.in_use, s.waiting)
    }

    /// The budget's gauges and counters now.
    pub fn snapshot(&self) -> Snapshot {
        let (limit, in_use, waiting, (pace, busy)) = {
            let s = self.inner.lock();
            (s.limit, s.in_use, s.waiting, s.pace.gauges())
        };
        let c = &self.inner.counters;
        Snapshot {
            limit,
            in_use,
            waiting,
            at_once: c.at_once.load(Ordering::Relaxed),
            after_wait: c.after_wait.load(Ordering::Relaxed),
            wait_seconds: c.wait_micros.load(Ordering::Relaxed) as f64 / 1e6,
            refused: std::array::from_fn(|i| c.refused[i].load(Ordering::Relaxed)),
            pace,
            busy,
        }
    }
}

/// A budget's gauges and counters at one moment ([`Budget::snapshot`]).
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    limit: usize,
    in_use: usize,
    waiting: usize,
    at_once: u64,
    after_wait: u64,
    wait_seconds: f64,
    refused: [u64; 3],
    /// Slots a second it hands out now; 0 when not paced.
    pace: f64,
    /// The process's share of its cores last measured, for the budget paced by it.
    busy: Option<f64>,
}

/// Budgets' metrics in Prometheus text format, each family's lines together, one
/// per budget labelled with its `class` (`everyone` for the budget every client
/// shares, a crawler class's name for its own).
pub(crate) fn write_metrics(out: &mut String, budgets: &[(&str, Snapshot)]) {
    use std::fmt::Write as _;
    let mut family =
        |name: &str, kind: &str, text: &str, lines: &dyn Fn(&Snapshot) -> Vec<(String, String)>| {
            let _ = writeln!(out, "# HELP {name} {text}\n# TYPE {name} {kind}");
            for (class, snap) in budgets {
                for (labels, value) in lines(snap) {
                    let _ = writeln!(out, "{name}{{{labels}class=\"{class}\"}} {value}");
                }
            }
        };
    let one = |v: String| vec![(String::new(), v)];
    family(
        "quire_budget_slots",
        "gauge",
        "Slots of the budget for uncached work (budget.slots; a crawler class's own).",
        &|s| one(s.limit.to_string()),
    );
    family(
        "quire_budget_in_use",
        "gauge",
        "Slots of the budget held now (renders, fills, passes).",
        &|s| one(s.in_use.to_string()),
    );
    family(
        "quire_budget_waiting",
        "gauge",
        "Requests waiting for a slot of the budget now.",
        &|s| one(s.waiting.to_string()),
    );
    family(
        "quire_budget_admitted_total",
        "counter",
        "Uncached requests given a slot: at once, or after waiting their turn.",
        &|s| {
            vec![
                ("waited=\"no\",".into(), s.at_once.to_string()),
                ("waited=\"yes\",".into(), s.after_wait.to_string()),
            ]
        },
    );
    family(
        "quire_budget_wait_seconds_total",
        "counter",
        "Time requests given a slot after waiting spent waiting.",
        &|s| one(format!("{:.6}", s.wait_seconds)),
    );
    family(
        "quire_budget_pace_per_second",
        "gauge",
        "Slots a second the budget hands out while the process uses more of its cores than budget.cpu_busy_max and requests wait; 0 when not paced.",
        &|s| one(format!("{:.1}", s.pace)),
    );
    family(
        "quire_budget_cpu_busy",
        "gauge",
        "Share of its cores the process used over the last 25 ms, as the budget's pace reads it.",
        &|s| s.busy.map(|b| one(format!("{b:.3}"))).unwrap_or_default(),
    );
    family(
        "quire_budget_refused_total",
        "counter",
        "Uncached requests answered 503 for want of a slot: past budget.queue_timeout (deadline), their client's queue full (budget.queue_per_client), or every queue (budget.queue_max).",
        &|s| {
            [Refused::Deadline, Refused::ClientQueueFull, Refused::QueueFull]
                .iter()
                .zip(s.refused)
                .map(|(r, n)| (format!("reason=\"{}\",", r.label()), n.to_string()))
                .collect()
        },
    );
}

/// The slots `budget.slots = 0` means: twice the cores for work done on this
/// machine (`local`), sixteen per core (at least 32) for a remote origin's.
pub(crate) fn auto_slots(local: bool) -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    if local {
        (2 * cores).max(2)
    } else {
        (16 * cores).max(32)
    }
}

#[cfg(test)]
mod tests;
