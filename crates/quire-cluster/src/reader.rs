//! Applying the log: every entry, in log order, on this node — from the saved
//! position at start, and from where it stopped after Redis comes back.
//!
//! Key decisions:
//! - **The position moves only after the entries before it took effect**: a batch
//!   is applied, then the position file is saved, then the `applied` hash is set
//!   (which `wait=all` reads). A kill between the two replays the batch: applying
//!   a purge twice is harmless (see `quire_server::bus`).
//! - **A gap revalidates everything held.** When the node cannot know what it
//!   missed — no saved position beside a volume that holds entries, or a log
//!   trimmed past its position (see [`StreamInfo::lost_after`]) — every response received before that moment is made stale (one instant
//!   stored in the position file and in the server, see
//!   `Ctx::stale_everything_before`): the bodies stay, each is revalidated once.
//!   So does an entry that does not decode, and an `all` entry.
//! - Entries this node appended and already applied are skipped once.
//! - A publishing node reads the cluster's sign-out table on every (re)connect,
//!   before the log (see `crate::publishing`).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use quire_server::Ctx;
use redis::aio::ConnectionManager;
use redis::streams::StreamReadReply;

use crate::bus::{now_ms, RedisBus};
use crate::position::{self, Position};
use crate::publishing::SignOutTable;
use crate::stream_id::StreamId;
use crate::wire::{self, Op};

/// Entries read at once.
const BATCH: usize = 512;

/// How long one `XREAD` blocks.
pub(crate) const BLOCK: Duration = Duration::from_millis(1000);

/// The reader of one node.
pub(crate) struct Reader {
    pub(crate) bus: Arc<RedisBus>,
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) path: PathBuf,
    pub(crate) conn: ConnectionManager,
    pub(crate) pos: Option<Position>,
    /// Whether the position was checked against the log since the last failure.
    pub(crate) connected: bool,
    /// A publishing node's sessions (see `crate::publishing`).
    pub(crate) sessions: Option<Arc<dyn SignOutTable>>,
    /// The epoch of the sign-out table `sessions` last adopted.
    pub(crate) epoch: Option<u64>,
}

impl Reader {
    /// Applies the log until `stopped` turns true.
    pub(crate) async fn run(mut self, mut stopped: tokio::sync::watch::Receiver<bool>) {
        tokio::select! {
            () = self.apply_forever() => {}
            _ = stopped.wait_for(|s| *s) => {}
        }
    }

    /// Before the node serves: restores the saved stale instant, then applies
    /// everything the log holds past the saved position. When the log cannot be
    /// read within `within`, the node cannot know what it missed while it was down,
    /// so everything it holds is revalidated once; the reader catches up later.
    pub(crate) async fn catch_up(&mut self, within: Duration) {
        if let Some(p) = self.pos {
            if p.stale_before_ms > 0 {
                self.ctx
                    .stale_everything_before(UNIX_EPOCH + Duration::from_millis(p.stale_before_ms));
            }
        }
        let done = tokio::time::timeout(within, async {
            self.catch_up_check().await?;
            while self.read_batch(None).await? > 0 {}
            redis::RedisResult::Ok(())
        })
        .await;
        if !matches!(done, Ok(Ok(()))) {
            tracing::warn!(
                "cluster: the log could not be read at start: everything held is revalidated once"
            );
            let mut pos = self.pos.unwrap_or_default();
            self.revalidate_all(&mut pos);
            if let Some(p) = &mut self.pos {
                p.stale_before_ms = pos.stale_before_ms;
            }
            self.connected = false;
        }
    }

    async fn apply_forever(&mut self) {
        let mut connected = self.connected;
        loop {
            if !connected {
                match self.catch_up_check().await {
                    Ok(()) => connected = true,
                    Err(e) => {
                        self.down(&e).await;
                        continue;
                    }
                }
            }
            match self.read_batch(Some(BLOCK)).await {
                Ok(_) => self.bus.stats.up.store(true, Ordering::Relaxed),
                Err(e) => {
                    connected = false;
                    self.down(&e).await;
                }
            }
        }
    }

    async fn down(&self, e: &redis::RedisError) {
        if self.bus.stats.up.swap(false, Ordering::Relaxed) {
            tracing::warn!(error = %e, "cluster bus unreachable: purges answer 503 until it is back");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    /// On (re)connecting: decides where to read from, and whether a gap makes
    /// everything held stale.
    async fn catch_up_check(&mut self) -> redis::RedisResult<()> {
        // Before the log: a sign-out the log no longer holds is in the table.
        self.adopt_sign_outs().await?;
        let info = stream_info(&mut self.conn, &self.bus.stream).await?;
        let gap = match self.pos {
            None => self.ctx.store_entries() > 0,
            Some(p) => info.lost_after(p.applied),
        };
        let mut pos = self.pos.unwrap_or(Position {
            applied: info.last,
            stale_before_ms: 0,
        });
        if gap {
            let why = if self.pos.is_none() {
                "no saved position beside a volume that holds responses"
            } else {
                "the log was trimmed past this node's position"
            };
            tracing::warn!("cluster: {why}: everything held is revalidated once");
            self.revalidate_all(&mut pos);
        }
        self.pos = Some(pos);
        self.save(pos).await;
        self.connected = true;
        self.bus.stats.replays.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Reads the cluster's sign-out table into the node's sessions, if it has any.
    async fn adopt_sign_outs(&mut self) -> redis::RedisResult<()> {
        if let Some(s) = &self.sessions {
            let (epoch, generations) = self.bus.sign_outs(&mut self.conn).await?;
            s.adopt(epoch, generations);
            self.epoch = Some(epoch);
        }
        Ok(())
    }

    /// Applies a sign-out read from the log: raises the reader's generation when
    /// the entry is of the adopted table's epoch, else reads the whole table again
    /// (see `crate::publishing`).
    async fn sign_out(
        &mut self,
        name: &str,
        epoch: u64,
        generation: u64,
    ) -> redis::RedisResult<()> {
        match &self.sessions {
            Some(s) if self.epoch == Some(epoch) => {
                s.raise(name, generation);
                Ok(())
            }
            Some(_) => self.adopt_sign_outs().await,
            None => Ok(()),
        }
    }

    fn revalidate_all(&self, pos: &mut Position) {
        let now = now_ms();
        pos.stale_before_ms = pos.stale_before_ms.max(now);
        self.ctx
            .stale_everything_before(UNIX_EPOCH + Duration::from_millis(now));
        self.bus
            .stats
            .revalidate_all
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Reads and applies one batch past the position, waiting up to `block` for
    /// one to come (`None`: not at all); how many entries it held.
    async fn read_batch(&mut self, block: Option<Duration>) -> redis::RedisResult<usize> {
        let mut pos = self.pos.unwrap_or_default();
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(BATCH);
        if let Some(b) = block {
            cmd.arg("BLOCK").arg(b.as_millis() as u64);
        }
        let reply: Option<StreamReadReply> = cmd
            .arg("STREAMS")
            .arg(&self.bus.stream)
            .arg(pos.applied.to_string())
            .query_async(&mut self.conn)
            .await?;
        let entries: Vec<redis::streams::StreamId> = reply
            .map(|r| r.keys.into_iter().flat_map(|k| k.ids).collect())
            .unwrap_or_default();
        let n = entries.len();
        self.bus.stats.last_read.store(n as u64, Ordering::Relaxed);
        if n == 0 {
            return Ok(0);
        }
        for e in entries {
            let Some(id) = StreamId::parse(&e.id) else {
                continue;
            };
            // A failure leaves the batch unsaved: it is applied again after the
            // reconnect (which reads the sign-out table first).
            self.apply(id, &e, &mut pos).await?;
            pos.applied = id;
        }
        self.pos = Some(pos);
        self.save(pos).await;
        Ok(n)
    }

    async fn apply(
        &mut self,
        id: StreamId,
        e: &redis::streams::StreamId,
        pos: &mut Position,
    ) -> redis::RedisResult<()> {
        let stats = &self.bus.stats;
        stats
            .lag_ms
            .store(now_ms().saturating_sub(id.ms), Ordering::Relaxed);
        stats.applied.fetch_add(1, Ordering::Relaxed);
        match wire::decode(|k| e.get::<String>(k)) {
            Some(entry) if entry.node == self.bus.node && self.bus.take_own(id) => {}
            Some(wire::Entry {
                op: Op::Targets(inv),
                ..
            }) => {
                let ctx = self.ctx.clone();
                let _ =
                    tokio::task::spawn_blocking(move || quire_server::bus::apply(&ctx, &inv)).await;
            }
            Some(wire::Entry {
                op:
                    Op::SignOut {
                        name,
                        epoch,
                        generation,
                    },
                ..
            }) => return self.sign_out(&name, epoch, generation).await,
            Some(wire::Entry { op: Op::All, .. }) => self.revalidate_all(pos),
            None => {
                tracing::warn!(entry = %id, "cluster: an entry that does not decode: everything held is revalidated once");
                self.revalidate_all(pos);
            }
        }
        Ok(())
    }

    async fn save(&self, pos: Position) {
        if let Err(e) = position::save(&self.path, &pos) {
            tracing::warn!(error = %e, path = %self.path.display(), "cluster: the position could not be saved");
        }
        let _ = self.bus.ack(pos.applied).await;
    }
}

/// What `XINFO STREAM` says, the parts the reader needs.
struct StreamInfo {
    last: StreamId,
    /// The oldest entry still held (`None`: the stream is empty).
    first: Option<StreamId>,
    max_deleted: StreamId,
}

impl StreamInfo {
    /// Whether entries after `pos` may be gone: the oldest entry still held is
    /// after it (trimmed by `MAXLEN`), an entry after it was deleted, or the
    /// stream is empty though entries were added after it. Conservative: when
    /// exactly the entries up to `pos` were trimmed, nothing was lost, yet this
    /// says so (a stream id does not tell whether it is `pos`'s successor); the
    /// cost is one revalidation of what the node holds, never a missed purge.
    fn lost_after(&self, pos: StreamId) -> bool {
        let trimmed = match self.first {
            Some(first) => first > pos,
            None => self.last > pos,
        };
        trimmed || self.max_deleted > pos
    }
}

/// `XINFO STREAM`; a stream that does not exist yet is empty.
async fn stream_info(conn: &mut ConnectionManager, stream: &str) -> redis::RedisResult<StreamInfo> {
    let v: redis::RedisResult<redis::Value> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(stream)
        .query_async(conn)
        .await;
    let v = match v {
        Ok(v) => v,
        Err(e) if e.to_string().contains("no such key") => {
            return Ok(StreamInfo {
                last: StreamId::default(),
                first: None,
                max_deleted: StreamId::default(),
            })
        }
        Err(e) => return Err(e),
    };
    let field = |name: &str| {
        find_field(&v, name)
            .and_then(|f| redis::from_redis_value_ref::<String>(f).ok())
            .and_then(|s| StreamId::parse(&s))
            .unwrap_or_default()
    };
    let length = find_field(&v, "length")
        .and_then(|f| redis::from_redis_value_ref::<u64>(f).ok())
        .unwrap_or(0);
    Ok(StreamInfo {
        last: field("last-generated-id"),
        first: (length > 0).then(|| field("recorded-first-entry-id")),
        max_deleted: field("max-deleted-entry-id"),
    })
}

/// The value of `name` in a reply of alternating names and values (RESP2) or a
/// map (RESP3).
fn find_field<'a>(v: &'a redis::Value, name: &str) -> Option<&'a redis::Value> {
    let is_name =
        |k: &redis::Value| redis::from_redis_value_ref::<String>(k).is_ok_and(|s| s == name);
    match v {
        redis::Value::Array(items) => items
            .chunks(2)
            .find(|kv| kv.len() == 2 && is_name(&kv[0]))
            .map(|kv| &kv[1]),
        redis::Value::Map(pairs) => pairs.iter().find(|(k, _)| is_name(k)).map(|(_, v)| v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64) -> StreamId {
        StreamId { ms, seq: 0 }
    }

    #[test]
    fn a_gap_is_seen_whenever_entries_after_the_position_may_be_gone() {
        let info = |first: Option<u64>, last: u64, deleted: u64| StreamInfo {
            last: id(last),
            first: first.map(id),
            max_deleted: id(deleted),
        };
        assert!(
            !info(Some(1), 9, 0).lost_after(id(5)),
            "all after 5 still held"
        );
        assert!(info(Some(7), 9, 0).lost_after(id(5)), "6 may be gone");
        assert!(info(None, 9, 0).lost_after(id(5)), "emptied after 5");
        assert!(
            !info(None, 5, 0).lost_after(id(5)),
            "emptied, nothing after 5"
        );
        assert!(info(Some(1), 9, 6).lost_after(id(5)), "deleted after 5");
        assert!(!info(None, 0, 0).lost_after(id(0)), "a new stream");
    }
}
