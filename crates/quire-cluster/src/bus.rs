//! The invalidation log on Redis Streams: appending (`XADD` with `MAXLEN ~`),
//! waiting for every node (`wait=all`), heartbeats, the queue of unsafe methods'
//! invalidations that wait for a bus that is down, and what this node knows of its
//! own position (for peer fill and for being cut off).
//!
//! Two hashes sit beside the stream: `<stream>:applied` (node → the incarnation
//! and last entry it applied) and `<stream>:alive` (node → its last heartbeat,
//! every second). Key decisions:
//! - **Positions and liveness come from Redis, never a node's clock.** A
//!   heartbeat is the Redis server's `TIME`, written by a script, and `wait=all`
//!   judges it against `TIME` read in the same round trip, so a node whose clock
//!   is off is live exactly when it beats. Positions are the ids Redis assigned.
//! - **The log has an incarnation** (`<stream>:incarnation`, random). Every
//!   append and every read checks it in one script ([`INCARNATION`]): a stream
//!   that is missing (Redis restarted empty, `FLUSHALL`, `DEL`) or whose last id is
//!   below a position a node holds in it (Redis came back from an older snapshot)
//!   gets a new incarnation. Ids of two incarnations never compare: a node that
//!   sees a new one has a gap (it revalidates everything and reads the table of
//!   sign-outs again, see `reader`), acks of an older one do not count for
//!   `wait=all`, and peer answers of another one are refused.
//! - **`wait=all` acknowledges only nodes that confirmed.** It waits for the live
//!   nodes (heartbeat under [`LIVE_MS`] old); a node whose heartbeat is older (up
//!   to [`FORGET_MS`]), and a configured peer never heard from, is named
//!   `unreachable` and `all_applied` is then false. Heartbeats seen are
//!   remembered, so a hash Redis lost does not make `wait=all` forget a node; a
//!   node that leaves writes a heartbeat of 0, which forgets it. Such
//!   a node revalidates everything it serves on its own once it has not read the
//!   log for [`CUT_OFF_MS`] (see `reader::watch`), which is less than [`LIVE_MS`]
//!   minus a heartbeat, so it does so before anyone stops waiting for it.
//! - **An entry this node appends is applied by the purge that appended it, never
//!   twice**: the reader checks an entry of this node under the same lock the
//!   append holds until it has recorded the id, so the purge's answer counts what
//!   it removed.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::RngCore;

use quire_server::bus::{
    Bus, BusError, BusErrorKind, Invalidation, NodeAck, PublishFuture, Receipt, WaitFuture,
};
use redis::aio::ConnectionManager;

use crate::stream_id::StreamId;
use crate::wire::{self, Op};

/// A heartbeat older than this marks a node gone (for `wait=all`).
pub const LIVE_MS: u64 = 5_000;

/// A node that has not read the log for this long counts itself cut off: it
/// revalidates everything it serves, takes no peer answers and honours no session
/// cookie until it has caught up. Under [`LIVE_MS`] minus a heartbeat and a
/// round trip, so it starts before `wait=all` stops waiting for it.
pub const CUT_OFF_MS: u64 = 2_500;

/// A heartbeat older than this is forgotten: the node is no longer named by
/// `wait=all` (it stopped without leaving, an hour ago).
pub const FORGET_MS: u64 = 3_600_000;

/// The script every append and every read runs first: the log's incarnation,
/// made new when the stream is missing or its last id is below the caller's
/// position in the incarnation the caller knows; then the stream's last id.
/// KEYS: the stream, the incarnation key. ARGV: a fresh incarnation, the caller's
/// position (ms, seq) and its incarnation (all as text).
pub(crate) const INCARNATION: &str = r"
local function below(id, ms, seq)
  local dash = string.find(id, '-', 1, true)
  local ims = tonumber(string.sub(id, 1, dash - 1))
  local iseq = tonumber(string.sub(id, dash + 1))
  return ims < ms or (ims == ms and iseq < seq)
end
local function incarnation()
  local last = '0-0'
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('XGROUP', 'CREATE', KEYS[1], 'quire', '$', 'MKSTREAM')
    redis.call('SET', KEYS[2], ARGV[1])
  else
    local info = redis.call('XINFO', 'STREAM', KEYS[1])
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then last = info[i + 1] end
    end
  end
  local inc = redis.call('GET', KEYS[2])
  if (not inc) or (inc == ARGV[4] and below(last, tonumber(ARGV[2]), tonumber(ARGV[3]))) then
    inc = ARGV[1]
    redis.call('SET', KEYS[2], inc)
  end
  return inc, last
end
";

/// [`INCARNATION`], answering it and the last id.
const CHECK: &str = r"
local inc, last = incarnation()
return {inc, last}
";

/// [`INCARNATION`], then `XADD` (ARGV from the 5th: `stream_max`, then the
/// entry's fields); answers the incarnation and the id.
const APPEND: &str = r"
local inc = incarnation()
local args = {KEYS[1], 'MAXLEN', '~', ARGV[5], '*'}
for i = 6, #ARGV do args[#args + 1] = ARGV[i] end
local id = redis.call('XADD', unpack(args))
return {inc, id}
";

/// A heartbeat at the Redis server's time; answers the whole alive hash. KEYS:
/// the alive hash. ARGV: the node.
const BEAT: &str = r"
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000)))
return redis.call('HGETALL', KEYS[1])
";

/// A position in the log: an incarnation and an entry id in it, as peers' answers
/// and the `applied` hash carry it (`<incarnation, 16 hex digits>/<id>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    /// The log's incarnation (0: unknown).
    pub incarnation: u64,
    /// The entry.
    pub id: StreamId,
}

impl Stamp {
    /// Parses the text form.
    pub fn parse(s: &str) -> Option<Stamp> {
        let (inc, id) = s.split_once('/')?;
        Some(Stamp {
            incarnation: u64::from_str_radix(inc, 16).ok()?,
            id: StreamId::parse(id)?,
        })
    }

    /// Whether every entry up to `floor` is included: the same incarnation (a
    /// known one), and not before it.
    pub fn covers(&self, floor: &Stamp) -> bool {
        self.incarnation != 0 && self.incarnation == floor.incarnation && self.id >= floor.id
    }
}

impl std::fmt::Display for Stamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}/{}", self.incarnation, self.id)
    }
}

/// A fresh random incarnation (never 0), as the scripts store it.
pub(crate) fn fresh_incarnation() -> String {
    format!("{:016x}", rand::rng().next_u64() | 1)
}

/// Where this node is: what its reader applied, and the newest entry it appended
/// and applied itself.
#[derive(Debug, Default)]
pub(crate) struct Where {
    pub(crate) applied: Stamp,
    own: Option<Stamp>,
}

/// Whether this node reads the log (see [`CUT_OFF_MS`]).
#[derive(Debug)]
pub(crate) struct Liveness {
    base: Instant,
    /// Milliseconds after `base` of the last read that reached the head of the log.
    last_ok_ms: AtomicU64,
    /// Set by the watcher while cut off.
    pub(crate) cut_off: AtomicBool,
    /// Set by the watcher when the node is back: the reader reads the sign-out
    /// table again.
    pub(crate) readopt: AtomicBool,
}

impl Liveness {
    fn new() -> Liveness {
        Liveness {
            base: Instant::now(),
            last_ok_ms: AtomicU64::new(0),
            cut_off: AtomicBool::new(false),
            readopt: AtomicBool::new(false),
        }
    }

    /// The log was read up to its head by a request sent at `sent`.
    pub(crate) fn ok(&self, sent: Instant) {
        let ms = u64::try_from(sent.saturating_duration_since(self.base).as_millis())
            .unwrap_or(u64::MAX);
        self.last_ok_ms.fetch_max(ms, Ordering::AcqRel);
    }

    /// How long since the log was last read up to its head.
    pub(crate) fn since_ok(&self) -> Duration {
        let at = self.base + Duration::from_millis(self.last_ok_ms.load(Ordering::Acquire));
        Instant::now().saturating_duration_since(at)
    }
}

/// Invalidations of unsafe methods kept while the bus is down; past it they are
/// dropped and replaced by one `all` entry (every node revalidates everything).
pub const PENDING_MAX: usize = 10_000;

/// The bus of one node.
#[derive(Debug)]
pub struct RedisBus {
    pub(crate) node: String,
    pub(crate) stream: String,
    pub(crate) stream_max: u64,
    pub(crate) conn: ConnectionManager,
    /// The addresses of the cluster's peers (whose peer requests are honoured).
    peers: HashSet<IpAddr>,
    /// The configured peers' names: `wait=all` names each, heard from or not.
    members: Vec<String>,
    /// Entries this node appended and applied itself: its reader skips them.
    own: Mutex<HashSet<StreamId>>,
    /// Held by a purge from before its append until its id is in `own`, and by the
    /// reader while it checks an entry of this node.
    pub(crate) appending: tokio::sync::Mutex<()>,
    pub(crate) place: Mutex<Where>,
    pub(crate) live: Liveness,
    pending: Mutex<VecDeque<Op>>,
    overflowed: AtomicBool,
    /// Set when the node leaves: no more heartbeats.
    leaving: AtomicBool,
    /// The latest reading of this node's clock (Unix ms), and the least instant a
    /// revalidation of everything uses (see `reader`).
    pub(crate) clock_seen_ms: AtomicU64,
    pub(crate) clock_floor_ms: AtomicU64,
    /// Every node's last heartbeat seen in the alive hash (see `remember`).
    known: Mutex<HashMap<String, u64>>,
    wake: tokio::sync::Notify,
    pub(crate) stats: Stats,
}

/// Counters for `/_quire/metrics`.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) up: AtomicBool,
    pub(crate) appended: AtomicU64,
    pub(crate) append_failed: AtomicU64,
    pub(crate) applied: AtomicU64,
    pub(crate) revalidate_all: AtomicU64,
    pub(crate) lag_ms: AtomicU64,
    /// Entries the last read of the log returned (`reader::BATCH`: at least that
    /// many behind).
    pub(crate) last_read: AtomicU64,
    pub(crate) pending_dropped: AtomicU64,
    pub(crate) replays: AtomicU64,
    pub(crate) sign_outs: AtomicU64,
    pub(crate) views_pushed: AtomicU64,
    pub(crate) views_dropped: AtomicU64,
    pub(crate) cut_offs: AtomicU64,
    pub(crate) peer_refused: AtomicU64,
}

/// Unix milliseconds now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl RedisBus {
    /// A bus for `node` on `conn` (which connects lazily: a Redis that is down
    /// at start is no error, purges then answer 503 until it is back).
    pub(crate) fn new(
        node: &str,
        stream: &str,
        stream_max: u64,
        conn: ConnectionManager,
        peers: HashSet<IpAddr>,
        members: Vec<String>,
    ) -> RedisBus {
        RedisBus {
            node: node.into(),
            stream: stream.into(),
            stream_max,
            conn,
            peers,
            members,
            own: Mutex::new(HashSet::new()),
            appending: tokio::sync::Mutex::new(()),
            place: Mutex::new(Where::default()),
            live: Liveness::new(),
            pending: Mutex::new(VecDeque::new()),
            overflowed: AtomicBool::new(false),
            leaving: AtomicBool::new(false),
            known: Mutex::new(HashMap::new()),
            clock_seen_ms: AtomicU64::new(0),
            clock_floor_ms: AtomicU64::new(0),
            wake: tokio::sync::Notify::new(),
            stats: Stats::default(),
        }
    }

    /// Entries applied here from the log so far.
    pub fn stats_applied(&self) -> u64 {
        self.stats.applied.load(Ordering::Relaxed)
    }

    /// Times everything held here was made stale.
    pub fn stats_revalidated_all(&self) -> u64 {
        self.stats.revalidate_all.load(Ordering::Relaxed)
    }

    pub(crate) fn applied_key(&self) -> String {
        format!("{}:applied", self.stream)
    }

    fn alive_key(&self) -> String {
        format!("{}:alive", self.stream)
    }

    fn incarnation_key(&self) -> String {
        format!("{}:incarnation", self.stream)
    }

    /// `script` (which starts with [`INCARNATION`]) for this stream at the
    /// position `at`.
    fn scripted(&self, script: &str, at: Stamp) -> redis::Cmd {
        let mut c = redis::cmd("EVAL");
        c.arg(format!("{INCARNATION}{script}"))
            .arg(2)
            .arg(&self.stream)
            .arg(self.incarnation_key())
            .arg(fresh_incarnation())
            .arg(at.id.ms)
            .arg(at.id.seq)
            .arg(format!("{:016x}", at.incarnation));
        c
    }

    /// The log's incarnation and its last id, checked against the position `at`
    /// (see [`INCARNATION`]).
    pub(crate) async fn incarnation(
        &self,
        conn: &mut ConnectionManager,
        at: Stamp,
    ) -> redis::RedisResult<(u64, StreamId)> {
        let (inc, last): (String, String) = self.scripted(CHECK, at).query_async(conn).await?;
        parse_answer(&inc, &last)
    }

    /// Appends `op`; its incarnation and id.
    pub(crate) async fn append(&self, op: &Op) -> redis::RedisResult<Stamp> {
        let at = self.place.lock().unwrap_or_else(|p| p.into_inner()).applied;
        let mut c = self.scripted(APPEND, at);
        c.arg(self.stream_max);
        for (k, v) in wire::encode(&self.node, op) {
            c.arg(k).arg(v);
        }
        let res: redis::RedisResult<(String, String)> = c.query_async(&mut self.conn.clone()).await;
        match res.and_then(|(inc, id)| parse_answer(&inc, &id)) {
            Ok((incarnation, id)) => {
                self.stats.appended.fetch_add(1, Ordering::Relaxed);
                self.stats.up.store(true, Ordering::Relaxed);
                Ok(Stamp { incarnation, id })
            }
            Err(e) => {
                self.stats.append_failed.fetch_add(1, Ordering::Relaxed);
                self.stats.up.store(false, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// The reader applied everything up to `at`.
    pub(crate) fn applied_up_to(&self, at: Stamp) {
        let mut w = self.place.lock().unwrap_or_else(|p| p.into_inner());
        w.applied = at;
        if w.own
            .is_some_and(|o| o.incarnation != at.incarnation || o.id <= at.id)
        {
            w.own = None;
        }
    }

    /// Whether `id` was appended and applied here (and forgets it: the reader
    /// passes each entry once).
    pub(crate) fn take_own(&self, id: StreamId) -> bool {
        self.own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
    }

    /// Records that this node applied everything up to `at`.
    pub(crate) async fn ack(&self, at: Stamp) -> redis::RedisResult<()> {
        redis::cmd("HSET")
            .arg(self.applied_key())
            .arg(&self.node)
            .arg(at.to_string())
            .query_async(&mut self.conn.clone())
            .await
    }

    /// Leaves the live set at once, so `wait=all` stops waiting for this node
    /// (instead of until its last heartbeat is [`LIVE_MS`] old).
    pub(crate) async fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
        // A heartbeat of 0: "left", so a node that remembers this one forgets it
        // (a deleted field would look like a hash Redis lost).
        let _: redis::RedisResult<()> = redis::cmd("HSET")
            .arg(self.alive_key())
            .arg(&self.node)
            .arg(0)
            .query_async(&mut self.conn.clone())
            .await;
    }

    /// Merges the alive hash as read now into the heartbeats this node remembers
    /// (the later of the two; a heartbeat of 0 forgets the node): a hash Redis lost
    /// (`FLUSHALL`, restarted empty) does not make `wait=all` forget who it has to
    /// wait for. The merged heartbeats.
    fn remember(&self, alive: HashMap<String, u64>) -> HashMap<String, u64> {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        for (node, at) in alive {
            if at == 0 {
                known.remove(&node);
            } else {
                let t = known.entry(node).or_insert(0);
                *t = (*t).max(at);
            }
        }
        known.clone()
    }

    /// One heartbeat at the Redis server's time (none once the node is leaving).
    pub(crate) async fn beat(&self) -> redis::RedisResult<()> {
        if self.leaving.load(Ordering::Acquire) {
            return Ok(());
        }
        let alive: HashMap<String, u64> = redis::cmd("EVAL")
            .arg(BEAT)
            .arg(1)
            .arg(self.alive_key())
            .arg(&self.node)
            .query_async(&mut self.conn.clone())
            .await?;
        self.remember(alive);
        Ok(())
    }

    /// Appends what [`Bus::publish_later`] queued, until the queue is empty or the
    /// bus fails; an overflowed queue becomes one `all` entry first.
    pub(crate) async fn flush_pending(&self) {
        if self.overflowed.load(Ordering::Acquire) {
            if self.append(&Op::All).await.is_err() {
                return;
            }
            self.overflowed.store(false, Ordering::Release);
        }
        loop {
            let next = self
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .front()
                .cloned();
            let Some(op) = next else {
                return;
            };
            if self.append(&op).await.is_err() {
                return;
            }
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front();
        }
    }

    /// Waits until something is queued, or `every` passes.
    pub(crate) async fn wait_for_pending(&self, every: Duration) {
        let _ = tokio::time::timeout(every, self.wake.notified()).await;
    }

    /// Each node the alive hash names (heartbeat under [`FORGET_MS`] old, by the
    /// Redis server's clock), this one included: whether it applied `entry`, and
    /// whether it is live.
    async fn acks(&self, entry: Stamp) -> redis::RedisResult<Vec<NodeAck>> {
        type Answer = (HashMap<String, String>, HashMap<String, u64>, (u64, u64));
        let (applied, alive, (secs, micros)): Answer = redis::pipe()
            .cmd("HGETALL")
            .arg(self.applied_key())
            .cmd("HGETALL")
            .arg(self.alive_key())
            .cmd("TIME")
            .query_async(&mut self.conn.clone())
            .await?;
        let now = secs.saturating_mul(1000).saturating_add(micros / 1000);
        let mut nodes: BTreeMap<String, bool> = self
            .remember(alive)
            .into_iter()
            .filter(|(_, at)| now.saturating_sub(*at) < FORGET_MS)
            .map(|(n, at)| (n, now.saturating_sub(at) < LIVE_MS))
            .collect();
        for m in &self.members {
            nodes.entry(m.clone()).or_insert(false);
        }
        nodes.insert(self.node.clone(), true);
        Ok(nodes
            .into_iter()
            .map(|(node, live)| NodeAck {
                applied: applied
                    .get(&node)
                    .and_then(|a| Stamp::parse(a))
                    .is_some_and(|a| a.covers(&entry)),
                node,
                live,
            })
            .collect())
    }

    /// Every invalidation applied here, the reader's and this node's own: the
    /// least a peer's answer must carry. `None` while cut off or while this node's
    /// own entries are of an incarnation its reader has not reached.
    fn floor_stamp(&self) -> Option<Stamp> {
        if self.live.cut_off.load(Ordering::Acquire) {
            return None;
        }
        let w = self.place.lock().unwrap_or_else(|p| p.into_inner());
        match w.own {
            Some(o) if o.incarnation != w.applied.incarnation => None,
            Some(o) => Some(Stamp {
                id: o.id.max(w.applied.id),
                ..o
            }),
            None => (w.applied.incarnation != 0).then_some(w.applied),
        }
    }

    fn write_metrics(&self, out: &mut String) {
        let s = &self.stats;
        let load = |v: &AtomicU64| v.load(Ordering::Relaxed);
        let pending = self.pending.lock().map_or(0, |p| p.len()) as u64;
        let lag = load(&s.lag_ms) as f64 / 1000.0;
        let cut = f64::from(u8::from(self.live.cut_off.load(Ordering::Relaxed)));
        let gauges: [(&str, &str, f64); 5] = [
            ("quire_cluster_bus_up", "Whether the last call to the bus succeeded.", f64::from(u8::from(s.up.load(Ordering::Relaxed)))),
            ("quire_cluster_lag_seconds", "From the last applied entry's append to its application here.", lag),
            ("quire_cluster_lag_entries", "Entries the last read of the log returned: a few when this node keeps up, 512 (a full read) when it is at least that many behind.", load(&s.last_read) as f64),
            ("quire_cluster_pending_entries", "Unsafe-method invalidations waiting for the bus.", pending as f64),
            ("quire_cluster_cut_off", "Whether this node is cut off from the log now (revalidating everything, refusing session cookies).", cut),
        ];
        let counters: [(&str, &str, &AtomicU64); 11] = [
            ("quire_cluster_appended_total", "Entries this node appended to the log.", &s.appended),
            ("quire_cluster_append_failures_total", "Appends the bus refused or could not take (purges answered 503).", &s.append_failed),
            ("quire_cluster_applied_total", "Entries from the log applied here.", &s.applied),
            ("quire_cluster_replays_total", "Times this node (re)joined the log and read on from its saved position: at start and after each reconnect.", &s.replays),
            ("quire_cluster_revalidate_all_total", "Times everything held here was made stale: a log trimmed past this node, an unknown position, an overflowed queue, an entry that did not decode.", &s.revalidate_all),
            ("quire_cluster_pending_dropped_total", "Queued invalidations replaced by one revalidate-everything entry.", &s.pending_dropped),
            ("quire_cluster_sign_outs_total", "Sign-outs this node recorded for the cluster (publishing mode).", &s.sign_outs),
            ("quire_cluster_views_pushed_total", "Page views this node added to the cluster's totals.", &s.views_pushed),
            ("quire_cluster_views_dropped_total", "Page views not added to the cluster's totals: too many notes waited for a bus that was down.", &s.views_dropped),
            ("quire_cluster_cut_offs_total", "Times this node went without reading the log for longer than the cut-off window (it then revalidated everything it served and honoured no session cookie until it caught up).", &s.cut_offs),
            ("quire_cluster_peer_answers_refused_total", "Peer answers refused because the owner's log position was below this node's (or unknown): filled from the origin instead.", &s.peer_refused),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        for (name, help, v) in counters {
            let v = load(v);
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        }
    }
}

impl Bus for RedisBus {
    fn publish(&self, inv: &Invalidation) -> PublishFuture<'_> {
        let op = Op::Targets(inv.clone());
        Box::pin(async move {
            let _one = self.appending.lock().await;
            let at = self.append(&op).await.map_err(|e| bus_error(&e))?;
            self.own
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(at.id);
            let mut w = self.place.lock().unwrap_or_else(|p| p.into_inner());
            w.own = Some(match w.own {
                Some(o) if o.incarnation == at.incarnation && o.id > at.id => o,
                _ => at,
            });
            Ok(Receipt {
                id: at.id.to_string(),
                incarnation: at.incarnation,
            })
        })
    }

    fn wait_all(&self, receipt: &Receipt, timeout: Duration) -> WaitFuture<'_> {
        let entry = Stamp {
            incarnation: receipt.incarnation,
            id: StreamId::parse(&receipt.id).unwrap_or_default(),
        };
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            let mut last = vec![NodeAck {
                node: self.node.clone(),
                applied: false,
                live: true,
            }];
            loop {
                if let Ok(acks) = self.acks(entry).await {
                    last = acks;
                }
                // Done when every live node applied it; the others are named.
                let live_done = last.iter().all(|a| a.applied || !a.live);
                if live_done || tokio::time::Instant::now() >= deadline {
                    return last;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    }

    fn is_peer(&self, addr: IpAddr) -> bool {
        self.peers.contains(&addr)
    }

    fn position(&self) -> Option<String> {
        if self.live.cut_off.load(Ordering::Acquire) {
            return None;
        }
        let w = self.place.lock().unwrap_or_else(|p| p.into_inner());
        (w.applied.incarnation != 0).then(|| w.applied.to_string())
    }

    fn floor(&self) -> Option<String> {
        self.floor_stamp().map(|s| s.to_string())
    }

    fn health(&self) -> Option<String> {
        self.live.cut_off.load(Ordering::Acquire).then(|| {
            format!(
                "cluster: cut off from the invalidation log for {} s (over {} ms): every response is revalidated, no peer answer is taken and every session cookie is refused until this node has caught up",
                self.live.since_ok().as_secs(),
                CUT_OFF_MS
            )
        })
    }

    fn publish_later(&self, inv: Invalidation) {
        let mut q = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= PENDING_MAX {
            self.stats
                .pending_dropped
                .fetch_add(q.len() as u64, Ordering::Relaxed);
            q.clear();
            self.overflowed.store(true, Ordering::Release);
        }
        q.push_back(Op::Targets(inv));
        drop(q);
        self.wake.notify_one();
    }

    fn metrics(&self, out: &mut String) {
        self.write_metrics(out);
    }
}

/// An incarnation and an id as the scripts answer them.
fn parse_answer(inc: &str, id: &str) -> redis::RedisResult<(u64, StreamId)> {
    let bad = || redis::RedisError::from((redis::ErrorKind::Parse, "incarnation or entry id"));
    let inc = u64::from_str_radix(inc, 16).map_err(|_| bad())?;
    Ok((inc, StreamId::parse(id).ok_or_else(bad)?))
}

/// Runs the heartbeat and the pending queue's flusher until `bus` is dropped.
pub(crate) fn spawn_background(bus: &Arc<RedisBus>) {
    let weak = Arc::downgrade(bus);
    tokio::spawn(async move {
        loop {
            let Some(bus) = weak.upgrade() else {
                return;
            };
            let _ = bus.beat().await;
            bus.flush_pending().await;
            drop(bus);
            let Some(bus) = weak.upgrade() else {
                return;
            };
            bus.wait_for_pending(Duration::from_secs(1)).await;
        }
    });
}

/// The `Bus` port's error for a failed append: its kind from what Redis said, so
/// the server can tell a log it could not reach (nothing was taken) from one that
/// timed out (it may have been) or refused.
fn bus_error(e: &redis::RedisError) -> BusError {
    let kind = if e.is_timeout() {
        BusErrorKind::Timeout
    } else if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
        BusErrorKind::Unavailable
    } else {
        BusErrorKind::Refused
    };
    BusError::new(kind, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use quire_server::purge::Target;

    #[tokio::test]
    async fn the_queue_for_a_bus_that_is_down_is_bounded_and_overflow_revalidates_all() {
        // Nothing listens on port 1: every append fails.
        let conn = crate::manager("redis://127.0.0.1:1/", Duration::from_millis(200)).unwrap();
        let bus = RedisBus::new("a", "s", 1000, conn, HashSet::new(), Vec::new());
        let inv = |i: usize| Invalidation {
            targets: vec![Target::Url(format!("http://h/{i}"))],
            soft: false,
            implicit: true,
        };
        for i in 0..PENDING_MAX {
            bus.publish_later(inv(i));
        }
        assert_eq!(bus.pending.lock().unwrap().len(), PENDING_MAX);
        assert!(!bus.overflowed.load(Ordering::Acquire));
        bus.publish_later(inv(PENDING_MAX));
        assert_eq!(
            bus.pending.lock().unwrap().len(),
            1,
            "the queue never grows past its bound"
        );
        assert!(
            bus.overflowed.load(Ordering::Acquire),
            "one revalidate-all entry owed"
        );
        assert_eq!(
            bus.stats.pending_dropped.load(Ordering::Relaxed),
            PENDING_MAX as u64
        );
        bus.flush_pending().await;
        assert!(
            bus.overflowed.load(Ordering::Acquire),
            "still owed while the bus is down"
        );
        let mut m = String::new();
        bus.write_metrics(&mut m);
        assert!(
            m.contains("quire_cluster_pending_dropped_total 10000\n"),
            "{m}"
        );
        assert!(m.contains("quire_cluster_bus_up 0\n"), "{m}");
    }
}
