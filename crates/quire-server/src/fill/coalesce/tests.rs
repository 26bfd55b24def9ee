//! The registry's lifecycle: coalescing, replay, limits, slots, abandonment and
//! invalidations, driven directly (no sockets).

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::cache::invalidate::TagKind;

fn head() -> Head {
    Head {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        request_time: SystemTime::now(),
        response_time: SystemTime::now(),
        store: Ok(()),
        vary: VaryFields::default(),
        variant_key: Vec::new(),
        tags: Tags::new(&["u:k"], true),
    }
}

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));

/// A registry of `slots` (`per_client` for one address), with its log.
fn registry(slots: usize, per_client: usize) -> (Fills, Invalidations) {
    (Fills::new(slots, per_client), Invalidations::default())
}

fn new(inv: &Invalidations, limit: u64, client: IpAddr) -> NewFill {
    NewFill {
        limit,
        start: inv.now(),
        tags: Tags::new(&["u:k"], false),
        client,
    }
}

/// Joins `key` as `client`, expecting to start the fill.
fn lead(r: &(Fills, Invalidations), key: &[u8], limit: u64, client: IpAddr) -> (Arc<Fill>, Ticket) {
    match r.0.join(key, new(&r.1, limit, client), &r.1) {
        Joined::New(f, t) => (f, t),
        other => panic!("expected a new fill, got {other:?}"),
    }
}

/// Joins `key` as `client`, expecting to join the fill running.
fn follow(r: &(Fills, Invalidations), key: &[u8], client: IpAddr) -> Ticket {
    match r.0.join(key, new(&r.1, 1 << 20, client), &r.1) {
        Joined::Existing(t) => t,
        other => panic!("expected to join, got {other:?}"),
    }
}

/// The body a waiter streams, expecting a response.
async fn response(t: Ticket) -> FillBody {
    match t.outcome().await {
        Outcome::Response { body, .. } => body,
        other => panic!("expected a response, got {other:?}"),
    }
}

async fn drain(mut body: FillBody) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(c) = std::future::poll_fn(|cx| body.poll_recv(cx)).await {
        match c {
            Chunk::Data(b) => out.extend_from_slice(&b),
            Chunk::Failed(w) => return Err(w.to_string()),
        }
    }
    Ok(out)
}

#[tokio::test]
async fn waiters_before_and_after_the_head_get_the_whole_body() {
    let r = registry(4, 4);
    let (fill, first) = lead(&r, b"k", 1 << 20, A);
    let second = follow(&r, b"k", B);
    assert!(second.collapsed && !first.collapsed);
    fill.publish_head(head());
    fill.push(Bytes::from_static(b"hello "));
    let late = follow(&r, b"k", B);
    fill.push(Bytes::from_static(b"world"));
    fill.finish(Ok(()), false);
    assert_eq!(fill.body().as_deref(), Some(&b"hello world"[..]));
    r.0.done(b"k", &fill);
    for t in [first, second, late] {
        assert_eq!(drain(response(t).await).await.unwrap(), b"hello world");
    }
    assert_eq!(r.0.in_flight(), 0);
    assert_eq!(r.0.slots_used(), 0);
    lead(&r, b"k", 1, A);
}

#[tokio::test]
async fn joiners_after_the_body_ended_wait_for_the_commit_and_are_told_it_is_stored() {
    let r = registry(4, 4);
    let (fill, first) = lead(&r, b"k", 1 << 20, A);
    fill.publish_head(head());
    fill.push(Bytes::from_static(b"body"));
    fill.finish(Ok(()), true);
    let mut late = follow(&r, b"k", B);
    assert!(
        late.rx.try_recv().is_err(),
        "nothing to answer with before the commit"
    );
    fill.committed(Ok(7));
    assert!(matches!(late.outcome().await, Outcome::Stored(_, 7)));
    // The first waiter got the stream when the head came.
    response(first).await;
}

#[tokio::test]
async fn a_held_body_answers_every_waiter_after_the_commit() {
    let r = registry(4, 4);
    let (fill, mut first) = lead(&r, b"k", 1 << 20, A);
    fill.hold_complete(head(), vec![Bytes::from_static(b"all of it")]);
    assert!(first.rx.try_recv().is_err(), "held until committed");
    // Declined by the store: replayed from the buffer instead.
    fill.committed(Err("rejected"));
    assert_eq!(drain(response(first).await).await.unwrap(), b"all of it");
}

#[tokio::test]
async fn bodies_over_the_limit_stream_on_but_refuse_late_joiners() {
    let r = registry(4, 4);
    let (fill, first) = lead(&r, b"k", 8, A);
    fill.publish_head(head());
    assert!(fill.push(Bytes::from_static(b"12345")));
    assert!(!fill.push(Bytes::from_static(b"67890")));
    let late = follow(&r, b"k", B);
    assert!(matches!(late.outcome().await, Outcome::Refused));
    fill.finish(Ok(()), true);
    assert!(fill.body().is_none());
    assert_eq!(drain(response(first).await).await.unwrap(), b"1234567890");
}

#[tokio::test]
async fn a_failure_mid_body_cuts_every_waiter() {
    let r = registry(4, 4);
    let (fill, first) = lead(&r, b"k", 100, A);
    fill.publish_head(head());
    fill.push(Bytes::from_static(b"part"));
    let reset = crate::upstream::BoxError::from("reset");
    fill.finish(Err(BodyCut::Failed(reset.into())), true);
    assert_eq!(
        drain(response(first).await).await,
        Err("origin body failed: reset".to_string())
    );
    assert!(fill.body().is_none());
}

#[tokio::test]
async fn slots_are_limited_in_all_and_per_client_and_given_back() {
    let r = registry(3, 2);
    let (a1, _t1) = lead(&r, b"a1", 1, A);
    let (_a2, _t2) = lead(&r, b"a2", 1, A);
    let busy =
        |key: &[u8], client| matches!(r.0.join(key, new(&r.1, 1, client), &r.1), Joined::Busy);
    assert!(busy(b"a3", A), "A's share is 2");
    let (_b1, _t3) = lead(&r, b"b1", 1, B);
    assert!(busy(b"b2", B), "3 in all");
    // A pass-through gives its slot back at once, and leaves the registry.
    r.0.pass_through(b"a1", &a1);
    assert_eq!(r.0.slots_used(), 2);
    lead(&r, b"a1", 1, A);
    r.0.done(b"a1", &a1);
    assert_eq!(
        r.0.slots_used(),
        3,
        "done after pass_through gives nothing back twice"
    );
}

#[tokio::test]
async fn waiters_of_a_fill_that_never_answered_are_failed() {
    let r = registry(2, 2);
    let (fill, t) = lead(&r, b"a", 1, A);
    r.0.done(b"a", &fill);
    assert!(matches!(t.outcome().await, Outcome::Failed(_)));
}

#[tokio::test]
async fn a_fill_is_abandoned_when_its_last_waiter_leaves() {
    let r = registry(2, 2);
    let (fill, first) = lead(&r, b"a", 1 << 20, A);
    let second = follow(&r, b"a", B);
    fill.publish_head(head());
    drop(first);
    assert!(!r.0.cancel_if_abandoned(b"a", &fill), "one waiter is left");
    // The second waiter takes its body: the hold goes with the body.
    let body = response(second).await;
    assert!(
        !r.0.cancel_if_abandoned(b"a", &fill),
        "the body still holds it"
    );
    drop(body);
    tokio::time::timeout(std::time::Duration::from_secs(5), fill.abandoned())
        .await
        .expect("woken when the last waiter left");
    assert!(r.0.cancel_if_abandoned(b"a", &fill));
    assert_eq!(r.0.slots_used(), 0);
    assert_eq!(r.0.in_flight(), 0);
}

#[tokio::test]
async fn a_slow_reader_of_an_unbuffered_fill_is_cut_off() {
    let r = registry(2, 2);
    let (fill, t) = lead(&r, b"a", 1024, A);
    fill.publish_head(head());
    let body = response(t).await;
    let chunk = Bytes::from(vec![b'x'; 64 << 10]);
    let mut sent = 0;
    while sent <= LAG_BYTES_MAX + (128 << 10) {
        fill.push(chunk.clone());
        sent += chunk.len();
    }
    // The reader never read: it got at most LAG_BYTES_MAX queued, then a cut.
    assert_eq!(drain(body).await, Err("client too slow".to_string()));
}

#[tokio::test]
async fn no_request_joins_a_fill_an_invalidation_overtook() {
    let r = registry(4, 4);
    let (old, _early) = lead(&r, b"k", 1 << 20, A);
    r.1.record(&[("u:k".into(), TagKind::Url)], false);
    let (fresh, _late) = lead(&r, b"k", 1 << 20, B);
    assert!(!Arc::ptr_eq(&old, &fresh), "the overtaken fill is replaced");
    follow(&r, b"k", A);
    // The old fill finishing does not unregister the new one.
    r.0.done(b"k", &old);
    assert_eq!(r.0.in_flight(), 1);
}

#[tokio::test]
async fn a_key_purge_before_the_head_matches_a_fill_whose_keys_are_unknown() {
    let r = registry(4, 4);
    let (fill, _first) = lead(&r, b"k", 1 << 20, A);
    // Before the head, the fill's surrogate keys are unknown: any key purge matches.
    r.1.record(&[("t:news".into(), TagKind::Key)], false);
    let (second, _t) = lead(&r, b"k", 1 << 20, B);
    assert!(!Arc::ptr_eq(&fill, &second));
    // Once the head is known, only its own keys match.
    let mut h = head();
    h.tags = Tags::new(&["u:k", "t:sport"], true);
    second.publish_head(h);
    r.1.record(&[("t:news".into(), TagKind::Key)], false);
    follow(&r, b"k", A);
}
