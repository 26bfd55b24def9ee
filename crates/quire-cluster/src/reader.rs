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
//! - **A new incarnation of the log is a gap** (Redis lost the stream or went back
//!   to an older copy; see `crate::bus`): checked before every read, so a stream
//!   whose ids went backwards is never read from a position it no longer reaches.
//!   The node revalidates everything, reads the sign-out table again and reads on
//!   from the new incarnation's head.
//! - **A node that cannot read the log revalidates everything it serves.** A
//!   watcher ([`watch`]) that does not wait on Redis sees when the last read that
//!   reached the head of the log is older than `bus::CUT_OFF_MS` (a connection
//!   held open but silent, a Redis that stopped answering, a backlog too long to
//!   apply): from then until a read reaches the head again, every response held is
//!   stale on every use (`Ctx::revalidate_every_use`: each is revalidated, what the
//!   origin answers is served), peer answers are refused and session cookies are
//!   not honoured. Not an instant moved on each tick: a copy revalidated after the
//!   last tick was fresh until the next, and a purge acknowledged in between (this
//!   node named `unreachable`) was undone by it as a hit
//!   (`a_cut_off_node_never_serves_as_a_hit_what_it_revalidated_just_before_a_purge`).
//! - Entries this node appended and already applied are skipped once.
//! - A publishing node reads the cluster's sign-out table on every (re)connect,
//!   before the log (see `crate::publishing`).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use quire_server::Ctx;
use redis::aio::ConnectionManager;
use redis::streams::StreamReadReply;

use crate::bus::{now_ms, RedisBus, Stamp, CUT_OFF_MS};
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
        // The clock's latest reading, for the next start's revalidation instant
        // (a batch cut short stays unsaved: the position is the last whole one).
        self.bus
            .clock_seen_ms
            .fetch_max(unix_ms(self.ctx.clock.now()), Ordering::AcqRel);
        if let Some(p) = self.pos {
            if let Err(e) = position::save(
                &self.path,
                &Position {
                    clock_seen_ms: self.bus.clock_seen_ms.load(Ordering::Acquire),
                    ..p
                },
            ) {
                tracing::warn!(error = %e, "cluster: the position could not be saved");
            }
        }
    }

    /// Before the node serves: restores the saved stale instant, then applies
    /// everything the log holds past the saved position. When the log cannot be
    /// read within `within`, the node cannot know what it missed while it was down,
    /// so everything it holds is revalidated once; the reader catches up later.
    pub(crate) async fn catch_up(&mut self, within: Duration) {
        if let Some(p) = self.pos {
            self.bus
                .clock_seen_ms
                .fetch_max(p.clock_seen_ms, Ordering::AcqRel);
            // Only a clock that went back since needs the margin: otherwise every
            // response received just after the start would count as stale too.
            if p.clock_seen_ms > unix_ms(self.ctx.clock.now()) {
                self.bus.clock_floor_ms.fetch_max(
                    p.clock_seen_ms.saturating_add(CLOCK_SAVE_MARGIN_MS),
                    Ordering::AcqRel,
                );
            }
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
            self.save_clock().await;
            let sent = Instant::now();
            match self.one_read().await {
                Ok(Some(n)) => {
                    self.bus.stats.up.store(true, Ordering::Relaxed);
                    if n < BATCH {
                        self.bus.live.ok(sent);
                    }
                }
                // A new incarnation: the next turn's check handles the gap.
                Ok(None) => connected = false,
                Err(e) => {
                    connected = false;
                    self.down(&e).await;
                }
            }
        }
    }

    /// One turn: the sign-out table again if the node is back from being cut
    /// off, the log's incarnation, then one batch; `None` when the incarnation
    /// changed.
    async fn one_read(&mut self) -> redis::RedisResult<Option<usize>> {
        if self.bus.live.readopt.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.adopt_sign_outs().await {
                self.bus.live.readopt.store(true, Ordering::Release);
                return Err(e);
            }
        }
        let at = self.stamp();
        let (inc, _) = self.bus.incarnation(&mut self.conn, at).await?;
        if inc != at.incarnation {
            return Ok(None);
        }
        self.read_batch(Some(BLOCK)).await.map(Some)
    }

    /// Saves the position when the clock's latest reading moved on by a second
    /// since it was saved (see [`CLOCK_SAVE_MARGIN_MS`]).
    async fn save_clock(&mut self) {
        let seen = self.bus.clock_seen_ms.load(Ordering::Acquire);
        if let Some(p) = self.pos {
            if seen > p.clock_seen_ms.saturating_add(1_000) {
                self.pos = Some(Position {
                    clock_seen_ms: seen,
                    ..p
                });
                self.save(p).await;
            }
        }
    }

    fn stamp(&self) -> Stamp {
        self.pos.map_or_else(Stamp::default, |p| Stamp {
            incarnation: p.incarnation,
            id: p.applied,
        })
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
        let at = self.stamp();
        let (inc, last) = self.bus.incarnation(&mut self.conn, at).await?;
        let info = stream_info(&mut self.conn, &self.bus.stream).await?;
        let why = match self.pos {
            None => (self.ctx.store_entries() > 0)
                .then_some("no saved position beside a volume that holds responses"),
            Some(p) if p.incarnation != inc => Some(
                "the log is a new incarnation (Redis lost the stream, or its ids went backwards)",
            ),
            Some(p) => info
                .lost_after(p.applied)
                .then_some("the log was trimmed past this node's position"),
        };
        let mut pos = match self.pos {
            Some(p) if p.incarnation == inc => p,
            // Everything before the head of a new incarnation is covered by the
            // revalidation below (and the sign-out table read above).
            Some(p) => Position {
                applied: last,
                incarnation: inc,
                ..p
            },
            None => Position {
                applied: last,
                stale_before_ms: 0,
                incarnation: inc,
                clock_seen_ms: 0,
            },
        };
        if let Some(why) = why {
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
        let ms = revalidation_instant(&self.bus, &self.ctx);
        pos.stale_before_ms = pos.stale_before_ms.max(ms);
        self.ctx
            .stale_everything_before(UNIX_EPOCH + Duration::from_millis(ms));
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
            Some(entry) if entry.node == self.bus.node && self.own(id).await => {}
            Some(wire::Entry {
                op: Op::Targets(inv),
                ..
            }) => {
                let ctx = self.ctx.clone();
                let _ = tokio::task::spawn_blocking(move || quire_server::purge::apply(&ctx, &inv))
                    .await;
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

    /// Whether this node appended `id` and applied it itself, asked under the
    /// lock the append holds until it has recorded the id (see `crate::bus`).
    async fn own(&self, id: StreamId) -> bool {
        let _appending = self.bus.appending.lock().await;
        self.bus.take_own(id)
    }

    async fn save(&self, mut pos: Position) {
        pos.clock_seen_ms = self.bus.clock_seen_ms.load(Ordering::Acquire);
        if let Err(e) = position::save(&self.path, &pos) {
            tracing::warn!(error = %e, path = %self.path.display(), "cluster: the position could not be saved");
        }
        let at = Stamp {
            incarnation: pos.incarnation,
            id: pos.applied,
        };
        self.bus.applied_up_to(at);
        let _ = self.bus.ack(at).await;
    }
}

/// Reception times up to this far past the last saved clock reading may be in
/// the store after a crash (the reading is saved at least every second while the
/// reader turns, a turn lasts a few seconds at most, and exactly at a clean stop).
/// Added only when the clock now reads before the saved reading.
const CLOCK_SAVE_MARGIN_MS: u64 = 10_000;

/// The instant before which "everything held" was received, on the clock the
/// store's reception times are on (this node's, compared with nothing else's):
/// now, or the latest reading of that clock if it has gone back since (a clock
/// corrected after running ahead, before or since a restart), so a revalidation
/// never misses a response stored while the clock was ahead.
fn revalidation_instant(bus: &RedisBus, ctx: &Ctx) -> u64 {
    let now = unix_ms(ctx.clock.now());
    bus.clock_seen_ms.fetch_max(now, Ordering::AcqRel);
    now.max(bus.clock_seen_ms.load(Ordering::Acquire))
        .max(bus.clock_floor_ms.load(Ordering::Acquire))
}

fn unix_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// How often the watcher looks at the reader.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Watches whether this node reads the log (see the module doc) until `bus` is
/// dropped: past `CUT_OFF_MS` without a read that reached the head, every response
/// held is stale on every use and `sessions` are suspended; once a read
/// reaches the head again, the reader reads the sign-out table again.
pub(crate) fn watch(bus: &Arc<RedisBus>, ctx: &Arc<Ctx>, sessions: Option<Arc<dyn SignOutTable>>) {
    let weak = Arc::downgrade(bus);
    let ctx = Arc::downgrade(ctx);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            let (Some(bus), Some(ctx)) = (weak.upgrade(), ctx.upgrade()) else {
                return;
            };
            bus.clock_seen_ms
                .fetch_max(unix_ms(ctx.clock.now()), Ordering::AcqRel);
            let live = &bus.live;
            if live.since_ok() > Duration::from_millis(CUT_OFF_MS) {
                if !live.cut_off.swap(true, Ordering::AcqRel) {
                    tracing::warn!("cluster: the log has not been read for {CUT_OFF_MS} ms: everything is revalidated and no session cookie is honoured until this node catches up");
                    bus.stats.cut_offs.fetch_add(1, Ordering::Relaxed);
                    if let Some(s) = &sessions {
                        s.suspend();
                    }
                }
                // Nothing is fresh until a read reaches the head again; the instant
                // (kept in the position file) makes what was held before the cut
                // revalidate once after it too.
                ctx.revalidate_every_use(true);
                let ms = revalidation_instant(&bus, &ctx);
                ctx.stale_everything_before(UNIX_EPOCH + Duration::from_millis(ms));
            } else if live.cut_off.load(Ordering::Acquire) {
                // Sessions first: the reader reads the table before the flag clears
                // for peer fill; cookies stay refused until it has.
                live.readopt.store(true, Ordering::Release);
                live.cut_off.store(false, Ordering::Release);
                ctx.revalidate_every_use(false);
                tracing::info!("cluster: the log is read again");
            }
        }
    });
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
