use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::*;
use crate::config::Secs;

fn cfg() -> BudgetSection {
    BudgetSection {
        slots: 1,
        queue_timeout: Secs(Duration::from_secs(60)),
        queue_per_client: 8,
        queue_max: 100,
        cpu_busy_max: 0.6,
        crawlers: Vec::new(),
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

type Acquire<'a> = Pin<Box<dyn Future<Output = Result<Slot, Refused>> + 'a>>;

/// Polls `f` once: its output if ready.
fn poll_once<T>(f: &mut Pin<Box<dyn Future<Output = T> + '_>>) -> Option<T> {
    let waker = std::task::Waker::noop();
    match f.as_mut().poll(&mut Context::from_waker(waker)) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

/// An acquire for `client`, polled by hand: outside tokio's cooperative budget,
/// which would otherwise make a ready receiver answer `Pending` after a few hundred
/// polls within one test.
fn acquire<'a>(b: &'a Budget, c: &'a BudgetSection, client: &str) -> Acquire<'a> {
    Box::pin(tokio::task::unconstrained(b.acquire(ip(client), false, c)))
}

/// Starts an acquire for `client` and polls it once, so it holds its place.
fn queued<'a>(b: &'a Budget, c: &'a BudgetSection, client: &str) -> Acquire<'a> {
    let mut f = acquire(b, c, client);
    assert!(poll_once(&mut f).is_none(), "{client} should wait");
    f
}

#[tokio::test]
async fn a_free_slot_is_taken_at_once_and_given_back_on_drop() {
    let b = Budget::new(2);
    let c = cfg();
    let s1 = b.acquire(ip("10.0.0.1"), false, &c).await.unwrap();
    let s2 = b.acquire(ip("10.0.0.2"), false, &c).await.unwrap();
    assert_eq!(b.load(), (2, 0));
    drop(s1);
    assert_eq!(b.load(), (1, 0));
    drop(s2);
    assert_eq!(b.load(), (0, 0));
}

#[tokio::test]
async fn slots_go_by_network_then_client_then_age() {
    let b = Budget::new(1);
    let c = cfg();
    let held = b.acquire(ip("10.0.0.9"), false, &c).await.unwrap();
    // Network 10.0.0.0/24: client .1 asks twice, then client .2; network
    // 10.0.1.0/24: client .1 once.
    let mut a1 = queued(&b, &c, "10.0.0.1");
    let mut a2 = queued(&b, &c, "10.0.0.1");
    let mut b1 = queued(&b, &c, "10.0.0.2");
    let mut c1 = queued(&b, &c, "10.0.1.1");
    assert_eq!(b.load(), (1, 4));
    drop(held);
    // First network's first client, then the other network, then the first
    // network's second client, then the first client's second request.
    let mut order = Vec::new();
    for _ in 0..4 {
        let mut got = None;
        for (name, f) in [
            ("a1", &mut a1),
            ("a2", &mut a2),
            ("b1", &mut b1),
            ("c1", &mut c1),
        ] {
            if let Some(Ok(slot)) = poll_once(f) {
                assert!(got.is_none(), "two slots at once with one slot");
                got = Some((name, slot));
            }
        }
        let (name, slot) = got.expect("the released slot was granted");
        order.push(name);
        // Replace the finished future with one that never completes again.
        let done: Acquire<'_> = Box::pin(std::future::pending());
        match name {
            "a1" => a1 = done,
            "a2" => a2 = done,
            "b1" => b1 = done,
            _ => c1 = done,
        }
        drop(slot);
    }
    assert_eq!(order, ["a1", "c1", "b1", "a2"]);
    assert_eq!(b.load(), (0, 0));
}

#[tokio::test]
async fn a_client_past_its_queue_is_refused_at_once_but_loopback_and_peers_are_not() {
    let b = Budget::new(1);
    let c = BudgetSection {
        queue_per_client: 2,
        ..cfg()
    };
    let _held = b.acquire(ip("10.0.0.9"), false, &c).await.unwrap();
    let _w1 = queued(&b, &c, "10.0.0.1");
    let _w2 = queued(&b, &c, "10.0.0.1");
    let third = b.acquire(ip("10.0.0.1"), false, &c).await;
    assert_eq!(third.err(), Some(Refused::ClientQueueFull));
    // Another client still queues; so does loopback past the per-client count, and
    // a cluster peer that carries others' requests.
    let _other = queued(&b, &c, "10.0.0.2");
    let _l: Vec<_> = (0..4).map(|_| queued(&b, &c, "127.0.0.1")).collect();
    let mut peer: Vec<Acquire<'_>> = Vec::new();
    for _ in 0..3 {
        let mut f: Acquire<'_> = Box::pin(tokio::task::unconstrained(b.acquire(
            ip("10.0.0.1"),
            true,
            &c,
        )));
        assert!(poll_once(&mut f).is_none(), "a peer queues past the cap");
        peer.push(f);
    }
    assert_eq!(b.load(), (1, 10));
}

#[tokio::test]
async fn the_whole_queue_is_bounded() {
    let b = Budget::new(1);
    let c = BudgetSection {
        queue_max: 3,
        ..cfg()
    };
    let _held = b.acquire(ip("10.0.0.9"), false, &c).await.unwrap();
    let _w: Vec<_> = ["10.0.0.1", "10.0.1.1", "10.0.2.1"]
        .iter()
        .map(|a| queued(&b, &c, a))
        .collect();
    let r = b.acquire(ip("10.0.3.1"), false, &c).await;
    assert_eq!(r.err(), Some(Refused::QueueFull));
    let mut text = String::new();
    write_metrics(&mut text, &[("everyone", b.snapshot())]);
    assert!(
        text.contains("quire_budget_refused_total{reason=\"queue_full\",class=\"everyone\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("quire_budget_waiting{class=\"everyone\"} 3"),
        "{text}"
    );
}

#[tokio::test]
async fn a_request_that_waits_past_the_deadline_is_refused_and_leaves_the_queue() {
    let b = Budget::new(1);
    let c = BudgetSection {
        queue_timeout: Secs(Duration::from_millis(50)),
        ..cfg()
    };
    let held = b.acquire(ip("10.0.0.9"), false, &c).await.unwrap();
    let r = b.acquire(ip("10.0.0.1"), false, &c).await;
    assert_eq!(r.err(), Some(Refused::Deadline));
    assert_eq!(b.load(), (1, 0));
    drop(held);
    assert_eq!(b.load(), (0, 0));
}

#[tokio::test]
async fn a_request_that_leaves_while_waiting_takes_no_slot() {
    let b = Budget::new(1);
    let c = cfg();
    let held = b.acquire(ip("10.0.0.9"), false, &c).await.unwrap();
    let gone = queued(&b, &c, "10.0.0.1");
    let mut next = queued(&b, &c, "10.0.0.2");
    drop(gone);
    assert_eq!(b.load(), (1, 1));
    drop(held);
    let slot = poll_once(&mut next).expect("granted").expect("a slot");
    assert_eq!(b.load(), (1, 0));
    drop(slot);
    assert_eq!(b.load(), (0, 0));
}

#[tokio::test]
async fn a_slot_granted_to_a_request_as_it_leaves_goes_on_to_the_next() {
    let b = Budget::new(1);
    let c = cfg();
    let held = b.acquire(ip("10.0.0.9"), false, &c).await.unwrap();
    let granted_then_gone = queued(&b, &c, "10.0.0.1");
    let mut next = queued(&b, &c, "10.0.1.1");
    // The release grants the first waiter; it leaves before it ever sees it.
    drop(held);
    assert_eq!(b.load(), (1, 1));
    drop(granted_then_gone);
    let slot = poll_once(&mut next).expect("granted").expect("a slot");
    drop(slot);
    assert_eq!(b.load(), (0, 0));
}

#[tokio::test]
async fn a_resize_grants_the_new_slots_to_waiters() {
    let b = Budget::new(1);
    let c = cfg();
    let _held = b.acquire(ip("10.0.0.9"), false, &c).await.unwrap();
    let mut w = queued(&b, &c, "10.0.0.1");
    b.resize(2);
    assert!(matches!(poll_once(&mut w), Some(Ok(_))));
}

/// Takes the one slot whoever of `futs` was granted it, by name.
fn granted<'a>(futs: &mut [(&'static str, Acquire<'a>)]) -> (&'static str, Slot) {
    let mut got = None;
    for (name, f) in futs.iter_mut() {
        if let Some(Ok(slot)) = poll_once(f) {
            assert!(got.is_none(), "two slots at once with one slot");
            got = Some((*name, slot));
            *f = Box::pin(std::future::pending());
        }
    }
    got.expect("the released slot was granted")
}

#[tokio::test]
async fn a_network_that_asks_now_and_then_goes_before_a_crowd_that_keeps_asking() {
    let idle = Duration::from_millis(200);
    let b = Budget::with_sparse_idle(1, idle);
    let c = cfg();
    let held = b.acquire(ip("10.8.8.1"), false, &c).await.unwrap();
    // Three crowd networks with two requests each, and the reader's one.
    let mut futs: Vec<(&'static str, Acquire<'_>)> = Vec::new();
    for (name, addr) in [
        ("a1", "10.0.1.1"),
        ("b1", "10.0.2.1"),
        ("c1", "10.0.3.1"),
        ("r1", "10.9.9.1"),
        ("a2", "10.0.1.1"),
        ("b2", "10.0.2.1"),
        ("c2", "10.0.3.1"),
    ] {
        futs.push((name, queued(&b, &c, addr)));
    }
    drop(held);
    // All new: each network's first in order; then the old round begins.
    let mut order = Vec::new();
    let mut slot = None;
    for _ in 0..6 {
        drop(slot.take());
        let (name, s) = granted(&mut futs);
        order.push(name);
        slot = Some(s);
    }
    assert_eq!(order, ["a1", "b1", "c1", "r1", "a2", "b2"]);
    // The reader's network is still in the old round (behind c2) when, quiet for
    // longer than `idle`, it asks again: it is new, and goes before c2.
    std::thread::sleep(idle + Duration::from_millis(50));
    futs.push(("r2", queued(&b, &c, "10.9.9.1")));
    drop(slot.take());
    let (name, s) = granted(&mut futs);
    assert_eq!(name, "r2", "after {order:?}");
    drop(s);
    let (name, s) = granted(&mut futs);
    assert_eq!(name, "c2");
    drop(s);
    drop(futs);
    assert_eq!(b.load(), (0, 0));
    assert_eq!(b.nets_held_and_known().0, 0);
}

#[tokio::test]
async fn a_network_that_asks_again_at_once_is_not_new_again() {
    let b = Budget::with_sparse_idle(1, Duration::from_secs(60));
    let c = cfg();
    let held = b.acquire(ip("10.9.9.1"), false, &c).await.unwrap();
    let mut futs: Vec<(&'static str, Acquire<'_>)> = vec![
        ("a1", queued(&b, &c, "10.0.1.1")),
        ("b1", queued(&b, &c, "10.0.2.1")),
    ];
    drop(held);
    // a1 is served; while it holds the slot its network asks again, and a new
    // network asks for the first time.
    let (name, slot) = granted(&mut futs);
    assert_eq!(name, "a1");
    futs.push(("a2", queued(&b, &c, "10.0.1.1")));
    futs.push(("n1", queued(&b, &c, "10.0.4.1")));
    drop(slot);
    let mut order = Vec::new();
    for _ in 0..3 {
        let (name, slot) = granted(&mut futs);
        order.push(name);
        drop(slot);
    }
    // The new networks in order (b1's had not had its turn yet), then the old:
    // a2, asked while its network held a slot, waits behind the new.
    assert_eq!(order, ["b1", "n1", "a2"]);
}

#[tokio::test]
async fn networks_that_leave_are_not_kept_without_bound() {
    let b = Budget::new(1);
    let c = cfg();
    let _held = b.acquire(ip("10.9.9.1"), false, &c).await.unwrap();
    // Requests from 40,000 networks (IPv6 /48s) that each wait, then leave.
    for i in 0..40_000u32 {
        let addr = format!("2001:db8:{:x}:{:x}::1", i >> 16, i & 0xffff);
        drop(queued(&b, &c, &addr));
    }
    let (_, known) = b.nets_held_and_known();
    assert!(known <= 2 * NETS_KEPT_MIN + 1, "{known} networks kept");
    assert_eq!(b.load(), (1, 0));
}

/// Random acquires, releases and departures against the budget, checked after
/// every step: never more slots held than there are, every held slot counted,
/// nothing waits while a slot is free, and all is given back at the end.
#[tokio::test]
async fn random_interleavings_never_lose_or_invent_a_slot() {
    for seed in 1..=20u64 {
        let mut rng = seed;
        let mut next = move |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        };
        let limit = 1 + next(3);
        // Networks idle for no time at all are new again: both lists are used.
        let b = Budget::with_sparse_idle(limit, Duration::from_millis(next(2) as u64));
        let c = BudgetSection {
            queue_per_client: 3,
            queue_max: 12,
            ..cfg()
        };
        let clients = ["10.0.0.1", "10.0.0.2", "10.0.1.1", "10.0.2.1", "127.0.0.1"];
        let mut waiting: Vec<Acquire<'_>> = Vec::new();
        let mut held: Vec<Slot> = Vec::new();
        for step in 0..400 {
            match next(5) {
                0 => {
                    let mut f = acquire(&b, &c, clients[next(5)]);
                    match poll_once(&mut f) {
                        Some(Ok(s)) => held.push(s),
                        Some(Err(_)) => {}
                        None => waiting.push(f),
                    }
                }
                1 if !held.is_empty() => drop(held.swap_remove(next(held.len()))),
                2 if !waiting.is_empty() => drop(waiting.swap_remove(next(waiting.len()))),
                // A release whose grant may reach a request that leaves before it
                // looks.
                3 if !held.is_empty() && !waiting.is_empty() => {
                    drop(held.swap_remove(next(held.len())));
                    drop(waiting.swap_remove(next(waiting.len())));
                }
                _ => {}
            }
            // Whoever was granted takes its slot.
            let mut i = 0;
            while i < waiting.len() {
                match poll_once(&mut waiting[i]) {
                    Some(Ok(s)) => {
                        held.push(s);
                        drop(waiting.swap_remove(i));
                    }
                    Some(Err(e)) => panic!("seed {seed} step {step}: refused while waiting: {e:?}"),
                    None => i += 1,
                }
            }
            let (in_use, queued) = b.load();
            assert_eq!(in_use, held.len(), "seed {seed} step {step}");
            assert_eq!(
                b.nets_held_and_known().0,
                in_use,
                "seed {seed} step {step}: every slot charged to its network"
            );
            assert!(in_use <= limit, "seed {seed} step {step}");
            assert_eq!(queued, waiting.len(), "seed {seed} step {step}");
            assert!(
                queued == 0 || in_use == limit,
                "seed {seed} step {step}: idle slot while others wait"
            );
        }
        waiting.clear();
        held.clear();
        assert_eq!(b.load(), (0, 0), "seed {seed}");
        assert_eq!(b.nets_held_and_known().0, 0, "seed {seed}");
    }
}
