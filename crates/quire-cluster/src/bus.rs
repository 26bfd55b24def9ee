//! The invalidation log on Redis Streams: appending (`XADD` with `MAXLEN ~`),
//! waiting for every live node (`wait=all`), heartbeats, and the queue of unsafe
//! methods' invalidations that wait for a bus that is down.
//!
//! Two hashes sit beside the stream: `<stream>:applied` (node → the last entry it
//! applied) and `<stream>:alive` (node → its last heartbeat, Unix ms, every
//! second). A node is live while its heartbeat is under [`LIVE_MS`] old; `wait=all`
//! waits for the live ones, and names each.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use quire_server::bus::{Bus, Invalidation, NodeAck, PublishFuture, Receipt, WaitFuture};
use redis::aio::ConnectionManager;

use crate::stream_id::StreamId;
use crate::wire::{self, Op};

/// A heartbeat older than this marks a node gone (for `wait=all`).
pub const LIVE_MS: u64 = 5_000;

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
    /// Entries this node appended and applied itself: its reader skips them.
    own: Mutex<HashSet<StreamId>>,
    pending: Mutex<VecDeque<Op>>,
    overflowed: AtomicBool,
    /// Set when the node leaves: no more heartbeats.
    leaving: AtomicBool,
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
    ) -> RedisBus {
        RedisBus {
            node: node.into(),
            stream: stream.into(),
            stream_max,
            conn,
            own: Mutex::new(HashSet::new()),
            pending: Mutex::new(VecDeque::new()),
            overflowed: AtomicBool::new(false),
            leaving: AtomicBool::new(false),
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

    /// Appends `op`; its id.
    pub(crate) async fn append(&self, op: &Op) -> redis::RedisResult<StreamId> {
        let mut c = redis::cmd("XADD");
        c.arg(&self.stream)
            .arg("MAXLEN")
            .arg("~")
            .arg(self.stream_max)
            .arg("*");
        for (k, v) in wire::encode(&self.node, op) {
            c.arg(k).arg(v);
        }
        let res: redis::RedisResult<String> = c.query_async(&mut self.conn.clone()).await;
        match res {
            Ok(id) => {
                self.stats.appended.fetch_add(1, Ordering::Relaxed);
                self.stats.up.store(true, Ordering::Relaxed);
                StreamId::parse(&id).ok_or_else(|| {
                    redis::RedisError::from((redis::ErrorKind::Parse, "XADD id", id))
                })
            }
            Err(e) => {
                self.stats.append_failed.fetch_add(1, Ordering::Relaxed);
                self.stats.up.store(false, Ordering::Relaxed);
                Err(e)
            }
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

    /// Records that this node applied everything up to `id`.
    pub(crate) async fn ack(&self, id: StreamId) -> redis::RedisResult<()> {
        redis::cmd("HSET")
            .arg(self.applied_key())
            .arg(&self.node)
            .arg(id.to_string())
            .query_async(&mut self.conn.clone())
            .await
    }

    /// Leaves the live set at once, so `wait=all` stops waiting for this node
    /// (instead of until its last heartbeat is [`LIVE_MS`] old).
    pub(crate) async fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
        let _: redis::RedisResult<()> = redis::cmd("HDEL")
            .arg(self.alive_key())
            .arg(&self.node)
            .query_async(&mut self.conn.clone())
            .await;
    }

    /// One heartbeat (none once the node is leaving).
    pub(crate) async fn beat(&self) -> redis::RedisResult<()> {
        if self.leaving.load(Ordering::Acquire) {
            return Ok(());
        }
        redis::cmd("HSET")
            .arg(self.alive_key())
            .arg(&self.node)
            .arg(now_ms())
            .query_async(&mut self.conn.clone())
            .await
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

    async fn acks(&self, id: StreamId) -> redis::RedisResult<Vec<NodeAck>> {
        let (applied, alive): (HashMap<String, String>, HashMap<String, u64>) = redis::pipe()
            .cmd("HGETALL")
            .arg(self.applied_key())
            .cmd("HGETALL")
            .arg(self.alive_key())
            .query_async(&mut self.conn.clone())
            .await?;
        let now = now_ms();
        let mut live: BTreeMap<String, bool> = alive
            .into_iter()
            .filter(|(_, at)| now.saturating_sub(*at) < LIVE_MS)
            .map(|(n, _)| (n, false))
            .collect();
        live.insert(self.node.clone(), false);
        for (n, done) in &mut live {
            *done = applied
                .get(n)
                .and_then(|a| StreamId::parse(a))
                .is_some_and(|a| a >= id);
        }
        Ok(live
            .into_iter()
            .map(|(node, applied)| NodeAck { node, applied })
            .collect())
    }

    fn write_metrics(&self, out: &mut String) {
        let s = &self.stats;
        let load = |v: &AtomicU64| v.load(Ordering::Relaxed);
        let pending = self.pending.lock().map_or(0, |p| p.len()) as u64;
        let lag = load(&s.lag_ms) as f64 / 1000.0;
        let gauges: [(&str, &str, f64); 4] = [
            ("quire_cluster_bus_up", "Whether the last call to the bus succeeded.", f64::from(u8::from(s.up.load(Ordering::Relaxed)))),
            ("quire_cluster_lag_seconds", "From the last applied entry's append to its application here.", lag),
            ("quire_cluster_lag_entries", "Entries the last read of the log returned: a few when this node keeps up, 512 (a full read) when it is at least that many behind.", load(&s.last_read) as f64),
            ("quire_cluster_pending_entries", "Unsafe-method invalidations waiting for the bus.", pending as f64),
        ];
        let counters: [(&str, &str, &AtomicU64); 9] = [
            ("quire_cluster_appended_total", "Entries this node appended to the log.", &s.appended),
            ("quire_cluster_append_failures_total", "Appends the bus refused or could not take (purges answered 503).", &s.append_failed),
            ("quire_cluster_applied_total", "Entries from the log applied here.", &s.applied),
            ("quire_cluster_replays_total", "Times this node (re)joined the log and read on from its saved position: at start and after each reconnect.", &s.replays),
            ("quire_cluster_revalidate_all_total", "Times everything held here was made stale: a log trimmed past this node, an unknown position, an overflowed queue, an entry that did not decode.", &s.revalidate_all),
            ("quire_cluster_pending_dropped_total", "Queued invalidations replaced by one revalidate-everything entry.", &s.pending_dropped),
            ("quire_cluster_sign_outs_total", "Sign-outs this node recorded for the cluster (publishing mode).", &s.sign_outs),
            ("quire_cluster_views_pushed_total", "Page views this node added to the cluster's totals.", &s.views_pushed),
            ("quire_cluster_views_dropped_total", "Page views not added to the cluster's totals: too many notes waited for a bus that was down.", &s.views_dropped),
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
            let id = self.append(&op).await.map_err(|e| e.to_string())?;
            self.own
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id);
            Ok(Receipt { id: id.to_string() })
        })
    }

    fn wait_all(&self, receipt: &Receipt, timeout: Duration) -> WaitFuture<'_> {
        let id = StreamId::parse(&receipt.id).unwrap_or_default();
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            let mut last = vec![NodeAck {
                node: self.node.clone(),
                applied: false,
            }];
            loop {
                if let Ok(acks) = self.acks(id).await {
                    last = acks;
                }
                if last.iter().all(|a| a.applied) || tokio::time::Instant::now() >= deadline {
                    return last;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use quire_server::purge::Target;

    #[tokio::test]
    async fn the_queue_for_a_bus_that_is_down_is_bounded_and_overflow_revalidates_all() {
        // Nothing listens on port 1: every append fails.
        let conn = crate::manager("redis://127.0.0.1:1/", Duration::from_millis(200)).unwrap();
        let bus = RedisBus::new("a", "s", 1000, conn);
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
