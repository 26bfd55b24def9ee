//! Publishing mode (`quire serve`) across nodes: who signed out, and how often each
//! note was read, kept in two hashes beside the stream so every node sees the
//! cluster's state, not its own.
//!
//! - `<stream>:sessions`: `epoch` (16 hex digits, set once by the first node) and
//!   `u:<name>` → that reader's session generation. A sign-out is one Lua script
//!   ([`RedisBus::sign_out`]): `HINCRBY` the generation and append a `signout`
//!   entry to the log, atomically, so the table and the log never disagree. Every
//!   node raises its copy when it reads the entry (within the log's propagation
//!   time), and reads the whole table when it (re)connects to the bus, before it
//!   reads the log: a node that was down or cut off cannot miss a sign-out, even
//!   one the log no longer holds. Until a node has read the table once it honours
//!   no cookie of the cluster (see `quire_vault::readers::Sessions::shared`). Each
//!   entry carries the table's epoch: a node that reads an entry of another epoch
//!   than the table it holds (Redis lost the hash, and a new epoch began) reads the
//!   whole table again instead of raising one generation, since generations of
//!   different epochs do not compare and a sign-out must never be read as a lower
//!   generation and ignored.
//! - `<stream>:views`: note path → views. Each node sums its views in memory and
//!   adds them every second in one script of `HINCRBY`s ([`ViewTotals`]), so a
//!   batch counts once or not at all; while Redis is down the sums wait (at most
//!   [`VIEW_KEYS_MAX`] notes; views of further notes are dropped and counted).
//!
//! - **A node cut off from the log honours no session cookie** once it has not
//!   read the log for `bus::CUT_OFF_MS` ([`SignOutTable::suspend`], by
//!   `reader::watch`), until it has read the table again. Not only cookies issued
//!   elsewhere: a sign-out ends every cookie of that reader, those this node
//!   issued included, so "its own sessions" are no safer than the others. It says
//!   so in `/_quire/health`. Readers sign in again there (or use another node)
//!   while it is cut off; a cookie issued then carries an epoch of its own and
//!   ends when the node is back.
//!
//! The session secret itself never travels: every node reads it from its own
//! configuration (`cluster.session_secret` or `session_secret_file`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngCore;
use redis::aio::ConnectionManager;

use crate::bus::RedisBus;
use crate::wire::{self, Op};

/// Notes whose views wait for a bus that is down; views of more are dropped.
pub const VIEW_KEYS_MAX: usize = 100_000;

/// How often a node adds its views to the cluster's totals.
const VIEWS_EVERY: Duration = Duration::from_secs(1);

/// HINCRBY the generation and XADD the `signout` entry carrying it and the table's
/// epoch, atomically; a table that lost its epoch (Redis emptied) gets the fresh one
/// given. KEYS: the sessions hash, the stream. ARGV: the hash field, `stream_max`, a
/// fresh epoch, then the entry's fields but `epoch` and `generation`.
const SIGN_OUT: &str = r"
local e = redis.call('HGET', KEYS[1], 'epoch')
if not e then
  redis.call('HSET', KEYS[1], 'epoch', ARGV[3])
  e = ARGV[3]
end
local g = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
local args = {KEYS[2], 'MAXLEN', '~', ARGV[2], '*'}
for i = 4, #ARGV do args[#args + 1] = ARGV[i] end
args[#args + 1] = 'epoch'
args[#args + 1] = e
args[#args + 1] = 'generation'
args[#args + 1] = tostring(g)
local id = redis.call('XADD', unpack(args))
return {g, id}
";

/// A random epoch for a sign-out table that has none, as the hash stores it.
fn fresh_epoch() -> String {
    format!("{:016x}", rand::rng().next_u64())
}

/// A node's sessions, as the cluster updates them (implemented over the site's
/// `Sessions` by the binary).
pub trait SignOutTable: Send + Sync {
    /// The cluster's whole table: its epoch and every reader's generation.
    fn adopt(&self, epoch: u64, generations: HashMap<String, u64>);
    /// One sign-out read from the log.
    fn raise(&self, name: &str, generation: u64);
    /// The node is cut off from the log: it cannot know who signed out elsewhere,
    /// so no cookie is honoured until the table is adopted again. By default, a
    /// random epoch no cookie carries.
    fn suspend(&self) {
        self.adopt(rand::rng().next_u64(), HashMap::new());
    }
}

impl RedisBus {
    fn sessions_key(&self) -> String {
        format!("{}:sessions", self.stream)
    }

    fn views_key(&self) -> String {
        format!("{}:views", self.stream)
    }

    /// Records that `name` signed out, for every node (see the module doc); the
    /// generation now in force.
    pub async fn sign_out(&self, name: &str) -> redis::RedisResult<u64> {
        let head = Op::SignOut {
            name: name.to_owned(),
            epoch: 0,
            generation: 0,
        };
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(SIGN_OUT)
            .arg(2)
            .arg(self.sessions_key())
            .arg(&self.stream)
            .arg(format!("u:{name}"))
            .arg(self.stream_max)
            .arg(fresh_epoch());
        for (k, v) in wire::encode(&self.node, &head) {
            if k != "generation" && k != "epoch" {
                cmd.arg(k).arg(v);
            }
        }
        let (generation, _id): (u64, String) = cmd.query_async(&mut self.conn.clone()).await?;
        self.stats.sign_outs.fetch_add(1, Ordering::Relaxed);
        Ok(generation)
    }

    /// The cluster's sign-out table, its epoch made first if there is none yet.
    pub(crate) async fn sign_outs(
        &self,
        conn: &mut ConnectionManager,
    ) -> redis::RedisResult<(u64, HashMap<String, u64>)> {
        let (table,): (HashMap<String, String>,) = redis::pipe()
            .cmd("HSETNX")
            .arg(self.sessions_key())
            .arg("epoch")
            .arg(fresh_epoch())
            .ignore()
            .cmd("HGETALL")
            .arg(self.sessions_key())
            .query_async(conn)
            .await?;
        let epoch = table
            .get("epoch")
            .and_then(|e| u64::from_str_radix(e, 16).ok())
            .ok_or_else(|| {
                redis::RedisError::from((redis::ErrorKind::Parse, "the sessions hash's epoch"))
            })?;
        let generations = table
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("u:")?.to_owned(), v.parse().ok()?)))
            .collect();
        Ok((epoch, generations))
    }

    /// The cluster's view counts, most viewed first.
    pub async fn view_totals(&self) -> redis::RedisResult<Vec<(String, u64)>> {
        let all: HashMap<String, u64> = redis::cmd("HGETALL")
            .arg(self.views_key())
            .query_async(&mut self.conn.clone())
            .await?;
        let mut rows: Vec<(String, u64)> = all.into_iter().collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(rows)
    }
}

/// A node's views on their way to the cluster's totals (see the module doc).
#[derive(Debug)]
pub struct ViewTotals {
    bus: Arc<RedisBus>,
    pending: Mutex<HashMap<String, u64>>,
    /// Everything this node added since it started (added again if Redis loses
    /// the totals).
    sent: Mutex<HashMap<String, u64>>,
}

impl ViewTotals {
    /// Starts adding this node's views to the cluster's totals every second,
    /// until the returned value is dropped. Call inside a tokio runtime.
    pub fn start(bus: &Arc<RedisBus>) -> Arc<ViewTotals> {
        let totals = Arc::new(ViewTotals {
            bus: bus.clone(),
            pending: Mutex::new(HashMap::new()),
            sent: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&totals);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(VIEWS_EVERY).await;
                let Some(t) = weak.upgrade() else {
                    return;
                };
                t.push().await;
            }
        });
        totals
    }

    /// Adds `batch` (note path, views) to what the next push sends. Never waits
    /// on Redis.
    pub fn add<'a>(&self, batch: impl IntoIterator<Item = (&'a str, u64)>) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for (path, n) in batch {
            self.merge(&mut p, path, n);
        }
    }

    fn merge(&self, p: &mut HashMap<String, u64>, path: &str, n: u64) {
        if let Some(c) = p.get_mut(path) {
            *c = c.saturating_add(n);
        } else if p.len() < VIEW_KEYS_MAX {
            p.insert(path.to_owned(), n);
        } else {
            self.bus.stats.views_dropped.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Sends what is pending in one script; on failure keeps it for the next. When
    /// the cluster's totals do not know this node (Redis restarted empty, or
    /// flushed), everything this node added since it started is added again with
    /// the batch, in the same script.
    pub async fn push(&self) {
        let batch = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if batch.is_empty() {
            return;
        }
        let sent = match self.send(&batch, None).await {
            Ok(true) => Ok(()),
            Ok(false) => {
                let again = self.sent.lock().unwrap_or_else(|e| e.into_inner()).clone();
                self.send(&batch, Some(&again)).await.map(|_| ())
            }
            Err(e) => Err(e),
        };
        let views: u64 = batch.values().sum();
        match sent {
            Ok(()) => {
                self.bus
                    .stats
                    .views_pushed
                    .fetch_add(views, Ordering::Relaxed);
                let mut all = self.sent.lock().unwrap_or_else(|e| e.into_inner());
                for (path, n) in batch {
                    Self::count(&mut all, &path, n);
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, views, "cluster: views kept for the next push");
                let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                for (path, n) in batch {
                    self.merge(&mut p, &path, n);
                }
            }
        }
    }

    /// Adds `n` views of `path` to what this node has sent (bounded like the
    /// pending sums; past the bound a note's views are not added again after a
    /// loss).
    fn count(all: &mut HashMap<String, u64>, path: &str, n: u64) {
        if let Some(c) = all.get_mut(path) {
            *c = c.saturating_add(n);
        } else if all.len() < VIEW_KEYS_MAX {
            all.insert(path.to_owned(), n);
        }
    }

    /// [`ADD_VIEWS`] with `batch`, and with `again` (everything sent before) when
    /// the totals may have lost it; `false` when they did not know this node and
    /// nothing was added.
    async fn send(
        &self,
        batch: &HashMap<String, u64>,
        again: Option<&HashMap<String, u64>>,
    ) -> redis::RedisResult<bool> {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(ADD_VIEWS)
            .arg(2)
            .arg(self.bus.views_key())
            .arg(format!("{}:nodes", self.bus.views_key()))
            .arg(&self.bus.node)
            .arg(if again.is_some() { "all" } else { "batch" })
            .arg(batch.len());
        for (path, n) in batch.iter().chain(again.into_iter().flatten()) {
            cmd.arg(path).arg(*n);
        }
        let known: u8 = cmd.query_async(&mut self.bus.conn.clone()).await?;
        Ok(known == 1 || again.is_some())
    }
}

/// Adds a node's views to the cluster's totals. KEYS: the views hash, the set of
/// nodes whose views it holds. ARGV: the node, `batch` or `all`, the number of
/// batch pairs, the batch's (path, views) pairs, then (with `all`) everything the
/// node sent before. With `batch`, a node the set does not hold (the totals were
/// lost, or it never sent) adds nothing and gets 0; with `all`, what it sent before
/// is added again first when the set does not hold it.
const ADD_VIEWS: &str = r"
local known = redis.call('SISMEMBER', KEYS[2], ARGV[1])
local nb = tonumber(ARGV[3])
if known == 0 then
  if ARGV[2] == 'batch' then return 0 end
  for i = 4 + 2 * nb, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
  redis.call('SADD', KEYS[2], ARGV[1])
end
for i = 4, 3 + 2 * nb, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
";

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn views_waiting_for_a_bus_that_is_down_are_bounded_by_notes() {
        // Nothing listens on port 1: every push fails and keeps what it had.
        let conn = crate::manager("redis://127.0.0.1:1/", Duration::from_millis(200)).unwrap();
        let bus = Arc::new(RedisBus::new(
            "a",
            "s",
            1000,
            conn,
            Default::default(),
            Vec::new(),
        ));
        let t = ViewTotals {
            bus: bus.clone(),
            pending: Mutex::new(HashMap::new()),
            sent: Mutex::new(HashMap::new()),
        };
        let paths: Vec<String> = (0..VIEW_KEYS_MAX + 10)
            .map(|i| format!("n{i}.md"))
            .collect();
        t.add(paths.iter().map(|p| (p.as_str(), 2)));
        t.add([("n0.md", 3)]);
        t.push().await;
        let pending = t.pending.lock().unwrap();
        assert_eq!(
            pending.len(),
            VIEW_KEYS_MAX,
            "never more notes than the bound"
        );
        assert_eq!(pending["n0.md"], 5, "a note already waiting still counts");
        assert_eq!(bus.stats.views_dropped.load(Ordering::Relaxed), 20);
        assert_eq!(bus.stats.views_pushed.load(Ordering::Relaxed), 0);
    }
}
