//! The registry's lifecycle: coalescing, replay, limits, slots, abandonment and
//! invalidations, driven directly (no sockets).

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::invalidate::TagKind;

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

fn new(inv: &Invalidations, limit: u64, client: IpAddr) -> NewFill {
    NewFill {
        limit,
        start: inv.now(),
        tags: Tags::new(&["u:k"], false),
        client,
    }
}

async fn drain(mut body: FillBody) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(c) = std::future::poll_fn(|cx| body.poll_recv(cx)).await {
        match c {
            Chunk::Data(b) => out.extend_from_slice(&b),
            Chunk::Failed(w) => return Err(w),
        }
    }
    Ok(out)
}

#[tokio::test]
async fn waiters_before_and_after_the_head_get_the_whole_body() {
    let inv = Invalidations::default();
    let fills = Fills::new(4, 4);
    let Joined::New(fill, first) = fills.join(b"k", new(&inv, 1 << 20, A), &inv) else {
        panic!("first join must create the fill")
    };
    let Joined::Existing(second) = fills.join(b"k", new(&inv, 1 << 20, B), &inv) else {
        panic!("second join must collapse")
    };
    assert!(second.collapsed && !first.collapsed);
    fill.publish_head(head());
    fill.push(Bytes::from_static(b"hello "));
    let Joined::Existing(late) = fills.join(b"k", new(&inv, 1 << 20, B), &inv) else {
        panic!("still registered")
    };
    fill.push(Bytes::from_static(b"world"));
    fill.finish(Ok(()), false);
    assert_eq!(fill.body().as_deref(), Some(&b"hello world"[..]));
    fills.done(b"k", &fill);
    for t in [first, second, late] {
        let Outcome::Response { body, .. } = t.rx.await.unwrap() else {
            panic!("expected a response")
        };
        assert_eq!(drain(body).await.unwrap(), b"hello world");
    }
    assert_eq!(fills.in_flight(), 0);
    assert_eq!(fills.slots_used(), 0);
    assert!(matches!(
        fills.join(b"k", new(&inv, 1, A), &inv),
        Joined::New(..)
    ));
}

#[tokio::test]
async fn joiners_after_the_body_ended_wait_for_the_commit_and_are_told_it_is_stored() {
    let inv = Invalidations::default();
    let fills = Fills::new(4, 4);
    let Joined::New(fill, first) = fills.join(b"k", new(&inv, 1 << 20, A), &inv) else {
        panic!()
    };
    fill.publish_head(head());
    fill.push(Bytes::from_static(b"body"));
    fill.finish(Ok(()), true);
    let Joined::Existing(mut late) = fills.join(b"k", new(&inv, 1 << 20, B), &inv) else {
        panic!()
    };
    assert!(
        late.rx.try_recv().is_err(),
        "nothing to answer with before the commit"
    );
    fill.committed(Some(7));
    assert!(matches!(late.rx.await.unwrap(), Outcome::Stored(_, 7)));
    // The first waiter got the stream when the head came.
    assert!(matches!(first.rx.await.unwrap(), Outcome::Response { .. }));
}

#[tokio::test]
async fn a_held_body_answers_every_waiter_after_the_commit() {
    let inv = Invalidations::default();
    let fills = Fills::new(4, 4);
    let Joined::New(fill, mut first) = fills.join(b"k", new(&inv, 1 << 20, A), &inv) else {
        panic!()
    };
    fill.hold_complete(head(), vec![Bytes::from_static(b"all of it")]);
    assert!(first.rx.try_recv().is_err(), "held until committed");
    // Declined by the store: replayed from the buffer instead.
    fill.committed(None);
    let Outcome::Response { body, .. } = first.rx.await.unwrap() else {
        panic!()
    };
    assert_eq!(drain(body).await.unwrap(), b"all of it");
}

#[tokio::test]
async fn bodies_over_the_limit_stream_on_but_refuse_late_joiners() {
    let inv = Invalidations::default();
    let fills = Fills::new(4, 4);
    let Joined::New(fill, first) = fills.join(b"k", new(&inv, 8, A), &inv) else {
        panic!()
    };
    fill.publish_head(head());
    assert!(fill.push(Bytes::from_static(b"12345")));
    assert!(!fill.push(Bytes::from_static(b"67890")));
    let Joined::Existing(late) = fills.join(b"k", new(&inv, 8, B), &inv) else {
        panic!()
    };
    assert!(matches!(late.rx.await.unwrap(), Outcome::Refused));
    fill.finish(Ok(()), true);
    assert!(fill.body().is_none());
    let Outcome::Response { body, .. } = first.rx.await.unwrap() else {
        panic!()
    };
    assert_eq!(drain(body).await.unwrap(), b"1234567890");
}

#[tokio::test]
async fn a_failure_mid_body_cuts_every_waiter() {
    let inv = Invalidations::default();
    let fills = Fills::new(4, 4);
    let Joined::New(fill, first) = fills.join(b"k", new(&inv, 100, A), &inv) else {
        panic!()
    };
    fill.publish_head(head());
    fill.push(Bytes::from_static(b"part"));
    fill.finish(Err("reset".into()), true);
    let Outcome::Response { body, .. } = first.rx.await.unwrap() else {
        panic!()
    };
    assert_eq!(drain(body).await, Err("reset".to_string()));
    assert!(fill.body().is_none());
}

#[tokio::test]
async fn slots_are_limited_in_all_and_per_client_and_given_back() {
    let inv = Invalidations::default();
    let fills = Fills::new(3, 2);
    let Joined::New(a1, _t1) = fills.join(b"a1", new(&inv, 1, A), &inv) else {
        panic!()
    };
    let Joined::New(_a2, _t2) = fills.join(b"a2", new(&inv, 1, A), &inv) else {
        panic!()
    };
    assert!(
        matches!(fills.join(b"a3", new(&inv, 1, A), &inv), Joined::Busy),
        "A's share is 2"
    );
    let Joined::New(_b1, _t3) = fills.join(b"b1", new(&inv, 1, B), &inv) else {
        panic!("another client still gets a slot")
    };
    assert!(
        matches!(fills.join(b"b2", new(&inv, 1, B), &inv), Joined::Busy),
        "3 in all"
    );
    // A pass-through gives its slot back at once, and leaves the registry.
    fills.pass_through(b"a1", &a1);
    assert_eq!(fills.slots_used(), 2);
    assert!(matches!(
        fills.join(b"a1", new(&inv, 1, A), &inv),
        Joined::New(..)
    ));
    fills.done(b"a1", &a1);
    assert_eq!(
        fills.slots_used(),
        3,
        "done after pass_through gives nothing back twice"
    );
}

#[tokio::test]
async fn waiters_of_a_fill_that_never_answered_are_failed() {
    let inv = Invalidations::default();
    let fills = Fills::new(2, 2);
    let Joined::New(fill, t) = fills.join(b"a", new(&inv, 1, A), &inv) else {
        panic!()
    };
    fills.done(b"a", &fill);
    assert!(matches!(t.rx.await.unwrap(), Outcome::Failed(_)));
}

#[tokio::test]
async fn a_fill_is_abandoned_when_its_last_waiter_leaves() {
    let inv = Invalidations::default();
    let fills = Fills::new(2, 2);
    let Joined::New(fill, first) = fills.join(b"a", new(&inv, 1 << 20, A), &inv) else {
        panic!()
    };
    let Joined::Existing(second) = fills.join(b"a", new(&inv, 1 << 20, B), &inv) else {
        panic!()
    };
    fill.publish_head(head());
    drop(first);
    assert!(
        !fills.cancel_if_abandoned(b"a", &fill),
        "one waiter is left"
    );
    // The second waiter takes its body, then drops it: the guard goes with the body.
    let mut second = second;
    let Outcome::Response { mut body, .. } = (&mut second.rx).await.unwrap() else {
        panic!()
    };
    second.attach_to(&mut body);
    drop(second);
    assert!(
        !fills.cancel_if_abandoned(b"a", &fill),
        "the body still holds it"
    );
    drop(body);
    tokio::time::timeout(std::time::Duration::from_secs(5), fill.abandoned())
        .await
        .expect("woken when the last waiter left");
    assert!(fills.cancel_if_abandoned(b"a", &fill));
    assert_eq!(fills.slots_used(), 0);
    assert_eq!(fills.in_flight(), 0);
}

#[tokio::test]
async fn a_slow_reader_of_an_unbuffered_fill_is_cut_off() {
    let inv = Invalidations::default();
    let fills = Fills::new(2, 2);
    let Joined::New(fill, t) = fills.join(b"a", new(&inv, 1024, A), &inv) else {
        panic!()
    };
    fill.publish_head(head());
    let Outcome::Response { body, .. } = t.rx.await.unwrap() else {
        panic!()
    };
    let chunk = Bytes::from(vec![b'x'; 64 << 10]);
    let mut sent = 0;
    while sent <= LAG_BYTES_MAX + (128 << 10) {
        fill.push(chunk.clone());
        sent += chunk.len();
    }
    // The reader never read: it got at most LAG_BYTES_MAX queued, then a cut.
    let got = drain(body).await;
    assert_eq!(got, Err("client too slow".to_string()));
}

#[tokio::test]
async fn no_request_joins_a_fill_an_invalidation_overtook() {
    let inv = Invalidations::default();
    let fills = Fills::new(4, 4);
    let Joined::New(old, early) = fills.join(b"k", new(&inv, 1 << 20, A), &inv) else {
        panic!()
    };
    inv.record(&[("u:k".into(), TagKind::Url)], false);
    let Joined::New(fresh, late) = fills.join(b"k", new(&inv, 1 << 20, B), &inv) else {
        panic!("the overtaken fill is replaced")
    };
    assert!(!Arc::ptr_eq(&old, &fresh));
    let tags = Tags::new(&["u:k"], true);
    assert!(
        !early.predates_invalidation(&inv, &tags),
        "asked before the purge"
    );
    assert!(
        !late.predates_invalidation(&inv, &tags),
        "its own fill started after"
    );
    // The old fill finishing does not unregister the new one.
    fills.done(b"k", &old);
    assert_eq!(fills.in_flight(), 1);
}

#[tokio::test]
async fn a_key_purge_before_the_head_is_caught_when_the_head_names_the_key() {
    let inv = Invalidations::default();
    let fills = Fills::new(4, 4);
    let Joined::New(fill, _first) = fills.join(b"k", new(&inv, 1 << 20, A), &inv) else {
        panic!()
    };
    // Before the head, the fill's surrogate keys are unknown: any key purge matches.
    inv.record(&[("t:news".into(), TagKind::Key)], false);
    let Joined::New(..) = fills.join(b"k", new(&inv, 1 << 20, B), &inv) else {
        panic!("not joined: the fill might carry the purged key")
    };
    let mut h = head();
    h.tags = Tags::new(&["u:k", "t:news"], true);
    fill.publish_head(h);
}
