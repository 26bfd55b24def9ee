//! One request the store could not answer alone, and its ways out: passed to the
//! origin ([`Exchange::pass`], written in [`crate::request::pass`]), filled — a coalesced
//! fetch that revalidates when it can ([`Exchange::fill`]) — or answered from a
//! stale copy ([`Exchange::serve_stale`]).
//!
//! An [`Exchange`] carries what every way out needs (the request, who sent it, its
//! normalised URL, the time it arrived), so none of them takes six loose arguments.
//! A fill adds the lookup it started from and the `Cache-Status` so far ([`Miss`]),
//! joins or starts the fill for the record key ([`crate::fill::coalesce`], run by
//! [`crate::fill::miss`]), and answers each waiter from the fill's outcome: from the store
//! once committed, as the fill streams otherwise, from the stale copy where
//! `stale-if-error` allows.

use std::sync::Arc;
use std::time::SystemTime;

use http::{Request, Response};
use quire_http::key::{MethodClass, NormalizedUrl};
use quire_http::status::{CacheStatus, Fwd};

use crate::cache::invalidate::Tags;
use crate::cache::object::{self, ObjectRecord};
use crate::config::FillHeaders;
use crate::edge::client::Client;
use crate::edge::rate_limit::Class;
use crate::fill::coalesce::{Head, Joined, NewFill, Outcome as FillOutcome, Ticket};
use crate::fill::miss::{self, FillSpec};
use crate::metrics::Outcome;
use crate::policy::Policy;
use crate::request::body::Body;
use crate::request::hit::{self, HitRequest, NotServed, Prepared};
use crate::request::lookup::{self, keyed, Lookup, Reading};
use crate::request::reply;
use crate::state::{Ctx, Scope};
use crate::upstream::origin::{self, OutBody};
use crate::upstream::Audience;

/// A response and how the request it answers counts in the metrics.
pub(crate) type Answered = (Response<Body>, Outcome);

/// A request on its way to an answer the store alone does not give.
pub(crate) struct Exchange<'a> {
    /// The server's state.
    pub(crate) ctx: &'a Arc<Ctx>,
    /// The request as the client sent it.
    pub(crate) req: Request<OutBody>,
    /// Who sent it.
    pub(crate) client: Client,
    /// Its normalised URL (for keys, tags and invalidation).
    pub(crate) url: NormalizedUrl,
    /// When it arrived, by the server's clock.
    pub(crate) now: SystemTime,
    /// The policy it started under: every decision it and its fill take uses it,
    /// whatever a reload swaps in meanwhile.
    pub(crate) policy: Arc<Policy>,
    /// The audience a signed-in reader's request is answered as (its keys are that
    /// audience's); `None` for the anonymous cache.
    pub(crate) audience: Option<Audience>,
    /// Nobody waits for this exchange's answer (a prefill): its fills are marked
    /// background (`FillMark::background`).
    pub(crate) background: bool,
}

impl Exchange<'_> {
    /// The scope this request's keys are made in now: its audience's, or the
    /// anonymous cache's. `None` when the upstream cannot version the audience's
    /// keys yet (the request is then passed, never answered from another scope).
    pub(crate) fn scope_now(&self) -> Option<Scope> {
        match self.audience {
            Some(a) => self.ctx.audience_scope(&self.url, a),
            None => Some(self.ctx.key_version(&self.url)),
        }
    }

    /// `status` with the cache key when it is exposed, and the audience whose entry
    /// answered (`detail=audience-<label>`).
    pub(crate) fn keyed(&self, status: CacheStatus) -> CacheStatus {
        let status = keyed(self.ctx, &self.url, status);
        match self.audience {
            Some(a) => status.with_audience(a.label()),
            None => status,
        }
    }

    /// The 429 when the client is over its `class` budget (`[rate_limit]`).
    pub(crate) fn over_rate(&self, class: Class) -> Option<Answered> {
        let cfg = &self.policy.cfg.rate_limit;
        let now = std::time::Instant::now();
        let wait = self
            .ctx
            .limiter
            .admit(self.client.ip, class, cfg, now)
            .err()?;
        Some((reply::too_many_requests(wait), Outcome::Error))
    }

    /// What serving a stored record needs from the request.
    pub(crate) fn hit_request(&self) -> HitRequest<'_> {
        HitRequest {
            method: self.req.method(),
            headers: self.req.headers(),
        }
    }

    /// Serves `rec`, a stale copy under `key`, if the store still holds its bodies;
    /// `why` goes into `Cache-Status`. A 502 when they are gone.
    pub(crate) fn serve_stale(&self, key: &[u8], rec: &Prepared, why: &str) -> Answered {
        let mut status = CacheStatus::hit().with_detail(why);
        if let Some(a) = self.audience {
            status = status.with_audience(a.label());
        }
        let served = match lookup::same_version(self.ctx, key, rec) {
            Some(entry) => hit::serve(&self.hit_request(), rec, &entry, status, self.now),
            None => Err(NotServed::BodyGone),
        };
        match served {
            Ok(r) => (r, Outcome::Stale),
            Err(_) => (reply::stale_gone(), Outcome::Error),
        }
    }

    /// Starts a background revalidation of `rec` (found by `look`) unless one is
    /// already running for its key; the request itself is served the stale copy.
    pub(crate) fn revalidate_in_background(&self, look: &Lookup, rec: &ObjectRecord) {
        self.detached(look, Some(Arc::new(rec.clone())));
    }

    /// Refresh-ahead: starts a background revalidation of `rec`, a fresh hit near the
    /// end of its lifetime, when a budget slot is free at once (it never waits for
    /// one) and no fill for its key is running. The slot is held until it ends.
    pub(crate) fn refresh_ahead(&self, look: &Lookup, rec: &ObjectRecord) {
        if self.ctx.refreshed.tried(rec.id) {
            return;
        }
        let Some(slot) = self.ctx.budget.try_acquire() else {
            self.ctx.metrics.record_refresh_ahead(false);
            return;
        };
        // Marked once started: a refresh that fails is not tried again for this
        // record on the next hit.
        if self.ctx.refreshed.mark(rec.id)
            && self.detached_holding(look, Some(Arc::new(rec.clone())), Some(slot))
        {
            self.ctx.metrics.record_refresh_ahead(true);
        }
    }

    /// Starts a fill of `look`'s record key in the background unless one is already
    /// running for it: the request itself was answered from a previous version
    /// (`crate::request::previous`).
    pub(crate) fn fill_in_background(&self, look: &Lookup) {
        self.detached(look, None);
    }

    /// Starts a fill of `look`'s record key (revalidating `revalidate`) that no
    /// request waits for, unless one is already running for the key.
    fn detached(&self, look: &Lookup, revalidate: Option<Arc<ObjectRecord>>) {
        self.detached_holding(look, revalidate, None);
    }

    /// [`Exchange::detached`], holding `slot` (of the budget) until the fill ends;
    /// whether a fill was started.
    fn detached_holding(
        &self,
        look: &Lookup,
        revalidate: Option<Arc<ObjectRecord>>,
        slot: Option<crate::edge::budget::Slot>,
    ) -> bool {
        let key = look.record_key().to_vec();
        let ctx = self.ctx;
        let Some(f) = ctx.fills.start_detached(&key, self.new_fill()) else {
            return false;
        };
        let mut spec = self.spec(look, key, revalidate);
        spec.background = true;
        miss::spawn(ctx.clone(), f, spec, slot);
        true
    }

    /// A miss or a revalidation: joins or starts the fill for the record key `look`
    /// found, and answers from its outcome. `revalidate` is the stored response the
    /// fill revalidates; `stale` the copy `stale-if-error` allows serving when the
    /// origin fails.
    pub(crate) async fn fill(
        self,
        look: Lookup,
        status: CacheStatus,
        revalidate: Option<Arc<ObjectRecord>>,
        stale: Option<Arc<Prepared>>,
    ) -> Answered {
        // The entry pins its region: a fill never holds it while it waits on the
        // origin.
        let mut look = look;
        look.entry = None;
        let m = Miss {
            x: self,
            look,
            status,
            variant_retry: false,
        };
        m.run(revalidate, stale).await
    }

    /// What a new fill for this URL registers: its buffer limit, its start in the
    /// invalidation log, the URL's tags and the client it is counted against.
    fn new_fill(&self) -> NewFill {
        NewFill {
            limit: self.policy.object_limit,
            start: self.ctx.invalidations.now(),
            tags: Tags::new(&object::record_tags(self.url.as_str(), &[]), false),
            client: self.client.ip,
        }
    }

    /// The fill request for this URL as this client would make it.
    fn spec(
        &self,
        look: &Lookup,
        fill_key: Vec<u8>,
        revalidate: Option<Arc<ObjectRecord>>,
    ) -> FillSpec {
        let (url, req_headers) = (&self.url, self.req.headers());
        let vary_names = look
            .vary
            .as_ref()
            .map(|v| v.fields().to_vec())
            .unwrap_or_default();
        let host = match url.port() {
            Some(p) => format!("{}:{p}", url.host()),
            None => url.host().to_owned(),
        };
        let headers = match self.policy.cfg.fill_headers {
            FillHeaders::Keyed => {
                origin::fill_headers(req_headers, &host, &vary_names, &self.client)
            }
            FillHeaders::All => origin::fill_headers_all(req_headers, &host, &self.client),
        };
        let mut headers = headers;
        origin::set_forwarded_proto(&mut headers, url.scheme());
        FillSpec {
            url: url.clone(),
            primary_key: look.primary_key.clone(),
            scope: look.scope,
            headers,
            client_headers: req_headers.clone(),
            revalidate,
            fill_key,
            policy: self.policy.clone(),
            background: self.background,
            client: self.client.ip,
        }
    }
}

/// A miss or a revalidation in the making: the exchange, the lookup it started
/// from, and what `Cache-Status` says so far.
struct Miss<'a> {
    x: Exchange<'a>,
    look: Lookup,
    status: CacheStatus,
    /// This is already the second fill for the request's own variant.
    variant_retry: bool,
}

impl Miss<'_> {
    /// Passes the request to the origin (uncoalesced, not stored) with `status`.
    async fn pass(self, status: CacheStatus) -> Answered {
        self.x.pass(status, Outcome::Miss).await
    }

    /// Joins or starts the fill, waits for its outcome and answers from it.
    async fn run(
        mut self,
        revalidate: Option<Arc<ObjectRecord>>,
        stale: Option<Arc<Prepared>>,
    ) -> Answered {
        let Some(ticket) = self.join(revalidate) else {
            // No slot for this miss (all taken, or this client's share is): it still
            // gets an answer, straight from the origin, not coalesced and not stored.
            self.x.ctx.metrics.record_fill_busy();
            let status = self.status.clone().with_detail("fills-busy");
            return self.pass(status).await;
        };
        if ticket.collapsed {
            self.status = self.status.with_collapsed();
        }
        let (collapsed, wait) = (
            ticket.collapsed,
            crate::trace::child("fill wait", crate::trace::Kind::Internal),
        );
        let outcome = ticket.outcome().await;
        if let Some(mut w) = wait {
            w.set("quire.collapsed", collapsed);
            w.end();
        }
        self.x.now = self.x.ctx.clock.now();
        if let FillOutcome::Response { head, .. } | FillOutcome::Stored(head, _) = &outcome {
            if let Some(r) = self.stale_error(head, stale.as_deref()) {
                return r;
            }
        }
        self.answer(outcome, stale).await
    }

    /// Joins the fill for the record key, or starts one; `None` when there is no
    /// slot for it.
    fn join(&self, revalidate: Option<Arc<ObjectRecord>>) -> Option<Ticket> {
        let ctx = self.x.ctx;
        let key = self.look.record_key().to_vec();
        match ctx.fills.join(&key, self.x.new_fill(), &ctx.invalidations) {
            Joined::Existing(t) => {
                ctx.metrics.record_coalesced();
                Some(t)
            }
            Joined::New(f, t) => {
                let spec = self.x.spec(&self.look, key, revalidate);
                miss::spawn(ctx.clone(), f, spec, ());
                Some(t)
            }
            Joined::Busy => None,
        }
    }

    /// The answer to this waiter from the fill's outcome.
    async fn answer(self, outcome: FillOutcome, stale: Option<Arc<Prepared>>) -> Answered {
        match outcome {
            FillOutcome::Revalidated(rec) => self.revalidated(&rec).await,
            FillOutcome::Failed(e) => match stale {
                Some(rec) => self
                    .x
                    .serve_stale(self.look.record_key(), &rec, "stale-if-error"),
                None => (reply::origin_error(&e, self.status), Outcome::Error),
            },
            FillOutcome::Refused => {
                let st = self.status.clone().with_detail("uncacheable-size");
                self.pass(st).await
            }
            FillOutcome::Stored(head, id) => self.answer_from_store(&head, id).await,
            FillOutcome::Response {
                head,
                not_stored,
                body,
            } => {
                if !head.vary.is_empty() && self.my_variant(&head) != head.variant_key {
                    // RFC 9111 §4.1: only a request whose selecting fields match the
                    // ones the fill sent may take its response.
                    return self.own_variant().await;
                }
                let head_only = self.x.req.method() == http::Method::HEAD;
                let r = miss::respond(&head, not_stored, body, self.status, head_only, self.x.now);
                (r, Outcome::Miss)
            }
        }
    }

    /// The refreshed head over the bodies of the same version (rewritten by the
    /// fill, or still the entry it revalidated if the rewrite was declined).
    async fn revalidated(self, rec: &ObjectRecord) -> Answered {
        let p = Prepared::new(rec.clone());
        let st = self.status.clone().with_fwd_status(304);
        let served = match lookup::same_version(self.x.ctx, self.look.record_key(), &p) {
            Some(entry) => hit::serve(&self.x.hit_request(), &p, &entry, st, self.x.now),
            None => Err(NotServed::BodyGone),
        };
        match served {
            Ok(r) => (r, Outcome::Revalidated),
            Err(_) => self.pass(CacheStatus::forward(Fwd::Miss)).await,
        }
    }

    /// RFC 5861 §4: an error answer may be covered by the stale copy.
    fn stale_error(&self, head: &Head, stale: Option<&Prepared>) -> Option<Answered> {
        let rec = stale?;
        if !matches!(head.status.as_u16(), 500 | 502 | 503 | 504) {
            return None;
        }
        Some(
            self.x
                .serve_stale(self.look.record_key(), rec, "stale-if-error"),
        )
    }

    /// The variant key this request selects under the response's `Vary`, from the
    /// client's own fields (a fill forwards only the fields the key covers, so a field
    /// the response turns out to vary on may not have been sent).
    fn my_variant(&self, head: &Head) -> Vec<u8> {
        let x = &self.x;
        x.ctx.variant_key(
            MethodClass::Get,
            &x.url,
            &head.vary,
            x.req.headers(),
            self.look.scope,
        )
    }

    /// Answers a waiter of a committed fill from the store, as a hit is answered
    /// (conditionals, ranges, codings), with `Cache-Status: ...; stored`.
    async fn answer_from_store(self, head: &Head, id: u64) -> Answered {
        let x = &self.x;
        let class = MethodClass::of(x.req.method()).unwrap_or(MethodClass::Get);
        let Some(scope) = x.scope_now() else {
            return self.pass(CacheStatus::forward(Fwd::UriMiss)).await;
        };
        // The request that missed, answered from its fill: not a hit of the entry.
        let look = lookup::lookup_as(x.ctx, class, &x.url, x.req.headers(), scope, Reading::Quiet);
        let mut st = self.status.clone();
        if head.status.as_u16() != 200 {
            st = st.with_fwd_status(head.status.as_u16());
        }
        let served = match (&look.record, &look.entry) {
            // Only the fill's own record: whatever else is there now (a later or an
            // earlier fill's) was not what this request waited for.
            (Some(rec), Some(entry)) if rec.rec.id == id => {
                hit::serve(&x.hit_request(), rec, entry, st.with_stored(), x.now)
            }
            // Evicted or purged since, replaced, or stored under another variant than
            // this request selects: fetch for this request alone.
            _ => Err(NotServed::BodyGone),
        };
        drop(look);
        match served {
            Ok(mut r) => {
                r.extensions_mut().insert(miss::upstream_of(head));
                (r, Outcome::Miss)
            }
            Err(NotServed::Forward) => self.pass(CacheStatus::forward(Fwd::Request)).await,
            Err(NotServed::BodyGone) if !head.vary.is_empty() => self.own_variant().await,
            Err(NotServed::BodyGone) => self.pass(CacheStatus::forward(Fwd::UriMiss)).await,
        }
    }

    /// The fill's response varies on a field this request sent with another value
    /// than the fill did (a first fill forwards no field the URL's `Vary` is not yet
    /// known to name): fetch this request's own variant with a fill keyed on it, now
    /// that the URL's `Vary` record is stored — once; else pass the request through.
    async fn own_variant(self) -> Answered {
        let x = &self.x;
        let status = x.keyed(CacheStatus::forward(Fwd::VaryMiss));
        let Some(scope) = x.scope_now() else {
            return self.pass(status).await;
        };
        let look = lookup::lookup(x.ctx, MethodClass::Get, &x.url, x.req.headers(), scope);
        if self.variant_retry || look.vary.is_none() || look.record.is_some() {
            return self.pass(status).await;
        }
        let m = Miss {
            x: self.x,
            look,
            status,
            variant_retry: true,
        };
        Box::pin(m.run(None, None)).await
    }
}
