//! The operator's purges: the `PURGE` method and `POST /_quire/purge`, parsed
//! strictly, then applied here — and, in a cluster, appended to the shared log
//! first (see [`crate::ops::bus`]).
//!
//! Key decisions:
//! - Request bodies are bounded ([`PURGE_BODY_BYTES_MAX`]) and parsed strictly: an
//!   unknown field or a URL that does not normalise is a 400 naming the problem, and
//!   nothing is purged.
//! - **In a cluster, nothing is purged unless the log took the entry**: a bus that
//!   is down answers 503 with the reason. `wait=all` (query or JSON; for `PURGE`,
//!   whose query belongs to the URL it names, `Quire-Wait: all`) holds the
//!   answer until every live node applied the entry, for at most
//!   [`WAIT_ALL_TIMEOUT`], and lists each node's status.
//! - **Refill**: a hard purge may ask (`"refill": true`, `Quire-Refill: 1`, or
//!   `storage.refill_after_purge` by default) that the URLs it removes which readers
//!   hit lately be fetched again at once, in the background
//!   ([`crate::ops::purge::hot_urls`], at most [`REFILL_PER_PURGE_MAX`], hottest
//!   first), through the prefill queue: one at a time, behind readers' fills, each
//!   a fill that starts after the purge was logged, so it stores the new version.
//!   Only on the node that took the purge; in a cluster the others fill on demand.
//!   A soft purge keeps its entries (they revalidate on next use): `refill` with
//!   `soft` is a 400.

use std::sync::Arc;
use std::time::Duration;

use http::{header, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use quire_http::key;
use serde::Deserialize;

use crate::cache::object;
use crate::metrics::Outcome;
use crate::ops::answer::{authorise, error, json};
use crate::ops::bus::{BusError, Invalidation, NodeAck};
use crate::ops::purge::Target;
use crate::request::body::Body;
use crate::state::Ctx;

/// URLs waiting to be fetched again after purges, at most (more are dropped and
/// counted as prefills are: a reader's request fills them).
pub const REFILL_QUEUE_MAX: usize = 4096;

/// Purged URLs one purge queues for refilling, at most (the hottest first).
pub const REFILL_PER_PURGE_MAX: usize = 1000;
use crate::upstream::origin::OutBody;

/// Largest `POST /_quire/purge` body.
pub const PURGE_BODY_BYTES_MAX: usize = 1 << 20;

/// Longest a `wait=all` purge waits for the other nodes.
pub const WAIT_ALL_TIMEOUT: Duration = Duration::from_secs(5);

/// `POST /_quire/purge` body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct PurgeRequest {
    urls: Vec<String>,
    prefixes: Vec<String>,
    tags: Vec<String>,
    soft: bool,
    /// Fetch the purged URLs that were hot again (default `storage.refill_after_purge`).
    refill: Option<bool>,
    /// `"all"`: answer once every node applied it.
    wait: Option<String>,
}

/// What a purge did: entries touched here, and the cluster's part.
struct Applied {
    purged: u64,
    /// URLs queued to be fetched again.
    refilled: usize,
    cluster: Option<serde_json::Value>,
}

/// `PURGE <url>`: hard-purges the request's URL (soft with `Quire-Soft-Purge: 1`;
/// in a cluster, waiting for every node with `Quire-Wait: all`).
pub async fn method(ctx: &Arc<Ctx>, req: Request<OutBody>) -> (Response<Body>, Outcome) {
    if let Some(denied) = authorise(ctx, &req) {
        return (denied, Outcome::Admin);
    }
    // Only the head is read; the body (a PURGE has none) is not kept across awaits.
    let (req, _) = req.into_parts();
    let normalized = key::normalize(
        "http",
        req.headers.get(header::HOST),
        &req.uri,
        &ctx.peek().keys,
    );
    let url = match normalized {
        Ok(u) => u,
        Err(e) => {
            return (
                error(StatusCode::BAD_REQUEST, &e.to_string()),
                Outcome::Admin,
            )
        }
    };
    let soft = req
        .headers
        .get("quire-soft-purge")
        .is_some_and(|v| v.as_bytes() == b"1");
    // Its query is part of the URL it names: the wait is asked in a field.
    let wait_all = req
        .headers
        .get("quire-wait")
        .is_some_and(|v| v.as_bytes() == b"all");
    let refill = match req.headers.get("quire-refill").map(|v| v.as_bytes()) {
        None => ctx.policy().cfg.storage.refill_after_purge && !soft,
        Some(b"1") if soft => return (refill_with_soft(), Outcome::Admin),
        Some(b"1") => true,
        Some(b"0") => false,
        Some(_) => {
            return (
                error(StatusCode::BAD_REQUEST, "Quire-Refill must be 1 or 0"),
                Outcome::Admin,
            )
        }
    };
    let inv = Invalidation {
        targets: vec![Target::Url(url.as_str().to_owned())],
        soft,
        implicit: false,
    };
    let resp = match apply(ctx, inv, wait_all, refill).await {
        Ok(a) => json(
            StatusCode::OK,
            &with_cluster(
                serde_json::json!({
                    "purged": a.purged,
                    "soft": soft,
                    "url": url.as_str(),
                    "refill": a.refilled,
                }),
                a.cluster,
            ),
        ),
        Err(why) => bus_refused(&why),
    };
    (resp, Outcome::Admin)
}

/// `POST /_quire/purge` with a JSON body of `urls`, `prefixes`, `tags`, `soft`,
/// `wait`.
pub async fn post(ctx: &Arc<Ctx>, req: Request<OutBody>) -> Response<Body> {
    let query = req.uri().query().map(str::to_owned);
    let body = match Limited::new(req.into_body(), PURGE_BODY_BYTES_MAX)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "purge body over 1 MiB or unreadable",
            )
        }
    };
    let pr: PurgeRequest = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("invalid purge request: {e}"),
            )
        }
    };
    let (targets, dirs) = match targets(ctx, &pr) {
        Ok(t) => t,
        Err(why) => return error(StatusCode::BAD_REQUEST, &why.to_string()),
    };
    let wait_all = wait_all_asked(query.as_deref(), pr.wait.as_deref());
    let refill = match pr.refill {
        Some(true) if pr.soft => return refill_with_soft(),
        Some(r) => r,
        None => ctx.policy().cfg.storage.refill_after_purge && !pr.soft,
    };
    let inv = Invalidation {
        targets,
        soft: pr.soft,
        implicit: false,
    };
    match apply(ctx, inv, wait_all, refill).await {
        Ok(a) => json(
            StatusCode::OK,
            &with_cluster(
                serde_json::json!({
                    "purged": a.purged,
                    "soft": pr.soft,
                    "urls": pr.urls.len(),
                    "directories": dirs,
                    "tags": pr.tags.len(),
                    "refill": a.refilled,
                }),
                a.cluster,
            ),
        ),
        Err(why) => bus_refused(&why),
    }
}

/// The targets a purge request names, and its directories; a 400 for the first
/// that does not parse.
fn targets(ctx: &Ctx, pr: &PurgeRequest) -> Result<(Vec<Target>, Vec<String>), PurgeRequestError> {
    let mut targets = Vec::new();
    for u in &pr.urls {
        match key::normalize_absolute(u, &ctx.peek().keys) {
            Ok(n) => targets.push(Target::Url(n.as_str().to_owned())),
            Err(why) => {
                return Err(PurgeRequestError::Url {
                    url: u.clone(),
                    why,
                })
            }
        }
    }
    let mut dirs = Vec::new();
    for p in &pr.prefixes {
        let dir = key::normalize_absolute(p, &ctx.peek().keys)
            .ok()
            .and_then(|n| object::prefix_directory(n.as_str()));
        let Some(d) = dir else {
            return Err(PurgeRequestError::Prefix { prefix: p.clone() });
        };
        dirs.push(d.clone());
        targets.push(Target::Directory(d));
    }
    for t in &pr.tags {
        if t.is_empty() || t.len() > 256 {
            return Err(PurgeRequestError::Tag);
        }
        targets.push(Target::Key(t.clone()));
    }
    if let Some(w) = pr.wait.as_deref().filter(|w| *w != "all" && *w != "log") {
        return Err(PurgeRequestError::Wait { wait: w.to_owned() });
    }
    Ok((targets, dirs))
}

/// Why a `POST /_quire/purge` body names nothing that can be purged: answered 400,
/// and nothing is purged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PurgeRequestError {
    /// A URL of `urls` cannot be keyed.
    #[error("url {url:?}: {why}")]
    Url { url: String, why: key::KeyError },
    /// A URL of `prefixes` names no directory.
    #[error("prefix {prefix:?}: not an absolute http(s) URL")]
    Prefix { prefix: String },
    /// A tag is empty or longer than 256 bytes.
    #[error("tags must be 1 to 256 bytes")]
    Tag,
    /// `wait` is neither `all` nor `log`.
    #[error("wait {wait:?}: give \"all\" or \"log\"")]
    Wait { wait: String },
}

/// Whether `wait=all` was asked for, in the query or the JSON body.
fn wait_all_asked(query: Option<&str>, body: Option<&str>) -> bool {
    body == Some("all") || query.is_some_and(|q| q.split('&').any(|kv| kv == "wait=all"))
}

/// The 503 of a purge the cluster's log did not take: nothing was purged anywhere.
fn bus_refused(why: &BusError) -> Response<Body> {
    let msg = format!("cluster bus unavailable, nothing was purged: {why}");
    error(StatusCode::SERVICE_UNAVAILABLE, &msg)
}

/// The 400 of a purge that asks to refill what it only marks stale.
fn refill_with_soft() -> Response<Body> {
    error(
        StatusCode::BAD_REQUEST,
        "refill applies to hard purges: a soft purge keeps its entries, which revalidate on next use",
    )
}

/// Appends `inv` to the cluster's log (when there is one), applies it here, and
/// with `wait_all` waits for the other nodes; with `refill`, queues the purged URLs
/// that were hot to be fetched again. `Err` says why the bus refused the entry:
/// nothing was purged (a 503).
async fn apply(
    ctx: &Arc<Ctx>,
    inv: Invalidation,
    wait_all: bool,
    refill: bool,
) -> Result<Applied, BusError> {
    let receipt = match ctx.bus() {
        None => None,
        Some(b) => match b.publish(&inv).await {
            Ok(r) => Some((b.clone(), r)),
            Err(why) => return Err(why),
        },
    };
    let ctx2 = ctx.clone();
    let traced = crate::trace::current();
    let (purged, hot) = tokio::task::spawn_blocking(move || {
        // Read before the purge removes them; the refill's fills start after it.
        let hot = match refill {
            true => crate::ops::purge::hot_urls(&ctx2, &inv.targets, REFILL_PER_PURGE_MAX),
            false => Vec::new(),
        };
        let purged = crate::trace::sync_under(traced, || crate::ops::purge::apply(&ctx2, &inv));
        (purged, hot)
    })
    .await
    .unwrap_or_default();
    // The server's queue (none without a server: nothing is refilled).
    let refilled = match ctx.refills() {
        Some(queue) => hot.into_iter().filter(|u| queue.queue(u.clone())).count(),
        None => 0,
    };
    let cluster = match receipt {
        None => None,
        Some((b, r)) => {
            let acks = if wait_all {
                Some(b.wait_all(&r, WAIT_ALL_TIMEOUT).await)
            } else {
                None
            };
            Some(cluster_json(&r.id, acks.as_deref()))
        }
    };
    Ok(Applied {
        purged,
        refilled,
        cluster,
    })
}

fn cluster_json(id: &str, acks: Option<&[NodeAck]>) -> serde_json::Value {
    let mut v = serde_json::json!({ "entry": id });
    if let Some(acks) = acks {
        let nodes: serde_json::Map<String, serde_json::Value> = acks
            .iter()
            .map(|a| {
                let s = match (a.applied, a.live) {
                    (true, _) => "applied",
                    (false, true) => "pending",
                    (false, false) => "unreachable",
                };
                (a.node.clone(), serde_json::Value::from(s))
            })
            .collect();
        v["all_applied"] = serde_json::Value::from(acks.iter().all(|a| a.applied));
        v["nodes"] = serde_json::Value::Object(nodes);
    }
    v
}

fn with_cluster(mut v: serde_json::Value, cluster: Option<serde_json::Value>) -> serde_json::Value {
    if let Some(c) = cluster {
        v["cluster"] = c;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_all_is_asked_in_the_query_or_the_body() {
        assert!(wait_all_asked(Some("wait=all"), None));
        assert!(wait_all_asked(Some("a=1&wait=all"), None));
        assert!(wait_all_asked(None, Some("all")));
        assert!(!wait_all_asked(Some("wait=allx"), None));
        assert!(!wait_all_asked(None, Some("log")));
        assert!(!wait_all_asked(None, None));
    }

    #[test]
    fn the_cluster_part_lists_each_node() {
        let acks = [
            NodeAck {
                node: "a".into(),
                applied: true,
                live: true,
            },
            NodeAck {
                node: "b".into(),
                applied: false,
                live: true,
            },
            NodeAck {
                node: "c".into(),
                applied: false,
                live: false,
            },
        ];
        let v = cluster_json("1-0", Some(&acks));
        assert_eq!(v["nodes"]["a"], "applied");
        assert_eq!(v["nodes"]["b"], "pending");
        assert_eq!(v["nodes"]["c"], "unreachable", "named, never counted");
        assert_eq!(v["all_applied"], false);
        assert!(cluster_json("1-0", None).get("nodes").is_none());
    }
}
