//! Repeat hits: a request head this worker thread has answered as a fresh hit
//! before is answered again without being parsed.
//!
//! A fresh hit's answer depends on the request head's bytes, on the connection (TLS
//! or not; from a trusted proxy or not), on the policy, on the store and on the
//! moment. Everything the head alone decides — the parse, the bypass and client
//! checks, the normalised URL and its keys, the coding its `Accept-Encoding` gets,
//! its `Cache-Control`, the outcome of its preconditions — is the
//! [`Recipe`] the fast path made the first time, kept here under the exact head
//! bytes and the connection's two flags. What may have changed since is asked again
//! on every use:
//! - the policy (a reload; or another server in the same process): a kept recipe
//!   names the policy it was made under, and is used only under that one (it holds
//!   the policy weakly, so its address cannot be reused by a later one);
//! - the URL's key version (a note edited, everything purged by epoch): asked again,
//!   and it must be the one the keys were made in;
//! - the store: the URL's key (and the variant key) is looked up again — which
//!   counts the hit for eviction and refill as any lookup does — and must still hold
//!   a record with the same identity ([`crate::cache::object::identity`]). A purge,
//!   a refill, a 304's new head or an eviction removes or replaces that record, so a
//!   repeat after it falls through to the full path, which sees the same store;
//! - the moment: freshness, refresh-ahead, `Age` and `ttl` are computed now, by
//!   the same [`fresh::serve`] the full path answers with.
//!
//! So an invalidation reaches a repeat exactly as it reaches the full path: through
//! the store and the key version, read after the purge.
//!
//! Signed-in readers' requests are never kept: the full path checks their session
//! on every request. Bounded: [`SLOTS`] recipes per worker thread, in sets of
//! [`WAYS`], heads up to [`HEAD_MAX`] bytes, and [`BYTES_MAX`] in all per worker
//! thread (past it the table is emptied: a client sending heads made to fill it
//! costs itself full-path hits, nobody memory).

use std::cell::RefCell;
use std::net::IpAddr;
use std::sync::{Arc, Weak};

use http::header;

use crate::edge::client::{Client, Peer};
use crate::http1::fresh::{self, Answer, Recipe};
use crate::http1::head::Plain;
use crate::policy::Policy;
use crate::state::Ctx;

/// The longest head kept (a browser's is under a kilobyte without cookies).
pub(crate) const HEAD_MAX: usize = 2048;

/// Recipes kept per worker thread (a power of two). [`BYTES_MAX`] is the bound
/// meant to bind (about 7,000 recipes: 2,000 of the peer corpus's held 2.3 MB,
/// `quire_fastpath_repeat_bytes`). Heads that hash to a full
/// set push one another out: with 4,096 slots in sets of [`WAYS`], 3.6 % of a
/// 2,000-page site's repeats missed and took the full path (a profile put that
/// path at 1.8 % of the worker's CPU); with 16,384, 0.03 %, and 0.3 % at 4,000
/// pages (`scripts/repeat-slots.py`, uniform requests). The sets, 64 bytes each,
/// take 256 KiB per worker.
pub(crate) const SLOTS: usize = 16384;

/// A recipe kept for a head, with what the access log and the rate limiter read
/// from the head.
///
/// What a repeat reads comes first, the recipe's URL and the access log's fields
/// last (`repr(C)` keeps the order), so that the hit loop asks the CPU for the
/// first [`HOT`] bytes only ([`prefetch_recipes`]): 520 of its 672 (and the
/// `Arc`'s 16), and none of the stored record's 736, since the recipe copies what
/// a repeat reads of it. It had asked for 1,440 bytes (23 lines) a repeat; now 536
/// (9).
#[repr(C)]
pub(crate) struct Kept {
    conn: u8,
    head: Box<[u8]>,
    policy: Weak<Policy>,
    /// The request's target (path and query).
    pub(crate) target: Box<str>,
    /// The client a trusted proxy named; `None` when the peer is the client.
    client: Option<IpAddr>,
    recipe: Recipe,
    pub(crate) user_agent: Option<Box<[u8]>>,
    pub(crate) referer: Option<Box<[u8]>>,
}

impl Kept {
    /// The client the request is from, on a connection from `peer`.
    pub(crate) fn client(&self, peer: Peer) -> IpAddr {
        self.client.unwrap_or_else(|| peer.addr.ip().to_canonical())
    }

    /// The request's method.
    pub(crate) fn method(&self) -> &'static str {
        self.recipe.method()
    }
}

/// The bytes of a [`Kept`] a repeat reads: up to its recipe's URL.
const HOT: usize = std::mem::offset_of!(Kept, recipe) + std::mem::offset_of!(Recipe, url);

const _: () = assert!(
    HOT < size_of::<Kept>() && std::mem::offset_of!(Kept, user_agent) >= HOT,
    "what a repeat does not read comes after what it does"
);

/// Most bytes a worker thread's recipes hold (heads, keys, URLs, log fields); past
/// it, all are let go and the table fills again.
pub(crate) const BYTES_MAX: usize = 8 << 20;

/// A worker thread's recipes.
struct Table {
    /// By head hash; empty until the first is kept.
    sets: Vec<Set>,
    /// What the recipes in `sets` hold ([`Kept::bytes`]).
    bytes: usize,
}

/// The [`WAYS`] slots a head's recipe may be kept in, with their heads' hashes
/// beside them: a look reads this one cache line, then only the recipe whose hash
/// matches (the recipes of 2,000 pages do not stay in the CPU's caches, and reading
/// each way's recipe to compare its hash cost a miss a way).
#[derive(Default, Clone)]
#[repr(align(64))]
struct Set {
    hashes: [u64; WAYS],
    kept: [Option<Arc<Kept>>; WAYS],
}

const _: () = assert!(std::mem::size_of::<Set>() == 64, "a set is one line");

thread_local! {
    static KEPT: RefCell<Table> = const {
        RefCell::new(Table {
            sets: Vec::new(),
            bytes: 0,
        })
    };
}

impl Table {
    /// Sets what the recipes hold, in the process-wide gauge too.
    fn set_bytes(&mut self, bytes: usize) {
        use std::sync::atomic::Ordering;
        let gauge = &crate::metrics::REPEAT_BYTES;
        gauge.fetch_add(bytes as u64, Ordering::Relaxed);
        gauge.fetch_sub(self.bytes as u64, Ordering::Relaxed);
        self.bytes = bytes;
    }
}

impl Drop for Table {
    /// A worker thread that ends takes its recipes out of the gauge.
    fn drop(&mut self) {
        self.set_bytes(0);
    }
}

impl Kept {
    /// About what this recipe holds on the heap.
    fn bytes(&self) -> usize {
        let r = &self.recipe;
        let field = |f: &Option<Box<[u8]>>| f.as_ref().map_or(0, |f| f.len());
        std::mem::size_of::<Kept>()
            + self.head.len()
            + self.target.len()
            + field(&self.user_agent)
            + field(&self.referer)
            + r.url.as_str().len()
            + r.fixed.bytes.len()
            + r.primary.0.len()
            + r.variant.as_ref().map_or(0, |(k, _)| k.len())
            + r.req_cc_bytes()
    }
}

/// The connection's part of a recipe's key: TLS, and a trusted proxy's.
fn conn_flags(peer: Peer, policy: &Policy) -> u8 {
    let trusted = &policy.trusted_proxies;
    let proxy = !trusted.is_empty() && trusted.contains(peer.addr.ip().to_canonical());
    u8::from(peer.tls) | u8::from(proxy) << 1
}

fn hash(head: &[u8], conn: u8) -> u64 {
    xxhash_rust::xxh3::xxh3_64(head) ^ u64::from(conn)
}

/// Ways per set: a head's recipe may be kept in any of the `WAYS` slots of its
/// set, so a few heads that hash alike do not keep pushing each other out (with
/// one way, 2,000 heads in 4,096 slots left about a third of them sharing a slot).
const WAYS: usize = 4;

/// The index of `hash`'s set.
fn set(hash: u64) -> usize {
    // (SLOTS / WAYS is a power of two; the low bits of xxh3 are as good as any.)
    (hash as usize) & (SLOTS / WAYS - 1)
}

/// The recipe kept for `head` on a connection like `peer`'s under `policy`.
/// `hashed`: the head's hash if [`prefetch_set`] already took it for this head and
/// connection (the hit loop's first pass), so it is not taken twice. It only picks
/// the set to look in: a recipe must still match the head's bytes, the connection's
/// flags and the policy exactly, so a hint taken under a policy since replaced can
/// only miss, never answer with another head's recipe.
pub(crate) fn find(
    head: &[u8],
    peer: Peer,
    policy: &Arc<Policy>,
    hashed: Option<u64>,
) -> Option<Arc<Kept>> {
    if head.len() > HEAD_MAX {
        return None;
    }
    let conn = conn_flags(peer, policy);
    let hash = hashed.unwrap_or_else(|| hash(head, conn));
    KEPT.with_borrow(|table| {
        let set = table.sets.get(set(hash))?;
        let k = (0..WAYS)
            .filter(|&w| set.hashes[w] == hash)
            .filter_map(|w| set.kept[w].as_ref())
            .inspect(|k| prefetch_kept(k))
            .find(|k| {
                k.conn == conn
                    && *k.head == *head
                    && std::ptr::eq(k.policy.as_ptr(), Arc::as_ptr(policy))
            })?;
        Some(k.clone())
    })
}

/// Asks the CPU to start loading the set `head`'s recipe would be kept in, on a
/// connection like `peer`'s: the first of a repeat's dependent reads, started while
/// the hit loop reads its other ready sockets. The head's hash, for
/// [`prefetch_recipes`] once the line has arrived; `None` for a head never kept.
pub(crate) fn prefetch_set(head: &[u8], peer: Peer, policy: &Policy) -> Option<u64> {
    if head.len() > HEAD_MAX {
        return None;
    }
    let hash = hash(head, conn_flags(peer, policy));
    KEPT.with_borrow(|table| {
        let set = table.sets.get(set(hash))?;
        crate::edge::sys::prefetch(std::ptr::from_ref(set).cast(), size_of::<Set>());
        Some(hash)
    })
}

/// The second of a repeat's dependent reads, asked for ahead: the recipes kept
/// under `hash`, read from their set's line (asked for by [`prefetch_set`]).
pub(crate) fn prefetch_recipes(hash: u64) {
    each_kept(hash, |k| {
        // From the `Arc`'s counts, two words before the value (a clone and a drop
        // per repeat write them), to the end of what a repeat reads. (An address
        // only: a prefetch never faults.)
        let counts = std::ptr::from_ref(k).cast::<u8>().wrapping_sub(16);
        crate::edge::sys::prefetch(counts, 16 + HOT);
    });
}

/// The third of a repeat's dependent reads, asked for ahead: what the recipes kept
/// under `hash` point at (their heads, to be compared, and [`prefetch_kept`]'s),
/// read from the recipes asked for by [`prefetch_recipes`].
pub(crate) fn prefetch_recipe_reads(hash: u64) {
    each_kept(hash, |k| {
        crate::edge::sys::prefetch(k.head.as_ptr(), k.head.len());
        prefetch_kept(k);
        prefetch_body(k);
    });
}

/// Calls `f` with each recipe kept under `hash` on this thread.
fn each_kept(hash: u64, f: impl Fn(&Kept)) {
    KEPT.with_borrow(|table| {
        let Some(set) = table.sets.get(set(hash)) else {
            return;
        };
        let kept = (0..WAYS).filter(|&w| set.hashes[w] == hash);
        kept.filter_map(|w| set.kept[w].as_deref()).for_each(f);
    });
}

/// Asks the CPU to start loading what a repeat of `k` reads besides its head: its
/// fixed response head, its target, its keys (hashed for the store's lookup), and
/// the store's entries themselves where they lay when
/// the recipe was made (header, key and meta: checked and hashed by the lookup). By
/// the next request for the same URL they have left the caches (the recipes of
/// 2,000 pages do not fit), and each is its own allocation or its own place in the
/// mapping: asked for together, their misses overlap with the head's comparison and
/// each other instead of following one another. An entry that has moved since only
/// costs its prefetch: the lookup finds where it is now.
fn prefetch_kept(k: &Kept) {
    use crate::edge::sys::prefetch;
    let r = &k.recipe;
    prefetch(r.fixed.bytes.as_ptr(), r.fixed.bytes.len());
    prefetch(k.target.as_ptr(), k.target.len());
    prefetch(r.primary.0.as_ptr(), r.primary.0.len());
    if let Some((key, _)) = &r.variant {
        prefetch(key.as_ptr(), key.len());
    }
    for span in r.spans.iter().flatten() {
        prefetch_span(*span);
    }
}

/// Most bytes of a body [`prefetch_body`] asks for: the corpus's mean answer twice
/// over. A longer body's first 32 KiB come from the caches and the rest as before.
const BODY_PREFETCH_MAX: usize = 32 * 1024;

/// The CPU's own prefetcher works within a page of this size.
const PAGE: usize = 4096;

/// Lines [`prefetch_body`] asks for at the start of each page of a body: enough for
/// the CPU's own prefetcher (the L2 streamer) to see a run and fetch the rest of the
/// page ahead, which it does without holding up the core.
const BODY_LINES_PER_PAGE: usize = 4;

/// Asks the CPU for the body `k`'s answer will send, where it lay when the recipe
/// was made (at most [`BODY_PREFETCH_MAX`] bytes). The kernel copies the body into
/// the socket, and the bodies of a few thousand pages are not in the caches by the
/// next request for the same page, so that copy waited on memory line by line.
/// Asked for here, in the hit loop's third pass, the lines arrive while the other
/// connections of the group are read and answered, and the copy reads them from L2.
///
/// Only the first [`BODY_LINES_PER_PAGE`] lines of each 4 KiB page are asked for,
/// into L2: the streamer fetches the rest of the page. Asking for every line (the
/// first version) stalled the loop itself, since a prefetch waits for a free line
/// fill buffer once a dozen or so are in flight: its loop took 0.8 µs a hit at 80,000
/// hits/s, the 14 KB's memory cost moved from the kernel's copy rather than hidden.
/// Paired A/Bs against that version: 0.961x CPU per hit at saturation, 0.978x at
/// 80,000 hits/s (`docs/performance.md`); every line against none had measured
/// 0.854x at saturation. Only the hit loop asks (its third pass); a task's lookup
/// would use the body too soon after for the ask to help. An address that went
/// stale (the entry moved, was evicted, or its page is not in memory) costs its
/// prefetches only: a prefetch never faults.
fn prefetch_body(k: &Kept) {
    let Some((at, len)) = k.recipe.body_at else {
        return;
    };
    let end = at.saturating_add(len.min(BODY_PREFETCH_MAX));
    let mut page = at;
    while page < end {
        // (An address only, never read through.)
        let lines = (end - page).min(BODY_LINES_PER_PAGE * 64);
        crate::edge::sys::prefetch_l2(std::ptr::without_provenance(page), lines);
        page = (page & !(PAGE - 1)) + PAGE;
    }
}

/// Asks the CPU for a store entry's lines up to the end of its meta (the first
/// [`crate::edge::sys::prefetch`] takes, and the meta's last, which the record's
/// identity reads).
fn prefetch_span(span: quire_store::Span) {
    use crate::edge::sys::prefetch;
    // (An address only, never read through: a prefetch never faults.)
    let at = std::ptr::without_provenance::<u8>(span.at);
    prefetch(at, span.len);
    prefetch(at.wrapping_add(span.len.saturating_sub(1)), 1);
}

/// The answer of `k` now, its head written to `out`; `None` when the URL's key
/// version or the store changed since, or the response is no longer fresh: the
/// full path's to answer.
pub(crate) fn answer(
    ctx: &Ctx,
    policy: &Policy,
    k: &Kept,
    peer: Peer,
    now: std::time::SystemTime,
    out: &mut Vec<u8>,
) -> Option<Answer> {
    let r = &k.recipe;
    debug_assert!(r.scope.audience.is_none(), "signed-in readers are not kept");
    if ctx.key_version(&r.url) != r.scope {
        return None;
    }
    let variant = r.variant.as_ref().map(|(key, id)| (&key[..], *id));
    let entry = crate::request::lookup::again(ctx, (&r.primary.0, r.primary.1), variant)?;
    fresh::serve(ctx, policy, r, entry, (&k.target, peer), now, out)
}

/// Keeps `recipe`, made for `req` whose head is `head`, for the next time this
/// worker sees the same head on a connection like `peer`'s. Signed-in readers'
/// recipes and long heads are not kept.
pub(crate) fn keep(head: &[u8], req: &Plain, peer: Peer, policy: &Arc<Policy>, recipe: Recipe) {
    if head.len() > HEAD_MAX || recipe.scope.audience.is_some() {
        return;
    }
    let conn = conn_flags(peer, policy);
    let hash = hash(head, conn);
    let field = |name| req.headers.get(name).map(|v| Box::from(v.as_bytes()));
    let kept = Kept {
        conn,
        head: Box::from(head),
        policy: Arc::downgrade(policy),
        recipe,
        target: Box::from(req.path()),
        client: (conn & 2 != 0)
            .then(|| Client::ip_or_peer(peer.addr, &req.headers, &policy.trusted_proxies)),
        user_agent: field(header::USER_AGENT),
        referer: field(header::REFERER),
    };
    let kept = Arc::new(kept);
    KEPT.with_borrow_mut(|table| {
        if table.sets.is_empty() {
            table.sets.resize(SLOTS / WAYS, Set::default());
        }
        if table.bytes + kept.bytes() > BYTES_MAX {
            table.sets.fill(Set::default());
            table.set_bytes(0);
        }
        let set = &mut table.sets[set(hash)];
        // The same head's old recipe, else a free slot, else one picked by the hash's
        // high bits (a stale recipe is never used, so any victim is safe).
        let at = (0..WAYS)
            .find(|&w| set.hashes[w] == hash && set.kept[w].is_some())
            .or_else(|| (0..WAYS).find(|&w| set.kept[w].is_none()))
            .unwrap_or((hash >> 32) as usize % WAYS);
        let bytes = kept.bytes();
        set.hashes[at] = hash;
        let gone = set.kept[at].replace(kept).map_or(0, |k| k.bytes());
        table.set_bytes(table.bytes - gone + bytes);
    });
}
