//! The fill path's registry: one origin request per key however many clients miss at
//! once, its response shared by all of them and committed to the store as soon as it
//! ends.
//!
//! A [`Fill`] is registered under the key its record will be stored at. The first
//! miss creates it and spawns [`crate::fill::miss::run`], which fetches from the origin,
//! detached from any one client. Later misses for the same key [`Fills::join`] it and
//! are woken — not polled — when there is something to answer with.
//!
//! A fill's life, as its waiters see it ([`Fill::outcome_now`]):
//!
//! ```text
//! Waiting ──head──▶ Streaming ──body ends──▶ Committing ──▶ Stored
//!    │                 │   (storable: joiners wait)    └──▶ NotStored (replay)
//!    │                 └── not storable / over the limit / past the deadline:
//!    │                     a pass-through for the waiters it has (slot released,
//!    │                     unregistered, later misses fetch for themselves)
//!    └──▶ Revalidated (304) | Failed
//! ```
//!
//! A response whose body is at hand with its head skips `Streaming`: the fill
//! commits it first, so even its first waiters are answered from the store (304s,
//! ranges, `Cache-Status: stored`).
//!
//! Key decisions:
//! - **A request that starts after a response ended is answered from the store**:
//!   joiners of a fill whose body is complete wait for the commit (milliseconds:
//!   identity and gzip only, see `crate::fill::miss`) instead of replaying the buffer.
//! - **Slots are for fills, not for pass-throughs.** `limits.fills` counts fills that
//!   will store; a fill that turns out not storable releases its slot at once and
//!   leaves the registry. One client may lead at most `limits.fills_per_client`. A
//!   miss that finds no slot is passed to the origin uncoalesced, never refused: a
//!   client that fills every slot costs others coalescing, not answers.
//! - **An abandoned fill is cancelled**: every waiter holds an [`Attach`] guard (in
//!   its ticket, then in its response body); when the last one drops, the fill task
//!   is woken and stops reading the origin. Background revalidations have no waiter
//!   and are exempt (the deadline bounds them).
//! - **Bounded memory.** A fill keeps its chunks only up to the object limit (each
//!   waiter's channel shares them); past it, a waiter that lags more than
//!   [`LAG_BYTES_MAX`] behind is cut off rather than buffered for.
//! - **Invalidations win** (see [`crate::cache::invalidate`]): a joiner never joins a fill
//!   that a purge logged after the fill started has matched; the fill is replaced in
//!   the registry instead (see [`Fills::join`] for why that one check suffices).
//! - **The registry lock covers a map operation only**, never I/O; hits never touch
//!   it. Each fill's own state lock covers pushing a chunk to its waiters.
//! - Waiters are matched on `Vary` by the caller (RFC 9111 §4.1).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use quire_http::key::VaryFields;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::cache::invalidate::{Invalidations, Tags, Verdict};
use crate::cache::object::{self, ObjectRecord};
use crate::error::{Fault, Side};
use crate::upstream::error::{FailureKind, OriginError};

/// Bytes a waiter may fall behind a fill that no longer keeps its body (too large
/// to store, or not storable) before it is cut off: a client that stops reading must
/// not make quire buffer an endless origin body for it.
pub(crate) const LAG_BYTES_MAX: usize = 4 << 20;

/// One event of a fill, as each waiter receives it.
#[derive(Debug, Clone)]
pub enum Chunk {
    /// The next bytes.
    Data(Bytes),
    /// The body stopped short: the waiter's response is cut here.
    Failed(BodyCut),
}

/// Why a fill's body stopped before its end, as its waiters are told: each one's
/// response is cut there, so a client never takes a truncated body for a whole one.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BodyCut {
    /// Every waiter left, and the fill stopped reading the origin.
    #[error("every client left")]
    Abandoned,
    /// No chunk came within the read timeout.
    #[error("origin body timed out")]
    Timeout,
    /// The origin's body failed (a reset, bad framing).
    #[error("origin body failed: {0}")]
    Failed(Arc<dyn std::error::Error + Send + Sync>),
    /// This waiter fell more than [`LAG_BYTES_MAX`] behind a body the fill no
    /// longer keeps.
    #[error("client too slow")]
    TooSlow,
}

/// The head has gone out by the time a body is cut, so nothing is tried again: a
/// later request fetches anew.
impl Fault for BodyCut {
    fn side(&self) -> Side {
        match self {
            BodyCut::Abandoned | BodyCut::TooSlow => Side::Downstream,
            BodyCut::Timeout | BodyCut::Failed(_) => Side::Upstream,
        }
    }

    fn retry(&self) -> bool {
        false
    }
}

/// The response head a fill received, as waiters see it.
#[derive(Debug)]
pub struct Head {
    /// Origin status.
    pub status: StatusCode,
    /// Origin headers, hop-by-hop fields removed.
    pub headers: HeaderMap,
    /// When the request went out and the head came back.
    pub request_time: SystemTime,
    /// When the head came back.
    pub response_time: SystemTime,
    /// Whether the response will be stored, or why not (`Cache-Status` detail).
    pub store: Result<(), &'static str>,
    /// The response's `Vary`.
    pub vary: VaryFields,
    /// The variant key the fill's own request selects (empty when `vary` is empty).
    pub variant_key: Vec<u8>,
    /// The tags the response will be stored under (URL, directories, surrogate
    /// keys), as the invalidation log matches them.
    pub tags: Tags,
}

/// What a waiter gets.
#[derive(Debug)]
pub enum Outcome {
    /// A response to stream: its head and the body (replayed from the start).
    Response {
        /// The head.
        head: Arc<Head>,
        /// Why it is not (going to be) stored, when that is known.
        not_stored: Option<&'static str>,
        /// The body.
        body: FillBody,
    },
    /// The response is committed as the record with this id: answer from the
    /// store (if the entry there is still that record).
    Stored(Arc<Head>, u64),
    /// The stored response was revalidated (304): serve this refreshed record.
    Revalidated(Arc<ObjectRecord>),
    /// The origin failed.
    Failed(Arc<OriginError>),
    /// The body outgrew the buffer (or the fill became a pass-through) before this
    /// waiter joined: fetch for yourself.
    Refused,
}

/// Terminal outcomes late joiners can be given again.
#[derive(Debug, Clone)]
enum Late {
    Revalidated(Arc<ObjectRecord>),
    Failed(Arc<OriginError>),
}

/// Where the body's commit stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Commit {
    /// Not decided: streaming, or not storable.
    #[default]
    None,
    /// The body is complete and being stored: joiners wait.
    Pending,
    /// Stored as the record with this id, or declined (the `Cache-Status` detail
    /// saying why).
    Done(Result<u64, &'static str>),
}

/// One waiter's channel and how many bytes sit in it unread.
#[derive(Debug)]
struct Sub {
    tx: mpsc::UnboundedSender<Chunk>,
    queued: Arc<AtomicUsize>,
}

#[derive(Debug, Default)]
struct State {
    head: Option<Arc<Head>>,
    late: Option<Late>,
    chunks: Vec<Bytes>,
    buffered_bytes: u64,
    /// Every chunk so far is in `chunks`.
    buffering: bool,
    /// The body ended (well or not); `Some(Err)` carries the failure.
    finished: Option<Result<(), BodyCut>>,
    commit: Commit,
    subs: Vec<Sub>,
    head_waiters: Vec<oneshot::Sender<Outcome>>,
}

/// One fill in flight.
#[derive(Debug)]
pub struct Fill {
    state: Mutex<State>,
    limit: u64,
    /// The invalidation log's position when the fill started.
    start: u64,
    /// The URL's tags, all a fill has before its response names surrogate keys.
    url_tags: Tags,
    /// No waiter: a background revalidation, never cancelled for lack of waiters.
    detached: bool,
    /// Waiters holding an [`Attach`].
    attached: AtomicUsize,
    abandoned: Notify,
    /// The client this fill's slot is counted against, while it holds one.
    slot: Mutex<Option<IpAddr>>,
}

/// A waiter's hold on a fill: the fill is abandoned when the last one drops.
#[derive(Debug)]
pub(crate) struct Attach(Arc<Fill>);

impl Drop for Attach {
    fn drop(&mut self) {
        if self.0.attached.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.abandoned.notify_one();
        }
    }
}

/// A fill's body as one waiter receives it.
#[derive(Debug)]
pub struct FillBody {
    rx: mpsc::UnboundedReceiver<Chunk>,
    queued: Arc<AtomicUsize>,
    _attach: Option<Attach>,
}

impl FillBody {
    /// The next chunk (`None` at the end).
    pub fn poll_recv(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Chunk>> {
        let p = self.rx.poll_recv(cx);
        if let std::task::Poll::Ready(Some(Chunk::Data(b))) = &p {
            self.queued.fetch_sub(b.len(), Ordering::AcqRel);
        }
        p
    }
}

impl Fill {
    fn new(new: &NewFill, detached: bool) -> Fill {
        Fill {
            state: Mutex::new(State::default()),
            limit: new.limit,
            start: new.start,
            url_tags: new.tags.clone(),
            detached,
            attached: AtomicUsize::new(0),
            abandoned: Notify::new(),
            slot: Mutex::new(Some(new.client)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The invalidation log's position when the fill started.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// The tags of what the fill fetched, as far as it knows them: the response's
    /// (or the revalidated record's) once it has one, the URL's before.
    fn tags_now(&self) -> Tags {
        let st = self.lock();
        match (&st.late, &st.head) {
            (Some(Late::Revalidated(r)), _) => {
                Tags::new(&object::record_tags(&r.url, &r.meta.tags), true)
            }
            (_, Some(h)) => h.tags.clone(),
            _ => self.url_tags.clone(),
        }
    }

    /// A waiter's outcome given the state now, or `None` while there is nothing to
    /// answer with yet (no head, or a complete body being committed).
    fn outcome_now(st: &mut State) -> Option<Outcome> {
        if let Some(late) = &st.late {
            return Some(match late {
                Late::Revalidated(r) => Outcome::Revalidated(r.clone()),
                Late::Failed(e) => Outcome::Failed(e.clone()),
            });
        }
        let head = st.head.clone()?;
        match st.commit {
            Commit::Pending => return None,
            Commit::Done(Ok(id)) => return Some(Outcome::Stored(head, id)),
            Commit::None | Commit::Done(Err(_)) => {}
        }
        let not_stored = match st.commit {
            Commit::Done(Err(why)) => Some(why),
            _ => head.store.err(),
        };
        if !st.buffering {
            return Some(Outcome::Refused);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        for c in &st.chunks {
            queued.fetch_add(c.len(), Ordering::AcqRel);
            let _ = tx.send(Chunk::Data(c.clone()));
        }
        match &st.finished {
            None => st.subs.push(Sub {
                tx,
                queued: queued.clone(),
            }),
            Some(Ok(())) => {}
            Some(Err(why)) => {
                let _ = tx.send(Chunk::Failed(why.clone()));
            }
        }
        Some(Outcome::Response {
            head,
            not_stored,
            body: FillBody {
                rx,
                queued,
                _attach: None,
            },
        })
    }

    fn wake_waiters(st: &mut State) {
        for w in std::mem::take(&mut st.head_waiters) {
            match Fill::outcome_now(st) {
                Some(o) => {
                    let _ = w.send(o);
                }
                None => st.head_waiters.push(w),
            }
        }
    }

    /// Publishes the head: every waiter gets its channel and the body streams.
    pub fn publish_head(&self, head: Head) {
        let mut st = self.lock();
        st.head = Some(Arc::new(head));
        st.buffering = true;
        Fill::wake_waiters(&mut st);
    }

    /// Takes a head with its whole body (at hand at once) without waking anyone:
    /// the waiters are answered when [`Fill::committed`] says how it went.
    pub fn hold_complete(&self, head: Head, chunks: Vec<Bytes>) {
        let mut st = self.lock();
        st.head = Some(Arc::new(head));
        st.buffered_bytes = chunks.iter().map(|c| c.len() as u64).sum();
        st.chunks = chunks;
        st.buffering = true;
        st.finished = Some(Ok(()));
        st.commit = Commit::Pending;
    }

    /// Publishes how the commit went (the stored record's id): waiters are answered
    /// from the store, or (not stored) from the buffered body.
    pub fn committed(&self, stored: Result<u64, &'static str>) {
        let mut st = self.lock();
        st.commit = Commit::Done(stored);
        Fill::wake_waiters(&mut st);
    }

    /// Publishes a terminal outcome that has no body (304 merged, or failure).
    fn publish_late(&self, late: Late) {
        let mut st = self.lock();
        st.late = Some(late);
        Fill::wake_waiters(&mut st);
    }

    /// Publishes that the stored record was revalidated.
    pub fn publish_revalidated(&self, rec: Arc<ObjectRecord>) {
        self.publish_late(Late::Revalidated(rec));
    }

    /// Publishes an origin failure before any head.
    pub fn publish_failed(&self, e: OriginError) {
        self.publish_late(Late::Failed(Arc::new(e)));
    }

    /// Passes one body chunk to every waiter, keeping it while under the limit.
    /// Returns false once the body outgrew the limit (it will not be stored).
    pub fn push(&self, data: Bytes) -> bool {
        let mut st = self.lock();
        let buffering = st.buffering;
        st.subs.retain(|s| {
            let queued = s.queued.fetch_add(data.len(), Ordering::AcqRel) + data.len();
            if !buffering && queued > LAG_BYTES_MAX {
                let _ = s.tx.send(Chunk::Failed(BodyCut::TooSlow));
                return false;
            }
            s.tx.send(Chunk::Data(data.clone())).is_ok()
        });
        if st.buffering {
            st.buffered_bytes += data.len() as u64;
            if st.buffered_bytes > self.limit {
                st.buffering = false;
                st.chunks = Vec::new();
            } else {
                st.chunks.push(data);
            }
        }
        st.buffering
    }

    /// Stops keeping the body (it will not be stored): later joiners are refused,
    /// waiters already attached keep streaming.
    pub fn stop_buffering(&self) {
        let mut st = self.lock();
        st.buffering = false;
        st.chunks = Vec::new();
    }

    /// Ends the body for every waiter; `Err` cuts their responses. With `commit`,
    /// joiners from now on wait for [`Fill::committed`].
    pub fn finish(&self, result: Result<(), BodyCut>, commit: bool) {
        let mut st = self.lock();
        if let Err(why) = &result {
            for s in &st.subs {
                let _ = s.tx.send(Chunk::Failed(why.clone()));
            }
            st.buffering = false;
            st.chunks = Vec::new();
        } else if commit && st.buffering {
            st.commit = Commit::Pending;
        }
        st.subs.clear();
        st.finished = Some(result);
    }

    /// The whole body, if every chunk was kept. The chunks are coalesced in place,
    /// so from then on the fill holds the body once (not its chunks and a copy);
    /// waiters replayed later get it as one chunk.
    pub fn body(&self) -> Option<Bytes> {
        let mut st = self.lock();
        if !st.buffering {
            return None;
        }
        if st.chunks.len() > 1 {
            let mut v = Vec::with_capacity(usize::try_from(st.buffered_bytes).unwrap_or(0));
            for c in &st.chunks {
                v.extend_from_slice(c);
            }
            st.chunks = vec![Bytes::from(v)];
        }
        Some(st.chunks.first().cloned().unwrap_or_default())
    }

    /// Resolves once no waiter is attached (never, for a detached fill).
    pub async fn abandoned(&self) {
        if self.detached {
            return std::future::pending().await;
        }
        loop {
            let notified = self.abandoned.notified();
            if self.attached.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Whether this fill still holds a slot.
    pub fn holds_slot(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }
}

#[derive(Debug, Default)]
struct Registry {
    map: HashMap<Vec<u8>, Arc<Fill>>,
    slots_used: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// The registry of fills in flight, keyed by record key.
#[derive(Debug)]
pub struct Fills {
    reg: Mutex<Registry>,
    slots: usize,
    slots_per_client: usize,
}

/// A waiter's ticket: [`Ticket::outcome`] tells what to answer with.
#[derive(Debug)]
pub struct Ticket {
    /// Resolves once there is something to answer with.
    rx: oneshot::Receiver<Outcome>,
    /// True when this request joined a fill another request started.
    pub collapsed: bool,
    attach: Option<Attach>,
}

impl Ticket {
    /// Waits for what this waiter answers with. A response's body takes over this
    /// waiter's hold on the fill (the fill is abandoned when the body is dropped).
    pub async fn outcome(mut self) -> Outcome {
        let o = match (&mut self.rx).await {
            Ok(o) => o,
            Err(_) => Outcome::Failed(Arc::new(OriginError::failed(
                FailureKind::Abandoned,
                "fill aborted",
            ))),
        };
        match o {
            Outcome::Response {
                head,
                not_stored,
                mut body,
            } => {
                body._attach = self.attach.take();
                Outcome::Response {
                    head,
                    not_stored,
                    body,
                }
            }
            o => o,
        }
    }
}

/// What `join` tells the caller to do.
#[derive(Debug)]
pub enum Joined {
    /// A fill for the key was already running.
    Existing(Ticket),
    /// A new fill was registered: the caller must start [`crate::fill::miss::run`] on it.
    New(Arc<Fill>, Ticket),
    /// No slot (in all, or for this client): fetch without a fill.
    Busy,
}

/// What a new fill is: its buffer limit, its start in the invalidation log and the
/// tags known before the response, and the client it is counted against.
#[derive(Debug, Clone)]
pub struct NewFill {
    /// Largest body kept.
    pub limit: u64,
    /// The log position the fill starts at.
    pub start: u64,
    /// The URL's tags.
    pub tags: Tags,
    /// The client leading it.
    pub client: IpAddr,
}

impl Fills {
    /// A registry allowing `slots` fills at once, `slots_per_client` led by one
    /// client address.
    pub fn new(slots: usize, slots_per_client: usize) -> Fills {
        Fills {
            reg: Mutex::new(Registry::default()),
            slots,
            slots_per_client: slots_per_client.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.reg.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins the fill for `key`, or registers `new` when there is none, or when the
    /// one running was fetched before an invalidation that matches it.
    ///
    /// This check is the only one a waiter needs: it covers every invalidation
    /// logged before the request joined, with the widest tags the fill can still
    /// turn out to carry (before its head, every surrogate key). What the fill
    /// learns later only narrows them, so a check when the outcome arrives could
    /// never find more.
    pub fn join(&self, key: &[u8], new: NewFill, inv: &Invalidations) -> Joined {
        let mut reg = self.lock();
        let arrived = inv.now();
        if let Some(f) = reg.map.get(key) {
            let f = f.clone();
            if inv.between(f.start, arrived, &f.tags_now()) == Verdict::Clean {
                return Joined::Existing(Fills::ticket(&f, true));
            }
            // The fill in flight may carry bytes from before the invalidation:
            // later requests get a fill of their own (the old one finishes for its
            // waiters and is stored at most stale, see `crate::cache::invalidate`).
            reg.map.remove(key);
        }
        let Some(f) = Fills::take_slot(&mut reg, self, &new, false) else {
            return Joined::Busy;
        };
        reg.map.insert(key.to_vec(), f.clone());
        drop(reg);
        let t = Fills::ticket(&f, false);
        Joined::New(f, t)
    }

    fn take_slot(
        reg: &mut Registry,
        fills: &Fills,
        new: &NewFill,
        detached: bool,
    ) -> Option<Arc<Fill>> {
        let mine = reg.per_client.get(&new.client).copied().unwrap_or(0);
        if reg.slots_used >= fills.slots || mine >= fills.slots_per_client {
            return None;
        }
        reg.slots_used += 1;
        *reg.per_client.entry(new.client).or_insert(0) += 1;
        Some(Arc::new(Fill::new(new, detached)))
    }

    fn ticket(f: &Arc<Fill>, collapsed: bool) -> Ticket {
        f.attached.fetch_add(1, Ordering::AcqRel);
        let attach = Some(Attach(f.clone()));
        let (tx, rx) = oneshot::channel();
        let mut st = f.lock();
        match Fill::outcome_now(&mut st) {
            Some(o) => {
                let _ = tx.send(o);
            }
            None => st.head_waiters.push(tx),
        }
        Ticket {
            rx,
            collapsed,
            attach,
        }
    }

    /// Registers a new fill with no waiter (background revalidation), or `None` when
    /// one is running already or there is no slot.
    pub fn start_detached(&self, key: &[u8], new: NewFill) -> Option<Arc<Fill>> {
        let mut reg = self.lock();
        if reg.map.contains_key(key) {
            return None;
        }
        let f = Fills::take_slot(&mut reg, self, &new, true)?;
        reg.map.insert(key.to_vec(), f.clone());
        Some(f)
    }

    fn unregister(reg: &mut Registry, key: &[u8], fill: &Arc<Fill>) {
        if reg.map.get(key).is_some_and(|f| Arc::ptr_eq(f, fill)) {
            reg.map.remove(key);
        }
    }

    fn release(reg: &mut Registry, fill: &Fill) {
        let Some(client) = fill.slot.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        reg.slots_used -= 1;
        if let Some(n) = reg.per_client.get_mut(&client) {
            *n -= 1;
            if *n == 0 {
                reg.per_client.remove(&client);
            }
        }
    }

    /// Turns `fill` into a pass-through for the waiters it has: it leaves the
    /// registry (later misses start their own) and gives its slot back.
    pub fn pass_through(&self, key: &[u8], fill: &Arc<Fill>) {
        fill.stop_buffering();
        let mut reg = self.lock();
        Fills::unregister(&mut reg, key, fill);
        Fills::release(&mut reg, fill);
    }

    /// Unregisters `fill` if no waiter is attached (none can attach afterwards);
    /// returns whether it did. The caller then stops the fill.
    pub fn cancel_if_abandoned(&self, key: &[u8], fill: &Arc<Fill>) -> bool {
        let mut reg = self.lock();
        if fill.detached || fill.attached.load(Ordering::Acquire) != 0 {
            return false;
        }
        Fills::unregister(&mut reg, key, fill);
        Fills::release(&mut reg, fill);
        true
    }

    /// Unregisters the fill for `key` (its record is stored, or it will not be) and
    /// gives its slot back. Waiters still pending get `Failed`.
    pub fn done(&self, key: &[u8], fill: &Arc<Fill>) {
        {
            let mut reg = self.lock();
            Fills::unregister(&mut reg, key, fill);
            Fills::release(&mut reg, fill);
        }
        let mut st = fill.lock();
        if st.commit == Commit::Pending {
            st.commit = Commit::Done(Err("store-failed"));
        }
        if st.head.is_none() && st.late.is_none() {
            st.late = Some(Late::Failed(Arc::new(OriginError::failed(
                FailureKind::Abandoned,
                "fill ended without a response",
            ))));
        }
        Fill::wake_waiters(&mut st);
    }

    /// Fills registered now (pass-throughs they turned into are not counted).
    pub fn in_flight(&self) -> usize {
        self.lock().map.len()
    }

    /// Slots held now.
    pub fn slots_used(&self) -> usize {
        self.lock().slots_used
    }
}

/// How reading a fill's body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyEnd {
    /// Complete, and every chunk kept (it can be stored).
    Kept,
    /// Outgrew the buffer: streamed to its waiters as a pass-through, not kept.
    TooLarge,
    /// Still arriving at the deadline: streamed on as a pass-through, not kept.
    PastDeadline,
    /// The origin failed or timed out (waiters' responses were cut).
    Failed,
    /// Every waiter left; the fill was stopped.
    Abandoned,
}

/// What bounds a fill's body read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadLimits {
    /// Longest gap between chunks.
    pub gap: std::time::Duration,
    /// When the fill stops holding a slot and becomes a pass-through.
    pub deadline: tokio::time::Instant,
}

/// Reads an origin body into `fill` (registered under `key` in `fills`), each chunk
/// within `limits.gap`. Past `limits.deadline`, or once the body outgrows the
/// buffer, the fill becomes a pass-through (its waiters keep streaming). When every
/// waiter has left, it stops. A body that ends with `commit` set and every chunk
/// kept leaves the fill in `Committing`.
pub(crate) async fn stream_body(
    fills: &Fills,
    key: &[u8],
    fill: &Arc<Fill>,
    mut body: crate::upstream::UpBody,
    limits: ReadLimits,
    commit: bool,
) -> BodyEnd {
    // Why the body stopped being kept, once it did.
    let mut dropped: Option<BodyEnd> = None;
    let deadline = tokio::time::sleep_until(limits.deadline);
    tokio::pin!(deadline);
    loop {
        let frame = tokio::select! {
            f = tokio::time::timeout(limits.gap, body.frame()) => f,
            () = fill.abandoned() => {
                if fills.cancel_if_abandoned(key, fill) {
                    fill.finish(Err(BodyCut::Abandoned), false);
                    return BodyEnd::Abandoned;
                }
                tokio::task::yield_now().await;
                continue;
            }
            () = &mut deadline, if dropped.is_none() && fill.holds_slot() => {
                dropped = Some(BodyEnd::PastDeadline);
                fills.pass_through(key, fill);
                continue;
            }
        };
        match frame {
            Err(_) => {
                fill.finish(Err(BodyCut::Timeout), false);
                return BodyEnd::Failed;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                fill.finish(Err(BodyCut::Failed(Arc::from(e))), false);
                return BodyEnd::Failed;
            }
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if !data.is_empty() && !fill.push(data) && dropped.is_none() {
                        dropped = Some(BodyEnd::TooLarge);
                        fills.pass_through(key, fill);
                    }
                }
            }
        }
    }
    fill.finish(Ok(()), commit && dropped.is_none());
    dropped.unwrap_or(BodyEnd::Kept)
}

#[cfg(test)]
mod tests;
