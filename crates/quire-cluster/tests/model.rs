//! An invalidation is never lost across the cluster: random interleavings of
//! reads, edits with purges (soft or hard, waiting for all or not, on any node),
//! and a node stopped and restarted, checked against a model of what each node may
//! still serve.
//!
//! The model, per node and URL, is a floor: the oldest version a request answered
//! there may return.
//! - A purge answered by a node raises that node's floor at once (it applied the
//!   purge before it answered).
//! - With `wait=all` and every live node applied, it raises every live node's
//!   floor at once.
//! - Otherwise it raises the other nodes' floors after a propagation bound
//!   ([`PROPAGATION`]; measured p99 is a few milliseconds).
//! - A restarted node applies what it missed before it listens, so its floor is
//!   every purge made until then.
//!
//! An edit without a purge raises no floor: the old copy may be served, as it
//! would be by any cache. Seeds: `QUIRE_MODEL_SEED` runs one; by default a few
//! fixed ones.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const URLS: usize = 5;
const STEPS: usize = 300;
const PROPAGATION: Duration = Duration::from_secs(1);

/// What each node may still serve.
struct Model {
    /// The origin's version of each URL.
    version: [u32; URLS],
    /// Per node and URL: the floor, and a floor due at an instant.
    floor: [[u32; URLS]; 3],
    due: Vec<(usize, usize, u32, Instant)>,
    /// The highest version purged per URL (a restarted node's floor).
    purged: [u32; URLS],
}

impl Model {
    fn floor_now(&mut self, node: usize, u: usize) -> u32 {
        let now = Instant::now();
        for &(n, url, v, at) in &self.due {
            if n == node && url == u && at <= now {
                self.floor[n][url] = self.floor[n][url].max(v);
            }
        }
        self.floor[node][u]
    }
}

fn path(u: usize) -> String {
    format!("/m/{u}")
}

fn version_of(body: &[u8], u: usize) -> u32 {
    let text = String::from_utf8_lossy(body);
    let prefix = format!("{} version ", path(u));
    text.strip_prefix(&prefix)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unexpected body {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_after_a_purge_sees_the_old_version_on_any_node() {
    let seeds: Vec<u64> = match std::env::var("QUIRE_MODEL_SEED") {
        Ok(s) => vec![s.parse().expect("QUIRE_MODEL_SEED is a number")],
        Err(_) => vec![1, 2, 3, 4, 5],
    };
    for seed in seeds {
        let Some(t) = three(false).await else { return };
        run(t, seed).await;
    }
}

async fn run(mut t: Three, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut m = Model {
        version: [1; URLS],
        floor: [[0; URLS]; 3],
        due: Vec::new(),
        purged: [0; URLS],
    };
    for u in 0..URLS {
        versioned(&t.origin, &path(u), 1);
        // Every node holds every URL: a purge that does not reach a node shows.
        warm(&t, &path(u)).await;
    }
    let mut stopped: Option<(u16, std::path::PathBuf)> = None;
    for step in 0..STEPS {
        let live = if stopped.is_some() { 2 } else { 3 };
        match rng.random_range(0..12) {
            0..=6 => {
                read(
                    &t,
                    &mut m,
                    rng.random_range(0..live),
                    rng.random_range(0..URLS),
                    seed,
                    step,
                )
                .await
            }
            7..=8 => {
                let (node, u) = (rng.random_range(0..live), rng.random_range(0..URLS));
                let (soft, wait) = (rng.random_bool(0.5), rng.random_bool(0.5));
                edit_and_purge(&t, &mut m, node, u, soft, wait, live).await;
            }
            9 => {
                // An edit nobody purges: the old copy may stay.
                let u = rng.random_range(0..URLS);
                m.version[u] += 1;
                versioned(&t.origin, &path(u), m.version[u]);
            }
            _ => match stopped.take() {
                None => stopped = Some(stop_last(&mut t).await),
                Some(s) => {
                    t.nodes.push(restart_c(&t, s).await);
                    m.floor[2] = m.purged;
                    m.due.retain(|d| d.0 != 2);
                }
            },
        }
    }
}

async fn read(t: &Three, m: &mut Model, node: usize, u: usize, seed: u64, step: usize) {
    let floor = m.floor_now(node, u);
    let (status, body, cs) = get(&t.nodes[node], &path(u)).await;
    assert_eq!(status, 200, "seed {seed} step {step}");
    let got = version_of(&body, u);
    assert!(
        got >= floor,
        "seed {seed} step {step}: node {node} served {} version {got} after a purge of version < {floor} ({cs})",
        path(u)
    );
}

async fn edit_and_purge(
    t: &Three,
    m: &mut Model,
    node: usize,
    u: usize,
    soft: bool,
    wait: bool,
    live: usize,
) {
    m.version[u] += 1;
    let v = m.version[u];
    versioned(&t.origin, &path(u), v);
    let body = format!(
        r#"{{"urls":["http://127.0.0.1{}"],"soft":{soft}{}}}"#,
        path(u),
        if wait { r#","wait":"all""# } else { "" }
    );
    let (status, answer) = purge(&t.nodes[node], "", &body).await;
    assert_eq!(status, 200, "{answer}");
    m.purged[u] = v;
    m.floor[node][u] = v;
    let all = wait && answer["cluster"]["all_applied"] == true;
    for other in 0..3 {
        if other == node {
            continue;
        }
        if all && other < live {
            m.floor[other][u] = v;
        } else {
            m.due.push((other, u, v, Instant::now() + PROPAGATION));
        }
    }
}
