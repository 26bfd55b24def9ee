//! The fill path: one origin request per key however many clients miss at once, its
//! response streamed to all of them while it is stored.
//!
//! A [`Fill`] is registered under the key its record will be stored at. The first
//! miss creates it and spawns [`run`], which fetches from the origin, detached from
//! any one client (a leader that hangs up does not abort the others or the store).
//! Later misses for the same key [`Fills::join`] it and are woken — not polled — when
//! the head arrives: each gets its own channel, first replayed the chunks already
//! received, then fed new ones as they come.
//!
//! Key decisions:
//! - **The registry lock covers a map insert or remove only**, never I/O; hits never
//!   touch it. Each fill's own state lock covers pushing a chunk to its waiters.
//! - **Bounded memory.** A fill keeps its chunks (every waiter needs them from the
//!   start, and the store needs the whole body) only up to the object limit; a body
//!   that outgrows it is streamed on to the waiters already attached, dropped from
//!   memory, not stored, and later joiners are told to fetch for themselves.
//! - **The fill stays registered until its record is in the store**, so a request
//!   arriving between the last byte and the store write joins the fill (and replays
//!   its buffer) instead of sending a second request to the origin.
//! - Waiters are matched on `Vary`: a waiter whose selecting fields differ from what
//!   the fill sent the origin does not take its response (RFC 9111 §4.1).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use quire_http::key::VaryFields;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::body::Chunk;
use crate::object::ObjectRecord;
use crate::origin::OriginError;

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
    /// Whether the response is being stored, or why not (`Cache-Status` detail).
    pub store: Result<(), &'static str>,
    /// The response's `Vary`.
    pub vary: VaryFields,
    /// The variant key the fill's own request selects (empty when `vary` is empty).
    pub variant_key: Vec<u8>,
}

/// What a waiter gets once the origin answered.
#[derive(Debug)]
pub enum Outcome {
    /// A response: its head and the body as it streams.
    Response {
        /// The head.
        head: Arc<Head>,
        /// The body.
        body: mpsc::UnboundedReceiver<Chunk>,
    },
    /// The stored response was revalidated (304): serve this refreshed record.
    Revalidated(Arc<ObjectRecord>),
    /// The origin failed.
    Failed(Arc<OriginError>),
    /// The body outgrew the buffer before this waiter joined: fetch for yourself.
    Refused,
}

/// Terminal outcomes late joiners can be given again.
#[derive(Debug, Clone)]
enum Late {
    Revalidated(Arc<ObjectRecord>),
    Failed(Arc<OriginError>),
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
    finished: Option<Result<(), String>>,
    subs: Vec<mpsc::UnboundedSender<Chunk>>,
    head_waiters: Vec<oneshot::Sender<Outcome>>,
}

/// One fill in flight.
#[derive(Debug)]
pub struct Fill {
    state: Mutex<State>,
    limit: u64,
}

impl Fill {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A waiter's outcome given the state now, or `None` while the head is pending.
    fn outcome_now(st: &mut State) -> Option<Outcome> {
        if let Some(late) = &st.late {
            return Some(match late {
                Late::Revalidated(r) => Outcome::Revalidated(r.clone()),
                Late::Failed(e) => Outcome::Failed(e.clone()),
            });
        }
        let head = st.head.clone()?;
        if !st.buffering {
            return Some(Outcome::Refused);
        }
        let (tx, rx) = mpsc::unbounded_channel();
        for c in &st.chunks {
            let _ = tx.send(Chunk::Data(c.clone()));
        }
        match &st.finished {
            None => st.subs.push(tx),
            Some(Ok(())) => {}
            Some(Err(why)) => {
                let _ = tx.send(Chunk::Failed(why.clone()));
            }
        }
        Some(Outcome::Response { head, body: rx })
    }

    /// Publishes the head: every waiter gets its channel.
    pub fn publish_head(&self, head: Head) {
        let mut st = self.lock();
        st.head = Some(Arc::new(head));
        st.buffering = true;
        for w in std::mem::take(&mut st.head_waiters) {
            if let Some(o) = Fill::outcome_now(&mut st) {
                let _ = w.send(o);
            }
        }
    }

    /// Publishes a terminal outcome that has no body (304 merged, or failure).
    fn publish_late(&self, late: Late) {
        let mut st = self.lock();
        st.late = Some(late);
        for w in std::mem::take(&mut st.head_waiters) {
            if let Some(o) = Fill::outcome_now(&mut st) {
                let _ = w.send(o);
            }
        }
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
        st.subs
            .retain(|s| s.send(Chunk::Data(data.clone())).is_ok());
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

    /// Ends the body for every waiter; `Err` cuts their responses.
    pub fn finish(&self, result: Result<(), String>) {
        let mut st = self.lock();
        if let Err(why) = &result {
            for s in &st.subs {
                let _ = s.send(Chunk::Failed(why.clone()));
            }
            st.buffering = false;
            st.chunks = Vec::new();
        }
        st.subs.clear();
        st.finished = Some(result);
    }

    /// The whole body, if every chunk was kept.
    pub fn body(&self) -> Option<Bytes> {
        let st = self.lock();
        if !st.buffering {
            return None;
        }
        Some(match st.chunks.len() {
            0 => Bytes::new(),
            1 => st.chunks[0].clone(),
            _ => {
                let mut v = Vec::with_capacity(st.buffered_bytes as usize);
                for c in &st.chunks {
                    v.extend_from_slice(c);
                }
                Bytes::from(v)
            }
        })
    }
}

/// The registry of fills in flight, keyed by record key.
#[derive(Debug)]
pub struct Fills {
    map: Mutex<HashMap<Vec<u8>, Arc<Fill>>>,
    permits: Arc<Semaphore>,
}

/// A waiter's ticket: the outcome arrives on `rx`.
#[derive(Debug)]
pub struct Ticket {
    /// Resolves once the origin answered (or the fill could not start).
    pub rx: oneshot::Receiver<Outcome>,
    /// True when this request joined a fill another request started.
    pub collapsed: bool,
}

/// What `join` tells the caller to do.
#[derive(Debug)]
pub enum Joined {
    /// A fill for the key was already running.
    Existing(Ticket),
    /// A new fill was registered: the caller must start [`run`]-like work on it and
    /// then call [`Fills::done`].
    New(Arc<Fill>, Ticket),
    /// Too many fills in flight.
    Busy,
}

impl Fills {
    /// A registry allowing `max_in_flight` fills at once.
    pub fn new(max_in_flight: usize) -> Fills {
        Fills {
            map: Mutex::new(HashMap::new()),
            permits: Arc::new(Semaphore::new(max_in_flight)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Arc<Fill>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins the fill for `key`, registering a new one (limited to `limit` buffered
    /// bytes) when there is none. A new fill holds one in-flight permit until
    /// [`Fills::done`].
    pub fn join(&self, key: &[u8], limit: u64) -> Joined {
        let mut map = self.lock();
        if let Some(f) = map.get(key) {
            let f = f.clone();
            drop(map);
            return Joined::Existing(Ticket {
                rx: Fills::wait_on(&f),
                collapsed: true,
            });
        }
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            return Joined::Busy;
        };
        // The permit is released in `done`.
        permit.forget();
        let f = Arc::new(Fill {
            state: Mutex::new(State::default()),
            limit,
        });
        map.insert(key.to_vec(), f.clone());
        drop(map);
        let rx = Fills::wait_on(&f);
        Joined::New(
            f,
            Ticket {
                rx,
                collapsed: false,
            },
        )
    }

    /// Registers a new fill with no waiter (background revalidation), or `None` when
    /// one is running already or the limit is reached.
    pub fn start_detached(&self, key: &[u8], limit: u64) -> Option<Arc<Fill>> {
        let mut map = self.lock();
        if map.contains_key(key) {
            return None;
        }
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        permit.forget();
        let f = Arc::new(Fill {
            state: Mutex::new(State::default()),
            limit,
        });
        map.insert(key.to_vec(), f.clone());
        Some(f)
    }

    fn wait_on(f: &Fill) -> oneshot::Receiver<Outcome> {
        let (tx, rx) = oneshot::channel();
        let mut st = f.lock();
        match Fill::outcome_now(&mut st) {
            Some(o) => {
                let _ = tx.send(o);
            }
            None => st.head_waiters.push(tx),
        }
        rx
    }

    /// Unregisters the fill for `key` (its record is stored, or it will not be) and
    /// returns its permit. Waiters still pending on a head get `Failed`.
    pub fn done(&self, key: &[u8], fill: &Arc<Fill>) {
        let removed = {
            let mut map = self.lock();
            match map.get(key) {
                Some(f) if Arc::ptr_eq(f, fill) => map.remove(key),
                _ => None,
            }
        };
        if removed.is_some() {
            self.permits.add_permits(1);
        }
        let mut st = fill.lock();
        if st.head.is_none() && st.late.is_none() {
            st.late = Some(Late::Failed(Arc::new(OriginError::Failed(
                "fill ended without a response".into(),
            ))));
            for w in std::mem::take(&mut st.head_waiters) {
                if let Some(o) = Fill::outcome_now(&mut st) {
                    let _ = w.send(o);
                }
            }
        }
    }

    /// Fills in flight now.
    pub fn in_flight(&self) -> usize {
        self.lock().len()
    }
}

/// Reads an origin body into `fill`, chunk by chunk, each within `timeout`. Returns
/// true when the whole body was kept (the response can be stored).
pub async fn stream_body(
    fill: &Fill,
    mut body: crate::upstream::UpBody,
    timeout: std::time::Duration,
) -> bool {
    let mut kept = true;
    loop {
        match tokio::time::timeout(timeout, body.frame()).await {
            Err(_) => {
                fill.finish(Err("origin body timed out".into()));
                return false;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                fill.finish(Err(format!("origin body failed: {e}")));
                return false;
            }
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if !data.is_empty() {
                        kept = fill.push(data);
                    }
                }
            }
        }
    }
    fill.finish(Ok(()));
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head() -> Head {
        Head {
            status: StatusCode::OK,
            headers: HeaderMap::new(),
            request_time: SystemTime::now(),
            response_time: SystemTime::now(),
            store: Ok(()),
            vary: VaryFields::default(),
            variant_key: Vec::new(),
        }
    }

    async fn drain(mut rx: mpsc::UnboundedReceiver<Chunk>) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        while let Some(c) = rx.recv().await {
            match c {
                Chunk::Data(b) => out.extend_from_slice(&b),
                Chunk::Failed(w) => return Err(w),
            }
        }
        Ok(out)
    }

    #[tokio::test]
    async fn waiters_before_and_after_the_head_get_the_whole_body() {
        let fills = Fills::new(4);
        let Joined::New(fill, first) = fills.join(b"k", 1 << 20) else {
            panic!("first join must create the fill")
        };
        let Joined::Existing(second) = fills.join(b"k", 1 << 20) else {
            panic!("second join must collapse")
        };
        assert!(second.collapsed && !first.collapsed);
        fill.publish_head(head());
        fill.push(Bytes::from_static(b"hello "));
        let Joined::Existing(late) = fills.join(b"k", 1 << 20) else {
            panic!("still registered")
        };
        fill.push(Bytes::from_static(b"world"));
        fill.finish(Ok(()));
        assert_eq!(fill.body().as_deref(), Some(&b"hello world"[..]));
        fills.done(b"k", &fill);
        for t in [first, second, late] {
            let Outcome::Response { body, .. } = t.rx.await.unwrap() else {
                panic!("expected a response")
            };
            assert_eq!(drain(body).await.unwrap(), b"hello world");
        }
        assert_eq!(fills.in_flight(), 0);
        // A new fill can start after `done`.
        assert!(matches!(fills.join(b"k", 1), Joined::New(..)));
    }

    #[tokio::test]
    async fn bodies_over_the_limit_stream_on_but_refuse_late_joiners() {
        let fills = Fills::new(4);
        let Joined::New(fill, first) = fills.join(b"k", 8) else {
            panic!()
        };
        fill.publish_head(head());
        assert!(fill.push(Bytes::from_static(b"12345")));
        assert!(!fill.push(Bytes::from_static(b"67890")));
        let Joined::Existing(late) = fills.join(b"k", 8) else {
            panic!()
        };
        assert!(matches!(late.rx.await.unwrap(), Outcome::Refused));
        fill.finish(Ok(()));
        assert!(fill.body().is_none());
        let Outcome::Response { body, .. } = first.rx.await.unwrap() else {
            panic!()
        };
        assert_eq!(drain(body).await.unwrap(), b"1234567890");
    }

    #[tokio::test]
    async fn a_failure_mid_body_cuts_every_waiter() {
        let fills = Fills::new(4);
        let Joined::New(fill, first) = fills.join(b"k", 100) else {
            panic!()
        };
        fill.publish_head(head());
        fill.push(Bytes::from_static(b"part"));
        fill.finish(Err("reset".into()));
        let Outcome::Response { body, .. } = first.rx.await.unwrap() else {
            panic!()
        };
        assert_eq!(drain(body).await, Err("reset".to_string()));
        assert!(fill.body().is_none());
    }

    #[tokio::test]
    async fn the_in_flight_limit_holds_and_frees() {
        let fills = Fills::new(1);
        let Joined::New(fill, _t) = fills.join(b"a", 1) else {
            panic!()
        };
        assert!(matches!(fills.join(b"b", 1), Joined::Busy));
        fills.done(b"a", &fill);
        assert!(matches!(fills.join(b"b", 1), Joined::New(..)));
    }

    #[tokio::test]
    async fn waiters_of_a_fill_that_never_answered_are_failed() {
        let fills = Fills::new(2);
        let Joined::New(fill, t) = fills.join(b"a", 1) else {
            panic!()
        };
        fills.done(b"a", &fill);
        assert!(matches!(t.rx.await.unwrap(), Outcome::Failed(_)));
    }
}
